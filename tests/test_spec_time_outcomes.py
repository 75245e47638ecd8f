"""Time (timers, duration policy values, the [clock] and its tick actions) and event
outcomes (raises, returns): what the spec declares, what the executable model does with it,
and every bad input refused as `file:line: what is wrong`."""

from __future__ import annotations

import re

import pytest
from ledger_fixture import LEDGER_EXAMPLES
from spec_cases import Bad, assert_refused

from ledgercheck.model import cli
from ledgercheck.model.interpreter import build_api
from ledgercheck.model.spec import load_spec, load_spec_text

NAME = "timed_breaker.toml"
TIMED = LEDGER_EXAMPLES / NAME
TEXT = TIMED.read_text(encoding="utf-8")
RAISES = 'raises = [{ when = "state == OPEN and opened_for < reset_timeout", error = "CircuitOpenError" }]'
STEPS = 'steps = [1, "reset_timeout"]'
TIMER = 'opened_for = { type = "timer", initial = 0, doc = "seconds since the breaker last opened" }'
HALF_OPEN_ASSERT = 'assert = "not raised and result == HALF_OPEN"'


def test_the_spec_declares_time_and_outcomes() -> None:
    spec = load_spec(TIMED).variant()
    assert spec.clock is not None and spec.clock.drive_param == "clock" and spec.clock.unit == "s"
    assert spec.clock.steps == (("tick_1", "1"), ("tick_reset_timeout", "reset_timeout"))
    assert [t.name for t in spec.timers] == ["opened_for"]
    assert spec.policy["reset_timeout"].duration and not spec.policy["trip_after"].duration
    allow = spec.events["allow"]
    assert [(r.error, r.text) for r in allow.raises] == [
        ("CircuitOpenError", "state == OPEN and opened_for < reset_timeout")
    ]
    assert allow.returns_text == "state"
    for env in spec.environments.values():  # every environment can let time pass
        assert {"tick_1", "tick_reset_timeout"} <= {a.name for a in env.actions}
    assert spec.default_environment == "callers"


def test_the_model_raises_returns_and_follows_the_injected_clock() -> None:
    api = build_api(load_spec(TIMED).variant())
    now = [100.0]
    breakers = api.Ledger(shard_count=1, clock=lambda: now[0], echo=False)
    assert breakers.allow(0) == api.State.CLOSED
    for _ in range(3):
        breakers.record_failure(0)
    assert breakers.state_of(0) == api.State.OPEN
    with pytest.raises(api.errors["CircuitOpenError"]):
        breakers.allow(0)
    now[0] += 3.9  # reset_timeout is 4 s: not yet
    with pytest.raises(api.errors["CircuitOpenError"]):
        breakers.allow(0)
    assert breakers.state_of(0) == api.State.OPEN  # a refused call changes nothing
    now[0] += 0.2
    assert breakers.allow(0) == api.State.HALF_OPEN
    breakers.record_failure(0)  # the trial failed: open again, the timeout starts over
    now[0] += 3
    with pytest.raises(api.errors["CircuitOpenError"]):
        breakers.allow(0)


def test_a_builtin_error_name_is_the_builtin() -> None:
    api = build_api(load_spec_text(TEXT.replace("CircuitOpenError", "RuntimeError"), NAME).variant())
    assert api.errors == {"RuntimeError": RuntimeError}


@pytest.mark.slow
def test_the_timed_breaker_checks(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", str(TIMED)]) == 0
    out = capsys.readouterr().out
    assert "open_no_longer_than_the_timeout" in out and "0 mismatch(es)" in out


def test_an_off_by_one_in_the_timeout_is_found() -> None:
    """The properties see time and outcomes: refusing one unit too long breaks one."""
    from ledgercheck.model import bmc

    text = TEXT.replace('opened_for < reset_timeout", error', 'opened_for <= reset_timeout", error')
    spec = load_spec_text(text, NAME).variant()
    result = bmc.check_property(
        spec,
        "ledger",
        spec.properties["half_opens_after_timeout"],
        shards=1,
        policy=spec.default_policy(),
        max_depth=8,
        max_traces=1,
        lax=False,
    )
    assert result.status == "violated"
    actions = [step.action for step in result.traces[0].steps[1:]]
    assert any(a.startswith("tick") for a in actions), actions


WRONG_RESULT = """\
from ledgercheck.model.interpreter import build_api
from ledgercheck.model.spec import load_spec

_api = build_api(load_spec({path!r}).variant())
TimedBreakerPolicy = _api.Policy


class TimedBreakers(_api.Ledger):
    \"\"\"The model, but a breaker that half-opens says it is closed.\"\"\"

    def allow(self, i):
        value = super().allow(i)
        return _api.State.CLOSED if value == _api.State.HALF_OPEN else value
"""


def test_a_call_that_returns_must_return_what_the_spec_says() -> None:
    """`call_returning`: the value the test recorded is compared (normalised, as a field is),
    and a step property's monitor reads it as `result`."""
    from ledgercheck.model.conformance.monitor import LedgerCheck

    spec = load_spec(TIMED).variant()
    api = build_api(spec)
    policy = {"trip_after": 1, "reset_timeout": 1}
    ledger = api.Ledger(shard_count=1, policy=api.Policy(**policy), echo=False)
    check = LedgerCheck(ledger, spec, "closed_admits", 1, policy)
    with check.call_returning("CLOSED", "allow", 0) as outcome:
        outcome.value = ledger.allow(0)
    with pytest.raises(pytest.fail.Exception, match=r"step 2: allow\(0\) returned 'CLOSED', expected 'OPEN'"):
        with check.call_returning("OPEN", "allow", 0) as outcome:
            outcome.value = ledger.allow(0)
    with pytest.raises(pytest.fail.Exception, match="did not record what the call returned"):
        with check.call_returning("CLOSED", "allow", 0):
            ledger.allow(0)
    wrong = LedgerCheck(ledger, spec, "closed_admits", 1, policy)
    with wrong.call_returning("HALF_OPEN", "allow", 0) as outcome:  # what a wrong class would claim
        outcome.value = "half_open"
    with pytest.raises(pytest.fail.Exception, match="a closed breaker refused a call"):
        wrong.finish()  # the monitor judged `result == CLOSED` on the value returned


def test_generated_tests_assert_what_each_call_returns(tmp_path) -> None:
    """A class whose `allow` returns the wrong state, with every field right, passed every
    generated test until the tests asserted return values; now the tests of the calls that
    half-open it fail, naming the value."""
    import subprocess
    import sys

    out = tmp_path / "generated"
    assert cli.main(["gen", str(TIMED), "--out", str(out)]) == 0
    assert "outcome.value = ledger.allow(0)" in (out / "test_branches_of_allow.py").read_text()
    module = tmp_path / "wrong_result.py"
    module.write_text(WRONG_RESULT.format(path=str(TIMED)), encoding="utf-8")

    def pytest_on(*options: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out), *options]
        return subprocess.run(command, capture_output=True, text=True, check=False, cwd=tmp_path)

    model = pytest_on()
    assert model.returncode == 0, model.stdout[-3000:]
    wrong = pytest_on("--ledger-impl", f"{module}:TimedBreakers")
    assert wrong.returncode == 1, wrong.stdout[-3000:]
    assert "returned 'CLOSED', expected 'HALF_OPEN'" in wrong.stdout, wrong.stdout[-3000:]


BAD = {
    "timer-without-clock": Bad("[clock]", "[clocks_not_here]", "[clocks", ("unknown key 'clocks_not_here'",)),
    "timer-negative": Bad(TIMER, 'opened_for = { type = "timer", initial = -1 }', "opened_for", ("a timer needs",)),
    "clock-unknown-key": Bad('unit = "s"', 'units = "s"', "units", ("unknown key 'units'", "did you mean 'unit'")),
    "clock-empty-steps": Bad(STEPS, "steps = []", "steps", ("steps must be a non-empty list",)),
    "clock-zero-step": Bad(STEPS, "steps = [0]", "steps", ("a step must be at least 1",)),
    "clock-unknown-policy": Bad(
        STEPS, 'steps = ["reset_timout"]', "steps", ("not a policy constant", "did you mean 'reset_timeout'")
    ),
    "clock-step-may-be-zero": Bad(
        "reset_timeout = { default = 4, min = 1,",
        "reset_timeout = { default = 4, min = 0,",
        STEPS,
        ("step 'reset_timeout' must have min >= 1",),
    ),
    "clock-duplicate-step": Bad(STEPS, "steps = [1, 1]", "steps", ("listed twice",)),
    "clock-bad-drive": Bad(
        'drive = { param = "clock" }', 'drive = { inject = "clock" }', "drive", ("drive must be { param",)
    ),
    "clock-dotted-param": Bad(
        'drive = { param = "clock" }', 'drive = { param = "time.clock" }', "drive", ("plain name",)
    ),
    "clock-action-clash": Bad(STEPS, 'steps = [1]\naction = "allow"', "action", ("clashes with an action",)),
    "policy-bad-type": Bad('type = "duration", doc', 'type = "seconds", doc', "seconds", ("'int' or a 'duration'",)),
    "raises-not-a-list": Bad(RAISES, 'raises = "state == OPEN"', "raises", ("raises must be a list",)),
    "raises-lowercase-error": Bad(
        RAISES, 'raises = [{ when = "state == OPEN", error = "open" }]', "raises", ("exception class",)
    ),
    "raises-unknown-key": Bad(
        RAISES, 'raises = [{ if = "state == OPEN", error = "E" }]', "raises", ("unknown key 'if'",)
    ),
    "raises-bad-condition": Bad(
        RAISES, 'raises = [{ when = "state == OPN", error = "E" }]', "raises", ("OPN", "did you mean 'OPEN'")
    ),
    "returns-empty": Bad('returns = "state"', 'returns = " "', "returns", ("returns must be an expression",)),
    "returns-unknown-name": Bad('returns = "state"', 'returns = "stat"', "returns", ("stat",)),
    "result-without-returns": Bad(
        'after.state == OPEN"\nassert = "after.real_failures',
        'after.state == OPEN"\nassert = "result or after.real_failures',
        'assert = "result',
        ("result",),
    ),
}


@pytest.mark.parametrize("case", list(BAD.values()), ids=list(BAD))
def test_bad_time_or_outcome_is_refused_with_location(case: Bad) -> None:
    assert_refused(TEXT, case, NAME)


def test_conform_shows_the_values_returned_where_they_differ(tmp_path, capsys) -> None:
    """A class returning the wrong state: conform names the value returned (a row of its own in
    the figure, the model's value against the implementation's), not `('result',)` over a row
    of `<missing>`."""
    module = tmp_path / "wrong_result.py"
    module.write_text(WRONG_RESULT.format(path=str(TIMED)), encoding="utf-8")
    code = cli.main(["conform", str(TIMED), "--impl", f"{module}:TimedBreakers", "--depth", "6"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "value returned: model HALF_OPEN, implementation CLOSED" in out, out
    assert re.search(r"> value returned +\| HALF_OPEN \(impl: CLOSED\)", out), out
    assert "<missing>" not in out and "('result',)" not in out, out


DOUBLE_COUNT = """\
from ledgercheck.model.interpreter import build_api
from ledgercheck.model.spec import load_spec

_api = build_api(load_spec({path!r}).variant())
TimedBreakerPolicy = _api.Policy


class TimedBreakers(_api.Ledger):
    # Counts a failure twice: it opens early, and still stays open past its timeout.

    def record_failure(self, i):
        super().record_failure(i)
        if self.snapshot()[i].state != _api.State.OPEN:
            super().record_failure(i)
"""


def test_a_known_violation_s_test_fails_on_anything_but_the_violation(tmp_path) -> None:
    """Every variant violates `open_no_longer_than_the_timeout`: its tests are strict xfails.
    A class that counts failures twice still violates it, but differs from the variant on the
    way (the failure count): its tests xfailed, hiding the divergence, until the xfail
    expected the property's own failure alone (`raises=PropertyViolated`)."""
    import subprocess
    import sys

    out = tmp_path / "generated"
    assert cli.main(["gen", str(TIMED), "--out", str(out)]) == 0
    module = tmp_path / "double_count.py"
    module.write_text(DOUBLE_COUNT.format(path=str(TIMED)), encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-q", "-rfx", "-p", "no:cacheprovider", str(out)]
    model = subprocess.run(command, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert model.returncode == 0 and "2 xfailed" in model.stdout, model.stdout[-3000:]
    run = subprocess.run(
        [*command, "--ledger-impl", f"{module}:TimedBreakers"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout[-3000:]
    failed = re.findall(r"^FAILED \S*test_open_no_longer_than_the_timeout\.py::(\w+)", run.stdout, flags=re.M)
    assert len(failed) == 2, run.stdout[-3000:]
    # led by what differs, not by the property's message (the break these tests expect)
    assert "the implementation does not do what base does" in run.stdout, run.stdout[-3000:]
    assert "open_no_longer_than_the_timeout: the breaker stayed open past its timeout" not in run.stdout
    assert "xfailed" not in run.stdout.splitlines()[-1], run.stdout[-3000:]


def test_mutate_judges_a_known_violation_s_test_as_pytest_does() -> None:
    """On the variant itself the test passes (it fails by the property alone: its xfail);
    where the property holds it fails (strict); where a field differs on the way it fails."""
    from ledgercheck.codegen.render import plan_tests, verdict_of_test

    spec_file = load_spec(TIMED)
    holding, _, tests = plan_tests(spec_file)["open_no_longer_than_the_timeout"]
    assert all(t.known_violation for t in tests)
    base = spec_file.variant()
    assert [verdict_of_test(t, base, "open_no_longer_than_the_timeout") for t in tests] == [None] * len(tests)
    held = load_spec_text(TEXT.replace("opened_for <= reset_timeout", "opened_for <= 1000"), NAME).variant()
    for test in tests:
        assert "XPASS" in (verdict_of_test(test, held, "open_no_longer_than_the_timeout") or ""), test.name
    doubled = TEXT.replace("failures = failures + 1\n", "failures = failures + 2\n", 1)
    for test in tests:
        why = verdict_of_test(test, load_spec_text(doubled, NAME).variant(), "open_no_longer_than_the_timeout")
        assert why is not None and "failures is" in why, (test.name, why)


def test_a_call_that_raises_where_the_spec_says_it_returns_is_named() -> None:
    """A class raising where the spec says the call returns: the test failed with the raw
    traceback of the class's exception (its module a generated name); it names the step, the
    exception and what was expected."""
    from ledgercheck.model.conformance.monitor import LedgerCheck

    spec = load_spec(TIMED).variant()
    api = build_api(spec)
    policy = {"trip_after": 1, "reset_timeout": 1}
    ledger = api.Ledger(shard_count=1, policy=api.Policy(**policy), echo=False)
    check = LedgerCheck(ledger, spec, "closed_admits", 1, policy)
    with pytest.raises(
        pytest.fail.Exception, match=r"step 1: allow\(0\) raised KeyError: 'x', expected it to return 'CLOSED'"
    ):
        with check.call_returning("CLOSED", "allow", 0):
            raise KeyError("x")
    with pytest.raises(
        pytest.fail.Exception, match=r"step 2: record_failure\(0\) raised ValueError: no, expected it to return$"
    ):
        with check.call("record_failure", 0):
            raise ValueError("no")


def test_an_empty_raises_list_raises_nothing() -> None:
    """`raises = []` is a list of no tables: the event raises nothing (a trial's spec wrote
    it, and a variant may take an event's errors away with it)."""
    assert RAISES in TEXT
    spec_file = load_spec_text(TEXT.replace(RAISES, "raises = []"), NAME)
    assert spec_file.variant().events["allow"].raises == ()
    patched = TEXT + '\n[variants.base]\n[variants.lenient]\nexpect_like = "base"\n'
    patched += "[variants.lenient.override.events.allow]\nraises = []\n"
    both = load_spec_text(patched, NAME)
    assert both.variant("base").events["allow"].raises != ()
    assert both.variant("lenient").events["allow"].raises == ()
    breakers = build_api(both.variant("lenient")).Ledger(shard_count=1, clock=lambda: 0.0, echo=False)
    for _ in range(3):
        breakers.record_failure(0)
    breakers.allow(0)  # open, and the lenient variant refuses nothing
