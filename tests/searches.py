"""Comparing what two explicit-state searches found (the full one and the reduced one)."""

from __future__ import annotations

from typing import Any

from ledgercheck.model.explicit import is_sampled


def searched(result: Any) -> str:
    """A result's status as a search outcome: `unknown` because the search tried a sample of
    an int parameter's values and found nothing (an unreduced search reads every parameter,
    since no cone leaves one out) reads as `holds_to_depth`, what the search established over
    the values it tried, so it compares with a reduced search that needs no sample."""
    if is_sampled(result):
        return "holds_to_depth"
    return str(result.status)
