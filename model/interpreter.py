"""The executable model: a spec variant turned into a class with the ledger's public API.

`build_api(spec)` returns the names a real ledger module offers (the state enum, the
policy class, the per-shard record and the ledger class), so a generated test can drive
this model and a real implementation through the same calls. Every method runs the
spec's event through the shared executor (`model.semantics`) with concrete values.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ledgercheck.model import ir
from ledgercheck.model.errors import builtin_exception
from ledgercheck.model.lang import Param
from ledgercheck.model.semantics import ConcreteBackend, Effects, Key, Machine
from ledgercheck.model.spec import Event, Spec

Notice = tuple[str, int, tuple[Any, ...]]
"""One announced notification: its name, the shard whose call announced it, its arguments."""


class SpecEnum(enum.StrEnum):
    """A state enum whose members compare equal to their value ("suspect") and their name
    ("SUSPECT"), so a test can compare states either way."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, enum.Enum):
            return self is other or (other.name == self.name and str(getattr(other, "value", "")) == self.value)
        if isinstance(other, str):
            return other in (self.value, self.name)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Api:
    """The names of one spec variant's ledger module."""

    spec: Spec
    State: type[SpecEnum]
    Policy: type
    Record: type
    Ledger: type
    # The exceptions the spec's events raise, by name: a builtin (ValueError) is itself,
    # any other name a new Exception subclass of that name.
    errors: Mapping[str, type[Exception]] = dataclasses.field(default_factory=dict)


def spec_errors(spec: Spec) -> dict[str, type[Exception]]:
    """One exception class per error name the spec's events and queries raise."""
    errors: dict[str, type[Exception]] = {}
    declared = [r for e in spec.events.values() for r in e.raises] + [
        r for q in spec.queries.values() for r in q.raises
    ]
    for raised in declared:
        if raised.error not in errors:
            builtin = builtin_exception(raised.error, Exception)
            errors[raised.error] = builtin or type(raised.error, (Exception,), {"__module__": __name__})
    return errors


def build_api(spec: Spec) -> Api:
    state_enum = spec.enums[spec.state_enum]
    members = {m: state_enum.api_values[m] for m in state_enum.members}
    State: type[SpecEnum] = SpecEnum(spec.api_enum or spec.state_enum, members)  # type: ignore[call-arg, assignment]
    Policy = dataclasses.make_dataclass(
        spec.api_policy_class,
        [(name, int, dataclasses.field(default=decl.default)) for name, decl in spec.policy.items()],
        frozen=True,
    )
    Record = dataclasses.make_dataclass("ShardHealth", [(f.name, Any) for f in spec.fields])
    namespace: dict[str, Any] = {
        "_spec": spec,
        "_State": State,
        "_Policy": Policy,
        "_Record": Record,
        "_errors": spec_errors(spec),
        "__doc__": f"Executable model of {spec.name} ({spec.variant}).",
    }
    for event in spec.events.values():
        namespace[event.name] = _event_method(event)
    for query in spec.queries.values():
        if query.api:
            namespace[query.api] = _query_method(query.name)
    for var in spec.globals:
        namespace[var.name] = property(_global_reader(var.name))
    Ledger = type(spec.api_class, (LedgerModel,), namespace)
    return Api(spec, State, Policy, Record, Ledger, namespace["_errors"])


def _event_method(event: Event) -> Callable[..., Any]:
    params = [
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter(event.signature.shard_param, inspect.Parameter.POSITIONAL_OR_KEYWORD),
    ]
    for p in event.signature.params:
        kind = inspect.Parameter.KEYWORD_ONLY if p.keyword_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = p.default if p.has_default else inspect.Parameter.empty
        params.append(inspect.Parameter(p.name, kind, default=default))
    signature = inspect.Signature(params)

    def method(self: LedgerModel, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        values.pop("self")
        shard = values.pop(event.signature.shard_param)
        return self._call(event, shard, values)

    method.__name__ = event.name
    method.__qualname__ = event.name
    method.__signature__ = signature  # type: ignore[attr-defined]
    method.__doc__ = f"Ledger event {event.name} (see the spec)."
    return method


def _global_reader(name: str) -> Callable[[LedgerModel], Any]:
    def read(self: LedgerModel) -> Any:
        return self._store[(None, name)]

    read.__name__ = name
    return read


def _query_method(name: str) -> Callable[[LedgerModel], Any]:
    def method(self: LedgerModel) -> Any:
        return self._query(name)

    method.__name__ = name
    return method


class LedgerModel:
    """Base of every generated ledger class: state, policy and the concrete executor."""

    _spec: Spec
    _State: type[SpecEnum]
    _Policy: type
    _Record: type
    _errors: Mapping[str, type[Exception]]

    def __init__(
        self,
        *,
        shard_count: int,
        policy: Any = None,
        base_urls: list[str] | None = None,
        clock: Callable[[], float] | None = None,
        echo: bool = True,
    ) -> None:
        spec = self._spec
        if isinstance(shard_count, bool) or not isinstance(shard_count, int) or shard_count < 1:
            raise ValueError(f"shard_count must be a positive integer, not {shard_count!r}")
        if base_urls is not None and len(base_urls) != shard_count:
            raise ValueError(f"base_urls has {len(base_urls)} entries for {shard_count} shards")
        self._policy_values = _policy_values(spec, policy)
        self.policy = policy if policy is not None else self._Policy()
        self.shard_count = shard_count
        self._clock = clock
        # The clock's reading that the timers are up to date with (spec's [clock] only).
        self._time = clock() if clock is not None and spec.clock is not None else 0
        self._echo = echo
        self._machine: Machine[Any] = Machine(spec, ConcreteBackend(), self._policy_values, shard_count)
        self._store: dict[Key, Any] = initial_store(spec, shard_count, self._policy_values, base_urls)
        self.log_lines: list[str] = []
        self.notifications: list[Notice] = []
        """What the calls announced (the spec's `emit`s), in order: (notification, shard,
        argument values in declared order; an enum member by its name)."""

    # -- reads --

    def _index(self, shard: Any) -> int:
        if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < self.shard_count:
            raise KeyError(shard)
        return shard

    def state_of(self, shard: int) -> SpecEnum:
        index = self._index(shard)
        self._sync_clock()
        return self._State[self._store[(index, self._spec.state_field)]]

    def snapshot(self) -> list[Any]:
        self._sync_clock()
        return [self._record(i) for i in range(self.shard_count)]

    def _record(self, index: int) -> Any:
        values = {}
        for field in self._spec.fields:
            value = self._store[(index, field.name)]
            if field.type.kind == "enum" and value is not None and field.type.enum == self._spec.state_enum:
                value = self._State[value]
            values[field.name] = value
        return self._Record(**values)

    def history(self, shard: int) -> dict[str, Any]:
        """The spec's history (ghost) variables of one shard: not part of the ledger's API."""
        index = self._index(shard)
        return {h.name: self._store[(index, h.name)] for h in self._spec.history}

    # -- the whole state, for tools that drive the model (conformance) --

    def value(self, shard: int | None, name: str) -> Any:
        """One state variable as the executor holds it: a shard's field or history variable,
        or (shard None) a fleet value."""
        return self._store[(shard, name)]

    def variables(self) -> Mapping[Key, Any]:
        """Every state variable, keyed `(shard, name)` (`(None, name)` for fleet values); a
        read-only view of the live state."""
        return MappingProxyType(self._store)

    def save(self) -> dict[Key, Any]:
        """A copy of every state variable, for `restore`."""
        return dict(self._store)

    def restore(self, state: Mapping[Key, Any]) -> None:
        """Put the model back into a state `save` (or `variables`) returned."""
        self._store = dict(state)

    def assign(self, values: Iterable[tuple[Key, Any]]) -> None:
        """Set some state variables, by key (each must exist)."""
        for key, value in values:
            if key not in self._store:
                raise KeyError(key)
            self._store[key] = value

    def _query(self, name: str) -> Any:
        """A shard query: the shards its condition holds of. A fleet query: its first `raises`
        entry that holds, raised, else its `returns` value (None without one)."""
        query = self._spec.queries[name]
        from ledgercheck.model.semantics import Frame

        if query.expr is not None:
            return [i for i in range(self.shard_count) if self._machine.eval(query.expr, Frame(i), self._store)]
        self._sync_clock()
        for raised in query.raises:
            if self._machine.eval(raised.when, Frame(), self._store):
                raise self._errors[raised.error](f"{query.api}(): {raised.text}")
        if query.returns is None:
            return None
        result = self._machine.eval(query.returns, Frame(), self._store)
        return self._State[result] if is_state_type(self._spec, query.returns.type) and result is not None else result

    def contract_allows(self, event: str, shard: int, args: Mapping[str, Any]) -> bool:
        """Whether the spec's callers' contract (`requires`) allows this call now."""
        spec_event = self._spec.events[event]
        if spec_event.requires is None:
            return True
        from ledgercheck.model.semantics import Frame

        full = {p.name: args.get(p.name, p.default) for p in spec_event.signature.params}
        return bool(self._machine.eval(spec_event.requires, Frame(self._index(shard), {}, full), self._store))

    # -- writes --

    def _call(self, event: Event, shard: Any, args: Mapping[str, Any]) -> Any:
        """Run one event; raise its error if one of its `raises` holds (as it begins, or for an
        `after` entry, on the record it left), else return its `returns` value (None when it
        declares none)."""
        negative = negative_argument(event.name, event.signature.params, args)
        if negative is not None:
            raise ValueError(negative)
        index = self._index(shard)
        self._sync_clock()
        effects: Effects[Any] = Effects()
        self._machine.call_event(event, index, args, self._store, True, effects)
        self._emit(effects)
        self.notifications += [e.notice(index) for e in effects.emits]
        record = effects.calls[-1]
        error = next((r for r, held in zip(event.raises, record.raising, strict=True) if held), None)
        if error is not None:  # the first entry that held (an `after` one: the call's changes kept)
            raise self._errors[error.error](f"{event.name}({index}): {error.text}")
        result = record.result
        if event.returns is not None and is_state_type(self._spec, event.returns.type) and result is not None:
            return self._State[result]
        return result

    # -- time --

    def _sync_clock(self) -> None:
        """Advance the timers by the whole units the injected clock moved since last read."""
        if self._clock is None or self._spec.clock is None:
            return
        units = int(self._clock() - self._time)
        if units > 0:
            self._time += units
            self.advance_time(units)

    def advance_time(self, units: int) -> None:
        """Every timer moves on by `units` (what the spec's tick actions do, by any amount):
        for tools that drive the model's state directly (conformance's enumeration)."""
        advance_timers(self._spec, self._store, units)

    def _emit(self, effects: Effects[Any]) -> None:
        for shard, old, new, event in effects.logs:
            line = self._spec.log.format(shard=shard, old=old, new=new, event=event)
            self.log_lines.append(line)
            if self._echo:
                print(line)


def negative_argument(name: str, params: Sequence[Param], values: Mapping[str, Any]) -> str | None:
    """Why a call's values are outside the spec's semantics, or None: an int argument is a
    natural number (0, 1, 2, ...), as the bounded search and the proofs read it (the solver's
    encoding gives a free int parameter no negative value: an optional one's None is coded
    below zero). The executable model refuses a negative one, so that it never shows
    behaviour the checker does not see."""
    for param in params:
        value = values.get(param.name)
        if param.type.kind == "int" and isinstance(value, int) and not isinstance(value, bool) and value < 0:
            return f"{name}: {param.name} = {value}: an int argument is a natural number (0, 1, 2, ...)"
    return None


def advance_timers(spec: Spec, store: dict[Key, Any], units: int) -> None:
    """Every timer of `store` (per shard and fleet-wide) moves on by `units`, in place."""
    timers = {v.name for v in (*spec.shard_vars, *spec.globals) if v.timer}
    for key in store:
        if key[1] in timers:
            store[key] = store[key] + units


def clock_steps(spec: Spec, policy: Mapping[str, int]) -> dict[str, int]:
    """The spec's tick actions and how far each moves the clock (a step named by a policy
    constant read from `policy`); none without a `[clock]`, or for a step named like an event."""
    if spec.clock is None:
        return {}
    return {
        name: int(policy[step]) if step in policy else int(step)
        for name, step in spec.clock.steps
        if name not in spec.events
    }


def _policy_values(spec: Spec, policy: Any) -> dict[str, int]:
    values = spec.default_policy()
    if policy is None:
        return values
    for name in values:
        if isinstance(policy, Mapping):
            if name in policy:
                values[name] = policy[name]
        elif hasattr(policy, name):
            values[name] = getattr(policy, name)
    for name, decl in spec.policy.items():
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < decl.min:
            raise ValueError(f"policy {name} must be an integer >= {decl.min}, not {value!r}")
    return values


def initial_store(
    spec: Spec,
    shards: int,
    policy: Mapping[str, int],
    base_urls: Sequence[str] | None = None,
    env_vars: tuple[Any, ...] = (),
) -> dict[Key, Any]:
    """The initial values of every state variable at `policy`, as the concrete semantics
    holds them."""
    store: dict[Key, Any] = {}
    for index in range(shards):
        for var in spec.shard_vars:
            if var.initial_from is not None:
                store[(index, var.name)] = base_urls[index] if base_urls is not None else None
            else:
                store[(index, var.name)] = var.initial_at(policy)
    for var in (*spec.globals, *env_vars):
        store[(None, var.name)] = var.initial_at(policy)
    return store


def is_state_type(spec: Spec, vtype: ir.Type) -> bool:
    return vtype.kind == "enum" and vtype.enum == spec.state_enum
