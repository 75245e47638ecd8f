"""Where conformance's call sequences come from, besides the enumeration: seeded random
traces, and every counterexample the checker finds (cached on disk). And which variant an
implementation is checked against by default."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgercheck.model import ir
from ledgercheck.model.conformance.calls import LedgerCall, Opaque, Script, Tick, clock_ticks, invoke, opaque_value
from ledgercheck.model.conformance.defaults import COUNTEREXAMPLE_DEPTH, COUNTEREXAMPLE_TRACES, RUN_CALLS
from ledgercheck.model.conformance.implementation import model_implementation
from ledgercheck.model.conformance.values import IntValues, TextValues
from ledgercheck.model.interpreter import LedgerModel
from ledgercheck.model.result import Result
from ledgercheck.model.spec import Event, Spec, SpecFile, policy_text, reference_variant
from ledgercheck.model.trace import Trace

RANDOM_TRACE_CALLS = 50
WIDE_INTS = (15, 16, 17, 31, 32, 33, 63, 64, 65, 99, 100, 101, 127, 128, 129, 255, 256, 257, 1000, 1024, 65535, 65536)
"""Larger ints a random int argument takes now and then, where the spec gives no value of its
own: the limits and powers of two an implementation caps or splits at (`code >= 128`)."""
WIDE_SHARE = 0.1
RARE_WEIGHT = 0.15  # an unguarded event that sets the state (retire): rare in random traces
TICK_SHARE = 0.25  # of the steps of a random trace, where the spec has a [clock]

# --- random traces ------------------------------------------------------------------------


def _sets_state(event: Event, state_field: str) -> bool:
    return any(isinstance(s, ir.Assign) and s.kind == "field" and s.name == state_field for s in event.body)


def random_scripts(
    spec: Spec, shards: int, policy: Mapping[str, int], total: int, seed: int, per_trace: int = RANDOM_TRACE_CALLS
) -> list[Script]:
    """Seeded random traces: `total` calls in traces of `per_trace`. Three calls in four are
    ones the callers' contracts allow in the model's state; one in fifty names an unknown shard.
    Where the spec has a `[clock]`, one step in four is a tick. In every other trace an event
    with no guard that sets the state is rare (a `retire` would end most traces early); in
    the others every event is as likely (where such an event is the way into a state, as a
    breaker's `half_open()`, the states past it are reached)."""
    model_class = model_implementation(spec)
    ticks = clock_ticks(spec, {**spec.default_policy(), **policy})
    events = list(spec.events.values())
    rare = [
        RARE_WEIGHT if e.ignore_when is None and e.requires is None and _sets_state(e, spec.state_field) else 1.0
        for e in events
    ]
    even = [1.0] * len(events)
    enums = {name: decl.members for name, decl in spec.enums.items()}
    ints = IntValues(spec, {**spec.default_policy(), **policy})
    texts = TextValues(spec)
    scripts = []
    number = 0
    while total > 0:
        count = min(per_trace, total)
        total -= count
        rng = random.Random(f"ledgercheck-conform:{seed}:{number}")
        model: LedgerModel = model_class.build(shards, policy, echo=False)
        calls: list[LedgerCall] = []
        fresh = iter(range(10**9))
        for _ in range(count):
            if ticks and rng.random() < TICK_SHARE:
                tick = rng.choice(ticks)
                model.advance_time(tick.units)
                calls.append(tick)
                continue
            weights = rare if number % 2 == 0 else even
            call = _random_call(rng, model, events, weights, shards, fresh, enums, ints, texts)
            calls.append(call)
            with contextlib.suppress(Exception):  # KeyError, or an error the event declares: compared later
                invoke(model, call, spec.events[call.event])
        scripts.append(Script(f"random trace {number + 1} (seed {seed})", shards, tuple(calls)))
        number += 1
    return scripts


def _random_args(
    rng: random.Random,
    event: Event,
    shard: int,
    fresh: Iterator[int],
    enums: Mapping[str, tuple[str, ...]],
    spec_ints: Callable[[str], tuple[int, ...]] = lambda name: (),
    spec_texts: Callable[[str], tuple[str, ...]] = lambda name: (),
) -> tuple[tuple[str, Any], ...]:
    """One call's arguments: an int (or shard) from 0..9, or half the time, for an int the
    spec gives values to try (`spec_ints`: `values.IntValues` in the model's state), one of
    those, and one time in ten one of `WIDE_INTS`; a bool either way, a member of an enum, a
    fresh address for text, or half the time, where the instance holds strings or the event
    has an example (`spec_texts`: `values.TextValues`), one of those (the holder calling
    again); an example for an opaque argument, None three times in ten where the type allows
    it."""
    args = []
    for param in event.signature.params:
        ptype = param.type
        value: Any
        if ptype.kind == "any":
            value = opaque_value(param, event)
        elif ptype.optional and rng.random() < 0.3:
            value = None
        elif ptype.kind == "bool":
            value = rng.random() < 0.5
        elif ptype.kind in ("int", "shard"):
            values = spec_ints(param.name) if ptype.kind == "int" else ()
            if values and rng.random() < 0.5:
                value = rng.choice(values)
            elif ptype.kind == "int" and rng.random() < WIDE_SHARE:
                value = rng.choice(WIDE_INTS)
            else:
                value = rng.randrange(10)
        elif ptype.kind == "str":
            texts = spec_texts(param.name)
            if texts and rng.random() < 0.5:
                value = rng.choice(texts)
            else:
                value = f"http://shard-{shard}.restart-{next(fresh)}"
        elif ptype.kind == "enum" and ptype.enum in enums:  # (it got its default: None, for most)
            value = rng.choice(enums[ptype.enum or ""])
        else:
            value = param.default
        args.append((param.name, value))
    return tuple(args)


def _random_call(
    rng: random.Random,
    model: LedgerModel,
    events: list[Event],
    weights: list[float],
    shards: int,
    fresh: Iterator[int],
    enums: Mapping[str, tuple[str, ...]],
    ints: IntValues,
    texts: TextValues,
) -> LedgerCall:
    if rng.random() < 0.02:
        event = rng.choices(events, weights)[0]
        return LedgerCall(event.name, rng.choice([-1, shards, shards + 5]), _random_args(rng, event, 0, fresh, enums))
    contract = rng.random() < 0.75
    call = None
    for _ in range(50):
        event = rng.choices(events, weights)[0]
        shard = rng.randrange(shards)
        store = model.variables()
        spec_ints = functools.partial(ints.at, event.name, store=store, shard=shard)
        held = texts.held(store, shard) if texts.events else ()

        def spec_texts(name: str, event: Event = event, held: tuple[str, ...] = held) -> tuple[str, ...]:
            example = texts.example(event.name, name)
            return (*held, *(t for t in example if t not in held))

        call = LedgerCall(event.name, shard, _random_args(rng, event, shard, fresh, enums, spec_ints, spec_texts))
        if not contract or model.contract_allows(event.name, shard, dict(call.args)):
            return call
    assert call is not None
    return call


# --- long runs ------------------------------------------------------------------------------

CYCLE_REPEATS = 33
"""How many times `run_scripts` makes a trace to a branch at least, however long it is (a
redrive a class stops resetting after 20 or 32, eight calls a cycle)."""


def run_scripts(
    spec: Spec,
    policy: Mapping[str, int],
    seed: int,
    cycles: Sequence[Script] = (),
    length: int = RUN_CALLS,
) -> list[Script]:
    """For every ordered pair of the spec's events (and ticks, with a `[clock]`), one trace on
    one instance that makes the two calls over and over, `length` calls in all, the arguments
    drawn once (seeded): counters pushed far past any threshold, as neither the enumeration (a
    few calls deep) nor a random trace (which rarely repeats one pattern fifteen times) does.
    Then each of `cycles` (the traces to the spec's branches) made over and over to `length`
    calls, and CYCLE_REPEATS times at least: a cycle through the states (dead-letter, then
    redrive) that a class keeps a hidden count of, capped, while the model is back where it
    started (the enumeration merges it away)."""
    steps = [
        *_one_call_each(spec, policy, f"ledgercheck-conform-runs:{seed}"),
        *clock_ticks(spec, {**spec.default_policy(), **policy}),
    ]
    patterns: list[tuple[str, int, tuple[LedgerCall, ...], int]] = [
        (f"{first.event}, {second.event}", 1, (first, second), 1) for first in steps for second in steps
    ]
    patterns += [(cycle.source, cycle.shards, cycle.calls, CYCLE_REPEATS) for cycle in cycles if cycle.calls]
    closed = _closed_cycles(spec, policy, [c for c in cycles if c.calls and c.shards == 1], steps)
    patterns += [(source, 1, calls, CYCLE_REPEATS) for source, calls in closed]
    scripts = []
    for source, shards, calls, least in patterns:
        repeats = max(least, -(-length // len(calls)))
        scripts.append(Script(f"{source} repeated {repeats} times", shards, calls * repeats))
    scripts += _counting_runs(spec, [c for c in cycles if c.calls and c.shards == 1])
    return scripts


COUNTING_CALLS = 300
"""How long a counting run is (`_counting_runs`): past a counter a class keeps in a byte."""


def _counts(event: Event) -> bool:
    """Whether the event adds to a number of its own (`x = x + e`, `x = x - e`)."""
    return any(
        isinstance(n, ir.Assign)
        and isinstance(n.value, ir.Arith)
        and isinstance(n.value.left, (ir.FieldRef, ir.GlobalRef))
        and n.value.left.name == n.name
        for n in ir.walk(event.body)
    )


def _counting_runs(spec: Spec, traces: Sequence[Script]) -> list[Script]:
    """Each trace to a branch whose last call counts something, then that call again and again,
    COUNTING_CALLS calls in all: a count a class keeps in a byte (a data counter that wraps at
    256, trial) is reached one call at a time, where a repeated pair climbs a hundred calls' worth."""
    found = []
    for trace in traces:
        last = trace.calls[-1]
        if isinstance(last, Tick) or last.event not in spec.events or not _counts(spec.events[last.event]):
            continue
        more = max(0, COUNTING_CALLS - len(trace.calls))
        source = f"{trace.source}, then its last call repeated {more} times"
        found.append(Script(source, 1, (*trace.calls, *[last] * more)))
    return found


def _closed_cycles(
    spec: Spec, policy: Mapping[str, int], traces: Sequence[Script], steps: Sequence[LedgerCall]
) -> list[tuple[str, tuple[LedgerCall, ...]]]:
    """Each trace to a branch that one more call (`steps`: each event once, each tick) takes
    back to where it began, but for numbers that grew: the trace and that call, a cycle to
    repeat. A class that counts its handshakes and stops at five (open, SYN, ACK, reset: four
    calls a round, trial) is met on the sixth round; the trace alone, repeated, stays in the
    state it ends in."""
    model = model_implementation(spec).build(1, policy, echo=False)
    start = dict(model.variables())
    own = {f.name for f in spec.fields} | {g.name for g in spec.globals}  # not history: no class keeps it
    kept = [
        key
        for key, value in start.items()
        if key[1] in own and not (isinstance(value, int) and not isinstance(value, bool))
    ]
    found: list[tuple[str, tuple[LedgerCall, ...]]] = []
    for trace in traces:
        model.restore(start)
        _run_quietly(spec, model, trace.calls)
        end = model.save()
        if all(end[key] == start[key] for key in kept):
            continue  # it ends where it began: the runs repeat it as it is
        for step in steps:
            model.restore(end)
            _run_quietly(spec, model, (step,))
            after = model.variables()
            if all(after[key] == start[key] for key in kept) and any(
                after[key] != start[key] for key in start if key[1] in own
            ):
                found.append((f"{trace.source}, then {step.event}", (*trace.calls, step)))
                break
    return found


def _run_quietly(spec: Spec, model: Any, calls: Sequence[LedgerCall]) -> None:
    """Make `calls` on the model, a refusal (an error the spec declares) a call made."""
    for call in calls:
        if isinstance(call, Tick):
            model.advance_time(call.units)
            continue
        with contextlib.suppress(Exception):  # what the call raises is compared when it runs
            invoke(model, call, spec.events[call.event])


def tick_runs(
    spec: Spec, policy: Mapping[str, int], traces: Sequence[Script], seed: int, length: int = RUN_CALLS
) -> list[Script]:
    """With a `[clock]`: after each of `traces` (the traces to the spec's branches), each tick
    and each event in turn, one unit of time at a time, `length` calls more: every timer
    walked past every boundary a policy sets (a timeout a class caps at 4 differs at 4 ticks
    where the policy says 5; the branch traces jump the whole timeout at once)."""
    ticks = clock_ticks(spec, {**spec.default_policy(), **policy})
    if not ticks:
        return []
    events = _one_call_each(spec, policy, f"ledgercheck-conform-ticks:{seed}")
    repeats = max(1, length // 2)
    return [
        Script(
            f"{trace.source}, then {tick.event}, {event.event} repeated {repeats} times",
            1,
            (*trace.calls, *((tick, event) * repeats)),
        )
        for trace in [Script("the start", 1, ()), *traces]
        if trace.shards == 1
        for tick in ticks
        for event in events
    ]


def _one_call_each(spec: Spec, policy: Mapping[str, int], seed: str) -> list[LedgerCall]:
    """One call of every event on instance 0, its arguments drawn once (seeded, from the
    values the spec gives reason to try in the initial state): what the long runs repeat."""
    rng = random.Random(seed)
    model = model_implementation(spec).build(1, policy, echo=False)
    enums = {name: decl.members for name, decl in spec.enums.items()}
    ints = IntValues(spec, {**spec.default_policy(), **policy})
    fresh = iter(range(10**9))
    calls = []
    for event in spec.events.values():
        spec_ints = functools.partial(ints.at, event.name, store=model.variables(), shard=0)
        calls.append(LedgerCall(event.name, 0, _random_args(rng, event, 0, fresh, enums, spec_ints)))
    return calls


# --- a trace to every branch ----------------------------------------------------------------


@dataclass(frozen=True)
class Branches:
    """The traces to the spec's branches at one policy (`branch_scripts`)."""

    scripts: list[Script]
    """The traces to follow: a sequence that begins another left out (running the longer
    compares every call of it)."""
    every: list[Script]
    """Every distinct trace, those that begin another included: what the long runs repeat
    and the probes walk (`run_scripts`, `probes.probe_scripts`). A trace to a retry repeated
    reaches the cap; the longer trace that begins with it may end where nothing repeats (a
    final state), so leaving it out would leave the cap unreached."""
    reached: int
    total: int
    seconds: float = 0.0
    """How long the coverage search took."""
    fleet: list[Script] = field(default_factory=list)
    """The traces, over `fleet_shards` instances, to the branches one instance does not reach
    (`codegen.coverage.fleet_search`), each one branch's."""
    fleet_shards: int = 1
    fleet_seconds: float = 0.0
    unreached: tuple[str, ...] = ()
    """The branches no trace reaches (neither search), as `file:line event: what`."""


def branch_scripts(
    spec_file: SpecFile,
    spec: Spec,
    policy: Mapping[str, int],
    progress: Callable[[str], None] | None = None,
    shards: int = 1,
) -> Branches:
    """The shortest call sequence (on one instance) to every branch of `spec` the coverage
    search reaches at `policy` (`codegen.coverage.search`, as the coverage tests are found),
    with the number of branches reached and of branches in all. The one source that reaches
    each branch however deep it lies: a timeout five ticks away, a retry limit at a policy
    above the default. With `shards` above one, the branches one instance cannot reach are
    searched for over that many (`codegen.coverage.fleet_search`): a decision that takes every
    instance's vote."""
    from ledgercheck.codegen.searchcache import search, with_fleet  # the searches, only when this source runs

    began = time.monotonic()
    found = search(spec_file, spec, policy, progress)
    seconds = time.monotonic() - began
    ticks = {tick.event: tick for tick in clock_ticks(spec, {**spec.default_policy(), **policy})}

    def calls_of(trace: Sequence[tuple[int, str, tuple[tuple[str, Any], ...]]]) -> tuple[LedgerCall | Tick, ...]:
        return tuple(
            ticks[name]
            if name not in spec.events
            else LedgerCall(name, shard, _every_argument(spec.events[name], dict(given)))
            for shard, name, given in trace
        )

    sequences = [calls_of([(0, n, a) for n, a in found.traces[b]]) for b in found.branches if b in found.traces]
    unique = list(dict.fromkeys(sequences))
    every = [Script(f"the trace to branch {n} of {len(unique)}", 1, calls) for n, calls in enumerate(unique, 1)]
    scripts = [
        s for s in every if not any(len(o.calls) > len(s.calls) and o.calls[: len(s.calls)] == s.calls for o in every)
    ]
    began = time.monotonic()
    fleet = with_fleet(spec_file, spec, found, shards, policy, progress)
    fleet_seconds = time.monotonic() - began if fleet is not found else 0.0
    fleet_scripts = [
        Script(f"the trace to branch {number} on {shards} instances", shards, calls_of(trace))
        for number, trace in enumerate(fleet.fleet_traces.values(), 1)
    ]
    unreached = tuple(
        f"{Path(spec_file.path).name}:{u.branch.line} {u.branch.event}: {u.branch.describe}"
        for u in fleet.unreached
        if not u.proved
    )
    return Branches(
        scripts,
        every,
        len(found.traces),
        len(found.branches),
        seconds,
        fleet_scripts,
        shards if fleet is not found else 1,
        fleet_seconds,
        unreached,
    )


DRAWN_POLICIES = 6
"""Policies the spec allows, drawn at random (`--seed`), that `conform` also tries, at least."""
SWEPT_POLICIES = 8
"""How many policies conform draws at most: every value of a constant whose range has no more
than this many is met (`_drawn_policies`)."""


def other_policies(spec: Spec, asked: Mapping[str, int], seed: int) -> list[tuple[str, dict[str, int]]]:
    """The policies besides the one asked that conform tries, each with its label: the largest
    the spec allows (every constant at its max), the smallest (at its min), and DRAWN_POLICIES
    drawn between (seeded). A cap a class keeps at one value (a backoff that overshoots a cap
    of 3, 5 or 7 but not the default 8) is met only at a policy where it shows."""
    if not spec.policy:
        return []
    rng = random.Random(f"ledgercheck-conform-policies:{seed}")
    candidates = [("the largest policy", spec.largest_policy()), ("the smallest policy", spec.smallest_policy())]
    candidates += [(f"a policy drawn with seed {seed}", drawn) for drawn in _drawn_policies(spec, rng)]
    seen = [dict(asked)]
    chosen = []
    for label, policy in candidates:
        if policy not in seen:
            seen.append(policy)
            chosen.append((f"{label} ({policy_text(policy)})", policy))
    return chosen


def _drawn_policies(spec: Spec, rng: random.Random) -> list[dict[str, int]]:
    """DRAWN_POLICIES policies at least, and as many as the widest range of a constant up to
    SWEPT_POLICIES: each constant's values dealt out in a seeded shuffle, so that every value
    of a constant whose range is that narrow is met at least once, each time beside other
    values of the others. A class wrong at one value between the corners (a two-node cluster
    handled apart, in a range of 1 to 5) is met there for certain, not if a draw happens on it."""
    widths = [decl.max - decl.min + 1 for decl in spec.policy.values()]
    count = min(SWEPT_POLICIES, max(DRAWN_POLICIES, *widths))
    columns: dict[str, list[int]] = {}
    for name, decl in spec.policy.items():
        values = range(decl.min, decl.max + 1)
        column: list[int] = []
        while len(column) < count:
            column += rng.sample(values, min(len(values), count - len(column)))
        columns[name] = column
    return [{name: columns[name][k] for name in spec.policy} for k in range(count)]


# --- counterexamples ----------------------------------------------------------------------


def trace_script(trace: Trace, spec: Spec, source: str) -> Script:
    """A checker's trace as the ledger calls its steps made, in order, and its ticks."""
    calls: list[LedgerCall] = []
    ticks = {tick.event: tick for tick in clock_ticks(spec, trace.policy)}
    for step in trace.steps[1:]:
        if step.action in ticks and not step.calls:
            calls.append(ticks[step.action])
        for call in step.calls:
            calls.append(LedgerCall(call.event, call.shard, _every_argument(spec.events[call.event], call.args)))
    return Script(source, trace.shard_count, tuple(calls))


def _every_argument(event: Event, given: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A call's arguments as conformance passes them: every one, its default where `given`
    leaves it out, an opaque one as the Python expression a caller passes."""
    args = []
    for param in event.signature.params:
        value = given.get(param.name, param.default)
        args.append((param.name, opaque_value(param, event, value) if param.type.kind == "any" else value))
    return tuple(args)


def _scripts_of(result: Result, spec: Spec) -> list[Script]:
    """One (variant, property, environment) checked: its traces and lax traces as scripts."""
    scripts = []
    for kind, found in (("counterexample", result.traces), ("lax counterexample", result.lax_traces)):
        for number, trace in enumerate(found, 1):
            source = f"{kind} {number} of {result.variant} / {result.property} / {result.environment}"
            scripts.append(trace_script(trace, spec, source))
    return scripts


_COUNTEREXAMPLES: dict[tuple[Any, ...], list[Script]] = {}


def _memo_key(
    spec_file: SpecFile, shards: int, overrides: Mapping[str, int], depth: int, traces: int
) -> tuple[Any, ...]:
    """The key of the process's memo."""
    return (spec_file.variant().sha256, spec_file.path, shards, tuple(sorted(overrides.items())), depth, traces)


def _cache_file(
    cache: Path, spec_file: SpecFile, shards: int, overrides: Mapping[str, int], depth: int, traces: int
) -> Path:
    """The file on disk: named by the spec's text, ledgercheck's own source and the parameters."""
    sha256 = spec_file.variant().sha256
    fingerprint = json.dumps([sha256, _code_fingerprint(), shards, sorted(overrides.items()), depth, traces])
    return cache / f"conform-counterexamples-{hashlib.sha256(fingerprint.encode()).hexdigest()[:24]}.json"


def known_counterexample_scripts(
    spec_file: SpecFile,
    *,
    shards: int,
    overrides: Mapping[str, int],
    depth: int = COUNTEREXAMPLE_DEPTH,
    traces: int = COUNTEREXAMPLE_TRACES,
    cache: Path | None = None,
    notes: list[str] | None = None,
) -> list[Script] | None:
    """What `counterexample_scripts` would return without running a check: the scripts kept
    for this process or, with `cache`, on disk (then `notes` gets where); None if neither."""
    key = _memo_key(spec_file, shards, overrides, depth, traces)
    if key in _COUNTEREXAMPLES:
        return _COUNTEREXAMPLES[key]
    if cache is None:
        return None
    cache_file = _cache_file(cache, spec_file, shards, overrides, depth, traces)
    cached = _read_cache(cache_file)
    if cached is not None:
        if notes is not None:
            notes.append(f"cached in {cache_file}")
        _COUNTEREXAMPLES[key] = cached
    return cached


def counterexample_scripts(
    spec_file: SpecFile,
    *,
    shards: int,
    overrides: Mapping[str, int],
    depth: int = COUNTEREXAMPLE_DEPTH,
    traces: int = COUNTEREXAMPLE_TRACES,
    jobs: int | None = 1,
    progress: Callable[[str], None] | None = None,
    cache: Path | None = None,
    notes: list[str] | None = None,
    executor: str = "local",
    poll: Callable[[], None] | None = None,
) -> list[Script]:
    """Every distinct trace the checker finds for every (variant, property, environment),
    as ledger calls. The checks are independent jobs of `model.runs.run_checks`, on `jobs`
    workers of `executor` (`local`: a process pool, or one after the other in this process
    for 1; `ray`: a Ray cluster; None: every core, or what the cluster offers), and the
    scripts come in the same order whichever ran them; `poll` is asked while they run (an
    exception it raises stops them). The result is kept for the process and, with `cache`
    (a directory), on disk: keyed by the spec's text, ledgercheck's own source and the
    parameters, so a changed spec or checker is checked afresh."""
    known = known_counterexample_scripts(
        spec_file, shards=shards, overrides=overrides, depth=depth, traces=traces, cache=cache, notes=notes
    )
    if known is not None:
        return known
    key = _memo_key(spec_file, shards, overrides, depth, traces)
    cache_file = None if cache is None else _cache_file(cache, spec_file, shards, overrides, depth, traces)
    from ledgercheck.model import budget
    from ledgercheck.model.executor import ExecutorConfig
    from ledgercheck.model.runs import CheckRequest, run_checks

    request = CheckRequest(spec_file, shards=shards, policy=dict(overrides), max_depth=depth, max_traces=traces)
    checked = run_checks(request, config=ExecutorConfig(executor, jobs), poll=poll)
    budget.stop_if_spent("the checker's counterexamples", "the lines above found no divergence")
    by_job = {(r.variant, r.property, r.environment): r for r in checked}
    results: list[list[Script]] = []
    for variant in spec_file.variants:  # variant, environment, property: the scripts' order
        spec = spec_file.variant(variant)
        for environment in spec.environments:
            for prop in spec.properties.values():
                if prop.applies_to(environment):
                    results.append(_scripts_of(by_job[(variant, prop.name, environment)], spec))
                    if progress is not None:
                        progress(f"  checked {variant} / {prop.name} / {environment}: {len(results[-1])} trace(s)")
    scripts: list[Script] = []
    distinct: set[tuple[int, tuple[LedgerCall, ...]]] = set()
    for found in results:
        for script in found:
            if (script.shards, script.calls) not in distinct:
                distinct.add((script.shards, script.calls))
                scripts.append(script)
    _COUNTEREXAMPLES[key] = scripts
    if cache_file is not None:
        _write_cache(cache_file, scripts)
    return scripts


def default_cache() -> Path | None:
    """$LEDGERCHECK_CACHE (empty: no cache), else $XDG_CACHE_HOME/ledgercheck or ~/.cache/ledgercheck."""
    configured = os.environ.get("LEDGERCHECK_CACHE")
    if configured is not None:
        return Path(configured) if configured else None
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "ledgercheck"


@functools.cache
def _code_fingerprint() -> str:
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent  # the model package, this one included
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _encode(value: Any) -> Any:
    return {"opaque": value.text} if isinstance(value, Opaque) else value


def _decode(value: Any) -> Any:
    return Opaque(value["opaque"]) if isinstance(value, dict) else value


def _encode_call(call: LedgerCall) -> list[Any]:
    encoded = [call.event, call.shard, [[k, _encode(v)] for k, v in call.args]]
    return [*encoded, call.units] if isinstance(call, Tick) else encoded


def _decode_call(item: list[Any]) -> LedgerCall:
    event, shard, args = item[0], int(item[1]), tuple((k, _decode(v)) for k, v in item[2])
    return Tick(event, shard, args, int(item[3])) if len(item) == 4 else LedgerCall(event, shard, args)


def _write_cache(path: Path, scripts: list[Script]) -> None:
    data = [
        {
            "source": s.source,
            "shards": s.shards,
            "calls": [_encode_call(c) for c in s.calls],
        }
        for s in scripts
    ]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(data), encoding="utf-8")
        temporary.replace(path)
    except (OSError, TypeError, ValueError):
        pass  # a cache that cannot be written is only slower


def _read_cache(path: Path) -> list[Script] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [
            Script(
                item["source"],
                int(item["shards"]),
                tuple(_decode_call(call) for call in item["calls"]),
            )
            for item in data
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- choosing the variant -----------------------------------------------------------------


def default_variant(spec_file: SpecFile) -> str:
    """The variant conformance checks by default: the spec's reference variant, the one
    every property holds in (as `gen` and `mutate` take it)."""
    return reference_variant(spec_file)
