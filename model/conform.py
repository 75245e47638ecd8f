"""Conformance: drive a real implementation and the executable model through the same calls.

`ledgercheck conform --impl module:Class` builds the implementation and the executable model
of one spec variant side by side and makes the same ledger API calls on both. After every
call it compares everything the API shows: every snapshot field of every shard (states by
name), `state_of`, the query methods the spec declares, fleet values (when the
implementation has them), the exception the call raised (the model raises KeyError for an
unknown shard; the implementation must raise a KeyError too) and the number of log lines
the call printed.

The call sequences come from three sources, run in this order:

* **enumeration**: every sequence of calls up to `--depth` in the `ledger` environment,
  breadth-first, with small argument domains (bools both ways, ints 0..2, text None or a
  new address, opaque arguments the spec's example, and each call once on an unknown
  shard). First only calls the callers' contracts (`requires`) allow, then any call: a
  divergence a well-behaved caller meets is reported before one that needs a call outside
  the contracts. Prefixes that bring the model to the same state, and so the
  implementation to the same observed state, are merged: only distinct states are
  expanded. The model's state is its ledger fields and non-metric fleet values (all its
  observable behaviour depends on: events never read history fields or metrics) or, with
  `merge="full"`, every variable. Breadth-first, the first divergence is a shortest one.
* **random**: seeded random traces (`--random` calls in all, `--seed`), mostly calls the
  callers' contracts allow, now and then any call or an unknown shard.
* **counterexamples**: every trace the checker finds for the spec's properties, on every
  variant and environment (the `ledger` environment's lax traces included), replayed call
  by call. Cached on disk (`$LEDGERCHECK_CACHE`), keyed by the spec and ledgercheck's code.

The implementation is built afresh for each trace (for each enumerated sequence, its prefix
replayed). The first divergence is shrunk (delta debugging: calls removed while it still
diverges, a trace within the contracts kept within them, then fewer shards), printed as a
figure with a reproducer, and the command exits 1.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import copy
import dataclasses
import enum
import functools
import hashlib
import inspect
import io
import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model import budget, ir
from model.errors import EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_OK, LedgercheckError, UsageError
from model.figure import cell, render_table
from model.interpreter import LedgerModel, build_api
from model.lang import Param
from model.spec import MAX_SHARDS, Event, Spec, SpecFile, load_spec
from model.trace import Trace, base_url

DEFAULT_DEPTH = 4
ENUMERATION_SHARDS = 2
DEFAULT_RANDOM = 1000
RANDOM_TRACE_CALLS = 50
COUNTEREXAMPLE_DEPTH = 9
COUNTEREXAMPLE_TRACES = 2
INT_DOMAIN = (0, 1, 2)
RARE_WEIGHT = 0.15  # an unguarded event that sets the state (retire): rare in random traces


class ConformanceInputError(LedgercheckError):
    """The implementation cannot be loaded, built or driven through the ledger's API."""

    exit_code = EXIT_BAD_INPUT


# --- calls --------------------------------------------------------------------------------


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


def invoke(ledger: Any, call: LedgerCall, event: Event) -> None:
    positional, keywords = call.split(event)
    method = getattr(ledger, call.event)
    method(*[materialise(v) for v in positional], **{k: materialise(v) for k, v in keywords.items()})


@dataclass(frozen=True)
class Script:
    """A sequence of ledger calls on a fleet of `shards`, and where it came from."""

    source: str
    shards: int
    calls: tuple[LedgerCall, ...]


# --- the implementation -------------------------------------------------------------------


def fixed_clock() -> float:
    """The clock an implementation is built with when it takes one: time stands still."""
    return 0.0


def load_target(target: str, spec: Spec) -> Any:
    """`module:Class` or `path/to/file.py:Class` as a `codegen.runtime.Implementation`."""
    from codegen.runtime import ImplementationError, load_implementation

    location, sep, class_name = target.rpartition(":")
    if not sep or not location or not class_name:
        raise ConformanceInputError(f"--impl wants module:Class or path/to/file.py:Class, not {target!r}")
    is_file = location.endswith(".py") or "/" in location or "\\" in location
    if not is_file and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # a module in the working directory, after installed ones
    try:
        return load_implementation(target, spec)
    except ImplementationError as exc:
        raise ConformanceInputError(f"cannot load the implementation {target}: {exc}") from None


# --- observations -------------------------------------------------------------------------

Key = tuple[Any, ...]
Observation = dict[Key, Any]
MISSING = "<missing>"


@dataclass(frozen=True)
class Outcome:
    """What one call did besides changing state: the exception it raised, the lines it logged."""

    raised: str | None
    logs: int


@dataclass(frozen=True)
class Difference:
    key: Key
    model: Any
    impl: Any

    def where(self) -> str:
        return describe_key(self.key)

    def __str__(self) -> str:
        return f"{self.where()}: model {cell(self.model)}, implementation {cell(self.impl)}"


def describe_key(key: Key) -> str:
    kind = key[0]
    if kind == "field":
        return f"shard {key[1]} {key[2]}"
    if kind == "state_of":
        return f"state_of({key[1]})"
    if kind == "query":
        return f"{key[1]}()"
    if kind == "global":
        return str(key[1])
    if kind == "shards":
        return "snapshot() length"
    if kind == "observe":
        return "reading the implementation"
    if kind == "raised":
        return "exception raised"
    if kind == "logs":
        return "log lines printed"
    if kind == "construct":
        return "construction"
    return repr(key)


@dataclass
class Divergence:
    """The first call after which the implementation and the model disagree."""

    script: Script  # the calls up to and including the divergent one
    index: int  # of the divergent call; -1: right after construction
    differences: list[Difference]
    found_by: str = ""
    original_calls: int = 0
    within_contract: bool = False  # every call up to the divergent one was one the callers' contracts allow

    @property
    def call(self) -> LedgerCall | None:
        return self.script.calls[self.index] if self.index >= 0 else None


@dataclass
class Recording:
    """A script replayed with everything recorded, for the figure."""

    model: list[Observation] = field(default_factory=list)
    impl: list[Observation] = field(default_factory=list)
    model_outcomes: list[Outcome] = field(default_factory=list)
    impl_outcomes: list[Outcome] = field(default_factory=list)
    contract: list[bool | None] = field(default_factory=list)


@dataclass
class Enumeration:
    divergence: Divergence | None
    depth: int  # deepest level fully compared
    sequences: int
    states: int
    exhausted: bool
    seconds: float


class Conformance:
    """One implementation against the executable model of one spec variant."""

    def __init__(self, spec: Spec, impl: Any, policy: Mapping[str, int], label: str = "") -> None:
        self.spec = spec
        self.impl = impl
        self.label = label or getattr(impl, "label", "the implementation")
        self.policy = dict(policy)
        self.api = build_api(spec)
        self.events = dict(spec.events)
        self.queries = [q.api for q in spec.queries.values() if q.api]
        self.calls_compared = 0
        self.traces = 0
        self._model_policy = self.api.Policy(**self.policy)
        self._accepts_clock = _accepts(impl.ledger_class, "clock")
        self._memo: dict[tuple[Any, ...], tuple[tuple[Any, ...], Outcome]] = {}
        self._memo_ok = True
        self._contract_memo: dict[tuple[Any, ...], bool] = {}
        state_enum = spec.enums[spec.state_enum]
        self._enum_names: dict[Any, str] = {}
        self._state_names = {v: m for m, v in state_enum.api_values.items()} | {m: m for m in state_enum.members}
        self._globals = self._check_api()

    # -- building --

    def _policy_object(self) -> Any:
        policy_class = self.impl.policy_class or self.api.Policy
        return policy_class(**self.policy)

    def new_impl(self, shards: int) -> Any:
        kwargs: dict[str, Any] = {
            "shard_count": shards,
            "policy": self._policy_object(),
            "base_urls": [base_url(i) for i in range(shards)],
        }
        if self._accepts_clock:
            kwargs["clock"] = fixed_clock
        with contextlib.redirect_stdout(io.StringIO()):
            return self.impl.ledger_class(**kwargs)

    def new_model(self, shards: int) -> LedgerModel:
        return self.api.Ledger(
            shard_count=shards, policy=self._model_policy, base_urls=[base_url(i) for i in range(shards)], echo=False
        )

    def _check_api(self) -> tuple[str, ...]:
        """Build one instance; every method the spec needs must be there. Returns the fleet
        values the implementation offers."""
        shards = max(1, min(self.spec.default_shards, ENUMERATION_SHARDS))
        try:
            self._policy_object()
        except Exception as exc:
            raise ConformanceInputError(
                f"{self.label}: cannot build its policy with {self.policy}: {type(exc).__name__}: {exc}"
            ) from None
        try:
            instance = self.new_impl(shards)
        except Exception as exc:
            raise ConformanceInputError(
                f"{self.label} cannot be constructed with the ledger's API "
                f"(shard_count=, policy=, base_urls={', clock=' if self._accepts_clock else ''}): "
                f"{type(exc).__name__}: {exc}"
            ) from None
        missing = [
            f"the implementation has no {event.name} (needed by event {event.name})"
            for event in self.events.values()
            if not callable(getattr(instance, event.name, None))
        ]
        for name in ("snapshot", "state_of"):
            if not callable(getattr(instance, name, None)):
                missing.append(f"the implementation has no {name} (needed to observe every shard after every call)")
        for query in self.spec.queries.values():
            if query.api and not callable(getattr(instance, query.api, None)):
                missing.append(f"the implementation has no {query.api} (needed by query {query.name})")
        if missing:
            raise ConformanceInputError(f"{self.label}: " + "; ".join(missing))
        return tuple(g.name for g in self.spec.globals if hasattr(instance, g.name))

    # -- observing --

    def _norm(self, value: Any) -> Any:
        """`codegen.runtime.normalise`, with the common cases first."""
        kind = type(value)
        if kind is int or kind is bool or value is None:
            return value
        if isinstance(value, enum.Enum):
            name = self._enum_names.get(value)
            if name is None:
                name = self._enum_names[value] = value.name
            return name
        if isinstance(value, str):
            return self._state_names.get(value, value)
        return value

    @functools.cache  # noqa: B019 (one layout per fleet size, for the life of the check)
    def _layout(self, shards: int) -> tuple[list[list[tuple[Key, str]]], list[Key], list[tuple[Key, str]]]:
        fields = [[(("field", i, f.name), f.name) for f in self.spec.fields] for i in range(shards)]
        states: list[Key] = [("state_of", i) for i in range(shards)]
        queries = [(("query", api), api) for api in self.queries]
        return fields, states, queries

    def observe(self, ledger: Any, shards: int) -> Observation:
        """Everything the API shows, keyed so that the model's and the implementation's compare."""
        fields, states, queries = self._layout(shards)
        norm = self._norm
        obs: Observation = {("observe",): None}
        try:
            records = list(ledger.snapshot())
            obs[("shards",)] = len(records)
            for index, keys in enumerate(fields):
                record = records[index] if index < len(records) else None
                for key, name in keys:
                    obs[key] = norm(getattr(record, name, MISSING))
            for index, key in enumerate(states):
                obs[key] = norm(ledger.state_of(index))
            for key, api in queries:
                obs[key] = tuple(sorted(getattr(ledger, api)()))
            for name in self._globals:
                obs[("global", name)] = getattr(ledger, name)
        except Exception as exc:
            obs[("observe",)] = f"raised {type(exc).__name__}: {exc}"
        return obs

    def _call_model(self, model: LedgerModel, call: LedgerCall) -> Outcome:
        before = len(model.log_lines)
        raised = None
        try:
            invoke(model, call, self.events[call.event])
        except KeyError:
            raised = "KeyError"
        return Outcome(raised, len(model.log_lines) - before)

    def _step_model(self, model: LedgerModel, call: LedgerCall, keys: _StateKeys) -> Outcome:
        """`_call_model`, memoised: an event reads and writes only its own shard's variables
        and the fleet values (the spec language has no other shard in an event), so its
        effect is a function of those. Checked on every miss; memoising stops if not."""
        if not self._memo_ok or not 0 <= call.shard < keys.shards:
            return self._call_model(model, call)
        store = model._store
        local = keys.local[call.shard]
        memo_key = (call, tuple(store[k] for k in local))
        hit = self._memo.get(memo_key)
        if hit is not None:
            for key, value in zip(local, hit[0], strict=True):
                store[key] = value
            return hit[1]
        before = dict(store)
        outcome = self._call_model(model, call)
        if any(store[k] != v for k, v in before.items() if k not in keys.local_set[call.shard]):
            self._memo_ok = False
        else:
            self._memo[memo_key] = (tuple(store[k] for k in local), outcome)
        return outcome

    def _allowed(self, model: LedgerModel, call: LedgerCall, keys: _StateKeys) -> bool:
        """Whether the callers' contract allows the call in the model's state (memoised like
        `_step_model`: a contract reads the called shard's record)."""
        memo_key = (call, tuple(model._store[k] for k in keys.local[call.shard]))
        allowed = self._contract_memo.get(memo_key)
        if allowed is None:
            allowed = self._contract_memo[memo_key] = bool(_contract(model, call, keys.shards))
        return allowed

    def _call_impl(self, ledger: Any, call: LedgerCall) -> tuple[Outcome, BaseException | None]:
        out = io.StringIO()
        error: BaseException | None = None
        with contextlib.redirect_stdout(out):
            try:
                invoke(ledger, call, self.events[call.event])
            except Exception as exc:  # compared, not swallowed
                error = exc
        lines = sum(1 for line in out.getvalue().splitlines() if line.strip())
        return Outcome(_exception_text(error), lines), error

    def compare(
        self,
        model_obs: Observation,
        impl_obs: Observation,
        model_out: Outcome | None,
        impl_out: Outcome | None,
        error: Any,
    ) -> list[Difference]:
        if model_obs == impl_obs and (model_out is None or (model_out == impl_out and error is None)):
            return []
        differences: list[Difference] = []
        if model_out is not None and impl_out is not None:
            expected = model_out.raised
            same = (error is None) if expected is None else isinstance(error, getattr(builtins, expected, Exception))
            if not same:
                differences.append(Difference(("raised",), expected, impl_out.raised))
            if model_out.logs != impl_out.logs:
                differences.append(Difference(("logs",), model_out.logs, impl_out.logs))
        for key in dict.fromkeys([*model_obs, *impl_obs]):
            left, right = model_obs.get(key, MISSING), impl_obs.get(key, MISSING)
            if left != right:
                differences.append(Difference(key, left, right))
        return differences

    # -- one script --

    def run(self, script: Script, recording: Recording | None = None) -> Divergence | None:
        """Replay a script on a fresh implementation and model; the first divergence, if any."""
        self.traces += 1
        model = self.new_model(script.shards)
        try:
            ledger = self.new_impl(script.shards)
        except Exception as exc:
            return Divergence(script, -1, [Difference(("construct",), "built", _exception_text(exc))])
        model_obs, impl_obs = self.observe(model, script.shards), self.observe(ledger, script.shards)
        if recording is not None:
            recording.model.append(model_obs)
            recording.impl.append(impl_obs)
        found = self.compare(model_obs, impl_obs, None, None, None)
        if found:
            return Divergence(Script(script.source, script.shards, ()), -1, found)
        within = True
        for index, call in enumerate(script.calls):
            allowed = _contract(model, call, script.shards)
            within = within and allowed is True
            if recording is not None:
                recording.contract.append(allowed)
            model_out = self._call_model(model, call)
            impl_out, error = self._call_impl(ledger, call)
            model_obs, impl_obs = self.observe(model, script.shards), self.observe(ledger, script.shards)
            self.calls_compared += 1
            if recording is not None:
                recording.model.append(model_obs)
                recording.impl.append(impl_obs)
                recording.model_outcomes.append(model_out)
                recording.impl_outcomes.append(impl_out)
            found = self.compare(model_obs, impl_obs, model_out, impl_out, error)
            if found:
                calls = script.calls[: index + 1]
                return Divergence(Script(script.source, script.shards, calls), index, found, within_contract=within)
        return None

    # -- enumeration --

    def calls_at(self, shards: int) -> list[LedgerCall]:
        """Every call of one enumeration step: each event on each shard with each argument
        combination of the small domains, then each event once on an unknown shard."""
        calls: list[LedgerCall] = []
        unknown: list[LedgerCall] = []
        for shard in range(shards):
            for event in self.events.values():
                combos = _combinations(
                    [(p.name, enumeration_domain(self.spec, p, event, shard)) for p in event.signature.params]
                )
                calls += [LedgerCall(event.name, shard, combo) for combo in combos]
                if shard == 0:
                    unknown.append(LedgerCall(event.name, shards, combos[0]))
        return calls + unknown

    def enumerate(
        self,
        shards: int,
        depth: int,
        progress: Callable[[str], None] | None = None,
        merge: str = "ledger",
        contract: bool = False,
    ) -> Enumeration:
        """Breadth-first over call sequences, merging prefixes that reach the same state: the
        model's state (`merge="ledger"`: its ledger fields and the fleet values that are not
        metrics, all its observable behaviour depends on; `"full"`: every variable, history
        included) and the implementation's observed state. With `contract`, only the calls
        the callers' contracts (`requires`) allow in the model's state, on known shards."""
        start = time.monotonic()
        choices = self.calls_at(shards)
        if contract:
            choices = [c for c in choices if 0 <= c.shard < shards]
        root = self.run(Script("enumeration", shards, ()))
        if root is not None:
            root.found_by = "construction"
            return Enumeration(root, 0, 1, 1, False, time.monotonic() - start)
        model = self.new_model(shards)
        keys = _StateKeys(self.spec, shards, merge == "full")
        observed: dict[tuple[Any, ...], Observation] = {}

        def model_observation() -> Observation:
            seen_as = keys.observable(model._store)
            if seen_as not in observed:
                observed[seen_as] = self.observe(model, shards)
            return observed[seen_as]

        # The implementation's observed state is part of the merge too, but a state is only
        # merged after the comparison passed, when it equals the model's observation: a
        # function of the model's state. So the model's key is the whole key.
        seen = {keys.merge(model._store)}
        frontier: list[tuple[tuple[LedgerCall, ...], dict[Any, Any]]] = [((), dict(model._store))]
        sequences = 0
        sink = io.StringIO()
        for level in range(1, depth + 1):
            following: list[tuple[tuple[LedgerCall, ...], dict[Any, Any]]] = []
            for prefix, state in frontier:
                model._store = dict(state)
                parent = model_observation()
                # An implementation at this node's state, while it still shows the node's state:
                # a call that changes nothing it shows leaves it for the next call (the same
                # judgement as merging: what the implementation shows is its state).
                ledger = None
                for call in choices:
                    model._store = dict(state)
                    model.log_lines.clear()
                    if contract and not self._allowed(model, call, keys):
                        continue
                    sequences += 1
                    self.traces += 1
                    if ledger is None:
                        ledger = self.new_impl(shards)
                        with contextlib.redirect_stdout(sink):
                            for earlier in prefix:
                                with contextlib.suppress(Exception):
                                    invoke(ledger, earlier, self.events[earlier.event])
                        sink.seek(0)
                        sink.truncate()
                    model_out = self._step_model(model, call, keys)
                    impl_out, error = self._call_impl(ledger, call)
                    impl_obs = self.observe(ledger, shards)
                    self.calls_compared += 1
                    found = self.compare(model_observation(), impl_obs, model_out, impl_out, error)
                    if found:
                        calls = (*prefix, call)
                        script = Script(f"enumeration ({shards} shards, depth {level})", shards, calls)
                        divergence = Divergence(script, len(calls) - 1, found, "enumeration", len(calls), contract)
                        return Enumeration(divergence, level - 1, sequences, len(seen), False, time.monotonic() - start)
                    if impl_obs != parent:
                        ledger = None
                    key = keys.merge(model._store)
                    if key not in seen:
                        seen.add(key)
                        following.append(((*prefix, call), model._store))
            if progress is not None:
                progress(
                    f"  depth {level}: {sequences} call sequences, {len(seen)} distinct states "
                    f"({time.monotonic() - start:.1f} s)"
                )
            frontier = following
            if not frontier:
                return Enumeration(None, level, sequences, len(seen), True, time.monotonic() - start)
        return Enumeration(None, depth, sequences, len(seen), False, time.monotonic() - start)

    # -- shrinking --

    def shrink(self, divergence: Divergence) -> Divergence:
        """Delta debugging: remove chunks of calls, then single calls, while the pair still
        diverges (anywhere); then try the fewest shards the calls need."""
        if divergence.index < 0:
            return divergence
        keep_contract = divergence.within_contract

        def still(found: Divergence | None) -> bool:
            return found is not None and found.index >= 0 and (found.within_contract or not keep_contract)

        best = divergence
        calls = list(best.script.calls)
        chunk = max(1, len(calls) // 2)
        while True:
            progressed = False
            start = 0
            while start < len(calls):
                candidate = calls[:start] + calls[start + chunk :]
                found = self.run(Script(best.script.source, best.script.shards, tuple(candidate)))
                if found is not None and still(found):
                    best = found
                    calls = list(found.script.calls)
                    progressed = True
                else:
                    start += chunk
            if chunk == 1 and not progressed:
                break
            if not progressed:
                chunk = max(1, chunk // 2)
        fewer = self._fewer_shards(best)
        best = fewer if still(fewer) else best
        best.found_by = divergence.found_by
        best.original_calls = divergence.original_calls or len(divergence.script.calls)
        best.script = Script(divergence.script.source, best.script.shards, best.script.calls)
        return best

    def _fewer_shards(self, divergence: Divergence) -> Divergence:
        script = divergence.script
        used = sorted({c.shard for c in script.calls if 0 <= c.shard < script.shards})
        unknown = any(not 0 <= c.shard < script.shards for c in script.calls)
        count = max(1, len(used))
        if count >= script.shards:
            return divergence
        rename = {old: new for new, old in enumerate(used)}
        calls = tuple(
            LedgerCall(c.event, rename[c.shard] if c.shard in rename else (count if unknown else c.shard), c.args)
            for c in script.calls
        )
        found = self.run(Script(script.source, count, calls))
        return found if found is not None and found.index >= 0 else divergence

    # -- reporting --

    def record(self, script: Script) -> Recording:
        recording = Recording()
        self.run(script, recording)
        return recording

    def figure(self, divergence: Divergence, width: int | None = None) -> str:
        """One column per call; rows: the divergent shard's fields (and whatever else differs),
        the model's values, and in the divergent cell the model's value against the
        implementation's, the row marked `>`."""
        script = divergence.script
        recording = self.record(script)
        steps = len(recording.model)
        last = steps - 1
        differing = {d.key for d in divergence.differences}
        shard = _focus_shard(divergence)
        header = [f"shard {shard}", "start"] + [c.label(self.events[c.event]) for c in script.calls]
        rows: list[list[str]] = []

        def impl_value(key: Key) -> Any:
            if key[0] in ("raised", "logs"):
                outcome = recording.impl_outcomes[-1] if recording.impl_outcomes else Outcome(None, 0)
                return outcome.raised if key[0] == "raised" else outcome.logs
            return recording.impl[last].get(key, MISSING)

        def row(name: str, key: Key, values: list[Any], changes: bool = True) -> None:
            marked = key in differing
            cells = []
            for index, value in enumerate(values):
                text = cell(value)
                if changes and index and value != values[index - 1]:
                    text += "*"
                if marked and index == last:
                    text += f" (impl: {cell(impl_value(key))})"
                cells.append(text)
            rows.append([("> " if marked else "  ") + name, *cells])

        if 0 <= shard < script.shards:
            for decl in self.spec.fields:
                key = ("field", shard, decl.name)
                row(decl.name, key, [obs.get(key, MISSING) for obs in recording.model])
        shown = {("field", shard, decl.name) for decl in self.spec.fields} | {("raised",), ("logs",)}
        for key in sorted(differing - shown, key=repr):
            row(describe_key(key), key, [obs.get(key, MISSING) for obs in recording.model])
        if script.calls:
            outcomes = recording.model_outcomes
            row("log lines", ("logs",), ["-"] + [o.logs for o in outcomes], changes=False)
            if ("raised",) in differing or any(o.raised for o in outcomes):
                row("raised", ("raised",), ["-"] + [o.raised or "-" for o in outcomes], changes=False)
            rows.append(["  callers' contract", "-"] + [_contract_text(c) for c in recording.contract])
        return render_table(header, rows, width)

    def report(self, divergence: Divergence, variant: str, width: int | None = None) -> str:
        """The figure, what differs, where the trace came from, and a reproducer."""
        script = divergence.script
        lines = []
        call = divergence.call
        if call is None:
            lines.append(f"{self.label} differs from the model of {variant!r} right after construction:")
        else:
            lines.append(
                f"{self.label} diverges from the model of {variant!r} at call {divergence.index + 1} "
                f"of {len(script.calls)}, {call.label(self.events[call.event])}:"
            )
        lines += [f"  {d}" for d in divergence.differences]
        found = divergence.found_by or script.source
        if divergence.original_calls and divergence.original_calls != len(script.calls):
            found += f"; shrunk from {divergence.original_calls} to {len(script.calls)} calls"
        lines.append(f"  (found by {found}; {_plural(script.shards, 'shard')})")
        if script.calls:
            lines.append(
                "  every call is one the callers' contracts allow"
                if divergence.within_contract
                else "  the trace makes a call outside the callers' contracts (the spec still defines what it does)"
            )
        lines.append("")
        lines.append(self.figure(divergence, width))
        lines.append("* changed by the call; > the implementation differs (impl: its value)")
        lines.append("")
        lines.append("reproduce:")
        policy_name = self.impl.policy_class.__name__ if self.impl.policy_class else self.spec.api_policy_class
        policy_args = ", ".join(f"{k}={v}" for k, v in self.policy.items() if v != self.spec.policy[k].default)
        urls = ", ".join(repr(base_url(i)) for i in range(script.shards))
        clock = ", clock=lambda: 0.0" if self._accepts_clock else ""
        lines.append(
            f"  ledger = {self.impl.ledger_class.__name__}(shard_count={script.shards}, "
            f"policy={policy_name}({policy_args}), base_urls=[{urls}]{clock})"
        )
        lines += [f"  ledger.{c.code(self.events[c.event])}" for c in script.calls]
        return "\n".join(lines)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _accepts(cls: type, name: str) -> bool:
    try:
        return name in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False


def _exception_text(error: BaseException | None) -> str | None:
    if error is None:
        return None
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _global_reads(spec: Spec) -> set[str]:
    """Fleet values the ledger's events and queries read (`x = x + 1` updating x itself aside)."""
    found: set[str] = set()

    def walk(node: Any, updating: str | None = None) -> None:
        if isinstance(node, ir.GlobalRef):
            if node.name != updating:
                found.add(node.name)
        elif isinstance(node, ir.Assign):
            walk(node.value, node.name if node.kind == "global" else None)
        elif isinstance(node, (tuple, list)):
            for item in node:
                walk(item, updating)
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            for item in dataclasses.fields(node):
                walk(getattr(node, item.name), updating)

    for event in spec.events.values():
        walk([event.ignore_when, event.requires, event.body])
    walk([spec.on_state_change, [q.expr for q in spec.queries.values()]])
    return found


class _StateKeys:
    """Which of the model's variables make two states different."""

    def __init__(self, spec: Spec, shards: int, full: bool) -> None:
        read = _global_reads(spec)
        counted = {g.name for g in spec.globals if g.metric and g.name not in read}  # only ever counted
        ledger: list[tuple[int | None, str]] = [(i, f.name) for i in range(shards) for f in spec.fields]
        fleet: list[tuple[int | None, str]] = [(None, g.name) for g in spec.globals if g.name not in counted]
        metrics: list[tuple[int | None, str]] = [(None, g.name) for g in spec.globals if g.name in counted]
        history: list[tuple[int | None, str]] = [(i, h.name) for i in range(shards) for h in spec.history]
        self.shards = shards
        self.observable_keys = ledger + fleet + metrics
        self.merge_keys = ledger + fleet + (history + metrics if full else [])
        every_fleet = fleet + metrics
        self.local = [[(i, v.name) for v in spec.shard_vars] + every_fleet for i in range(shards)]
        self.local_set = [set(keys) for keys in self.local]

    def observable(self, store: Mapping[Any, Any]) -> tuple[Any, ...]:
        return tuple(store[k] for k in self.observable_keys)

    def merge(self, store: Mapping[Any, Any]) -> tuple[Any, ...]:
        return tuple(store[k] for k in self.merge_keys)


def _contract(model: LedgerModel, call: LedgerCall, shards: int) -> bool | None:
    if not 0 <= call.shard < shards:
        return None
    return bool(model.contract_allows(call.event, call.shard, dict(call.args)))


def _contract_text(value: bool | None) -> str:
    return "unknown shard" if value is None else ("ok" if value else "outside")


def _focus_shard(divergence: Divergence) -> int:
    for difference in divergence.differences:
        if difference.key[0] in ("field", "state_of"):
            return int(difference.key[1])
    call = divergence.call
    if call is not None and 0 <= call.shard < divergence.script.shards:
        return call.shard
    return 0


def _combinations(domains: list[tuple[str, list[Any]]]) -> list[tuple[tuple[str, Any], ...]]:
    combos: list[tuple[tuple[str, Any], ...]] = [()]
    for name, values in domains:
        combos = [(*combo, (name, value)) for combo in combos for value in values]
    return combos


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


def enumeration_domain(spec: Spec, param: Param, event: Event, shard: int) -> list[Any]:
    """Small argument domains: bools both ways, ints 0..2, text None or a fresh address,
    enums every member, opaque arguments the spec's example."""
    ptype = param.type
    values: list[Any]
    if ptype.kind == "any":
        return [opaque_value(param, event)]
    if ptype.kind == "bool":
        values = [False, True]
    elif ptype.kind in ("int", "shard"):
        values = list(INT_DOMAIN)
    elif ptype.kind == "str":
        values = [f"http://shard-{shard}.new"]
    elif ptype.kind == "enum" and ptype.enum is not None and ptype.enum in spec.enums:
        values = list(spec.enums[ptype.enum].members)
    else:
        values = [param.default]
    if ptype.optional:
        values = [None, *values]
    return values or [param.default]


# --- random traces ------------------------------------------------------------------------


def _sets_state(event: Event, state_field: str) -> bool:
    return any(isinstance(s, ir.Assign) and s.kind == "field" and s.name == state_field for s in event.body)


def random_scripts(
    spec: Spec, shards: int, policy: Mapping[str, int], total: int, seed: int, per_trace: int = RANDOM_TRACE_CALLS
) -> list[Script]:
    """Seeded random traces: `total` calls in traces of `per_trace`. Three calls in four are
    ones the callers' contracts allow in the model's state; one in fifty names an unknown shard."""
    api = build_api(spec)
    events = list(spec.events.values())
    weights = [
        RARE_WEIGHT if e.ignore_when is None and e.requires is None and _sets_state(e, spec.state_field) else 1.0
        for e in events
    ]
    scripts = []
    number = 0
    while total > 0:
        count = min(per_trace, total)
        total -= count
        rng = random.Random(f"ledgercheck-conform:{seed}:{number}")
        model = api.Ledger(
            shard_count=shards,
            policy=api.Policy(**policy),
            base_urls=[base_url(i) for i in range(shards)],
            echo=False,
        )
        calls = []
        fresh = iter(range(10**9))
        for _ in range(count):
            call = _random_call(rng, model, events, weights, shards, fresh)
            calls.append(call)
            with contextlib.suppress(KeyError):
                invoke(model, call, spec.events[call.event])
        scripts.append(Script(f"random trace {number + 1} (seed {seed})", shards, tuple(calls)))
        number += 1
    return scripts


def _random_args(rng: random.Random, event: Event, shard: int, fresh: Iterator[int]) -> tuple[tuple[str, Any], ...]:
    args = []
    for param in event.signature.params:
        ptype = param.type
        value: Any
        if ptype.kind == "any":
            value = opaque_value(param, event)
        elif ptype.optional and rng.random() < 0.3:
            value = None
        elif ptype.kind == "bool":
            value = rng.random() < 0.5
        elif ptype.kind in ("int", "shard"):
            value = rng.randrange(10)
        elif ptype.kind == "str":
            value = f"http://shard-{shard}.restart-{next(fresh)}"
        else:
            value = param.default
        args.append((param.name, value))
    return tuple(args)


def _random_call(
    rng: random.Random,
    model: LedgerModel,
    events: list[Event],
    weights: list[float],
    shards: int,
    fresh: Iterator[int],
) -> LedgerCall:
    if rng.random() < 0.02:
        event = rng.choices(events, weights)[0]
        return LedgerCall(event.name, rng.choice([-1, shards, shards + 5]), _random_args(rng, event, 0, fresh))
    contract = rng.random() < 0.75
    call = None
    for _ in range(50):
        event = rng.choices(events, weights)[0]
        shard = rng.randrange(shards)
        call = LedgerCall(event.name, shard, _random_args(rng, event, shard, fresh))
        if not contract or model.contract_allows(event.name, shard, dict(call.args)):
            return call
    assert call is not None
    return call


# --- counterexamples ----------------------------------------------------------------------


def trace_script(trace: Trace, spec: Spec, source: str) -> Script:
    """A checker's trace as the ledger calls its steps made, in order."""
    calls = []
    for step in trace.steps[1:]:
        for call in step.calls:
            event = spec.events[call.event]
            args = []
            for param in event.signature.params:
                given = call.args.get(param.name, param.default)
                value = opaque_value(param, event, given) if param.type.kind == "any" else given
                args.append((param.name, value))
            calls.append(LedgerCall(call.event, call.shard, tuple(args)))
    return Script(source, trace.shard_count, tuple(calls))


@functools.cache
def _spec_file(path: str, sha256: str) -> SpecFile:
    spec_file = load_spec(path)
    if spec_file.variant().sha256 != sha256:
        raise UsageError(f"{path} changed while its counterexamples were being collected")
    return spec_file


CheckJob = tuple[str, str, str, str, str, int, tuple[tuple[str, int], ...], int, int]


def _check_job(job: CheckJob, spec_file: SpecFile | None = None) -> list[Script]:
    """One (variant, property, environment) checked: its traces and lax traces as scripts."""
    from model import bmc

    path, sha256, variant, environment, prop_name, shards, policy, depth, traces = job
    spec = (spec_file or _spec_file(path, sha256)).variant(variant)
    result = bmc.check_property(spec, environment, spec.properties[prop_name], shards, dict(policy), depth, traces)
    scripts = []
    for kind, found in (("counterexample", result.traces), ("lax counterexample", result.lax_traces)):
        for number, trace in enumerate(found, 1):
            source = f"{kind} {number} of {variant} / {prop_name} / {environment}"
            scripts.append(trace_script(trace, spec, source))
    return scripts


_COUNTEREXAMPLES: dict[tuple[Any, ...], list[Script]] = {}


def counterexample_scripts(
    spec_file: SpecFile,
    shards: int,
    overrides: Mapping[str, int],
    depth: int = COUNTEREXAMPLE_DEPTH,
    traces: int = COUNTEREXAMPLE_TRACES,
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
    cache: Path | None = None,
    notes: list[str] | None = None,
) -> list[Script]:
    """Every distinct trace the checker finds for every (variant, property, environment),
    as ledger calls. Checks run in `jobs` processes. The result is kept for the process and,
    with `cache` (a directory), on disk: keyed by the spec's text, ledgercheck's own source
    and the parameters, so a changed spec or checker is checked afresh."""
    sha256 = spec_file.variant().sha256
    key = (sha256, spec_file.path, shards, tuple(sorted(overrides.items())), depth, traces)
    if key in _COUNTEREXAMPLES:
        return _COUNTEREXAMPLES[key]
    cache_file = None
    if cache is not None:
        fingerprint = json.dumps([sha256, _code_fingerprint(), shards, sorted(overrides.items()), depth, traces])
        cache_file = cache / f"conform-counterexamples-{hashlib.sha256(fingerprint.encode()).hexdigest()[:24]}.json"
        cached = _read_cache(cache_file)
        if cached is not None:
            if notes is not None:
                notes.append(f"cached in {cache_file}")
            _COUNTEREXAMPLES[key] = cached
            return cached
    work: list[CheckJob] = []
    for variant in spec_file.variants:
        spec = spec_file.variant(variant)
        policy = tuple(spec.resolve_policy(dict(overrides)).items())
        for environment in spec.environments:
            for prop in spec.properties.values():
                if prop.applies_to(environment):
                    work.append(
                        (spec_file.path, sha256, variant, environment, prop.name, shards, policy, depth, traces)
                    )
    results: list[list[Script]] = []
    if jobs > 1 and len(work) > 1 and Path(spec_file.path).is_file():
        import concurrent.futures
        import multiprocessing

        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context(method)) as pool:
            for job, found in zip(work, pool.map(_check_job, work), strict=True):
                if progress is not None:
                    progress(f"  checked {job[2]} / {job[4]} / {job[3]}: {len(found)} trace(s)")
                results.append(found)
    else:
        for job in work:
            results.append(_check_job(job, spec_file))
            if progress is not None:
                progress(f"  checked {job[2]} / {job[4]} / {job[3]}: {len(results[-1])} trace(s)")
    scripts: list[Script] = []
    distinct: set[tuple[int, tuple[LedgerCall, ...]]] = set()
    for found in results:
        for script in found:
            if (script.shards, script.calls) not in distinct:
                distinct.add((script.shards, script.calls))
                scripts.append(script)
    _COUNTEREXAMPLES[key] = scripts
    if cache_file is not None:
        _write_cache(cache_file, scripts)
    return scripts


def default_cache() -> Path | None:
    """$LEDGERCHECK_CACHE (empty: no cache), else $XDG_CACHE_HOME/ledgercheck or ~/.cache/ledgercheck."""
    configured = os.environ.get("LEDGERCHECK_CACHE")
    if configured is not None:
        return Path(configured) if configured else None
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "ledgercheck"


@functools.cache
def _code_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _encode(value: Any) -> Any:
    return {"opaque": value.text} if isinstance(value, Opaque) else value


def _decode(value: Any) -> Any:
    return Opaque(value["opaque"]) if isinstance(value, dict) else value


def _write_cache(path: Path, scripts: list[Script]) -> None:
    data = [
        {
            "source": s.source,
            "shards": s.shards,
            "calls": [[c.event, c.shard, [[k, _encode(v)] for k, v in c.args]] for c in s.calls],
        }
        for s in scripts
    ]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(data), encoding="utf-8")
        temporary.replace(path)
    except (OSError, TypeError, ValueError):
        pass  # a cache that cannot be written is only slower


def _read_cache(path: Path) -> list[Script] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [
            Script(
                item["source"],
                int(item["shards"]),
                tuple(LedgerCall(e, int(i), tuple((k, _decode(v)) for k, v in args)) for e, i, args in item["calls"]),
            )
            for item in data
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- choosing the variant -----------------------------------------------------------------


def default_variant(spec_file: SpecFile) -> str:
    """The first variant whose every property is expected to hold (`fixed` for the bundled
    spec); else the first variant."""
    for name in spec_file.variants:
        spec = spec_file.variant(name)
        if all(p.expect.get(name) == "holds" for p in spec.properties.values()):
            return name
    return spec_file.variants[0]


# --- the command --------------------------------------------------------------------------


@dataclass
class Summary:
    lines: list[str] = field(default_factory=list)
    divergence: Divergence | None = None


def register(subparsers: Any) -> None:
    from model.cli import _policy_arg

    parser = subparsers.add_parser(
        "conform",
        help="check an implementation against the executable model, call by call",
        description="Drive an implementation of the ledger's API and the executable model of a spec variant "
        "through the same calls (every sequence up to --depth, seeded random traces, every counterexample "
        "of the checker) and compare everything the API shows after every call.",
        epilog="examples:\n"
        "  ledgercheck conform --impl nemo_rl.models.generation.fleet_health:GenerationFleetHealth\n"
        "  ledgercheck conform --impl tests/impl/fleet_health_clean.py:GenerationFleetHealth --depth 6\n"
        "  ledgercheck conform --impl path/to/fleet_health.py:GenerationFleetHealth --variant as_written "
        "--no-counterexamples",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("spec", nargs="?", default=None, help="spec file (default: the bundled spec)")
    parser.add_argument("--impl", required=True, metavar="TARGET", help="module:Class or path/to/file.py:Class")
    parser.add_argument(
        "--variant", default=None, help="the variant to conform to (default: the first whose properties all hold)"
    )
    parser.add_argument(
        "--depth",
        type=int,
        default=DEFAULT_DEPTH,
        help=f"enumerate every call sequence up to D (default {DEFAULT_DEPTH})",
    )
    parser.add_argument(
        "--shards",
        type=int,
        default=None,
        help=f"fleet size (default: {ENUMERATION_SHARDS} for enumeration, the spec's for the other traces)",
    )
    parser.add_argument(
        "--random",
        type=int,
        default=DEFAULT_RANDOM,
        metavar="N",
        help=f"random calls in all (default {DEFAULT_RANDOM})",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random traces (default 0)")
    parser.add_argument(
        "--policy",
        action="append",
        type=_policy_arg,
        default=[],
        metavar="NAME=VALUE",
        help="override a policy constant",
    )
    parser.add_argument(
        "--no-counterexamples", action="store_true", help="skip the checker's counterexamples (the slowest source)"
    )
    parser.add_argument(
        "--cex-depth",
        type=int,
        default=COUNTEREXAMPLE_DEPTH,
        metavar="K",
        help=f"checker depth for counterexamples (default {COUNTEREXAMPLE_DEPTH})",
    )
    parser.add_argument(
        "--cex-traces",
        type=int,
        default=COUNTEREXAMPLE_TRACES,
        metavar="M",
        help=f"distinct counterexamples per result (default {COUNTEREXAMPLE_TRACES})",
    )
    parser.add_argument(
        "--jobs", type=int, default=None, help="processes for the checker (default: the CPUs, at most 4)"
    )
    parser.add_argument(
        "--merge",
        choices=("ledger", "full"),
        default="ledger",
        help="enumeration merges prefixes that reach the same model state: its ledger and non-metric fleet "
        "values (ledger, the default: all the model's behaviour depends on), or every variable, history "
        "and metrics included (full: many more states)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="check afresh instead of reading the counterexamples cached by an earlier run "
        "($LEDGERCHECK_CACHE, default ~/.cache/ledgercheck)",
    )
    parser.add_argument("--progress", action="store_true", help="progress on stderr")
    budget.add_options(parser)
    parser.set_defaults(run=run)


def run(ns: argparse.Namespace) -> int:
    for name, value, low in (("--depth", ns.depth, 0), ("--random", ns.random, 0), ("--cex-depth", ns.cex_depth, 0)):
        if value < low:
            raise UsageError(f"{name} must be >= {low}")
    if ns.cex_traces < 1:
        raise UsageError("--cex-traces must be >= 1")
    if ns.shards is not None and not 1 <= ns.shards <= MAX_SHARDS:
        raise UsageError(f"--shards must be in [1, {MAX_SHARDS}]")
    spec_file = load_spec(ns.spec)
    variant = ns.variant or default_variant(spec_file)
    spec = spec_file.variant(variant)
    overrides = dict(ns.policy)
    policy = spec.resolve_policy(overrides)
    impl = load_target(ns.impl, spec)
    conformance = Conformance(spec, impl, policy, ns.impl)
    progress = (lambda message: print(message, file=sys.stderr)) if ns.progress else None
    jobs = ns.jobs if ns.jobs is not None else min(4, os.cpu_count() or 1)
    print(f"ledgercheck conform: {ns.impl} against the model of {variant!r} ({Path(spec_file.path).name})")
    summary = check(
        conformance,
        spec_file,
        overrides,
        depth=ns.depth,
        shards=ns.shards,
        random_calls=ns.random,
        seed=ns.seed,
        counterexamples=not ns.no_counterexamples,
        cex_depth=ns.cex_depth,
        cex_traces=ns.cex_traces,
        jobs=max(1, jobs),
        merge=ns.merge,
        cache=None if ns.no_cache else default_cache(),
        progress=progress,
        echo=print,
    )
    if summary.divergence is not None:
        print()
        print(conformance.report(summary.divergence, variant))
        return EXIT_MISMATCH
    return EXIT_OK


def check(
    conformance: Conformance,
    spec_file: SpecFile,
    overrides: Mapping[str, int],
    *,
    depth: int = DEFAULT_DEPTH,
    shards: int | None = None,
    random_calls: int = DEFAULT_RANDOM,
    seed: int = 0,
    counterexamples: bool = True,
    cex_depth: int = COUNTEREXAMPLE_DEPTH,
    cex_traces: int = COUNTEREXAMPLE_TRACES,
    jobs: int = 1,
    merge: str = "ledger",
    cache: Path | None = None,
    progress: Callable[[str], None] | None = None,
    echo: Callable[[str], None] | None = None,
) -> Summary:
    """Every source in turn, stopping at the first divergence (shrunk)."""
    spec = conformance.spec
    summary = Summary()

    def say(line: str) -> None:
        summary.lines.append(line)
        if echo is not None:
            echo(line)

    def scripts_diverge(scripts: Iterable[Script], by: str) -> Divergence | None:
        for script in scripts:
            budget.stop_if_spent(by, "the lines above found no divergence")
            found = conformance.run(script)
            if found is not None:
                found.found_by = f"{by}: {script.source}"
                found.original_calls = len(found.script.calls)
                return conformance.shrink(found)
        return None

    if depth > 0:
        enum_shards = shards or min(ENUMERATION_SHARDS, spec.default_shards) or 1
        for contract, what in ((True, "calls the callers' contracts allow"), (False, "any call")):
            result = conformance.enumerate(enum_shards, depth, progress, merge, contract)
            if result.divergence is not None:
                say(
                    f"  enumeration      {enum_shards} shards, {what}: divergence at depth {result.depth + 1} "
                    f"({result.sequences} call sequences)"
                )
                result.divergence.found_by = f"enumeration of every sequence of {what} at {enum_shards} shards"
                summary.divergence = conformance.shrink(result.divergence)
                return summary
            note = ", every reachable state seen" if result.exhausted else ""
            say(
                f"  enumeration      {enum_shards} shards, {what}, depth {result.depth}: "
                f"{result.sequences} call sequences, {result.states} distinct states{note} ({result.seconds:.1f} s)"
            )
    other_shards = shards or spec.default_shards
    budget.stop_if_spent("the enumeration", "the lines above found no divergence")
    if random_calls > 0:
        start = time.monotonic()
        scripts = random_scripts(spec, other_shards, conformance.policy, random_calls, seed)
        found = scripts_diverge(scripts, "a random trace")
        if found is not None:
            summary.divergence = found
            return summary
        say(
            f"  random           {other_shards} shards: {random_calls} calls in {len(scripts)} traces, seed {seed} "
            f"({time.monotonic() - start:.1f} s)"
        )
    if counterexamples:
        start = time.monotonic()
        notes: list[str] = []
        scripts = counterexample_scripts(
            spec_file, other_shards, overrides, cex_depth, cex_traces, jobs, progress, cache, notes
        )
        found = scripts_diverge(scripts, "a counterexample of the checker")
        if found is not None:
            summary.divergence = found
            return summary
        calls = sum(len(s.calls) for s in scripts)
        say(
            f"  counterexamples  {len(scripts)} traces of the checker (depth {cex_depth}, {cex_traces} per result), "
            f"{calls} calls ({time.monotonic() - start:.1f} s{'; ' + notes[0] if notes else ''})"
        )
    say(f"{conformance.traces} traces, {conformance.calls_compared} calls compared, no divergence")
    return summary
