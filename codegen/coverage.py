"""Coverage tests: one generated test per branch of every event of the reference variant.

Counterexample tests exist only where some variant breaks a property, so a branch no
property looks at would get no test, and an implementation could get it wrong unseen. Here
every *branch* of every event of the reference variant (the one every property holds in)
gets a test of its own: each outcome of the event's `ignore_when` guard and of its callers'
contract `requires`, and each arm of every `if` of its body (an `elif` is an `if` in the
`else` arm; an `if` without `else` still has an `else` branch: the call skips it). Each
`raises` condition, in order, is a decision too: it holds (the call raises), or it is false,
and when it is a conjunction, each of its parts is false in turn with the ones before it
holding (`state == OPEN and open_for < cooldown` is false on a closed breaker, and on an
open one whose timeout has passed: two branches); when it is a disjunction, each of its
parts holds in turn with the ones before it false (`state != FAILED or retries >=
max_retries` raises on a job that has not failed, and on a failed one with no retry left:
two branches, the second the cap an implementation gets wrong). An `if` splits the same
way: the body of `if backoff == 0 or running_for >= stable_after:` runs on a first crash
and on a crash after a steady run, two branches, each with a test of its own (one branch
was taken by every first crash, and a class that never reset its backoff passed them all);
the `else` of an `if` written as a conjunction, once per part that is the first false.

`search` finds, for every branch, the shortest sequence of API calls after which the last
call takes it: breadth first over the executable model's semantics (calls in spec order,
arguments from small domains drawn from the spec, `argument_domain`, one shard, the spec's
default policy, and each tick of the spec's `[clock]` where it has one), merging states
whose ledger fields are equal. A branch the search does not reach is reported with what the
search covered, never dropped: unreachable only when that is a proof (every reachable state
exhausted, with argument values as good as all of them: `model.reduction.argument_use`),
else uncovered (a bounded search, or the int values it tried). `build_tests` turns
each trace into a test that asserts, after every call, the state and the changed fields
(after the branch's own call: every field of the shard, and the log lines the call prints:
`expect_log`; a tick of the clock is a step of its own, and a call the spec says raises is
made expecting its error).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import re
import textwrap
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgercheck.model import budget, ir
from ledgercheck.model.arguments import ArgumentDomain, AtShard, Calls, argument_domain
from ledgercheck.model.interpreter import advance_timers, clock_steps, initial_store
from ledgercheck.model.reduction import branch_cone
from ledgercheck.model.semantics import ConcreteBackend, Effects, Frame, Key, Machine
from ledgercheck.model.spec import HOOK, Event, PropertyKind, Spec, SpecFile
from ledgercheck.model.trace import base_url

SHARDS = 1
MAX_DEPTH = 24
MAX_STATES = 200_000
MODULE_PREFIX = "test_branches_of_"
# HOOK (`model.spec`): the `event` of the branches of `[on_state_change]`, each arm of each of
# its `if`s, which every call that changes a shard's state runs: a restart counted in a window,
# a window that has closed, decisions no event's own body makes.


@dataclass(frozen=True)
class Branch:
    """One outcome of one decision of an event: `kind` is "ignore_when", "requires",
    "raises" (the `ordinal`-th entry of its `raises`) or "if" (the `ordinal`-th `if` of the
    body, in reading order); `taken` the outcome. A false `raises` or `if` condition that is
    a conjunction has one branch per part (`part`, from 1) that is the first false one; one
    that holds and is a disjunction, one per part that is the first to hold (`text` the
    part, `condition` the whole)."""

    event: str
    kind: str
    ordinal: int
    taken: bool
    text: str
    line: int
    from_patch: bool = False
    part: int = 0
    error: str = ""  # of a `raises` branch: the error, and its whole condition
    condition: str = ""

    @property
    def key(self) -> tuple[str, str, int, bool, int]:
        return (self.event, self.kind, self.ordinal, self.taken, self.part)

    @property
    def slug(self) -> str:
        part = f"_{_words(self.text)}" if self.part else ""
        if self.kind == "ignore_when":
            return ("ignored" if self.taken else "not_ignored") + part
        if self.kind == "requires":
            return ("within_contract" if self.taken else "outside_contract") + part
        if self.kind == "body":
            return "runs"
        if self.kind == "raises":
            if self.taken:
                return f"raises{self.ordinal}_{_words(self.error)}" + (f"_{_words(self.text)}" if self.part else "")
            return f"raises{self.ordinal}_not" + (f"_{_words(self.text)}" if self.part else "")
        return (
            f"if{self.ordinal}_{_words(self.text.removeprefix('el').removeprefix('if ').rstrip(':'))}_"
            f"{'then' if self.taken else 'else'}"
        )

    @property
    def describe(self) -> str:
        if self.kind in ("ignore_when", "requires") and self.part:
            before = ""
            if self.part > 1:
                before = " (the parts before it are false)" if self.taken else " (the parts before it hold)"
            where = f"`{self.kind} = {self.condition}`"
            if self.kind == "requires":
                where = f"the callers' contract {where}"
                outcome = "it holds" if self.taken else "it is broken (a call the callers do not make)"
            else:
                outcome = "the call is ignored" if self.taken else "the call is handled"
            return f"`{self.text}` {'holds' if self.taken else 'is false'}{before} in {where}: {outcome}"
        if self.kind == "ignore_when":
            outcome = "holds: the call is ignored" if self.taken else "is false: the call is handled"
            return f"`ignore_when = {self.text}` {outcome}"
        if self.kind == "requires":
            outcome = "holds" if self.taken else "is broken (a call the callers do not make)"
            return f"the callers' contract `requires = {self.text}` {outcome}"
        if self.kind == "body":
            return "the body runs (the event has no guard and no `if`)"
        if self.kind == "raises":
            if self.taken and self.part:
                first = " (the parts before it are false)" if self.part > 1 else ""
                return f"`{self.text}` holds{first}: the call raises {self.error} and changes nothing"
            if self.taken:
                return f"`raises {self.error} when {self.text}` holds: the call raises it and changes nothing"
            first = " (the parts before it hold)" if self.part > 1 else ""
            return f"`{self.text}` is false{first}: no {self.error}"
        elif_ = (self.condition or self.text).startswith("elif ")
        skipped = (
            "the `else` arm runs (or the `elif` is skipped)"
            if elif_
            else "the `else` arm runs (or the `if` is skipped)"
        )
        arm = (
            ("its body runs (the conditions above it are false)" if elif_ else "its body runs")
            if self.taken
            else skipped
        )
        if self.part:
            before = ""
            if self.part > 1:
                before = " (the parts before it are false)" if self.taken else " (the parts before it hold)"
            return f"`{self.text}` {'holds' if self.taken else 'is false'}{before} in `{self.condition}`: {arm}"
        return f"`{self.text}` {'holds' if self.taken else 'is false'}: {arm}"

    def source(self, variant: str) -> str:
        """The spec text the branch comes from, without its line number (a comment added
        above must not rewrite the generated tests)."""
        if self.kind in ("ignore_when", "requires"):
            return f"[events.{self.event}] {self.kind} = {self.condition or self.text!r}{self.patched(variant)}"
        if self.kind == "raises":
            return f"[events.{self.event}] raises {self.error} when {self.condition!r}"
        if self.kind == "body":
            return f"[events.{self.event}] body"
        if self.event == HOOK:
            return f"[{HOOK}] body: {self.condition or self.text}"
        return f"[events.{self.event}] body: {self.condition or self.text}{self.patched(variant)}"

    def patched(self, variant: str) -> str:
        return f" (as variant {variant}'s patch has it)" if self.from_patch else ""

    def where(self, spec_path: str) -> str:
        return f"{Path(spec_path).name}:{self.line}"


Call = tuple[str, tuple[tuple[str, Any], ...]]  # (event, args) on shard 0, or (tick action, ())
FleetCall = tuple[int, str, tuple[tuple[str, Any], ...]]
"""A call of the fleet search: (shard, event, args), or (0, tick action, ())."""


def _words(text: str) -> str:
    """The first words of `text`, lower case, joined by `_`, in about 32 characters."""
    words: list[str] = []
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if words and len("_".join([*words, word])) > 32:
            break
        words.append(word)
    return "_".join(words)


@dataclass(frozen=True)
class Unreached:
    """A branch no call sequence of the search took. `proved`: the search was complete for
    it (it exhausted the reachable states, trying values as good as every value of every
    argument), so no sequence of calls takes it: unreachable. Otherwise it is uncovered,
    and `why` says how the search fell short (its depth, the arguments' values it tried)."""

    branch: Branch
    why: str
    proved: bool = False


@dataclass(frozen=True)
class Coverage:
    """What the search found: per branch the shortest trace (None when unreached)."""

    variant: str
    branches: tuple[Branch, ...]
    traces: Mapping[Branch, tuple[Call, ...]]
    unreached: tuple[Unreached, ...]
    states: int
    depth: int
    gaps: tuple[str, ...] = ()
    """The arguments whose values tried are not as good as every value (`Calls.gaps`)."""
    fleet_traces: Mapping[Branch, tuple[FleetCall, ...]] = dataclasses.field(default_factory=dict)
    """The branches one shard does not reach, per branch its shortest trace over
    `fleet_shards` (`with_fleet`)."""
    fleet_shards: int = 1
    coupled: tuple[str, ...] = ()
    """The fleet values a decision reads: where there are none, each shard evolves on its own
    and what one shard cannot reach no fleet reaches (no fleet search is needed)."""

    @property
    def unreachable(self) -> tuple[Unreached, ...]:
        """The branches proved unreachable (the others the search missed are uncovered)."""
        return tuple(u for u in self.unreached if u.proved)

    def report(self, spec_path: str, covered: set[Branch]) -> list[str]:
        """The summary line, then each uncovered branch (with why the search missed it, if it
        did), then each unreachable one with its proof. Only a proof takes a branch out of
        the percentage's total: one the search did not reach, but could not rule out, counts
        as uncovered."""
        total = len(self.branches)
        hit = sum(1 for b in self.branches if b in covered)
        proved = {u.branch for u in self.unreachable}
        missed = {u.branch: u for u in self.unreached if not u.proved}
        candidates = total - len(proved)
        percent = 100 * hit // candidates if candidates else 100
        uncovered = [b for b in self.branches if b not in covered and b not in proved]
        counted = (
            f"{hit}/{candidates} branches covered ({percent} %), {len(uncovered)} uncovered (not proved unreachable)"
            if uncovered
            else f"{hit}/{candidates} reachable branches covered ({percent} %)"
        )
        lines = [f"branch coverage of {self.variant}: {counted}, {len(proved)} unreachable, {total} in all"]
        for branch in uncovered:
            lines.append(f"  uncovered  {branch.where(spec_path)}  {branch.event}: {branch.describe}")
            if branch in missed:
                lines.append(f"    {missed[branch].why}")
        for gone in self.unreachable:
            lines.append(f"  unreachable  {gone.branch.where(spec_path)}  {gone.branch.event}: {gone.branch.describe}")
            lines.append(f"    {gone.why}")
        return lines


# --- the branches -------------------------------------------------------------------------


def _ifs(block: Sequence[ir.Stmt]) -> Iterator[ir.If]:
    """The `if` statements of a block in reading order (an `elif` after its `if`)."""
    for stmt in block:
        if isinstance(stmt, ir.If):
            yield stmt
            yield from _ifs(stmt.then)
            yield from _ifs(stmt.orelse)
        elif isinstance(stmt, ir.ForShards):
            yield from _ifs(stmt.body)


def _normal(expr: str) -> str:
    try:
        return ast.unparse(ast.parse(expr.strip(), mode="eval"))
    except SyntaxError:
        return " ".join(expr.split())


def _guard_source(spec_file: SpecFile, variant: str, event: str, guard: str) -> tuple[str, int, bool]:
    """A guard's text and line as the variant has it (a patch may replace it)."""
    lines = spec_file.source.lines
    text = spec_file.source.data["events"][event].get(guard)
    keys: tuple[Any, ...] = ("events", event, guard)
    for index, patch in _patches(spec_file, variant):
        if patch.get("event") == event and guard in patch:
            text, keys = patch[guard], ("variants", variant, "patch", index, guard)
    return _normal(str(text)), lines.value_where(keys).line, keys[0] == "variants"


def _patches(spec_file: SpecFile, variant: str) -> list[tuple[int, dict[str, Any]]]:
    table = spec_file.source.data.get("variants", {}).get(variant, {})
    raw = table.get("patch", []) if isinstance(table, dict) else []
    return [(i, p) for i, p in enumerate(raw) if isinstance(p, dict)]


def _if_lines(spec_file: SpecFile, variant: str, event: str) -> dict[str, list[tuple[int, bool, bool]]]:
    """For every `if` header text of the event's body (base text and the variant's inserted
    statements), the file lines it is written on, inserted statements first."""
    blocks: list[tuple[str, tuple[Any, ...]]] = []
    for index, patch in _patches(spec_file, variant):
        if patch.get("event") == event and patch.get("block", "body") == "body" and "insert" in patch:
            blocks.append((patch["insert"], ("variants", variant, "patch", index, "insert")))
    body = spec_file.source.data["events"][event].get("body", "")
    blocks.append((body, ("events", event, "body")))
    return _lines_of_ifs(spec_file, blocks)


def _lines_of_ifs(
    spec_file: SpecFile, blocks: Sequence[tuple[str, tuple[Any, ...]]]
) -> dict[str, list[tuple[int, bool, bool]]]:
    """For every `if` header text of the `blocks` (text, and where the spec file has it), the
    file lines it is written on, in the order of the blocks: (line, from a variant's patch,
    written as an `elif`)."""
    found: dict[str, list[tuple[int, bool, bool]]] = {}
    raw = spec_file.source.raw_lines
    for text, keys in blocks:
        start = spec_file.source.lines.value_where(keys)
        head = raw[start.line - 1][start.col - 1 :] if 0 < start.line <= len(raw) else ""
        first = start.line + 1 if head.startswith(('"""', "'''")) and head[3:].strip() == "" else start.line
        dedented = textwrap.dedent(text)
        try:
            tree = ast.parse(dedented)
        except SyntaxError:
            continue
        written = dedented.splitlines()
        for node in ast.walk(tree):
            if isinstance(node, ast.If):
                elif_ = 0 < node.lineno <= len(written) and written[node.lineno - 1].lstrip().startswith("elif")
                line = (first + node.lineno - 1, keys[0] == "variants", elif_)
                found.setdefault(f"if {ast.unparse(node.test)}:", []).append(line)
    return found


def own_guard(event: Event, guard: str) -> ir.Expr | None:
    """The event's `ignore_when` as its spec writes it (the loaded event's includes its
    `raises` conditions, or-ed before it), or its `requires`."""
    expr: ir.Expr | None = getattr(event, guard)
    conditions = tuple(r.when for r in event.raises if not r.after)
    if guard != "ignore_when" or not conditions or expr is None:
        return expr
    if isinstance(expr, ir.BoolOp) and expr.op == "or" and expr.operands[: len(conditions)] == conditions:
        if len(expr.operands) == len(conditions) + 1:
            return expr.operands[-1]
    return None


def _parts(expr: ir.Expr, op: str = "and") -> tuple[ir.Expr, ...]:
    """The operands of `expr` where it is an `op` ("and", "or") of them, else `expr` alone."""
    return expr.operands if isinstance(expr, ir.BoolOp) and expr.op == op else (expr,)


def _split(expr: ir.Expr, text: str, op: str) -> tuple[tuple[ir.Expr, ...], list[str]]:
    """`expr`'s `op` parts and their texts as the spec writes them; the whole condition alone
    where it is not such a combination, or not written as one (a part that a helper's
    expansion brought in)."""
    parts = _parts(expr, op)
    texts = _operands(text, ast.And if op == "and" else ast.Or) if len(parts) > 1 else [text]
    if len(texts) != len(parts):
        return (expr,), [text]
    return parts, texts


def _guard_branches(event: Event, guard: str, text: str, line: int, patched: bool) -> list[Branch]:
    """The outcomes of a guard (`ignore_when`, `requires`): it holds, or it is false; split
    per part as an `if` is (`_guard_parts`). `release`'s `ignore_when = "state != HELD or
    holder != args.client"` held for a lease that was free, and a class that let any client
    release passed every generated test; a branch of its own is the holder's lease released
    by another client."""
    found: list[Branch] = []
    expr = own_guard(event, guard)
    assert expr is not None
    for outcome in (True, False):
        parts = _parts(expr, "or" if outcome else "and")
        if len(parts) == 1:
            found.append(Branch(event.name, guard, 0, outcome, text, line, patched))
            continue
        texts = _operands(text, ast.Or if outcome else ast.And)
        if len(texts) != len(parts):  # a part a helper's expansion brought in
            texts = [f"part {number} of {text}" for number in range(1, len(parts) + 1)]
        found += [
            Branch(event.name, guard, 0, outcome, _normal(part), line, patched, number, "", text)
            for number, part in enumerate(texts, 1)
        ]
    return found


def _guard_part(holds: bool, expr: ir.Expr, decide: Callable[[ir.Expr], bool]) -> int:
    """Which part decided a guard's outcome `holds` (`_guard_branches`): the first part of a
    disjunction that holds, of a conjunction that is false; 0 where it is not split."""
    parts = _parts(expr, "or" if holds else "and")
    if len(parts) == 1:
        return 0
    return next(number for number, part in enumerate(parts, 1) if decide(part) == holds)


def _raises_branches(event: Event) -> list[Branch]:
    found: list[Branch] = []
    for ordinal, entry in enumerate(event.raises, 1):
        whole = _normal(entry.text)
        for taken, op in ((True, "or"), (False, "and")):
            parts, texts = _split(entry.when, entry.text, op)
            for number, text in enumerate(texts, 1 if len(parts) > 1 else 0):
                shown = _normal(text) if number else whole
                found.append(
                    Branch(event.name, "raises", ordinal, taken, shown, entry.line, False, number, entry.error, whole)
                )
    return found


def _if_split(stmt: ir.If, holds: bool) -> tuple[tuple[ir.Expr, ...], list[str]]:
    """The parts of an `if`'s condition that are branches of their own when it `holds` (a
    disjunction's) or not (a conjunction's); the whole condition alone otherwise."""
    return _split(stmt.cond, stmt.text.removeprefix("if ").removesuffix(":"), "or" if holds else "and")


def _operands(text: str, op: type[ast.boolop]) -> list[str]:
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return [text]
    if isinstance(node, ast.BoolOp) and isinstance(node.op, op):
        return [ast.unparse(v) for v in node.values]
    return [text]


def branches(spec_file: SpecFile, spec: Spec) -> tuple[Branch, ...]:
    """Every branch of every event of `spec` (a variant of `spec_file`), in spec order."""
    found: list[Branch] = []
    for event in spec.events.values():
        first = len(found)
        found += _raises_branches(event)
        for guard in ("ignore_when", "requires"):
            if own_guard(event, guard) is not None:
                found += _guard_branches(event, guard, *_guard_source(spec_file, spec.variant, event.name, guard))
        found += _if_branches(event.name, event.body, _if_lines(spec_file, spec.variant, event.name), event.line)
        if len(found) == first:  # no decision: the one path through the body
            body_line = spec_file.source.lines.value_where(("events", event.name, "body")).line
            found.append(Branch(event.name, "body", 0, True, "", body_line))
    if spec.on_state_change:
        keys = (HOOK, "body")
        text = spec_file.source.data.get(HOOK, {}).get("body", "")
        start = spec_file.source.lines.value_where(keys).line
        found += _if_branches(HOOK, spec.on_state_change, _lines_of_ifs(spec_file, [(text, keys)]), start)
    return tuple(found)


def _if_branches(
    owner: str, block: Sequence[ir.Stmt], lines: Mapping[str, list[tuple[int, bool, bool]]], fallback: int
) -> list[Branch]:
    """Each arm of each `if` of `block` (an event's body, or the hook's), in reading order;
    a condition split where `_if_split` splits it. `lines`: where each `if` is written (an
    `elif` is named as written: `elif window_restarts >= max_restarts:`)."""
    found: list[Branch] = []
    seen: dict[str, int] = {}
    for ordinal, stmt in enumerate(_ifs(block), 1):
        candidates = lines.get(stmt.text, [])
        nth = seen.get(stmt.text, 0)
        seen[stmt.text] = nth + 1
        line, patched, elif_ = candidates[nth] if nth < len(candidates) else (fallback, False, False)
        header = f"el{stmt.text}" if elif_ else stmt.text
        for outcome in (True, False):
            parts, texts = _if_split(stmt, outcome)
            if len(parts) == 1:
                found.append(Branch(owner, "if", ordinal, outcome, header, line, patched))
                continue
            found += [
                Branch(owner, "if", ordinal, outcome, _normal(text), line, patched, number, "", header)
                for number, text in enumerate(texts, 1)
            ]
    return found


# --- which branches a call takes -------------------------------------------------------------


class TracingMachine(Machine[Any]):
    """The concrete executor, noting the outcome of every `if` of an event body it runs."""

    def __init__(self, spec: Spec, policy: Mapping[str, int], shards: int) -> None:
        super().__init__(spec, ConcreteBackend(), dict(policy), shards)
        self.ifs: dict[int, tuple[str, int]] = {}
        for event in spec.events.values():
            for ordinal, stmt in enumerate(_ifs(event.body), 1):
                self.ifs[id(stmt)] = (event.name, ordinal)
        for ordinal, stmt in enumerate(_ifs(spec.on_state_change), 1):
            self.ifs[id(stmt)] = (HOOK, ordinal)
        self.taken: list[tuple[str, str, int, bool, int]] = []
        self.error: str | None = None

    def _exec(
        self, stmt: ir.Stmt, frame: Frame[Any], store: dict[Key, Any], pc: Any, effects: Effects[Any], event: str
    ) -> None:
        if isinstance(stmt, ir.If) and id(stmt) in self.ifs:
            name, ordinal = self.ifs[id(stmt)]
            holds, part = self._decided(stmt.cond, stmt.text.removeprefix("if ").removesuffix(":"), frame, store)
            self.taken.append((name, "if", ordinal, holds, part))
        super()._exec(stmt, frame, store, pc, effects, event)

    def run(self, event: Event, args: Mapping[str, Any], store: dict[Key, Any], shard: int = 0) -> Effects[Any]:
        """One API call on `shard`; `taken` holds its branches afterwards, `error` the
        error it raises (None: it does not)."""
        self.taken = []
        self.error = None
        full = {p.name: args.get(p.name, p.default) for p in event.signature.params}
        frame: Frame[Any] = Frame(shard, {}, full)
        self._raises_taken(event, frame, store, after=False)
        for guard in ("ignore_when", "requires"):
            expr = own_guard(event, guard)
            if expr is not None and not (guard == "ignore_when" and self.error):
                holds = bool(self.eval(expr, frame, store))
                part = _guard_part(holds, expr, lambda e: bool(self.eval(e, frame, store)))
                self.taken.append((event.name, guard, 0, holds, part))
        if not self.taken and not any(True for _ in _ifs(event.body)):
            self.taken.append((event.name, "body", 0, True, 0))
        effects: Effects[Any] = Effects()
        self.call_event(event, shard, dict(args), store, True, effects)
        record = effects.calls[-1]
        if self.error is None and not record.ignored:  # the entries read on the record the call left
            self._raises_taken(event, Frame(shard, {}, full, {}, {"old": record.before}), store, after=True)
        return effects

    def _raises_taken(self, event: Event, frame: Frame[Any], store: dict[Key, Any], after: bool) -> bool:
        """Record the `raises` branches (its `after` entries, or the others) in order up to
        the first that holds, whose error is then the call's; whether one held."""
        for ordinal, entry in enumerate(event.raises, 1):
            if entry.after != after:
                continue
            holds, part = self._decided(entry.when, entry.text, frame, store)
            self.taken.append((event.name, "raises", ordinal, holds, part))
            if holds:
                self.error = entry.error
                return True
        return False

    def _decided(self, cond: ir.Expr, text: str, frame: Frame[Any], store: dict[Key, Any]) -> tuple[bool, int]:
        """A condition's outcome, and the part that decided it where that outcome is split
        (`_split`: the first part of a disjunction that holds, the first of a conjunction that
        is false, as the condition is evaluated); 0 where it is not."""
        holds = bool(self.eval(cond, frame, store))
        parts, _ = _split(cond, text, "or" if holds else "and")
        if len(parts) == 1:
            return holds, 0
        return holds, next(n for n, p in enumerate(parts, 1) if bool(self.eval(p, frame, store)) == holds)


def tick(spec: Spec, ticks: Mapping[str, int], name: str, store: dict[Key, Any]) -> bool:
    """If `name` is one of the clock's tick actions (`ticks`, from `clock_steps`), advance
    the timers of `store` by its step and say so."""
    units = ticks.get(name)
    if units is None:
        return False
    advance_timers(spec, store, units)
    return True


def start_store(spec: Spec, policy: Mapping[str, int]) -> dict[Key, Any]:
    """The state the generated tests build the ledger in at `policy`: `SHARDS` shards, the
    API's base URLs."""
    return initial_store(spec, SHARDS, policy, [base_url(i) for i in range(SHARDS)])


@dataclass(frozen=True)
class _Cone:
    """The fields and fleet values a search tells its states apart by (`reduction.branch_cone`):
    those that can decide a branch. The others only record (a token counted up, a version
    returned), and two states that differ in them alone reach the same branches in as many calls."""

    fields: tuple[str, ...]
    fleet: tuple[str, ...]

    @classmethod
    def of(cls, spec: Spec) -> _Cone:
        cone = branch_cone(spec)
        return cls(
            tuple(f.name for f in spec.fields if ("field", f.name) in cone),
            tuple(g.name for g in spec.globals if ("global", g.name) in cone),
        )

    def key(self, store: Mapping[Key, Any]) -> tuple[Any, ...]:
        """One shard's state, as the one-shard search tells it apart."""
        return tuple(store[(0, name)] for name in self.fields) + tuple(store[(None, g)] for g in self.fleet)

    def fleet_key(self, store: Mapping[Key, Any], shards: int) -> tuple[Any, ...]:
        """A fleet's state up to a permutation of its shards."""
        rows = sorted((tuple(store[(i, n)] for n in self.fields) for i in range(shards)), key=repr)
        return (*rows, *(store[(None, g)] for g in self.fleet))


def policy_read(spec: Spec) -> frozenset[str]:
    """The policy constants `search` can read: in the events (guards, `raises`, bodies,
    history, what they return), in what a change of state runs, in the initial values and in
    the clock's steps. At two policies that agree on these the search is the same, however
    the others differ (a constant only a query or a property reads)."""
    parts: list[object] = [spec.on_state_change]
    for event in spec.events.values():
        parts += [event.ignore_when, event.requires, event.body, event.history, event.returns]
        parts += [entry.when for entry in event.raises]
    read = {node.name for node in ir.walk(parts) if isinstance(node, ir.PolicyRef)}
    read |= {v.initial_policy for v in (*spec.shard_vars, *spec.globals) if v.initial_policy is not None}
    if spec.clock is not None:
        read |= {str(step) for _, step in spec.clock.steps}
    return frozenset(read)


PROGRESS_EVERY = 5000
"""States between two progress messages of `search` (and one at each depth)."""


def search(
    spec_file: SpecFile,
    spec: Spec,
    policy: Mapping[str, int] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Coverage:
    """Breadth first over call sequences on one shard, the shortest trace per branch (at the
    spec's default policy, or `policy` over it: conformance searches at its own). `progress`
    is told where the search stands at each depth and every `PROGRESS_EVERY` states (a
    search that cannot reach a branch runs to its bounds: tens of seconds on a spec whose
    clock steps are long)."""
    all_branches = branches(spec_file, spec)
    index = {b.key: b for b in all_branches}
    policy = {**spec.default_policy(), **(policy or {})}
    machine = TracingMachine(spec, policy, SHARDS)
    ticks = clock_steps(spec, policy)
    calls = Calls(spec, ticks, policy)
    decisions = [n for e in spec.events.values() for n in ir.walk([e.ignore_when, e.requires, e.body])]
    # the hook's decisions (its conditions, and the locals they may read), not what it counts:
    # a counter the hook only adds to (membership_epoch) would keep every state apart
    hook_reads = [stmt.cond for stmt in _ifs(spec.on_state_change)]
    hook_reads += [n.value for n in ir.walk(spec.on_state_change) if isinstance(n, ir.Assign) and n.kind == "local"]
    decisions += list(ir.walk(hook_reads))
    read = {n.name for n in decisions if isinstance(n, ir.GlobalRef)}
    read |= {k[1] for domains in calls.domains.values() for d in domains for k in d.reads() if k[0] is None}
    globals_read = [g.name for g in spec.globals if g.name in read]
    start = start_store(spec, policy)
    traces: dict[Branch, tuple[Call, ...]] = {}
    cone = _Cone.of(spec)
    seen = {cone.key(start)}
    frontier: deque[tuple[dict[Key, Any], tuple[Call, ...]]] = deque([(start, ())])
    depth = 0
    exhausted = True
    while frontier and len(traces) < len(all_branches):
        if depth >= MAX_DEPTH or len(seen) >= MAX_STATES:
            exhausted = False
            break
        depth += 1
        following: deque[tuple[dict[Key, Any], tuple[Call, ...]]] = deque()
        told = -PROGRESS_EVERY  # one message as each depth begins
        for store, trace in frontier:
            budget.stop_if_interrupted()
            if progress is not None and len(seen) - told >= PROGRESS_EVERY:
                told = len(seen)
                progress(
                    f"the shortest trace to every branch: depth {depth}, {len(seen)} states, "
                    f"{len(traces)} of {len(all_branches)} branches reached"
                )
            for event, name, args in calls(store):
                after = dict(store)
                step = (*trace, (name, args))
                if event is None:
                    advance_timers(spec, after, ticks[name])
                    machine.taken = []
                else:
                    machine.run(event, dict(args), after)
                for outcome in machine.taken:
                    branch = index.get(outcome)
                    if branch is not None and branch not in traces:
                        traces[branch] = step
                key = cone.key(after)
                if key not in seen:
                    seen.add(key)
                    following.append((after, step))
        frontier = following
    if frontier:
        exhausted = False
    gaps = calls.gaps()
    # A fleet value the decisions read couples the instances: what one shard cannot reach,
    # several may (a coordinator decides COMMIT once every participant voted yes).
    coupled = tuple(globals_read) if spec.default_shards > 1 else ()
    unreached = tuple(
        Unreached(b, _why_unreached(exhausted, gaps, len(seen), depth, coupled), exhausted and not gaps and not coupled)
        for b in all_branches
        if b not in traces
    )
    return Coverage(spec.variant, all_branches, traces, unreached, len(seen), depth, gaps, coupled=tuple(globals_read))


def _why_unreached(exhausted: bool, gaps: Sequence[str], states: int, depth: int, coupled: Sequence[str] = ()) -> str:
    """What the search covered, for a branch it did not reach: a proof only when it
    exhausted every state and tried values as good as every value of every argument, and
    the instances share no fleet value a decision reads (`coupled`)."""
    if exhausted and not gaps and coupled:
        return (
            f"no call sequence on one shard reaches it (every reachable state of a {SHARDS}-shard ledger "
            f"exhausted, {states}), but the shards share {', '.join(coupled)}: more shards may reach it "
            "(conform searches its fleet for it)"
        )
    if exhausted and not gaps:
        return (
            f"no call sequence reaches it: the search exhausted every reachable state ({states}) "
            f"of a {SHARDS}-shard ledger under the default policy"
        )
    tried = "; ".join(gaps)
    if exhausted:
        return (
            f"not reached by any call the search made: it exhausted every state those calls reach ({states}) "
            f"({SHARDS} shard, default policy), but {tried}: an under-approximation, not a proof"
        )
    bounded = (
        f"not reached by any call sequence of up to {depth} calls ({states} distinct states searched, "
        f"{SHARDS} shard, default policy): a bounded search, not a proof"
    )
    return f"{bounded}; and {tried}" if gaps else bounded


FLEET_STATES = 5_000
"""Distinct states the fleet search (`fleet_search`) keeps at most: a two-phase-commit
coordinator's seven branches that need both participants were reached by 815 (depth 7, 0.3 s),
and its eighth, unreachable, ran the search to 50,000 in a minute."""


@dataclass(frozen=True)
class FleetCoverage:
    """What the fleet search found: per wanted branch the shortest trace over `shards`."""

    shards: int
    traces: Mapping[Branch, tuple[FleetCall, ...]]
    states: int
    depth: int
    exhausted: bool


def fleet_search(
    spec: Spec,
    policy: Mapping[str, int],
    shards: int,
    wanted: Sequence[Branch],
    progress: Callable[[str], None] | None = None,
    max_states: int = FLEET_STATES,
) -> FleetCoverage:
    """Breadth first over calls on every shard of a `shards`-shard ledger (then each tick of
    the clock), the shortest trace to each branch of `wanted`: the branches `search`, on one
    shard, did not reach. The instances are coupled by the fleet values the decisions read: a
    coordinator that refused an abort once it had decided COMMIT, which takes every
    participant's yes, had its refusal reached by no trace, and a class that let the abort
    through passed `conform`. States are merged up to a permutation of the shards."""
    policy = {**spec.default_policy(), **policy}
    index = {b.key: b for b in wanted}
    machine = TracingMachine(spec, policy, shards)
    ticks = clock_steps(spec, policy)
    calls = Calls(spec, ticks, policy)
    cone = _Cone.of(spec)
    start = initial_store(spec, shards, policy, [base_url(i) for i in range(shards)])
    traces: dict[Branch, tuple[FleetCall, ...]] = {}
    seen = {cone.fleet_key(start, shards)}
    frontier: list[tuple[dict[Key, Any], tuple[FleetCall, ...]]] = [(start, ())]
    depth = 0
    # No depth of its own: the states bound it (a sixth term of a replica set is 25 calls away,
    # one past the one-shard search's MAX_DEPTH, in a state space of a few hundred states).
    while frontier and len(traces) < len(index) and len(seen) < max_states:
        depth += 1
        if progress is not None:
            progress(
                f"the branches one shard does not reach, on {shards} shards: depth {depth}, {len(seen)} states, "
                f"{len(traces)} of {len(index)} reached"
            )
        following: list[tuple[dict[Key, Any], tuple[FleetCall, ...]]] = []
        for store, trace in frontier:
            if budget.active().exhausted(memory=False) is not None:
                return FleetCoverage(shards, traces, len(seen), depth, False)
            moves: list[tuple[int, Event | None, str, tuple[tuple[str, Any], ...]]] = []
            for shard in range(shards):
                moves += [(shard, e, n, a) for e, n, a in calls(AtShard(store, shard)) if e is not None]
            moves += [(0, None, name, ()) for name in ticks]
            for shard, event, name, args in moves:
                after = dict(store)
                if event is None:
                    advance_timers(spec, after, ticks[name])
                    machine.taken = []
                else:
                    machine.run(event, dict(args), after, shard)
                step = (*trace, (shard, name, args))
                for outcome in machine.taken:
                    branch = index.get(outcome)
                    if branch is not None and branch not in traces:
                        traces[branch] = step
                seen_key = cone.fleet_key(after, shards)
                if seen_key not in seen and len(seen) < max_states:
                    seen.add(seen_key)
                    following.append((after, step))
        frontier = following
    return FleetCoverage(shards, traces, len(seen), depth, not frontier)


def needs_fleet(found: Coverage, shards: int) -> bool:
    """Whether `with_fleet` searches a fleet of `shards`: one shard missed a branch it did not
    prove unreachable, and a decision reads a fleet value (else each shard evolves alone)."""
    return shards > 1 and bool(found.coupled) and any(not u.proved for u in found.unreached)


def with_fleet(
    spec: Spec,
    found: Coverage,
    progress: Callable[[str], None] | None = None,
    shards: int | None = None,
    policy: Mapping[str, int] | None = None,
) -> Coverage:
    """`found` with the branches one shard did not reach searched for on `shards` (the spec's
    fleet by default; `fleet_search`, at `policy` over the default), where that is more than one: those reached
    get a trace of their own, and a coverage test at that size."""
    shards = shards or spec.default_shards
    if not needs_fleet(found, shards):
        return found
    missed = [u.branch for u in found.unreached if not u.proved]
    fleet = fleet_search(spec, policy or {}, shards, missed, progress)
    ordered = {b: fleet.traces[b] for b in found.branches if b in fleet.traces}
    searched = (
        f"; nor on {fleet.shards} shards ({'every' if fleet.exhausted else 'a bounded search of'} "
        f"{fleet.states} states, up to {fleet.depth} calls)"
    )
    unreached = tuple(
        dataclasses.replace(u, why=u.why + searched) if not u.proved else u
        for u in found.unreached
        if u.branch not in ordered
    )
    return dataclasses.replace(found, unreached=unreached, fleet_traces=ordered, fleet_shards=fleet.shards)


def covered_by(spec: Spec, traces: Sequence[Sequence[Call]], all_branches: Sequence[Branch]) -> set[Branch]:
    """The branches the calls of `traces` take on `spec`'s model (each trace from the start)."""
    index = {b.key: b for b in all_branches}
    policy = spec.default_policy()
    machine = TracingMachine(spec, policy, SHARDS)
    ticks = clock_steps(spec, policy)
    hit: set[Branch] = set()
    for trace in traces:
        store = start_store(spec, policy)
        for name, args in trace:
            if tick(spec, ticks, name, store):
                continue
            machine.run(spec.events[name], dict(args), store)
            hit.update(index[o] for o in machine.taken if o in index)
    return hit


def monitored_property(spec_file: SpecFile, spec: Spec) -> str:
    """The property the coverage tests' monitor watches: the first one `spec` is expected
    to hold in an environment that allows any call (the tests make any call); where it holds
    none, the first, which the tests then watch without judging (`LedgerCheck.judges`)."""
    any_call = [name for name, env in spec.environments.items() if env.any_call]
    for prop in spec.properties.values():
        if prop.expect.get(spec.variant) == "holds" and prop.kind != PropertyKind.EVENTUALLY:
            if not any_call or any(prop.applies_to(env) for env in any_call):
                return prop.name
    return next(iter(spec.properties))


def trace_digest(trace: Sequence[Call]) -> str:
    text = repr([(name, sorted(args)) for name, args in trace])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


# --- at run time ---------------------------------------------------------------------------


def expect_log(check: Any, capsys: Any, shard: int, changes: Sequence[tuple[str, str]]) -> None:
    """The lines the last call printed: one per state change, each naming the shard, then
    the old state, then the new one (by name or API value, in any case)."""
    import pytest

    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.strip()]
    spec = check.spec
    names = dict(spec.enums[spec.state_enum].api_values)

    def spelled(state: str) -> str:
        forms = {state, str(names.get(state, state))}
        return "(?:" + "|".join(re.escape(f) for f in sorted(forms)) + ")"

    problem = None
    if len(lines) != len(changes):
        problem = f"{len(lines)} log line(s), expected {len(changes)}"
    else:
        for line, (old, new) in zip(lines, changes, strict=True):
            # the shard as a number of its own (not the 0 of a timestamp "t=0.000")
            pattern = rf"(?<![\w.]){shard}(?![\w.]).*?\b{spelled(old)}\b.*?\b{spelled(new)}\b"
            if not re.search(pattern, line, flags=re.IGNORECASE):
                problem = f"the log line {line!r} does not say shard {shard} went {old} -> {new}"
                break
    if problem is not None:
        shown = "\n".join(f"    {line}" for line in lines) or "    (nothing)"
        pytest.fail(f"after {check.current}: {problem}; the call printed:\n{shown}", pytrace=False)


__all__ = [
    "ArgumentDomain",
    "Branch",
    "Calls",
    "Coverage",
    "HOOK",
    "Unreached",
    "argument_domain",
    "branches",
    "covered_by",
    "expect_log",
    "fleet_search",
    "with_fleet",
    "monitored_property",
    "search",
]
