"""One executor for the spec's language, shared by the interpreter and the Z3 encoding.

`Machine` walks the compiled statements of `model.ir` over a *backend* that supplies the
values and operators: `ConcreteBackend` computes with Python values (the executable model),
`model.encoding.Z3Backend` builds Z3 terms (the checker). Control flow is the same code for
both: a condition the backend can decide runs one branch; an undecided (symbolic) condition
runs both and merges the results with if-then-else. So the two semantics cannot disagree on
what a spec means; only on arithmetic, which `tests/test_agreement.py` checks step by step.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast

from ledgercheck.model import ir
from ledgercheck.model.errors import LedgercheckError
from ledgercheck.model.operators import COMPARISONS, Operators
from ledgercheck.model.spec import Action, Event, Spec, VarDecl

V = TypeVar("V")
Key = tuple[int | None, str]
"""A state variable: (shard index, name) per shard, (None, name) fleet-wide."""


class Backend(Protocol[V]):
    """Values and operators of one semantics."""

    def const(self, value: object, vtype: ir.Type) -> V: ...
    def compare(self, op: str, left: V, right: V) -> V: ...
    def arith(self, op: str, left: V, right: V) -> V: ...
    def neg(self, operand: V) -> V: ...
    def and_(self, operands: Sequence[V]) -> V: ...
    def or_(self, operands: Sequence[V]) -> V: ...
    def not_(self, operand: V) -> V: ...
    def ite(self, cond: V, then: V, orelse: V) -> V: ...
    def in_set(self, operand: V, members: tuple[str, ...], enum: str) -> V: ...
    def is_none(self, operand: V, vtype: ir.Type) -> V: ...
    def count(self, operands: Sequence[V]) -> V: ...
    def decide(self, cond: V) -> bool | None: ...


class ModelError(LedgercheckError):
    """The spec asked the model to do something impossible (an internal contradiction)."""

    exit_code = 3


class ConcreteBackend(Operators):
    """Plain Python values: bool, int, str, None, and enum members as their names."""

    def const(self, value: object, vtype: ir.Type) -> Any:
        return value

    def and_(self, operands: Sequence[Any]) -> Any:
        return all(operands)

    def or_(self, operands: Sequence[Any]) -> Any:
        return any(operands)

    def not_(self, operand: Any) -> Any:
        return not operand

    def ite(self, cond: Any, then: Any, orelse: Any) -> Any:
        return then if cond else orelse

    def in_set(self, operand: Any, members: tuple[str, ...], enum: str) -> Any:
        return operand in members

    def is_none(self, operand: Any, vtype: ir.Type) -> Any:
        return operand is None

    def count(self, operands: Sequence[Any]) -> Any:
        return sum(1 for o in operands if o)

    def decide(self, cond: Any) -> bool | None:
        return bool(cond)


@dataclass
class Frame(Generic[V]):
    """What names mean while one block runs."""

    self_shard: int | None = None
    shard_vars: dict[str, int] = field(default_factory=dict)
    args: Mapping[str, V] = field(default_factory=dict)
    locals: dict[str, V] = field(default_factory=dict)
    snaps: Mapping[str, Mapping[str, V]] = field(default_factory=dict)
    # A step property's `emitted(name)`: whether the call announced `name`.
    emitted: Mapping[str, V] = field(default_factory=dict)


@dataclass(frozen=True)
class Emission(Generic[V]):
    """One `emit.name(args)` executed, under the path condition it ran under (always true
    in the concrete semantics)."""

    name: str
    args: tuple[tuple[str, V], ...]
    pc: V

    def notice(self, shard: int) -> tuple[str, int, tuple[V, ...]]:
        """How the executable model keeps it: (name, the announcing shard, the argument
        values in declared order)."""
        return (self.name, shard, tuple(value for _, value in self.args))


@dataclass(frozen=True)
class CallRecord(Generic[V]):
    """One ledger event executed inside an action, with the path condition it ran under
    (always true in the concrete semantics) and the called shard's values around it."""

    event: str
    shard: int
    args: Mapping[str, V]
    pc: V
    ignored: V
    contract_ok: V
    before: Mapping[str, V]
    after: Mapping[str, V]
    # The call's outcome: whether it raised (one of the event's `raises`), and what it
    # returned (its `returns` over the record after the call; None when it declares none).
    raised: V | None = None
    result: V | None = None
    # What the call announced: every emit it ran, in order, and per declared notification
    # whether it announced it (the disjunction of its emits' path conditions).
    emits: tuple[Emission[V], ...] = ()
    emitted: Mapping[str, V] = field(default_factory=dict)
    raising: tuple[V, ...] = ()
    """Per `raises` entry of the event, in order, its condition as the call began (the first
    that holds names the error raised: what a trace shows)."""


Code = Callable[["Frame[V]", Mapping[Key, V]], V]
"""A compiled expression: its value in a frame and a store."""


@dataclass
class Effects(Generic[V]):
    calls: list[CallRecord[V]] = field(default_factory=list)
    logs: list[tuple[int, str, str, str]] = field(default_factory=list)
    emits: list[Emission[V]] = field(default_factory=list)


def _shard_of(name: str, frame: Frame[Any]) -> int:
    """The shard a name stands for in `frame`: "self" (the event's), or a shard variable."""
    if name == "self":
        if frame.self_shard is None:
            raise ModelError("a per-shard field was read without a shard")
        return frame.self_shard
    return frame.shard_vars[name]


class Machine(Generic[V]):
    """Executes a spec's events and environment actions over one backend."""

    def __init__(self, spec: Spec, backend: Backend[V], policy: Mapping[str, V], shards: int) -> None:
        self.spec = spec
        self.backend = backend
        self.policy = policy
        self.shards = shards
        self.shard_field_names = tuple(v.name for v in spec.shard_vars)
        self.true = backend.const(True, ir.BOOL)
        # Expressions compiled to functions (`_compile`); plain Python values take the
        # operators directly (the same ones `ConcreteBackend` applies, from `Operators`).
        self._plain = type(backend) is ConcreteBackend
        self._code: dict[int, Code[V]] = {}
        self._kept: list[ir.Expr] = []

    # -- state --

    def state_keys(self, env_vars: Sequence[VarDecl] = ()) -> list[Key]:
        keys: list[Key] = [(i, v.name) for i in range(self.shards) for v in self.spec.shard_vars]
        keys += [(None, g.name) for g in self.spec.globals]
        keys += [(None, v.name) for v in env_vars]
        return keys

    # -- expressions --

    def eval(self, expr: ir.Expr, frame: Frame[V], store: Mapping[Key, V]) -> V:
        code = self._code.get(id(expr))
        if code is None:
            code = self._compile(expr)
        return code(frame, store)

    def _compile(self, expr: ir.Expr) -> Code[V]:
        """`expr` as a function of (frame, store), built once per node: the tree is walked
        when the spec is first run, not at every evaluation (the executable model evaluates
        the same few guards millions of times in a search). No code refers to the machine:
        a cycle through it would keep every machine, and an encoding's Z3 context, until the
        collector's rare full pass (a test worker ran out of its 4 GiB memory budget)."""
        code = self._build(expr)
        self._code[id(expr)] = code
        self._kept.append(expr)  # the id stays this node's while the machine lives
        return code

    def _sub(self, expr: ir.Expr) -> Code[V]:
        code = self._code.get(id(expr))
        return code if code is not None else self._compile(expr)

    def _build(self, expr: ir.Expr) -> Code[V]:  # noqa: C901 - one case per node type, as in `ir`
        b = self.backend
        if self._plain:
            code = self._build_plain(expr)
            if code is not None:
                return cast(Code[V], code)
        if isinstance(expr, ir.Const):
            value, vtype = expr.value, expr.type
            return lambda f, s: b.const(value, vtype)
        if isinstance(expr, ir.FieldRef):
            name = expr.name
            if expr.snap is not None:
                snap = expr.snap
                return lambda f, s: f.snaps[snap][name]
            if expr.shard == "self":

                def own_field(f: Frame[V], s: Mapping[Key, V]) -> V:
                    if f.self_shard is None:
                        raise ModelError("a per-shard field was read without a shard")
                    return s[(f.self_shard, name)]

                return own_field
            var = expr.shard
            return lambda f, s: s[(f.shard_vars[var], name)]
        if isinstance(expr, ir.GlobalRef):
            key: Key = (None, expr.name)
            return lambda f, s: s[key]
        if isinstance(expr, ir.PolicyRef):
            name = expr.name
            policy = self.policy
            return lambda f, s: policy[name]
        if isinstance(expr, ir.LocalRef):
            name = expr.name
            return lambda f, s: f.locals[name]
        if isinstance(expr, ir.ArgRef):
            name = expr.name
            return lambda f, s: f.args[name]
        if isinstance(expr, ir.Emitted):
            name = expr.name
            return lambda f, s: f.emitted[name]
        if isinstance(expr, ir.Not):
            operand = self._sub(expr.operand)
            return lambda f, s: b.not_(operand(f, s))
        if isinstance(expr, ir.BoolOp):
            return self._build_boolop(expr)
        if isinstance(expr, ir.Compare):
            left, right = self._sub(expr.left), self._sub(expr.right)
            op = expr.op
            return lambda f, s: b.compare(op, left(f, s), right(f, s))
        if isinstance(expr, ir.Arith):
            left, right = self._sub(expr.left), self._sub(expr.right)
            op = expr.op
            return lambda f, s: b.arith(op, left(f, s), right(f, s))
        if isinstance(expr, ir.Neg):
            operand = self._sub(expr.operand)
            return lambda f, s: b.neg(operand(f, s))
        if isinstance(expr, ir.InSet):
            operand = self._sub(expr.operand)
            members, enum = expr.members, expr.operand.type.enum or ""
            return lambda f, s: b.in_set(operand(f, s), members, enum)
        if isinstance(expr, ir.IsNone):
            operand = self._sub(expr.operand)
            vtype = expr.operand.type
            return lambda f, s: b.is_none(operand(f, s), vtype)
        if isinstance(expr, ir.IfExp):
            cond, then, orelse = self._sub(expr.cond), self._sub(expr.then), self._sub(expr.orelse)

            def if_exp(f: Frame[V], s: Mapping[Key, V]) -> V:
                value = cond(f, s)
                decided = b.decide(value)
                if decided is not None:
                    return then(f, s) if decided else orelse(f, s)
                return b.ite(value, then(f, s), orelse(f, s))

            return if_exp
        if isinstance(expr, ir.QueryRef):
            query = self.spec.queries[expr.name]
            assert query.expr is not None  # only a shard query is a name in an expression
            body, shard = self._sub(query.expr), expr.shard
            return lambda f, s: body(Frame(_shard_of(shard, f), f.shard_vars, f.args), s)
        if isinstance(expr, ir.Aggregate):
            body, op, shards = self._sub(expr.body), expr.op, self.shards

            def aggregate(f: Frame[V], s: Mapping[Key, V]) -> V:
                values = [body(Frame(i, f.shard_vars, f.args), s) for i in range(shards)]
                if op == "count":
                    return b.count(values)
                return b.or_(values) if op == "exists" else b.and_(values)

            return aggregate
        raise ModelError(f"cannot evaluate {type(expr).__name__}")

    def _build_plain(self, expr: ir.Expr) -> Code[Any] | None:
        """The operators on plain Python values, applied directly: the same ones
        `ConcreteBackend` applies (its `Operators`), without a method call per node. None for
        a node whose code is the same in every backend."""
        sub = cast(Callable[[ir.Expr], Code[Any]], self._sub)
        if isinstance(expr, ir.Const):
            value = expr.value
            return lambda f, s: value
        if isinstance(expr, ir.Not):
            operand = sub(expr.operand)
            return lambda f, s: not operand(f, s)
        if isinstance(expr, ir.Compare):
            left, right, compare = sub(expr.left), sub(expr.right), COMPARISONS[expr.op]
            return lambda f, s: compare(left(f, s), right(f, s))
        if isinstance(expr, ir.Arith):
            left, right = sub(expr.left), sub(expr.right)
            arith = operator.add if expr.op == "+" else operator.sub
            return lambda f, s: arith(left(f, s), right(f, s))
        if isinstance(expr, ir.InSet):
            operand, members = sub(expr.operand), expr.members
            return lambda f, s: operand(f, s) in members
        if isinstance(expr, ir.IsNone):
            operand = sub(expr.operand)
            return lambda f, s: operand(f, s) is None
        if isinstance(expr, ir.BoolOp):
            operands = tuple(sub(o) for o in expr.operands)
            # The first operand that decides it is the value, as in `_build_boolop`.
            if expr.op == "or":

                def plain_or(f: Frame[Any], s: Mapping[Key, Any]) -> Any:
                    for operand in operands:
                        value = operand(f, s)
                        if value:
                            return value
                    return False

                return plain_or

            def plain_and(f: Frame[Any], s: Mapping[Key, Any]) -> Any:
                for operand in operands:
                    value = operand(f, s)
                    if not value:
                        return value
                return True

            return plain_and
        return None

    def _build_boolop(self, expr: ir.BoolOp) -> Code[V]:
        b = self.backend
        operands = tuple(self._sub(o) for o in expr.operands)
        is_or = expr.op == "or"

        def boolop(f: Frame[V], s: Mapping[Key, V]) -> V:
            values = []
            for operand in operands:
                value = operand(f, s)
                decided = b.decide(value)
                if decided is not None and decided == is_or:
                    return value
                values.append(value)
            return b.or_(values) if is_or else b.and_(values)

        return boolop

    def _shard(self, name: str, frame: Frame[V]) -> int:
        return _shard_of(name, frame)

    # -- statements --

    def exec_block(
        self,
        block: Sequence[ir.Stmt],
        frame: Frame[V],
        store: dict[Key, V],
        pc: V,
        effects: Effects[V],
        event: str = "",
    ) -> None:
        for stmt in block:
            self._exec(stmt, frame, store, pc, effects, event)

    def _exec(
        self, stmt: ir.Stmt, frame: Frame[V], store: dict[Key, V], pc: V, effects: Effects[V], event: str
    ) -> None:
        b = self.backend
        if isinstance(stmt, ir.Assign):
            value = self.eval(stmt.value, frame, store)
            if stmt.kind == "local":
                frame.locals[stmt.name] = value
            elif stmt.kind == "global":
                store[(None, stmt.name)] = value
            else:
                shard = self._shard(stmt.shard, frame)
                key = (shard, stmt.name)
                if stmt.name == self.spec.state_field:
                    self._state_change(shard, store[key], value, store=store, pc=pc, effects=effects, event=event)
                store[key] = value
        elif isinstance(stmt, ir.If):
            cond = self.eval(stmt.cond, frame, store)
            self.branch(
                cond,
                lambda s, f, p: self.exec_block(stmt.then, f, s, p, effects, event),
                lambda s, f, p: self.exec_block(stmt.orelse, f, s, p, effects, event),
                frame,
                store,
                pc,
            )
        elif isinstance(stmt, ir.ForShards):
            for shard in range(self.shards):
                frame.shard_vars[stmt.var] = shard
                self.exec_block(stmt.body, frame, store, pc, effects, event)
            del frame.shard_vars[stmt.var]
        elif isinstance(stmt, ir.CallEvent):
            shard = self._shard(stmt.shard, frame)
            args = {name: self.eval(expr, frame, store) for name, expr in stmt.args}
            self.call_event(self.spec.events[stmt.event], shard, args, store, pc, effects)
        elif isinstance(stmt, ir.Emit):
            given = {name: self.eval(expr, frame, store) for name, expr in stmt.args}
            params = self.spec.notifications[stmt.name].params
            values = tuple((p.name, given[p.name] if p.name in given else b.const(p.default, p.type)) for p in params)
            effects.emits.append(Emission(stmt.name, values, pc))
        elif isinstance(stmt, ir.Pass):
            pass
        else:  # pragma: no cover - the compiler produces no other statements
            raise ModelError(f"cannot execute {type(stmt).__name__}")
        del b

    def branch(self, cond: V, then: Any, orelse: Any, frame: Frame[V], store: dict[Key, V], pc: V) -> None:
        """Run `then` or `orelse` (each a function of store, frame, pc); both, merged, when
        the backend cannot decide `cond`."""
        b = self.backend
        decided = b.decide(cond)
        if decided is True:
            then(store, frame, pc)
            return
        if decided is False:
            orelse(store, frame, pc)
            return
        then_store, else_store = dict(store), dict(store)
        then_frame = Frame(frame.self_shard, dict(frame.shard_vars), frame.args, dict(frame.locals), frame.snaps)
        else_frame = Frame(frame.self_shard, dict(frame.shard_vars), frame.args, dict(frame.locals), frame.snaps)
        then(then_store, then_frame, b.and_([pc, cond]))
        orelse(else_store, else_frame, b.and_([pc, b.not_(cond)]))
        for key, left in then_store.items():
            right = else_store.get(key)
            if left is None or right is None:
                store.pop(key, None)
            elif left is not right:
                store[key] = b.ite(cond, left, right)
            elif store.get(key) is not left:
                store[key] = left
        for key in [k for k in else_store if k not in then_store]:
            store.pop(key, None)
        frame.locals.clear()
        for name in [n for n in then_frame.locals if n in else_frame.locals]:
            left, right = then_frame.locals[name], else_frame.locals[name]
            frame.locals[name] = left if left is right else b.ite(cond, left, right)

    def _state_change(
        self, shard: int, old: V, new: V, *, store: dict[Key, V], pc: V, effects: Effects[V], event: str
    ) -> None:
        b = self.backend
        changed = b.compare("!=", old, new)
        if b.decide(changed) is True and isinstance(self.backend, ConcreteBackend):
            effects.logs.append((shard, str(old), str(new), event))
        if not self.spec.on_state_change:
            return
        hook = Frame(None, {}, {}, {"old": old, "new": new})
        self.branch(
            changed,
            lambda s, f, p: self.exec_block(self.spec.on_state_change, f, s, p, effects, event),
            lambda s, f, p: None,
            hook,
            store,
            pc,
        )

    # -- events and actions --

    def call_event(
        self, event: Event, shard: int, args: Mapping[str, V], store: dict[Key, V], pc: V, effects: Effects[V]
    ) -> None:
        """Run one ledger API call on `shard`: guard, body, then history."""
        b = self.backend
        full_args = dict(args)
        for param in event.signature.params:
            if param.name not in full_args:
                full_args[param.name] = b.const(param.default, param.type)
        before = {name: store[(shard, name)] for name in self.shard_field_names}
        frame = Frame(shard, {}, full_args)
        ignored = (
            self.eval(event.ignore_when, frame, store) if event.ignore_when is not None else b.const(False, ir.BOOL)
        )
        contract = self.eval(event.requires, frame, store) if event.requires is not None else self.true
        at_start = {i: self.eval(r.when, frame, store) for i, r in enumerate(event.raises) if not r.after}
        first_emit = len(effects.emits)

        def run(s: dict[Key, V], f: Frame[V], p: V) -> None:
            self.exec_block(event.body, f, s, p, effects, event.name)
            history = Frame(shard, {}, full_args, {}, {"old": before})
            self.exec_block(event.history, history, s, p, effects, event.name)

        self.branch(ignored, lambda s, f, p: None, run, frame, store, pc)
        after = {name: store[(shard, name)] for name in self.shard_field_names}
        returned = Frame(shard, {}, full_args, {}, {"old": before})  # `old.x`: the record before the call
        # An `after` entry is read on the record the call left, where its body ran; the first
        # entry that holds is the error raised, so a later one holds only where none before did.
        raising_list: list[V] = []
        for index, entry in enumerate(event.raises):
            if not entry.after:
                raising_list.append(at_start[index])
                continue
            earlier = [b.not_(held) for held in raising_list]
            raising_list.append(b.and_([b.not_(ignored), *earlier, self.eval(entry.when, returned, store)]))
        raising = tuple(raising_list)
        raised = b.or_(list(raising)) if raising else b.const(False, ir.BOOL)
        result = self.eval(event.returns, returned, store) if event.returns is not None else None
        emits = tuple(effects.emits[first_emit:])
        emitted: dict[str, V] = {}
        for name in self.spec.notifications:
            sites = [e.pc for e in emits if e.name == name]
            emitted[name] = b.or_(sites) if sites else b.const(False, ir.BOOL)
        effects.calls.append(
            CallRecord(
                event.name,
                shard,
                full_args,
                pc,
                ignored,
                contract,
                before,
                after,
                raised,
                result,
                emits,
                emitted,
                raising,
            )
        )

    def enabled(self, action: Action, shards: Mapping[str, int], values: Mapping[str, V], store: Mapping[Key, V]) -> V:
        frame = Frame(None, dict(shards), values)
        return self.eval(action.when, frame, store)

    def run_action(
        self, action: Action, shards: Mapping[str, int], values: Mapping[str, V], store: dict[Key, V]
    ) -> Effects[V]:
        """Execute an action's body on `store` (in place); the caller checks `enabled`."""
        effects: Effects[V] = Effects()
        frame = Frame(None, dict(shards), values)
        self.exec_block(action.body, frame, store, self.true, effects)
        return effects

    # -- properties --

    def step_violations(
        self, prop_when: ir.Expr | None, prop_check: ir.Expr, record: CallRecord[V], store: Mapping[Key, V]
    ) -> V:
        """The condition under which one call breaks a step property."""
        b = self.backend
        outcome = {
            "raised": record.raised if record.raised is not None else b.const(False, ir.BOOL),
            ir.CONTRACT_KEPT: record.contract_ok,
        }
        if record.result is not None:
            outcome["result"] = record.result
        snaps = {"before": record.before, "after": record.after}
        frame = Frame(record.shard, {}, record.args, outcome, snaps, record.emitted)
        applies = self.eval(prop_when, frame, store) if prop_when is not None else b.const(True, ir.BOOL)
        if b.decide(applies) is False:  # what the assert reads may be outside the cone the `when` left
            return b.const(False, ir.BOOL)
        return b.and_([record.pc, applies, b.not_(self.eval(prop_check, frame, store))])

    def invariant(self, when: ir.Expr | None, check: ir.Expr, shard: int | None, store: Mapping[Key, V]) -> V:
        """Whether an invariant holds of one shard (or of the fleet, shard None)."""
        b = self.backend
        frame: Frame[V] = Frame(shard)
        if when is None:
            return self.eval(check, frame, store)
        applies = self.eval(when, frame, store)
        if b.decide(applies) is False:  # what `check` reads may be outside the cone the `when` left
            return b.const(True, ir.BOOL)
        return b.or_([b.not_(applies), self.eval(check, frame, store)])
