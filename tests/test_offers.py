"""Invariants one check offers the next (`model.offers`): a property's checks in its
environments run as one unit, and the invariant that proves it in the `ledger` environment
is placed on the controller's fleet and checked there before Spacer is asked anything. An
offer that does not check changes no answer, and no offer outlives its unit."""

from __future__ import annotations

from pathlib import Path

import pytest
import z3
from tiers import fast_slice

from ledgercheck.model import bmc, offers, runs, spacer
from ledgercheck.model.result import Status
from ledgercheck.model.spec import load_spec_text


def _spacer_searches(monkeypatch) -> list[int]:
    """The fleet sizes Spacer searched on (whole fleets and small ones alike)."""
    searched: list[int] = []
    real = spacer._solve

    def spy(enc, *args, **kwargs):
        searched.append(enc.shards)
        return real(enc, *args, **kwargs)

    monkeypatch.setattr(spacer, "_solve", spy)
    return searched


def test_the_ledgers_proof_settles_the_controllers_without_a_search(spec_file, monkeypatch):
    spec = spec_file.variant("fixed")
    prop = spec.property("restart_budget_counts_genuine_failures")
    policy = spec.default_policy()
    searched = _spacer_searches(monkeypatch)
    with offers.offering() as unit:
        answer, _, _ = spacer.spacer_proof(spec, "ledger", prop, 4, policy, certify=True)
        assert answer == z3.sat and [p.environment for p in unit.offered(spec, prop.name, "controller")] == ["ledger"]
        searched.clear()
        answer, invariant, scope = spacer.spacer_proof(spec, "controller", prop, 4, policy, certify=True)
    assert (answer, searched) == (z3.sat, []), "Spacer searched although the ledger's invariant was offered"
    assert scope == spacer.Scope(every_size=False, found_on=1, found_in="ledger")
    assert "genuine_deaths[0]" in invariant
    # The answer drawn from the offer was the unit's: a later question, alone, searches again.
    assert offers.active() is None
    assert not any(hit[1].offered for hit in spacer._FOUND.values())
    answer, _, alone = spacer.spacer_proof(spec, "controller", prop, 4, policy, certify=True)
    assert answer == z3.sat and searched, "the unit's answer outlived it"
    assert alone == scope


CONDEMNS_THE_INNOCENT = (
    "        if s.suspected:\n            condemn_silent_participant(",
    "        if not s.suspected and s.state == STALE:\n            condemn_silent_participant(",
)


def test_an_offer_that_does_not_check_changes_no_verdict(spec_file, monkeypatch):
    """A controller that calls the ledger outside its callers' contracts breaks a property
    the `ledger` environment proves: in one unit, the ledger's invariant is offered, placed,
    refused by the check on the controller's fleet, and the bounded search prints the same
    violation as the check alone."""
    text = Path(spec_file.path).read_text()
    assert text.count(CONDEMNS_THE_INNOCENT[0]) == 1
    spec = load_spec_text(text.replace(*CONDEMNS_THE_INNOCENT), "innocent.toml").variant("fixed")
    prop = spec.property("single_suspect_rule_needs_own_evidence")
    policy = spec.default_policy()
    checked: list[bool] = []
    real = spacer._certified

    def spy(*args):
        checked.append(real(*args))
        return checked[-1]

    def controller():
        return bmc.check_property(spec, "controller", prop, shards=4, policy=policy, max_depth=12, max_traces=1)

    alone = controller()
    spacer._FOUND.clear()
    monkeypatch.setattr(spacer, "_certified", spy)
    with offers.offering() as unit:
        ledger = bmc.check_property(spec, "ledger", prop, shards=4, policy=policy, max_depth=12, max_traces=1)
        assert (ledger.status, ledger.engine) == (Status.HOLDS_TO_DEPTH, "spacer")
        assert unit.offered(spec, prop.name, "controller"), "the ledger's proof offered nothing"
        checked.clear()
        found = controller()
    assert checked and checked[0] is False, "the offer was not placed and checked first"
    assert (found.status, found.engine) == (Status.VIOLATED, "bmc")
    assert [t.steps for t in found.traces] == [t.steps for t in alone.traces]


def test_a_unit_is_one_propertys_environments_the_ledger_first(spec_file):
    plan = runs._plan(runs.CheckRequest(spec_file))
    groups = runs._groups(plan, range(len(plan.jobs)))
    assert sorted(i for group in groups for i in group) == list(range(len(plan.jobs)))
    for group in groups:
        jobs = [plan.jobs[i] for i in group]
        assert len({(variant, name) for variant, name, _ in jobs}) == 1, jobs
        assert [environment for _, _, environment in jobs] in (["ledger"], ["controller"], ["ledger", "controller"])
    assert any(len(group) == 2 for group in groups)
    # A spec that lists the controller first still has the ledger checked first in a unit:
    # it is the environment whose proofs the other can use.
    swapped = plan.jobs[::-1]
    reversed_plan = runs._Plan(plan.request, plan.fleets, swapped)
    for group in runs._groups(reversed_plan, range(len(swapped))):
        environments = [swapped[i][2] for i in group]
        assert environments == sorted(environments, key=lambda e: e != "ledger"), environments


@pytest.mark.parametrize("jobs", fast_slice([1, 2], keep=(1,)))  # the fast lane keeps the two workers
def test_a_unit_answers_the_same_wherever_it_runs(spec_file, jobs):
    """The offers are per unit: a unit checked alone (the controller's checks without the
    ledger's) answers what it answers inside a whole run, on one worker or two."""
    from ledgercheck.model import executor

    request = runs.CheckRequest(spec_file, variants=("fixed",))
    whole = runs.run_checks(request, config=executor.ExecutorConfig(jobs=jobs))
    controller = runs.run_checks(request.overlay(environment="controller"), config=executor.ExecutorConfig(jobs=1))
    by_job = {(r.property, r.environment): r for r in whole}
    compared = [r for r in controller if (r.property, "controller") in by_job]  # the rest do not apply there
    assert len(compared) >= 5
    for result in compared:
        mate = by_job[(result.property, "controller")]
        assert (result.status, result.depth, [t.steps for t in result.traces]) == (
            mate.status,
            mate.depth,
            [t.steps for t in mate.traces],
        ), result.property
