"""Progress on stderr while the checker works.

`--progress` prints one line per depth (for logs); `--no-progress` prints nothing; with
neither, a terminal on stderr gets one status line that rewrites itself and is erased when
the checks end, and anything else (a pipe, a file, CI) gets nothing at all.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

CLEAR_LINE = "\r\x1b[K"


class Progress:
    """A progress sink: call it with a message; `close()` when the work is done."""

    def __init__(self, stream: TextIO, transient: bool) -> None:
        self.stream = stream
        self.transient = transient
        self.shown = False

    def __call__(self, message: str) -> None:
        if self.transient:
            width = terminal_width(self.stream)
            self.stream.write(CLEAR_LINE + message[: max(width - 1, 10)])
            self.shown = True
        else:
            self.stream.write(message + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.transient and self.shown:
            self.stream.write(CLEAR_LINE)
            self.stream.flush()
            self.shown = False


def terminal_width(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        columns = 0
    return columns if columns > 0 else shutil.get_terminal_size((80, 24)).columns


def is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def progress_for(option: bool | None, stream: TextIO | None = None) -> Progress | None:
    """The progress sink for `--progress` (True), `--no-progress` (False) or neither (None)."""
    stream = stream if stream is not None else sys.stderr
    if option is True:
        return Progress(stream, transient=False)
    if option is None and is_terminal(stream):
        return Progress(stream, transient=True)
    return None


HEARTBEAT_SECONDS = 30.0
"""How often a long command with no terminal (a CI log) says where it is, at most."""


class Heartbeat:
    """A progress sink for a log: a message at most every `every` seconds (the first after
    `every`), so that a long run is never silent in CI and a short one prints nothing. It
    writes to a stream, or hands each line to a function (a process that relays its output)."""

    def __init__(self, stream: TextIO | Callable[[str], None], every: float | None = None) -> None:
        self.stream = stream
        self.every = HEARTBEAT_SECONDS if every is None else every
        self.last = time.monotonic()

    def __call__(self, message: str) -> None:
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            if callable(self.stream):
                self.stream(f"ledgercheck: {message}")
                return
            self.stream.write(f"ledgercheck: {message}\n")
            self.stream.flush()


class PastAClosedPipe:
    """An output stream whose reader may stop reading (`ledgercheck ci | head -3`): once the
    pipe is broken, what is written is dropped and the command runs on to its verdict, and
    exits with its code. A gate under `set -o pipefail` is never passed because its reader
    left early (it exited 0, or not, by how far the command had got)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        """From now on the descriptor writes to the null device: what the stream still holds
        is flushed there at exit, and a process started later inherits it."""
        self.reader_gone = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._stream.fileno())
            finally:
                os.close(null)
        except (OSError, ValueError, AttributeError):  # a stream with no descriptor of its own
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def past_a_closed_pipe() -> Iterator[None]:
    """Run with stdout and stderr as `PastAClosedPipe`s (the streams as they were after)."""
    saved = sys.stdout, sys.stderr
    guards = PastAClosedPipe(sys.stdout), PastAClosedPipe(sys.stderr)
    sys.stdout, sys.stderr = guards  # type: ignore[assignment]
    try:
        yield
    finally:
        for guard in guards:
            guard.flush()
        sys.stdout, sys.stderr = saved


TICK_SECONDS = 5.0
"""How often a `Ticker` hands its sink a line (a `Heartbeat` prints one of them every 30 s)."""


class Ticker:
    """A thread that hands `say` what the command is doing, `doing()`, with the seconds since
    it started, every `every` seconds until `stop()`: a solver call of ten minutes makes no
    progress messages, and `ci` in a log sat silent for all of them (a trial)."""

    def __init__(self, say: Callable[[str], None], doing: Callable[[], str], every: float = TICK_SECONDS) -> None:
        self.say, self.doing, self.every = say, doing, every
        self.began = time.monotonic()
        self._stopped = threading.Event()
        threading.Thread(target=self._run, name="ledgercheck-ticker", daemon=True).start()

    def _run(self) -> None:
        while not self._stopped.wait(self.every):
            self.say(f"{self.doing()}, {time.monotonic() - self.began:.0f} s into the run")

    def stop(self) -> None:
        self._stopped.set()
