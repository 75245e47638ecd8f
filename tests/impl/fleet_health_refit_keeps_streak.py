"""The clean implementation with the second fix (the spec's `refit_keeps_streak` variant): a
completed refit no longer wipes a request streak, so a shard with failures of its own comes
back SUSPECT, its streak kept, and a wedged engine is condemned within `unhealthy_threshold`
failures of its own process. Everything else is the clean implementation's. Loads as a
module (this directory on the path) and as a file by path, like its siblings.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


def _sibling(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_clean = _sibling("fleet_health_clean")
ShardState = _clean.ShardState
ShardHealth = _clean.ShardHealth
FleetHealthPolicy = _clean.FleetHealthPolicy
FleetExhaustedError = _clean.FleetExhaustedError
_Clean: Any = _clean.GenerationFleetHealth


class GenerationFleetHealth(_Clean):
    def report_refit(self, i: int, *, weight_version: int) -> None:
        shard = self._shard(i)
        if shard.state is ShardState.RETIRED:
            return
        was = shard.state_before_partial
        shard.state_before_partial = None
        shard.weight_version = weight_version
        shard.consecutive_probe_failures = 0
        shard.consecutive_probe_successes = 0
        if was is ShardState.SUSPECT or shard.consecutive_reported_failures > 0:
            self._transition(i, ShardState.SUSPECT, f"refit to v{weight_version}, still suspect")
            return
        self._transition(i, ShardState.HEALTHY, f"refit to v{weight_version}")
