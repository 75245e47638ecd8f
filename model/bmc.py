"""Bounded model checking: the shortest traces that break a property, and every distinct one.

One Z3 solver is deepened one transition at a time; the goal "the property fails for the
first time at depth d" is asked under an assumption literal, so nothing is re-encoded
and the first answer is the shortest counterexample. After each find, the trace's *view*
(the focus shard's events and changed fields, step by step) is blocked and the solver is
asked again, so every listed trace differs in what matters.

Per-shard properties are checked on shard 0 only: the spec language is symmetric in its
shards (no shard literal can be written, every loop visits every shard), so a violation on
any shard is, after renaming, a violation on shard 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import z3

from ledgercheck.model import budget, cone, ir, widths
from ledgercheck.model.breaking import breaks_last_step
from ledgercheck.model.encoding import NONE_CODE, StepVars, encoding_for
from ledgercheck.model.errors import UsageError
from ledgercheck.model.numbers import DISABLED, INTEGERS, bitvectors_enabled, number_of
from ledgercheck.model.result import FOCUS, EncodingMismatch, Result, Status, view_of
from ledgercheck.model.result import trace_key as _trace_key
from ledgercheck.model.spec import Property, PropertyKind, Spec, contracts_bind, plural
from ledgercheck.model.trace import Simulation, Step, Trace, base_url

if TYPE_CHECKING:
    from ledgercheck.model.spacer import Scope


class Checker:
    """Bounded model checking of one property of one spec variant in one environment."""

    def __init__(
        self,
        spec: Spec,
        environment: str,
        prop: Property,
        shards: int,
        policy: Mapping[str, int] | None,
        *,
        contracts: bool = False,
        timeout: float | None = None,
        progress: Callable[[str], None] | None = None,
        view: tuple[str, ...] | None = None,
        slicing: bool = True,
        memory: int | None = None,
        por: bool = False,
        symmetry_breaking: bool = False,
        bounds: bool = True,
        depth: int | None = None,
    ) -> None:
        """`depth`: the deepest this checker will unroll, where the caller knows it; the
        numbers are then bit-vectors of the width `model.widths` proves for that depth
        (unbounded integers where it proves none), which Z3 bit-blasts. Without it, or
        deeper than it, the encoding keeps Z3's integers."""
        self.spec = spec
        self.env = spec.environment(environment)
        self.prop = prop
        self.shards = shards
        self.policy = dict(policy) if policy is not None else None
        self.focus = cone.focus_of(prop)
        self.contracts = contracts
        self.timeout = timeout
        self.progress = progress
        self.view_fields = cone.view_fields(spec, prop, view)
        self.width = (
            widths.width_for(spec, self.env, shards, self.policy, depth)
            if depth is not None and bitvectors_enabled()
            else widths.Width(INTEGERS, why="no depth given" if depth is None else DISABLED)
        )
        self.depth_bound = depth if self.width.numbers.bounded else None
        self.enc = encoding_for(spec, self.env, shards, self.policy, contracts=contracts, numbers=self.width.numbers)
        self.sliced = cone.slice_encoding(self.enc, prop, self.view_fields) if slicing else 0
        ctx = self.enc.ctx
        self.ctx = ctx
        if self.width.numbers.bounded:
            self.solver = z3.SolverFor("QF_BV", ctx=ctx)
        else:
            self.solver = z3.SolverFor("QF_LIA", ctx=ctx) if self.policy is not None else z3.Solver(ctx=ctx)
        if timeout:
            self.solver.set("timeout", max(1, int(timeout * 1000)))
        if memory:
            self.solver.set("max_memory", int(memory))
        self.states: list[StepVars] = [self.enc.step_vars(0)]
        self.pairs: list[list[tuple[Any, Any]]] = []
        self.bad: list[Any] = []
        self.solver.add(self.enc.initial(self.states[0].state))
        # Counters that can never be negative (`model.reduction.nonnegative_counters`) are
        # stated so at every step: an invariant, not an assumption, and measured faster
        # (bench/solver_settings.py, `+bounds`).
        self.nonnegative: list[Any] = []
        if bounds:
            from ledgercheck.model.reduction import node_of, nonnegative_counters

            counters = nonnegative_counters(spec, self.env, self.policy)
            self.nonnegative = [key for key in self.enc.keys if node_of(key) in counters]
        self._bound(self.states[0])
        self.step_bad = self.enc.step_violation(prop, self.focus) if prop.kind == PropertyKind.STEP else None
        self.focus_events = self.enc.focus_events(self.focus) if self.focus is not None else None
        self.focus_events_at: list[Any] = []
        self.blockers: list[ViewBlocker] = []
        # Partial-order reduction (`por`): of two adjacent steps that work on different shards
        # alone (they commute), only the order with the lower shard first is unrolled. Every
        # trace has a reordering of at most its length that keeps that order, reaches the same
        # states and shows the focus shard the same steps; a fleet property's view is the
        # action sequence itself, so it keeps every order. Off by default: measured in
        # bench/solver_settings.py, the solver is no faster with it on the bundled spec.
        self.local_shard = self.enc.local_shard_term() if por and self.focus is not None else None
        self.local_shard_at: list[Any] = []
        # Symmetry breaking (`symmetry_breaking`): the shards other than the focus shard are
        # interchangeable, so only traces that first name them (as an action's shard
        # argument) in increasing order are unrolled: shard j+1 is named only once shard j
        # has been. Renaming the other shards by first use turns any trace into such a one,
        # with the same length and the same view of the focus shard. Not combined with `por`
        # (each argument assumes the other's traces are all there). Off by default: measured
        # in bench/solver_settings.py, no faster on the bundled spec.
        self.uses = self._shard_uses() if symmetry_breaking and not por and self.focus is not None else None
        self.used_by: list[list[Any]] = []

    def _shard_uses(self) -> list[Any] | None:
        """Over the template, per shard: the step names it as a shard argument."""
        uses = []
        for shard in range(self.shards):
            named = [inst.index for inst in self.enc.instances if shard in inst.shards.values()]
            uses.append(z3.Or([self.enc.act == i for i in named]) if named else z3.BoolVal(False, self.ctx))
        return uses if self.shards > 2 else None

    def _break_symmetry(self, pairs: list[tuple[Any, Any]]) -> None:
        assert self.uses is not None
        now = [z3.substitute(u, *pairs) for u in self.uses]
        before = self.used_by[-1] if self.used_by else [z3.BoolVal(False, self.ctx)] * self.shards
        used = [z3.Or(b, n) for b, n in zip(before, now, strict=True)]
        for j in range(FOCUS + 2, self.shards):  # the focus shard is 0; the others are 1..N-1
            self.solver.add(z3.Implies(now[j], used[j - 1]))
        self.used_by.append(used)

    def _bound(self, state: StepVars) -> None:
        for key in self.nonnegative:
            self.solver.add(state.state[key] >= 0)

    def deepen(self) -> None:
        """Unroll one more step: the transition from the last state to a new one."""
        depth = len(self.states)
        if self.depth_bound is not None and depth > self.depth_bound:
            raise EncodingMismatch(
                f"internal error: unrolled to depth {depth}, "
                f"beyond the {self.depth_bound} its bit-vectors were proven for"
            )
        cur = self.states[-1]
        nxt = self.enc.step_vars(depth)
        self._bound(nxt)
        pairs = self.enc.substitution(cur, depth - 1)
        self.solver.add(self.enc.transition(nxt, pairs))
        self.states.append(nxt)
        self.pairs.append(pairs)
        if self.focus_events is not None:
            self.focus_events_at.append(z3.substitute(self.focus_events, *pairs))
        if self.uses is not None:
            self._break_symmetry(pairs)
        if self.local_shard is not None:
            self.local_shard_at.append(z3.substitute(self.local_shard, *pairs))
            if len(self.local_shard_at) > 1:
                before, after = self.local_shard_at[-2], self.local_shard_at[-1]
                self.solver.add(z3.Or(before < 0, after < 0, before <= after))

    def _bad_at(self, depth: int) -> Any:
        if self.prop.kind == PropertyKind.INVARIANT:
            return self.enc.invariant_violation(self.prop, self.focus, self.states[depth].state)
        if depth == 0:
            return z3.BoolVal(False, self.ctx)
        assert self.step_bad is not None
        return z3.substitute(self.step_bad, *self.pairs[depth - 1])

    def run(self, max_depth: int, max_traces: int, extra: Any = None, stop: Callable[[], bool] | None = None) -> Result:
        """Deepen to `max_depth`, collecting up to `max_traces` distinct traces. `stop` is
        asked after each depth that found none: when it answers True (an unbounded proof
        landed), the search ends with status `proved` at the depth it had reached."""
        start = time.monotonic()
        traces: list[Trace] = []
        views: set[tuple[Any, ...]] = set()
        status, reached = Status.HOLDS_TO_DEPTH, max_depth
        for depth in range(max_depth + 1):
            if depth > 0:
                self.deepen()
            bad = self._bad_at(depth)
            self.bad.append(bad)
            goal = z3.Bool(f"goal@{depth}", self.ctx)
            earlier = [z3.Not(b) for b in self.bad[:-1]]
            self.solver.add(z3.Implies(goal, z3.And([bad, *earlier]) if earlier else bad))
            if extra is not None:
                self.solver.add(z3.Implies(goal, extra(self, depth)))
            for blocker in self.blockers:
                self.solver.add(z3.Implies(goal, blocker.not_matched_at(depth)))
            found_here: list[Trace] = []
            attempts = 0
            while len(traces) + len(found_here) < max_traces and attempts < 64:
                attempts += 1
                spent = budget.limit_solver(self.solver, self.timeout)
                if spent is not None:
                    note = f"the {spent} ran out at depth {depth}; holds up to depth {max(depth - 1, 0)}"
                    return self._result(Status.UNKNOWN, max(depth - 1, 0), traces + found_here, start, note)
                try:
                    answer = budget.answered(self.solver, self.solver.check(goal))
                except z3.Z3Exception as exc:  # e.g. the memory cap
                    note = f"the solver stopped at depth {depth}: {exc}; holds up to depth {max(depth - 1, 0)}"
                    return self._result(Status.UNKNOWN, max(depth - 1, 0), traces + found_here, start, note)
                if answer == z3.unsat:
                    break
                if answer == z3.unknown:
                    status, reached = Status.UNKNOWN, depth - 1
                    spent = budget.active().exhausted()
                    why = (
                        f"the {spent} ran out at depth {depth}"
                        if spent
                        else (f"the solver gave up at depth {depth} ({self.solver.reason_unknown()})")
                    )
                    note = f"{why}; holds up to depth {max(depth - 1, 0)}"
                    return self._result(Status.UNKNOWN, max(reached, 0), traces + found_here, start, note)
                model = self.solver.model()
                trace = self.extract(model, depth, breaks=True)
                key = view_of(trace, self.spec, self.focus, self.view_fields)
                if key not in views:
                    views.add(key)
                    found_here.append(trace)
                    if len(traces) + len(found_here) >= max_traces:
                        break  # the search ends here: nothing to exclude from a next query
                if self.focus is None:
                    self.solver.add(z3.Implies(goal, z3.Not(self._same_actions(model, depth))))
                else:
                    blocker = ViewBlocker(self, model, depth)
                    self.blockers.append(blocker)
                    self.solver.add(z3.Implies(goal, blocker.not_matched_at(depth)))
            found_here.sort(key=lambda t: _trace_key(t))
            traces.extend(found_here)
            if self.progress:
                self.progress(
                    f"{self.prop.name}: depth {depth}, {len(traces)} trace(s), {time.monotonic() - start:.1f}s"
                )
            if traces and len(traces) >= max_traces:
                break
            if stop is not None and not traces and depth < max_depth and stop():
                return self._result(Status.PROVED, depth, traces, start)
        if traces:
            status, reached = Status.VIOLATED, traces[0].depth
        return self._result(status, reached, traces, start)

    def _result(self, status: Status, depth: int, traces: list[Trace], start: float, note: str = "") -> Result:
        return Result(
            variant=self.spec.variant,
            property=self.prop.name,
            environment=self.env.name,
            shards=self.shards,
            policy=self.policy,
            status=status,
            depth=depth,
            traces=traces,
            expected=self.prop.expect.get(self.spec.variant),
            seconds=time.monotonic() - start,
            note=note,
        )

    def _same_actions(self, model: z3.ModelRef, depth: int) -> Any:
        """The trace just found, action by action (fleet properties have no focus shard)."""
        parts = [self.states[t].act == model.eval(self.states[t].act, model_completion=True) for t in range(depth)]
        return z3.And(parts) if parts else z3.BoolVal(True, self.ctx)

    def view_term(self, t: int, name: str) -> Any:
        """What the view records of a focus field after transition t: its value, or for
        opaque text (whose token numbers mean nothing) whether it changed."""
        assert self.focus is not None
        after = self.states[t + 1].state[(self.focus, name)]
        if self.enc.vars[(self.focus, name)].type.kind == "str":
            return after != self.states[t].state[(self.focus, name)]
        return after

    def touched(self, t: int) -> Any:
        """Transition t changes an observed field of the focus shard."""
        assert self.focus is not None
        return z3.Or(
            [
                self.states[t + 1].state[(self.focus, n)] != self.states[t].state[(self.focus, n)]
                for n in self.view_fields
            ]
        )

    def extract(self, model: z3.ModelRef, depth: int, breaks: bool = False) -> Trace:
        """Read the actions off the model and replay them on the executable model (raising
        `EncodingMismatch` where the two disagree: a state, or with `breaks`, whether the
        last step breaks the property, as the interpreter judges it)."""
        policy = self.policy or {
            name: number_of(model.eval(var, model_completion=True)) for name, var in self.enc.policy_vars.items()
        }
        sim = Simulation(self.spec, self.env, self.shards, policy)
        tokens: dict[tuple[int, int], str] = {}
        steps: list[Step] = [sim.initial_step()]
        self._compare(model, 0, sim, tokens)
        before: dict[Any, Any] = dict(sim.store)
        effects: Any = None
        for t in range(depth):
            state = self.states[t]
            index = number_of(model.eval(state.act, model_completion=True))
            inst = self.enc.instances[index]
            values: dict[str, Any] = {}
            owner = next(iter(inst.shards.values()), 0)
            for param in inst.action.value_params:
                raw = model.eval(state.params[(inst.action.name, param.name)], model_completion=True)
                values[param.name] = self._concrete(raw, param.type, owner, tokens)
            before = dict(sim.store)
            step, effects = sim.apply(inst.action, inst.shards, values)
            steps.append(step)
            self._compare(model, t + 1, sim, tokens)
        if breaks and not breaks_last_step(sim.machine, self.prop, self.focus, sim.store, before, effects):
            raise EncodingMismatch(
                f"internal error: the solver's trace of {depth} steps breaks {self.prop.name}, "
                "but the interpreter's replay of it does not"
            )
        classification = "reachable"
        if any(not c.contract_ok for s in steps[1:] for c in s.calls):
            classification = "lax_guard"
        return Trace(
            self.spec.name,
            self.spec.variant,
            self.env.name,
            self.shards,
            policy,
            tuple(steps),
            self.focus,
            classification,
        )

    def _concrete(self, raw: Any, vtype: ir.Type, shard: int, tokens: dict[tuple[int, int], str]) -> Any:
        return concrete_value(self.spec, raw, vtype, shard, tokens)

    def _compare(self, model: z3.ModelRef, t: int, sim: Simulation, tokens: dict[tuple[int, int], str]) -> None:
        """The solver's state at step t must be the interpreter's: one semantics, checked."""
        for key, var in self.states[t].state.items():
            decl = self.enc.vars[key]
            raw = model.eval(var, model_completion=True)
            shard = key[0] if key[0] is not None else 0
            expected = self._concrete(raw, decl.type, shard, tokens)
            actual = sim.store[key]
            if decl.type.kind == "str" and isinstance(actual, str) and isinstance(expected, str):
                continue  # token names are ours; equality structure is checked by the guards
            if expected != actual:
                raise EncodingMismatch(
                    f"internal error: at step {t}, {key[1]}[{key[0]}] is {expected!r} in the Z3 model "
                    f"but {actual!r} in the interpreter"
                )


class ViewBlocker:
    """Excludes every trace, at any depth, whose view equals one already found.

    The view is the subsequence of transitions that change the focus shard; a small
    automaton over the unrolled steps tracks how much of the found view a trace has
    matched (`pos`), jumping to a dead position on any other focus change. Interleavings
    of unrelated steps are therefore blocked along with the trace itself.
    """

    def __init__(self, checker: Checker, model: z3.ModelRef, depth: int) -> None:
        self.checker = checker
        self.items: list[tuple[Any, list[Any]]] = []
        names = checker.view_fields
        for t in range(depth):
            if not z3.is_true(model.eval(checker.touched(t), model_completion=True)):
                continue
            events = model.eval(checker.focus_events_at[t], model_completion=True)
            values = [model.eval(checker.view_term(t, n), model_completion=True) for n in names]
            self.items.append((events, values))
        self.length = len(self.items)
        self.pos: list[Any] = []
        self.index = len(checker.blockers)

    def _extend(self, depth: int) -> None:
        chk = self.checker
        names = chk.view_fields
        dead = self.length + 1
        while len(self.pos) <= depth:
            t = len(self.pos)
            var = chk.enc.numbers.selector(dead + 1).var(f"view{self.index}@{t}", chk.ctx)
            if t == 0:
                chk.solver.add(var == 0)
            else:
                prev = self.pos[t - 1]
                step = t - 1
                matches = []
                for j, (events, values) in enumerate(self.items):
                    fields = [chk.view_term(step, n) == v for n, v in zip(names, values, strict=True)]
                    matches.append(z3.And(prev == j, chk.focus_events_at[step] == events, *fields))
                advance = z3.If(z3.Or(matches) if matches else z3.BoolVal(False, chk.ctx), prev + 1, dead)
                chk.solver.add(var == z3.If(chk.touched(step), advance, prev))
            self.pos.append(var)

    def not_matched_at(self, depth: int) -> Any:
        self._extend(depth)
        return self.pos[depth] != self.length


def concrete_value(spec: Spec, raw: Any, vtype: ir.Type, shard: int, tokens: dict[tuple[int, int], str]) -> Any:
    """A value of a Z3 model as the interpreter holds it. Opaque text tokens become
    strings named after the shard (`http://shard-1.restarted`), fresh per token."""
    if vtype.kind == "bool":
        return z3.is_true(raw)
    value = number_of(raw)
    if vtype.optional and value == NONE_CODE:
        return None
    if vtype.kind == "int":
        return value
    if vtype.kind == "enum":
        return spec.enums[vtype.enum or ""].members[value]
    if value == 0:
        return base_url(shard)
    if (shard, value) not in tokens:
        n = sum(1 for (s, _) in tokens if s == shard) + 1
        tokens[(shard, value)] = f"{base_url(shard)}.restarted" + (f"-{n}" if n > 1 else "")
    return tokens[(shard, value)]


RACE_HEAD_START = 0.5
"""Seconds of bounded search before the proof race begins (most counterexamples are found
sooner; a property that holds keeps the search deepening past it)."""

PROOF_FIRST_RLIMIT = 3_000_000
"""Z3's resource count allowed for the proof tried before the bounded search of a property
the spec expects to hold (`_proof_first`): about a second here, the time the bounded search
to depth 12 takes on the controller's properties. A count, not a timeout, so whether the
proof lands does not depend on the machine's load, and the output is the same on every run.
Larger fleets and deeper searches allow more, a search in bit-vectors at most that size less
(`proof_first_rlimit`)."""

BITVECTOR_SHARE = 3
"""How much less of the flat count the proof may spend where the search it would spare runs in
bit-vectors: up to 4 shards and depth 12 that search is about three times faster, and the
controller's five properties that have no invariant within the count took 0.3-1.3 s to depth
12 in bit-vectors, against a failed attempt of about 1.5 s at 3 million; the proofs that land
need under one million, but for `restarts_stay_within_budget` (1.2-1.7 million, whose search
in bit-vectors takes 0.3 s). Beyond that size the proofs need more (the headline property
3.15 million at 8 shards, where its search in bit-vectors to depth 12 takes seconds), so the
proportional count stands whichever numbers the search uses (bench/RESULTS.md)."""


def proof_first_rlimit(shards: int, max_depth: int, bitvectors: bool = False) -> int:
    """The count for the proof tried first: PROOF_FIRST_RLIMIT up to 4 shards and depth 12,
    and in proportion to shards times depth beyond, as the bounded search it would spare grows
    at least that fast (its unrolling is that big). At 8 shards the headline property's proof
    needs 3.15 million, just over the flat count: the search to depth 20 then ran 2.4 s after a
    failed attempt of 1.9 s, where the proof alone takes about 1 s. A third of the flat count
    where the search it would spare runs in bit-vectors, up to that size (`BITVECTOR_SHARE`)."""
    scaled = PROOF_FIRST_RLIMIT * shards * max_depth // (4 * 12)
    if scaled > PROOF_FIRST_RLIMIT:
        return scaled
    return PROOF_FIRST_RLIMIT // BITVECTOR_SHARE if bitvectors else PROOF_FIRST_RLIMIT


class _ProofRace:
    """Spacer in a child process, asked between depths of the bounded search whether it has
    proved the property yet. The child starts only once the search has run `head_start`
    seconds: a counterexample found sooner costs no second process."""

    def __init__(
        self,
        spec: Spec,
        environment: str,
        prop: Property,
        *,
        shards: int,
        policy: Mapping[str, int],
        timeout: float | None,
        head_start: float = RACE_HEAD_START,
    ) -> None:
        self.args = (spec, environment, prop)
        self.bounds = {"shards": shards, "policy": dict(policy), "timeout": timeout}
        self.invariant: str | None = None
        self.scope: Scope | None = None  # for which fleets the proof holds, once it landed
        self.begun = time.monotonic()
        self.head_start = head_start
        self.process: Any = None
        self.conn: Any = None

    def _start(self) -> None:
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self.conn, child_end = context.Pipe(duplex=False)
        self.process = context.Process(target=_prove_in_child, args=(child_end, *self.args), kwargs=self.bounds)
        self.process.daemon = True
        self.process.start()
        child_end.close()

    def proved(self) -> bool:
        if self.process is None:
            if time.monotonic() - self.begun >= self.head_start:
                self._start()
            return False
        if self.invariant is None and self.conn.poll():
            try:
                proved, text, scope = self.conn.recv()
            except (EOFError, OSError):
                return False
            if proved:
                self.invariant, self.scope = text, scope
        return self.invariant is not None

    def close(self) -> None:
        if self.process is None:
            return
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()


def _prove_in_child(
    conn: Any,
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: dict[str, int],
    timeout: float | None,
) -> None:
    from ledgercheck.model.spacer import spacer_proof

    try:
        answer, text, scope = spacer_proof(spec, environment, prop, shards, policy, timeout)
        conn.send((answer == z3.sat, text, scope))
    except Exception:  # noqa: BLE001 - the race is an optimisation: the bounded search decides alone
        conn.send((False, "", None))
    finally:
        conn.close()


def _proof_first(
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: Mapping[str, int] | None,
    timeout: float | None,
    max_depth: int,
    contracts: bool | None = None,
    proof_wanted: bool = False,
) -> bool:
    """For a property the spec expects to hold, with a fixed policy: whether an inductive
    invariant, found by Spacer within `proof_first_rlimit` and checked by a plain solver
    (`spacer._certified`), settles every depth at once, so that the bounded search need not
    run; its result (holds up to the depth asked, no trace) is what the search would have
    printed. False when there is no such invariant within the count (or the spec expects a
    violation): the bounded search decides, so a regression is still found, at the cost of
    the attempt. `contracts` False: the system without the callers' contracts (the lax
    search's). `proof_wanted`: the caller asks Spacer for a proof after the search anyway
    (`prove`), so the count is never cut for a search in bit-vectors: a proof the cut count
    misses would only add that search before the same proof."""
    from ledgercheck.model.spacer import spacer_proof

    if policy is None or prop.expect.get(spec.variant) != "holds":
        return False
    rlimit = proof_first_rlimit(shards, max_depth)
    # beyond the flat count the numbers do not matter, nor where a proof is wanted anyway
    if (
        rlimit == PROOF_FIRST_RLIMIT
        and not proof_wanted
        and bitvectors_enabled()
        and widths.width_for(spec, spec.environment(environment), shards, policy, max_depth).numbers.bounded
    ):
        rlimit = proof_first_rlimit(shards, max_depth, bitvectors=True)
    try:
        answer, _, _ = spacer_proof(
            spec,
            environment,
            prop,
            shards,
            policy,
            timeout,
            rlimit=rlimit,
            certify=True,
            contracts=contracts,
            text=False,
        )
    except z3.Z3Exception:  # e.g. the memory cap: the bounded search decides
        return False
    return bool(answer == z3.sat)


def check_property(
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: Mapping[str, int] | None,
    max_depth: int,
    max_traces: int,
    timeout: float | None = None,
    progress: Callable[[str], None] | None = None,
    lax: bool = True,
    view: tuple[str, ...] | None = None,
    prove: bool = False,
    memory: int | None = None,
    race_proof: bool = False,
    proof_wanted: bool = False,
) -> Result:
    """Check one property. In an environment that may call anything (`any_call`), the
    verdict is about traces within the callers' contracts (`requires`); traces that need a
    call outside them are searched for separately and reported as `lax_traces`.

    `race_proof` runs an unbounded proof (Spacer) in a second process while the bounded
    search deepens: when the proof lands first, the search stops and the result is `proved`
    (no trace of any length breaks the property, so none up to `max_depth` does). On a
    machine with two cores, a property that holds costs the faster of the two. Not where the
    spec expects a violation (the search then decides alone: a property that unexpectedly
    holds comes back `holds_to_depth`, a mismatch all the same).

    A property the spec expects to hold is first given to Spacer within a fixed resource
    count (`_proof_first`); a checked invariant settles it without the search (and without a
    race): the result is the search's, or `proved` with `prove` or `race_proof`. With
    `proof_wanted` (or `prove`) the caller asks for a proof after the search anyway, so that
    count is never cut where the search runs in bit-vectors (`proof_first_rlimit`).

    Safety properties only: `model.engines.check_property` routes an `eventually` one to the
    fair-lasso search."""
    if prop.kind == PropertyKind.EVENTUALLY:  # liveness: a lasso search, not a bounded one
        raise UsageError("liveness properties are checked by model.liveness (model.engines.check_property)")
    env = spec.environment(environment)
    if not prop.applies_to(environment):
        return Result.not_applicable(spec, prop, environment, shards, policy)
    start = time.monotonic()
    # Where the traces outside the callers' contracts are searched for too, a proof for the
    # system without the contracts (which has every trace the one with them has) settles the
    # verdict and that search at once, so it is tried first.
    bound = contracts_bind(env, prop)
    searches_lax = bound and lax
    wanted = proof_wanted or prove
    proved_lax = searches_lax and _proof_first(
        spec,
        environment,
        prop,
        shards=shards,
        policy=policy,
        timeout=timeout,
        max_depth=max_depth,
        contracts=False,
        proof_wanted=wanted,
    )
    proved_first = proved_lax or _proof_first(
        spec, environment, prop, shards=shards, policy=policy, timeout=timeout, max_depth=max_depth, proof_wanted=wanted
    )
    # No race where the spec expects a violation: the search is expected to end on a trace,
    # and a second process would only take a core from it (and from the other checks).
    race = (
        _ProofRace(spec, environment, prop, shards=shards, policy=policy, timeout=timeout)
        if race_proof and policy is not None and not proved_first and prop.expect.get(spec.variant) != "violated"
        else None
    )
    if proved_first:
        result = Result(
            variant=spec.variant,
            property=prop.name,
            environment=environment,
            shards=shards,
            policy=policy,
            status=Status.HOLDS_TO_DEPTH,
            depth=max_depth,
            expected=prop.expect.get(spec.variant),
            seconds=time.monotonic() - start,
            engine="spacer",
            proved_beyond=True,
        )
        if progress:
            progress(f"{prop.name}: holds at every depth (a checked inductive invariant), {result.seconds:.1f}s")
    else:
        checker = Checker(
            spec,
            environment,
            prop,
            shards,
            policy,
            contracts=bound,
            timeout=timeout,
            progress=progress,
            view=view,
            memory=memory,
            depth=max_depth,
        )
        try:
            result = checker.run(max_depth, max_traces, stop=race.proved if race else None)
        finally:
            if race is not None:
                race.close()
    if race is not None and race.invariant is not None and result.status == Status.PROVED:
        scope = race.scope.phrase(shards) if race.scope is not None else plural(shards, "shard")
        result.engine, result.invariant = "spacer", race.invariant
        result.note = (
            f"proved by spacer for {scope} (an inductive invariant exists), while the bounded search "
            f"had shown it up to depth {result.depth}"
        )
        result.depth = max_depth
    if policy is None and result.status != Status.UNKNOWN:
        result.region = policy_region(spec, environment, prop, shards, max_depth, timeout)
        result.region_depth = max_depth  # how deep the region was searched (it said 0 unless a proof was asked)
    # A proof found first is reported as one where a proof is asked for, or raced for (auto);
    # asking Spacer again returns the invariant it found (`spacer._FOUND`).
    if (prove or (race_proof and proved_first)) and result.status == Status.HOLDS_TO_DEPTH:
        from ledgercheck.model.spacer import spacer_proof

        answer, invariant, proved_for = spacer_proof(spec, environment, prop, shards, policy, timeout)
        if answer == z3.sat:
            result.status, result.engine, result.invariant = Status.PROVED, "spacer", invariant
            scope = proved_for.phrase(shards)
            result.note = f"proved by spacer for {scope} (an inductive invariant exists)"
        elif answer == z3.unsat and prove:
            # Refuted beyond the depth asked: a proof was asked for, so the answer is the
            # violation (a budget refill that broke a property at depth 15 read "holds up to
            # depth 12" under --prove), with its trace where a deeper search finds it.
            return _refuted_beyond(spec, environment, prop, result, shards, policy, max_depth, max_traces, timeout)
        result.region_depth = max_depth
    if searches_lax and result.status != Status.UNKNOWN:
        if proved_lax:  # a property that holds even without the contracts has no trace outside them
            return result
        lax_checker = Checker(
            spec, environment, prop, shards, policy, contracts=False, timeout=timeout, view=view, depth=max_depth
        )

        broken: Any = None  # over the template: a call outside the contracts (built at the first ask)
        broken_at: list[Any] = []  # the same at step t, each step built once

        def needs_lax_call(chk: Checker, depth: int) -> Any:
            nonlocal broken
            if broken is None:
                broken = chk.enc.contract_violation()
            broken_at.extend(z3.substitute(broken, *chk.pairs[t]) for t in range(len(broken_at), depth))
            return z3.Or(broken_at[:depth] or [z3.BoolVal(False, chk.ctx)])

        lax_result = lax_checker.run(max_depth, max_traces, extra=needs_lax_call)
        result.lax_traces = [t for t in lax_result.traces if t.classification == "lax_guard"]
    return result


def policy_region(
    spec: Spec, environment: str, prop: Property, shards: int, max_depth: int, timeout: float | None = None
) -> dict[str, dict[str, list[int]]]:
    """Per policy constant, the values for which some trace of at most `max_depth` steps
    breaks the property (the other constants free in their declared ranges), and the
    values for which none does. One unrolling; one query per value not yet covered by a
    counterexample's policy."""
    env = spec.environment(environment)
    checker = Checker(spec, environment, prop, shards, None, contracts=contracts_bind(env, prop), timeout=timeout)
    bad = [checker._bad_at(0)]
    for depth in range(1, max_depth + 1):
        checker.deepen()
        bad.append(checker._bad_at(depth))
    flag = z3.Bool("some_violation", checker.ctx)
    checker.solver.add(z3.Implies(flag, z3.Or(bad)))
    policy_vars = checker.enc.policy_vars
    region: dict[str, dict[str, list[int]]] = {name: {"violated": [], "holds_to_depth": []} for name in spec.policy}
    covered: dict[str, set[int]] = {name: set() for name in spec.policy}

    def record(model: z3.ModelRef) -> None:
        for name, var in policy_vars.items():
            covered[name].add(model.eval(var, model_completion=True).as_long())

    if budget.limit_solver(checker.solver, timeout) is not None:
        return region
    answer = budget.answered(checker.solver, checker.solver.check(flag))
    if answer == z3.unsat:
        for name, decl in spec.policy.items():
            region[name]["holds_to_depth"] = list(range(decl.min, decl.max + 1))
        return region
    if answer == z3.sat:
        record(checker.solver.model())
    for name, decl in spec.policy.items():
        for value in range(decl.min, decl.max + 1):
            if value not in covered[name]:
                if budget.limit_solver(checker.solver, timeout) is not None:
                    return region
                answer = budget.answered(checker.solver, checker.solver.check(flag, policy_vars[name] == value))
                if answer == z3.sat:
                    record(checker.solver.model())
                elif answer == z3.unknown:
                    continue
            key = "violated" if value in covered[name] else "holds_to_depth"
            region[name][key].append(value)
    return region


REFUTED_DEPTH_FACTOR = 4
"""How much deeper than the depth asked the trace of a property Spacer refuted is searched
for (as `prove` searches for it)."""


def _refuted_beyond(
    spec: Spec,
    environment: str,
    prop: Property,
    searched: Result,
    shards: int,
    policy: Mapping[str, int] | None,
    max_depth: int,
    max_traces: int,
    timeout: float | None,
) -> Result:
    """A property the bounded search found no violation of up to `max_depth` and Spacer
    refuted: violated, with the shortest trace a deeper search finds (or none, and a note)."""
    deeper = check_property(
        spec,
        environment,
        prop,
        shards=shards,
        policy=policy,
        max_depth=REFUTED_DEPTH_FACTOR * max(max_depth, 1),
        max_traces=max_traces,
        timeout=timeout,
        lax=False,
    )
    if deeper.status == Status.VIOLATED:
        deeper.note = (
            f"no violation up to depth {max_depth}; spacer refuted it, and a deeper search found the trace "
            f"at depth {deeper.depth}"
        )
        deeper.seconds += searched.seconds
        return deeper
    searched.status = Status.VIOLATED
    searched.engine = "spacer"
    searched.note = (
        f"no violation up to depth {max_depth}; spacer refuted it, beyond the deeper search's depth "
        f"{REFUTED_DEPTH_FACTOR * max(max_depth, 1)} (no trace)"
    )
    return searched
