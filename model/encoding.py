"""The Z3 encoding of a spec: the same compiled spec the interpreter runs, as formulas.

`Z3Backend` gives the shared executor (`model.semantics.Machine`) Z3 terms instead of
Python values. `Encoding` runs every instance of every environment action (an action with
its shard parameters fixed) once, symbolically, over a *template* state; the result is a
functional transition relation: for each state variable, its next value as an if-then-else
over the action selector. Each unrolled step substitutes fresh step variables into the
template, so no step is ever re-encoded from the spec.

Value representation: bool as Bool; int as Int; an enum member as its index (None = -1);
str values are opaque tokens: 0 is the value a shard was constructed with, -1 is None,
every other integer is some other string (only equality is observable). A bounded search
may ask for the numbers as bit-vectors of a proven width instead (`model.numbers`); the
tokens of text constants are then small (1, 2, ...) rather than a million and up.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3
from z3 import z3core
from z3.z3 import _to_expr_ref as _expr  # z3py's wrapping of a new term, by its sort
from z3.z3types import Ast

from ledgercheck.model import ir
from ledgercheck.model.numbers import INTEGERS, Numbers
from ledgercheck.model.operators import Operators
from ledgercheck.model.semantics import CallRecord, Emission, Key, Machine
from ledgercheck.model.spec import Action, Environment, Property, Spec, VarDecl

NONE_CODE = -1


class Z3Backend(Operators):
    """Z3 terms for the shared executor."""

    def __init__(self, spec: Spec, ctx: z3.Context | None = None, numbers: Numbers = INTEGERS) -> None:
        self.spec = spec
        self.ctx = ctx
        self.numbers = numbers
        self.index = {e.name: {m: i for i, m in enumerate(e.members)} for e in spec.enums.values()}
        self.tokens: dict[str, int] = {}
        self.token_base = 1 if numbers.bounded else 1_000_000
        self.TRUE = z3.BoolVal(True, ctx)
        self.FALSE = z3.BoolVal(False, ctx)
        # Z3 shares every term (one node per structure), so a term is the constant true or
        # false exactly when it is that node: one comparison, where `z3.is_true` asks Z3
        # three questions and wraps a declaration (most of the time a build spends outside Z3).
        self._true, self._false = _node(self.TRUE), _node(self.FALSE)

    def const(self, value: object, vtype: ir.Type) -> Any:
        number = self.numbers.value
        if value is None:
            return number(NONE_CODE, self.ctx)
        if vtype.kind == "bool" or isinstance(value, bool):
            return self.TRUE if value else self.FALSE
        if vtype.kind == "int":
            return number(int(value), self.ctx)  # type: ignore[call-overload]
        if vtype.kind == "enum":
            return number(self.index[vtype.enum or ""][str(value)], self.ctx)
        if vtype.kind in ("str", "any"):
            token = self.tokens.setdefault(str(value), self.token_base + len(self.tokens))
            return number(token, self.ctx)
        raise TypeError(f"no Z3 value for {vtype}")

    def and_(self, operands: Sequence[Any]) -> Any:
        kept = []
        for operand in operands:
            node = _node(operand)
            if node == self._false:
                return self.FALSE
            if node != self._true:
                kept.append(operand)
        if not kept:
            return self.TRUE
        return kept[0] if len(kept) == 1 else _and(kept)

    def or_(self, operands: Sequence[Any]) -> Any:
        kept = []
        for operand in operands:
            node = _node(operand)
            if node == self._true:
                return self.TRUE
            if node != self._false:
                kept.append(operand)
        if not kept:
            return self.FALSE
        return kept[0] if len(kept) == 1 else _or(kept)

    def not_(self, operand: Any) -> Any:
        node = _node(operand)
        if node == self._true:
            return self.FALSE
        if node == self._false:
            return self.TRUE
        return _not(operand)

    def ite(self, cond: Any, then: Any, orelse: Any) -> Any:
        node = _node(cond)
        if node == self._true:
            return then
        if node == self._false:
            return orelse
        if _node(then) == _node(orelse):
            return then
        return _if(cond, then, orelse)

    def in_set(self, operand: Any, members: tuple[str, ...], enum: str) -> Any:
        return self.or_([operand == self.index[enum][m] for m in members])

    def is_none(self, operand: Any, vtype: ir.Type) -> Any:
        return operand == NONE_CODE

    def count(self, operands: Sequence[Any]) -> Any:
        one, zero = self.numbers.value(1, self.ctx), self.numbers.value(0, self.ctx)
        terms = [z3.If(o, one, zero) for o in operands]
        return z3.Sum(terms) if terms else zero

    def decide(self, cond: Any) -> bool | None:
        node = _node(cond)
        if node == self._true:
            return True
        if node == self._false:
            return False
        return None


def _node(term: Any) -> int | None:
    """The address of `term`'s node in Z3 (equal for two terms of one context exactly when
    they are the same term: `eq`, without a call into Z3); None for a non-term."""
    ast = getattr(term, "ast", None)
    return None if ast is None else ast.value


# The terms an encoding is built of, made with one call into Z3 each. z3py's And, Or, Not and
# If first check and coerce every argument in Python (probes, sorts, contexts: a dozen calls
# into Z3 per term, most of the time a build spends outside Z3); over Boolean terms of one
# context, and branches of one sort, what they then make is this very call. Anything else
# goes to z3py's own function, which coerces it or says what is wrong.


def _booleans(terms: Sequence[Any]) -> Any:
    """`terms` as a C array when every one is a Boolean term of the first one's context."""
    if not terms or not isinstance(terms[0], z3.BoolRef):
        return None
    ctx = terms[0].ctx
    array = (Ast * len(terms))()
    for i, term in enumerate(terms):
        if not isinstance(term, z3.BoolRef) or term.ctx is not ctx:
            return None
        array[i] = term.ast
    return array


def _and(terms: Sequence[Any]) -> Any:
    return _connective(terms, z3core.Z3_mk_and, z3.And)


def _or(terms: Sequence[Any]) -> Any:
    return _connective(terms, z3core.Z3_mk_or, z3.Or)


def _connective(terms: Sequence[Any], make: Callable[..., Any], fallback: Callable[..., Any]) -> Any:
    array = _booleans(terms)
    if array is None:
        return fallback(list(terms))
    ctx = terms[0].ctx
    return z3.BoolRef(make(ctx.ref(), len(terms), array), ctx)


def _not(term: Any) -> Any:
    if not isinstance(term, z3.BoolRef):
        return z3.Not(term)
    return z3.BoolRef(z3core.Z3_mk_not(term.ctx.ref(), term.ast), term.ctx)


def _if(cond: Any, then: Any, orelse: Any) -> Any:
    ctx = getattr(cond, "ctx", None)
    if not (
        isinstance(cond, z3.BoolRef)
        and isinstance(then, z3.ExprRef)
        and isinstance(orelse, z3.ExprRef)
        and then.ctx is ctx
        and orelse.ctx is ctx
    ):
        return z3.If(cond, then, orelse)
    try:
        made = z3core.Z3_mk_ite(ctx.ref(), cond.ast, then.ast, orelse.ast)
    except z3.Z3Exception:  # branches of two sorts: z3py coerces them, or says why it cannot
        return z3.If(cond, then, orelse)
    return _expr(made, ctx)


def sort_of(vtype: ir.Type, ctx: z3.Context | None = None, numbers: Numbers = INTEGERS) -> z3.SortRef:
    return z3.BoolSort(ctx) if vtype.kind == "bool" and not vtype.optional else numbers.sort(ctx)


def domain(var: Any, vtype: ir.Type, spec: Spec) -> Any:
    """The values a variable of this type may take (for free parameters)."""
    low = NONE_CODE if vtype.optional else 0
    if vtype.kind == "enum":
        return z3.And(var >= low, var < len(spec.enums[vtype.enum or ""].members))
    if vtype.kind in ("str", "int"):
        return var >= low
    return z3.BoolVal(True, var.ctx)


@dataclass
class Instance:
    """One action with its shard parameters fixed, executed once over the template."""

    index: int
    action: Action
    shards: dict[str, int]
    params: dict[str, Any]
    enabled: Any
    store: dict[Key, Any]
    calls: list[CallRecord[Any]]


@dataclass(frozen=True)
class Footprint:
    """What one instance writes and reads, as state variables: the cone of influence's
    fixpoint needs nothing else of it. Plain data, so that every copy of an encoding (whose
    instances are translations of the same terms) shares one table of them."""

    writes: frozenset[Key]
    guard_reads: frozenset[Key]
    update_reads: Mapping[Key, frozenset[Key]]


def footprint_name(inst: Instance) -> tuple[str, tuple[tuple[str, int], ...]]:
    """An instance by what it is (its action and shard arguments), the same in every copy."""
    return (inst.action.name, tuple(sorted(inst.shards.items())))


@dataclass
class StepVars:
    state: dict[Key, Any]
    act: Any = None
    params: dict[tuple[str, str], Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _CopyPlan:
    """An encoding's terms in the order `copy_into` translates them (`vector`, in the
    encoding's own context), and for each place that holds a term, its position there."""

    vector: Any
    classes: list[type]
    policy_vars: dict[str, int]
    policy: dict[str, int]
    template: dict[Key, int]
    next_template: dict[Key, int]
    next_terms: dict[Key, int]
    act: int
    enabled_term: int
    transition: int
    shapes: list[tuple[Instance, dict[str, int], int, dict[Key, int], list[tuple[CallRecord[Any], dict[str, Any]]]]]


class Encoding:
    """The transition system of one (spec variant, environment, fleet size, policy)."""

    def __init__(
        self,
        spec: Spec,
        environment: Environment,
        shards: int,
        policy: Mapping[str, int] | None,
        *,
        contracts: bool = False,
        ctx: z3.Context | None = None,
        prefix: str = "",
        keep_disabled: bool = False,
        numbers: Numbers = INTEGERS,
    ) -> None:
        """`ctx` and `prefix` let two encodings share one solver (a product, as `diff`
        builds): their state variables are told apart by the prefix, while the action
        selector and the action parameters keep their names, so both take the same step.
        `numbers`: how the spec's numbers are written (`model.numbers`); bit-vectors only
        where `model.widths` proved the width for the search that unrolls this encoding."""
        self.spec = spec
        self.environment = environment
        self.shards = shards
        self.prefix = prefix
        self.keep_disabled = keep_disabled
        self.numbers = numbers
        self.ctx = ctx if ctx is not None else z3.Context()
        ctx = self.ctx
        self.backend = Z3Backend(spec, ctx, numbers)
        self.symbolic_policy = policy is None
        self.policy_vars = {name: numbers.var(f"policy.{name}", ctx) for name in spec.policy}
        policy_terms: dict[str, Any] = (
            dict(self.policy_vars) if policy is None else {k: numbers.value(v, ctx) for k, v in policy.items()}
        )
        self.policy = policy_terms
        self.machine: Machine[Any] = Machine(spec, self.backend, policy_terms, shards)
        self.vars: dict[Key, VarDecl] = {}
        for index in range(shards):
            for var in spec.shard_vars:
                self.vars[(index, var.name)] = var
        for var in spec.globals + environment.vars:
            self.vars[(None, var.name)] = var
        self.keys = list(self.vars)
        self.template = {key: self._var(key, "cur") for key in self.keys}
        self._template_ids: dict[int, Key] | None = None
        self._reads_memo: dict[int, frozenset[Key]] = {}
        self._reads_kept: list[Any] = []  # the terms `_reads_memo` was filled from, kept alive
        self._footprints: dict[tuple[str, tuple[tuple[str, int], ...]], Footprint] = {}
        self._origin: Encoding | None = None  # the encoding this one was copied from
        self._plan: _CopyPlan | None = None  # how `copy_into` lays its terms out (`_copy_plan`)
        # The action selector, the shard a step works on alone (`local_shard_term`) and the
        # bit mask of the events called on the focus shard are never mixed with the spec's
        # data: with bit-vectors each has the width its own values need.
        self.selector = numbers.selector(self._instance_bound())
        self.shard_numbers = numbers.selector(shards)
        self.event_numbers = numbers.selector(1 << len(spec.events))
        self.act = self.selector.var("act", ctx)
        self.contracts = contracts
        # each instance's guard and parameter domains, without the contracts (`with_contracts`)
        self._guards: list[list[Any]] | None = None
        self.instances = self._instances()
        self._build()

    def copy_into(self, ctx: z3.Context) -> Encoding:
        """This encoding with every term rebuilt in `ctx` (one Z3 translation of them all).

        The copy's terms are created in the same order whatever else the process did before,
        so a solver over it answers as one over a freshly built encoding would each time:
        a check's counterexamples do not depend on which checks ran before it in a worker."""
        plan = self._copy_plan()
        moved = plan.vector.translate(ctx)
        # Each term wrapped as the class its original has (a translation keeps sorts and
        # kinds), without the three questions to Z3 per term that `moved[i]` asks to find it.
        ref, vector, fetch = ctx.ref(), moved.vector, z3core.Z3_ast_vector_get
        out = [cls(fetch(ref, vector, i), ctx) for i, cls in enumerate(plan.classes)]

        def get_map(indices: Mapping[Any, int]) -> dict[Any, Any]:
            return {name: out[i] for name, i in indices.items()}

        def get_slot(slot: tuple[str, Any]) -> Any:
            kind, where = slot
            if kind == "emits":
                return tuple(
                    dataclasses.replace(e, pc=out[pc], args=tuple((n, out[i]) for n, i in args))
                    for e, pc, args in where
                )
            return out[where] if kind == "term" else get_map(where)

        twin = copy.copy(self)
        twin.ctx = ctx
        twin.backend = Z3Backend(self.spec, ctx, self.numbers)
        twin.backend.tokens = dict(self.backend.tokens)
        twin.policy_vars, twin.policy = get_map(plan.policy_vars), get_map(plan.policy)
        twin.machine = Machine(self.spec, twin.backend, twin.policy, self.shards)
        twin.keys = list(self.keys)
        twin.template, twin.next_template = get_map(plan.template), get_map(plan.next_template)
        twin.next_terms = get_map(plan.next_terms)
        twin.act, twin.enabled_term = out[plan.act], out[plan.enabled_term]
        twin.transition_template = out[plan.transition]
        twin._forget_walks()
        twin._origin = self if self._origin is None else self._origin
        twin._footprints = self._footprints  # the one table of them all: the same instances, translated
        twin.instances = [
            Instance(
                inst.index,
                inst.action,
                dict(inst.shards),
                get_map(params),
                out[enabled],
                get_map(store),
                [
                    dataclasses.replace(call, **{name: get_slot(slot) for name, slot in slots.items()})
                    for call, slots in calls
                ],
            )
            for inst, params, enabled, store, calls in plan.shapes
        ]
        return twin

    def _copy_plan(self) -> _CopyPlan:
        """Where each of this encoding's terms goes in the one vector `copy_into` translates:
        worked out at the first copy and kept until the encoding changes (`_build`), since a
        process copies the same base encoding for every check of a variant. The vector's order
        is the same either way, so the copies' terms are created in the same order."""
        if self._plan is not None:
            return self._plan
        terms: list[Any] = []
        position: dict[int, int] = {}  # a term shared by many places (an unchanged field) goes once
        # The same Python object in many places (an unchanged field is the template's own
        # variable) is looked up by identity first, without asking Z3 for its id; each is
        # held here meanwhile, so no identity is reused for another.
        known: dict[int, tuple[int, Any]] = {}

        def put(term: Any) -> int:
            found = known.get(id(term))
            if found is None:
                ident = term.get_id()
                if ident not in position:
                    position[ident] = len(terms)
                    terms.append(term)
                found = known[id(term)] = (position[ident], term)
            return found[0]

        def put_map(values: Mapping[Any, Any]) -> dict[Any, int]:
            return {name: put(value) for name, value in values.items()}

        policy_vars, policy = put_map(self.policy_vars), put_map(self.policy)
        template, next_template = put_map(self.template), put_map(self.next_template)
        next_terms = put_map(self.next_terms)
        act, enabled_term, transition = put(self.act), put(self.enabled_term), put(self.transition_template)

        def put_call(call: CallRecord[Any]) -> tuple[CallRecord[Any], dict[str, Any]]:
            # Field by field, so that a field added to CallRecord is carried over too.
            slots: dict[str, Any] = {}
            for item in dataclasses.fields(call):
                value = getattr(call, item.name)
                if z3.is_ast(value):
                    slots[item.name] = ("term", put(value))
                elif isinstance(value, Mapping) and any(z3.is_ast(v) for v in value.values()):
                    slots[item.name] = ("map", put_map(value))
                elif isinstance(value, tuple) and value and all(isinstance(e, Emission) for e in value):
                    moved = [(e, put(e.pc), [(n, put(v)) for n, v in e.args]) for e in value]
                    slots[item.name] = ("emits", moved)
            return call, slots

        shapes = [
            (inst, put_map(inst.params), put(inst.enabled), put_map(inst.store), [put_call(c) for c in inst.calls])
            for inst in self.instances
        ]
        vector = z3.AstVector(ctx=self.ctx)
        for term in terms:
            vector.push(term)
        self._plan = _CopyPlan(
            vector,
            [type(term) for term in terms],
            policy_vars,
            policy,
            template,
            next_template,
            next_terms,
            act,
            enabled_term,
            transition,
            shapes,
        )
        return self._plan

    def _build(self) -> None:
        self._plan = None
        self.next_terms = self._next_terms()
        self.enabled_term = self.backend.or_([self._selected(inst) for inst in self.instances])
        self.next_template = {key: self._var(key, "next") for key in self.keys}
        self.transition_template = _and(
            [self.enabled_term] + [self.next_template[key] == self.next_terms[key] for key in self.keys]
        )

    # -- cone of influence --

    def _reads(self, term: Any, memo: dict[int, frozenset[Key]] | None = None) -> set[Key]:
        """The template variables `term` reads. Remembered per subterm for the encoding's
        life: the cone's fixpoint asks about the same guards and updates again and again.
        Walked through Z3's C API (`_walk_reads`): from Python a node costs a few calls, not
        the objects `children()` builds. The term is kept alive with the memo (`_reads_kept`),
        and so every subterm it holds, so no id in the memo is reused for another term."""
        by_id = self._template_ids
        if by_id is None:
            by_id = self._template_ids = {var.get_id(): key for key, var in self.template.items()}
        if memo is None:
            memo = self._reads_memo
            self._reads_kept.append(term)
        return set(_walk_reads(term, by_id, memo))

    def _footprint_table(self) -> dict[tuple[str, tuple[tuple[str, int], ...]], Footprint]:
        """Every instance's writes and reads, by action and shards: walked once, on the base
        encoding the copies were made from (`copy_into` shares the table), since a copy's
        instances are translations of the same terms. Only the base's terms are walked, with
        a memo dropped afterwards, so which of a copy's terms stay alive (and so the ids Z3
        gives the terms a check goes on to build, which its counterexamples depend on) is
        the same whether the table was already there or not."""
        table = self._footprints
        if not table:
            source = self._origin if self._origin is not None else self
            memo: dict[int, frozenset[Key]] = {}
            for inst in source.instances:
                writes = source._writes(inst, source.template)  # every variable: a copy may slice any
                table[footprint_name(inst)] = Footprint(
                    writes,
                    frozenset(source._reads(inst.enabled, memo)),
                    {key: frozenset(source._reads(inst.store[key], memo)) for key in writes},
                )
        return table

    def restrict_to(self, roots: Any, keep: Any = None) -> int:
        """Keep only the cone of influence of `roots` (terms over the template): the state
        variables they read, closed under what the next values and the guards of the
        actions that change them read. Actions that change none of these variables are
        stuttering steps as far as the property can tell, and go. Returns how many state
        variables were dropped. Sound for safety properties: every kept trace is a trace of
        the full system, and every full trace projects onto a kept one."""
        cone = set().union(*(self._reads(r) for r in roots)) if roots else set()
        table = self._footprint_table()
        prints = [table[footprint_name(inst)] for inst in self.instances]
        kept = [keep is not None and keep(inst) for inst in self.instances]
        while True:
            chosen = [i for i, fp in enumerate(prints) if kept[i] or fp.writes & cone]
            grown = set(cone)
            for i in chosen:
                grown |= prints[i].guard_reads
                for key in prints[i].writes & cone:  # an unchanged variable reads only itself
                    grown |= prints[i].update_reads[key]
            if grown == cone:
                break
            cone = grown
        dropped = len(self.keys) - len(cone)
        if dropped == 0 and len(chosen) == len(self.instances):
            return 0
        self.keys = [k for k in self.keys if k in cone]
        self.instances = [self.instances[i] for i in chosen]
        for position, inst in enumerate(self.instances):
            inst.index = position
        self._build()
        return dropped

    # -- partial-order reduction --

    def local_shard_term(self) -> Any:
        """Over the template: the shard an instance works on alone (-1 for any other): an
        instance whose guard, contracts and updates read and write only that shard's
        variables and fleet values (which such instances never write). Two of them on
        different shards commute, so `bmc` keeps one order of each adjacent pair. None when
        no instance is local."""
        keys_of: dict[int, set[Key]] = {}
        for key in self.template:  # every variable, sliced away or not: reads may name any
            if key[0] is not None:
                keys_of.setdefault(key[0], set()).add(key)
        fleet = {key for key in self.template if key[0] is None}
        term: Any = self.shard_numbers.value(-1, self.ctx)
        local = False
        for inst in reversed(self.instances):
            writes = self._writes(inst, self.keys)
            shards = {key[0] for key in writes}
            if len(shards) != 1 or None in shards:
                continue
            shard = next(iter(shards))
            assert shard is not None
            reads = self._reads(inst.enabled)
            for key in writes:
                reads |= self._reads(inst.store[key])
            for call in inst.calls:
                reads |= self._reads(z3.And(call.pc, call.contract_ok))
                for snap in (call.before, call.after):
                    for value in snap.values():
                        reads |= self._reads(value)
            if not reads <= keys_of[shard] | fleet:
                continue
            local = True
            term = z3.If(self.act == inst.index, self.shard_numbers.value(shard, self.ctx), term)
        return term if local else None

    # -- naming --

    def _var(self, key: Key, suffix: str | int) -> Any:
        shard, name = key
        label = self.prefix + (f"{name}[{shard}]" if shard is not None else name)
        return z3.Const(f"{label}@{suffix}", sort_of(self.vars[key].type, self.ctx, self.numbers))

    def param_template(self, action: Action, name: str) -> Any:
        param = next(p for p in action.value_params if p.name == name)
        return z3.Const(f"{action.name}.{name}", sort_of(param.type, self.ctx, self.numbers))

    # -- the template transition --

    def _instance_bound(self) -> int:
        """At most how many instances the environment's actions make (the selector's range)."""
        return max(1, sum(int(self.shards ** len(a.shard_params)) for a in self.environment.actions))

    def _instances(self) -> list[Instance]:
        instances: list[Instance] = []
        guards: list[list[Any]] = []
        for action in self.environment.actions:
            ranges = [range(self.shards)] * len(action.shard_params)
            for combo in itertools.product(*ranges):
                shards = dict(zip(action.shard_params, combo, strict=True))
                params = {p.name: self.param_template(action, p.name) for p in action.value_params}
                store = dict(self.template)
                enabled = self.machine.enabled(action, shards, params, store)
                if not self.keep_disabled and z3.is_false(z3.simplify(enabled)):
                    continue
                domains = [domain(params[p.name], p.type, self.spec) for p in action.value_params]
                effects = self.machine.run_action(action, shards, params, store)
                guards.append([enabled, *domains])
                enabled = self._guarded(guards[-1], effects.calls, self.contracts)
                instances.append(Instance(len(instances), action, shards, params, enabled, store, effects.calls))
        self._guards = guards
        return instances

    def _guarded(self, guard: Sequence[Any], calls: Sequence[CallRecord[Any]], contracts: bool) -> Any:
        """An instance's `enabled`: its guard and parameter domains, and with `contracts` the
        contract of each call it makes, where the call is made (the one conjunction both the
        constructor and `with_contracts` build, so either makes the same terms)."""
        return self.backend.and_([*guard, *(_contracts(calls) if contracts else [])])

    def with_contracts(self) -> Encoding:
        """This encoding (built without the callers' contracts) with them: the same instances,
        each one's guard conjoined with its calls' contracts, in this encoding's context.
        Running every action over the template is the same work either way, so a process
        that needs both (an environment that may call anything: the verdict within the
        contracts, the lax search without) does it once. Each guard is the conjunction the
        constructor would build, in the same order, so a copy of either is the same terms."""
        if self.contracts or self._guards is None or self._origin is not None:
            raise ValueError("with_contracts derives from a base built without the contracts")
        twin = copy.copy(self)
        twin.contracts = True
        twin.instances = [
            dataclasses.replace(inst, enabled=self._guarded(guard, inst.calls, True))
            for inst, guard in zip(self.instances, self._guards, strict=True)
        ]
        twin._forget_walks()
        twin._footprints = {}  # the guards read the contracts' variables too
        twin._build()
        return twin

    def _forget_walks(self) -> None:
        """Drop what was worked out from another encoding's terms (a twin made by `copy_into`
        or `with_contracts` starts from a copy of its fields): the walks of the cone, the
        layout of a copy and the guards `with_contracts` conjoins, which only a base keeps."""
        self._template_ids, self._reads_memo, self._reads_kept, self._plan = None, {}, [], None
        self._guards = None

    def _writes(self, inst: Instance, keys: Iterable[Key]) -> frozenset[Key]:
        """Which of `keys` the instance changes: its value there is not the template's own."""
        return frozenset(k for k in keys if _node(inst.store[k]) != _node(self.template[k]))

    def _selected(self, inst: Instance) -> Any:
        return _and([self.act == inst.index, inst.enabled])

    def _next_terms(self) -> dict[Key, Any]:
        table = self._footprints  # once a slice has been taken: what each instance writes
        instances = self.instances
        if table:
            writes = [table[footprint_name(inst)].writes for inst in instances]
        else:
            writes = [self._writes(inst, self.keys) for inst in instances]
        selected: dict[int, Any] = {}  # `act == index`, made where first needed (the terms' order)
        terms = {}
        for key in self.keys:
            term = self.template[key]
            for position in range(len(instances) - 1, -1, -1):
                if key in writes[position]:
                    inst = instances[position]
                    select = selected.get(inst.index)
                    if select is None:
                        select = selected[inst.index] = self.act == inst.index
                    term = _if(select, inst.store[key], term)
            terms[key] = term
        return terms

    # -- properties over the template --

    def step_violation(self, prop: Property, focus: int | None) -> Any:
        """Over the template: this transition breaks the step property on the focus shard."""
        cases = []
        for inst in self.instances:
            parts = []
            for record in inst.calls:
                if record.event in prop.on and (focus is None or record.shard == focus):
                    parts.append(self.machine.step_violations(prop.when, prop.check, record, self.template))
            if parts:
                cases.append(z3.And(self.act == inst.index, self.backend.or_(parts)))
        return self.backend.or_(cases)

    def invariant_violation(self, prop: Property, focus: int | None, state: Mapping[Key, Any]) -> Any:
        if prop.fleet:
            return self.backend.not_(self.machine.invariant(prop.when, prop.check, None, state))
        shards = [focus] if focus is not None else list(range(self.shards))
        return self.backend.or_(
            [self.backend.not_(self.machine.invariant(prop.when, prop.check, s, state)) for s in shards]
        )

    def focus_events(self, focus: int) -> Any:
        """Over the template: a bit mask of the events called on the focus shard."""
        events = list(self.spec.events)
        value = self.event_numbers.value
        term: Any = value(0, self.ctx)
        for inst in reversed(self.instances):
            bits = [
                z3.If(c.pc, value(1 << events.index(c.event), self.ctx), value(0, self.ctx))
                for c in inst.calls
                if c.shard == focus
            ]
            if bits:
                term = z3.If(self.act == inst.index, z3.Sum(bits) if len(bits) > 1 else bits[0], term)
        return term

    def contract_violation(self) -> Any:
        """Over the template: this transition makes a call outside the callers' contract."""
        cases = []
        for inst in self.instances:
            broken = [z3.And(c.pc, z3.Not(c.contract_ok)) for c in inst.calls if not z3.is_true(c.contract_ok)]
            if broken:
                cases.append(z3.And(self.act == inst.index, self.backend.or_(broken)))
        return self.backend.or_(cases)

    # -- unrolling --

    def initial(self, state: Mapping[Key, Any]) -> Any:
        parts = []
        for key in self.keys:
            var = self.vars[key]
            if var.initial_from is not None:
                value = self.numbers.value(0, self.ctx)
            elif var.initial_policy is not None:
                value = self.policy[var.initial_policy]
            else:
                value = self.backend.const(var.initial, var.type)
            parts.append(state[key] == value)
        if self.symbolic_policy:
            for name, decl in self.spec.policy.items():
                parts.append(z3.And(self.policy_vars[name] >= decl.min, self.policy_vars[name] <= decl.max))
        return z3.And(parts) if parts else self.backend.TRUE

    def step_vars(self, t: int) -> StepVars:
        state = {key: self._var(key, t) for key in self.keys}
        return StepVars(state)

    def substitution(self, cur: StepVars, step: int) -> list[tuple[Any, Any]]:
        """Template variables -> the variables of transition `step` (from state `step`)."""
        pairs = [(self.template[key], cur.state[key]) for key in self.keys]
        cur.act = self.selector.var(f"act@{step}", self.ctx)
        pairs.append((self.act, cur.act))
        for action in self.environment.actions:
            for param in action.value_params:
                template = self.param_template(action, param.name)
                var = z3.Const(f"{action.name}.{param.name}@{step}", sort_of(param.type, self.ctx, self.numbers))
                cur.params[(action.name, param.name)] = var
                pairs.append((template, var))
        return pairs

    def transition(self, nxt: StepVars, pairs: list[tuple[Any, Any]]) -> Any:
        moves = [(self.next_template[key], nxt.state[key]) for key in self.keys]
        return z3.substitute(self.transition_template, *(pairs + moves))


def _contracts(calls: Sequence[CallRecord[Any]]) -> list[Any]:
    """Each call's contract, where the call is made."""
    return [z3.Implies(c.pc, c.contract_ok) for c in calls]


_NO_READS: frozenset[Key] = frozenset()


def _raw(function: Any) -> Any:
    """The C function behind one of `z3core`'s wrappers, without its error check after every
    call (the getters below cannot fail on a term that is alive). A z3 release that lays its
    wrappers out otherwise gets the wrapper itself: slower, the same answer."""
    elementaries = (getattr(function, "__defaults__", None) or (None,))[0]
    return getattr(elementaries, "f", function)


def _walk_reads(term: Any, by_id: Mapping[int, Key], memo: dict[int, frozenset[Key]]) -> frozenset[Key]:
    """The template variables (`by_id`: their ids) under `term`, each subterm's set put in
    `memo` by id. With the C API's own calls on raw pointers: a subterm is alive while `term`
    is (its parent holds it), which the caller sees to for as long as `memo` is kept."""
    ref = term.ctx.ref()
    get_id, kind_of = _raw(z3core.Z3_get_ast_id), _raw(z3core.Z3_get_ast_kind)
    num_args, arg_of = _raw(z3core.Z3_get_app_num_args), _raw(z3core.Z3_get_app_arg)
    body_of = _raw(z3core.Z3_get_quantifier_body)
    app, quantifier = z3core.Z3_APP_AST, z3core.Z3_QUANTIFIER_AST
    root = term.as_ast()
    stack: list[tuple[Any, list[Any] | None]] = [(root, None)]
    while stack:
        node, below = stack.pop()
        ident = get_id(ref, node)
        if below is not None:
            if ident not in memo:
                memo[ident] = frozenset().union(*(memo[get_id(ref, child)] for child in below))
            continue
        if ident in memo:
            continue
        kind = kind_of(ref, node)
        if kind == app:
            count = num_args(ref, node)
            if count == 0:
                key = by_id.get(ident)
                memo[ident] = _NO_READS if key is None else frozenset((key,))
                continue
            children = [arg_of(ref, node, i) for i in range(count)]
        elif kind == quantifier:
            children = [body_of(ref, node)]
        else:  # a bound variable
            memo[ident] = _NO_READS
            continue
        stack.append((node, children))
        stack.extend((child, None) for child in children)
    return memo[get_id(ref, root)]


_BASES: dict[tuple[Any, ...], tuple[Spec, Encoding]] = {}
"""The encodings this process built, by (spec variant, environment, fleet, policy, contracts,
numbers): every property of a variant in an environment starts from the same one."""
_KEPT = 16


def encoding_for(
    spec: Spec,
    environment: Environment,
    shards: int,
    policy: Mapping[str, int] | None,
    *,
    contracts: bool = False,
    numbers: Numbers = INTEGERS,
) -> Encoding:
    """A fresh encoding of (spec variant, environment, fleet size, policy) in a Z3 context of
    its own, for one check to slice and unroll.

    Running every action over the template is most of the time a check spends before its
    solver starts (the controller environment at 4 shards: about half a second), and it is
    the same for every property of a variant in an environment. So it runs once per process;
    each check gets a translated copy (`Encoding.copy_into`), always a copy, even the first,
    so every check sees the same terms in the same order however the jobs were spread over
    workers, and prints the same counterexamples."""
    return _base(spec, environment, shards, policy, contracts, numbers).copy_into(z3.Context())


def _base(
    spec: Spec,
    environment: Environment,
    shards: int,
    policy: Mapping[str, int] | None,
    contracts: bool,
    numbers: Numbers,
) -> Encoding:
    """The kept encoding `encoding_for` copies: built once, the one with the callers'
    contracts always derived from the one without (`Encoding.with_contracts`), so either is
    the same terms whichever was asked for first."""
    fixed = None if policy is None else tuple(sorted(policy.items()))
    key = (id(spec), environment.name, shards, fixed, contracts, numbers)
    hit = _BASES.get(key)
    if hit is None or hit[0] is not spec:
        if contracts:
            base = _base(spec, environment, shards, policy, False, numbers).with_contracts()
        else:
            base = Encoding(spec, environment, shards, policy, numbers=numbers)
        while len(_BASES) >= _KEPT:
            del _BASES[next(iter(_BASES))]
        _BASES[key] = (spec, base)  # the spec is kept alive with it, so its id names no other
        hit = _BASES[key]
    return hit[1]
