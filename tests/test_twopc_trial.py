"""What a two-phase-commit trial found: a coordinator bound to its spec with no adapter
(`tests/fixtures/twopc/`), its transaction-wide decision a fleet value kept as an enum member.

`conform` compared fleet values raw (a class's `Decision.PENDING` against the spec's PENDING
diverged at once), and the generated tests never compared them (a class whose decision stayed
PENDING after every participant voted yes passed them all).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledgercheck.model.cli import main

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "twopc"
ENUMERATION_ONLY = ["--random", "0", "--no-runs", "--no-branches", "--no-probes", "--no-policies"]
ENUMERATION_ONLY += ["--no-counterexamples", "--jobs", "1", "--no-cache", "--depth", "3"]
CLASS = (FIXTURE / "coordinator.py").read_text(encoding="utf-8")
DECISION_READ = "    def decision(self) -> Decision:\n        return self._decision\n"
STUCK = CLASS.replace(DECISION_READ, "    def decision(self) -> Decision:\n        return Decision.PENDING\n")
AS_VALUE = CLASS.replace(DECISION_READ, "    def decision(self) -> str:\n        return self._decision.value\n")


def _folder(tmp_path: Path, source: str) -> Path:
    """The spec and a version of the class in a folder of their own (a module once imported
    stays so: each version is a module of another name, which the spec's target names)."""
    folder = tmp_path / f"twopc{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    module = f"coordinator_{folder.name}"
    spec = (FIXTURE / "twopc.toml").read_text(encoding="utf-8")
    (folder / "twopc.toml").write_text(spec.replace("coordinator.py:", f"{module}.py:"), encoding="utf-8")
    (folder / f"{module}.py").write_text(source, encoding="utf-8")
    return folder


def test_the_fixture_is_the_trial_s_class_unchanged_but_for_its_decision() -> None:
    assert DECISION_READ in CLASS and STUCK != CLASS and AS_VALUE != CLASS


@pytest.mark.parametrize("source", [CLASS, AS_VALUE], ids=["enum_member", "api_value"])
def test_a_fleet_value_is_read_by_its_enum(tmp_path: Path, source: str, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path, source)
    assert main(["conform", str(folder / "twopc.toml"), *ENUMERATION_ONLY]) == 0, capsys.readouterr().out


def test_a_fleet_value_that_is_wrong_is_a_divergence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path, STUCK)
    assert main(["conform", str(folder / "twopc.toml"), *ENUMERATION_ONLY]) == 1
    assert "decision" in capsys.readouterr().out


@pytest.mark.slow
def test_the_generated_tests_compare_the_fleet_values_the_class_shows(tmp_path: Path) -> None:
    folder = _folder(tmp_path, CLASS)
    out = folder / "tests"
    assert main(["gen", str(folder / "twopc.toml"), "--out", str(out), "--jobs", "1"]) == 0
    stuck = folder / "coordinator_stuck.py"
    stuck.write_text(STUCK, encoding="utf-8")

    def pytest_on(target: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out), "--impl", target]
        return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=folder)

    right = pytest_on(f"{folder / f'coordinator_{folder.name}.py'}:TwoPhaseCoordinator")
    assert right.returncode == 0, right.stdout[-3000:]
    wrong = pytest_on(f"{stuck}:TwoPhaseCoordinator")
    assert wrong.returncode == 1, wrong.stdout[-3000:]
    assert "the fleet value decision is 'PENDING', expected 'COMMIT'" in wrong.stdout
    # A branch only two participants reach has a coverage test on two shards: the abort the
    # COMMIT decision refuses, which a coordinator let through (the generated tests passed it).
    text = (out / "test_branches_of_abort.py").read_text(encoding="utf-8")
    assert "On 2 shards: no call sequence on one shard reaches it." in " ".join(text.split())
    lets_through = folder / "coordinator_abort.py"
    lets_through.write_text(ABORT_AFTER_COMMIT, encoding="utf-8")
    abort = pytest_on(f"{lets_through}:TwoPhaseCoordinator")
    assert abort.returncode == 1, abort.stdout[-3000:]
    assert "test_branches_of_abort.py::test_abort_raises1_decisionerror" in abort.stdout
    shutil.rmtree(out)


ABORT_AFTER_COMMIT = CLASS.replace(
    '            raise DecisionError(f"participant {pid}: cannot abort ({reason}), decision is commit")',
    "            return",
)
"""A coordinator that lets an abort after the COMMIT decision through silently, where the spec
says it raises: the decision takes both participants' yes votes, which no one-participant
trace and no depth-4 enumeration reached, and `conform` and `ci` passed it."""


def test_a_branch_only_several_instances_reach_is_searched_for_on_the_fleet() -> None:
    from ledgercheck.codegen import coverage
    from ledgercheck.model.spec import load_spec

    spec_file = load_spec(FIXTURE / "twopc.toml")
    spec = spec_file.variant()
    one = coverage.search(spec_file, spec)
    missed = [u.branch for u in one.unreached]
    assert missed and not any(u.proved for u in one.unreached)  # the shards share the decision: no proof on one
    refusal = next(b for b in missed if b.event == "abort" and b.kind == "raises" and b.taken)
    fleet = coverage.fleet_search(spec, {}, 2, missed, max_states=1000)
    assert refusal in fleet.traces
    trace = fleet.traces[refusal]
    assert {shard for shard, _, _ in trace} == {0, 1} and trace[-1][1] == "abort"


@pytest.mark.slow
def test_conform_takes_a_branch_only_several_instances_reach(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ABORT_AFTER_COMMIT != CLASS
    only_branches = ["--random", "0", "--no-runs", "--no-probes", "--no-policies", "--no-counterexamples"]
    only_branches += ["--jobs", "1", "--no-cache", "--depth", "1"]
    folder = _folder(tmp_path, ABORT_AFTER_COMMIT)
    assert main(["conform", str(folder / "twopc.toml"), *only_branches]) == 1
    out = capsys.readouterr().out
    assert "a trace on 2 shards to a branch one shard does not reach" in out, out
    folder = _folder(tmp_path, CLASS)
    assert main(["conform", str(folder / "twopc.toml"), *only_branches]) == 0
    assert "  branches         2 shards: 7 traces to the branches one shard does not reach" in capsys.readouterr().out
