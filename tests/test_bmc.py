"""The bounded model checker on the bundled spec: verdicts, shortest traces, distinct views."""

from __future__ import annotations

import pytest
from tiers import fast_slice

from ledgercheck.model import bmc, engines
from ledgercheck.model.spec import load_spec

HEADLINE = "no_condemnation_by_inherited_streak"
SEED_PATH = (
    "report_failure",
    "report_failure",
    "mark_weights_partial",
    "condemn_silent_participant",
    "mark_restarting",
    "mark_loaded",
    "report_refit",
    "report_failure",
)


def focus_events(trace) -> tuple[str, ...]:
    return tuple(c.event for s in trace.steps[1:] for c in s.calls if c.shard == trace.focus)


def check(spec_file, variant, prop, env="controller", depth=12, traces=3, shards=4, lax=True):
    spec = spec_file.variant(variant)
    return bmc.check_property(
        spec,
        env,
        spec.properties[prop],
        shards=shards,
        policy=spec.default_policy(),
        max_depth=depth,
        max_traces=traces,
        lax=lax,
    )


@pytest.fixture(scope="module")
def headline_as_written(spec_file):
    """The headline on as_written (controller, 4 shards, depth 12), six traces: one search
    shared by the tests that read its verdict and its traces."""
    return check(spec_file, "as_written", HEADLINE, traces=6)


def test_as_written_violates_headline_with_the_seed_path_among_the_shortest(headline_as_written):
    result = headline_as_written
    assert result.status == "violated"
    assert result.depth == 8
    shortest = [t for t in result.traces if t.depth == result.depth]
    assert SEED_PATH in [focus_events(t) for t in shortest]
    seed = next(t for t in shortest if focus_events(t) == SEED_PATH)
    last = seed.steps[-1].after["shards"][seed.focus]
    assert last["state"] == "DEAD" and last["consecutive_reported_failures"] == 3
    assert seed.steps[-1].after["history"]["shards"][seed.focus]["own_request_streak"] == 1


@pytest.mark.slow
def test_fixed_holds_headline_to_depth_20(spec_file):
    result = check(spec_file, "fixed", HEADLINE, depth=20, traces=1)
    assert result.status == "holds_to_depth"
    assert result.depth == 20
    assert result.traces == []


def test_traces_are_shortest_first_and_distinct_under_the_view(spec_file, headline_as_written):
    spec = spec_file.variant("as_written")
    result = headline_as_written
    depths = [t.depth for t in result.traces]
    assert depths == sorted(depths)
    views = [bmc.view_of(t, spec, t.focus) for t in result.traces]
    assert len(set(views)) == len(views)


def test_ledger_environment_lists_every_way_into_dead(spec_file):
    # the traces within the callers' contracts (the lax ones: the next test)
    result = check(spec_file, "as_written", HEADLINE, env="ledger", depth=8, traces=20, lax=False)
    assert result.status == "violated" and result.depth == 8 and result.lax_traces == []
    shortest = [t for t in result.traces if t.depth == 8]
    killers = {focus_events(t)[3] for t in shortest if len(focus_events(t)) == 8}
    assert {"condemn_silent_participant", "record_actor_death"} <= killers
    assert all(t.classification == "reachable" for t in result.traces)


def test_ledger_environment_reports_lax_traces_apart(spec_file):
    result = check(spec_file, "as_written", HEADLINE, env="ledger", depth=8, traces=2)
    assert result.lax_traces, "a call outside the callers' contract reaches the bug sooner"
    lax = result.lax_traces[0]
    assert lax.classification == "lax_guard"
    assert lax.depth < result.depth
    assert any(not c.contract_ok for s in lax.steps[1:] for c in s.calls)


def _variant_environment_property() -> list[tuple[str, str, str]]:
    spec_file = load_spec()
    return [
        (variant, env, name)
        for variant in ("as_written", "fixed")
        for env in spec_file.variant(variant).environments
        for name in spec_file.variant(variant).properties
    ]


def _controller_safety() -> list[tuple[str, str]]:
    """The properties the reductions may reorder or permute: controller, per shard, safety."""
    spec_file = load_spec()
    return [
        (variant, name)
        for variant in ("as_written", "fixed")
        for name, prop in spec_file.variant(variant).properties.items()
        if prop.applies_to("controller") and not prop.fleet and prop.kind != "eventually"
    ]


# The fast lane keeps one case of each sweep: the headline on as_written.
VERDICTS = _variant_environment_property()
SAFETY = _controller_safety()


@pytest.mark.parametrize(
    ("variant", "env", "name"), fast_slice(VERDICTS, [VERDICTS.index(("as_written", "controller", HEADLINE))])
)
def test_every_verdict_matches_its_expectation(spec_file, variant, env, name):
    spec = spec_file.variant(variant)
    result = engines.check_property(
        spec, env, spec.properties[name], shards=3, policy=spec.default_policy(), max_depth=10, max_traces=1, lax=False
    )
    if result.status == "not_applicable":
        return
    assert result.matches is True, f"{variant}/{env}/{name}: {result.status} (expected {result.expected})"


def test_policy_changes_the_shortest_trace(spec_file):
    spec = spec_file.variant("as_written")
    prop = spec.properties[HEADLINE]
    policy = spec.resolve_policy({"unhealthy_threshold": 2})
    result = bmc.check_property(spec, "controller", prop, shards=2, policy=policy, max_depth=10, max_traces=1)
    assert result.status == "violated"
    assert result.depth == 7
    result = bmc.check_property(
        spec,
        "controller",
        prop,
        shards=2,
        policy=spec.resolve_policy({"unhealthy_threshold": 1}),
        max_depth=10,
        max_traces=1,
    )
    assert result.status == "holds_to_depth"


def test_the_solver_and_the_interpreter_agree_on_every_found_trace(spec_file):
    # extract compares the Z3 model with the interpreter's replay at every step and raises on a mismatch.
    for variant in ("as_written", "fixed"):
        spec = spec_file.variant(variant)
        prop = spec.properties["suspicion_survives_abort"]
        checker = bmc.Checker(spec, "controller", prop, 3, spec.default_policy())
        checker.solver.add(checker.enc.initial(checker.states[0].state))
        for _ in range(6):
            checker.deepen()
        assert checker.solver.check() == bmc.z3.sat
        trace = checker.extract(checker.solver.model(), 6)
        assert trace.depth == 6


@pytest.mark.slow
def test_symbolic_policy_region_of_the_headline(spec_file):
    spec = spec_file.variant("as_written")
    result = bmc.check_property(
        spec, "controller", spec.properties[HEADLINE], shards=2, policy=None, max_depth=10, max_traces=1
    )
    assert result.status == "violated"
    region = result.region
    assert region is not None
    # A threshold of 1 condemns on the shard's own first failure; the shortest violation for a
    # threshold T is T + 5 steps (one inherited failure, abort, condemn, restart, load, refit, T-1 own).
    assert region["unhealthy_threshold"] == {"violated": [2, 3, 4, 5], "holds_to_depth": [1, 6, 7, 8]}
    assert region["healthy_threshold"]["holds_to_depth"] == []
    assert region["max_restart_attempts_per_shard"]["holds_to_depth"] == [0]
    assert "unhealthy_threshold in {2..5}" in result.region_text()
    # the depth the region was searched to (it said 0: set only where a proof was asked)
    assert "(holds to depth 10 for {1, 6..8})" in result.region_text()


def test_symbolic_policy_fixed_holds_everywhere(spec_file):
    spec = spec_file.variant("fixed")
    region = bmc.policy_region(spec, "controller", spec.properties[HEADLINE], 2, 8)
    assert all(not split["violated"] for split in region.values())


def test_slicing_keeps_a_call_a_step_property_watches_even_when_it_changes_nothing(spec_file):
    # A mutant whose mark_restart_failed does nothing: nothing the property reads changes, but
    # the call itself breaks "a failed restart leaves the shard DEAD". The cone of influence
    # must keep that action.
    from ledgercheck.model.spec import load_spec_text

    patch = '\n[[variants.fixed.patch]]\nevent = "mark_restart_failed"\nreplace = "state = DEAD"\ninsert = "pass"\n'
    spec = load_spec_text(spec_file.source.text + patch, "fleet_health.toml").variant("fixed")
    prop = spec.properties["failed_restart_is_dead"]
    result = bmc.Checker(spec, "ledger", prop, 2, spec.default_policy(), contracts=False).run(4, 1)
    assert result.status == "violated" and result.depth == 1


@pytest.mark.slow
def test_a_proof_racing_the_bounded_search_ends_it(spec_file, monkeypatch):
    """With race_proof, Spacer runs beside the bounded search; a property that holds is
    proved (for every depth) before the search reaches depth 20, and one that fails still
    gets its shortest trace from the bounded search. (The proof tried before the search,
    which would settle this property with no race, is left out: tests/test_proof_first.py.)"""
    monkeypatch.setattr(bmc, "_proof_first", lambda *args, **kwargs: None)
    spec = spec_file.variant("fixed")
    prop = spec.properties[HEADLINE]
    result = bmc.check_property(
        spec, "controller", prop, shards=3, policy=spec.default_policy(), max_depth=20, max_traces=1, race_proof=True
    )
    assert (result.status, result.engine, result.depth) == ("proved", "spacer", 20)
    assert result.invariant and "while the bounded search had shown it up to depth" in result.note
    assert result.matches is True
    broken = spec_file.variant("as_written")
    result = bmc.check_property(
        broken, "controller", prop, shards=3, policy=spec.default_policy(), max_depth=20, max_traces=1, race_proof=True
    )
    assert (result.status, result.depth, result.engine) == ("violated", 8, "bmc")


def test_no_proof_races_a_search_the_spec_expects_to_end_on_a_trace(spec_file, monkeypatch):
    """Where the spec expects a violation, race_proof starts no second process: the search
    finds the trace alone, and a property that holds against that expectation comes back
    `holds_to_depth`, a mismatch all the same."""
    import dataclasses

    def no_race(*args, **kwargs):
        raise AssertionError("a proof race was started")

    monkeypatch.setattr(bmc, "_ProofRace", no_race)
    for variant, expect, answer in (
        ("as_written", None, ("violated", "bmc")),
        ("fixed", "violated", ("holds_to_depth", "bmc")),
    ):
        spec = spec_file.variant(variant)
        prop = spec.properties[HEADLINE]
        if expect is not None:  # the spec doubted: it expects the fix to fail
            prop = dataclasses.replace(prop, expect={variant: expect})
        result = bmc.check_property(
            spec, "controller", prop, shards=2, policy=spec.default_policy(), max_depth=8, max_traces=1, race_proof=True
        )
        assert (result.status, result.engine) == answer, variant
        assert result.matches is (expect is None), variant


def test_the_commuting_steps_of_different_shards_are_the_ones_reordered(spec_file):
    spec = spec_file.variant("fixed")
    checker = bmc.Checker(spec, "controller", spec.properties[HEADLINE], 2, spec.default_policy(), por=True)
    term = checker.enc.local_shard_term()
    import z3

    local = {}
    for inst in checker.enc.instances:
        value = z3.simplify(z3.substitute(term, (checker.enc.act, z3.IntVal(inst.index, checker.ctx))))
        local[(inst.action.name, tuple(inst.shards.values()))] = value.as_long()
    assert local[("request_fails", (1,))] == 1 and local[("probe_answers", (0,))] == 0
    # Fleet-level actions touch every shard (and the controller's phase): never reordered.
    assert local[("supervisor_tick", ())] == -1 and local[("recovery", ())] == -1
    fleet = [p for p in spec.properties.values() if p.fleet]
    for prop in fleet:
        assert bmc.Checker(spec, "controller", prop, 2, spec.default_policy(), por=True).local_shard is None


@pytest.mark.parametrize(("variant", "name"), fast_slice(SAFETY, [SAFETY.index(("as_written", HEADLINE))]))
def test_partial_order_reduction_changes_no_verdict_and_no_shortest_length(spec_file, variant, name):
    spec = spec_file.variant(variant)
    prop = spec.properties[name]
    answers = []
    for por in (False, True):
        checker = bmc.Checker(spec, "controller", prop, 3, spec.default_policy(), por=por)
        result = checker.run(9, 1)
        answers.append((result.status, result.depth))
    assert answers[0] == answers[1], prop.name


@pytest.mark.parametrize(("variant", "name"), fast_slice(SAFETY, [SAFETY.index(("as_written", HEADLINE))]))
def test_symmetry_breaking_changes_no_verdict_and_no_shortest_length(spec_file, variant, name):
    spec = spec_file.variant(variant)
    prop = spec.properties[name]
    answers = []
    for breaking in (False, True):
        checker = bmc.Checker(spec, "controller", prop, 4, spec.default_policy(), symmetry_breaking=breaking)
        assert (checker.uses is not None) is breaking
        result = checker.run(9, 1)
        answers.append((result.status, result.depth))
    assert answers[0] == answers[1], prop.name
