"""Generated tests: up to date, deterministic, safe to regenerate, and failing where they must."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ledger_fixture import LEDGER_GENERATED, LEDGER_SPEC

from ledgercheck.codegen.coverage import HOOK, MODULE_PREFIX
from ledgercheck.codegen.render import MARKER, GenerationError, drift, generate, write_tests
from ledgercheck.model.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
GENERATED = LEDGER_GENERATED
BREAKER = ROOT / "spec" / "examples" / "breaker.toml"


def run(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )


@pytest.fixture(scope="module")
def bundled():
    return generate(None, str(GENERATED))


@pytest.mark.slow
def test_committed_generated_tests_are_what_the_spec_produces(bundled):
    out_dir, files = bundled
    assert files, "the bundled spec has counterexamples, so there are generated tests"
    assert drift(out_dir, files) == [], "run `ledgercheck gen`: generated_tests/ is stale"


@pytest.mark.slow
def test_one_module_per_violated_property_with_a_header(bundled):
    """One module per property with a counterexample, and one per event of the reference
    variant for its coverage tests, and one for `[on_state_change]` (tests/test_coverage_tests.py)."""
    _, files = bundled
    spec = load_spec().variant("as_written")
    expected = {f"test_{name}.py" for name, p in spec.properties.items() if p.expect.get("as_written") == "violated"}
    expected |= {f"{MODULE_PREFIX}{event}.py" for event in [*spec.events, HOOK]}  # the hook has an `if`
    assert set(files) == expected
    for name, text in files.items():
        assert text.startswith(MARKER)
        assert re.search(r"^# spec meaning: [0-9a-f]{64}$", text, re.M)
        assert re.search(r"^SPEC_PARTS = \{$", text, re.M), "per-part digests, to say what changed"
        assert "# template version: " in text
        assert "do not edit" in text
        assert not re.search(r"\b20\d\d-\d\d-\d\d", text), "no timestamps"
        names = re.findall(r"^def (test_\w+)\(", text, re.M)
        assert names and len(names) == len(set(names))
        if name.startswith(MODULE_PREFIX):
            event = name.removeprefix(MODULE_PREFIX).removesuffix(".py")
            assert all(n.startswith(f"test_{event}_") for n in names), names
        else:
            assert all(re.fullmatch(r"test_(controller|ledger)_[0-9a-f]{10}", n) for n in names)
        compile(text, "generated", "exec")


def test_generated_code_passes_ruff():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    result = subprocess.run(
        [ruff, "check", "--isolated", "--line-length", "120", str(GENERATED)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_gen_is_byte_identical_across_hash_seeds(tmp_path):
    outputs = []
    for seed in ("1", "987654"):
        out = tmp_path / f"out{seed}"
        result = run(
            "-m", "ledgercheck.model.cli", "gen", str(BREAKER), "--out", str(out), env={"PYTHONHASHSEED": seed}
        )
        assert result.returncode == 0, result.stderr
        outputs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert outputs[0] and outputs[0] == outputs[1]


def copy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "spec").mkdir(parents=True)
    shutil.copy(LEDGER_SPEC, project / "spec" / "fleet_health.toml")
    shutil.copytree(GENERATED, project / "generated_tests")
    return project


@pytest.mark.slow
def test_changing_one_update_line_is_drift(tmp_path):
    project = copy_project(tmp_path)
    spec = project / "spec" / "fleet_health.toml"
    text = spec.read_text()
    line = "consecutive_probe_failures = unhealthy_threshold\n"
    assert text.count(line) == 1
    spec.write_text(text.replace(line, "consecutive_probe_failures = unhealthy_threshold - 1\n"))
    result = run("-m", "ledgercheck.model.cli", "gen", str(spec), "--check")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "is not what the spec produces now: drift from a change of behaviour" in result.stdout
    assert "---" in result.stdout and "+++" in result.stdout  # a diff, short
    assert (project / "generated_tests").exists()


def test_gen_check_changes_nothing_and_passes_when_up_to_date(tmp_path):
    out = tmp_path / "gen"
    assert run("-m", "ledgercheck.model.cli", "gen", str(BREAKER), "--out", str(out)).returncode == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    result = run("-m", "ledgercheck.model.cli", "gen", str(BREAKER), "--out", str(out), "--check")
    assert result.returncode == 0, result.stdout
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_gen_never_touches_hand_written_files(tmp_path):
    out = tmp_path / "gen"
    out.mkdir()
    mine = out / "test_failures_reset_when_closed.py"
    mine.write_text("# my own test\n")
    helper = out / "conftest.py"
    helper.write_text("# hand-written\n")
    result = run("-m", "ledgercheck.model.cli", "gen", str(BREAKER), "--out", str(out))
    assert result.returncode == 2
    assert "was not generated by ledgercheck" in result.stderr
    assert mine.read_text() == "# my own test\n"
    assert helper.read_text() == "# hand-written\n"
    assert sorted(p.name for p in out.iterdir()) == ["conftest.py", "test_failures_reset_when_closed.py"]


def test_gen_deletes_only_its_own_stale_files(tmp_path):
    out = tmp_path / "gen"
    out.mkdir()
    stale = out / "test_old_property.py"
    stale.write_text(MARKER + "old.toml, do not edit.\n")
    mine = out / "test_mine.py"
    mine.write_text("def test_mine():\n    pass\n")
    files = {"test_new.py": MARKER + "x.toml, do not edit.\n"}
    changed = write_tests(out, files)
    assert not stale.exists()
    assert mine.exists()
    assert (out / "test_new.py").read_text() == files["test_new.py"]
    assert sorted(changed) == ["test_new.py", "test_old_property.py"]
    assert not list(tmp_path.glob(".ledgercheck-gen-*")), "the staging directory is removed"


def test_gen_reports_an_unwritable_output(tmp_path):
    with pytest.raises(GenerationError, match="does not exist"):
        write_tests(tmp_path / "missing" / "gen", {"test_x.py": MARKER + "\n"})
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(GenerationError, match="not a directory"):
        write_tests(target, {"test_x.py": MARKER + "\n"})


@pytest.mark.slow
def test_generated_tests_pass_on_fixed_and_all_fail_on_as_written():
    count = sum(p.read_text().count("\ndef test_") for p in GENERATED.glob("test_*.py"))
    passing = run("-m", "pytest", "-q", "-p", "no:cacheprovider", str(GENERATED))
    assert passing.returncode == 0, passing.stdout[-3000:]
    assert f"{count} passed" in passing.stdout
    # The counterexample tests: as_written breaks every one (the coverage tests expect behaviour
    # as_written shares with the reference variant in most branches: tests/test_coverage_tests.py).
    modules = [p for p in sorted(GENERATED.glob("test_*.py")) if not p.name.startswith(MODULE_PREFIX)]
    count = sum(p.read_text().count("\ndef test_") for p in modules)
    paths = [str(p) for p in modules]
    failing = run("-m", "pytest", "-q", "-p", "no:cacheprovider", *paths, "--ledger-variant", "as_written")
    assert failing.returncode == 1
    assert f"{count} failed" in failing.stdout
    spec = load_spec().variant("as_written")
    for module in modules:
        prop = spec.properties[module.stem.removeprefix("test_")]
        tests = re.findall(r"^def (test_\w+)\(", module.read_text(), re.M)
        for name in tests:
            block = failing.stdout.split(f"{module.name}::{name}", 1)
            assert len(block) == 2, f"{name} did not fail"
        assert failing.stdout.count(prop.message) >= len(tests), f"{prop.name}: message missing from failures"


@pytest.mark.slow
def test_two_gen_runs_at_once_leave_one_consistent_output(tmp_path):
    out = tmp_path / "gen"
    command = [sys.executable, "-m", "ledgercheck.model.cli", "gen", str(BREAKER), "--out", str(out)]
    runs = [
        subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    for proc in runs:
        proc.communicate(timeout=300)
        assert proc.returncode == 0
    solo = tmp_path / "solo"
    assert run("-m", "ledgercheck.model.cli", "gen", str(BREAKER), "--out", str(solo)).returncode == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {p.name: p.read_bytes() for p in solo.iterdir()}
    assert not list(tmp_path.glob(".ledgercheck-gen-*")), "no staging directory is left behind"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen", "solo"], "nothing beside them (no lock file)"


def test_gen_locks_the_folder_it_writes_and_leaves_nothing_beside_it(tmp_path):
    """A lock file beside the folder (`.generated_tests.ledgercheck.lock`) was left in the
    user's tree by every `gen`; the folder itself is locked now."""
    import fcntl
    import os

    from ledgercheck.codegen import render

    out = tmp_path / "generated_tests"
    out.mkdir()
    other = os.open(out, os.O_RDONLY)
    try:
        with render._lock(out):
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released
    finally:
        os.close(other)
    assert [p.name for p in tmp_path.iterdir()] == ["generated_tests"]


def test_tests_never_generated_are_named_as_that(tmp_path, capsys):
    """`gen --check` (and `ci`'s drift step) on a folder with no generated tests: the tests
    were never generated, not "drift from a change of behaviour" module by module."""
    from ledgercheck.model.cli import main

    example = Path(__file__).resolve().parents[1] / "spec" / "examples" / "breaker.toml"
    missing = tmp_path / "nowhere"
    assert main(["gen", "--check", str(example), "--out", str(missing)]) == 1
    out = capsys.readouterr().out
    assert f"{missing} does not exist: the tests were never generated; run `ledgercheck gen --out {missing}`" in out
    assert "change of behaviour" not in out
    missing.mkdir()
    (missing / "notes.txt").write_text("hand-written\n", encoding="utf-8")
    assert main(["gen", "--check", str(example), "--out", str(missing)]) == 1
    assert f"{missing} holds no generated tests: the tests were never generated" in capsys.readouterr().out


def test_the_default_folder_is_beside_the_spec_from_anywhere(tmp_path, monkeypatch):
    """A spec outside a `spec/` folder: its tests go beside it whatever the working directory
    (they went to the working directory's, so `ci` run from elsewhere found none)."""
    from ledgercheck.codegen.render import default_out_dir

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert default_out_dir(str(tmp_path / "work" / "limiter.toml")) == tmp_path / "work" / "generated_tests"
    assert default_out_dir(str(tmp_path / "proj" / "spec" / "x.toml")) == tmp_path / "proj" / "generated_tests"


def test_gen_runs_its_checks_on_the_workers_asked_and_writes_the_same_files(tmp_path, capsys):
    """`gen --jobs 1` was refused (`unrecognized arguments`, TCP trial) and gen checked one
    check after the other on every machine; it takes the executor options now."""
    from ledgercheck.model.cli import main

    example = Path(__file__).resolve().parents[1] / "spec" / "examples" / "breaker.toml"
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["gen", str(example), "--out", str(one), "--jobs", "1"]) == 0
    assert main(["gen", str(example), "--out", str(two), "--jobs", "2"]) == 0
    capsys.readouterr()
    assert {p.name: p.read_bytes() for p in one.iterdir()} == {p.name: p.read_bytes() for p in two.iterdir()}
