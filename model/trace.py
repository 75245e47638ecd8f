"""Traces: sequences of environment actions, replayed on the executable model.

A trace is what the checker finds and what a generated test replays. Every trace, however
it was found, is replayed here through the concrete semantics, so its recorded states are
the interpreter's own (the checker compares them with the solver's model as it goes).
The JSON step schema is shared by `ledgercheck replay` and `ledgercheck check`:
``{"action", "shard", "args", "calls", "after": {"shards": [...], "history": {...}}}``.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledgercheck.model import ir
from ledgercheck.model.errors import UsageError, did_you_mean
from ledgercheck.model.interpreter import initial_store, negative_argument
from ledgercheck.model.lang import Param
from ledgercheck.model.semantics import CallRecord, ConcreteBackend, Effects, Key, Machine
from ledgercheck.model.spec import Action, Environment, Spec, plural


def _shown(value: Any) -> str:
    """An announced argument in a figure: an enum member by its name, other text quoted
    unless it is one word, anything else as Python prints it."""
    return repr(value) if isinstance(value, str) and not value.isidentifier() else str(value)


@dataclass(frozen=True)
class Call:
    """One ledger API call made by an action (what a generated test writes out)."""

    event: str
    shard: int
    args: Mapping[str, Any]
    ignored: bool
    contract_ok: bool
    outcome: str = field(default="", compare=False)
    """What the call gave its caller, for the figures: `raised Error`, `returned VALUE`, or
    empty where the event declares neither `raises` nor `returns` (nor raised)."""

    def to_json(self) -> dict[str, Any]:
        return {"event": self.event, "shard": self.shard, "args": dict(self.args)}


@dataclass(frozen=True)
class Notice:
    """One notification a step's call announced (an `emit` of the spec)."""

    shard: int
    name: str
    args: tuple[tuple[str, Any], ...]

    @property
    def text(self) -> str:
        """As a figure shows it: `opened(2)`."""
        return f"{self.name}({', '.join(_shown(v) for _, v in self.args)})"

    def to_json(self) -> dict[str, Any]:
        return {"shard": self.shard, "notification": self.name, "args": dict(self.args)}


@dataclass(frozen=True)
class Step:
    action: str | None
    shard: int | None
    shards: Mapping[str, int]
    args: Mapping[str, Any]
    calls: tuple[Call, ...]
    after: Mapping[str, Any]
    logs: tuple[str, ...] = ()
    announced: tuple[Notice, ...] = ()
    """What the step's calls announced (the spec's `emit`s), in order."""

    def to_json(self) -> dict[str, Any]:
        out = {
            "action": self.action,
            "shard": self.shard,
            "args": dict(self.args),
            "calls": [c.to_json() for c in self.calls],
            "after": self.after,
        }
        if self.announced:  # only a spec that declares notifications announces any
            out["announced"] = [notice.to_json() for notice in self.announced]
        return out


@dataclass(frozen=True)
class Trace:
    spec_name: str
    variant: str
    environment: str
    shard_count: int
    policy: Mapping[str, int]
    steps: tuple[Step, ...]
    focus: int | None = None
    classification: str = "reachable"
    tags: tuple[str, ...] = field(default_factory=tuple)
    loop_start: int | None = None
    """A lasso (a liveness counterexample): the state after the last step is the state after
    step `loop_start` (on every variable the property's cone reads), so steps loop_start+1 ..
    depth repeat forever; equal to `depth` when no action is enabled (the run stutters)."""

    @property
    def depth(self) -> int:
        return len(self.steps) - 1

    @property
    def length(self) -> str:
        """The trace's length as text: `1 step`, `3 steps`."""
        return plural(self.depth, "step")

    def to_json(self) -> list[dict[str, Any]]:
        return [step.to_json() for step in self.steps]


def base_url(shard: int) -> str:
    """The address a generated test gives shard `shard` at construction."""
    return f"http://shard-{shard}"


class Simulation:
    """An environment driving the executable model, one atomic action at a time."""

    def __init__(
        self,
        spec: Spec,
        environment: Environment,
        shard_count: int,
        policy: Mapping[str, int],
        base_urls: Sequence[str] | None = None,
    ) -> None:
        self.spec = spec
        self.environment = environment
        self.shard_count = shard_count
        self.policy = dict(policy)
        urls = list(base_urls) if base_urls is not None else [base_url(i) for i in range(shard_count)]
        self.machine: Machine[Any] = Machine(spec, ConcreteBackend(), self.policy, shard_count)
        self.store: dict[Key, Any] = initial_store(spec, shard_count, self.policy, urls, environment.vars)

    def observe(self) -> dict[str, Any]:
        """The state as the step schema shows it: ledger fields per shard, then history."""
        shards = []
        for index in range(self.shard_count):
            shards.append({f.name: self.store[(index, f.name)] for f in self.spec.fields})
        history: dict[str, Any] = {
            "shards": [{h.name: self.store[(i, h.name)] for h in self.spec.history} for i in range(self.shard_count)],
        }
        fleet = {g.name: self.store[(None, g.name)] for g in self.spec.globals}
        environment = {v.name: self.store[(None, v.name)] for v in self.environment.vars}
        return {"shards": shards, "fleet": fleet, "history": history, "environment": environment}

    def initial_step(self) -> Step:
        return Step(None, None, {}, {}, (), self.observe())

    def _outcome(self, record: CallRecord[Any]) -> str:
        """`raised Error` (the first of the event's `raises` whose condition held), `returned
        VALUE`, or empty (the event declares no outcome)."""
        event = self.spec.events[record.event]
        for entry, held in zip(event.raises, record.raising, strict=True):
            if held:
                return f"raised {entry.error}"
        return f"returned {_shown(record.result)}" if event.returns is not None else ""

    def enabled(self, action: Action, shards: Mapping[str, int], values: Mapping[str, Any]) -> bool:
        return bool(self.machine.enabled(action, shards, values, self.store))

    def apply(self, action: Action, shards: Mapping[str, int], values: Mapping[str, Any]) -> tuple[Step, Effects[Any]]:
        for name, index in shards.items():
            if not 0 <= index < self.shard_count:
                raise UsageError(f"{action.name}: shard {index} is out of range (0..{self.shard_count - 1}) for {name}")
        negative = negative_argument(action.name, action.value_params, values)
        if negative is not None:
            raise UsageError(negative)
        for param in action.value_params:
            value = values.get(param.name)
            enum = self.spec.enums.get(param.type.enum or "")
            if enum is not None and value is not None and value not in enum.members:
                raise UsageError(
                    f"{action.name}: {param.name} = {value!r} is not a member of {enum.name} "
                    f"({', '.join(enum.members)}){did_you_mean(str(value), enum.members)}"
                )
        if not self.enabled(action, shards, values):
            raise UsageError(f"{action.name} is not enabled here (when: {action.name} requires its guard)")
        effects = self.machine.run_action(action, shards, values, self.store)
        calls = tuple(
            Call(c.event, c.shard, dict(c.args), bool(c.ignored), bool(c.contract_ok), self._outcome(c))
            for c in effects.calls
        )
        logs = tuple(self.spec.log.format(shard=s, old=o, new=n, event=e) for s, o, n, e in effects.logs)
        first = action.shard_params[0] if action.shard_params else None
        announced = tuple(Notice(c.shard, e.name, tuple(e.args)) for c in effects.calls for e in c.emits)
        step = Step(
            action.name,
            shards[first] if first else None,
            dict(shards),
            dict(values),
            calls,
            self.observe(),
            logs,
            announced,
        )
        return step, effects


def _argument(node: ast.expr) -> Any:
    """A step's argument: a Python literal, or a bare name, read as an enum member's name (as
    the figures print it: `cancel(0, mode=FORCE)`)."""
    if isinstance(node, ast.Name) and node.id not in ("True", "False", "None"):
        return node.id
    return ast.literal_eval(node)


def parse_action_call(text: str, environment: Environment) -> tuple[Action, dict[str, int], dict[str, Any]]:
    """Parse `name(1, key=value)`: an action of the environment with its shard and values.

    Shard parameters come first, positionally; value parameters by name or position;
    values are Python literals. In the `ledger` environment, arguments the spec treats as
    opaque (`any`) are accepted and ignored.
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise UsageError(f"cannot parse step {text!r}: write it as a call, e.g. report_failure(1)") from None
    if isinstance(node, ast.Name):
        node = ast.Call(func=node, args=[], keywords=[])
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise UsageError(f"cannot parse step {text!r}: write it as a call, e.g. report_failure(1)")
    names = [a.name for a in environment.actions]
    name = node.func.id
    if name not in names:
        raise UsageError(
            f"step {text!r}: environment {environment.name!r} has no action {name!r}{did_you_mean(name, names)}"
        )
    action = environment.action(name)
    try:
        positional = [_argument(a) for a in node.args]
        keywords = {k.arg: _argument(k.value) for k in node.keywords if k.arg}
    except ValueError:
        raise UsageError(f"step {text!r}: arguments must be literals or enum members") from None
    shards: dict[str, int] = {}
    for param in action.shard_params:
        if param in keywords:
            shards[param] = keywords.pop(param)
        elif positional:
            shards[param] = positional.pop(0)
        else:
            raise UsageError(f"step {text!r}: missing shard {param!r}")
        if isinstance(shards[param], bool) or not isinstance(shards[param], int):
            raise UsageError(f"step {text!r}: shard {param!r} must be an integer")
    values: dict[str, Any] = {}
    opaque = _opaque_params(action)
    ordered: list[tuple[str, Param | None]] = [(p.name, p) for p in action.value_params]
    if opaque:
        ordered = [(name, next((p for p in action.value_params if p.name == name), None)) for name in opaque[1]]
    for name, value_param in ordered:
        if name in keywords:
            value = keywords.pop(name)
        elif positional:
            value = positional.pop(0)
        elif value_param is None or value_param.has_default:
            value = value_param.default if value_param is not None else None
        else:
            raise UsageError(f"step {text!r}: missing argument {name!r}")
        if value_param is not None:
            values[name] = value
    if keywords or positional:
        extra = sorted(keywords) or [repr(v) for v in positional]
        raise UsageError(f"step {text!r}: unexpected argument(s) {', '.join(extra)}")
    return action, shards, values


def _opaque_params(action: Action) -> tuple[set[str], list[str]] | None:
    """For an action that stands for one ledger call (the `ledger` environment): the
    event's opaque (`any`) arguments and the order of all its arguments."""
    if len(action.body) != 1 or not isinstance(action.body[0], ir.CallEvent):
        return None
    call = action.body[0]
    if action.name != call.event:
        return None
    opaque = {name for name, expr in call.args if isinstance(expr, ir.Const)}
    return opaque, [name for name, _ in call.args]


def replay(
    spec: Spec,
    environment: Environment,
    shard_count: int,
    policy: Mapping[str, int],
    steps: Sequence[tuple[Action, Mapping[str, int], Mapping[str, Any]]],
    focus: int | None = None,
) -> Trace:
    sim = Simulation(spec, environment, shard_count, policy)
    recorded = [sim.initial_step()]
    for action, shards, values in steps:
        step, _ = sim.apply(action, shards, values)
        recorded.append(step)
    return Trace(spec.name, spec.variant, environment.name, shard_count, dict(policy), tuple(recorded), focus)
