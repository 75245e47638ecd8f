"""How long, and how large, one command may search before it answers `unknown`.

A search over an infinite (or just very large) state space never ends on its own, and a
command that runs for ten minutes printing nothing while it grows to gigabytes looks like
a hang. Every command therefore runs under a `Budget`: a wall-clock deadline and a memory
ceiling, both on by default (`DEFAULT_SECONDS`, `DEFAULT_MEMORY_MIB`: far above what the
bundled spec's normal runs need, low enough that a runaway ends in minutes). When either
runs out, the search in progress stops and reports `unknown` with what it had established
(the depth reached), the properties not yet searched report `unknown` at once, and the
command exits 3 naming the budget.

The budget is the *active* one of the running command (`using`), so the engines consult
it wherever they loop or call the solver, without every caller threading it through:

* the explicit engine checks it per state it expands (memory every `MEMORY_EVERY` states);
* every Z3 call gets the smaller of its per-call `--timeout` and the time left, and the
  memory budget as the solver's `max_memory` (`limit_solver`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from model.errors import EXIT_UNKNOWN, LedgercheckError, UsageError

DEFAULT_SECONDS = 600.0
"""Wall-clock budget of one command (the bundled spec's full `check` takes about 15 s)."""
DEFAULT_MEMORY_MIB = 4096
"""Memory budget of one command, in MiB of resident memory (the bundled spec's runs stay
under 400 MiB)."""
MEMORY_EVERY = 2048
"""States the explicit engine expands between two reads of the resident memory."""


@dataclass
class Budget:
    """A deadline (seconds from creation; None: none) and a memory ceiling (MiB; None: none).

    `spent` names the first limit found exhausted, and stays set: once a command has run
    out, everything after it answers `unknown` at once."""

    seconds: float | None = DEFAULT_SECONDS
    memory_mib: int | None = DEFAULT_MEMORY_MIB
    start: float = field(default_factory=time.monotonic)
    spent: str | None = None

    @property
    def deadline(self) -> float | None:
        return None if self.seconds is None else self.start + self.seconds

    def remaining(self) -> float | None:
        """Seconds left (never below zero), or None without a deadline."""
        deadline = self.deadline
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def exhausted(self, memory: bool = True) -> str | None:
        """The budget that ran out ("time budget (600 s)", "memory budget (4096 MiB)"), or
        None. `memory=False` checks the clock only (a cheap check for tight loops)."""
        if self.spent is None:
            deadline = self.deadline
            if deadline is not None and time.monotonic() >= deadline:
                self.spent = f"time budget ({_seconds(self.seconds)})"
            elif memory and self.memory_mib is not None and resident_mib() >= self.memory_mib:
                self.spent = f"memory budget ({self.memory_mib} MiB)"
        return self.spent

    def solver_timeout(self, per_call: float | None) -> float | None:
        """Seconds one solver call may take: the per-call timeout or the time left, the
        smaller (at least a millisecond: Z3 reads 0 as "no timeout")."""
        left = self.remaining()
        if left is None:
            return per_call
        left = max(left, 0.001)
        return left if per_call is None else min(per_call, left)


def _seconds(value: float | None) -> str:
    if value is None:
        return "none"
    return f"{value:g} s"


def resident_mib() -> float:
    """This process's resident memory now (Linux: /proc/self/statm), else its peak."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 1024


class BudgetExhausted(LedgercheckError):
    """Raised where a command cannot use partial results (it would write an incomplete
    output): the command line reports it and exits 3, writing nothing."""

    exit_code = EXIT_UNKNOWN


def stop_if_spent(what: str, established: str = "nothing was written") -> None:
    """Raise `BudgetExhausted` when the active budget has run out, saying what was cut
    and what stands."""
    spent = active().exhausted()
    if spent is not None:
        raise BudgetExhausted(f"the {spent} ran out during {what}; {established}")


UNLIMITED = Budget(None, None)
_ACTIVE: ContextVar[Budget | None] = ContextVar("ledgercheck_budget", default=None)


def active() -> Budget:
    """The running command's budget (unlimited outside a command: library callers and
    tests set their own with `using`)."""
    budget = _ACTIVE.get()
    return budget if budget is not None else UNLIMITED


@contextlib.contextmanager
def using(budget: Budget) -> Iterator[Budget]:
    """Make `budget` the active one for the duration of a command."""
    token = _ACTIVE.set(budget)
    try:
        yield budget
    finally:
        _ACTIVE.reset(token)


def limit_solver(solver: Any, per_call: float | None) -> str | None:
    """Set a Z3 solver's timeout for its next call from the active budget (and its memory
    ceiling). Returns the exhausted budget's name instead when nothing is left to spend."""
    budget = active()
    spent = budget.exhausted()
    if spent is not None:
        return spent
    timeout = budget.solver_timeout(per_call)
    if timeout:
        solver.set("timeout", max(1, int(timeout * 1000)))
    if budget.memory_mib is not None:
        solver.set("max_memory", int(budget.memory_mib))
    return None


def add_options(parser: argparse.ArgumentParser, memory: bool = True) -> None:
    """`--time-budget` (and `--memory`, unless the command defines it already)."""
    parser.add_argument(
        "--time-budget",
        type=float,
        default=DEFAULT_SECONDS,
        metavar="SECONDS",
        help=f"wall-clock budget of the whole command (default {DEFAULT_SECONDS:g}); "
        "when it runs out the command reports what it established and exits 3",
    )
    if memory:
        parser.add_argument(
            "--memory",
            type=int,
            default=None,
            metavar="MIB",
            help=f"memory budget in MiB (default {DEFAULT_MEMORY_MIB}); also the solver's memory cap",
        )


def from_options(ns: argparse.Namespace) -> Budget:
    """The budget a command's options ask for (the defaults where it has none)."""
    seconds = getattr(ns, "time_budget", DEFAULT_SECONDS)
    memory = getattr(ns, "memory", None)
    if seconds is not None and seconds <= 0:
        raise UsageError("--time-budget must be a positive number of seconds")
    if memory is not None and memory < 16:
        raise UsageError("--memory is in MiB and must be at least 16")
    return Budget(seconds, DEFAULT_MEMORY_MIB if memory is None else memory)


__all__ = [
    "DEFAULT_MEMORY_MIB",
    "DEFAULT_SECONDS",
    "Budget",
    "BudgetExhausted",
    "active",
    "add_options",
    "from_options",
    "limit_solver",
    "resident_mib",
    "stop_if_spent",
    "using",
]
