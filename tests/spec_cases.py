"""Bad-spec cases written as one edit of a good spec: what to replace, with what, and where
the error must point. Shared by the tests of the spec language's younger constructs (time,
outcomes, notifications)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ledgercheck.model.errors import SpecError
from ledgercheck.model.spec import load_spec_text


@dataclass(frozen=True)
class Bad:
    old: str
    new: str
    at: str  # a marker in `new`: the error's line
    says: tuple[str, ...]


def assert_refused(good: str, case: Bad, name: str) -> None:
    """`good` with `case.old` replaced by `case.new` fails to load, at the line of `case.at`,
    with a message saying every fragment of `case.says`."""
    assert good.count(case.old) == 1, case.old
    text = good.replace(case.old, case.new)
    with pytest.raises(SpecError) as caught:
        load_spec_text(text, name)
    error = caught.value
    offset = good.index(case.old) + case.new.index(case.at) if case.at in case.new else text.index(case.at)
    line = text.count("\n", 0, offset) + 1
    assert error.where.line == line, f"{error} (expected line {line})"
    for fragment in case.says:
        assert fragment in error.message, error.message
