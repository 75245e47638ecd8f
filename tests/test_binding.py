"""`[implementation]`: a spec says how a real class is built, called and read, and
`model.binding.bound_class` drives that class through the ledger-shaped API conformance and
the generated tests use. Checked on the real `circuitbreaker` package from PyPI (a test
dependency), with the spec `spec/examples/circuitbreaker.toml`."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ledgercheck.model.binding import bound_class, resolve_target
from ledgercheck.model.errors import SpecError
from ledgercheck.model.interpreter import build_api
from ledgercheck.model.spec import load_spec, load_spec_text

circuitbreaker = pytest.importorskip("circuitbreaker")

EXAMPLE = Path(__file__).resolve().parent.parent / "spec" / "examples" / "circuitbreaker.toml"


@pytest.fixture(scope="module")
def example() -> Any:
    return load_spec(EXAMPLE)


class Clock:
    """The time a test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _bound(example: Any, shards: int = 2, clock: Clock | None = None, **policy: int) -> Any:
    spec = example.variant()
    values = {**spec.default_policy(), **policy}
    cls = bound_class(example.binding, spec, resolve_target(example.binding.target))
    return cls(shard_count=shards, policy=SimpleNamespace(**values), clock=clock)


def test_the_example_binds_the_real_class(example):
    binding = example.binding
    assert binding.target == "circuitbreaker:CircuitBreaker" and binding.instances == "each"
    assert resolve_target(binding.target) is circuitbreaker.CircuitBreaker
    assert not binding.observes("open_for") and binding.observes("state") and binding.observes("failures")


def test_the_bound_class_has_the_ledger_api(example):
    fleet = _bound(example, trip_after=2, cooldown=2)
    assert [vars(r) for r in fleet.snapshot()] == [{"state": "CLOSED", "failures": 0}] * 2
    fleet.call_fails(0)  # the wrapped function's OSError is the event's input: passed on, and caught
    fleet.call_fails(0)
    assert fleet.state_of(0) == "OPEN" and fleet.state_of(1) == "CLOSED"
    assert fleet.snapshot()[0].failures == 2
    with pytest.raises(circuitbreaker.CircuitBreakerError):  # refused while open: the outcome
        fleet.call_succeeds(0)
    with pytest.raises(KeyError):
        fleet.call_fails(2)
    with pytest.raises(KeyError):
        fleet.state_of(-1)


def test_the_clock_the_tests_move_is_the_library_s(example):
    clock = Clock()
    fleet = _bound(example, clock=clock, trip_after=1, cooldown=2)
    fleet.call_fails(0)
    clock.now = 1
    with pytest.raises(circuitbreaker.CircuitBreakerError):
        fleet.call_fails(0)
    clock.now = 2  # recovery_timeout passed: the library reads half_open, the spec OPEN
    assert fleet.state_of(0) == "OPEN"
    fleet.call_fails(0)  # the trial fails: open again, for a new timeout
    clock.now = 3
    with pytest.raises(circuitbreaker.CircuitBreakerError):
        fleet.call_succeeds(0)
    clock.now = 4
    fleet.call_succeeds(0)
    assert vars(fleet.snapshot()[0]) == {"state": "CLOSED", "failures": 0}


def test_outside_bound_calls_the_library_reads_the_real_clock(example):
    _bound(example)
    assert circuitbreaker.monotonic() > 0  # the patch defers to time.monotonic


def test_random_runs_agree_with_the_spec_s_executable_model(example):
    """Until `conform` reads bindings itself: the model and the bound library, driven by the
    same random calls on the same clock, raise the same errors and show the same observed
    fields after every call."""
    spec = example.variant()
    api = build_api(spec)
    fields = tuple(f.name for f in spec.fields if example.binding.observes(f.name))
    rng = random.Random(7)
    events = ["call_succeeds", "call_fails", "call_raises_other", "reset", "tick"]
    for _ in range(60):
        policy = {"trip_after": rng.randint(1, 3), "cooldown": rng.randint(1, 3)}
        clock = Clock()
        model = api.Ledger(shard_count=2, policy=api.Policy(**policy), base_urls=["a", "b"], echo=False, clock=clock)
        real = _bound(example, clock=clock, **policy)
        for _ in range(14):
            i = rng.randrange(2)
            event = rng.choice(events)
            if event == "tick":
                clock.now += 1
                continue
            outcomes = []
            for fleet in (model, real):
                try:
                    getattr(fleet, event)(i)
                    outcomes.append(None)
                except Exception as exc:
                    outcomes.append(type(exc).__name__)
            assert outcomes[0] == outcomes[1], (event, i, policy, clock.now)
            model_view = [{name: _name(getattr(r, name)) for name in fields} for r in model.snapshot()]
            assert _observed(real, fields) == model_view, (event, i, policy, clock.now)


def _observed(fleet: Any, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{name: getattr(record, name) for name in fields} for record in fleet.snapshot()]


def _name(value: Any) -> Any:
    return getattr(value, "name", value)


BAD = [
    ('instances = "many"', "instances must be 'indexed' or 'each'"),
    ('construct = { failure_threshold = "trip_after + 1" }', "BinOp is not allowed in a call path"),
    ("construct = { failure_threshold = \"__import__('os')\" }", "private name"),
    ('construct = { failure_threshold = "x._secret" }', "private attribute"),
    ('clock = { patch = "a.b" }', "unknown key 'clock'"),
    ('[implementation.fields]\nstatus = "state"', "'status' is not a field of the spec (did you mean 'state'?)"),
    ('[implementation.fields]\nstate = { read = "state", values = { SHUT = "closed" } }', "'SHUT' is not a member"),
    ('[implementation.fields]\nfailures = { read = "x", values = { OPEN = 1 } }', "not an enum"),
    ('[implementation.events]\ncall_fail = "call()"', "did you mean 'call_fails'"),
    ('[implementation.events]\ncall_fails = { call = "x()", reraises = 3 }', "reraises is an exception name"),
    ('[implementation.events]\ncall_fails = { reraises = "OSError" }', "needs call"),
    (
        '[implementation.fields]\nstate = { read = "s", values = { OPEN = "x", CLOSED = ["x"] } }',
        "same implementation value",
    ),
    ('[implementation.events]\ncall_fails = "call(*args)"', "unpacking"),
    ('[implementation.events]\ncall_fails = "call(lambda: 1)"', "Lambda is not allowed"),
    ('tarrget = "x:y"', "did you mean 'target'"),
]


@pytest.mark.parametrize(("table", "message"), BAD)
def test_a_bad_binding_is_refused_with_its_line(table: str, message: str) -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    head = text.index("\n[implementation]\n") + 1
    lines_before = text[:head].count("\n")
    bad = text[:head] + "[implementation]\n" + table + "\n"
    if table.startswith("[implementation.events]") or table.startswith("[implementation.fields]"):
        bad = text[:head] + "[implementation]\n" + table + "\n"
    with pytest.raises(SpecError) as caught:
        load_spec_text(bad, "cb.toml")
    assert message in caught.value.message, caught.value.message
    assert caught.value.where.path == "cb.toml" and caught.value.where.line > lines_before


def test_a_call_that_should_pass_an_error_on_and_returns_is_reported(example):
    import dataclasses

    from ledgercheck.model.binding import BindingError, EventCall

    spec = example.variant()
    binding = example.binding
    wrong = dataclasses.replace(
        binding,
        events={
            **binding.events,
            "call_fails": EventCall("call_fails", binding.events["call_succeeds"].call, ("OSError",)),
        },
    )
    fleet = bound_class(wrong, spec, circuitbreaker.CircuitBreaker)(
        shard_count=1, policy=SimpleNamespace(trip_after=2, cooldown=2)
    )
    with pytest.raises(BindingError, match="returned instead of passing on OSError"):
        fleet.call_fails(0)


def test_a_spec_without_a_binding_has_none():
    assert load_spec().binding is None


def test_conform_drives_the_real_library_through_the_binding(capsys):
    """`ledgercheck conform SPEC`: no --impl, no adapter; the spec's [implementation] names
    the class and says how to drive it. Outcomes (the refusal) are compared too."""
    from ledgercheck.model.cli import main

    assert main(["conform", str(EXAMPLE), "--depth", "4", "--random", "200"]) == 0
    assert "no divergence" in capsys.readouterr().out


def test_conform_finds_a_library_that_opens_one_failure_late(tmp_path, capsys):
    from ledgercheck.model.cli import main

    (tmp_path / "late_breaker.py").write_text(
        "import circuitbreaker\n\n\n"
        "class LateBreaker(circuitbreaker.CircuitBreaker):\n"
        "    def __init__(self, failure_threshold, **kwargs):\n"
        "        super().__init__(failure_threshold=failure_threshold + 1, **kwargs)\n",
        encoding="utf-8",
    )
    target = f"{tmp_path / 'late_breaker.py'}:LateBreaker"
    assert main(["conform", str(EXAMPLE), "--impl", target, "--depth", "4", "--no-counterexamples"]) == 1
    out = capsys.readouterr().out
    assert "state" in out and "OPEN" in out
