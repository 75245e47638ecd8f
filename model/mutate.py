"""How strong are the properties? `ledgercheck mutate` breaks the spec on purpose.

Each mutant is the reference variant (the one every property is expected to hold for,
`fixed` in the bundled spec) with one small change, written as one more statement patch of
that variant, so a mutant *is* a spec and reads as a spec diff:

* drop an update or a reset (remove one assignment),
* negate or weaken a guard (`ignore_when`; an `if` condition negated),
* off-by-one in a comparison (`>=` <-> `>`, `<=` <-> `<`), in a body, a guard or a `raises`
  condition,
* drop a refusal (a `raises` condition that never holds), or drop one part of a guard or a
  `raises` condition written as a conjunction or a disjunction (a class's guard that lost a
  clause),
* swap the target state of a transition (`state = A` -> `state = B`),
* drop an announcement (remove one `emit.name(...)`), or swap two of its arguments of one type.

A mutant is *killed by properties* when the bounded checker finds a property it breaks,
*killed by tests* when a generated regression test fails on its executable model, and
*survives* otherwise: behaviour nothing constrains. Mutants run in parallel on the
machine's cores; the order and the sample (`--max-mutants`, `--seed`) are deterministic.

Before any mutant, the same property checks and generated tests run on the unmutated
reference variant: the *baseline*. A check or a test that already fails there would "kill"
every mutant and say nothing about it, so it is excluded from the score, and the report
names it. The baseline is *unclean* when something fails there that the spec does not
expect to fail (a verdict that differs from the spec's expectation, an unknown verdict, a
generated test that fails): it is reported before the score.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import difflib
import json
import random
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ledgercheck.model import bmc, budget
from ledgercheck.model import executor as executors
from ledgercheck.model.console import Heartbeat
from ledgercheck.model.errors import EXIT_OK, EXIT_UNKNOWN, LedgercheckError, UsageError
from ledgercheck.model.result import Status
from ledgercheck.model.runs import MUTATE_DEPTH
from ledgercheck.model.spec import (
    HOOK,
    Event,
    PropertyKind,
    Spec,
    SpecFile,
    load_spec,
    load_spec_text,
    reference_variant,
)

OPS = {ast.GtE: ast.Gt, ast.Gt: ast.GtE, ast.LtE: ast.Lt, ast.Lt: ast.LtE}


@dataclass(frozen=True)
class Mutant:
    ident: str
    event: str
    kind: str
    before: str
    after: str
    patch: str

    def diff(self) -> str:
        lines = difflib.unified_diff(
            self.before.splitlines(),
            self.after.splitlines(),
            f"{self.event} (spec)",
            f"{self.event} (mutant)",
            lineterm="",
            n=1,
        )
        return "\n".join(lines)


MutantStatus = Literal["killed_by_property", "killed_by_tests", "survived", "undecided", "invalid"]
"""What became of a mutant (its JSON `status`). `undecided`: no check broke and no test failed,
but a property check answered `unknown`; it is left out of the score, never a survivor."""


@dataclass(frozen=True)
class Outcome:
    ident: str
    status: MutantStatus
    detail: str


Check = tuple[str, str, str] | tuple[str, str, str, bool]
"""A property check a mutant gets: (environment, property, policy), and whether it is judged
within the callers' contracts (a fourth item, False when left out: every call sequence)."""


def _toml_string(text: str) -> str:
    return json.dumps(text)


def _patch(variant: str, event: str, **fields: str) -> str:
    body = "\n".join(f"{key} = {_toml_string(value)}" for key, value in fields.items())
    return f"\n[[variants.{variant}.patch]]\nevent = {_toml_string(event)}\n{body}\n"


def _block_statements(tree: ast.Module) -> Iterator[ast.stmt]:
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            yield node


def _head(node: ast.stmt) -> str:
    if isinstance(node, ast.If):
        return f"if {ast.unparse(node.test)}:"
    return ast.unparse(node).split("\n")[0]


def enumerate_mutants(spec: Spec) -> list[Mutant]:
    """Every single-point mutant of the variant's event bodies and guards, and of its
    `[on_state_change]` body."""
    mutants: list[Mutant] = []
    for event in spec.events.values():
        mutants += _body_mutants(spec, event.name, textwrap.dedent(event.body_text).strip("\n"))
        if (spec.path, spec.variant, event.name) not in _OVERRIDDEN:
            mutants += _raises_mutants(spec, event)
        guard = _guard_text(spec, event.name)
        if guard:
            changes = [("negate a guard", f"not ({guard})"), ("weaken a guard", "False")]
            with contextlib.suppress(SyntaxError):
                changes += _condition_changes(ast.parse(guard, mode="eval").body)
            for kind, new in changes:
                after = f"ignore_when = {new!r}"
                ident = f"{event.name}:{kind}:{new}"
                mutants.append(
                    Mutant(
                        ident,
                        event.name,
                        kind,
                        f"ignore_when = {guard!r}",
                        after,
                        _patch(spec.variant, event.name, ignore_when=new),
                    )
                )
    hook = _HOOKS.get((spec.path, spec.variant))
    if hook:
        mutants += _body_mutants(spec, HOOK, hook)
    return mutants


def _body_mutants(spec: Spec, owner: str, body: str) -> list[Mutant]:
    """The single-point mutants of one body (an event's, or the hook's when `owner` is HOOK):
    an update or a reset dropped, a target state swapped, an announcement dropped or its
    arguments swapped, an `if` negated, a comparison off by one."""
    try:
        tree = ast.parse(body)
    except SyntaxError:
        return []
    mutants: list[Mutant] = []
    state_members = spec.enums[spec.state_enum].members
    heads = [_head(n) for n in _block_statements(tree)]
    for node in _block_statements(tree):
        head = _head(node)
        if heads.count(head) != 1:
            continue
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
            kind = "drop a reset" if ast.unparse(node.value) in ("0", "None", "False") else "drop an update"
            mutants.append(_mutant(spec, owner, kind, body, head, None))
            if target == spec.state_field and isinstance(node.value, ast.Name):
                for member in state_members:
                    if member != node.value.id:
                        swapped = copy.deepcopy(node)
                        swapped.value = ast.Name(id=member, ctx=ast.Load())
                        mutants.append(_mutant(spec, owner, "swap a target state", body, head, swapped))
        mutants += _announcement_mutants(spec, owner, body, head, node)
        if isinstance(node, ast.If):
            negated = copy.deepcopy(node)
            negated.test = ast.UnaryOp(op=ast.Not(), operand=negated.test)
            mutants.append(_mutant(spec, owner, "negate a condition", body, head, negated))
        within = node.test if isinstance(node, ast.If) else node  # an `if`'s own condition, not its body's
        for changed in _off_by_one(node, within):
            assert isinstance(changed, ast.stmt)
            mutants.append(_mutant(spec, owner, "off by one", body, head, changed))
    return mutants


def _announcement_mutants(spec: Spec, event: str, body: str, head: str, node: ast.stmt) -> list[Mutant]:
    """An `emit.name(...)` statement dropped, and its first two arguments swapped where the
    notification declares them of one type (a swap of two types would not load)."""
    call = node.value if isinstance(node, ast.Expr) else None
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "emit"
    ):
        return []
    found = [_mutant(spec, event, "drop an announcement", body, head, None)]
    declared = spec.notifications.get(call.func.attr)
    if declared is not None and len(call.args) >= 2 and len(declared.params) >= 2:
        first, second = declared.params[0], declared.params[1]
        if first.type == second.type and ast.unparse(call.args[0]) != ast.unparse(call.args[1]):
            swapped = copy.deepcopy(node)
            assert isinstance(swapped, ast.Expr) and isinstance(swapped.value, ast.Call)
            args = swapped.value.args
            args[0], args[1] = args[1], args[0]
            found.append(_mutant(spec, event, "swap announced arguments", body, head, swapped))
    return found


def _off_by_one(node: ast.AST, within: ast.AST) -> Iterator[ast.AST]:
    """Copies of `node`, each with one comparison under `within` (a part of `node`) off by
    one (`>=` <-> `>`, `<=` <-> `<`), in reading order."""
    compares = [n for n in ast.walk(node) if isinstance(n, ast.Compare)]
    inside = {id(n) for n in ast.walk(within)}
    for position, compare in enumerate(compares):
        if id(compare) not in inside:
            continue
        for at, op in enumerate(compare.ops):
            if type(op) in OPS:
                changed = copy.deepcopy(node)
                target = [n for n in ast.walk(changed) if isinstance(n, ast.Compare)][position]
                target.ops[at] = OPS[type(op)]()
                yield changed


def _raises_mutants(spec: Spec, event: Event) -> list[Mutant]:
    """The event's `raises` with one entry's condition changed, written as an override of the
    event naming only its `raises` (the list replaces the spec's): the condition never holds,
    one part of it left out, or one comparison in it off by one."""
    found: list[Mutant] = []
    for index, entry in enumerate(event.raises):
        try:
            node = ast.parse(entry.text, mode="eval").body
        except SyntaxError:
            continue
        changes: list[tuple[str, str]] = [("drop a refusal", "False"), *_condition_changes(node)]
        key = "after" if entry.after else "when"
        for kind, new in changes:
            entries = [
                f"{{ {'after' if e.after else 'when'} = {_toml_string(new if i == index else e.text)}, "
                f"error = {_toml_string(e.error)} }}"
                for i, e in enumerate(event.raises)
            ]
            patch = f"\n[variants.{spec.variant}.override.events.{event.name}]\nraises = [{', '.join(entries)}]\n"
            before = f"raises {entry.error} {key} {entry.text}"
            after = f"raises {entry.error} {key} {new}"
            found.append(Mutant(f"{event.name}:{kind}:{before} -> {new}", event.name, kind, before, after, patch))
    return found


def _condition_changes(node: ast.expr) -> list[tuple[str, str]]:
    """A condition (a `raises` entry's, a guard) with one part of a conjunction or disjunction
    left out, or one comparison in it off by one. A rollout's `ignore_when = "paused or
    unavailable >= max_unavailable or ..."` was only negated or made False, and no mutant
    dropped the pause (a class that ignored it passed `conform`)."""
    changes: list[tuple[str, str]] = []
    if isinstance(node, ast.BoolOp) and len(node.values) > 1:
        word = "conjunction" if isinstance(node.op, ast.And) else "disjunction"
        for left_out in range(len(node.values)):
            rest = [v for i, v in enumerate(node.values) if i != left_out]
            kept = rest[0] if len(rest) == 1 else ast.BoolOp(op=node.op, values=rest)
            changes.append((f"drop a part of a {word}", ast.unparse(kept)))
    changes += [("off by one", ast.unparse(changed)) for changed in _off_by_one(node, node)]
    return changes


def _guard_text(spec: Spec, event: str) -> str | None:
    # The guard's text as written (compiled guards keep no text): read it from the spec source.
    return _GUARDS.get((spec.path, event))


_GUARDS: dict[tuple[str, str], str | None] = {}
_HOOKS: dict[tuple[str, str], str] = {}
"""(spec path, variant) -> the `[on_state_change]` body as the file writes it; none where the
variant overrides the hook itself (a mutant's override would define that table twice)."""
_OVERRIDDEN: set[tuple[str, str, str]] = set()
"""(spec path, variant, event) where the variant overrides the event's table itself: a
mutant's override of its `raises` would define that table twice."""


def _remember_guards(spec_file: SpecFile) -> None:
    events = spec_file.source.data.get("events", {})
    for name, body in events.items():
        guard = body.get("ignore_when") if isinstance(body, dict) else None
        _GUARDS[(spec_file.path, name)] = guard if isinstance(guard, str) else None
    hook = spec_file.source.data.get(HOOK, {})
    text = hook.get("body") if isinstance(hook, dict) else None
    tables = spec_file.source.data.get("variants", {})
    for variant in spec_file.variant().variants:
        table = tables.get(variant, {})
        override = table.get("override", {}) if isinstance(table, dict) else {}
        _OVERRIDDEN.update((spec_file.path, variant, name) for name in override.get("events", {}))
        if isinstance(text, str) and HOOK not in override:
            _HOOKS[(spec_file.path, variant)] = textwrap.dedent(text).strip("\n")


def spec_mutants(spec_file: SpecFile, variant: str) -> list[Mutant]:
    """Every single-point mutant of one variant of a spec file (`enumerate_mutants`, with the
    guards as the file writes them)."""
    _remember_guards(spec_file)
    return enumerate_mutants(spec_file.variant(variant))


def evaluate_mutant(
    spec_file: SpecFile,
    variant: str,
    mutant: Mutant,
    *,
    shards: int,
    depth: int,
    tests: list[Any],
    checks: Sequence[Check],
) -> Outcome:
    """One mutant judged as `run_mutation` judges each: killed by one of the property
    `checks` (environment, property, why), else by one of the generated `tests`, else it survived."""
    return _evaluate((spec_file.source.text, spec_file.path, variant, mutant, shards, depth, tests, checks))


def _siblings(tree: ast.Module, node: ast.stmt) -> list[ast.stmt]:
    """The statement list `node` belongs to."""
    for parent in ast.walk(tree):
        for name in ("body", "orelse"):
            block = getattr(parent, name, None)
            if isinstance(block, list) and any(item is node for item in block):
                return block
    return [node]


def _mutant(spec: Spec, event: str, kind: str, body: str, head: str, replacement: ast.stmt | None) -> Mutant:
    tree = ast.parse(body)
    lines = body.split("\n")
    node = next(n for n in _block_statements(tree) if _head(n) == head)
    start, end = node.lineno - 1, node.end_lineno or node.lineno
    indent = " " * node.col_offset
    siblings = _siblings(tree, node)
    if replacement is None and len(siblings) == 1:
        replacement = ast.Pass()  # the only statement of its block: keep the block valid
    new_lines = [] if replacement is None else [indent + line for line in ast.unparse(replacement).split("\n")]
    after = "\n".join(lines[:start] + new_lines + lines[end:])
    if event == HOOK:
        patch = f"\n[variants.{spec.variant}.override.{HOOK}]\nbody = {_toml_string(after)}\n"
    elif replacement is None:
        patch = _patch(spec.variant, event, remove=head)
    else:
        patch = _patch(spec.variant, event, replace=head, insert=ast.unparse(replacement))
    ident = f"{event}:{kind}:{head}" + (f" -> {ast.unparse(replacement).splitlines()[0]}" if replacement else "")
    return Mutant(ident, event, kind, body, after, patch)


def _policies(spec: Spec) -> dict[str, dict[str, int]]:
    """The shipped policy, and the smallest one the spec allows: small thresholds and
    budgets make behaviour that needs many steps under the shipped values (retirement after
    five restarts) reachable within the bounded search's depth."""
    return {"shipped": spec.default_policy(), "smallest": spec.smallest_policy()}


def _checks(spec: Spec) -> list[tuple[str, str, str]]:
    return [
        (env, name, policy)
        for env in spec.environments
        for name, prop in spec.properties.items()
        if prop.applies_to(env)
        for policy in ("shipped", "smallest")
    ]


def _check(spec: Spec, env: str, prop: Any, *, shards: int, policy: dict[str, int], depth: int, contracts: bool) -> Any:
    """One check: a liveness property by its fair-lasso search (no callers' contracts apply
    to it), any other by the bounded search, within the contracts or not. A call into Z3 the
    spent budget interrupts stops the command (`BudgetExhausted`): no verdict stands on it."""
    with budget.stops_when_interrupted(f"mutate (checking {prop.name} in {env})", "no score was computed"):
        if prop.kind == PropertyKind.EVENTUALLY:
            from ledgercheck.model.liveness import check_eventually

            return check_eventually(spec, env, prop, shards=shards, policy=policy, max_depth=depth)
        return bmc.Checker(spec, env, prop, shards, policy, contracts=contracts, depth=depth).run(depth, 1)


@dataclass(frozen=True)
class PropertyVerdict:
    """What a mutant's property checks established: the first check it breaks (`violation`),
    else the first one the solver could not decide (`undecided`: the mutant is then not
    known to pass it, so it cannot be called a survivor), else neither."""

    violation: str | None
    undecided: str | None


def _first_violation(spec: Spec, checks: Sequence[Check], shards: int, depth: int) -> PropertyVerdict:
    """The first (environment, property, policy) broken by any call sequence, within or
    outside the callers' contracts: a mutant changes the ledger for every caller; within them
    where the check says so (a property the unmutated variant keeps only within them). A check
    answered `unknown` does not stop the search (a later check may still break)."""
    policies = _policies(spec)
    undecided = None
    for check in checks:
        env, name, policy = check[:3]
        within = len(check) > 3 and bool(check[3])
        _stop_if_spent()
        result = _check(
            spec, env, spec.properties[name], shards=shards, policy=policies[policy], depth=depth, contracts=within
        )
        if result.status == Status.VIOLATED:
            return PropertyVerdict(f"{name} ({env}, {policy} policy): {result.traces[0].depth}-step trace", None)
        if result.status == Status.UNKNOWN and undecided is None:
            undecided = f"{name} ({env}, {policy} policy): unknown ({result.note})"
    _stop_if_spent()  # a check the budget cut short is not one the mutant passed
    return PropertyVerdict(None, undecided)


def _stop_if_spent() -> None:
    """Raise `BudgetExhausted` in the process judging a mutant once the budget it sees is
    spent (in a worker, its own memory counts): a mutant whose checks ran out is not judged
    at all, never `survived`, and the command stops (exit 3) instead of starting more checks."""
    budget.stop_if_spent("mutate (a mutant's checks)", "no score was computed")


HOLDS = (Status.HOLDS_TO_DEPTH, Status.PROVED)


@dataclass(frozen=True)
class BaselineCheck:
    """One property check on the unmutated reference variant.

    `verdict` is the check as mutants get it (every call sequence, the callers' contracts
    ignored); `contract_verdict` is the spec's own verdict (within the contracts, as
    `ledgercheck check` reports it), run only when `verdict` is not a pass, to tell a
    mismatch with the spec's expectation from a break that needs a call no caller makes."""

    environment: str
    property: str
    policy: str
    verdict: str
    contract_verdict: str | None
    expected: str | None
    usable: bool
    clean: bool
    reason: str
    within_contracts: bool = False
    """Mutants get this check within the callers' contracts: the unmutated variant keeps the
    property only there (a call outside them breaks it), as `check` judges it."""

    def label(self) -> str:
        return f"{self.property} ({self.environment}, {self.policy} policy)"


@dataclass(frozen=True)
class BaselineTest:
    """A generated test that fails on the unmutated reference variant."""

    property: str
    test: str
    failure: str


@dataclass(frozen=True)
class Baseline:
    """What the reference variant passes before any mutation; only that can kill a mutant."""

    variant: str
    checks: tuple[BaselineCheck, ...]
    tests: int
    failing_tests: tuple[BaselineTest, ...]

    @property
    def usable_checks(self) -> list[Check]:
        return [(c.environment, c.property, c.policy, c.within_contracts) for c in self.checks if c.usable]

    @property
    def excluded_checks(self) -> list[BaselineCheck]:
        return [c for c in self.checks if not c.usable]

    @property
    def unclean_checks(self) -> list[BaselineCheck]:
        return [c for c in self.checks if not c.clean]

    @property
    def clean(self) -> bool:
        return not self.unclean_checks and not self.failing_tests

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "clean": self.clean,
            "checks": len(self.checks),
            "excluded_checks": [asdict(c) for c in self.excluded_checks],
            "tests": self.tests,
            "failing_tests": [asdict(t) for t in self.failing_tests],
        }


def _baseline_check(spec: Spec, check: tuple[str, str, str], shards: int, depth: int) -> BaselineCheck:
    env, name, policy = check
    prop = spec.properties[name]
    expected = prop.expect.get(spec.variant)
    policies = _policies(spec)
    verdict = _check(spec, env, prop, shards=shards, policy=policies[policy], depth=depth, contracts=False).status
    if verdict in HOLDS:
        # Usable even where the spec expects a violation: the expectation is about the shipped
        # policy at `check`'s depth, and a mutant that breaks a check the baseline passes
        # changed behaviour the property sees either way.
        return BaselineCheck(env, name, policy, verdict, None, expected, True, True, "passes")
    contracts = spec.environment(env).any_call
    contract_verdict = verdict
    if contracts:
        contract_verdict = _check(
            spec, env, prop, shards=shards, policy=policies[policy], depth=depth, contracts=True
        ).status
    if Status.UNKNOWN in (verdict, contract_verdict):
        return BaselineCheck(env, name, policy, verdict, contract_verdict, expected, False, False, "unknown")
    if expected == "violated":
        # Within the contracts the violation may need more depth or shards than this run
        # gives it (`check` finds it); a violation outside them is already no pass.
        reason = "violated, as the spec expects"
        return BaselineCheck(env, name, policy, verdict, contract_verdict, expected, False, True, reason)
    if contract_verdict in HOLDS:  # mutants are judged within the contracts too, as `check` judges it
        reason = "holds within the callers' contracts; a call outside them breaks it: mutants are checked within them"
        return BaselineCheck(env, name, policy, verdict, contract_verdict, expected, True, True, reason, True)
    reason = f"violated, expected {expected}" if expected else "violated, no expectation"
    return BaselineCheck(env, name, policy, verdict, contract_verdict, expected, False, False, reason)


def _baseline_job(args: tuple[Spec, tuple[str, str, str], int, int]) -> BaselineCheck:
    """Runs in a worker: one baseline check. Each job brings its own copy of the spec, and
    `encoding_for` keeps what it builds per spec object: the first copy a worker sees (by
    content) serves its later jobs, so they reuse its encodings as checks in one process do."""
    spec, check, shards, depth = args
    key = (spec.sha256, spec.variant)
    kept = _WORKER_SPEC.get(key)
    if kept is None:
        _WORKER_SPEC.clear()
        kept = _WORKER_SPEC[key] = spec
    return _baseline_check(kept, check, shards, depth)


_WORKER_SPEC: dict[tuple[str, str], Spec] = {}


def baseline_checks(
    spec: Spec, shards: int, depth: int, config: executors.ExecutorConfig | None = None, start: int = 0
) -> tuple[BaselineCheck, ...]:
    """The property checks on the unmutated reference variant `spec` (all of them, or those
    from position `start` on), as independent jobs on `config`'s executor (default: one after
    the other)."""
    jobs = [(spec, check, shards, depth) for check in _checks(spec)[start:]]
    return tuple(executors.run_jobs(_baseline_job, jobs, config or executors.SERIAL))


def _baseline_checks_beside(spec: Spec, job: tuple[int, int], send: Callable[[BaselineCheck], None] | None) -> int:
    """The baseline's checks one after the other, in the process `run_mutation` starts beside
    the checks its generated tests are drawn from (`executors.Beside`). Each result is sent as
    it comes, so the command keeps those finished when the plan's checks are done and gives
    the rest to its workers."""
    shards, depth = job
    checks = _checks(spec)
    for check in checks:
        result = _baseline_check(spec, check, shards, depth)
        if send is not None:
            send(result)
    return len(checks)


def run_baseline(spec: Spec, tests: list[tuple[str, Any]], checks: tuple[BaselineCheck, ...]) -> Baseline:
    """The baseline of the unmutated reference variant `spec`: its property checks
    (`baseline_checks`) and which of the generated `tests` fail on it."""
    from ledgercheck.codegen.render import verdict_of_test

    failing = []
    for prop_name, test in tests:
        failure = verdict_of_test(test, spec, prop_name)
        if failure is not None:
            first = failure.strip().splitlines()[0] if failure.strip() else "failed"
            failing.append(BaselineTest(prop_name, f"test_{test.name}", first))
    return Baseline(spec.variant, checks, len(tests), tuple(failing))


def _evaluate(args: tuple[str, str, str, Mutant, int, int, list[Any], Sequence[Check]]) -> Outcome:
    """Runs in a worker process: check one mutant against properties, then tests."""
    text, path, variant, mutant, shards, depth, tests, checks = args
    try:
        spec = load_spec_text(text + mutant.patch, path).variant(variant)
    except LedgercheckError as exc:
        return Outcome(mutant.ident, "invalid", str(exc))
    verdict = _first_violation(spec, checks, shards, depth)
    if verdict.violation is not None:
        return Outcome(mutant.ident, "killed_by_property", verdict.violation)
    from ledgercheck.codegen.render import verdict_of_test

    for prop_name, test in tests:
        _stop_if_spent()
        failure = verdict_of_test(test, spec, prop_name)
        if failure is not None:
            return Outcome(mutant.ident, "killed_by_tests", f"{prop_name}: test_{test.name}")
    if verdict.undecided is not None:
        return Outcome(mutant.ident, "undecided", verdict.undecided)
    return Outcome(mutant.ident, "survived", "")


def run_mutation(
    spec_file: SpecFile,
    *,
    shards: int,
    depth: int,
    workers: int | executors.ExecutorConfig,
    max_mutants: int | None,
    seed: int,
    progress: Any = None,
) -> tuple[Baseline, list[Mutant], list[Outcome]]:
    """The baseline, then every (sampled) mutant checked against what the baseline passes."""
    from ledgercheck.codegen.render import DEFAULT_DEPTH, DEFAULT_TRACES, establish_counterexamples, plan_tests

    _remember_guards(spec_file)
    variant = reference_variant(spec_file)
    spec = spec_file.variant(variant)
    mutants = enumerate_mutants(spec)
    if max_mutants is not None and max_mutants < len(mutants):
        mutants = sorted(random.Random(seed).sample(mutants, max_mutants), key=lambda m: m.ident)
    config = workers if isinstance(workers, executors.ExecutorConfig) else executors.ExecutorConfig(jobs=workers)
    # The checks the plan draws its traces from run on the workers too (the same results
    # `plan_tests` would find one after the other: the same tests). Meanwhile, with workers,
    # the baseline's checks (which need no plan) run one after the other in a process of
    # their own, filling the cores the plan's last long checks leave idle; those it has not
    # finished when the plan is made go to the workers.
    finished: list[BaselineCheck] = []
    side = None
    if config.parallel(2) and executors.Beside.possible():
        side = executors.Beside(
            _baseline_checks_beside,
            spec,
            (shards, depth),
            finished.append,
            "the baseline's checks",
        )
    try:
        found = establish_counterexamples(spec_file, DEFAULT_DEPTH, DEFAULT_TRACES, config)
        budget.stop_if_spent("mutate (planning the generated tests)", "no mutant was evaluated")
        planned = plan_tests(spec_file, verdicts=found)
    finally:
        if side is not None:
            side.done()  # reads what it has sent so far
            side.stop()
    checked = (*finished, *baseline_checks(spec, shards, depth, config, start=len(finished)))
    all_tests = [(name, test) for name, (_, _, group) in planned.items() for test in group]
    baseline = run_baseline(spec, all_tests, checked)
    # A baseline whose checks the budget cut short is no baseline: no mutant is judged against it.
    budget.stop_if_spent("mutate (the baseline)", "no mutant was evaluated")
    failing = {(t.property, t.test) for t in baseline.failing_tests}
    tests = [(name, test) for name, test in all_tests if (name, f"test_{test.name}") not in failing]
    checks = baseline.usable_checks
    if progress:
        progress(
            f"baseline {variant}: {len(checks)} of {len(baseline.checks)} property checks and "
            f"{len(tests)} of {len(all_tests)} generated tests pass; {len(mutants)} mutants"
        )
    text = spec_file.source.text
    jobs = [(text, spec_file.path, variant, m, shards, depth, tests, checks) for m in mutants]
    outcomes: list[Outcome] = []
    start = time.monotonic()
    results = executors.run_jobs(_evaluate, jobs, config)
    for number, outcome in enumerate(results, 1):
        outcomes.append(outcome)
        if progress:
            progress(f"mutant {number}/{len(jobs)}: {outcome.status} ({time.monotonic() - start:.0f}s)")
        if budget.active().exhausted() is not None:
            results.close()  # the mutants not yet started never run
            budget.stop_if_spent(f"mutate ({number} of {len(jobs)} mutants evaluated)", "no score was computed")
    return baseline, mutants, outcomes


def score_table(outcomes: list[Outcome]) -> dict[MutantStatus, int]:
    counts: dict[MutantStatus, int] = {
        "killed_by_property": 0,
        "killed_by_tests": 0,
        "survived": 0,
        "undecided": 0,
        "invalid": 0,
    }
    for outcome in outcomes:
        counts[outcome.status] += 1
    return counts


def baseline_lines(baseline: Baseline) -> list[str]:
    """The baseline as the text report opens: what fails before any mutation, by name."""
    counts = (
        f"{len(baseline.usable_checks)} of {len(baseline.checks)} property checks and "
        f"{baseline.tests - len(baseline.failing_tests)} of {baseline.tests} generated tests pass"
    )
    clean_excluded = [c for c in baseline.excluded_checks if c.clean]
    if baseline.clean:
        lines = [f"baseline (unmutated {baseline.variant}): clean; {counts}"]
        if clean_excluded:
            lines[0] += f"; {len(clean_excluded)} excluded check(s) fail there as the spec allows:"
    else:
        lines = [
            f"baseline (unmutated {baseline.variant}): NOT CLEAN; {counts}. These fail before any mutation, "
            "so they cannot kill a mutant and are left out of the score:"
        ]
        lines += [f"  property {c.label()}: {c.reason}" for c in baseline.unclean_checks]
        lines += [f"  generated test {t.test} ({t.property}): {t.failure}" for t in baseline.failing_tests]
        if clean_excluded:
            lines.append("  also excluded, as the spec allows:")
    lines += [f"  property {c.label()}: {c.reason}" for c in clean_excluded]
    return lines


def score_line(spec_name: str, baseline: Baseline, outcomes: list[Outcome]) -> str:
    counts = score_table(outcomes)
    valid = len(outcomes) - counts["invalid"] - counts["undecided"]
    killed = counts["killed_by_property"] + counts["killed_by_tests"]
    return (
        f"{len(outcomes)} mutants of {spec_name}: {counts['killed_by_property']} killed by "
        f"properties, {counts['killed_by_tests']} killed by generated tests, {counts['survived']} survived"
        f"{', ' + str(counts['undecided']) + ' undecided' if counts['undecided'] else ''}"
        f"{', ' + str(counts['invalid']) + ' invalid' if counts['invalid'] else ''}; "
        f"score {killed}/{valid}"
        + (f" = {100 * killed / valid:.0f}%" if valid else "")
        + f"; excluded (fail on the unmutated {baseline.variant}): {len(baseline.excluded_checks)} of "
        f"{len(baseline.checks)} property checks, {len(baseline.failing_tests)} of {baseline.tests} generated tests"
    )


def mutate_command(
    *,
    spec: str | None,
    shards: int,
    max_depth: int | None,
    jobs: int | None,
    executor: str,
    max_mutants: int | None,
    seed: int,
    format: str,
    progress: bool | None,
) -> int:
    """`ledgercheck mutate`: the baseline, the score and every survivor."""
    spec_file = load_spec(spec)
    max_depth = spec_file.variant().search_depth(max_depth, MUTATE_DEPTH)
    if shards < 1 or max_depth < 1:
        raise UsageError("--shards and --max-depth must be positive")
    show = progress if progress is not None else sys.stderr.isatty()
    say: Callable[[str], None] | None = (lambda message: print(message, file=sys.stderr)) if show else None
    if progress is None and not show:  # a log (CI): a line now and then, never a silent half hour
        say = Heartbeat(sys.stderr)
    config = executors.ExecutorConfig(executor, jobs)
    baseline, mutants, outcomes = run_mutation(
        spec_file, shards=shards, depth=max_depth, workers=config, max_mutants=max_mutants, seed=seed, progress=say
    )
    counts = score_table(outcomes)
    by_id = {m.ident: m for m in mutants}
    if format == "json":
        print(
            json.dumps(
                {
                    "mutants": len(outcomes),
                    "score": counts,
                    "outcomes": [
                        asdict(o) | {"kind": by_id[o.ident].kind, "diff": by_id[o.ident].diff()} for o in outcomes
                    ],
                    "baseline": baseline.to_json(),
                },
                indent=2,
            )
        )
        return _exit_code(counts)
    for line in baseline_lines(baseline):
        print(line)
    print(score_line(Path(spec_file.path).name, baseline, outcomes))
    for outcome in outcomes:
        if outcome.status == "survived":
            mutant = by_id[outcome.ident]
            print(f"\nsurvivor ({mutant.kind}):\n{mutant.diff()}")
    for outcome in outcomes:
        if outcome.status == "undecided":
            mutant = by_id[outcome.ident]
            print(f"\nundecided ({mutant.kind}; {outcome.detail}):\n{mutant.diff()}")
    return _exit_code(counts)


def _exit_code(counts: dict[MutantStatus, int]) -> int:
    """0, or 3 when a mutant is undecided: its checks' `unknown` is not a verdict, and a
    score that leaves it out is not the whole answer."""
    if counts["undecided"]:
        print(
            f"ledgercheck: {counts['undecided']} mutant(s) undecided: a property check answered unknown "
            "(the solver could not decide it; each is named with its check); the score leaves them out",
            file=sys.stderr,
        )
        return EXIT_UNKNOWN
    return EXIT_OK
