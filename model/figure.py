"""Traces as figures: one column per action, one row per field of the shard a trace is about.

The seed explains its bug with exactly this picture; the checker, `replay` and the
generated tests all print it. Changed cells are marked `*`; a ledger cell whose value
was inherited from an earlier process incarnation (unchanged since before the last
`incarnation` bump, and different from a fresh process's value) is marked `!`. History
(ghost) rows are prefixed `~` and shown only when their value changes somewhere in the trace.

One figure (`figure_of`), several renderings: aligned text split into panels that fit the
terminal (`render_table`, optionally with ANSI colour), a Markdown table (`markdown_table`)
and an HTML table (`html_table`). The text rendering without colour is what generated tests
carry in their docstrings, so it changes only on purpose (`ledgercheck gen --check`).
"""

from __future__ import annotations

import html
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from model.spec import Spec
from model.trace import Step, Trace

CHANGED = "*"
INHERITED = "!"
HISTORY = "~"
LEGEND = (
    f"{CHANGED} changed by the step; {INHERITED} held over from an earlier process incarnation; "
    f"{HISTORY} history (ghost) variable"
)

# ANSI styles (SGR): changed cells bold yellow, inherited cells red.
ANSI = {CHANGED: "\x1b[1;33m", INHERITED: "\x1b[31m"}
ANSI_RESET = "\x1b[0m"


@dataclass(frozen=True)
class Cell:
    """One value of the figure and its mark: "" (unchanged), CHANGED or INHERITED."""

    value: str
    mark: str = ""

    @property
    def text(self) -> str:
        return self.value + self.mark


@dataclass(frozen=True)
class Row:
    name: str
    cells: tuple[Cell, ...]
    kind: str  # "calls" | "field" | "history"


@dataclass(frozen=True)
class Figure:
    """A trace seen from one shard: column labels and rows of marked cells."""

    shard: int
    columns: tuple[str, ...]
    rows: tuple[Row, ...]

    @property
    def header(self) -> list[str]:
        return [f"shard {self.shard}", *self.columns]


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


def focus_of(trace: Trace, shard: int | None = None) -> int:
    if shard is not None:
        return shard
    return trace.focus if trace.focus is not None else 0


def figure_of(trace: Trace, spec: Spec, shard: int | None = None) -> Figure:
    """The figure as data: every field of the shard (history rows only where they change)."""
    shard = focus_of(trace, shard)
    steps = trace.steps
    rows: list[Row] = []
    if trace.environment != "ledger" or any(len(s.calls) != 1 for s in steps[1:]):
        rows.append(Row("calls on shard", tuple(Cell(focus_events(s, shard)) for s in steps), "calls"))
    incarnation = [s.after["history"]["shards"][shard].get("incarnation") for s in steps]
    fresh = _fresh_values(spec)
    for field in spec.fields:
        values = [s.after["shards"][shard][field.name] for s in steps]
        cells = []
        for index, value in enumerate(values):
            mark = ""
            if index and value != values[index - 1]:
                mark = CHANGED
            elif not field.persistent and _inherited(values, incarnation, index, fresh.get(field.name, value)):
                mark = INHERITED
            cells.append(Cell(cell(value), mark))
        rows.append(Row(field.name, tuple(cells), "field"))
    for field in spec.history:
        values = [s.after["history"]["shards"][shard][field.name] for s in steps]
        if len(set(map(repr, values))) > 1:
            cells = []
            for index, value in enumerate(values):
                changed = index and value != values[index - 1]
                cells.append(Cell(cell(value), CHANGED if changed else ""))
            rows.append(Row(f"{HISTORY}{field.name}", tuple(cells), "history"))
    return Figure(shard, loop_labels(trace), tuple(rows))


def loop_labels(trace: Trace) -> tuple[str, ...]:
    """Column labels; a lasso's loop is marked on them, so every format that shows the
    columns (text, Markdown, HTML, JUnit) shows where the loop starts and where it returns."""
    labels = [column_label(s) for s in trace.steps]
    start = trace.loop_start
    if start is not None:
        if start == trace.depth:
            labels[start] += " [no action enabled: stutters forever]"
        else:
            labels[start] += " [loop starts after this]"
            labels[-1] += f" [back to step {start}]"
    return tuple(labels)


def trace_rows(trace: Trace, spec: Spec, shard: int) -> tuple[list[str], list[list[str]]]:
    """The figure as text: header labels and rows of cells (first cell is the row name)."""
    figure = figure_of(trace, spec, shard)
    return figure.header, [[row.name, *(c.text for c in row.cells)] for row in figure.rows]


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


# --- text ----------------------------------------------------------------------------------


def colour_enabled(stream: TextIO | None = None) -> bool:
    """ANSI colour for `stream` (default stdout): only on a terminal, and never when NO_COLOR
    is set to a non-empty value (https://no-color.org) or TERM is `dumb`."""
    stream = stream if stream is not None else sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def render_table(
    header: list[str],
    rows: list[list[str]],
    width: int | None = None,
    marks: Sequence[Sequence[str]] | None = None,
    colour: bool = False,
) -> str:
    """Aligned text, split into panels of columns when wider than `width`.

    `marks` (parallel to `rows`, one mark per column after the row name) and `colour` style
    the cells with ANSI codes; the layout, and the text without colour, stay the same."""
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
                text = columns[index][r]
                style = ANSI.get(marks[r - 1][index - 1], "") if colour and marks and r else ""
                if style:
                    line += " | " + style + text + ANSI_RESET + " " * (widths[index] - len(text))
                else:
                    line += " | " + text.ljust(widths[index])
            out.append(line.rstrip())
            if r == 0:
                out.append("-" * len(out[-1]))
    return "\n".join(out)


def trace_figure(
    trace: Trace, spec: Spec, shard: int | None = None, width: int | None = None, colour: bool = False
) -> str:
    """The figure as aligned text; `colour` adds ANSI styles (callers decide: `colour_enabled`)."""
    figure = figure_of(trace, spec, shard)
    rows = [[row.name, *(c.text for c in row.cells)] for row in figure.rows]
    marks = [[c.mark for c in row.cells] for row in figure.rows]
    return render_table(figure.header, rows, width, marks, colour)


# --- Markdown --------------------------------------------------------------------------------

MARKDOWN_LEGEND = (
    f"**bold**: changed by the step; `{INHERITED}`: held over from an earlier process incarnation; "
    f"`{HISTORY}`: history (ghost) variable"
)


def md_code(text: str) -> str:
    """`text` as a code span that is safe inside a GFM table cell."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    body = text.replace("|", "\\|")
    return f"{fence}{pad}{body}{pad}{fence}"


def md_text(text: str) -> str:
    """Plain text safe inside a GFM table cell or list item (no accidental emphasis)."""
    out = text.replace("\\", "\\\\")
    for char in "|*_`[]<>":
        out = out.replace(char, "\\" + char)
    return out.replace("\n", " ")


def _md_cell(c: Cell) -> str:
    code = md_code(c.value)
    if c.mark == CHANGED:
        return f"**{code}**"
    if c.mark == INHERITED:
        return f"{code} {INHERITED}"
    return code


def markdown_table(trace: Trace, spec: Spec, shard: int | None = None) -> str:
    """The figure as a GFM table: changed cells bold, inherited cells followed by `!`."""
    figure = figure_of(trace, spec, shard)
    header = [md_text(figure.header[0]), *(md_code(c) for c in figure.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in figure.rows:
        name = md_text(row.name) if row.kind == "calls" else md_code(row.name)
        lines.append("| " + " | ".join([name, *(_md_cell(c) for c in row.cells)]) + " |")
    return "\n".join(lines)


# --- HTML ------------------------------------------------------------------------------------

HTML_CLASS = {CHANGED: "changed", INHERITED: "inherited"}


def html_text(value: str) -> str:
    """Escaped HTML text; `://` is written `&#58;//`, so that a value that looks like a URL
    (a base URL in a trace) is never mistaken for a reference by a scan of the page."""
    return html.escape(value).replace("://", "&#58;//")


def html_table(trace: Trace, spec: Spec, shard: int | None = None) -> str:
    """The figure as an HTML table; cells carry class `changed` / `inherited` (and keep their mark)."""
    figure = figure_of(trace, spec, shard)
    esc = html_text
    out = ['<table class="figure">', "<thead><tr>"]
    out.append(f'<th scope="col" class="rowname">{esc(figure.header[0])}</th>')
    out += [f'<th scope="col"><code>{esc(c)}</code></th>' for c in figure.columns]
    out.append("</tr></thead>")
    out.append("<tbody>")
    for row in figure.rows:
        cells = [f'<tr class="{row.kind}"><th scope="row" class="rowname">{esc(row.name)}</th>']
        for c in row.cells:
            cls = HTML_CLASS.get(c.mark)
            attr = f' class="{cls}"' if cls else ""
            mark = f'<span class="mark">{esc(c.mark)}</span>' if c.mark else ""
            cells.append(f"<td{attr}>{esc(c.value)}{mark}</td>")
        cells.append("</tr>")
        out.append("".join(cells))
    out.append("</tbody></table>")
    return "\n".join(out)
