"""What a property can observe of a spec: the variables it depends on, and how far each
counter needs to count.

A static analysis of the compiled IR (the same nodes both semantics run), used by the
explicit-state engine (`model.explicit`) to search a finite quotient of the state space
that is exact for the properties at hand:

* **Cone of influence, per variable.** A dependency graph over the spec's names (per-shard
  fields, fleet values and environment variables, event arguments, action parameters,
  locals, and for each event "a call of it happens") with an edge from every assigned name
  to what its value reads and to every condition it is assigned under (the action's guard,
  the callers' contracts, the event's `ignore_when`, enclosing `if`s, and the call sites
  of the event). The cone is what the property reads, closed under that graph. A
  variable outside it is never read by anything that decides a violation: the search
  holds it at its initial value, and a value parameter outside it needs one value only.
* **Saturated counters.** An int variable whose every use in the cone is a comparison with
  a constant (a literal or a policy constant) and whose every assignment is a constant or
  itself plus a non-negative constant behaves the same at every value from
  K = 1 + the largest constant it is compared with: `min(x, K)` commutes with each of those
  operations (K = c suffices for `x >= c` and `x < c`). The search stores such a counter
  saturated at K, which makes the state space
  finite where the concrete one is not (streaks and attempt counts grow without bound), so
  an exhausted search is a proof for every depth.

* **Finiteness** (`finite_reduction`). Whether the reduced space is known to be finite, so
  that an exhaustive search ends (a proof) rather than runs until a budget stops it; if
  not, which variable can grow without bound and why it is not saturated. The engines
  search exhaustively, unbounded, only where it is.

* **The arguments that decide a call** (`decision_cone`, `argument_use`). For the coverage
  search (`codegen.coverage`), which calls events directly: the cone of every branch of
  every event, and for an event argument in it, the constants and int variables it is
  compared with, and whether those comparisons are all that a branch can see of it. Then
  v - 1, v and v + 1 for each compared value v stand for every int, the same argument as
  the saturated counters' (a value only compared behaves alike between two neighbouring
  constants), so a search over them that exhausts the states is a proof.

Both reductions are exact (a bisimulation for the property, not an over-approximation):
every path of the reduced search is the projection of a concrete path with the same
violations, which is why traces are replayed on the full interpreter afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ledgercheck.model import ir
from ledgercheck.model.spec import Environment, Event, Property, PropertyKind, Spec

Node = tuple[str, ...]
"""A name in the dependency graph: ("field", f), ("global", g) (fleet value or environment
variable), ("arg", event, a), ("param", action, p), ("local", scope, x), ("call", event)."""


@dataclass(frozen=True)
class Reduction:
    """The variables that matter to a set of properties, and the counters that saturate."""

    cone: frozenset[Node]
    saturation: Mapping[Node, int]
    """Per saturated variable (a field or a global), the value K it is capped at."""
    unsaturated: Mapping[Node, str] = field(default_factory=dict)
    """Per int counter in the cone that is not saturated, the use that prevents it."""

    def dropped(self, spec: Spec, env: Environment) -> tuple[str, ...]:
        """The state variables outside the cone (for notes and tests)."""
        names = [("field", v.name) for v in spec.shard_vars] + [("global", v.name) for v in (*spec.globals, *env.vars)]
        return tuple(n[1] for n in names if n not in self.cone)


class _Graph:
    """The dependency graph of one environment's actions and the events they call."""

    def __init__(self, spec: Spec, env: Environment) -> None:
        self.spec = spec
        self.env = env
        self.edges: dict[Node, set[Node]] = {}
        for event in spec.events.values():
            scope = ("event", event.name)
            ctx = {("call", event.name)} | self.reads(event.ignore_when, scope)
            self.block(event.body, frozenset(ctx), scope)
            self.block(event.history, frozenset(ctx), scope)
            # A step property's `raised` and `result` (the call's outcome) read the event's
            # raises conditions and its returns expression (over the record after the body).
            raises = [r.when for r in event.raises]
            raised = self.reads(raises, scope) | {("call", event.name)}
            if any(r.after for r in event.raises):  # read on the record the body left
                raised |= ctx
            self.add(("local", *scope, "raised"), raised)
            if event.returns is not None:
                self.add(("local", *scope, "result"), self.reads(event.returns, scope) | ctx)
            # Whether the call kept its callers' contract (`Spec.contract_property`): its `requires`.
            self.add(("local", *scope, ir.CONTRACT_KEPT), self.reads(event.requires, scope) | {("call", event.name)})
        for action in env.actions:
            scope = ("action", action.name)
            ctx = self.reads(action.when, scope)
            if env.any_call:
                # A call outside its contract discards the whole action: every contract it
                # calls decides every write it makes.
                for name in sorted(ir.called_events(action.body)):
                    event = spec.events[name]
                    ctx |= self.reads(event.requires, ("event", name))
            self.block(action.body, frozenset(ctx), scope)

    def add(self, target: Node, sources: Iterable[Node]) -> None:
        self.edges.setdefault(target, set()).update(sources)

    def reads(self, expr: object, scope: tuple[str, ...]) -> set[Node]:
        out: set[Node] = set()
        stack = [expr]
        while stack:
            node = stack.pop()
            if node is None:
                continue
            if isinstance(node, ir.FieldRef):
                out.add(("field", node.name))
            elif isinstance(node, ir.GlobalRef):
                out.add(("global", node.name))
            elif isinstance(node, ir.LocalRef):
                out.add(("local", *scope, node.name))
            elif isinstance(node, ir.ArgRef):
                out.add(("arg", scope[1], node.name) if scope[0] == "event" else ("param", scope[1], node.name))
            elif isinstance(node, ir.QueryRef):
                stack.append(self.spec.queries[node.name].expr)
            elif isinstance(node, ir.Emitted):
                out.add(("emitted", node.name))
            else:
                stack.extend(ir.children(node))
        return out

    def block(self, stmts: Sequence[ir.Stmt], ctx: frozenset[Node], scope: tuple[str, ...]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ir.Assign):
                target = _target(stmt, scope)
                value = self.reads(stmt.value, scope)
                self.add(target, value | ctx)
                if stmt.kind == "field" and stmt.name == self.spec.state_field and self.spec.on_state_change:
                    hook = ("hook",)
                    state = ("field", stmt.name)
                    self.add(("local", *hook, "old"), {state} | ctx)
                    self.add(("local", *hook, "new"), value | {state} | ctx)
                    self.block(self.spec.on_state_change, frozenset(ctx | {state} | value), hook)
            elif isinstance(stmt, ir.If):
                inner = ctx | self.reads(stmt.cond, scope)
                self.block(stmt.then, inner, scope)
                self.block(stmt.orelse, inner, scope)
            elif isinstance(stmt, ir.ForShards):
                self.block(stmt.body, ctx, scope)
            elif isinstance(stmt, ir.Emit):
                # A step property's `emitted(name)` reads the conditions an emit site of
                # `name` runs under (in any event: a hook's emits belong to whichever calls it).
                self.add(("emitted", stmt.name), ctx)
            elif isinstance(stmt, ir.CallEvent):
                self.add(("call", stmt.event), ctx)
                event = self.spec.events[stmt.event]
                given = set()
                for name, expr in stmt.args:
                    given.add(name)
                    self.add(("arg", stmt.event, name), self.reads(expr, scope) | ctx)
                for param in event.signature.params:
                    if param.name not in given:
                        self.add(("arg", stmt.event, param.name), ctx)

    def closure(self, roots: Iterable[Node]) -> frozenset[Node]:
        cone: set[Node] = set()
        stack = list(roots)
        while stack:
            node = stack.pop()
            if node in cone:
                continue
            cone.add(node)
            stack.extend(self.edges.get(node, ()))
        return frozenset(cone)


def _target(stmt: ir.Assign, scope: tuple[str, ...]) -> Node:
    if stmt.kind == "field":
        return ("field", stmt.name)
    if stmt.kind == "global":
        return ("global", stmt.name)
    return ("local", *scope, stmt.name)


def _property_roots(graph: _Graph, prop: Property) -> set[Node]:
    """What deciding one violation of `prop` reads (a step property reads the called
    shard's fields around the call, and the call's arguments)."""
    roots: set[Node] = set()
    scopes = [("event", name) for name in prop.on] if prop.kind == PropertyKind.STEP else [("property", prop.name)]
    for scope in scopes:
        roots |= graph.reads([prop.when, prop.check], scope)
    if prop.kind == PropertyKind.STEP:
        roots |= {("call", name) for name in prop.on}
    return roots


def reduce_for(
    spec: Spec,
    env: Environment,
    props: Sequence[Property],
    policy: Mapping[str, int],
    *,
    exact_fields: Iterable[str] = (),
) -> Reduction:
    """The cone of influence of `props` in `env`, and the counters in it that saturate.
    `exact_fields` are kept and never saturated (the fields a view shows)."""
    graph = _Graph(spec, env)
    exact: set[Node] = {("field", name) for name in exact_fields}
    roots: set[Node] = set(exact)
    for prop in props:
        roots |= _property_roots(graph, prop)
    cone = graph.closure(roots)
    saturation, why = _saturation(spec, env, props, policy, cone, exact)
    return Reduction(cone, saturation, why)


# --- saturation ------------------------------------------------------------------------------


_FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
"""`c op x` as `x op' c`."""


def _constant(spec: Spec, policy: Mapping[str, int] | None, expr: object) -> int | None:
    """The value of a constant expression: an int literal, its negation, a policy constant
    (with no concrete policy, its declared minimum), or a sum or difference of them (a TIME_WAIT
    of `msl + msl`: a timer compared with it saturates as with one constant, TCP trial)."""
    if isinstance(expr, ir.Const) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, ir.PolicyRef):
        if policy is not None and expr.name in policy:
            return policy[expr.name]
        decl = spec.policy.get(expr.name)
        return decl.min if decl is not None else None
    if isinstance(expr, ir.Neg):
        inner = _constant(spec, policy, expr.operand)
        return None if inner is None else -inner
    if isinstance(expr, ir.Arith) and expr.op in ("+", "-") and (policy is not None or _literal(expr)):
        # `msl + msl` at a concrete policy: a constant too (at a symbolic one, a sum of the
        # constants' least values is no bound of the sum's)
        left, right = _constant(spec, policy, expr.left), _constant(spec, policy, expr.right)
        if left is None or right is None:
            return None
        return left + right if expr.op == "+" else left - right
    return None


def _literal(expr: object) -> bool:
    """Whether `expr` is made of int literals alone."""
    names = (ir.PolicyRef, ir.FieldRef, ir.GlobalRef, ir.ArgRef, ir.LocalRef)
    return not any(isinstance(n, names) for n in ir.walk(expr))


def _var(expr: object) -> Node | None:
    if isinstance(expr, ir.FieldRef):
        return ("field", expr.name)
    if isinstance(expr, ir.GlobalRef):
        return ("global", expr.name)
    return None


def _counter_update(
    target: Node, value: object, constant: Callable[[object], int | None]
) -> tuple[list[int], list[object]] | None:
    """`value`, assigned to `target`, as a counter update: through conditional expressions,
    every branch a constant or the target plus a non-negative constant. Returns (the
    constants it may assign, the conditions it reads), or None when it is anything else."""
    if isinstance(value, ir.IfExp):
        then = _counter_update(target, value.then, constant)
        orelse = _counter_update(target, value.orelse, constant)
        if then is None or orelse is None:
            return None
        return then[0] + orelse[0], [value.cond, *then[1], *orelse[1]]
    amount = constant(value)
    if amount is not None:
        return [amount], []
    if isinstance(value, ir.Arith) and value.op == "+":
        for this, other in ((value.left, value.right), (value.right, value.left)):
            step = constant(other)
            if _var(this) == target and step is not None and step >= 0:
                return [], []
    return None


def _int_counters(spec: Spec, env: Environment, policy: Mapping[str, int] | None) -> dict[Node, int]:
    """Per int state variable that starts at a non-negative value (not optional): that value.
    One that starts at a policy constant starts at its value, or for a symbolic policy (None)
    at its declared minimum, the least it can start at."""
    declared = [(("field", v.name), v) for v in spec.shard_vars]
    declared += [(("global", v.name), v) for v in (*spec.globals, *env.vars)]
    counters: dict[Node, int] = {}
    for node, var in declared:
        if var.type.kind != "int" or var.type.optional:
            continue
        start: object = var.initial
        if var.initial_policy is not None:
            start = policy[var.initial_policy] if policy is not None else spec.policy[var.initial_policy].min
        if isinstance(start, int) and not isinstance(start, bool) and start >= 0:
            counters[node] = start
    return counters


class _Uses:
    """Per int variable: the largest constant it is compared with, or disqualified."""

    def __init__(self, spec: Spec, policy: Mapping[str, int], candidates: set[Node]) -> None:
        self.spec = spec
        self.policy = policy
        self.bound: dict[Node, int] = {n: 0 for n in candidates}
        self.where = ""
        """Where the expressions being walked come from ("property p", "event e", ...)."""
        self.why: dict[Node, str] = {}
        """Per disqualified candidate, the first use that disqualified it (for messages)."""

    def constant(self, expr: object) -> int | None:
        return _constant(self.spec, self.policy, expr)

    def disqualify(self, node: Node | None, why: str = "") -> None:
        if node is not None and node in self.bound:
            self.bound.pop(node)
            self.why.setdefault(node, f"{why or 'read other than in a comparison with a constant'} in {self.where}")

    def expr(self, node: object) -> None:
        """A read in a general position: a comparison with a constant is the only use of a
        candidate that keeps it saturable."""
        if node is None:
            return
        if isinstance(node, ir.Compare):
            for this, other, op in ((node.left, node.right, node.op), (node.right, node.left, _FLIP[node.op])):
                name, value = _var(this), self.constant(other)
                if name is not None and value is not None:
                    if name in self.bound:
                        # Every x >= K must compare as K does: `x >= c` and `x < c` from K = c,
                        # the others from K = c + 1.
                        self.bound[name] = max(self.bound[name], value if op in (">=", "<") else value + 1)
                    return
            left, right = _var(node.left), _var(node.right)
            if (
                left is not None
                and left == right
                and getattr(node.left, "snap", None) != getattr(node.right, "snap", None)
            ):
                self.disqualify(
                    left, f"compared with its own earlier value (`{_shown(node.left)} {node.op} {_shown(node.right)}`)"
                )
        if isinstance(node, ir.QueryRef):
            self.expr(self.spec.queries[node.name].expr)
            return
        name = _var(node)
        if name is not None:
            self.disqualify(name)
            return
        for child in ir.children(node):
            self.expr(child)

    def assigned(self, target: Node, value: object, text: str = "") -> None:
        """An assignment: the target keeps saturable if the value is a counter update (a
        constant, or the target plus a non-negative constant)."""
        update = _counter_update(target, value, self.constant)
        if update is None:
            self.disqualify(target, f"assigned other than a constant or itself plus a constant (`{text}`)")
            self.expr(value)
            return
        for cond in update[1]:
            self.expr(cond)


def _saturation(
    spec: Spec,
    env: Environment,
    props: Sequence[Property],
    policy: Mapping[str, int],
    cone: frozenset[Node],
    exact: set[Node],
) -> tuple[dict[Node, int], dict[Node, str]]:
    """The saturated counters with their caps, and per int counter in the cone that is not
    saturated, why not."""
    initial = _int_counters(spec, env, policy)
    uses = _Uses(spec, policy, {node for node in initial if node in cone and node not in exact})
    graph_scopes: list[tuple[tuple[str, ...], Sequence[ir.Stmt]]] = []
    for event in spec.events.values():
        uses.where = f"event {event.name}"
        uses.expr(event.ignore_when)
        uses.expr(event.requires)
        uses.expr(event.returns)
        graph_scopes += [(("event", event.name), event.body), (("event", event.name), event.history)]
    for action in env.actions:
        uses.where = f"action {action.name}"
        uses.expr(action.when)
        graph_scopes.append((("action", action.name), action.body))
    graph_scopes.append((("hook",), spec.on_state_change))
    for prop in props:
        uses.where = f"property {prop.name}"
        uses.expr([prop.when, prop.check])

    def block(stmts: Sequence[ir.Stmt], scope: tuple[str, ...]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ir.Assign):
                target = _target(stmt, scope)
                if target in cone:
                    uses.assigned(target, stmt.value, stmt.text)
            elif isinstance(stmt, ir.If):
                uses.expr(stmt.cond)
                block(stmt.then, scope)
                block(stmt.orelse, scope)
            elif isinstance(stmt, ir.ForShards):
                block(stmt.body, scope)
            elif isinstance(stmt, ir.CallEvent):
                for name, expr in stmt.args:
                    if ("arg", stmt.event, name) in cone:
                        uses.expr(expr)

    for scope, stmts in graph_scopes:
        uses.where = "the state hook" if scope == ("hook",) else " ".join(scope)
        block(stmts, scope)
    return {node: max(bound, initial[node]) for node, bound in uses.bound.items()}, uses.why


def nonnegative_counters(spec: Spec, env: Environment, policy: Mapping[str, int] | None) -> frozenset[Node]:
    """Int variables that are never negative: they start at a non-negative value and every
    assignment to one (in any event, action or the state hook) is a counter update whose
    constants are non-negative (a policy constant counts by its value, or for a symbolic
    policy its declared minimum). `x >= 0` is then an invariant, which the bounded model
    checker states at every step (measured faster)."""
    good = set(_int_counters(spec, env, policy))
    blocks: list[object] = [spec.on_state_change]
    blocks += [[event.body, event.history] for event in spec.events.values()]
    blocks += [action.body for action in env.actions]
    for node in ir.walk(blocks):
        if isinstance(node, ir.Assign) and node.kind in ("field", "global"):
            target: Node = (node.kind, node.name)
            if target in good:
                update = _counter_update(target, node.value, lambda e: _constant(spec, policy, e))
                if update is None or any(c < 0 for c in update[0]):
                    good.discard(target)
    return frozenset(good)


# --- finiteness ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finiteness:
    """Whether the reduced state space (what the explicit engine enumerates) is known to be
    finite, and if not, the first variable that can take unboundedly many values and why."""

    finite: bool
    variable: str | None = None
    reason: str = ""

    def __str__(self) -> str:
        if self.finite:
            return "the reduced state space is finite"
        return f"the reduced state space is infinite: {self.variable} {self.reason}"


def _shown(expr: object) -> str:
    """A variable reference as the spec writes it (`before.x`, `x`), for messages."""
    if isinstance(expr, ir.FieldRef):
        return f"{expr.snap}.{expr.name}" if expr.snap else expr.name
    if isinstance(expr, ir.GlobalRef):
        return expr.name
    return "..."


def _flows(spec: Spec, env: Environment, graph: _Graph) -> list[tuple[Node, Node, bool, str]]:
    """Every data flow of the spec: (source, target, through `+`/`-`, the statement), from
    each name an assigned value (or an event argument) reads to the name it is stored in."""
    flows: list[tuple[Node, Node, bool, str]] = []

    def add(target: Node, value: object, scope: tuple[str, ...], text: str) -> None:
        arith = any(isinstance(n, ir.Arith) for n in ir.walk(value))
        for source in graph.reads(value, scope):
            flows.append((source, target, arith, text))

    def block(stmts: Sequence[ir.Stmt], scope: tuple[str, ...]) -> None:
        for node in ir.walk(list(stmts)):
            if isinstance(node, ir.Assign):
                add(_target(node, scope), node.value, scope, node.text)
            elif isinstance(node, ir.CallEvent):
                for name, expr in node.args:
                    add(("arg", node.event, name), expr, scope, f"a call of {node.event}")

    for event in spec.events.values():
        block([*event.body, *event.history], ("event", event.name))
    for action in env.actions:
        block(action.body, ("action", action.name))
    block(spec.on_state_change, ("hook",))
    return flows


def finite_reduction(
    spec: Spec,
    env: Environment,
    props: Sequence[Property],
    policy: Mapping[str, int],
    reduction: Reduction | None = None,
) -> Finiteness:
    """Whether the state space the explicit engine searches for `props` is finite, so that
    its search ends by exhausting it (a proof for every depth) rather than never.

    Bools, enums and strings are finite (opaque strings are renamed by first occurrence);
    value parameters range over finite domains; so is a variable outside the cone of
    influence (held at one value) and a saturated counter. What is left is an int variable
    in the cone that is not saturated: it is unbounded when it sits on a cycle of data flow
    (`x = x + 1`, or through other variables, locals and event arguments) that adds or
    subtracts, or reads from such a cycle; a cycle through a saturated counter is cut (its
    value is capped). A counter stays unsaturated when it is compared with anything but a
    constant: with its own earlier value in a step property (`after.n > before.n`), or with
    another unbounded counter. The analysis is syntactic and errs towards "infinite" (for
    example a counter that only ever counts down is reported unbounded): that choice only
    sends the search to the Z3 engines, never makes an unsound proof."""
    reduction = reduction if reduction is not None else reduce_for(spec, env, props, policy)
    flows = [f for f in _flows(spec, env, _Graph(spec, env)) if f[1] not in reduction.saturation]
    after: dict[Node, set[Node]] = {}
    for source, target, _, _ in flows:
        after.setdefault(source, set()).add(target)

    def reach(start: Node) -> set[Node]:
        seen: set[Node] = set()
        stack = [start]
        while stack:
            node = stack.pop()
            for nxt in after.get(node, ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    growth: dict[Node, str] = {}
    for source, target, arith, text in flows:
        if arith and target not in growth and source in reach(target) | {target}:
            growth[target] = text
    unbounded: dict[Node, str] = dict(growth)
    for seed, text in growth.items():
        for node in reach(seed):
            unbounded.setdefault(node, text)
    declared = [(("field", v.name), v) for v in spec.shard_vars]
    declared += [(("global", v.name), v) for v in (*spec.globals, *env.vars)]
    for node, var in declared:
        if var.type.kind != "int" or node not in reduction.cone or node not in unbounded:
            continue
        kind = "field" if node[0] == "field" else "fleet value"
        why = reduction.unsaturated.get(node)
        grows = f"grows without bound (`{unbounded[node]}`)"
        reason = f"{grows} and is not saturated: {why}" if why else f"{grows} and is not a saturable counter"
        return Finiteness(False, f"{kind} {var.name}", reason)
    return Finiteness(True)


def node_of(key: tuple[int | None, str]) -> Node:
    """A state variable's store key (shard or None, name) as a name of the dependency graph."""
    return ("field", key[1]) if key[0] is not None else ("global", key[1])


def one_shard_decides(spec: Spec, env: Environment, props: Sequence[Property], policy: Mapping[str, int]) -> bool:
    """Whether a one-shard search decides `props` for every fleet size (see
    `shards_independent`): where the engines pick the explicit search."""
    return shards_independent(spec, env, props, reduce_for(spec, env, props, policy))


def relevant_actions(spec: Spec, env: Environment, reduction: Reduction) -> frozenset[str]:
    """The actions that can change what the properties see: an action that assigns nothing
    in the cone and calls no event whose call is in it only stutters, as far as they can tell."""
    out = set()
    for action in env.actions:
        calls = ir.called_events(action.body)
        # (an action assigns fields directly only as a clock tick advancing timers)
        assigns = {
            (n.kind, n.name) for n in ir.walk(action.body) if isinstance(n, ir.Assign) and n.kind in ("global", "field")
        }
        if any(("call", name) in reduction.cone for name in calls) or assigns & reduction.cone:
            out.add(action.name)
    return frozenset(out)


def shards_independent(spec: Spec, env: Environment, props: Sequence[Property], reduction: Reduction) -> bool:
    """Whether the shard a per-shard property is about evolves on its own: no fleet value or
    environment variable is in the cone, and every relevant action works on one shard
    (one shard parameter, no loop or aggregate over the shards, in it or in the events it
    calls). Then a one-shard search decides the property for every fleet size."""
    if any(p.fleet for p in props) or any(n[0] == "global" for n in reduction.cone):
        return False
    relevant = relevant_actions(spec, env, reduction)
    for action in env.actions:
        if action.name not in relevant:
            continue
        if len(action.shard_params) != 1:
            return False
        (own,) = action.shard_params
        nodes = list(ir.walk([action.when, action.body]))
        events = {n.event for n in nodes if isinstance(n, ir.CallEvent)}
        for name in sorted(events):
            event = spec.events[name]
            nodes += [n for n in ir.walk([event.ignore_when, event.requires, event.body, event.history])]
        nodes += list(ir.walk(spec.on_state_change))
        for node in nodes:
            if isinstance(node, (ir.Aggregate, ir.ForShards)):
                return False
            if isinstance(node, (ir.FieldRef, ir.QueryRef, ir.CallEvent)) and node.shard not in ("self", own):
                return False
    return True


# --- the arguments that decide a call --------------------------------------------------------


def decision_cone(spec: Spec) -> frozenset[Node]:
    """What the outcome of some decision of some event reads (its `ignore_when`, its callers'
    `requires`, every `if` of its body), closed under the dependency graph of the events
    alone (no environment: a test calls them directly). An event argument outside it decides
    no branch of any event, so one value of it takes every branch any value does: the
    coverage search (`codegen.coverage`) tries one."""
    return _cone_of_decisions(spec, raises_and_hook=False)


def branch_cone(spec: Spec) -> frozenset[Node]:
    """What can decide, now or after more calls, which branch a call takes: `decision_cone`
    with the `raises` conditions and the state hook's `if`s among its roots. Two states that
    agree on its fields and fleet values take the same branches under the same calls, and so
    do their successors: the coverage searches (`codegen.coverage`) keep one of them. A field
    only what a call returns reads (a lease's token, counted up by every acquire) kept a
    two-instance search's states apart until its 5,000-state bound."""
    return _cone_of_decisions(spec, raises_and_hook=True)


def _cone_of_decisions(spec: Spec, *, raises_and_hook: bool) -> frozenset[Node]:
    graph = _Graph(spec, Environment("decisions", "", (), (), any_call=False))
    roots: set[Node] = set()
    for event in spec.events.values():
        ifs = [n.cond for n in ir.walk(list(event.body)) if isinstance(n, ir.If)]
        whens = [entry.when for entry in event.raises] if raises_and_hook else []
        roots |= graph.reads([event.ignore_when, event.requires, *ifs, *whens], ("event", event.name))
    if raises_and_hook:
        hook_ifs = [n.cond for n in ir.walk(list(spec.on_state_change)) if isinstance(n, ir.If)]
        roots |= graph.reads(hook_ifs, ("hook",))
    return graph.closure(roots)


@dataclass(frozen=True)
class ArgumentUse:
    """How one argument of an event decides what a call of it does (`argument_use`).

    Where `exact` (no `inexact` reason), every use of it that can decide a branch is a test
    for None or a comparison with a constant or with a variable the call does not assign.
    A call then behaves alike, as far as any branch can tell, for all values on the same
    side of each of those: for an int, v - 1, v and v + 1 for each value v compared with
    (in the state the call is made in) hold one value of every such class, so trying those
    values is as good as trying every int. That is what makes a search over them a proof."""

    event: str
    name: str
    decides: bool
    """In `decision_cone`: some branch may depend on its value."""
    constants: tuple[int, ...] = ()
    """The constants it is compared or combined with (literals, policy constants at the policy given)."""
    variables: tuple[tuple[Node, int], ...] = ()
    """The int fields and fleet values it is compared or combined with, each with the constant
    added to it there (`args.c > term + 2`: term, 2): their values in the state a call is made
    in, plus that constant, are values to try."""
    inexact: str = ""
    """Empty where the classes above are exact; else the first use that is not such a
    comparison (`args.c + 1`, a comparison with another argument...)."""
    sums: tuple[tuple[tuple[tuple[Node, int], ...], int], ...] = ()
    """The sums and differences of several int variables it is compared or combined with
    (`args.amount > paid - refunded`: ((paid, 1), (refunded, -1)), 0): their values in the
    state a call is made in are values to try too (the boundary is there, not at `paid`)."""


def argument_use(spec: Spec, event: Event, param: str, policy: Mapping[str, int], cone: frozenset[Node]) -> ArgumentUse:
    """How the argument `param` of `event` can decide a branch (see `ArgumentUse`)."""
    if ("arg", event.name, param) not in cone:
        return ArgumentUse(event.name, param, False)
    walk = _ArgumentWalk(spec, event, param, policy, cone)
    for guard in (event.ignore_when, event.requires):  # on the state before the call
        walk.expr(guard, matters=True, before=True)
    walk.block(event.body)
    walk.block(event.history)
    return ArgumentUse(
        event.name,
        param,
        True,
        tuple(sorted(set(walk.constants))),
        tuple(sorted(set(walk.variables))),
        walk.inexact,
        tuple(sorted(set(walk.sums))),
    )


class _ArgumentWalk:
    """The uses of one event argument in the event's guards and blocks (`argument_use`)."""

    def __init__(self, spec: Spec, event: Event, param: str, policy: Mapping[str, int], cone: frozenset[Node]) -> None:
        self.spec = spec
        self.policy = policy
        self.param = param
        self.cone = cone
        self.scope = ("event", event.name)
        self.constants: list[int] = []
        self.variables: list[tuple[Node, int]] = []
        self.sums: list[tuple[tuple[tuple[Node, int], ...], int]] = []
        self.inexact = ""
        # What the call may change before a comparison in its body reads it.
        blocks = [event.body, event.history, spec.on_state_change]
        self.assigned = {
            (n.kind, n.name) for n in ir.walk(blocks) if isinstance(n, ir.Assign) and n.kind in ("field", "global")
        }

    def block(self, stmts: Sequence[ir.Stmt]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ir.Assign):
                self.expr(stmt.value, matters=_target(stmt, self.scope) in self.cone, before=False)
            elif isinstance(stmt, ir.If):
                self.expr(stmt.cond, matters=True, before=False)
                self.block(stmt.then)
                self.block(stmt.orelse)
            elif isinstance(stmt, ir.ForShards):
                self.block(stmt.body)
            elif isinstance(stmt, ir.CallEvent):  # (only actions call events)
                for _, value in stmt.args:
                    self.expr(value, matters=True, before=False)
            # an `emit` is read by step properties only, never by a branch

    def is_arg(self, node: object) -> bool:
        return isinstance(node, ir.ArgRef) and node.name == self.param

    def expr(self, node: object, *, matters: bool, before: bool) -> None:
        if node is None or not any(self.is_arg(n) for n in ir.walk(node)):
            return
        if self.is_arg(node):
            self.fail(matters, "read other than in a comparison (it is copied or passed on)")
        elif isinstance(node, ir.IsNone) and self.is_arg(node.operand):
            return
        elif isinstance(node, ir.Compare) and (self.is_arg(node.left) or self.is_arg(node.right)):
            other = node.right if self.is_arg(node.left) else node.left
            self.collect(other)
            if not self.pinned(other, before):
                self.fail(matters, "compared with something other than a constant or a variable the call leaves alone")
            self.expr(other, matters=matters, before=before)
        elif isinstance(node, (ir.Compare, ir.Arith, ir.Neg)):
            self.collect(node)
            self.fail(matters, "used in a sum or difference")
            for child in ir.children(node):
                self.expr(child, matters=matters, before=before)
        else:
            for child in ir.children(node):
                self.expr(child, matters=matters, before=before)

    def fail(self, matters: bool, why: str) -> None:
        if matters and not self.inexact:
            self.inexact = why

    def collect(self, node: object) -> None:
        """The constants and int variables of an expression the argument meets: values to try."""
        whole = _fixed(self.spec, self.policy, node)
        if whole is not None:
            self.constants.append(whole)
        shifted = self.shifted(node)
        if shifted is not None:
            variable = _int_variable(shifted[0])
            assert variable is not None  # (what `shifted` found)
            self.variables.append((variable, shifted[1]))
        linear = self.linear(node)
        if linear is not None and (len(linear[0]) > 1 or any(c != 1 for _, c in linear[0])):
            self.sums.append(linear)
        for n in ir.walk(node):
            value = _constant(self.spec, self.policy, n)
            if value is not None:
                self.constants.append(value)
            variable = _int_variable(n)
            if variable is not None and (shifted is None or n is not shifted[0]):
                self.variables.append((variable, 0))

    def linear(self, node: object) -> tuple[tuple[tuple[Node, int], ...], int] | None:
        """`node` as a sum of int variables times whole numbers plus a constant (`paid -
        refunded + 1`: ((paid, 1), (refunded, -1)), 1), or None where it is not one."""
        fixed = _fixed(self.spec, self.policy, node)
        if fixed is not None:
            return (), fixed
        variable = _int_variable(node)
        if variable is not None:
            return ((variable, 1),), 0
        if isinstance(node, ir.Neg):
            inner = self.linear(node.operand)
            return None if inner is None else (tuple((v, -c) for v, c in inner[0]), -inner[1])
        if not isinstance(node, ir.Arith):
            return None
        left, right = self.linear(node.left), self.linear(node.right)
        if left is None or right is None:
            return None
        sign = 1 if node.op == "+" else -1
        terms: dict[Node, int] = dict(left[0])
        for var, coef in right[0]:
            terms[var] = terms.get(var, 0) + sign * coef
        return tuple(sorted((v, c) for v, c in terms.items() if c != 0)), left[1] + sign * right[1]

    def shifted(self, node: object) -> tuple[object, int] | None:
        """`var + c` or `var - c` (an int variable plus a constant) as (var, the offset)."""
        if not isinstance(node, ir.Arith):
            return None
        left, right = node.left, node.right
        if _int_variable(left) is not None:
            offset = _fixed(self.spec, self.policy, right)
            if offset is not None:
                return left, offset if node.op == "+" else -offset
        if node.op == "+" and _int_variable(right) is not None:
            offset = _fixed(self.spec, self.policy, left)
            if offset is not None:
                return right, offset
        return None

    def pinned(self, node: object, before: bool) -> bool:
        """Whether `node` is a constant, or an int variable of the called shard whose value
        is the one the call starts from (read before the body runs, or never assigned by it),
        plus or minus a constant."""
        if _fixed(self.spec, self.policy, node) is not None:
            return True
        shifted = self.shifted(node)
        if shifted is not None:
            node = shifted[0]
        variable = _int_variable(node)
        if variable is None:
            return False
        return before or getattr(node, "snap", None) == "old" or variable not in self.assigned


def _int_variable(node: object) -> Node | None:
    """An int field of the called shard (now or before the call) or an int fleet value."""
    if isinstance(node, ir.FieldRef) and node.shard == "self" and node.snap in (None, "old"):
        return ("field", node.name) if node.type.kind == "int" else None
    if isinstance(node, ir.GlobalRef) and node.type.kind == "int":
        return ("global", node.name)
    return None


def _fixed(spec: Spec, policy: Mapping[str, int], node: object) -> int | None:
    """The value of a constant expression, sums and differences of constants included."""
    if isinstance(node, ir.Arith):
        left, right = _fixed(spec, policy, node.left), _fixed(spec, policy, node.right)
        if left is None or right is None:
            return None
        return left + right if node.op == "+" else left - right
    return _constant(spec, policy, node)


__all__ = [
    "ArgumentUse",
    "Finiteness",
    "Node",
    "Reduction",
    "argument_use",
    "branch_cone",
    "decision_cone",
    "finite_reduction",
    "node_of",
    "nonnegative_counters",
    "one_shard_decides",
    "reduce_for",
    "relevant_actions",
    "shards_independent",
]
