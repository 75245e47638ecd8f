"""`check`'s text format: a verdict line per result (mismatches first, the not-applicable
rows folded into one line), the traces, and the closing summary naming each mismatch.

Below the commands: `check` prints it, `ci` quotes its verdict lines in a failure's detail.
"""

from __future__ import annotations

from model.figure import LEGEND, colour_enabled, trace_figure
from model.result import Result, Status
from model.runs import attention, mismatch_line, multi_environment, outcome, reading_order
from model.spec import SpecFile


def verdict_line(result: Result, environment_column: bool = False, widths: tuple[int, int] = (11, 40)) -> str:
    """One result on one line (more for policy regions and fairness assumptions): variant,
    property, environment (when the run covered several), what was found, and whether the
    spec expected it. `widths` are the variant and property columns' (the longest names)."""
    if result.status == Status.VIOLATED and result.traces and result.traces[0].loop_start is not None:
        start = result.traces[0].loop_start
        then = "no action is enabled (it stutters)" if start == result.depth else f"back to step {start} forever"
        what = f"VIOLATED by a lasso: {result.depth} steps, then {then}"
    elif result.status == Status.VIOLATED:
        what = f"VIOLATED at depth {result.depth} ({len(result.traces)} distinct trace(s))"
    elif result.status == Status.HOLDS_TO_DEPTH:
        what = f"holds up to depth {result.depth}"
    elif result.status == Status.PROVED:
        what = f"PROVED ({result.note})"
    elif result.status == Status.NOT_APPLICABLE:
        what = "not checked here: " + result.note
    else:
        what = f"UNKNOWN ({result.note})"
    expect = ""
    if result.matches is True:
        expect = "  [as expected]"
    elif result.matches is False:
        expect = f"  [MISMATCH: the spec expects {result.expected}]"
    variant_width, property_width = max(widths[0], len(result.variant)), max(widths[1], len(result.property))
    where = f"{result.environment:<11} " if environment_column else ""
    line = f"{result.variant:<{variant_width}} {result.property:<{property_width}} {where}{what}{expect}"
    pad = " " * (variant_width + 1 + property_width + 1 + (12 if environment_column else 0))
    if result.assumptions:
        line += f"\n{pad}{result.assumptions}"
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
    return lines


def print_results(spec_file: SpecFile, results: list[Result], all_traces: bool = False) -> None:
    """Verdict lines (mismatches first, not-applicable rows folded), then the traces (those of
    mismatches first), then the summary naming every mismatch. A result that is as the spec
    expects shows its shortest trace only, unless `all_traces` (the run named its properties)."""
    colour = colour_enabled()
    ordered = reading_order(results)
    env_column = multi_environment(results)
    widths = (max([11] + [len(r.variant) for r in results]), max([40] + [len(r.property) for r in results]))
    for result in ordered:
        if result.status != Status.NOT_APPLICABLE:
            print(verdict_line(result, env_column, widths))
    folded = not_applicable_line(ordered)
    if folded:
        print(folded)
    for result in ordered:
        if not result.traces and not result.lax_traces:
            continue
        spec = spec_file.variant(result.variant)
        prop = spec.properties[result.property]
        print()
        heading = f"== {result.variant} / {result.property} ({result.environment}, {result.shards} shards)"
        if result.matches is False:
            heading += f"  MISMATCH: the spec expects {result.expected}"
        print(heading)
        print(f"   {prop.doc}")
        full = all_traces or result.matches is not True
        traces = result.traces if full else result.traces[:1]
        lax = result.lax_traces if full else []
        for number, trace in enumerate(traces, 1):
            print(f"\n-- trace {number} of {len(result.traces)}, {trace.depth} steps: {prop.message}")
            print(trace_figure(trace, spec, colour=colour))
        for number, trace in enumerate(lax, 1):
            print(f"\n-- outside the callers' contracts, trace {number}: relies on a lax guard")
            print(trace_figure(trace, spec, colour=colour))
        hidden = len(result.traces) - len(traces), len(result.lax_traces) - len(lax)
        if any(hidden):
            print(
                f"\n   ({hidden[0]} more trace(s) and {hidden[1]} outside the callers' contracts, as expected: "
                f"add --property {result.property} --environment {result.environment} to see them)"
            )
    if any(r.traces or r.lax_traces for r in results):
        print()
        print(LEGEND)
    print()
    print("\n".join(summary_lines(results)))


__all__ = ["not_applicable_line", "print_results", "summary_lines", "verdict_line"]
