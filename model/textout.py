"""`check`'s text output: verdicts that fit a terminal, then the traces, the breaking step marked.

A run that names its properties (`--property`) shows every verdict on a line and every trace
as a figure. A whole run (every property of every variant) is read differently: what breaks
comes first and the figures are few, so the first screen shows the condemning step:

* one line per (variant, property) that is violated, undecided or not as expected (its
  environments merged when they agree), then per variant one wrapped paragraph naming the
  properties that hold as expected;
* the legend, then per violated (variant, property) one trace: the first of each variant as
  a figure, the others as their steps and the sentence naming the breaking step (`--property`
  shows their figures); a mismatch or an undecided result always shows all its traces;
* the summary, naming every mismatch.

Engine details (a proof's internals, a solver's reason) are cut to their first clause unless
`verbose` (`-v`).
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Sequence

from ledgercheck.model.figure import colour_enabled, column_label, figure_of, legend, trace_figure
from ledgercheck.model.result import NO_LASSO_SHOWS, Result, Status
from ledgercheck.model.runs import attention, mismatch_line, multi_environment, outcome, reading_order
from ledgercheck.model.spec import Property, SpecFile, policy_text
from ledgercheck.model.trace import Call, Step, Trace

NOTE_LIMIT = 44
"""Characters of an engine's note shown on a verdict line without -v."""


def brief(note: str, verbose: bool = False, limit: int = NOTE_LIMIT) -> str:
    """An engine's note for a verdict line: whole with `verbose`, else its first clause cut at
    `limit` characters, `…` marking a cut (-v shows the rest)."""
    if verbose or len(note) <= limit:
        return note
    first = note.splitlines()[0].split("; ")[0]
    if len(first) > limit:
        first = first[: limit - 1].rstrip()
    return first + "…"


def what_text(result: Result, verbose: bool = False) -> str:
    """What a result found, in a few words."""
    if result.status == Status.VIOLATED and result.traces and result.traces[0].loop_start is not None:
        start = result.traces[0].loop_start
        then = "no action is enabled (it stutters)" if start == result.depth else f"back to step {start} forever"
        return f"VIOLATED by a lasso: {result.depth} steps, then {then}"
    if result.status == Status.VIOLATED:
        return f"VIOLATED at depth {result.depth} ({len(result.traces)} distinct trace(s))"
    if result.status == Status.HOLDS_TO_DEPTH:
        return f"holds up to depth {result.depth}"
    if result.status == Status.PROVED:
        return f"PROVED ({brief(result.note, verbose)})"
    if result.status == Status.NOT_APPLICABLE:
        return "not checked here: " + result.note
    return f"UNKNOWN ({brief(result.note, verbose)})"


def expect_text(result: Result) -> str:
    if result.matches is True:
        return "  [as expected]"
    if result.matches is False:
        return f"  [MISMATCH: the spec expects {result.expected}]"
    return ""


def verdict_line(
    result: Result, environment_column: bool = False, widths: tuple[int, int] = (11, 40), verbose: bool = False
) -> str:
    """One result on one line (more for policy regions and fairness assumptions): variant,
    property, environment (when the run covered several), what was found, and whether the
    spec expected it. `widths` are the variant and property columns' (the longest names)."""
    variant_width, property_width = max(widths[0], len(result.variant)), max(widths[1], len(result.property))
    where = f"{result.environment:<11} " if environment_column else ""
    what = what_text(result, verbose)
    line = f"{result.variant:<{variant_width}} {result.property:<{property_width}} {where}{what}{expect_text(result)}"
    pad = " " * (variant_width + 1 + property_width + 1 + (12 if environment_column else 0))
    if result.assumptions:
        line += f"\n{pad}{result.assumptions}"
        if result.status == Status.HOLDS_TO_DEPTH and result.note.endswith(NO_LASSO_SHOWS):
            line += f"\n{pad}{result.note}"  # a bounded liveness search over an infinite state space
    if result.region is not None:
        line += f"\n{pad}{result.region_text()}"
    return line


def not_applicable_line(results: list[Result]) -> str | None:
    """The `not_applicable` rows folded into one line: which properties were not checked in
    which environment (they are checked by a run that names their environment, or by default)."""
    skipped = [r for r in results if r.status == Status.NOT_APPLICABLE]
    if not skipped:
        return None
    by_env: dict[str, list[str]] = {}
    for result in skipped:
        names = by_env.setdefault(result.environment, [])
        if result.property not in names:
            names.append(result.property)
    parts = [
        f"{len(names)} propert{'y' if len(names) == 1 else 'ies'} not for the {env} environment ({', '.join(names)})"
        for env, names in by_env.items()
    ]
    return "not applicable: " + "; ".join(parts)


def summary_lines(results: list[Result]) -> list[str]:
    """The closing summary: the counts, then each mismatch and undecided result by name."""
    failing = [r for r in results if r.matches is False]
    unknown = [r for r in results if r.status == Status.UNKNOWN]
    skipped = sum(1 for r in results if r.status == Status.NOT_APPLICABLE)
    checked = len(results) - skipped
    head = f"{checked} result(s): {len(failing)} mismatch(es), {len(unknown)} unknown"
    if skipped:
        head += f", {skipped} not applicable"
    lines = [head]
    lines += [f"  MISMATCH  {mismatch_line(r)}" for r in attention(results) if outcome(r) == "mismatch"]
    lines += [f"  UNKNOWN   {mismatch_line(r)}" for r in attention(results) if outcome(r) == "unknown"]
    lines += vacuous_lines(results)
    return lines


def vacuous_lines(results: Sequence[Result]) -> list[str]:
    """The properties that hold of nothing: their `when` is never true where they were checked
    (one line per property, environment and finding, its variants named together)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for result in results:
        if result.vacuous:
            groups.setdefault((result.property, result.environment, result.vacuous), []).append(result.variant)
    lines = []
    for (name, environment, where), variants in groups.items():
        why = (
            "the verdict counts only those, so it checks nothing the verdict counts (outside them, if its when can "
            "hold there at all, only the lax traces and conform's any-call pass exercise it)"
            if where.endswith("within the callers' contracts")
            else "so it checks nothing there (a when that cannot happen, or a misread field?)"
        )
        head = f"{name} ({environment}; {', '.join(variants)})"
        lines.append(f"  VACUOUS   {head}: holds, but its when is never true {where}: {why}")
    return lines


# --- a whole run, compact ------------------------------------------------------------------


def quiet(result: Result) -> bool:
    """A result that needs no line of its own: it holds, as the spec expects, with nothing to add."""
    return (
        result.status in (Status.HOLDS_TO_DEPTH, Status.PROVED)
        and result.matches is True
        and not result.assumptions
        and result.region is None
    )


def grouped(results: Sequence[Result]) -> list[list[Result]]:
    """Results per (variant, property), in reading order."""
    groups: dict[tuple[str, str], list[Result]] = {}
    for result in results:
        groups.setdefault((result.variant, result.property), []).append(result)
    return list(groups.values())


def group_lines(group: list[Result], widths: tuple[int, int], verbose: bool) -> list[str]:
    """One line for a (variant, property) whose environments agree, else one per environment."""
    first = group[0]
    same = all(
        (r.status, r.matches, r.assumptions, r.region) == (first.status, first.matches, first.assumptions, first.region)
        for r in group
    )
    if not same or first.status == Status.UNKNOWN:
        return [verdict_line(r, True, widths, verbose) for r in group]
    if first.status == Status.VIOLATED and first.traces and first.traces[0].loop_start is None:
        what = "VIOLATED, depth " + " / ".join(f"{r.depth} {r.environment}" for r in group)
    else:
        what = f"{what_text(first, verbose)}, {' / '.join(r.environment for r in group)}"
    line = f"{first.variant:<{widths[0]}} {first.property:<{widths[1]}} {what}{expect_text(first)}"
    extra = [first.assumptions] if first.assumptions else []
    extra += [first.region_text()] if first.region is not None else []
    width = shutil.get_terminal_size((120, 24)).columns
    return [line] + [textwrap.fill(e, width, initial_indent="    ", subsequent_indent="    ") for e in extra]


def holds_paragraphs(results: Sequence[Result], width: int) -> list[str]:
    """Per variant, the properties that hold as expected, named in one wrapped paragraph."""
    out = []
    variants = list(dict.fromkeys(r.variant for r in results))
    for variant in variants:
        names = list(dict.fromkeys(r.property for r in results if r.variant == variant and quiet(r)))
        if not names:
            continue
        depths = sorted({r.depth for r in results if r.variant == variant and quiet(r) and r.status != Status.PROVED})
        bound = f"up to depth {'/'.join(map(str, depths))}" if depths else "proved"
        text = f"{variant}: {len(names)} hold {bound}, as expected: {', '.join(names)}"
        searched = list(dict.fromkeys(r.property for r in results if r.variant == variant and bounded_only(r)))
        if searched:
            text += (
                f"; of these, {len(searched)} only up to that depth, no inductive invariant found for them (a "
                f"violation deeper than the search is not ruled out; `ledgercheck prove` looks further): "
                f"{', '.join(searched)}"
            )
        out.append(textwrap.fill(text, width, subsequent_indent="    ", break_on_hyphens=False))
    return out


def bounded_only(result: Result) -> bool:
    """A quiet result that holds up to the depth searched with nothing more: no invariant
    settled it for every depth (`proved_beyond`: the one tried before a search, or WF1), so a
    violation one step deeper would have passed. Said beside the verdict, which it does not
    change."""
    return quiet(result) and result.status == Status.HOLDS_TO_DEPTH and not result.proved_beyond


def wrap(text: str, width: int) -> str:
    """`text` wrapped to `width`, continuation lines indented by three spaces."""
    return textwrap.fill(text, width, subsequent_indent="   ", break_on_hyphens=False, break_long_words=False)


def calls_outside_contracts(trace: Trace) -> list[tuple[int, Step, Call]]:
    """The calls of `trace` the callers' contracts rule out, each with its step and the step's
    number."""
    return [
        (number, step, call)
        for number, step in enumerate(trace.steps[1:], 1)
        for call in step.calls
        if not call.contract_ok
    ]


def outside_contracts(trace: Trace) -> list[str]:
    """The calls of `trace` the callers' contracts rule out (`step 2, mark_loaded(0)`): what a
    property judged over any call (`calls = "any"`) counts, and its readers should know."""
    return [f"step {number}, {call.event}({call.shard})" for number, _, call in calls_outside_contracts(trace)]


def outside_contracts_note(trace: Trace, prop: Property) -> str:
    """For a property that counts every call: which calls of `trace` its callers' contracts rule
    out (empty where none, or where the property counts only the calls they allow)."""
    outside = outside_contracts(trace) if prop.counts_any_call else []
    if not outside:
        return ""
    return f'   (the callers\' contracts rule out {"; ".join(outside)}: the property counts every call, calls = "any")'


def steps_text(trace: Trace) -> str:
    return ", ".join(column_label(s) for s in trace.steps[1:]) or "(no step)"


def print_results(
    spec_file: SpecFile,
    results: list[Result],
    all_traces: bool = False,
    all_fields: bool = False,
    verbose: bool = False,
) -> None:
    """Verdicts, the legend, the traces (mismatches first), then the summary naming every
    mismatch. `all_traces` (the run named its properties): a line per result and every trace
    as a figure; else the compact whole-run view described in the module's docstring."""
    width = shutil.get_terminal_size((120, 24)).columns
    colour = colour_enabled()
    ordered = reading_order(results)
    env_column = multi_environment(results)
    widths = (max([11] + [len(r.variant) for r in results]), max([40] + [len(r.property) for r in results]))
    compact = not all_traces
    if compact:
        for group in grouped(ordered):
            if not all(quiet(r) or r.status == Status.NOT_APPLICABLE for r in group):
                for line in group_lines([r for r in group if r.status != Status.NOT_APPLICABLE], widths, verbose):
                    print(line)
        for paragraph in holds_paragraphs(ordered, width):
            print(paragraph)
    else:
        for result in ordered:
            if result.status != Status.NOT_APPLICABLE:
                print(verdict_line(result, env_column, widths, verbose))
    folded = not_applicable_line(ordered)
    if folded:
        print(textwrap.fill(folded, width, subsequent_indent="    ", break_on_hyphens=False))
    if any(r.traces or r.lax_traces for r in results):
        print()
        print(legend(spec_file.variant()))
    figures_shown: set[str] = set()
    done: set[tuple[str, str]] = set()
    for result in ordered:
        full = all_traces or result.matches is not True
        if not result.traces and not (full and result.lax_traces):
            continue
        key = (result.variant, result.property)
        if compact and result.matches is True and key in done:
            continue
        done.add(key)
        spec = spec_file.variant(result.variant)
        prop = spec.property(result.property)
        print()
        shards = f"{result.shards} shard{'' if result.shards == 1 else 's'}"
        heading = f"== {result.variant} / {result.property} ({result.environment}, {shards})"
        if result.matches is False:
            heading += f"  MISMATCH: the spec expects {result.expected}"
        print(heading)
        print(textwrap.fill(prop.doc, width, initial_indent="   ", subsequent_indent="   "))
        if not full and result.variant in figures_shown:
            trace = result.traces[0]
            print()
            print(wrap(f"-- trace 1 of {len(result.traces)}, {trace.length}: {steps_text(trace)}", width))
            sentence = figure_of(trace, spec, prop=prop).break_line()
            if sentence:
                print(wrap(f">> {sentence}", width))
            print(f"   (--property {result.property} --variant {result.variant} shows the figure)")
            continue
        figures_shown.add(result.variant)
        traces = result.traces if full else result.traces[:1]
        lax = result.lax_traces if full else []
        for number, trace in enumerate(traces, 1):
            where = figure_of(trace, spec, prop=prop).breaking
            broken = f", broken at step {where.step}" if where is not None else ""
            if result.policy is None and trace.policy:  # a symbolic policy: the values this trace found
                broken += f", at {policy_text(trace.policy)}"
            print()
            print(wrap(f"-- trace {number} of {len(result.traces)}, {trace.length}{broken}: {prop.message}", width))
            print(trace_figure(trace, spec, colour=colour, prop=prop, all_fields=all_fields))
            note = outside_contracts_note(trace, prop)
            if note:
                print(wrap(note, width))
        for number, trace in enumerate(lax, 1):
            print(f"\n-- outside the callers' contracts, trace {number}: relies on a lax guard")
            print(trace_figure(trace, spec, colour=colour, prop=prop, all_fields=all_fields))
        hidden = len(result.traces) - len(traces), len(result.lax_traces) - len(lax)
        if any(hidden):
            text = (
                f"({hidden[0]} more trace(s) and {hidden[1]} outside the callers' contracts, as expected: "
                f"add --property {result.property} --environment {result.environment} to see them)"
            )
            print()
            print(wrap("   " + text, width))
    print()
    print("\n".join(summary_lines(results)))
