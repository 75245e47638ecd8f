"""Where the tool's own tests find the ledger they exercise: a pinned copy of the bundled spec
(`tests/fixtures/ledger/spec/fleet_health.toml`) and the tests generated from it.

The tool's tests must not change their verdict when a ledger engineer edits
`spec/fleet_health.toml`: an edit of the ledger is judged by `ledgercheck ci` (one failure per
mismatch, `tests/test_bundled_spec.py`), not by dozens of unrelated self-test failures. So
every self-test reads this copy; `tests/conftest.py` makes it the spec every command uses when
none is named (`LEDGERCHECK_SPEC`). Refresh it when the tool should be tested on a newer ledger:

    cp spec/fleet_health.toml tests/fixtures/ledger/spec/
    ledgercheck gen tests/fixtures/ledger/spec/fleet_health.toml
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEDGER_DIR = ROOT / "tests" / "fixtures" / "ledger"
LEDGER_SPEC = LEDGER_DIR / "spec" / "fleet_health.toml"
LEDGER_GENERATED = LEDGER_DIR / "generated_tests"
BUNDLED_SPEC = ROOT / "spec" / "fleet_health.toml"
BUNDLED_GENERATED = ROOT / "generated_tests"
LEDGER_EXAMPLES = ROOT / "spec" / "examples"

BUDGET_REFILL = """
[events.record_healthy_period]
call = "record_healthy_period(i)"
ignore_when = "state != HEALTHY"
requires = "state == HEALTHY"
body = "restart_attempts = 0"
"""
"""A ledger engineer's change (a trial's), appended to the ledger: a healthy period refills a
slot's restart budget, so a slot restarts past it, first at depth 15, past the verdicts' 12."""
