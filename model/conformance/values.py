"""The int argument values conformance passes, beyond a small fixed range: the ones the spec
gives reason to try (`model.arguments`), so that the boundary an implementation is most likely
to get wrong (`n > limit` written `n >= limit`, `n <= tokens` written `n < tokens`) is met.

Per int argument that decides a branch: each constant it is compared or combined with, one
either side (policy constants at the policy conformance runs under), the event's example, and
in a given state each int field or fleet value it is compared with, plus the constant added to
it there, one either side. The enumeration passes the fixed values at every node and the
state's values at the nodes where they differ; random traces draw from them half the time."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ledgercheck.model.arguments import MAX_INT_VALUES, ArgumentDomain, argument_domain
from ledgercheck.model.reduction import decision_cone
from ledgercheck.model.semantics import Key
from ledgercheck.model.spec import Spec


class _AtShard(Mapping[Key, Any]):
    """A store read as the call on `shard` reads it: `(0, field)` is that shard's field."""

    def __init__(self, store: Mapping[Key, Any], shard: int) -> None:
        self.store = store
        self.shard = shard

    def __getitem__(self, key: Key) -> Any:
        return self.store[(self.shard, key[1]) if key[0] == 0 else key]

    def __iter__(self) -> Iterator[Key]:
        return iter(self.store)

    def __len__(self) -> int:
        return len(self.store)


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
        values, _ = domain.values(_AtShard(store, shard))
        return _ints(values)


def _ints(values: tuple[Any, ...]) -> tuple[int, ...]:
    return tuple(v for v in values if isinstance(v, int) and not isinstance(v, bool))[:MAX_INT_VALUES]


__all__ = ["IntValues"]
