"""`ledgercheck replay`: drive the executable model through events and judge the trace.

For every variant replayed: the variant, the environment, the fleet size and the policy the
trace ran under; then the verdict of every property of that environment on this very trace
(the step that breaks it, or that it holds on every step; a liveness property is not judged
on a finite trace); then the figure, with the first broken property's step marked. The
legend comes before the first figure.
"""

from __future__ import annotations

import argparse
import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

from ledgercheck.model.breaking import Break, find_break
from ledgercheck.model.errors import EXIT_OK, UsageError, did_you_mean
from ledgercheck.model.figure import colour_enabled, column_label, legend, trace_figure
from ledgercheck.model.formats import markdown_replay
from ledgercheck.model.spec import Property, PropertyKind, Spec, SpecFile, load_spec, policy_text
from ledgercheck.model.trace import Simulation, Trace, parse_action_call


def verdicts(trace: Trace, spec: Spec) -> list[tuple[Property, Break | None]]:
    """Every property of the trace's environment, with the step that breaks it (or None)."""
    return [(p, find_break(trace, spec, p)) for p in spec.properties.values() if p.applies_to(trace.environment)]


def verdict_lines(trace: Trace, spec: Spec, width: int = 120) -> list[str]:
    """Where the trace breaks each property it breaks, one line each; then the properties it
    holds on and those not judged here, named in wrapped paragraphs."""
    judged = verdicts(trace, spec)
    lines = []
    for prop, where in judged:
        if where is not None:
            label = column_label(trace.steps[where.step])
            text = f"BROKEN {prop.name}: at step {where.step}, {label}: {prop.message}"
            lines.append(textwrap.fill(text, width, initial_indent="  ", subsequent_indent="      "))
    holds = [p.name for p, where in judged if where is None and p.kind != PropertyKind.EVENTUALLY]
    unjudged = [p.name for p, where in judged if p.kind == PropertyKind.EVENTUALLY]
    if holds:
        text = f"holds on every step: {', '.join(holds)}"
        lines.append(textwrap.fill(text, width, initial_indent="  ", subsequent_indent="      "))
    if unjudged:
        text = f"not judged (liveness needs an infinite run): {', '.join(unjudged)}"
        lines.append(textwrap.fill(text, width, initial_indent="  ", subsequent_indent="      "))
    return lines


def first_broken(trace: Trace, spec: Spec) -> Property | None:
    return next((p for p, where in verdicts(trace, spec) if where is not None), None)


def setting_line(trace: Trace) -> str:
    return f"environment {trace.environment}, {trace.shard_count} shards, policy {policy_text(trace.policy)}"


def run(ns: argparse.Namespace) -> int:
    words = list(ns.spec_or_event)
    spec_path = None
    if words and (words[0].endswith(".toml") or Path(words[0]).is_file()):
        spec_path = words.pop(0)
    spec_file = load_spec(spec_path)
    events = words
    if ns.file:
        try:
            lines = Path(ns.file).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise UsageError(f"cannot read {ns.file}: {exc.strerror}") from None
        events += [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    base = spec_file.variant()
    scenario = None
    if not events:
        only = next(iter(base.scenarios)) if len(base.scenarios) == 1 else None
        name = ns.scenario or ("seed" if "seed" in base.scenarios else only)
        if name is None and base.scenarios:
            known = ", ".join(base.scenarios)
            raise UsageError(f"no events given: name the scenario to replay (--scenario NAME; the spec has {known})")
        if name is None:
            raise UsageError("no events given and the spec has no scenario to replay")
        if name not in base.scenarios:
            known = ", ".join(base.scenarios) or "none"
            raise UsageError(f"unknown scenario {name!r}{did_you_mean(name, base.scenarios)}; the spec has {known}")
        scenario = base.scenarios[name]
        events = list(scenario.steps)
    environment = ns.environment or (scenario.environment if scenario else base.default_environment)
    shards = ns.shards or (scenario.shards if scenario and scenario.shards else base.default_shards)
    output: list[dict[str, Any]] = []
    sections: list[tuple[Spec, Trace, int, Property | None, list[str]]] = []
    colour = colour_enabled()
    all_fields = getattr(ns, "all_fields", False)
    for number, spec in enumerate(_variants(spec_file, ns.variant)):
        env = spec.environment(environment)
        policy = spec.resolve_policy(dict(ns.policy))
        sim = Simulation(spec, env, shards, policy)
        steps = [sim.initial_step()]
        for text in events:
            action, shard_args, values = parse_action_call(text, env)
            step, _ = sim.apply(action, shard_args, values)
            steps.append(step)
        focus = (
            ns.shard
            if ns.shard is not None
            else (
                scenario.focus
                if scenario and scenario.focus is not None
                else next((s.shard for s in steps[1:] if s.shard is not None), 0)
            )
        )
        trace = Trace(spec.name, spec.variant, env.name, shards, policy, tuple(steps), focus)
        if ns.format == "json":
            output.append(
                {"variant": spec.variant, "environment": env.name, "shards": shards, "policy": policy}
                | {"steps": trace.to_json()}
            )
        elif ns.format == "markdown":
            sections.append((spec, trace, focus, first_broken(trace, spec), verdict_lines(trace, spec, 10**6)))
        else:
            if number == 0:
                print(legend(spec))
            print()
            print(f"{spec.variant}: {spec.variant_doc}" if spec.variant_doc else spec.variant)
            width = shutil.get_terminal_size((120, 24)).columns
            print(textwrap.fill(setting_line(trace), width, subsequent_indent="    "))
            print("\n".join(verdict_lines(trace, spec, width)))
            prop = first_broken(trace, spec)
            print(trace_figure(trace, spec, shard=focus, colour=colour, prop=prop, all_fields=all_fields))
    if ns.format == "json":
        print(json.dumps(output, indent=2, sort_keys=False, default=str))
    elif ns.format == "markdown":
        print(markdown_replay(sections))
    return EXIT_OK


def _variants(spec_file: SpecFile, names: list[str] | None) -> list[Spec]:
    return [spec_file.variant(n) for n in (names or spec_file.variants)]
