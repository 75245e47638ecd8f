"""Running the implementation and the model side by side: one script, every call sequence
up to a depth (breadth-first, merging prefixes that reach the same state), and shrinking a
divergence to a shortest one. A spec with a `[clock]` adds its tick actions to the calls:
the model and the implementation read one `ManualClock`, and a tick moves it on."""

from __future__ import annotations

import contextlib
import io
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ledgercheck.model import budget
from ledgercheck.model.arguments import text_example
from ledgercheck.model.budget import BudgetExhausted
from ledgercheck.model.conformance import deadline
from ledgercheck.model.conformance.calls import (
    RAISED_BY_CALLS,
    LedgerCall,
    Overdue,
    Script,
    Tick,
    clock_ticks,
    invoke,
    opaque_value,
)
from ledgercheck.model.conformance.defaults import CALL_TIMEOUT, ENUMERATION_SHARDS
from ledgercheck.model.conformance.divergence import Divergence, Recording, figure, report, reproducer
from ledgercheck.model.conformance.enumeration import Enumeration, Enumerator, StateKeys
from ledgercheck.model.conformance.implementation import (
    Implementation,
    ImplementationError,
    ManualClock,
    model_implementation,
)
from ledgercheck.model.conformance.observation import (
    Difference,
    Observation,
    Observer,
    Outcome,
    announced_since,
    compare,
    exception_text,
)
from ledgercheck.model.conformance.values import IntValues, TextValues
from ledgercheck.model.errors import CallTimedOut, ImplementationEnded
from ledgercheck.model.interpreter import LedgerModel
from ledgercheck.model.lang import Param
from ledgercheck.model.spec import Event, Spec, plural

INT_DOMAIN = (0, 1, 2)


class Conformance:
    """One implementation against the executable model of one spec variant."""

    def __init__(
        self,
        spec: Spec,
        impl: Implementation,
        policy: Mapping[str, int],
        label: str = "",
        call_timeout: float = CALL_TIMEOUT,
    ) -> None:
        self.spec = spec
        self.impl = impl
        self.label = label or impl.label
        self.policy = dict(policy)
        self.model = model_implementation(spec)
        self.events = dict(spec.events)
        self.calls_compared = 0
        self.traces = 0
        self.accepts_clock = impl.accepts_clock
        self.ticks = clock_ticks(spec, {**spec.default_policy(), **self.policy})
        self.clock_reads = 0
        self.policy_note = ""
        self.int_values = IntValues(spec, {**spec.default_policy(), **self.policy})
        self.text_values = TextValues(spec)
        # The ledger's log line per state change is part of its API; a class bound through
        # `[implementation]` (a library of its own) is compared on what the binding reads.
        self.compare_logs = spec.binding is None
        self.has_contracts = spec.has_contracts
        # Notifications are compared where the binding says how the class announces them; a
        # ledger-convention class (no binding) is not observed announcing anything.
        self.compare_notifications = spec.binding is not None and bool(spec.binding.announcers)
        self._memo: dict[tuple[Any, ...], tuple[tuple[Any, ...], Outcome]] = {}
        self._memo_ok = True
        self._contract_memo: dict[tuple[Any, ...], bool] = {}
        self.call_timeout = call_timeout
        """Seconds the implementation may spend in one call and the reading of its state after
        it (0: no limit), where the process runs calls under `deadline` (`limit_calls`)."""
        self._at: tuple[LedgerCall | Tick, ...] | None = None
        self._armed = False
        self.fleet = 1
        """The fleet size of the calls `at` names (for the reproducer of a call that hangs)."""
        self.observer = Observer(spec, self._check_api())
        self.watching: Callable[[str], None] | None = None
        """Told each call sequence before the implementation runs its last call (a watched
        run: the process the command runs in is told what the implementation was doing if
        the implementation ends that process)."""

    # -- building --

    def new_impl(self, shards: int, clock: ManualClock | None = None) -> Any:
        """An implementation reading `clock` (a fresh one at 0 by default), if it takes one;
        its reads are counted (`clock_reads`): a divergence of a class that never read it,
        while time passed, is most likely a clock that never reached the class."""
        if not self.accepts_clock:
            return self.impl.build(shards, self.policy, clock=None, quiet=True)
        moved = clock or ManualClock()

        def reading() -> float:
            self.clock_reads += 1
            return moved()

        return self.impl.build(shards, self.policy, clock=reading, quiet=True)

    def at_policy(self, policy: Mapping[str, int], note: str) -> Conformance:
        """The same implementation against the same model, at another policy than the one
        asked; `note` says what a divergence found there means (its report prints it)."""
        checker = Conformance(self.spec, self.impl, policy, self.label, self.call_timeout)
        checker.policy_note = note
        return checker

    def new_model(self, shards: int, clock: ManualClock | None = None) -> LedgerModel:
        model: LedgerModel = self.model.build(shards, self.policy, clock=clock, echo=False)
        return model

    def _check_api(self) -> tuple[str, ...]:
        """Build one instance; every method the spec needs must be there. Returns the fleet
        values the implementation offers."""
        shards = max(1, min(self.spec.default_shards, ENUMERATION_SHARDS))
        try:
            self.impl.policy_object(self.policy)
        except Exception as exc:
            raise ImplementationError(
                f"{self.label}: cannot build its policy with {self.policy}: {type(exc).__name__}: {exc}"
            ) from None
        try:
            with deadline.limited(self.call_timeout):
                instance = self.new_impl(shards)
        except deadline.TooLong:
            self.fleet = shards
            raise self.too_long() from None
        except Exception as exc:
            raise self.impl.cannot_build(exc, clock=self.accepts_clock, label=self.label) from None
        missing = self.impl.missing_api(instance, self.spec)
        if missing:
            raise ImplementationError(f"{self.label}: " + "\n  ".join(missing))
        return tuple(g.name for g in self.spec.globals if hasattr(instance, g.name))

    # -- observing and calling --

    def observe(self, ledger: Any, shards: int) -> Observation:
        return self.observer.observe(ledger, shards)

    def _call_model(self, model: LedgerModel, call: LedgerCall) -> Outcome:
        before = len(model.log_lines)
        announced = len(model.notifications)
        raised = None
        result = None
        event = self.events[call.event]
        try:
            result = invoke(model, call, event)
        except Exception as exc:  # KeyError for an unknown shard, or an error the spec's event raises
            raised = type(exc).__name__
        returned = (
            self.observer.normalise.returned(event.name, result)
            if event.returns is not None and raised is None
            else None
        )
        logs = len(model.log_lines) - before if self.compare_logs else 0
        return Outcome(raised, logs, returned, announced_since(model, self.spec, announced))

    def _step_model(self, model: LedgerModel, call: LedgerCall, keys: StateKeys) -> Outcome:
        """`_call_model`, memoised: an event reads and writes only its own shard's variables
        and the fleet values (the spec language has no other shard in an event), so its
        effect is a function of those. Checked on every miss; memoising stops if not."""
        if not self._memo_ok or not 0 <= call.shard < keys.shards:
            return self._call_model(model, call)
        store = model.variables()
        local = keys.local[call.shard]
        memo_key = (call, tuple(store[k] for k in local))
        hit = self._memo.get(memo_key)
        if hit is not None:
            model.assign(zip(local, hit[0], strict=True))
            return hit[1]
        before = model.save()
        outcome = self._call_model(model, call)
        store = model.variables()
        if any(store[k] != v for k, v in before.items() if k not in keys.local_set[call.shard]):
            self._memo_ok = False
        else:
            self._memo[memo_key] = (tuple(store[k] for k in local), outcome)
        return outcome

    def _allowed(self, model: LedgerModel, call: LedgerCall, keys: StateKeys) -> bool:
        """Whether the callers' contract allows the call in the model's state (memoised like
        `_step_model`: a contract reads the called shard's record)."""
        store = model.variables()
        memo_key = (call, tuple(store[k] for k in keys.local[call.shard]))
        allowed = self._contract_memo.get(memo_key)
        if allowed is None:
            allowed = self._contract_memo[memo_key] = bool(contract_allows(model, call, keys.shards))
        return allowed

    def _call_impl(self, ledger: Any, call: LedgerCall) -> tuple[Outcome, BaseException | None]:
        out = io.StringIO()
        error: BaseException | None = None
        result = None
        event = self.events[call.event]
        announced = len(getattr(ledger, "notifications", ()))
        with contextlib.redirect_stdout(out):
            try:
                result = invoke(ledger, call, event)
            except RAISED_BY_CALLS as exc:  # compared, not swallowed
                error = exc
        lines = sum(1 for line in out.getvalue().splitlines() if line.strip()) if self.compare_logs else 0
        returned = (
            self.observer.normalise.returned(event.name, result)
            if event.returns is not None and error is None
            else None
        )
        return Outcome(exception_text(error), lines, returned, announced_since(ledger, self.spec, announced)), error

    @property
    def at(self) -> tuple[LedgerCall | Tick, ...] | None:
        """The calls the implementation is running, while it runs the last one or its state
        after it is read (None otherwise): what `conform` names if it never returns. Setting
        it starts the per-call limit (`call_timeout`) afresh; clearing it stops it."""
        return self._at

    @at.setter
    def at(self, calls: tuple[LedgerCall | Tick, ...] | None) -> None:
        if calls is None:
            if self._armed:
                deadline.disarm()
                self._armed = False
            self._at = None
            return
        self._at = calls
        if self.call_timeout > 0 and deadline.ready():
            deadline.arm(self.call_timeout)
            self._armed = True

    def limit_calls(self) -> bool:
        """From now on, in this process and those it forks, a call of the implementation that
        runs past `call_timeout` is interrupted (`deadline.TooLong`; `stops_named` names the
        calls). False where this process cannot (not its main thread, SIGALRM taken)."""

        def expired() -> None:
            if self._at is not None:
                raise deadline.TooLong

        return deadline.install(expired)

    def stop_when_overdue(self) -> None:
        """From now on, in this process and those it forks, SIGUSR1 raises `Overdue` where the
        implementation is running a call (and does nothing elsewhere: a process waiting for
        another leaves the naming to that one). `conform` sends it once the budget is long
        spent; `not_returned` then names the calls."""

        def overdue(signum: int, frame: Any) -> None:
            if self.at is not None:
                raise Overdue

        signal.signal(signal.SIGUSR1, overdue)
        self.limit_calls()

    @contextlib.contextmanager
    def stops_named(self) -> Iterator[None]:
        """Where a process of the comparison runs the implementation: `Overdue` and a
        `SystemExit` of the implementation's (raised outside a compared call) become the
        command's errors naming the calls (`not_returned`, `exited`), never a bare exit."""
        try:
            yield
        except deadline.TooLong:
            raise self.too_long() from None
        except Overdue:
            raise self.not_returned() from None
        except SystemExit as exc:  # the implementation's, while its state was read
            raise self.exited(exc) from None

    def not_returned(self) -> BudgetExhausted:
        """The error of a comparison stopped by `Overdue`: the budget, and the calls the
        implementation did not return from."""
        limits = budget.active()
        spent = limits.exhausted() or f"memory budget ({limits.memory_mib} MiB)"
        if self.at is None:
            doing = "the comparison did not stop"
        else:
            doing = f"the implementation did not return from {self._running(self.at, fleet=False)}"
        return BudgetExhausted(f"the {spent} ran out: {doing}; no conformance established")

    def too_long(self) -> CallTimedOut:
        """The error of a call interrupted by the per-call limit: the calls it was running."""
        calls = self._at or ()
        lines = [
            f"the implementation did not return within {self.call_timeout:g} s (--call-timeout) from "
            f"{self._running(calls, fleet=True)}: an "
            "endless loop, a lock never released or a wait on a clock that does not move; no conformance established",
            "reproduce:",
            *(f"  {line}" for line in reproducer(self, Script("", self.fleet, calls))),
        ]
        return CallTimedOut("\n".join(lines))

    def _running(self, calls: tuple[LedgerCall | Tick, ...], fleet: bool) -> str:
        """What the implementation was doing when it did not return (`at`): its construction
        (no call yet), or the calls, the last one running; with `fleet`, on how many instances."""
        on = f" on {plural(self.fleet, 'instance')}" if fleet else ""
        if not calls:
            return f"its construction{on} (or the reading of its first state)"
        return f"the calls {self.calls_label(calls)}{on} (the last call, or the reading of its state after it)"

    def exited(self, exc: SystemExit) -> ImplementationEnded:
        """The error of a comparison the implementation raised SystemExit in outside a compared
        call (its state being read, its construction in a source): never the exit it asks for."""
        where = (
            f"while its state was read after the calls {self.calls_label(self.at)}"
            if self.at
            else "while it was built, or while a divergence was reported"
        )
        return ImplementationEnded(
            f"the implementation raised SystemExit({exc.code!r}) {where}, outside the calls conform compares; "
            "no conformance established"
        )

    def calls_label(self, calls: tuple[LedgerCall | Tick, ...]) -> str:
        """Calls as a message names them (`report_failure(1), report_success(1)`)."""
        return ", ".join(c.label(self.events.get(c.event)) for c in calls)

    def run(self, script: Script, recording: Recording | None = None) -> Divergence | None:
        """Replay a script on a fresh implementation and model; the first divergence, if any."""
        self.traces += 1
        self.fleet = script.shards
        clock = ManualClock()
        model = self.new_model(script.shards, clock)
        if self.watching is not None:
            self.watching(f"the construction of a {script.shards}-shard ledger ({script.source})")
        self.at = ()  # its construction, and the reading of its first state, under the per-call limit
        try:
            ledger = self.new_impl(script.shards, clock)
        except RAISED_BY_CALLS as exc:
            self.at = None
            return Divergence(script, -1, [Difference(("construct",), "built", exception_text(exc))])
        model_obs, impl_obs = self.observe(model, script.shards), self.observe(ledger, script.shards)
        self.at = None
        if recording is not None:
            recording.model.append(model_obs)
            recording.impl.append(impl_obs)
        found = compare(model_obs, impl_obs, None, None, None)
        if found:
            return Divergence(Script(script.source, script.shards, ()), -1, found)
        within = True
        for index, call in enumerate(script.calls):
            allowed = contract_allows(model, call, script.shards)
            within = within and allowed is True
            if recording is not None:
                recording.contract.append(allowed)
            if isinstance(call, Tick):
                clock.advance(call.units)
                model_out = impl_out = Outcome(None, 0)
                error = None
            else:
                if self.watching is not None:
                    self.watching(f"the calls {self.calls_label(script.calls[: index + 1])} ({script.source})")
                model_out = self._call_model(model, call)
                self.at = script.calls[: index + 1]
                impl_out, error = self._call_impl(ledger, call)
            model_obs, impl_obs = self.observe(model, script.shards), self.observe(ledger, script.shards)
            self.at = None
            self.calls_compared += 1
            if recording is not None:
                recording.model.append(model_obs)
                recording.impl.append(impl_obs)
                recording.model_outcomes.append(model_out)
                recording.impl_outcomes.append(impl_out)
            found = compare(model_obs, impl_obs, model_out, impl_out, error)
            if found:
                calls = script.calls[: index + 1]
                return Divergence(Script(script.source, script.shards, calls), index, found, within_contract=within)
        return None

    def within_contracts(self, script: Script) -> bool:
        """Whether the callers' contracts allow every call of `script`, each in the state the
        model is in after the calls before it (what `run` finds as it compares)."""
        clock = ManualClock()
        model = self.new_model(script.shards, clock)
        for call in script.calls:
            if contract_allows(model, call, script.shards) is not True:
                return False
            if isinstance(call, Tick):
                clock.advance(call.units)
            else:
                self._call_model(model, call)
        return True

    # -- reporting --

    def record(self, script: Script) -> Recording:
        """The script replayed with every observation, outcome and contract verdict kept."""
        recording = Recording()
        self.run(script, recording)
        return recording

    def figure(self, divergence: Divergence, width: int | None = None) -> str:
        return figure(self, divergence, width)

    def report(self, divergence: Divergence, variant: str, width: int | None = None) -> str:
        return report(self, divergence, variant, width)

    # -- enumeration --

    def calls_at(self, shards: int) -> list[LedgerCall]:
        """Every call of one enumeration step: each event on each shard with each argument
        combination of the small domains, then each event once on an unknown shard (the
        first past the fleet; and -1, where a bound class is handed the indices it must
        refuse: a list indexed by -1 answers with its last item), then each tick of the clock."""
        calls: list[LedgerCall] = []
        unknown: list[LedgerCall] = []
        binding = self.spec.binding
        outside = [shards, -1] if binding is not None and binding.unknown_index == "refused" else [shards]
        for shard in range(shards):
            for event in self.events.values():
                combos = _combinations([(p.name, self._domain(event, p, shard)) for p in event.signature.params])
                calls += [LedgerCall(event.name, shard, combo) for combo in combos]
                if shard == 0:
                    unknown += [LedgerCall(event.name, bad, combos[0]) for bad in outside]
        return calls + unknown + list(self.ticks)

    def _domain(self, event: Event, param: Param, shard: int) -> list[Any]:
        return enumeration_domain(self.spec, param, event, shard, self.int_values.fixed(event.name, param.name))

    def calls_in_state(self, store: Mapping[Any, Any], shards: int, static: set[LedgerCall]) -> list[LedgerCall]:
        """The calls of one enumeration step that only this state gives reason to make: an
        int argument compared with a field passed that field's value (and one either side), a
        text argument each string the instance holds and one it does not (`values.TextValues`),
        in every combination with the other arguments' values, less those in `static`."""
        calls: list[LedgerCall] = []
        for event in self.events.values():
            if not (self.int_values.depends_on_state(event.name) or self.text_values.depends_on_state(event.name)):
                continue
            for shard in range(shards):
                domains = []
                for p in event.signature.params:
                    values = self._domain(event, p, shard)
                    if p.type.kind == "str":
                        met: tuple[Any, ...] = self.text_values.at(store, shard, values)
                    else:
                        met = self.int_values.at(event.name, p.name, store, shard)
                    domains.append((p.name, [*values, *(v for v in met if v not in values)]))
                calls += [
                    call
                    for combo in _combinations(domains)
                    if (call := LedgerCall(event.name, shard, combo)) not in static
                ]
        return calls

    def enumerate(
        self,
        shards: int,
        depth: int,
        progress: Callable[[str], None] | None = None,
        merge: str = "ledger",
        contract: bool = False,
        parts: int = 1,
        starts: Sequence[Sequence[LedgerCall]] = (),
    ) -> Enumeration:
        """Breadth-first over call sequences (from the initial state, or from where each of
        `starts` leaves the model), merging prefixes that reach the same state: the
        model's state (`merge="ledger"`: its ledger fields and the fleet values that are not
        metrics, all its observable behaviour depends on; `"full"`: every variable, history
        included) and the implementation's observed state. With `contract`, only the calls
        the callers' contracts (`requires`) allow in the model's state, on known shards. With
        `parts` > 1, each level is split into up to that many runs expanded at once in forked
        processes (`enumeration.Enumerator`); the result is the same."""
        # The implementation's observed state is part of the merge too, but a state is only
        # merged after the comparison passed, when it equals the model's observation: a
        # function of the model's state. So the model's key is the whole key, where the
        # implementation shows every variable of it; where it hides some, a merged prefix is
        # expanded one call further (`Enumerator.hidden`).
        return Enumerator(self, shards, merge, contract).run(depth, progress, parts, starts)

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
        # Removing any one of a run of equal calls leaves the same sequence: each is replayed
        # once (a counter the class stops at 120 diverged at call 121 of a run of `fail`
        # calls, and each of the 121 removals replayed the run: 23,500 calls, 7.6 s).
        tried: set[tuple[LedgerCall | Tick, ...]] = set()
        while True:
            progressed = False
            start = 0
            while start < len(calls):
                candidate = tuple(calls[:start] + calls[start + chunk :])
                if candidate in tried:
                    start += chunk
                    continue
                tried.add(candidate)
                found = self.run(Script(best.script.source, best.script.shards, candidate))
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
        made = [c for c in script.calls if not isinstance(c, Tick)]
        used = sorted({c.shard for c in made if 0 <= c.shard < script.shards})
        unknown = any(not 0 <= c.shard < script.shards for c in made)
        count = max(1, len(used))
        if count >= script.shards:
            return divergence
        rename = {old: new for new, old in enumerate(used)}
        calls = tuple(
            c
            if isinstance(c, Tick)
            else LedgerCall(c.event, rename[c.shard] if c.shard in rename else (count if unknown else c.shard), c.args)
            for c in script.calls
        )
        found = self.run(Script(script.source, count, calls))
        return found if found is not None and found.index >= 0 else divergence


def contract_allows(model: LedgerModel, call: LedgerCall, shards: int) -> bool | None:
    if isinstance(call, Tick):
        return True  # time passes whatever the callers do
    if not 0 <= call.shard < shards:
        return None
    return bool(model.contract_allows(call.event, call.shard, dict(call.args)))


def _combinations(domains: list[tuple[str, list[Any]]]) -> list[tuple[tuple[str, Any], ...]]:
    combos: list[tuple[tuple[str, Any], ...]] = [()]
    for name, values in domains:
        combos = [(*combo, (name, value)) for combo in combos for value in values]
    return combos


def enumeration_domain(
    spec: Spec, param: Param, event: Event, shard: int, spec_values: tuple[int, ...] = ()
) -> list[Any]:
    """Small argument domains: bools both ways, ints 0..2 and `spec_values` (those the spec
    gives reason to try: `values.IntValues`), text None or a fresh address, enums every
    member, opaque arguments the spec's example."""
    ptype = param.type
    values: list[Any]
    if ptype.kind == "any":
        return [opaque_value(param, event)]
    if ptype.kind == "bool":
        values = [False, True]
    elif ptype.kind in ("int", "shard"):
        values = sorted({*INT_DOMAIN, *spec_values})
    elif ptype.kind == "str":
        values = [f"http://shard-{shard}.new"]
        example = text_example(event.examples.get(param.name))
        if example is not None and example not in values:
            values.append(example)
    elif ptype.kind == "enum" and ptype.enum is not None and ptype.enum in spec.enums:
        values = list(spec.enums[ptype.enum].members)
    else:
        values = [param.default]
    if ptype.optional:
        values = [None, *values]
    return values or [param.default]
