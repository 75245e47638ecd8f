"""The gate `gen` passes before it writes: every verdict matches the spec's expectations.

Generated tests take their expected values from the variant the spec expects to hold a
property. If that variant violates it (a regression, e.g. one line of the fix deleted), or a
variant expected to violate it no longer does, regenerating would turn the regression into
the expected behaviour: the tests that would fail are deleted and the others rewritten to
expect the broken values. So `gen` first establishes every verdict (every variant, property
and environment the property applies to) and writes nothing unless all of them are as the
spec expects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledgercheck.model import ir
from ledgercheck.model.errors import EXIT_MISMATCH, EXIT_OK, EXIT_UNKNOWN
from ledgercheck.model.result import Result, Status
from ledgercheck.model.runs import CheckRequest, run_checks
from ledgercheck.model.spec import SpecFile

VerdictKey = tuple[str, str, str]  # (variant, property, environment)


@dataclass(frozen=True)
class Verdicts:
    """Every applicable (variant, property, environment) result of one spec file."""

    results: Mapping[VerdictKey, Result]

    @property
    def mismatches(self) -> list[Result]:
        return [r for r in self.results.values() if r.matches is False]

    @property
    def unknown(self) -> list[Result]:
        return [r for r in self.results.values() if r.verdict == "unknown"]

    @property
    def exit_code(self) -> int:
        if self.unknown:
            return EXIT_UNKNOWN
        return EXIT_MISMATCH if self.mismatches else EXIT_OK

    def violating(self, prop: str) -> list[str]:
        """The variants with a counterexample to `prop` in some environment, in order."""
        names: list[str] = []
        for (variant, name, _), result in self.results.items():
            if name == prop and result.status == Status.VIOLATED and variant not in names:
                names.append(variant)
        return names

    def checked_variants(self, prop: str) -> list[str]:
        names: list[str] = []
        for variant, name, _ in self.results:
            if name == prop and variant not in names:
                names.append(variant)
        return names


def verdict_request(spec_file: SpecFile, max_depth: int, max_traces: int) -> CheckRequest:
    """The checks behind every verdict `gen` and `ci` judge a spec by: each variant's default
    fleet and policy, and no lax search (traces outside the callers' contracts decide no
    verdict and make no test). A caller that needs only some of them narrows it with
    `overlay` and gets the very checks `ci` would run for those."""
    return CheckRequest(
        spec_file, policy=spec_file.variant().default_policy(), max_depth=max_depth, max_traces=max_traces, lax=False
    )


def establish(spec_file: SpecFile, max_depth: int, max_traces: int, progress: Any = None) -> Verdicts:
    """Check every variant and property in every environment of the spec, with its
    default fleet and policy: the same checks `plan_tests` draws its traces from."""
    base = spec_file.variant()
    key = (base.sha256, tuple(spec_file.variants), max_depth, max_traces)
    if key in _ESTABLISHED:
        return _ESTABLISHED[key]
    found = run_checks(verdict_request(spec_file, max_depth, max_traces), progress)
    verdicts = Verdicts({(r.variant, r.property, r.environment): r for r in found if r.status != Status.NOT_APPLICABLE})
    if not verdicts.unknown:  # an undecided verdict may depend on the budget: never reused
        while len(_ESTABLISHED) >= _REMEMBERED:
            del _ESTABLISHED[next(iter(_ESTABLISHED))]
        _ESTABLISHED[key] = verdicts
    return verdicts


# The verdicts of the last few spec texts this process established: `ci` and then `gen` on
# the same file (one process, e.g. a test or a script) search once. Keyed by the spec's bytes,
# so any edit, a comment included, searches afresh.
_REMEMBERED = 4
_ESTABLISHED: dict[tuple[str, tuple[str, ...], int, int], Verdicts] = {}


def describe(result: Result) -> str:
    """One line per verdict that stops `gen`: where, what was found, what the spec says."""
    where = f"{result.variant} / {result.property} ({result.environment}, {result.shards} shards)"
    if result.status == Status.VIOLATED:
        shortest = min((t.depth for t in result.traces), default=result.depth)
        found = f"violated (shortest trace: {shortest} steps)"
    elif result.verdict == "holds":
        found = f"holds (no violation up to depth {result.depth})"
    else:
        found = f"unknown ({result.note or 'the solver could not decide'})"
    expected = f"the spec expects {result.expected}" if result.expected else "the spec states no expectation"
    return f"  {where}: {found}; {expected}"


def report(verdicts: Verdicts, command: str, writing: bool) -> list[str]:
    """What `gen` (or `gen --check`, not `writing`) prints when the gate is closed."""
    lines = []
    if verdicts.mismatches:
        lines.append(f"{command}: {len(verdicts.mismatches)} verdict(s) differ from the spec's expectations:")
        lines += [describe(r) for r in verdicts.mismatches]
    if verdicts.unknown:
        lines.append(f"{command}: {len(verdicts.unknown)} verdict(s) could not be established:")
        lines += [describe(r) for r in verdicts.unknown]
    consequence = "nothing was written: regenerating" if writing else "regenerating"
    lines.append(
        f"{command}: {consequence} now would make the generated tests expect this behaviour; "
        "fix the spec (or its `expect`) first."
    )
    return lines


def nothing_line(spec_file: SpecFile, name: str, where: str, results: Sequence[Any]) -> str:
    """Why a property checks nothing: its `when` is never true, or (a step property without
    one) none of its events is ever called in the environments it is checked in."""
    prop = spec_file.variant().properties[name]
    if prop.when is None:
        environments = ", ".join(dict.fromkeys(r.environment for r in results if r.property == name))
        return (
            f"{name}: holds, but no call of {' or '.join(prop.on)} is ever made ({environments}), in every variant: "
            "it checks nothing (an environment whose actions never call it?)"
        )
    return (
        f"{name}: holds, but its when is never true {where}, in every variant: it checks nothing (a when that "
        "cannot happen, or a misread field?)"
    )


ALSO_OUTSIDE = ", also outside the callers' contracts"
NOWHERE = ("in any reachable state", "at any call")


def checking_nothing(spec_file: SpecFile, results: Sequence[Any]) -> dict[str, str]:
    """The properties that check nothing, each with where its `when` is never true. In each
    variant, either an environment that may call anything proved the `when` never true at
    any call at all (every other environment only makes such calls: it is never true there
    either), or every environment proved it never true where it was checked; and not only
    within the callers' contracts (the lax traces still exercise such a property). A `when`
    that reads a policy constant is left out: at another policy it may come true (ci judges
    the default one)."""
    by_property: dict[str, dict[str, list[Any]]] = {}
    for result in results:
        by_property.setdefault(result.property, {}).setdefault(result.variant, []).append(result)
    empty: dict[str, str] = {}
    for name, variants in by_property.items():
        wheres: set[str] = set()
        for variant, found in variants.items():
            spec = spec_file.variant(variant)
            prop = spec.properties[name]
            if any(isinstance(n, ir.PolicyRef) for n in ir.walk(prop.when)):
                break
            anywhere = [
                r.vacuous
                for r in found
                if r.vacuous.endswith(ALSO_OUTSIDE)
                or (r.vacuous in NOWHERE and spec.environment(r.environment).any_call)
            ]
            everywhere = all(r.vacuous in NOWHERE or r.vacuous.endswith(ALSO_OUTSIDE) for r in found)
            if not anywhere and not everywhere:
                break
            wheres.update(anywhere or [r.vacuous for r in found])
        else:
            empty[name] = " and ".join(sorted(wheres))
    return empty


__all__ = ["Verdicts", "checking_nothing", "describe", "establish", "nothing_line", "report", "verdict_request"]
