"""The typed intermediate form of guards, updates and action bodies.

A spec's expressions and statement blocks are written in a small subset of Python; `lang`
parses and type-checks them into these nodes once, at load time. Both back ends (the
concrete interpreter and the Z3 encoding) walk these same nodes through one executor
(`semantics`), which is what keeps the two semantics from drifting apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Type:
    """A value type: bool, int, an enum, str (opaque text), any (opaque, unchecked) or shard."""

    kind: str
    enum: str | None = None
    optional: bool = False

    def __str__(self) -> str:
        if self.kind == "none":
            return "None"
        base = self.enum if self.kind == "enum" else self.kind
        return f"{base} | None" if self.optional else str(base)

    def without_none(self) -> Type:
        return Type(self.kind, self.enum, False)


BOOL = Type("bool")
INT = Type("int")
STR = Type("str")
ANY = Type("any")
SHARD = Type("shard")
NONE = Type("none", optional=True)

CONTRACT_KEPT = "contract kept"
"""The call's outcome a step property reads as "the call was within its event's callers'
contract (`requires`)". Not a name the spec language can spell (it holds a space): only the
property `Spec.contract_property` builds reads it."""


# --- expressions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    value: object
    type: Type


TRUE = Const(True, BOOL)
"""The constant true (a condition that is absent, as a property without `when`)."""


@dataclass(frozen=True)
class FieldRef:
    """A per-shard field. `shard` is "self" (the event's shard) or a shard variable;
    `snap` is None for the current value or "old"/"before"/"after" for a captured one."""

    name: str
    shard: str
    snap: str | None
    type: Type


@dataclass(frozen=True)
class GlobalRef:
    """A fleet-wide ledger value or an environment variable."""

    name: str
    type: Type


@dataclass(frozen=True)
class PolicyRef:
    name: str
    type: Type = INT


@dataclass(frozen=True)
class LocalRef:
    name: str
    type: Type


@dataclass(frozen=True)
class ArgRef:
    """An event argument (`args.x`) or an action's value parameter."""

    name: str
    type: Type


@dataclass(frozen=True)
class ShardVar:
    """A shard variable used as a value (only as an event call's shard argument)."""

    name: str
    type: Type = SHARD


@dataclass(frozen=True)
class Not:
    operand: Expr
    type: Type = BOOL


@dataclass(frozen=True)
class BoolOp:
    op: str  # "and" | "or"
    operands: tuple[Expr, ...]
    type: Type = BOOL


@dataclass(frozen=True)
class Compare:
    op: str  # "==", "!=", "<", "<=", ">", ">="
    left: Expr
    right: Expr
    type: Type = BOOL


@dataclass(frozen=True)
class Arith:
    op: str  # "+" | "-"
    left: Expr
    right: Expr
    type: Type = INT


@dataclass(frozen=True)
class Neg:
    operand: Expr
    type: Type = INT


@dataclass(frozen=True)
class InSet:
    operand: Expr
    members: tuple[str, ...]
    set_name: str
    type: Type = BOOL


@dataclass(frozen=True)
class IsNone:
    operand: Expr
    type: Type = BOOL


@dataclass(frozen=True)
class IfExp:
    cond: Expr
    then: Expr
    orelse: Expr
    type: Type


@dataclass(frozen=True)
class QueryRef:
    """A named per-shard query evaluated on one shard (`s.suspected`)."""

    name: str
    shard: str
    type: Type = BOOL


@dataclass(frozen=True)
class Aggregate:
    """`count(e)`, `exists(e)` or `forall(e)`: `e` evaluated on every shard as "self"."""

    op: str
    body: Expr
    type: Type


@dataclass(frozen=True)
class Emitted:
    """`emitted(name)` in a step property: whether the call announced the notification
    `name` (some `emit.name(...)` of the call ran)."""

    name: str
    type: Type = BOOL


Expr = (
    Const
    | FieldRef
    | GlobalRef
    | PolicyRef
    | LocalRef
    | ArgRef
    | ShardVar
    | Not
    | BoolOp
    | Compare
    | Arith
    | Neg
    | InSet
    | IsNone
    | IfExp
    | QueryRef
    | Aggregate
    | Emitted
)


# --- statements --------------------------------------------------------------------------


@dataclass(frozen=True)
class Assign:
    """`target = value`; target kinds: "field" (on `shard`), "global", "local"."""

    kind: str
    name: str
    shard: str
    value: Expr
    line: int
    text: str


@dataclass(frozen=True)
class If:
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]
    line: int
    text: str


@dataclass(frozen=True)
class ForShards:
    """`for s in shards:` in index order."""

    var: str
    body: tuple[Stmt, ...]
    line: int
    text: str


@dataclass(frozen=True)
class CallEvent:
    """A ledger API call inside an environment action: `event(shard, name=value, ...)`."""

    event: str
    shard: str
    args: tuple[tuple[str, Expr], ...]
    line: int
    text: str


@dataclass(frozen=True)
class Emit:
    """`emit.name(args)`: the call announces the declared notification `name` with these
    arguments (a listener callback, a log line); by the shard the event was called on."""

    name: str
    args: tuple[tuple[str, Expr], ...]
    line: int
    text: str


@dataclass(frozen=True)
class Pass:
    line: int
    text: str = "pass"


Stmt = Assign | If | ForShards | CallEvent | Emit | Pass


def field_reads(nodes: object) -> set[str]:
    """Names of the per-shard fields read by expressions and statements (a field read only
    to update itself, as in `x = x + 1`, does not count: nothing else depends on it)."""
    found: set[str] = set()

    def expr(node: object, exclude: str | None = None) -> None:
        if isinstance(node, FieldRef):
            if node.name != exclude:
                found.add(node.name)
            return
        if isinstance(node, (list, tuple)):
            for item in node:
                expr(item, exclude)
            return
        for name in getattr(node, "__dataclass_fields__", {}):
            value = getattr(node, name)
            if isinstance(value, (Const, str, int, bool, Type)) or value is None:
                continue
            expr(value, exclude)

    def stmt(node: object) -> None:
        if isinstance(node, (list, tuple)):
            for item in node:
                stmt(item)
        elif isinstance(node, Assign):
            expr(node.value, node.name if node.kind == "field" else None)
        elif isinstance(node, If):
            expr(node.cond)
            stmt(node.then)
            stmt(node.orelse)
        elif isinstance(node, ForShards):
            stmt(node.body)
        elif isinstance(node, (CallEvent, Emit)):
            expr([value for _, value in node.args])
        elif node is not None and not isinstance(node, Pass):
            expr(node)

    stmt(nodes)
    return found


def children(node: object) -> Iterator[object]:
    """The IR nodes (and lists of them) directly under `node`; names, numbers and types are
    leaves."""
    if isinstance(node, (list, tuple)):
        yield from node
    elif hasattr(node, "__dataclass_fields__") and not isinstance(node, (type, Type)):
        for name in node.__dataclass_fields__:
            value = getattr(node, name)
            if value is not None and not isinstance(value, (str, int, float, bool, Type)):
                yield value


def called_events(stmts: object) -> set[str]:
    """The events a block calls."""
    return {n.event for n in walk(stmts) if isinstance(n, CallEvent)}


def walk(nodes: object) -> Iterator[object]:
    """Every IR node under `nodes` (expressions, statements, lists of them), in no promised
    order."""
    stack = [nodes]
    while stack:
        node = stack.pop()
        if hasattr(node, "__dataclass_fields__"):
            yield node
        stack.extend(children(node))


def fleet_wide(nodes: object) -> bool:
    """Whether expressions or statements depend on the number of shards (a loop over the
    shards or an aggregate over them)."""
    return any(isinstance(node, (ForShards, Aggregate)) for node in walk(nodes))
