"""A property's cone of influence: the state variables and actions of the Z3 encoding that
can make a difference to it, and the encoding sliced down to them.

Kept apart from the engines that use it: the bounded checker (`model.bmc`) unrolls the sliced
encoding, the Spacer proof (`model.prove`) hands it to the Horn solver, and neither needs the
other to get it. The slicing itself (`Encoding.restrict_to`) is the encoding's; this module
says what the slice is rooted in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ledgercheck.model.encoding import Encoding, encoding_for
from ledgercheck.model.result import FOCUS
from ledgercheck.model.spec import Property, PropertyKind, Spec


def focus_of(prop: Property) -> int | None:
    """The shard a property is checked on (None: it is about the whole fleet)."""
    return None if prop.fleet else FOCUS


def roots(enc: Encoding, prop: Property, focus: int | None, view_fields: tuple[str, ...]) -> list[Any]:
    """What the property, its lemmas and the trace view read: the terms the cone grows from."""
    found = (
        [enc.invariant_violation(prop, focus, enc.template)]
        if prop.kind == PropertyKind.INVARIANT
        else [enc.step_violation(prop, focus)]
    )
    if focus is not None:
        found += [enc.template[(focus, name)] for name in view_fields]
        found.append(enc.focus_events(focus))
        for lemma in prop.lemmas:
            found.append(enc.machine.invariant(None, lemma, focus, enc.template))
    return found


def observes(prop: Property, focus: int | None) -> Callable[[Any], bool]:
    """The actions a step property looks at, even when they change nothing it reads: the call
    itself is what the property is about. (An invariant observes no action.)"""

    def observed(inst: Any) -> bool:
        if prop.kind != PropertyKind.STEP:
            return False
        return any(c.event in prop.on and (focus is None or c.shard == focus) for c in inst.calls)

    return observed


def view_fields(spec: Spec, prop: Property, view: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The fields that make two traces distinct: `view`, else the property's, else the spec's."""
    return tuple(view or prop.view or spec.observed_fields)


def slice_encoding(enc: Encoding, prop: Property, fields: tuple[str, ...]) -> int:
    """Restrict `enc` to the property's cone; returns how many state variables went."""
    focus = focus_of(prop)
    return enc.restrict_to(roots(enc, prop, focus, fields), observes(prop, focus))


def sliced_encoding(
    spec: Spec,
    environment: str,
    prop: Property,
    shards: int,
    policy: Mapping[str, int] | None,
    *,
    contracts: bool = False,
    view: tuple[str, ...] | None = None,
) -> Encoding:
    """The encoding of (spec, environment, fleet, policy) sliced to the property's cone."""
    fixed = dict(policy) if policy is not None else None
    enc = encoding_for(spec, spec.environment(environment), shards, fixed, contracts=contracts)
    slice_encoding(enc, prop, view_fields(spec, prop, view))
    return enc


__all__ = ["focus_of", "observes", "roots", "slice_encoding", "sliced_encoding", "view_fields"]
