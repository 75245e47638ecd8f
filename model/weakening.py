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

import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ledgercheck.model import ir
from ledgercheck.model.errors import UsageError
from ledgercheck.model.result import Status
from ledgercheck.model.runs import DEFAULT_DEPTH
from ledgercheck.model.spec import Property, PropertyKind, Spec, SpecFile, load_spec_text

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
    repository (`origin/main`, a commit); None where the spec did not exist there (a new spec
    weakens nothing). A revision git cannot read, or a base that does not load, is bad input."""
    path = Path(spec_file.path)
    if base.endswith(".toml") and Path(base).is_file():
        return load_spec_text(Path(base).read_text(encoding="utf-8"), path.name)
    folder = path.resolve().parent
    try:
        shown = subprocess.run(
            ["git", "-C", str(folder), "show", f"{base}:./{path.name}"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as exc:
        raise UsageError(f"--base {base}: git could not be run ({exc})") from exc
    if shown.returncode != 0:
        known = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if known.returncode == 0:  # the revision exists; the spec did not, there
            return None
        why = shown.stderr.strip().splitlines()[-1] if shown.stderr.strip() else f"exit {shown.returncode}"
        raise UsageError(f"--base {base}: not a spec file, and git cannot read {path.name} at it ({why})")
    try:
        return load_spec_text(shown.stdout, f"{base}:{path.name}")
    except Exception as exc:
        raise UsageError(f"--base {base}: the spec there does not load: {exc}") from exc


def compare(base: SpecFile, head: SpecFile, base_name: str) -> Comparison:
    """Every change from `base` to `head` that checks less, split by what `head`'s
    `[weakened]` accepts."""
    found: dict[str, Weakening] = {}
    changed: dict[str, Weakening] = {}

    def weaker(key: str, what: str) -> None:
        found.setdefault(key, Weakening(key, what))

    for variant in base.variants:
        if variant not in head.variants:
            weaker(f"variant {variant}", "removed: nothing is checked of it any more")
    _spec_settings(base, head, weaker, changed)
    compared: set[str] = set()
    for variant in (v for v in base.variants if v in head.variants):
        _properties(base, head, variant, weaker, changed, compared)
        _contracts(base, head, variant, weaker)
    accepts = dict(head.variant().accepted_weakenings)
    weakened = tuple(w for w in found.values() if w.key not in accepts)
    accepted = tuple((w, accepts[w.key]) for w in found.values() if w.key in accepts)
    stale = tuple(key for key in accepts if key not in found)
    return Comparison(base_name, weakened, accepted, tuple(changed.values()), stale)


def _spec_settings(base: SpecFile, head: SpecFile, weaker: _Note, changed: dict[str, Weakening]) -> None:
    """The fleet, the depth, the environments, the policy ranges and `[conform]`."""
    b, h = base.variant(), head.variant()
    if h.default_shards < b.default_shards:
        weaker(
            "default_shards",
            f"lowered from {b.default_shards} to {h.default_shards}: the verdicts are about {h.default_shards} shards",
        )
    depth_b, depth_h = b.search_depth(None, DEFAULT_DEPTH), h.search_depth(None, DEFAULT_DEPTH)
    if depth_h < depth_b:
        weaker("max_depth", f"lowered from {depth_b} to {depth_h}: the verdicts search less deep")
    for name in b.environments:
        if name not in h.environments:
            weaker(f"environment {name}", "removed: nothing is checked in it any more")
    for name, decl in b.policy.items():
        now = h.policy.get(name)
        if now is None:
            continue
        if now.min > decl.min or now.max < decl.max:
            weaker(
                f"policy {name}",
                f"range [{decl.min}, {decl.max}] narrowed to [{now.min}, {now.max}]: "
                "--symbolic-policy and conform's other policies try fewer values",
            )
        elif now.default != decl.default:
            key = f"policy {name}"
            changed.setdefault(key, Weakening(key, f"default {decl.default} -> {now.default}: the verdicts are there"))
    for setting in ("depth", "random", "shards", "run_calls"):
        was = getattr(b.conform, setting, None) if b.conform is not None else None
        now_value = getattr(h.conform, setting, None) if h.conform is not None else None
        # back to conform's own default (None): ci's note judges a setting against those
        if was is not None and now_value is not None and now_value < was:
            weaker(f"conform {setting}", f"lowered from {was} to {now_value}: conformance searches less")


def _properties(
    base: SpecFile, head: SpecFile, variant: str, weaker: _Note, changed: dict[str, Weakening], flagged: set[str]
) -> None:
    """Each property of the base's: removed, expected violated, checked in fewer places or
    over fewer calls, or (its `when` or `assert` edited) accepting what the base's rejected,
    in some variant both specs have (`flagged`: those found so in an earlier variant)."""
    b, h = base.variant(variant), head.variant(variant)
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
        if was.kind == PropertyKind.STEP and now.kind == PropertyKind.STEP:
            dropped = [event for event in was.on if event not in now.on]
            if dropped:
                weaker(f"on of {name}", f"no longer checked at the calls of {', '.join(dropped)}")
        if _words(was.when_text) != _words(now.when_text) or _words(was.assert_text) != _words(now.assert_text):
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


def _contracts(base: SpecFile, head: SpecFile, variant: str, weaker: _Note) -> None:
    """A `requires` added or changed: the verdicts where any call may be made count fewer calls."""
    b, h = base.variant(variant), head.variant(variant)
    for name, was in b.events.items():
        now = h.events.get(name)
        if now is None or now.requires is None or _words(now.requires_text) == _words(was.requires_text):
            continue
        if was.requires is None:
            weaker(
                f"requires {name}",
                f"a callers' contract added ({now.requires_text}): calls it rules out are not counted",
            )
        else:
            weaker(
                f"requires {name}",
                f"the callers' contract changed from ({was.requires_text}) to ({now.requires_text}): "
                "calls the old one allowed may not be counted",
            )


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
    if was.kind != now.kind or was.fleet != now.fleet:
        return f"its kind or scope changed ({was.kind.value} -> {now.kind.value}): read whether it checks less"
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
                lax=False,
                prove=True,
            )
        except (UsageError, KeyError, AttributeError, TypeError, ValueError) as exc:
            return f"its when or assert changed, and could not be compared with the base's ({exc}): read it"
        if found.status == Status.VIOLATED and found.traces:
            trace = min(found.traces, key=lambda t: t.depth)
            return (
                f"{ACCEPTS} what the base's version rejected, in {environment}: after "
                f"{', '.join(_step_text(s) for s in trace.steps[1:])} (shard {trace.focus})"
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


def _step_text(step: Any) -> str:
    shards = ", ".join(str(v) for v in step.shards.values())
    args = ", ".join(f"{k}={v}" for k, v in step.args.items())
    return f"{step.action}({', '.join(x for x in (shards, args) if x)})"


def _words(text: str) -> str:
    return " ".join(text.split())


def lines(items: Iterable[Weakening]) -> list[str]:
    return [item.line() for item in items]


__all__ = ["Comparison", "Weakening", "base_spec", "compare", "lines"]
