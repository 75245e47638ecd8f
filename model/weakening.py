"""What a change to the spec takes away from what `ci` checks: `ledgercheck ci --base REF`.

`ci` judges a spec by its own expectations, so a change that checks less passes it: a property
deleted, an expectation turned from "holds" to "violated" (`gen` then writes tests that expect
the violation: the regression is absorbed, and stays green), a callers' contract added that
rules the failing calls out of the verdicts, a smaller fleet, a lower depth, a narrower policy
range. Each is in the pull request's diff, among the edits that made it; none is a failure of
the spec's. So, given the spec as it was at the base of the change (a git revision or a file),
`ci` compares the two and fails on every such change, unless the spec accepts it by name, with a
reason, in its `[weakened]` table (reviewed in the same diff):

    [weakened]
    "property no_repeat_spurious_condemnation" = "folded into suspicion_survives_abort (#3601)"

A property whose `when` or `assert` was edited is judged by what it means: the changed spec
is searched (and the answer proved) for a reachable state, or call, that the edited property
accepts and the base's version rejects (`accepts_more`); one is a weakening, with its trace. An
edit that only reads otherwise, or accepts more only where no run goes (`verdict_reads <= 2`
where no run reads a verdict twice), checks no less and says nothing. The rest is compared as
declared: a changed `requires` fails as an added one does (it may allow fewer calls), and a
policy default that moved is named but fails nothing (the verdicts are judged there).
"""

from __future__ import annotations

import posixpath
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from ledgercheck.model import ir
from ledgercheck.model.conformance.defaults import searched_by_default
from ledgercheck.model.errors import LedgercheckError, UsageError
from ledgercheck.model.result import Status
from ledgercheck.model.runs import DEFAULT_DEPTH, PROOF_CALL_SECONDS
from ledgercheck.model.spec import Property, PropertyKind, Spec, SpecFile, load_spec
from ledgercheck.model.textout import steps_text

_Note = Callable[[str, str], None]
"""What the comparisons call with each weakening they find (`compare`'s `weaker`)."""


@dataclass(frozen=True)
class Weakening:
    """One change that checks less: `key` is what `[weakened]` names to accept it."""

    key: str
    what: str

    def line(self) -> str:
        return f"{self.key}: {self.what}"


@dataclass(frozen=True)
class Comparison:
    """The spec against its base: what checks less (failing unless accepted), what `[weakened]`
    accepts of it, and what changed that ci cannot judge (named only)."""

    base: str
    weakened: tuple[Weakening, ...]
    accepted: tuple[tuple[Weakening, str], ...]
    changed: tuple[Weakening, ...]
    stale: tuple[str, ...]
    """Keys `[weakened]` accepts that no change made here: left from an earlier change."""


def base_spec(spec_file: SpecFile, base: str) -> SpecFile | None:
    """The spec at `base`: a spec file's path, else a git revision of the spec's own
    repository (`origin/main`, a commit), the spec read there with every file it `extends`
    read there too, under the path it had there (a spec renamed since is found by git's rename
    detection); None where the spec did not exist there (a new spec weakens nothing). An empty
    base (an unset variable in a CI script), one that names no commit (`:0`, the index, would
    compare the change with itself), or a base that does not load, is bad input."""
    if not base.strip():
        raise UsageError("--base is empty (an unset variable?): name the revision the change starts from")
    given = Path(base)
    if given.suffix == ".toml" and given.is_file():
        try:
            return load_spec(given)
        except LedgercheckError as exc:
            raise UsageError(f"--base {base}: the spec there does not load: {exc}") from exc
    root = Path(_git(Path(spec_file.path).resolve().parent, base, "rev-parse", "--show-toplevel").strip())
    if _git_ok(root, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}") is None:
        raise UsageError(
            f"--base {base}: not a spec file, and not a revision of {root} git knows (fetch it first, "
            "e.g. `git fetch origin main`, with `fetch-depth: 0` in GitHub Actions)"
        )
    here = Path(spec_file.path).resolve().relative_to(root).as_posix()
    there = here if _git_ok(root, "cat-file", "-e", f"{base}:{here}") is not None else _renamed_from(root, base, here)
    if there is None:
        return None
    with tempfile.TemporaryDirectory(prefix="ledgercheck-base-") as folder:
        pending, seen = [there], set()
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            text = _git_ok(root, "show", f"{base}:{name}")
            if text is None:
                continue  # an `extends` git has no file for: loading it says which, where
            target = Path(folder, name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            parent = _extends(text)
            if parent is not None:
                pending.append(posixpath.normpath(posixpath.join(posixpath.dirname(name), parent)))
        try:
            return load_spec(Path(folder, there))
        except LedgercheckError as exc:
            shown = str(exc).replace(str(Path(folder)) + "/", f"{base}:")
            raise UsageError(f"--base {base}: the spec there does not load: {shown}") from exc


def _extends(text: str) -> str | None:
    try:
        value = tomllib.loads(text).get("extends")
    except tomllib.TOMLDecodeError:
        return None  # loading the file says where it is wrong
    return value if isinstance(value, str) else None


def _renamed_from(root: Path, base: str, here: str) -> str | None:
    """The path at `base` of the file now at `here`, where git sees a rename."""
    listing = _git_ok(root, "diff", "--find-renames", "--name-status", base, "--", ".") or ""
    for line in listing.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0].startswith("R") and parts[2] == here:
            return parts[1]
    return None


def _git_ok(root: Path, *argv: str) -> str | None:
    """git's output, or None where it exits non-zero."""
    try:
        done = subprocess.run(["git", "-C", str(root), *argv], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise UsageError(f"--base: git could not be run ({exc})") from exc
    return done.stdout if done.returncode == 0 else None


def _git(folder: Path, base: str, *argv: str) -> str:
    found = _git_ok(folder, *argv)
    if found is None:
        raise UsageError(f"--base {base}: not a spec file, and {folder} is in no git repository")
    return found


def compare(base: SpecFile, head: SpecFile, base_name: str) -> Comparison:
    """Every change from `base` to `head` that checks less, split by what `head`'s
    `[weakened]` accepts. An entry accepts only in the change that writes it (absent, or with
    another reason, at the base): one left from an earlier change accepted that change, and
    would otherwise pass the next one that weakens the same thing further."""
    found: dict[str, Weakening] = {}
    changed: dict[str, Weakening] = {}

    def weaker(key: str, what: str) -> None:
        found.setdefault(key, Weakening(key, what))

    for variant in base.variants:
        if variant not in head.variants:
            weaker(f"variant {variant}", "removed: nothing is checked of it any more")
    flagged: set[str] = set()
    for variant in (v for v in base.variants if v in head.variants):
        b, h = base.variant(variant), head.variant(variant)
        _spec_settings(b, h, weaker, changed)
        _environments(b, h, weaker, changed)
        _properties(b, h, variant, weaker, changed, flagged, _history_edits(b, h))
        _events(b, h, weaker)
    before = dict(base.variant().accepted_weakenings)
    accepts = {k: why for k, why in head.variant().accepted_weakenings.items() if before.get(k) != why}
    weakened = tuple(w for w in found.values() if w.key not in accepts)
    accepted = tuple((w, accepts[w.key]) for w in found.values() if w.key in accepts)
    stale = tuple(key for key in accepts if key not in found)
    return Comparison(base_name, weakened, accepted, tuple(changed.values()), stale)


def _spec_settings(b: Spec, h: Spec, weaker: _Note, changed: dict[str, Weakening]) -> None:
    """The fleet, the depth, the policy ranges and `[conform]`, of one variant."""
    if h.default_shards < b.default_shards:
        weaker("default_shards", f"lowered from {b.default_shards} to {h.default_shards}: the verdicts are about fewer")
    depth_b, depth_h = b.search_depth(None, DEFAULT_DEPTH), h.search_depth(None, DEFAULT_DEPTH)
    if depth_h < depth_b:
        weaker("max_depth", f"lowered from {depth_b} to {depth_h}: the verdicts search less deep")
    for name, decl in b.policy.items():
        now = h.policy.get(name)
        if now is None:
            continue
        if now.min > decl.min or now.max < decl.max:
            weaker(
                f"policy {name}",
                f"range [{decl.min}, {decl.max}] narrowed to [{now.min}, {now.max}] in {h.variant}: "
                "--symbolic-policy and conform's other policies try fewer values",
            )
        elif now.default != decl.default:
            key = f"policy {name}"
            what = f"default {decl.default} -> {now.default} in {h.variant}: the verdicts are judged there"
            changed.setdefault(key, Weakening(key, what))
    for setting, default in searched_by_default(b.default_shards).items():
        was = getattr(b.conform, setting, None) if b.conform is not None else None
        now_value = getattr(h.conform, setting, None) if h.conform is not None else None
        was, now_value = (default if was is None else was), (default if now_value is None else now_value)
        if now_value < was:
            weaker(f"conform {setting}", f"lowered from {was} to {now_value}: conformance searches less")


def _environments(b: Spec, h: Spec, weaker: _Note, changed: dict[str, Weakening]) -> None:
    """An environment or one of its actions removed (its runs are no longer checked), fairness
    added (a liveness verdict assumes more); an action's guard or body edited is named: it may
    make runs the properties see fewer or other ones."""
    for name, env in b.environments.items():
        now = h.environments.get(name)
        if now is None:
            weaker(f"environment {name}", "removed: nothing is checked in it any more")
            continue
        actions = {a.name: a for a in now.actions}
        for action in env.actions:
            edited = actions.get(action.name)
            if edited is None:
                weaker(f"action {name}.{action.name}", "removed: the runs that took it are no longer checked")
            elif _expanded((edited.when, edited.body), h) != _expanded((action.when, action.body), b):
                key = f"action {name}.{action.name}"
                changed.setdefault(key, Weakening(key, "its guard or body changed: read whether runs are lost"))
        added = [f for f in now.fairness if f not in env.fairness]
        if added:
            weaker(
                f"fairness {name}",
                f"assumed more ({'; '.join(f.text() for f in added)}): a liveness verdict counts fewer runs",
            )


def _properties(
    b: Spec,
    h: Spec,
    variant: str,
    weaker: _Note,
    changed: dict[str, Weakening],
    flagged: set[str],
    history_edits: list[str],
) -> None:
    """Each property of the base's: removed, expected violated, checked in fewer places or
    over fewer calls, of another kind, or (its `when` or `assert` meaning otherwise, with the
    sets and queries they read) accepting what the base's rejected, in some variant both specs
    have (`flagged`: those found so in an earlier variant); the history it reads kept otherwise
    by one of `history_edits` (`_history_edits`)."""
    for name, was in b.properties.items():
        now = h.properties.get(name)
        if now is None:
            weaker(f"property {name}", "removed: nothing checks it any more")
            continue
        if was.expect.get(variant) == "holds" and now.expect.get(variant) == "violated":
            weaker(
                f"expect {variant} / {name}",
                "expected to hold, now expected violated: the generated tests expect the violation",
            )
        lost = [e for e in b.environments if was.applies_to(e) and e in h.environments and not now.applies_to(e)]
        if lost:
            weaker(f"environments of {name}", f"no longer checked in {', '.join(lost)}")
        if was.counts_any_call and not now.counts_any_call:
            weaker(f"calls of {name}", 'no longer counts the calls outside the callers\' contracts (calls = "any")')
        if was.kind != now.kind or was.fleet != now.fleet:
            weaker(
                f"kind of {name}",
                f"{_kind(was)} -> {_kind(now)}: it no longer checks what it checked",
            )
            continue
        if was.kind == PropertyKind.STEP:
            dropped = [event for event in was.on if event not in now.on]
            if dropped:
                weaker(f"on of {name}", f"no longer checked at the calls of {', '.join(dropped)}")
        read = _history_read(was, b)
        edited = [event for event in history_edits if read & _history_written(b, event)]
        if edited and now.kind != PropertyKind.EVENTUALLY:
            weaker(
                f"history of {name}",
                f"the history it reads ({', '.join(sorted(read))}) is kept otherwise by {', '.join(edited)}",
            )
        if _meaning(was, b) == _meaning(now, h):
            continue
        key = f"property {name}"
        if key in flagged:  # one variant where it accepts more is enough to say so
            continue
        what = accepts_more(b, h, variant, was, now)
        if what is not None and what.startswith(ACCEPTS):
            flagged.add(key)
            changed.pop(key, None)
            weaker(key, f"in {variant}, {what}")
        elif what is not None:
            changed.setdefault(key, Weakening(key, what))


def _kind(prop: Property) -> str:
    return f"{prop.kind.value}{' (fleet)' if prop.fleet else ''}"


def _events(b: Spec, h: Spec, weaker: _Note) -> None:
    """A `requires` added or meaning otherwise (its sets and queries read as they are now):
    the verdicts where any call may be made count fewer calls."""
    for name, was in b.events.items():
        now = h.events.get(name)
        if now is None or now.requires is None:
            continue
        if was.requires is None:
            weaker(
                f"requires {name}",
                f"a callers' contract added ({now.requires_text}): calls it rules out are not counted",
            )
        elif _expanded(was.requires, b) != _expanded(now.requires, h):
            weaker(
                f"requires {name}",
                f"the callers' contract changed from ({was.requires_text}) to ({now.requires_text}) in {h.variant}: "
                "calls the old one allowed may not be counted",
            )


def _meaning(prop: Property, spec: Spec) -> tuple[object, ...]:
    """What a property's `when` and `assert` say, the queries they read spelled out."""
    return (_expanded(prop.when, spec), _expanded(prop.check, spec))


def _expanded(node: object, spec: Spec) -> object:
    """An expression with every query it reads replaced by the query's own expression (a set
    is compiled into its members already): `suspected` narrowed reads the same text."""
    if isinstance(node, ir.QueryRef):
        query = spec.queries.get(node.name)
        expr = getattr(query, "expr", None)
        return ("query", node.name, _expanded(expr, spec)) if expr is not None else node
    if isinstance(node, tuple):
        return tuple(_expanded(item, spec) for item in node)
    if hasattr(node, "__dataclass_fields__"):
        kept = (f for f in node.__dataclass_fields__ if f not in _WHERE)
        return (type(node).__name__, *(_expanded(getattr(node, f), spec) for f in kept))
    return node


_WHERE = ("line", "text")
"""A statement's place and spelling: an edit above it moves every line below, and means nothing."""


def _history_read(prop: Property, spec: Spec) -> set[str]:
    history = {h.name for h in spec.history}
    return {name for name in ir.field_reads([prop.when, prop.check, *prop.lemmas]) if name in history}


def _history_edits(b: Spec, h: Spec) -> list[str]:
    """The events whose `history` block changed, and `(initial values)` where a history
    field's declaration did."""
    edited = [
        name
        for name, event in b.events.items()
        if name in h.events and _expanded(event.history, b) != _expanded(h.events[name].history, h)
    ]
    if {(v.name, v.type, v.initial) for v in b.history} != {(v.name, v.type, v.initial) for v in h.history}:
        edited.append("(the history fields' declarations)")
    return edited


def _history_written(spec: Spec, event: str) -> set[str]:
    if event not in spec.events:
        return {v.name for v in spec.history}
    return {n.name for n in ir.walk(spec.events[event].history) if isinstance(n, ir.Assign)}


ACCEPTS = "now accepts"
"""How a property's finding begins where its edit accepts what the base's rejected."""


def accepts_more(base: Spec, head: Spec, variant: str, was: Property, now: Property) -> str | None:
    """Whether a property whose `when` or `assert` was edited accepts, in some reachable state
    of the changed spec, what the base's version rejected: a question about the changed spec,
    asked as a property of its own (the base's verdict wherever the new one passes), checked
    in each environment both apply to at the spec's fleet and policy, to its depth and by a
    proof past it. A sentence beginning with `ACCEPTS` where it does (the first such step);
    else what was found (checks no less, or could not be compared); None where nothing is to
    be said."""
    if was.kind == PropertyKind.EVENTUALLY:
        return "its when or assert changed (a liveness property: read whether it checks less)"
    question = _no_less(was, now, variant)
    environments = [e for e in head.environments if was.applies_to(e) and now.applies_to(e) and e in base.environments]
    from ledgercheck.model import engines  # Z3 loads only where a property was edited

    depth = head.search_depth(None, DEFAULT_DEPTH)
    proved = True
    for environment in environments:
        try:
            found = engines.check_property(
                head,
                environment,
                question,
                shards=head.default_shards,
                policy=head.default_policy(),
                max_depth=depth,
                max_traces=1,
                timeout=PROOF_CALL_SECONDS,
                lax=False,
                prove=True,
            )
        except (UsageError, KeyError, AttributeError, TypeError, ValueError) as exc:
            return f"its when or assert changed, and could not be compared with the base's ({exc}): read it"
        if found.status == Status.VIOLATED and found.traces:
            trace = min(found.traces, key=lambda t: t.depth)
            return (
                f"{ACCEPTS} what the base's version rejected, in {environment}: after {steps_text(trace)} "
                f"(shard {trace.focus})"
            )
        proved = proved and found.status == Status.PROVED
    if not proved:
        return f"its when or assert changed; it rejects what the base's did up to depth {depth}, not proved past it"
    return None


def _no_less(was: Property, now: Property, variant: str) -> Property:
    """The property "wherever `now` passes, `was` passes": for an invariant, of every
    state; for a step property, of every call of an event both watch."""

    def passes(prop: Property) -> ir.Expr:
        return prop.check if prop.when is None else ir.BoolOp("or", (ir.Not(prop.when), prop.check))

    check = ir.BoolOp("or", (ir.Not(passes(now)), passes(was)))
    on = tuple(event for event in was.on if event in now.on)
    return replace(
        now,
        name=f"{now.name} (as at the base)",
        when=None,
        check=check,
        on=on,
        lemmas=(),
        expect={variant: "holds"},
        view=None,
    )


def lines(items: Iterable[Weakening]) -> list[str]:
    return [item.line() for item in items]


__all__ = ["Comparison", "Weakening", "base_spec", "compare", "lines"]
