"""The interpreter and the Z3 encoding agree, step by step, on seeded random traces.

Both semantics run the same executor (`model.semantics.Machine`) over different back ends,
so they can only disagree in the back ends themselves or in how the encoding assembles the
transition relation (instances, If-chains over the action selector, parameter domains).
For every spec variant and environment (3 shards, the shipped policy) this test drives the
interpreter (`model.trace.Simulation`) through seeded random traces, picking uniformly among
the enabled (action, shard binding, values) choices, >= STEPS_PER_RUN steps in all. With
the interpreter's concrete state (and the choice's action and values) put into the
encoding's template:

* each trace's first state satisfies `Encoding.initial`;
* at every step the chosen instance is enabled (its `enabled` and `enabled_term` simplify
  to true), and DISABLED_PER_STEP random choices the interpreter disables simplify to false;
* at every step every variable's next value (`next_terms[key]` with the selector fixed)
  simplifies to exactly the interpreter's successor value; a mismatch is reported field by
  field (variant, environment, step, action, variable, both values);
* every SOLVER_EVERY steps, a solver holding `transition_template` accepts the interpreter's
  successor and rejects it with one randomly chosen field perturbed (a bool flipped, an
  int or string token + 1, an enum moved to another member).

Values are coded as the encoding's docstring says: enum members by index (None = -1), and
strings as per-shard tokens (the shard's constructor URL = 0, None = -1, every other string
a distinct positive integer, consistent over the whole run). The walk must take every action
and enter every state, so it cannot pass by idling in a corner.

Each walk runs twice: over Z3's integers and over the bit-vectors a bounded search may use
(`model.numbers`), wide enough for every value the walk reaches, so that the two ways of
writing the spec's numbers are each checked against the interpreter.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import z3
from tiers import fast_slice
from z3terms import apply, substitute

from ledgercheck.model import ir
from ledgercheck.model.encoding import NONE_CODE, Encoding, Instance
from ledgercheck.model.numbers import INTEGERS, Numbers, number_of
from ledgercheck.model.semantics import Key
from ledgercheck.model.spec import Action, Spec, load_spec
from ledgercheck.model.trace import Simulation, base_url

SPEC_PATH = Path(__file__).resolve().parents[1] / "spec" / "fleet_health.toml"
VARIANTS = ("as_written", "fixed")
ENVIRONMENTS = ("ledger", "controller")
# A spec with time (timers, clock ticks) and outcomes (raises, returns): the same walk, and
# every call's outcome compared too.
TIMED_PATH = Path(__file__).resolve().parents[1] / "spec" / "examples" / "timed_breaker.toml"
RUNS = [(SPEC_PATH, v, e) for v in VARIANTS for e in ENVIRONMENTS]
RUNS += [(TIMED_PATH, "base", e) for e in ("ledger", "callers")]
SHARDS = 3
STEPS_PER_RUN = 1000
SOLVER_EVERY = 10
DISABLED_PER_STEP = 2
TRACE_LENGTH = (5, 80)  # a new trace (from the initial state) after this many steps, or on deadlock
INTS = (0, 1, 2, 3)
OTHER_URL = "http://elsewhere"
# Wide enough for the walk's values (traces of at most 80 steps; string tokens above 1000).
BITVECTORS = Numbers(16)
FRESH_TOKENS = 1000

Choice = tuple[Action, dict[str, int], dict[str, Any]]


@functools.cache
def _spec_file(path: Path = SPEC_PATH) -> Any:
    return load_spec(path)


@dataclass
class Run:
    """One (variant, environment): the encoding, its string tokens and a solver over it."""

    variant: str
    env: str
    spec: Spec
    enc: Encoding

    def __post_init__(self) -> None:
        self.ctx = self.enc.act.ctx
        self.numbers = self.enc.numbers
        self.by_choice: dict[tuple[str, tuple[tuple[str, int], ...]], Instance] = {
            (inst.action.name, _binding(inst.shards)): inst for inst in self.enc.instances
        }
        self.tokens: dict[str, int] = {}
        self.values: dict[tuple[str, Any], Any] = {}  # Z3 values, made once
        self.fresh = 0
        self.solver = z3.SolverFor("QF_BV" if self.numbers.bounded else "QF_LIA", ctx=self.ctx)
        self.solver.add(self.enc.transition_template)
        # Everything a step compares, as one term, so that the concrete state is substituted
        # once per step: Row(enabled_term, every instance's guard, State(next values)).
        # Simplified with a choice put in, the State part must be the very term the
        # interpreter's successor codes to (Z3 terms are hash-consed: compared in one go).
        name = f"agreement_{self.variant}_{self.env}"
        state = z3.Datatype(f"{name}_state", self.ctx)
        state.declare("state", *[(_name(key), self.enc.template[key].sort()) for key in self.enc.keys])
        self.state_sort = state.create()
        row = z3.Datatype(f"{name}_row", self.ctx)
        guards = [self.enc.enabled_term] + [inst.enabled for inst in self.enc.instances]
        row.declare(
            "row", *[(f"guard{n}", z3.BoolSort(self.ctx)) for n in range(len(guards))], ("next", self.state_sort)
        )
        self.row_sort = row.create()
        nexts = self.state_sort.constructor(0)(*[self.enc.next_terms[key] for key in self.enc.keys])
        self.bundle = self.row_sort.constructor(0)(*guards, nexts)
        self.templates = [self.enc.template[key] for key in self.enc.keys]

    # -- values: interpreter -> Z3 --

    def token(self, value: str, shard: int | None) -> int:
        if shard is not None and value == base_url(shard):
            return 0
        if value in self.enc.backend.tokens:  # a string literal of the spec
            return self.enc.backend.tokens[value]
        return self.tokens.setdefault(value, len(self.tokens) + (FRESH_TOKENS if self.numbers.bounded else 1))

    def code(self, value: Any, vtype: ir.Type, shard: int | None) -> Any:
        """The interpreter's value as the encoding codes it."""
        if vtype.kind == "bool" and not vtype.optional:
            assert isinstance(value, bool), f"expected a bool, got {value!r}"
            return self.value("bool", value)
        if value is None:
            assert vtype.optional, f"None for a non-optional {vtype}"
            return self.value("int", NONE_CODE)
        if vtype.kind == "bool":
            return self.value("int", int(value))
        if vtype.kind == "int":
            assert isinstance(value, int) and not isinstance(value, bool), f"expected an int, got {value!r}"
            return self.value("int", value)
        if vtype.kind == "enum":
            return self.value("int", self.spec.enums[vtype.enum or ""].members.index(value))
        if vtype.kind in ("str", "any"):
            assert isinstance(value, str), f"expected a str, got {value!r}"
            return self.value("int", self.token(value, shard))
        raise AssertionError(f"no Z3 coding for {vtype}")

    def value(self, sort: str, value: Any) -> Any:
        made = self.values.get((sort, value))
        if made is None:
            made = z3.BoolVal(value, self.ctx) if sort == "bool" else self.numbers.value(value, self.ctx)
            self.values[(sort, value)] = made
        return made

    def coded(self, store: Mapping[Key, Any]) -> list[Any]:
        """A whole state, coded, in the order of `enc.keys`."""
        return [self.code(store[key], self.enc.vars[key].type, key[0]) for key in self.enc.keys]

    def state_pairs(self, coded: list[Any]) -> list[tuple[Any, Any]]:
        return list(zip(self.templates, coded, strict=True))

    def choice_pairs(self, inst: Instance, values: Mapping[str, Any]) -> list[tuple[Any, Any]]:
        owner = next(iter(inst.shards.values()), None)
        pairs = [(self.enc.act, self.enc.selector.value(inst.index, self.ctx))]
        for param in inst.action.value_params:
            pairs.append((inst.params[param.name], self.code(values[param.name], param.type, owner)))
        return pairs

    def at_state(self, coded: list[Any]) -> Any:
        """The bundle with the current state put in (action and parameters still free)."""
        return substitute(self.bundle, self.state_pairs(coded))

    def evaluate(self, at_state: Any, inst: Instance, values: Mapping[str, Any]) -> Row:
        """The bundle with the choice put in too, simplified."""
        row = z3.simplify(substitute(at_state, self.choice_pairs(inst, values)))
        assert row.decl().eq(self.row_sort.constructor(0)), f"not a row: {row}"
        return Row(row.arg(0), row.arg(1 + inst.index), row.arg(row.num_args() - 1))

    # -- the choices the environment offers --

    def choices(self, sim: Simulation) -> list[Choice]:
        out: list[Choice] = []
        for action in self.enc.environment.actions:
            for combo in itertools.product(range(SHARDS), repeat=len(action.shard_params)):
                shards = dict(zip(action.shard_params, combo, strict=True))
                owner = combo[0] if combo else None
                domains = [self.values_for(p.type, owner, sim) for p in action.value_params]
                for picked in itertools.product(*domains):
                    values = {p.name: v for p, v in zip(action.value_params, picked, strict=True)}
                    out.append((action, shards, values))
        return out

    def values_for(self, vtype: ir.Type, owner: int | None, sim: Simulation) -> list[Any]:
        values: list[Any] = []
        if vtype.kind == "bool":
            values = [True, False]
        elif vtype.kind == "int":
            values = list(INTS)
        elif vtype.kind == "enum":
            values = list(self.spec.enums[vtype.enum or ""].members)
        elif vtype.kind in ("str", "any"):
            self.fresh += 1
            values = [OTHER_URL, f"http://x{self.fresh}"]
            if owner is not None:  # the constructor's value, and what the shard holds now
                values.append(base_url(owner))
                values += [sim.store[(owner, v.name)] for v in self.spec.shard_vars if v.type.kind == "str"]
        else:
            raise AssertionError(f"no values for {vtype}")
        if vtype.optional:
            values.append(None)
        unique: list[Any] = []
        for value in values:
            if (value is not None or vtype.optional) and value not in unique:
                unique.append(value)
        return unique


@dataclass
class Row:
    """One choice's simplified Z3 terms: enabled_term, the instance's guard, the next state."""

    selected: Any
    enabled: Any
    next: Any


def _binding(shards: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(shards.items()))


def _describe(action: Action, shards: Mapping[str, int], values: Mapping[str, Any]) -> str:
    args = [str(shards[p]) for p in action.shard_params] + [f"{k}={v!r}" for k, v in values.items()]
    return f"{action.name}({', '.join(args)})"


def _name(key: Key) -> str:
    return f"{key[1]}[{key[0]}]" if key[0] is not None else key[1]


def _literal(term: Any) -> Any:
    """A simplified term as a Python value (bool or int), or None if it is not a literal."""
    if z3.is_true(term):
        return True
    if z3.is_false(term):
        return False
    if z3.is_int_value(term) or z3.is_bv_value(term):
        return number_of(term)
    return None


def _perturbed(run: Run, key: Key, current: Any, rng: random.Random) -> Any:
    """Another legal value of the variable `key` (coded as the encoding codes it)."""
    vtype = run.enc.vars[key].type
    if z3.is_bool(current):
        return z3.BoolVal(not z3.is_true(current), run.ctx)
    value = number_of(current)
    if vtype.kind == "enum":
        count = len(run.spec.enums[vtype.enum or ""].members)
        low = NONE_CODE if vtype.optional else 0
        return run.numbers.value(rng.choice([v for v in range(low, count) if v != value]), run.ctx)
    return run.numbers.value(value + 1, run.ctx)


def _check_step(
    run: Run,
    where: str,
    at_state: Any,
    inst: Instance,
    values: Mapping[str, Any],
    before: Mapping[Key, Any],
    after: Mapping[Key, Any],
    coded: tuple[list[Any], list[Any]],
    rng: random.Random,
    use_solver: bool,
) -> None:
    row = run.evaluate(at_state, inst, values)
    assert z3.is_true(row.enabled), f"{where}: the interpreter enables it, Z3's instance guard gives {row.enabled}"
    assert z3.is_true(row.selected), f"{where}: the interpreter enables it, Z3's enabled_term gives {row.selected}"
    coded_before, coded_after = coded
    if not row.next.eq(apply(run.state_sort.constructor(0), coded_after)):
        for n, (key, expected) in enumerate(zip(run.enc.keys, coded_after, strict=True)):  # which field, and how
            got = row.next.arg(n)
            assert _literal(got) is not None, f"{where}: next {_name(key)} is not determined by the state: {got}"
            assert _literal(got) == _literal(expected), (
                f"{where}: next {_name(key)} is {got} in Z3 but {expected} ({after[key]!r}) in the interpreter "
                f"(was {before[key]!r})"
            )
        raise AssertionError(f"{where}: the next state differs: {row.next}")
    if not use_solver:
        return
    successor = dict(zip(run.enc.keys, coded_after, strict=True))
    fixed = [a == b for a, b in run.state_pairs(coded_before) + run.choice_pairs(inst, values)]
    run.solver.push()
    run.solver.add(fixed)
    run.solver.push()
    run.solver.add([run.enc.next_template[key] == value for key, value in successor.items()])
    answer = run.solver.check()
    run.solver.pop()
    assert answer == z3.sat, f"{where}: transition_template rejects the interpreter's successor ({answer})"
    key = rng.choice(list(successor))
    wrong = _perturbed(run, key, successor[key], rng)
    run.solver.add([run.enc.next_template[k] == (wrong if k == key else v) for k, v in successor.items()])
    answer = run.solver.check()
    run.solver.pop()
    assert answer == z3.unsat, (
        f"{where}: transition_template accepts the successor with {_name(key)} perturbed "
        f"from {successor[key]} to {wrong} ({answer})"
    )


def _check_disabled(run: Run, where: str, at_state: Any, choice: Choice) -> bool:
    """A choice the interpreter disables is disabled in Z3. Returns whether the encoding has
    an instance for it at all (an instance whose guard is statically false is left out)."""
    action, shards, values = choice
    inst = run.by_choice.get((action.name, _binding(shards)))
    if inst is None:
        return False
    row = run.evaluate(at_state, inst, values)
    assert z3.is_false(row.enabled), f"{where}: the interpreter disables it, Z3's instance guard gives {row.enabled}"
    assert z3.is_false(row.selected), f"{where}: the interpreter disables it, Z3's enabled_term gives {row.selected}"
    return True


def _check_outcomes(
    run: Run, where: str, inst: Instance, values: Mapping[str, Any], coded: list[Any], calls: Any
) -> int:
    """The calls the encoding's instance makes in this state (path condition true), in order,
    are the interpreter's, with the same outcome: raised or not, and the same result."""
    pairs = run.state_pairs(coded) + run.choice_pairs(inst, values)
    made = [c for c in inst.calls if z3.is_true(z3.simplify(substitute(c.pc, pairs)))]
    assert [(c.event, c.shard) for c in made] == [(c.event, c.shard) for c in calls], f"{where}: other calls"
    compared = 0
    for symbolic, concrete in zip(made, calls, strict=True):
        raised = z3.simplify(substitute(symbolic.raised, pairs))
        assert _literal(raised) == concrete.raised, f"{where}: {concrete.event} raised {concrete.raised}, Z3 {raised}"
        if concrete.result is not None:
            event = run.spec.events[concrete.event]
            assert event.returns is not None
            result = z3.simplify(substitute(symbolic.result, pairs))
            expected = run.code(concrete.result, event.returns.type, concrete.shard)
            assert result.eq(expected), f"{where}: {concrete.event} returned {concrete.result!r}, Z3 {result}"
        compared += 1
    return compared


# The fast lane walks the fixed ledger under the controller in integers and the timed spec in
# both (its ledger environment in bit-vectors); the full suite every run in both.
CASES = [(*run, numbers) for numbers in (INTEGERS, BITVECTORS) for run in RUNS]
FAST_RUNS = [CASES.index((SPEC_PATH, "fixed", "controller", INTEGERS))]
FAST_RUNS += [
    CASES.index((TIMED_PATH, "base", "ledger", BITVECTORS)),
    CASES.index((TIMED_PATH, "base", "callers", INTEGERS)),
]


@pytest.mark.parametrize(
    ("path", "variant", "env", "numbers"),
    fast_slice(
        [pytest.param(*case, id=f"{case[0].stem}-{case[1]}-{case[2]}-{case[3]}") for case in CASES],
        FAST_RUNS,
    ),
)
def test_z3_transition_agrees_with_interpreter(path: Path, variant: str, env: str, numbers: Numbers) -> None:
    spec = _spec_file(path).variant(variant)
    environment = spec.environment(env)
    policy = spec.default_policy()
    run = Run(variant, env, spec, Encoding(spec, environment, SHARDS, policy, numbers=numbers))
    rng = random.Random(f"agreement/{variant}/{env}")
    steps = solver_checks = disabled_seen = disabled_checks = traces = outcomes = 0
    taken: set[str] = set()
    entered: set[Any] = set()
    while steps < STEPS_PER_RUN:
        sim = Simulation(spec, environment, SHARDS, policy)
        traces += 1
        coded = run.coded(sim.store)
        initial = z3.simplify(substitute(run.enc.initial(run.enc.template), run.state_pairs(coded)))
        assert z3.is_true(initial), f"{variant}/{env}: the interpreter's initial state is not initial in Z3: {initial}"
        for _ in range(rng.randint(*TRACE_LENGTH)):
            choices = run.choices(sim)
            flags = [sim.enabled(a, s, v) for a, s, v in choices]
            enabled = [c for c, ok in zip(choices, flags, strict=True) if ok]
            disabled = [c for c, ok in zip(choices, flags, strict=True) if not ok]
            if not enabled:
                break  # a deadlock (the controller gave up, say): start a new trace
            before = dict(sim.store)
            at_state = run.at_state(coded)
            disabled_seen += bool(disabled)
            for choice in rng.sample(disabled, min(DISABLED_PER_STEP, len(disabled))):
                where = f"{variant}/{env} step {steps} (trace {traces}) {_describe(*choice)}"
                disabled_checks += _check_disabled(run, where, at_state, choice)
            action, shards, values = rng.choice(enabled)
            where = f"{variant}/{env} step {steps} (trace {traces}) {_describe(action, shards, values)}"
            inst = run.by_choice.get((action.name, _binding(shards)))
            assert inst is not None, f"{where}: the interpreter enables it, the encoding has no instance for it"
            _, effects = sim.apply(action, shards, values)
            outcomes += _check_outcomes(run, where, inst, values, coded, effects.calls)
            use_solver = steps % SOLVER_EVERY == 0
            coded_after = run.coded(sim.store)
            _check_step(run, where, at_state, inst, values, before, sim.store, (coded, coded_after), rng, use_solver)
            coded = coded_after
            steps += 1
            solver_checks += use_solver
            taken.add(action.name)
            entered.update(sim.store[(i, spec.state_field)] for i in range(SHARDS))
            entered.update(c.after[spec.state_field] for c in effects.calls)  # also between calls
    assert steps >= STEPS_PER_RUN
    assert outcomes > 0
    assert solver_checks >= STEPS_PER_RUN // SOLVER_EVERY
    if disabled_seen:  # the ledger environment disables nothing
        assert disabled_checks > 0
    # The walk is not stuck in a corner: every action ran and every state was entered.
    actions = {a.name for a in environment.actions}
    assert taken == actions, f"never taken: {sorted(actions - taken)}"
    members = set(spec.enums[spec.state_enum].members)
    assert entered == members, f"never entered: {sorted(members - entered)}"


def test_a_machine_is_freed_without_the_collector() -> None:
    """The compiled expressions of a machine refer to nothing that refers back to it: a cycle
    kept every machine (and an encoding's Z3 context with it) until the collector's rare full
    pass, and a test worker ran out of its 4 GiB memory budget."""
    import gc
    import weakref

    from ledgercheck.model.interpreter import build_api
    from ledgercheck.model.spec import load_spec

    api = build_api(load_spec(SPEC_PATH).variant("fixed"))
    enabled = gc.isenabled()
    gc.disable()
    try:
        ledger = api.Ledger(shard_count=2, echo=False)
        ledger.report_failure(0, error=RuntimeError("x"))
        assert ledger.serving_shards() == [0, 1]
        machine = weakref.ref(ledger._machine)
        del ledger
        assert machine() is None
    finally:
        if enabled:
            gc.enable()
