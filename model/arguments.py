"""The argument values a search over the executable model tries, per event and per state.

A breadth-first search of concrete calls (the coverage search of `codegen.coverage`, the state
diagram of `model.diagram`) cannot try every value of an int argument. It tries the values the
spec gives it reason to: both booleans, every member of an enum, and for an int that decides a
branch 0, 1, the event's example and each constant it is compared or combined with, one either
side, plus per state each field it meets and one either side (`model.reduction.argument_use`).
Where those are as good as every value (the argument is only compared), a search that misses a
branch over them proves it unreachable; elsewhere `gap` says why not, and a miss is no proof.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledgercheck.model.lang import Param
from ledgercheck.model.reduction import Node, argument_use, decision_cone
from ledgercheck.model.semantics import Key
from ledgercheck.model.spec import Event, Spec
from ledgercheck.model.trace import base_url

OTHER_TEXT = "another"
"""The suffix of the text tried where every string tried is one the state holds: a string
held by none of them."""
MAX_INT_VALUES = 16
"""The most values the search tries for one int argument in one state: past it, those the spec
names first, then the ones nearest 0, and the search says it is no proof."""


@dataclass(frozen=True)
class ArgumentDomain:
    """The values the search passes for one argument of one event: `fixed` in every state,
    and for an int argument compared with int fields or fleet values (`variables`: store keys,
    each with the constant added to it there, `args.c > term + 2` being (term, 2)), each of
    their values plus that constant in the state of the call, and one either side. `gap` is
    empty where these are as good as every value of the argument's type (a full domain, an
    argument no branch depends on, or one that is only compared: `model.reduction.ArgumentUse`);
    else why they are not, and a search over them proves nothing about what it misses."""

    event: str
    param: Param
    fixed: tuple[Any, ...]
    variables: tuple[tuple[Key, int], ...] = ()
    gap: str = ""
    sums: tuple[tuple[tuple[tuple[Key, int], ...], int], ...] = ()
    """Sums of several of `variables` (each with its whole-number factor) plus a constant,
    which the argument meets (`args.amount > paid - refunded`): their values, and one either
    side, are values to try too. Every key a sum reads is in `variables`."""
    texts: tuple[Key, ...] = ()
    """For a text argument that decides a branch: the text fields of the called instance and
    the fleet's text values. The strings they hold in the state of the call are values to try,
    and one none of them holds (a lease released by its holder, and by a client that holds
    nothing: with one value tried, a class that let anyone release passed the generated tests)."""

    def reads(self) -> tuple[Key, ...]:
        """The state variables the values to try depend on."""
        return (*(key for key, _ in self.variables), *self.texts)

    def values(self, store: Mapping[Key, Any]) -> tuple[tuple[Any, ...], bool]:
        """The values to try in `store`, and whether `MAX_INT_VALUES` cut some off."""
        if self.texts:
            return self._texts(store), False
        if not self.variables:
            return self.fixed, False
        found = set(self.fixed)
        points = [(store[key], offset) for key, offset in self.variables]
        for terms, offset in self.sums:
            read = [store[key] for key, _ in terms]
            if all(isinstance(v, int) and not isinstance(v, bool) for v in read):
                points.append((sum(c * v for (_, c), v in zip(terms, read, strict=True)), offset))
        for value, offset in points:
            if isinstance(value, int) and not isinstance(value, bool):
                found |= {v for v in (value + offset - 1, value + offset, value + offset + 1) if v >= 0}
        if len(found) <= MAX_INT_VALUES:
            return tuple(sorted(found, key=_order)), False
        met = sorted(found - set(self.fixed))
        return tuple(sorted([*self.fixed, *met][:MAX_INT_VALUES], key=_order)), True

    def _texts(self, store: Mapping[Key, Any]) -> tuple[Any, ...]:
        return (*self.fixed, *texts_to_try(self.fixed, held_texts(store, self.texts), base_url(0)))


class AtShard(Mapping[Key, Any]):
    """A fleet's store as the call on `shard` reads it: `(0, field)`, the called instance's
    field in an `ArgumentDomain`'s keys, is that shard's."""

    def __init__(self, store: Mapping[Key, Any], shard: int) -> None:
        self.store = store
        self.shard = shard

    def __getitem__(self, key: Key) -> Any:
        return self.store[(self.shard, key[1]) if key[0] == 0 else key]

    def __iter__(self) -> Iterator[Key]:
        return iter(self.store)

    def __len__(self) -> int:
        return len(self.store)


def held_texts(store: Mapping[Key, Any], keys: Iterable[Key]) -> tuple[str, ...]:
    """The strings the variables `keys` hold in `store`, each once, in the order of `keys`."""
    found: list[str] = []
    for key in keys:
        value = store.get(key)
        if isinstance(value, str) and value not in found:
            found.append(value)
    return tuple(found)


def texts_to_try(given: Sequence[Any], held: Sequence[str], base: str) -> tuple[str, ...]:
    """The strings to pass for a text argument besides `given` (the fixed values): those `held`,
    then, where every string given is held, one held by none (`given`'s first string, else
    `base`, with `OTHER_TEXT` added)."""
    extra = [text for text in held if text not in given]
    texts = [v for v in given if isinstance(v, str)]
    if held and all(text in held for text in texts):
        extra.append(f"{texts[0] if texts else base}.{OTHER_TEXT}")
    return tuple(extra)


def _order(value: Any) -> tuple[int, int]:
    """The order values are tried in: None, then 0, 1, 2, ... (an int argument is a natural
    number: no negative one is ever tried)."""
    return (0, 0) if value is None else (1, value)


def text_example(text: str | None) -> str | None:
    """An `examples` value for a text argument (`examples = { client = "'alice'" }`), if it
    is a string literal."""
    if text is None:
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def _example(event: Event, name: str) -> list[int]:
    """The event's `examples` value for an int argument, as a value to try (if it is one)."""
    text = event.examples.get(name)
    if text is None:
        return []
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return []
    return [value] if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else []


def argument_domain(
    spec: Spec, event: Event, param: Param, cone: frozenset[Node], policy: Mapping[str, int] | None = None
) -> ArgumentDomain:
    """What the search tries for `param`: both booleans, every member of an enum; for an int
    that decides a branch, 0, 1, the event's example and each constant it is compared or
    combined with and one either side (plus, per state, the fields it meets); one value for
    anything no branch depends on; and `None` for an optional type, the default where it has one.
    Policy constants are read at `policy` (the spec's defaults where it is None)."""
    use = argument_use(spec, event, param.name, {**spec.default_policy(), **(policy or {})}, cone)
    kind = param.type.kind
    variables: tuple[tuple[Key, int], ...] = ()
    sums: tuple[tuple[tuple[tuple[Key, int], ...], int], ...] = ()
    texts: tuple[Key, ...] = ()
    gap = ""
    if kind == "bool":
        values: list[Any] = [True, False]
    elif kind == "enum" and param.type.enum in spec.enums:
        values = list(spec.enums[param.type.enum or ""].members)
    elif kind == "int" and use.decides:
        found = {0, 1, *_example(event, param.name)}
        found |= {v + d for v in use.constants for d in (-1, 0, 1) if v + d >= 0}  # an int argument is natural
        values = sorted(found, key=_order)
        variables = tuple((_key(node), offset) for node, offset in use.variables)
        sums = tuple((tuple((_key(node), c) for node, c in terms), offset) for terms, offset in use.sums)
        gap = use.inexact
    elif kind == "int":
        values = (_example(event, param.name) or [1])[:1]
    elif kind == "str":
        # The event's example is the value its calls pass (`examples = { owner = "'worker-1'" }`:
        # the generated tests' calls read as the user's), else an address.
        example = text_example(event.examples.get(param.name))
        values = [example if example is not None else f"{base_url(0)}.restarted"]
        if use.decides:
            texts = (
                *((0, f.name) for f in spec.fields if f.type.kind == "str"),
                *((None, g.name) for g in spec.globals if g.type.kind == "str"),
            )
        gap = use.inexact and f"{use.inexact}, and text is tried with the strings held and one more"
    else:  # opaque arguments: the default, else a placeholder the API accepts
        values = [param.default if param.has_default else "error"]
        gap = "read by a branch, and an opaque argument is tried with one value" if use.decides else ""
    if param.type.optional and kind != "none":
        values = [None, *values]
    if param.has_default and param.default not in values:
        values = [param.default, *values]
    if len(values) > MAX_INT_VALUES and kind == "int":
        values = values[:MAX_INT_VALUES]
        gap = gap or f"compared with more than {MAX_INT_VALUES} values"
    return ArgumentDomain(event.name, param, tuple(values), variables, gap, sums, texts)


def _key(node: Node) -> Key:
    """A reduction node of an int variable as a store key: a field of the called instance (0)."""
    return (0 if node[0] == "field" else None, node[1])


class Calls:
    """The calls the search makes in a state: every event with every combination of its
    arguments' values (the combinations of an event whose values depend on the state
    remembered per the values they read), then each tick of the clock. It notes the values
    it tried of every argument with a `gap`, and the arguments `MAX_INT_VALUES` cut short."""

    def __init__(self, spec: Spec, ticks: Mapping[str, int], policy: Mapping[str, int] | None = None) -> None:
        cone = decision_cone(spec)
        self.events = list(spec.events.values())
        self.domains = {
            e.name: tuple(argument_domain(spec, e, p, cone, policy) for p in e.signature.params) for e in self.events
        }
        self.ticks = list(ticks)
        self.memo: dict[tuple[str, tuple[Any, ...]], list[tuple[tuple[str, Any], ...]]] = {}
        self.tried: dict[tuple[str, str], set[Any]] = {}
        self.capped: set[tuple[str, str]] = set()

    def __call__(self, store: Mapping[Key, Any]) -> Iterator[tuple[Event | None, str, tuple[tuple[str, Any], ...]]]:
        for event in self.events:
            domains = self.domains[event.name]
            key = (event.name, tuple(store[k] for d in domains for k in d.reads()))
            combos = self.memo.get(key)
            if combos is None:
                combos = self.memo[key] = self.combine(event, domains, store)
            for args in combos:
                yield event, event.name, args
        for name in self.ticks:
            yield None, name, ()

    def combine(
        self, event: Event, domains: Sequence[ArgumentDomain], store: Mapping[Key, Any]
    ) -> list[tuple[tuple[str, Any], ...]]:
        """Every combination of the argument values to try in `store`, an argument equal
        to its default left out (the call a person writes)."""
        columns = []
        for domain in domains:
            values, capped = domain.values(store)
            if capped:
                self.capped.add((event.name, domain.param.name))
            if domain.gap or capped:
                self.tried.setdefault((event.name, domain.param.name), set()).update(values)
            columns.append([(domain.param.name, v) for v in values])
        params = {p.name: p for p in event.signature.params}
        return [
            tuple((n, v) for n, v in combo if not (params[n].has_default and v == params[n].default))
            for combo in itertools.product(*columns)
        ]

    def gaps(self) -> tuple[str, ...]:
        """Per argument whose values tried are not as good as all of them: which, and why."""
        out = []
        for event in self.events:
            for domain in self.domains[event.name]:
                name = domain.param.name
                capped = (event.name, name) in self.capped
                why = domain.gap or (f"compared with more than {MAX_INT_VALUES} values in some state" if capped else "")
                if not why:
                    continue
                values = self.tried.get((event.name, name), set())
                numbers = sorted((v for v in values if v is None or isinstance(v, int)), key=_order)
                tried = ", ".join([*map(repr, numbers), *sorted(repr(v) for v in values if v not in numbers)])
                out.append(f"{event.name}({name}) tried with {tried or 'no value'} only ({name} is {why})")
        return tuple(out)


__all__ = [
    "MAX_INT_VALUES",
    "AtShard",
    "OTHER_TEXT",
    "ArgumentDomain",
    "Calls",
    "argument_domain",
    "held_texts",
    "text_example",
    "texts_to_try",
]
