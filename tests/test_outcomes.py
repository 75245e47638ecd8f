"""The generated tests' own account of a run (`codegen.outcomes`), which `ci` judges them by:
pytest's summary can be changed by what runs beside the tests (a parent `conftest.py` that
turns failures into passes, a `collect_ignore`, a rerun plugin), and `ci` read it as a pass."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from beside_the_tests import PASS_EVERY_FAILURE
from ledger_fixture import LEDGER_EXAMPLES, LEDGER_GENERATED, LEDGER_SPEC

from ledgercheck.codegen import outcomes
from ledgercheck.codegen.outcomes import FAILED, FINISHED, VIOLATED, Expected, Note
from ledgercheck.codegen.render import existing_generated
from ledgercheck.model import cli

ROOT = Path(__file__).resolve().parents[1]
AS_WRITTEN = str(ROOT / "tests" / "impl" / "fleet_health_as_written.py") + ":GenerationFleetHealth"


KEPT = (
    "test_branches_of_retire.py",
    "test_no_condemnation_by_inherited_streak.py",
    "test_wedged_engine_is_taken_out.py",
)
"""Three of the pinned ledger's generated modules (1 + 6 + 9 tests): against the class with the
bug, the first passes and the other two fail every test."""


def _project(tmp_path: Path) -> Path:
    """spec/ and three modules of generated_tests/ of the pinned ledger, in a folder of their own."""
    shutil.copytree(LEDGER_SPEC.parent, tmp_path / "spec")
    (tmp_path / "generated_tests").mkdir()
    for name in KEPT:
        shutil.copy(LEDGER_GENERATED / name, tmp_path / "generated_tests" / name)
    return tmp_path / "generated_tests"


def _pytest(folder: Path, notes: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder), "--ledger-outcomes"]
    return subprocess.run(
        [*command, str(notes), *args], capture_output=True, text=True, cwd=folder.parent, env=env, timeout=600
    )


def _tests_in(folder: Path) -> list[outcomes.Expected]:
    return outcomes.expected(folder, existing_generated(folder))


def test_a_run_pytest_counts_green_is_judged_by_what_each_test_did(tmp_path: Path) -> None:
    """A `conftest.py` above the generated tests turns every failure into a pass: pytest
    said `102 passed` and exited 0 against the class with the bug (here 16 of them); the
    tests' own notes say 15 failed, and name them."""
    folder = _project(tmp_path)
    (tmp_path / "conftest.py").write_text(PASS_EVERY_FAILURE, encoding="utf-8")
    run = _pytest(folder, tmp_path / "notes", "--ledger-impl", AS_WRITTEN)
    assert run.returncode == 0 and run.stdout.splitlines()[-1].startswith("16 passed"), run.stdout[-2000:]
    tests = _tests_in(folder)
    assert len(tests) == 16 and not any(t.known_violation for t in tests)
    notes = outcomes.read(tmp_path / "notes")
    assert len(notes) == 16
    problems = outcomes.judge(tests, notes)
    assert len(problems) == 1, problems
    assert problems[0].startswith("15 generated test(s) did not pass, though pytest counted no failure"), problems
    assert "(it failed: the implementation does not do what refit_keeps_streak does" in problems[0], problems
    # the same run without the hook: pytest and the notes agree, test by test
    (tmp_path / "conftest.py").unlink()
    shutil.rmtree(tmp_path / "notes")
    honest = _pytest(folder, tmp_path / "notes", "--ledger-impl", AS_WRITTEN)
    assert honest.returncode == 1 and honest.stdout.splitlines()[-1].startswith("15 failed, 1 passed"), honest.stdout
    failed = {k for k, runs in outcomes.read(tmp_path / "notes").items() if runs[0].outcome == FAILED}
    assert len(failed) == 15


def test_a_module_kept_from_running_is_named_whole(tmp_path: Path) -> None:
    """`collect_ignore` in a parent `conftest.py`: pytest passes the 7 it ran; the notes
    lack the module's 9, named as the module."""
    folder = _project(tmp_path)
    (tmp_path / "conftest.py").write_text(
        'collect_ignore = ["generated_tests/test_wedged_engine_is_taken_out.py"]\n', encoding="utf-8"
    )
    run = _pytest(folder, tmp_path / "notes")
    assert run.returncode == 0 and run.stdout.splitlines()[-1].startswith("7 passed"), run.stdout[-2000:]
    problems = outcomes.judge(_tests_in(folder), outcomes.read(tmp_path / "notes"))
    assert problems == [
        "9 of 16 generated test(s) never ran (something outside them kept them from running: a conftest.py, "
        "a plugin, addopts): test_wedged_engine_is_taken_out.py (all 9)"
    ], problems


def test_a_known_violation_is_expected_to_break_on_its_property(tmp_path: Path) -> None:
    """The strict xfails of a property every variant violates: their notes say the property
    broke, which is what they expect (read from their source, not from a marker a hook could add)."""
    out = tmp_path / "generated"
    assert cli.main(["gen", str(LEDGER_EXAMPLES / "timed_breaker.toml"), "--out", str(out)]) == 0
    run = _pytest(out, tmp_path / "notes")
    assert run.returncode == 0 and "xfailed" in run.stdout.splitlines()[-1], run.stdout[-2000:]
    tests = _tests_in(out)
    known = [t for t in tests if t.known_violation]
    assert known and all(t.test.startswith("test_") for t in known)
    notes = outcomes.read(tmp_path / "notes")
    assert {notes[(t.module, t.test)][0].outcome for t in known} == {VIOLATED}
    assert outcomes.judge(tests, notes) == []


def _expected(name: str, known: bool = False) -> Expected:
    return Expected("/g/test_p.py", name, known)


def _note(name: str, outcome: str, reference: bool = False) -> Note:
    return Note("/g/test_p.py", name, outcome, reference, "why" if outcome != FINISHED else "")


@pytest.mark.parametrize(
    ("known", "reference", "outcome", "passes"),
    [
        (False, False, FINISHED, True),
        (False, False, FAILED, False),
        (False, False, VIOLATED, False),
        (True, False, VIOLATED, True),
        (True, False, FAILED, False),  # broke on the way, not on its property
        (True, False, FINISHED, False),  # the known violation is gone
        (False, True, FAILED, True),  # the declared reference's strict xfail: anything but a pass
        (False, True, VIOLATED, True),
        (False, True, FINISHED, False),
    ],
)
def test_each_test_is_held_to_what_it_expects(known: bool, reference: bool, outcome: str, passes: bool) -> None:
    tests = [_expected("test_a", known)]
    problems = outcomes.judge(tests, {("/g/test_p.py", "test_a"): [_note("test_a", outcome, reference)]})
    assert (problems == []) is passes, problems


def test_a_failure_a_rerun_passed_is_not_a_pass() -> None:
    """A rerun plugin runs a failed test again until it passes: each run is noted, and one
    that failed fails the judgement."""
    tests = [_expected("test_a")]
    runs = [_note("test_a", FAILED), _note("test_a", FINISHED)]
    problems = outcomes.judge(tests, {("/g/test_p.py", "test_a"): runs})
    assert problems == [
        "1 generated test(s) did not pass, though pytest counted no failure (a conftest.py hook, a plugin or a "
        "rerun changed what pytest reports): test_p.py::test_a (it failed: why)"
    ]


def test_notes_are_written_whole_by_each_process_and_read_together(tmp_path: Path) -> None:
    """Each process (pytest's, or each xdist worker) writes a file of its own; a file that
    cannot be read is no notes (its tests then never ran, as far as the judgement knows)."""
    outcomes.write(tmp_path, [_note("test_a", FINISHED)])
    outcomes.write(tmp_path, [_note("test_b", FAILED)])
    (tmp_path / "outcomes-1-broken.json").write_text("{", encoding="utf-8")
    assert sorted(p.name.startswith("outcomes-") for p in tmp_path.iterdir()) == [True, True, True]
    notes = outcomes.read(tmp_path)
    assert sorted(notes) == [("/g/test_p.py", "test_a"), ("/g/test_p.py", "test_b")]
    assert not list(tmp_path.glob(".writing-*"))


def test_a_pytest_that_ran_none_of_the_tests_says_why() -> None:
    """`-p no:ledgercheck` in addopts: pytest refuses `--ledger-outcomes` (exit 4) and its last
    line was the rootdir, which ci showed as the failure; `--co` in addopts: exit 0, no summary."""
    from ledgercheck.model.ci import _pytest_refused

    usage = [
        "ERROR: usage: python -m pytest [options] [file_or_dir] [file_or_dir] [...]",
        "python -m pytest: error: unrecognized arguments: --ledger-outcomes /tmp/x",
        "  inifile: /r/pytest.ini",
        "  rootdir: /r",
    ]
    said = _pytest_refused("tests vs model", 4, usage)
    assert said is not None and said.startswith("pytest does not know ledgercheck's options (python -m pytest: error:")
    assert "`-p no:ledgercheck` in addopts?" in said
    other = _pytest_refused("tests vs model", 4, ["ERROR: usage: ...", "pytest: error: unrecognized arguments: --x"])
    assert other == "pytest refused its arguments (pytest: error: unrecognized arguments: --x): no test ran"
    collected = _pytest_refused("tests vs implementation", 0, ["test_a.py::test_b", "", "102 tests collected in 0.46s"])
    assert collected == "pytest only collected the tests and ran none (a --co or --collect-only in addopts?)"
    assert _pytest_refused("tests vs model", 0, ["102 passed in 1.2s"]) is None
    assert _pytest_refused("conformance", 4, usage) is None
