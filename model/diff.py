"""What a change to the ledger really changes: `ledgercheck diff A B`.

A and B are two spec files, or two variants of one. Both encodings share one solver and
one action selector (a product: the same actions, in the same order, drive both), and the
bounded search asks for the shortest trace after which some observable field of some shard,
or a fleet value both specs keep (`[globals]`), differs. By shard symmetry, the difference is
sought on shard 0. Then every property is checked on both sides and the verdicts that changed
are listed, each with its trace.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import z3

from ledgercheck.model import bmc, budget, engines
from ledgercheck.model.console import Heartbeat
from ledgercheck.model.encoding import Encoding
from ledgercheck.model.errors import EXIT_OK, Undecided, UsageError
from ledgercheck.model.figure import FLEET, fleet_rows, render_table, trace_rows
from ledgercheck.model.result import FOCUS, Result
from ledgercheck.model.runs import DEFAULT_DEPTH
from ledgercheck.model.spec import Spec, load_spec, policy_text
from ledgercheck.model.trace import Simulation, Step, Trace


@dataclass
class Difference:
    depth: int
    field: str
    shard: int | None
    """The shard whose `field` differs; None: `field` is a fleet value."""
    left: Trace
    right: Trace


def _shared_globals(a: Spec, b: Spec) -> list[str]:
    """The fleet values both specs keep, of one type, compared as the fields are; none where
    both declare them alike and run one `[on_state_change]`. Only the hook assigns them, on a
    change of state with the old and the new one: with one hook and one start they can part
    only after the states do, which the fields show first, and comparing them anyway made
    every depth's proof of no difference costlier (`diff fixed refit_keeps_streak` took 185 s,
    64 s without)."""
    if a.on_state_change == b.on_state_change and a.globals == b.globals:
        return []
    theirs = {g.name: g.type for g in b.globals}
    return [g.name for g in a.globals if theirs.get(g.name) == g.type]


def resolve_side(text: str, default_spec: str | None) -> Spec:
    """`variant`, `path/to/spec.toml`, or `path/to/spec.toml:variant`."""
    path, sep, variant = text.rpartition(":")
    if sep and path.endswith(".toml"):
        return load_spec(path).variant(variant)
    if text.endswith(".toml") or Path(text).is_file():
        return load_spec(text).variant()
    return load_spec(default_spec).variant(text)


def _check_compatible(a: Spec, b: Spec, environment: str) -> None:
    env_a, env_b = a.environment(environment), b.environment(environment)
    sig_a = [(x.name, x.shard_params, tuple((p.name, p.type) for p in x.value_params)) for x in env_a.actions]
    sig_b = [(x.name, x.shard_params, tuple((p.name, p.type) for p in x.value_params)) for x in env_b.actions]
    if sig_a != sig_b:
        raise UsageError(f"the two specs' {environment} environments do not offer the same actions")
    for name, enum in a.enums.items():
        if name in b.enums and b.enums[name].members != enum.members:
            raise UsageError(f"the two specs declare enum {name} with different members")
    if [f.name for f in a.fields] != [f.name for f in b.fields]:
        raise UsageError("the two specs' records have different fields")


def shortest_difference(
    a: Spec,
    b: Spec,
    environment: str,
    shards: int,
    policy: Mapping[str, int],
    max_depth: int,
    progress: Callable[[str], None] | None = None,
) -> Difference | None:
    _check_compatible(a, b, environment)
    began = time.monotonic()
    ctx = z3.Context()
    left = Encoding(a, a.environment(environment), shards, policy, ctx=ctx, prefix="A.", keep_disabled=True)
    right = Encoding(b, b.environment(environment), shards, policy, ctx=ctx, prefix="B.", keep_disabled=True)
    solver = z3.SolverFor("QF_LIA", ctx=ctx)
    states_l, states_r = [left.step_vars(0)], [right.step_vars(0)]
    solver.add(left.initial(states_l[0].state), right.initial(states_r[0].state))
    observed = [f.name for f in a.fields]
    shared = _shared_globals(a, b)
    for depth in range(max_depth + 1):
        if depth:
            nxt_l, nxt_r = left.step_vars(depth), right.step_vars(depth)
            pairs_l = left.substitution(states_l[-1], depth - 1)
            pairs_r = right.substitution(states_r[-1], depth - 1)
            solver.add(left.transition(nxt_l, pairs_l), right.transition(nxt_r, pairs_r))
            states_l.append(nxt_l)
            states_r.append(nxt_r)
        differs: dict[tuple[int | None, str], Any] = {
            (FOCUS, name): states_l[depth].state[(FOCUS, name)] != states_r[depth].state[(FOCUS, name)]
            for name in observed
        }
        for name in shared:
            differs[(None, name)] = states_l[depth].state[(None, name)] != states_r[depth].state[(None, name)]
        goal = z3.Bool(f"differs@{depth}", ctx)
        solver.add(z3.Implies(goal, z3.Or(list(differs.values()))))
        established = f"no difference up to depth {depth - 1}" if depth else "nothing was established"
        if progress is not None:
            progress(f"diff: {established}; searching depth {depth} ({time.monotonic() - began:.0f} s)")
        budget.stop_if_spent(f"the search for a difference at depth {depth}", established)
        budget.limit_solver(solver)
        answer = budget.answered(solver, solver.check(goal))
        if answer == z3.unknown:  # not "no difference": the command cannot answer, and says so
            budget.stop_if_spent(f"the search for a difference at depth {depth}", established)
            raise Undecided(
                f"the solver gave up ({solver.reason_unknown()}) at depth {depth} of the search for a difference; "
                f"{established}"
            )
        if answer != z3.sat:
            continue
        model = solver.model()
        shard, field = next(k for k, d in differs.items() if z3.is_true(model.eval(d, model_completion=True)))
        steps = _actions(left, states_l, model, depth)
        return Difference(
            depth,
            field,
            shard,
            _replay(a, environment, shards, policy, steps),
            _replay(b, environment, shards, policy, steps),
        )
    return None


def _actions(
    enc: Encoding, states: list[Any], model: z3.ModelRef, depth: int
) -> list[tuple[Any, dict[str, int], dict[str, Any]]]:
    tokens: dict[tuple[int, int], str] = {}
    steps = []
    for t in range(depth):
        index = model.eval(states[t].act, model_completion=True).as_long()
        inst = enc.instances[index]
        owner = next(iter(inst.shards.values()), 0)
        values = {
            p.name: bmc.concrete_value(
                enc.spec,
                model.eval(states[t].params[(inst.action.name, p.name)], model_completion=True),
                p.type,
                owner,
                tokens,
            )
            for p in inst.action.value_params
        }
        steps.append((inst.action.name, dict(inst.shards), values))
    return steps


def _replay(
    spec: Spec,
    environment: str,
    shards: int,
    policy: Mapping[str, int],
    steps: list[tuple[str, dict[str, int], dict[str, Any]]],
) -> Trace:
    env = spec.environment(environment)
    sim = Simulation(spec, env, shards, policy)
    recorded: list[Step] = [sim.initial_step()]
    for name, shard_args, values in steps:
        step, _ = sim.apply(env.action(name), shard_args, values)
        recorded.append(step)
    return Trace(spec.name, spec.variant, environment, shards, dict(policy), tuple(recorded), FOCUS)


def side_by_side(diff: Difference, a: Spec, b: Spec) -> str:
    """One table: the trace's columns, each field of the focus shard and each fleet value both
    keep as `A / B` where they differ."""
    header, rows_a = trace_rows(diff.left, a, FOCUS)
    _, rows_b = trace_rows(diff.right, b, FOCUS)
    shared = set(_shared_globals(a, b))
    rows_a += [[row.name, *(c.value for c in row.cells)] for row in fleet_rows(diff.left, shared.__contains__)]
    rows_b += [[row.name, *(c.value for c in row.cells)] for row in fleet_rows(diff.right, shared.__contains__)]
    differing = diff.field if diff.shard is not None else f"{FLEET}{diff.field}"
    rows_b_by_name = {row[0]: row for row in rows_b}
    merged = []
    for row in rows_a:
        other = rows_b_by_name.get(row[0])
        if other is None:
            continue
        cells = [row[0] + (" <<" if row[0] == differing else "")]
        for left, right in zip(row[1:], other[1:], strict=True):
            cells.append(left if left == right else f"{left} / {right}")
        merged.append(cells)
    return render_table(header, merged)


def _sides(a: str, b: str, left: Spec, right: Spec) -> tuple[str, str]:
    """How the report names the two sides: by variant, or as given where both are one
    variant's name (two files of one spec, each `base`)."""
    if left.variant != right.variant:
        return left.variant, right.variant
    return a, b


def verdict_changes(
    a: Spec,
    b: Spec,
    environment: str,
    shards: int,
    policy: Mapping[str, int],
    max_depth: int,
    progress: Callable[[str], None] | None = None,
) -> list[tuple[str, Result, Result]]:
    changes = []
    shared = [name for name in a.properties if name in b.properties]

    def verdict(side: Spec, name: str) -> Result:
        prop = side.properties[name]
        return engines.check_property(
            side, environment, prop, shards=shards, policy=policy, max_depth=max_depth, max_traces=1, lax=False
        )

    for number, name in enumerate(shared, 1):
        if progress is not None:
            progress(f"diff: checking {name} on both sides ({number} of {len(shared)} properties)")
        left, right = verdict(a, name), verdict(b, name)
        if left.verdict != right.verdict:
            changes.append((name, left, right))
    return changes


def _default_environment(spec: Spec) -> str:
    """Where `diff` compares when given no --environment: the spec's declared default, else
    `controller` where the spec has one (the bundled ledger's callers, where a difference is
    one its users can meet), else the spec's default environment."""
    if spec.declared_default_environment is None and "controller" in spec.environments:
        return "controller"
    return spec.default_environment


def diff_command(
    *,
    a: str,
    b: str,
    c: str | None = None,
    spec: str | None = None,
    environment: str | None,
    shards: int | None,
    max_depth: int | None,
    format: str,
    policy: list[tuple[str, int]] | None = None,
) -> int:
    """`ledgercheck diff A B`: where two variants or specs first disagree, and what verdicts
    changed, at the shipped policy or the one `--policy` overrides (both sides take it).
    `diff SPEC A B` is `diff --spec SPEC A B` (a trial wrote it so, and got a usage error)."""
    if c is not None:
        if spec is not None:
            raise UsageError(f"diff takes the spec once: --spec {spec} or first of three ({a} {b} {c}), not both")
        spec, a, b = a, b, c
    left_spec, right_spec = resolve_side(a, spec), resolve_side(b, spec)
    max_depth = left_spec.search_depth(max_depth, DEFAULT_DEPTH)
    environment = environment or _default_environment(left_spec)
    fleet = shards or left_spec.default_shards
    overrides = dict(policy or [])
    if not overrides and left_spec.default_policy() != right_spec.default_policy():
        raise UsageError("the two specs ship different policies; compare them with the same --policy")
    resolved = left_spec.resolve_policy(overrides)
    if right_spec.resolve_policy(overrides) != resolved:
        raise UsageError("the two specs resolve --policy to different policies; give every constant")
    policy_map = resolved
    say = Heartbeat(sys.stderr)  # a long search is never silent: a line every half minute at most
    diff = shortest_difference(left_spec, right_spec, environment, fleet, policy_map, max_depth, say)
    changes = verdict_changes(left_spec, right_spec, environment, fleet, policy_map, max_depth, say)
    if format == "json":
        print(
            json.dumps(
                {
                    "a": left_spec.variant,
                    "b": right_spec.variant,
                    "a_spec": left_spec.path,
                    "b_spec": right_spec.path,
                    "environment": environment,
                    "shards": fleet,
                    "policy": policy_map,
                    "difference": None
                    if diff is None
                    else {
                        "depth": diff.depth,
                        "shard": diff.shard,
                        "field": diff.field,
                        "a": diff.left.to_json(),
                        "b": diff.right.to_json(),
                    },
                    "verdicts": [
                        {
                            "property": name,
                            "a": left.verdict,
                            "b": right.verdict,
                            "trace": (left.traces or right.traces)[0].to_json()
                            if (left.traces or right.traces)
                            else None,
                        }
                        for name, left, right in changes
                    ],
                },
                indent=2,
                default=str,
            )
        )
        return EXIT_OK
    one, two = _sides(a, b, left_spec, right_spec)
    at = f"{environment}, {fleet} shard{'s' if fleet != 1 else ''}"
    at += f", {policy_text(policy_map)}" if policy_map else ""
    print(f"ledgercheck diff: {one} against {two} ({at}; --policy NAME=VALUE compares at another policy)")
    if diff is None:
        print(f"{one} and {two} agree on every observable field up to depth {max_depth}")
    else:
        last = diff.left.steps[-1]
        calls = ", ".join(c.event for c in last.calls) or "no call"
        where = f"shard {diff.shard}'s {diff.field}" if diff.shard is not None else f"the fleet value {diff.field}"
        print(f"{one} and {two} first disagree after {diff.depth} steps, on {where}, at {last.action} ({calls}):")
        print(side_by_side(diff, left_spec, right_spec))
        print("(cells read 'A / B' where the two differ)")
    print()
    if not changes:
        print("no property verdict changed")
    for name, left, right in changes:
        print(f"{name}: {left.verdict} in {one}, {right.verdict} in {two}")
    return EXIT_OK
