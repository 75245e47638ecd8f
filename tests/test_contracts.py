"""The callers the spec models keep the contracts the ledger relies on (`Spec.contract_property`).

A red-team trial edited the controller's refit flow to report a refit for every shard not
retired, where the ledger's `report_refit` requires a STALE one: the ledger then returns a DEAD
shard to SUSPECT or HEALTHY, and `ci` passed, every verdict as expected (the properties checked
where any call may be made count only the calls the contracts allow, and the controller's
properties do not read what that call undid). The derived property sees it, in every engine
alike, and `ci` fails on it.
"""

from __future__ import annotations

import pytest
from ledger_fixture import LEDGER_EXAMPLES, LEDGER_SPEC

from ledgercheck.model import engines, ir
from ledgercheck.model.errors import UsageError
from ledgercheck.model.result import Status
from ledgercheck.model.spec import CONTRACTS_PROPERTY, PropertyKind, SpecFile, load_spec, load_spec_text

STALE_ONLY = """for s in shards:
    if s.state == STALE:
        report_refit(s, weight_version=trainer_version)"""
EVERY_SHARD = """for s in shards:
    if s.state != RETIRED:
        report_refit(s, weight_version=trainer_version)"""


@pytest.fixture(scope="module")
def broken() -> SpecFile:
    text = LEDGER_SPEC.read_text(encoding="utf-8")
    assert STALE_ONLY in text
    return load_spec_text(text.replace(STALE_ONLY, EVERY_SHARD), "fleet_health.toml")


def _check(spec_file: SpecFile, variant: str, engine_auto: bool, prove: bool = False):
    from ledgercheck.model.runs import CheckRequest, run_checks

    request = CheckRequest(
        spec_file,
        variants=(variant,),
        properties=(CONTRACTS_PROPERTY,),
        policy=spec_file.variant(variant).default_policy(),
        max_depth=6,
        max_traces=1,
        lax=False,
        prove=prove,
        engine="auto" if engine_auto else "z3",
    )
    (result,) = run_checks(request)
    return result


def test_the_property_is_derived_from_the_spec(spec_file: SpecFile) -> None:
    """One step property per variant, over every event with a `requires`, in the environments
    whose actions call one (not the one that may call anything: there the contracts are
    assumed); no property of the spec file's, so no loop over them meets it."""
    spec = spec_file.variant("fixed")
    prop = spec.property(CONTRACTS_PROPERTY)
    assert CONTRACTS_PROPERTY not in spec.properties
    assert prop.kind == PropertyKind.STEP and prop.environments == ("controller",)
    assert set(prop.on) == {name for name, event in spec.events.items() if event.requires is not None}
    assert prop.expect == {"fixed": "holds"}
    assert prop.check == ir.LocalRef(ir.CONTRACT_KEPT, ir.BOOL)
    assert "report_refit: state == STALE" in prop.assert_text


def test_a_spec_with_no_contract_to_keep_says_so() -> None:
    breaker = load_spec(str(LEDGER_EXAMPLES / "breaker.toml")).variant()
    assert breaker.contract_property() is None
    with pytest.raises(UsageError, match="no environment's actions call an event with a requires"):
        breaker.property(CONTRACTS_PROPERTY)


def test_the_controller_keeps_the_contracts(spec_file: SpecFile) -> None:
    result = _check(spec_file, "as_written", engine_auto=True, prove=True)
    assert (result.status, result.matches) == (Status.PROVED, True), result.note


@pytest.mark.parametrize("engine_auto", [pytest.param(False, marks=pytest.mark.slow), True], ids=["z3", "auto"])
def test_a_flow_that_calls_outside_a_contract_is_found(broken: SpecFile, engine_auto: bool) -> None:
    """The shortest trace is four steps whichever engine searches: a shard goes DEAD or is
    left HEALTHY, and refit_lands reports a refit for it (the interpreter and the encoding
    read the same `requires`). The call the trace breaks on is outside the contract."""
    result = _check(broken, "fixed", engine_auto)
    assert (result.status, result.matches) == (Status.VIOLATED, False)
    (trace,) = result.traces
    assert trace.depth == 4
    last = trace.steps[-1]
    assert last.action == "refit_lands"
    outside = [call for call in last.calls if not call.contract_ok]
    assert outside and {call.event for call in outside} == {"report_refit"}
    assert all(call.contract_ok for step in trace.steps[1:-1] for call in step.calls)


def test_the_engines_agree_on_where_the_contract_holds(broken: SpecFile) -> None:
    """The bounded search and the explicit one, on the broken flow at depth 3 (one short of
    its shortest trace) and on the bundled one: the same verdicts."""
    spec = broken.variant("fixed")
    prop = spec.property(CONTRACTS_PROPERTY)
    from ledgercheck.model.explicit import explicit_check

    for depth, expected in ((3, Status.HOLDS_TO_DEPTH), (4, Status.VIOLATED)):
        asked = {"shards": spec.default_shards, "policy": spec.default_policy(), "max_depth": depth, "max_traces": 1}
        answers = {
            engines.check_property(spec, "controller", prop, lax=False, **asked).status,
            explicit_check(spec, "controller", prop, timeout=None, **asked).status,
        }
        assert answers == {expected}, depth


@pytest.mark.slow  # 10 s: three variants, each first tries the proof a violation refutes
def test_ci_fails_on_a_call_outside_a_contract(broken: SpecFile) -> None:
    """The step names the action, the call, the contract and the step, once per variant."""
    from ledgercheck.model import ci

    step = ci._contracts(broken, None)
    assert step.status == ci.FAILED
    assert len(step.failures) == 3, step.failures
    line = next(f for f in step.failures if f.startswith("CONTRACT  fixed (controller): "))
    assert "refit_lands() calls report_refit(" in line and "outside its requires (state == STALE)" in line, line
    assert line.endswith("step 4 of the shortest trace (4 steps)"), line
    assert "breaks callers_keep_the_contracts" in step.detail


def test_ci_passes_the_bundled_flows(spec_file: SpecFile) -> None:
    from ledgercheck.model import ci

    step = ci._contracts(spec_file, None)
    assert (step.status, step.failures) == (ci.PASSED, [])
    assert step.headline == "the calls of controller keep every requires: proved in 3 of 3 check(s)"
