"""`gen` never absorbs a regression, says what it changes and why, and generated tests go
stale when the spec's meaning changes, not its bytes (codegen.gate, .changes, .meaning).

Every edit is made to a copy of the spec in tmp_path; the generated tests are run on copies,
in a subprocess, the way a user runs them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from caches import own_caches
from ledger_fixture import LEDGER_GENERATED, LEDGER_SPEC

from ledgercheck.codegen.changes import compare
from ledgercheck.codegen.coverage import MODULE_PREFIX
from ledgercheck.codegen.gate import Verdicts, describe
from ledgercheck.codegen.meaning import changed_parts, meaning_of, variant_parts
from ledgercheck.codegen.render import MARKER
from ledgercheck.model.result import Result, Status
from ledgercheck.model.spec import load_spec, load_spec_text
from ledgercheck.model.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
SPEC = LEDGER_SPEC
GENERATED = LEDGER_GENERATED
BREAKER = ROOT / "spec" / "examples" / "breaker.toml"
CLEAN = "tests/impl/fleet_health_clean.py:GenerationFleetHealth"
AS_WRITTEN = "tests/impl/fleet_health_as_written.py:GenerationFleetHealth"

FIX_LINES = "consecutive_reported_failures = 0\nstate_before_partial = None\n"


def in_fixed_patch(old: str, new: str) -> tuple[str, str]:
    """A replacement of `old` by `new` made in `fixed`'s own patch table only: the fix's lines
    occur again in `refit_keeps_streak`'s patch, which repeats them."""
    text = SPEC.read_text(encoding="utf-8")
    start = text.index("[[variants.fixed.patch]]\n")
    section = text[start : text.index("\n[", start + 1) + 1]
    assert section.count(old) == 1, old
    return section, section.replace(old, new)


# One line of the fix deleted: `fixed` then violates restarted_engine_refits_healthy.
REGRESSION = in_fixed_patch(FIX_LINES, "consecutive_reported_failures = 0\n")
# A change of behaviour that keeps every verdict (and changes the traces found).
BEHAVIOUR = (
    "consecutive_probe_failures = unhealthy_threshold\n",
    "consecutive_probe_failures = unhealthy_threshold - 1\n",
)
DOC = ('doc = "Every restart attempt a shard spends', 'doc = "Reworded: every restart attempt a shard spends')
MESSAGE = (
    'message = "a restart attempt was spent on a condemnation',
    'message = "reworded: a restart attempt was spent on a condemnation',
)


def edited(*replacements: tuple[str, str], text: str | None = None) -> str:
    text = SPEC.read_text(encoding="utf-8") if text is None else text
    for old, new in replacements:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def comment_only(text: str | None = None) -> str:
    return edited(
        ("# Policy constants", "# A comment added by a reviewer.\n\n# Policy constants"),
        ("[variants.fixed]\n", "[variants.fixed]  # the seed's fix\n"),
        text=text,
    )


def reformatted(text: str | None = None) -> str:
    """Two tables swapped, keys re-indented, an inline table written as dotted keys, a
    guard and an update spelled differently: nothing a test depends on."""
    text = edited(
        (
            'expect = { as_written = "violated", fixed = "holds", refit_keeps_streak = "holds" }\n\n'
            "[properties.restarted_engine_refits_healthy]",
            'expect.as_written = "violated"\nexpect.fixed = "holds"\nexpect.refit_keeps_streak = "holds"\n\n'
            "[properties.restarted_engine_refits_healthy]",
        ),
        (
            'ignore_when = "state not in SERVING"\nrequires = "state in SERVING"\nexamples',
            '    ignore_when  =  "state   not in SERVING"\n    requires = "(state in SERVING)"\nexamples',
        ),
        (
            "consecutive_reported_failures = consecutive_reported_failures + 1\nif consecutive_reported_failures >=",
            "consecutive_reported_failures = (consecutive_reported_failures+1)\nif consecutive_reported_failures>=",
        ),
        text=text,
    )
    sets = re.search(r"\[sets\]\n(?:.+\n)+\n", text)
    policy = re.search(r"# Policy constants(?:.*\n)+?\n", text)
    assert sets and policy and sets.end() <= policy.start()
    return (
        text[: sets.start()]
        + policy.group(0)
        + text[sets.end() : policy.start()]
        + sets.group(0)
        + text[policy.end() :]
    )


def swapped(text: str, first: str, second: str, end: str) -> str:
    """`text` with the tables that start at `first` and at `second` (up to `end`) swapped."""
    a, b, c = text.index(first), text.index(second), text.index(end)
    return text[:a] + text[b:c] + text[a:b] + text[c:]


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, env=dict(os.environ))


def project(tmp_path: Path, spec_text: str) -> Path:
    """A copy of the spec (as `spec_text`) and of the committed generated tests."""
    root = tmp_path / "project"
    (root / "spec").mkdir(parents=True)
    (root / "spec" / "fleet_health.toml").write_text(spec_text, encoding="utf-8")
    shutil.copytree(GENERATED, root / "generated_tests")
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def counterexample_modules(root: Path) -> list[Path]:
    """The generated modules of counterexample tests: the coverage modules
    (`test_branches_of_*.py`) expect the reference variant's behaviour where no property looks,
    so an implementation of `fixed` fails some of them too (tests/test_coverage_tests.py)."""
    found = sorted((root / "generated_tests").glob("test_*.py"))
    return [p for p in found if not p.name.startswith(MODULE_PREFIX)]


def pytest_on(root: Path, *options: str, counterexamples: bool = False) -> subprocess.CompletedProcess[str]:
    """The generated tests (with `counterexamples`, only those modules) run on `root`."""
    paths = [str(p) for p in counterexample_modules(root)] if counterexamples else [str(root / "generated_tests")]
    return run("-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", *paths, *options)


def count_tests(root: Path, counterexamples: bool = False) -> int:
    paths = counterexample_modules(root) if counterexamples else (root / "generated_tests").glob("test_*.py")
    return sum(p.read_text().count("\ndef test_") for p in paths)


def fixed_violates(root: Path) -> dict[str, int]:
    """Property -> number of its generated tests, for the properties `fixed` is expected to
    violate: the tests take their expectations from the variant where every property holds
    (`refit_keeps_streak`), so the clean implementation (which is `fixed`) fails these."""
    fixed = load_spec().variant("fixed")
    modules = {p.stem.removeprefix("test_"): p for p in counterexample_modules(root)}
    return {
        name: p.read_text().count("\ndef test_")
        for name, p in modules.items()
        if fixed.properties[name].expect["fixed"] == "violated"
    }


def assert_clean_verdict(root: Path, tests: subprocess.CompletedProcess[str]) -> None:
    """The clean implementation passes every generated test but those of the properties
    `fixed` violates, which fail, each with its property's message."""
    broken = fixed_violates(root)
    assert broken, "no generated test tells fixed apart from the variant every property holds in"
    failed, count = sum(broken.values()), count_tests(root, counterexamples=True)
    assert tests.returncode == 1, tests.stdout[-3000:]
    assert f"{failed} failed, {count - failed} passed" in tests.stdout, tests.stdout[-3000:]
    modules = re.findall(r"^FAILED \S*/test_(\w+)\.py::", tests.stdout, flags=re.MULTILINE)
    assert {name: modules.count(name) for name in set(modules)} == broken, tests.stdout[-3000:]
    fixed = load_spec().variant("fixed")
    for name, n in broken.items():
        message = fixed.properties[name].message  # broken (`name: message`), or its trace left (`name (message)`)
        said = tests.stdout.count(f"{name}: {message}") + tests.stdout.count(f"{name} ({message})")
        assert said >= n, tests.stdout[-3000:]


# --- the gate --------------------------------------------------------------------------


@pytest.mark.slow
def test_gen_refuses_a_regression_of_the_fix_and_writes_nothing(tmp_path: Path) -> None:
    """`gen` refuses the regression, and so does `gen --check` after it, answered from the cache
    of results `gen` filled (as a user's second command is): a mismatch read back from the cache
    is refused as a fresh one is. Neither writes or removes a file."""
    root = project(tmp_path, edited(REGRESSION))
    before = snapshot(root)
    spec = str(root / "spec" / "fleet_health.toml")
    env = own_caches(tmp_path / "cache")
    runs = [
        subprocess.run(
            [sys.executable, "-m", "ledgercheck.model.cli", *command],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        for command in (["gen", spec], ["gen", spec, "--check", "--progress"])
    ]
    assert "answered from the cache of results" not in runs[0].stderr
    assert re.search(r"\b(\d+) of \1 checks answered from the cache of results", runs[1].stderr), runs[1].stderr
    assert snapshot(root) == before, "a file was written or removed"
    for proc in runs:
        assert proc.returncode == 1, proc.stdout
        for env_name in ("controller", "ledger"):
            assert re.search(
                rf"fixed / restarted_engine_refits_healthy \({env_name}, 4 shards\): "
                r"violated \(shortest trace: \d+ steps\); the spec expects holds",
                proc.stdout,
            ), proc.stdout
        assert "verdict(s) differ from the spec's expectations" in proc.stdout
        assert "run `ledgercheck gen`" not in proc.stdout  # a mismatch is not drift


def result(variant: str, status: str, expected: str, traces: int = 0, note: str = "") -> Result:
    trace = Trace("s", variant, "ledger", 2, {}, (), 0)
    return Result(
        variant=variant,
        property="p",
        environment="ledger",
        shards=2,
        policy={},
        status=status,
        depth=5,
        traces=[trace] * traces,
        expected=expected,
        note=note,
    )


def test_verdicts_exit_codes_and_descriptions() -> None:
    ok = {("fixed", "p", "ledger"): result("fixed", "holds_to_depth", "holds")}
    assert Verdicts(ok).exit_code == 0
    lost = {("as_written", "p", "ledger"): result("as_written", "holds_to_depth", "violated")}
    assert Verdicts({**ok, **lost}).exit_code == 1
    line = describe(lost["as_written", "p", "ledger"])
    assert "as_written / p (ledger, 2 shards): holds (no violation up to depth 5); the spec expects violated" in line
    unknown = {("fixed", "q", "ledger"): result("fixed", "unknown", "holds", note="the solver gave up at depth 3")}
    assert Verdicts({**lost, **unknown}).exit_code == 3
    assert "unknown (the solver gave up at depth 3)" in describe(unknown["fixed", "q", "ledger"])


# --- meaning ---------------------------------------------------------------------------


def test_meaning_ignores_comments_formatting_and_docs() -> None:
    base = meaning_of(load_spec(SPEC))
    original = SPEC.read_text(encoding="utf-8")
    events = swapped(original, "[events.report_failure]", "[events.report_success]", "[events.record_actor_death]")
    actions = "[environments.controller.actions.probe_"
    actions_swapped = swapped(original, f"{actions}answers]", f"{actions}fails]", f"{actions}finds_process_gone]")
    for text in (comment_only(), reformatted(), edited(DOC, MESSAGE), events, actions_swapped):
        assert text != original
        assert meaning_of(load_spec_text(text)) == base
    behaviour = meaning_of(load_spec_text(edited(BEHAVIOUR)))
    assert behaviour.digest != base.digest
    assert changed_parts(base.parts, behaviour.parts) == ["event record_actor_death"]
    regression = meaning_of(load_spec_text(edited(REGRESSION)))
    assert changed_parts(base.parts, regression.parts) == ["event mark_loaded, variant fixed"]
    no_fix = meaning_of(load_spec_text(edited(in_fixed_patch(FIX_LINES, "pass\n"))))
    assert "event mark_loaded, variant fixed (removed)" in changed_parts(base.parts, no_fix.parts)
    policy = meaning_of(load_spec_text(edited(("default = 5, min = 0", "default = 6, min = 0"))))
    assert changed_parts(base.parts, policy.parts) == ["policy"]


@pytest.mark.slow
def test_comments_and_reformatting_keep_everything_green(tmp_path: Path) -> None:
    """Both edits at once (one `gen --check` run); each alone keeps the meaning (above)."""
    root = project(tmp_path, reformatted(comment_only()))
    check = run("-m", "ledgercheck.model.cli", "gen", str(root / "spec" / "fleet_health.toml"), "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    # the coverage modules name spec text, not line numbers: the comment shifted every line
    assert "branch coverage of refit_keeps_streak: 63/63 reachable branches covered (100 %)" in check.stdout
    count = count_tests(root)
    tests = pytest_on(root)
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert f"{count} passed" in tests.stdout and "StaleSpecWarning" not in tests.stdout
    clean = pytest_on(root, "--ledger-impl", CLEAN, counterexamples=True)
    assert_clean_verdict(root, clean)
    assert "StaleSpecWarning" not in clean.stdout


@pytest.mark.slow
def test_a_doc_edit_is_text_only_drift_and_no_test_fails(tmp_path: Path) -> None:
    root = project(tmp_path, edited(DOC, MESSAGE))
    check = run("-m", "ledgercheck.model.cli", "gen", str(root / "spec" / "fleet_health.toml"), "--check")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "text only (docs, messages, figures)" in check.stdout
    assert "change of behaviour" not in check.stdout
    assert (
        "rewritten test_restart_budget_counts_genuine_failures.py: only text changed (docs, messages, figures)"
        in check.stdout
    )
    assert "+Reworded: every restart attempt" in check.stdout  # the short diff
    tests = pytest_on(root)
    assert tests.returncode == 0, tests.stdout[-3000:]


# --- a change of behaviour ----------------------------------------------------------------


@pytest.fixture(scope="module")
def behaviour_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return project(tmp_path_factory.mktemp("behaviour"), edited(BEHAVIOUR))


@pytest.mark.slow
def test_a_behaviour_edit_that_keeps_the_verdicts_is_behaviour_drift(behaviour_project: Path) -> None:
    check = run("-m", "ledgercheck.model.cli", "gen", str(behaviour_project / "spec" / "fleet_health.toml"), "--check")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "drift from a change of behaviour" in check.stdout
    assert "the spec's meaning changed (event record_actor_death)" in check.stdout
    assert re.search(r"rewritten test_\w+\.py: \d+ test\(s\) added", check.stdout), check.stdout
    assert "---" in check.stdout and "+++" in check.stdout


@pytest.mark.slow
def test_stale_meaning_fails_against_the_model_naming_what_changed(behaviour_project: Path) -> None:
    tests = pytest_on(behaviour_project)
    count = count_tests(behaviour_project)
    assert tests.returncode == 1
    assert f"{count} failed" in tests.stdout
    stale = "event record_actor_death changed since these tests were generated; run `ledgercheck gen`"
    assert tests.stdout.count(stale) >= count, tests.stdout[-3000:]


@pytest.mark.slow
def test_stale_meaning_does_not_hide_the_implementations_verdict(behaviour_project: Path) -> None:
    count = count_tests(behaviour_project, counterexamples=True)
    clean = pytest_on(behaviour_project, "--ledger-impl", CLEAN, counterexamples=True)
    assert_clean_verdict(behaviour_project, clean)
    assert "StaleSpecWarning: fleet_health.toml: event record_actor_death changed" in clean.stdout
    broken = pytest_on(behaviour_project, "--ledger-impl", AS_WRITTEN, counterexamples=True)
    assert broken.returncode == 1
    assert f"{count} failed" in broken.stdout
    fixed = load_spec().variant("fixed")
    for module in counterexample_modules(behaviour_project):
        prop = fixed.properties[module.stem.removeprefix("test_")]
        # the staleness leads each failure, and the property's own verdict follows it
        stale = "event record_actor_death changed since these tests were generated; run `ledgercheck gen`"
        leads = (f"{stale}\n{prop.name}: {prop.message}", f"on the trace of {prop.name} ({prop.message})")
        assert f"{stale}\n" in broken.stdout and any(lead in broken.stdout for lead in leads), broken.stdout[-3000:]


# --- what a regeneration changes, and why ------------------------------------------------


def test_gen_says_what_it_removes_and_rewrites_and_why(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    assert run("-m", "ledgercheck.model.cli", "gen", str(BREAKER), "--out", str(out)).returncode == 0
    module = out / "test_failures_reset_when_closed.py"
    text = module.read_text()
    module.write_text(text.replace("Regression tests for the property", "Tests for the property", 1))
    (out / "test_renamed_property.py").write_text(MARKER + '../x.toml, do not edit.\nPROPERTY = "renamed_property"\n')
    check = run("-m", "ledgercheck.model.cli", "gen", str(BREAKER), "--out", str(out), "--check")
    assert check.returncode == 1
    assert "drift from a change of behaviour" in check.stdout  # a module to delete is not text
    result = run("-m", "ledgercheck.model.cli", "gen", str(BREAKER), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "removed test_renamed_property.py: the property renamed_property was removed or renamed" in result.stdout
    assert "rewritten test_failures_reset_when_closed.py: only text changed (docs, messages, figures)" in result.stdout
    assert module.read_text() == text


def test_change_report_names_tests_and_reasons() -> None:
    spec_file = load_spec()
    path = GENERATED / "test_restart_budget_counts_genuine_failures.py"
    text = path.read_text()
    names = re.findall(r"^def (test_\w+)\(", text, re.M)
    start = text.index(f"\n\ndef {names[-1]}(")
    fewer = text[:start] + "\n"
    values = text.replace("restart_attempts=1", "restart_attempts=2", 1)
    assert values != text
    changes = compare({path.name: fewer}, {path.name: text}, spec_file)
    assert [c.line() for c in changes] == [f"  rewritten {path.name}: 1 test(s) added ({names[-1]})"]
    (change,) = compare({path.name: values}, {path.name: text}, spec_file)
    assert change.behaviour and "expected values or steps changed in 1 test(s)" in change.reason
    holds = {
        (v, "restart_budget_counts_genuine_failures", "ledger"): Result(
            variant=v,
            property="restart_budget_counts_genuine_failures",
            environment="ledger",
            shards=4,
            policy={},
            status=Status.HOLDS_TO_DEPTH,
            depth=12,
            expected="holds",
        )
        for v in ("as_written", "fixed")
    }
    (gone,) = compare({path.name: text}, {}, spec_file, Verdicts(holds))
    assert gone.kind == "removed"
    assert gone.reason == (
        "restart_budget_counts_genuine_failures no longer has a counterexample in any variant "
        "(checked: as_written, fixed)"
    )


def test_the_meaning_of_a_clocked_spec_ignores_where_its_drive_is_written() -> None:
    """Where `[clock] drive` is written is for binding errors (its line), not meaning: a spec
    with a clock kept the digest its committed tests carry (a version that recorded it told a
    scheduler's user the spec's meaning had changed when nothing had)."""
    breaker = ROOT / "spec" / "examples" / "timed_breaker.toml"
    text = breaker.read_text(encoding="utf-8")
    assert text.count("drive = {") == 1
    base = meaning_of(load_spec(str(breaker)))
    moved = text.replace("drive = {", "drive   =   {")
    assert meaning_of(load_spec_text(moved, str(breaker))) == base
    assert "where" not in json.dumps(variant_parts(load_spec(str(breaker)).variant())["spec"])


def test_a_part_changed_in_every_variant_is_named_once() -> None:
    recorded = {"event a": "1", "event a, variant fixed": "2", "event a, variant next": "3", "policy": "4"}
    current = {"event a": "5", "event a, variant fixed": "6", "event a, variant next": "7", "policy": "4"}
    assert changed_parts(recorded, current) == ["event a (and in variants fixed, next)"]
    current["event a"] = "1"
    assert changed_parts(recorded, current) == ["event a, variants fixed, next"]


def test_a_file_gen_did_not_write_is_named_by_gen_check(tmp_path) -> None:
    """A hand-written module or pytest configuration in the generated tests' folder runs with
    them (a `conftest.py` can skip them all): `gen --check` names it and fails."""
    from ledgercheck.codegen.render import foreign_files

    out = tmp_path / "generated_tests"
    out.mkdir()
    (out / "test_generated_looking.py").write_text("def test_x():\n    pass\n", encoding="utf-8")
    (out / "conftest.py").write_text("", encoding="utf-8")
    (out / "pytest.ini").write_text("[pytest]\naddopts = -k nothing\n", encoding="utf-8")
    (out / "notes.txt").write_text("kept", encoding="utf-8")
    assert foreign_files(out) == ["conftest.py", "pytest.ini", "test_generated_looking.py"]
    assert foreign_files(tmp_path / "absent") == []
