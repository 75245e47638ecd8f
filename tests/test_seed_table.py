"""The seed's trace on the executable model, cell by cell (ledger.md section 4).

Shard 1 of 4, shipped defaults. After every column of the acceptance table the model's
record of shard 1 must match the table exactly, for both variants of the spec.
"""

from __future__ import annotations

from typing import Any

import pytest
from ledger_fixture import BUNDLED_SPEC

from ledgercheck.model.interpreter import build_api
from ledgercheck.model.spec import load_spec

SHARD = 1
OLD_URL = f"http://shard-{SHARD}"
NEW_URL = "http://shard-1-restarted"

COLUMNS = ("2 failures", "abort", "condemned", "restart + loaded", "refit lands", "1 failure")

# Rows of the acceptance table, one tuple per row, one cell per column.
# "old"/"new" in the base_url row name the original and the restarted engine's address.
TABLE: dict[str, dict[str, tuple[Any, ...]]] = {
    "as_written": {
        "state": ("SUSPECT", "STALE", "DEAD", "STALE", "SUSPECT", "DEAD"),
        "state_before_partial": ("None", "SUSPECT", "SUSPECT", "SUSPECT", "None", "None"),
        "consecutive_reported_failures": (2, 2, 2, 2, 2, 3),
        "restart_attempts": (0, 0, 0, 1, 1, 1),
        "base_url": ("old", "old", "old", "new", "new", "new"),
    },
    "fixed": {
        "state": ("SUSPECT", "STALE", "DEAD", "STALE", "HEALTHY", "SUSPECT"),
        "state_before_partial": ("None", "SUSPECT", "SUSPECT", "None", "None", "None"),
        "consecutive_reported_failures": (2, 2, 2, 0, 0, 1),
        # restart_attempts and base_url are not split by variant in the table: same as written.
        "restart_attempts": (0, 0, 0, 1, 1, 1),
        "base_url": ("old", "old", "old", "new", "new", "new"),
    },
}


def _seed_steps(ledger: Any) -> list[Any]:
    """The seed's events on shard 1, grouped by table column."""
    return [
        lambda: (
            ledger.report_failure(SHARD, RuntimeError("generation failed")),
            ledger.report_failure(SHARD, RuntimeError("generation failed")),
        ),
        lambda: ledger.mark_weights_partial(SHARD),
        lambda: ledger.condemn_silent_participant(SHARD, reason="silent during weight transfer"),
        lambda: (ledger.mark_restarting(SHARD), ledger.mark_loaded(SHARD, base_url=NEW_URL)),
        lambda: ledger.report_refit(SHARD, weight_version=1),
        lambda: ledger.report_failure(SHARD, RuntimeError("generation failed")),
    ]


def _new_ledger(variant: str) -> Any:
    api = build_api(load_spec(BUNDLED_SPEC).variant(variant))
    return api.Ledger(shard_count=4, policy=api.Policy(), base_urls=[f"http://shard-{i}" for i in range(4)])


def _expected(row: str, cell: Any) -> Any:
    if row == "state_before_partial" and cell == "None":
        return None
    if row == "base_url":
        return {"old": OLD_URL, "new": NEW_URL}[cell]
    return cell


def _observed(record: Any, row: str) -> Any:
    value = getattr(record, row)
    if row in ("state", "state_before_partial") and value is not None:
        return value.name  # compare by enum name, exactly as the table writes it
    return value


@pytest.mark.parametrize("variant", sorted(TABLE))
def test_seed_trace_matches_acceptance_table(variant: str) -> None:
    table = TABLE[variant]
    ledger = _new_ledger(variant)
    steps = _seed_steps(ledger)
    assert len(steps) == len(COLUMNS)
    for column, (name, step) in enumerate(zip(COLUMNS, steps, strict=True)):
        step()
        record = ledger.snapshot()[SHARD]
        for row, cells in table.items():
            expected = _expected(row, cells[column])
            observed = _observed(record, row)
            assert observed == expected, f"{variant}: after {name!r}, {row} is {observed!r}, table says {expected!r}"
        assert ledger.state_of(SHARD) == table["state"][column]


@pytest.mark.parametrize("variant", sorted(TABLE))
def test_seed_trace_leaves_other_shards_alone(variant: str) -> None:
    ledger = _new_ledger(variant)
    for step in _seed_steps(ledger):
        step()
    for index, record in enumerate(ledger.snapshot()):
        if index == SHARD:
            continue
        assert record.state == "HEALTHY"
        assert record.base_url == f"http://shard-{index}"
        assert record.consecutive_reported_failures == 0
        assert record.restart_attempts == 0


@pytest.mark.parametrize("variant", sorted(TABLE))
def test_seed_trace_refit_records_weight_version(variant: str) -> None:
    ledger = _new_ledger(variant)
    steps = _seed_steps(ledger)
    for step in steps[: COLUMNS.index("refit lands") + 1]:
        step()
    assert ledger.snapshot()[SHARD].weight_version == 1
