"""A pytest run that drives an implementation ends with a verdict, or says it has none.

Under `--ledger-impl` or `--ledger-conform`, the tests call the implementation in pytest's own
process. An implementation that ends that process (`os._exit(0)` in a method, a crash in
native code) ends the run with its own exit code and no summary: exit 0 reads as a pass. So the
first pytest run of a process forks before the tests start: the child runs them as usual, and
the parent only waits. The child says, as pytest unconfigures (after every test, whatever the
outcome), that the run reached its end; the parent then exits with the child's code. A child
that ended without saying so ended inside the implementation: the parent says so on stderr and
exits 3 (never a pass).

Imported by the plugin only when one of those options is given (the plugin imports nothing
heavy until used; this module needs only the standard library).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass

import pytest

UNFINISHED = 3
"""The exit code of a run whose process ended before pytest did (ledgercheck's `unknown`)."""

_DONE: pytest.StashKey[int] = pytest.StashKey()


def possible() -> bool:
    """Forking a process that may hold threads is safe on Linux only."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def watch(config: pytest.Config) -> None:
    """Fork; return in the child (which runs the tests); in the parent, wait for it and exit."""
    # pytest configures with its output capture suspended: the parent's fd 2 is the real stderr.
    sys.stdout.flush()
    sys.stderr.flush()
    said, says = os.pipe()
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        os.close(said)
        _die_with(parent)
        config.stash[_DONE] = says
        return
    os.close(says)
    _wait_and_exit(child, said)


def _die_with(parent: int) -> None:
    """The child ends when the parent does, however it ends (Linux's parent-death signal): a
    parent killed with SIGKILL cannot pass the signal on, and the child, which runs the
    implementation, would run on alone (`ledgercheck ci` stopping a call that never returns
    left it sleeping)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent ended before the signal was asked for
        os._exit(UNFINISHED)


_PR_SET_PDEATHSIG = 1
"""Linux's prctl option: the signal a process gets when the one that forked it ends."""


def starting(config: pytest.Config, nodeid: str) -> None:
    """In the child, as a test starts: its name, for the parent to give if the run ends in it."""
    says = config.stash.get(_DONE, None)
    if says is not None:
        os.write(says, f"T{nodeid}\n".encode())


def finished(config: pytest.Config) -> None:
    """In the child, as pytest unconfigures: the run reached its end."""
    says = config.stash.get(_DONE, None)
    if says is not None:
        os.write(says, b"E\n")
        os.close(says)
        del config.stash[_DONE]


def _wait_and_exit(child: int, said: int) -> None:
    """The parent: what the child says is read as it comes (a thread: a full pipe would stop
    the child), Ctrl-C is the child's to handle (the terminal sends it to both), and a
    termination asked of the parent is passed on to the child."""
    heard = _Heard()
    reader = threading.Thread(target=heard.listen, args=(said,), daemon=True)
    reader.start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, lambda signum, frame: os.kill(child, signum))
    _, status = os.waitpid(child, 0)
    reader.join(1.0)  # a process the implementation forked may hold the pipe open: not for ever
    code = os.waitstatus_to_exitcode(status)
    if not heard.ended:
        how = f"exit code {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
        where = f"in the test {heard.test}" if heard.test is not None else "before any test started"
        os.write(
            2,
            (
                f"\nledgercheck: pytest's process ended ({how}) before its run did, {where}: the implementation "
                "under test ended it (os._exit, a crash in native code, or the system out of memory); no verdict, "
                f"exit {UNFINISHED}\n"
            ).encode(),
        )
        code = UNFINISHED
    os._exit(code if code >= 0 else 128 - code)


@dataclass
class _Heard:
    """What the child said: the test it started last, and whether its run reached its end."""

    test: str | None = None
    ended: bool = False

    def listen(self, said: int) -> None:
        """Every line the child writes (`T<nodeid>`, then `E`), until it closes the pipe."""
        with os.fdopen(said, "r", encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.startswith("T"):
                    self.test, self.ended = line[1:].rstrip("\n"), False
                elif line == "E\n":
                    self.ended = True
