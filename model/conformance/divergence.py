"""A divergence between an implementation and the model, and its report: what differs, a
figure of the trace (one column per call) and a reproducer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgercheck.model.conformance.calls import LedgerCall, Script, Tick
from ledgercheck.model.conformance.observation import (
    MISSING,
    Difference,
    Key,
    Observation,
    Outcome,
    describe_key,
    notifications_text,
)
from ledgercheck.model.errors import did_you_mean
from ledgercheck.model.figure import cell, render_table
from ledgercheck.model.spec import plural, policy_text
from ledgercheck.model.trace import base_url

if TYPE_CHECKING:
    from ledgercheck.model.conformance.checker import Conformance


@dataclass
class Divergence:
    """The first call after which the implementation and the model disagree."""

    script: Script  # the calls up to and including the divergent one
    index: int  # of the divergent call; -1: right after construction
    differences: list[Difference]
    found_by: str = ""
    original_calls: int = 0
    within_contract: bool = False  # every call up to the divergent one was one the callers' contracts allow

    @property
    def call(self) -> LedgerCall | None:
        return self.script.calls[self.index] if self.index >= 0 else None


NO_FIGURE = "(no figure: "
"""How the figure begins when the calls, run again, did not repeat the divergence."""


@dataclass
class Recording:
    """A script replayed with everything recorded, for the figure."""

    model: list[Observation] = field(default_factory=list)
    impl: list[Observation] = field(default_factory=list)
    model_outcomes: list[Outcome] = field(default_factory=list)
    impl_outcomes: list[Outcome] = field(default_factory=list)
    contract: list[bool | None] = field(default_factory=list)


def figure(checker: Conformance, divergence: Divergence, width: int | None = None) -> str:
    """One column per call; rows: the divergent shard's fields (and whatever else differs),
    the model's values, and in the divergent cell the model's value against the
    implementation's, the row marked `>`."""
    script = divergence.script
    recording = Recording()
    checker.clock_reads = 0
    again = checker.run(script, recording)
    if again is None or again.index != divergence.index:
        # The figure is drawn from a second run; an implementation whose answers depend on
        # more than the calls (a class attribute shared by every instance, the real clock,
        # randomness) may not repeat the first.
        what = "did not diverge" if again is None else f"diverged at call {again.index + 1} instead"
        return (
            f"{NO_FIGURE}run again on a new instance, the implementation {what}. Its behaviour depends on "
            "more than these calls: state shared between instances (a class attribute), the real clock or "
            "randomness; the reproducer below may not show the divergence either)"
        )
    steps = len(recording.model)
    last = steps - 1
    differing = {d.key for d in divergence.differences}
    shard = _focus_shard(divergence)
    header = [f"shard {shard}", "start"] + [c.label(checker.events.get(c.event)) for c in script.calls]
    rows: list[list[str]] = []

    def impl_value(key: Key) -> Any:
        if key[0] in ("raised", "logs", "notifications", "result"):
            outcome = recording.impl_outcomes[-1] if recording.impl_outcomes else Outcome(None, 0)
            if key[0] == "notifications":
                return notifications_text(outcome.notifications)
            if key[0] == "result":
                return outcome.result
            return outcome.raised if key[0] == "raised" else outcome.logs
        return recording.impl[last].get(key, MISSING)

    def row(name: str, key: Key, values: list[Any], changes: bool = True) -> None:
        marked = key in differing
        cells = []
        for index, value in enumerate(values):
            text = cell(value)
            if changes and index and value != values[index - 1]:
                text += "*"
            if marked and index == last:
                text += f" (impl: {cell(impl_value(key))})"
            cells.append(text)
        rows.append([("> " if marked else "  ") + name, *cells])

    binding = checker.spec.binding
    observed = [d for d in checker.spec.fields if binding is None or binding.observes(d.name)]
    if 0 <= shard < script.shards:
        for decl in observed:
            key = ("field", shard, decl.name)
            row(decl.name, key, [obs.get(key, MISSING) for obs in recording.model])
    shown: set[Key] = {("field", shard, decl.name) for decl in observed}
    shown |= {("raised",), ("logs",), ("notifications",), ("result",)}
    for key in sorted(differing - shown, key=repr):
        row(describe_key(key), key, [obs.get(key, MISSING) for obs in recording.model])
    if script.calls:
        outcomes = recording.model_outcomes
        if checker.compare_logs:
            row("log lines", ("logs",), ["-"] + [o.logs for o in outcomes], changes=False)
        if checker.compare_notifications:
            announced = ["-"] + [notifications_text(o.notifications) for o in outcomes]
            row("notifications", ("notifications",), announced, changes=False)
        if ("raised",) in differing or any(o.raised for o in outcomes):
            row("raised", ("raised",), ["-"] + [o.raised or "-" for o in outcomes], changes=False)
        returning = [c.event in checker.events and checker.events[c.event].returns is not None for c in script.calls]
        if ("result",) in differing or any(returning):
            values = [o.result if r and o.raised is None else "-" for o, r in zip(outcomes, returning, strict=True)]
            row(describe_key(("result",)), ("result",), ["-", *values], changes=False)
        # A spec with no `requires` has no contracts to show, but a call on an unknown shard
        # is outside them all the same: the row then says which.
        if checker.has_contracts or any(c is False for c in recording.contract):
            rows.append(["  callers' contract", "-"] + [_contract_text(c) for c in recording.contract])
    return render_table(header, rows, width)


def report(checker: Conformance, divergence: Divergence, variant: str, width: int | None = None) -> str:
    """The figure, what differs, where the trace came from, and a reproducer."""
    script = divergence.script
    lines = []
    call = divergence.call
    # found at another policy than the one asked: the headline names it (a summary quotes it alone)
    at = f" (at {policy_text(checker.policy)})" if checker.policy_note else ""
    if call is None:
        lines.append(f"{checker.label} differs from the model of {variant!r}{at} right after construction:")
    else:
        lines.append(
            f"{checker.label} diverges from the model of {variant!r}{at} at call {divergence.index + 1} "
            f"of {len(script.calls)}, {call.label(checker.events.get(call.event))}:"
        )
    lines += [f"  {d}" for d in divergence.differences]
    lines += _unmapped(checker, divergence)
    lines += _misspelt_error(divergence)
    found = divergence.found_by or script.source
    if divergence.original_calls and divergence.original_calls != len(script.calls):
        found += f"; shrunk from {divergence.original_calls} to {len(script.calls)} calls"
    # The trace as shown: the fleet it is replayed on (shrinking may have dropped shards).
    lines.append(f"  (found by {found}; replayed on {plural(script.shards, 'shard')})")
    if checker.policy_note:
        lines.append(f"  ({checker.policy_note})")
    if script.calls and (checker.has_contracts or not divergence.within_contract):  # an unknown instance: outside
        lines.append(
            "  every call is one the callers' contracts allow"
            if divergence.within_contract
            else "  the trace makes a call outside the callers' contracts (the spec still defines what it does)"
        )
    lines.append("")
    drawn = figure(checker, divergence, width)
    lines.append(drawn)
    if not drawn.startswith(NO_FIGURE):
        lines.append("* changed by the call; > the implementation differs (impl: its value)")
    clock = checker.spec.clock
    if checker.accepts_clock and clock is not None and checker.clock_reads == 0:
        if any(isinstance(c, Tick) for c in script.calls):
            how = f"patch = {clock.drive_patch!r}" if clock.drive_patch else f"param = {clock.drive_param!r}"
            lines.append(
                f"note: time passed in these calls, and the implementation never read the clock conform moves "
                f"(drive = {{ {how} }}): a class that took its time source before the patch (a default argument, "
                "a function imported under another name) reads the real clock, and its timers never move"
            )
    lines.append("")
    lines.append("reproduce:")
    lines += [f"  {line}" for line in reproducer(checker, script, divergence.differences)]
    return "\n".join(lines)


def reproducer(checker: Conformance, script: Script, differences: Sequence[Difference] = ()) -> list[str]:
    """The trace as Python a user can paste: a class of the ledger's shape built and called
    through its API; a class bound by the spec's `[implementation]` built and called as the
    binding does it (`job_table = JobTable(n=1, max_attempts=3)`, `job_table.lease(0)`). A
    call the spec says raises is made under `contextlib.suppress` (the script would stop
    there), and what differs is printed at the end beside the model's value, so that running
    it shows the divergence."""
    built = checker.impl.ledger_class
    bound = callable(getattr(built, "construction_code", None)) and checker.spec.binding is not None
    lines = (
        _class_import(checker.impl.label) + _bound_reproducer(checker, script, built)
        if bound
        else _ledger_reproducer(checker, script)
    )
    return _shown(checker, script, lines, differences, built if bound else None)


def _shown(
    checker: Conformance, script: Script, lines: list[str], differences: Sequence[Difference], bound: Any
) -> list[str]:
    """`lines` (imports and construction, then one line per call) with the calls the model
    raises at suppressed, and a print of each value that differs after the last call."""
    calls = len(script.calls)
    head, body = lines[: len(lines) - calls], lines[len(lines) - calls :]
    raised = _model_raised(checker, script)
    about_raise = any(d.key == ("raised",) for d in differences)
    suppressed = False
    for number, (line, error) in enumerate(zip(body, raised, strict=True)):
        last = number == calls - 1
        if error is None or line.startswith("#") or (last and about_raise):
            continue
        call = line.split("): ", 1)[1] if line.startswith("with contextlib.suppress(") else line
        body[number] = f"with contextlib.suppress(Exception): {call}  # raises {error}, as the spec says"
        suppressed = True
    if about_raise and body:
        body[-1] += f"  # the model {'raises ' + raised[-1] if raised[-1] else 'returns'} here"
    imports = ["import contextlib"] if suppressed and "import contextlib" not in head else []
    prints = [line for d in differences for line in _print_of(checker, script, d, bound)]
    return imports + head + body + prints


def _model_raised(checker: Conformance, script: Script) -> list[str | None]:
    """What the model raised at each call of `script` (None: nothing; a tick: nothing)."""
    model = checker.new_model(script.shards)
    raised: list[str | None] = []
    for call in script.calls:
        if isinstance(call, Tick):
            model.advance_time(call.units)
            raised.append(None)
        else:
            raised.append(checker._call_model(model, call).raised)
    return raised


def _print_of(checker: Conformance, script: Script, difference: Difference, bound: Any) -> list[str]:
    """The lines that print one value that differs, the model's beside each; none where it is
    no value a read shows (the exception raised, the log lines)."""
    key, expected = difference.key, f"  # the model: {cell(difference.model)}"
    if bound is not None:
        if key[0] == "field":
            read = bound.read_code(key[2], key[1], script.shards, checker.policy)
            return [f"print({read}){expected}"] if read is not None else []
        if key[0] == "query" and bound.query_per_object(key[1]):  # each object's own predicate
            holding = difference.model if isinstance(difference.model, (list, tuple)) else ()
            return [
                f"print({name}.{key[1]}())  # the model: {cell(index in holding)}"
                for index, name in enumerate(bound.objects(script.shards))
            ]
        if key[0] == "query":
            return [f"print({bound.objects(script.shards)[0]}.{key[1]}()){expected}"]
        return []
    if key[0] == "field":
        return [f"print(ledger.snapshot()[{key[1]}].{key[2]}){expected}"]
    if key[0] == "state_of":
        return [f"print(ledger.state_of({key[1]})){expected}"]
    if key[0] == "query":
        return [f"print(ledger.{key[1]}()){expected}"]
    if key[0] == "global":
        return [f"print(ledger.{key[1]}){expected}"]
    return []


def _ledger_reproducer(checker: Conformance, script: Script) -> list[str]:
    """A class of the ledger's shape: its policy object, the fleet, one line per call."""
    built = checker.impl.ledger_class
    policy = checker.impl.policy_class
    lines = _class_import(checker.impl.label, policy.__name__ if policy is not None else None)
    policy_name = checker.impl.policy_class_name
    policy_args = ", ".join(f"{k}={v}" for k, v in checker.policy.items() if v != checker.spec.policy[k].default)
    urls = ", ".join(repr(base_url(i)) for i in range(script.shards))
    ticks = any(isinstance(c, Tick) for c in script.calls)
    clock = (", clock=clock" if ticks else ", clock=lambda: 0.0") if checker.accepts_clock else ""
    if ticks:
        lines.append("clock = ManualClock()  # from ledgercheck.model.conformance")
    lines.append(
        f"ledger = {built.__name__}(shard_count={script.shards}, "
        f"policy={policy_name}({policy_args}), base_urls=[{urls}]{clock})"
    )
    lines += [
        f"clock.{c.code()}" if isinstance(c, Tick) else f"ledger.{c.code(checker.events[c.event])}"
        for c in script.calls
    ]
    return lines


def _class_import(label: str, policy: str | None = None) -> list[str]:
    """The import of the implementation's class, and of its module's policy class where it
    has one (`module:Class`, or `path/file.py:Class`: its module, run from the file's folder),
    where the label names one."""
    location, sep, name = label.rpartition(":")
    if not sep or not location or not name.isidentifier():
        return []
    names = name if policy is None else f"{name}, {policy}"
    if location.endswith(".py"):
        # Its folder first on the path: a script's own folder is where Python looks, not the
        # shell's; and a copy of an installed module must not import the module itself.
        stem = Path(location).stem
        folder = str(Path(location).resolve().parent)
        why = f"not the installed {stem}" if _found_elsewhere(stem, Path(location)) else "the class's folder"
        return [f"import sys; sys.path.insert(0, {folder!r})  # {why}", f"from {stem} import {names}  # {location}"]
    return [f"from {location} import {names}"]


def _found_elsewhere(module: str, file: Path) -> bool:
    """Whether `import module` from another folder finds some other file (a bug injected into a
    copy of an installed library: the pasted reproducer would import the library itself)."""
    import importlib.machinery

    try:
        found = importlib.machinery.PathFinder.find_spec(module)
    except (ImportError, ValueError):
        return False
    origin = found.origin if found is not None else None
    return origin is not None and Path(origin).resolve() != file.resolve()


def _bound_reproducer(checker: Conformance, script: Script, built: Any) -> list[str]:
    """The binding's own account of the trace (`bound_class`): only it knows how its class is
    built and what each call path does with the call's arguments."""
    lines: list[str] = built.construction_code(script.shards, checker.policy)
    for call in script.calls:
        if isinstance(call, Tick):
            lines.append(f"clock.{call.code()}")
            continue
        positional, keywords = call.split(checker.events[call.event])
        lines.append(built.call_code(call.event, call.shard, positional[1:], keywords, script.shards, checker.policy))
    return lines


def _unmapped(checker: Conformance, divergence: Divergence) -> list[str]:
    """For an enum field the class shows as no member at all (`true`, `3`, an unknown word): how
    to map the class's values onto the members, where the spec binds a class."""
    if checker.spec.binding is None:
        return []
    enums = {f.name: f.type.enum for f in checker.spec.fields if f.type.enum is not None}
    out = []
    for difference in divergence.differences:
        if difference.key[0] != "field" or difference.key[2] not in enums:
            continue
        name, enum = difference.key[2], enums[difference.key[2]]
        members = checker.spec.enums[enum or ""].members
        if difference.impl == MISSING or (isinstance(difference.impl, str) and difference.impl in members):
            continue
        read = checker.spec.binding.fields.get(name)
        if read is not None and read.values:
            mapped = ", ".join(f"{m} = {', '.join(repr(v) for v in group)}" for m, group in read.values.items())
            out.append(
                f"  ({name} is a {enum}, and the class shows {cell(difference.impl)}, which the binding's values "
                f"({mapped}) map to no member: a misspelt values entry, or a value the class should not have)"
            )
            continue
        out.append(
            f"  ({name} is a {enum}, and the class shows {cell(difference.impl)}, no member of it: map its values "
            f"in [implementation.fields], {name} = {{ read = ..., values = {{ {members[0]} = ..., ... }} }})"
        )
    return out


def _misspelt_error(divergence: Divergence) -> list[str]:
    """The spec's error and the class's, names a letter or two apart (`ReceiptExpird`,
    `ReceiptExpired`): the spec misspells it, more likely than the class raises another."""
    out = []
    for difference in divergence.differences:
        expected, raised = difference.model, difference.impl
        if difference.key != ("raised",) or not isinstance(expected, str) or not isinstance(raised, str):
            continue
        name = raised.split(":", 1)[0]
        if name != expected and did_you_mean(expected, [name]):
            out.append(
                f"  (the spec's raises names {expected}, the class raised {name}: a misspelt error in the spec? "
                "It names the class's exception, or one of its bases)"
            )
    return out


def _contract_text(value: bool | None) -> str:
    return "unknown shard" if value is None else ("ok" if value else "outside")


def _focus_shard(divergence: Divergence) -> int:
    for difference in divergence.differences:
        if difference.key[0] in ("field", "state_of"):
            return int(difference.key[1])
    call = divergence.call
    if call is not None and 0 <= call.shard < divergence.script.shards:
        return call.shard
    return 0
