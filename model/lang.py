"""The spec's expression and statement language: a small, safe subset of Python.

Guards, updates, action bodies and properties are parsed with `ast` and compiled into the
typed nodes of `model.ir`. Only whitelisted syntax is accepted: names, constants,
comparisons, `and`/`or`/`not`, `+`/`-`, `in` a named state set, `is None`, conditional
expressions, `args.x`, `old.x`/`before.x`/`after.x`, shard variables (`s.state`), the
fleet aggregates `count`, `exists` and `forall`, and a call's announcements: the statement
`emit.name(args)` (event bodies, history blocks, on_state_change) and `emitted(name)` (step
properties). Nothing here ever evaluates user text:
a call, an import, a subscript, a lambda or a dunder name is refused with its position.
"""

from __future__ import annotations

import ast
import re
import textwrap
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ledgercheck.model import ir
from ledgercheck.model.errors import Location, SpecError, did_you_mean
from ledgercheck.model.ir import BOOL, INT, NONE, SHARD, STR, Type

MAX_SOURCE_CHARS = 20_000
MAX_DEPTH = 60
MAX_INT = 2**31 - 1
AGGREGATES = ("count", "exists", "forall")
SNAPSHOTS = ("old", "before", "after")

Where = Callable[[int, int], Location]


@dataclass(frozen=True)
class Param:
    """One parameter of an event's API call or of an environment action."""

    name: str
    type: Type
    keyword_only: bool = False
    default: object = None
    has_default: bool = False


@dataclass(frozen=True)
class Signature:
    name: str
    shard_param: str
    params: tuple[Param, ...]

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


@dataclass
class Scope:
    """What names mean where an expression or block is written, and what it may do."""

    where: Where
    context: str
    fields: Mapping[str, tuple[Type, str]]
    globals: Mapping[str, Type]
    policy: frozenset[str]
    enum_members: Mapping[str, str]
    enums: Mapping[str, tuple[str, ...]]
    sets: Mapping[str, tuple[str, tuple[str, ...]]]
    queries: Mapping[str, ir.Expr]
    readable_kinds: frozenset[str] = frozenset({"ledger"})
    self_shard: bool = True
    args: Mapping[str, Type] | None = None
    # What `args` belongs to, in the message for an argument it lacks.
    args_owner: str = "the event has no argument"
    params: Mapping[str, Type] = field(default_factory=dict)
    shard_vars: frozenset[str] = frozenset()
    snapshots: frozenset[str] = frozenset()
    writable_fields: frozenset[str] = frozenset()
    writable_globals: frozenset[str] = frozenset()
    events: Mapping[str, Signature] | None = None
    # The declared notifications, by name, where `emit.name(...)` may stand (event bodies,
    # history blocks, on_state_change); None where it may not.
    notifications: Mapping[str, tuple[Param, ...]] | None = None
    # The notifications `emitted(name)` may name (a step property); None where it is refused.
    emitted: frozenset[str] | None = None
    aggregates: bool = False
    locals: dict[str, Type] = field(default_factory=dict)
    # The exact text being compiled, split at newlines: `ast` gives columns in UTF-8 bytes,
    # a user counts characters.
    text_lines: tuple[str, ...] = ()

    def fail(self, node: ast.AST | None, message: str) -> SpecError:
        line = getattr(node, "lineno", 1) if node is not None else 1
        col = getattr(node, "col_offset", 0) if node is not None else 0
        if 1 <= line <= len(self.text_lines) and col > 0:
            col = len(self.text_lines[line - 1].encode("utf-8")[:col].decode("utf-8", "ignore"))
        return SpecError(self.where(line, col), f"{self.context}: {message}")

    def all_names(self) -> list[str]:
        names = list(self.locals) + list(self.params) + list(self.globals) + list(self.policy)
        names += list(self.enum_members) + list(self.shard_vars)
        if self.self_shard:
            names += [n for n, (_, kind) in self.fields.items() if kind in self.readable_kinds]
            names += list(self.queries)
        return names


_LONE_EQUALS = re.compile(r"(?<![=!<>])=(?!=)")
"""A single `=` in an expression: almost always a comparison written `=`."""


OPERATOR_SYMBOLS = {
    "Mult": "*",
    "Div": "/",
    "FloorDiv": "//",
    "Mod": "%",
    "Pow": "**",
    "LShift": "<<",
    "RShift": ">>",
    "BitOr": "|",
    "BitAnd": "&",
    "BitXor": "^",
    "MatMult": "@",
}
"""Python's operators as a message names them (`*`, not the syntax tree's `Mult`)."""

MULTIPLY_HINT = " (linear arithmetic only: double a value as x + x, or keep the product in a field of its own)"


def parse_python(text: str, mode: str, scope: Scope) -> ast.AST:
    """Parse text as Python, refusing oversized or overly deep input before it can hurt.
    Only ever parses: nothing here compiles or runs the text. Every failure is a SpecError
    at the text's position, never a RecursionError, MemoryError or warning."""
    if len(text) > MAX_SOURCE_CHARS:
        raise scope.fail(None, f"text is too long ({len(text)} characters, at most {MAX_SOURCE_CHARS})")
    if _bracket_depth(text) > MAX_DEPTH:
        raise scope.fail(None, f"nesting is deeper than {MAX_DEPTH} levels")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "invalid decimal literal" and the like: the syntax is checked below
            tree = ast.parse(text, mode=mode)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = (exc.offset or 1) - 1
        message = f"syntax error: {exc.msg}"
        if mode == "eval" and "==" not in message and _LONE_EQUALS.search(text):
            message += " (an expression compares with ==; a single = assigns, which only a block does)"
        if "integer string conversion" in (exc.msg or ""):
            message = f"an integer literal is out of range (|n| <= {MAX_INT})"
        raise SpecError(scope.where(line, col), f"{scope.context}: {message}") from None
    except (RecursionError, MemoryError):
        raise scope.fail(None, f"nesting is deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. a NUL character
        raise scope.fail(None, f"cannot parse: {str(exc)[:200]}") from None
    if _ast_depth(tree) > MAX_DEPTH:
        raise scope.fail(None, f"nesting is deeper than {MAX_DEPTH} levels")
    return tree


def _located(scope: Scope, parsed: str, lines: int = 0, first_col: int = 0, col: int = 0) -> Scope:
    """A scope whose positions are those of `parsed`, a text cut out of the value the scope
    maps: `lines` leading lines were dropped, every column moved by `col`, and the first
    line's columns by `first_col` more (stripped indentation, a "def " prefix)."""
    where = scope.where

    def locate(line: int, column: int) -> Location:
        return where(line + lines, max(0, column + col + (first_col if line == 1 else 0)))

    shifted = locate if (lines or first_col or col) else where
    return replace(scope, where=shifted, text_lines=tuple(parsed.split("\n")))


def _strip(text: str) -> tuple[str, int, int]:
    """`text` without surrounding whitespace, and how many lines and first-line columns the
    leading whitespace took."""
    body = text.strip()
    lead = text[: len(text) - len(text.lstrip())]
    return body, lead.count("\n"), len(lead) - (lead.rfind("\n") + 1)


def _bracket_depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    return deepest


def _ast_depth(tree: ast.AST) -> int:
    deepest = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            return depth
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


# --- expressions -------------------------------------------------------------------------


def compile_expr(text: str, scope: Scope, expected: Type | None = None) -> ir.Expr:
    """Compile one expression; `expected` (e.g. BOOL for a guard) is checked."""
    body, lines, first_col = _strip(text)
    scope = _located(scope, body, lines, first_col)
    tree = parse_python(body, "eval", scope)
    assert isinstance(tree, ast.Expression)
    expr = _expr(tree.body, scope)
    if expected is not None:
        _require(expr, expected, tree.body, scope, "the expression")
    return expr


def _require(expr: ir.Expr, expected: Type, node: ast.AST, scope: Scope, what: str) -> None:
    if not assignable(expr.type, expected):
        raise scope.fail(node, f"{what} must be {expected}, not {expr.type}")


def assignable(value: Type, target: Type) -> bool:
    """Whether a value of type `value` may be stored where `target` is expected."""
    if target.kind == "any":
        return True
    if value.kind == "none":
        return target.optional
    if value.kind != target.kind or value.enum != target.enum:
        return False
    return target.optional or not value.optional


def _comparable(left: Type, right: Type) -> bool:
    if left.kind == "none" or right.kind == "none":
        return left.optional and right.optional
    return left.kind == right.kind and left.enum == right.enum and left.kind != "any"


def _join(left: Type, right: Type) -> Type | None:
    if left.kind == "none":
        return replace(right, optional=True) if right.kind != "none" else NONE
    if right.kind == "none":
        return replace(left, optional=True)
    if left.kind != right.kind or left.enum != right.enum:
        return None
    return replace(left, optional=left.optional or right.optional)


_CMP = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}


def _expr(node: ast.expr, scope: Scope) -> ir.Expr:
    if isinstance(node, ast.Constant):
        return _constant(node, scope)
    if isinstance(node, ast.Name):
        return _name(node, scope)
    if isinstance(node, ast.Attribute):
        return _attribute(node, scope)
    if isinstance(node, ast.BoolOp):
        operands = tuple(_expr(v, scope) for v in node.values)
        for value, operand in zip(node.values, operands, strict=True):
            _require(operand, BOOL, value, scope, "an operand of and/or")
        return ir.BoolOp("and" if isinstance(node.op, ast.And) else "or", operands)
    if isinstance(node, ast.UnaryOp):
        operand = _expr(node.operand, scope)
        if isinstance(node.op, ast.Not):
            _require(operand, BOOL, node.operand, scope, "the operand of not")
            return ir.Not(operand)
        if isinstance(node.op, ast.USub):
            _require(operand, INT, node.operand, scope, "the operand of -")
            if isinstance(operand, ir.Const):
                return ir.Const(-int(operand.value), INT)  # type: ignore[call-overload]
            return ir.Neg(operand)
        raise scope.fail(node, f"the operator {type(node.op).__name__} is not allowed")
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, (ast.Add, ast.Sub)):
            symbol = OPERATOR_SYMBOLS.get(type(node.op).__name__, type(node.op).__name__)
            raise scope.fail(node, f"only + and - are allowed, not {symbol}{MULTIPLY_HINT if symbol == '*' else ''}")
        left, right = _expr(node.left, scope), _expr(node.right, scope)
        _require(left, INT, node.left, scope, "an operand of + or -")
        _require(right, INT, node.right, scope, "an operand of + or -")
        return ir.Arith("+" if isinstance(node.op, ast.Add) else "-", left, right)
    if isinstance(node, ast.Compare):
        return _compare(node, scope)
    if isinstance(node, ast.IfExp):
        cond = _expr(node.test, scope)
        _require(cond, BOOL, node.test, scope, "the condition")
        then, orelse = _expr(node.body, scope), _expr(node.orelse, scope)
        joined = _join(then.type, orelse.type)
        if joined is None:
            raise scope.fail(node, f"the branches have different types: {then.type} and {orelse.type}")
        return ir.IfExp(cond, then, orelse, joined)
    if isinstance(node, ast.Call):
        return _aggregate(node, scope)
    raise scope.fail(node, f"{_describe(node)} is not allowed in a spec expression")


def _describe(node: ast.AST) -> str:
    names = {
        ast.Subscript: "a subscript",
        ast.Lambda: "a lambda",
        ast.ListComp: "a comprehension",
        ast.SetComp: "a comprehension",
        ast.DictComp: "a comprehension",
        ast.GeneratorExp: "a generator expression",
        ast.JoinedStr: "an f-string",
        ast.NamedExpr: "an assignment expression",
        ast.Await: "await",
        ast.Yield: "yield",
        ast.List: "a list",
        ast.Tuple: "a tuple",
        ast.Dict: "a dict",
        ast.Set: "a set",
        ast.Starred: "a starred expression",
    }
    return names.get(type(node), f"syntax of kind {type(node).__name__}")


def _constant(node: ast.Constant, scope: Scope) -> ir.Const:
    value = node.value
    if value is None:
        return ir.Const(None, NONE)
    if isinstance(value, bool):
        return ir.Const(value, BOOL)
    if isinstance(value, int):
        if abs(value) > MAX_INT:
            raise scope.fail(node, f"the integer {_shown(value)} is out of range (|n| <= {MAX_INT})")
        return ir.Const(value, INT)
    if isinstance(value, str):
        return ir.Const(value, STR)
    raise scope.fail(node, f"a constant of type {type(value).__name__} is not allowed")


def _shown(value: int) -> str:
    """An integer for a message: in full when short; `str` itself refuses more than 4300
    digits (and a hexadecimal literal can have that many)."""
    if value.bit_length() <= 64:
        return str(value)
    return f"of {value.bit_length()} bits"


def _check_identifier(node: ast.AST, name: str, scope: Scope) -> None:
    if name.startswith("__") or name.startswith("_"):
        raise scope.fail(node, f"the name {name!r} is not allowed (names may not start with '_')")


def _kind_hint(kind: str) -> str:
    """Where a field of `kind` that cannot be read here is read and set instead."""
    if kind == "history":
        return " (a history field is set in the event's `history` block, reading old.<field>; properties read it)"
    return ""


def _name(node: ast.Name, scope: Scope) -> ir.Expr:
    name = node.id
    _check_identifier(node, name, scope)
    if name in scope.locals:
        return ir.LocalRef(name, scope.locals[name])
    if name in scope.params:
        return ir.ArgRef(name, scope.params[name])
    if scope.self_shard and name in scope.fields:
        ftype, kind = scope.fields[name]
        if kind not in scope.readable_kinds:
            raise scope.fail(node, f"{kind} field {name!r} cannot be read here{_kind_hint(kind)}")
        return ir.FieldRef(name, "self", None, ftype)
    if scope.self_shard and name in scope.queries:
        return ir.QueryRef(name, "self")
    if name in scope.globals:
        return ir.GlobalRef(name, scope.globals[name])
    if name in scope.policy:
        return ir.PolicyRef(name)
    if name in scope.enum_members:
        enum = scope.enum_members[name]
        return ir.Const(name, Type("enum", enum))
    if name in scope.shard_vars:
        return ir.ShardVar(name)
    if name in scope.sets:
        raise scope.fail(node, f"the set {name!r} can only be used after 'in'")
    if name in ("True", "False", "None"):
        raise scope.fail(node, f"{name} is reserved")
    if name in scope.fields:
        if scope.snapshots:
            shown = " or ".join(f"{snap}.{name}" for snap in sorted(scope.snapshots))
            raise scope.fail(node, f"{name!r} is a field of the called instance: read it as {shown}")
        if not scope.shard_vars:  # no shard to name: `s.restarts` would be refused in turn
            raise scope.fail(
                node,
                f"{name!r} is a per-shard field, and no shard is named here: this block reads fleet values, "
                "policy constants and its own names; keep what it needs in [globals]",
            )
        raise scope.fail(node, f"{name!r} is a per-shard field: name the shard ({_shard_hint(scope)}.{name})")
    if scope.args is not None and name in scope.args:
        raise scope.fail(node, f"unknown name {name!r}: the call's argument is read as args.{name}")
    if name in ("result", "raised"):
        raise scope.fail(
            node,
            f"unknown name {name!r}: {name} is the call's outcome, read in a step property"
            + (
                " whose every event in `on` declares `returns`, of one type"
                if name == "result" and scope.snapshots
                else ""
            ),
        )
    python = {"true": "True", "false": "False", "none": "None", "null": "None", "nil": "None"}.get(name)
    if python is not None:  # TOML's spelling inside an expression, which is Python
        raise scope.fail(node, f"unknown name {name!r}: expressions are Python, write {python}")
    raise scope.fail(node, f"unknown name {name!r}{did_you_mean(name, scope.all_names())}")


def _shard_hint(scope: Scope) -> str:
    return sorted(scope.shard_vars)[0] if scope.shard_vars else "s"


def _attribute(node: ast.Attribute, scope: Scope) -> ir.Expr:
    attr = node.attr
    if not isinstance(node.value, ast.Name):
        raise scope.fail(node, "attribute chains are not allowed")
    base = node.value.id
    _check_identifier(node, attr, scope)
    _check_identifier(node.value, base, scope)
    if base == "args" and scope.args is not None:
        if attr not in scope.args:
            raise scope.fail(node, f"{scope.args_owner} {attr!r}{did_you_mean(attr, scope.args)}")
        return ir.ArgRef(attr, scope.args[attr])
    if base in scope.snapshots:
        return _shard_field(node, "self", base, scope)
    if base in scope.shard_vars:
        return _shard_field(node, base, None, scope)
    if base == "args":
        raise scope.fail(
            node,
            "the call's arguments (args.x) are read only in an event's own blocks and guards and in a "
            f"step property (of the call); to state something about {attr!r} here, keep it in a history "
            f"field (`last_{attr} = args.{attr}` in the event's history block) and read that",
        )
    if base in ("before", "after") and base not in scope.snapshots:
        raise scope.fail(
            node, f"{base}.{attr}: before and after are read in a step property (around a call); here read {attr}"
        )
    if base == "old" and base not in scope.snapshots:
        raise scope.fail(
            node,
            f"old.{attr}: old (the record before the call) is read where the call has run: a history block, "
            f"an event's returns and a raises entry's `after`; here read {attr} (the record as the call begins)",
        )
    allowed = ["args"] if scope.args is not None else []
    allowed += sorted(scope.snapshots) + sorted(scope.shard_vars)
    hint = f" (here: {', '.join(allowed)})" if allowed else ""
    raise scope.fail(node, f"attributes are only allowed on arguments, snapshots and shard variables{hint}")


def _shard_field(node: ast.Attribute, shard: str, snap: str | None, scope: Scope) -> ir.Expr:
    attr = node.attr
    if attr in scope.fields:
        ftype, kind = scope.fields[attr]
        if kind not in scope.readable_kinds:
            raise scope.fail(node, f"{kind} field {attr!r} cannot be read here{_kind_hint(kind)}")
        return ir.FieldRef(attr, shard, snap, ftype)
    if attr in scope.queries and snap is None:
        return ir.QueryRef(attr, shard)
    known = list(scope.fields) + list(scope.queries)
    if attr in scope.globals:  # `before.escalated`: a fleet value is no field of the record
        when = " (in a step property, as the call begins)" if snap is not None else ""
        raise scope.fail(
            node,
            f"{attr!r} is a fleet value ([globals]), not a field of {shard if snap is None else snap}: "
            f"read it bare, {attr}{when}",
        )
    raise scope.fail(node, f"unknown field {attr!r}{did_you_mean(attr, known)}")


def _compare(node: ast.Compare, scope: Scope) -> ir.Expr:
    parts: list[ir.Expr] = []
    left_node = node.left
    left = _expr(left_node, scope)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        if isinstance(op, (ast.In, ast.NotIn)):
            if len(node.ops) > 1:
                raise scope.fail(node, "'in' cannot be chained with other comparisons")
            part = _in_set(left, right_node, scope, node)
            parts.append(ir.Not(part) if isinstance(op, ast.NotIn) else part)
            continue
        if isinstance(op, (ast.Is, ast.IsNot)):
            if not (isinstance(right_node, ast.Constant) and right_node.value is None):
                raise scope.fail(right_node, "'is' and 'is not' may only compare with None")
            if not left.type.optional:
                raise scope.fail(node, f"{left.type} can never be None")
            test: ir.Expr = ir.IsNone(left)
            parts.append(ir.Not(test) if isinstance(op, ast.IsNot) else test)
            continue
        symbol = _CMP.get(type(op))
        if symbol is None:
            raise scope.fail(node, f"the comparison {type(op).__name__} is not allowed")
        right = _expr(right_node, scope)
        if symbol in ("==", "!="):
            if not _comparable(left.type, right.type):
                raise scope.fail(node, f"cannot compare {left.type} with {right.type}")
        else:
            _require(left, INT, left_node, scope, f"an operand of {symbol}")
            _require(right, INT, right_node, scope, f"an operand of {symbol}")
        parts.append(ir.Compare(symbol, left, right))
        left, left_node = right, right_node
    return parts[0] if len(parts) == 1 else ir.BoolOp("and", tuple(parts))


def _in_set(left: ir.Expr, right: ast.expr, scope: Scope, node: ast.AST) -> ir.Expr:
    if not isinstance(right, ast.Name) or right.id not in scope.sets:
        known = list(scope.sets)
        name = right.id if isinstance(right, ast.Name) else ""
        raise scope.fail(right, f"'in' must be followed by a named state set{did_you_mean(name, known)}")
    enum, members = scope.sets[right.id]
    if left.type.kind != "enum" or left.type.enum != enum:
        raise scope.fail(node, f"{right.id} is a set of {enum}, not of {left.type}")
    return ir.InSet(left, members, right.id)


def _aggregate(node: ast.Call, scope: Scope) -> ir.Expr:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else None
    if name == "emitted":
        return _emitted(node, scope)
    if name is None or name not in AGGREGATES:
        shown = name or _describe(func)
        raise scope.fail(
            node, f"calls are not allowed in expressions ({shown}); only {', '.join(AGGREGATES)} over shards"
        )
    if not scope.aggregates:
        raise scope.fail(
            node,
            f"{name}() over shards is only allowed in environment actions and fleet properties "
            '(a property that counts over the shards says scope = "fleet")',
        )
    if len(node.args) != 1 or node.keywords:
        raise scope.fail(node, f"{name}() takes exactly one per-shard condition")
    inner = replace(scope, self_shard=True, locals={}, aggregates=False)
    body = _expr(node.args[0], inner)
    _require(body, BOOL, node.args[0], scope, f"the condition of {name}()")
    return ir.Aggregate(name, body, INT if name == "count" else BOOL)


def _emitted(node: ast.Call, scope: Scope) -> ir.Expr:
    """`emitted(name)`: whether the call a step property is about announced `name`."""
    if scope.emitted is None:
        raise scope.fail(node, "emitted() is only allowed in step properties (it is about one call)")
    if len(node.args) != 1 or node.keywords or not isinstance(node.args[0], ast.Name):
        raise scope.fail(node, "emitted() takes one notification name, e.g. emitted(opened)")
    name = node.args[0].id
    if name not in scope.emitted:
        known = sorted(scope.emitted)
        declared = did_you_mean(name, known) if known else "; the spec declares no [notifications]"
        raise scope.fail(node.args[0], f"unknown notification {name!r}{declared}")
    return ir.Emitted(name)


# --- statements --------------------------------------------------------------------------


def compile_block(text: str, scope: Scope) -> tuple[ir.Stmt, ...]:
    """Compile a statement block (an event body, a history block, an action body)."""
    body, lines, indent = _dedent(text)
    scope = _located(scope, body, lines, col=indent)
    tree = parse_python(body, "exec", scope)
    assert isinstance(tree, ast.Module)
    given = set(scope.locals)
    block = _block(tree.body, scope, set(given))
    _refuse_unread_locals(tree, block, scope, given)
    return block


def _refuse_unread_locals(tree: ast.Module, block: tuple[ir.Stmt, ...], scope: Scope, given: set[str]) -> None:
    """A local the block assigns and never reads does nothing: a block's locals end with it.
    It is almost always a field's name misspelt (`attempt = 0` for `attempts`), which would
    otherwise leave the field unchanged without a word, and a property that sees the field
    quietly checks a different machine."""
    assigned: set[str] = set()
    read: set[str] = set()
    for node in ir.walk(block):
        if isinstance(node, ir.Assign) and node.kind == "local":
            assigned.add(node.name)
        elif isinstance(node, ir.LocalRef):
            read.add(node.name)
    unread = assigned - read - given
    if not unread:
        return
    targets = [
        target
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AugAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id in unread
    ]
    first = min(targets, key=lambda t: (t.lineno, t.col_offset))  # the first assignment of any of them
    known = [*scope.fields, *scope.globals]
    hint = did_you_mean(first.id, known) or " (a block's locals end with it)"
    raise scope.fail(first, f"{first.id!r} is assigned but never read: it is a local, not a field{hint}")


def _dedent(text: str) -> tuple[str, int, int]:
    """The block without its common indentation and surrounding blank lines, how many
    leading lines were dropped, and the indentation removed from every line."""
    dedented = textwrap.dedent(text)
    stripped = dedented.lstrip("\n")
    lines = len(dedented) - len(stripped)
    indent = 0
    for original, kept in zip(text.split("\n"), dedented.split("\n"), strict=False):
        if kept.strip():
            indent = len(original) - len(kept)
            break
    return stripped.rstrip("\n"), lines, indent


def _block(nodes: list[ast.stmt], scope: Scope, assigned: set[str]) -> tuple[ir.Stmt, ...]:
    result = []
    for node in nodes:
        result.append(_stmt(node, scope, assigned))
    return tuple(result)


def _text(node: ast.AST) -> str:
    return ast.unparse(node).splitlines()[0] if not isinstance(node, ast.If) else f"if {ast.unparse(node.test)}:"


def _stmt(node: ast.stmt, scope: Scope, assigned: set[str]) -> ir.Stmt:
    line = node.lineno
    if isinstance(node, ast.Pass):
        return ir.Pass(line)
    if isinstance(node, ast.Assign):
        if len(node.targets) != 1:
            raise scope.fail(node, "chained assignment is not allowed")
        return _assign(node, node.targets[0], _expr(node.value, scope), scope, assigned)
    if isinstance(node, ast.AugAssign):
        if not isinstance(node.op, (ast.Add, ast.Sub)) or not isinstance(node.target, ast.Name):
            raise scope.fail(node, "only 'name += e' and 'name -= e' are allowed")
        load = ast.Name(id=node.target.id, ctx=ast.Load(), lineno=node.lineno, col_offset=node.col_offset)
        value = _expr(
            ast.BinOp(left=load, op=node.op, right=node.value, lineno=node.lineno, col_offset=node.col_offset), scope
        )
        return _assign(node, node.target, value, scope, assigned)
    if isinstance(node, ast.If):
        cond = _expr(node.test, scope)
        _require(cond, BOOL, node.test, scope, "an if condition")
        then_assigned, else_assigned = set(assigned), set(assigned)
        then = _block(node.body, scope, then_assigned)
        orelse = _block(node.orelse, scope, else_assigned)
        for name in (then_assigned ^ else_assigned) - assigned:
            scope.locals.pop(name, None)
        assigned |= then_assigned & else_assigned
        return ir.If(cond, then, orelse, line, _text(node))
    if isinstance(node, ast.For):
        return _for(node, scope, assigned)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "emit":
            return _emit(node.value, func.attr, scope)
        return _call(node.value, scope)
    kinds = {
        ast.Import: "an import",
        ast.ImportFrom: "an import",
        ast.FunctionDef: "a function definition",
        ast.ClassDef: "a class definition",
        ast.While: "a while loop",
        ast.Return: "return",
        ast.With: "with",
        ast.Try: "try",
        ast.Raise: "raise",
        ast.Delete: "del",
        ast.Global: "global",
        ast.Nonlocal: "nonlocal",
    }
    if isinstance(node, ast.Expr):
        alone = node.value
        if isinstance(alone, ast.Compare) and len(alone.ops) == 1 and isinstance(alone.ops[0], ast.Eq):
            assignment = f"{ast.unparse(alone.left)} = {ast.unparse(alone.comparators[0])}"
            raise scope.fail(
                node, f"`{ast.unparse(alone)}` compares and keeps nothing: an assignment is written `{assignment}`"
            )
        raise scope.fail(
            node, f"`{ast.unparse(alone)}` on its own does nothing in a spec block (an assignment is `x = ...`)"
        )
    what = kinds.get(type(node), f"a statement of kind {type(node).__name__}")
    raise scope.fail(node, f"{what} is not allowed in a spec block")


def _assign(node: ast.stmt, target: ast.expr, value: ir.Expr, scope: Scope, assigned: set[str]) -> ir.Stmt:
    text = ast.unparse(node)
    if not isinstance(target, ast.Name):
        raise scope.fail(node, "only a plain name can be assigned")
    name = target.id
    _check_identifier(target, name, scope)
    if scope.self_shard and name in scope.fields:
        ftype, kind = scope.fields[name]
        if name not in scope.writable_fields:
            raise scope.fail(target, f"{kind} field {name!r} cannot be assigned here")
        _require(value, ftype, node, scope, f"the value assigned to {name}")
        return ir.Assign("field", name, "self", value, node.lineno, text)
    if name in scope.globals:
        if name not in scope.writable_globals:
            raise scope.fail(target, f"{name!r} cannot be assigned here{_where_globals_are_assigned(name, scope)}")
        _require(value, scope.globals[name], node, scope, f"the value assigned to {name}")
        return ir.Assign("global", name, "", value, node.lineno, text)
    clash = (
        set(scope.policy)
        | set(scope.enum_members)
        | set(scope.sets)
        | set(scope.params)
        | set(scope.queries)
        | set(scope.shard_vars)
        | {"args"}
        | set(SNAPSHOTS)
    )
    if name in clash or name in scope.fields:
        raise scope.fail(target, f"{name!r} cannot be assigned here")
    previous = scope.locals.get(name)
    if previous is not None:
        joined = _join(previous, value.type)
        if joined is None:
            raise scope.fail(node, f"local {name!r} was {previous}, cannot assign {value.type}")
        scope.locals[name] = joined
    else:
        scope.locals[name] = value.type
    assigned.add(name)
    return ir.Assign("local", name, "", value, node.lineno, text)


def _where_globals_are_assigned(name: str, scope: Scope) -> str:
    """Why a fleet-wide value cannot be assigned where it was: an event changes the record of
    the shard it is called on, and fleet-wide values have their own writers."""
    if scope.writable_globals:  # an action body: it writes its environment's own variables
        return f": an action assigns only its environment's [vars] ({', '.join(sorted(scope.writable_globals))})"
    return ": a fleet-wide value of [globals] is assigned only in [on_state_change]"


def _for(node: ast.For, scope: Scope, assigned: set[str]) -> ir.Stmt:
    if scope.events is None:
        raise scope.fail(node, "loops over shards are only allowed in environment actions")
    if not isinstance(node.target, ast.Name) or not (isinstance(node.iter, ast.Name) and node.iter.id == "shards"):
        raise scope.fail(node, "the only loop is 'for s in shards:'")
    if node.orelse:
        raise scope.fail(node, "for ... else is not allowed")
    var = node.target.id
    _check_identifier(node.target, var, scope)
    if var in scope.shard_vars or var in scope.all_names():
        raise scope.fail(node.target, f"the loop variable {var!r} hides another name")
    inner = replace(scope, shard_vars=scope.shard_vars | {var})
    body = _block(node.body, inner, set(assigned))
    return ir.ForShards(var, body, node.lineno, f"for {var} in shards:")


def _call(node: ast.Call, scope: Scope) -> ir.Stmt:
    text = ast.unparse(node)
    if scope.events is None:
        raise scope.fail(node, "calls are not allowed here (ledger calls belong in environment actions)")
    if not isinstance(node.func, ast.Name):
        raise scope.fail(node, "only a ledger event can be called")
    name = node.func.id
    signature = scope.events.get(name)
    if signature is None:
        raise scope.fail(node, f"unknown event {name!r}{did_you_mean(name, scope.events)}")
    if not node.args or not isinstance(node.args[0], ast.Name) or node.args[0].id not in scope.shard_vars:
        raise scope.fail(node, f"the first argument of {name}() must be a shard variable")
    shard = node.args[0].id
    ordered = _bind(node, name, signature.params, node.args[1:], " after the shard", scope)
    return ir.CallEvent(name, shard, ordered, node.lineno, text)


def _emit(node: ast.Call, name: str, scope: Scope) -> ir.Stmt:
    """`emit.name(args)`: announce a declared notification, its arguments checked against
    the declaration as an event call's are."""
    if scope.notifications is None:
        raise scope.fail(
            node, "emit is only allowed in event bodies, history blocks and on_state_change (a call announces)"
        )
    params = scope.notifications.get(name)
    if params is None:
        known = sorted(scope.notifications)
        hint = did_you_mean(name, known) if known else "; the spec declares no [notifications]"
        raise scope.fail(node, f"unknown notification {name!r}{hint}")
    ordered = _bind(node, f"emit.{name}", params, node.args, "", scope)
    return ir.Emit(name, ordered, node.lineno, ast.unparse(node))


def _bind(
    node: ast.Call, name: str, params: tuple[Param, ...], given: list[ast.expr], after: str, scope: Scope
) -> tuple[tuple[str, ir.Expr], ...]:
    """A call's arguments (positional `given`, then keywords) bound to `params`, each
    type-checked; every parameter without a default must be given."""
    bound: dict[str, ir.Expr] = {}
    positional = [p for p in params if not p.keyword_only]
    if len(given) > len(positional):
        raise scope.fail(node, f"{name}() takes {len(positional)} positional argument(s){after}")
    for param, arg in zip(positional, given, strict=False):
        bound[param.name] = _call_arg(param, arg, scope)
    for keyword in node.keywords:
        if keyword.arg is None:
            raise scope.fail(node, "**kwargs is not allowed")
        named = next((p for p in params if p.name == keyword.arg), None)
        if named is None:
            known = [p.name for p in params]
            raise scope.fail(keyword, f"{name}() has no argument {keyword.arg!r}{did_you_mean(keyword.arg, known)}")
        if named.name in bound:
            raise scope.fail(keyword, f"{name}() got {named.name!r} twice")
        bound[named.name] = _call_arg(named, keyword.value, scope)
    for param in params:
        if param.name not in bound and not param.has_default:
            raise scope.fail(node, f"{name}() is missing the argument {param.name!r}")
    return tuple((p.name, bound[p.name]) for p in params if p.name in bound)


def _call_arg(param: Param, node: ast.expr, scope: Scope) -> ir.Expr:
    value = _expr(node, scope)
    if param.type.kind == "any":
        if not isinstance(value, ir.Const):
            raise scope.fail(node, f"argument {param.name!r} is opaque to the spec: pass a constant")
        return value
    _require(value, param.type, node, scope, f"argument {param.name!r}")
    return value


# --- signatures --------------------------------------------------------------------------


def parse_signature(text: str, scope: Scope, types: Callable[[str, ast.AST], Type]) -> Signature:
    """Parse `name(i, x: int, *, y: bool = False)`: the API call an event stands for, or an
    action's parameter list. Annotations name spec types; defaults must be constants."""
    body, lines, first_col = _strip(text)
    parsed = f"def {body}:\n    pass"
    scope = _located(scope, parsed, lines, first_col - len("def "))
    tree = parse_python(parsed, "exec", scope)
    assert isinstance(tree, ast.Module)
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, ast.FunctionDef) or len(tree.body) != 1 or len(fn.body) != 1:
        raise scope.fail(fn, "expected one call signature like name(i, *, arg: type)")
    if fn.returns is not None or getattr(fn, "type_params", None):
        raise scope.fail(fn, "a call signature is name(parameters), with nothing after it")
    spec_args = fn.args
    if spec_args.vararg or spec_args.kwarg or spec_args.posonlyargs:
        raise scope.fail(fn, "*args, **kwargs and positional-only markers are not supported")
    positional = list(spec_args.args)
    if not positional:
        raise scope.fail(fn, "the first parameter must be the shard index")
    shard = positional.pop(0)
    _check_identifier(shard, shard.arg, scope)
    params: list[Param] = []
    defaults = [None] * (len(spec_args.args) - len(spec_args.defaults)) + list(spec_args.defaults)
    defaults = defaults[1:]
    for arg, default in zip(positional, defaults, strict=True):
        params.append(_param(arg, default, False, scope, types))
    for arg, kw_default in zip(spec_args.kwonlyargs, spec_args.kw_defaults, strict=True):
        params.append(_param(arg, kw_default, True, scope, types))
    names = [shard.arg] + [p.name for p in params]
    if len(set(names)) != len(names):
        raise scope.fail(fn, "duplicate parameter name")
    return Signature(fn.name, shard.arg, tuple(params))


def _param(
    arg: ast.arg, default: ast.expr | None, kw_only: bool, scope: Scope, types: Callable[[str, ast.AST], Type]
) -> Param:
    _check_identifier(arg, arg.arg, scope)
    if arg.annotation is None:
        raise scope.fail(arg, f"parameter {arg.arg!r} needs a type (e.g. {arg.arg}: int)")
    ptype = annotation_type(arg.annotation, scope, types)
    if default is None:
        return Param(arg.arg, ptype, kw_only)
    return Param(arg.arg, ptype, kw_only, _default(arg.arg, default, ptype, scope), True)


def _default(name: str, node: ast.expr, ptype: Type, scope: Scope) -> object:
    """A parameter's default: a constant of the parameter's type (a member name for an enum)."""
    if ptype.kind == "shard":
        raise scope.fail(node, f"the shard parameter {name!r} cannot have a default")
    if ptype.kind == "enum" and isinstance(node, ast.Name):  # `mode: Mode = GRACEFUL`, as an expression names it
        node = ast.copy_location(ast.Constant(node.id), node)
    negative = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
    constant = node.operand if isinstance(node, ast.UnaryOp) and negative else node
    if not isinstance(constant, ast.Constant) or (negative and type(constant.value) is not int):
        raise scope.fail(node, f"the default of {name!r} must be a constant")
    value = constant.value
    if negative and isinstance(value, int):
        value = -value
    if value is None:
        if not ptype.optional and ptype.kind != "any":
            raise scope.fail(node, f"{name!r} is not optional, its default cannot be None")
        return None
    if type(value) is int and abs(value) > MAX_INT:
        raise scope.fail(node, f"the default of {name!r} is out of range (|n| <= {MAX_INT})")
    kinds: dict[str, tuple[type, ...]] = {"bool": (bool,), "int": (int,), "str": (str,), "enum": (str,)}
    allowed = kinds.get(ptype.kind, (bool, int, str))  # "any": an opaque constant
    if type(value) not in allowed:
        raise scope.fail(node, f"the default of {name!r} must be a {ptype}, not {type(value).__name__}")
    if ptype.kind == "enum" and value not in scope.enums.get(ptype.enum or "", ()):
        members = scope.enums.get(ptype.enum or "", ())
        raise scope.fail(
            node,
            f"the default of {name!r}: {value!r} is not a member of {ptype.enum}{did_you_mean(str(value), members)}",
        )
    return value


def annotation_type(node: ast.expr, scope: Scope, types: Callable[[str, ast.AST], Type]) -> Type:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left = annotation_type(node.left, scope, types)
        right_none = isinstance(node.right, ast.Constant) and node.right.value is None
        if not right_none:
            raise scope.fail(node, "only 'T | None' unions are supported")
        return replace(left, optional=True)
    if isinstance(node, ast.Name):
        return types(node.id, node)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return types(node.value, node)
    raise scope.fail(node, "a parameter type must be a type name, optionally '| None'")


__all__ = [
    "Param",
    "Scope",
    "Signature",
    "SHARD",
    "annotation_type",
    "assignable",
    "compile_block",
    "compile_expr",
    "parse_signature",
]
