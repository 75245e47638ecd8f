"""The calls conformance makes: one ledger API call (`LedgerCall`), the clock moving on
(`Tick`, one of the spec's `[clock]` tick actions), a sequence of them on a fleet (`Script`),
and how a call's arguments become the Python objects the API receives."""

from __future__ import annotations

import ast
import builtins
import copy
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledgercheck.model.figure import cell
from ledgercheck.model.interpreter import clock_steps
from ledgercheck.model.lang import Param
from ledgercheck.model.spec import Event, Spec


@dataclass(frozen=True)
class Opaque:
    """An argument the spec ignores (`any`): the Python expression a caller passes for it."""

    text: str

    def __repr__(self) -> str:
        return self.text


_EXCEPTIONS = {
    name: value
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


@functools.cache
def _parsed(text: str) -> tuple[type[BaseException] | None, tuple[Any, ...]] | None:
    """An example as the spec loader admits it: a literal, or a built-in exception built from
    literals (`RuntimeError("generation failed")`). Parsed, never evaluated."""
    try:
        node = ast.parse(text, mode="eval").body
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _EXCEPTIONS:
            if not node.keywords:
                return _EXCEPTIONS[node.func.id], tuple(ast.literal_eval(a) for a in node.args)
            return None
        return None, (ast.literal_eval(node),)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None


def materialise(value: Any) -> Any:
    """The Python object passed for an argument: an opaque one is built afresh each call (an
    exception object is not shared between calls), anything else as it is."""
    if not isinstance(value, Opaque):
        return value
    parsed = _parsed(value.text)
    if parsed is None:
        return value.text
    factory, args = parsed
    if factory is not None:
        return factory(*args)
    return copy.deepcopy(args[0]) if isinstance(args[0], (list, dict, set)) else args[0]


@dataclass(frozen=True)
class LedgerCall:
    """One ledger API call: an event of the spec on one shard, with the spec's arguments."""

    event: str
    shard: int
    args: tuple[tuple[str, Any], ...] = ()

    def label(self, event: Event | None = None) -> str:
        """Short, for a figure's column: the arguments the spec reads (defaults left out)."""
        defaults = {p.name: p.default for p in event.signature.params if p.has_default} if event else {}
        parts = [str(self.shard)] + [
            f"{k}={cell(v)}"
            for k, v in self.args
            if not isinstance(v, Opaque) and not (k in defaults and v == defaults[k])
        ]
        return f"{self.event}({', '.join(parts)})"

    def split(self, event: Event) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments as the API takes them; defaults left out."""
        values = dict(self.args)
        positional: list[Any] = [self.shard]
        keywords: dict[str, Any] = {}
        by_keyword = False
        for param in event.signature.params:
            if param.name not in values:
                by_keyword = by_keyword or not param.keyword_only
                continue
            value = values[param.name]
            if param.has_default and _is_default(value, param):
                by_keyword = True
                continue
            if param.keyword_only or by_keyword:
                keywords[param.name] = value
            else:
                positional.append(value)
        return positional, keywords

    def code(self, event: Event) -> str:
        positional, keywords = self.split(event)
        parts = [repr(v) for v in positional] + [f"{k}={v!r}" for k, v in keywords.items()]
        return f"{self.event}({', '.join(parts)})"


def _is_default(value: Any, param: Param) -> bool:
    if isinstance(value, Opaque):
        return value.text == repr(param.default)
    return bool(value == param.default) and type(value) is type(param.default)


RAISED_BY_CALLS: tuple[type[BaseException], ...] = (Exception, SystemExit)
"""What a call of the implementation may raise that is compared with the model's outcome:
`SystemExit` too. A method that calls `sys.exit` does what the spec does not, so it is a
divergence on that call; let through, it would end the command with the implementation's
exit code (0 reads as a pass)."""


class Overdue(BaseException):
    """Raised by SIGUSR1 in a process of `conform`'s comparison while the implementation runs a
    call (`Conformance.stop_when_overdue`): the command's budget is long spent and the call
    has not returned. A BaseException, so that neither the implementation's `except Exception`
    nor the comparison's (`RAISED_BY_CALLS`) catches it."""


def invoke(ledger: Any, call: LedgerCall, event: Event) -> Any:
    """Make the call; what it returns (compared where the event declares `returns`)."""
    positional, keywords = call.split(event)
    method = getattr(ledger, call.event)
    return method(*[materialise(v) for v in positional], **{k: materialise(v) for k, v in keywords.items()})


@dataclass(frozen=True)
class Tick(LedgerCall):
    """The clock moving on by `units` (one of the spec's tick actions, `event` its name): no
    call on the API; the model and the implementation read one clock, which it advances."""

    units: int = 1

    def label(self, event: Event | None = None) -> str:
        return f"{self.event} +{self.units}"

    def code(self, event: Event | None = None) -> str:
        return f"advance({self.units})"


def clock_ticks(spec: Spec, policy: Mapping[str, int]) -> list[Tick]:
    """One tick per `[clock] steps` entry (a policy name resolved with `policy`), in spec
    order; none without a clock, or for a step named like an event."""
    return [Tick(name, 0, (), units) for name, units in clock_steps(spec, policy).items()]


@dataclass(frozen=True)
class Script:
    """A sequence of ledger calls on a fleet of `shards`, and where it came from."""

    source: str
    shards: int
    calls: tuple[LedgerCall, ...]


def opaque_value(param: Param, event: Event, given: Any = None) -> Opaque:
    """What a caller passes for an argument the spec ignores: the spec's example, else the
    value a trace names, else the default."""
    if param.name in event.examples:
        return Opaque(event.examples[param.name])
    if given is not None:
        return Opaque(repr(given))
    if param.has_default:
        return Opaque(repr(param.default))
    return Opaque(repr(param.name))
