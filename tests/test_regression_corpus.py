"""Every regression of the corpus (tests/regressions.py) is seen by a property, or is
documented as unseen and really is.

A regression is seen when `ledgercheck ci` on it exits 1 with a MISMATCH line in its summary
that names one of the properties the corpus expects, in the environment it expects, and
`ledgercheck gen` refuses it, leaving generated_tests/ byte-identical. The unseen ones must
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
    from ledgercheck.model.spec import load_spec, load_spec_text

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
def test_ci_names_the_regression_and_gen_refuses_it(regression: Regression, tmp_path: Path):
    """`ledgercheck ci` exits 1 with the property named in its summary (before any detail);
    `ledgercheck gen` refuses (exit 1) and leaves generated_tests/ byte-identical."""
    run = run_checker(write_regressed(regression, tmp_path))
    assert run.ci_code == 1, run.ci_output
    head = run.summary()
    assert ": FAILED, " in head[0] and head[1].lstrip().startswith("MISMATCH"), head  # the mismatches come first
    seen = {prop for env, prop in run.mismatches() if env == regression.environment}
    assert seen & set(regression.properties), f"{regression.name}: mismatches {sorted(run.mismatches())}"
    assert run.gen_code == 1, run.gen_output
    assert "differ from the spec's expectations" in run.gen_output
    assert run.generated_unchanged


@pytest.mark.slow
@pytest.mark.parametrize("regression", UNSEEN, ids=[r.name for r in UNSEEN])
def test_no_property_sees_the_unseen_edit(regression: Regression, tmp_path: Path):
    """No verdict changes (ci may still report drift: the behaviour did change; that is what
    the generated tests and `mutate` are for)."""
    run = run_checker(write_regressed(regression, tmp_path))
    assert not run.mismatches(), f"{regression.name} is seen now: {sorted(run.mismatches())}"
    assert run.gen_code == 0, run.gen_output
