"""Every call at every state the traces to the branches pass through.

The enumeration tries every call in every state a few calls deep; the traces to the spec's
branches (`sources.branch_scripts`) reach states much deeper (the third retry, a budget one
restart from spent), but make only the one call that leads on. A class whose guard is off
by one there (it gives up one retry early, or retries once more than the cap) answers the
trace's own calls as the model does and is never asked the call that differs. So at each
state a branch trace passes through (each distinct state once, however many traces pass
it), every call of an enumeration step is made there too:

* a call the model refuses there (it raises, and changes nothing) is made in passing: the
  trace goes on after it, so one trace asks every refusal along the way;
* any other call (the model takes it, or a tick of the clock moves time on) ends a trace of
  its own: the trace's calls up to that state, then it.

What a call's arguments are is the enumeration's choice (`Conformance.calls_at`, and the
values this state gives reason to pass, `calls_in_state`), on one instance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledgercheck.model.conformance.calls import LedgerCall, Script, Tick
from ledgercheck.model.conformance.enumeration import StateKeys
from ledgercheck.model.conformance.implementation import ManualClock

if TYPE_CHECKING:
    from ledgercheck.model.conformance.checker import Conformance


@dataclass(frozen=True)
class Probes:
    """The traces `probe_scripts` made, and how many distinct states they ask every call at."""

    scripts: list[Script]
    states: int


def probe_scripts(checker: Conformance, traces: Sequence[Script]) -> Probes:
    """Every call at every distinct state `traces` (one-instance traces) pass through: the
    refusals in passing, one trace per branch trace; every other call on a trace of its own."""
    keys = StateKeys(checker.spec, 1, False)
    static = checker.calls_at(1)
    seen: set[tuple[Any, ...]] = set()
    scripts: list[Script] = []
    for trace in traces:
        if trace.shards != 1:
            continue
        clock = ManualClock()
        model = checker.new_model(1, clock)
        walked: list[LedgerCall] = []
        refused = 0
        for index in range(len(trace.calls) + 1):
            key = (clock.now, keys.merge(model.variables()))
            if key not in seen:
                seen.add(key)
                offered = [*static, *checker.calls_in_state(model.variables(), 1, set(static))]
                for call in offered:
                    if isinstance(call, Tick):
                        scripts.append(_ending(trace, index, call))
                        continue
                    before = model.save()
                    outcome = checker._call_model(model, call)
                    unchanged = dict(model.variables()) == before
                    model.restore(before)
                    if outcome.raised is not None and unchanged:
                        walked.append(call)
                        refused += 1
                    else:
                        scripts.append(_ending(trace, index, call))
            if index < len(trace.calls):
                call = trace.calls[index]
                if isinstance(call, Tick):
                    clock.advance(call.units)
                else:
                    checker._call_model(model, call)
                walked.append(call)
        if refused:
            scripts.append(Script(f"{trace.source}, with every call refused on the way", 1, tuple(walked)))
    return Probes(scripts, len(seen))


def _ending(trace: Script, index: int, call: LedgerCall) -> Script:
    return Script(f"{trace.source}, its first {index} calls, then {call.event}", 1, (*trace.calls[:index], call))
