"""One property checked by the engine its kind needs, for the callers that check properties
one at a time (`model.runs` after its explicit-state probe, `diff`, `gen`, the conformance
sources): a liveness
property (`kind = "eventually"`) by the fair-lasso search (`model.liveness`), any other by
the bounded search (`model.bmc`).

Kept above both engines so that neither imports the other: the bounded checker knows only
safety properties, and the lasso search builds on it (`model.lasso`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ledgercheck.model import bmc
from ledgercheck.model.liveness import check_eventually
from ledgercheck.model.result import Result
from ledgercheck.model.spec import Property, PropertyKind, Spec


def check_property(
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: Mapping[str, int] | None,
    max_depth: int,
    max_traces: int,
    timeout: float | None = None,
    progress: Callable[[str], None] | None = None,
    lax: bool = True,
    prove: bool = False,
    view: tuple[str, ...] | None = None,
    memory: int | None = None,
    race_proof: bool = False,
) -> Result:
    """`bmc.check_property` for a safety property; the liveness verdict for an `eventually`
    one (which has no traces to count, no callers' contracts to lift, no progress, no view
    and no proof race: its search proves or refutes on its own)."""
    if prop.kind == PropertyKind.EVENTUALLY:
        return check_eventually(
            spec, environment, prop, shards=shards, policy=policy, max_depth=max_depth, timeout=timeout, prove=prove
        )
    return bmc.check_property(
        spec,
        environment,
        prop,
        shards=shards,
        policy=policy,
        max_depth=max_depth,
        max_traces=max_traces,
        timeout=timeout,
        progress=progress,
        lax=lax,
        prove=prove,
        view=view,
        memory=memory,
        race_proof=race_proof,
    )


__all__ = ["check_property"]
