"""Liveness by bounded model checking: a search for fair lassos with Z3.

The explicit engine (`model.liveness`) exhausts the reduced graph where it is small; where it
is not (the controller at 4 shards), this search goes deeper. A lasso of length k is a path
s0 .. sk of the transition system with sk equal to some earlier sl on every variable of the
cone of influence (what P, Q and the fair actions' guards read, closed as for safety
slicing: a variable outside it never influences them, so the loop repeats on the full
system), a step t0 <= l where P holds, Q false at every state from t0 to k, and every weak
fairness group met in the loop: for each group and shard, some state of the loop where no
action of the group is enabled on that shard (for every value of the action's parameters:
a quantified condition), or a step of the loop that takes one. A state where no action at
all is enabled is a lasso of its own (l = k: the run stutters there).

Deepened one step at a time, so the first lasso found is a shortest one; none up to the
bound is `holds_to_depth` at that depth. Every lasso is replayed on the interpreter (as every
bounded trace is) and its loop is checked to close on the focus shard's state.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import z3

from ledgercheck.model import budget, ir
from ledgercheck.model.bmc import Checker
from ledgercheck.model.result import FOCUS, EncodingMismatch, Result, Status
from ledgercheck.model.spec import Property, PropertyKind, Spec
from ledgercheck.model.trace import Trace


def z3_lasso(
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: Mapping[str, int],
    max_depth: int,
    timeout: float | None = None,
) -> Result:
    start = time.monotonic()
    env = spec.environment(environment)
    both = ir.BoolOp("and", (prop.leads_from, prop.check))
    # An invariant over P and Q: its violation term makes both part of the cone; the view
    # is the state field alone, so fields nothing here reads (versions) stay out of it.
    probe = replace(prop, kind=PropertyKind.INVARIANT, when=None, check=both)
    checker = Checker(
        spec, environment, probe, shards, policy, contracts=env.any_call, view=(spec.state_field,), slicing=False
    )
    enc = checker.enc
    roots = [enc.invariant_violation(probe, FOCUS, enc.template)]
    fair_names = {name for group in env.fairness for name in group.actions}
    for inst in enc.instances:
        if inst.action.name in fair_names:
            roots.append(inst.enabled)
    enc.restrict_to(roots, lambda inst: inst.action.name in fair_names)
    checker.states = [enc.step_vars(0)]
    checker.nonnegative = [key for key in checker.nonnegative if key in enc.keys]
    checker.focus_events = None  # the view blocker is not used here
    ctx = enc.ctx
    solver = z3.Solver(ctx=ctx)  # quantifiers: "disabled for every parameter value"
    if timeout:
        solver.set("timeout", max(1, int(timeout * 1000)))
    solver.add(enc.initial(checker.states[0].state))
    checker.solver = solver
    p_t = enc.machine.invariant(None, prop.leads_from, FOCUS, enc.template)
    q_t = enc.machine.invariant(None, prop.check, FOCUS, enc.template)
    params = [enc.param_template(a, p.name) for a in env.actions for p in a.value_params]

    # The same terms at the same steps are asked for again at every deeper bound and every
    # loop start (quadratically often): each is built once. Building a term again yields
    # the same Z3 term, so remembering them changes no query, only the Python work.
    substituted: dict[tuple[int, int], tuple[Any, Any]] = {}  # keeps the term, so its id stays its own
    unable: dict[tuple[int, int], Any] = {}  # by (the instance list, step): the lists live as long as the search

    def at(term: Any, t: int) -> Any:
        key = (term.get_id(), t)
        if key not in substituted:
            state = checker.states[t].state
            substituted[key] = (term, z3.substitute(term, *[(enc.template[k], state[k]) for k in enc.keys]))
        return substituted[key][1]

    def disabled(insts: list[Any], t: int) -> Any:
        key = (id(insts), t)
        if key not in unable:
            guard = at(z3.Or([i.enabled for i in insts]) if insts else z3.BoolVal(False, ctx), t)
            free = [p for p in params if z3.is_const(p) and _mentions(guard, p)]
            unable[key] = z3.ForAll(free, z3.Not(guard)) if free else z3.Not(guard)
        return unable[key]

    groups: list[tuple[list[Any], list[int]]] = []
    for group in env.fairness:
        for shard in [*range(shards), None]:
            insts = [
                i
                for i in enc.instances
                if i.action.name in group.actions and next(iter(i.shards.values()), None) == shard
            ]
            if insts:
                groups.append((insts, [i.index for i in insts]))
    all_insts = list(enc.instances)
    found: tuple[z3.ModelRef, int, int] | None = None
    depth = 0
    assumptions = env.fairness_text()

    def answer(status: Status, depth: int, traces: list[Trace], note: str) -> Result:
        return Result(
            variant=spec.variant,
            property=prop.name,
            environment=environment,
            shards=shards,
            policy=policy,
            status=status,
            depth=depth,
            traces=traces,
            expected=prop.expect.get(spec.variant),
            seconds=time.monotonic() - start,
            note=note,
            engine="bmc",
            assumptions=assumptions,
        )

    def not_established(why: str, k: int) -> Result:
        """The search stopped before it could answer at depth `k`: unknown, never a pass."""
        held = f"no fair lasso up to depth {k - 1}" if k > 0 else "nothing established"
        return answer(Status.UNKNOWN, max(k - 1, 0), [], f"{why} at depth {k} of the Z3 bounded lasso search; {held}")

    for k in range(0, max_depth + 1):
        if timeout and time.monotonic() - start > timeout:
            return not_established(f"the timeout ({timeout:g} s) ran out", k)
        if k > 0:
            checker.deepen()
        depth = k
        not_q = [z3.Not(at(q_t, t)) for t in range(k + 1)]
        # Stuttering at k (no action enabled), or a loop back to some l < k.
        options = []
        stutter = z3.And(disabled(all_insts, k), z3.Or([z3.And(at(p_t, t0), *not_q[t0:]) for t0 in range(k + 1)]))
        options.append((stutter, k))
        for loop in range(k):
            same = z3.And([checker.states[loop].state[key] == checker.states[k].state[key] for key in enc.keys])
            fair = []
            for insts, indices in groups:
                taken = [z3.Or([checker.states[t].act == i for i in indices]) for t in range(loop, k)]
                off = [disabled(insts, t) for t in range(loop, k)]
                fair.append(z3.Or(taken + off))
            trigger = z3.Or([z3.And(at(p_t, t0), *not_q[t0:]) for t0 in range(loop + 1)])
            options.append((z3.And(same, trigger, *fair), loop))
        for goal, loop in options:
            spent = budget.limit_solver(solver, timeout)
            if spent is not None:
                return not_established(f"the {spent} ran out", k)
            try:
                verdict = budget.answered(solver, solver.check(goal))
            except z3.Z3Exception as exc:  # e.g. the memory cap
                return not_established(f"the solver stopped ({exc})", k)
            if verdict == z3.unknown:
                spent = budget.active().exhausted()
                return not_established(
                    f"the {spent} ran out" if spent else f"the solver gave up ({solver.reason_unknown()})", k
                )
            if verdict == z3.sat:
                found = (solver.model(), k, loop)
                break
        if found:
            break
    if found is None:
        return answer(Status.HOLDS_TO_DEPTH, depth, [], f"no fair lasso up to depth {depth} (Z3 bounded lasso search)")
    model, k, loop = found
    trace = replace(checker.extract(model, k), loop_start=loop)
    if (
        trace.steps[k].after["shards"][FOCUS][spec.state_field]
        != trace.steps[loop].after["shards"][FOCUS][spec.state_field]
    ):
        raise EncodingMismatch("internal error: the Z3 lasso does not close on the focus shard's state")
    return answer(Status.VIOLATED, k, [trace], f"a lasso found by Z3 bounded search: {k} steps, back to step {loop}")


def _mentions(term: Any, var: Any) -> bool:
    stack, seen = [term], set()
    while stack:
        node = stack.pop()
        if node.get_id() in seen:
            continue
        seen.add(node.get_id())
        if node.eq(var):
            return True
        stack.extend(node.children())
    return False


__all__ = ["z3_lasso"]
