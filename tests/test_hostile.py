"""Hostile spec text: the expression language can name things and compare them, nothing more.

Every payload below is put into a real spec (the breaker example, or the fleet spec for an
environment action) in each place where the language is used (a guard, a property, a query,
an `if` condition, an event body, a history block, an action body, a call signature) and
must be refused with a SpecError that names `file:line` on the payload's own lines, quickly
(< 2 s), without a RecursionError, MemoryError or hang. While the loader runs, sentinels
record every import, eval/exec, bytecode compile, open, os.system/popen and subprocess
start; none may happen, and the payloads' own side effect (a marker file) never appears.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import os
import re
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ledger_fixture import LEDGER_SPEC

from ledgercheck.model.errors import SpecError
from ledgercheck.model.spec import load_spec_text

NAME = "x.toml"
LOCATED = re.compile(r"^x\.toml:\d+(:\d+)?: ")
BREAKER = (Path(__file__).resolve().parents[1] / "spec" / "examples" / "breaker.toml").read_text(encoding="utf-8")
FLEET = LEDGER_SPEC.read_text(encoding="utf-8")
SECONDS = 2.0
MARKER = "/tmp/ledgercheck-hostile-marker"  # what a payload would create if it ever ran
STDLIB = sysconfig.get_paths()["stdlib"]

# --- where a payload goes ------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """A place in a spec: `old` (unique in `base`) is replaced by `template` with the payload
    put in for {}. TOML literal strings ('''...''') keep the payload verbatim."""

    base: str
    old: str
    template: str

    def edit(self, payload: str) -> tuple[str, int, int]:
        """The edited spec, and the first and last line of the replacement."""
        assert self.base.count(self.old) == 1, self.old
        new = self.template.replace("{}", payload)
        start = self.base.index(self.old)
        first = self.base.count("\n", 0, start) + 1
        return self.base.replace(self.old, new), first, first + new.count("\n")


EXPRESSION_CONTEXTS = {
    "guard": Context(BREAKER, 'ignore_when = "state != OPEN"', "ignore_when = '''{}'''"),
    "assert": Context(BREAKER, 'assert = "failures <= trip_after"', "assert = '''{}'''"),
    "query": Context(BREAKER, "[fields]\n", "[queries]\nq = '''{}'''\n\n[fields]\n"),
    "if": Context(BREAKER, 'body = """\nstate = HALF_OPEN\n"""', "body = '''\nif {}:\n    state = HALF_OPEN\n'''"),
    "action-when": Context(
        FLEET,
        'when = "phase == RUNNING and exists(state == STALE)"',
        "when = '''{}'''",
    ),
}

STATEMENT_CONTEXTS = {
    "body": Context(BREAKER, 'body = """\nstate = HALF_OPEN\n"""', "body = '''\n{}\nstate = HALF_OPEN\n'''"),
    "history": Context(BREAKER, 'history = """\nreal_failures = 0\n"""', "history = '''\n{}\n'''"),
    "action-body": Context(FLEET, 'body = "report_success(i)"', "body = '''\n{}\n'''"),
}

SIGNATURE_CONTEXT = Context(BREAKER, 'call = "cool_down(i)"', "call = '''{}'''")

# --- the payloads ----------------------------------------------------------------------------

RUN = f"__import__('pathlib').Path('{MARKER}').write_text('ran')"

EXPRESSIONS: dict[str, str] = {
    "import-call": "__import__('os')",
    "import-and-run": RUN,
    "os-system": "__import__('os').system('touch " + MARKER + "')",
    "class-bases": "().__class__.__bases__",
    "subclasses": "().__class__.__base__.__subclasses__()",
    "args-class": "args.__class__",
    "args-dict": "args.__dict__ == None",
    "attribute-chain": "a.b.c",
    "args-chain": "args.x.y",
    "open": "open('x')",
    "len": "len(x)",
    "eval": "eval('1')",
    "exec": "exec('1')",
    "getattr": "getattr(args, 'x')",
    "globals": "globals()",
    "breakpoint": "breakpoint()",
    "method-call": "state.lower()",
    "subscript": "x[0]",
    "state-subscript": "state[0]",
    "slice": "state[0:1]",
    "lambda": "lambda: True",
    "lambda-called": "(lambda: True)()",
    "list-comprehension": "[x for x in shards]",
    "set-comprehension": "{x for x in shards}",
    "dict-comprehension": "{x: 1 for x in shards}",
    "generator": "(x for x in shards)",
    "generator-in-call": "any(x for x in shards)",
    "f-string": "f'{state}' == 'x'",
    "f-string-call": "f'{__import__(\"os\")}'",
    "walrus": "(x := 1)",
    "walrus-in-compare": "(failures := 1) == 1",
    "dunder": "__builtins__",
    "underscore": "_x == 1",
    "single-underscore": "_ == 1",
    "power": "10**1000 == 1",
    "huge-literal": "failures == 1" + "0" * 5000,
    "huge-hex": "failures == 0x" + "f" * 5000,
    "big-literal": "failures == 99999999999999999999999",
    "multiply": "failures * 2 == 1",
    "matmul": "failures @ failures",
    "shift": "failures << 1000000 == 0",
    "invert": "~failures == 0",
    "float": "failures == 1.5",
    "complex": "failures == 1j",
    "bytes": "b'x' == b'y'",
    "ellipsis": "...",
    "list": "[1, 2]",
    "tuple": "(1, 2)",
    "dict": "{1: 2}",
    "set": "{1}",
    "starred": "*x",
    "await": "await x",
    "yield": "(yield)",
    "is-not-none": "state is OPEN",
    "string-concat": "'a' 'b'",
    "nested-parens-10000": "(" * 10000 + "True" + ")" * 10000,
    "nested-parens-5000": "(" * 5000 + "True" + ")" * 5000,
    "nested-brackets-10000": "[" * 10000 + "]" * 10000,
    "not-10000": "not " * 10000 + "True",
    "not-4000": "not " * 4000 + "True",
    "minus-10000": "failures == " + "-" * 10000 + "1",
    "minus-5000": "failures == " + "-" * 5000 + "1",
    "sum-5000": "failures == " + " + ".join(["1"] * 5000),
    "ifexp-2000": "True if True else " * 2000 + "True",
    "one-megabyte": "failures == 1 or " * 62500 + "True",
    "one-megabyte-name": "a" * 1_000_000,
}

STATEMENTS: dict[str, str] = {
    "import": "import os",
    "import-from": "from os import system",
    "import-dunder": "os = __import__('os')",
    "exec": "exec('print(1)')",
    "eval": "eval('1')",
    "os-system": "os.system('touch " + MARKER + "')",
    "run": RUN,
    "def": "def f():\n    pass",
    "async-def": "async def f():\n    pass",
    "decorated": "@f\ndef g():\n    pass",
    "class": "class A:\n    pass",
    "lambda-statement": "lambda: 0",
    "with": "with open('x') as f:\n    pass",
    "try": "try:\n    pass\nexcept Exception:\n    pass",
    "raise": "raise SystemExit(1)",
    "assert": "assert False",
    "del": "del state",
    "global": "global state",
    "while": "while True:\n    pass",
    "for-range": "for x in range(3):\n    pass",
    "match": "match state:\n    case OPEN:\n        pass",
    "return": "return",
    "yield": "yield 1",
    "annotated": "state: Mode = OPEN",
    "chained": "x = y = 1",
    "tuple-target": "a, b = 1, 2",
    "attribute-target": "state.x = 1",
    "subscript-target": "state[0] = 1",
    "underscore-target": "_x = 1",
    "dunder-target": "__builtins__ = 1",
    "multiply-assign": "failures *= 2",
    "bare-expression": "failures",
    "print": "print(1)",
    "walrus-statement": "(x := 1)",
    "huge-literal": "state = 1" + "0" * 5000,
    "100000-lines": "\n".join(["state = HALF_OPEN"] * 100_000),
    "100000-pass": "\n".join(["pass"] * 100_000),
    "deep-if": "".join("    " * n + "if True:\n" for n in range(80)) + "    " * 80 + "pass",
}

SIGNATURES: dict[str, str] = {
    "trailing-statement": "cool_down(i):\n    import os\ndef g(i)",
    "return-annotation": "cool_down(i) -> __import__('os')",
    "default-call": "cool_down(i, x: int = __import__('os'))",
    "annotation-call": "cool_down(i, x: __import__('os'))",
    "default-huge": "cool_down(i, x: int = 1" + "0" * 5000 + ")",
    "default-wrong-type": "cool_down(i, x: bool = 'yes')",
    "dunder-shard": "cool_down(__class__)",
    "varargs": "cool_down(i, *args)",
    "kwargs": "cool_down(i, **kwargs)",
    "lambda-default": "cool_down(i, x: int = lambda: 0)",
    "shard-default": "cool_down(i, j: shard = 0)",
    "enum-default-not-a-member": "cool_down(i, m: Mode = 'SHUT')",
}


def _cases() -> Iterator[Any]:
    for context_name, context in EXPRESSION_CONTEXTS.items():
        for name, payload in EXPRESSIONS.items():
            yield pytest.param(context, payload, id=f"{context_name}:{name}")
    for context_name, context in STATEMENT_CONTEXTS.items():
        for name, payload in STATEMENTS.items():
            if context_name == "action-body" and name == "100000-pass":
                continue  # a block of `pass` is a fine action body, only too long: covered by the others
            yield pytest.param(context, payload, id=f"{context_name}:{name}")
    for name, payload in SIGNATURES.items():
        yield pytest.param(SIGNATURE_CONTEXT, payload, id=f"call:{name}")


# --- sentinels -------------------------------------------------------------------------------


@contextmanager
def sentinels(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record anything that would run code, import, open a file or start a process."""
    calls: list[str] = []

    def spy(label: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def recorder(*args: Any, **kwargs: Any) -> Any:
            calls.append(f"{label}({args[0]!r})" if args else f"{label}()")
            return real(*args, **kwargs)

        return recorder

    real_import = builtins.__import__

    def import_spy(name: str, *args: Any, **kwargs: Any) -> Any:
        # The standard library imports lazily (ast.walk: collections); code from spec text,
        # however it got to run, would import from a frame of its own.
        if not sys._getframe(1).f_code.co_filename.startswith(STDLIB):
            calls.append(f"__import__({name!r})")
        return real_import(name, *args, **kwargs)

    real_compile = builtins.compile

    def compile_spy(source: Any, filename: Any, mode: str, flags: int = 0, *args: Any, **kwargs: Any) -> Any:
        if not flags & ast.PyCF_ONLY_AST:  # ast.parse compiles to a tree only: that is all the loader may do
            calls.append(f"compile({mode!r})")
        return real_compile(source, filename, mode, flags, *args, **kwargs)

    with monkeypatch.context() as patch:
        for name in ("eval", "exec", "open", "breakpoint", "input"):
            patch.setattr(builtins, name, spy(name, getattr(builtins, name)))
        patch.setattr(builtins, "compile", compile_spy)
        patch.setattr(builtins, "__import__", import_spy)
        for name in ("system", "popen", "execv", "execve", "remove", "unlink"):
            patch.setattr(os, name, spy(f"os.{name}", getattr(os, name)))
        patch.setattr(subprocess, "Popen", spy("subprocess.Popen", subprocess.Popen))
        patch.setattr(importlib, "import_module", spy("importlib.import_module", importlib.import_module))
        calls.clear()  # monkeypatch itself imports (inspect) while it patches
        yield calls


def _refused(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[SpecError, list[str], float]:
    start = time.monotonic()
    with sentinels(monkeypatch) as calls:
        try:
            load_spec_text(text, NAME)
        except SpecError as exc:
            error = exc
        except BaseException as exc:  # the point: nothing else may escape
            pytest.fail(f"the loader leaked {type(exc).__name__}: {str(exc)[:300]}")
        else:
            pytest.fail("the hostile spec was accepted")
    return error, list(calls), time.monotonic() - start


@pytest.fixture(autouse=True)
def _no_marker() -> Iterator[None]:
    if os.path.exists(MARKER):
        os.unlink(MARKER)
    yield
    assert not os.path.exists(MARKER), "a payload ran"


@pytest.mark.parametrize(("context", "payload"), list(_cases()))
def test_hostile_text_is_refused_with_its_line(context: Context, payload: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text, first, last = context.edit(payload)
    error, calls, seconds = _refused(text, monkeypatch)
    assert type(error) is SpecError
    assert LOCATED.match(str(error)), str(error)[:300]
    assert first <= error.where.line <= last, f"line {error.where.line} is not in {first}..{last}: {str(error)[:300]}"
    assert seconds < SECONDS, f"took {seconds:.2f}s"
    assert not calls, f"loading ran {calls}"
    assert len(str(error)) < 25_000, "the message echoes more than the language's length limit"


def test_nul_character_in_an_expression_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    text = BREAKER.replace('ignore_when = "state != OPEN"', 'ignore_when = "state != OPEN \\u0000"')
    error, calls, _ = _refused(text, monkeypatch)
    assert LOCATED.match(str(error)), str(error)
    assert not calls


@pytest.mark.parametrize("depth", [1_000, 10_000])
def test_deeply_nested_toml_is_refused(depth: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("[" * depth + "]" * depth, "{a = " * depth + "1" + "}" * depth):
        text = BREAKER.replace("default_shards = 2", f"default_shards = 2\ndoc = {value}")
        error, calls, seconds = _refused(text, monkeypatch)
        assert LOCATED.match(str(error)), str(error)
        assert error.where.line == 9, str(error)
        assert seconds < SECONDS
        assert not calls


def test_the_sentinels_see_what_they_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sentinels are live: code that does run is recorded."""
    with sentinels(monkeypatch) as calls:
        eval("1")
        __import__("os")
        compile("1", "<x>", "eval")
        ast.parse("1")
    assert calls == ["eval('1')", "__import__('os')", "compile('eval')"]


def test_shipped_specs_load_under_the_sentinels(monkeypatch: pytest.MonkeyPatch) -> None:
    with sentinels(monkeypatch) as calls:
        load_spec_text(FLEET, NAME)
        load_spec_text(BREAKER, NAME)
    assert not calls, calls
