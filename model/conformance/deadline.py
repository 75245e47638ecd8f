"""A limit on one call of the implementation: a call that does not return is named, soon.

A class that loops forever in one method (a `while` that waits for a state no call will
bring, a lock it never releases, a wait on the real clock that the tests never move) used to
keep `conform` and the generated tests silent until the command's whole budget ran out, ten
minutes by default. Each call of the implementation now runs under a per-call limit
(`--call-timeout`, `defaults.CALL_TIMEOUT`): past it, SIGALRM interrupts the call where it is and the
caller names the calls it was running. Never a pass: `conform` exits 3, a test fails.

A process-wide interval timer and a handler of the main thread: the limit applies where the
calls run in a process's main thread with SIGALRM free (not taken by another handler, such as
pytest-timeout's); elsewhere (a Ray worker's thread) the command's budget still bounds them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ledgercheck.model.errors import UsageError


class TooLong(BaseException):
    """Raised where the implementation is, when its call has run past the limit. A
    BaseException: neither the implementation's `except Exception` nor the comparison's catches
    it."""


_EXPIRED: list[Callable[[], None]] = []
"""What the handler does on expiry (the last `install`'s): raise, or fail the test."""

_READY: dict[tuple[int, int], bool] = {}
"""`ready()` per (process, thread): asked at every call conform makes (a hundred thousand on
the bundled ledger), it changes only when a handler is installed or put back."""


def check_limit(seconds: float | None) -> None:
    """A `--call-timeout` the command line gave: None (the default) or a non-negative number."""
    if seconds is not None and not seconds >= 0:
        raise UsageError("--call-timeout must be >= 0 (0: no limit but the time budget)")


def _on_alarm(signum: int, frame: Any) -> None:
    if _EXPIRED:
        _EXPIRED[-1]()


def install(on_expiry: Callable[[], None]) -> bool:
    """Make SIGALRM call `on_expiry` (which raises) in this process; False where it cannot:
    not the main thread, or SIGALRM already handled by someone else."""
    _READY.clear()  # (whatever the answer: the handler may have changed hands since `ready` was asked)
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return False
    current = signal.getsignal(signal.SIGALRM)
    if current not in (signal.SIG_DFL, _on_alarm):
        return False
    signal.signal(signal.SIGALRM, _on_alarm)
    _EXPIRED[:] = [on_expiry]
    return True


def ready() -> bool:
    """Whether this process may arm the timer: the handler is ours (also in a forked child,
    which inherits it; never in a process that unpickled a checker without installing it,
    where SIGALRM's default action would kill the process)."""
    key = (os.getpid(), threading.get_ident())
    known = _READY.get(key)
    if known is None:
        known = _READY[key] = (
            hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGALRM) is _on_alarm
        )
    return known


def arm(seconds: float) -> None:
    signal.setitimer(signal.ITIMER_REAL, seconds)


def disarm() -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)


@contextlib.contextmanager
def limited(seconds: float) -> Iterator[None]:
    """A region of this process's main thread under the limit, with a handler of its own for
    as long as it lasts (the previous one back after): `TooLong` where it runs past `seconds`.
    Nothing where the limit is 0 or cannot be taken (`install`)."""
    previous = signal.getsignal(signal.SIGALRM) if hasattr(signal, "SIGALRM") else None
    kept = list(_EXPIRED)

    def expired() -> None:
        raise TooLong

    armed = seconds > 0 and install(expired)
    if armed:
        arm(seconds)
    try:
        yield
    finally:
        if armed:
            disarm()
            signal.signal(signal.SIGALRM, previous)
            _EXPIRED[:] = kept
            _READY.clear()
