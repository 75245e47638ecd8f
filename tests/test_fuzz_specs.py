"""Property-based tests of the spec loader and of the two semantics, with Hypothesis.

(a) Malformed specs: mutations of the shipped spec and of the breaker example (lines deleted,
    duplicated or swapped; random characters; identifiers replaced by near misses or by other
    names; values of the wrong type; 10**100 and 5000-digit integers; 1000-level nesting;
    contradictory or cyclic definitions) either load or are refused with a SpecError that
    names `x.toml:LINE[:COL]: `, never any other exception; the command line answers such a
    file with exit code 2 and no traceback; and a position survives the whitespace around it.
(b) Small random *valid* specs, generated from a grammar (one enum of 2-4 states, 1-3 int or
    bool fields, maybe a history field and a fleet value, 2-4 events with random guards,
    contracts and bodies, the any_call environment, 1-2 invariants): the interpreter and the
    Z3 encoding agree step by step on random walks (as tests/test_agreement.py checks the
    shipped spec), and the bounded model checker agrees with a brute-force breadth-first
    search of the interpreter on the verdict and the shortest depth, up to depth 5, at 1 and
    2 shards.

Every test has a fixed example budget and `derandomize=True`: the same examples every run.
"""

from __future__ import annotations

import itertools
import os
import random
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import z3
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from ledger_fixture import LEDGER_SPEC
from searches import searched
from z3terms import substitute

from ledgercheck.model import bmc
from ledgercheck.model.cli import main
from ledgercheck.model.encoding import Encoding
from ledgercheck.model.errors import SpecError
from ledgercheck.model.explicit import explicit_check
from ledgercheck.model.interpreter import initial_store
from ledgercheck.model.semantics import ConcreteBackend, Key, Machine
from ledgercheck.model.spec import Action, Environment, Property, PropertyKind, Spec, load_spec_text
from ledgercheck.model.trace import Simulation, base_url

NAME = "x.toml"
LOCATED = re.compile(r"^x\.toml:\d+(:\d+)?: ")
FLEET = LEDGER_SPEC.read_text(encoding="utf-8")
BREAKER = (Path(__file__).resolve().parents[1] / "spec" / "examples" / "breaker.toml").read_text(encoding="utf-8")
TIMED = (Path(__file__).resolve().parents[1] / "spec" / "examples" / "timed_breaker.toml").read_text(encoding="utf-8")
BASES = {"fleet": FLEET, "breaker": BREAKER, "timed": TIMED}


def budget(examples: int) -> Any:
    return settings(
        max_examples=int(os.environ.get("LEDGERCHECK_FUZZ_EXAMPLES", examples)),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
    )


# ============================================================================================
# (a) malformed specs
# ============================================================================================

IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
VALUE = re.compile(r"^(\s*[\w.\"'-]+\s*=\s*)(.*)$")
NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")
JUNK = [
    '"', "'", '"""', "'''", "[", "]", "[[", "]]", "{", "}", "=", ".", ",", "#", "\\", "\n", "(", ")", ":",
    "_", " ", "    ", "\t", "0", "-", "+", "*", "\x00", "\x7f", "é", "\u2028", "\ufeff", "not ", " if ", " else ",
    " and ", " in ", "None", "True", "args.", "s.", "old.", "__", "${", "%s", "\r", "\x0c",
]  # fmt: skip
WRONG_VALUES = [
    "1", "-1", "0", "true", "false", '"x"', '""', "[]", "{}", "1.5", "nan", "inf", "[1, \"a\"]", "1979-05-27",
    "07:32:00", "1" + "0" * 100, "-" + "9" * 30, "0x" + "f" * 40, "1" + "0" * 5000, '"state"', '"__import__"',
    '"None"', '"int"', '"Mode"', '["CLOSED", "DEAD"]', "{ type = \"int\" }", "{ default = 99 }",
    "[" * 1000 + "]" * 1000, "{a = " * 1000 + "1" + "}" * 1000, '"' + "(" * 1000 + ")" * 1000 + '"',
    '"' + "not " * 3000 + 'True"', '"' + "x" * 30000 + '"',
]  # fmt: skip


def _near_miss(word: str, how: int) -> str:
    variants = [
        word[:-1] or "x",
        word + "s",
        word.upper() if word != word.upper() else word.lower(),
        word[1:] + word[0],
        word.replace("_", "", 1) if "_" in word else word + "_",
        "_" + word,
        "__" + word + "__",
    ]
    return variants[how % len(variants)]


Lines = list[str]
Draw = Callable[..., Any]


def _line(draw: Draw, lines: Lines) -> int:
    return int(draw(st.integers(0, len(lines) - 1)))


def op_delete(draw: Draw, lines: Lines) -> Lines:
    i = _line(draw, lines)
    return lines[:i] + lines[i + 1 :] if len(lines) > 1 else lines


def op_duplicate(draw: Draw, lines: Lines) -> Lines:
    i, j = _line(draw, lines), _line(draw, lines)
    return lines[:j] + [lines[i]] + lines[j:]


def op_duplicate_in_place(draw: Draw, lines: Lines) -> Lines:
    """A duplicate key (or table header) right where it was."""
    i = _line(draw, lines)
    return lines[: i + 1] + [lines[i]] + lines[i + 1 :]


def op_swap(draw: Draw, lines: Lines) -> Lines:
    i, j = _line(draw, lines), _line(draw, lines)
    lines = list(lines)
    lines[i], lines[j] = lines[j], lines[i]
    return lines


def op_insert(draw: Draw, lines: Lines) -> Lines:
    i = _line(draw, lines)
    junk = draw(st.lists(st.sampled_from(JUNK) | st.characters(), min_size=1, max_size=4))
    at = draw(st.integers(0, len(lines[i])))
    lines = list(lines)
    lines[i] = lines[i][:at] + "".join(junk) + lines[i][at:]
    return lines


def op_cut(draw: Draw, lines: Lines) -> Lines:
    i = _line(draw, lines)
    start = draw(st.integers(0, len(lines[i])))
    end = draw(st.integers(start, len(lines[i])))
    lines = list(lines)
    lines[i] = lines[i][:start] + lines[i][end:]
    return lines


def op_near_miss(draw: Draw, lines: Lines) -> Lines:
    i = _line(draw, lines)
    words = list(IDENT.finditer(lines[i]))
    if not words:
        return lines
    word = draw(st.sampled_from(words))
    lines = list(lines)
    lines[i] = lines[i][: word.start()] + _near_miss(word.group(), draw(st.integers(0, 6))) + lines[i][word.end() :]
    return lines


def op_other_name(draw: Draw, lines: Lines) -> Lines:
    """A name replaced by another name of the spec: dangling or ill-typed references."""
    i, j = _line(draw, lines), _line(draw, lines)
    here, there = list(IDENT.finditer(lines[i])), IDENT.findall(lines[j])
    if not here or not there:
        return lines
    word = draw(st.sampled_from(here))
    lines = list(lines)
    lines[i] = lines[i][: word.start()] + draw(st.sampled_from(there)) + lines[i][word.end() :]
    return lines


def op_wrong_value(draw: Draw, lines: Lines) -> Lines:
    candidates = [n for n, line in enumerate(lines) if VALUE.match(line)]
    if not candidates:
        return lines
    i = draw(st.sampled_from(candidates))
    match = VALUE.match(lines[i])
    assert match
    lines = list(lines)
    lines[i] = match.group(1) + draw(st.sampled_from(WRONG_VALUES))
    return lines


def op_huge_number(draw: Draw, lines: Lines) -> Lines:
    candidates = [n for n, line in enumerate(lines) if NUMBER.search(line)]
    if not candidates:
        return lines
    i = draw(st.sampled_from(candidates))
    numbers = list(NUMBER.finditer(lines[i]))
    number = draw(st.sampled_from(numbers))
    big = draw(st.sampled_from(["1" + "0" * 100, "-1" + "0" * 100, "1" + "0" * 5000, "0x" + "f" * 5000, "2147483648"]))
    lines = list(lines)
    lines[i] = lines[i][: number.start()] + big + lines[i][number.end() :]
    return lines


def op_deep_nesting(draw: Draw, lines: Lines) -> Lines:
    depth = draw(st.sampled_from([40, 1000, 1200, 5000]))
    opener, closer = draw(st.sampled_from([("[", "]"), ("(", ")"), ("{a = ", "}")]))
    candidates = [n for n, line in enumerate(lines) if VALUE.match(line)]
    if not candidates:
        return lines
    i = draw(st.sampled_from(candidates))
    match = VALUE.match(lines[i])
    assert match
    value = opener * depth + ("1" if opener != "[" else "") + closer * depth
    if opener == "(":
        value = f'"{value}"'  # inside an expression
    lines = list(lines)
    lines[i] = match.group(1) + value
    return lines


# Whole-spec edits: contradictory or cyclic definitions. Each is (base, [(old, new), ...]): `old`
# (unique in the base) becomes `new`; an empty `old` appends `new` at the end of the file.
Edit = tuple[str, list[tuple[str, str]]]
APPEND = ""
STRUCTURAL: dict[str, Edit] = {
    "set-of-two-enums": (
        "breaker",
        [("[sets]", '[sets]\nMIXED = ["CLOSED", "EXTRA"]'), (APPEND, '[enums.Extra]\nmembers = ["EXTRA"]')],
    ),
    "set-of-two-enums-fleet": ("fleet", [("[sets]", '[sets]\nMIXED = ["HEALTHY", "RUNNING"]')]),
    "member-in-two-enums": ("breaker", [(APPEND, '[enums.Extra]\nmembers = ["OPEN"]')]),
    "member-in-two-enums-fleet": ("fleet", [(APPEND, '[enums.Extra]\nmembers = ["DEAD", "ALIVE"]')]),
    "query-refers-to-itself": ("breaker", [(APPEND, '[queries]\nloop = "loop"')]),
    "queries-refer-to-each-other": ("breaker", [(APPEND, '[queries]\nqa = "qb"\nqb = "qa"')]),
    "query-refers-to-itself-fleet": ("fleet", [(APPEND, '[queries.loop]\nwhen = "loop and serving"')]),
    "field-named-like-member": ("breaker", [(APPEND, '[fields.OPEN]\ntype = "int"\ninitial = 0')]),
    "field-named-like-set": ("breaker", [(APPEND, '[fields.ADMITS]\ntype = "int"\ninitial = 0')]),
    "enum-named-like-field": ("breaker", [(APPEND, '[enums.failures]\nmembers = ["X"]')]),
    "policy-named-like-field": ("breaker", [("[policy]", "[policy]\nfailures = 3")]),
    "history-named-like-field": (
        "breaker",
        [("[history.fields]", '[history.fields]\nstate = { type = "int", initial = 0 }')],
    ),
    "duplicate-table": ("breaker", [(APPEND, '[spec]\nname = "again"')]),
    "duplicate-event": ("breaker", [(APPEND, '[events.cool_down]\ncall = "cool_down(i)"')]),
    "event-call-renamed": ("breaker", [('call = "cool_down(i)"', 'call = "record_failure(i)"')]),
    "state-field-not-enum": ("breaker", [('state_field = "state"', 'state_field = "failures"')]),
    "state-field-unknown": ("breaker", [('state_field = "state"', 'state_field = "mode"')]),
    "policy-min-above-max": ("breaker", [("min = 1, max = 6", "min = 7, max = 6")]),
    "step-property-without-on": (
        "breaker",
        [('on = ["record_failure"]\nwhen = "before.state == H', 'when = "before.state == H')],
    ),
    "step-on-unknown-event": (
        "breaker",
        [('on = ["record_failure"]\nwhen = "before.state == H', 'on = ["trip"]\nwhen = "before.state == H')],
    ),
    "property-unknown-environment": (
        "breaker",
        [('kind = "invariant"', 'kind = "invariant"\nenvironments = ["controller"]')],
    ),
    "expect-unknown-variant": (
        "breaker",
        [('expect = { base = "violated" }', 'expect = { fixed = "violated" }')],
    ),
    "expect-bad-verdict": ("breaker", [('expect = { base = "violated" }', 'expect = { base = "maybe" }')]),
    "expect-bad-default": ("breaker", [('expect = { base = "violated" }', 'expect = { default = "maybe" }')]),
    "expect-missing": ("breaker", [('expect = { base = "violated" }', "")]),
    "expect-missing-a-variant": (
        "fleet",
        [('PR #3592 head, as written"', 'PR #3592 head, as written"\n\n[variants.retry]')],
    ),
    "variant-named-default": ("fleet", [(APPEND, "[variants.default]")]),
    "any-call-with-actions": (
        "breaker",
        [("any_call = true", 'any_call = true\n[environments.ledger.actions.x]\nbody = "pass"')],
    ),
    "no-environment": (
        "breaker",
        [('[environments.ledger]\ndoc = "any call at any time"\nany_call = true\n', "")],
    ),
    "patch-of-unknown-event": (
        "fleet",
        [('event = "mark_loaded"\nafter = "consecutive_probe_successes = 0"', 'event = "mark_unloaded"\nafter = "x"')],
    ),
    "patch-anchor-not-in-the-body": (
        "fleet",
        [('after = "consecutive_probe_successes = 0"', 'after = "consecutive_reported_failures = 0"')],
    ),
    "patch-with-two-anchors": (
        "fleet",
        [('after = "consecutive_probe_successes = 0"', 'after = "consecutive_probe_successes = 0"\nbefore = "x = 1"')],
    ),
    "variant-that-is-not-a-table": ("breaker", [(APPEND, "[variants]\nfixed = 1")]),
    "loop-variable-shadows-field": (
        "fleet",
        [("for s in shards:\n    if s.state == DEAD:", "for state in shards:\n    if state.state == DEAD:")],
    ),
    "action-calls-unknown-event": ("fleet", [('body = "report_success(i)"', 'body = "report_succes(i)"')]),
    "action-shard-param-typo": ("fleet", [('body = "report_success(i)"', 'body = "report_success(j)"')]),
    "scenario-of-unknown-action": (
        "fleet",
        [(APPEND, '[scenarios.bad]\nenvironment = "ledger"\nsteps = ["explode(0)"]')],
    ),
    "scenario-focus-out-of-range": (
        "fleet",
        [(APPEND, '[scenarios.bad]\nenvironment = "ledger"\nfocus = 99\nsteps = []')],
    ),
}


def structural(name: str) -> str:
    base, edits = STRUCTURAL[name]
    text = BASES[base]
    for old, new in edits:
        if old == APPEND:
            text = text + "\n" + new + "\n"
        else:
            assert text.count(old) == 1, f"{name}: {old!r} is not unique in the {base} spec"
            text = text.replace(old, new)
    return text


OPS = [
    op_delete,
    op_duplicate,
    op_duplicate_in_place,
    op_swap,
    op_insert,
    op_cut,
    op_near_miss,
    op_other_name,
    op_wrong_value,
    op_huge_number,
    op_deep_nesting,
]


@st.composite
def malformed_specs(draw: Draw) -> str:
    if draw(st.integers(0, 4)) == 0:
        text = structural(draw(st.sampled_from(sorted(STRUCTURAL))))
    else:
        text = BASES[draw(st.sampled_from(sorted(BASES)))]
    lines = text.split("\n")
    for _ in range(draw(st.integers(0 if text not in BASES.values() else 1, 3))):
        lines = draw(st.sampled_from(OPS))(draw, lines)
    return "\n".join(lines)


def load_or_spec_error(text: str) -> SpecError | None:
    """Load; return the SpecError (checked to name file:line), None if the spec loads."""
    try:
        load_spec_text(text, NAME)
    except SpecError as err:
        assert type(err) is SpecError
        assert LOCATED.match(str(err)), f"no file:line: {str(err)[:300]!r}"
        assert 1 <= err.where.line <= text.count("\n") + 1, f"line {err.where.line} is outside the file: {err}"
        return err
    except BaseException as exc:  # the point: nothing else may escape
        pytest.fail(f"the loader leaked {type(exc).__name__}: {str(exc)[:300]}")
    return None


@budget(100)
@given(malformed_specs())
def test_a_malformed_spec_loads_or_is_refused_with_its_line(text: str) -> None:
    err = load_or_spec_error(text)
    event("loads" if err is None else "refused")  # --hypothesis-show-statistics shows the split


@pytest.mark.slow
@budget(300)
@given(malformed_specs())
def test_more_malformed_specs_load_or_are_refused_with_their_line(text: str) -> None:
    """`test_a_malformed_spec_loads_or_is_refused_with_its_line` on 300 further examples
    (another test name draws other ones): the full suite's share of the sweep."""
    err = load_or_spec_error(text)
    event("loads" if err is None else "refused")


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_each_contradictory_definition_is_refused_with_its_line(name: str) -> None:
    text = structural(name)
    assert load_or_spec_error(text) is not None, f"{name} was accepted"


@budget(12)
@given(text=malformed_specs())
def test_the_command_line_answers_a_bad_spec_with_exit_2(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assume(load_or_spec_error(text) is not None)
    path = tmp_path / "x.toml"
    path.write_text(text, encoding="utf-8")
    capsys.readouterr()
    code = main(["check", str(path), "--max-depth", "1"])
    out, err = capsys.readouterr()
    assert code == 2, (code, err[-500:])
    assert "Traceback" not in err and "Traceback" not in out
    assert err.startswith(f"ledgercheck: {path}:"), err[:300]
    assert re.match(rf"ledgercheck: {re.escape(str(path))}:\d+(:\d+)?: ", err), err[:300]


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"\xff\xfe[spec]\n", id="not-utf8"),
        pytest.param(b"", id="empty"),
        pytest.param(b"a = " + b"[" * 5000 + b"]" * 5000, id="deep-toml"),
        pytest.param(b"a = 1" + b"0" * 5000, id="5000-digits"),
    ],
)
def test_the_command_line_answers_a_bad_file_with_exit_2(
    content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.toml"
    path.write_bytes(content)
    code = main(["check", str(path), "--max-depth", "1"])
    _, err = capsys.readouterr()
    assert code == 2, err
    assert "Traceback" not in err
    assert re.match(rf"ledgercheck: {re.escape(str(path))}:\d+(:\d+)?: ", err), err


def test_a_byte_order_mark_is_not_content(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "breaker.toml"
    path.write_bytes(b"\xef\xbb\xbf" + BREAKER.encode("utf-8"))
    code = main(
        ["check", str(path), "--environment", "ledger", "--max-depth", "1", "--property", "half_open_failure_reopens"]
    )
    _, err = capsys.readouterr()
    assert code == 0, err


# --- positions survive the whitespace around a value -------------------------------------------


@budget(60)
@given(
    blank=st.integers(0, 3),
    indent=st.integers(0, 6),
    before=st.integers(0, 2),
    where=st.sampled_from(["body", "history", "guard", "assert", "multiline-assert"]),
    non_ascii=st.booleans(),
)
def test_an_error_names_the_exact_line_and_column(
    blank: int, indent: int, before: int, where: str, non_ascii: bool
) -> None:
    """Leading blank lines, indentation and non-ASCII text before the mistake do not move
    the reported position off the misspelt name."""
    pad = " " * indent
    prefix = '"é" == "é" and ' if non_ascii else ""
    if where in ("body", "history"):
        ok = "failures = failures" if where == "body" else "real_failures = real_failures"
        statements = [pad + ok] * before + [pad + f"if {prefix}failurez == 0:", pad + "    pass"]
        value = "\n" * blank + "\n".join(statements) + "\n"
        old = (
            'body = """\nfailures = 0\nstate = CLOSED\n"""'
            if where == "body"
            else 'history = """\nreal_failures = 0\n"""'
        )
        new = ("body" if where == "body" else "history") + " = '''\n" + value + "'''"
    elif where == "guard":
        old, new = 'ignore_when = "state != OPEN"', f"ignore_when = '''{pad}{prefix}failurez == 0'''"
    elif where == "assert":
        old, new = 'assert = "failures <= trip_after"', f"assert = '{pad}{prefix}failurez <= trip_after'"
    else:
        old = 'assert = "failures <= trip_after"'
        new = "assert = '''\n" + "\n" * blank + f"{pad}{prefix}failurez <= trip_after\n'''"
    assert BREAKER.count(old) == 1
    text = BREAKER.replace(old, new)
    index = text.index("failurez")
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    err = load_or_spec_error(text)
    assert err is not None
    assert "failurez" in err.message
    assert (err.where.line, err.where.col) == (line, col), f"{err} (expected {line}:{col})"


# ============================================================================================
# (b) random valid specs: interpreter, encoding, checker and brute force agree
# ============================================================================================

MAX_DEPTH = 5
DEEP = 8
WALK_STEPS = 30


@dataclass
class Grammar:
    """Draws well-typed expressions and statements over the names of one generated spec."""

    draw: Draw
    members: list[str]
    names: dict[str, str] = field(default_factory=dict)  # readable name -> "int" | "bool" | "enum"

    def pick(self, options: list[str]) -> str:
        return str(self.draw(st.sampled_from(options)))

    def expr(self, kind: str, depth: int) -> str:
        atoms = [n for n, k in self.names.items() if k == kind]
        if kind == "int":
            atoms += ["0", "1", "2", "limit"]
        elif kind == "bool":
            atoms += ["True", "False"]
        else:
            atoms += self.members
        if depth <= 0 or self.draw(st.integers(0, 2)) == 0:
            return self.pick(atoms)
        d = depth - 1
        if kind == "int":
            form = self.draw(st.integers(0, 2))
            if form == 0:
                return f"({self.expr('int', d)} + {self.expr('int', d)})"
            if form == 1:
                return f"({self.expr('int', d)} - {self.expr('int', d)})"
            return f"({self.expr('int', d)} if {self.expr('bool', d)} else {self.expr('int', d)})"
        if kind == "enum":
            return f"({self.expr('enum', d)} if {self.expr('bool', d)} else {self.expr('enum', d)})"
        form = self.draw(st.integers(0, 6))
        if form == 0:
            op = self.pick(["<", "<=", ">", ">=", "==", "!="])
            return f"({self.expr('int', d)} {op} {self.expr('int', d)})"
        if form == 1:
            return f"({self.expr('enum', d)} {self.pick(['==', '!='])} {self.expr('enum', d)})"
        if form == 2:
            return f"({self.expr('enum', d)} {self.pick(['in', 'not in'])} SET)"
        if form == 3:
            return f"(not {self.expr('bool', d)})"
        if form == 4:
            return f"({self.expr('bool', d)} {self.pick(['and', 'or'])} {self.expr('bool', d)})"
        if form == 5:
            return f"({self.expr('bool', d)} == {self.expr('bool', d)})"
        return f"({self.expr('bool', d)} if {self.expr('bool', d)} else {self.expr('bool', d)})"

    def block(self, writable: dict[str, str], depth: int, indent: str = "") -> list[str]:
        lines: list[str] = []
        for _ in range(self.draw(st.integers(1, 3))):
            if depth > 0 and self.draw(st.integers(0, 3)) == 0:
                lines.append(f"{indent}if {self.expr('bool', 2)}:")
                lines += self.block(writable, depth - 1, indent + "    ")
                if self.draw(st.booleans()):
                    lines.append(f"{indent}else:")
                    lines += self.block(writable, depth - 1, indent + "    ")
            else:
                target = self.pick(sorted(writable))
                lines.append(f"{indent}{target} = {self.update(target, writable[target])}")
        return lines

    def update(self, target: str, kind: str) -> str:
        """A new value for `target`: half the time a random expression, else the kind of
        update a ledger makes (count up or down, reset, flip, move to a state), so that
        random invariants are broken only after several steps, not at once or never."""
        if self.draw(st.booleans()):
            return self.expr(kind, 2)
        if kind == "int":
            return self.pick(
                [f"{target} + 1", f"{target} - 1", f"{target} + (1 if {self.expr('bool', 1)} else 0)", "0"]
            )
        if kind == "bool":
            return self.pick([f"not {target}", "True", "False"])
        return self.pick(self.members)


def _threshold_check(
    draw: Draw, names: dict[str, str], members: list[str], initial: Mapping[str, int | bool | str]
) -> str:
    """An invariant of the shape that takes a few steps to break: a counter stays under a
    bound above its initial value, a state is never entered, or not both at once."""
    ints = sorted(n for n, k in names.items() if k == "int")
    other = [m for m in members if m != initial.get("state")] or members
    form = draw(st.integers(0, 2)) if ints else 1
    if form == 0 or form == 2:
        name = draw(st.sampled_from(ints))
        bound = int(initial.get(name, 0)) + draw(st.integers(0, 3))
        counter = draw(st.sampled_from([f"{name} <= {bound}", f"{name} >= {-bound}"]))
        if form == 0:
            return counter
        return f"not (state == {draw(st.sampled_from(other))} and not ({counter}))"
    return f"state != {draw(st.sampled_from(other))}"


def _toml(text: str) -> str:
    assert "'''" not in text
    return "'''\n" + text + "\n'''"


@st.composite
def valid_specs(draw: Draw) -> str:
    members = [f"M{n}" for n in range(draw(st.integers(2, 4)))]
    subset = draw(st.lists(st.sampled_from(members), min_size=1, max_size=len(members), unique=True))
    fields = {f"f{n}": draw(st.sampled_from(["int", "bool"])) for n in range(1, draw(st.integers(1, 3)) + 1)}
    initial: dict[str, int | bool | str] = {"h": 0, "g": 0}
    ledger = {"state": "enum", **fields}
    # Time: a timer every clock tick advances (by 1 or by 2 units), read and reset like an int.
    timed = draw(st.booleans())
    if timed:
        ledger["t"] = "int"
    history = {"h": "int"} if draw(st.booleans()) else {}
    fleet_value = draw(st.booleans())
    limit = draw(st.integers(0, 3))
    out = [
        "[spec]",
        'name = "generated"',
        'state_field = "state"',
        "default_shards = 2",
        "",
        "[enums.S]",
        f"members = {members!r}".replace("'", '"'),
        "",
        "[sets]",
        f"SET = {subset!r}".replace("'", '"'),
        "",
        "[policy]",
        f"limit = {{ default = {limit}, min = 0, max = 5 }}",
        "",
        "[fields]",
    ]
    initial["state"] = draw(st.sampled_from(members))
    out.append(f'state = {{ type = "S", initial = "{initial["state"]}" }}')
    for name, kind in fields.items():
        if kind == "int" and draw(st.integers(0, 3)) == 0:  # an int that starts at the policy constant
            initial[name] = limit
            out.append(f'{name} = {{ type = "int", initial = "limit" }}')
            continue
        initial[name] = draw(st.integers(0, 2)) if kind == "int" else draw(st.booleans())
        out.append(f'{name} = {{ type = "{kind}", initial = {str(initial[name]).lower()} }}')
    if timed:
        initial["t"] = 0
        out += [
            't = { type = "timer", initial = 0 }',
            "",
            "[clock]",
            f"steps = {draw(st.sampled_from(['[1]', '[1, 2]']))}",
        ]
    if history:
        out += ["", "[history.fields]", 'h = { type = "int", initial = 0 }']
    if fleet_value:
        out += ["", "[globals]", 'g = { type = "int", initial = 0 }', "", "[on_state_change]"]
        hook = Grammar(draw, members, {"old": "enum", "new": "enum", "g": "int"})
        out.append("body = " + _toml("\n".join(hook.block({"g": "int"}, 1))))
    flagged: list[bool] = []
    for n in range(draw(st.integers(2, 4))):
        flag = draw(st.booleans())
        flagged.append(flag)
        names = dict(ledger) | ({"args.flag": "bool"} if flag else {})
        grammar = Grammar(draw, members, names)
        out += ["", f"[events.e{n}]", f'call = "e{n}(i{", flag: bool" if flag else ""})"']
        if draw(st.booleans()):
            out.append("ignore_when = " + _toml(grammar.expr("bool", 2)))
        if draw(st.integers(0, 3)) == 0:
            out.append("requires = " + _toml(grammar.expr("bool", 2)))
        out.append("body = " + _toml("\n".join(grammar.block(dict(ledger), 2))))
        # Outcomes: an error raised under a condition as the call begins (the call then changes
        # nothing) or on the record it left (`after`, old.x before it: its changes kept), a result.
        raising = draw(st.integers(0, 5))
        if raising <= 1:
            out.append(f"raises = [{{ when = '{grammar.expr('bool', 1)}', error = 'E{n}' }}]")
        elif raising == 2:
            snapshots = {f"old.{k}": v for k, v in ledger.items()}
            later = Grammar(draw, members, names | snapshots)
            entries = [f"{{ after = '{later.expr('bool', 1)}', error = 'A{n}' }}"]
            if draw(st.booleans()):
                entries.insert(0, f"{{ when = '{grammar.expr('bool', 1)}', error = 'E{n}' }}")
            out.append(f"raises = [{', '.join(entries)}]")
        if draw(st.booleans()):
            out.append(f"returns = '{grammar.expr(draw(st.sampled_from(['int', 'bool', 'enum'])), 1)}'")
        if history and draw(st.booleans()):
            snapshots = {f"old.{k}": v for k, v in ledger.items()}
            past = Grammar(draw, members, names | history | snapshots)
            out.append("history = " + _toml("\n".join(past.block(history, 1))))
    out += ["", "[environments.ledger]", "any_call = true"]
    readable = ledger | history | ({"g": "int"} if fleet_value else {})
    for n in range(draw(st.integers(1, 2))):
        if draw(st.integers(0, 3)) == 0:  # a step property: the called shard around the call, its arguments
            on = draw(st.lists(st.integers(0, len(flagged) - 1), min_size=1, max_size=2, unique=True))
            names = {f"{snap}.{k}": v for snap in ("before", "after") for k, v in ledger.items()}
            if all(flagged[e] for e in on):
                names["args.flag"] = "bool"
            grammar = Grammar(draw, members, names)
            out += ["", f"[properties.p{n}]", 'kind = "step"', f"on = {[f'e{e}' for e in on]!r}".replace("'", '"')]
            out.append(f'expect = {{ base = "{draw(st.sampled_from(["holds", "violated"]))}" }}')
            if draw(st.integers(0, 3)) == 0:  # judged over every call, the contracts ignored
                out.append('calls = "any"')
            if draw(st.booleans()):
                out.append("when = " + _toml(grammar.expr("bool", 1)))
            out.append("assert = " + _toml(grammar.expr("bool", 3)))
            continue
        out += ["", f"[properties.p{n}]", 'kind = "invariant"']
        if draw(st.integers(0, 3)) == 0:  # judged over every call, the contracts ignored
            out.append('calls = "any"')
        # Whether it holds is for the engines to find: the expectation only has to be stated.
        verdict = draw(st.sampled_from(["holds", "violated"]))
        out.append(f'expect = {{ {draw(st.sampled_from(["base", "default"]))} = "{verdict}" }}')
        form = draw(st.integers(0, 3))
        if form == 0:
            shard = Grammar(draw, members, ledger | history)
            aggregate = draw(st.integers(0, 2))
            inner = (
                shard.expr("bool", 2)
                if draw(st.booleans())
                else _threshold_check(draw, ledger | history, members, initial)
            )
            check = (
                f"exists({inner})"
                if aggregate == 0
                else f"forall({inner})"
                if aggregate == 1
                else f"count({inner}) <= {draw(st.integers(0, 2))}"
            )
            if fleet_value and draw(st.booleans()):
                check = f"({check}) or g > {draw(st.integers(0, 3))}"
            out += ['scope = "fleet"', "assert = " + _toml(check)]
        else:
            grammar = Grammar(draw, members, readable)
            if draw(st.booleans()):
                out.append("when = " + _toml(grammar.expr("bool", 1)))
            check = grammar.expr("bool", 3) if form == 1 else _threshold_check(draw, readable, members, initial)
            out.append("assert = " + _toml(check))
    return "\n".join(out) + "\n"


def _load_valid(text: str) -> Spec:
    try:
        return load_spec_text(text, "generated.toml").variant()
    except SpecError as err:  # the grammar only writes valid specs: this is a loader (or grammar) bug
        pytest.fail(f"a generated valid spec was refused: {err}\n{text}")


# --- the interpreter against the encoding, step by step -------------------------------------


def _coded(spec: Spec, ctx: z3.Context, value: Any, kind: str, enum: str | None) -> Any:
    if kind == "bool":
        return z3.BoolVal(bool(value), ctx)
    if kind == "int":
        return z3.IntVal(int(value), ctx)
    assert kind == "enum" and enum is not None
    return z3.IntVal(spec.enums[enum].members.index(value), ctx)


def _choices(environment: Environment, shards: int) -> Iterator[tuple[Action, dict[str, int], dict[str, Any]]]:
    for action in environment.actions:
        for combo in itertools.product(range(shards), repeat=len(action.shard_params)):
            binding = dict(zip(action.shard_params, combo, strict=True))
            for picked in itertools.product(*[[False, True] for _ in action.value_params]):
                values = {p.name: v for p, v in zip(action.value_params, picked, strict=True)}
                yield action, binding, values


@budget(30)
@given(valid_specs(), st.randoms(use_true_random=False), st.integers(1, 3))
def test_b_the_encoding_takes_the_interpreters_steps(text: str, rng: random.Random, shards: int) -> None:
    spec = _load_valid(text)
    env = spec.environment("ledger")
    policy = spec.default_policy()
    enc = Encoding(spec, env, shards, policy)
    ctx = enc.ctx
    instances = {(i.action.name, tuple(sorted(i.shards.items()))): i for i in enc.instances}

    def state_pairs(store: Mapping[Key, Any]) -> list[tuple[Any, Any]]:
        return [
            (enc.template[k], _coded(spec, ctx, store[k], enc.vars[k].type.kind, enc.vars[k].type.enum))
            for k in enc.keys
        ]

    sim = Simulation(spec, env, shards, policy)
    initial = z3.simplify(substitute(enc.initial(enc.template), state_pairs(sim.store)))
    assert z3.is_true(initial), f"the interpreter's initial state is not initial in Z3: {initial}\n{text}"
    for step in range(WALK_STEPS):
        choices = [c for c in _choices(env, shards) if sim.enabled(*c)]
        assert choices, "the any_call environment always offers a call"
        action, binding, values = rng.choice(choices)
        inst = instances.get((action.name, tuple(sorted(binding.items()))))
        assert inst is not None, f"no instance for {action.name}{binding}"
        pairs = state_pairs(sim.store) + [(enc.act, z3.IntVal(inst.index, ctx))]
        pairs += [(inst.params[p.name], z3.BoolVal(values[p.name], ctx)) for p in action.value_params]
        before = dict(sim.store)
        _, effects = sim.apply(action, binding, values)
        where = f"step {step}: {action.name}{binding}{values}\n{text}"
        made = [c for c in inst.calls if z3.is_true(z3.simplify(substitute(c.pc, pairs)))]
        assert [c.event for c in made] == [c.event for c in effects.calls], f"other calls: {where}"
        for symbolic, concrete in zip(made, effects.calls, strict=True):
            raised = z3.simplify(substitute(symbolic.raised, pairs))
            assert z3.is_true(raised) == concrete.raised, f"raised: Z3 {raised}, interpreter {concrete.raised}: {where}"
            returns = spec.events[concrete.event].returns
            if returns is not None:
                got = z3.simplify(substitute(symbolic.result, pairs))
                want = _coded(spec, ctx, concrete.result, returns.type.kind, returns.type.enum)
                assert got.eq(z3.simplify(want)), f"result: Z3 {got}, interpreter {concrete.result!r}: {where}"
        assert z3.is_true(z3.simplify(substitute(inst.enabled, pairs))), f"Z3 disables it: {where}"
        assert z3.is_true(z3.simplify(substitute(enc.enabled_term, pairs))), f"Z3 disables it: {where}"
        for key in enc.keys:
            got = z3.simplify(substitute(enc.next_terms[key], pairs))
            want = _coded(spec, ctx, sim.store[key], enc.vars[key].type.kind, enc.vars[key].type.enum)
            assert got.eq(z3.simplify(want)), (
                f"{key}: Z3 says {got}, the interpreter {sim.store[key]!r} (was {before[key]!r}) at {where}"
            )


# --- the checker against brute force ---------------------------------------------------------


def _freeze(store: Mapping[Key, Any]) -> tuple[tuple[Key, Any], ...]:
    return tuple(sorted(store.items(), key=lambda item: (item[0][0] is not None, item[0][0] or 0, item[0][1])))


def brute_force_depth(spec: Spec, env: Environment, prop: Property, shards: int, policy: dict[str, int]) -> int | None:
    """The length of the shortest trace (within the callers' contracts, unless the property
    counts every call: `calls = "any"`) to a state that breaks
    the invariant on any shard, by breadth-first search of the interpreter; None if no trace
    of at most MAX_DEPTH steps does."""
    machine: Machine[Any] = Machine(spec, ConcreteBackend(), policy, shards)
    start = initial_store(spec, shards, policy, [base_url(i) for i in range(shards)], env.vars)

    def broken(store: Mapping[Key, Any]) -> bool:
        if prop.kind == PropertyKind.STEP:  # a state breaks no step property: a call does
            return False
        if prop.fleet:
            return not machine.invariant(prop.when, prop.check, None, store)
        return any(not machine.invariant(prop.when, prop.check, s, store) for s in range(shards))

    frontier = {_freeze(start)}
    seen = set(frontier)
    for depth in range(MAX_DEPTH + 1):
        if any(broken(dict(state)) for state in frontier):
            return depth
        following = set()
        for state in frontier:
            for action, binding, values in _choices(env, shards):
                store = dict(state)
                if not machine.enabled(action, binding, values, store):
                    continue
                effects = machine.run_action(action, binding, values, store)
                if not prop.counts_any_call and not all(call.contract_ok for call in effects.calls):
                    continue
                if prop.kind == PropertyKind.STEP and any(
                    machine.step_violations(prop.when, prop.check, call, dict(state))
                    for call in effects.calls
                    if call.event in prop.on
                ):
                    return depth + 1
                frozen = _freeze(store)
                if frozen not in seen:
                    seen.add(frozen)
                    following.add(frozen)
        frontier = following
    return None


@budget(30)
@given(valid_specs(), st.one_of(st.none(), st.integers(0, 5)))
def test_b_the_checker_agrees_with_brute_force(text: str, limit: int | None) -> None:
    """At the default policy or another (where an int may start at the policy constant)."""
    spec = _load_valid(text)
    env = spec.environment("ledger")
    policy = spec.default_policy() if limit is None else {"limit": limit}
    for shards in (1, 2):
        for prop in spec.properties.values():
            expected = brute_force_depth(spec, env, prop, shards, policy)
            result = bmc.check_property(
                spec, "ledger", prop, shards=shards, policy=policy, max_depth=MAX_DEPTH, max_traces=1, lax=False
            )
            got = result.depth if result.status == "violated" else None
            kind = "step" if prop.kind == PropertyKind.STEP else "fleet" if prop.fleet else "shard"
            event(f"{kind} property, {shards} shard(s): depth {expected}")
            assert result.status in ("violated", "holds_to_depth"), result.status
            assert got == expected, (
                f"{prop.name} at {shards} shard(s): the checker says {result.status} at depth {result.depth}, "
                f"brute force {'violated at depth ' + str(expected) if expected is not None else 'holds'}\n{text}"
            )
            if result.traces:
                assert result.traces[0].depth == expected
            # The explicit engine searches the reduced state space (cone of influence,
            # saturated counters, one shard where the property's shard evolves alone).
            found = explicit_check(
                spec, "ledger", prop, shards=shards, policy=policy, max_depth=MAX_DEPTH, max_traces=1
            )
            mine = found.depth if found.status == "violated" else None
            assert mine == expected, (
                f"{prop.name} at {shards} shard(s): the reduced explicit search says {found.status} at depth "
                f"{found.depth} ({found.note}), brute force {expected}\n{text}"
            )


@budget(30)
@given(valid_specs(), st.integers(0, 5))
def test_b_the_reduced_search_is_exact(text: str, limit: int) -> None:
    """Saturating counters and dropping what the property cannot see change nothing it can:
    the reduced and the full explicit search agree on each property's shortest violation,
    deeper than brute force goes (an exhausted reduced search, a proof, implies that too)."""
    spec = _load_valid(text)
    policy = {"limit": limit}
    for prop in spec.properties.values():
        full = explicit_check(spec, "ledger", prop, shards=1, policy=policy, max_depth=DEEP, max_traces=1, reduce=False)
        reduced = explicit_check(spec, "ledger", prop, shards=1, policy=policy, max_depth=DEEP, max_traces=1)
        exhausted = "it holds at every depth" in reduced.note
        event(f"reduced: {reduced.status}{', exhausted' if exhausted else ''}")
        event(f"saturated counters: {'counters saturated' in reduced.note}")
        event(f"variables outside the cone: {'outside the cone' in reduced.note}")
        assert (searched(reduced), reduced.depth) == (searched(full), full.depth), f"{reduced.note}\n{text}"


# ============================================================================================
# Bugs these tests found in model/spec.py and codegen/render.py, fixed: kept as regressions
# ============================================================================================

PATCH = '[[variants.fixed.patch]]\nevent = "mark_loaded"\nafter = "consecutive_probe_successes = 0"\n'
EXAMPLE = """examples = { error = 'RuntimeError("generation failed")' }"""

SPEC_PY_BUGS = {
    "patch-block-is-a-list": (
        PATCH,
        PATCH + 'block = ["history"]\n',
        "spec.py _Builder._event: `block not in texts` with an unhashable block raises TypeError",
    ),
    "patch-anchor-deeply-nested": (
        'after = "consecutive_probe_successes = 0"',
        'after = "x = ' + "not " * 4900 + 'True"',
        "spec.py _Builder._apply_patch: ast.parse of the anchor lets RecursionError/MemoryError escape",
    ),
    "example-deeply-nested": (
        EXAMPLE,
        'examples = { error = "' + "-" * 9000 + '1" }',
        "spec.py _check_example: ast.parse of the example lets MemoryError/RecursionError escape",
    ),
}


@pytest.mark.parametrize(
    ("old", "new"),
    [pytest.param(old, new, id=name) for name, (old, new, _reason) in SPEC_PY_BUGS.items()],
)
def test_spec_py_leaks_no_exception(old: str, new: str) -> None:
    assert FLEET.count(old) == 1
    load_or_spec_error(FLEET.replace(old, new))


def test_the_command_line_answers_an_unhashable_patch_block_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.toml"
    path.write_text(FLEET.replace(PATCH, PATCH + "block = []\n"), encoding="utf-8")
    try:
        code = main(["check", str(path), "--max-depth", "1"])
    except TypeError:
        pytest.fail("main() raised TypeError (a traceback for the user)")
    assert code == 2


class CountingText(str):
    """Spec text that counts how often the whole of it is split into lines."""

    splits = 0

    def splitlines(self, keepends: bool = False) -> list[str]:
        CountingText.splits += 1
        return super().splitlines(keepends)


def test_loading_splits_the_text_a_bounded_number_of_times() -> None:
    extra = "".join(f'\n[events.e{n}]\ncall = "e{n}(i)"\nbody = "failures = 0"\n' for n in range(200))
    text = CountingText(BREAKER.replace("[environments.ledger]", extra + "\n[environments.ledger]"))
    CountingText.splits = 0
    load_spec_text(text, NAME)
    assert CountingText.splits <= 5, f"the text was split {CountingText.splits} times for 203 events"


@pytest.mark.parametrize("separator", ["\u2028", "\x85"])
def test_a_unicode_line_separator_in_a_comment_does_not_move_positions(separator: str) -> None:
    text = BREAKER.replace("# A circuit breaker", f"# A circuit{separator} breaker").replace(
        'body = """\nstate = HALF_OPEN', 'body = """\nstate = HALF_OPENX'
    )
    index = text.index("HALF_OPENX")
    err = load_or_spec_error(text)
    assert err is not None
    assert (err.where.line, err.where.col) == (text.count("\n", 0, index) + 1, 9), str(err)


@pytest.mark.parametrize("shards", [0, -1, 1000])
def test_a_scenario_with_an_impossible_fleet_size_is_refused(shards: int) -> None:
    text = FLEET + f'\n[scenarios.bad]\nenvironment = "ledger"\nshards = {shards}\nsteps = []\n'
    assert load_or_spec_error(text) is not None


def test_gen_reports_an_unwritable_output_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledgercheck.codegen.render import GenerationError, write_tests

    def refuse(self: Path, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(GenerationError):
        write_tests(tmp_path / "generated", {"test_x.py": "# generated by ledgercheck\n"})


NEVER_APPLIES = """\
[spec]
name = "generated"
state_field = "state"
default_shards = 2

[enums.S]
members = ["M0", "M1"]

[sets]
SET = ["M0"]

[policy]
limit = { default = 0, min = 0, max = 5 }

[fields]
state = { type = "S", initial = "M0" }
f1 = { type = "int", initial = 0 }
f2 = { type = "bool", initial = false }
f3 = { type = "bool", initial = false }

[history.fields]
h = { type = "int", initial = 0 }

[events.e0]
call = "e0(i)"
requires = '''
f2
'''
body = '''
f1 = f1
'''
raises = [{ when = 'f2', error = 'E0' }]

[events.e1]
call = "e1(i)"
requires = '''
(f1 < f1)
'''
body = '''
f1 = f1 + 1
'''
raises = [{ when = 'f3', error = 'E1' }]

[events.e2]
call = "e2(i)"
body = '''
if f2:
    if f2:
        f2 = not f2
'''
raises = [{ when = 'f2', error = 'E2' }]

[events.e3]
call = "e3(i)"
requires = '''
f2
'''
body = '''
if f2:
    if f2:
        f1 = f1 + 1
'''
raises = [{ when = 'f2', error = 'E3' }]

[environments.ledger]
any_call = true

[properties.p1]
kind = "invariant"
expect = { base = "holds" }
when = '''
False
'''
assert = '''
h <= 0
'''
"""


def test_a_property_whose_when_never_holds_is_checked_not_crashed() -> None:
    """Found by the fuzz: an invariant whose `when` folds to False has an empty cone, and the
    checker then read its assert's history field off the sliced state (KeyError). It holds,
    trivially, as brute force says."""
    spec = _load_valid(NEVER_APPLIES)
    prop = spec.properties["p1"]
    for shards in (1, 2):
        result = bmc.check_property(
            spec, "ledger", prop, shards=shards, policy=spec.default_policy(), max_depth=3, max_traces=1, lax=False
        )
        assert result.status == "holds_to_depth", result.note
        assert brute_force_depth(spec, spec.environment("ledger"), prop, shards, spec.default_policy()) is None
