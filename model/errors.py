"""Errors a user can cause, and the exit codes the command line promises.

Every mistake in a spec becomes a `SpecError` that names the file, the line (and column
where known) and what is wrong; the command line prints it and exits 2, never a traceback.
"""

from __future__ import annotations

import builtins
import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2
EXIT_UNKNOWN = 3

E = TypeVar("E", bound=BaseException)


@dataclass(frozen=True)
class Location:
    """A place in a spec file; line and column are 1-based, 0 when unknown."""

    path: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        if self.line and self.col:
            return f"{self.path}:{self.line}:{self.col}"
        if self.line:
            return f"{self.path}:{self.line}"
        return self.path


class LedgercheckError(Exception):
    """Base of every error the tool reports to a user as a message, not a traceback."""

    exit_code = EXIT_BAD_INPUT


class SpecError(LedgercheckError):
    """A spec that cannot be loaded: what is wrong, and where."""

    def __init__(self, where: Location, message: str) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}")


class Undecided(LedgercheckError):
    """A command whose answer a solver could not decide (it answered unknown): the command
    line says what was established and exits 3, as for a spent budget; never a pass."""

    exit_code = EXIT_UNKNOWN


class ProcessDied(Undecided):
    """A process the command ran part of its work in ended without an answer (it exited, or
    a signal killed it): what it was establishing is not established, so the command exits 3,
    as for any question left open, with a message instead of a traceback."""


class CallTimedOut(Undecided):
    """A call of the implementation that did not return within the per-call limit
    (`--call-timeout`): named with the calls that led to it, and never a pass."""


class ImplementationEnded(ProcessDied):
    """The implementation under test ended the process it ran in (`os._exit`, a crash in
    native code), and the message names the calls it was running: nothing more to find."""


class UsageError(LedgercheckError):
    """A command-line argument that does not fit the spec (unknown variant, bad policy)."""


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """A ' (did you mean X?)' suffix when a close candidate exists, else ''."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def builtin_exception(name: str, base: type[E]) -> type[E] | None:
    """The builtin exception class called `name` (`ValueError`) when there is one and it is a
    subclass of `base`, else None: how a spec's error names and bound call paths name them."""
    value = getattr(builtins, name, None)
    return value if isinstance(value, type) and issubclass(value, base) else None
