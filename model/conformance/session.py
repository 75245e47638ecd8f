"""One conformance session: every source of call sequences in turn (the enumeration, random
traces, the checker's counterexamples), stopping at the first divergence, shrunk. With
workers, the enumeration runs beside the checker's checks, and the session reads as if the
sources had run one after the other."""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgercheck.model import budget
from ledgercheck.model.budget import BudgetExhausted
from ledgercheck.model.conformance.calls import Script
from ledgercheck.model.conformance.checker import Conformance
from ledgercheck.model.conformance.defaults import (
    COUNTEREXAMPLE_DEPTH,
    COUNTEREXAMPLE_TRACES,
    DEFAULT_DEPTH,
    DEFAULT_RANDOM,
    ENUMERATION_SHARDS,
    RUN_CALLS,
)
from ledgercheck.model.conformance.divergence import Divergence
from ledgercheck.model.conformance.enumeration import Enumeration
from ledgercheck.model.conformance.probes import probe_scripts
from ledgercheck.model.conformance.sources import (
    COUNTING_CALLS,
    Branches,
    branch_scripts,
    counterexample_scripts,
    known_counterexample_scripts,
    other_policies,
    random_scripts,
    run_scripts,
    tick_runs,
)
from ledgercheck.model.executor import Beside, ExecutorConfig
from ledgercheck.model.spec import SpecFile, plural, policy_text


@dataclass
class Summary:
    lines: list[str] = field(default_factory=list)
    divergence: Divergence | None = None
    checker: Conformance | None = None
    """Where the divergence was found at another policy than the one asked: its checker."""


def policy_note(where: str) -> str:
    """What a divergence found only at another policy than the one asked means (`where`: that
    policy, as the output names it)."""
    return (
        f"these calls agree at the policy asked, not at {where}, which the spec allows: the class is wrong "
        "there, or the spec's model of it is (one way the model can be: a field the class starts at a policy "
        'constant must start there in the spec too, initial = "constant")'
    )


LARGEST_POLICY_NOTE = policy_note("the largest policy")
"""What a divergence the branches source finds only at the spec's largest policy means."""

POLICY_DEPTH = 4
"""How deep conform enumerates at the largest and the smallest policy (1 shard), and one call
less at the policies drawn between: a bug that shows only at another policy within a few calls
(a success threshold of 3 reset in the wrong place) is met there for certain, not only if a
random trace happens on it."""
FLEET_AT_EVERY_POLICY = 10_000
"""Call sequences of the enumeration at the policy asked, at most, for it to run again at every
other policy (at its shards and depth, where it has more than one shard); a larger spec's
other policies get the one-shard enumeration of `POLICY_DEPTH` (the bundled ledger's is 92,321
sequences, 12.7 s)."""

_MODES = ((True, "calls the callers' contracts allow"), (False, "any call"))
"""The enumeration's two passes, in order: the calls the contracts allow, then any call."""


@dataclass(frozen=True)
class _EnumerationJob:
    shards: int
    depth: int
    merge: str
    parts: int = 1
    """Runs each level is split into, expanded at once (the command's local workers)."""


@dataclass
class _Enumerated:
    """The enumeration's passes (up to the first that diverged), and the traces and calls
    they added to the session's counts."""

    passes: list[tuple[str, Enumeration]]
    """(what the pass enumerates, its result)."""
    traces: int = 0
    calls_compared: int = 0
    again: bool = False
    """Its divergence could not be sent back (it does not pickle): the command's process
    runs the enumeration again itself."""

    @property
    def diverged(self) -> bool:
        return self.again or any(result.divergence is not None for _, result in self.passes)


def _enumerate(conformance: Conformance, job: _EnumerationJob, progress: Callable[[str], None] | None) -> _Enumerated:
    traces, compared = conformance.traces, conformance.calls_compared
    passes: list[tuple[str, Enumeration]] = []
    # Without contracts the first pass is the second's calls on known instances: one pass.
    for contract, what in _MODES if conformance.has_contracts else _MODES[1:]:
        result = conformance.enumerate(job.shards, job.depth, progress, job.merge, contract, job.parts)
        passes.append((what, result))
        if result.divergence is not None or result.stopped is not None:
            break
    return _Enumerated(passes, conformance.traces - traces, conformance.calls_compared - compared)


def _enumerate_beside(
    conformance: Conformance, job: _EnumerationJob, progress: Callable[[str], None] | None
) -> _Enumerated:
    """The enumeration in the process beside the checks (`executor.Beside`)."""
    with conformance.stops_named():
        enumerated = _enumerate(conformance, job, progress)
    try:
        pickle.dumps(enumerated)
    except Exception:  # noqa: BLE001 - a value the implementation returned, of any kind
        return _Enumerated([], again=True)
    return enumerated


class _Diverged(Exception):
    """The enumeration beside the checks diverged: the checks are not needed."""


@dataclass
class _BesideChecks:
    """What the enumeration beside the checker's checks gave (`_beside_checks`)."""

    enumerated: _Enumerated | None
    scripts: list[Script] | None
    seconds: float
    stopped: BudgetExhausted | None = None
    """The budget ran out during the checks: raised once the enumeration's lines are printed
    (or not at all if it diverged), as one after the other, where the enumeration comes first."""


def _beside_checks(
    conformance: Conformance,
    job: _EnumerationJob,
    checks: Callable[[Callable[[], None]], list[Script]],
    progress: Callable[[str], None] | None,
) -> _BesideChecks | None:
    """The enumeration in a process of its own while the executor runs the checker's checks
    (`checks(poll)`): the two are independent, and the enumeration is most of the work that
    needs no solver. An enumeration that diverges stops the checks, which its verdict does
    not need. None where a process cannot be forked (`Beside.possible`): then the
    enumeration runs first, in this process."""
    if not Beside.possible():
        return None
    side = Beside(_enumerate_beside, conformance, job, progress, "the enumeration")

    def poll() -> None:
        if side.done() and side.result().diverged:
            raise _Diverged

    start = time.monotonic()
    scripts: list[Script] | None = None
    stopped: BudgetExhausted | None = None
    try:
        try:
            scripts = checks(poll)
        except _Diverged:
            pass
        except BudgetExhausted as spent:  # the enumeration, not bound by it, still comes first
            stopped = spent
        seconds = time.monotonic() - start
        enumerated = side.result()
    finally:
        side.stop()
    conformance.traces += enumerated.traces
    conformance.calls_compared += enumerated.calls_compared
    return _BesideChecks(None if enumerated.again else enumerated, scripts, seconds, stopped)


AROUND_DEPTH = 3
"""How many calls deep the enumeration from the ends of the traces to the branches goes (never
deeper than `--depth`): a backoff a class computes from its restart count shows three calls
after a crash that follows a steady run, nine calls from the start (pod-tracker trial)."""
SAY_EVERY = 200
"""Traces of a source between two progress messages (a log hears one at most every 30 s)."""


def _from_ends(
    checker: Conformance, ends: list[tuple[Any, ...]], shards: int, reach: int, merge: str, at: str, what: str
) -> Enumeration:
    """Every sequence of up to `reach` calls at `shards` shards from where each trace to a
    branch ends (on shard 0): its divergence shrunk and named, or a budget that ran out raised."""
    found = checker.enumerate(shards, reach, None, merge, False, 1, starts=ends)
    if found.divergence is not None:
        found.divergence.found_by = (
            f"every sequence of up to {plural(reach, 'call')} from where a trace to a branch ends{at}"
            if shards == 1
            else f"every call at {plural(shards, 'shard')} where a trace to a branch ends{at}"
        )
        found.divergence = checker.shrink(found.divergence)
    elif found.stopped is not None:
        raise BudgetExhausted(
            f"the {found.stopped} ran out {what} the ends of the traces to the branches{at}; "
            "the lines above found no divergence"
        )
    return found


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
    branches: bool = True,
    runs: bool = True,
    run_calls: int = RUN_CALLS,
    probes: bool = True,
    policies: bool = True,
    cex_depth: int = COUNTEREXAMPLE_DEPTH,
    cex_traces: int = COUNTEREXAMPLE_TRACES,
    jobs: int | None = 1,
    executor: str = "local",
    merge: str = "ledger",
    cache: Path | None = None,
    progress: Callable[[str], None] | None = None,
    echo: Callable[[str], None] | None = None,
) -> Summary:
    """Every source in turn, stopping at the first divergence (shrunk). With more than one
    worker, the enumeration runs in a process of its own while the workers run the
    checker's checks (`_beside_checks`); the lines and the verdict are those of the sources
    taken one after the other."""
    spec = conformance.spec
    summary = Summary()

    def say(line: str) -> None:
        summary.lines.append(line)
        if echo is not None:
            echo(line)

    def scripts_diverge(scripts: Iterable[Script], by: str, checker: Conformance = conformance) -> Divergence | None:
        total = f" of {len(scripts)}" if isinstance(scripts, list) else ""
        for number, script in enumerate(scripts):
            budget.stop_if_spent(by, "the lines above found no divergence")
            if progress is not None and number % SAY_EVERY == 0:
                progress(f"{by}: trace {number + 1}{total}")
            found = checker.run(script)
            if found is not None:
                found.found_by = f"{by}: {script.source}"
                found.original_calls = len(found.script.calls)
                return checker.shrink(found)
        return None

    other_shards = shards or spec.default_shards
    notes: list[str] = []

    def checks(poll: Callable[[], None] | None = None) -> list[Script]:
        return counterexample_scripts(
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
            poll=poll,
        )

    def known() -> bool:
        scripts = known_counterexample_scripts(
            spec_file, shards=other_shards, overrides=overrides, depth=cex_depth, traces=cex_traces, cache=cache
        )
        return scripts is not None

    config = ExecutorConfig(executor, jobs)
    parts = config.local_workers if config.parallel(2) else 1
    job = _EnumerationJob(shards or min(ENUMERATION_SHARDS, spec.default_shards) or 1, depth, merge, parts)
    beside = None
    if depth > 0 and counterexamples and config.parallel(2) and not known():
        beside = _beside_checks(conformance, job, checks, progress)
    fleet_sequences = 0  # the enumeration's size at the policy asked: may it run at every policy?
    if depth > 0:
        enumerated = beside.enumerated if beside is not None else None
        for what, result in (enumerated or _enumerate(conformance, job, progress)).passes:
            fleet_sequences += result.sequences
            if result.divergence is not None:
                say(
                    f"  enumeration      {plural(job.shards, 'shard')}, {what}: divergence at depth {result.depth + 1} "
                    f"({plural(result.sequences, 'call sequence')})"
                )
                result.divergence.found_by = f"enumeration of every sequence of {what} at {plural(job.shards, 'shard')}"
                summary.divergence = conformance.shrink(result.divergence)
                return summary
            note = ""
            if result.exhausted:
                sampled = [
                    f"{e.name}({p.name})"
                    for e in spec.events.values()
                    for p in e.signature.params
                    if p.type.kind in ("int", "str", "any")
                ]
                # An int, text or opaque argument takes a few values: the states other values
                # reach were never seen.
                note = (
                    f", every state these calls reach seen ({', '.join(sampled)} tried with a few values)"
                    if sampled
                    else ", every reachable state seen"
                )
            if result.hidden:
                note += f"; each merged prefix probed one call further ({', '.join(result.hidden)} not observed)"
            if result.stopped is not None:
                note = f"; stopped at depth {result.depth + 1}"
            say(
                f"  enumeration      {plural(job.shards, 'shard')}, {what}, depth {result.depth}: "
                f"{result.sequences} call sequences, {result.states} distinct states{note} ({result.seconds:.1f} s)"
            )
            if result.stopped is not None:  # whatever this process's own budget says: never a pass
                raise BudgetExhausted(
                    f"the {result.stopped} ran out during the enumeration ({what}, at depth {result.depth + 1}); "
                    "the lines above found no divergence"
                )
    if beside is not None and beside.stopped is not None:
        raise beside.stopped
    budget.stop_if_spent("the enumeration", "the lines above found no divergence")
    if random_calls > 0:
        start = time.monotonic()
        scripts = random_scripts(spec, other_shards, conformance.policy, random_calls, seed)
        found = scripts_diverge(scripts, "a random trace")
        if found is not None:
            summary.divergence = found
            return summary
        say(
            f"  random           {plural(other_shards, 'shard')}: {random_calls} calls in {len(scripts)} traces, "
            f"seed {seed} ({time.monotonic() - start:.1f} s)"
        )
    # The traces to the branches, searched once: made over and over here (a cycle through the
    # states, redrive after dead-lettering), then followed as they are below.
    searched: dict[tuple[Any, ...], Branches] = {}

    def branches_at(policy: Mapping[str, int]) -> Branches:
        """The traces to the branches at `policy`: searched once for all the policies that
        agree on every constant the search reads (the largest policy of a spec often differs
        only in one a query reads, and a search can take tens of seconds)."""
        from ledgercheck.codegen.coverage import policy_read

        key = tuple(sorted((name, policy.get(name)) for name in policy_read(spec)))
        if key not in searched:
            searched[key] = branch_scripts(spec_file, spec, policy, progress, shards=job.shards)
        return searched[key]

    at_policy = branches_at(conformance.policy) if branches else None
    start = time.monotonic()
    if runs:
        cycles = at_policy.every if at_policy is not None else []
        scripts = run_scripts(spec, conformance.policy, seed, cycles, run_calls)
        found = scripts_diverge(scripts, "a long run")
        if found is not None:
            summary.divergence = found
            return summary
        repeated = (
            f" and every trace to a branch ({len(cycles)}; closed by the call that takes it back to its start, "
            f"where one does; a trace ending in a count, its last call to {COUNTING_CALLS})"
            if cycles
            else ""
        )
        say(
            f"  runs             1 shard: every pair of calls{repeated} repeated to {run_calls} calls, "
            f"{len(scripts)} traces, {sum(len(s.calls) for s in scripts)} calls ({time.monotonic() - start:.1f} s)"
        )
    largest, smallest = spec.largest_policy(), spec.smallest_policy()
    if branches:
        # At the policy asked, and where none was asked at the largest policy the spec allows
        # too: a limit an implementation caps (attempts at most 4 where the spec allows 5) is
        # met only above the default.
        corners = [conformance] + (
            [] if overrides or largest == conformance.policy else [conformance.at_policy(largest, LARGEST_POLICY_NOTE)]
        )
        for checker in corners:
            start = time.monotonic()
            traced = branches_at(checker.policy)  # at the policy asked: the search the runs used
            scripts = traced.scripts
            at = "" if checker is conformance else f" at the largest policy ({policy_text(largest)})"
            found = scripts_diverge(scripts, f"a trace to a branch of the spec{at}", checker)
            if found is not None:
                summary.divergence, summary.checker = found, checker
                return summary
            calls = sum(len(s.calls) for s in scripts)
            search = (
                f"; the search {traced.seconds:.1f} s"
                if traced is not at_policy or checker is conformance
                else "; the search at the policy asked: the two agree on every constant it reads"
            )
            say(
                f"  branches         1 shard{at}: {len(scripts)} traces to the {traced.reached} of {traced.total} "
                f"branches the coverage search reaches, {calls} calls ({time.monotonic() - start:.1f} s{search})"
            )
            if traced.fleet_shards > 1:
                start = time.monotonic()
                fleet = plural(traced.fleet_shards, "shard")
                found = scripts_diverge(
                    traced.fleet, f"a trace on {fleet} to a branch one shard does not reach{at}", checker
                )
                if found is not None:
                    summary.divergence, summary.checker = found, checker
                    return summary
                say(
                    f"  branches         {fleet}{at}: {len(traced.fleet)} traces to the branches one shard does not "
                    f"reach, {sum(len(s.calls) for s in traced.fleet)} calls ({time.monotonic() - start:.1f} s; "
                    f"the search {traced.fleet_seconds:.1f} s)"
                )
            if traced.unreached and checker is conformance:
                shown = "; ".join(traced.unreached[:3]) + (
                    f"; and {len(traced.unreached) - 3} more" if len(traced.unreached) > 3 else ""
                )
                say(
                    f"  not reached      {plural(len(traced.unreached), 'branch')} no trace reaches (a call of "
                    f"conform may still take it, by chance): {shown}"
                )
            if probes:
                start = time.monotonic()
                probed = probe_scripts(checker, traced.every)
                found = scripts_diverge(probed.scripts, f"a call where a trace to a branch passes{at}", checker)
                if found is not None:
                    summary.divergence, summary.checker = found, checker
                    return summary
                say(
                    f"  probes           1 shard{at}: every call at each of the {probed.states} states the traces "
                    f"to the branches pass through, {len(probed.scripts)} traces, "
                    f"{sum(len(s.calls) for s in probed.scripts)} calls ({time.monotonic() - start:.1f} s)"
                )
                reach = min(depth, AROUND_DEPTH)
                if reach > 0:
                    start = time.monotonic()
                    ends = [s.calls for s in traced.every]
                    around = _from_ends(checker, ends, 1, reach, merge, at, "around")
                    if around.divergence is not None:
                        summary.divergence, summary.checker = around.divergence, checker
                        return summary
                    say(
                        f"  around           1 shard{at}: every sequence of up to {plural(reach, 'call')} from where "
                        f"each of the {len(ends)} traces to the branches ends, {around.sequences} call sequences, "
                        f"{around.states} distinct states ({time.monotonic() - start:.1f} s)"
                    )
                    if job.shards > 1:
                        # The other instances' calls where a trace to a branch leaves the first: a
                        # rollout that went on updating replica 1 once replica 0's failures had
                        # paused it (seen at a policy that lets two replicas be down) passed, every
                        # deep source keeping to one instance.
                        start = time.monotonic()
                        side_calls = _from_ends(checker, ends, job.shards, 1, merge, at, "beside")
                        if side_calls.divergence is not None:
                            summary.divergence, summary.checker = side_calls.divergence, checker
                            return summary
                        say(
                            f"  beside           {plural(job.shards, 'shard')}{at}: every call on every shard where "
                            f"each of the {len(ends)} traces to the branches leaves shard 0, {side_calls.sequences} "
                            f"calls ({time.monotonic() - start:.1f} s)"
                        )
            walked = tick_runs(spec, checker.policy, scripts, seed, run_calls) if runs else []
            if walked:
                start = time.monotonic()
                found = scripts_diverge(walked, f"a walk of the clock{at}", checker)
                if found is not None:
                    summary.divergence, summary.checker = found, checker
                    return summary
                say(
                    f"  ticks            1 shard{at}: after every trace to a branch, a tick and a call repeated to "
                    f"{run_calls} calls, {len(walked)} traces, {sum(len(s.calls) for s in walked)} calls "
                    f"({time.monotonic() - start:.1f} s)"
                )
            if checker is not conformance:
                conformance.traces += checker.traces
                conformance.calls_compared += checker.calls_compared
    others = other_policies(spec, conformance.policy, seed) if policies and not overrides else []
    if others:
        # Random traces at the other policies the spec allows (the largest, the smallest, a few
        # drawn between), and the branches' traces at the smallest (the largest's ran above; a
        # coverage search per drawn policy would cost more than all the random traces).
        start = time.monotonic()
        traces = calls = 0
        corner = _EnumerationJob(1, min(depth, POLICY_DEPTH), merge)
        drawn = _EnumerationJob(1, min(depth, POLICY_DEPTH - 1), merge)
        if job.shards > 1 and 0 < fleet_sequences <= FLEET_AT_EVERY_POLICY:
            # A small spec: the enumeration of the policy asked, at every other policy too. A
            # rollout's pause, ignored by a class, showed only at two replicas and a policy
            # that lets two be down; the policies' enumerations kept to one.
            corner = drawn = _EnumerationJob(job.shards, depth, merge)
        for where, policy in others:
            checker = conformance.at_policy(policy, policy_note(where))
            shallow = corner if policy in (largest, smallest) else drawn
            if shallow.depth > 0:  # every short sequence: a threshold of 3 misread shows in 3 calls
                for what, result in _enumerate(checker, shallow, None).passes:
                    if result.divergence is not None:
                        at_shards = f"{plural(shallow.shards, 'shard')} at {where}"
                        result.divergence.found_by = f"enumeration of every sequence of {what} at {at_shards}"
                        summary.divergence, summary.checker = checker.shrink(result.divergence), checker
                        return summary
            scripts = []
            if branches and policy == smallest:
                traced = branches_at(policy)
                scripts += traced.scripts + (probe_scripts(checker, traced.every).scripts if probes else [])
            scripts += random_scripts(spec, other_shards, policy, random_calls, seed) if random_calls > 0 else []
            found = scripts_diverge(scripts, f"a trace at {where}", checker)
            if found is not None:
                summary.divergence, summary.checker = found, checker
                return summary
            traces, calls = traces + checker.traces, calls + checker.calls_compared
            conformance.traces += checker.traces
            conformance.calls_compared += checker.calls_compared
        say(
            f"  policies         {len(others)} more policies the spec allows (every sequence of up to "
            f"{plural(corner.depth, 'call')} at {plural(corner.shards, 'shard')}"
            f"{f', {drawn.depth} at a drawn policy' if drawn.depth != corner.depth else ' at each'}; random traces at "
            f"{plural(other_shards, 'shard')}; the branches' and their probes at the smallest): {traces} traces, "
            f"{calls} calls "
            f"({time.monotonic() - start:.1f} s)"
        )
        for where, _ in others:
            say(f"                   {where}")
    if counterexamples:
        start = time.monotonic()
        found_beside = beside.scripts if beside is not None else None
        earlier = beside.seconds if beside is not None and found_beside is not None else 0.0
        scripts = found_beside if found_beside is not None else checks()
        found = scripts_diverge(scripts, "a counterexample of the checker")
        if found is not None:
            summary.divergence = found
            return summary
        calls = sum(len(s.calls) for s in scripts)
        say(
            f"  counterexamples  {len(scripts)} traces of the checker (depth {cex_depth}, {cex_traces} per result), "
            f"{calls} calls ({earlier + time.monotonic() - start:.1f} s{'; ' + notes[0] if notes else ''})"
        )
    say(f"{conformance.traces} traces, {conformance.calls_compared} calls compared, no divergence")
    return summary
