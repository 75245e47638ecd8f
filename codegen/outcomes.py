"""What each generated test did, told by the test itself, for `ledgercheck ci` to judge.

pytest's own account of a run can be changed by what runs beside the tests: a `conftest.py`
above the folder whose `pytest_runtest_makereport` hook turns a failure into a pass, a plugin
that marks tests `xfail` or reruns a failure until it passes, a `collect_ignore` that keeps a
module from being collected. Each leaves pytest's summary green and its exit code 0 while a
generated test failed or never ran: a regression absorbed by the gate.

So `ci` does not take pytest's word alone. Under `--ledger-outcomes DIR` the plugin's
`ledger_factory` fixture notes, at the end of each generated test, whether the test's check ran
to its end (`LedgerCheck.finish` returned), broke on its property (`PropertyViolated`, what a
known violation's test expects) or failed otherwise; this is read from the check itself, not
from pytest's reports. Each process that ran tests (pytest's, or each `pytest-xdist` worker)
writes its notes to a file of its own in DIR, whole or not at all. `ci` then asks every test
the generated modules hold (read from their source) for its note: a test with none never ran,
and a test whose note is not what it expects did not pass, whatever pytest said.

Standard library only: the plugin imports it when the option is given.
"""

from __future__ import annotations

import ast
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

FINISHED = "finished"
"""The test's check ran to its end: every call did what the expected variant does, and the
property held (or was only watched)."""
VIOLATED = "violated"
"""The check failed on its property (`PropertyViolated`): what a known violation's test expects."""
FAILED = "failed"
"""Anything else: a call that did not do what the variant does, an exception, no check made."""

_PREFIX = "outcomes-"
_SCHEMA = 1


@dataclass(frozen=True)
class Note:
    """One run of one generated test (a rerun plugin gives a test several)."""

    module: str
    """The test module's resolved path."""
    test: str
    """The test function's name."""
    outcome: str
    reference_xfail: bool = False
    """The plugin itself marked the test a strict xfail: the implementation is declared to be
    a variant the spec expects to violate this test's property (`[spec] reference_variant`)."""
    message: str = ""
    """The first line of the check's failure, where it failed."""


def write(directory: Path, notes: Sequence[Note]) -> None:
    """This process's notes, in a file of its own in `directory`, whole or not at all."""
    directory.mkdir(parents=True, exist_ok=True)
    payload = json.dumps({"schema": _SCHEMA, "notes": [asdict(n) for n in notes]}, sort_keys=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".writing-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(payload)
        os.replace(temporary, directory / f"{_PREFIX}{os.getpid()}-{os.urandom(4).hex()}.json")
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read(directory: Path) -> dict[tuple[str, str], list[Note]]:
    """Every note the processes of a run wrote, by (module, test). A file that cannot be read
    counts as no notes: its tests then never ran, as far as `judge` knows."""
    found: dict[tuple[str, str], list[Note]] = {}
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob(f"{_PREFIX}*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            notes = [Note(**entry) for entry in data["notes"]] if data.get("schema") == _SCHEMA else []
        except (OSError, ValueError, TypeError, KeyError):
            continue
        for note in notes:
            found.setdefault((note.module, note.test), []).append(note)
    return found


@dataclass(frozen=True)
class Expected:
    """A test a generated module holds, and whether it documents a known violation (a strict
    xfail that expects `PropertyViolated`)."""

    module: str
    test: str
    known_violation: bool

    @property
    def label(self) -> str:
        return f"{Path(self.module).name}::{self.test}"


def expected(out_dir: Path, sources: Mapping[str, str]) -> list[Expected]:
    """The tests the generated modules of `out_dir` hold (`sources`: each module's name and
    text, as `render.existing_generated` reads them), read from their source: every
    module-level `test_` function (a hand-edit that hid one from pytest still counts it)."""
    tests = []
    for name, text in sources.items():
        path = out_dir / name
        for node in ast.parse(text, filename=str(path)).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                marks = [ast.unparse(d) for d in node.decorator_list]
                known = any("xfail" in mark and "PropertyViolated" in mark for mark in marks)
                tests.append(Expected(str(path.resolve()), node.name, known))
    return tests


def judge(tests: Sequence[Expected], notes: Mapping[tuple[str, str], list[Note]]) -> list[str]:
    """Why the run did not pass every test in `tests`, as one line per kind of problem (empty
    when each ran, every time it ran, to what it expects)."""
    missing: list[Expected] = []
    wrong: list[str] = []
    for test in tests:
        runs = notes.get((test.module, test.test), [])
        if not runs:
            missing.append(test)
            continue
        for note in runs:
            if test.known_violation:
                ok = note.outcome == VIOLATED
            elif note.reference_xfail:
                ok = note.outcome != FINISHED
            else:
                ok = note.outcome == FINISHED
            if not ok:
                said = f": {note.message}" if note.message else ""
                wrong.append(f"{test.label} ({_described(note.outcome)}{said})")
                break
    problems = []
    if wrong:
        problems.append(
            f"{len(wrong)} generated test(s) did not pass, though pytest counted no failure (a conftest.py hook, a "
            f"plugin or a rerun changed what pytest reports): {_listed(wrong)}"
        )
    if missing:
        problems.append(
            f"{len(missing)} of {len(tests)} generated test(s) never ran (something outside them kept them from "
            f"running: a conftest.py, a plugin, addopts): {_listed(_by_module(missing, tests))}"
        )
    return problems


def _by_module(missing: Sequence[Expected], tests: Sequence[Expected]) -> list[str]:
    """The missing tests, a module none of whose tests ran named once (`m.py (all 9)`)."""
    labels: list[str] = []
    for test in missing:
        module = [t for t in tests if t.module == test.module]
        if all(t in missing for t in module):
            whole = f"{Path(test.module).name} (all {len(module)})"
            if whole not in labels:
                labels.append(whole)
        else:
            labels.append(test.label)
    return labels


def _described(outcome: str) -> str:
    return {
        FINISHED: "it passed where its property should have broken",
        VIOLATED: "its property broke",
        FAILED: "it failed",
    }.get(outcome, outcome)


def _listed(labels: Sequence[str], shown: int = 3) -> str:
    more = f" and {len(labels) - shown} more" if len(labels) > shown else ""
    return ", ".join(labels[:shown]) + more


__all__ = ["FAILED", "FINISHED", "VIOLATED", "Expected", "Note", "expected", "judge", "read", "write"]
