"""`ledgercheck conform`: its parser (`register`) and what it runs (`run`).

The argparse half of the conformance package; everything else is in the modules beside it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from model import budget
from model.conformance.checker import ENUMERATION_SHARDS, Conformance
from model.conformance.implementation import load_target
from model.conformance.session import DEFAULT_DEPTH, check
from model.conformance.sources import (
    COUNTEREXAMPLE_DEPTH,
    COUNTEREXAMPLE_TRACES,
    DEFAULT_RANDOM,
    default_cache,
    default_variant,
)
from model.errors import EXIT_MISMATCH, EXIT_OK, UsageError
from model.spec import MAX_SHARDS, load_spec


def register(subparsers: Any) -> None:
    from model.cli import _policy_arg

    parser = subparsers.add_parser(
        "conform",
        help="check an implementation against the executable model, call by call",
        description="Drive an implementation of the ledger's API and the executable model of a spec variant "
        "through the same calls (every sequence up to --depth, seeded random traces, every counterexample "
        "of the checker) and compare everything the API shows after every call.",
        epilog="examples:\n"
        "  ledgercheck conform --impl nemo_rl.models.generation.fleet_health:GenerationFleetHealth\n"
        "  ledgercheck conform --impl tests/impl/fleet_health_clean.py:GenerationFleetHealth --depth 6\n"
        "  ledgercheck conform --impl path/to/fleet_health.py:GenerationFleetHealth --variant as_written "
        "--no-counterexamples",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("spec", nargs="?", default=None, help="spec file (default: the bundled spec)")
    parser.add_argument(
        "--impl",
        default=None,
        metavar="TARGET",
        help="module:Class or path/to/file.py:Class (default: the spec's [implementation] target)",
    )
    parser.add_argument(
        "--variant", default=None, help="the variant to conform to (default: the first whose properties all hold)"
    )
    parser.add_argument(
        "--depth",
        type=int,
        default=DEFAULT_DEPTH,
        help=f"enumerate every call sequence up to D (default {DEFAULT_DEPTH})",
    )
    parser.add_argument(
        "--shards",
        type=int,
        default=None,
        help=f"fleet size (default: {ENUMERATION_SHARDS} for enumeration, the spec's for the other traces)",
    )
    parser.add_argument(
        "--random",
        type=int,
        default=DEFAULT_RANDOM,
        metavar="N",
        help=f"random calls in all (default {DEFAULT_RANDOM})",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random traces (default 0)")
    parser.add_argument(
        "--policy",
        action="append",
        type=_policy_arg,
        default=[],
        metavar="NAME=VALUE",
        help="override a policy constant",
    )
    parser.add_argument(
        "--no-counterexamples", action="store_true", help="skip the checker's counterexamples (the slowest source)"
    )
    parser.add_argument(
        "--cex-depth",
        type=int,
        default=COUNTEREXAMPLE_DEPTH,
        metavar="K",
        help=f"checker depth for counterexamples (default {COUNTEREXAMPLE_DEPTH})",
    )
    parser.add_argument(
        "--cex-traces",
        type=int,
        default=COUNTEREXAMPLE_TRACES,
        metavar="M",
        help=f"distinct counterexamples per result (default {COUNTEREXAMPLE_TRACES})",
    )
    parser.add_argument(
        "--jobs", type=int, default=None, help="processes for the checker (default: the CPUs, at most 4)"
    )
    parser.add_argument(
        "--merge",
        choices=("ledger", "full"),
        default="ledger",
        help="enumeration merges prefixes that reach the same model state: its ledger and non-metric fleet "
        "values (ledger, the default: all the model's behaviour depends on), or every variable, history "
        "and metrics included (full: many more states)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="check afresh instead of reading the counterexamples cached by an earlier run "
        "($LEDGERCHECK_CACHE, default ~/.cache/ledgercheck)",
    )
    parser.add_argument("--progress", action="store_true", help="progress on stderr")
    budget.add_options(parser)
    parser.set_defaults(run=run)


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
    jobs = ns.jobs if ns.jobs is not None else min(4, os.cpu_count() or 1)
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
        jobs=max(1, jobs),
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
