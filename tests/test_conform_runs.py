"""conform's `runs` source: every ordered pair of calls repeated on one instance. A counter a
class stops at a constant (8) past every threshold showed only after 15 calls, deeper than the
enumeration and in a pattern no random trace repeats that often: a pybreaker copy passed
conform that way (new-user trial)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledgercheck.model.cli import main
from ledgercheck.model.conformance.defaults import RUN_CALLS
from ledgercheck.model.conformance.sources import run_scripts
from ledgercheck.model.spec import load_spec_text

SPEC = """\
[spec]
name = "meter"
api_class = "Meter"
state_field = "state"
default_shards = 1

[enums.State]
members = ["CLOSED", "OPEN"]

[policy]
trip_after = { default = 3, min = 1, max = 5 }

[fields]
state = { type = "State", initial = "CLOSED" }
failures = { type = "int", initial = 0 }

[events.fail]
call = "fail(i)"
body = \"\"\"
failures = failures + 1
if failures >= trip_after:
    state = OPEN
\"\"\"

[events.probe]
call = "probe(i)"
ignore_when = "state != OPEN"
body = "state = CLOSED"

[environments.ledger]
any_call = true

[properties.opens_at_the_threshold]
kind = "invariant"
assert = "state == CLOSED or failures >= trip_after"
expect = { base = "holds" }

[implementation]
construct = { trip_after = "trip_after" }
instances = "indexed"

[implementation.fields]
state = "state"
failures = "failures"
"""

CLASS = """\
class Meter:
    def __init__(self, trip_after):
        self.trip_after = trip_after
        self.state = "CLOSED"
        self.failures = 0

    def fail(self, i):
        self.failures = min(self.failures + 1, CAP)
        if self.failures >= self.trip_after:
            self.state = "OPEN"

    def probe(self, i):
        if self.state == "OPEN":
            self.state = "CLOSED"
"""


def test_every_ordered_pair_of_calls_is_repeated() -> None:
    spec = load_spec_text(SPEC, "meter.toml").variant()
    scripts = run_scripts(spec, spec.default_policy(), seed=0)
    repeats = RUN_CALLS // 2
    assert [s.source for s in scripts] == [
        f"{a}, {b} repeated {repeats} times" for a in ("fail", "probe") for b in ("fail", "probe")
    ]
    assert all(len(s.calls) == RUN_CALLS and s.shards == 1 for s in scripts)


@pytest.mark.parametrize(("cap", "code"), [("10**9", 0), ("8", 1), ("32", 1)])
def test_a_counter_that_stops_past_every_threshold_is_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cap: str, code: int
) -> None:
    (tmp_path / "meter.toml").write_text(SPEC)
    (tmp_path / "meter.py").write_text(CLASS.replace("CAP", cap))
    args = ["conform", str(tmp_path / "meter.toml"), "--impl", f"{tmp_path / 'meter.py'}:Meter"]
    assert main([*args, "--random", "0", "--no-policies", "--no-branches"]) == code
    out = capsys.readouterr().out
    if code:
        assert f"failures: model {int(cap) + 1}, implementation {cap}" in out, out
        assert "found by a long run: fail, " in out, out
    else:
        assert "runs             1 shard: every pair of calls repeated to 100 calls, 4 traces, 400 calls" in out, out


CYCLE_SPEC = """\
[spec]
name = "breaker"
api_class = "Breaker"
state_field = "state"
default_shards = 1

[enums.State]
members = ["CLOSED", "OPEN", "HALF_OPEN"]

[policy]
trip_after = { default = 2, min = 1, max = 3 }

[fields]
state = { type = "State", initial = "CLOSED" }
failures = { type = "int", initial = 0 }

[events.fail]
call = "fail(i)"
ignore_when = "state != CLOSED"
body = \"\"\"
failures = failures + 1
if failures >= trip_after:
    state = OPEN
\"\"\"

[events.probe]
call = "probe(i)"
ignore_when = "state != OPEN"
body = "state = HALF_OPEN"

[events.reset]
call = "reset(i)"
ignore_when = "state != HALF_OPEN"
body = \"\"\"
failures = 0
state = CLOSED
\"\"\"

[environments.ledger]
any_call = true

[properties.opens_at_the_threshold]
kind = "invariant"
assert = "state == CLOSED or failures >= trip_after"
expect = { base = "holds" }

[implementation]
construct = { trip_after = "trip_after" }
instances = "indexed"

[implementation.fields]
state = "state"
failures = "failures"
"""

CYCLE_CLASS = """\
class Breaker:
    def __init__(self, trip_after):
        self.trip_after = trip_after
        self.state = "CLOSED"
        self.failures = 0
        self.resets = 0

    def fail(self, i):
        if self.state == "CLOSED":
            self.failures += 1
            if self.failures >= self.trip_after:
                self.state = "OPEN"

    def probe(self, i):
        if self.state == "OPEN":
            self.state = "HALF_OPEN"

    def reset(self, i):
        if self.state == "HALF_OPEN":
            self.resets += 1
            if self.resets <= CAP:
                self.failures = 0
            self.state = "CLOSED"
"""


@pytest.mark.parametrize(("cap", "code"), [("10**9", 0), ("3", 1), ("20", 1)])
def test_a_count_a_class_keeps_of_whole_cycles_is_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cap: str, code: int
) -> None:
    """The fourth trip-probe-reset cycle of a class that resets its count three times only: no
    pair of calls makes that cycle, and the model is back at its start after each (the
    enumeration merges it away). The trace to the reset branch, repeated, does (a queue whose
    redrive stopped resetting the receive count after three passed ci: message-queue trial)."""
    (tmp_path / "breaker.toml").write_text(CYCLE_SPEC)
    (tmp_path / "breaker.py").write_text(CYCLE_CLASS.replace("CAP", cap))
    args = ["conform", str(tmp_path / "breaker.toml"), "--impl", f"{tmp_path / 'breaker.py'}:Breaker"]
    assert main([*args, "--random", "0", "--no-policies", "--no-counterexamples"]) == code
    out = capsys.readouterr().out
    if code:
        assert "(found by a long run: the trace to branch" in out and "repeated 33 times" in out, out
    else:
        assert "every pair of calls and every trace to a branch (" in out, out


def test_a_deeper_cap_needs_longer_runs_and_the_spec_can_ask_for_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A counter a class stops at 120 outlasts the default runs (100 calls); `--run-calls`, or
    the spec's `[conform] run_calls` (which ci runs conform with), reaches it."""
    (tmp_path / "meter.toml").write_text(SPEC)
    (tmp_path / "meter.py").write_text(CLASS.replace("CAP", "120"))
    args = ["conform", str(tmp_path / "meter.toml"), "--impl", f"{tmp_path / 'meter.py'}:Meter"]
    quick = ["--random", "0", "--no-policies", "--no-branches", "--no-counterexamples"]
    assert main([*args, *quick]) == 0
    assert main([*args, *quick, "--run-calls", "200"]) == 1
    capsys.readouterr()
    (tmp_path / "meter.toml").write_text(SPEC + "\n[conform]\nrun_calls = 200\n")
    assert main([*args, *quick]) == 1
    assert "failures: model 121, implementation 120" in capsys.readouterr().out
    (tmp_path / "meter.toml").write_text(SPEC + "\n[conform]\nrun_calls = 1\n")
    assert main([*args, *quick]) == 2
    assert "run_calls must be in [2, 100000]" in capsys.readouterr().err


def test_a_shrink_replays_each_shorter_sequence_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Removing any one of a run of equal calls leaves the same sequence: the shrink of the
    divergence at call 121 of a run of `fail` calls replayed it for each of them (200 runs,
    23,500 calls, 7.6 s); now each distinct shorter sequence once, to the same divergence."""
    from ledgercheck.model import conformance as conform
    from ledgercheck.model.conformance.calls import LedgerCall, Script
    from ledgercheck.model.conformance.checker import Conformance

    (tmp_path / "meter.py").write_text(CLASS.replace("CAP", "120"))
    spec = load_spec_text(SPEC, "meter.toml").variant()
    checker = conform.Conformance(
        spec, conform.load_target(f"{tmp_path / 'meter.py'}:Meter", spec), spec.default_policy()
    )
    found = checker.run(Script("runs", 1, tuple(LedgerCall("fail", 0, ()) for _ in range(200))))
    assert found is not None and found.index == 120
    replays: list[Script] = []
    run = Conformance.run

    def counted(self: Conformance, script: Script, *more: object, **named: object) -> object:
        replays.append(script)
        return run(self, script, *more, **named)  # type: ignore[arg-type]

    monkeypatch.setattr(Conformance, "run", counted)
    shrunk = checker.shrink(found)
    assert len(shrunk.script.calls) == 121 and shrunk.index == 120
    assert len({s.calls for s in replays}) == len(replays) < 40, len(replays)
