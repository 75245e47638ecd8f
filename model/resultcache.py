"""A cache of established check results, so that a command re-run on an unchanged spec (`gen`
after `ci`, which ask the same questions; `ci` again after an edit of the implementation only;
`check` again in another format) answers at once instead of solving again.

Sound by construction, not by judgement: an entry is keyed by everything a check's answer is
a function of, and a check is deterministic (the same input prints the same bytes), so a hit
is exactly what a fresh run would have printed:

* the compiled variant itself (the SHA-256 of its pickle: every action, property,
  expectation, environment and policy it holds, and the locations its messages name), so
  any edit of the spec, the specs it extends included, is a miss;
* the question: property, environment, fleet size, policy, depth, trace count, view, proof,
  engine and the lax search;
* the tool: its own code (`speccache.code_fingerprint`: every module of the `model` package),
  the Python version, the Z3 version, and whether searches may use bit-vectors
  (`model.numbers.bitvectors_enabled`).

Only a definitive answer is kept (violated, holds to the depth asked, proved, not
applicable): an `unknown` is never stored, so a budget that ran out in one run never answers
the next. The time and memory limits are not part of the key: a definitive answer does not
depend on them.

Entries live beside the compiled specs (`speccache.cache_dir()`, in a `results` folder),
written atomically (a temporary file moved into place, so concurrent runs are safe), read back
only when they unpickle to a result for the very job asked, and pruned to the KEEP newest.
`LEDGERCHECK_CACHE=off` turns this cache off with the other; `LEDGERCHECK_RESULTS=off` (what
the tool's own tests of solving use) and a command's `--no-cache` (`afresh`) turn off this one
alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ledgercheck.model import speccache
from ledgercheck.model.numbers import bitvectors_enabled
from ledgercheck.model.result import Result, Status
from ledgercheck.model.spec import Spec

FORMAT = 1  # bump when the key or the entry layout changes
KEEP = 2048  # entries kept; the least recently written go first
DEFINITIVE = frozenset({Status.VIOLATED, Status.HOLDS_TO_DEPTH, Status.PROVED, Status.NOT_APPLICABLE})


@dataclass(frozen=True)
class Question:
    """Everything besides the spec and the tool that a check's answer depends on (a fixed
    policy as its sorted items, so that equal policies make equal questions)."""

    property: str
    environment: str
    shards: int
    policy: tuple[tuple[str, int], ...] | None
    max_depth: int
    max_traces: int
    view: tuple[str, ...] | None
    prove: bool
    engine: str
    lax: bool


_AFRESH: ContextVar[bool] = ContextVar("ledgercheck_afresh", default=False)


@contextlib.contextmanager
def afresh(really: bool = True) -> Iterator[None]:
    """Within: every check is solved again, and nothing is read from or written to the cache
    (a command's `--no-cache`)."""
    token = _AFRESH.set(really)
    try:
        yield
    finally:
        _AFRESH.reset(token)


def folder() -> Path | None:
    """Where results live, or None when the cache is turned off."""
    if _AFRESH.get():
        return None
    if os.environ.get("LEDGERCHECK_RESULTS", "").strip().lower() in speccache.OFF:
        return None
    base = speccache.cache_dir()
    return None if base is None else base / "results"


@cache
def tool() -> str:
    """The tool's code and the solver's version: a new one of either never reads old answers."""
    from importlib import metadata

    try:
        solver = metadata.version("z3-solver")
    except metadata.PackageNotFoundError:
        solver = "?"
    return f"{FORMAT} {speccache.code_fingerprint()} z3 {solver}"


def spec_digest(spec: Spec) -> str | None:
    """The SHA-256 of the compiled variant, or None when it cannot be pickled (no caching).

    Of its pickle once round-tripped: a pickle records which equal values are one object,
    and a freshly compiled spec shares them differently from one read back from the spec
    cache; once unpickled, both pickle to the same bytes. (Bytes that still differed would
    cost a miss, never a wrong hit: equal bytes unpickle to equal specs.)"""
    try:
        settled = pickle.loads(pickle.dumps(spec, protocol=4))
        return hashlib.sha256(pickle.dumps(settled, protocol=4)).hexdigest()
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return None


def entry_path(where: Path, spec_hash: str, question: Question) -> Path:
    # Whether the bounded search may write numbers as bit-vectors: a switch that changes
    # which of equally short traces it finds, so answers of one never stand for the other.
    numbers = "bitvectors" if bitvectors_enabled() else "integers"
    digest = hashlib.sha256(f"{tool()} {numbers}".encode())
    digest.update(b"\0" + spec_hash.encode() + b"\0" + repr(question).encode())
    return where / f"result-{digest.hexdigest()}.pickle"


def lookup(where: Path, spec_hash: str, question: Question, *, variant: str) -> Result | None:
    """The stored result of this question, when one reads back whole and is about it."""
    try:
        value: Any = pickle.loads(entry_path(where, spec_hash, question).read_bytes())
    except Exception:  # noqa: BLE001 - missing, truncated, from another version: a miss
        return None
    if not isinstance(value, Result) or value.status not in DEFINITIVE:
        return None
    if (value.variant, value.property, value.environment, value.shards) != (
        variant,
        question.property,
        question.environment,
        question.shards,
    ):
        return None
    value.reused = True
    return value


def store(where: Path, spec_hash: str, question: Question, result: Result) -> bool:
    """Keep a definitive result (an unknown one never: see the module's notes); whether one
    was written."""
    if result.status not in DEFINITIVE:
        return False
    try:
        data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return False
    return speccache.write_atomically(entry_path(where, spec_hash, question), data)


def prune(where: Path) -> None:
    """Keep the KEEP newest entries (every edit of a spec makes new ones)."""
    speccache.prune(where, "result-*.pickle", KEEP)


__all__ = ["DEFINITIVE", "Question", "afresh", "entry_path", "folder", "lookup", "prune", "spec_digest", "store"]
