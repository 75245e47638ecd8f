"""How the Z3 encoding writes a number: an unbounded integer, or a bit-vector of a width
proven wide enough.

The spec's numbers are mathematical integers, and the encoding's default is Z3's `Int`.
A bounded search over a control-heavy transition system is much faster bit-blasted to SAT
than in linear arithmetic (bench/RESULTS.md), and within a bounded depth the values a
search can reach are bounded too: `model.widths` proves, by running the spec over
intervals, how many bits every integer term of the unrolling needs. A search given that
width answers exactly as the unbounded one would (the same verdicts, the same shortest
lengths); only the choice among equally short traces may differ.

Selectors (the action chosen at a step, a trace view's position, a bit mask of events)
are never mixed with the spec's data, so each gets a width of its own (`selector`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledgercheck.model.speccache import OFF

if TYPE_CHECKING:  # Z3 loads only when a term is made (a cached answer needs none)
    import z3


@dataclass(frozen=True)
class Numbers:
    """Unbounded integers (`width` None) or `width`-bit two's-complement bit-vectors, whose
    signed comparisons and wrapping sums agree with the integers' on every value the
    width was proven to hold."""

    width: int | None = None

    @property
    def bounded(self) -> bool:
        return self.width is not None

    def sort(self, ctx: z3.Context | None) -> z3.SortRef:
        import z3

        return z3.IntSort(ctx) if self.width is None else z3.BitVecSort(self.width, ctx)

    def value(self, number: int, ctx: z3.Context | None) -> Any:
        import z3

        return z3.IntVal(number, ctx) if self.width is None else z3.BitVecVal(number, self.width, ctx)

    def var(self, name: str, ctx: z3.Context | None) -> Any:
        import z3

        return z3.Const(name, self.sort(ctx))

    def selector(self, largest: int) -> Numbers:
        """Numbers for a selector that takes the values -1..`largest` (unbounded stays so)."""
        return self if self.width is None else Numbers(signed_bits(largest))

    def __str__(self) -> str:
        return "Int" if self.width is None else f"BitVec({self.width})"


INTEGERS = Numbers()
"""The default: Z3's unbounded integers."""


SWITCH = "LEDGERCHECK_BITVECTORS"
"""`LEDGERCHECK_BITVECTORS=off` keeps Z3's integers in every search (to compare the two)."""
DISABLED = f"{SWITCH}=off"


def bitvectors_enabled() -> bool:
    """Whether a bounded search may write its numbers as bit-vectors (the default)."""
    return os.environ.get(SWITCH, "").strip().lower() not in OFF


def signed_bits(largest: int) -> int:
    """The bits of a two's-complement number that holds -`largest`-1..`largest`."""
    return max(2, largest.bit_length() + 1)


def number_of(raw: Any) -> int:
    """A numeral of a Z3 model as a Python int (a bit-vector read as signed)."""
    import z3

    if z3.is_bv_value(raw):
        return int(raw.as_signed_long())
    return int(raw.as_long())


__all__ = ["DISABLED", "INTEGERS", "SWITCH", "Numbers", "bitvectors_enabled", "number_of", "signed_bits"]
