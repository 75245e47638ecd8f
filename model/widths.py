"""How many bits the numbers of a bounded search need: the spec run over intervals.

A bounded search (`model.bmc`) unrolls at most D steps from the initial state, so the values
its terms can take are bounded too, and the encoding may write every number as a bit-vector
(`model.numbers`), which Z3 bit-blasts to SAT: on the bundled ledger's coupled fleet the
search is several times faster than in linear arithmetic (bench/RESULTS.md). The width must
hold every value any term of the unrolling can take, or a sum would wrap and the search
would answer for another system.

This module proves a width by abstract interpretation with the one executor both semantics
share (`model.semantics.Machine`), over a third backend: intervals. From the initial state,
every action instance runs over the hull of the states reached so far, D times; the hull
then holds every state of every trace of at most D steps. Every number a term computes on
the way (the guards, the updates, the callers' contracts, each property's conditions and
lemmas, both operands of every comparison) is recorded, and the width holds the largest
with a sign bit. The interval backend decides a condition only where the Z3 backend does
(a literal true or false), so it runs every branch the encoding has a term for.

Text (`str`, `any`) is opaque: compared only for equality, only copied, never computed. Its
values are not intervals but tokens (`TOKEN`): the spec's text constants, the value each
shard was built with, None, and whatever a text parameter of an action brings. A trace of D
steps holds at most one value per text parameter per step besides the constants, and
renaming them (keeping which are equal) gives another trace of the same system, so the width
need only have room for that many.

An `int` parameter has no upper bound, but where the spec only copies it and compares it for
equality (a version number stored as it is given), its values are as opaque as text's
(`OPAQUE`), with one difference: the numbers they may meet (what they are compared with, what
else the variables holding them hold: `fixed`) keep their values, and the parameters' values
are renamed around them. Where the spec computes with one or orders it, the numbers are not
bounded and the search keeps Z3's integers (`width` None). So does a width above `MAX_WIDTH`,
where bit-blasting stops paying.
"""

from __future__ import annotations

import hashlib
import itertools
import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledgercheck.model import ir
from ledgercheck.model.numbers import INTEGERS, Numbers, signed_bits
from ledgercheck.model.operators import Operators
from ledgercheck.model.semantics import Key, Machine
from ledgercheck.model.spec import Environment, Property, PropertyKind, Spec

MAX_WIDTH = 24
"""The widest bit-vector a search is given; beyond it, Z3's integers (a wide bit-blasted sum
costs more than linear arithmetic saves)."""

MIN_WIDTH = 4


@dataclass(frozen=True)
class Interval:
    """The integers lo..hi (either end may be infinite)."""

    lo: float
    hi: float

    def join(self, other: Interval) -> Interval:
        return Interval(min(self.lo, other.lo), max(self.hi, other.hi))

    @property
    def magnitude(self) -> float:
        return max(abs(self.lo), abs(self.hi))


class _Abstract:
    """A value the intervals do not describe, told apart by identity (its name for notes)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


TOKEN = _Abstract("TOKEN")
"""An opaque text value (or None, where the field is optional text)."""
OPAQUE = _Abstract("OPAQUE")
"""A number from an int parameter, only ever copied or compared for equality."""
MAYBE = _Abstract("MAYBE")
"""A condition that may be true or false."""
NONE_VALUE = Interval(-1, -1)


class Unbounded(Exception):
    """The numbers of this search have no bound a bit-vector can hold (why, for notes)."""


def _is_bool(value: object) -> bool:
    return value is True or value is False or value is MAYBE


class IntervalBackend(Operators):
    """Values for `Machine`: `Interval` for numbers, `TOKEN` for text, True, False or
    `MAYBE` for conditions. Every number it sees goes into `peak`."""

    def __init__(self, spec: Spec) -> None:
        self.index = {e.name: {m: i for i, m in enumerate(e.members)} for e in spec.enums.values()}
        self.peak = 0.0
        self.texts: set[str] = set()
        self.fixed: Interval | None = None
        """The numbers `OPAQUE` values meet: a renaming of the parameters' values keeps these."""

    def note(self, value: Any) -> Any:
        if isinstance(value, Interval):
            self.peak = max(self.peak, value.magnitude)
        return value

    def fix(self, value: Interval) -> None:
        self.note(value)
        self.fixed = value if self.fixed is None else self.fixed.join(value)

    def join(self, left: Any, right: Any) -> Any:
        """The values either of two may be."""
        if left is right or left == right:
            return left
        if _is_bool(left) and _is_bool(right):
            return MAYBE
        if isinstance(left, Interval) and isinstance(right, Interval):
            return self.note(left.join(right))
        if left is TOKEN and (right is TOKEN or right == NONE_VALUE):
            return TOKEN
        if right is TOKEN and left == NONE_VALUE:
            return TOKEN
        if OPAQUE in (left, right):
            other = right if left is OPAQUE else left
            if isinstance(other, Interval):
                self.fix(other)
                return OPAQUE
        raise Unbounded(f"a value is both {left!r} and {right!r}")

    # -- the Backend protocol --

    def const(self, value: object, vtype: ir.Type) -> Any:
        if value is None:
            return NONE_VALUE
        if vtype.kind == "bool" or isinstance(value, bool):
            return bool(value)
        if vtype.kind == "int":
            number = int(value)  # type: ignore[call-overload]
            return self.note(Interval(number, number))
        if vtype.kind == "enum":
            code = self.index[vtype.enum or ""][str(value)]
            return self.note(Interval(code, code))
        if vtype.kind in ("str", "any"):
            self.texts.add(str(value))
            return TOKEN
        raise TypeError(f"no interval for {vtype}")

    def compare(self, op: str, left: Any, right: Any) -> Any:
        if left is TOKEN or right is TOKEN:
            other = right if left is TOKEN else left
            if op not in ("==", "!=") or not (other is TOKEN or other == NONE_VALUE):
                raise Unbounded(f"text is compared ({op}) with {other!r}")
            return MAYBE
        if left is OPAQUE or right is OPAQUE:
            other = right if left is OPAQUE else left
            if op not in ("==", "!=") or not (other is OPAQUE or isinstance(other, Interval)):
                raise Unbounded(f"an int parameter is compared ({op}) with {other!r}")
            if isinstance(other, Interval):
                self.fix(other)
            return MAYBE
        self.note(left)
        self.note(right)
        return MAYBE

    def arith(self, op: str, left: Any, right: Any) -> Any:
        if OPAQUE in (left, right):
            raise Unbounded(f"an int parameter is computed with ({op})")
        if not (isinstance(left, Interval) and isinstance(right, Interval)):
            raise Unbounded(f"arithmetic ({op}) on {left!r} and {right!r}")
        self.note(left)
        self.note(right)
        if op == "+":
            return self.note(Interval(left.lo + right.lo, left.hi + right.hi))
        return self.note(Interval(left.lo - right.hi, left.hi - right.lo))

    def neg(self, operand: Any) -> Any:
        if operand is OPAQUE:
            raise Unbounded("an int parameter is computed with (-)")
        if not isinstance(operand, Interval):
            raise Unbounded(f"negation of {operand!r}")
        return self.note(Interval(-operand.hi, -operand.lo))

    def and_(self, operands: Sequence[Any]) -> Any:
        kept = [o for o in operands if o is not True]
        if any(o is False for o in kept):
            return False
        if not kept:
            return True
        return kept[0] if len(kept) == 1 else MAYBE

    def or_(self, operands: Sequence[Any]) -> Any:
        kept = [o for o in operands if o is not False]
        if any(o is True for o in kept):
            return True
        if not kept:
            return False
        return kept[0] if len(kept) == 1 else MAYBE

    def not_(self, operand: Any) -> Any:
        if operand is True or operand is False:
            return not operand
        return MAYBE

    def ite(self, cond: Any, then: Any, orelse: Any) -> Any:
        if cond is True:
            return then
        if cond is False:
            return orelse
        return self.join(then, orelse)

    def in_set(self, operand: Any, members: tuple[str, ...], enum: str) -> Any:
        self.note(operand)
        return MAYBE if members else False

    def is_none(self, operand: Any, vtype: ir.Type) -> Any:
        if operand is OPAQUE:
            self.fix(NONE_VALUE)
        self.note(operand)
        return MAYBE

    def count(self, operands: Sequence[Any]) -> Any:
        sure = sum(1 for o in operands if o is True)
        possible = sum(1 for o in operands if o is not False)
        return self.note(Interval(sure, possible))

    def decide(self, cond: Any) -> bool | None:
        return cond if cond is True or cond is False else None


@dataclass(frozen=True)
class Width:
    """The verdict of the analysis: the numbers to encode with, and why (for notes and tests)."""

    numbers: Numbers
    peak: int = 0
    """The largest magnitude of a number any term takes (0 where unbounded)."""
    tokens: int = 0
    """The text values a trace may need told apart (constants, fresh values, None, initial)."""
    why: str = ""
    """Why the numbers are unbounded integers (empty where they are bit-vectors)."""


def _initial(backend: IntervalBackend, var: Any, policy: Mapping[str, Any]) -> Any:
    if var.initial_from is not None:
        return TOKEN if var.type.kind in ("str", "any") else backend.note(Interval(0, 0))
    if var.initial_policy is not None:
        return policy[var.initial_policy]
    return backend.const(var.initial, var.type)


def _param(backend: IntervalBackend, spec: Spec, ptype: ir.Type) -> Any:
    """Every value `encoding.domain` lets a free parameter take."""
    low = -1 if ptype.optional else 0
    if ptype.kind == "bool":
        return Interval(-1, 1) if ptype.optional else MAYBE
    if ptype.kind == "enum":
        return backend.note(Interval(low, len(spec.enums[ptype.enum or ""].members)))
    if ptype.kind in ("str", "any"):
        return TOKEN
    return OPAQUE


def _instances(env: Environment, shards: int) -> list[tuple[Any, dict[str, int]]]:
    """Each action with its shard parameters bound, one per pattern of equal and distinct
    shards, the lowest shards first ((0), (0, 0), (0, 1), ...): the spec language names no
    shard, so over a store in which every shard holds the same intervals, any other binding
    computes what one of these does, with the shards renamed."""
    found = []
    for action in env.actions:
        for combo in itertools.product(range(shards), repeat=len(action.shard_params)):
            if all(shard <= max(combo[:i], default=-1) + 1 for i, shard in enumerate(combo)):
                found.append((action, dict(zip(action.shard_params, combo, strict=True))))
    return found


def analyse(spec: Spec, environment: Environment, shards: int, policy: Mapping[str, int] | None, depth: int) -> Width:
    """The numbers a bounded search of at most `depth` steps of this system can be encoded
    with: bit-vectors of the width the intervals prove, else unbounded integers."""
    backend = IntervalBackend(spec)
    try:
        return _analyse(backend, spec, environment, shards, policy, depth)
    except Unbounded as exc:
        return Width(INTEGERS, why=str(exc))


def _analyse(
    backend: IntervalBackend,
    spec: Spec,
    env: Environment,
    shards: int,
    policy: Mapping[str, int] | None,
    depth: int,
) -> Width:
    if policy is None:
        terms = {name: backend.note(Interval(d.min, d.max)) for name, d in spec.policy.items()}
    else:
        terms = {name: backend.note(Interval(value, value)) for name, value in policy.items()}
    machine: Machine[Any] = Machine(spec, backend, terms, shards)
    decls: dict[Key, Any] = {(i, v.name): v for i in range(shards) for v in spec.shard_vars}
    decls.update({(None, v.name): v for v in (*spec.globals, *env.vars)})
    store: dict[Key, Any] = {key: backend.note(_initial(backend, var, terms)) for key, var in decls.items()}
    instances = _instances(env, shards)
    shard_names = [v.name for v in spec.shard_vars]
    values: list[dict[str, Any]] = []
    for action, _ in instances:
        values.append({p.name: _param(backend, spec, p.type) for p in action.value_params})
    kinds = [p.type.kind for action in env.actions for p in action.value_params]
    text_params = sum(1 for kind in kinds if kind in ("str", "any"))
    int_params = sum(1 for kind in kinds if kind == "int")

    def step(current: dict[Key, Any]) -> tuple[dict[Key, Any], list[Any]]:
        """The hull of `current` and of every state one action takes it to, the same
        intervals in every shard (so that `_instances` stands for every binding)."""
        reached = dict(current)
        records: list[Any] = []
        for (action, shard_args), params in zip(instances, values, strict=True):
            after = dict(current)
            machine.enabled(action, shard_args, params, after)
            effects = machine.run_action(action, shard_args, params, after)
            records.extend(effects.calls)
            for key, value in after.items():
                if value is not current[key]:
                    reached[key] = backend.join(reached[key], value)
        for name in shard_names:
            value = reached[(0, name)]
            for shard in range(1, shards):
                value = backend.join(value, reached[(shard, name)])
            for shard in range(shards):
                reached[(shard, name)] = value
        return reached, records

    records: list[Any] = []
    for _ in range(depth):
        reached, records = step(store)
        if reached == store:
            break
        store = reached
    _, records = step(store)  # the calls made from the last states, for the step properties
    for prop in spec.properties.values():
        if prop.applies_to(env.name):
            _property(machine, prop, shards, store, records)
    width = max(MIN_WIDTH, signed_bits(int(backend.peak)))
    tokens = 2 + len(backend.texts) + (depth + 1) * text_params
    width = max(width, signed_bits(tokens + 1))
    if int_params:  # the parameters' values renamed to numbers above every fixed one
        above = max(0, int(backend.fixed.hi) + 1 if backend.fixed is not None else 0)
        width = max(width, signed_bits(above + (depth + 1) * int_params))
    if width > MAX_WIDTH:
        return Width(INTEGERS, int(backend.peak), tokens, f"{width} bits needed, more than {MAX_WIDTH}")
    return Width(Numbers(width), int(backend.peak), tokens)


def _property(machine: Machine[Any], prop: Property, shards: int, store: Mapping[Key, Any], records: list[Any]) -> None:
    """Every condition the property's terms are built from, over the hull of the states."""
    targets: list[int | None] = [None] if prop.fleet else list(range(shards))
    if prop.kind == PropertyKind.STEP:
        for record in records:
            if record.event in prop.on:
                machine.step_violations(prop.when, prop.check, record, store)
    else:
        for shard in targets:
            machine.invariant(prop.when, prop.check, shard, store)
            if prop.kind == PropertyKind.EVENTUALLY:
                machine.invariant(None, prop.leads_from, shard, store)
    for lemma in prop.lemmas:
        for shard in targets:
            machine.invariant(None, lemma, shard, store)


_WIDTHS: dict[tuple[Any, ...], tuple[Spec, Width]] = {}
STORED_FORMAT = 1  # bump when the stored entry's layout changes
STORED_KEEP = 256  # entries kept on disk; the least recently written go first


def width_for(spec: Spec, environment: Environment, shards: int, policy: Mapping[str, int] | None, depth: int) -> Width:
    """`analyse`, once per process for each (spec variant, environment, fleet, policy, depth),
    and once per machine while neither the spec nor the tool changes (`_stored`)."""
    fixed = None if policy is None else tuple(sorted(policy.items()))
    key = (id(spec), environment.name, shards, fixed, depth)
    hit = _WIDTHS.get(key)
    if hit is None or hit[0] is not spec:
        if len(_WIDTHS) >= 64:
            del _WIDTHS[next(iter(_WIDTHS))]
        width = _stored(
            spec, (environment.name, shards, fixed, depth), lambda: analyse(spec, environment, shards, policy, depth)
        )
        _WIDTHS[key] = hit = (spec, width)
    return hit[1]


def _stored(spec: Spec, question: tuple[Any, ...], build: Callable[[], Width]) -> Width:
    """The width of `question` on `spec` from the cache of compiled specs' folder, else
    `build()`'s, kept there.

    The analysis is a function of the compiled variant, the question and the tool's code
    alone, like a compile (it runs the spec over intervals, 0.1-1 s on the bundled ledger's
    coupled fleet), so it is kept the way compiled specs are (`model.speccache`: keyed by the
    SHA-256 of the compiled variant, the question and the tool's code; written atomically;
    an entry that does not read back whole, about this question, is rebuilt; turned off with
    `LEDGERCHECK_CACHE=off`). A wrong entry could not make a wrong verdict either: every
    trace a search in bit-vectors finds is replayed on the interpreter (`model.bmc`)."""
    from ledgercheck.model import resultcache, speccache

    base = speccache.cache_dir()
    digest = resultcache.spec_digest(spec) if base is not None else None
    if base is None or digest is None:
        return build()
    label = repr((STORED_FORMAT, speccache.code_fingerprint(), digest, question))
    path = base / "widths" / f"width-{hashlib.sha256(label.encode()).hexdigest()}.pickle"
    try:
        stored_label, (bits, peak, tokens, why) = pickle.loads(path.read_bytes())
        if stored_label == label and (bits is None or isinstance(bits, int)):
            return Width(Numbers(bits), int(peak), int(tokens), str(why))
    except Exception:  # noqa: BLE001 - missing, truncated, from another version: analysed again
        pass
    width = build()
    entry = (label, (width.numbers.width, width.peak, width.tokens, width.why))
    if speccache.write_atomically(path, pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)):
        speccache.prune(path.parent, "width-*.pickle", STORED_KEEP)
    return width


__all__ = ["MAX_WIDTH", "TOKEN", "Interval", "IntervalBackend", "Unbounded", "Width", "analyse", "width_for"]
