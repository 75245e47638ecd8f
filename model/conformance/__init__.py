"""Conformance: drive a real implementation and the executable model through the same calls.

`ledgercheck conform --impl module:Class` builds the implementation and the executable model
of one spec variant side by side and makes the same ledger API calls on both. After every
call it compares everything the API shows: every snapshot field of every shard (states by
name), `state_of`, the query methods the spec declares, fleet values (when the
implementation has them), the exception the call raised (the model raises KeyError for an
unknown shard; the implementation must raise a KeyError too) and the number of log lines
the call printed.

The call sequences come from three sources, run in this order:

* **enumeration**: every sequence of calls up to `--depth` in the `ledger` environment,
  breadth-first, with small argument domains (bools both ways, ints 0..2, text None or a
  new address, opaque arguments the spec's example, and each call once on an unknown
  shard). First only calls the callers' contracts (`requires`) allow, then any call: a
  divergence a well-behaved caller meets is reported before one that needs a call outside
  the contracts. Prefixes that bring the model to the same state, and so the
  implementation to the same observed state, are merged: only distinct states are
  expanded. The model's state is its ledger fields and non-metric fleet values (all its
  observable behaviour depends on: events never read history fields or metrics) or, with
  `merge="full"`, every variable. Breadth-first, the first divergence is a shortest one.
* **random**: seeded random traces (`--random` calls in all, `--seed`), mostly calls the
  callers' contracts allow, now and then any call or an unknown shard.
* **counterexamples**: every trace the checker finds for the spec's properties, on every
  variant and environment (the `ledger` environment's lax traces included), replayed call
  by call. Cached on disk (`$LEDGERCHECK_CACHE`), keyed by the spec and ledgercheck's code.

Where the spec has a `[clock]`, its tick actions are steps of every source (`Tick`): one
more choice of the enumeration, one step in four of a random trace, a counterexample's own
ticks. The model and the implementation read one `ManualClock`, which a tick moves on.

The implementation is built afresh for each trace (for each enumerated sequence, its prefix
replayed; after a tick too). The first divergence is shrunk (delta debugging: calls removed while it still
diverges, a trace within the contracts kept within them, then fewer shards), printed as a
figure with a reproducer, and the command exits 1.

The modules, in the order data flows through them:

* `defaults`: the command's defaults (what its parser shows);
* `implementation`: the one loader (`module:Class`, `path/to/file.py:Class`) and the one
  builder of an implementation, the executable model included;
* `calls`: a ledger call, a script of them, and the arguments a call passes;
* `observation`: the one normaliser, what the API shows after a call, and what differs;
* `sources`: random traces, the checker's counterexamples as scripts, the default variant;
* `checker`: `Conformance`, which runs scripts, enumerates and shrinks;
* `divergence`: a divergence and its report (figure and reproducer);
* `session`: every source in turn (what `ledgercheck conform` runs);
* `command`: the `conform` command's parser and runner;
* `monitor`: `LedgerCheck`, what a generated test runs its calls through;
* `items`: the pytest items of `--ledger-conform` (imported by the plugin only when used).

This module re-exports the names the rest of ledgercheck and the tests use, each imported
from its module when first asked for: every command's parser reads the defaults of `conform`
(`cli`), and importing the whole package for them cost every command, `check` included,
about 10 ms of its start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledgercheck.model.conformance.calls import (
        LedgerCall,
        Opaque,
        Script,
        Tick,
        invoke,
        materialise,
        opaque_value,
    )
    from ledgercheck.model.conformance.checker import Conformance, enumeration_domain
    from ledgercheck.model.conformance.defaults import (
        COUNTEREXAMPLE_DEPTH,
        COUNTEREXAMPLE_TRACES,
        DEFAULT_DEPTH,
        DEFAULT_RANDOM,
        ENUMERATION_SHARDS,
    )
    from ledgercheck.model.conformance.divergence import Divergence, Recording
    from ledgercheck.model.conformance.enumeration import Enumeration
    from ledgercheck.model.conformance.implementation import (
        Implementation,
        ImplementationError,
        ManualClock,
        fixed_clock,
        load_implementation,
        load_target,
        model_implementation,
    )
    from ledgercheck.model.conformance.observation import (
        MISSING,
        Difference,
        Normaliser,
        Observation,
        Observer,
        Outcome,
        normalise,
    )
    from ledgercheck.model.conformance.session import Summary, check
    from ledgercheck.model.conformance.sources import (
        counterexample_scripts,
        default_cache,
        default_variant,
        random_scripts,
        trace_script,
    )

_HOME = {
    "calls": ("LedgerCall", "Opaque", "Script", "Tick", "invoke", "materialise", "opaque_value"),
    "checker": ("Conformance", "enumeration_domain"),
    "enumeration": ("Enumeration",),
    "defaults": (
        "COUNTEREXAMPLE_DEPTH",
        "COUNTEREXAMPLE_TRACES",
        "DEFAULT_DEPTH",
        "DEFAULT_RANDOM",
        "ENUMERATION_SHARDS",
    ),
    "divergence": ("Divergence", "Recording"),
    "implementation": (
        "Implementation",
        "ImplementationError",
        "ManualClock",
        "fixed_clock",
        "load_implementation",
        "load_target",
        "model_implementation",
    ),
    "observation": ("MISSING", "Difference", "Normaliser", "Observation", "Observer", "Outcome", "normalise"),
    "session": ("Summary", "check"),
    "sources": (
        "counterexample_scripts",
        "default_cache",
        "default_variant",
        "random_scripts",
        "trace_script",
    ),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}


def __getattr__(name: str) -> Any:
    """A re-exported name, from its module (imported now if it was not yet)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "COUNTEREXAMPLE_DEPTH",
    "COUNTEREXAMPLE_TRACES",
    "DEFAULT_DEPTH",
    "DEFAULT_RANDOM",
    "ENUMERATION_SHARDS",
    "MISSING",
    "Conformance",
    "Difference",
    "Divergence",
    "Enumeration",
    "Implementation",
    "ImplementationError",
    "LedgerCall",
    "ManualClock",
    "Normaliser",
    "Observation",
    "Observer",
    "Opaque",
    "Outcome",
    "Recording",
    "Script",
    "Summary",
    "Tick",
    "check",
    "counterexample_scripts",
    "default_cache",
    "default_variant",
    "enumeration_domain",
    "fixed_clock",
    "invoke",
    "load_implementation",
    "load_target",
    "materialise",
    "model_implementation",
    "normalise",
    "opaque_value",
    "random_scripts",
    "trace_script",
]
