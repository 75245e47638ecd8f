"""Time in `conform` and in the generated tests: the `[clock]`'s tick actions are steps that
conformance enumerates and replays, and that generated tests take (`check.tick`), on one
`ManualClock` the model and the implementation both read. Checked on the real
`circuitbreaker` package and on a copy of it whose half-open transition comes one second late."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledgercheck.codegen import coverage, render
from ledgercheck.model.cli import main
from ledgercheck.model.conformance import Conformance, load_target
from ledgercheck.model.conformance.calls import Script, Tick
from ledgercheck.model.conformance.implementation import ManualClock
from ledgercheck.model.spec import load_spec

pytest.importorskip("circuitbreaker")

EXAMPLE = Path(__file__).resolve().parent.parent / "spec" / "examples" / "circuitbreaker.toml"
LATE_TRIAL = """\
import circuitbreaker


class LateTrial(circuitbreaker.CircuitBreaker):
    \"\"\"Lets the trial call through one second after recovery_timeout, not at it.\"\"\"

    @property
    def open_remaining(self):
        return super().open_remaining + 1
"""


@pytest.fixture
def late_trial(tmp_path: Path) -> str:
    path = tmp_path / "late_trial.py"
    path.write_text(LATE_TRIAL, encoding="utf-8")
    return f"{path}:LateTrial"


def _checker(target: str, **policy: int) -> Conformance:
    spec = load_spec(EXAMPLE).variant()
    return Conformance(spec, load_target(target, spec), {**spec.default_policy(), **policy})


def test_the_manual_clock_only_moves_forward():
    clock = ManualClock()
    clock.advance(2)
    assert clock() == 2 and type(clock()) is int  # whole units: an elapsed time compares with a timer
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)


def test_every_tick_of_the_clock_is_an_enumerated_call():
    checker = _checker("circuitbreaker:CircuitBreaker")
    calls = checker.calls_at(1)
    assert calls[-1] == Tick("tick", 0, (), 1)
    assert [c for c in calls if isinstance(c, Tick)] == [Tick("tick", 0, (), 1)]


def test_a_tick_moves_the_clock_the_model_and_the_library_read():
    """Open after one failure, then one tick short of the timeout and one past it: the
    library refuses, then lets the trial through, as the model says."""
    checker = _checker("circuitbreaker:CircuitBreaker", trip_after=1, cooldown=2)
    by_event = {c.event: c for c in checker.calls_at(1) if c.shard == 0}
    script = Script(
        "by hand", 1, (by_event["call_fails"], by_event["tick"], by_event["call_succeeds"], by_event["tick"])
    )
    recording = checker.record(script)
    assert [(o.raised or "-").split(":")[0] for o in recording.impl_outcomes] == ["-", "-", "CircuitBreakerError", "-"]
    assert [o.raised for o in recording.model_outcomes] == [None, None, "CircuitBreakerError", None]
    assert checker.run(Script("by hand", 1, (*script.calls, by_event["call_succeeds"]))) is None


def test_conform_finds_the_late_trial_by_enumeration(late_trial, capsys):
    assert (
        main(
            [
                "conform",
                str(EXAMPLE),
                "--impl",
                late_trial,
                "--policy",
                "trip_after=1",
                "--random",
                "0",
                "--no-counterexamples",
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "divergence at depth 4" in out and "tick +1" in out
    assert "clock = ManualClock()" in out and "  clock.advance(1)" in out
    assert "exception raised: model None, implementation CircuitBreakerError" in out


def test_conform_finds_the_late_trial_in_random_traces_at_the_default_policy(late_trial, capsys):
    """Three failures and two ticks are deeper than the default enumeration: random traces,
    one step in four a tick, find it."""
    assert main(["conform", str(EXAMPLE), "--impl", late_trial, "--no-counterexamples"]) == 1
    assert "found by a random trace" in capsys.readouterr().out


def test_the_real_library_conforms_with_the_clock_moving(capsys):
    assert main(["conform", str(EXAMPLE), "--policy", "trip_after=1", "--depth", "5", "--random", "300"]) == 0
    assert "no divergence" in capsys.readouterr().out


def test_the_coverage_search_reaches_the_timeout_branches():
    """Each part of `state == OPEN and open_for < cooldown` false in turn: the second only
    once the clock has moved past the cooldown."""
    spec_file = load_spec(EXAMPLE)
    found = coverage.search(spec_file, spec_file.variant())
    assert not found.unreached
    slugs = {(b.event, b.slug): found.traces[b] for b in found.branches}
    past = slugs[("call_succeeds", "raises1_not_open_for_cooldown")]
    assert [name for name, _ in past] == ["call_fails"] * 3 + ["tick"] * 2 + ["call_succeeds"]
    refused = slugs[("call_succeeds", "raises1_circuitbreakererror")]
    assert refused[-1][0] == "call_succeeds" and "tick" not in [name for name, _ in refused]
    assert len(found.branches) == 12  # 3 raises branches per call, 2 of the if, reset's body


def test_generated_tests_tick_the_clock_and_expect_the_refusal(tmp_path):
    spec_file = load_spec(EXAMPLE)
    files = render.render_coverage(spec_file, tmp_path, render.search_branches(spec_file))
    text = files["test_branches_of_call_succeeds.py"]
    assert '    check.tick("tick", 1)\n' in text
    assert 'with check.call_raising("CircuitBreakerError", "call_succeeds", 0):' in text
    assert "open_for=" not in text  # never asserted: the binding does not observe it
    assert "expect_log(" not in text.split("def test_", 1)[1]  # a bound library logs as it likes


def _run_generated(out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out), *options],
        capture_output=True,
        text=True,
        check=False,
        cwd=out.parent,
    )


@pytest.mark.slow
def test_generated_tests_pass_on_the_library_and_catch_the_late_trial(tmp_path, late_trial):
    out = tmp_path / "generated"
    assert main(["gen", str(EXAMPLE), "--out", str(out)]) == 0
    clean = _run_generated(out, "--ledger-impl", "circuitbreaker:CircuitBreaker")
    assert clean.returncode == 0, clean.stdout[-3000:]
    model = _run_generated(out)
    assert model.returncode == 0, model.stdout[-3000:]
    late = _run_generated(out, "--impl", late_trial)  # the neutral name of --ledger-impl
    assert late.returncode == 1, late.stdout[-3000:]
    assert "test_call_succeeds_raises1_not_open_for_cooldown" in late.stdout
    assert "CircuitBreakerError" in late.stdout


def test_a_call_the_spec_says_raises_must_raise_that_error():
    from ledgercheck.model.conformance.monitor import LedgerCheck
    from ledgercheck.model.interpreter import build_api

    spec = load_spec(EXAMPLE).variant()
    api = build_api(spec)
    policy = {"trip_after": 1, "cooldown": 2}
    clock = ManualClock()
    ledger = api.Ledger(shard_count=1, policy=api.Policy(**policy), clock=clock, echo=False)
    check = LedgerCheck(ledger, spec, "refuses_until_the_timeout", 1, policy, clock=clock)
    with check.call("call_fails", 0):
        ledger.call_fails(0)
    with pytest.raises(pytest.fail.Exception, match="raised CircuitBreakerError: .*, expected KeyError"):
        with check.call_raising("KeyError", "call_succeeds", 0):
            ledger.call_succeeds(0)
    with check.call_raising("CircuitBreakerError", "call_succeeds", 0):
        ledger.call_succeeds(0)
    check.tick("tick", 2)
    assert clock() == 2.0
    with pytest.raises(pytest.fail.Exception, match="returned, expected it to raise CircuitBreakerError"):
        with check.call_raising("CircuitBreakerError", "call_succeeds", 0):
            ledger.call_succeeds(0)
    check.finish()  # the monitor read `raised` and the unobserved timer: the property held


def test_a_tick_needs_the_clock_the_implementation_was_built_with():
    from ledgercheck.model.conformance.monitor import LedgerCheck
    from ledgercheck.model.interpreter import build_api

    spec = load_spec(EXAMPLE).variant()
    api = build_api(spec)
    check = LedgerCheck(api.Ledger(shard_count=1, echo=False), spec, "opens_only_at_threshold", 1, {})
    with pytest.raises(pytest.fail.Exception, match="built without a clock"):
        check.tick("tick", 1)
