"""`ledgercheck conform`: what it runs (`run`); its parser is in the commands layer
(`model.cli`), like every command's.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgercheck.model import budget, executor
from ledgercheck.model.budget import BudgetExhausted
from ledgercheck.model.conformance import deadline
from ledgercheck.model.conformance.checker import Conformance
from ledgercheck.model.conformance.defaults import COUNTEREXAMPLE_DEPTH, DEFAULT_DEPTH, DEFAULT_RANDOM, RUN_CALLS
from ledgercheck.model.conformance.implementation import ImplementationError, load_target, spec_target
from ledgercheck.model.conformance.session import check
from ledgercheck.model.conformance.sources import default_cache, default_variant
from ledgercheck.model.console import Heartbeat
from ledgercheck.model.errors import (
    EXIT_MISMATCH,
    EXIT_OK,
    ImplementationEnded,
    LedgercheckError,
    ProcessDied,
    UsageError,
)
from ledgercheck.model.spec import MAX_SHARDS, ConformDefaults, SpecFile, load_spec, policy_text, reference_reason


def run(ns: argparse.Namespace) -> int:
    bounds = (("--depth", ns.depth, 0), ("--random", ns.random, 0), ("--cex-depth", ns.cex_depth, 0))
    for name, value, low in (*bounds, ("--run-calls", ns.run_calls, 2)):
        if value is not None and value < low:
            raise UsageError(f"{name} must be >= {low}")
    if ns.cex_traces < 1:
        raise UsageError("--cex-traces must be >= 1")
    deadline.check_limit(ns.call_timeout)
    if ns.shards is not None and not 1 <= ns.shards <= MAX_SHARDS:
        raise UsageError(f"--shards must be in [1, {MAX_SHARDS}]")
    spec_file = load_spec(ns.spec)
    _quiet_implementation_logs()
    variant = ns.variant or default_variant(spec_file)
    spec = spec_file.variant(variant)
    _spec_defaults(ns, spec.conform or ConformDefaults())
    ns.cex_depth = spec.search_depth(ns.cex_depth, COUNTEREXAMPLE_DEPTH)  # as deep as `check` looks
    overrides = dict(ns.policy)
    policy = spec.resolve_policy(overrides)
    target = ns.impl
    if target is None and spec.binding is not None and spec.binding.target:
        target = spec_target(spec.binding.target, spec_file.path)
    if target is None:
        raise UsageError("conform needs --impl module:Class (the spec's [implementation] names no target)")
    try:
        impl = load_target(target, spec)
    except ImplementationError as exc:
        where = spec.binding.target_where if ns.impl is None and spec.binding is not None else None
        if where is None:
            raise
        raise ImplementationError(f"{where}: {exc}") from None  # the spec's own target: its line
    conformance = Conformance(spec, impl, policy, target, ns.call_timeout)
    shown = policy_text(policy)
    why = f" ({reference_reason(spec_file)})" if ns.variant is None and len(spec_file.variants) > 1 else ""
    print(
        f"ledgercheck conform: {target} against the model of {variant!r}{why} ({Path(spec_file.path).name})"
        + (f", policy {shown}" if shown else ""),
        flush=True,
    )
    work = _Work(conformance, spec_file, overrides, variant, ns, executor.from_namespace(ns))
    if not executor.Beside.possible():
        conformance.limit_calls()
        return _compare(work, _written, None)
    return _guarded(work)


def _spec_defaults(ns: argparse.Namespace, given: ConformDefaults) -> None:
    """The options the command line left out, from the spec's `[conform]` table, else
    conform's own defaults (`ci`, which takes none of them, runs conform this way)."""
    ns.depth = ns.depth if ns.depth is not None else given.depth if given.depth is not None else DEFAULT_DEPTH
    ns.random = ns.random if ns.random is not None else given.random if given.random is not None else DEFAULT_RANDOM
    ns.shards = ns.shards if ns.shards is not None else given.shards
    ns.merge = ns.merge or given.merge or "ledger"
    ns.run_calls = ns.run_calls if ns.run_calls is not None else given.run_calls or RUN_CALLS


def _written(stream: str, text: str) -> None:
    """A line of the command's output, on `stream` ("stdout", "stderr")."""
    print(text, file=sys.stderr if stream == "stderr" else sys.stdout, flush=True)


@dataclass(frozen=True)
class _Work:
    """What one comparison needs: the loaded implementation and spec, and the options."""

    conformance: Conformance
    spec_file: SpecFile
    overrides: dict[str, int]
    variant: str
    ns: argparse.Namespace
    config: executor.ExecutorConfig


def _quiet_implementation_logs() -> None:
    """Keep what the implementation logs out of the command's output: with no handler of its
    own, Python prints a warning or worse to stderr (its last resort), thousands of times
    over the calls conform makes, between the lines of the report. Conform compares the log
    lines a spec declares through handlers of its own; a program that configured logging keeps
    its handlers."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())


def _guarded(work: _Work) -> int:
    """The comparison in a process of its own, so that an implementation that ends the
    process it runs in (`os._exit`, a crash in native code) cannot end the command with its
    own exit code (0 would read as a pass): the command exits 3, naming the calls it was
    running. These are found by running the comparison again, quietly and one call sequence
    after the other, in a process that tells each call sequence before the implementation
    runs it (a cost paid only after a death: the first run is not slowed). The forked
    process's output comes back line by line and is written here, as the command's own."""
    side = executor.Beside(_compare_beside, work, False, _relayed, "conform's comparison")
    try:
        _within_budget(side)
        code: int = side.result()
        return code
    except ImplementationEnded:  # the calls are named already (a forked run of the enumeration)
        raise
    except ProcessDied as died:
        first = died
    finally:
        side.stop()
    running: deque[str] = deque(maxlen=1)
    watched = executor.Beside(_compare_beside, work, True, running.append, "conform's comparison")
    try:
        _within_budget(watched)
        watched.result()
    except ProcessDied as again:
        if not running:
            raise ProcessDied(f"{first}; no divergence and no conformance established") from None
        raise ImplementationEnded(
            f"{again} while the implementation ran {running[-1]}: the implementation ended the process it ran in "
            "(a call of os._exit, a crash in native code, or the system out of memory); no divergence and no "
            "conformance established"
        ) from None
    except LedgercheckError as exc:
        raise ProcessDied(f"{first}; a second run, to name the calls, ended otherwise ({exc})") from None
    finally:
        watched.stop()
    raise ProcessDied(
        f"{first}; a second run, told every call to name the one it ended on, did not end: the implementation "
        "(or the system, out of memory) ended the first run only; no conformance established"
    )


def _within_budget(side: executor.Beside[_Work, bool, int]) -> None:
    """Wait for the comparison while the budget lasts. It stops by itself when the budget runs
    out (the enumeration looks at it at every node), but not inside a call of the
    implementation that never returns: past the deadline and its grace period (at once for
    the memory budget, the processes' memory counted), its processes are told to stop
    (SIGUSR1: `Overdue` raised in the one whose implementation is in a call), and it says
    which calls the implementation did not return from; if it does not answer within NAMING
    seconds (a loop in native code), it is stopped unnamed."""
    limits = budget.active()
    while not side.wait(POLL):
        spent = executor.overdue(limits)
        if spent is None:
            continue
        for pid in executor.family(side.pid):  # the process a call hangs in names it
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGUSR1)
        if side.wait(NAMING):
            return
        raise BudgetExhausted(
            f"the {spent} ran out during conform's comparison, which did not stop (the implementation in a call "
            "that does not return, in native code); no conformance established"
        )


POLL = 0.25
"""Seconds between two looks at the budget while the comparison runs."""
NAMING = 2.0
"""Seconds the comparison has, once told to stop, to say where the implementation is."""


def _relayed(message: tuple[str, str]) -> None:
    _written(*message)


def _compare_beside(work: _Work, watched: bool, send: Callable[[Any], None] | None) -> int:
    """`_compare` in the process `_guarded` forks: its output sent back line by line, or
    (`watched`) none, each call sequence sent instead before the implementation runs it. A
    Ray instance it started ends with it (the process ends without running exit handlers)."""
    assert send is not None
    work.conformance.stop_when_overdue()
    try:
        if watched:
            return _compare(work, lambda stream, text: None, send)
        return _compare(work, lambda stream, text: send((stream, text)), None)
    finally:
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            ray.shutdown()


def _compare(work: _Work, write: Callable[[str, str], None], watch: Callable[[str], None] | None) -> int:
    """Every source (`session.check`), then the report of a divergence, each line passed to
    `write`. Watched (`watch` is told each call sequence before the implementation runs it):
    one call sequence after the other in this process, for `_guarded` to name the calls a
    death came in."""
    ns, config = work.ns, work.config
    if watch is not None:
        work.conformance.watching = watch
    # --progress: every line; neither option: a line now and then (never minutes of silence)
    progress: Callable[[str], None] | None = (lambda message: write("stderr", message)) if ns.progress else None
    if ns.progress is None:
        progress = Heartbeat(lambda line: write("stderr", line))
    with work.conformance.stops_named():
        summary = check(
            work.conformance,
            work.spec_file,
            work.overrides,
            depth=ns.depth,
            shards=ns.shards,
            random_calls=ns.random,
            seed=ns.seed,
            counterexamples=not ns.no_counterexamples,
            branches=not ns.no_branches,
            runs=not ns.no_runs,
            run_calls=ns.run_calls,
            probes=not ns.no_probes,
            policies=not ns.no_policies,
            cex_depth=ns.cex_depth,
            cex_traces=ns.cex_traces,
            jobs=config.jobs if watch is None else 1,
            executor=config.kind if watch is None else "local",
            merge=ns.merge,
            cache=None if ns.no_cache else default_cache(),
            progress=progress,
            echo=lambda line: write("stdout", line),
        )
        if summary.divergence is not None:
            write("stdout", "")
            found_by = summary.checker or work.conformance  # the policy it diverged at
            write("stdout", found_by.report(summary.divergence, work.variant))
            return EXIT_MISMATCH
    return EXIT_OK
