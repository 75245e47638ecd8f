"""`ledgercheck report`: one self-contained HTML page of a check run.

The page holds the verdict of every (variant, property), every trace as the figure (an HTML
table, changed and inherited cells styled), and the spec's state diagram as inline SVG,
derived from the spec by `model.diagram`. It has no script and no external reference (no
network, no CDN): it works from file:// and as a CI artefact. It is written atomically
(a temporary file in the same directory, then `os.replace`), so a reader never sees half a
page and a failed run leaves the previous page in place.
"""

from __future__ import annotations

import contextlib
import html
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ledgercheck.model.console import progress_for
from ledgercheck.model.diagram import StateDiagram, minimal_policy, state_diagram, svg
from ledgercheck.model.errors import UsageError
from ledgercheck.model.figure import figure_of, html_table, shows_inherited
from ledgercheck.model.formats import (
    expectation_text,
    spec_label,
    summary_names,
    summary_text,
    trace_groups,
    verdict_text,
)
from ledgercheck.model.result import Result, Status
from ledgercheck.model.runs import DEFAULT_DEPTH, CheckRequest, exit_code, outcome, reading_order, run_checks
from ledgercheck.model.spec import Spec, SpecFile, load_spec, policy_text


def report_command(
    *,
    spec: str | None,
    html: str,
    variant: list[str] | None,
    property: list[str] | None,
    environment: str | None,
    shards: int | None,
    policy: list[tuple[str, int]],
    max_depth: int | None,
    max_traces: int,
    timeout: float | None,
    progress: bool | None,
) -> int:
    """`ledgercheck report`: the checks of `check`, written as one HTML page."""
    target = Path(html)
    check_writable(target)
    spec_file = load_spec(spec)
    max_depth = spec_file.variant().search_depth(max_depth, DEFAULT_DEPTH)
    request = CheckRequest(
        spec_file,
        variants=tuple(variant) if variant else None,
        properties=tuple(property) if property else None,
        environment=environment,
        shards=shards,
        policy=dict(policy),
        max_depth=max_depth,
        max_traces=max_traces,
        timeout=timeout,
    )
    reporter = progress_for(progress)
    try:
        results = run_checks(request, reporter)
    finally:
        if reporter is not None:
            reporter.close()
    settings = {
        "environment": environment or "every environment each property applies to",
        "shards": str(shards or spec_file.variant().default_shards),
        "max depth": str(max_depth),
        "max traces": str(max_traces),
    }
    page = render(spec_file, results, settings, policy=dict(policy))
    write_atomic(target, page)
    print(f"wrote {target}: {summary_text(results)}")
    return exit_code(results)


# --- writing -------------------------------------------------------------------------------


def check_writable(target: Path) -> None:
    """Fail before the checks run, not after, when the page cannot be written."""
    directory = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise UsageError(f"--html {target}: is a directory")
    if not directory.is_dir():
        raise UsageError(f"--html {target}: no directory {directory}")
    if not os.access(directory, os.W_OK):
        raise UsageError(f"--html {target}: cannot write in {directory}")


def write_atomic(target: Path, text: str) -> None:
    """Write `text` to `target` through a temporary file in the same directory and `os.replace`."""
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise UsageError(f"cannot write {target}: {exc.strerror}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _mode_for(target: Path) -> int:
    """Keep an existing page's permissions; a new page gets the usual 0666 & ~umask."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


# --- the page ------------------------------------------------------------------------------


def esc(value: object) -> str:
    """HTML text. `://` is written `&#58;//`: the page refers to nothing outside itself, and
    a scan of the file for http(s):// (a base URL in a trace) finds nothing to fetch."""
    return html.escape(str(value)).replace("://", "&#58;//")


def anchor(variant: str, prop: str, environment: str = "") -> str:
    return f"r-{variant}-{prop}{'-' + environment if environment else ''}".replace(" ", "-")


CSS = """
:root { color-scheme: light; --fg: #212529; --muted: #6c757d; --line: #dee2e6; --head: #f8f9fa;
  --changed-bg: #fff3bf; --changed-fg: #5c3c00; --inherited-bg: #ffe3e3; --inherited-fg: #c92a2a;
  --ok: #2b8a3e; --bad: #c92a2a; --warn: #e67700; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
  margin: 0 auto; padding: 24px 32px 64px; max-width: 1600px; }
h1 { font-size: 1.6em; margin: 0 0 4px; }
h2 { font-size: 1.25em; margin: 36px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 1.05em; margin: 28px 0 4px; }
h4 { font-size: 0.95em; margin: 18px 0 6px; font-weight: 600; }
code, .figure { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
.muted { color: var(--muted); }
dl.settings { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 12px 0; }
dl.settings dt { color: var(--muted); } dl.settings dd { margin: 0; }
.summary { font-weight: 600; padding: 8px 12px; border-radius: 6px; display: inline-block; }
.summary.pass { background: #ebfbee; color: var(--ok); } .summary.fail { background: #fff5f5; color: var(--bad); }
.mismatch-tag { color: var(--bad); font-size: 0.8em; margin-left: 0.5em; }
table.verdicts { border-collapse: collapse; margin: 8px 0; }
table.verdicts th, table.verdicts td { border: 1px solid var(--line); padding: 4px 10px; text-align: left;
  vertical-align: top; }
table.verdicts thead th { background: var(--head); }
tr.match td.outcome { color: var(--ok); } tr.mismatch td.outcome { color: var(--bad); font-weight: 700; }
tr.unknown td.outcome { color: var(--warn); font-weight: 700; } tr.skipped td { color: var(--muted); }
.panels table.figure { margin: 0 0 10px; }
table.figure { border-collapse: collapse; white-space: nowrap; border: 1px solid var(--line); }
table.figure th, table.figure td { border-bottom: 1px solid var(--line); border-right: 1px solid var(--line);
  padding: 2px 8px; text-align: left; }
table.figure thead th { background: var(--head); position: sticky; top: 0; }
table.figure th.rowname { position: sticky; left: 0; background: var(--head); font-weight: 600; z-index: 1; }
table.figure tr.history th.rowname { color: var(--muted); font-weight: 400; }
table.figure tr.calls td { color: var(--muted); font-style: italic; }
table.figure td.changed { background: var(--changed-bg); color: var(--changed-fg); font-weight: 700; }
table.figure td.inherited { background: var(--inherited-bg); color: var(--inherited-fg); font-weight: 700; }
table.figure .mark { opacity: 0.7; margin-left: 1px; }
table.figure thead th.breaks { background: var(--bad); color: #fff; }
table.figure thead th.before { background: #ffd8a8; }
table.figure td.read { outline: 3px solid var(--bad); outline-offset: -3px; }
table.figure th.rowname.read { color: var(--bad); }
p.breaks { margin: -4px 0 12px; padding: 4px 10px; border-left: 4px solid var(--bad); background: #fff5f5; }
p.folded { color: var(--muted); font-size: 0.9em; margin: 0 0 12px; max-width: 1200px; }
ul.breaks { margin: 8px 0; padding-left: 20px; } ul.breaks li { margin: 2px 0; }
.legend span { display: inline-block; padding: 0 6px; margin-right: 10px; border-radius: 3px; }
.legend .changed { background: var(--changed-bg); color: var(--changed-fg); font-weight: 700; }
.legend .inherited { background: var(--inherited-bg); color: var(--inherited-fg); font-weight: 700; }
.legend .read { outline: 3px solid var(--bad); outline-offset: -3px; }
.legend .breaks { background: var(--bad); color: #fff; }
figure.diagram { margin: 8px 0; } figure.diagram svg { max-width: 100%; height: auto; }
figure.diagram figcaption { color: var(--muted); font-size: 0.9em; max-width: 900px; }
details.lax summary { cursor: pointer; color: var(--muted); }
table.lax { border-collapse: collapse; font-size: 0.9em; margin: 6px 0; }
table.lax th, table.lax td { border: 1px solid var(--line); padding: 2px 8px; text-align: left; }
p.doc { max-width: 1000px; margin: 4px 0; }
footer { margin-top: 48px; color: var(--muted); font-size: 0.85em; }
"""


def render(
    spec_file: SpecFile,
    results: Sequence[Result],
    settings: dict[str, str],
    policy: dict[str, int] | None = None,
    diagram_depth: int | None = None,
) -> str:
    """The whole page. Deterministic: the same results give the same bytes."""
    base = spec_file.variant()
    title = f"ledgercheck report: {base.title or base.name}"
    failing = [r for r in results if r.matches is False]
    unknown = [r for r in results if r.status == Status.UNKNOWN]
    ok = not failing and not unknown
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        "<header>",
        f"<h1>{esc(title)}</h1>",
        '<dl class="settings">',
        f"<dt>spec</dt><dd><code>{esc(spec_label(base))}</code> "
        f'<span class="muted">sha256 {esc(base.sha256[:16])}</span></dd>',
        f"<dt>variants</dt><dd>{esc(', '.join(sorted({r.variant for r in results}, key=base.variants.index)))}</dd>",
    ]
    out += [f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in settings.items()]
    shown_policy = base.resolve_policy(policy or {})
    out.append(f"<dt>policy</dt><dd><code>{esc(policy_text(shown_policy))}</code></dd>")
    out += [
        "</dl>",
        f'<p class="summary {"pass" if ok else "fail"}">{esc(summary_text(results))}</p>',
        *[f'<p class="summary fail">{esc(line)}</p>' for line in summary_names(results)],
        *_break_list(spec_file, results),
        "</header>",
        "<main>",
        '<section id="verdicts">',
        "<h2>Verdicts</h2>",
        _verdict_table(spec_file, results),
        "</section>",
    ]
    out += _diagram_section(spec_file, results, shown_policy, diagram_depth)
    out += _trace_sections(spec_file, results)
    out += [
        "</main>",
        "<footer>Written by <code>ledgercheck report</code>. Every trace was found by the bounded model "
        "checker and replayed on the executable model; the state diagram is derived from the spec by "
        "running it.</footer>",
        "</body>",
        "</html>",
    ]
    return "\n".join(out) + "\n"


def _break_list(spec_file: SpecFile, results: Sequence[Result]) -> list[str]:
    """Where each violated property breaks (its first trace), mismatches first: the first
    screen names the condemning steps, each linked to its trace."""
    items: list[str] = []
    seen: set[tuple[str, str]] = set()
    for result in reading_order(results):
        if not result.traces or (result.variant, result.property) in seen:
            continue
        seen.add((result.variant, result.property))
        spec = spec_file.variant(result.variant)
        line = figure_of(result.traces[0], spec, prop=spec.property(result.property)).break_line()
        if line:
            target = esc(anchor(result.variant, result.property, result.environment))
            items.append(
                f'<li><a href="#{target}"><code>{esc(result.variant)}</code> ({esc(result.environment)})</a>: '
                f"{esc(line)}</li>"
            )
    return ["<h2>Where each violated property breaks</h2>", '<ul class="breaks">', *items, "</ul>"] if items else []


def _verdict_table(spec_file: SpecFile, results: Sequence[Result]) -> str:
    rows = [
        '<table class="verdicts">',
        "<thead><tr><th>variant</th><th>property</th><th>environment</th><th>verdict</th><th>expected</th>"
        "<th>outcome</th></tr></thead>",
        "<tbody>",
    ]
    for result in reading_order(results):
        spec = spec_file.variant(result.variant)
        prop = spec.properties.get(result.property)
        claim = f' <span class="muted">(claim {prop.claim})</span>' if prop is not None and prop.claim else ""
        verdict = esc(verdict_text(result))
        if result.traces or result.lax_traces:
            verdict = f'<a href="#{esc(anchor(result.variant, result.property, result.environment))}">{verdict}</a>'
        if result.region is not None:
            verdict += f'<br><span class="muted">{esc(result.region_text())}</span>'
        kind = outcome(result)
        rows.append(
            f'<tr class="{kind}" data-variant="{esc(result.variant)}" data-property="{esc(result.property)}" '
            f'data-status="{esc(result.status)}" data-environment="{esc(result.environment)}">'
            f"<td><code>{esc(result.variant)}</code></td><td><code>{esc(result.property)}</code>{claim}</td>"
            f"<td>{esc(result.environment)}</td>"
            f"<td>{verdict}</td><td>{esc(result.expected or '-')}</td>"
            f'<td class="outcome">{esc(expectation_text(result))}</td></tr>'
        )
    rows += ["</tbody>", "</table>"]
    return "\n".join(rows)


def _diagram_section(
    spec_file: SpecFile, results: Sequence[Result], policy: dict[str, int], depth: int | None
) -> list[str]:
    variants = [v for v in spec_file.variants if any(r.variant == v for r in results)] or [spec_file.variants[0]]
    groups: list[tuple[list[str], StateDiagram, Spec]] = []
    for name in variants:
        spec = spec_file.variant(name)
        policies = [spec.resolve_policy(policy), minimal_policy(spec)]
        diagram = state_diagram(spec, policies) if depth is None else state_diagram(spec, policies, depth)
        for group in groups:
            if group[1].same_picture(diagram):
                group[0].append(name)
                break
        else:
            groups.append(([name], diagram, spec))
    out = ['<section id="state-diagram">', "<h2>State diagram</h2>"]
    for names, diagram, spec in groups:
        label = ", ".join(names)
        if len(groups) > 1:
            out.append(f"<h3>{esc(label)}</h3>")
        field = f"{spec.state_field}: {spec.state_enum}"
        out += [
            '<figure class="diagram">',
            svg(diagram, f"{spec.name} ({label}): the {field} state machine"),
            f"<figcaption>The <code>{esc(field)}</code> field of one shard ({esc(label)}). An arrow is every "
            f"event that moves it between two members, within the callers' contracts; the initial state has an "
            f"arrow from nowhere. Derived by running the spec: every event, from every state reached within "
            f"{diagram.depth} calls on one shard ({diagram.explored} states), under the run's policy and the "
            f"smallest declared one.</figcaption>",
            "</figure>",
        ]
        if diagram.lax_edges:
            out += [
                '<details class="lax">',
                f"<summary>Outside the callers' contracts: {len(diagram.lax_edges)} more move(s) of the state, "
                "by a call that breaks its <code>requires</code> (the ledger does not check it)</summary>",
                '<table class="lax"><thead><tr><th>from</th><th>to</th><th>events</th></tr></thead><tbody>',
            ]
            out += [
                f"<tr><td><code>{esc(e.source)}</code></td><td><code>{esc(e.target)}</code></td>"
                f"<td>{esc(', '.join(e.events))}</td></tr>"
                for e in diagram.lax_edges
            ]
            out.append("</tbody></table></details>")
    out.append("</section>")
    return out


_LEGEND_HTML_REST = (
    '<span class="breaks">[breaks]</span>the step that breaks the property '
    '<span class="read">value</span>a value the property reads there (and at the step marked '
    "[before], for a step property)</p>"
)


def _legend_html(spec: Spec) -> str:
    """The figures' legend, with only the marks `spec`'s figures can show (`figure.legend`)."""
    inherited = '<span class="inherited">value!</span>held over from an earlier process incarnation '
    history = "<code>~name</code> history (ghost) variable "
    return (
        '<p class="legend"><span class="changed">value*</span>changed by the step '
        + (inherited if shows_inherited(spec) else "")
        + (history if spec.history else "")
        + _LEGEND_HTML_REST
    )


def _trace_sections(spec_file: SpecFile, results: Sequence[Result]) -> list[str]:
    with_traces = [r for r in results if trace_groups(r)]
    if not with_traces:
        return []
    out = ['<section id="traces">', "<h2>Traces</h2>", _legend_html(spec_file.variant())]
    for result in reading_order(with_traces):
        spec = spec_file.variant(result.variant)
        prop = spec.property(result.property)
        mismatch = (
            f' <span class="mismatch-tag">MISMATCH: the spec expects {esc(result.expected)}</span>'
            if result.matches is False
            else ""
        )
        out += [
            f'<article id="{esc(anchor(result.variant, result.property, result.environment))}">',
            f"<h3><code>{esc(result.variant)}</code> / <code>{esc(result.property)}</code> "
            f'<span class="muted">({esc(result.environment)})</span>{mismatch}</h3>',
            f'<p class="doc">{esc(prop.doc)}</p>',
            f'<p class="doc muted">{esc(result.environment)} environment, {result.shards} shards: '
            f"{esc(verdict_text(result))}</p>",
        ]
        for heading, trace in trace_groups(result):
            out += [f"<h4>{esc(heading)}: {esc(prop.message)}</h4>", html_table(trace, spec, prop=prop)]
        out.append("</article>")
    out.append("</section>")
    return out
