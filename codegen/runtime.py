"""What a generated test needs at run time: the implementation under test, and a check
that watches every ledger call it makes.

A generated test is a plain sequence of the ledger's API calls. Around each call,
`LedgerCheck.call` snapshots the implementation, asserts the observable fields the holding
variant of the spec predicts, and runs the spec's *monitor*: the history (ghost) updates
and the property itself, evaluated over the values the implementation really produced.
So the same test judges the executable model and any real implementation with the API.
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.interpreter import build_api
from model.semantics import ConcreteBackend, Effects, Frame, Key, Machine
from model.spec import Spec, load_spec


class ImplementationError(Exception):
    """The implementation named on the command line cannot be loaded or lacks the API."""


@dataclass(frozen=True)
class Implementation:
    """A ledger class and the policy class to construct it with."""

    label: str
    ledger_class: type
    policy_class: type | None

    def build(self, spec: Spec, shards: int, policy: Mapping[str, int], base_urls: list[str]) -> Any:
        policy_obj = self.policy_class(**policy) if self.policy_class is not None else dict(policy)
        try:
            return self.ledger_class(shard_count=shards, policy=policy_obj, base_urls=base_urls)
        except TypeError as exc:
            raise ImplementationError(
                f"{self.label} cannot be constructed with the ledger's API (shard_count=, policy=, base_urls=): {exc}"
            ) from exc


def model_implementation(spec_path: str | Path, variant: str) -> Implementation:
    api = build_api(load_spec(spec_path).variant(variant))
    return Implementation(f"the executable model of {variant!r}", api.Ledger, api.Policy)


def load_implementation(target: str, spec: Spec) -> Implementation:
    """`module:Class` or `path/to/file.py:Class`; imports only what the user names."""
    location, sep, class_name = target.rpartition(":")
    if not sep or not location or not class_name:
        raise ImplementationError(f"--ledger-impl wants module:Class or path/to/file.py:Class, not {target!r}")
    if location.endswith(".py") or "/" in location or "\\" in location:
        module = _load_file(Path(location))
    else:
        try:
            module = importlib.import_module(location)
        except Exception as exc:
            raise ImplementationError(f"cannot import {location!r}: {type(exc).__name__}: {exc}") from exc
    ledger_class = getattr(module, class_name, None)
    if not isinstance(ledger_class, type):
        raise ImplementationError(f"{location} has no class {class_name!r}")
    policy_class = getattr(module, spec.api_policy_class, None)
    return Implementation(
        f"{location}:{class_name}", ledger_class, policy_class if isinstance(policy_class, type) else None
    )


def _load_file(path: Path) -> Any:
    if not path.is_file():
        raise ImplementationError(f"no such file: {path}")
    name = f"ledgercheck_impl_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImplementationError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before it runs: dataclasses with postponed annotations look it up
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ImplementationError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def normalise(value: Any, spec: Spec) -> Any:
    """An implementation's field value as the spec writes it (enum members by name)."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, str):
        for decl in spec.enums.values():
            for member, api_value in decl.api_values.items():
                if value in (member, api_value) and decl.name == spec.state_enum:
                    return member
    return value


class LedgerCheck:
    """Watches one generated test: expected fields per step and the property's monitor."""

    def __init__(
        self,
        ledger: Any,
        spec: Spec,
        property_name: str,
        shards: int,
        policy: Mapping[str, int],
        note: str | None = None,
    ) -> None:
        self.ledger = ledger
        self.note = note  # leads every failure message (a stale spec, under --ledger-impl)
        self.spec = spec
        self.prop = spec.properties[property_name]
        self.shards = shards
        self.machine: Machine[Any] = Machine(spec, ConcreteBackend(), dict(policy), shards)
        self.history: dict[Key, Any] = {(i, h.name): h.initial for i in range(shards) for h in spec.history}
        self.step = 0
        self.violation: str | None = None
        self.current = ""

    def _fail(self, message: str) -> None:
        import pytest

        lead = f"{self.note}\n" if self.note else ""
        pytest.fail(f"{lead}{self.prop.name}: {self.prop.message}\n  {message}", pytrace=False)

    def observe(self) -> dict[Key, Any]:
        try:
            records = self.ledger.snapshot()
        except AttributeError:
            self._fail("the implementation has no snapshot() (needed to observe every step)")
        store: dict[Key, Any] = {}
        for index in range(self.shards):
            record = records[index]
            for field in self.spec.fields:
                if not hasattr(record, field.name):
                    self._fail(f"the implementation's snapshot records have no field {field.name!r}")
                store[(index, field.name)] = normalise(getattr(record, field.name), self.spec)
        for var in self.spec.globals:
            store[(None, var.name)] = getattr(self.ledger, var.name, var.initial)
        return store

    def callers_would_call(self, event: str, shard: int, **args: Any) -> bool:
        """Whether the ledger's callers (the spec's `requires`) make this call in the state
        the implementation is in now: a step a controller takes only in some states."""
        spec_event = self.spec.events[event]
        if spec_event.requires is None:
            return True
        store = {**self.observe(), **self.history}
        full_args = {p.name: args.get(p.name, p.default) for p in spec_event.signature.params}
        return bool(self.machine.eval(spec_event.requires, Frame(shard, {}, full_args), store))

    @contextmanager
    def call(self, event: str, shard: int, **args: Any) -> Iterator[None]:
        """Wrap one API call: snapshot, call, snapshot, monitor."""
        self.step += 1
        self.current = f"step {self.step}: {event}({shard})"
        if not callable(getattr(self.ledger, event, None)):
            self._fail(f"the implementation has no {event} (needed by {self.current})")
        before = self.observe()
        yield
        after = self.observe()
        self._monitor(event, shard, args, before, after)

    def _monitor(
        self, event_name: str, shard: int, args: Mapping[str, Any], before: dict[Key, Any], after: dict[Key, Any]
    ) -> None:
        event = self.spec.events[event_name]
        full_args = {p.name: args.get(p.name, p.default) for p in event.signature.params}
        store = {**before, **self.history}
        frame = Frame(shard, {}, full_args)
        ignored = bool(self.machine.eval(event.ignore_when, frame, store)) if event.ignore_when is not None else False
        old = {name: store[(shard, name)] for name in self.machine.shard_field_names}
        new_store = {**after, **self.history}
        if not ignored:
            history_frame = Frame(shard, {}, full_args, {}, {"old": old})
            self.machine.exec_block(event.history, history_frame, new_store, True, Effects())
        self.history = {key: new_store[key] for key in self.history}
        new = {name: new_store[(shard, name)] for name in self.machine.shard_field_names}
        if self.prop.kind == "step" and event_name in self.prop.on:
            frame = Frame(shard, {}, full_args, {}, {"before": old, "after": new})
            applies = self.prop.when is None or self.machine.eval(self.prop.when, frame, new_store)
            if applies and not self.machine.eval(self.prop.check, frame, new_store):
                self._record(f"{self.current} broke it: {self.prop.assert_text}")
        elif self.prop.kind == "invariant":
            for index in range(self.shards) if not self.prop.fleet else [None]:
                if not self.machine.invariant(self.prop.when, self.prop.check, index, new_store):
                    where = f"shard {index}" if index is not None else "the fleet"
                    self._record(f"after {self.current}, {where} breaks: {self.prop.assert_text}")

    def _record(self, message: str) -> None:
        if self.violation is None:
            self.violation = message

    def expect(self, shard: int, **fields: Any) -> None:
        """The observable fields of one shard after the current step."""
        try:
            record = self.ledger.snapshot()[shard]
        except (AttributeError, IndexError, KeyError) as exc:
            self._fail(f"cannot read shard {shard} after {self.current}: {exc!r}")
        for name, expected in fields.items():
            actual = normalise(getattr(record, name, "<missing>"), self.spec)
            if actual != expected:
                self._fail(f"after {self.current}, shard {shard}: {name} is {actual!r}, expected {expected!r}")

    def finish(self) -> None:
        """The property's own assertion, over everything the monitor saw."""
        if self.violation is not None:
            self._fail(self.violation)
