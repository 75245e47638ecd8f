"""A clean-room implementation of the generation-fleet health ledger, with the seed's fix.

Written from /work/shared/ledger.md (sections 1, 2 and 6) only: one record per shard, the
events of section 2 with their exact guards, and the fix: `mark_loaded` also clears the
request streak and `state_before_partial` before the shard moves to STALE. Stdlib only.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum


class ShardState(str, Enum):  # noqa: UP042 (the shape of the real module)
    HEALTHY = "healthy"
    SUSPECT = "suspect"
    DEAD = "dead"
    RESTARTING = "restarting"
    STALE = "stale"
    RETIRED = "retired"


SERVING = frozenset({ShardState.HEALTHY, ShardState.SUSPECT})
ABSENT = frozenset({ShardState.DEAD, ShardState.RESTARTING, ShardState.RETIRED})


class FleetExhaustedError(RuntimeError):
    """Fewer than `min_healthy_shards` shards are serving."""


@dataclass
class FleetHealthPolicy:
    unhealthy_threshold: int = 3
    healthy_threshold: int = 2
    max_restart_attempts_per_shard: int = 5
    min_healthy_shards: int = 1

    def __post_init__(self) -> None:
        for name in ("unhealthy_threshold", "healthy_threshold", "min_healthy_shards"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")


@dataclass
class ShardHealth:
    state: ShardState = ShardState.HEALTHY
    consecutive_probe_failures: int = 0
    consecutive_probe_successes: int = 0
    consecutive_reported_failures: int = 0
    restart_attempts: int = 0
    state_before_partial: ShardState | None = None
    weight_version: int = 0
    base_url: str | None = None


class GenerationFleetHealth:
    """Per-shard health of a generation fleet; every call is synchronous and atomic."""

    def __init__(
        self,
        *,
        shard_count: int,
        policy: FleetHealthPolicy,
        base_urls: Sequence[str] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if shard_count < 1:
            raise ValueError(f"shard_count must be >= 1, got {shard_count!r}")
        if base_urls is not None and len(base_urls) != shard_count:
            raise ValueError(f"{len(base_urls)} base_urls for {shard_count} shards")
        self.policy = policy
        self._clock = clock if clock is not None else time.monotonic
        self._shards = [
            ShardHealth(base_url=base_urls[i] if base_urls is not None else None) for i in range(shard_count)
        ]
        self._membership_epoch = 0

    # -- reads ---------------------------------------------------------------------------

    @property
    def membership_epoch(self) -> int:
        return self._membership_epoch

    def _shard(self, i: int) -> ShardHealth:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self._shards):
            raise KeyError(i)
        return self._shards[i]

    def state_of(self, i: int) -> ShardState:
        return self._shard(i).state

    def snapshot(self) -> list[ShardHealth]:
        return [copy.copy(s) for s in self._shards]

    def serving_shards(self) -> list[int]:
        return [i for i, s in enumerate(self._shards) if s.state in SERVING]

    def absent_shards(self) -> list[int]:
        return [i for i, s in enumerate(self._shards) if s.state in ABSENT]

    def suspected_shards(self) -> list[int]:
        return [
            i
            for i, s in enumerate(self._shards)
            if s.state is ShardState.SUSPECT
            or (s.state is ShardState.STALE and s.state_before_partial is ShardState.SUSPECT)
        ]

    def raise_if_exhausted(self) -> None:
        serving = len(self.serving_shards())
        if serving < self.policy.min_healthy_shards:
            raise FleetExhaustedError(
                f"only {serving} shard(s) serving, fewer than min_healthy_shards={self.policy.min_healthy_shards}"
            )

    # -- the one place a state changes ---------------------------------------------------

    def _transition(self, i: int, new: ShardState, why: str) -> None:
        shard = self._shards[i]
        old = shard.state
        if old is new:
            return
        shard.state = new
        if (old in SERVING) != (new in SERVING):
            self._membership_epoch += 1
        print(f"[fleet-health t={self._clock():.3f}] shard {i}: {old.value} -> {new.value} ({why})")

    # -- writes --------------------------------------------------------------------------

    def record_probe(self, i: int, *, ok: bool, error: str = "") -> None:
        shard = self._shard(i)
        if shard.state not in SERVING:
            return
        t = self.policy.unhealthy_threshold
        if ok:
            shard.consecutive_probe_failures = 0
            shard.consecutive_probe_successes += 1
            if shard.state is ShardState.SUSPECT and shard.consecutive_probe_successes >= self.policy.healthy_threshold:
                self._transition(i, ShardState.HEALTHY, "probes recovered")
        else:
            shard.consecutive_probe_successes = 0
            shard.consecutive_probe_failures += 1
            if shard.consecutive_probe_failures >= t:
                self._transition(i, ShardState.DEAD, f"probe failed: {error}")
            elif shard.state is ShardState.HEALTHY:
                self._transition(i, ShardState.SUSPECT, f"probe failed: {error}")

    def report_failure(self, i: int, error: BaseException | str) -> None:
        shard = self._shard(i)
        if shard.state not in SERVING:
            return
        shard.consecutive_reported_failures += 1
        if shard.consecutive_reported_failures >= self.policy.unhealthy_threshold:
            self._transition(i, ShardState.DEAD, f"request failed: {error}")
        elif shard.state is ShardState.HEALTHY:
            self._transition(i, ShardState.SUSPECT, f"request failed: {error}")

    def report_success(self, i: int) -> None:
        self._shard(i).consecutive_reported_failures = 0

    def record_actor_death(self, i: int, error: str = "") -> None:
        shard = self._shard(i)
        if shard.state in ABSENT:
            return
        shard.consecutive_probe_successes = 0
        shard.consecutive_probe_failures = self.policy.unhealthy_threshold
        self._transition(i, ShardState.DEAD, f"actor died: {error}")

    def condemn_silent_participant(self, i: int, *, reason: str) -> None:
        shard = self._shard(i)
        if shard.state in ABSENT:
            return
        self._transition(i, ShardState.DEAD, f"condemned: {reason}")

    def mark_weights_partial(self, i: int) -> None:
        shard = self._shard(i)
        if shard.state in ABSENT:
            return
        if shard.state is not ShardState.STALE:
            shard.state_before_partial = shard.state
        self._transition(i, ShardState.STALE, "refit aborted, weights partial")

    def mark_restarting(self, i: int) -> None:
        shard = self._shard(i)
        if shard.state is ShardState.RETIRED:
            return
        shard.restart_attempts += 1
        if shard.restart_attempts > self.policy.max_restart_attempts_per_shard:
            self._transition(i, ShardState.RETIRED, f"restart budget spent ({shard.restart_attempts - 1} attempts)")
        else:
            self._transition(i, ShardState.RESTARTING, f"restart attempt {shard.restart_attempts}")

    def mark_loaded(self, i: int, *, base_url: str | None = None) -> None:
        shard = self._shard(i)
        if shard.state is ShardState.RETIRED:
            return
        if base_url is not None:
            shard.base_url = base_url
        shard.consecutive_probe_failures = 0
        shard.consecutive_probe_successes = 0
        # The fix: a new process has no history.
        shard.consecutive_reported_failures = 0
        shard.state_before_partial = None
        self._transition(i, ShardState.STALE, "replacement loaded, awaiting refit")

    def mark_restart_failed(self, i: int) -> None:
        shard = self._shard(i)
        if shard.state is ShardState.RETIRED:
            return
        self._transition(i, ShardState.DEAD, "restart failed")

    def report_refit(self, i: int, *, weight_version: int) -> None:
        shard = self._shard(i)
        if shard.state is ShardState.RETIRED:
            return
        was = shard.state_before_partial
        shard.state_before_partial = None
        shard.weight_version = weight_version
        shard.consecutive_probe_failures = 0
        shard.consecutive_probe_successes = 0
        if was is ShardState.SUSPECT:
            self._transition(i, ShardState.SUSPECT, f"refit to v{weight_version}, still suspect")
            return
        shard.consecutive_reported_failures = 0
        self._transition(i, ShardState.HEALTHY, f"refit to v{weight_version}")

    def retire(self, i: int, *, reason: str) -> None:
        self._shard(i)
        self._transition(i, ShardState.RETIRED, f"retired: {reason}")
