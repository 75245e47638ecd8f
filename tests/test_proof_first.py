"""The proof tried before the bounded search of a property the spec expects to hold
(`bmc._proof_first`): it prints what the bounded search would, never hides a regression,
and is only believed once its invariant is checked (`spacer._certified`)."""

from __future__ import annotations

import z3

from ledgercheck.model import bmc, cone, spacer
from ledgercheck.model.result import Status
from ledgercheck.model.spec import load_spec_text

HEADLINE = "no_condemnation_by_inherited_streak"
EXPECT = 'expect = { as_written = "violated", fixed = "holds", refit_keeps_streak = "holds" }'


def _check(spec, prop, env="controller", depth=12, traces=3, **kw):
    return bmc.check_property(
        spec,
        env,
        spec.properties[prop],
        shards=4,
        policy=spec.default_policy(),
        max_depth=depth,
        max_traces=traces,
        **kw,
    )


def _proofs_asked(monkeypatch) -> list[dict]:
    """The keyword arguments of every Spacer proof asked for from now on (still asked)."""
    asked: list[dict] = []
    real_proof = spacer.spacer_proof

    def spy_proof(*args, **kwargs):
        asked.append(kwargs)
        return real_proof(*args, **kwargs)

    monkeypatch.setattr(spacer, "spacer_proof", spy_proof)
    return asked


def _as_printed(result) -> tuple:
    return (result.status, result.depth, result.traces, result.lax_traces, result.note, result.expected)


def test_a_proof_prints_what_the_bounded_search_prints(spec_file):
    """Where Spacer's checked invariant settles the property, the result is the bounded
    search's (holds up to the depth asked, no trace, no note), answered by `spacer`."""
    spec = spec_file.variant("fixed")
    depth = 9  # past the shortest counterexample of as_written (8 steps)
    for env in ("controller", "ledger"):
        result = _check(spec, HEADLINE, env, depth=depth)
        assert (result.status, result.engine) == (Status.HOLDS_TO_DEPTH, "spacer"), env
        assert result.proved_beyond, "the invariant settles every depth: ci's proofs step counts it"
        prop = spec.properties[HEADLINE]
        searched = bmc.Checker(spec, env, prop, 4, spec.default_policy(), contracts=spec.environment(env).any_call).run(
            depth, 3
        )
        searched.lax_traces = result.lax_traces  # the lax search runs after either
        assert _as_printed(result) == _as_printed(searched), env
        assert searched.engine == "bmc"


def test_the_same_question_takes_the_same_route_every_time(spec_file, monkeypatch):
    """A resource count, not a timeout, bounds the attempt: which engine answers does not
    depend on the machine's load. (Every proof of the bundled spec fits the count, so one is
    cut below what it needs.)"""
    spec = spec_file.variant("fixed")
    with monkeypatch.context() as cut:
        cut.setattr(bmc, "PROOF_FIRST_RLIMIT", 20_000)
        beyond = {_check(spec, "restarted_engine_refits_healthy", depth=6).engine for _ in range(2)}
    assert beyond == {"bmc"}, "this proof needs more than the count allows: the bounded search answers"
    assert {_check(spec, "restarted_engine_refits_healthy", depth=6).engine for _ in range(2)} == {"spacer"}
    assert {_check(spec, "suspicion_survives_abort", depth=6).engine for _ in range(2)} == {"spacer"}


def test_a_regression_of_a_property_expected_to_hold_is_still_found(spec_file):
    """The spec expects the headline property to hold in `as_written` too (a regression of
    the fix): no invariant exists, the bounded search runs and prints the traces it prints
    where the spec expects the violation."""
    text = spec_file.source.text
    assert EXPECT in text
    regressed = load_spec_text(text.replace(EXPECT, 'expect = { default = "holds" }'), "fleet_health.toml")
    spec = regressed.variant("as_written")
    result = _check(spec, HEADLINE, "ledger", traces=1)
    assert (result.status, result.depth, result.engine) == (Status.VIOLATED, 8, "bmc")
    assert result.matches is False and not result.proved_beyond
    original = _check(spec_file.variant("as_written"), HEADLINE, "ledger", traces=1)
    assert result.traces == original.traces


def test_no_proof_is_tried_where_the_spec_expects_a_violation(spec_file, monkeypatch):
    tried: list[str] = []
    real = spacer.spacer_proof

    def spy(*args, **kwargs):
        tried.append(args[2].name)
        return real(*args, **kwargs)

    monkeypatch.setattr(spacer, "spacer_proof", spy)
    result = _check(spec_file.variant("as_written"), "suspicion_is_about_the_current_process", traces=1)
    assert result.status == Status.VIOLATED and tried == []
    result = _check(spec_file.variant("fixed"), "suspicion_is_about_the_current_process", traces=1)
    assert result.engine == "spacer" and tried == ["suspicion_is_about_the_current_process"]


def test_an_unchecked_invariant_settles_nothing(spec_file, monkeypatch):
    """Spacer's answer is not believed on its word: an invariant that is not inductive, or
    that a plain solver cannot check, leaves the property to the bounded search."""
    spec = spec_file.variant("fixed")
    prop = spec.properties["restart_budget_counts_genuine_failures"]  # an invariant, not 1-inductive
    enc = cone.sliced_encoding(spec, "controller", prop, 4, spec.default_policy())
    cur = [enc.template[k] for k in enc.keys]
    nxt = [enc.next_template[k] for k in enc.keys]
    bad = [enc.invariant_violation(prop, cone.focus_of(prop), enc.template)]
    assert not spacer._certified(enc, z3.BoolVal(True, enc.ctx), cur, nxt, bad), "admits the bad states"
    assert not spacer._certified(enc, z3.BoolVal(False, enc.ctx), cur, nxt, bad), "excludes the initial state"
    # Spacer's invariant is over its arguments (de Bruijn variables), not the template's.
    over_args = z3.substitute(z3.Not(bad[0]), *[(v, z3.Var(i, v.sort())) for i, v in enumerate(cur)])
    assert not spacer._certified(enc, over_args, cur, nxt, bad), "not closed under the transition"
    x = z3.Int("x", enc.ctx)
    assert not spacer._certified(enc, z3.Exists([x], x == x), cur, nxt, bad), "quantified: not checked"

    spec_prop = HEADLINE
    monkeypatch.setattr(spacer, "_certified", lambda *args: False)
    result = _check(spec, spec_prop, depth=6)
    assert (result.status, result.depth, result.engine) == (Status.HOLDS_TO_DEPTH, 6, "bmc")
    assert not result.proved_beyond, "a bounded search proves nothing past its depth"


def test_with_prove_the_first_proof_is_the_answer(spec_file):
    """`--prove` reports the invariant the first attempt found instead of asking again."""
    spec = spec_file.variant("fixed")
    result = _check(spec, HEADLINE, prove=True)
    assert (result.status, result.engine) == (Status.PROVED, "spacer")
    assert result.invariant and "proved by spacer" in result.note
    # The first attempt did not print its invariant; printed later, when asked, it reads as
    # the same attempt printing it at once.
    spacer._FOUND.clear()
    answer, at_once, _ = spacer.spacer_proof(
        spec,
        "controller",
        spec.properties[HEADLINE],
        4,
        spec.default_policy(),
        rlimit=bmc.PROOF_FIRST_RLIMIT,
        certify=True,
    )
    assert answer == z3.sat and result.invariant == at_once


def test_auto_reports_the_first_proof_as_proved_and_races_nothing(spec_file, monkeypatch):
    """Under `--engine auto` a proof comes back `proved`; one found first needs no race."""
    monkeypatch.setattr(bmc, "_ProofRace", None)  # would fail if a race were started
    result = _check(spec_file.variant("fixed"), "suspicion_survives_abort", race_proof=True)
    assert (result.status, result.engine, result.depth) == (Status.PROVED, "spacer", 12)


def test_traces_outside_the_contracts_are_still_searched_for(spec_file, monkeypatch):
    """The verdict settled by a proof, the lax search still runs where the system without
    the contracts breaks the property, and is settled by a proof of its own where it holds."""
    spec = spec_file.variant("fixed")
    result = _check(spec, "restart_budget_counts_genuine_failures", "ledger")
    assert (result.status, result.engine) == (Status.HOLDS_TO_DEPTH, "spacer")
    assert len(result.lax_traces) == 3 and all(t.classification == "lax_guard" for t in result.lax_traces)
    searched: list[bool] = []
    real = bmc.Checker.run

    def spy(self, *args, **kwargs):
        searched.append(self.contracts)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(bmc.Checker, "run", spy)
    proofs = _proofs_asked(monkeypatch)
    result = _check(spec, "no_repeat_spurious_condemnation", "ledger")
    assert (result.status, result.engine, result.lax_traces, searched) == (Status.HOLDS_TO_DEPTH, "spacer", [], [])
    # One proof, of the system without the contracts, settled the verdict and the lax search.
    assert [asked.get("contracts") for asked in proofs] == [False]


def test_the_count_grows_with_the_fleet_and_the_depth_and_lands_at_eight_shards(spec_file):
    """The flat count up to 4 shards and depth 12 (so the default run's route is unchanged),
    more beyond; at 8 shards and depth 20 the headline property's proof (3.15 million, just
    over the flat count) lands, where the search would run."""
    assert bmc.proof_first_rlimit(4, 12) == bmc.proof_first_rlimit(1, 6) == bmc.PROOF_FIRST_RLIMIT
    assert bmc.proof_first_rlimit(8, 20) == bmc.PROOF_FIRST_RLIMIT * 8 * 20 // 48
    # Where the search it would spare runs in bit-vectors, that much faster up to that size: a
    # third of the flat count; beyond it, the proportional count whichever the numbers.
    assert bmc.proof_first_rlimit(4, 12, bitvectors=True) == bmc.PROOF_FIRST_RLIMIT // bmc.BITVECTOR_SHARE
    assert bmc.proof_first_rlimit(8, 20, bitvectors=True) == bmc.proof_first_rlimit(8, 20)
    spec = spec_file.variant("fixed")
    result = bmc.check_property(
        spec,
        "controller",
        spec.properties[HEADLINE],
        shards=8,
        policy=spec.default_policy(),
        max_depth=20,
        max_traces=1,
    )
    assert (result.status, result.depth, result.engine) == (Status.HOLDS_TO_DEPTH, 20, "spacer")


def test_where_a_proof_is_wanted_anyway_the_count_is_never_cut(spec_file, monkeypatch):
    """`prove` asks Spacer after the search: its proof tried first gets the flat count and no
    width analysis (a cut count would only put a search before the same proof), where a
    plain check of the same question cuts it for its search in bit-vectors."""
    spec = spec_file.variant("fixed")
    proofs = _proofs_asked(monkeypatch)
    _check(spec, HEADLINE, traces=1)
    assert proofs[0].get("rlimit") == bmc.PROOF_FIRST_RLIMIT // bmc.BITVECTOR_SHARE
    proofs.clear()
    monkeypatch.setattr(bmc.widths, "width_for", None)  # would fail if the widths were analysed
    result = _check(spec, HEADLINE, traces=1, proof_wanted=True)
    assert proofs[0].get("rlimit") == bmc.PROOF_FIRST_RLIMIT
    assert (result.status, result.engine) == (Status.HOLDS_TO_DEPTH, "spacer")
