"""An invariant found on a smaller fleet, placed on every shard of the fleet asked.

Spacer's work grows quickly with the fleet: at 8 shards of the coupled `controller`
environment some of the bundled properties take it 10-17 s, while on one or two shards it
answers in tenths of a second, and the invariant it finds there usually speaks of the focus
shard, one other shard and the fleet's values. So `model.spacer` first asks Spacer on a
fleet of one shard, then two, and hands the invariant found there to `instantiate`, which
writes it for every placement of the small fleet's shards among the large fleet's (the
property's focus shard always on itself; the other shards are interchangeable, as the spec
treats them alike) and conjoins the placements.

The conjunction is only a candidate: the proof is `spacer._certified` showing, on the fleet
asked, that it holds initially, is closed under the transition and excludes every bad state,
each by a plain solver. A fact true of one shard alone (a fleet-wide counter equal to the
shard's own) fails that check and the proof falls back to Spacer on the whole fleet, so the
route can cost a little time and never a wrong answer. (It is the idea of generalising
invariants from small instances, as I4 and Ivy's tooling do, with the generalisation checked
on the concrete instance instead of argued for every size.)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Protocol

import z3

from ledgercheck.model.encoding import Encoding

SIZES = (1, 2)
"""The small fleets asked, in order: the first whose invariant checks on the fleet asked
is the proof."""

MAX_PLACEMENTS = 256
"""At most this many placements are conjoined (two shards placed among 16 are 240 with a
focus shard, 16 x 15 without): a larger candidate would cost its check more than Spacer."""


class Shape(Protocol):
    """What `instantiate` reads of the fleet an invariant was found on: its state variables,
    in the order of the invariant's bound variables, and whether the policy's follow them (an
    `Encoding`, or an invariant another check offered, `model.offers.Placeable`)."""

    @property
    def keys(self) -> Sequence[tuple[int | None, str]]: ...

    @property
    def symbolic_policy(self) -> bool: ...


def instantiate(small: Shape, big: Encoding, body: Any, focus: int | None) -> Any | None:
    """`body`, an invariant over `small`'s state (Z3's bound variables in the order of
    `small.keys`, then the symbolic policy's), written for every placement of `small`'s
    shards among `big`'s, as one term over `big`'s state in the same form (bound variables
    in the order of `big.keys`, then the policy's), in `big`'s context. None where a state
    variable of the small fleet's cone has no counterpart in the large fleet's, or where the
    placements are too many (`MAX_PLACEMENTS`)."""
    pinned = {focus} if focus is not None else set()
    movable = sorted({shard for shard, _ in small.keys if shard is not None and shard not in pinned})
    targets = sorted({shard for shard, _ in big.keys if shard is not None and shard not in pinned})
    placements = list(itertools.permutations(targets, len(movable)))
    if not placements or len(placements) > MAX_PLACEMENTS:
        return None
    position = {key: i for i, key in enumerate(big.keys)}
    policy_at = len(big.keys)
    policy = [z3.Var(policy_at + j, var.sort()) for j, var in enumerate(big.policy_vars.values())]
    try:
        term = body.translate(big.ctx)
        parts = []
        for placement in placements:
            where: dict[int | None, int | None] = dict(zip(movable, placement, strict=True))
            where.update({shard: shard for shard in pinned} | {None: None})
            bound = []
            for shard, name in small.keys:
                key = (where[shard], name)
                if key not in position:
                    return None
                bound.append(z3.Var(position[key], big.template[key].sort()))
            parts.append(z3.substitute_vars(term, *bound, *(policy if small.symbolic_policy else ())))
    except z3.Z3Exception:  # a sort that differs between the two fleets: no candidate
        return None
    return parts[0] if len(parts) == 1 else z3.And(parts)


__all__ = ["MAX_PLACEMENTS", "SIZES", "instantiate"]
