"""The obvious alternatives to ledgercheck's engines, over the same executable model.

* `plain_bfs`: breadth-first search with a hash set of full states and nothing else: no
  symmetry reduction, no memoisation, the property checked on every shard. Value parameters
  range over the same finite domains as `model.explicit` (bool both; int 0..2; str None /
  the shard's current string / one fresh string), so both searches answer the same question.
* `hypothesis_search`: a Hypothesis `RuleBasedStateMachine` whose rules are the
  environment's actions (shard parameters drawn by `st.integers`, value parameters by
  strategies); after each rule the step property is checked on the calls it made and the
  invariant on every shard. Random testing: it can find a violation, never show there is
  none.

In an `any_call` environment both keep to the callers' contracts (`requires`), as the Z3
engine's verdict does (`Encoding(contracts=True)`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledgercheck.model.bmc import Result
from ledgercheck.model.interpreter import initial_store
from ledgercheck.model.lang import Param
from ledgercheck.model.semantics import CallRecord, ConcreteBackend, Effects, Key, Machine
from ledgercheck.model.spec import Action, Environment, Property, Spec
from ledgercheck.model.trace import base_url, replay

INTS = (0, 1, 2)


def _breaks(
    machine: Machine[Any], prop: Property, shards: int, pre: Mapping[Key, Any], post: Mapping[Key, Any], calls: Any
) -> bool:
    """The property fails on some shard (or on the fleet) in this transition."""
    if prop.kind == "step":
        return any(machine.step_violations(prop.when, prop.check, c, pre) for c in calls if c.event in prop.on)
    if prop.fleet:
        return not machine.invariant(prop.when, prop.check, None, post)
    return any(not machine.invariant(prop.when, prop.check, i, post) for i in range(shards))


def _values(param: Param, owner: int | None, store: Mapping[Key, Any], spec: Spec) -> list[Any]:
    vtype = param.type
    out: list[Any] = [None] if vtype.optional else []
    if vtype.kind == "bool":
        return out + [False, True]
    if vtype.kind == "enum":
        return out + list(spec.enums[vtype.enum or ""].members)
    if vtype.kind == "int":
        return out + list(INTS)
    current = [store[(owner, v.name)] for v in spec.shard_vars if v.type.kind == "str"] if owner is not None else []
    taken = {v for v in store.values() if isinstance(v, str)}
    fresh = next(f"~fresh{k}" for k in itertools.count() if f"~fresh{k}" not in taken)
    return out + [v for v in dict.fromkeys(current) if isinstance(v, str)] + [fresh]


@dataclass
class BfsOutcome:
    result: Result
    states: int


def plain_bfs(
    spec: Spec,
    environment: str,
    prop: Property,
    shards: int,
    policy: Mapping[str, int],
    max_depth: int,
    timeout: float | None = None,
) -> BfsOutcome:
    """Shortest violation (or none up to `max_depth`) by plain breadth-first search."""
    start = time.monotonic()
    env = spec.environment(environment)
    machine: Machine[Any] = Machine(spec, ConcreteBackend(), dict(policy), shards)
    keys = machine.state_keys(env.vars)
    init = initial_store(spec, shards, [base_url(i) for i in range(shards)], env.vars)
    root = tuple(init[k] for k in keys)
    parent: dict[tuple[Any, ...], tuple[tuple[Any, ...], tuple[Action, dict[str, int], dict[str, Any]]] | None] = {
        root: None
    }
    frontier = [root]

    def done(status: str, depth: int, last: tuple[Any, ...] | None, step: Any = None) -> BfsOutcome:
        traces = []
        if last is not None:
            path = [step]
            node = last
            while parent[node] is not None:
                node, label = parent[node]  # type: ignore[misc]
                path.append(label)
            path.reverse()
            traces.append(replay(spec, env, shards, policy, path))
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
            note=f"plain BFS: {len(parent)} states",
        )
        return BfsOutcome(result, len(parent))

    if prop.kind == "invariant" and _breaks(machine, prop, shards, init, init, []):
        return done("violated", 0, root)
    for depth in range(1, max_depth + 1):
        nxt = []
        for state in frontier:
            if timeout is not None and time.monotonic() - start > timeout:
                return done("unknown", depth - 1, None)
            store = dict(zip(keys, state, strict=True))
            for action in env.actions:
                for combo in itertools.product(range(shards), repeat=len(action.shard_params)):
                    binding = dict(zip(action.shard_params, combo, strict=True))
                    owner = combo[0] if combo else None
                    domains = [_values(p, owner, store, spec) for p in action.value_params]
                    for chosen in itertools.product(*domains):
                        values = {p.name: v for p, v in zip(action.value_params, chosen, strict=True)}
                        if not machine.enabled(action, binding, values, store):
                            continue
                        after = dict(store)
                        effects: Effects[Any] = machine.run_action(action, binding, values, after)
                        if env.any_call and not all(c.contract_ok for c in effects.calls):
                            continue
                        label = (action, binding, values)
                        if _breaks(machine, prop, shards, store, after, effects.calls):
                            return done("violated", depth, state, label)
                        succ = tuple(after[k] for k in keys)
                        if succ not in parent:
                            parent[succ] = (state, label)
                            nxt.append(succ)
        frontier = nxt
        if not frontier:
            break
    return done("holds_to_depth", max_depth, None)


# --- Hypothesis ---------------------------------------------------------------------------


class Found(AssertionError):
    """The property failed: raised inside the state machine, caught by the runner."""

    def __init__(self, steps: int) -> None:
        super().__init__(f"property violated after {steps} steps")
        self.steps = steps


def state_machine(spec: Spec, environment: str, prop: Property, shards: int, policy: Mapping[str, int]) -> type:
    """A RuleBasedStateMachine over the executable model: one rule per environment action."""
    from hypothesis import strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

    env: Environment = spec.environment(environment)
    text = [v.name for v in spec.shard_vars if v.type.kind == "str"]

    def init_self(self: Any) -> None:
        RuleBasedStateMachine.__init__(self)
        self.machine = Machine(spec, ConcreteBackend(), dict(policy), shards)
        self.store = initial_store(spec, shards, [base_url(i) for i in range(shards)], env.vars)
        self.steps = 0
        self.fresh = 0

    def make_rule(action: Action) -> Any:
        strategies: dict[str, Any] = {name: st.integers(0, shards - 1) for name in action.shard_params}
        for param in action.value_params:
            strategies[param.name] = _strategy(st, param, spec)

        def apply(self: Any, **drawn: Any) -> None:
            binding = {name: drawn[name] for name in action.shard_params}
            owner = next(iter(binding.values()), None)
            values = {}
            for param in action.value_params:
                value = drawn[param.name]
                if param.type.kind == "str" and value is not None:
                    current = self.store[(owner, text[0])] if owner is not None and text else None
                    if value == "current" and isinstance(current, str):
                        value = current
                    else:
                        self.fresh += 1
                        value = f"~fresh{self.fresh}"
                values[param.name] = value
            if not self.machine.enabled(action, binding, values, self.store):
                return
            after = dict(self.store)
            effects: Effects[Any] = self.machine.run_action(action, binding, values, after)
            if env.any_call and not all(c.contract_ok for c in effects.calls):
                return
            pre, self.store = self.store, after
            self.steps += 1
            calls: list[CallRecord[Any]] = effects.calls
            if prop.kind == "step" and _breaks(self.machine, prop, shards, pre, after, calls):
                raise Found(self.steps)

        apply.__name__ = action.name
        return rule(**strategies)(apply)

    namespace: dict[str, Any] = {"__init__": init_self}
    for action in env.actions:
        namespace[f"rule_{action.name}"] = make_rule(action)
    if prop.kind == "invariant":

        def check(self: Any) -> None:
            if _breaks(self.machine, prop, shards, self.store, self.store, []):
                raise Found(self.steps)

        namespace["check_property"] = invariant()(check)
    return type(f"{spec.variant}_{environment}_{prop.name}", (RuleBasedStateMachine,), namespace)


def _strategy(st: Any, param: Param, spec: Spec) -> Any:
    vtype = param.type
    if vtype.kind == "bool":
        base = st.booleans()
    elif vtype.kind == "enum":
        base = st.sampled_from(spec.enums[vtype.enum or ""].members)
    elif vtype.kind == "int":
        base = st.integers(min_value=0, max_value=10)
    else:  # an opaque string: the shard's current one, or a fresh one
        base = st.sampled_from(["current", "fresh"])
    return st.none() | base if vtype.optional else base


@dataclass
class HypothesisOutcome:
    found: bool
    seconds: float
    steps: int | None
    note: str


def hypothesis_search(
    spec: Spec,
    environment: str,
    prop: Property,
    shards: int,
    policy: Mapping[str, int],
    seed: int,
    max_examples: int = 1_000_000,
    step_count: int = 30,
) -> HypothesisOutcome:
    """Run the state machine until it finds a violation (or gives up after max_examples).
    No shrinking: the time is to the first failure, the steps are the failing run's."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import seed as use_seed
    from hypothesis.stateful import run_state_machine_as_test

    machine = use_seed(seed)(state_machine(spec, environment, prop, shards, policy))
    config = settings(
        max_examples=max_examples,
        stateful_step_count=step_count,
        phases=[Phase.generate],
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    start = time.monotonic()
    try:
        run_state_machine_as_test(machine, settings=config)
    except Found as found:
        return HypothesisOutcome(True, time.monotonic() - start, found.steps, f"seed {seed}")
    except Exception as error:  # Hypothesis may wrap the failure
        inner = error.__cause__ or error.__context__
        if isinstance(inner, Found):
            return HypothesisOutcome(True, time.monotonic() - start, inner.steps, f"seed {seed}")
        if "property violated" in str(error):
            return HypothesisOutcome(True, time.monotonic() - start, None, f"seed {seed}")
        raise
    return HypothesisOutcome(False, time.monotonic() - start, None, f"seed {seed}: no failure in {max_examples} runs")


__all__ = ["BfsOutcome", "HypothesisOutcome", "hypothesis_search", "plain_bfs", "state_machine"]
