"""Every call sequence up to a depth, breadth-first, merging prefixes that reach the same
state; with `parts` > 1, each level's frontier is split into runs expanded at once in forked
processes.

Why split: the enumeration is the one source of `conform` that was a single job, about half of
the command's work on the bundled spec, so with workers it was the command's critical path
(the checker's checks were done seconds before it). A level's nodes are independent of one
another given the states seen before the level: each run is expanded against that set, and
the runs' new states, merged in the frontier's order, keep the first prefix that reached each
state, as one pass does. The sequences, the states, the next frontier and the first divergence
are those of one pass exactly; a run whose divergence does not pickle (a value of the
implementation's) is expanded again in the process that merges. A forked run whose process
dies (the implementation under test called `os._exit`, crashed in native code, or the system
killed it for memory) is run once more in a fork that names each call sequence before the
implementation runs it, so the command can say which one ended its process."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import pickle
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from ledgercheck.model import budget, ir
from ledgercheck.model.conformance.calls import RAISED_BY_CALLS, LedgerCall, Script, Tick, invoke
from ledgercheck.model.conformance.divergence import Divergence
from ledgercheck.model.conformance.implementation import ManualClock
from ledgercheck.model.conformance.observation import Observation, Outcome, compare
from ledgercheck.model.errors import ImplementationEnded, ProcessDied
from ledgercheck.model.executor import Beside
from ledgercheck.model.spec import Spec, plural

if TYPE_CHECKING:
    from ledgercheck.model.conformance.checker import Conformance

SPLIT_FROM = 8
"""Frontier nodes per run, at least, before a level is split: below that, forking costs more
than the run."""
MEMORY_EVERY = 64
"""Nodes expanded between two looks at the memory budget (the clock is looked at every node)."""

Call: TypeAlias = LedgerCall | Tick
_Job: TypeAlias = tuple[int, int, int, bool, bool]
"""A run of a level: its nodes' bounds in the frontier, the level, whether the next level's
states are kept, and whether the run is watched."""
Node: TypeAlias = tuple[tuple[Call, ...], dict[Any, Any] | None, bool]
"""A frontier node: the calls that reached it, the model's saved state there (None at the
last level, where only whether a state is new counts), and whether it is a probe: a prefix
merged into a state reached before, expanded one call further (its calls compared, their
states not kept) because the implementation's state is not all observed
(`Enumerator.hidden`)."""


@dataclass
class Enumeration:
    divergence: Divergence | None
    depth: int  # deepest level fully compared
    sequences: int
    states: int
    exhausted: bool
    seconds: float
    stopped: str | None = None
    """The budget that ran out ("time budget (4 s)") before the depth asked was compared:
    `depth` is then the deepest level compared in full, and no verdict stands on it."""
    hidden: tuple[str, ...] = ()
    """The state the implementation does not show (`Enumerator.hidden`): merged prefixes were
    probed one call further."""


@dataclass
class _Run:
    """What expanding a run of a level's nodes gave."""

    children: list[tuple[tuple[Any, ...], Node]] = field(default_factory=list)
    """(merge key, node) of each state new to the run, in the order it was reached; where the
    enumeration probes, the prefixes merged into a state seen before too, as probe nodes."""
    sequences: int = 0
    """Call sequences compared, the diverging one included."""
    divergence: Divergence | None = None
    again: bool = False
    """The run diverged, and its divergence does not pickle: the merging process expands it again."""
    stopped: str | None = None
    """The command's budget that ran out before the run's last node (`budget.Budget.exhausted`)."""


class Enumerator:
    """One enumeration: the calls of a step, the model it steps, and the caches its nodes share."""

    def __init__(self, conformance: Conformance, shards: int, merge: str, contract: bool) -> None:
        self.conformance = conformance
        self.shards = shards
        self.contract = contract
        choices = conformance.calls_at(shards)
        self.choices = [c for c in choices if 0 <= c.shard < shards] if contract else choices
        self.model = conformance.new_model(shards)
        self.reads = (*conformance.int_values.reads(shards), *conformance.text_values.reads(shards))
        self.static = set(self.choices) if self.reads else set()
        self.in_state: dict[tuple[Any, ...], list[Call]] = {}
        """The calls of a step per values of `reads`: the fixed ones, then the state's own."""
        self.keys = StateKeys(conformance.spec, shards, merge == "full")
        self.hidden = hidden_state(conformance.spec, conformance.observer.fleet_values, self.keys)
        """The variables of the merge key the implementation does not show (`observe = false`,
        a fleet value it has no attribute for). Two prefixes that bring the model to one state
        may then leave the implementation in two: a class whose hidden fencing token lags after
        one of them (a lease re-acquired after expiry) showed nothing until a later call
        returned the wrong answer, and merging dropped that prefix, so `ci` passed it. With
        hidden variables, a merged prefix is expanded one call further (each call compared, no
        state kept: `Node`'s probe), and an implementation is never reused across calls."""
        self.observed: dict[tuple[Any, ...], Observation] = {}
        self.sink = io.StringIO()
        self.frontier: list[Node] = []
        self.seen: set[tuple[Any, ...]] = set()
        """The level's frontier and the states seen before it: what a forked run reads."""

    def run(
        self, depth: int, progress: Callable[[str], None] | None, parts: int, starts: Sequence[Sequence[Call]] = ()
    ) -> Enumeration:
        """Breadth first from the initial state, or from where each of `starts` (call
        sequences the model is taken through first; the implementation replays them before
        each call sequence from there) leaves the model, each distinct state once."""
        start = time.monotonic()
        model = self.model
        if starts:
            frontier, seen = self._starts(starts)
        else:
            root = self.conformance.run(Script("enumeration", self.shards, ()))
            if root is not None:
                root.found_by = "construction"
                return Enumeration(root, 0, 1, 1, False, time.monotonic() - start)
            seen = {self.keys.merge(model.variables())}
            frontier = [((), model.save(), False)]
        sequences = 0

        def ended(
            compared: int, divergence: Divergence | None = None, exhausted: bool = False, stopped: str | None = None
        ) -> Enumeration:
            """The enumeration as it ends, `compared` the deepest level compared in full."""
            seconds = time.monotonic() - start
            return Enumeration(divergence, compared, sequences, len(seen), exhausted, seconds, stopped, self.hidden)

        for level in range(1, depth + 1):
            following, done, divergence, stopped = self._level(frontier, seen, level, level < depth, parts)
            sequences += done
            if stopped is not None or divergence is not None:
                return ended(level - 1, divergence, stopped=stopped)
            if progress is not None:
                progress(
                    f"  depth {level}: {sequences} call sequences, {len(seen)} distinct states "
                    f"({time.monotonic() - start:.1f} s)"
                )
            frontier = following
            if not frontier:
                return ended(level, exhausted=True)
        return ended(depth)

    def _starts(self, starts: Sequence[Sequence[Call]]) -> tuple[list[Node], set[tuple[Any, ...]]]:
        """The nodes `starts` lead the model to, each distinct state once."""
        model = self.model
        initial = model.save()
        frontier: list[Node] = []
        seen: set[tuple[Any, ...]] = set()
        for calls in starts:
            model.restore(initial)
            for call in calls:
                if isinstance(call, Tick):
                    model.advance_time(call.units)
                else:
                    self.conformance._call_model(model, call)
            key = self.keys.merge(model.variables())
            if key not in seen:
                seen.add(key)
                frontier.append((tuple(calls), model.save(), False))
        model.restore(initial)
        return frontier, seen

    def _level(
        self, frontier: list[Node], seen: set[tuple[Any, ...]], level: int, keep: bool, parts: int
    ) -> tuple[list[Node], int, Divergence | None, str | None]:
        """The next frontier, the sequences compared, the first divergence of one level and
        the budget that ran out before its end. The first run is expanded here while the
        others are in forked processes."""
        runs = _runs(len(frontier), parts if Beside.possible() else 1)
        self.frontier, self.seen = frontier, seen
        jobs: list[_Job] = [(lo, hi, level, keep, False) for lo, hi in runs]
        sides = [Beside(_expand_run, self, job, None, "a part of the enumeration") for job in jobs[1:]]
        following: list[Node] = []
        sequences = 0
        try:
            for index, (lo, hi) in enumerate(runs):
                part = self._forked(sides[index - 1], jobs[index]) if index else None
                if part is None or part.again:
                    part = self.expand(frontier[lo:hi], seen, level, keep)
                    following += [node for _, node in part.children]
                else:
                    self.conformance.traces += part.sequences
                    self.conformance.calls_compared += part.sequences
                    for key, node in part.children:
                        calls, state, probe = node
                        if not probe and key not in seen:
                            seen.add(key)
                            following.append(node)
                        elif self.hidden and keep:  # (merged by an earlier run: a probe, as in one pass)
                            following.append((calls, state, True))
                sequences += part.sequences
                if part.divergence is not None or part.stopped is not None:
                    return following, sequences, part.divergence, part.stopped
        finally:
            for side in sides:
                side.stop()
            self.frontier, self.seen = [], set()
        return following, sequences, None, None

    def _forked(self, side: Beside[Enumerator, _Job, _Run], job: _Job) -> _Run:
        """A forked run's result; if its process died, the run once more in a watched fork:
        its result if it lives this time (the same as the first would have been), else
        `ProcessDied` naming the call sequence the implementation was running."""
        try:
            return side.result()
        except ProcessDied:
            lo, hi, level, keep, _ = job
            running: list[str] = []
            watched = Beside(
                _expand_run, self, (lo, hi, level, keep, True), running.append, "a part of the enumeration"
            )
            try:
                return watched.result()
            except ProcessDied as died:
                if not running:
                    raise
                raise ImplementationEnded(
                    f"{died} while the implementation ran {running[-1]}: the implementation ended the process it ran "
                    "in (a call of os._exit, a crash in native code, or the system out of memory); "
                    "no divergence and no conformance established"
                ) from None
            finally:
                watched.stop()

    def expand(self, nodes: Sequence[Node], seen: set[tuple[Any, ...]], level: int, keep: bool) -> _Run:
        """Every call from each node in turn, up to the first divergence; the states not in
        `seen` are added to it and returned with the calls that reached them."""
        conformance, model, keys, shards = self.conformance, self.model, self.keys, self.shards
        conformance.fleet = shards
        limits = budget.active()
        found = _Run()
        probing = bool(self.hidden)
        for number, (prefix, state, probe) in enumerate(nodes):
            assert state is not None  # only the last level's nodes have none, and they are not expanded
            found.stopped = limits.exhausted(memory=number % MEMORY_EVERY == 0)
            if found.stopped is not None:
                return found
            model.restore(state)
            parent = self._observation()
            # An implementation at this node's state, while it still shows the node's state:
            # a call that changes nothing it shows, nor anything of the model's state, leaves
            # it for the next call (the same judgement as merging). Not where the
            # implementation hides variables of the state (`self.hidden`): a call may have
            # changed one of them (a timer restarted at its current value), so each call
            # starts from a fresh replay of the prefix. A tick moves its clock: it is built
            # afresh after one.
            ledger: Any = None
            ledger_clock: ManualClock | None = None
            for call in self._choices(state):
                model.restore(state)
                model.log_lines.clear()
                model.notifications.clear()
                if self.contract and not conformance._allowed(model, call, keys):
                    continue
                found.sequences += 1
                conformance.traces += 1
                if conformance.watching is not None:  # a watched run: told before the implementation runs it
                    label = conformance.calls_label((*prefix, call))
                    at = f"the enumeration at {plural(shards, 'shard')}, depth {level}"
                    conformance.watching(f"the calls {label} ({at})")
                if ledger is None or ledger_clock is None:
                    ledger_clock = ManualClock()
                    ledger = self._replayed(prefix, ledger_clock)
                if isinstance(call, Tick):
                    model.advance_time(call.units)
                    ledger_clock.advance(call.units)
                    model_out = impl_out = Outcome(None, 0)
                    error = None
                else:
                    model_out = conformance._step_model(model, call, keys)
                    conformance.at = (*prefix, call)
                    impl_out, error = conformance._call_impl(ledger, call)
                impl_obs = conformance.observe(ledger, shards)
                conformance.at = None
                conformance.calls_compared += 1
                differences = compare(self._observation(), impl_obs, model_out, impl_out, error)
                if differences:
                    calls = (*prefix, call)
                    script = Script(f"enumeration ({plural(shards, 'shard')}, depth {level})", shards, calls)
                    # A pass over any call may still find a trace every call of which the
                    # contracts allow (a spec with no `requires`): it says so, as a run does.
                    within = self.contract or conformance.within_contracts(script)
                    found.divergence = Divergence(
                        script, len(calls) - 1, differences, "enumeration", len(calls), within
                    )
                    return found
                if probing or impl_obs != parent or isinstance(call, Tick) or model.variables() != state:
                    ledger = None
                if probe:
                    continue
                key = keys.merge(model.variables())
                if key not in seen:
                    seen.add(key)
                    found.children.append((key, ((*prefix, call), model.save() if keep else None, False)))
                elif probing and keep:
                    found.children.append((key, ((*prefix, call), model.save(), True)))
        return found

    def _choices(self, state: Mapping[Any, Any]) -> list[Call]:
        """The calls of a step from `state`: the fixed ones, and those an int argument compared
        with a field or fleet value gets from its value here (`values.IntValues`)."""
        if not self.reads:
            return self.choices
        key = tuple(state[k] for k in self.reads)
        found = self.in_state.get(key)
        if found is None:
            extra = self.conformance.calls_in_state(state, self.shards, self.static)
            found = self.in_state[key] = [*self.choices, *extra]
        return found

    def _observation(self) -> Observation:
        """The model's observation in its state now (cached by what it shows)."""
        seen_as = self.keys.observable(self.model.variables())
        if seen_as not in self.observed:
            self.observed[seen_as] = self.conformance.observe(self.model, self.shards)
        return self.observed[seen_as]

    def _replayed(self, prefix: tuple[Call, ...], clock: ManualClock) -> Any:
        """A fresh implementation taken through `prefix` (its output discarded)."""
        ledger = self.conformance.new_impl(self.shards, clock)
        with contextlib.redirect_stdout(self.sink):
            for earlier in prefix:
                if isinstance(earlier, Tick):
                    clock.advance(earlier.units)
                    continue
                with contextlib.suppress(*RAISED_BY_CALLS):
                    invoke(ledger, earlier, self.conformance.events[earlier.event])
        self.sink.seek(0)
        self.sink.truncate()
        return ledger


def _expand_run(
    enumerator: Enumerator,
    job: _Job,
    send: Callable[[str], None] | None,
) -> _Run:
    """A run of the level's nodes, in a fork of the process that merges (`Beside`); a watched
    run sends each call sequence before the implementation runs it."""
    lo, hi, level, keep, watched = job
    if watched:
        enumerator.conformance.watching = send
    with enumerator.conformance.stops_named():
        part = enumerator.expand(enumerator.frontier[lo:hi], enumerator.seen, level, keep)
    if part.divergence is not None:
        try:
            pickle.dumps(part.divergence)
        except Exception:  # noqa: BLE001 - a value the implementation returned, of any kind
            return _Run(again=True)
    return part


def _runs(nodes: int, parts: int) -> list[tuple[int, int]]:
    """`nodes` cut into at most `parts` runs of nearly equal length, none shorter than SPLIT_FROM."""
    count = max(1, min(parts, nodes // SPLIT_FROM))
    bounds = [nodes * i // count for i in range(count + 1)]
    return list(zip(bounds, bounds[1:], strict=False))


def _global_reads(spec: Spec) -> set[str]:
    """Fleet values the ledger's events and queries read (`x = x + 1` updating x itself aside)."""
    found: set[str] = set()

    def walk(node: Any, updating: str | None = None) -> None:
        if isinstance(node, ir.GlobalRef):
            if node.name != updating:
                found.add(node.name)
        elif isinstance(node, ir.Assign):
            walk(node.value, node.name if node.kind == "global" else None)
        elif isinstance(node, (tuple, list)):
            for item in node:
                walk(item, updating)
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            for item in dataclasses.fields(node):
                walk(getattr(node, item.name), updating)

    for event in spec.events.values():
        walk([event.ignore_when, event.requires, event.body])
    walk([spec.on_state_change, [q.expr for q in spec.queries.values()]])
    return found


def hidden_state(spec: Spec, fleet_values: Sequence[str], keys: StateKeys) -> tuple[str, ...]:
    """The variables of the merge key an implementation does not show, by name: the fields
    its binding leaves unread (`observe = false`) and the fleet values it has no attribute for."""
    binding = spec.binding
    hidden: list[str] = []
    for shard, name in keys.merge_keys:
        if shard is None:
            unseen = name not in fleet_values
        else:
            unseen = binding is not None and not binding.observes(name)
        if unseen and name not in hidden:
            hidden.append(name)
    return tuple(hidden)


class StateKeys:
    """Which of the model's variables make two states different."""

    def __init__(self, spec: Spec, shards: int, full: bool) -> None:
        read = _global_reads(spec)
        counted = {g.name for g in spec.globals if g.metric and g.name not in read}  # only ever counted
        ledger: list[tuple[int | None, str]] = [(i, f.name) for i in range(shards) for f in spec.fields]
        fleet: list[tuple[int | None, str]] = [(None, g.name) for g in spec.globals if g.name not in counted]
        metrics: list[tuple[int | None, str]] = [(None, g.name) for g in spec.globals if g.name in counted]
        history: list[tuple[int | None, str]] = [(i, h.name) for i in range(shards) for h in spec.history]
        self.shards = shards
        self.observable_keys = ledger + fleet + metrics
        self.merge_keys = ledger + fleet + (history + metrics if full else [])
        every_fleet = fleet + metrics
        self.local = [[(i, v.name) for v in spec.shard_vars] + every_fleet for i in range(shards)]
        self.local_set = [set(keys) for keys in self.local]

    def observable(self, store: Mapping[Any, Any]) -> tuple[Any, ...]:
        return tuple(store[k] for k in self.observable_keys)

    def merge(self, store: Mapping[Any, Any]) -> tuple[Any, ...]:
        return tuple(store[k] for k in self.merge_keys)
