"""Traces as figures: one column per action, one row per field of the shard a trace is about.

The seed explains its bug with exactly this picture; the checker, `replay` and the
generated tests all print it. Changed cells are marked `*`; a ledger cell whose value
was inherited from an earlier process incarnation (unchanged since before the last
`incarnation` bump, and different from a fresh process's value) is marked `!`.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from typing import Any

from model.spec import Spec
from model.trace import Step, Trace

CHANGED = "*"
INHERITED = "!"


def cell(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def column_label(step: Step) -> str:
    if step.action is None:
        return "start"
    params = [str(v) for v in step.shards.values()]
    params += [f"{k}={cell(v)}" for k, v in step.args.items()]
    return f"{step.action}({', '.join(params)})"


def focus_events(step: Step, shard: int) -> str:
    names = [c.event for c in step.calls if c.shard == shard]
    return ", ".join(names) if names else "-"


def trace_rows(trace: Trace, spec: Spec, shard: int) -> tuple[list[str], list[list[str]]]:
    """The figure as data: header labels and rows of cells (first cell is the row name)."""
    steps = trace.steps
    header = [f"shard {shard}"] + [column_label(s) for s in steps]
    rows: list[list[str]] = []
    if trace.environment != "ledger" or any(len(s.calls) != 1 for s in steps[1:]):
        rows.append(["calls on shard"] + [focus_events(s, shard) for s in steps])
    incarnation = [s.after["history"]["shards"][shard].get("incarnation") for s in steps]
    fresh = _fresh_values(spec)
    for field in spec.fields:
        values = [s.after["shards"][shard][field.name] for s in steps]
        row = [field.name]
        for index, value in enumerate(values):
            mark = ""
            if index and value != values[index - 1]:
                mark = CHANGED
            elif _inherited(values, incarnation, index, fresh.get(field.name, value)):
                mark = INHERITED
            row.append(cell(value) + mark)
        rows.append(row)
    for field in spec.history:
        values = [s.after["history"]["shards"][shard][field.name] for s in steps]
        if len(set(map(repr, values))) > 1:
            row = [f"~{field.name}"]
            for index, value in enumerate(values):
                changed = index and value != values[index - 1]
                row.append(cell(value) + (CHANGED if changed else ""))
            rows.append(row)
    return header, rows


def _fresh_values(spec: Spec) -> dict[str, Any]:
    return {f.name: f.initial for f in spec.fields if f.initial_from is None}


def _inherited(values: Sequence[Any], incarnation: Sequence[Any], index: int, fresh: Any) -> bool:
    """Unchanged since a step before the current incarnation began, and not fresh."""
    if index == 0 or incarnation[index] is None or value_is(values[index], fresh):
        return False
    born = index
    while born > 0 and incarnation[born - 1] == incarnation[index]:
        born -= 1
    if born == 0:
        return False
    return all(values[k] == values[index] for k in range(born - 1, index + 1))


def value_is(left: Any, right: Any) -> bool:
    return bool(left == right)


def render_table(header: list[str], rows: list[list[str]], width: int | None = None) -> str:
    """Aligned text, split into panels of columns when wider than `width`."""
    width = width or shutil.get_terminal_size((120, 24)).columns
    columns = list(zip(header, *rows, strict=True))
    name_width = max(len(c) for c in columns[0])
    widths = [max(len(c) for c in col) for col in columns]
    panels: list[list[int]] = []
    current: list[int] = []
    used = name_width
    for index in range(1, len(columns)):
        need = widths[index] + 3
        if current and used + need > width:
            panels.append(current)
            current, used = [], name_width
        current.append(index)
        used += need
    if current:
        panels.append(current)
    out: list[str] = []
    for number, panel in enumerate(panels):
        if number:
            out.append("")
        for r in range(len(rows) + 1):
            line = columns[0][r].ljust(name_width)
            for index in panel:
                line += " | " + columns[index][r].ljust(widths[index])
            out.append(line.rstrip())
            if r == 0:
                out.append("-" * len(out[-1]))
    return "\n".join(out)


def trace_figure(trace: Trace, spec: Spec, shard: int | None = None, width: int | None = None) -> str:
    shard = shard if shard is not None else (trace.focus if trace.focus is not None else 0)
    header, rows = trace_rows(trace, spec, shard)
    return render_table(header, rows, width)


def markdown_table(trace: Trace, spec: Spec, shard: int | None = None) -> str:
    shard = shard if shard is not None else (trace.focus if trace.focus is not None else 0)
    header, rows = trace_rows(trace, spec, shard)
    lines = ["| " + " | ".join(f"`{h}`" if i else h for i, h in enumerate(header)) + " |", "|" + "---|" * len(header)]
    for row in rows:
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
