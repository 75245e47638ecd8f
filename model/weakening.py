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

What is compared is what the spec declares, not what it means: a `when` or an `assert` that
changed is named (ci cannot tell a stronger one from a weaker one without a search it does not
run) but fails nothing, and so is a policy default that moved (the verdicts are judged there).
A changed `requires` fails as an added one does: it may allow fewer calls.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ledgercheck.model.errors import UsageError
from ledgercheck.model.runs import DEFAULT_DEPTH
from ledgercheck.model.spec import SpecFile, load_spec_text

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
    for variant in (v for v in base.variants if v in head.variants):
        _properties(base, head, variant, weaker, changed)
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


def _properties(base: SpecFile, head: SpecFile, variant: str, weaker: _Note, changed: dict[str, Weakening]) -> None:
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
        if _words(was.when_text) != _words(now.when_text) or _words(was.assert_text) != _words(now.assert_text):
            key = f"property {name}"
            changed.setdefault(key, Weakening(key, "its when or assert changed: read whether it checks less"))


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


def _words(text: str) -> str:
    return " ".join(text.split())


def lines(items: Iterable[Weakening]) -> list[str]:
    return [item.line() for item in items]


__all__ = ["Comparison", "Weakening", "base_spec", "compare", "lines"]
