"""The defaults of `ledgercheck conform`, apart from the modules that use them, so that the
command line can show them without importing the conformance machinery (every command
builds the whole parser, `conform`'s included)."""

from __future__ import annotations

DEFAULT_DEPTH = 4
"""Every call sequence up to this many calls is enumerated (`--depth`)."""

ENUMERATION_SHARDS = 2
"""The fleet the enumeration drives (`--shards` changes it)."""

DEFAULT_RANDOM = 1000
"""Random calls in all, over the seeded random traces (`--random`)."""

COUNTEREXAMPLE_DEPTH = 9
"""The depth the checker's counterexamples are searched to, for `conform`."""

COUNTEREXAMPLE_TRACES = 2
"""Distinct counterexamples per property the checker hands to `conform`."""

RUN_CALLS = 100
"""How long each trace of `run_scripts` is, in calls: its pattern repeated to that length, far
past the enumeration's depth (a counter a class stops at 8, 12 or 32; a fourth redrive)."""

CALL_TIMEOUT = 10.0
"""Seconds one call of the implementation (and the reading of its state after it) may take
before it is named as a call that does not return (`--call-timeout`; `model.conformance.
deadline`): three orders of magnitude above what a state machine's call takes, so that a
loaded machine never reads as a hang, and short enough that nobody waits for the budget."""


def searched_by_default(default_shards: int) -> dict[str, int]:
    """What `conform` searches with where a spec's `[conform]` leaves a setting out, by the
    table's names: what `ci` holds the spec's settings to, and `ci --base` a base's."""
    return {"depth": DEFAULT_DEPTH, "random": DEFAULT_RANDOM, "shards": default_shards, "run_calls": RUN_CALLS}


__all__ = [
    "CALL_TIMEOUT",
    "COUNTEREXAMPLE_DEPTH",
    "COUNTEREXAMPLE_TRACES",
    "DEFAULT_DEPTH",
    "DEFAULT_RANDOM",
    "ENUMERATION_SHARDS",
    "RUN_CALLS",
    "searched_by_default",
]
