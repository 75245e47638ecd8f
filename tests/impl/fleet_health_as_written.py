"""The ledger as written at the head of PR #3592: the clean implementation without the fix.

`mark_loaded` keeps the dead engine's request streak and `state_before_partial`. Everything
else is the clean implementation's. Loads both as a module (`fleet_health_as_written`, with
this directory on the path) and as a file by path: the sibling is loaded from its path.
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
    def mark_loaded(self, i: int, *, base_url: str | None = None) -> None:
        shard = self._shard(i)
        if shard.state is ShardState.RETIRED:
            return
        if base_url is not None:
            shard.base_url = base_url
        shard.consecutive_probe_failures = 0
        shard.consecutive_probe_successes = 0
        self._transition(i, ShardState.STALE, "replacement loaded, awaiting refit")
