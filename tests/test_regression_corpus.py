"""Every regression of the corpus (tests/regressions.py) is seen by a property, or is
documented as unseen and really is.

A regression is seen when checking its spec exits 1 with a MISMATCH line that names one of
the properties the corpus expects, in the environment it expects. The unseen ones must
produce no mismatch at all in any environment: if one starts being seen, move it to SEEN.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from regressions import SEEN, SPEC, UNSEEN, Regression, apply, locate, run_checker, write_regressed

ALL = SEEN + UNSEEN


def test_corpus_is_well_formed():
    """Unique names, at least 22 seen regressions, each line found exactly once, each
    regressed spec a valid spec, and every named property and environment exists."""
    from model.spec import load_spec, load_spec_text

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


@pytest.mark.slow
@pytest.mark.parametrize("regression", SEEN, ids=[r.name for r in SEEN])
def test_some_property_sees_the_regression(regression: Regression, tmp_path: Path):
    run = run_checker(write_regressed(regression, tmp_path))
    assert run.exit_code() == 1, {env: code for env, (code, _) in run.runs.items()}
    seen = {prop for env, prop in run.mismatches() if env == regression.environment}
    assert seen & set(regression.properties), f"{regression.name}: mismatches {sorted(run.mismatches())}"


@pytest.mark.slow
@pytest.mark.parametrize("regression", UNSEEN, ids=[r.name for r in UNSEEN])
def test_no_property_sees_the_unseen_edit(regression: Regression, tmp_path: Path):
    run = run_checker(write_regressed(regression, tmp_path))
    assert run.exit_code() == 0, f"{regression.name} is seen now: {sorted(run.mismatches())}"
    assert not run.mismatches()
