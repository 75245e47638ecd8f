"""Proofs from a smaller fleet (`model.smallfleet`, `spacer._from_small_fleet`): an invariant
Spacer finds on one or two shards, placed on every shard of the fleet asked, is a proof only
once it checks there; a fact of the small fleet alone is refused, and Spacer on the whole
fleet decides."""

from __future__ import annotations

from pathlib import Path

import pytest
import z3

from ledgercheck.model import bmc, cone, smallfleet, spacer
from ledgercheck.model.encoding import Encoding, encoding_for
from ledgercheck.model.result import Status
from ledgercheck.model.spec import load_spec_text

BREAKER = Path(spacer.__file__).resolve().parent.parent / "spec" / "examples" / "breaker.toml"

# The example breaker with a caller that counts its calls: `failures <= calls` holds on any
# fleet, `calls <= failures` on one shard only (a call to another shard breaks it).
TALLY = '''
[environments.ops]
doc = "one caller that counts its calls, three at most"

[environments.ops.vars]
calls = { type = "int", initial = 0 }

[environments.ops.actions.fail]
params = "i: shard"
when = "calls < 3"
body = """
record_failure(i)
calls = calls + 1
"""

[properties.failures_are_calls]
kind = "invariant"
environments = ["ops"]
assert = "failures <= calls"
message = "a shard counted more failures than there were calls"
expect = { base = "holds" }

[properties.every_call_on_this_shard]
kind = "invariant"
environments = ["ops"]
assert = "calls <= failures"
message = "a call went to another shard"
expect = { base = "violated" }
'''


@pytest.fixture(scope="module")
def tally():
    return load_spec_text(BREAKER.read_text() + TALLY, "tally.toml").variant()


def _whole_fleet_asked(monkeypatch) -> list[int]:
    """The fleet sizes Spacer was asked on as a whole (not through a small fleet)."""
    asked: list[int] = []
    real = spacer._horn

    def spy(enc, *args, **kwargs):
        asked.append(enc.shards)
        return real(enc, *args, **kwargs)

    monkeypatch.setattr(spacer, "_horn", spy)
    return asked


def test_an_invariant_of_one_shard_proves_a_larger_fleet(tally, monkeypatch):
    asked = _whole_fleet_asked(monkeypatch)
    prop = tally.property("failures_are_calls")
    for shards in (2, 4):
        answer, invariant, _ = spacer.spacer_proof(tally, "ops", prop, shards, tally.default_policy(), certify=True)
        assert answer == z3.sat and "calls" in invariant, shards
    assert asked == [], "Spacer was asked on the whole fleet"


def test_a_fact_of_one_shard_alone_is_refused(tally, monkeypatch):
    """Spacer proves `calls <= failures` on one shard; placed on two or four it does not check,
    and Spacer on the whole fleet finds it broken."""
    prop = tally.property("every_call_on_this_shard")
    answer, _, _ = spacer.spacer_proof(tally, "ops", prop, 1, tally.default_policy())
    assert answer == z3.sat
    checked: list[bool] = []
    real = spacer._certified

    def spy(*args):
        checked.append(real(*args))
        return checked[-1]

    monkeypatch.setattr(spacer, "_certified", spy)
    asked = _whole_fleet_asked(monkeypatch)
    for shards in (2, 4):
        answer, _, _ = spacer.spacer_proof(tally, "ops", prop, shards, tally.default_policy())
        assert answer == z3.unsat, shards
    assert checked == [False, False], "the one-shard invariant was not tried, or was believed"
    assert asked == [2, 4]


def _named(enc: Encoding, term) -> set[str]:
    """The conjuncts of an invariant over `enc`'s bound variables, with the variables' names."""
    named = [z3.Const(str(enc.template[k]).replace("@cur", ""), enc.template[k].sort()) for k in enc.keys]
    shown = z3.substitute_vars(term, *named)
    parts = shown.children() if z3.is_and(shown) else [shown]
    return {str(part) for part in parts}


@pytest.mark.parametrize("focus", [0, None])
def test_every_placement_of_the_small_fleet(tally, focus):
    """A two-shard invariant relating shard 1 to shard 0 and the fleet's value, placed on four
    shards: with a focus shard, shard 0 stays and shard 1 goes to each of the other three; with
    none, the ordered pair goes to every pair of distinct shards."""
    policy = tally.default_policy()
    small, big = (encoding_for(tally, tally.environment("ops"), shards, policy) for shards in (2, 4))
    at = {key: z3.Var(i, small.template[key].sort()) for i, key in enumerate(small.keys)}
    body = at[(1, "failures")] + at[(0, "failures")] <= at[(None, "calls")]
    placed = smallfleet.instantiate(small, big, body, focus)
    pairs = [(0, j) for j in (1, 2, 3)] if focus == 0 else [(i, j) for i in range(4) for j in range(4) if i != j]
    assert _named(big, placed) == {f"failures[{j}] + failures[{i}] <= calls" for i, j in pairs}


def test_no_counterpart_no_candidate(tally):
    """A small fleet's variable the large fleet's cone lacks gives no candidate (not a guess)."""
    prop = tally.property("failures_are_calls")
    policy = tally.default_policy()
    small = cone.sliced_encoding(tally, "ops", prop, 1, policy)
    big = cone.sliced_encoding(tally, "ops", prop, 4, policy)
    big.keys = [key for key in big.keys if key != (None, "calls")]
    body = z3.Var(small.keys.index((None, "calls")), small.template[(None, "calls")].sort()) >= 0
    assert smallfleet.instantiate(small, big, body, 0) is None


def test_the_ledger_at_eight_shards_from_one(spec_file, monkeypatch):
    """On the coupled controller fleet a budget property Spacer needs seconds for at eight
    shards is proved from one shard's invariant, checked on all eight: the `ledger`
    environment's, tried first, and without it the controller's own; refused that check, the
    proof falls back to Spacer on the whole fleet, which agrees (at four shards, where it is
    quick)."""
    spec = spec_file.variant("fixed")
    prop = spec.property("restarts_stay_within_budget")
    asked = _whole_fleet_asked(monkeypatch)
    answer, _, scope = spacer.spacer_proof(spec, "controller", prop, 8, spec.default_policy(), certify=True)
    assert (answer, scope, asked) == (z3.sat, spacer.Scope(every_size=False, found_on=1, found_in="ledger"), [])
    spacer._FOUND.clear()
    every = spacer._small_fleets

    def own_fleets(spec, env, *rest):
        return [fleet for fleet in every(spec, env, *rest) if fleet[0] == env]

    monkeypatch.setattr(spacer, "_small_fleets", own_fleets)
    answer, invariant, scope = spacer.spacer_proof(spec, "controller", prop, 8, spec.default_policy(), certify=True)
    assert (answer, scope, asked) == (z3.sat, spacer.Scope(every_size=False, found_on=1), [])
    assert scope.phrase(8) == "8 shards, from an invariant found on 1 shard, placed on every shard and checked"
    assert "restarts_started" in invariant
    monkeypatch.setattr(spacer, "_certified", lambda *args: False)
    spacer._FOUND.clear()
    answer, _, _ = spacer.spacer_proof(spec, "controller", prop, 4, spec.default_policy())
    assert answer == z3.sat and asked == [4]


def test_a_controller_property_from_the_ledgers_invariant(spec_file, monkeypatch):
    """Where the controller's own one-shard invariant does not check on four shards, the
    `ledger` environment's (the ledger's API under its callers' contracts, which the
    controller's flows follow) is placed on every shard and checked there: a proof in a
    tenth of a second, where the bounded search took one and a half."""
    spec = spec_file.variant("fixed")
    prop = spec.property("restart_budget_counts_genuine_failures")
    asked = _whole_fleet_asked(monkeypatch)
    count = bmc.proof_first_rlimit(4, 12, bitvectors=True)
    answer, invariant, scope = spacer.spacer_proof(
        spec, "controller", prop, 4, spec.default_policy(), rlimit=count, certify=True
    )
    assert (answer, scope, asked) == (z3.sat, spacer.Scope(every_size=False, found_on=1, found_in="ledger"), [])
    assert scope.phrase(4) == (
        "4 shards, from an invariant found on 1 shard in the ledger environment, placed on every shard and checked"
    )
    assert "genuine_deaths[0]" in invariant


def test_an_environment_that_may_call_anything_is_asked_first(spec_file):
    """The small fleets in the order they are asked: for the controller, the `ledger`
    environment's one shard (under the callers' contracts) before its own fleets; for the
    ledger, its own fleets before the controller's one shard."""
    spec = spec_file.variant("fixed")
    prop = spec.property("restarts_stay_within_budget")
    assert spacer._small_fleets(spec, "controller", prop, 0, False, 4, None) == [
        ("ledger", 1, True),
        ("controller", 1, False),
        ("controller", 2, False),
    ]
    assert spacer._small_fleets(spec, "controller", prop, 0, False, 4, 1000) == [
        ("ledger", 1, True),
        ("controller", 1, False),
    ]
    assert spacer._small_fleets(spec, "ledger", prop, 0, True, 4, None) == [
        ("ledger", 1, True),
        ("ledger", 2, True),
        ("controller", 1, False),
    ]
    assert spacer._small_fleets(spec, "controller", prop, 0, False, 1, None) == []


CONDEMNS_THE_INNOCENT = (
    "        if s.suspected:\n            condemn_silent_participant(",
    "        if not s.suspected and s.state == STALE:\n            condemn_silent_participant(",
)


def test_a_controller_outside_the_contracts_is_not_proved_by_the_ledgers_invariant(spec_file, monkeypatch):
    """A controller that calls the ledger outside its callers' contracts (the single-suspect
    rule applied to a shard that is not suspected) reaches states the `ledger` environment's
    invariant excludes: the candidate is placed, refused by the check, and the bounded
    search prints the violation, while the `ledger` environment still proves the property."""
    text = Path(spec_file.path).read_text()
    assert text.count(CONDEMNS_THE_INNOCENT[0]) == 1
    spec = load_spec_text(text.replace(*CONDEMNS_THE_INNOCENT), "innocent.toml").variant("fixed")
    prop = spec.property("single_suspect_rule_needs_own_evidence")
    placed: list[str] = []
    real = smallfleet.instantiate

    def spy(small, big, body, focus):
        placed.append(small.environment.name)
        return real(small, big, body, focus)

    monkeypatch.setattr(smallfleet, "instantiate", spy)
    policy = spec.default_policy()
    ledger = bmc.check_property(spec, "ledger", prop, shards=1, policy=policy, max_depth=12, max_traces=1)
    assert (ledger.status, ledger.engine) == (Status.HOLDS_TO_DEPTH, "spacer")
    placed.clear()
    found = bmc.check_property(spec, "controller", prop, shards=4, policy=policy, max_depth=12, max_traces=1)
    assert "ledger" in placed, "the ledger's invariant was offered"
    assert (found.status, found.engine) == (Status.VIOLATED, "bmc") and found.traces
