"""One conformance session: every source of call sequences in turn (the enumeration, random
traces, the checker's counterexamples), stopping at the first divergence, shrunk."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ledgercheck.model import budget
from ledgercheck.model.conformance.calls import Script
from ledgercheck.model.conformance.checker import ENUMERATION_SHARDS, Conformance
from ledgercheck.model.conformance.divergence import Divergence
from ledgercheck.model.conformance.sources import (
    COUNTEREXAMPLE_DEPTH,
    COUNTEREXAMPLE_TRACES,
    DEFAULT_RANDOM,
    counterexample_scripts,
    random_scripts,
)
from ledgercheck.model.spec import SpecFile

DEFAULT_DEPTH = 4


@dataclass
class Summary:
    lines: list[str] = field(default_factory=list)
    divergence: Divergence | None = None


def check(
    conformance: Conformance,
    spec_file: SpecFile,
    overrides: Mapping[str, int],
    *,
    depth: int = DEFAULT_DEPTH,
    shards: int | None = None,
    random_calls: int = DEFAULT_RANDOM,
    seed: int = 0,
    counterexamples: bool = True,
    cex_depth: int = COUNTEREXAMPLE_DEPTH,
    cex_traces: int = COUNTEREXAMPLE_TRACES,
    jobs: int | None = 1,
    executor: str = "local",
    merge: str = "ledger",
    cache: Path | None = None,
    progress: Callable[[str], None] | None = None,
    echo: Callable[[str], None] | None = None,
) -> Summary:
    """Every source in turn, stopping at the first divergence (shrunk)."""
    spec = conformance.spec
    summary = Summary()

    def say(line: str) -> None:
        summary.lines.append(line)
        if echo is not None:
            echo(line)

    def scripts_diverge(scripts: Iterable[Script], by: str) -> Divergence | None:
        for script in scripts:
            budget.stop_if_spent(by, "the lines above found no divergence")
            found = conformance.run(script)
            if found is not None:
                found.found_by = f"{by}: {script.source}"
                found.original_calls = len(found.script.calls)
                return conformance.shrink(found)
        return None

    if depth > 0:
        enum_shards = shards or min(ENUMERATION_SHARDS, spec.default_shards) or 1
        for contract, what in ((True, "calls the callers' contracts allow"), (False, "any call")):
            result = conformance.enumerate(enum_shards, depth, progress, merge, contract)
            if result.divergence is not None:
                say(
                    f"  enumeration      {enum_shards} shards, {what}: divergence at depth {result.depth + 1} "
                    f"({result.sequences} call sequences)"
                )
                result.divergence.found_by = f"enumeration of every sequence of {what} at {enum_shards} shards"
                summary.divergence = conformance.shrink(result.divergence)
                return summary
            note = ", every reachable state seen" if result.exhausted else ""
            say(
                f"  enumeration      {enum_shards} shards, {what}, depth {result.depth}: "
                f"{result.sequences} call sequences, {result.states} distinct states{note} ({result.seconds:.1f} s)"
            )
    other_shards = shards or spec.default_shards
    budget.stop_if_spent("the enumeration", "the lines above found no divergence")
    if random_calls > 0:
        start = time.monotonic()
        scripts = random_scripts(spec, other_shards, conformance.policy, random_calls, seed)
        found = scripts_diverge(scripts, "a random trace")
        if found is not None:
            summary.divergence = found
            return summary
        say(
            f"  random           {other_shards} shards: {random_calls} calls in {len(scripts)} traces, seed {seed} "
            f"({time.monotonic() - start:.1f} s)"
        )
    if counterexamples:
        start = time.monotonic()
        notes: list[str] = []
        scripts = counterexample_scripts(
            spec_file,
            shards=other_shards,
            overrides=overrides,
            depth=cex_depth,
            traces=cex_traces,
            jobs=jobs,
            executor=executor,
            progress=progress,
            cache=cache,
            notes=notes,
        )
        found = scripts_diverge(scripts, "a counterexample of the checker")
        if found is not None:
            summary.divergence = found
            return summary
        calls = sum(len(s.calls) for s in scripts)
        say(
            f"  counterexamples  {len(scripts)} traces of the checker (depth {cex_depth}, {cex_traces} per result), "
            f"{calls} calls ({time.monotonic() - start:.1f} s{'; ' + notes[0] if notes else ''})"
        )
    say(f"{conformance.traces} traces, {conformance.calls_compared} calls compared, no divergence")
    return summary
