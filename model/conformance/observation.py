"""What conformance compares: everything the ledger's API shows, normalised so that the
model's values and an implementation's compare equal when they mean the same.

`Normaliser` is the one normaliser: an enum member becomes its name, and a string that is a
state's name or API value becomes the state's name. The generated tests (`monitor`) and
`ledgercheck conform` both read an implementation's values through it.
"""

from __future__ import annotations

import builtins
import enum
import functools
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledgercheck.model.figure import cell
from ledgercheck.model.spec import Query, Spec

Key = tuple[Any, ...]
Observation = dict[Key, Any]
Channels = tuple[tuple[str, tuple[tuple[int, Any], ...]], ...]
"""A call's announcements as compared: per channel, in order, (instance index, payload)."""
MISSING = "<missing>"


@dataclass(frozen=True)
class WrongType:
    """An implementation's value of another type than the spec's, where Python would call
    them equal: `True` for an int field (`True == 1`), `2.0` for an int, `1` for a bool. It
    equals no value of the spec's, so the comparison reports it, by value and type."""

    value: Any

    def __str__(self) -> str:
        return f"{cell(self.value)} (a {type(self.value).__name__})"


def _typed(value: Any, kind: str | None) -> Any:
    """`value` as compared with a value of type `kind`: a bool, float or other number where an
    int is meant (or an int where a bool is) is a `WrongType`."""
    if kind == "int":
        if isinstance(value, bool) or (isinstance(value, numbers.Number) and not isinstance(value, int)):
            return WrongType(value)
    elif kind == "bool" and isinstance(value, numbers.Number) and not isinstance(value, bool):
        return WrongType(value)
    return value


class Normaliser:
    """An implementation's value as the spec writes it: enum members by name, a string that is
    one of an enum's API values (its `api_values`) or member names by the member's name, and
    anything else as it is. Which enum's values a string is read by: the enum of the field,
    or of the value an event returns, where the caller names it (`field`, `returned`); else
    the state enum's, as for `state_of`."""

    def __init__(self, spec: Spec) -> None:
        self._names = {
            name: {v: m for m, v in decl.api_values.items()} | {m: m for m in decl.members}
            for name, decl in spec.enums.items()
        }
        self._state_names = self._names[spec.state_enum]
        self._field_enums = {f.name: f.type.enum for f in spec.fields if f.type.enum is not None}
        self._field_kinds = {f.name: f.type.kind for f in spec.fields}
        self._global_enums = {g.name: g.type.enum for g in spec.globals if g.type.enum is not None}
        self._global_kinds = {g.name: g.type.kind for g in spec.globals}
        self._returned_kinds = {n: e.returns.type.kind for n, e in spec.events.items() if e.returns is not None}
        self._returned_enums = {
            name: event.returns.type.enum
            for name, event in spec.events.items()
            if event.returns is not None and event.returns.type.enum is not None
        }
        self._enum_names: dict[tuple[Any, str | None], str] = {}

    def __call__(self, value: Any, enum_name: str | None = None) -> Any:
        kind = type(value)
        if kind is int or kind is bool or value is None:  # the common cases first
            return value
        names = self._state_names if enum_name is None else self._names[enum_name]
        if isinstance(value, enum.Enum):
            key = (value, enum_name)
            name = self._enum_names.get(key)
            if name is None:
                name = self._enum_names[key] = _member_of(value, names)
            return name
        if isinstance(value, str):
            return names.get(value, value)
        return value

    def field(self, name: str, value: Any) -> Any:
        """A field's value: a string read by the field's own enum (`c1 = "crashed"` is
        CRASHED where its enum's `api_values = "lower"`), whatever the state enum is."""
        return _typed(self(value, self._field_enums.get(name)), self._field_kinds.get(name))

    def fleet_value(self, name: str, value: Any) -> Any:
        """A fleet value (`[globals]`), read by its own enum as a field is: a class's
        `Decision.COMMIT` or `"commit"` is COMMIT (they were compared raw, and a class that
        kept its decision as an enum member diverged at its first step)."""
        return _typed(self(value, self._global_enums.get(name)), self._global_kinds.get(name))

    def returned(self, event: str, value: Any) -> Any:
        """What a call of `event` returned, read by the enum of its `returns`, if one (a value
        of another type than the spec's, which Python would call equal, kept apart)."""
        return _typed(self(value, self._returned_enums.get(event)), self._returned_kinds.get(event))


def _member_of(value: enum.Enum, names: Mapping[str, str]) -> str:
    """A Python enum member as the spec's member it stands for: by its name where that is a
    member's (or an API value's), else by its value (`Role.Follower = "follower"` is FOLLOWER
    where the enum's `api_values = "lower"`), else its name as it is."""
    if value.name in names:
        return names[value.name]
    if isinstance(value.value, str) and value.value in names:
        return names[value.value]
    return value.name


def normalise(value: Any, spec: Spec) -> Any:
    """`Normaliser(spec)(value)`, for a single value."""
    return Normaliser(spec)(value)


RETURNED = "returned"
"""A query that declares no `returns` returned (what it returned is not compared)."""


@dataclass(frozen=True)
class Raised:
    """A query's exception, compared by the spec's error it is (`error`: a declared error the
    exception is an instance of, else its class's name) and shown as the class it is."""

    error: str
    shown: str = field(compare=False)

    def __str__(self) -> str:
        return f"raised {self.shown}"


@dataclass(frozen=True)
class Outcome:
    """What one call did besides changing state: the exception it raised, the lines it logged."""

    raised: str | None
    logs: int
    result: Any = None
    """What the call returned, normalised; compared only for an event that declares `returns`."""
    notifications: Channels = ()
    """What the call announced that the binding observes, by channel (`binding.by_channel`);
    empty where none is observed."""


@dataclass(frozen=True)
class Difference:
    key: Key
    model: Any
    impl: Any

    def where(self) -> str:
        return describe_key(self.key)

    def __str__(self) -> str:
        return f"{self.where()}: model {cell(self.model)}, implementation {cell(self.impl)}"


def describe_key(key: Key) -> str:
    kind = key[0]
    if kind == "field":
        return f"shard {key[1]} {key[2]}"
    if kind == "state_of":
        return f"state_of({key[1]})"
    if kind == "query":
        return f"{key[1]}()"
    if kind == "global":
        return str(key[1])
    if kind == "shards":
        return "snapshot() length"
    if kind == "observe":
        return "reading the implementation"
    if kind == "raised":
        return "exception raised"
    if kind == "result":
        return "value returned"
    if kind == "logs":
        return "log lines printed"
    if kind == "notifications":
        return "notifications"
    if kind == "construct":
        return "construction"
    return repr(key)


class Observer:
    """Reads everything the API shows of a ledger (the model or an implementation): every
    snapshot field of every shard, `state_of`, the spec's queries and the fleet values named."""

    def __init__(self, spec: Spec, fleet_values: Sequence[str]) -> None:
        self.spec = spec
        self.queries = [q.api for q in spec.queries.values() if q.api and not q.fleet]
        self.fleet_queries = {q.api: q for q in spec.queries.values() if q.api and q.fleet}
        self.fleet_values = tuple(fleet_values)
        self.normalise = Normaliser(spec)

    @functools.cache  # noqa: B019 (one layout per fleet size, for the life of the observer)
    def _layout(self, shards: int) -> tuple[list[list[tuple[Key, str]]], list[Key], list[tuple[Key, str]]]:
        binding = self.spec.binding
        observed = [f for f in self.spec.fields if binding is None or binding.observes(f.name)]
        fields = [[(("field", i, f.name), f.name) for f in observed] for i in range(shards)]
        # A bound class's `state_of` is the state field's own read: compared once, as the field;
        # and not at all where the binding leaves the state unread (`observe = false`: a class
        # that shows its state through the spec's queries only).
        bound = binding is not None
        states: list[Key] = [] if bound else [("state_of", i) for i in range(shards)]
        queries = [(("query", api), api) for api in self.queries]
        return fields, states, queries

    def observe(self, ledger: Any, shards: int) -> Observation:
        """Everything the API shows, keyed so that the model's and the implementation's compare."""
        fields, states, queries = self._layout(shards)
        norm = self.normalise
        obs: Observation = {("observe",): None}
        try:
            records = list(ledger.snapshot())
            obs[("shards",)] = len(records)
            for index, keys in enumerate(fields):
                record = records[index] if index < len(records) else None
                for key, name in keys:
                    obs[key] = norm.field(name, getattr(record, name, MISSING))
            for index, key in enumerate(states):
                obs[key] = norm(ledger.state_of(index))
            for key, api in queries:
                obs[key] = tuple(sorted(getattr(ledger, api)()))
            for api, query in self.fleet_queries.items():
                obs[("query", api)] = self._fleet_query(ledger, query)
            for name in self.fleet_values:
                obs[("global", name)] = norm.fleet_value(name, getattr(ledger, name))
        except Exception as exc:
            obs[("observe",)] = f"raised {type(exc).__name__}: {exc}"
        return obs

    def answers(self, ledger: Any) -> dict[str, Any]:
        """What each of the spec's queries answers on `ledger`, by its API name: the indices
        of the shards a shard query names, or a fleet query's outcome; a query the ledger does
        not have, or that fails, as what it raised."""
        answers: dict[str, Any] = {}
        for api in self.queries:
            try:
                answers[api] = tuple(sorted(getattr(ledger, api)()))
            except Exception as exc:
                answers[api] = Raised(type(exc).__name__, f"{type(exc).__name__}: {exc}")
        for api, query in self.fleet_queries.items():
            answers[api] = self._fleet_query(ledger, query)
        return answers

    def _fleet_query(self, ledger: Any, query: Query) -> Any:
        """A fleet query's outcome as the spec writes it: `raised Name` (the first of its
        declared errors the exception is, else the exception's own class), or the value it
        returned (not compared for a query that declares no `returns`, as for an event)."""
        try:
            value = getattr(ledger, query.api or "")()
        except Exception as exc:
            named = next((r.error for r in query.raises if _is_named(exc, r.error)), type(exc).__name__)
            return Raised(named, type(exc).__name__)
        if query.returns is None:
            return RETURNED
        return _typed(self.normalise(value, query.returns.type.enum), query.returns.type.kind)


def compare(
    model_obs: Observation,
    impl_obs: Observation,
    model_out: Outcome | None,
    impl_out: Outcome | None,
    error: BaseException | None,
) -> list[Difference]:
    """What differs between the model and the implementation after a call (or construction,
    without outcomes): the exception raised (the implementation's must be an instance of the
    model's) and the value returned, every observed value, then the log lines printed and the
    announcements (in that order: a one-line summary leads with what the call did and the
    state it left, not with a count of log lines)."""
    if model_obs == impl_obs and (model_out is None or (model_out == impl_out and error is None)):
        return []
    differences: list[Difference] = []
    if model_out is not None and impl_out is not None:
        expected = model_out.raised
        same = (error is None) if expected is None else _is_named(error, expected)
        if not same:
            differences.append(Difference(("raised",), expected, impl_out.raised))
        if model_out.result != impl_out.result:
            differences.append(Difference(("result",), model_out.result, impl_out.result))
    for key in dict.fromkeys([*model_obs, *impl_obs]):
        left, right = model_obs.get(key, MISSING), impl_obs.get(key, MISSING)
        if left != right:
            differences.append(Difference(key, left, right))
    if model_out is not None and impl_out is not None:
        if model_out.logs != impl_out.logs:
            differences.append(Difference(("logs",), model_out.logs, impl_out.logs))
        if model_out.notifications != impl_out.notifications:
            differences.append(
                Difference(
                    ("notifications",),
                    notifications_text(model_out.notifications),
                    notifications_text(impl_out.notifications),
                )
            )
    return differences


def announced_since(ledger: Any, spec: Spec, start: int) -> Channels:
    """What `ledger` announced since it had announced `start` things, as the binding observes
    it, by channel. The executable model keeps the spec's notices (name, shard, arguments),
    translated here into what a bound class hears; a bound class keeps what it heard."""
    from ledgercheck.model.binding import by_channel, expected_announcements
    from ledgercheck.model.interpreter import LedgerModel

    if spec.binding is None or not spec.binding.announcers:
        return ()
    heard = getattr(ledger, "notifications", [])[start:]
    if isinstance(ledger, LedgerModel):
        return by_channel(expected_announcements(spec.binding, spec, heard))
    return by_channel(heard)


def notifications_text(notifications: Channels) -> str:
    """A call's announcements in one cell: `opened(2); log listener_breaker: 'breaker opened
    after 2 failures'`, the instance index shown when it is not 0; `-` for none."""
    parts = []
    for channel, items in notifications:
        for index, payload in items:
            where = f"[{index}]" if index else ""
            if isinstance(payload, tuple):
                parts.append(f"{channel}{where}({', '.join(cell(v) for v in payload)})")
            else:
                parts.append(f"{channel}{where}: {payload!r}")
    return "; ".join(parts) or "-"


def _is_named(error: BaseException | None, expected: str) -> bool:
    """Whether `error` is the exception the model raised: a built-in by class, else (a
    spec-declared error, which the model defines itself) by the name of its class or of
    one of its bases."""
    if error is None:
        return False
    builtin = getattr(builtins, expected, None)
    if isinstance(builtin, type) and issubclass(builtin, BaseException):
        return isinstance(error, builtin)
    return any(cls.__name__ == expected for cls in type(error).__mro__)


def exception_text(error: BaseException | None) -> str | None:
    if error is None:
        return None
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
