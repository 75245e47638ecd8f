"""What a regeneration changes in `generated_tests/`, and why.

A rewritten test module can mean three different things: tests were added or removed (the
checker found other counterexamples), the expected values or steps of a test changed (the
spec now predicts something else), or only words changed (a doc, a message, a figure). The
first two are a change of behaviour and deserve a reviewer's eye; the third does not. This
module compares the old and the new text of each module by its syntax tree (docstrings and
comments set aside) and says which, so `gen` can report it and `gen --check` can tell
behaviour drift from text-only drift.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledgercheck.codegen import coverage
from ledgercheck.codegen.gate import Verdicts
from ledgercheck.codegen.meaning import changed_parts
from ledgercheck.model.spec import SpecFile

FRESHNESS_NAMES = ("SPEC_MEANING", "SPEC_PARTS", "SPEC_SHA256")


@dataclass(frozen=True)
class ModuleShape:
    """A generated module as code: its tests' bodies and the rest, without docstrings."""

    prop: str | None
    meaning: str | None
    parts: Mapping[str, str]
    tests: Mapping[str, str]
    rest: str


@dataclass(frozen=True)
class ModuleChange:
    name: str
    kind: str  # "added" | "removed" | "rewritten"
    behaviour: bool
    reason: str
    meaning: str = ""
    """Where the spec's meaning changed (`event recv_fin`), when it did."""

    def line(self) -> str:
        return f"  {self.kind} {self.name}: {self.reason}"


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            return body[1:]
    return body


def _constant(node: ast.stmt, name: str) -> Any:
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
        try:
            return ast.literal_eval(node.value)
        except ValueError:
            return None
    return None


def shape(text: str) -> ModuleShape | None:
    """None when the text is not Python (a hand-damaged file: any rewrite is a change)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    tests: dict[str, str] = {}
    rest: list[str] = []
    values: dict[str, Any] = {}
    for node in _without_docstring(tree.body):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            code = [node.args, *node.decorator_list, *_without_docstring(node.body)]
            tests[node.name] = "\n".join(ast.dump(part) for part in code)
            continue
        names = ("PROPERTY", *FRESHNESS_NAMES)
        found = next((n for n in names if _constant(node, n) is not None), None)
        if found is not None:
            values[found] = _constant(node, found)
            if found != "PROPERTY":
                continue
        rest.append(ast.dump(node))
    parts = values.get("SPEC_PARTS")
    return ModuleShape(
        values.get("PROPERTY") if isinstance(values.get("PROPERTY"), str) else None,
        values.get("SPEC_MEANING") if isinstance(values.get("SPEC_MEANING"), str) else None,
        parts if isinstance(parts, dict) else {},
        tests,
        "\n".join(rest),
    )


def _template_version(text: str) -> str:
    found = re.search(r"^# template version: (\S+)$", text, re.M)
    return found.group(1) if found else "?"


def _names(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _rewritten(name: str, old: str, new: str) -> ModuleChange:
    before, after = shape(old), shape(new)
    if before is None or after is None:
        return ModuleChange(name, "rewritten", True, "the committed file is not valid Python")
    reasons: list[str] = []
    versions = [_template_version(old), _template_version(new)]
    if versions[0] != versions[1]:
        reasons.append(f"the templates changed (version {versions[0]} -> {versions[1]})")
    added = [t for t in after.tests if t not in before.tests]
    removed = [t for t in before.tests if t not in after.tests]
    changed = [t for t in after.tests if t in before.tests and before.tests[t] != after.tests[t]]
    if added:
        reasons.append(f"{len(added)} test(s) added ({_names(added)})")
    if removed:
        reasons.append(f"{len(removed)} test(s) removed ({_names(removed)})")
    if changed:
        reasons.append(f"expected values or steps changed in {len(changed)} test(s) ({_names(changed)})")
    if before.rest != after.rest:
        reasons.append("the module's settings changed (property, expected variant or markers)")
    what = ""
    if before.meaning != after.meaning:
        parts = changed_parts(before.parts, after.parts) if before.parts else []
        what = _names(parts, 6) if parts else "recorded before meaning digests existed"
        reasons.append(f"the spec's meaning changed ({what})")
    if reasons:
        return ModuleChange(name, "rewritten", True, "; ".join(reasons), what)
    return ModuleChange(name, "rewritten", False, "only text changed (docs, messages, figures)")


def _coverage_event(name: str) -> str | None:
    """The event of a coverage module's file name (`test_branches_of_EVENT.py`), else None."""
    prefix = coverage.MODULE_PREFIX
    return name.removeprefix(prefix).removesuffix(".py") if name.startswith(prefix) else None


def _removed(name: str, old: str, spec_file: SpecFile, verdicts: Verdicts | None) -> ModuleChange:
    event = _coverage_event(name)
    if event == coverage.HOOK:
        return ModuleChange(name, "removed", True, f"[{coverage.HOOK}] has no `if` any more")
    if event is not None:
        return ModuleChange(name, "removed", True, f"the event {event} was removed or renamed in the spec")
    before = shape(old)
    prop = before.prop if before is not None and before.prop else name.removeprefix("test_").removesuffix(".py")
    if prop not in spec_file.variant().properties:
        return ModuleChange(name, "removed", True, f"the property {prop} was removed or renamed in the spec")
    if verdicts is None:
        return ModuleChange(name, "removed", True, f"the property {prop} no longer yields a regression test")
    checked = ", ".join(verdicts.checked_variants(prop)) or "none"
    violating = verdicts.violating(prop)
    if not violating:
        return ModuleChange(
            name, "removed", True, f"{prop} no longer has a counterexample in any variant (checked: {checked})"
        )
    return ModuleChange(
        name,
        "removed",
        True,
        f"the counterexamples to {prop} (in {', '.join(violating)}) make no regression test: none of them "
        "passes on the variant expected to hold it and fails on the violating one",
    )


def _added(name: str, new: str, verdicts: Verdicts | None) -> ModuleChange:
    after = shape(new)
    event = _coverage_event(name)
    if event is not None:
        count = len(after.tests) if after is not None else 0
        what = f"[{coverage.HOOK}]" if event == coverage.HOOK else f"the event {event}"
        return ModuleChange(name, "added", True, f"coverage tests of {what} ({count} branch(es))")
    prop = after.prop if after is not None and after.prop else name
    count = len(after.tests) if after is not None else 0
    where = ", ".join(verdicts.violating(prop)) if verdicts is not None else ""
    found = f" in {where}" if where else ""
    return ModuleChange(name, "added", True, f"{prop} has counterexamples{found} ({count} test(s))")


def compare(
    old: Mapping[str, str], new: Mapping[str, str], spec_file: SpecFile, verdicts: Verdicts | None = None
) -> list[ModuleChange]:
    """Every module that differs between the committed files and the regenerated ones."""
    changes = []
    for name in sorted(set(old) | set(new)):
        if name not in new:
            changes.append(_removed(name, old[name], spec_file, verdicts))
        elif name not in old:
            changes.append(_added(name, new[name], verdicts))
        elif old[name] != new[name]:
            changes.append(_rewritten(name, old[name], new[name]))
    return changes


__all__ = ["ModuleChange", "ModuleShape", "compare", "shape"]
