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
import signal
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ledgercheck.model.errors import EXIT_UNKNOWN, LedgercheckError, UsageError

DEFAULT_SECONDS = 600.0
"""Wall-clock budget of one command (the bundled spec's full `check` takes about 15 s)."""
DEFAULT_MEMORY_MIB = 4096
"""Memory budget of one command, in MiB of resident memory (the bundled spec's runs stay
under 400 MiB)."""
WATCH_INTERVAL = 0.25
"""Seconds between two looks of the watchdog at the clock and the memory during solver calls."""
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
    _watched: list[weakref.ref[Any]] = field(default_factory=list, repr=False)
    _watch_pid: int | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def watch(self, context: Any) -> None:
        """Interrupt the Z3 `context` (any object with `interrupt()`) when this budget runs out.

        A watchdog thread polls the clock and the resident memory and interrupts every
        watched context once either is spent; the solver call in progress then returns
        `unknown`. Nothing is set on the solver itself: solver parameters change the search,
        and with it which of several equally short traces comes first, so the limits must
        not depend on them (generated files are byte-identical across runs)."""
        if self.seconds is None and self.memory_mib is None:
            return
        with self._lock:
            if not any(ref() is context for ref in self._watched):
                self._watched = [ref for ref in self._watched if ref() is not None]
                self._watched.append(weakref.ref(context))
            if self._watch_pid != os.getpid():  # none yet, or we are a forked child
                self._watch_pid = os.getpid()
                threading.Thread(target=self._watchdog, name="ledgercheck-budget", daemon=True).start()

    def interrupt_watched(self) -> None:
        """Interrupt every watched Z3 context now (Ctrl-C): a check in progress answers."""
        with self._lock:
            contexts = [ref() for ref in self._watched]
        for context in contexts:
            if context is not None:
                context.interrupt()

    def close(self) -> None:
        """Stop the watchdog: the command this budget belongs to has ended, and a thread
        left polling would outlive it (and read /proc for nothing) until the deadline."""
        with self._lock:
            self._watch_pid = None
            self._watched = []

    def _watchdog(self) -> None:
        pid = os.getpid()
        while self._watch_pid == pid:
            time.sleep(WATCH_INTERVAL)
            if self._watch_pid != pid:
                return
            if self.exhausted() is not None:
                with self._lock:
                    contexts = [ref() for ref in self._watched]
                for context in contexts:
                    if context is not None:
                        context.interrupt()
                return

    @property
    def deadline(self) -> float | None:
        return None if self.seconds is None else self.start + self.seconds

    def remaining(self) -> float | None:
        """Seconds left (never below zero), or None without a deadline."""
        deadline = self.deadline
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def exhausted(self, memory: bool = True, extra_mib: float = 0.0) -> str | None:
        """The budget that ran out ("time budget (600 s)", "memory budget (4096 MiB)"), or
        None. `memory=False` checks the clock only (a cheap check for tight loops);
        `extra_mib` is memory the command holds outside this process (its workers). Where
        Ctrl-C reached the command, KeyboardInterrupt again (`stop_if_interrupted`): every
        loop that asks is stopped by it."""
        stop_if_interrupted()
        if self.spent is None:
            deadline = self.deadline
            if deadline is not None and time.monotonic() >= deadline:
                self.spent = f"time budget ({_seconds(self.seconds)})"
            elif memory and self.memory_mib is not None and resident_mib() + extra_mib >= self.memory_mib:
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


def resident_mib(pid: int | None = None) -> float:
    """This process's (or process `pid`'s) resident memory now (Linux: /proc/PID/statm), else
    this process's peak (another process's: 0, when the system does not tell)."""
    try:
        with open(f"/proc/{pid or 'self'}/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        if pid is not None:
            return 0.0
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


def interrupted_by(exc: BaseException) -> str | None:
    """The spent budget whose watchdog made Z3 raise `exc`, or None when `exc` is a real error.

    The watchdog interrupts every watched Z3 context once the budget runs out: a solver's
    check then answers `unknown`, but any other call into Z3 at that moment (a translation,
    a simplification, a model being read) raises `Z3Exception` ("canceled", "model is not
    available"). That is the budget, never an error of the check's. The type is told by name
    so that nothing here imports Z3."""
    if type(exc).__name__ != "Z3Exception":
        return None
    return active().exhausted()


@contextlib.contextmanager
def stops_when_interrupted(what: str, established: str = "nothing was written") -> Iterator[None]:
    """Turn a Z3 call the spent budget interrupted (`interrupted_by`) into `BudgetExhausted`
    (exit 3, saying what was cut and what stands); any other error passes through."""
    try:
        yield
    except Exception as exc:
        spent = interrupted_by(exc)
        if spent is None:
            raise
        raise BudgetExhausted(f"the {spent} ran out during {what}; {established}") from exc


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
        if _ACTIVE.get() is not budget:  # not still active in an enclosing `using`
            budget.close()


def limit_solver(solver: Any, per_call: float | None = None) -> str | None:
    """Put a Z3 solver's context under the active budget before a call (see `Budget.watch`).
    Returns the exhausted budget's name instead when nothing is left to spend. The per-call
    `--timeout` is the solver's own parameter, set where the solver is made."""
    del per_call
    budget = active()
    spent = budget.exhausted()
    if spent is not None:
        return spent
    budget.watch(solver.ctx)
    return None


KEYBOARD = "interrupted from keyboard"
"""Z3's reason for an `unknown` when Ctrl-C reached it: during a solver's check, Z3's own
handler takes the signal, cancels the check and answers `unknown`, and Python never sees it."""


_INTERRUPTED = threading.Event()


def interrupted() -> bool:
    """Whether Ctrl-C reached the running command (`hears_ctrl_c`), wherever it was raised."""
    return _INTERRUPTED.is_set()


def stop_if_interrupted() -> None:
    """KeyboardInterrupt, again, where Ctrl-C reached the command: its KeyboardInterrupt may
    have been raised inside a finalizer (a Z3 object's `__del__`, run by the collector
    anywhere), where Python prints it and goes on."""
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


@contextlib.contextmanager
def hears_ctrl_c() -> Iterator[None]:
    """Run a command remembering Ctrl-C. The handler notes it and interrupts the solver calls
    in progress; KeyboardInterrupt is raised where the command next looks at its budget
    (`stop_if_interrupted`: before every solver call, at every state of a search, before
    anything is written), not wherever the signal lands. A trial's `gen`, interrupted, wrote
    every file and exited 0 in three runs of ten: Python's KeyboardInterrupt had been raised
    in a Z3 object's finalizer and swallowed there (and once, raised there in the middle of
    freeing a Z3 context, it crashed the process). A second Ctrl-C raises at once. Not where
    SIGINT is ignored (a background job), nor outside the main thread (a test's thread)."""
    _INTERRUPTED.clear()
    previous = signal.getsignal(signal.SIGINT)
    installed = threading.current_thread() is threading.main_thread() and previous not in (signal.SIG_IGN, None)

    def on_sigint(signum: int, frame: Any) -> None:
        if _INTERRUPTED.is_set():  # a second Ctrl-C: at once, wherever the command is
            raise KeyboardInterrupt
        _INTERRUPTED.set()
        active().interrupt_watched()  # a solver call in progress answers now

    if installed:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        if installed:
            signal.signal(signal.SIGINT, previous)
        _INTERRUPTED.clear()  # the next command in this process (a test's) starts afresh


def answered(solver: Any, answer: Any) -> Any:
    """`answer`, what `solver`'s check returned; KeyboardInterrupt where it is Ctrl-C's
    `unknown` (`KEYBOARD`), or Ctrl-C reached the command before. Every check goes through
    here: Z3 turned an interrupt into one undecided verdict and the command went on."""
    if str(answer) == "unknown" and solver.reason_unknown() == KEYBOARD:
        _INTERRUPTED.set()
        raise KeyboardInterrupt
    stop_if_interrupted()
    return answer


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
