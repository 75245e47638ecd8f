"""Output formats of `ledgercheck check` (and `replay`) besides text and JSON.

* `markdown`: a one-line verdict per (variant, property) and every trace as a Markdown table,
  ready to paste into a pull-request review.
* `itf`: every trace in the Informal Trace Format of Apalache and Quint (ADR-015,
  https://apalache-mc.org/docs/adr/015adr-trace.html), as a JSON array of ITF trace objects.
* `junit`: JUnit XML, one testcase per (variant, property), for CI dashboards.

Every writer is deterministic: the same results give the same bytes (no timestamps, no
durations, no absolute paths, no terminal-dependent widths).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ledgercheck.model import ir
from ledgercheck.model.figure import figure_of, legend, markdown_legend, markdown_table, md_code, md_text, trace_figure
from ledgercheck.model.result import Result, Status
from ledgercheck.model.runs import attention, mismatch_line, multi_environment, outcome, reading_order
from ledgercheck.model.spec import Property, Spec, SpecFile, plural, policy_text
from ledgercheck.model.trace import Trace

CHECK_FORMATS = ("text", "json", "markdown", "itf", "junit")
MAX_MARKDOWN_CHARS = 60_000
"""The most `check --format markdown` writes: a pull-request comment takes 65,536 characters.
The verdict lines always come; trace tables in reading order (mismatches first) while they fit."""
REPLAY_FORMATS = ("text", "json", "markdown")

ITF_FORMAT_DESCRIPTION = "https://apalache-mc.org/docs/adr/015adr-trace.html"
FIXED_WIDTH = 120  # text figures inside machine formats do not depend on the terminal


# --- verdicts ------------------------------------------------------------------------------


def verdict_text(result: Result) -> str:
    """What was found, without the expectation: 'VIOLATED at depth 8 (1 distinct trace(s))'."""
    if result.status == Status.VIOLATED:
        return f"VIOLATED at depth {result.depth} ({len(result.traces)} distinct trace(s))"
    if result.status == Status.HOLDS_TO_DEPTH:
        return f"holds up to depth {result.depth}"
    if result.status == Status.PROVED:
        return f"PROVED ({result.note})" if result.note else "PROVED"
    if result.status == Status.NOT_APPLICABLE:
        return "not checked here: " + result.note
    return f"UNKNOWN ({result.note})"


def expectation_text(result: Result) -> str:
    if result.matches is True:
        return "as expected"
    if result.matches is False:
        return f"MISMATCH: the spec expects {result.expected}"
    if result.status == Status.NOT_APPLICABLE:
        return "not applicable"
    if result.expected is None:
        return "no expectation in the spec"
    return f"undecided; the spec expects {result.expected}"


def summary_text(results: Sequence[Result]) -> str:
    failing = sum(1 for r in results if r.matches is False)
    unknown = sum(1 for r in results if r.status == Status.UNKNOWN)
    return f"{len(results)} result(s): {failing} mismatch(es), {unknown} unknown"


def summary_names(results: Sequence[Result]) -> list[str]:
    """Each mismatch and undecided result, one line each, for the closing summary."""
    return [f"{outcome(r).upper()}: {mismatch_line(r)}" for r in attention(results)]


def case_name(result: Result, several_environments: bool) -> str:
    """A result's name in JUnit and the HTML report: the property, and its environment when the
    run covered more than one (a property is checked once per environment it applies to)."""
    return f"{result.property}[{result.environment}]" if several_environments else result.property


def spec_label(spec: Spec) -> str:
    """The spec's file name: stable across machines and checkouts (the digest pins the content)."""
    return Path(spec.path).name if spec.path else spec.name


def trace_groups(result: Result) -> list[tuple[str, Trace]]:
    """Every trace of a result with its heading: the verdict's traces, then the lax ones."""
    out = [(f"trace {n} of {len(result.traces)}, {t.length}", t) for n, t in enumerate(result.traces, 1)]
    out += [
        (f"outside the callers' contracts, trace {n}: relies on a lax guard", t)
        for n, t in enumerate(result.lax_traces, 1)
    ]
    return out


# --- Markdown ------------------------------------------------------------------------------

MD_ICON = {"match": "✅", "mismatch": "❌", "unknown": "❔", "skipped": "➖", "unexpected": "ℹ️"}


def markdown_verdict(result: Result, several_environments: bool = False) -> str:
    """One line: icon, variant / property, what was found, and whether the spec expected it."""
    expect = expectation_text(result)
    if result.matches is False:
        expect = f"**{expect}**"
    line = (
        f"- {MD_ICON[outcome(result)]} {md_code(result.variant)} / {md_code(result.property)}"
        + (f" ({md_text(result.environment)})" if several_environments else "")
        + ": "
        f"{md_text(verdict_text(result))}, {expect}"
    )
    if result.region is not None:
        line += f"; {md_text(result.region_text())}"
    return line


def markdown_check(spec_file: SpecFile, results: Sequence[Result], all_fields: bool = False) -> str:
    """Verdict lines, then the legend and every trace as a table under its (variant, property),
    the breaking step marked."""
    base = spec_file.variant()
    settings = sorted({(r.environment, r.shards) for r in results})
    where = "; ".join(f"{env} environment, {plural(shards, 'shard')}" for env, shards in settings)
    out = [f"### ledgercheck: {md_code(base.name)} ({md_text(where)})" if where else "### ledgercheck", ""]
    several = multi_environment(results)
    ordered = reading_order(results)
    out += [markdown_verdict(r, several) for r in ordered]
    out += ["", f"**{summary_text(results)}**"]
    named = summary_names(results)
    if named:
        out += [""] + [f"- {md_text(line)}" for line in named]
    if any(trace_groups(r) for r in results):
        out += ["", markdown_legend(base)]
    used = sum(len(line) + 1 for line in out)
    left_out: list[str] = []  # the results whose tables did not fit (mismatches come first)
    for result in ordered:
        groups = trace_groups(result)
        if not groups:
            continue
        spec = spec_file.variant(result.variant)
        prop = spec.property(result.property)
        where = f" ({md_text(result.environment)})" if several else ""
        section = ["", f"#### {md_code(result.variant)} / {md_code(result.property)}{where}", "", md_text(prop.doc)]
        for heading, trace in groups:
            section += ["", f"**{md_text(heading)}**: {md_text(prop.message)}", ""]
            section.append(markdown_table(trace, spec, prop=prop, all_fields=all_fields))
        size = sum(len(line) + 1 for line in section)
        if left_out or used + size > MAX_MARKDOWN_CHARS:
            left_out.append(f"{md_code(result.variant)} / {md_code(result.property)}{where}")
            continue
        out += section
        used += size
    if left_out:
        out += [
            "",
            f"_{len(left_out)} result(s) with traces left out, to stay within a pull-request comment "
            f"({MAX_MARKDOWN_CHARS:,} characters): {', '.join(left_out)}; `ledgercheck check --property NAME "
            "--format markdown` shows one._",
        ]
    return "\n".join(out)


def markdown_replay(sections: Sequence[tuple[Spec, Trace, int, Property | None, Sequence[str]]]) -> str:
    """`replay --format markdown`: per variant, its setting, the verdict of every property on
    the trace (`model.replay`), and the table with the first broken property's step marked."""
    out: list[str] = [markdown_legend(sections[0][0]), ""] if sections else []
    for spec, trace, shard, prop, verdicts in sections:
        title = f"{md_code(spec.variant)}: {md_text(spec.variant_doc)}" if spec.variant_doc else md_code(spec.variant)
        where = (
            f"{trace.environment} environment, {trace.shard_count} shards, shard {shard}; "
            f"policy {policy_text(trace.policy)}"
        )
        out += [f"### {title}", "", md_text(where), ""]
        out += [f"- {md_text(line.strip())}" for line in verdicts]
        out += ["", markdown_table(trace, spec, shard, prop=prop), ""]
    return "\n".join(out)


# --- ITF -----------------------------------------------------------------------------------

ITF_UNIT: dict[str, list[Any]] = {"#tup": []}


def itf_none() -> dict[str, Any]:
    return {"tag": "None", "value": dict(ITF_UNIT)}


def itf_value(value: Any, vtype: ir.Type | None = None) -> Any:
    """One value in ITF. Integers are `{"#bigint": "n"}`; enum members and optional values are
    sum types as Quint writes them (`{"tag": "HEALTHY", "value": {"#tup": []}}`, `{"tag":
    "Some", "value": v}`, `{"tag": "None", "value": {"#tup": []}}`); records are objects and
    lists are arrays. Without a type (opaque `any` arguments), None is the `None` variant."""
    if vtype is not None and vtype.optional and vtype.kind != "none":
        if value is None:
            return itf_none()
        return {"tag": "Some", "value": itf_value(value, vtype.without_none())}
    if value is None:
        return itf_none()
    if vtype is not None and vtype.kind == "enum":
        return {"tag": str(value), "value": dict(ITF_UNIT)}
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return {"#bigint": str(value)}
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return {str(k): itf_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [itf_value(v) for v in value]
    return str(value)


def _itf_record(values: Mapping[str, Any], types: Mapping[str, ir.Type]) -> dict[str, Any]:
    return {name: itf_value(value, types.get(name)) for name, value in values.items()}


ITF_VARS = ("shards", "fleet", "history", "environment", "calls", "mbt::actionTaken", "mbt::nondetPicks")


def itf_trace(
    spec: Spec, trace: Trace, result: Result | None = None, number: int = 1, total: int = 1
) -> dict[str, Any]:
    """One trace as an ITF object. Its variables mirror the JSON step schema: `shards` (the
    ledger record per shard, a list), `fleet`, `history` (per-shard ghost records under
    `shards`), `environment`, `calls` (the API calls the step made), plus Quint's
    model-based-testing pair `mbt::actionTaken` ("init" for the initial state) and
    `mbt::nondetPicks` (the action's shard and value arguments, each `Some`)."""
    env = spec.environment(trace.environment)
    field_types = {f.name: f.type for f in spec.fields}
    history_types = {h.name: h.type for h in spec.history}
    global_types = {g.name: g.type for g in spec.globals}
    env_types = {v.name: v.type for v in env.vars}
    actions = {a.name: a for a in env.actions}
    states = []
    for index, step in enumerate(trace.steps):
        after = step.after
        picks: dict[str, Any] = {}
        if step.action is not None:
            action = actions.get(step.action)
            for name, shard in step.shards.items():
                picks[name] = {"tag": "Some", "value": itf_value(shard)}
            param_types = {p.name: p.type for p in action.value_params} if action else {}
            for name, value in step.args.items():
                picks[name] = {"tag": "Some", "value": itf_value(value, param_types.get(name))}
        calls = []
        for call in step.calls:
            signature = spec.events[call.event].signature
            arg_types = {p.name: p.type for p in signature.params if p.type.kind != "any"}
            calls.append(
                {
                    "event": call.event,
                    "shard": itf_value(call.shard),
                    "args": {k: itf_value(v, arg_types.get(k)) for k, v in call.args.items()},
                }
            )
        states.append(
            {
                "#meta": {"index": index},
                "shards": [_itf_record(s, field_types) for s in after["shards"]],
                "fleet": _itf_record(after.get("fleet", {}), global_types),
                "history": {"shards": [_itf_record(h, history_types) for h in after["history"]["shards"]]},
                "environment": _itf_record(after.get("environment", {}), env_types),
                "calls": calls,
                "mbt::actionTaken": step.action if step.action is not None else "init",
                "mbt::nondetPicks": picks,
            }
        )
    meta: dict[str, Any] = {
        "format": "ITF",
        "format-description": ITF_FORMAT_DESCRIPTION,
        "source": spec_label(spec),
        "description": f"ledgercheck: {spec.name} {trace.variant}, {trace.environment} environment",
        "spec": spec.name,
        "spec_sha256": spec.sha256,
        "variant": trace.variant,
        "environment": trace.environment,
        "shards": trace.shard_count,
        "focus": trace.focus,
        "policy": dict(trace.policy),
        "classification": trace.classification,
    }
    if result is not None:
        prop = spec.properties.get(result.property)
        meta["description"] = f"ledgercheck: {result.variant} / {result.property}" + (
            f": {prop.message}" if prop is not None else ""
        )
        meta.update(
            {
                "property": result.property,
                "status": result.status,
                "expected": result.expected,
                "matches": result.matches,
                "trace": number,
                "of": total,
            }
        )
    itf: dict[str, Any] = {"#meta": meta, "vars": list(ITF_VARS), "states": states}
    if trace.loop_start is not None:
        # A lasso: the states from `loop` on repeat forever (ITF's own field, and in #meta).
        meta["loop_start"] = trace.loop_start
        itf["loop"] = trace.loop_start
    return itf


def itf_check(spec_file: SpecFile, results: Sequence[Result]) -> str:
    """`check --format itf`: a JSON array with one ITF trace object per trace (lax traces
    included, marked `"classification": "lax_guard"` in `#meta`). Results without a trace
    contribute nothing; their verdicts are in `--format json` and `--format junit`."""
    out = []
    for result in results:
        spec = spec_file.variant(result.variant)
        for number, trace in enumerate(result.traces, 1):
            out.append(itf_trace(spec, trace, result, number, len(result.traces)))
        for number, trace in enumerate(result.lax_traces, 1):
            out.append(itf_trace(spec, trace, result, number, len(result.lax_traces)))
    return json.dumps(out, indent=2, ensure_ascii=False)


# --- JUnit XML -----------------------------------------------------------------------------


def junit_check(spec_file: SpecFile, results: Sequence[Result], all_fields: bool = False) -> str:
    """`check --format junit`: one <testcase> per (variant, property), classname = variant,
    name = property. A verdict that differs from the spec's expectation is a <failure>; an
    undecided one (`unknown`) an <error>; a property that does not apply here is <skipped>.
    <system-out> holds the verdict and every trace as a text figure."""
    import xml.etree.ElementTree as ET  # only this format needs it: no command pays for it otherwise

    base = spec_file.variant()
    counts = {
        "tests": len(results),
        "failures": sum(1 for r in results if outcome(r) == "mismatch"),
        "errors": sum(1 for r in results if outcome(r) == "unknown"),
        "skipped": sum(1 for r in results if outcome(r) == "skipped"),
    }
    root = ET.Element("testsuites", {"name": "ledgercheck", **{k: str(v) for k, v in counts.items()}})
    environments = sorted({r.environment for r in results})
    suite = ET.SubElement(
        root,
        "testsuite",
        {"name": f"ledgercheck.{base.name}", **{k: str(v) for k, v in counts.items()}},
    )
    properties = ET.SubElement(suite, "properties")
    settings = {
        "spec": spec_label(base),
        "spec_sha256": base.sha256,
        "environment": ",".join(environments),
        "shards": ",".join(str(s) for s in sorted({r.shards for r in results})),
    }
    for name, value in settings.items():
        ET.SubElement(properties, "property", {"name": name, "value": value})
    several = multi_environment(results)
    for result in reading_order(results):
        case = ET.SubElement(suite, "testcase", {"classname": result.variant, "name": case_name(result, several)})
        verdict = verdict_text(result)
        kind = outcome(result)
        if kind == "mismatch":
            failure = ET.SubElement(
                case,
                "failure",
                {
                    "message": f"{verdict}; the spec expects {result.expected}{_break_text(spec_file, result)}",
                    "type": "VerdictMismatch",
                },
            )
            failure.text = f"{mismatch_line(result)}\n{verdict} (expected: {result.expected})"
        elif kind == "unknown":
            error = ET.SubElement(case, "error", {"message": verdict, "type": "SolverUnknown"})
            error.text = f"{result.variant} / {result.property}: {verdict}"
        elif kind == "skipped":
            ET.SubElement(case, "skipped", {"message": verdict})
        ET.SubElement(case, "system-out").text = _junit_text(spec_file, result, all_fields)
    ET.indent(root, space="  ")
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body


def _break_text(spec_file: SpecFile, result: Result) -> str:
    """`; step N, ACTION, breaks PROPERTY: MESSAGE` for the result's first trace, else ""."""
    if not result.traces:
        return ""
    spec = spec_file.variant(result.variant)
    line = figure_of(result.traces[0], spec, prop=spec.property(result.property)).break_line()
    return f"; {line}" if line else ""


def _junit_text(spec_file: SpecFile, result: Result, all_fields: bool = False) -> str:
    lines = [f"{result.variant} / {result.property}: {verdict_text(result)} [{expectation_text(result)}]"]
    if result.region is not None:
        lines.append(result.region_text())
    groups = trace_groups(result)
    if groups:
        spec = spec_file.variant(result.variant)
        prop = spec.property(result.property)
        lines += ["", legend(spec)]
        for heading, trace in groups:
            figure = trace_figure(trace, spec, width=FIXED_WIDTH, prop=prop, all_fields=all_fields)
            lines += ["", f"-- {heading}: {prop.message}", figure]
    return "\n".join(lines) + "\n"


# --- dispatch ------------------------------------------------------------------------------


def render_check(fmt: str, spec_file: SpecFile, results: Sequence[Result], all_fields: bool = False) -> str:
    """The output of `check --format FMT` for the formats this module writes (`all_fields`:
    every row of every figure, none folded)."""
    if fmt == "markdown":
        return markdown_check(spec_file, results, all_fields)
    if fmt == "itf":
        return itf_check(spec_file, results)
    if fmt == "junit":
        return junit_check(spec_file, results, all_fields)
    raise ValueError(f"no writer for format {fmt!r}")
