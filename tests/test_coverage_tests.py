"""Coverage tests (`codegen.coverage`): every branch of the reference variant gets a generated
test, `gen` reports the branch coverage, and a change of observable behaviour that no
counterexample test sees fails a coverage test.

The mutation test takes a copy of the implementation that conforms to the reference variant
(`tests/impl/fleet_health_refit_keeps_streak.py` and the clean implementation it extends),
changes one line, and runs the pinned ledger's generated tests against it in a subprocess.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ledger_fixture import LEDGER_GENERATED, LEDGER_SPEC, ROOT

from ledgercheck.codegen import coverage, render
from ledgercheck.model.mutate import reference_variant
from ledgercheck.model.spec import load_spec, load_spec_text

IMPL_DIR = ROOT / "tests" / "impl"
REFERENCE_IMPL = "fleet_health_refit_keeps_streak.py"
GENERATED_REL = re.escape(LEDGER_GENERATED.relative_to(ROOT).as_posix())


def test_every_branch_of_the_reference_variant_is_covered() -> None:
    spec_file = load_spec(LEDGER_SPEC)
    found = render.search_branches(spec_file)
    assert found.variant == reference_variant(spec_file) == "refit_keeps_streak"
    assert not found.unreached
    assert set(found.traces) == set(found.branches)
    events = {b.event for b in found.branches}
    assert events == {*spec_file.variant(found.variant).events, coverage.HOOK}  # the hook's `if` too
    # both outcomes of every decision
    decisions = {(b.event, b.kind, b.ordinal) for b in found.branches if b.kind != "body"}
    for event, kind, ordinal in decisions:
        outcomes = {b.taken for b in found.branches if (b.event, b.kind, b.ordinal) == (event, kind, ordinal)}
        assert outcomes == {True, False}, (event, kind, ordinal)
    report = render.coverage_report(spec_file, "gen")
    assert report[0] == (
        f"gen: branch coverage of refit_keeps_streak: {len(found.branches)}/{len(found.branches)} "
        f"reachable branches covered (100 %), 0 unreachable, {len(found.branches)} in all"
    )
    assert len(report) == 1


def test_the_shortest_trace_ends_in_its_branch() -> None:
    """The last call of every trace takes the branch, and no shorter trace does (BFS)."""
    spec_file = load_spec(LEDGER_SPEC)
    found = render.search_branches(spec_file)
    spec = spec_file.variant(found.variant)
    for branch, trace in found.traces.items():
        assert branch in coverage.covered_by(spec, [trace], found.branches)
        assert branch not in coverage.covered_by(spec, [trace[:-1]], found.branches) or len(trace) == 1
    retire_budget = next(
        b for b in found.branches if b.event == "mark_restarting" and b.kind == "if" and b.taken
    )  # restart_attempts > max_restart_attempts_per_shard: six restarts at the default policy
    assert [name for name, _ in found.traces[retire_budget]] == ["mark_restarting"] * 6


def test_branches_name_their_spec_line() -> None:
    spec_file = load_spec(LEDGER_SPEC)
    lines = LEDGER_SPEC.read_text(encoding="utf-8").split("\n")
    for branch in coverage.branches(spec_file, spec_file.variant("refit_keeps_streak")):
        line = lines[branch.line - 1]
        if branch.kind == "if":
            assert line.strip() == (branch.condition or branch.text), branch  # an `elif` named as written
        elif branch.kind == "body":
            assert line.startswith("body ="), branch
        else:
            assert line.startswith(f"{branch.kind} ="), branch
    patched = [b for b in coverage.branches(spec_file, spec_file.variant("refit_keeps_streak")) if b.from_patch]
    # its body once per part of the disjunction, its else once
    assert [b.condition or b.text for b in patched] == ["if was == SUSPECT or consecutive_reported_failures > 0:"] * 3
    assert [b.text for b in patched][:2] == ["was == SUSPECT", "consecutive_reported_failures > 0"]
    assert "as variant refit_keeps_streak's patch has it" in patched[0].source("refit_keeps_streak")


@pytest.mark.slow
def test_a_branch_the_search_misses_is_reported_never_dropped() -> None:
    text = LEDGER_SPEC.read_text(encoding="utf-8")
    body = 'body = """\nconsecutive_reported_failures = 0\n"""\nhistory = """\nown_request_streak = 0\n'
    assert text.count(body) == 1
    dead = body.replace(
        "consecutive_reported_failures = 0\n",
        "consecutive_reported_failures = 0\nif consecutive_reported_failures > 0:\n    restart_attempts = 0\n",
    )
    spec_file = load_spec_text(text.replace(body, dead), str(LEDGER_SPEC))
    found = coverage.search(spec_file, spec_file.variant("refit_keeps_streak"))
    assert [(u.branch.event, u.branch.taken) for u in found.unreached] == [("report_success", True)]
    why = found.unreached[0].why
    assert "not reached by any call sequence of up to" in why and "a bounded search, not a proof" in why
    # The branch is dead, but a bounded search proves nothing: uncovered, not unreachable.
    assert not found.unreached[0].proved and not found.unreachable
    covered = coverage.covered_by(spec_file.variant("refit_keeps_streak"), list(found.traces.values()), found.branches)
    report = found.report(spec_file.path, covered)
    total = len(found.branches)
    percent = 100 * (total - 1) // total
    assert report[0] == (
        f"branch coverage of refit_keeps_streak: {total - 1}/{total} branches covered ({percent} %), "
        f"1 uncovered (not proved unreachable), 0 unreachable, {total} in all"
    )
    line = text.replace(body, dead).split("\n").index("if consecutive_reported_failures > 0:") + 1
    assert (
        f"  uncovered  fleet_health.toml:{line}  report_success: `if consecutive_reported_failures > 0:`" in (report[1])
    )
    assert report[2] == f"    {why}"
    files = render.render_coverage(spec_file, LEDGER_GENERATED, found)
    assert (
        "def test_report_success_if1_consecutive_reported_failures_0_else"
        in files["test_branches_of_report_success.py"]
    )
    assert "_then(" not in files["test_branches_of_report_success.py"]


RENDER = """
import hashlib, sys
from pathlib import Path
from ledgercheck.codegen import render
from ledgercheck.model.spec import load_spec
spec_file = load_spec(sys.argv[1])
files = render.render_coverage(spec_file, Path(sys.argv[2]), render.search_branches(spec_file))
for name, text in files.items():
    print(name, hashlib.sha256(text.encode()).hexdigest())
"""


@pytest.mark.slow
def test_coverage_modules_are_byte_identical_across_runs() -> None:
    """Two processes with different hash seeds render the same bytes, and they are the
    committed ones (`gen` wrote those in a third)."""
    outputs = []
    for seed in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-c", RENDER, str(LEDGER_SPEC), str(LEDGER_GENERATED)],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
    committed = {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in LEDGER_GENERATED.glob(f"{coverage.MODULE_PREFIX}*.py")
    }
    rendered = dict(line.split(" ") for line in outputs[0].splitlines())
    assert rendered == committed, "the committed coverage modules are stale: run ledgercheck gen"


def test_one_test_per_branch_named_for_event_and_branch() -> None:
    spec_file = load_spec(LEDGER_SPEC)
    found = render.search_branches(spec_file)
    names = []
    for path in sorted(LEDGER_GENERATED.glob(f"{coverage.MODULE_PREFIX}*.py")):
        event = path.stem.removeprefix(coverage.MODULE_PREFIX)
        found_names = re.findall(r"^def test_(\w+)\(", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
        assert all(n.startswith(f"{event}_") for n in found_names), found_names
        names += found_names
    assert sorted(names) == sorted(f"{b.event}_{b.slug}" for b in found.branches)
    text = (LEDGER_GENERATED / "test_branches_of_record_probe.py").read_text(encoding="utf-8")
    assert "def test_record_probe_if3_consecutive_probe_failures_then(" in text
    assert "Spec: [events.record_probe] body: if consecutive_probe_failures >= unhealthy_threshold:" in text


class _Capture:
    def __init__(self, out: str) -> None:
        self.out = out

    def readouterr(self) -> _Capture:
        return self


class _Check:
    def __init__(self) -> None:
        self.spec = load_spec(LEDGER_SPEC).variant("refit_keeps_streak")
        self.current = "step 1: report_failure(0)"


@pytest.mark.parametrize(
    ("printed", "problem"),
    [
        ("[fleet-health t=0.000] shard 0: healthy -> suspect (request failed: x)\n", None),
        ("fleet-health: shard 0 HEALTHY -> SUSPECT (report_failure)\n", None),
        ("[fleet-health t=0.000] shard 0: suspect -> healthy (request failed: x)\n", "does not say shard 0 went"),
        ("[fleet-health t=0.000] shard 1: healthy -> suspect (request failed: x)\n", "does not say shard 0 went"),
        ("", "0 log line(s), expected 1"),
        ("shard 0: healthy -> suspect\nshard 0: healthy -> suspect\n", "2 log line(s), expected 1"),
    ],
)
def test_expect_log(printed: str, problem: str | None) -> None:
    capture = _Capture(printed)
    if problem is None:
        coverage.expect_log(_Check(), capture, 0, [("HEALTHY", "SUSPECT")])
        return
    with pytest.raises(pytest.fail.Exception, match=re.escape(problem)):
        coverage.expect_log(_Check(), capture, 0, [("HEALTHY", "SUSPECT")])


# --- single-line changes of observable behaviour that no counterexample test sees -----------------

# Each of these passes every counterexample test (they replay traces the callers' contracts
# allow, and none of them reaches these lines with a difference to show) and fails at least one
# coverage test.
MUTANTS = {
    "off-by-one: a probe streak condemns one failed probe late": (
        "fleet_health_clean.py",
        "if shard.consecutive_probe_failures >= t:",
        "if shard.consecutive_probe_failures > t:",
    ),
    "off-by-one: the restart budget retires one restart early": (
        "fleet_health_clean.py",
        "if shard.restart_attempts > self.policy.max_restart_attempts_per_shard:",
        "if shard.restart_attempts >= self.policy.max_restart_attempts_per_shard:",
    ),
    "wrong log text: old and new state swapped": (
        "fleet_health_clean.py",
        'print(f"[fleet-health t={self._clock():.3f}] shard {i}: {old.value} -> {new.value} ({why})")',
        'print(f"[fleet-health t={self._clock():.3f}] shard {i}: {new.value} -> {old.value} ({why})")',
    ),
    "swapped state: a spent restart budget leaves the shard DEAD, not RETIRED": (
        "fleet_health_clean.py",
        'self._transition(i, ShardState.RETIRED, f"restart budget spent',
        'self._transition(i, ShardState.DEAD, f"restart budget spent',
    ),
    "swapped state: retire leaves the shard DEAD": (
        "fleet_health_clean.py",
        'self._transition(i, ShardState.RETIRED, f"retired: {reason}")',
        'self._transition(i, ShardState.DEAD, f"retired: {reason}")',
    ),
    "a partial refit of a STALE shard overwrites the state it kept": (
        "fleet_health_clean.py",
        "if shard.state is not ShardState.STALE:",
        "if True:",
    ),
    "a refit outside the callers' contract is ignored": (
        REFERENCE_IMPL,
        "if shard.state is ShardState.RETIRED:",
        "if shard.state is not ShardState.STALE:",
    ),
}


def _copy(tmp_path: Path, mutant: tuple[str, str, str] | None) -> str:
    for name in ("fleet_health_clean.py", REFERENCE_IMPL):
        shutil.copy(IMPL_DIR / name, tmp_path / name)
    if mutant is not None:
        name, old, new = mutant
        assert "\n" not in old + new, "a mutant changes one line"
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert text.count(old) == 1, f"{name} no longer has {old!r}"
        (tmp_path / name).write_text(text.replace(old, new), encoding="utf-8")
    return f"{tmp_path / REFERENCE_IMPL}:GenerationFleetHealth"


def _run(target: str) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(LEDGER_GENERATED), "-q", "-rf", "-p", "no:cacheprovider"]
        + ["--ledger-impl", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.slow
def test_the_unmodified_copy_passes_every_generated_test(tmp_path: Path) -> None:
    code, output = _run(_copy(tmp_path, None))
    assert code == 0, output
    assert " failed" not in output


@pytest.mark.slow
@pytest.mark.parametrize("mutant", list(MUTANTS), ids=list(MUTANTS))
def test_a_change_no_counterexample_test_sees_fails_a_coverage_test(tmp_path: Path, mutant: str) -> None:
    code, output = _run(_copy(tmp_path, MUTANTS[mutant]))
    assert code == 1, output
    failed = re.findall(rf"^FAILED {GENERATED_REL}/(test_\w+)\.py::", output, flags=re.MULTILINE)
    assert failed, output
    # Only coverage tests notice it: every counterexample test passes, as before this change.
    assert all(name.startswith(coverage.MODULE_PREFIX) for name in failed), failed


def test_a_coverage_test_failure_leads_with_what_it_pins_down(tmp_path: Path) -> None:
    """A coverage test only watches its property: a ledger that does something else on the
    branch is named as that, not by the property's message (which said the property broke
    when nothing had)."""
    code, output = _run(_copy(tmp_path, MUTANTS["swapped state: retire leaves the shard DEAD"]))
    assert code == 1, output
    assert "the implementation does not do what refit_keeps_streak does" in output, output
    assert "state is 'DEAD', expected 'RETIRED'" in output, output
    monitored = load_spec(str(LEDGER_SPEC)).variant("refit_keeps_streak").properties
    for name, prop in monitored.items():
        assert f"{name}: {prop.message}" not in output, name


def test_the_search_says_where_it_stands() -> None:
    """A search that cannot reach a branch runs to its bounds (tens of seconds on a spec whose
    clock steps are long): it says so at each depth, and a log's heartbeat passes it on."""
    from ledgercheck.model.console import Heartbeat

    spec_file = load_spec(str(LEDGER_SPEC))
    heard: list[str] = []
    found = coverage.search(spec_file, spec_file.variant("refit_keeps_streak"), progress=heard.append)
    said = "the shortest trace to every branch: depth"
    assert heard[0] == f"{said} 1, 1 states, 0 of {len(found.branches)} branches reached"
    assert len(heard) >= found.depth and heard[-1].startswith(f"{said} {found.depth},")
    lines: list[str] = []
    beat = Heartbeat(lines.append, every=0.0)
    beat(heard[-1])
    assert lines == [f"ledgercheck: {heard[-1]}"]


def test_the_search_tells_states_apart_only_by_what_can_decide_a_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A field no decision reads, now or after more calls (the weights' version, the base URL),
    kept states apart that reach the same branches in as many calls: the search over every
    field visited 2,125 states, over the branches' cone 666, to the same shortest traces."""
    spec_file = load_spec(LEDGER_SPEC)
    spec = spec_file.variant(reference_variant(spec_file))
    cone = coverage._Cone.of(spec)
    assert {"weight_version", "base_url"}.isdisjoint(cone.fields) and "state" in cone.fields
    assert "membership_epoch" not in cone.fleet  # counted by the state hook, read by no decision
    reduced = coverage.search(spec_file, spec)
    every = coverage._Cone(tuple(f.name for f in spec.fields), tuple(g.name for g in spec.globals))
    monkeypatch.setattr(coverage._Cone, "of", classmethod(lambda cls, spec: every))
    full = coverage.search(spec_file, spec)
    assert reduced.traces == full.traces and not reduced.unreached and not full.unreached
    assert reduced.states < full.states, (reduced.states, full.states)
