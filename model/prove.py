"""Unbounded proofs: a property holds for every trace, not just up to a depth.

Two engines over the same Z3 encoding the bounded checker uses:

* **Spacer** (Z3's constrained-Horn-clause engine, IC3/PDR): the transition system becomes
  three Horn clauses over an unknown invariant `Inv(state)`: the initial states are in it,
  it is closed under the transition, and it contains no bad state (or no bad transition,
  for a step property). Satisfiable means an inductive invariant exists: proved, and the
  invariant is printed. It finds the strengthening itself.
* **k-induction** with simple-path constraints: for k = 1, 2, ... a path of k transitions
  from *any* state on which the property (and the property's user-written `lemmas`) held
  at every earlier step cannot break it at step k. When it can, the counterexample to
  induction (CTI) is printed as a table: a state the invariant does not exclude, which the
  user can rule out with a lemma.

Before either, a bounded search refutes what is false and returns its shortest trace.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import z3

from ledgercheck.model import bmc, budget
from ledgercheck.model.console import progress_for
from ledgercheck.model.encoding import Encoding
from ledgercheck.model.errors import UsageError
from ledgercheck.model.figure import render_table, trace_figure
from ledgercheck.model.result import FOCUS, Result, Status
from ledgercheck.model.spacer import lemma_violation, spacer_proof
from ledgercheck.model.spec import (
    Property,
    PropertyKind,
    Spec,
    SpecFile,
    contracts_bind,
    load_spec,
    plural,
    policy_text,
)

ENGINES = ("auto", "spacer", "kind", "explicit")
REFUTE_DEPTH = 12


@dataclass
class Proof:
    engine: str
    detail: str
    seconds: float


def _k_induction(
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: Mapping[str, int] | None,
    max_k: int,
    timeout: float | None,
) -> tuple[Status, int, str]:
    """Returns (PROVED, k, "") or (UNKNOWN, k, CTI table) or (UNKNOWN, k, reason)."""
    env = spec.environment(environment)
    focus = None if prop.fleet else FOCUS
    checker = bmc.Checker(spec, environment, prop, shards, policy, contracts=contracts_bind(env, prop), timeout=timeout)
    enc = checker.enc
    solver = checker.solver  # no initial-state constraint: the step case starts anywhere
    solver.reset()
    if timeout:
        solver.set("timeout", max(1, int(timeout * 1000)))
    if enc.symbolic_policy:
        for name, decl in spec.policy.items():
            var = enc.policy_vars[name]
            solver.add(var >= decl.min, var <= decl.max)
    _type_ranges(solver, enc, checker.states[0].state)
    good_prefix: list[Any] = []
    for k in range(1, max_k + 1):
        checker.deepen()
        _type_ranges(solver, enc, checker.states[k].state)
        # the property (and lemmas) held up to step k-1 ...
        state_k1 = checker.states[k - 1].state
        good_prefix.append(z3.Not(lemma_violation(enc, prop, focus, state_k1)))
        if prop.kind == PropertyKind.INVARIANT:
            good_prefix.append(z3.Not(enc.invariant_violation(prop, focus, state_k1)))
        elif k >= 2:
            good_prefix.append(z3.Not(z3.substitute(checker.step_bad, *checker.pairs[k - 2])))
        for earlier in range(k):
            solver.add(_distinct(checker.states[earlier].state, checker.states[k].state))
        # ... and breaks at step k?
        if prop.kind == PropertyKind.INVARIANT:
            bad = z3.Or(
                enc.invariant_violation(prop, focus, checker.states[k].state),
                lemma_violation(enc, prop, focus, checker.states[k].state),
            )
        else:
            bad = z3.Or(
                z3.substitute(checker.step_bad, *checker.pairs[k - 1]),
                lemma_violation(enc, prop, focus, checker.states[k].state),
            )
        spent = budget.limit_solver(solver, timeout)
        if spent is not None:
            return Status.UNKNOWN, k, f"k-induction: the {spent} ran out at k={k}"
        answer = budget.answered(solver, solver.check(*good_prefix, bad))
        if answer == z3.unsat:
            return Status.PROVED, k, ""
        if answer == z3.unknown:
            spent = budget.active().exhausted()
            if spent is not None:
                return Status.UNKNOWN, k, f"k-induction: the {spent} ran out at k={k}"
            return Status.UNKNOWN, k, f"the solver gave up at k={k} ({solver.reason_unknown()})"
        cti = solver.model()
    return Status.UNKNOWN, max_k, _cti_table(spec, enc, checker, cti, max_k, focus)


def _type_ranges(solver: z3.Solver, enc: Encoding, state: Mapping[Any, Any]) -> None:
    """Enum-coded variables hold member indices (or None): true of every encoded state."""
    for key, var in state.items():
        decl = enc.vars[key]
        if decl.type.kind == "enum":
            low = -1 if decl.type.optional else 0
            solver.add(var >= low, var < len(enc.spec.enums[decl.type.enum or ""].members))


def _distinct(left: Mapping[Any, Any], right: Mapping[Any, Any]) -> Any:
    return z3.Or([left[k] != right[k] for k in left])


def _cti_table(spec: Spec, enc: Encoding, checker: bmc.Checker, model: z3.ModelRef, k: int, focus: int | None) -> str:
    shard = focus if focus is not None else 0
    header = [f"shard {shard}"] + [f"s{t}" for t in range(k + 1)]
    rows = []
    for var in spec.fields + spec.history:
        if (shard, var.name) not in checker.states[0].state:
            continue  # outside the property's cone of influence
        row = [var.name if var.kind == "ledger" else f"~{var.name}"]
        for t in range(k + 1):
            raw = model.eval(checker.states[t].state[(shard, var.name)], model_completion=True)
            row.append(_show(spec, var.type, raw))
        rows.append(row)
    acts = (
        ["action"]
        + ["-"]
        + [
            enc.instances[model.eval(checker.states[t].act, model_completion=True).as_long()].action.name
            for t in range(k)
        ]
    )
    table = render_table(header, [acts, *rows], width=160)
    return f"counterexample to induction at k={k} (a state no lemma rules out yet):\n{table}"


def _show(spec: Spec, vtype: Any, raw: Any) -> str:
    if z3.is_true(raw):
        return "true"
    if z3.is_false(raw):
        return "false"
    value = raw.as_long()
    if vtype.optional and value == -1:
        return "None"
    if vtype.kind == "enum":
        members = spec.enums[vtype.enum or ""].members
        return members[value] if 0 <= value < len(members) else f"?{value}"
    if vtype.kind == "str":
        return "initial" if value == 0 else f"token{value}"
    return str(value)


def prove_property(
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: Mapping[str, int] | None,
    timeout: float | None = None,
    engine: str = "auto",
    max_k: int = 8,
    refute_depth: int = REFUTE_DEPTH,
    progress: Callable[[str], None] | None = None,
) -> Result:
    """Refute by bounded search, else prove with Spacer and/or k-induction. `auto` starts
    with the explicit engine where one shard decides the property: its exhaustive search
    is a proof where the reduced state space is finite, and is cut short (a bounded probe,
    `explicit.PROBE_STATES`) where that is not known, before the Z3 engines take over.
    Every phase runs under the active budget (`model.budget`); when it runs out the result
    is `unknown`, naming the budget and what was established, also when the budget's
    watchdog interrupts a call into Z3 other than a solver's check (`budget.interrupted_by`)."""
    spec.environment(environment)
    spent = budget.active().exhausted()
    if spent is not None and prop.applies_to(environment):  # no engine starts: unknown at once
        why = f"the {spent} ran out before this proof started"
        return Result.not_established(spec, prop, environment, shards, policy, why)
    try:
        return _prove(
            spec,
            environment,
            prop,
            shards=shards,
            policy=policy,
            timeout=timeout,
            engine=engine,
            max_k=max_k,
            refute_depth=refute_depth,
            progress=progress,
        )
    except Exception as exc:
        spent = budget.interrupted_by(exc)
        if spent is None:
            raise
        return Result.not_established(
            spec, prop, environment, shards, policy, f"the {spent} ran out while it was proved"
        )


def _prove(
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: Mapping[str, int] | None,
    timeout: float | None,
    engine: str,
    max_k: int,
    refute_depth: int,
    progress: Callable[[str], None] | None,
) -> Result:
    """`prove_property`'s engines, one after the other, once the budget let them start."""
    start = time.monotonic()

    def phase(what: str) -> None:
        if progress is not None:
            progress(f"{spec.variant} / {prop.name}: {what}, {time.monotonic() - start:.1f}s")

    if prop.kind == PropertyKind.EVENTUALLY:
        from ledgercheck.model.liveness import check_eventually

        if policy is None and prop.applies_to(environment):  # as `check` answers it: the others are proved
            why = "a liveness property is proved at a concrete policy only: prove it without --symbolic-policy"
            return Result.not_established(spec, prop, environment, shards, policy, why)
        return check_eventually(
            spec, environment, prop, shards=shards, policy=policy, max_depth=refute_depth, timeout=timeout, prove=True
        )
    if not prop.applies_to(environment):
        return Result.not_applicable(spec, prop, environment, shards, policy)
    from ledgercheck.model.explicit import explicit_check, explicit_decides

    env = spec.environment(environment)
    if policy is not None and (
        engine == "explicit" or (engine == "auto" and explicit_decides(spec, env, [prop], shards, policy))
    ):
        phase("explicit-state search")
        searched = explicit_check(
            spec,
            environment,
            prop,
            shards=shards,
            policy=policy,
            max_depth=refute_depth,
            max_traces=1,
            timeout=timeout,
            prove=True,
            progress=progress,
        )
        if searched.status in (Status.PROVED, Status.VIOLATED) or engine == "explicit":
            if searched.status == Status.VIOLATED:
                searched.note = f"refuted by explicit-state search at depth {searched.depth}; {searched.note}"
            elif searched.status == Status.HOLDS_TO_DEPTH:
                searched.status = Status.UNKNOWN  # no proof, only a bounded search
                searched.note = f"holds up to depth {searched.depth}; {searched.note}"
            searched.seconds = time.monotonic() - start
            return searched
        notes_before = [f"explicit: {searched.note}"]
    else:
        notes_before = []
    phase(f"bounded search to depth {refute_depth}")
    bounded = bmc.check_property(
        spec,
        environment,
        prop,
        shards=shards,
        policy=policy,
        max_depth=refute_depth,
        max_traces=1,
        timeout=timeout,
        lax=False,
        proof_wanted=True,
    )
    if bounded.status == Status.VIOLATED:
        bounded.note = f"refuted by bounded search at depth {bounded.depth}"
        bounded.seconds = time.monotonic() - start
        return bounded
    if bounded.status == Status.UNKNOWN and budget.active().exhausted() is not None:
        bounded.note = "; ".join([*notes_before, f"no proof: {bounded.note}"])
        bounded.seconds = time.monotonic() - start
        return bounded
    notes: list[str] = list(notes_before)
    if engine in ("auto", "spacer"):
        phase("spacer")
        answer, text, proved_for = spacer_proof(spec, environment, prop, shards, policy, timeout)
        if answer == z3.sat:
            scope = (
                "every fleet size (the cone of influence is one shard)"
                if proved_for.every_size
                else proved_for.phrase(shards)
            )
            return _done(
                spec,
                prop,
                environment,
                shards=shards,
                policy=policy,
                status=Status.PROVED,
                depth=0,
                start=start,
                note=f"proved by spacer for {scope}; inductive invariant: {text}",
                engine="spacer",
                invariant=text,
            )
        if answer == z3.unsat:
            deeper = bmc.check_property(
                spec,
                environment,
                prop,
                shards=shards,
                policy=policy,
                max_depth=4 * refute_depth,
                max_traces=1,
                timeout=timeout,
                lax=False,
            )
            if deeper.status == Status.VIOLATED:
                deeper.note = f"spacer refuted it; bounded search found the trace at depth {deeper.depth}"
                return deeper
            return _done(
                spec,
                prop,
                environment,
                shards=shards,
                policy=policy,
                status=Status.VIOLATED,
                depth=0,
                start=start,
                note="spacer refuted it beyond the bounded search's depth",
                engine="spacer",
                invariant="",
            )
        notes.append(f"spacer: unknown ({text})")
    if engine in ("auto", "kind") and budget.active().exhausted() is None:
        phase(f"k-induction up to k={max_k}")
        status, k, detail = _k_induction(
            spec, environment, prop, shards=shards, policy=policy, max_k=max_k, timeout=timeout
        )
        if status == Status.PROVED:
            return _done(
                spec,
                prop,
                environment,
                shards=shards,
                policy=policy,
                status=Status.PROVED,
                depth=k,
                start=start,
                note=f"proved by k-induction with k={k}",
                engine="k-induction",
                invariant="",
            )
        notes.append(detail)
    return _done(
        spec,
        prop,
        environment,
        shards=shards,
        policy=policy,
        status=Status.UNKNOWN,
        depth=refute_depth,
        start=start,
        note=f"holds up to depth {refute_depth}; no proof: " + "; ".join(notes),
        engine="",
        invariant="",
    )


def _done(
    spec: Spec,
    prop: Property,
    environment: str,
    *,
    shards: int,
    policy: Mapping[str, int] | None,
    status: Status,
    depth: int,
    start: float,
    note: str,
    engine: str,
    invariant: str,
) -> Result:
    result = Result(
        variant=spec.variant,
        property=prop.name,
        environment=environment,
        shards=shards,
        policy=policy,
        status=status,
        depth=depth,
        expected=prop.expect.get(spec.variant),
        note=note,
    )
    result.seconds = time.monotonic() - start
    result.engine = engine
    result.invariant = invariant
    return result


# --- command line ------------------------------------------------------------------------


@dataclass(frozen=True)
class _ProofPlan:
    """What a worker needs for any proof of a `prove` run (sent to each worker once)."""

    spec_file: SpecFile
    shards: int | None
    overrides: tuple[tuple[str, int], ...]
    symbolic: bool
    timeout: float | None
    engine: str
    max_k: int

    def policy_of(self, spec: Spec) -> dict[str, int] | None:
        return None if self.symbolic else spec.resolve_policy(dict(self.overrides))

    def lost(self, job: tuple[str, str, str], why: str) -> Result:
        """A proof no worker answered: unknown, saying why (never a pass)."""
        variant, name, environment = job
        spec = self.spec_file.variant(variant)
        fleet = self.shards or spec.default_shards
        return Result.not_established(spec, spec.property(name), environment, fleet, self.policy_of(spec), why)


def _prove_job(plan: _ProofPlan, job: tuple[str, str, str], progress: Callable[[str], None] | None) -> Result:
    """One proof of a `prove` run, in whichever process runs it."""
    variant, name, environment = job
    spec = plan.spec_file.variant(variant)
    return prove_property(
        spec,
        environment,
        spec.property(name),
        shards=plan.shards or spec.default_shards,
        policy=plan.policy_of(spec),
        timeout=plan.timeout,
        engine=plan.engine,
        max_k=plan.max_k,
        progress=progress,
    )


def prove_command(
    *,
    spec: str | None,
    variant: list[str] | None,
    property: list[str] | None,
    environment: str | None,
    shards: int | None,
    policy: list[tuple[str, int]],
    symbolic_policy: bool,
    engine: str,
    max_k: int,
    timeout: float | None,
    format: str,
    progress: bool | None,
    verbose: bool = False,
) -> int:
    """`ledgercheck prove`: every (variant, property, environment) asked for, proved or refuted."""
    from ledgercheck.model import executor
    from ledgercheck.model.runs import environments_for, exit_code, result_json

    spec_file = load_spec(spec)
    if symbolic_policy and policy:
        raise UsageError("--symbolic-policy and --policy cannot be combined")
    plan = _ProofPlan(spec_file, shards, tuple(policy), symbolic_policy, timeout, engine, max_k)
    jobs: list[tuple[str, str, str]] = []
    for name in variant or spec_file.variants:
        one = spec_file.variant(name)
        plan.policy_of(one)  # a bad override is refused before any proof starts
        for prop_name in property or list(one.properties):
            prop = one.property(prop_name)
            jobs += [(name, prop_name, env_name) for env_name in environments_for(one, prop, environment)]
    reporter = progress_for(progress)
    try:
        # Independent proofs, on the command's executor (`--jobs`, `--executor`), in this order.
        results = executor.run_all(_prove_job, plan, jobs, executor.active(), plan.lost, reporter)
    finally:
        if reporter is not None:
            reporter.close()
    if format == "json":
        payload = []
        for result in results:
            data = result_json(result)
            data["engine"] = result.engine
            if result.invariant:
                data["invariant"] = result.invariant
            payload.append(data)
        print(json.dumps(payload, indent=2, default=str))
    else:
        fixed = next((r.policy for r in results if r.policy), None)
        if fixed:  # a PROVED line is a proof at this policy only: say which, and how to prove them all
            print(f"at {policy_text(fixed)} only (--symbolic-policy proves at every policy the spec allows)")
        proved_at = next((r.shards for r in results), None)
        if proved_at:  # and for this fleet, unless the proof says more (a pool trial read PROVED as for any size)
            print(
                f"for {plural(proved_at, 'shard')} (--shards N proves at another fleet size; "
                "-v names the proofs that hold for every one)"
            )
        for result in results:
            print(_line(result, verbose))
        for result in results:
            if result.traces:
                shown = spec_file.variant(result.variant)
                where = f"{result.variant} / {result.property} ({result.environment})"
                kind = "a lasso" if result.traces[0].loop_start is not None else "shortest trace"
                found = result.traces[0].policy if result.policy is None else {}  # symbolic: the values found
                at = f", at {policy_text(found)}" if found else ""
                print(f"\n== {where}: {kind} ({result.traces[0].length}{at})")
                print(trace_figure(result.traces[0], shown, prop=shown.property(result.property)))
            elif result.status == Status.UNKNOWN and "counterexample to induction" in result.note:
                print(f"\n== {result.variant} / {result.property}")
                print(result.note.split("; no proof: ", 1)[-1])
    return exit_code(results)


def _line(result: Result, verbose: bool = False) -> str:
    """A verdict line that fits a terminal: the engines' notes (how a proof went) only when
    `verbose`; an undecided result's reason cut to its first clause."""
    from ledgercheck.model.textout import brief

    note = f" ({result.note})" if verbose else ""
    if result.status == Status.PROVED:
        what = f"PROVED in {result.seconds:.1f}s{note}"
    elif result.status == Status.VIOLATED:
        what = f"VIOLATED at depth {result.depth}{note}"
    elif result.status == Status.NOT_APPLICABLE:
        what = "not checked here" + note
    elif result.status == Status.HOLDS_TO_DEPTH:  # a liveness search that stopped at its bound
        what = f"holds up to depth {result.depth}{note}"
    else:
        what = f"UNKNOWN ({brief(result.note, verbose)})"
    expect = ""
    if result.matches is True:
        expect = "  [as expected]"
    elif result.matches is False:
        expect = f"  [MISMATCH: the spec expects {result.expected}]"
    line = f"{result.variant:<18} {result.property:<40} {result.environment:<11} {what}{expect}"
    if result.assumptions:
        line += f"\n{'':<18} {'':<40} {'':<11} {result.assumptions}"
    return line


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
