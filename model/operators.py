"""The arithmetic, comparisons and negation of the spec language, written once for both
semantics: Python's operators mean the same on plain values (the executable model,
`model.semantics.ConcreteBackend`) and on Z3 terms (the encoding, `model.encoding`), so
each backend inherits them from here instead of spelling them out again.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
"""The spec's comparison operators (the parser admits no other)."""


class Operators:
    """`compare`, `arith` and `neg` of a backend, by Python's operators on its values."""

    def compare(self, op: str, left: Any, right: Any) -> Any:
        return COMPARISONS[op](left, right)

    def arith(self, op: str, left: Any, right: Any) -> Any:
        return left + right if op == "+" else left - right

    def neg(self, operand: Any) -> Any:
        return -operand


__all__ = ["COMPARISONS", "Operators"]
