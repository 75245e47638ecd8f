"""The clean implementation (with the fix) plus one subtle change, for the differential test:
`report_success` is ignored unless the shard is SERVING (ledger.md: it has no guard at all,
so a STALE shard's kept streak, say, is cleared by a completed request)."""

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
    def report_success(self, i: int) -> None:
        shard = self._shard(i)
        if shard.state not in _clean.SERVING:
            return
        shard.consecutive_reported_failures = 0
