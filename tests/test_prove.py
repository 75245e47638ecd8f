"""Unbounded proofs and refutations (`ledgercheck prove`) and `ledgercheck diff`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import z3
from budgets import Tripping
from ledger_fixture import BUDGET_REFILL, LEDGER_SPEC
from tiers import fast_slice

from ledgercheck.model import budget, diff, prove, resultcache
from ledgercheck.model.errors import Undecided, UsageError
from ledgercheck.model.result import Status
from ledgercheck.model.runs import CheckRequest, run_checks
from ledgercheck.model.spec import load_spec, load_spec_text

HEADLINE = "no_condemnation_by_inherited_streak"
SPEC_TEXT = LEDGER_SPEC.read_text()


HOLDING = [
    (variant, name)
    for variant in ("fixed", "refit_keeps_streak")
    for name, prop in load_spec().variant(variant).properties.items()
    if prop.expect.get(variant) == "holds" and prop.kind != "eventually"  # liveness: test_liveness.py
]


# The fast lane proves one property of each environment (the headline, and one the explicit
# engine and Spacer both prove); the full suite every one.
FAST_HOLDING = [HOLDING.index(("fixed", HEADLINE)), HOLDING.index(("fixed", "retire_retires"))]


@pytest.mark.parametrize(("variant", "name"), fast_slice(HOLDING, FAST_HOLDING))
def test_every_property_a_fix_holds_is_proved_at_four_shards(spec_file, variant, name):
    spec = spec_file.variant(variant)
    prop = spec.properties[name]
    env = "controller" if prop.applies_to("controller") else "ledger"
    result = prove.prove_property(spec, env, prop, shards=4, policy=spec.default_policy(), refute_depth=6)
    assert result.status == "proved", result.note
    assert result.matches is True
    if env == "ledger":
        # One shard decides the ledger environment: where its reduced state space is finite,
        # exhausting it is the quickest proof; where not (a property judged over any call,
        # `calls = "any"`, meets a counter no contract bounds), Spacer's. Spacer proves the
        # same, with an invariant.
        assert "every fleet size" in result.note, result.note
        assert result.engine == "explicit" or (result.engine == "spacer" and prop.counts_any_call), result.engine
        result = prove.prove_property(
            spec, env, prop, shards=4, policy=spec.default_policy(), refute_depth=6, engine="spacer"
        )
        assert result.status == "proved", result.note
        assert "every fleet size" in result.note
    assert result.engine == "spacer"
    assert result.invariant


@pytest.mark.slow
def test_as_written_is_refuted_with_its_shortest_trace(spec_file):
    spec = spec_file.variant("as_written")
    expected = {
        "no_condemnation_by_inherited_streak": 8,
        "restarted_engine_refits_healthy": 6,
        "restart_budget_counts_genuine_failures": 9,
    }
    for name, depth in expected.items():
        result = prove.prove_property(spec, "controller", spec.properties[name], shards=4, policy=spec.default_policy())
        assert result.status == "violated"
        assert result.traces and result.traces[0].depth == depth
        assert result.matches is True


def test_k_induction_uses_the_spec_lemma(spec_file):
    spec = spec_file.variant("fixed")
    prop = spec.properties["suspicion_survives_abort"]
    assert prop.lemmas, "the bundled spec strengthens this property with a lemma"
    result = prove.prove_property(
        spec, "controller", prop, shards=3, policy=spec.default_policy(), engine="kind", max_k=3, refute_depth=4
    )
    assert result.status == "proved"
    assert result.engine == "k-induction"


def test_k_induction_without_the_lemma_prints_a_counterexample_to_induction():
    lemma = 'lemmas = ["not aborted_while_suspect or state_before_partial == SUSPECT"]\n'
    assert SPEC_TEXT.count(lemma) == 1
    spec = load_spec_text(SPEC_TEXT.replace(lemma, ""), "fleet_health.toml").variant("fixed")
    result = prove.prove_property(
        spec,
        "controller",
        spec.properties["suspicion_survives_abort"],
        shards=2,
        policy=spec.default_policy(),
        engine="kind",
        max_k=2,
        refute_depth=4,
    )
    assert result.status == "unknown"
    assert "counterexample to induction at k=2" in result.note
    assert "~aborted_while_suspect" in result.note and "state_before_partial" in result.note


def test_symbolic_policy_proof(spec_file):
    spec = spec_file.variant("fixed")
    result = prove.prove_property(
        spec, "controller", spec.properties["no_repeat_spurious_condemnation"], shards=2, policy=None, refute_depth=4
    )
    assert result.status == "proved"


@pytest.mark.slow
def test_diff_of_the_two_variants_ends_at_mark_loaded_of_a_restarted_shard(spec_file):
    a, b = spec_file.variant("as_written"), spec_file.variant("fixed")
    found = diff.shortest_difference(a, b, "controller", 4, a.default_policy(), 10)
    assert found is not None
    last = found.left.steps[-1]
    assert [c.event for c in last.calls if c.shard == found.shard] == ["mark_loaded"]
    before = found.left.steps[-2].after["shards"][found.shard]
    assert before["state"] == "RESTARTING"
    assert found.left.steps[-1].after["history"]["shards"][found.shard]["incarnation"] == 1
    assert found.field in ("consecutive_reported_failures", "state_before_partial")
    left = found.left.steps[-1].after["shards"][found.shard][found.field]
    right = found.right.steps[-1].after["shards"][found.shard][found.field]
    assert left != right
    # nothing differs one step earlier: this is the shortest distinguishing trace
    assert found.left.steps[-2].after["shards"] == found.right.steps[-2].after["shards"]


@pytest.mark.slow
def test_diff_of_the_two_fixes_is_the_wedged_engine(spec_file):
    a, b = spec_file.variant("fixed"), spec_file.variant("refit_keeps_streak")
    changes = diff.verdict_changes(a, b, "controller", 3, a.default_policy(), 10)
    assert [(name, left.verdict, right.verdict) for name, left, right in changes] == [
        ("wedged_engine_is_taken_out", "violated", "holds")
    ]


def test_diff_runs_where_the_spec_can_without_an_environment(spec_file):
    """`diff` without --environment: the spec's declared default, else `controller` where
    the spec has one (the bundled ledger), else its default (`ledger`, else its first). It
    asked every spec for `controller`, and a spec without one stopped with exit 2."""
    examples = Path(__file__).resolve().parents[1] / "spec" / "examples"
    assert diff._default_environment(spec_file.variant("fixed")) == "controller"
    assert diff._default_environment(load_spec(str(examples / "timed_breaker.toml")).variant()) == "callers"
    assert diff._default_environment(load_spec(str(examples / "listener_breaker.toml")).variant()) == "ledger"


def test_an_unknown_variant_names_the_spec_it_was_looked_up_in(spec_file):
    with pytest.raises(UsageError, match=r"unknown variant 'intended'; the spec fleet_health.toml has as_written"):
        spec_file.variant("intended")


def test_diff_of_a_variant_with_itself_finds_nothing(spec_file):
    a = spec_file.variant("fixed")
    assert diff.shortest_difference(a, a, "ledger", 2, a.default_policy(), 4) is None


@pytest.mark.slow
def test_diff_lists_the_changed_verdicts(spec_file):
    a, b = spec_file.variant("as_written"), spec_file.variant("fixed")
    changes = diff.verdict_changes(a, b, "controller", 3, a.default_policy(), 10)
    assert {name for name, _, _ in changes} == {
        "no_condemnation_by_inherited_streak",
        "restarted_engine_refits_healthy",
        "restart_budget_counts_genuine_failures",
        "suspicion_is_about_the_current_process",
        "single_suspect_rule_needs_own_evidence",
    }
    for _, left, right in changes:
        assert left.verdict == "violated" and left.traces
        assert right.verdict == "holds"


def test_diff_never_reads_an_undecided_query_as_no_difference(spec_file, monkeypatch):
    """A solver that answers unknown, or a budget that runs out, stops the search for a
    difference with exit 3 and what was established: never `difference: null`."""
    a = spec_file.variant("fixed")
    real = z3.Solver.check
    monkeypatch.setattr(z3.Solver, "check", lambda self, *args: z3.unknown if args else real(self, *args))
    monkeypatch.setattr(z3.Solver, "reason_unknown", lambda self: "canceled")
    with pytest.raises(Undecided, match=r"the solver gave up \(canceled\) at depth 0 .*nothing was established"):
        diff.shortest_difference(a, a, "ledger", 2, a.default_policy(), 4)
    monkeypatch.undo()
    with (
        budget.using(Tripping(2)),
        pytest.raises(budget.BudgetExhausted, match="at depth 1; no difference up to depth 0"),
    ):
        diff.shortest_difference(a, a, "ledger", 2, a.default_policy(), 4)


def test_a_proof_names_the_policy_it_holds_at(capsys) -> None:
    """PROVED at the default policy read as proved outright (a property false at a larger
    policy the spec allows: `transitions` trial); the output now says which policy first."""
    from pathlib import Path

    from ledgercheck.model.cli import main

    spec = Path(__file__).resolve().parents[1] / "spec" / "examples" / "timed_breaker.toml"
    assert main(["prove", str(spec), "--property", "refuses_while_open", "--environment", "ledger"]) == 0
    first, second = capsys.readouterr().out.splitlines()[:2]
    assert first == "at trip_after=3, reset_timeout=4 only (--symbolic-policy proves at every policy the spec allows)"
    # and for one fleet size (a pool trial read PROVED as proved for any number of connections)
    assert second.startswith("for 1 shard (--shards N proves at another fleet size; -v names the proofs"), second
    assert main(["prove", str(spec), "--property", "refuses_while_open", "--symbolic-policy"]) == 0
    out = capsys.readouterr().out
    assert not out.startswith("at ") and out.startswith("for 1 shard ("), out


def test_prove_at_every_policy_answers_a_liveness_property_unknown_and_proves_the_rest(capsys):
    """`prove --symbolic-policy` stopped the whole run with exit 2 at the first liveness property
    (a Raft trial); as `check` does, that one is unknown (exit 3) and the others are proved."""
    from ledgercheck.model.cli import main

    args = ["prove", "--symbolic-policy", "--variant", "fixed", "--property", "restart_always_ends"]
    assert main([*args, "--property", "retire_retires"]) == 3
    out = capsys.readouterr().out
    assert "restart_always_ends" in out and "UNKNOWN (a liveness property is proved at a concrete" in out, out
    assert re.search(r"retire_retires +ledger +PROVED", out), out


@pytest.mark.parametrize("engine", ["z3", "auto"])
def test_check_prove_reports_a_violation_past_the_depth(engine: str) -> None:
    """`check --prove` where the bounded search found nothing to depth 12 and the property
    breaks at 15 (a refilled restart budget): the z3 engine read Spacer's refutation as
    "holds up to depth 12", and `auto`'s explicit search, which found it past the depth,
    crashed looking for more traces there. Both report the violation and its trace."""
    spec_file = load_spec_text(LEDGER_SPEC.read_text(encoding="utf-8") + BUDGET_REFILL, "refill.toml")
    request = CheckRequest(
        spec_file,
        variants=("fixed",),
        properties=("restarts_stay_within_budget",),
        environment="ledger",
        prove=True,
        engine=engine,
    )
    with resultcache.afresh():
        [result] = run_checks(request)
    assert result.status == Status.VIOLATED and result.expected == "holds", result.note
    assert result.traces and result.traces[0].depth == 15, result.note


def test_check_prove_with_distinct_traces_proves_what_prove_proves() -> None:
    """`check --prove` asks for three distinct traces by default: the fields that tell traces
    apart widened what the explicit search kept, which then never ran out of states (it held
    `full_streak_condemns` to depth 145), where `prove` exhausts 1,067 states."""
    spec_file = load_spec(LEDGER_SPEC)
    request = CheckRequest(
        spec_file,
        variants=("fixed",),
        properties=("full_streak_condemns",),
        environment="ledger",
        prove=True,
        engine="auto",
        max_traces=3,
    )
    with resultcache.afresh():
        [result] = run_checks(request)
    assert result.status == Status.PROVED, result.note


def test_prove_runs_its_proofs_on_the_executor_with_the_same_output(capsys: pytest.CaptureFixture[str]) -> None:
    """`prove --jobs 2` (two trials' `prove` refused `--jobs`, which every other heavy command
    takes): the proofs are independent jobs, and the output is the same, in the same order."""
    from ledgercheck.model import cli

    def run(jobs: str) -> str:
        argv = ["prove", str(LEDGER_SPEC), "--variant", "fixed", "--environment", "ledger", "--jobs", jobs]
        assert cli.main(argv) == 0
        return re.sub(r"in [0-9.]+s", "in Xs", capsys.readouterr().out)

    one = run("1")
    assert one == run("2")
    assert "full_streak_condemns" in one and "PROVED" in one
