"""`ledgercheck ci`, the gate of a ledger change: it passes on the bundled spec, and a change
that breaks a property comes out red with the mismatch named before anything else.

Each test works on a copy of the project layout (spec/ + generated_tests/) in a temporary
directory, never on the real files, and runs the command in a subprocess as CI would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from beside_the_tests import PASS_EVERY_FAILURE
from caches import own_caches
from ledger_fixture import BUDGET_REFILL, LEDGER_GENERATED, LEDGER_SPEC

ROOT = Path(__file__).resolve().parents[1]
CLEAN = str(ROOT / "tests" / "impl" / "fleet_health_clean.py") + ":GenerationFleetHealth"
BOTH_FIXES = str(ROOT / "tests" / "impl" / "fleet_health_refit_keeps_streak.py") + ":GenerationFleetHealth"
AS_WRITTEN = str(ROOT / "tests" / "impl" / "fleet_health_as_written.py") + ":GenerationFleetHealth"

pytestmark = pytest.mark.slow


def project_copy(tmp_path: Path) -> Path:
    """spec/ and generated_tests/ as a ledger repository has them (the pinned ledger)."""
    shutil.copytree(LEDGER_SPEC.parent, tmp_path / "spec")
    shutil.copytree(LEDGER_GENERATED, tmp_path / "generated_tests", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "spec" / "fleet_health.toml"


def ci(spec: Path, *args: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`ledgercheck ci` on `spec`; with `cache`, its caches (results included) in that folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    if cache is not None:
        env = own_caches(cache, env)
    return subprocess.run(
        [sys.executable, "-m", "ledgercheck.model.cli", "ci", str(spec), *args],
        cwd=spec.parent.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


def edit(spec: Path, old: str, new: str) -> None:
    text = spec.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} is not unique in the spec"
    spec.write_text(text.replace(old, new), encoding="utf-8")


def test_a_broken_threshold_is_named_first(tmp_path: Path) -> None:
    spec = project_copy(tmp_path)
    edit(
        spec,
        "if consecutive_reported_failures >= unhealthy_threshold:",
        "if consecutive_reported_failures > unhealthy_threshold:",
    )
    run = ci(spec)
    assert run.returncode == 1, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    # the summary names the mismatches before anything else, and the step table says what ran
    assert "  verdicts " in run.stdout and "generated tests up to date" in run.stdout
    assert lines[0].startswith("ledgercheck ci fleet_health.toml: FAILED")
    # the mismatch comes right after the headline, with variant, property, environment and length
    assert lines[1].startswith("  MISMATCH  ") and "full_streak_condemns (ledger)" in lines[1]
    assert "the spec expects holds; shortest trace" in lines[1]


def test_a_comment_edit_changes_nothing(tmp_path: Path) -> None:
    spec = project_copy(tmp_path)
    text = spec.read_text(encoding="utf-8")
    spec.write_text("# a reviewer's note\n" + text.replace("\n[events.", "\n# spacing\n[events.", 1), encoding="utf-8")
    run = ci(spec)
    assert run.returncode == 0, run.stdout + run.stderr


def test_an_implementation_is_tested_and_conformance_checked(tmp_path: Path) -> None:
    """The implementation of the reference variant (both fixes) passes; the implementation of
    `fixed` alone fails the wedged-engine tests and diverges from the reference. The second
    run's verdicts come from the cache of results the first filled (a user's second run): they
    hide nothing of the implementation's own failures. Conformance at enumeration depth 2: the
    wiring is what is tested here (the good run took 44.4 s at depth 3, 28.6 s at depth 2, alone)."""
    spec = project_copy(tmp_path)
    cache = tmp_path / "cache"
    good = ci(spec, "--impl", BOTH_FIXES, "--conform-depth", "2", cache=cache)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "tests vs implementation" in good.stdout and "conformance" in good.stdout
    assert "answered from the cache of results" not in good.stdout
    bad = ci(spec, "--impl", CLEAN, "--conform-depth", "2", cache=cache)
    reused = re.search(r"verdicts .* (\d+) verdict\(s\) .*; \1 answered from the cache of results", bad.stdout)
    assert reused, bad.stdout
    assert bad.returncode == 1, bad.stdout + bad.stderr
    head = bad.stdout.split("\n\n", 1)[0]
    assert "TESTS     tests vs implementation" in head and "test_wedged_engine_is_taken_out.py" in head
    assert "DIVERGES" in head
    # the line says what differs: it stopped at the colon that introduces it
    diverges = next(line for line in head.splitlines() if "DIVERGES" in line)
    assert not diverges.endswith(":") and ": model " in diverges, diverges


def test_bad_input_exits_2(tmp_path: Path) -> None:
    spec = project_copy(tmp_path)
    edit(spec, "if consecutive_reported_failures >= unhealthy_threshold:", "if consecutive_reported_failures >= :")
    run = ci(spec)
    assert run.returncode == 2
    assert "fleet_health.toml:" in run.stderr


def test_the_branch_search_runs_beside_the_verdicts_and_its_error_is_the_drift_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`ci` searches the shortest trace to every branch in a thread while the verdicts run; the
    drift step then reads that search back instead of searching again. A search that fails in
    the thread raises nothing there: the drift step searches again and raises the error."""
    import threading

    from ledgercheck.codegen import coverage, render, searchcache
    from ledgercheck.model import ci
    from ledgercheck.model.spec import bundled_spec_folder, load_spec

    spec_file = load_spec(str(bundled_spec_folder() / "examples" / "breaker.toml"))
    searched = coverage.search
    where: list[str] = []

    def recorded(*args: object, **kwargs: object) -> coverage.Coverage:
        where.append(threading.current_thread().name)
        return searched(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(searchcache, "fresh_search", recorded)
    monkeypatch.setattr(render, "_SEARCHED", {})
    ci._search_branches_beside(spec_file).join()
    found = render.search_branches(spec_file)
    assert where == ["ledgercheck-ci-branches"] and found.branches

    def broken(*args: object, **kwargs: object) -> coverage.Coverage:
        raise RuntimeError("no branches today")

    monkeypatch.setattr(searchcache, "fresh_search", broken)
    monkeypatch.setattr(render, "_SEARCHED", {})
    ci._search_branches_beside(spec_file).join()
    with pytest.raises(RuntimeError, match="no branches today"):
        render.search_branches(spec_file)


def _reference_with_report_failure(tmp_path: Path, body: str) -> str:
    """The reference implementation (both fixes), copied to `tmp_path`, as a class whose
    `report_failure` runs the statement `body` instead."""
    folder = tmp_path / "impl"
    folder.mkdir()
    for name in ("fleet_health_clean.py", "fleet_health_refit_keeps_streak.py"):
        shutil.copy(ROOT / "tests" / "impl" / name, folder / name)
    module = folder / "fleet_health_refit_keeps_streak.py"
    module.write_text(
        module.read_text(encoding="utf-8")
        + "\n\nclass Altered(GenerationFleetHealth):\n"
        + f"    def report_failure(self, *args: Any, **kwargs: Any) -> Any:\n        {body}\n",
        encoding="utf-8",
    )
    return f"{module}:Altered"


def test_an_implementation_that_ends_its_process_with_exit_0_is_undecided(tmp_path: Path) -> None:
    """The reference implementation, but `report_failure` calls `os._exit(0)`: pytest then
    ended with exit 0 and no summary, and `ci --impl` read that as a pass. Now pytest's run
    (watched by the plugin) and conform exit 3, and no step passes without its verdict
    (pytest's summary, conform's `no divergence`, `_finished`): both are UNDECIDED, exit 3."""
    spec = project_copy(tmp_path)
    impl = _reference_with_report_failure(tmp_path, "__import__('os')._exit(0)")
    run = ci(spec, "--impl", impl, "--conform-depth", "3", cache=tmp_path / "cache")
    assert run.returncode == 3, run.stdout + run.stderr
    head = run.stdout.split("\n\n", 1)[0]
    assert head.startswith("ledgercheck ci fleet_health.toml: UNDECIDED, 2 problem(s):"), head
    assert "UNDECIDED tests vs implementation: ledgercheck: pytest's process ended (exit code 0) before its run" in head
    assert "UNDECIDED conformance: ledgercheck: the process running conform's comparison exited with code 0" in head


def test_an_implementation_that_never_returns_ends_in_the_budget(tmp_path: Path) -> None:
    """The reference implementation, but `report_failure` never returns (it sleeps, leaving the
    cores to the verdicts): `ci --impl` waited for its children without end. Now conform gets
    the time left as its budget and stops within it, pytest is stopped past the deadline, and
    both steps are UNDECIDED: exit 3. (Without a per-call limit, `--call-timeout 0`: with one,
    `test_call_timeout` names the call sooner.)"""
    spec = project_copy(tmp_path)
    impl = _reference_with_report_failure(tmp_path, "__import__('time').sleep(3600)")
    run = ci(
        spec, "--impl", impl, "--conform-depth", "3", "--time-budget", "30", "--call-timeout", "0", cache=tmp_path / "c"
    )
    assert run.returncode == 3, run.stdout + run.stderr
    head = run.stdout.split("\n\n", 1)[0]
    assert "UNDECIDED tests vs implementation: ledgercheck ci: the time budget (30 s) ran out while this step ran" in (
        head
    ), head
    assert "UNDECIDED conformance: ledgercheck: the time budget (" in head, head
    assert "the implementation did not return from the calls report_failure(" in head, head
    # Nothing it started runs on: pytest's forked run of the tests sleeping in the call was
    # left behind, orphaned, when only the process ci started was killed.
    assert _processes_naming(tmp_path, within=10.0) == [], "left running"


def _processes_naming(path: Path, within: float) -> list[str]:
    """The command lines of the processes that still name `path`, after waiting up to `within`
    seconds for them to go (Linux's /proc; none elsewhere)."""
    import os
    import time

    deadline = time.monotonic() + within
    while True:
        found = []
        for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    line = handle.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(path) in line and int(pid) != os.getpid():
                found.append(line)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_pytest_output_in_the_report_is_drawn_narrow() -> None:
    """The child pytest runs 400 columns wide (so its short summary keeps whole names); its
    separator lines are drawn 100 wide in ci's report, titles centred, other lines untouched."""
    from ledgercheck.model.ci import RULE_WIDTH, _narrowed

    wide = "=" * 190 + " FAILURES " + "=" * 190 + "\n" + "_" * 195 + " test_x " + "_" * 195 + "\nE   assert 1 == 2"
    lines = _narrowed(wide + "\n" + "-" * 400).split("\n")
    assert [len(line) for line in lines] == [RULE_WIDTH, RULE_WIDTH, len("E   assert 1 == 2"), RULE_WIDTH]
    assert lines[0].strip("=") == " FAILURES " and lines[1].strip("_") == " test_x "


def test_a_child_step_passes_only_with_its_verdict() -> None:
    """Exit 0 is not enough (where no watch runs, an implementation that ends pytest's process
    ends it with 0): the last line must be pytest's summary, or conform's `no divergence`."""
    from ledgercheck.model.ci import _finished

    assert _finished("tests vs implementation", "1 failed, 97 passed, 2 xfailed in 3.10s (0:00:03)")
    assert _finished("tests vs model", "98 passed, 1 warning in 0.58s")
    assert not _finished("tests vs implementation", "....................................")
    assert _finished("conformance", "91107 traces, 92367 calls compared, no divergence")
    assert not _finished("conformance", "  enumeration      2 shards, any call, depth 4: 86141 call sequences")


def test_a_skipped_or_deselected_generated_test_is_not_a_pass() -> None:
    from ledgercheck.model.ci import _left_out

    assert _left_out("tests vs model", "98 passed, 4 xfailed in 0.58s") is None
    assert _left_out("tests vs model", "102 skipped in 0.31s").startswith("102 skipped: ")
    assert _left_out("tests vs implementation", "1 passed, 101 deselected in 0.2s").startswith("101 deselected: ")
    assert _left_out("conformance", "3 skipped, no divergence") is None


def test_waiting_for_a_child_says_so_while_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """ci in a log printed nothing while it waited for its children (the tests of a slow
    implementation run for minutes): the wait now reports the child's time every WAIT_TICK,
    which ci passes through a heartbeat, and the child's code, output and time are unchanged."""
    from ledgercheck.model import ci as ci_module

    monkeypatch.setattr(ci_module, "WAIT_TICK", 0.1)
    child = ci_module.Subprocess.start(
        [sys.executable, "-c", "import time; time.sleep(0.8); print('done')"], Path.cwd()
    )
    told: list[float] = []
    code, text, seconds = child.finish(told.append)
    assert (code, text.strip()) == (0, "done")
    assert len(told) >= 3 and told == sorted(told) and told[-1] <= seconds, told


def test_ci_in_a_log_has_a_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Neither --progress nor --no-progress, stderr not a terminal: ci's messages (the checks'
    progress, the waits for its children) go through a heartbeat, a line at most every
    HEARTBEAT_SECONDS, where they went nowhere; --no-progress keeps it silent."""
    import io

    from ledgercheck.model import console
    from ledgercheck.model.ci import _waiting_for
    from ledgercheck.model.cli import main

    log = io.StringIO()
    _waiting_for("tests vs implementation", console.Heartbeat(log, every=0))(61.4)
    assert log.getvalue() == "ledgercheck: ci: waiting for tests vs implementation, running for 61 s\n"

    spec = tmp_path / "breaker.toml"
    shutil.copy(ROOT / "spec" / "examples" / "breaker.toml", spec)
    monkeypatch.setattr(console, "HEARTBEAT_SECONDS", 0.0)
    main(["ci", str(spec)])
    said = capsys.readouterr().err
    assert "ledgercheck: depth" in said or "ledgercheck: ci: " in said, said
    main(["ci", "--no-progress", str(spec)])
    assert capsys.readouterr().err == ""


def test_the_drift_step_says_why_it_compared_nothing() -> None:
    """Skipped for unknown verdicts, it said a verdict "differs from its expectation" (none did)."""
    from types import SimpleNamespace

    from ledgercheck.model.ci import _drift

    unknown = SimpleNamespace(mismatches=[], unknown=["x"])
    mismatch = SimpleNamespace(mismatches=["x"], unknown=[])
    spec_file: Any = None
    assert _drift(spec_file, Path("."), unknown).headline.endswith("while a verdict is unknown")  # type: ignore[arg-type]
    assert _drift(spec_file, Path("."), mismatch).headline.endswith("differs from its expectation")  # type: ignore[arg-type]


def test_a_relative_target_is_read_from_one_folder_by_both_steps(tmp_path: Path) -> None:
    """The spec names its class by a path relative to the project (`impl/job.py`), and ci runs
    from another folder: conformance, run from there, could not load it, while the generated
    tests, run from their own folder's parent, found the file and passed. Both read the path
    from the working directory (then the spec's folder): both are bad input, exit 2."""
    from job_runner import SPEC, job_class

    project = tmp_path / "project"
    (project / "spec").mkdir(parents=True)
    (project / "impl").mkdir()
    spec = project / "spec" / "jobs.toml"
    spec.write_text(SPEC.replace("[implementation]\n", '[implementation]\ntarget = "impl/job.py:Job"\n'))
    (project / "impl" / "job.py").write_text(job_class())
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    command = [sys.executable, "-m", "ledgercheck.model.cli"]
    gen = subprocess.run([*command, "gen", str(spec)], cwd=project, capture_output=True, text=True, env=env)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    here = subprocess.run([*command, "ci", str(spec)], cwd=project, capture_output=True, text=True, env=env)
    assert here.returncode == 0, here.stdout + here.stderr
    away = subprocess.run([*command, "ci", str(spec)], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert away.returncode == 2, away.stdout + away.stderr
    head = away.stdout.split("\n\n", 1)[0]
    assert "BAD INPUT tests vs implementation: no such file: " in head, head
    assert "BAD INPUT conformance: " in head and "no such file: impl/job.py" in head, head


@pytest.mark.parametrize(("config", "passed"), [((), []), (("--jobs", "1"), ["--jobs", "1"])])
def test_conform_s_child_runs_on_the_workers_ci_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: tuple[str, ...], passed: list[str]
) -> None:
    """`ci --jobs 1` started its conformance child with every core (a Raft trial saw
    `conform --no-progress raft.toml --time-budget 599.8`)."""
    from ledgercheck.model import ci as ci_module
    from ledgercheck.model import executor
    from ledgercheck.model.cli import build_parser
    from ledgercheck.model.spec import load_spec

    started: list[list[str]] = []
    monkeypatch.setattr(ci_module.Subprocess, "start", staticmethod(lambda command, *_: started.append(command)))
    ns = build_parser().parse_args(["ci", *config])
    with executor.using(executor.for_command(ns)):
        ci_module._start_children("job.py:Job", None, None, load_spec(LEDGER_SPEC), tmp_path / "none", False)
    conform = started[-1]
    assert conform[3] == "conform"
    jobs = conform[conform.index("--jobs") : conform.index("--jobs") + 2] if "--jobs" in conform else []
    assert jobs == passed, conform


def test_drift_is_one_line_naming_what_changed_in_the_spec(tmp_path: Path) -> None:
    """A one-event edit drifted every module (each header holds the spec's meaning): ten DRIFT
    lines named ten modules, the event only in the details (TCP trial). One line now."""
    from ledgercheck.codegen.changes import ModuleChange
    from ledgercheck.model.ci import _drift_line

    out = tmp_path / "generated_tests"
    why = "the spec's meaning changed (event recv_fin)"
    changes = [
        ModuleChange(f"test_{n}.py", "rewritten", True, f"tests changed; {why}", "event recv_fin") for n in range(10)
    ]
    names = [c.name for c in changes]
    line = _drift_line(out, names, changes, "a change of behaviour")
    assert line == (
        "DRIFT     generated_tests/: 10 modules (a change of behaviour; the spec's meaning changed: event recv_fin)"
    )
    assert _drift_line(out, names[:1], changes[:1], "text only") == (
        "DRIFT     generated_tests/test_0.py (text only; the spec's meaning changed: event recv_fin)"
    )


def test_a_violation_past_the_verdicts_depth_fails_the_run(tmp_path: Path) -> None:
    """`ci` passed the refill once `gen` had run (every verdict held to depth 12), and `prove`
    refuted it in under a second. The proofs step proves what held, and fails on this."""
    spec = project_copy(tmp_path)
    spec.write_text(spec.read_text(encoding="utf-8") + BUDGET_REFILL, encoding="utf-8")
    run = ci(spec, cache=tmp_path / "cache")
    assert run.returncode == 1, run.stdout + run.stderr
    head = run.stdout.split("\n\n", 1)[0]
    assert (
        "MISMATCH  fixed / restarts_stay_within_budget (ledger): violated, the spec expects holds; "
        "shortest trace 15 steps (past the verdicts' depth 12)"
    ) in head, head
    assert re.search(r"\n  proofs +FAILED ", run.stdout), run.stdout


SKIP_ALL = """
import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.skip(reason="flaky"))
"""


def test_a_conftest_that_skips_the_generated_tests_fails_the_run(tmp_path: Path) -> None:
    """A trial's `conftest.py` in generated_tests/ marked every test skipped, and `ci` read
    "passed, 102 skipped" as a pass (the drift check looked at the generated files only)."""
    spec = project_copy(tmp_path)
    (tmp_path / "generated_tests" / "conftest.py").write_text(SKIP_ALL, encoding="utf-8")
    run = ci(spec, cache=tmp_path / "cache")
    assert run.returncode == 1, run.stdout + run.stderr
    head = run.stdout.split("\n\n", 1)[0]
    assert "FOREIGN   generated_tests/conftest.py was not written by `ledgercheck gen`" in head, head
    assert "TESTS     tests vs model: " in head and " skipped: the generated tests skip none" in head, head


def test_a_conftest_above_the_tests_that_passes_their_failures_fails_the_run(tmp_path: Path) -> None:
    """A `conftest.py` in the repository's root (outside generated_tests/, where `gen` cannot
    see it) turned every failure into a pass: pytest said `102 passed` against the class with
    the bug. The tests' own notes (`codegen.outcomes`) say 40 of them failed."""
    spec = project_copy(tmp_path)
    (tmp_path / "conftest.py").write_text(PASS_EVERY_FAILURE, encoding="utf-8")
    run = ci(spec, "--impl", AS_WRITTEN, cache=tmp_path / "cache")
    assert run.returncode == 1, run.stdout + run.stderr
    head = run.stdout.split("\n\n", 1)[0]
    assert (
        "TESTS     tests vs implementation: 40 generated test(s) did not pass, though pytest counted no failure" in head
    ), head
    assert re.search(r"tests vs implementation +FAILED", run.stdout), run.stdout
    assert "102 passed" in run.stdout  # what pytest said, in the step's detail


def test_the_proofs_step_proves_only_what_no_checked_invariant_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A verdict the proof tried before its bounded search settled (a checked inductive
    invariant, `Result.proved_beyond`) is proved already: the step counted it among those
    it proved again, which doubled `ci`'s time on the bundled spec (82 proofs after 79 such
    verdicts). The others, and only they, are proved, and a refutation still fails the step."""
    from ledgercheck.codegen.gate import Verdicts
    from ledgercheck.model import ci as ci_module
    from ledgercheck.model import runs
    from ledgercheck.model.result import Result, Status
    from ledgercheck.model.spec import load_spec

    spec_file = load_spec(str(LEDGER_SPEC))

    def verdict(prop: str, env: str, status: Status, **extra: Any) -> Result:
        return Result(
            variant="fixed",
            property=prop,
            environment=env,
            shards=4,
            policy={},
            status=status,
            depth=12,
            expected="holds",
            **extra,
        )

    settled = verdict("retirement_is_final", "ledger", Status.HOLDS_TO_DEPTH, engine="spacer", proved_beyond=True)
    bounded = verdict("restart_always_ends", "controller", Status.HOLDS_TO_DEPTH)
    verdicts = Verdicts({(r.variant, r.property, r.environment): r for r in (settled, bounded)})
    asked: list[tuple[str, str, str]] = []

    def proving(request: Any, progress: Any, only: Any) -> list[Result]:
        jobs = [
            (v, p, e)
            for v in ("fixed",)
            for p, e in (("retirement_is_final", "ledger"), (bounded.property, "controller"))
        ]
        asked.extend(job for job in jobs if only(job))
        return [verdict(bounded.property, "controller", answer) for answer in answers]

    monkeypatch.setattr(runs, "run_checks", proving)
    answers = [Status.PROVED]
    step = ci_module._proofs(spec_file, verdicts, None)
    assert asked == [("fixed", "restart_always_ends", "controller")]
    assert (step.status, step.failures) == (ci_module.PASSED, [])
    assert step.headline.startswith("2 of the 2 verdict(s) that held up to depth 12 proved (1 as they were checked)")

    answers = [Status.VIOLATED]
    step = ci_module._proofs(spec_file, verdicts, None)
    assert step.status == ci_module.FAILED and step.failures[0].startswith("MISMATCH  fixed / restart_always_ends")

    alone = Verdicts({("fixed", settled.property, "ledger"): settled})
    asked.clear()
    step = ci_module._proofs(spec_file, alone, None)
    assert (asked, step.status) == ([], ci_module.PASSED)
    assert step.headline == "nothing left to prove: the 1 verdict(s) that held were proved as they were checked"
