"""Traces as figures: one column per action, one row per field of the shard a trace is about.

The seed explains its bug with exactly this picture; the checker, `replay` and the
generated tests all print it. Changed cells are marked `*`; a ledger cell whose value
was inherited from an earlier process incarnation (unchanged since before the last
`incarnation` bump, and different from a fresh process's value) is marked `!`, unless the
field is declared `persistent`. History (ghost) rows are prefixed `~` and come last.

Drawn for a property (`prop`), a figure marks the step that breaks it (`model.breaking`):
its column `[breaks]` (and the step before `[before]`, for a step property), the cells the
property reads there in brackets, and the property's message under the panel that holds it.
Its rows are the fields the property reads, then the fields the trace changes; the rest are
named in one folded line (`all_fields` keeps every row). Drawn without one (the generated
tests' docstrings), it shows every ledger field and the history rows that change.

One figure (`figure_of`), several renderings: aligned text split into panels that fit the
terminal (`render_table`, optionally with ANSI colour), a Markdown table (`markdown_table`)
and HTML tables in panels (`html_table`). The text rendering without colour is what generated
tests carry in their docstrings, so it changes only on purpose (`ledgercheck gen --check`).
"""

from __future__ import annotations

import html
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from ledgercheck.model import ir
from ledgercheck.model.breaking import Break, find_break, property_reads
from ledgercheck.model.spec import Property, Spec
from ledgercheck.model.trace import Step, Trace

CHANGED = "*"
INHERITED = "!"
HISTORY = "~"
READ_OPEN, READ_CLOSE = "[", "]"
BREAKS_LABEL = " [breaks]"
BEFORE_LABEL = " [before]"
LEGEND = (
    f"{CHANGED} changed by the step; {INHERITED} held over from an earlier process incarnation; "
    f"{HISTORY} history (ghost) variable;\n{READ_OPEN}x{READ_CLOSE} read by the property at the step marked "
    f"{BREAKS_LABEL.strip()} (and{BEFORE_LABEL}, for a step property)"
)
"""The legend of a spec with every kind of mark; `legend(spec)` keeps only the marks a spec's
figures can show."""


def shows_inherited(spec: Spec) -> bool:
    """Whether a figure of `spec` can mark a value `!` (held over from an earlier process
    incarnation): only a spec that counts incarnations in a history field `incarnation`."""
    return any(h.name == "incarnation" for h in spec.history)


def _drop(text: str, part: str, keep: bool) -> str:
    return text if keep else text.replace(part, "")


def legend(spec: Spec) -> str:
    """`LEGEND` without the marks `spec`'s figures never show (a job table has no process
    incarnations, a spec without history no ghost variables)."""
    text = _drop(LEGEND, f" {INHERITED} held over from an earlier process incarnation;", shows_inherited(spec))
    return _drop(text, f" {HISTORY} history (ghost) variable;", bool(spec.history))


# ANSI styles (SGR): changed cells bold yellow, inherited cells red.
ANSI = {CHANGED: "\x1b[1;33m", INHERITED: "\x1b[31m", READ_OPEN: "\x1b[7m"}
ANSI_RESET = "\x1b[0m"


@dataclass(frozen=True)
class Cell:
    """One value of the figure and its mark: "" (unchanged), CHANGED or INHERITED; `read`
    when the property reads it at the breaking step (or, for a step property, the step before)."""

    value: str
    mark: str = ""
    read: bool = False

    @property
    def text(self) -> str:
        text = self.value + self.mark
        return f"{READ_OPEN}{text}{READ_CLOSE}" if self.read else text


@dataclass(frozen=True)
class Row:
    name: str
    cells: tuple[Cell, ...]
    kind: str  # "calls" | "field" | "fleet" | "history"
    read: bool = False
    """The property (or its `when`) reads this field."""


@dataclass(frozen=True)
class Figure:
    """A trace seen from one shard: column labels and rows of marked cells, the step that
    breaks the property (when the figure is drawn for one) and the rows folded away."""

    shard: int
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    breaking: Break | None = None
    folded: tuple[str, ...] = ()
    """Ledger fields neither read by the property nor changed, as `name = value`."""
    folded_history: tuple[str, ...] = ()
    """History variables the property does not read."""

    @property
    def header(self) -> list[str]:
        return [f"shard {self.shard}", *self.columns]

    def break_line(self) -> str | None:
        """The breaking step in one sentence (None: nothing breaks on this trace)."""
        if self.breaking is None:
            return None
        return self.breaking.line(self.columns[self.breaking.step].split(" [")[0])

    def folded_line(self) -> str | None:
        """What the figure leaves out, and how to see it."""
        parts = []
        if self.folded:
            parts.append("unchanged and not read by the property: " + ", ".join(self.folded))
        if self.folded_history:
            parts.append(f"history not read: {', '.join(HISTORY + n for n in self.folded_history)}")
        return f"({'; '.join(parts)}; --all-fields shows every row)" if parts else None


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


def _reads_outcome(prop: Property) -> bool:
    """Whether a step property reads its call's outcome (`raised`, `result`)."""
    return any(isinstance(n, ir.LocalRef) and n.name in ("raised", "result") for n in ir.walk([prop.when, prop.check]))


def focus_of(trace: Trace, shard: int | None = None) -> int:
    if shard is not None:
        return shard
    return trace.focus if trace.focus is not None else 0


def figure_of(
    trace: Trace, spec: Spec, shard: int | None = None, prop: Property | None = None, all_fields: bool = False
) -> Figure:
    """The figure as data. Without a property: every ledger field of the shard in the spec's
    order, history rows where they change. For a property: the step that breaks it marked,
    the fields it reads first (their cells at that step marked), then the fields the trace
    changes, the rest folded (`all_fields` keeps every row); history rows after the ledger's."""
    breaking = find_break(trace, spec, prop) if prop is not None else None
    if breaking is not None and breaking.shard is not None and shard is None:
        shard = breaking.shard
    if breaking is not None and breaking.shard is None and shard is None and trace.focus is None:
        # A fleet property's break is no shard's: show the shard the breaking call acts on
        # (shard 0 was shown, untouched, while a rollout's calls went to shards 1 and 2).
        acting = reversed(trace.steps[breaking.step].calls)
        shard = next((c.shard for c in acting if 0 <= c.shard < trace.shard_count), None)
    shard = focus_of(trace, shard)
    steps = trace.steps
    marked = {breaking.step, breaking.before} - {None} if breaking is not None else set()
    reads = property_reads(prop, spec) if prop is not None else frozenset()
    calls: list[Row] = []
    if trace.environment != "ledger" or any(len(s.calls) != 1 for s in steps[1:]):
        calls.append(Row("calls on shard", tuple(Cell(focus_events(s, shard)) for s in steps), "calls"))
    if spec.notifications:
        reads_emitted = prop is not None and any(isinstance(n, ir.Emitted) for n in ir.walk([prop.when, prop.check]))
        texts = ["; ".join(n.text for n in s.announced if n.shard == shard) or "-" for s in steps]
        at = breaking.step if breaking is not None else None  # `emitted` is about the breaking call alone
        announced = tuple(Cell(text, "", reads_emitted and index == at) for index, text in enumerate(texts))
        calls.append(Row("announced", announced, "calls", reads_emitted))
    outcomes = ["; ".join(c.outcome for c in s.calls if c.shard == shard and c.outcome) for s in steps[1:]]
    if any(outcomes):  # what the calls gave their callers: a property may read it (`raised`, `result`)
        reads_outcome = prop is not None and _reads_outcome(prop)
        at = breaking.step if breaking is not None else None
        texts = ["-", *(text or "-" for text in outcomes)]
        given = tuple(Cell(text, "", reads_outcome and index == at) for index, text in enumerate(texts))
        calls.append(Row("outcome", given, "calls", reads_outcome))
    incarnation = [s.after["history"]["shards"][shard].get("incarnation") for s in steps]
    fresh = _fresh_values(spec, trace.policy)
    fields: list[Row] = []
    for field in spec.fields:
        values = [s.after["shards"][shard][field.name] for s in steps]
        cells = []
        for index, value in enumerate(values):
            mark = ""
            if index and value != values[index - 1]:
                mark = CHANGED
            elif not field.persistent and _inherited(values, incarnation, index, fresh.get(field.name, value)):
                mark = INHERITED
            cells.append(Cell(cell(value), mark, field.name in reads and index in marked))
        fields.append(Row(field.name, tuple(cells), "field", field.name in reads))
    history: list[Row] = []
    for field in spec.history:
        values = [s.after["history"]["shards"][shard][field.name] for s in steps]
        if all_fields or field.name in reads or len(set(map(repr, values))) > 1:
            read = marked if field.name in reads else set()
            history.append(Row(f"{HISTORY}{field.name}", _cells(values, read), "history", field.name in reads))
    fleet = _fleet_rows(trace, prop, marked, all_fields) + _other_shards(trace, spec, prop, shard, reads, marked)
    columns = list(loop_labels(trace))
    if breaking is not None:
        columns[breaking.step] += BREAKS_LABEL
        if breaking.before is not None and breaking.before > 0:
            columns[breaking.before] += BEFORE_LABEL
    if prop is None or all_fields:
        return Figure(shard, tuple(columns), (*calls, *fields, *fleet, *history), breaking)
    read_rows = [r for r in fields if r.read] + fleet
    changed_rows = [r for r in fields if not r.read and any(c.mark for c in r.cells)]
    rest = [r for r in fields if not r.read and not any(c.mark for c in r.cells)]
    folded = tuple(f"{r.name} = {r.cells[0].value}" for r in rest)
    shown_history = [r for r in history if r.read]
    folded_history = tuple(r.name.removeprefix(HISTORY) for r in history if not r.read)
    rows = (*calls, *read_rows, *changed_rows, *shown_history)
    return Figure(shard, tuple(columns), rows, breaking, folded, folded_history)


FLEET = "fleet "
"""The prefix of a fleet value's row (a `[globals]` value, or an environment's variable)."""


def _other_shards(
    trace: Trace, spec: Spec, prop: Property | None, shard: int, reads: Collection[str], marked: set[int | None]
) -> list[Row]:
    """For a fleet property, the fields it reads of every other shard the trace calls
    (`shard 1 state`): a rollout's figure showed one replica draining, and not the other
    that made two too many."""
    if prop is None or not prop.fleet:
        return []
    others = sorted(
        {c.shard for s in trace.steps[1:] for c in s.calls if 0 <= c.shard < trace.shard_count and c.shard != shard}
    )
    rows: list[Row] = []
    for other in others:
        for field in spec.fields:
            if field.name not in reads:
                continue
            values = [s.after["shards"][other][field.name] for s in trace.steps]
            rows.append(Row(f"shard {other} {field.name}", _cells(values, marked), "field", True))
    return rows


def _fleet_rows(trace: Trace, prop: Property | None, marked: set[int | None], all_fields: bool) -> list[Row]:
    """The fleet values a property reads (`window_restarts <= max_restarts`), or with
    `all_fields` every one: a shard's rows alone do not show what breaks a fleet property."""
    read = {n.name for n in ir.walk([prop.when, prop.check]) if isinstance(n, ir.GlobalRef)} if prop else set()
    return fleet_rows(trace, lambda name: all_fields or name in read, read, marked)


def fleet_rows(
    trace: Trace, shown: Callable[[str], bool], read: Collection[str] = (), marked: Collection[int | None] = ()
) -> list[Row]:
    """A row per fleet value `shown` picks (`[globals]`, then the environment's variables),
    its changes marked, and its cells at the `marked` steps where it is `read`."""
    rows: list[Row] = []
    for part in ("fleet", "environment"):
        names = list(trace.steps[0].after.get(part, {})) if trace.steps else []
        for name in names:
            if not shown(name):
                continue
            values = [s.after.get(part, {}).get(name) for s in trace.steps]
            rows.append(Row(f"{FLEET}{name}", _cells(values, marked if name in read else ()), "fleet", name in read))
    return rows


def _cells(values: Sequence[Any], read_at: Collection[int | None]) -> tuple[Cell, ...]:
    """A row's cells: each value, marked where it changed, read at the steps `read_at`."""
    return tuple(
        Cell(cell(value), CHANGED if index and value != values[index - 1] else "", index in read_at)
        for index, value in enumerate(values)
    )


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


def _fresh_values(spec: Spec, policy: Mapping[str, int]) -> dict[str, Any]:
    return {f.name: f.initial_at(policy) for f in spec.fields if f.initial_from is None}


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


def panel_columns(widths: Sequence[int], width: int) -> list[list[int]]:
    """Columns 1.. (column 0 holds the row names, repeated in every panel) grouped into
    panels no wider than `width` characters (a panel holds at least one column)."""
    panels: list[list[int]] = []
    current: list[int] = []
    used = widths[0]
    for index in range(1, len(widths)):
        need = widths[index] + 3
        if current and used + need > width:
            panels.append(current)
            current, used = [], widths[0]
        current.append(index)
        used += need
    if current:
        panels.append(current)
    return panels


def render_table(
    header: list[str],
    rows: list[list[str]],
    width: int | None = None,
    marks: Sequence[Sequence[str]] | None = None,
    colour: bool = False,
    notes: Mapping[int, str] | None = None,
) -> str:
    """Aligned text, split into panels of columns when wider than `width`.

    `marks` (parallel to `rows`, one mark per column after the row name) and `colour` style
    the cells with ANSI codes; the layout, and the text without colour, stay the same.
    `notes` maps a column (1 is the first after the row names) to a line printed under the
    panel that holds it."""
    width = width or shutil.get_terminal_size((120, 24)).columns
    columns = list(zip(header, *rows, strict=True))
    name_width = max(len(c) for c in columns[0])
    widths = [max(len(c) for c in col) for col in columns]
    panels = panel_columns(widths, width)
    out: list[str] = []
    for number, panel in enumerate(panels):
        if number:
            out.append("")
        for r in range(len(rows) + 1):
            line = columns[0][r].ljust(name_width)
            for index in panel:
                text = columns[index][r]
                style = "".join(ANSI.get(m, "") for m in marks[r - 1][index - 1]) if colour and marks and r else ""
                if style:
                    line += " | " + style + text + ANSI_RESET + " " * (widths[index] - len(text))
                else:
                    line += " | " + text.ljust(widths[index])
            out.append(line.rstrip())
            if r == 0:
                out.append("-" * len(out[-1]))
        for index, note in sorted((notes or {}).items()):
            if index in panel:
                head, sep, tail = note.partition(": ")
                out += [f">> {head}{sep.rstrip()}", f"   {tail}"] if sep else [f">> {note}"]
    return "\n".join(out)


def trace_figure(
    trace: Trace,
    spec: Spec,
    *,
    shard: int | None = None,
    width: int | None = None,
    colour: bool = False,
    prop: Property | None = None,
    all_fields: bool = False,
) -> str:
    """The figure as aligned text; `colour` adds ANSI styles (callers decide: `colour_enabled`).
    For a property, the breaking step's sentence (`>> step ...`) follows the panel that holds
    it, and a last line names the folded rows."""
    figure = figure_of(trace, spec, shard, prop, all_fields)
    rows = [[row.name, *(c.text for c in row.cells)] for row in figure.rows]
    marks = [[c.mark + (READ_OPEN if c.read else "") for c in row.cells] for row in figure.rows]
    line = figure.break_line()
    notes = {figure.breaking.step + 1: line} if figure.breaking is not None and line else None
    text = render_table(figure.header, rows, width, marks, colour, notes)
    folded = figure.folded_line()
    if folded is None:
        return text
    columns = width or shutil.get_terminal_size((120, 24)).columns
    return text + "\n" + textwrap.fill(folded, columns, break_on_hyphens=False)


# --- Markdown --------------------------------------------------------------------------------

MARKDOWN_LEGEND = (
    f"**bold**: changed by the step; `{INHERITED}`: held over from an earlier process incarnation; "
    f"`{HISTORY}`: history (ghost) variable; \\[cell\\]: read by the property at the step marked "
    f"`{BREAKS_LABEL.strip()}` (and `{BEFORE_LABEL.strip()}`, for a step property)"
)


def markdown_legend(spec: Spec) -> str:
    """`MARKDOWN_LEGEND` with only the marks `spec`'s tables can show (see `legend`)."""
    text = _drop(
        MARKDOWN_LEGEND, f" `{INHERITED}`: held over from an earlier process incarnation;", shows_inherited(spec)
    )
    return _drop(text, f" `{HISTORY}`: history (ghost) variable;", bool(spec.history))


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
        code = f"**{code}**"
    elif c.mark == INHERITED:
        code = f"{code} {INHERITED}"
    return f"\\[{code}\\]" if c.read else code


def markdown_table(
    trace: Trace, spec: Spec, shard: int | None = None, prop: Property | None = None, all_fields: bool = False
) -> str:
    """The figure as a GFM table: changed cells bold, inherited cells followed by `!`; for a
    property, the breaking step's column marked `[breaks]`, the cells it reads in brackets,
    and a sentence under the table naming the step and the property's message."""
    figure = figure_of(trace, spec, shard, prop, all_fields)
    header = [md_text(figure.header[0]), *(md_code(c) for c in figure.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in figure.rows:
        name = md_text(row.name) if row.kind == "calls" else md_code(row.name)
        lines.append("| " + " | ".join([name, *(_md_cell(c) for c in row.cells)]) + " |")
    line, folded = figure.break_line(), figure.folded_line()
    if line:
        head, _, tail = line.partition(": ")
        lines += ["", f"**{md_text(head)}**: {md_text(tail)}"]
    if folded:
        lines += ["", f"_{md_text(folded)}_"]
    return "\n".join(lines)


# --- HTML ------------------------------------------------------------------------------------

HTML_CLASS = {CHANGED: "changed", INHERITED: "inherited"}
HTML_PANEL_WIDTH = 170
"""Characters of monospace per HTML panel: at 13 px, a panel fits a 1400 px screen."""


def html_text(value: str) -> str:
    """Escaped HTML text; `://` is written `&#58;//`, so that a value that looks like a URL
    (a base URL in a trace) is never mistaken for a reference by a scan of the page."""
    return html.escape(value).replace("://", "&#58;//")


def html_table(
    trace: Trace,
    spec: Spec,
    shard: int | None = None,
    prop: Property | None = None,
    all_fields: bool = False,
    width: int = HTML_PANEL_WIDTH,
) -> str:
    """The figure as HTML tables, split into panels like the text figure (`width` characters
    of monospace each), so that no column, the breaking step's included, is off-screen. Every
    panel repeats the row names. Cells carry class `changed` / `inherited` (and keep their
    mark), cells the property reads at the breaking step class `read`; the breaking step's
    header cell has class `breaks`, and its sentence follows its panel (`p.breaks`)."""
    figure = figure_of(trace, spec, shard, prop, all_fields)
    esc = html_text
    texts = [[figure.header[0], *(r.name for r in figure.rows)]]
    texts += [[label, *(r.cells[i].text for r in figure.rows)] for i, label in enumerate(figure.columns)]
    panels = panel_columns([max(len(t) for t in column) for column in texts], width)
    line = figure.break_line()
    out = ['<div class="panels">']
    for panel in panels:
        out += ['<table class="figure">', "<thead><tr>"]
        out.append(f'<th scope="col" class="rowname">{esc(figure.header[0])}</th>')
        for index in panel:
            column = index - 1
            label = figure.columns[column]
            cls = ""
            if figure.breaking is not None and column == figure.breaking.step:
                cls = ' class="breaks"'
            elif figure.breaking is not None and column == figure.breaking.before:
                cls = ' class="before"'
            out.append(f'<th scope="col"{cls}><code>{esc(label)}</code></th>')
        out.append("</tr></thead>")
        out.append("<tbody>")
        for row in figure.rows:
            name_cls = " read" if row.read else ""
            cells = [f'<tr class="{row.kind}"><th scope="row" class="rowname{name_cls}">{esc(row.name)}</th>']
            for index in panel:
                c = row.cells[index - 1]
                classes = [HTML_CLASS[c.mark]] if c.mark in HTML_CLASS else []
                classes += ["read"] if c.read else []
                attr = f' class="{" ".join(classes)}"' if classes else ""
                mark = f'<span class="mark">{esc(c.mark)}</span>' if c.mark else ""
                cells.append(f"<td{attr}>{esc(c.value)}{mark}</td>")
            cells.append("</tr>")
            out.append("".join(cells))
        out.append("</tbody></table>")
        if line and figure.breaking is not None and figure.breaking.step + 1 in panel:
            head, _, tail = line.partition(": ")
            out.append(f'<p class="breaks"><strong>{esc(head)}</strong>: {esc(tail)}</p>')
    folded = figure.folded_line()
    if folded:
        out.append(f'<p class="folded">{esc(folded)}</p>')
    out.append("</div>")
    return "\n".join(out)
