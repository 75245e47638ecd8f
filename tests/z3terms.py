"""Z3 term building for the tests that walk thousands of concrete steps (the agreement of the
encoding with the interpreter): the same C calls as `z3.substitute` and a declaration's
`__call__`, without their checks in Python of every argument's sort, which cost more than
the calls themselves (Z3's C API checks the sorts too, and raises on a mismatch)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from z3.z3 import _to_expr_ref
from z3.z3core import Z3_mk_app, Z3_substitute
from z3.z3types import Ast


def _array(terms: Sequence[Any]) -> Any:
    out = (Ast * len(terms))()
    for index, term in enumerate(terms):
        out[index] = term.as_ast()
    return out


def substitute(term: Any, pairs: Sequence[tuple[Any, Any]]) -> Any:
    """`z3.substitute(term, *pairs)`, the same term."""
    froms = _array([a for a, _ in pairs])
    tos = _array([b for _, b in pairs])
    ctx = term.ctx
    return _to_expr_ref(Z3_substitute(ctx.ref(), term.as_ast(), len(pairs), froms, tos), ctx)


def apply(decl: Any, args: Sequence[Any]) -> Any:
    """`decl(*args)` for arguments that already have the declared sorts, the same term."""
    ctx = decl.ctx
    return _to_expr_ref(Z3_mk_app(ctx.ref(), decl.as_ast(), len(args), _array(args)), ctx)
