"""Liveness proofs by the WF1 rule (`model.wf1`): proved where the premises hold, never where a
fair lasso exists, and the lasso search still decides where the rule does not apply."""

from __future__ import annotations

import re

import pytest
from test_liveness import PROPERTY, hanging_spec
from tiers import fast_slice

from ledgercheck.model.errors import LedgercheckError
from ledgercheck.model.liveness import check_eventually, check_liveness
from ledgercheck.model.mutate import spec_mutants
from ledgercheck.model.spec import SpecFile, bundled_spec_folder, load_spec, load_spec_text
from ledgercheck.model.wf1 import wf1_proof

FAIRNESS = 'fairness = [{ weak = ["restart_loaded", "restart_fails"]'


def _with_fairness(groups: str) -> SpecFile:
    """The bundled spec with its controller's fairness groups replaced."""
    text = load_spec().source.text
    assert FAIRNESS in text
    return load_spec_text(text.replace(FAIRNESS, f"fairness = [{groups}"), "fleet_health.toml")


@pytest.mark.parametrize("variant", ["as_written", "fixed", "refit_keeps_streak"])
def test_prove_proves_the_restart_ends_at_four_shards_by_wf1(variant: str) -> None:
    spec = load_spec().variant(variant)
    result = check_eventually(
        spec, "controller", spec.property(PROPERTY), shards=4, policy=spec.default_policy(), max_depth=12, prove=True
    )
    assert result.status == "proved" and result.matches is True, result.note
    assert result.engine == "spacer" and "WF1 rule for 4 shards" in result.note
    assert "restart_loaded | restart_fails on shard 0" in result.note
    # Spacer's invariant, checked: a RESTARTING shard 0 is never left in a run that has ended.
    assert "phase" in result.invariant and "state[0]" in result.invariant, result.invariant
    assert "a background restart always ends" in result.assumptions


def test_check_reports_a_wf1_proof_as_holding_to_its_depth() -> None:
    """As a safety property's proof tried first is reported: `check` holds to its depth (every
    depth holds), where the lasso search alone stopped at depth 8."""
    spec = load_spec().variant("fixed")
    result = check_eventually(
        spec, "controller", spec.property(PROPERTY), shards=4, policy=spec.default_policy(), max_depth=12
    )
    assert (result.status, result.depth, result.engine) == ("holds_to_depth", 12, "spacer"), result.note
    assert result.invariant == ""  # shown by `prove`, as for safety


@pytest.mark.parametrize("shards", [1, 2, 4])
def test_a_restart_that_can_hang_is_never_proved(shards: int) -> None:
    spec = hanging_spec().variant("restart_hangs")
    prop = spec.property(PROPERTY)
    assert wf1_proof(spec, "controller", prop, shards=shards, policy=spec.default_policy(), rlimit=30_000_000) is None
    result = check_eventually(spec, "controller", prop, shards=shards, policy=spec.default_policy(), max_depth=8)
    assert result.status == "violated" and result.traces[0].loop_start is not None


def test_without_fairness_there_is_no_wf1_proof() -> None:
    text = re.sub(r"^fairness = .*\n", "", load_spec().source.text, flags=re.MULTILINE)
    spec = load_spec_text(text, "fleet_health.toml").variant("fixed")
    assert wf1_proof(spec, "controller", spec.property(PROPERTY), shards=2, policy=spec.default_policy()) is None


def test_one_action_of_the_group_is_enough_and_a_parametrised_one_by_a_witness() -> None:
    """`restart_fails` alone carries the proof (enabled whenever the shard is RESTARTING in a
    running fleet). So does `restart_loaded` alone, though it takes a parameter (a new
    address): "enabled" means "for some address", and premise 3 asks for one of a few
    witnesses instead (0 or 1: the shard's address is not both)."""
    alone = _with_fairness('{ weak = ["restart_fails"]').variant("fixed")
    proof = wf1_proof(alone, "controller", alone.property(PROPERTY), shards=4, policy=alone.default_policy())
    assert proof is not None and proof.group == "restart_fails on shard 0"
    loaded = _with_fairness('{ weak = ["restart_loaded"]').variant("fixed")
    prop = loaded.property(PROPERTY)
    proof = wf1_proof(loaded, "controller", prop, shards=4, policy=loaded.default_policy())
    assert proof is not None and proof.group == "restart_loaded on shard 0"


def test_a_parametrised_action_no_value_enables_carries_no_proof() -> None:
    """Where no address enables `restart_loaded` (its guard asks for one that both is and is
    not the shard's), its fairness promises nothing: the shard can stay RESTARTING while the
    rest of the fleet goes on. No witness passes premise 3, so the rule proves nothing, and the
    search finds the lasso. (Asking for the shard's own address would not do: that value
    exists, and the rule proves the restart ends, rightly.)"""
    spec_file = _with_fairness('{ weak = ["restart_loaded"]')
    text = spec_file.source.text.replace(
        'when = "phase != ENDED and i.state == RESTARTING and url != i.base_url"',
        'when = "phase != ENDED and i.state == RESTARTING and url != i.base_url and url == i.base_url"',
    )
    assert text != spec_file.source.text
    spec = load_spec_text(text, "fleet_health.toml").variant("fixed")
    prop = spec.property(PROPERTY)
    assert wf1_proof(spec, "controller", prop, shards=2, policy=spec.default_policy()) is None
    result = check_eventually(spec, "controller", prop, shards=2, policy=spec.default_policy(), max_depth=8)
    assert result.status == "violated", result.note


def test_a_fleet_level_group_carries_a_proof() -> None:
    """A DEAD shard is restarted: the supervisor's tick is one fleet-level action (no shard
    parameter), fair as a group of the fleet."""
    groups = (
        '{ weak = ["supervisor_tick"], doc = "the supervisor ticks" }, { weak = ["restart_loaded", "restart_fails"]'
    )
    text = _with_fairness(groups).source.text
    text += (
        "\n[properties.dead_is_restarted]\n"
        'doc = "a DEAD shard is restarted (or retired)"\nkind = "eventually"\nenvironments = ["controller"]\n'
        'when = "state == DEAD"\nassert = "state != DEAD"\nmessage = "a shard stayed DEAD forever"\n'
        'expect = { default = "holds" }\n'
    )
    spec = load_spec_text(text, "fleet_health.toml").variant("fixed")
    prop = spec.property("dead_is_restarted")
    proof = wf1_proof(spec, "controller", prop, shards=4, policy=spec.default_policy())
    assert proof is not None and proof.group == "supervisor_tick of the fleet"
    # And at one shard, where the graph is exhausted, the explicit search agrees.
    assert check_liveness(spec, "controller", prop, shards=1, policy=spec.default_policy()).status == "proved"


BREAKER_SERVICE = """
[environments.service]
doc = "requests succeed or fail on admitting breakers; an open breaker cools down"
fairness = [{ weak = ["cooling_ends"], doc = "an open breaker's cool-down always ends" }]

[environments.service.actions.request_fails]
params = "i: shard"
when = "i.state in ADMITS"
body = "record_failure(i)"

[environments.service.actions.request_succeeds]
params = "i: shard"
when = "i.state in ADMITS"
body = "record_success(i)"

[environments.service.actions.cooling_ends]
params = "i: shard"
when = "i.state == OPEN"
body = "cool_down(i)"

[properties.an_open_breaker_lets_a_trial_through]
doc = "An open breaker half-opens: it does not refuse calls forever."
kind = "eventually"
environments = ["service"]
when = "state == OPEN"
assert = "state != OPEN"
message = "a breaker stayed open forever"
expect = { base = "holds" }
"""


@pytest.mark.parametrize("shards", [1, 2, 4])
def test_another_state_machine_a_breaker_that_always_cools_down(shards: int) -> None:
    """The bundled example breaker with a service loop: an open breaker half-opens, under weak
    fairness of its cool-down. The premises hold in every state, so the invariant is `True`
    (shown by a plain solver; Spacer would answer with a quantified formula); the explicit
    search exhausts the graph and agrees. Without the fairness, a breaker can stay open while
    another's requests go on: a fair lasso, and no proof."""
    text = (bundled_spec_folder() / "examples" / "breaker.toml").read_text(encoding="utf-8") + BREAKER_SERVICE
    spec = load_spec_text(text, "breaker.toml").variant("base")
    prop = spec.property("an_open_breaker_lets_a_trial_through")
    proof = wf1_proof(spec, "service", prop, shards=shards, policy=spec.default_policy())
    assert proof is not None and proof.group == "cooling_ends on shard 0" and proof.invariant.text == "True"
    assert check_liveness(spec, "service", prop, shards=shards, policy=spec.default_policy()).status == "proved"
    unfair = load_spec_text(re.sub(r"^fairness = .*\n", "", text, flags=re.MULTILINE), "breaker.toml").variant("base")
    prop = unfair.property("an_open_breaker_lets_a_trial_through")
    assert wf1_proof(unfair, "service", prop, shards=shards, policy=unfair.default_policy()) is None
    if shards > 1:
        assert (
            check_liveness(unfair, "service", prop, shards=shards, policy=unfair.default_policy()).status == "violated"
        )


def _mutants() -> list[object]:
    spec_file = load_spec()
    chosen = [
        m
        for m in spec_mutants(spec_file, "fixed")
        if m.event in ("mark_restarting", "mark_loaded", "mark_restart_failed")
    ]
    return fast_slice(chosen, keep=range(0, len(chosen), 16))


@pytest.mark.parametrize("mutant", _mutants(), ids=lambda m: m.ident)
def test_a_wf1_proof_never_contradicts_the_exhaustive_search(mutant: object) -> None:
    """Over the single-point mutants of the restart path (one in sixteen in the fast lane), under
    the spec's fairness and under `restart_loaded`'s alone (a parametrised action: witnesses):
    where WF1 proves the restart ends at one or two shards, the explicit search finds no fair
    lasso (at one shard it exhausts the graph, so there it must prove it too)."""
    for spec_file in (load_spec(), _with_fairness('{ weak = ["restart_loaded"]')):
        try:
            text = spec_file.source.text + mutant.patch  # type: ignore[attr-defined]
            spec = load_spec_text(text, spec_file.path).variant("fixed")
        except LedgercheckError:
            pytest.skip("the mutant does not load")
        prop = spec.property(PROPERTY)
        for shards in (1, 2):
            if wf1_proof(spec, "controller", prop, shards=shards, policy=spec.default_policy()) is None:
                continue  # no proof: nothing to contradict
            explicit = check_liveness(
                spec, "controller", prop, shards=shards, policy=spec.default_policy(), max_states=30_000
            )
            assert explicit.status != "violated", (shards, explicit.note)
            if shards == 1:
                assert explicit.status == "proved", explicit.note


def test_the_mutants_include_both_answers() -> None:
    """The sweep above is not vacuous: some mutant of the restart path hangs (WF1 proves
    nothing, the search finds its lasso) and some keep the property (WF1 proves it). The
    mutants are tried in order until both answers have been seen."""
    spec_file = load_spec()
    seen = set()
    for mutant in spec_mutants(spec_file, "fixed"):
        if mutant.event != "mark_restart_failed":
            continue
        if {(True, "proved"), (False, "violated")} <= seen:
            break
        spec = load_spec_text(spec_file.source.text + mutant.patch, spec_file.path).variant("fixed")
        prop = spec.property(PROPERTY)
        proof = wf1_proof(spec, "controller", prop, shards=1, policy=spec.default_policy())
        explicit = check_liveness(spec, "controller", prop, shards=1, policy=spec.default_policy())
        seen.add((proof is not None, explicit.status))
    assert (True, "proved") in seen and (False, "violated") in seen, seen


def test_a_member_with_no_witness_proves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A group whose members' being enabled cannot be stated (no witness for a parameter's
    kind) gives no proof, rather than premise 3 over an empty disjunction."""
    from ledgercheck.model import wf1

    monkeypatch.setattr(wf1, "_witnessed", lambda enc, inst: [])
    spec = load_spec().variant("fixed")
    assert wf1_proof(spec, "controller", spec.property(PROPERTY), shards=2, policy=spec.default_policy()) is None
