"""The implementation under test: loading the class a user names, and building instances of it.

The one loader (`load_implementation`) and the one builder (`Implementation.build`) that
`ledgercheck conform`, the pytest plugin's `--ledger-impl` and `--ledger-conform`, and the
generated tests use. The executable model is an `Implementation` too (`model_implementation`),
so every caller builds whichever it runs against the same way.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import io
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ledgercheck.model.binding import FILE_MODULE_PREFIX, BindingError, bound_class
from ledgercheck.model.errors import EXIT_BAD_INPUT, LedgercheckError, did_you_mean
from ledgercheck.model.interpreter import build_api
from ledgercheck.model.spec import Spec
from ledgercheck.model.trace import base_url


class ImplementationError(LedgercheckError):
    """The implementation cannot be loaded, built or driven through the ledger's API."""

    exit_code = EXIT_BAD_INPUT


def fixed_clock() -> float:
    """A clock where time stands still (what an implementation was built with before ticks)."""
    return 0.0


class ManualClock:
    """The clock conformance and the generated tests hold: it reads 0 until a tick step
    moves it on (`advance`), in the spec's `[clock]` unit. The model and the implementation
    are handed the same one (the implementation through the binding's `drive`). It reads
    whole units, an int: a class that shows how long it has waited (`clock() - started`)
    shows it as the spec's timer counts it (a float clock made a correct class's 0.0 differ
    from the model's 0, and the timer could not be compared)."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def advance(self, units: int) -> None:
        if units < 0:
            raise ValueError(f"time only moves forward, not by {units}")
        self.now += units


@dataclass(frozen=True)
class Implementation:
    """A ledger class, the policy class to construct it with (None: the module has none, and
    the model's policy class stands in) and the model's policy class."""

    label: str
    ledger_class: type
    policy_class: type | None
    model_policy_class: type

    @property
    def accepts_clock(self) -> bool:
        """Whether the class takes a `clock=` argument (conformance passes a `ManualClock`)."""
        try:
            return "clock" in inspect.signature(self.ledger_class).parameters
        except (TypeError, ValueError):
            return False

    @property
    def policy_class_name(self) -> str:
        return (self.policy_class or self.model_policy_class).__name__

    def policy_object(self, policy: Mapping[str, int]) -> Any:
        return (self.policy_class or self.model_policy_class)(**policy)

    def build(
        self,
        shards: int,
        policy: Mapping[str, int],
        *,
        clock: Callable[[], float] | None = None,
        quiet: bool = False,
        **options: Any,
    ) -> Any:
        """`Class(shard_count=, policy=, base_urls=[, clock=])`, the shards at the addresses
        traces use; `quiet` swallows what the constructor prints; `options` are passed on
        (the model's `echo=False`). Raises what the constructor raises."""
        kwargs: dict[str, Any] = {
            "shard_count": shards,
            "policy": self.policy_object(policy),
            "base_urls": [base_url(i) for i in range(shards)],
            **options,
        }
        if clock is not None:
            kwargs["clock"] = clock
        if not quiet:
            return self.ledger_class(**kwargs)
        with contextlib.redirect_stdout(io.StringIO()):
            return self.ledger_class(**kwargs)

    def cannot_build(self, error: BaseException, *, clock: bool = False, label: str = "") -> ImplementationError:
        """The error to report when `build` raised `error`: a bound class's names the
        binding's construct line and the user's class (`bound_class`), not the ledger's API."""
        if isinstance(error, BindingError):
            return ImplementationError(f"{label or self.label}: {error}")
        return ImplementationError(
            f"{label or self.label} cannot be constructed with the ledger's API "
            f"(shard_count=, policy=, base_urls={', clock=' if clock else ''}): {type(error).__name__}: {error}"
        )

    def missing_api(self, instance: Any, spec: Spec) -> list[str]:
        """What the spec needs that the instance lacks: its events, `snapshot`, `state_of`,
        queries; for a bound class, what its binding names that the class lacks (a call or
        read path that cannot be followed: bad input, never a divergence)."""
        missing = [
            f"the implementation has no {event.name} (needed by event {event.name})"
            for event in spec.events.values()
            if not callable(getattr(instance, event.name, None))
        ]
        for name in ("snapshot", "state_of"):
            if not callable(getattr(instance, name, None)):
                missing.append(f"the implementation has no {name} (needed to observe every shard after every call)")
        for query in spec.queries.values():
            if query.api and not callable(getattr(instance, query.api, None)):
                where = f"{spec.path}:{query.line}: " if query.line else ""
                # a bound class's own methods, not its adapter's
                objects = getattr(instance, "_objects", None) or [instance]
                offered = [n for n in dir(objects[0]) if not n.startswith("_")]
                why = (
                    f"{where}the implementation has no {query.api} (needed by query {query.name})"
                    f"{did_you_mean(query.api, offered)}"
                )
                if spec.binding is not None and spec.binding.instances == "each" and query.fleet:
                    why = (
                        f'query {query.name}: with instances = "each", a query over the whole fleet has no one '
                        f'object to ask {query.api}() of (instances = "indexed" builds one for every instance)'
                    )
                missing.append(why)
        problems = getattr(instance, "binding_problems", None)
        if spec.binding is not None and callable(problems):
            missing += problems()
        return missing


def model_implementation(spec: Spec) -> Implementation:
    """The executable model of one spec variant, as an implementation."""
    api = build_api(spec)
    return Implementation(f"the executable model of {spec.variant!r}", api.Ledger, api.Policy, api.Policy)


def split_target(target: str, option: str) -> tuple[str, str]:
    """`module:Class` or `path/to/file.py:Class` as (location, class name)."""
    location, sep, class_name = target.rpartition(":")
    if not sep or not location or not class_name:
        raise ImplementationError(f"{option} wants module:Class or path/to/file.py:Class, not {target!r}")
    return location, class_name


def _is_file(location: str) -> bool:
    return location.endswith(".py") or "/" in location or "\\" in location


IMPORT_ROOT = "LEDGERCHECK_IMPORT_ROOT"
"""An environment variable: the directory a `module:Class` target's module is imported from
first. `ledgercheck ci` sets it for its children (the generated tests run from the tests'
folder, conformance from the working directory), so that both load the module the command
found, not two different ones, or one that only one of them can see."""


def import_root(target: str) -> str | None:
    """The directory `module:Class`'s top-level module is found in, searched as `load_target`
    searches (the import path, then the working directory), without importing it; None for a
    file target or a module not found on a path (a builtin, or none at all)."""
    location, sep, _ = target.rpartition(":")
    if not sep or _is_file(location):
        return None
    top = location.partition(".")[0]
    entries = [os.path.abspath(entry or os.curdir) for entry in sys.path if isinstance(entry, str)]
    for entry in [*entries, os.getcwd()]:
        found = importlib.machinery.PathFinder.find_spec(top, [entry])
        if found is not None:
            return entry
    return None


def load_implementation(target: str, spec: Spec, option: str = "--ledger-impl") -> Implementation:
    """`module:Class` or `path/to/file.py:Class`; imports only what the user names (a module
    from `$LEDGERCHECK_IMPORT_ROOT` first, where that is set). The policy class is the
    module's class named as the spec's (`FleetHealthPolicy`), if any."""
    location, class_name = split_target(target, option)
    if _is_file(location):
        module = _load_file(Path(location))
    else:
        root = os.environ.get(IMPORT_ROOT)
        if root and root not in sys.path:
            sys.path.insert(0, root)
        try:
            module = importlib.import_module(location)
        except Exception as exc:
            raise ImplementationError(f"cannot import {location!r}: {type(exc).__name__}: {exc}") from exc
    ledger_class = getattr(module, class_name, None)
    if not isinstance(ledger_class, type):
        classes = [name for name, value in vars(module).items() if isinstance(value, type)]
        raise ImplementationError(f"{location} has no class {class_name!r}{did_you_mean(class_name, classes)}")
    if spec.binding is not None:  # the spec says how to drive this class: no adapter
        try:
            bound = bound_class(spec.binding, spec, ledger_class)
        except BindingError as exc:
            raise ImplementationError(f"{location}:{class_name}: {exc}") from None
        return Implementation(f"{location}:{class_name}", bound, None, build_api(spec).Policy)
    policy_class = getattr(module, spec.api_policy_class, None)
    return Implementation(
        f"{location}:{class_name}",
        ledger_class,
        policy_class if isinstance(policy_class, type) else None,
        build_api(spec).Policy,
    )


def load_target(target: str, spec: Spec) -> Implementation:
    """`load_implementation` as `ledgercheck conform --impl` names a target: a module in the
    working directory is found too (after installed ones), and a failure says what was loaded."""
    location, _ = split_target(target, "--impl")
    if not _is_file(location) and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        return load_implementation(target, spec)
    except ImplementationError as exc:
        said = str(exc).removeprefix(f"{target}: ")  # named once
        raise ImplementationError(f"cannot load the implementation {target}: {said}") from None


def spec_target(target: str, spec_path: str) -> str:
    """A target as the spec's `[implementation]` names it, for a command run from anywhere: a
    relative file path is read from the working directory where the file is there (a spec
    run from its project's root), else from the spec's own folder (a spec kept beside its
    class); a module name is left to the import path."""
    location, sep, class_name = target.rpartition(":")
    if not sep or not _is_file(location) or Path(location).is_absolute() or Path(location).is_file():
        return target
    beside = Path(spec_path).resolve().parent / location
    return f"{beside}:{class_name}" if beside.is_file() else target


def _load_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise ImplementationError(f"no such file: {path}")
    name = f"{FILE_MODULE_PREFIX}{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
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
