"""`ledgercheck conform`: what it runs (`run`); its parser is in the commands layer
(`model.cli`), like every command's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ledgercheck.model import executor
from ledgercheck.model.conformance.checker import Conformance
from ledgercheck.model.conformance.implementation import load_target
from ledgercheck.model.conformance.session import check
from ledgercheck.model.conformance.sources import (
    default_cache,
    default_variant,
)
from ledgercheck.model.errors import EXIT_MISMATCH, EXIT_OK, UsageError
from ledgercheck.model.spec import MAX_SHARDS, load_spec


def run(ns: argparse.Namespace) -> int:
    for name, value, low in (("--depth", ns.depth, 0), ("--random", ns.random, 0), ("--cex-depth", ns.cex_depth, 0)):
        if value < low:
            raise UsageError(f"{name} must be >= {low}")
    if ns.cex_traces < 1:
        raise UsageError("--cex-traces must be >= 1")
    if ns.shards is not None and not 1 <= ns.shards <= MAX_SHARDS:
        raise UsageError(f"--shards must be in [1, {MAX_SHARDS}]")
    spec_file = load_spec(ns.spec)
    variant = ns.variant or default_variant(spec_file)
    spec = spec_file.variant(variant)
    overrides = dict(ns.policy)
    policy = spec.resolve_policy(overrides)
    target = ns.impl or (spec.binding.target if spec.binding is not None else None)
    if target is None:
        raise UsageError("conform needs --impl module:Class (the spec's [implementation] names no target)")
    impl = load_target(target, spec)
    conformance = Conformance(spec, impl, policy, target)
    progress = (lambda message: print(message, file=sys.stderr)) if ns.progress else None
    config = executor.from_namespace(ns)
    print(f"ledgercheck conform: {target} against the model of {variant!r} ({Path(spec_file.path).name})")
    summary = check(
        conformance,
        spec_file,
        overrides,
        depth=ns.depth,
        shards=ns.shards,
        random_calls=ns.random,
        seed=ns.seed,
        counterexamples=not ns.no_counterexamples,
        cex_depth=ns.cex_depth,
        cex_traces=ns.cex_traces,
        jobs=config.jobs,
        executor=config.kind,
        merge=ns.merge,
        cache=None if ns.no_cache else default_cache(),
        progress=progress,
        echo=print,
    )
    if summary.divergence is not None:
        print()
        print(conformance.report(summary.divergence, variant))
        return EXIT_MISMATCH
    return EXIT_OK
