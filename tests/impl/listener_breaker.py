"""A circuit breaker that announces what it does, written by hand for the listener_breaker
example spec (spec/examples/listener_breaker.toml): listeners registered with
`add_listener` hear every state change as `on_state_change(breaker, old, new)`, the
`on_open` constructor callback hears the breaker open with its failure count, an `on_close`
attribute hears it close, and the logger "listener_breaker" logs a line when it opens.

Its own code, shaped the way such libraries are (a listener object, optional callbacks), so
the binding forms of `[implementation.notifications]` are each exercised by a real class.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

LOG = logging.getLogger("listener_breaker")

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


class ListenerBreaker:
    """Opens after `trip_after` failures in a row (or one failure while half open); a success
    closes it; `try_reset` half-opens an open breaker for a trial call."""

    def __init__(self, trip_after: int = 2, on_open: Callable[[int], Any] | None = None) -> None:
        self.trip_after = trip_after
        self.state = CLOSED
        self.failures = 0
        self.on_open = on_open
        self.on_close: Callable[[], Any] | None = None
        self._listeners: list[Callable[[ListenerBreaker, str, str], Any]] = []

    def add_listener(self, listener: Callable[[ListenerBreaker, str, str], Any]) -> None:
        self._listeners.append(listener)

    def _move(self, new: str) -> None:
        old, self.state = self.state, new
        if old != new:
            for listener in self._listeners:
                listener(self, old, new)

    def record_failure(self) -> None:
        if self.state == OPEN:
            return
        self.failures += 1
        if self.state == HALF_OPEN or self.failures >= self.trip_after:
            self._move(OPEN)
            if self.on_open is not None:
                self.on_open(self.failures)
            LOG.warning("breaker opened after %d failures", self.failures)

    def record_success(self) -> None:
        if self.state == OPEN:
            return
        self.failures = 0
        if self.state != CLOSED:
            self._move(CLOSED)
            if self.on_close is not None:
                self.on_close()

    def try_reset(self) -> None:
        if self.state == OPEN:
            self._move(HALF_OPEN)
