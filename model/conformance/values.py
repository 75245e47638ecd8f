"""The int argument values conformance passes, beyond a small fixed range: the ones the spec
gives reason to try (`model.arguments`), so that the boundary an implementation is most likely
to get wrong (`n > limit` written `n >= limit`, `n <= tokens` written `n < tokens`) is met.

Per int argument that decides a branch: each constant it is compared or combined with, one
either side (policy constants at the policy conformance runs under), the event's example, and
in a given state each int field or fleet value it is compared with, plus the constant added to
it there, one either side. The enumeration passes the fixed values at every node and the
state's values at the nodes where they differ; random traces draw from them half the time.

Text arguments likewise (`TextValues`): the event's example, and in a given state the strings
the called instance holds, plus one it does not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ledgercheck.model.arguments import (
    MAX_INT_VALUES,
    ArgumentDomain,
    AtShard,
    argument_domain,
    held_texts,
    text_example,
    texts_to_try,
)
from ledgercheck.model.reduction import decision_cone
from ledgercheck.model.semantics import Key
from ledgercheck.model.spec import Spec


class IntValues:
    """Per event and int argument deciding a branch, the values the spec gives reason to try."""

    def __init__(self, spec: Spec, policy: Mapping[str, int]) -> None:
        cone = decision_cone(spec)
        self.domains: dict[tuple[str, str], ArgumentDomain] = {}
        for event in spec.events.values():
            for param in event.signature.params:
                if param.type.kind != "int":
                    continue
                domain = argument_domain(spec, event, param, cone, policy)
                if len(domain.fixed) > 1 or domain.variables:  # one value: no branch depends on it
                    self.domains[(event.name, param.name)] = domain

    def fixed(self, event: str, param: str) -> tuple[int, ...]:
        """The values to try in every state (ints only: None and defaults are the caller's)."""
        domain = self.domains.get((event, param))
        return () if domain is None else _ints(domain.fixed)

    def depends_on_state(self, event: str) -> bool:
        return any(d.variables for (e, _), d in self.domains.items() if e == event)

    def reads(self, shards: int) -> tuple[Key, ...]:
        """The state variables whose values some argument's values depend on, at `shards` shards."""
        keys = {
            (shard, key[1]) if key[0] == 0 else key
            for domain in self.domains.values()
            for key, _ in domain.variables
            for shard in range(shards)
        }
        return tuple(sorted(keys, key=repr))

    def at(self, event: str, param: str, store: Mapping[Key, Any], shard: int) -> tuple[int, ...]:
        """The values to try for a call on `shard` in the state `store` (the fixed ones first)."""
        domain = self.domains.get((event, param))
        if domain is None:
            return ()
        values, _ = domain.values(AtShard(store, shard))
        return _ints(values)


class TextValues:
    """Per text argument, the strings to try beyond the fresh address of the called instance:
    the event's example, and in a given state every string the instance's text fields and the
    fleet's text values hold, plus one none of them holds. So an argument equal to a holder's
    and one that is not are both tried: a lease manager that took a write from a client that
    does not hold the lease, or bumped no fencing token when its holder came back, conformed
    while every call of the enumeration passed the one address and every random call a new one."""

    def __init__(self, spec: Spec) -> None:
        self.fields = tuple(f.name for f in spec.fields if f.type.kind == "str")
        self.globals = tuple(g.name for g in spec.globals if g.type.kind == "str")
        self.examples = {
            (event.name, param.name): text
            for event in spec.events.values()
            for param in event.signature.params
            if param.type.kind == "str" and (text := text_example(event.examples.get(param.name))) is not None
        }
        self.events = {e.name for e in spec.events.values() if any(p.type.kind == "str" for p in e.signature.params)}

    def example(self, event: str, param: str) -> tuple[str, ...]:
        text = self.examples.get((event, param))
        return () if text is None else (text,)

    def depends_on_state(self, event: str) -> bool:
        return event in self.events and bool(self.fields or self.globals)

    def reads(self, shards: int) -> tuple[Key, ...]:
        """The state variables whose strings are tried, at `shards` shards."""
        if not self.events:
            return ()
        keys: list[Key] = [(shard, name) for shard in range(shards) for name in self.fields]
        return (*keys, *((None, name) for name in self.globals))

    def held(self, store: Mapping[Key, Any], shard: int) -> tuple[str, ...]:
        """The strings the instance `shard` and the fleet hold in `store`, each once."""
        return held_texts(store, [*((shard, name) for name in self.fields), *((None, name) for name in self.globals)])

    def at(self, store: Mapping[Key, Any], shard: int, given: Sequence[Any]) -> tuple[str, ...]:
        """The strings to pass besides `given` (the fixed ones) for a call on `shard` in
        `store` (`arguments.texts_to_try`, as the coverage search passes them)."""
        return texts_to_try(given, self.held(store, shard), f"text-{shard}")


def _ints(values: tuple[Any, ...]) -> tuple[int, ...]:
    return tuple(v for v in values if isinstance(v, int) and not isinstance(v, bool))[:MAX_INT_VALUES]


__all__ = ["IntValues", "TextValues"]
