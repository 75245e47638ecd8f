"""The README's claims table is what the proofs say, and spec mutants are classified right."""

from __future__ import annotations

from pathlib import Path

import pytest
from ledger_fixture import BUNDLED_SPEC

from ledgercheck.model import findings, mutate
from ledgercheck.model.claims import BEGIN, END, claims_table, splice
from ledgercheck.model.spec import load_spec

README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.mark.slow
def test_readme_claims_table_is_up_to_date():
    current = README.read_text(encoding="utf-8")
    assert BEGIN in current and END in current
    mismatches: list[str] = []
    table = claims_table(load_spec(BUNDLED_SPEC), mismatches=mismatches)
    assert not mismatches, f"claims whose verdicts differ from the spec's expectations: {mismatches}"
    assert splice(current, table) == current, "the evidence changed, the verdicts did not: `ledgercheck claims --check`"


@pytest.mark.slow
def test_readme_findings_table_is_up_to_date():
    current = README.read_text(encoding="utf-8")
    table = findings.findings_table(load_spec(BUNDLED_SPEC))
    assert "`wedged_engine_is_taken_out`" in table and "`refit_keeps_streak` (proved" in table
    updated = splice(current, table, findings.BEGIN, findings.END)
    assert updated == current, "the findings table is stale: `ledgercheck findings --check README.md` says why"


def test_mutants_cover_every_operator_and_are_valid_specs():
    spec_file = load_spec()
    mutate._remember_guards(spec_file)
    spec = spec_file.variant("fixed")
    mutants = mutate.enumerate_mutants(spec)
    kinds = {m.kind for m in mutants}
    assert kinds >= {
        "drop an update",
        "drop a reset",
        "negate a condition",
        "negate a guard",
        "weaken a guard",
        "off by one",
        "swap a target state",
    }
    assert len({m.ident for m in mutants}) == len(mutants)
    assert mutants == mutate.enumerate_mutants(spec), "deterministic"
    assert all(m.diff().startswith("---") for m in mutants)


@pytest.mark.slow
def test_mutant_outcomes():
    from ledgercheck.codegen.render import plan_tests

    spec_file = load_spec()
    reference = mutate.reference_variant(spec_file)
    assert reference == "refit_keeps_streak"  # the variant every property holds in
    mutants = {m.ident: m for m in mutate.spec_mutants(spec_file, reference)}

    def find(prefix: str) -> mutate.Mutant:
        return next(m for ident, m in mutants.items() if ident.startswith(prefix))

    verdict = find("mark_loaded:drop a reset:state_before_partial = None")
    streak = find("mark_loaded:drop a reset:consecutive_reported_failures = 0")
    harmless = find("mark_weights_partial:weaken a guard")
    tests = [(name, test) for name, (_, _, group) in plan_tests(spec_file).items() for test in group]
    checks = [
        ("controller", "restarted_engine_refits_healthy", "shipped"),
        ("ledger", "refit_starts_streaks_afresh", "shipped"),
    ]
    outcomes = [
        mutate.evaluate_mutant(spec_file, reference, m, shards=2, depth=8, tests=tests, checks=checks)
        for m in (verdict, streak, harmless)
    ]
    # Undoing the half of the fix that clears the verdict brings the bug back: a property catches it.
    assert outcomes[0].status == "killed_by_property"
    # In `fixed` the next refit reset the streak anyway and only the generated tests noticed;
    # in the reference variant a refit keeps a streak, so the reloaded engine comes back
    # SUSPECT and a property catches it.
    assert outcomes[1].status == "killed_by_property"
    # Neither of these two checks looks at partial refits of absent shards.
    assert outcomes[2].status == "survived"


@pytest.mark.slow
def test_claims_refuse_to_write_a_regression_into_the_readme(tmp_path: Path) -> None:
    """A claim whose verdict no longer matches the spec's expectation is a regression: `claims
    --write` refuses (exit 1, naming it) and leaves the README as it was."""
    from ledgercheck.model.cli import main

    text = Path(load_spec().path).read_text(encoding="utf-8")
    head, sep, tail = text.partition("[properties.restart_budget_counts_genuine_failures]")
    assert sep
    expect_line = next(line for line in tail.splitlines() if line.startswith("expect = "))
    broken = head + sep + tail.replace(expect_line, 'expect = { default = "holds" }', 1)
    spec = tmp_path / "spec.toml"
    spec.write_text(broken, encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(README.read_text(encoding="utf-8"), encoding="utf-8")
    before = readme.read_bytes()
    assert main(["claims", str(spec), "--write", str(readme)]) == 1
    assert readme.read_bytes() == before


@pytest.mark.parametrize("command", ["claims", "findings"])
def test_a_table_whose_verdicts_the_budget_cut_short_is_unknown_and_not_written(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Verdicts a spent budget left undecided are not changed verdicts: `claims` and `findings`
    write nothing, name them UNKNOWN (not MISMATCH) and exit 3, never 0 or 1."""
    from ledgercheck.model.cli import main

    readme = tmp_path / "README.md"
    readme.write_text(README.read_text(encoding="utf-8"), encoding="utf-8")
    before = readme.read_bytes()
    assert main([command, "--write", str(readme), "--time-budget", "0.001"]) == 3
    out = capsys.readouterr().out
    assert readme.read_bytes() == before
    assert "verdicts not reached" in out and "  UNKNOWN   " in out and "MISMATCH" not in out, out


@pytest.mark.parametrize("after", [0, 1])
def test_a_mutant_whose_checks_the_budget_cut_short_is_not_judged(after: int) -> None:
    """A mutant whose property checks ran out of budget (before any, or after the first
    look) is not judged `survived` (its checks answered unknown, not holds): evaluating it
    raises `BudgetExhausted`, and `mutate` stops with exit 3 instead of starting more checks.
    In a worker the budget counts that worker's own memory, so the parent's budget alone
    cannot be trusted to catch it."""
    from budgets import Tripping

    from ledgercheck.model import budget
    from ledgercheck.model.budget import BudgetExhausted

    spec_file = load_spec()
    reference = mutate.reference_variant(spec_file)
    harmless = next(
        m
        for m in mutate.spec_mutants(spec_file, reference)
        if m.ident.startswith("mark_weights_partial:weaken a guard")
    )
    checks = [("ledger", "refit_starts_streaks_afresh", "shipped")]
    with budget.using(Tripping(after)), pytest.raises(BudgetExhausted, match="a mutant's checks"):
        mutate.evaluate_mutant(spec_file, reference, harmless, shards=2, depth=8, tests=[], checks=checks)
