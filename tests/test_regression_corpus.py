"""Every regression of the corpus (tests/regressions.py) is seen by a property, or is
documented as unseen and really is.

A regression is seen when the checks `ledgercheck ci` judges a spec by find a verdict that
differs from the spec's expectation for one of the properties the corpus names, in the
environment it names. That is checked for every regression, by those checks alone (a few
seconds each). What `ci` and `gen` then make of a mismatch is the same whatever the regression:
`ci` exits 1 with a MISMATCH line naming the property in its summary, and `gen` refuses,
leaving generated_tests/ byte-identical. That is checked end to end on a representative few
(the whole `ci` once per regression was 27 of the 33 minutes the README's test command
took).

An unseen regression must change no verdict at all, in any environment: every check runs for
each of them. If one starts being seen, move it to SEEN.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from regressions import SEEN, SPEC, UNSEEN, Regression, apply, locate, run_checker, write_regressed
from tiers import fast_slice

from ledgercheck.codegen.gate import verdict_request
from ledgercheck.model import executor
from ledgercheck.model.result import Result
from ledgercheck.model.runs import DEFAULT_DEPTH, DEFAULT_TRACES, outcome, run_checks
from ledgercheck.model.spec import load_spec_text

ALL = SEEN + UNSEEN

# The regressions `ci` and `gen` run on end to end: the first seen one, the seen one whose
# mismatch only a second property names, and the first unseen one.
END_TO_END_SEEN = [SEEN[0], next(r for r in SEEN if len(r.properties) > 1)]
END_TO_END_UNSEEN = [UNSEEN[0]]


def _verdicts(
    regression: Regression, workers: executor.ExecutorConfig, traces: int = 1, **narrowed: object
) -> list[Result]:
    """The verdicts `ci` would reach on the regressed spec (narrowed to `narrowed`'s
    properties or environment), on `workers`. One trace per check by default: a verdict (the
    status, and the length of the shortest trace) is reached with the first trace, and `ci`
    collects DEFAULT_TRACES for the tests it generates (`test_one_trace_reaches_cis_verdicts`)."""
    spec_file = load_spec_text(apply(SPEC.read_text(encoding="utf-8"), regression), f"{regression.name}.toml")
    request = verdict_request(spec_file, DEFAULT_DEPTH, traces).overlay(**narrowed)
    return run_checks(request, config=workers)


def _mismatches(results: list[Result]) -> set[tuple[str, str]]:
    return {(r.environment, r.property) for r in results if outcome(r) == "mismatch"}


def test_corpus_is_well_formed():
    """Unique names, at least 22 seen regressions, each line found exactly once, each
    regressed spec a valid spec, and every named property and environment exists."""
    from ledgercheck.model.spec import load_spec

    text = SPEC.read_text(encoding="utf-8")
    spec = load_spec(str(SPEC)).variant()
    assert len(SEEN) >= 22
    assert len({r.name for r in ALL}) == len(ALL)
    for regression in ALL:
        locate(text, regression)  # raises unless the line occurs exactly once
        regressed = apply(text, regression)
        assert regressed != text
        load_spec_text(regressed, f"{regression.name}.toml")  # raises SpecError (file:line:col) if invalid
        assert regression.environment in spec.environments
        assert set(regression.properties) <= set(spec.properties), regression.name
        assert bool(regression.properties) == (regression in SEEN), regression.name


def test_a_line_that_is_not_unique_is_refused():
    repeated = Regression("repeated", 'ignore_when = "state == RETIRED"', "", (), "ledger", "four events share it")
    with pytest.raises(ValueError, match="occurs 4 times"):
        locate(SPEC.read_text(encoding="utf-8"), repeated)


@pytest.mark.parametrize("regression", fast_slice(SEEN), ids=[r.name for r in SEEN])
def test_a_named_property_sees_the_regression(regression: Regression):
    """The checks of the named properties in the named environment (every variant, as `ci`
    runs them) find a verdict the spec does not expect for at least one of them."""
    narrowed = {"properties": regression.properties, "environment": regression.environment}
    results = _verdicts(regression, executor.SERIAL, **narrowed)
    assert {r.property for r in results} == set(regression.properties)
    seen = {prop for env, prop in _mismatches(results) if env == regression.environment}
    found = [(r.variant, r.property, str(r.status)) for r in results]
    assert seen, f"{regression.name}: no named property mismatches: {found}"


@pytest.mark.parametrize("scope", fast_slice(["named properties", "every property"]))
def test_one_trace_reaches_cis_verdicts(scope: str):
    """The checks above collect one trace each; `ci` collects DEFAULT_TRACES. On a regression
    that breaks a property, in an environment where the broken checks have more than one trace,
    both reach the same verdict for every check: status, expectation and shortest length. The
    fast lane compares the checks the test above runs (the named properties), the full suite
    every check of the environment."""
    regression = SEEN[0]
    narrowed: dict[str, object] = {"environment": regression.environment}
    if scope == "named properties":
        narrowed["properties"] = regression.properties
    one = _verdicts(regression, executor.ExecutorConfig(), **narrowed)
    full = _verdicts(regression, executor.ExecutorConfig(), traces=DEFAULT_TRACES, **narrowed)
    assert any(len(r.traces) > 1 for r in full), "no check had a second trace: the comparison shows nothing"
    assert _mismatches(one)
    assert [(r.variant, r.property, r.status, r.expected, r.depth) for r in one] == [
        (r.variant, r.property, r.status, r.expected, r.depth) for r in full
    ]


@pytest.mark.slow
@pytest.mark.parametrize("regression", UNSEEN, ids=[r.name for r in UNSEEN])
def test_no_property_sees_the_unseen_edit(regression: Regression):
    """No verdict changes, in any environment (the behaviour did change: that is what the
    generated tests and `mutate` are for)."""
    results = _verdicts(regression, executor.ExecutorConfig())  # every core, as `ci` runs them
    assert {r.environment for r in results} >= {"ledger", "controller"}
    assert not _mismatches(results), f"{regression.name} is seen now: {sorted(_mismatches(results))}"


@pytest.mark.slow
@pytest.mark.parametrize("regression", END_TO_END_SEEN, ids=[r.name for r in END_TO_END_SEEN])
def test_ci_names_the_regression_and_gen_refuses_it(regression: Regression, tmp_path: Path):
    """`ledgercheck ci` exits 1 with the property named in its summary (before any detail);
    `ledgercheck gen` refuses (exit 1) and leaves generated_tests/ byte-identical."""
    run = run_checker(write_regressed(regression, tmp_path))
    assert run.ci_code == 1, run.ci_output
    head = run.summary()
    assert ": FAILED, " in head[0] and head[1].lstrip().startswith("MISMATCH"), head  # the mismatches come first
    # the stale tests say to fix the mismatches first, not to run `gen` (which refuses)
    assert not any("run `ledgercheck gen`" in line for line in head), head
    seen = {prop for env, prop in run.mismatches() if env == regression.environment}
    assert seen & set(regression.properties), f"{regression.name}: mismatches {sorted(run.mismatches())}"
    assert run.gen_code == 1, run.gen_output
    assert "differ from the spec's expectations" in run.gen_output
    assert run.generated_unchanged


@pytest.mark.slow
@pytest.mark.parametrize("regression", END_TO_END_UNSEEN, ids=[r.name for r in END_TO_END_UNSEEN])
def test_ci_and_gen_let_an_unseen_edit_through(regression: Regression, tmp_path: Path):
    """No MISMATCH line (ci may still report drift: the behaviour changed), and `gen` writes."""
    run = run_checker(write_regressed(regression, tmp_path))
    assert not run.mismatches(), f"{regression.name} is seen now: {sorted(run.mismatches())}"
    assert run.gen_code == 0, run.gen_output
