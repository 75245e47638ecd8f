"""Explicit-state model checking: breadth-first search over the executable model's states.

The same questions the Z3 engine (`model.bmc`) answers, answered by enumeration: every
enabled environment action (an action with its shard parameters bound and its value
parameters drawn from finite domains) is run on the concrete semantics (`Machine` over
`ConcreteBackend`, the interpreter's own executor), breadth first, so the first violation
found is a shortest one.

* **State hashing**: a state is the full store (ledger fields and history per shard, fleet
  globals, environment variables) as one tuple in a fixed key order.
* **Symmetry reduction**: shards are interchangeable, so states are merged up to a
  permutation of shards: the canonical form sorts the per-shard tuples (for a per-shard
  property the focus shard 0 stays first and only the others are sorted). Opaque strings
  (only ever compared for equality) are renamed by first occurrence in that order. Among
  shards whose records are identical, an action is tried on one of them only.
* **The property** is checked exactly as the Z3 engine checks it: a step property at every
  call of its events on the focus shard (`Machine.step_violations` over the call's
  `CallRecord`), an invariant of the focus shard (or of the fleet) in every state; a path
  stops at its first violation. In an `any_call` environment the search keeps to the
  callers' contracts (`requires`), as `Encoding(contracts=True)` does.
* **The reduction** of `model.reduction` (per property: variables outside the cone of
  influence held at one value, counters saturated, one shard where the property's shard
  evolves alone): exact, so every verdict and shortest length is the full system's.
* **Value parameters** range over finite domains: bool {False, True}; an enum's members;
  int {0, 1, 2} (an under-approximation: the result's note says so when an action has
  one); str {each current string of the action's shard, one fresh string}; and None for
  an optional type. A parameter outside the cone of influence gets one value.
* **Memoisation**: what an action does depends only on the state positions it can read
  (found by walking its guard, its body, the events it calls, their queries and the state
  hook), so its effect is computed once per distinct (action, shards, values, values read)
  and reused; the same for guards, single events, and invariants of the focus shard. A
  fleet value that is only ever counted (`membership_epoch = membership_epoch + 1`, read
  nowhere else) is remembered as an increment, not as a value.
* **Distinct traces**: the shortest violations are enumerated up to their view
  (`model.result.view_of`, with opaque strings shown as "changed", as the Z3 blocker sees them):
  depth by depth, a search over (state, view so far) pairs kept to the states that can still
  break the property in time, until `max_traces` views are known. A fleet property's view is
  its actions with their shards, so that search runs without symmetry reduction. Every trace
  is replayed through `model.trace.Simulation`, so its steps have the schema of every other
  trace, and the replay must break the property at its last step.

`explicit_check_all` checks several properties of one variant and environment in one search.
"""

from __future__ import annotations

import itertools
import operator
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledgercheck.model import budget, ir
from ledgercheck.model.breaking import breaks_last_step
from ledgercheck.model.errors import UsageError
from ledgercheck.model.interpreter import initial_store
from ledgercheck.model.lang import Param
from ledgercheck.model.reduction import (
    Finiteness,
    Reduction,
    finite_reduction,
    node_of,
    reduce_for,
    relevant_actions,
    shards_independent,
)
from ledgercheck.model.result import FOCUS, EncodingMismatch, Result, Status, view_of
from ledgercheck.model.result import trace_key as _trace_key
from ledgercheck.model.semantics import CallRecord, ConcreteBackend, Effects, Key, Machine
from ledgercheck.model.spec import Action, Environment, Event, Property, PropertyKind, Spec, contracts_bind
from ledgercheck.model.trace import Simulation, Step, Trace, base_url

INT_DOMAIN = (0, 1, 2)
SAMPLED = "no violation among the int values searched, which is not a verdict"
"""How an `unknown` says the search found nothing over a sample of an int parameter's values."""
PROVE_DEPTH = 100_000
PROVE_STATES = 3_000_000
"""With `prove`: how far past `max_depth` the search may go, and how many states it may
keep, looking for the end of the reachable state space (one known to be finite)."""
PROBE_STATES = 30_000
"""With `prove` on a state space not known to be finite (`model.reduction.finite_reduction`):
the states a search may keep. Such a space may still be finite (a counter bounded by the
state machine's guards rather than by a constant); a search that exhausts it is a proof,
and one that does not ends in seconds instead of growing without bound."""
PROGRESS_EVERY = 0.5
"""Seconds between two progress messages of a search (one per BFS layer at most)."""
MEMO_LIMIT = 2_000_000
"""Entries a memo table holds before it is emptied (a bound on memory, not on correctness)."""
CHANGED = "<changed>"
"""What a view shows of an opaque string that changed (its name means nothing)."""

_NONE = ("none",)
_FRESH = ("fresh",)
_MISSING: Any = object()

Label = tuple[int, tuple[Any, ...]]
"""One transition: an index into the engine's action instances and one choice per value
parameter (a concrete value, or for a string: none / a field of the shard / fresh)."""


class _Timeout(Exception):
    pass


class _Limits:
    """The per-call deadline (`--timeout`) and the command's budget (`model.budget`), asked
    once per state expanded: the clock every time, the resident memory every
    `MEMORY_EVERY` states. `why` names what ran out."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.budget = budget.active()
        self.count = 0
        self.why = ""

    def over(self) -> bool:
        self.count += 1
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.why = "the timeout"
            return True
        spent = self.budget.exhausted(memory=self.count % budget.MEMORY_EVERY == 1)
        if spent is not None:
            self.why = f"the {spent}"
            return True
        return False


class _AllShards(Exception):
    """The read analysis met something it cannot bound: assume every position is read."""


@dataclass(frozen=True)
class _Effect:
    """What one action instance does from one local context: the positions it writes, its
    calls, and which step properties one of the calls breaks."""

    writes: tuple[Write, ...]
    calls: list[CallRecord[Any]]
    bad: tuple[bool, ...]


@dataclass
class Successor:
    label: Label
    state: tuple[Any, ...]
    calls: list[CallRecord[Any]]
    bad: tuple[bool, ...]


def view_key(trace: Trace, spec: Spec, focus: int | None, fields: tuple[str, ...] | None = None) -> tuple[Any, ...]:
    """`bmc.view_of` with opaque strings abstracted to "changed": the view the Z3 engine's
    blocker distinguishes (the names of fresh strings are arbitrary)."""
    view = view_of(trace, spec, focus, fields)
    if focus is None:
        return view
    text = {f.name for f in spec.fields if f.type.kind == "str"}
    return tuple((events, tuple((n, CHANGED if n in text else v) for n, v in changed)) for events, changed in view)


def _spec_trees(spec: Spec) -> list[object]:
    """Every expression and block of the spec (all environments, all properties)."""
    trees: list[object] = [[e.ignore_when, e.requires, e.body, e.history, e.returns] for e in spec.events.values()]
    trees += [q.expr for q in spec.queries.values()]
    trees.append(spec.on_state_change)
    trees += [[a.when, a.body] for env in spec.environments.values() for a in env.actions]
    trees += [[p.when, p.check] for p in spec.properties.values()]
    return trees


_FACTS: dict[tuple[int, str], tuple[Spec, frozenset[str]]] = {}
"""What `string_literals` and `counter_globals` found, per spec variant (kept alive with it, so
its id names no other): every explorer of a variant asks, and the answer is a walk of the
whole spec."""


def _fact(spec: Spec, name: str, find: Callable[[Spec], frozenset[str]]) -> frozenset[str]:
    hit = _FACTS.get((id(spec), name))
    if hit is None or hit[0] is not spec:
        if len(_FACTS) >= 64:
            _FACTS.clear()
        hit = _FACTS[(id(spec), name)] = (spec, find(spec))
    return hit[1]


def string_literals(spec: Spec) -> frozenset[str]:
    """Every string constant written in the spec: kept by name when states are canonicalised."""
    return _fact(spec, "literals", _string_literals)


def _string_literals(spec: Spec) -> frozenset[str]:
    return frozenset(
        n.value for n in ir.walk(_spec_trees(spec)) if isinstance(n, ir.Const) and isinstance(n.value, str)
    )


class _Recorder(dict[Key, Any]):
    """A store that logs every assignment (the executor writes with `store[key] = value`)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.log: list[Key] = []

    def __setitem__(self, key: Key, value: Any) -> None:
        self.log.append(key)
        super().__setitem__(key, value)


Write = tuple[Any, Any, bool]
"""(where, value, is_delta): a value assigned, or for a counter the amount added to it."""


def _writes(store: Mapping[Key, Any], after: _Recorder, start: int, counters: frozenset[Key]) -> tuple[Write, ...]:
    out = []
    for key in dict.fromkeys(after.log[start:]):
        if key in counters:
            out.append((key, after[key] - store[key], True))
        else:
            out.append((key, after[key], False))
    return tuple(out)


class _MemoMachine(Machine[Any]):
    """The concrete executor, with each ledger event's effect remembered per (event, shard,
    arguments, the values the event reads). A remembered call record is exact in the fields
    the step properties read, which are part of the key; not necessarily in the others."""

    def __init__(
        self,
        spec: Spec,
        policy: Mapping[str, Any],
        shards: int,
        reads: Mapping[tuple[str, int], tuple[Key, ...]],
        counters: frozenset[Key],
    ) -> None:
        super().__init__(spec, ConcreteBackend(), policy, shards)
        self.reads = reads
        self.counters = counters
        self.cache: dict[Any, Any] = {}

    def call_event(
        self, event: Event, shard: int, args: Mapping[str, Any], store: dict[Key, Any], pc: Any, effects: Effects[Any]
    ) -> None:
        reads = self.reads.get((event.name, shard))
        if reads is None or not isinstance(store, _Recorder):
            super().call_event(event, shard, args, store, pc, effects)
            return
        key = (event.name, shard, tuple(args.items()), tuple([store[k] for k in reads]))
        hit = self.cache.get(key)
        if hit is None:
            olds = {k: store[k] for k in self.counters}
            mark, calls, logs = len(store.log), len(effects.calls), len(effects.logs)
            super().call_event(event, shard, args, store, pc, effects)
            writes = _writes(olds, store, mark, self.counters)
            if len(self.cache) >= MEMO_LIMIT:
                self.cache.clear()
            self.cache[key] = (writes, tuple(effects.calls[calls:]), tuple(effects.logs[logs:]))
            return
        writes, records, log = hit
        for k, value, delta in writes:
            store[k] = store[k] + value if delta else value
        effects.calls.extend(records)
        effects.logs.extend(log)


def counter_globals(spec: Spec) -> frozenset[str]:
    """Fleet values that are only ever counted (`g = g + e` or `g = g - e`, `e` not reading
    `g`) and read nowhere else (a metric): an action adds to one whatever its value."""
    return _fact(spec, "counters", _counter_globals)


def _counter_globals(spec: Spec) -> frozenset[str]:
    reads: dict[str, int] = {}
    counted: dict[str, int] = {}
    other: set[str] = set()
    for node in ir.walk(_spec_trees(spec)):
        if isinstance(node, ir.GlobalRef):
            reads[node.name] = reads.get(node.name, 0) + 1
        elif isinstance(node, ir.Assign) and node.kind == "global":
            value = node.value
            if isinstance(value, ir.Arith) and isinstance(value.left, ir.GlobalRef) and value.left.name == node.name:
                counted[node.name] = counted.get(node.name, 0) + 1
            else:
                other.add(node.name)
    names = {g.name for g in spec.globals}
    return frozenset(g for g in names if g in counted and g not in other and reads.get(g, 0) == counted[g])


class Explorer:
    """The transition system of one (spec variant, environment, fleet size, policy), with the
    properties it checks on every transition."""

    def __init__(
        self,
        spec: Spec,
        env: Environment,
        props: Sequence[Property],
        shards: int,
        policy: Mapping[str, int],
        *,
        symmetry: bool = True,
        contracts: bool = False,
        memo: bool = True,
        reduce: bool = True,
        exact_fields: Sequence[str] = (),
        replay_shards: int | None = None,
        reduction: Reduction | None = None,
    ) -> None:
        """`reduction`: `reduce_for(spec, env, props, policy, exact_fields=...)` when the
        caller has it already (with `reduce`, it is computed otherwise)."""
        self.spec = spec
        self.env = env
        self.props = tuple(props)
        self.n = shards
        self.replay_n = replay_shards or shards
        self.policy = dict(policy)
        self.symmetry = symmetry
        self.contracts = contracts
        self.use_memo = memo
        # The pinned shard: shard 0 stays itself under symmetry when a per-shard property is checked.
        self.focus = FOCUS if any(not p.fleet for p in self.props) else None
        self.keys: list[Key] = Machine(spec, ConcreteBackend(), self.policy, shards).state_keys(env.vars)
        self.width = len(spec.shard_vars)
        self.field_index = {v.name: j for j, v in enumerate(spec.shard_vars)}
        nw = shards * self.width
        self.tail_index = {key[1]: p for p, key in enumerate(self.keys) if key[0] is None}
        self.position = {key: p for p, key in enumerate(self.keys)}
        self.literals = string_literals(spec)
        shard_types = [v.type for v in spec.shard_vars]
        self.str_fields = [j for j, t in enumerate(shard_types) if t.kind == "str"]
        self.tail_str = [p for p, key in enumerate(self.keys) if key[0] is None and self._type_of(key).kind == "str"]
        self.str_positions = [i * self.width + j for i in range(shards) for j in self.str_fields] + self.tail_str
        self.has_str = bool(self.str_positions)
        self.optional = [(j, _sentinel(t)) for j, t in enumerate(shard_types) if t.optional and t.kind != "str"]
        if reduce and reduction is None:
            reduction = reduce_for(spec, env, self.props, self.policy, exact_fields=exact_fields)
        self.reduction = reduction if reduce else None
        relevant = relevant_actions(spec, env, self.reduction) if self.reduction else None
        cone = self.reduction.cone if self.reduction else None
        self.dropped = frozenset(p for p, key in enumerate(self.keys) if cone is not None and node_of(key) not in cone)
        self.caps: dict[int, int] = {}
        if self.reduction:
            for p, key in enumerate(self.keys):
                cap = self.reduction.saturation.get(node_of(key))
                if cap is not None:
                    self.caps[p] = cap
        self.free_params = frozenset(
            (a.name, p.name)
            for a in env.actions
            for p in a.value_params
            if cone is not None and ("param", a.name, p.name) not in cone
        )
        # A string held only by a position outside the cone never changes: nothing to rename.
        self.str_positions = [p for p in self.str_positions if p not in self.dropped]
        self.has_str = bool(self.str_positions)
        self.kept_str_fields = [j for j in self.str_fields if j not in self.dropped]
        self.instances: list[tuple[Action, dict[str, int]]] = []
        for action in env.actions:
            if relevant is not None and action.name not in relevant:
                continue
            for combo in itertools.product(range(shards), repeat=len(action.shard_params)):
                self.instances.append((action, dict(zip(action.shard_params, combo, strict=True))))
        self.int_params = _sampled_params(env, self.reduction, relevant)
        if exact_fields and self.int_params and reduce:
            # The fields a view shows widen the cone the search keeps, not what the verdict
            # depends on: an int parameter only they read is sampled harmlessly (the traces
            # shown are real ones), as `explicit_decides` judges it.
            verdict_cone = reduce_for(spec, env, self.props, self.policy)
            self.int_params = _sampled_params(env, verdict_cone, relevant_actions(spec, env, verdict_cone))
        self.step_props = [k for k, p in enumerate(self.props) if p.kind == PropertyKind.STEP]
        self.inv_props = [k for k, p in enumerate(self.props) if p.kind == PropertyKind.INVARIANT]
        self.counters = frozenset((None, g) for g in counter_globals(spec))
        # Fields a step property reads of the called shard (`before.x`, `after.x`): part of
        # what a call depends on, as far as the property can tell.
        self.snap_fields = sorted(
            {
                n.name
                for k in self.step_props
                for n in ir.walk([self.props[k].when, self.props[k].check])
                if isinstance(n, ir.FieldRef) and n.snap is not None
            }
        )
        everything = tuple(range(len(self.keys)))
        steps = [[p.when, p.check] for k, p in enumerate(self.props) if k in self.step_props]
        prop_globals = self._positions(steps)
        self.guard_positions: list[tuple[int, ...] | None] = []
        self.run_positions: list[tuple[int, ...] | None] = []
        for action, binding in self.instances:
            guard = self._positions(action.when, binding)
            run = self._positions([action.when, action.body], binding)
            if run is not None and prop_globals is not None:
                run = tuple(sorted(set(run) | set(prop_globals)))
            self.guard_positions.append(guard if guard is not None and 2 * len(guard) < len(everything) else None)
            self.run_positions.append(run if run is not None and 2 * len(run) < len(everything) else None)
        invariant = self._positions([[self.props[k].when, self.props[k].check] for k in self.inv_props], {}, FOCUS)
        if any(self.props[k].fleet for k in self.inv_props):
            invariant = None
        self.invariant_positions = invariant if invariant is not None else everything
        event_reads: dict[tuple[str, int], tuple[Key, ...]] = {}
        for name in spec.events:
            for shard in range(shards):
                positions = self._positions(ir.CallEvent(name, "self", (), 0, ""), {}, shard)
                if positions is not None and all(p >= nw or p // self.width == shard for p in positions):
                    event_reads[(name, shard)] = tuple(self.keys[p] for p in positions)
        self.plan: list[tuple[int, Action, int | None, int | None, Any, Any]] = []
        for index, (action, binding) in enumerate(self.instances):
            self.plan.append(
                (
                    index,
                    action,
                    binding[action.shard_params[0]] if len(action.shard_params) == 1 else None,
                    next(iter(binding.values()), None),
                    _getter(self.guard_positions[index]) if memo else None,
                    _getter(self.run_positions[index]) if memo else None,
                )
            )
        self.invariant_of = _getter(self.invariant_positions) or (lambda state: state)
        # Choices of value parameters that do not depend on the state (no string parameter).
        self.static_choices: list[list[tuple[tuple[Any, ...], tuple[Any, ...]]] | None] = [
            None
            if any(p.type.kind == "str" and (action.name, p.name) not in self.free_params for p in action.value_params)
            else self._choices(action, None, ())
            for action, _ in self.instances
        ]
        # What the choices of an instance with a string parameter depend on: the strings its
        # shard (or the fleet) holds, which it may pass on, and every string held, which a
        # fresh one must differ from. Remembered per those values (`_choices_in`).
        self.choice_of: list[Any] = [
            None
            if choices is not None or not memo
            else _getter(sorted(set(self._holder_positions(owner)) | set(self.str_positions)))
            for choices, (_, _, _, owner, _, _) in zip(self.static_choices, self.plan, strict=True)
        ]
        self.choice_memo: dict[Any, list[tuple[tuple[Any, ...], tuple[Any, ...]]]] = {}
        self.param_names = [tuple(p.name for p in action.value_params) for action, _ in self.instances]
        if memo:
            self.machine: Machine[Any] = _MemoMachine(spec, self.policy, shards, event_reads, self.counters)
        else:
            self.machine = Machine(spec, ConcreteBackend(), self.policy, shards)
        self.view_fields: tuple[str, ...] = ()
        self.view_index: list[tuple[str, int]] = []
        self.view_text: set[str] = set()
        if len(self.props) == 1:
            self.view_fields = tuple(self.props[0].view or spec.observed_fields)
            self.view_index = [(name, self.field_index[name]) for name in self.view_fields]
            self.view_text = {n for n in self.view_fields if shard_types[self.field_index[n]].kind == "str"}
        urls = [base_url(i) for i in range(shards)]
        store = initial_store(spec, shards, self.policy, urls, env.vars)
        initial = [store[key] for key in self.keys]
        for p, cap in self.caps.items():
            initial[p] = min(initial[p], cap)
        for p in self.dropped:
            # Outside the cone, every shard holds shard 0's value (read by nothing that
            # matters), so that per-shard initial values (addresses) do not break symmetry.
            if p < shards * self.width:
                initial[p] = initial[p % self.width]
        self.initial: tuple[Any, ...] = tuple(initial)
        self.guard_memo: dict[Any, bool] = {}
        self.run_memo: dict[Any, _Effect | None] = {}
        self.invariant_memo: dict[Any, tuple[bool, ...]] = {}
        self.transitions = 0

    def describe(self) -> str:
        """What the reduction did, for the result's note."""
        if self.reduction is None:
            return ""
        parts = []
        if self.n < self.replay_n:
            parts.append(
                f"one shard searched (the property's shard evolves on its own of the other {self.replay_n - 1})"
            )
        dropped = sorted({self.keys[p][1] for p in self.dropped})
        if dropped:
            parts.append(f"outside the cone of influence: {', '.join(dropped)}")
        caps = sorted({(self.keys[p][1], cap) for p, cap in self.caps.items()})
        if caps:
            parts.append("counters saturated at " + ", ".join(f"{name}={cap}" for name, cap in caps))
        return "; " + "; ".join(parts) if parts else ""

    def _type_of(self, key: Key) -> ir.Type:
        shard, name = key
        if shard is not None:
            return self.spec.shard_vars[self.field_index[name]].type
        for var in self.spec.globals + self.env.vars:
            if var.name == name:
                return var.type
        raise KeyError(name)

    # -- what an action can read --

    def _positions(
        self, node: object, binding: Mapping[str, int] | None = None, self_shard: int | None = None
    ) -> tuple[int, ...] | None:
        """The state positions evaluating `node` can read (None when it cannot be bounded)."""
        out: set[int] = set()
        try:
            self._reads(node, dict(binding or {}), self_shard, out)
        except _AllShards:
            return None
        return tuple(sorted(out))

    def _shard_of(self, name: str, binding: Mapping[str, int], self_shard: int | None) -> int:
        shard = self_shard if name == "self" else binding.get(name)
        if shard is None:
            raise _AllShards
        return shard

    def _reads(self, node: object, binding: dict[str, int], self_shard: int | None, out: set[int]) -> None:
        w = self.width
        if node is None or isinstance(node, (str, int, float, bool, ir.Type, ir.Const)):
            return
        if isinstance(node, (list, tuple)):
            for item in node:
                self._reads(item, binding, self_shard, out)
        elif isinstance(node, ir.FieldRef):
            if node.snap is None or node.snap == "old":  # `old.x`: the shard's value as the call began
                out.add(self._shard_of(node.shard, binding, self_shard) * w + self.field_index[node.name])
        elif isinstance(node, ir.GlobalRef):
            if node.name not in self.tail_index:
                raise _AllShards
            out.add(self.tail_index[node.name])
        elif isinstance(node, ir.QueryRef):
            shard = self._shard_of(node.shard, binding, self_shard)
            self._reads(self.spec.queries[node.name].expr, binding, shard, out)
        elif isinstance(node, ir.Aggregate):
            for i in range(self.n):
                self._reads(node.body, binding, i, out)
        elif isinstance(node, ir.ForShards):
            for i in range(self.n):
                self._reads(node.body, {**binding, node.var: i}, self_shard, out)
        elif isinstance(node, ir.CallEvent):
            shard = self._shard_of(node.shard, binding, self_shard)
            self._reads([value for _, value in node.args], binding, self_shard, out)
            event = self.spec.events[node.event]
            out.update(shard * w + self.field_index[name] for name in self.snap_fields)
            self._reads([event.ignore_when, event.requires, event.body, event.history, event.returns], {}, shard, out)
        elif isinstance(node, ir.Assign):
            value = node.value
            if (
                node.kind == "global"
                and (None, node.name) in self.counters
                and isinstance(value, ir.Arith)
                and isinstance(value.left, ir.GlobalRef)
                and value.left.name == node.name
            ):
                value = value.right  # a counter: the amount added is what depends on the state
            self._reads(value, binding, self_shard, out)
            if node.kind == "field" and node.name == self.spec.state_field:
                # The state hook runs on the old and new value of the state field.
                out.add(self._shard_of(node.shard, binding, self_shard) * w + self.field_index[node.name])
                self._reads(self.spec.on_state_change, {}, None, out)
        else:
            for child in ir.children(node):
                self._reads(child, binding, self_shard, out)

    # -- canonical form --

    def _rows(self, state: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        w = self.width
        return [state[i * w : (i + 1) * w] for i in range(self.n)]

    def _sortable(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        """A row whose values order without comparing None to a value; strings are
        numbered by first occurrence within the row (their names mean nothing)."""
        if not self.optional and not self.kept_str_fields:
            return row
        values = list(row)
        for j, sentinel in self.optional:
            if values[j] is None:
                values[j] = sentinel
        local: dict[str, int] = {}
        for j in self.kept_str_fields:
            v = values[j]
            if v is None:
                values[j] = (-1,)
            elif v in self.literals:
                values[j] = (1, v)
            else:
                values[j] = (0, local.setdefault(v, len(local)))
        return tuple(values)

    def canonical(self, state: tuple[Any, ...]) -> Any:
        """The key under which states equal up to shard symmetry (and renaming of opaque
        strings) are merged."""
        if not self.symmetry:
            return self._rename(state) if self.has_str else state
        if self.n == 1 or (self.n == 2 and self.focus is not None):
            return self._rename(state) if self.has_str else state
        rows = self._rows(state)
        sortable = [self._sortable(r) for r in rows]
        if self.focus is None:
            order = sorted(range(self.n), key=sortable.__getitem__)
        else:
            order = [self.focus, *sorted((i for i in range(self.n) if i != self.focus), key=sortable.__getitem__)]
        tail = state[self.n * self.width :]
        if not self.has_str:
            return (tuple([rows[i] for i in order]), tail)
        return self._rename(tuple(itertools.chain.from_iterable(rows[i] for i in order)) + tail)

    def _rename(self, flat: tuple[Any, ...]) -> tuple[Any, ...]:
        names: dict[str, int] = {}
        out = list(flat)
        for p in self.str_positions:
            v = out[p]
            if v is not None and v not in self.literals:
                out[p] = ("s", names.setdefault(v, len(names)))
        return tuple(out)

    def representatives(self, state: tuple[Any, ...]) -> set[int]:
        """Shards an action needs to be tried on: the focus shard, and one of each group of
        interchangeable shards (identical records holding no string another shard holds)."""
        rows = self._rows(state)
        private = [True] * self.n
        if self.has_str:
            owners: dict[str, set[int]] = {}
            for p in self.str_positions:
                v = state[p]
                if v is not None and v not in self.literals:
                    owners.setdefault(v, set()).add(p // self.width if p < self.n * self.width else -1)
            for i, row in enumerate(rows):
                private[i] = all(
                    owners[row[j]] == {i}
                    for j in self.kept_str_fields
                    if row[j] is not None and row[j] not in self.literals
                )
        chosen: set[int] = set()
        seen: set[Any] = set()
        for i in range(self.n):
            if i == self.focus or not private[i]:
                chosen.add(i)
                continue
            group = self._sortable(rows[i])
            if group not in seen:
                seen.add(group)
                chosen.add(i)
        return chosen

    # -- transitions --

    def _domain(self, param: Param, owner: int | None, state: tuple[Any, ...]) -> list[tuple[Any, Any]]:
        """(choice, value) pairs for one value parameter in the current state."""
        vtype = param.type
        out: list[tuple[Any, Any]] = []
        if vtype.optional:
            out.append((_NONE, None))
        if vtype.kind == "bool":
            out += [(False, False), (True, True)]
        elif vtype.kind == "enum":
            out += [(m, m) for m in self.spec.enums[vtype.enum or ""].members]
        elif vtype.kind == "int":
            out += [(v, v) for v in INT_DOMAIN]
        elif vtype.kind == "str":
            current: dict[str, str] = {}
            for position in self._holder_positions(owner):
                value, name = state[position], self._holder_name(position)
                if isinstance(value, str) and value not in current:
                    current[value] = name
            out += [(("field", name), value) for value, name in current.items()]
            taken = {state[p] for p in self.str_positions}
            fresh = next(f"~fresh{k}" for k in itertools.count() if f"~fresh{k}" not in taken)
            out.append((_FRESH, fresh))
        else:  # pragma: no cover - actions have no other parameter types
            raise UsageError(f"the explicit engine has no finite domain for a parameter of type {vtype}")
        return out

    def _holder_positions(self, owner: int | None) -> list[int]:
        """Where the strings a string parameter may pass on are held: the owner shard's
        string fields, or the fleet's for an action on no shard."""
        if owner is not None:
            return [owner * self.width + j for j in self.str_fields]
        return list(self.tail_str)

    def _holder_name(self, position: int) -> str:
        """The name of the field (or fleet value) held at `position`."""
        if position < self.n * self.width:
            return self.spec.shard_vars[position % self.width].name
        return str(self.keys[position][1])

    def _run(self, index: int, values: Mapping[str, Any], store: Mapping[Key, Any]) -> _Effect | None:
        """Run one enabled action instance on the executable model (None: it makes a call
        outside the callers' contracts where the search keeps to them)."""
        action, binding = self.instances[index]
        after = _Recorder(store)
        effects: Effects[Any] = self.machine.run_action(action, binding, values, after)
        if self.contracts and not all(c.contract_ok for c in effects.calls):
            return None
        writes = tuple(
            (p, v if delta or p not in self.caps else min(v, self.caps[p]), delta)
            for p, v, delta in ((self.position[k], v, delta) for k, v, delta in _writes(store, after, 0, self.counters))
            if p not in self.dropped
        )
        bad = [False] * len(self.props)
        for k in self.step_props:
            prop = self.props[k]
            focus = None if prop.fleet else FOCUS
            bad[k] = any(
                self.machine.step_violations(prop.when, prop.check, c, store)
                for c in effects.calls
                if c.event in prop.on and (focus is None or c.shard == focus)
            )
        return _Effect(writes, effects.calls, tuple(bad))

    def _free_choice(self, param: Param) -> list[tuple[Any, Any]]:
        """The one value tried for a parameter outside the cone of influence."""
        if param.type.kind == "str":
            return [(_NONE, None)] if param.type.optional else [(_FRESH, "~fresh")]
        return self._domain(param, None, ())[:1]

    def _choices(
        self, action: Action, owner: int | None, state: tuple[Any, ...]
    ) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        """Per choice of the value parameters: (the values, the choices a label records)."""
        return [
            (tuple([value for _, value in combo]), tuple([choice for choice, _ in combo]))
            for combo in self._combos(action, owner, state)
        ]

    def _choices_in(
        self, index: int, action: Action, owner: int | None, state: tuple[Any, ...]
    ) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        """`_choices` of one instance, remembered per the strings they depend on."""
        choice_of = self.choice_of[index]
        if choice_of is None:
            return self._choices(action, owner, state)
        key = (index, choice_of(state))
        choices = self.choice_memo.get(key)
        if choices is None:
            choices = self._choices(action, owner, state)
            if len(self.choice_memo) >= MEMO_LIMIT:
                self.choice_memo.clear()
            self.choice_memo[key] = choices
        return choices

    def _combos(self, action: Action, owner: int | None, state: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Every choice of the action's value parameters in this state (one value for a
        parameter outside the cone of influence: what it is cannot matter)."""
        if not action.value_params:
            return [()]
        domains = [
            self._free_choice(p) if (action.name, p.name) in self.free_params else self._domain(p, owner, state)
            for p in action.value_params
        ]
        return list(itertools.product(*domains))

    def successors(self, state: tuple[Any, ...]) -> Iterator[Successor]:
        reps = self.representatives(state) if self.symmetry and self.n > 1 else None
        run_memo, check_invariants, caps = self.run_memo, bool(self.inv_props), self.caps
        stores: list[dict[Key, Any]] = []
        for index, action, shard, owner, guard_of, run_of in self.plan:
            if reps is not None and shard is not None and shard not in reps:
                continue
            choices = self.static_choices[index]
            if choices is None:
                choices = self._choices_in(index, action, owner, state)
            read = run_of(state) if run_of is not None else None
            for values, label in choices:
                # One lookup on the common path: the effect (None: disabled, or outside the
                # callers' contracts) remembered per (instance, values, everything it reads).
                rkey = (index, values, read) if read is not None else None
                effect = run_memo.get(rkey, _MISSING) if rkey is not None else _MISSING
                if effect is _MISSING:
                    effect = self._effect(index, action, values, state, guard_of, stores)
                    if rkey is not None:
                        if len(run_memo) >= MEMO_LIMIT:
                            run_memo.clear()
                        run_memo[rkey] = effect
                if effect is None:
                    continue
                self.transitions += 1
                if effect.writes:
                    nxt = list(state)
                    for p, v, delta in effect.writes:
                        if delta:
                            nxt[p] = nxt[p] + v if p not in caps else min(nxt[p] + v, caps[p])
                        else:
                            nxt[p] = v
                    succ = tuple(nxt)
                else:
                    succ = state
                bad = effect.bad
                if check_invariants:
                    broken = self.invariants_broken(succ)
                    bad = tuple([a or b for a, b in zip(bad, broken, strict=True)])
                yield Successor((index, label), succ, effect.calls, bad)

    def _effect(
        self,
        index: int,
        action: Action,
        values: tuple[Any, ...],
        state: tuple[Any, ...],
        guard_of: Any,
        stores: list[dict[Key, Any]],
    ) -> _Effect | None:
        """What one instance does from `state` with these values (None: it is disabled, or
        makes a call outside the callers' contracts); the guard is remembered on its own,
        per the fewer positions it reads."""
        named = dict(zip(self.param_names[index], values, strict=True))
        if not stores:
            stores.append(dict(zip(self.keys, state, strict=True)))
        store = stores[0]
        gkey = (index, values, guard_of(state)) if guard_of is not None else None
        enabled = self.guard_memo.get(gkey, _MISSING) if gkey is not None else _MISSING
        if enabled is _MISSING:
            enabled = bool(self.machine.enabled(action, self.instances[index][1], named, store))
            if gkey is not None:
                if len(self.guard_memo) >= MEMO_LIMIT:
                    self.guard_memo.clear()
                self.guard_memo[gkey] = enabled
        if not enabled:
            return None
        return self._run(index, named, store)

    def invariants_broken(self, state: tuple[Any, ...]) -> tuple[bool, ...]:
        """Per property: an invariant broken in this state (False for step properties)."""
        key = self.invariant_of(state) if self.use_memo else None
        broken = self.invariant_memo.get(key) if key is not None else None
        if broken is None:
            store = dict(zip(self.keys, state, strict=True))
            flags = [False] * len(self.props)
            for k in self.inv_props:
                flags[k] = self._invariant_broken(self.props[k], store)
            broken = tuple(flags)
            if key is not None:
                self.invariant_memo[key] = broken
        return broken

    def _invariant_broken(self, prop: Property, store: Mapping[Key, Any]) -> bool:
        if prop.fleet:
            return not self.machine.invariant(prop.when, prop.check, None, store)
        return not self.machine.invariant(prop.when, prop.check, FOCUS, store)

    def view_item(self, before: tuple[Any, ...], succ: Successor) -> Any:
        """What one transition adds to the view of the (single) property (None: nothing)."""
        if self.props[0].fleet:
            action, binding = self.instances[succ.label[0]]
            return (action.name, tuple(sorted(binding.items())))
        base = FOCUS * self.width
        changed = []
        for name, j in self.view_index:
            old, new = before[base + j], succ.state[base + j]
            if old != new:
                changed.append((name, CHANGED if name in self.view_text else new))
        if not changed:
            return None
        events = tuple(c.event for c in succ.calls if c.shard == FOCUS)
        return (events, tuple(changed))

    # -- traces --

    def replay(self, labels: Sequence[Label], k: int) -> Trace:
        """The path as a trace of the executable model (the same steps `bmc` extracts); its
        last step must break property k."""
        prop = self.props[k]
        focus = None if prop.fleet else FOCUS
        trace, sim, last, pre = self.path_trace(labels, focus)
        if not breaks_last_step(sim.machine, prop, focus, sim.store, pre, last):
            raise EncodingMismatch(f"internal error: the explicit engine's trace for {prop.name} does not break it")
        return trace

    def path_trace(
        self, labels: Sequence[Label], focus: int | None
    ) -> tuple[Trace, Simulation, Effects[Any] | None, dict[Key, Any]]:
        """Replay a path on the executable model: the trace, the simulation after it, the
        last step's effects and the store before the last step."""
        sim = Simulation(self.spec, self.env, self.replay_n, self.policy)
        steps: list[Step] = [sim.initial_step()]
        fresh: dict[int, int] = {}
        last: Effects[Any] | None = None
        pre: dict[Key, Any] = dict(sim.store)
        for index, choices in labels:
            action, binding = self.instances[index]
            owner = next(iter(binding.values()), 0)
            values: dict[str, Any] = {}
            for param, choice in zip(action.value_params, choices, strict=True):
                if choice == _NONE:
                    values[param.name] = None
                elif choice == _FRESH:
                    fresh[owner] = fresh.get(owner, 0) + 1
                    n = fresh[owner]
                    values[param.name] = f"{base_url(owner)}.restarted" + (f"-{n}" if n > 1 else "")
                elif isinstance(choice, tuple) and choice[0] == "field":
                    values[param.name] = sim.store[(owner, choice[1])]
                else:
                    values[param.name] = choice
            pre = dict(sim.store)
            step, last = sim.apply(action, binding, values)
            steps.append(step)
        trace = Trace(
            self.spec.name, self.spec.variant, self.env.name, self.replay_n, dict(self.policy), tuple(steps), focus
        )
        return trace, sim, last, pre


def _getter(positions: Sequence[int] | None) -> Any:
    """A fast function from a state to its values at `positions` (a tuple); None for None."""
    if positions is None:
        return None
    if len(positions) == 0:
        return lambda state: ()
    if len(positions) == 1:
        p = positions[0]
        return lambda state: (state[p],)
    return operator.itemgetter(*positions)


def _sentinel(vtype: ir.Type) -> Any:
    """A stand-in for None that orders against the type's values (and equals none of them)."""
    if vtype.kind == "enum":
        return ""
    if vtype.kind == "int":
        return float("-inf")
    return -1


def _path(parents: Mapping[Any, tuple[Any, Label] | None], node: Any) -> list[Label]:
    labels: list[Label] = []
    link = parents[node]
    while link is not None:
        node, label = link
        labels.append(label)
        link = parents[node]
    labels.reverse()
    return labels


@dataclass
class Search:
    """The first search: per property, the depth of its first violation and one path to it."""

    depth: list[int | None]
    paths: list[list[Label] | None]
    states: int
    reached: int
    exhausted: bool
    timed_out: bool = False
    stopped_by: str = ""
    """What ended a search that timed out: "the timeout" (per call) or the budget that ran out."""


Edges = dict[Any, list[tuple[Any, tuple[bool, ...]]]]
"""The canonical state graph the first search saw: per state, (successor, which properties
the transition breaks)."""


def first_violations(
    ex: Explorer,
    max_depth: int,
    deadline: float | None = None,
    state_limit: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Search:
    """Breadth first over canonical states, every property at once: a transition is cut only
    when it breaks all of them, so each property's first violation is a shortest one."""
    count = len(ex.props)
    depth: list[int | None] = [None] * count
    paths: list[list[Label] | None] = [None] * count
    root = ex.canonical(ex.initial)
    parents: dict[Any, tuple[Any, Label] | None] = {root: None}
    broken = ex.invariants_broken(ex.initial) if ex.inv_props else (False,) * count
    for k in range(count):
        if broken[k]:
            depth[k], paths[k] = 0, []
    frontier: list[tuple[Any, tuple[Any, ...]]] = [] if all(broken) else [(root, ex.initial)]
    reached = 0
    limits = _Limits(deadline)
    shown = time.monotonic()
    for level in range(1, max_depth + 1):
        if all(d is not None for d in depth) or not frontier:
            break
        nxt: list[tuple[Any, tuple[Any, ...]]] = []
        for node, state in frontier:
            if limits.over():
                return Search(depth, paths, len(parents), level - 1, False, True, limits.why)
            for succ in ex.successors(state):
                if any(succ.bad):
                    for k, bad in enumerate(succ.bad):
                        if bad and depth[k] is None:
                            depth[k], paths[k] = level, _path(parents, node) + [succ.label]
                    if all(d is not None for d in depth):
                        return Search(depth, paths, len(parents), level, False)
                if all(succ.bad):
                    continue
                key = ex.canonical(succ.state)
                if key not in parents:
                    parents[key] = (node, succ.label)
                    nxt.append((key, succ.state))
        frontier = nxt
        reached = level
        if progress is not None and time.monotonic() >= shown + PROGRESS_EVERY:
            shown = time.monotonic()
            names = ", ".join(p.name for p in ex.props)
            progress(f"{names}: explicit search, depth {level}, {len(parents)} states")
        if state_limit is not None and len(parents) > state_limit:
            break
    return Search(depth, paths, len(parents), reached, not frontier and reached < max_depth)


def distances(edges: Edges, k: int, limit: int) -> dict[Any, int]:
    """Per state of the graph, the fewest transitions to a violation of property k (up to
    `limit`), over transitions that do not break it before."""
    back: dict[Any, list[Any]] = {}
    dist: dict[Any, int] = {}
    layer: list[Any] = []
    for node, out in edges.items():
        for child, bad in out:
            if bad[k]:
                if node not in dist:
                    dist[node] = 1
                    layer.append(node)
            else:
                back.setdefault(child, []).append(node)
    for d in range(2, limit + 1):
        nxt = []
        for node in layer:
            for parent in back.get(node, ()):
                if parent not in dist:
                    dist[parent] = d
                    nxt.append(parent)
        layer = nxt
    return dist


def distinct_views(
    ex: Explorer,
    *,
    shortest: int,
    max_depth: int,
    max_traces: int,
    deadline: float | None = None,
    dist: Mapping[Any, int] | None = None,
    views: set[Any] | None = None,
) -> tuple[list[list[Label]], int]:
    """Distinct views of first violations of the (single) property, shortest first: a search
    over (canonical state, view so far), ending after the depth at which `max_traces` views
    are known. With `dist` (fewest steps to a violation, per state), only states that can
    break the property by `max_depth` are kept. `views` are views already found."""
    root = (ex.canonical(ex.initial), ())
    parents: dict[Any, tuple[Any, Label] | None] = {root: None}
    frontier: list[tuple[Any, tuple[Any, ...]]] = [(root, ex.initial)]
    found: list[list[Label]] = []
    views = set() if views is None else views
    far = max_depth + 1
    limits = _Limits(deadline)
    for level in range(1, max_depth + 1):
        nxt: list[tuple[Any, tuple[Any, ...]]] = []
        for node, state in frontier:
            if limits.over():
                raise _Timeout
            prefix = node[1]
            for succ in ex.successors(state):
                item = ex.view_item(state, succ)
                view = prefix if item is None else (*prefix, item)
                if succ.bad[0]:
                    if level >= shortest and view not in views:
                        views.add(view)
                        found.append(_path(parents, node) + [succ.label])
                    continue
                canonical = ex.canonical(succ.state)
                if dist is not None and level + dist.get(canonical, far) > max_depth:
                    continue
                key = (canonical, view)
                if key not in parents:
                    parents[key] = (node, succ.label)
                    nxt.append((key, succ.state))
        frontier = nxt
        if len(found) >= max_traces or not frontier:
            break
    return found, len(parents)


class _Graph:
    """The canonical state graph of one property, explored breadth first on demand (a
    transition that breaks the property is recorded but not followed)."""

    def __init__(self, ex: Explorer) -> None:
        self.ex = ex
        root = ex.canonical(ex.initial)
        self.seen = {root}
        self.frontier: list[tuple[Any, tuple[Any, ...]]] = [(root, ex.initial)]
        self.edges: Edges = {}
        self.expanded = 0  # states of BFS level < expanded have their edges recorded

    def expand_below(self, level: int, deadline: float | None) -> None:
        ex = self.ex
        limits = _Limits(deadline)
        while self.expanded < level and self.frontier:
            nxt: list[tuple[Any, tuple[Any, ...]]] = []
            for node, state in self.frontier:
                if limits.over():
                    raise _Timeout
                out = self.edges.setdefault(node, [])
                for succ in ex.successors(state):
                    key = ex.canonical(succ.state)
                    out.append((key, succ.bad))
                    if not succ.bad[0] and key not in self.seen:
                        self.seen.add(key)
                        nxt.append((key, succ.state))
            self.frontier = nxt
            self.expanded += 1


def _views(
    ex: Explorer, shortest: int, max_depth: int, max_traces: int, deadline: float | None
) -> tuple[list[list[Label]], int]:
    """Distinct views, depth by depth from the shortest, until `max_traces` are known: at each
    depth d, a search over (state, view so far) kept to the states that can still break the
    property by step d (their distance to a violation, from the graph explored below d)."""
    graph = _Graph(ex)
    views: set[Any] = set()
    found: list[list[Label]] = []
    pairs = 0
    for depth in range(shortest, max_depth + 1):
        graph.expand_below(depth, deadline)
        dist = distances(graph.edges, 0, depth)
        try:
            more, searched = distinct_views(
                ex,
                shortest=depth,
                max_depth=depth,
                max_traces=max_traces - len(found),
                deadline=deadline,
                dist=dist,
                views=views,
            )
        except _Timeout:
            if not found:
                raise
            return found, -1
        found += more
        pairs += searched
        if len(found) >= max_traces:
            break
    return found, pairs


def finiteness(ex: Explorer) -> Finiteness:
    """`model.reduction.finite_reduction` of what `ex` searches (without its reduction,
    every state variable kept and none saturated)."""
    reduction = ex.reduction
    if reduction is None:
        reduction = Reduction(frozenset(node_of(key) for key in ex.keys), {})
    return finite_reduction(ex.spec, ex.env, ex.props, ex.policy, reduction)


def _view_fields(spec: Spec, prop: Property) -> tuple[str, ...]:
    return tuple(prop.view or spec.observed_fields)


def _sampled_params(env: Environment, reduction: Reduction | None, relevant: frozenset[str] | None) -> list[str]:
    """The int parameters of `env`'s (relevant) actions that the cone reads (`action.param`),
    every one without a reduction: the explicit engine tries them with `INT_DOMAIN` only, an
    under-approximation, so over them its search can find a violation (perhaps not the
    shortest) but never show that none exists."""
    return sorted(
        f"{a.name}.{p.name}"
        for a in env.actions
        if relevant is None or a.name in relevant
        for p in a.value_params
        if p.type.kind == "int" and (reduction is None or ("param", a.name, p.name) in reduction.cone)
    )


def approximated_params(
    spec: Spec, env: Environment, props: Sequence[Property], policy: Mapping[str, int]
) -> list[str]:
    """`_sampled_params` of the reduced search for `props`: empty where every int parameter
    lies outside the cone (it only sets what no property can see)."""
    reduction = reduce_for(spec, env, props, policy)
    return _sampled_params(env, reduction, relevant_actions(spec, env, reduction))


def explicit_decides(
    spec: Spec, env: Environment, props: Sequence[Property], shards: int, policy: Mapping[str, int]
) -> bool:
    """Whether the explicit engine's answer can stand for `props` (`check --engine auto`,
    `prove`): one shard decides them for every fleet size, and no int parameter their cone
    reads would be searched over a sample of its values. One reduction answers both."""
    reduction = reduce_for(spec, env, props, policy)
    if shards != 1 and not shards_independent(spec, env, props, reduction):
        return False
    return not _sampled_params(env, reduction, relevant_actions(spec, env, reduction))


def sampled(int_params: Sequence[str], status: Status, note: str, name_them: bool = False) -> tuple[Status, str]:
    """A search's verdict where it tried `int_params` over a sample of their values: no
    violation found (a bound reached, or the states exhausted) says nothing of the other
    values, so it is unknown, never a pass; a violation found stands. `name_them`: the note
    names the parameters too (where nothing else in it does)."""
    if not int_params or status not in (Status.HOLDS_TO_DEPTH, Status.PROVED):
        return status, note
    named = f"; int parameters ({', '.join(int_params)}) searched over a sample" if name_them else ""
    return Status.UNKNOWN, f"{note}{named}; not established: {SAMPLED}"


def is_sampled(result: Result) -> bool:
    """A result `sampled` made unknown: no information for or against; the next engine decides."""
    return result.status == Status.UNKNOWN and SAMPLED in result.note


def _explorer(
    spec: Spec,
    env: Environment,
    props: Sequence[Property],
    *,
    shards: int,
    policy: Mapping[str, int],
    symmetry: bool,
    memo: bool,
    reduce: bool,
    exact_fields: Sequence[str],
) -> Explorer:
    """An explorer for `props`; with one shard only when the properties' shard evolves on
    its own (`model.reduction.shards_independent`): its traces are replayed at full size."""
    reduction = reduce_for(spec, env, props, policy, exact_fields=exact_fields) if reduce else None
    alone = reduction is not None and shards > 1 and shards_independent(spec, env, props, reduction)
    return Explorer(
        spec,
        env,
        props,
        1 if alone else shards,
        policy,
        symmetry=symmetry,
        contracts=contracts_bind(env, props),
        memo=memo,
        reduce=reduce,
        exact_fields=exact_fields,
        replay_shards=shards,
        reduction=reduction,
    )


def explicit_check_all(
    spec: Spec,
    environment: str,
    props: Sequence[Property],
    *,
    shards: int,
    policy: Mapping[str, int] | None,
    max_depth: int,
    max_traces: int,
    timeout: float | None = None,
    symmetry: bool = True,
    memo: bool = True,
    reduce: bool = True,
    prove: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[Result]:
    """`explicit_check` for several properties of one variant and environment, sharing one
    search of the state space (per property: the same verdict, depth and traces)."""
    start = time.monotonic()
    env = spec.environment(environment)
    if any(p.kind == PropertyKind.EVENTUALLY for p in props):
        raise UsageError("liveness properties are checked by model.liveness (model.engines.check_property)")
    if policy is None:
        raise UsageError("the explicit engine needs a concrete policy (it enumerates states)")
    if len({p.counts_any_call for p in props}) > 1:  # judged over other calls: two searches, results in order
        answers = {
            flag: iter(
                explicit_check_all(
                    spec,
                    environment,
                    [p for p in props if p.counts_any_call == flag],
                    shards=shards,
                    policy=policy,
                    max_depth=max_depth,
                    max_traces=max_traces,
                    timeout=timeout,
                    symmetry=symmetry,
                    memo=memo,
                    reduce=reduce,
                    prove=prove,
                    progress=progress,
                )
            )
            for flag in (False, True)
        }
        return [next(answers[p.counts_any_call]) for p in props]
    policy = spec.resolve_policy(policy)
    deadline = start + timeout if timeout else None
    results: list[Result | None] = [None] * len(props)
    checked = [k for k, p in enumerate(props) if p.applies_to(environment)]
    for k, prop in enumerate(props):
        if k not in checked:
            results[k] = Result.not_applicable(spec, prop, environment, shards, dict(policy))
    if checked:
        views_wanted = max_traces > 1

        def explorer(chosen: Sequence[Property], symmetric: bool, views: bool = views_wanted) -> Explorer:
            exact = _view_fields(spec, chosen[0]) if views and len(chosen) == 1 else ()
            return _explorer(
                spec,
                env,
                chosen,
                shards=shards,
                policy=policy,
                symmetry=symmetric,
                memo=memo,
                reduce=reduce,
                exact_fields=exact,
            )

        # A proof's search keeps what the verdict reads only: the fields that tell traces apart
        # would keep states apart that the verdict does not (a version that only grows), and
        # the search would never be exhausted (`check --prove` held to depth 145 what `prove`
        # proved in 1,067 states). The distinct traces of a violation are searched apart below.
        ex = explorer([props[k] for k in checked], symmetry, views_wanted and not prove)
        # With `prove`, the search goes on past max_depth until the reachable states are
        # exhausted (a proof) or the state budget is spent; a violation found on the way is a
        # real one (and still a shortest one: the search is breadth first). Only where the
        # reduced state space is known to be finite: elsewhere it could never be exhausted,
        # and the search stays at max_depth.
        finite = finiteness(ex) if prove else None
        cap = PROVE_STATES if finite is not None and finite.finite else PROBE_STATES
        search = first_violations(ex, PROVE_DEPTH if prove else max_depth, deadline, cap if prove else None, progress)
        caveat = (
            f"; int parameters ({', '.join(ex.int_params)}) range over {INT_DOMAIN[0]}..{INT_DOMAIN[-1]} only "
            "(an under-approximation: a violation found is real, perhaps not the shortest; none found is no verdict)"
            if ex.int_params
            else ""
        )
        counts = (
            f"{search.states} states ({'symmetry reduction' if symmetry else 'no symmetry reduction'}), "
            f"{ex.transitions} transitions{ex.describe()}"
        )
        for slot, k in enumerate(checked):
            prop = props[k]
            note, traces, status, depth = f"explicit-state search: {counts}", [], Status.HOLDS_TO_DEPTH, max_depth
            found = search.depth[slot]
            path = search.paths[slot]
            if found is not None and path is not None:
                status = Status.VIOLATED
                # The view of a fleet property is its actions with their shards: not symmetric.
                alone = symmetry and not prop.fleet
                single = ex  # its memo tables are warm
                if len(checked) > 1 or alone != symmetry or (prove and views_wanted):
                    single = explorer([prop], alone)
                paths = [path]
                if max_traces > 1 and found > 0:  # at depth 0 there is one trace: the initial state
                    try:
                        # a proof's search may find it past max_depth: its own depth, then
                        paths, pairs = _views(single, found, max(found, max_depth), max_traces, deadline)
                    except _Timeout:
                        note += "; the search for distinct views timed out"
                    else:
                        if pairs < 0:
                            note += "; the search for distinct views timed out after the shortest depth"
                        else:
                            note += f"; {pairs} (state, view) pairs searched for distinct views"
                paths = paths or [path]
                traces = sorted((single.replay(p, 0) for p in paths), key=lambda t: (t.depth, _trace_key(t)))
                traces = traces[: max(1, max_traces)]
                depth = traces[0].depth
            elif search.timed_out and search.reached < max_depth:
                status, depth = Status.UNKNOWN, search.reached
                note = f"explicit-state search: {search.stopped_by} ran out after depth {search.reached}: {counts}"
            elif search.exhausted:
                note += f"; every reachable state explored by depth {search.reached}: it holds at every depth"
                if ex.n < shards:
                    note += " and every fleet size"
                if prove and ex.int_params:
                    # The int parameters' domain is an under-approximation: no proof.
                    note += " (of the int parameters' values searched only: no proof)"
                elif prove:
                    status = Status.PROVED
            elif prove:
                depth = search.reached
                note += (
                    f"; no proof: the reachable states were not exhausted by depth {search.reached}"
                    f" ({search.stopped_by or f'state budget {cap}'})"
                )
                if finite is not None and not finite.finite:
                    note += f"; {finite}"
            status, note = sampled(ex.int_params, status, note)
            result = Result(
                variant=spec.variant,
                property=prop.name,
                environment=environment,
                shards=shards,
                policy=dict(policy),
                status=status,
                depth=depth,
                traces=traces,
                expected=prop.expect.get(spec.variant),
                seconds=time.monotonic() - start,
                note=note + caveat,
            )
            result.engine = "explicit"
            results[k] = result
    return [r for r in results if r is not None]


def explicit_check(
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: Mapping[str, int] | None,
    max_depth: int,
    max_traces: int,
    timeout: float | None = None,
    symmetry: bool = True,
    memo: bool = True,
    reduce: bool = True,
    prove: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Result:
    """Check one property by explicit-state breadth-first search (see the module doc).

    Verdicts mean what the Z3 engine's mean (`bmc.check_property(..., lax=False)`): in an
    `any_call` environment, about the traces within the callers' contracts. `policy` must be
    concrete. Up to `max_traces` traces, distinct in their view, shortest first. Safety
    properties only: a liveness property (`eventually`) is searched for fair lassos by
    `model.liveness`."""
    return explicit_check_all(
        spec,
        environment,
        [prop],
        shards=shards,
        policy=policy,
        max_depth=max_depth,
        max_traces=max_traces,
        timeout=timeout,
        symmetry=symmetry,
        memo=memo,
        reduce=reduce,
        prove=prove,
        progress=progress,
    )[0]


__all__ = [
    "Explorer",
    "Search",
    "distinct_views",
    "explicit_check",
    "explicit_check_all",
    "finiteness",
    "first_violations",
    "view_key",
]
