"""Where a trace breaks a property: the step, the shard, the fields the property reads.

A counterexample's last step is where the checker found the violation, but a replayed trace
(`replay`, a scenario) may break a property earlier, or not at all. So the trace is run
again on the executable model, and after every step the property is evaluated as the
checkers do (an invariant on the shard after the step, a step property on each call it
watches, with the called shard's values before and after). Every format marks the step
this finds; a liveness property (`eventually`) breaks on a loop, not at a step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledgercheck.model import ir
from ledgercheck.model.semantics import Effects, Key, Machine
from ledgercheck.model.spec import Property, PropertyKind, Spec
from ledgercheck.model.trace import Simulation, Trace


@dataclass(frozen=True)
class Break:
    """The first step of a trace that breaks a property."""

    prop: Property
    step: int
    """Index into `trace.steps` (0 is the initial state)."""
    shard: int | None
    """The shard whose state breaks it (None: the fleet)."""
    reads: frozenset[str]
    """Per-shard fields (ledger and history) the property and its `when` read."""

    @property
    def before(self) -> int | None:
        """The step whose state a step property compares with (the one before), else None."""
        return self.step - 1 if self.prop.kind == PropertyKind.STEP else None

    def line(self, label: str) -> str:
        """One sentence naming the step, what it does and what the property says."""
        where = f" on shard {self.shard}" if self.shard is not None else ""
        return f"step {self.step}, {label}, breaks {self.prop.name}{where}: {self.prop.message}"


def property_reads(prop: Property, spec: Spec | None = None) -> frozenset[str]:
    """The per-shard fields a property reads; with `spec`, also those the `requires` of its
    events read where it reads whether a call kept its contract (`Spec.contract_property`)."""
    found = ir.field_reads([prop.when, prop.check])
    kept = any(isinstance(n, ir.LocalRef) and n.name == ir.CONTRACT_KEPT for n in ir.walk([prop.when, prop.check]))
    if spec is not None and kept:
        found |= ir.field_reads([spec.events[name].requires for name in prop.on])
    return frozenset(found)


def find_break(trace: Trace, spec: Spec, prop: Property) -> Break | None:
    """The first step of `trace` at which `prop` is broken, or None (it holds on every step,
    the property is a liveness property, or the trace cannot be run again here)."""
    if prop.kind not in (PropertyKind.INVARIANT, PropertyKind.STEP) or trace.environment not in spec.environments:
        return None
    env = spec.environment(trace.environment)
    sim = Simulation(spec, env, trace.shard_count, trace.policy)
    machine = sim.machine
    shards: list[int | None] = [None] if prop.fleet else _shard_order(trace)
    reads = property_reads(prop, spec)
    for index, step in enumerate(trace.steps[1:], 1):
        if step.action is None:
            return None
        before: dict[Any, Any] = dict(sim.store)
        try:
            _, effects = sim.apply(env.action(step.action), step.shards, step.args)
        except Exception:  # a trace of another spec version: nothing to mark
            return None
        if prop.kind == PropertyKind.INVARIANT:
            for shard in shards:
                if not machine.invariant(prop.when, prop.check, shard, sim.store):
                    return Break(prop, index, shard, reads)
        else:
            for call in effects.calls:
                if call.event in prop.on and machine.step_violations(prop.when, prop.check, call, before):
                    return Break(prop, index, call.shard, reads)
    return None


def breaks_last_step(
    machine: Machine[Any],
    prop: Property,
    focus: int | None,
    after: Mapping[Key, Any],
    before: Mapping[Key, Any],
    effects: Effects[Any] | None,
) -> bool:
    """Whether the last step of a replay, from `before` to `after` making `effects`' calls,
    breaks `prop` on shard `focus` (None: the fleet, or any shard a step property's call is
    on), as a checker judged its counterexample: an invariant of the state after the step,
    a step property of a call the step made. What both engines assert of every trace they
    report (`bmc.Checker.extract`, `explicit` replay)."""
    if prop.kind == PropertyKind.INVARIANT:
        return not machine.invariant(prop.when, prop.check, focus, after)
    return effects is not None and any(
        machine.step_violations(prop.when, prop.check, call, before)
        for call in effects.calls
        if call.event in prop.on and (focus is None or call.shard == focus)
    )


def _shard_order(trace: Trace) -> list[int | None]:
    """Every shard, the trace's focus first (the one its figure shows)."""
    focus = trace.focus if trace.focus is not None else 0
    return [focus, *(s for s in range(trace.shard_count) if s != focus)]
