"""Notifications as observable outputs: a spec declares what a call announces
(`[notifications]`), emits it (`emit.name(args)`), states properties about it
(`emitted(name)` in a step property), and binds how a real class announces it
(`[implementation.notifications]`). Checked here: the declarations and their errors, the
two engines agreeing on what a call announces, the checker finding a violated property and
proving the rest, the executable model's announcements, and `conform` comparing them with a
hand-written listener breaker (tests/impl/listener_breaker.py) and catching a copy that
announces the wrong thing."""

from __future__ import annotations

import itertools
import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import z3
from ledger_fixture import LEDGER_EXAMPLES, ROOT
from spec_cases import Bad, assert_refused

from ledgercheck.codegen.meaning import meaning_of, variant_parts
from ledgercheck.model import cli, mutate
from ledgercheck.model.conformance import Conformance, load_target
from ledgercheck.model.conformance.calls import LedgerCall, Script
from ledgercheck.model.encoding import Z3Backend
from ledgercheck.model.errors import SpecError
from ledgercheck.model.interpreter import build_api
from ledgercheck.model.semantics import ConcreteBackend, Effects, Machine
from ledgercheck.model.spec import Spec, load_spec, load_spec_text

NAME = "listener_breaker.toml"
EXAMPLE = LEDGER_EXAMPLES / NAME
TEXT = EXAMPLE.read_text(encoding="utf-8")
IMPL = Path(__file__).resolve().parent / "impl" / "listener_breaker.py"
IMPL_TEXT = IMPL.read_text(encoding="utf-8")


def _spec() -> Spec:
    return load_spec(EXAMPLE).variant()


def test_the_spec_declares_its_notifications() -> None:
    spec = _spec()
    opened = spec.notifications["opened"]
    assert [(p.name, str(p.type)) for p in opened.params] == [("failures", "int")]
    assert opened.render({"failures": 3}) == "breaker opened after 3 failures"
    assert spec.notifications["closed"].params == () and spec.notifications["closed"].render({}) is None
    assert [(p.name, str(p.type)) for p in spec.notifications["state_changed"].params] == [
        ("old", "Mode"),
        ("new", "Mode"),
    ]
    binding = spec.binding
    assert binding is not None
    assert [(a.notification, a.form, a.target, a.skip) for a in binding.announcers] == [
        ("opened", "param", "on_open", 0),
        ("opened", "logger", "listener_breaker", 0),
        ("closed", "attribute", "on_close", 0),
        ("state_changed", "register", "add_listener", 1),
    ]


def test_the_model_announces_every_emit_in_order() -> None:
    api = build_api(_spec())
    ledger = api.Ledger(shard_count=2, policy=api.Policy(trip_after=2), echo=False)
    ledger.record_failure(1)
    assert ledger.notifications == []
    ledger.record_failure(1)
    # The state hook's emit runs at the assignment, before the body's own emit.
    assert ledger.notifications == [("state_changed", 1, ("CLOSED", "OPEN")), ("opened", 1, (2,))]
    ledger.record_failure(1)  # ignored while open: nothing announced
    ledger.try_reset(1)
    ledger.record_success(1)
    assert ledger.notifications[2:] == [
        ("state_changed", 1, ("OPEN", "HALF_OPEN")),
        ("state_changed", 1, ("HALF_OPEN", "CLOSED")),
        ("closed", 1, ()),
    ]


def _call_records(spec: Spec, backend: Any, store: dict[Any, Any], event: str) -> Any:
    machine: Machine[Any] = Machine(spec, backend, spec.default_policy(), 1)
    effects: Effects[Any] = Effects()
    machine.call_event(spec.events[event], 0, {}, store, machine.true, effects)
    return effects.calls[-1]


def test_the_engines_agree_on_what_every_call_announces() -> None:
    """The Z3 backend runs each event once on a symbolic record (both branches of every
    `if`, merged); put any concrete record in and its `emitted` flags and emit arguments
    are the interpreter's, for every state, failure count and event."""
    spec = _spec()
    z3b = Z3Backend(spec)
    symbols = {(0, "state"): z3.Int("state"), (0, "failures"): z3.Int("failures")}
    members = spec.enums["Mode"].members
    compared = 0
    for event in spec.events:
        symbolic = _call_records(spec, z3b, dict(symbols), event)
        for state, failures in itertools.product(members, range(4)):
            concrete = _call_records(spec, ConcreteBackend(), {(0, "state"): state, (0, "failures"): failures}, event)
            values = [
                (symbols[(0, "state")], z3.IntVal(members.index(state))),
                (symbols[(0, "failures")], z3.IntVal(failures)),
            ]

            def value(term: Any, values: list[Any] = values) -> Any:
                return z3.simplify(z3.substitute(term, *values))

            for name in spec.notifications:
                assert z3.is_true(value(symbolic.emitted[name])) == concrete.emitted[name], (
                    event,
                    state,
                    failures,
                    name,
                )
            happened = [e for e in symbolic.emits if z3.is_true(value(e.pc))]
            assert [e.name for e in happened] == [e.name for e in concrete.emits]
            for sym, con in zip(happened, concrete.emits, strict=True):
                for (_, term), (_, plain) in zip(sym.args, con.args, strict=True):
                    coded = members.index(plain) if isinstance(plain, str) else plain
                    assert value(term).as_long() == coded
            compared += 1
    assert compared == len(spec.events) * len(members) * 4


@pytest.mark.parametrize("engine", ["z3", "explicit"])
def test_both_engines_find_the_false_claim_and_hold_the_rest(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", str(EXAMPLE), "--engine", engine, "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "every_success_announces_closing" in out and "VIOLATED, depth 1" in out
    assert "3 hold" in out and "closing_is_announced" in out and "0 mismatch(es)" in out


def test_a_property_about_emissions_is_proved(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", str(EXAMPLE), "--prove", "--jobs", "1"]) == 0
    assert "3 hold proved" in capsys.readouterr().out


@pytest.mark.parametrize("engine", ["z3", "explicit"])
def test_a_dropped_emit_breaks_the_property_in_both_engines(
    engine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The spec with the opening's emit gone: `opening_is_announced` is violated (an
    unexpected verdict), found by each engine: the reduction keeps the emits' conditions."""
    text = TEXT.replace("    state = OPEN\n    emit.opened(failures)\n", "    state = OPEN\n")
    assert text != TEXT
    path = tmp_path / NAME
    path.write_text(text, encoding="utf-8")
    assert cli.main(["check", str(path), "--engine", engine, "--jobs", "1"]) == 1
    out = capsys.readouterr().out
    assert "opening_is_announced" in out and "1 mismatch(es)" in out
    # The counterexample's figure shows what each call announced, the breaking call's marked.
    assert "announced | -      | -                          | [state_changed(CLOSED, OPEN)]" in out


BAD = {
    "unknown-notification": Bad(
        "    emit.opened(failures)",
        "    emit.openned(failures)",
        "emit.openned",
        ("'openned'", "did you mean 'opened'"),
    ),
    "emit-wrong-type": Bad("    emit.opened(failures)", "    emit.opened(state)", "emit.opened", ("must be int",)),
    "emit-missing-arg": Bad("    emit.opened(failures)", "    emit.opened()", "emit.opened", ("missing the argument",)),
    "emit-unknown-keyword": Bad(
        "    emit.opened(failures)", "    emit.opened(failure=1)", "emit.opened", ("did you mean 'failures'",)
    ),
    "emitted-in-invariant": Bad(
        'kind = "step"\non = ["record_success"]\nassert = "emitted(closed)"',
        'kind = "invariant"\nassert = "emitted(closed)"',
        "emitted(closed)",
        ("only allowed in step properties",),
    ),
    "emitted-unknown": Bad(
        'assert = "emitted(closed)"', 'assert = "emitted(close)"', "emitted(close)", ("did you mean 'closed'",)
    ),
    "params-any": Bad('params = "failures: int"', 'params = "failures: any"', "failures: any", ("cannot be a any",)),
    "text-unknown-placeholder": Bad(
        'text = "breaker opened after {failures} failures"',
        'text = "breaker opened after {failure} failures"',
        "{failure}",
        ("not a parameter", "did you mean 'failures'"),
    ),
    "text-format-spec": Bad(
        'text = "breaker opened after {failures} failures"',
        'text = "breaker opened after {failures:03d} failures"',
        "{failures:03d}",
        ("no format spec",),
    ),
    "unknown-key": Bad('doc = "the on_close() callback"', 'docs = "x"', "docs", ("unknown key 'docs'",)),
    "binding-unknown": Bad(
        'closed = { attribute = "on_close" }',
        'close = { attribute = "on_close" }',
        "close =",
        ("did you mean 'closed'",),
    ),
    "binding-two-forms": Bad(
        'closed = { attribute = "on_close" }',
        'closed = { attribute = "on_close", param = "x" }',
        "closed =",
        ("one way per table",),
    ),
    "binding-skip-on-a-logger": Bad(
        'opened = [{ param = "on_open" }, { logger = "listener_breaker" }]',
        'opened = [{ param = "on_open" }, { logger = "listener_breaker", skip = 1 }]',
        "opened =",
        ("skip is for callbacks",),
    ),
    "binding-dotted-param": Bad(  # a constructor keyword (register and attribute may follow attributes)
        'opened = [{ param = "on_open" }, { logger = "listener_breaker" }]',
        'opened = [{ param = "hooks.on_open" }, { logger = "listener_breaker" }]',
        "opened =",
        ("plain name",),
    ),
    "binding-logger-without-text": Bad(
        'closed = { attribute = "on_close" }', 'closed = { logger = "listener_breaker" }', "closed =", ("has no text",)
    ),
}


@pytest.mark.parametrize("case", list(BAD.values()), ids=list(BAD))
def test_bad_notifications_are_refused_with_location(case: Bad) -> None:
    assert_refused(TEXT, case, NAME)


def test_emit_is_refused_in_an_environment_action() -> None:
    text = TEXT + '\n[environments.callers.actions.shout]\nparams = "i: shard"\nbody = "emit.closed()"\n'
    with pytest.raises(SpecError, match="emit is only allowed in event bodies"):
        load_spec_text(text, NAME)


def test_mutate_drops_each_announcement_and_the_properties_kill_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["mutate", str(EXAMPLE), "--jobs", "1", "--format", "json"]) == 0
    outcomes = json.loads(capsys.readouterr().out)["outcomes"]
    dropped = {o["ident"]: o["status"] for o in outcomes if o["kind"] == "drop an announcement"}
    assert dropped == {
        "record_failure:drop an announcement:emit.opened(failures)": "killed_by_property",
        "record_success:drop an announcement:emit.closed()": "killed_by_property",
        "on_state_change:drop an announcement:emit.state_changed(old, new) -> pass": "killed_by_property",
    }


def test_mutate_swaps_two_announced_arguments_of_one_type() -> None:
    text = TEXT.replace('params = "old: Mode, new: Mode"', 'params = "old: int, new: int"').replace(
        'body = "emit.state_changed(old, new)"', 'body = "pass"'
    )
    text = text.replace(
        "    emit.opened(failures)\n", "    emit.opened(failures)\n    emit.state_changed(failures, 0)\n"
    )
    spec_file = load_spec_text(text, NAME)
    kinds = {m.ident: m for m in mutate.spec_mutants(spec_file, "base") if "announc" in m.kind}
    swapped = kinds[
        "record_failure:swap announced arguments:emit.state_changed(failures, 0) -> emit.state_changed(0, failures)"
    ]
    assert "+    emit.state_changed(0, failures)" in swapped.diff()
    assert "record_failure:drop an announcement:emit.state_changed(failures, 0)" in kinds


def test_notifications_are_meaning_but_their_doc_is_not() -> None:
    base = meaning_of(load_spec_text(TEXT, NAME))
    reworded = meaning_of(load_spec_text(TEXT.replace('doc = "the on_close() callback"', 'doc = "on close"'), NAME))
    assert reworded.digest == base.digest
    for old, new in (
        ("after {failures} failures", "after {failures} failure(s)"),
        ("    emit.closed()\n", "    pass\n"),
        ('params = "failures: int"', 'params = "failures: int, extra: bool = False"'),
    ):
        assert meaning_of(load_spec_text(TEXT.replace(old, new), NAME)).digest != base.digest, new


def test_a_spec_without_notifications_keeps_its_meaning() -> None:
    """`notifications` enters the canonical form only when declared (the bundled ledger's
    generated tests stay byte-identical: `gen --check` proves it on both folders)."""
    spec = load_spec(LEDGER_EXAMPLES / "timed_breaker.toml").variant()
    assert "notifications" not in variant_parts(spec) and "notifications" not in variant_parts(spec)["spec"]
    parts = variant_parts(_spec())
    assert sorted(parts["notifications"]) == ["closed", "opened", "state_changed"]
    assert "notifications" not in parts["spec"]


# --- conformance ---------------------------------------------------------------------------


def _checker(target: str) -> Conformance:
    spec = _spec()
    return Conformance(spec, load_target(target, spec), spec.default_policy())


def test_the_bound_class_hears_every_way_of_announcing() -> None:
    checker = _checker(f"{IMPL}:ListenerBreaker")
    ledger = checker.new_impl(2)
    ledger.record_failure(1)
    ledger.record_failure(1)
    assert ledger.notifications == [
        ("state_changed", 1, ("CLOSED", "OPEN")),
        ("opened", 1, (2,)),
        ("log listener_breaker", 1, "breaker opened after 2 failures"),
    ]


def test_conform_passes_the_listener_breaker(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["conform", str(EXAMPLE), "--impl", f"{IMPL}:ListenerBreaker", "--depth", "5", "--jobs", "1"]) == 0
    assert "no divergence" in capsys.readouterr().out


WRONG = {
    "wrong-arg": ("self.on_open(self.failures)", "self.on_open(self.failures + 1)", "opened(3)"),
    "skipped": ("                self.on_close()", "                pass", "closed()"),
    "wrong-log-text": ('"breaker opened after %d failures"', '"breaker opened after %d failure(s)"', "failure(s)"),
    "wrong-enum-arg": ("listener(self, old, new)", "listener(self, new, old)", "state_changed(OPEN, CLOSED)"),
}


@pytest.mark.parametrize("case", list(WRONG.values()), ids=list(WRONG))
def test_conform_catches_a_wrong_announcement(
    case: tuple[str, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new, shown = case
    assert IMPL_TEXT.count(old) == 1, old
    path = tmp_path / "wrong_breaker.py"
    path.write_text(IMPL_TEXT.replace(old, new), encoding="utf-8")
    assert cli.main(["conform", str(EXAMPLE), "--impl", f"{path}:ListenerBreaker", "--depth", "5", "--jobs", "1"]) == 1
    out = capsys.readouterr().out
    assert "notifications: model" in out and "> notifications" in out and shown in out


def test_conform_accepts_callbacks_called_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = IMPL_TEXT.replace("self.on_open(self.failures)", "self.on_open(failures=self.failures)")
    text = text.replace("listener(self, old, new)", "listener(self, new=new, old=old)")
    path = tmp_path / "keyword_breaker.py"
    path.write_text(text, encoding="utf-8")
    assert cli.main(["conform", str(EXAMPLE), "--impl", f"{path}:ListenerBreaker", "--depth", "5", "--jobs", "1"]) == 0
    assert "no divergence" in capsys.readouterr().out


def test_announcements_outside_calls_are_not_a_call_s() -> None:
    """A log record made while no bound call runs (another user of the logger) is dropped."""
    checker = _checker(f"{IMPL}:ListenerBreaker")
    ledger = checker.new_impl(1)
    logging.getLogger("listener_breaker").warning("unrelated")
    script = Script("by hand", 1, (LedgerCall("record_failure", 0, ()),))
    assert checker.run(script) is None
    assert ledger.notifications == []


# --- generated tests ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("listener_generated")
    assert cli.main(["gen", str(EXAMPLE), "--out", str(out)]) == 0
    return out


def test_gen_asserts_every_call_s_announcements_byte_identically(
    generated: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    text = (generated / "test_branches_of_record_failure.py").read_text(encoding="utf-8")
    assert "check.expect_notifications([])" in text
    assert '["opened", 0, [2]],' in text and '["log listener_breaker", 0, "breaker opened after 2 failures"],' in text
    again = tmp_path_factory.mktemp("listener_generated")  # beside the first: the spec's relative path is the same
    assert cli.main(["gen", str(EXAMPLE), "--out", str(again)]) == 0
    for path in generated.glob("*.py"):
        assert (again / path.name).read_bytes() == path.read_bytes(), path.name
    assert cli.main(["gen", str(EXAMPLE), "--out", str(generated), "--check"]) == 0


def _pytest(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder), *options]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=IMPL.parents[2], check=False)


def test_generated_tests_pass_on_the_model_and_the_listener_breaker(generated: Path) -> None:
    # record_failure's `state == HALF_OPEN or failures >= trip_after` is two branches: 11 tests pass
    for options in ((), ("--impl", f"{IMPL}:ListenerBreaker")):
        run = _pytest(generated, *options)
        assert run.returncode == 0, run.stdout[-2000:]
        assert "11 passed, 3 xfailed" in run.stdout


@pytest.mark.parametrize("case", [WRONG["wrong-enum-arg"], WRONG["skipped"]], ids=["wrong-enum-arg", "skipped"])
def test_a_generated_test_catches_a_wrong_announcement(
    case: tuple[str, str, str], generated: Path, tmp_path: Path
) -> None:
    old, new, shown = case
    path = tmp_path / "wrong_breaker.py"
    path.write_text(IMPL_TEXT.replace(old, new), encoding="utf-8")
    run = _pytest(generated, "--impl", f"{path}:ListenerBreaker")
    assert run.returncode == 1, run.stdout[-2000:]
    assert "announced" in run.stdout and "expected" in run.stdout and shown in run.stdout


def test_ci_passes_end_to_end_on_the_listener_breaker(generated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Verdicts, generated tests up to date, the tests against the model and the class, and
    conformance: every stage of `ledgercheck ci` on the example and its hand-written class."""
    target = f"{IMPL}:ListenerBreaker"
    assert cli.main(["ci", str(EXAMPLE), "--out", str(generated), "--impl", target, "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "PASSED" in out and "no divergence" in out


def test_ci_takes_the_class_the_spec_binds_without_impl(
    generated: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example's [implementation] names its class (a path from the checkout's root):
    `ci` tests it and checks its conformance as `conform` would, with no --impl (it skipped
    both steps, "no --impl given")."""
    monkeypatch.chdir(ROOT)
    assert cli.main(["ci", str(EXAMPLE), "--out", str(generated), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"tests vs implementation +passed", out) and "no divergence" in out, out


def test_ci_reads_a_relative_out_from_where_it_runs(
    generated: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ci --out work/generated_tests` from another folder: the pytest steps, run from the
    folder's parent, were given the relative path and found no tests there."""
    monkeypatch.chdir(generated.parent.parent)
    relative = generated.relative_to(generated.parent.parent)
    code = cli.main(["ci", str(EXAMPLE), "--out", str(relative), "--impl", f"{IMPL}:ListenerBreaker", "--jobs", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"tests vs model +passed", out) and re.search(r"tests vs implementation +passed", out), out


def test_json_steps_carry_what_their_calls_announced(capsys: pytest.CaptureFixture[str]) -> None:
    """`replay --format json` (the step objects `check --format json` prints too) shows what
    each step's calls announced, in order; a step that announced nothing has no such key."""
    code = cli.main(["replay", str(EXAMPLE), "record_failure(0)", "record_failure(0)", "--format", "json"])
    assert code == 0
    steps = json.loads(capsys.readouterr().out)[0]["steps"]
    assert ["announced" in step for step in steps] == [False, False, True]
    assert steps[2]["announced"] == [
        {"shard": 0, "notification": "state_changed", "args": {"old": "CLOSED", "new": "OPEN"}},
        {"shard": 0, "notification": "opened", "args": {"failures": 2}},
    ]


def test_ledger_steps_have_no_announced_key(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["replay", "report_failure(0, 'x')", "--format", "json", "--variant", "fixed"])
    assert code == 0
    steps = json.loads(capsys.readouterr().out)[0]["steps"]
    assert len(steps) == 2 and all("announced" not in step for step in steps)


def test_a_callback_keyword_the_class_does_not_take_is_a_binding_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`opened = [{ param = "on_opne" }]`: the class does not take that keyword. It was a raw
    TypeError reported at the construct line; it names the notification's line and the
    keyword the class does take."""
    text = EXAMPLE.read_text(encoding="utf-8").replace('{ param = "on_open" }', '{ param = "on_opne" }')
    assert text.count("on_opne") == 1
    path = tmp_path / "listener_breaker_typo.toml"
    path.write_text(text, encoding="utf-8")
    code = cli.main(["conform", str(path), "--impl", f"{IMPL}:ListenerBreaker", "--depth", "2"])
    err = capsys.readouterr()
    out = err.out + err.err
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "on_opne" in row)
    assert code == 2, out
    assert f"listener_breaker_typo.toml:{line}:" in out, out
    assert "notification 'opened' passes on_opne=, which ListenerBreaker(" in out and "did you mean 'on_open'?" in out


def test_a_log_line_names_the_instance_that_announces_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`text = "breaker {index} opened ..."`: the model's line names the instance, and a class
    that logs another index diverges on it."""
    from ledgercheck.model.cli import main

    root = Path(__file__).resolve().parents[1]
    spec = (root / "spec" / "examples" / "listener_breaker.toml").read_text(encoding="utf-8")
    assert spec.count('text = "breaker opened after {failures} failures"') == 1
    spec = spec.replace(
        'text = "breaker opened after {failures} failures"', 'text = "breaker {index} opened after {failures} failures"'
    )
    source = (root / "tests" / "impl" / "listener_breaker.py").read_text(encoding="utf-8")
    assert source.count('"breaker opened after %d failures"') == 1
    (tmp_path / "breaker.toml").write_text(spec, encoding="utf-8")
    for number, index in ((1, "0"), (2, "7")):
        (tmp_path / f"breaker{number}.py").write_text(
            source.replace('"breaker opened after %d failures"', f'"breaker {index} opened after %d failures"'),
            encoding="utf-8",
        )
    target = f"{tmp_path / 'breaker1.py'}:ListenerBreaker"
    assert main(["conform", str(tmp_path / "breaker.toml"), "--impl", target, "--depth", "4"]) == 0, capsys.readouterr()
    capsys.readouterr()
    target = f"{tmp_path / 'breaker2.py'}:ListenerBreaker"
    assert main(["conform", str(tmp_path / "breaker.toml"), "--impl", target, "--depth", "4"]) == 1
    assert "breaker 0 opened after" in capsys.readouterr().out


def test_a_log_line_placeholder_that_is_neither_a_parameter_nor_the_index_is_refused() -> None:
    from ledgercheck.model.errors import SpecError
    from ledgercheck.model.spec import load_spec_text

    root = Path(__file__).resolve().parents[1]
    spec = (root / "spec" / "examples" / "listener_breaker.toml").read_text(encoding="utf-8")
    bad = spec.replace('text = "breaker opened after {failures} failures"', 'text = "breaker {indx} opened"')
    with pytest.raises(
        SpecError, match=r"\{indx\} is not a parameter of the notification, nor \{index\}.*did you mean 'index'"
    ):
        load_spec_text(bad, "breaker.toml")


REGISTERED_SPEC = """\
[spec]
name = "reg"
api_class = "Breaker"
state_field = "state"
default_shards = 1

[enums.Mode]
members = ["CLOSED", "OPEN"]

[fields]
state = { type = "Mode", initial = "CLOSED" }
failures = { type = "int", initial = 0 }

[notifications.opened]
doc = "the breaker opened"

[events.fail]
call = "fail(i)"
body = \"\"\"
failures = failures + 1
if failures >= 2 and state == CLOSED:
    state = OPEN
    emit.opened()
\"\"\"

[environments.ledger]
any_call = true

[properties.two_states]
kind = "invariant"
assert = "state == OPEN or state == CLOSED"
expect = { base = "holds" }

[implementation]
target = "reg.py:Breaker"
instances = "indexed"

[implementation.fields]
state = "state"
failures = "failures"

[implementation.notifications]
opened = { register = "REGISTER" }
"""

REGISTERED_CLASS = """\
class Machine:
    def __init__(self):
        self.entering = {}

    def on_enter_open(self, callback):
        self.entering.setdefault("open", []).append(callback)


class Breaker:
    def __init__(self):
        self.machine = Machine()
        self.state = "CLOSED"
        self.failures = 0

    def fail(self, i):
        self.failures += 1
        if self.failures >= 2 and self.state == "CLOSED":
            self.state = "OPEN"
            for callback in self.machine.entering.get("open", []):
                CALL
"""


@pytest.mark.parametrize(
    ("register", "call", "code", "said"),
    [
        ("machine.on_enter_open", "callback()", 0, "no divergence"),
        ("machine.on_enter_open", "pass", 1, "notifications: model opened(), implementation -"),
        ("machin.on_enter_open", "callback()", 2, "register 'machin.on_enter_open' cannot be followed on Breaker"),
    ],
)
def test_a_callback_registered_through_an_attribute_is_heard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], register: str, call: str, code: int, said: str
) -> None:
    """`register = "machine.on_enter_open"`: a `transitions` machine keeps its per-state
    callbacks on the machine, not on the model; the binding refused a dotted name."""
    from ledgercheck.model.cli import main

    (tmp_path / "reg.toml").write_text(REGISTERED_SPEC.replace("REGISTER", register))
    (tmp_path / "reg.py").write_text(REGISTERED_CLASS.replace("CALL", call))
    assert main(["conform", str(tmp_path / "reg.toml"), "--no-policies"]) == code
    out = capsys.readouterr()
    assert said in out.out + out.err, out.out + out.err
