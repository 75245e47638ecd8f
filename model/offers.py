"""Invariants the checks of one unit of work offer one another.

A run checks each property in every environment it applies to, as separate checks. Where
a property holds in the environment whose callers may call anything (the `ledger`), the
invariant Spacer proved it with there is often one of the environments built on it too
(the `controller`'s flows call the same ledger): placed on their fleet and checked there by
a plain solver, it settles their proof without Spacer being asked again. `model.runs`
checks a property's environments as one unit, in one process, inside `offering()`;
`model.spacer` offers what it proves there and tries what was offered first.

An offer is only a candidate (see `model.smallfleet`): what decides is the check on the
fleet asked, so an offer can cost a check a little time and never change its answer. The
offers live for one unit only, so a unit answers the same on one worker or many, first or
last in its process. This module holds them without importing Z3: a run that never asks
Spacer never loads it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Placeable:
    """An invariant as `smallfleet.instantiate` places it on another fleet: its body over
    Z3's bound variables in the order of `keys` (the state of the cone it was proved on),
    then the symbolic policy's where `symbolic_policy`."""

    keys: tuple[tuple[int | None, str], ...]
    symbolic_policy: bool
    body: Any
    environment: str

    @property
    def shards(self) -> int:
        """How many shards the cone it was proved on has (at least one)."""
        return max(1, len({shard for shard, _ in self.keys if shard is not None}))


@dataclass
class Offers:
    """What one unit's checks have proved so far, and the answers its later checks drew from
    it (kept here, not in Spacer's memory of its own answers, which outlives the unit)."""

    invariants: dict[tuple[int, str], list[Placeable]] = field(default_factory=dict)
    answers: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    def offer(self, spec: object, prop: str, placeable: Placeable) -> None:
        kept = self.invariants.setdefault((id(spec), prop), [])
        if all(p.environment != placeable.environment or p.keys != placeable.keys for p in kept):
            kept.append(placeable)

    def offered(self, spec: object, prop: str, environment: str) -> list[Placeable]:
        """The invariants offered for `prop` by the unit's checks in other environments."""
        return [p for p in self.invariants.get((id(spec), prop), []) if p.environment != environment]


_ACTIVE: ContextVar[Offers | None] = ContextVar("ledgercheck_offers", default=None)


def active() -> Offers | None:
    """The offers of the unit being checked, or None outside one."""
    return _ACTIVE.get()


@contextlib.contextmanager
def offering() -> Iterator[Offers]:
    """A unit of checks: what they prove is offered to the ones after them, until it ends."""
    offers = Offers()
    token = _ACTIVE.set(offers)
    try:
        yield offers
    finally:
        _ACTIVE.reset(token)
