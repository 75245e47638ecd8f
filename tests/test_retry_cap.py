"""A job runner's retry cap (python-statemachine trial): the guards a class gets wrong there,
and what finds each. A class that gave up with one retry left answered every call of the
branch traces as the model did (they reach the third retry but only make the call that
leads on): conform's probes ask every call at every state they pass through. One whose
`retry` lost its guard was never driven past the cap (the trace to `retry` begins the longer
trace to `give_up`, which ends where nothing repeats, and was left out of the long runs),
and the coverage test of the whole `raises` condition retried a queued job: the runs repeat
every branch trace now, and each part of a disjunction that raises is a branch with a test
of its own. `mutate` changes `raises` conditions too, so how well the properties pin the
guards down is measured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from job_runner import SPEC, job_class

from ledgercheck.codegen.coverage import search
from ledgercheck.model.cli import main
from ledgercheck.model.conformance.checker import Conformance
from ledgercheck.model.conformance.implementation import model_implementation
from ledgercheck.model.conformance.probes import probe_scripts
from ledgercheck.model.conformance.sources import branch_scripts
from ledgercheck.model.spec import load_spec_text


def _job(tmp_path: Path, **bugs: str) -> list[str]:
    (tmp_path / "jobs.toml").write_text(SPEC)
    (tmp_path / "job.py").write_text(job_class(**bugs))
    return ["conform", str(tmp_path / "jobs.toml"), "--impl", f"{tmp_path / 'job.py'}:Job"]


def test_a_correct_job_runner_conforms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_job(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "  probes           1 shard: every call at each of the " in out, out
    assert "no divergence" in out


def test_giving_up_with_a_retry_left_is_found_by_the_probes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`give_up` accepted at the third failure with two retries spent: a call the model refuses
    at a state the trace to `give_up` passes through, never made there before."""
    args = _job(tmp_path, GIVE_UP_REFUSED="self.retries < self.max_retries - 1")
    assert main([*args, "--no-probes"]) == 0, "found without the probes: this test no longer shows them"
    capsys.readouterr()
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "found by a call where a trace to a branch passes: the trace to branch" in out, out
    assert "with every call refused on the way" in out, out
    assert "give_up(0)  # the model raises ValueError here" in out, out


def test_a_retry_past_the_cap_is_found_by_the_runs_and_by_the_branches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`retry` with no guard: the trace to `retry` (which begins the trace to `give_up`)
    repeated takes the class to a fourth retry; and the retry at the cap is a branch of its
    own (a part of the disjunction that raises), whose trace asks it there."""
    args = _job(tmp_path, RETRY_REFUSED="False")
    assert main(args) == 1
    assert "(found by a long run: the trace to branch" in capsys.readouterr().out
    assert main([*args, "--no-runs"]) == 1
    out = capsys.readouterr().out
    assert "found by a trace to a branch of the spec: the trace to branch" in out, out
    # a spec with no `requires` has no callers' contracts: its figure has no row for them
    assert "callers' contract" not in out, out
    assert "retries: model 3, implementation 4" in out or "retries           | 3 (impl: 4)" in out, out


def test_every_distinct_state_is_probed_once_with_every_call(tmp_path: Path) -> None:
    spec_file = load_spec_text(SPEC, "jobs.toml")
    spec = spec_file.variant()
    checker = Conformance(spec, model_implementation(spec), spec.default_policy(), "the model")
    traced = branch_scripts(spec_file, spec, spec.default_policy())
    assert len(traced.every) > len(traced.scripts), "no trace to a branch begins another"
    probed = probe_scripts(checker, traced.every)
    # QUEUED, RUNNING, FAILED, RETRYING at 0..3 retries, DONE and GAVE_UP, each at most once
    assert 6 <= probed.states <= 2 + 4 * 4
    refusing = [s for s in probed.scripts if s.source.endswith("with every call refused on the way")]
    taking = [s for s in probed.scripts if not s.source.endswith("with every call refused on the way")]
    assert refusing and taking
    # every call the model takes ends its own trace: one call after a prefix of a branch trace
    for script in taking:
        prefix = script.calls[:-1]
        assert any(t.calls[: len(prefix)] == prefix for t in traced.every), script.source
    # the refusals ride along: give_up asked at every state before the cap
    gave_up_refused = sum(call.event == "give_up" for s in refusing for call in s.calls)
    assert gave_up_refused >= 4


def test_a_disjunction_that_raises_is_a_branch_per_part(tmp_path: Path) -> None:
    """`state != FAILED or retries >= max_retries`: the call raises on a job that has not
    failed, and on a failed one with no retry left. Two branches: the second gets a coverage
    test of its own (a retry at the cap), which the class whose `retry` lost its guard fails,
    where one test of the whole condition (a retry on a queued job) passed it."""
    spec_file = load_spec_text(SPEC, "jobs.toml")
    found = search(spec_file, spec_file.variant())
    retry = [b for b in found.branches if b.event == "retry" and b.kind == "raises" and b.taken]
    assert [(b.part, b.text) for b in retry] == [(1, "state != FAILED"), (2, "retries >= max_retries")]
    assert all(b in found.traces for b in retry), "a part of the disjunction was not reached"
    assert [name for name, _ in found.traces[retry[1]]][-1] == "retry"
    assert main(["gen", *_job(tmp_path)[1:2], "--out", str(tmp_path / "tests")]) == 0
    text = (tmp_path / "tests" / "test_branches_of_retry.py").read_text()
    assert "def test_retry_raises1_valueerror_retries_max_retries(" in text
    assert "`retries >= max_retries` holds (the parts before it are false)" in text

    def pytest_on(**bugs: str) -> subprocess.CompletedProcess[str]:
        target = _job(tmp_path, **bugs)[3]
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "tests")]
        return subprocess.run([*command, "--impl", target], capture_output=True, text=True, timeout=300)

    assert pytest_on().returncode == 0
    broken = pytest_on(RETRY_REFUSED="False")
    assert broken.returncode == 1
    assert "FAILED" in broken.stdout and "test_retry_raises1_valueerror_retries_max_retries" in broken.stdout


def test_mutants_change_the_raises_conditions() -> None:
    """Each entry of an event's `raises` never holding, each part of a combination left out,
    each comparison off by one; written as an override of the event's `raises`, a spec that
    loads. The properties kill a retry that lost its cap (its fourth retry is 12 calls
    deep: past `mutate`'s default depth of 10, so `--max-depth 13` here)."""
    from ledgercheck.model import mutate

    spec_file = load_spec_text(SPEC, "jobs.toml")
    mutants = [m for m in mutate.spec_mutants(spec_file, "base") if m.before.startswith("raises")]
    retry = {m.after: m for m in mutants if m.event == "retry"}
    assert set(retry) == {
        "raises ValueError when False",
        "raises ValueError when retries >= max_retries",
        "raises ValueError when state != FAILED",
        "raises ValueError when state != FAILED or retries > max_retries",
    }
    assert {m.kind for m in mutants} == {
        "drop a refusal",
        "drop a part of a disjunction",
        "drop a part of a conjunction",
        "off by one",
    }
    checks = mutate._checks(spec_file.variant())
    outcomes = {}
    for after, mutant in retry.items():
        spec = load_spec_text(SPEC + mutant.patch, "jobs.toml").variant()
        assert spec.events["retry"].raises[0].text == after.removeprefix("raises ValueError when ")
        outcomes[after] = mutate.evaluate_mutant(spec_file, "base", mutant, shards=1, depth=13, tests=[], checks=checks)
    assert outcomes["raises ValueError when state != FAILED"].status == "killed_by_property"
    assert "retries_are_capped" in outcomes["raises ValueError when state != FAILED"].detail
    assert outcomes["raises ValueError when state != FAILED or retries > max_retries"].status == "killed_by_property"


def test_policies_that_agree_on_what_the_search_reads_share_one_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A constant no event reads (only a query or a property would) makes the largest and the
    smallest policy differ from the default without changing the coverage search: it runs once
    (a pod tracker's search took 45 s at each of them, the same search)."""
    from ledgercheck.codegen import coverage

    spec = SPEC.replace("[policy]\n", "[policy]\nspare = { default = 1, min = 0, max = 2 }\n")
    assert coverage.policy_read(load_spec_text(spec, "jobs.toml").variant()) == {"max_retries"}
    args = _job(tmp_path)
    (tmp_path / "jobs.toml").write_text(spec)
    assert main([*args, "--random", "0", "--no-counterexamples", "--progress"]) == 0
    captured = capsys.readouterr()
    began = captured.err.count("the shortest trace to every branch: depth 1, 1 states")
    assert began == 1, captured.err
    assert "the search at the policy asked: the two agree on every constant it reads" in captured.out, captured.out


def test_a_property_that_only_holds_up_to_the_depth_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model whose `retry` lost its cap breaks `retries_are_capped` only at its fourth retry,
    12 calls deep: searched to depth 9 it holds, and no invariant proves it (none can). The
    verdict stands as the search found it; the summary names the property as held only up to
    that depth (pod-tracker trial: a model without its backoff cap passed `check` as if proved)."""
    unguarded = SPEC.replace('when = "state != FAILED or retries >= max_retries"', 'when = "state != FAILED"')
    assert unguarded != SPEC
    (tmp_path / "jobs.toml").write_text(unguarded)
    assert main(["check", str(tmp_path / "jobs.toml"), "--max-depth", "9", "--no-cache"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "base: 2 hold up to depth 9, as expected" in out, out
    assert (
        "of these, 1 only up to that depth, no inductive invariant found for them (a violation deeper than the "
        "search is not ruled out; `ledgercheck prove` looks further): retries_are_capped"
    ) in out, out
    (tmp_path / "jobs.toml").write_text(SPEC)
    assert main(["check", str(tmp_path / "jobs.toml"), "--max-depth", "9", "--no-cache"]) == 0
    assert "only up to that depth" not in capsys.readouterr().out


def test_the_enumeration_from_the_ends_of_the_branch_traces(tmp_path: Path) -> None:
    """An enumeration can start where call sequences leave the model (the ends of the traces to
    the branches): starts that reach one state are one node, depth counts from there, and a
    divergence names the whole sequence, start included (a pod tracker whose backoff came from
    its restart count differed three calls after a crash that followed a steady run, nine
    calls from the start, deeper than the enumeration from the initial state)."""
    from ledgercheck.model.conformance.calls import LedgerCall
    from ledgercheck.model.conformance.implementation import load_target

    spec_file = load_spec_text(SPEC, "jobs.toml")
    spec = spec_file.variant()
    wrong = job_class().replace(
        '        self._move(("RUNNING", "FAILED"), "DONE")',
        '        self._move(("RUNNING", "FAILED"), "GAVE_UP" if self.retries == 2 else "DONE")',
    )
    assert wrong != job_class()
    (tmp_path / "job.py").write_text(wrong)
    checker = Conformance(spec, load_target(f"{tmp_path / 'job.py'}:Job", spec), spec.default_policy(), "Job")
    start, fail, retry, finish = (LedgerCall(name, 0) for name in ("start", "fail", "retry", "finish"))
    twice = (start, fail, retry, start, fail, retry, start)  # RUNNING, two retries spent
    early = checker.enumerate(1, 2, starts=[(start, fail)])  # two calls from there: no retry spent twice
    assert early.divergence is None and early.sequences > 0
    one, same = checker.enumerate(1, 1, starts=[(start,)]), checker.enumerate(1, 1, starts=[(start,), (start,)])
    assert (one.sequences, one.states) == (same.sequences, same.states)  # one state: one node
    found = checker.enumerate(1, 2, starts=[twice])
    assert found.divergence is not None
    assert found.divergence.script.calls[: len(twice)] == twice
    assert found.divergence.script.calls[-1] == finish and len(found.divergence.script.calls) <= len(twice) + 2
