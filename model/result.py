"""What a check found: the result record every engine returns, and what makes two traces
the same finding (their view).

Kept apart from the engines so that reading, printing and comparing results needs no
solver: the explicit-state engine and the formats import this, not Z3.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from ledgercheck.model.errors import LedgercheckError
from ledgercheck.model.spec import Spec
from ledgercheck.model.trace import Trace

FOCUS = 0


NO_LASSO_SHOWS = (
    "a counterexample that never comes back to a state it was in is no lasso, and this search cannot show one"
)
"""Ends the note of a bounded fair-lasso search over an infinite state space (`model.liveness`),
which the text output shows under the verdict (`model.textout`)."""


class EncodingMismatch(LedgercheckError):
    """The solver's trace and the interpreter's replay of it disagree: a bug in ledgercheck."""

    exit_code = 3


class Status(StrEnum):
    """What a check established. A `StrEnum`: it compares equal to, prints as and serialises
    to its value, so the JSON schema and every text format read exactly as the strings did."""

    VIOLATED = "violated"
    HOLDS_TO_DEPTH = "holds_to_depth"
    """No violation up to the result's depth."""
    PROVED = "proved"
    UNKNOWN = "unknown"
    NOT_APPLICABLE = "not_applicable"
    """The property names other environments."""


Verdict = Literal["holds", "violated", "unknown"]
"""What the spec's expectations speak of."""

EngineName = Literal["bmc", "spacer", "kind", "explicit"]
"""What answered a result (its JSON `engine`)."""


@dataclass(kw_only=True)
class Result:
    variant: str
    property: str
    environment: str
    shards: int
    policy: Mapping[str, int] | None
    status: Status
    depth: int
    traces: list[Trace] = field(default_factory=list)
    expected: str | None = None
    seconds: float = 0.0
    note: str = ""
    lax_traces: list[Trace] = field(default_factory=list)
    region: dict[str, dict[str, list[int]]] | None = None
    region_depth: int = 0
    engine: str = "bmc"
    invariant: str = ""
    assumptions: str = ""
    """What a liveness verdict assumes (the environment's fairness), printed with it."""
    vacuous: str = ""
    """For a property that holds with a `when`: where its `when` never holds (`in any
    reachable state`, `up to depth 12`), so it holds of nothing there; empty otherwise."""
    proved_beyond: bool = False
    """No trace of any length breaks it at this fleet and policy, though the verdict asked
    for is the bounded one (`holds_to_depth`, what every format prints): an inductive
    invariant found before the bounded search and checked by a plain solver made the search
    unnecessary (`bmc._proof_first`), or a liveness property's WF1 proof held
    (`liveness`). `ci`'s proofs step counts it proved, not proving it again."""
    reused: bool = False
    """Answered from the cache of results (`model.resultcache`), not solved by this run. No
    format prints it: a reused result prints what a fresh check would; `ci` counts them."""

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    @classmethod
    def not_applicable(
        cls, spec: Spec, prop: Any, environment: str, shards: int, policy: Mapping[str, int] | None
    ) -> Result:
        """The result of a property checked in an environment it is not about."""
        note = f"the property is only about {', '.join(prop.environments or ())}"
        return cls._unsearched(spec, prop, environment, shards, policy, status=Status.NOT_APPLICABLE, note=note)

    @classmethod
    def not_established(
        cls, spec: Spec, prop: Any, environment: str, shards: int, policy: Mapping[str, int] | None, why: str
    ) -> Result:
        """The result of a check nothing answered (a spent budget, a lost worker): unknown,
        never a pass, saying why."""
        expected = prop.expect.get(spec.variant)
        return cls._unsearched(
            spec, prop, environment, shards, policy, status=Status.UNKNOWN, expected=expected, note=why
        )

    @classmethod
    def _unsearched(
        cls, spec: Spec, prop: Any, environment: str, shards: int, policy: Mapping[str, int] | None, **outcome: Any
    ) -> Result:
        """A result no engine searched for (depth 0): `outcome` is its status, note and the rest."""
        return cls(
            variant=spec.variant,
            property=prop.name,
            environment=environment,
            shards=shards,
            policy=policy,
            depth=0,
            **outcome,
        )

    def region_text(self) -> str:
        """For a symbolic policy: which values of each constant admit a violation."""
        if not self.region:
            return ""
        parts = []
        for name, split in self.region.items():
            bad, good = split["violated"], split["holds_to_depth"]
            if not bad:
                continue
            if not good:
                parts.append(f"any {name}")
            else:
                parts.append(f"{name} in {_ranges(bad)} (holds to depth {self.region_depth} for {_ranges(good)})")
        if not parts:
            return f"holds up to depth {self.region_depth} for every policy in the declared ranges"
        return "violated for " + "; ".join(parts)

    @builtins.property
    def verdict(self) -> Verdict:
        """'holds' or 'violated' (what the spec's expectations speak of), or 'unknown'."""
        if self.status is Status.VIOLATED:
            return "violated"
        if self.status in (Status.HOLDS_TO_DEPTH, Status.PROVED):
            return "holds"
        return "unknown"

    @builtins.property
    def matches(self) -> bool | None:
        if self.expected is None or self.verdict == "unknown":
            return None
        return self.expected == self.verdict


def view_of(trace: Trace, spec: Spec, focus: int | None, fields: tuple[str, ...] | None = None) -> tuple[Any, ...]:
    """The default view: per step that changes the focus shard's ledger fields, the events
    called on it and the new values. Steps elsewhere, and renamings, disappear."""
    if focus is None:
        return tuple((s.action, tuple(sorted(s.shards.items()))) for s in trace.steps[1:])
    view = []
    observed = fields if fields is not None else spec.observed_fields
    previous = trace.steps[0].after["shards"][focus]
    for step in trace.steps[1:]:
        current = step.after["shards"][focus]
        changed = tuple((name, _hashable(current[name])) for name in observed if current[name] != previous[name])
        events = tuple(c.event for c in step.calls if c.shard == focus)
        if changed:
            view.append((events, changed))
        previous = current
    return tuple(view)


def _hashable(value: Any) -> Any:
    return value if not isinstance(value, (dict, list)) else repr(value)


def trace_key(trace: Trace) -> str:
    return "|".join(f"{s.action}{sorted(s.shards.items())}{sorted(s.args.items())}" for s in trace.steps[1:])


def _ranges(values: list[int]) -> str:
    """[2, 3, 4, 7] -> '{2..4, 7}'."""
    runs: list[str] = []
    start = previous = None
    for value in sorted(values):
        if start is None:
            start = previous = value
        elif previous is not None and value == previous + 1:
            previous = value
        else:
            runs.append(f"{start}" if start == previous else f"{start}..{previous}")
            start = previous = value
    if start is not None:
        runs.append(f"{start}" if start == previous else f"{start}..{previous}")
    return "{" + ", ".join(runs) + "}"


__all__ = ["FOCUS", "EncodingMismatch", "EngineName", "Result", "Status", "Verdict", "trace_key", "view_of"]
