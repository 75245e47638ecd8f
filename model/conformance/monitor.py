"""What a generated test needs at run time: a check that watches every ledger call it makes.

A generated test is a plain sequence of the ledger's API calls. Around each call,
`LedgerCheck.call` snapshots the implementation, asserts the observable fields the holding
variant of the spec predicts, and runs the spec's *monitor*: the history (ghost) updates
and the property itself, evaluated over the values the implementation really produced.
So the same test judges the executable model and any real implementation with the API; the
implementation is loaded and built by `model.conformance.implementation`, and its values
read through the same normaliser as `ledgercheck conform` reads them.

A spec with a `[clock]` has tick steps: the check holds the clock the implementation was
built with and moves it on (`tick`). A call the spec says raises is made in `call_raising`,
which asserts the exception's class name. Fields the spec's `[implementation]` binding does
not observe are read off a shadow executable model driven by the same calls and clock: the
monitor needs them, the implementation keeps them to itself. The same shadow answers the
spec's queries after every step, and the implementation must answer them alike (a query
that counted one state too many passed every generated test, and only `conform` saw it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import pytest

from ledgercheck.model.conformance import deadline
from ledgercheck.model.conformance.defaults import CALL_TIMEOUT
from ledgercheck.model.conformance.observation import (
    MISSING,
    RETURNED,
    Normaliser,
    Observer,
    Raised,
    announced_since,
    notifications_text,
)
from ledgercheck.model.semantics import ConcreteBackend, Effects, Frame, Key, Machine
from ledgercheck.model.spec import PropertyKind, Spec


def _answer(value: Any) -> str:
    """A query's answer in a failure message: the shards it names, what it raised, or the value."""
    if isinstance(value, Raised):
        return f"raises {value.shown}"
    if isinstance(value, tuple):
        return f"names shards {list(value)}"
    return "returns" if value == RETURNED else f"returns {value!r}"


class PropertyViolated(pytest.fail.Exception):  # type: ignore[misc,name-defined]
    """The monitored property broke over what the implementation did: the one failure a
    generated test of a property every variant violates expects (its strict xfail's
    `raises`). Any other failure there (a field, a returned value, a missing method) is a
    divergence from the variant the test replays, and fails the test."""


_UNSET: Any = object()
"""No value: a call whose result nobody recorded, or a call that returns none to compare."""


@dataclass
class Returned:
    """What a call wrapped in `LedgerCheck.call_returning` returned: the test sets `value`."""

    value: Any = _UNSET


AFTER_A_HANG = 1.0
"""Seconds a call may take in a pytest run where a call already did not return (`_HUNG`)."""

_HUNG: list[str] = []
"""The calls of this process's tests that did not return within their limit."""


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
        clock: Any = None,
        about_property: bool = True,
        call_timeout: float = CALL_TIMEOUT,
        judges: bool = True,
        model_of: str | None = None,
    ) -> None:
        self.ledger = ledger
        # The variant whose executable model the test runs against (no --impl): a failure then
        # means that model does not do what the test recorded, not that a class is wrong.
        self.model_of = model_of
        # False for a coverage test of a spec none of whose properties its variant keeps: the
        # property it watches (`coverage.monitored_property`'s fallback) may break on the way.
        self.judges = judges
        self.call_timeout = call_timeout  # seconds a call and the reading after it may take (0: no limit)
        self._limit = self.call_timeout
        # False where the property is only watched (a coverage test): a failure that is not
        # the property's own then leads with what the test pins down, not the property's message.
        self.about_property = about_property
        self.clock = clock  # a ManualClock where the spec has a [clock]: what `tick` moves
        self.note = note  # leads every failure message (a stale spec, under --ledger-impl)
        self.spec = spec
        self.prop = spec.properties[property_name]
        self.shards = shards
        self.policy = dict(policy)
        self.machine: Machine[Any] = Machine(spec, ConcreteBackend(), self.policy, shards)
        self.history: dict[Key, Any] = {(i, h.name): h.initial_at(policy) for i in range(shards) for h in spec.history}
        self.normalise = Normaliser(spec)
        self.step = 0
        self.finished = False
        """`finish` returned: the test ran to its end (`codegen.outcomes` reads it, not pytest's report)."""
        self.failure: tuple[bool, str] | None = None
        """Where the check failed the test: whether on its property, and the failure's first line."""
        self.violation: str | None = None
        self.current = ""
        self._announced = 0  # how many announcements the ledger had made as the current call began
        binding = spec.binding
        self.observed = [f.name for f in spec.fields if binding is None or binding.observes(f.name)]
        self.shadow: Any = None
        self.asked = Observer(spec, ()) if any(q.api for q in spec.queries.values()) else None
        # Fleet values the ledger has no attribute for are the shadow model's: a bound class
        # keeps its own counts, or none (a rollout's count of unavailable replicas was read as
        # its initial 0 forever, and the generated tests failed the class that was right).
        self.hidden_globals = [g.name for g in spec.globals if not hasattr(ledger, g.name)]
        # The others are the ledger's own, and must be what the shadow holds after every step
        # (as `conform` compares them): a coordinator whose decision stayed PENDING after both
        # participants voted yes passed every generated test.
        self.shown_globals = [g.name for g in spec.globals if g.name not in self.hidden_globals]
        if len(self.observed) < len(spec.fields) or self.asked is not None or spec.globals:
            from ledgercheck.model.interpreter import build_api

            api = build_api(spec)
            self.shadow = api.Ledger(shard_count=shards, policy=api.Policy(**policy), clock=clock, echo=False)

    def _fail(self, message: str, broke: bool = False) -> NoReturn:
        """Fail the test. Broken, the property leads (`name: message`). A test about its
        property (a counterexample's) the ledger left before the property was judged says so,
        and names the trace's property (`... does not do what fixed does, on the trace of
        name (message)`). A test that only watches the property leads with the variant it pins
        down, and names the property only if the monitor saw it broken (`broke`, or a
        violation recorded so far)."""
        lead = f"{self.note}\n" if self.note else ""
        if self.model_of is None:
            subject = f"the implementation does not do what {self.spec.variant} does"
        elif self.model_of == self.spec.variant:
            subject = f"the spec's model no longer does what {self.spec.variant} did when this test was generated"
        else:
            subject = f"the model of {self.model_of} does not do what {self.spec.variant} does"
        if broke:
            headline = f"{self.prop.name}: {self.prop.message}\n  {message}"
        elif self.about_property:
            # The trace of a counterexample, left before the property was judged: what the test
            # is about, on the first line (pytest's short summary and ci quote it alone), and not
            # as if the property had broken (a bug elsewhere on the way fails the test too).
            headline = f"{subject}, on the trace of {self.prop.name} ({self.prop.message})\n  {message}"
        else:
            headline = f"{subject}\n  {message}"
            if self.violation is not None:
                headline += f"\n  meanwhile {self.prop.name}: {self.prop.message}\n  {self.violation}"
        self.failure = (broke, headline.split("\n", 1)[0])
        if broke:
            raise PropertyViolated(f"{lead}{headline}", pytrace=False)
        pytest.fail(f"{lead}{headline}", pytrace=False)

    def observe(self) -> dict[Key, Any]:
        try:
            records = self.ledger.snapshot()
        except AttributeError:
            self._fail("the implementation has no snapshot() (needed to observe every step)")
        shadow = self.shadow.snapshot() if self.shadow is not None else records
        store: dict[Key, Any] = {}
        for index in range(self.shards):
            record = records[index]
            for field in self.spec.fields:
                if field.name not in self.observed:
                    store[(index, field.name)] = self.normalise.field(field.name, getattr(shadow[index], field.name))
                    continue
                if not hasattr(record, field.name):
                    self._fail(f"the implementation's snapshot records have no field {field.name!r}")
                store[(index, field.name)] = self.normalise.field(field.name, getattr(record, field.name))
        for var in self.spec.globals:
            holder = self.shadow if var.name in self.hidden_globals else self.ledger
            store[(None, var.name)] = self.normalise.fleet_value(var.name, getattr(holder, var.name))
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
        before = self._begin(event, shard, args)
        with self._limited():
            try:
                yield
            except Exception as exc:  # the spec says it returns: named as the test's failure
                self._fail(self._unexpected(exc))
            self._end(event, shard, args, before, raised=False)

    @contextmanager
    def call_returning(self, expected: Any, event: str, shard: int, **args: Any) -> Iterator[Returned]:
        """Wrap one API call of an event that declares `returns`: the test puts what the call
        returned in the yielded `Returned`, which must be `expected` (normalised, as a field
        is), and the monitor's step property reads it as `result`."""
        before = self._begin(event, shard, args)
        outcome = Returned()
        with self._limited():
            try:
                yield outcome
            except Exception as exc:
                self._fail(self._unexpected(exc, expected))
            if outcome.value is _UNSET:
                self._fail(f"{self.current}: the test did not record what the call returned")
            actual = self.normalise.returned(event, outcome.value)
            if actual != expected:
                self._fail(f"{self.current} returned {actual!r}, expected {expected!r}")
            self._end(event, shard, args, before, raised=False, result=actual)

    def _unexpected(self, exc: Exception, expected: Any = _UNSET) -> str:
        """A call the spec says returns raised: which, and what it should have done."""
        should = "return" if expected is _UNSET else f"return {expected!r}"
        return f"{self.current} raised {type(exc).__name__}: {exc}, expected it to {should}"

    @contextmanager
    def call_raising(self, error: str, event: str, shard: int, **args: Any) -> Iterator[None]:
        """Wrap one API call the spec says raises `error` (a class name): it must, and it
        changes nothing the monitor does not see."""
        before = self._begin(event, shard, args)
        with self._limited():
            try:
                yield
            except Exception as exc:
                if type(exc).__name__ != error:
                    self._fail(f"{self.current} raised {type(exc).__name__}: {exc}, expected {error}")
            else:
                self._fail(f"{self.current} returned, expected it to raise {error}")
            self._end(event, shard, args, before, raised=True)

    @contextmanager
    def _limited(self) -> Iterator[None]:
        """The call and the reading of the state after it, under the per-call limit: past
        `call_timeout` the test fails where the implementation is, naming the call (where this
        process can: its main thread, SIGALRM not taken by another plugin). Once a call of this
        run did not return, later calls get `AFTER_A_HANG` at most: every test that reaches the
        same hang would otherwise wait the whole limit (35 tests, 350 s of silence in ci)."""
        self._limit = min(self.call_timeout, AFTER_A_HANG) if _HUNG else self.call_timeout
        try:
            with deadline.limited(self._limit):
                yield
        except deadline.TooLong:
            self._too_long()

    def _too_long(self) -> None:
        first = not _HUNG
        _HUNG.append(self.current)
        later = "" if first else f" (a call of this run already did not return: later calls get {AFTER_A_HANG:g} s)"
        self._fail(
            f"{self.current} did not return within {self._limit:g} s (--call-timeout){later}: an endless loop, a lock "
            "never released or a wait on a clock that does not move"
        )

    def tick(self, action: str, units: int) -> None:
        """One of the clock's tick actions: the clock the implementation reads moves on by
        `units`, and with it every timer of the monitor's history."""
        self.step += 1
        self.current = f"step {self.step}: {action}"
        if self.clock is None:
            self._fail(f"{self.current}: the implementation was built without a clock to move")
        self.clock.advance(units)
        timers = {h.name for h in self.spec.history if h.timer}
        self.history = {k: v + units if k[1] in timers else v for k, v in self.history.items()}
        self._queries()
        if self.prop.kind == PropertyKind.INVARIANT:
            self._invariant({**self.observe(), **self.history})

    def _begin(self, event: str, shard: int, args: Mapping[str, Any]) -> dict[Key, Any]:
        self.step += 1
        shown = "".join(f", {name}={value!r}" for name, value in args.items())
        self.current = f"step {self.step}: {event}({shard}{shown})"
        if not callable(getattr(self.ledger, event, None)):
            self._fail(f"the implementation has no {event} (needed by {self.current})")
        self._announced = len(getattr(self.ledger, "notifications", ()))
        return self.observe()

    def _end(
        self,
        event: str,
        shard: int,
        args: Mapping[str, Any],
        before: dict[Key, Any],
        raised: bool,
        result: Any = _UNSET,
    ) -> None:
        if self.shadow is not None:
            # an argument the spec ignores (`any`) is left out of the test's record of the call
            params = self.spec.events[event].signature.params
            ignored = {p.name: None for p in params if p.type.kind == "any" and not (p.has_default or p.name in args)}
            self._mirror(getattr(self.shadow, event), shard, {**ignored, **args})
        self._monitor(event, shard, args, before, self.observe(), raised, result)
        self._fleet_values()
        self._queries()

    def _fleet_values(self) -> None:
        """Every fleet value the ledger shows, after the current step, as the shadow model
        (driven by the same calls) holds it."""
        if self.shadow is None:
            return
        for name in self.shown_globals:
            expected = self.normalise.fleet_value(name, getattr(self.shadow, name))
            with self._limited():
                actual = self.normalise.fleet_value(name, getattr(self.ledger, name))
            if actual != expected:
                self._fail(f"after {self.current}: the fleet value {name} is {actual!r}, expected {expected!r}")

    def _queries(self) -> None:
        """Every query of the spec, asked of the implementation after the current step and
        answered as the shadow model (driven by the same calls) answers it."""
        if self.asked is None or self.shadow is None:
            return
        expected = self.asked.answers(self.shadow)
        with self._limited():
            actual = self.asked.answers(self.ledger)
        for api, answer in expected.items():
            if actual[api] != answer:
                self._fail(f"after {self.current}: {api}() {_answer(actual[api])}, expected: {_answer(answer)}")

    @staticmethod
    def _mirror(method: Callable[..., Any], shard: int, args: Mapping[str, Any]) -> None:
        try:
            method(shard, **args)
        except Exception:  # the spec's own errors: the shadow changed nothing, as the spec says
            pass

    def _monitor(
        self,
        event_name: str,
        shard: int,
        args: Mapping[str, Any],
        before: dict[Key, Any],
        after: dict[Key, Any],
        raised: bool = False,
        result: Any = _UNSET,
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
        if self.prop.kind == PropertyKind.STEP and event_name in self.prop.on:
            emitted = self._emitted(event_name, shard, full_args, store)
            if result is _UNSET and event.returns is not None:  # it raised: the spec's value, as the model's
                result = self.machine.eval(event.returns, Frame(shard, {}, full_args, {}, {"old": old}), new_store)
            outcome = {"raised": raised} if result is _UNSET else {"raised": raised, "result": result}
            frame = Frame(shard, {}, full_args, outcome, {"before": old, "after": new}, emitted)
            applies = self.prop.when is None or self.machine.eval(self.prop.when, frame, new_store)
            if applies and not self.machine.eval(self.prop.check, frame, new_store):
                self._record(f"{self.current} broke it: {self.prop.assert_text}")
        elif self.prop.kind == PropertyKind.INVARIANT:
            self._invariant(new_store)

    def _emitted(self, event: str, shard: int, args: Mapping[str, Any], before: Mapping[Key, Any]) -> dict[str, bool]:
        """`emitted(name)` of the current call: what the implementation was heard announcing
        where the binding hears a callback of `name`; else what the spec says the call
        announces from the state it began in (a notification nobody observes). A spec that
        declares no notifications has nothing to say, and the call is not run again."""
        if not self.spec.notifications:
            return {}
        effects: Effects[Any] = Effects()
        self.machine.call_event(self.spec.events[event], shard, args, dict(before), True, effects)
        emitted = {name: bool(value) for name, value in effects.calls[-1].emitted.items()}
        binding = self.spec.binding
        if binding is not None:
            heard = {channel for channel, _ in announced_since(self.ledger, self.spec, self._announced)}
            for announcer in binding.announcers:
                if announcer.form != "logger":
                    emitted[announcer.notification] = announcer.channel in heard
        return emitted

    def expect_notifications(self, expected: Sequence[tuple[str, int, Any]]) -> None:
        """What the current call announced, as the binding hears it: (channel, instance,
        arguments or log text) in the order the holding variant announces them; compared in
        order within each channel (`binding.by_channel`)."""
        from ledgercheck.model.binding import by_channel

        wanted = by_channel([(c, i, tuple(p) if isinstance(p, list) else p) for c, i, p in expected])
        actual = announced_since(self.ledger, self.spec, self._announced)
        if actual != wanted:
            self._fail(
                f"after {self.current}: announced {notifications_text(actual)}, expected {notifications_text(wanted)}"
            )

    def _invariant(self, store: Mapping[Key, Any]) -> None:
        for index in range(self.shards) if not self.prop.fleet else [None]:
            if not self.machine.invariant(self.prop.when, self.prop.check, index, store):
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
            actual = self.normalise.field(name, getattr(record, name, MISSING))
            if actual != expected:
                self._fail(f"after {self.current}, shard {shard}: {name} is {actual!r}, expected {expected!r}")

    def finish(self) -> None:
        """The property's own assertion, over everything the monitor saw."""
        if self.violation is not None and self.judges:
            self._fail(self.violation, broke=True)
        self.finished = True
