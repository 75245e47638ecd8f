"""Speed tiers of a large parametrisation: the fast lane (`pytest -m "not slow"`) keeps a
representative slice of the cases, the full suite runs them all."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest


def fast_slice(cases: Iterable[Any], keep: Iterable[int] = (0,)) -> list[Any]:
    """`cases` as pytest params, every one but those at the indices in `keep` marked `slow`.
    A case may be a `pytest.param` (its id and marks are kept), a tuple of arguments or one
    argument."""
    kept = set(keep)
    out = []
    for index, case in enumerate(cases):
        if isinstance(case, type(pytest.param(None))):
            values, marks, id_ = case.values, list(case.marks), case.id
        else:
            values, marks, id_ = (case if isinstance(case, tuple) else (case,)), [], None
        if index not in kept:
            marks.append(pytest.mark.slow)
        out.append(pytest.param(*values, marks=marks, id=id_))
    return out
