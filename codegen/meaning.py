"""What a spec *means*, as digests: the freshness key of generated tests.

A generated test is stale when the spec's meaning changed, not when its bytes did: a
comment, a blank line, re-indentation, the order of tables or the spelling of a guard
(`a>b` for `a > b`) change nothing a test depends on. So the key is a digest of a canonical
form of the *compiled* spec (`model.spec.Spec` and the `model.ir` nodes under it): every
declaration, type, expression and statement, serialised with mappings sorted and without
source positions or source text. Docs, messages, claim texts and the log format are left
out as well: they change the text of generated tests (docstrings), never what a test does,
so `gen --check` reports them as text-only drift and the tests stay green. A notification's
`text` (its log line) is meaning, not words: conformance and the generated tests compare a
bound logger's lines with it.

The spec is cut into parts (the spec's header, enums, sets, policy, fields, globals, history
fields, on_state_change, notifications where declared, each query, event, environment and
property; and for every variant but the first, each part in which it differs from the
first), each with a short digest, so a stale test can say *what* changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from ledgercheck.model.ir import Pass, Type
from ledgercheck.model.spec import Spec, SpecFile

# Where something is written, and how: never part of the meaning.
SOURCE_FIELDS = frozenset(
    {
        "line",
        "text",
        "body_text",
        "when_text",
        "assert_text",
        "lemma_texts",
        "path",
        "sha256",
        "returns_text",
        "requires_text",
        "accepted_weakenings",
        "where",
        "drive_where",
    }
)
# Words for people (docstrings and failure messages read them from the spec at run time).
TEXT_FIELDS = frozenset({"doc", "message", "title", "variant_doc", "claim", "claim_text", "log"})
# The fields of `Spec` that are cut into parts of their own, or are per variant.
PART_FIELDS = frozenset({"queries", "events", "environments", "properties", "variant"})
# Declarations that are a part each; the rest of `Spec` (API names, state field, fleet
# size, variant names) is the part "spec".
OWN_PARTS = ("enums", "sets", "policy", "fields", "globals", "history", "on_state_change")
# Declarations younger than the key that are a part of their own only where a spec declares
# them (so a spec without them keeps its parts, and its digest).
DECLARED_PARTS = ("notifications",)
# Named traces to replay: no check and no generated test reads them. How a real class is
# bound (`[implementation]`) is read when the tests run, not baked into them. (`DISPLAY_FIELDS`:
# whether a field is carried across incarnations on purpose only changes how figures mark it.)
IGNORED_FIELDS = frozenset({"scenarios", "binding", "conform"})
DISPLAY_FIELDS = frozenset({"persistent"})
# Sequences that are sets: an environment's actions are a nondeterministic choice, a step
# property's events and a property's environments are lists of names.
UNORDERED_FIELDS = frozenset({"actions", "on", "environments"})
# Language features younger than the key: left out while at their default (no time, no
# outcome, no declared default environment), so a spec that uses none of them keeps the
# meaning, and its generated tests the key, they had before the features existed.
OPTIONAL_FIELDS = {
    "timer": False,
    "initial_policy": None,
    "counts_any_call": False,
    "duration": False,
    "raises": (),
    "returns": None,
    "clock": None,
    "declared_default_environment": None,
    "max_depth": None,
    "declared_reference": None,
    "after": False,
}
DIGEST_CHARS = 12


def canonical(value: Any) -> Any:
    """A JSON value for a compiled spec object: dataclasses as objects tagged with their
    class (fields by name, source and text fields dropped), mappings with sorted keys,
    sequences in order (order is meaning there: statements, parameters, fields) except the
    few that are sets, `pass` statements left out."""
    if isinstance(value, Type):
        return {"type": value.kind, "enum": value.enum, "optional": value.optional}
    if is_dataclass(value) and not isinstance(value, type):
        data: dict[str, Any] = {"node": type(value).__name__}
        for item in fields(value):
            if item.name in SOURCE_FIELDS or item.name in TEXT_FIELDS or item.name in DISPLAY_FIELDS:
                continue
            if item.name in OPTIONAL_FIELDS and getattr(value, item.name) == OPTIONAL_FIELDS[item.name]:
                continue
            form = canonical(getattr(value, item.name))
            if item.name in UNORDERED_FIELDS and isinstance(form, list):
                form = sorted(form, key=lambda v: json.dumps(v, sort_keys=True))
            data[item.name] = form
        return data
    if isinstance(value, Mapping):
        return {str(key): canonical(item) for key, item in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):  # a `pass` does nothing wherever it stands
        return [canonical(item) for item in value if not isinstance(item, Pass)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"no canonical form for {type(value).__name__}")  # a new kind of spec object: extend this


def _digest(value: Any, chars: int = DIGEST_CHARS) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:chars]


def variant_parts(spec: Spec) -> dict[str, Any]:
    """The canonical form of one compiled variant, cut into named parts."""
    parts: dict[str, Any] = {}
    header = {}
    for item in fields(spec):
        name = item.name
        if name in OWN_PARTS:
            parts[name] = canonical(getattr(spec, name))
        elif name in DECLARED_PARTS:
            if getattr(spec, name):
                parts[name] = canonical(getattr(spec, name))
        elif name not in PART_FIELDS | IGNORED_FIELDS | SOURCE_FIELDS | TEXT_FIELDS:
            if name in OPTIONAL_FIELDS and getattr(spec, name) == OPTIONAL_FIELDS[name]:
                continue
            header[name] = canonical(getattr(spec, name))
    parts["spec"] = header
    for kind, table in (
        ("query", spec.queries),
        ("event", spec.events),
        ("environment", spec.environments),
        ("property", spec.properties),
    ):
        for name, entry in table.items():
            parts[f"{kind} {name}"] = canonical(entry)
    return parts


@dataclass(frozen=True)
class Meaning:
    """The freshness key of a spec file: one digest, and one per part."""

    digest: str
    parts: Mapping[str, str]


def meaning_of(spec_file: SpecFile) -> Meaning:
    """Part digests of the first variant under the part's name, and of every other variant
    under "<part>, variant <name>" where it differs from the first (its patches, compiled)."""
    names = list(spec_file.variants)
    base = variant_parts(spec_file.variant(names[0]))
    digests = {name: _digest(value) for name, value in base.items()}
    for variant in names[1:]:
        for name, value in variant_parts(spec_file.variant(variant)).items():
            if base.get(name) != value:
                digests[f"{name}, variant {variant}"] = _digest(value)
    ordered = dict(sorted(digests.items()))
    return Meaning(_digest(ordered, 64), ordered)


def changed_parts(recorded: Mapping[str, str], current: Mapping[str, str]) -> list[str]:
    """What differs between two part-digest tables, in words, one entry per part however
    many variants it changed in (`event mark_loaded (and in variants fixed, refit_keeps_streak)`,
    `event mark_loaded, variant fixed (removed)`), not the part once per variant."""
    changed: dict[tuple[str, str], list[str | None]] = {}  # (part, how) -> the variants (None: the first's)
    for name in sorted(set(recorded) | set(current)):
        how = " (removed)" if name not in current else " (added)" if name not in recorded else ""
        if not how and recorded[name] == current[name]:
            continue
        part, _, variant = name.partition(", variant ")
        changed.setdefault((part, how), []).append(variant or None)
    words = []
    for (part, how), variants in changed.items():
        named = [v for v in variants if v is not None]
        if None not in variants:
            plural = "s" if len(named) > 1 else ""
            words.append(f"{part}, variant{plural} {', '.join(named)}{how}")
        elif named:
            words.append(f"{part}{how} (and in variant{'s' if len(named) > 1 else ''} {', '.join(named)})")
        else:
            words.append(f"{part}{how}")
    return words


__all__ = ["Meaning", "canonical", "changed_parts", "meaning_of", "variant_parts"]
