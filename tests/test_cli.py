"""The command line: replay, exit codes, solver limits, interruption and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ledger_fixture import LEDGER_SPEC
from tiers import fast_slice

from ledgercheck.model import bmc, cli

ROOT = Path(__file__).resolve().parent.parent
SPEC = LEDGER_SPEC


def test_replay_without_arguments_shows_the_seed_on_both_variants(capsys):
    assert cli.main(["replay"]) == 0
    out = capsys.readouterr().out
    assert out.count("shard 1") >= 2
    assert "as_written" in out and "fixed" in out
    assert "http://shard-1.restarted" in out


def test_replay_json_uses_the_step_schema(capsys):
    assert (
        cli.main(["replay", "--format", "json", "--variant", "fixed", "report_failure(1, 'x')", "mark_restarting(1)"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert [d["variant"] for d in data] == ["fixed"]
    steps = data[0]["steps"]
    assert steps[0]["action"] is None
    assert steps[1]["action"] == "report_failure" and steps[1]["shard"] == 1
    after = steps[1]["after"]
    assert after["shards"][1]["state"] == "SUSPECT"
    assert after["shards"][1]["consecutive_reported_failures"] == 1
    assert "history" in after and after["history"]["shards"][1]["own_request_streak"] == 1
    assert steps[2]["after"]["shards"][1]["restart_attempts"] == 1


def test_check_json_schema_and_exit_code(capsys):
    code = cli.main(
        [
            "check",
            "--variant",
            "as_written",
            "--property",
            "restarted_engine_refits_healthy",
            "--shards",
            "2",
            "--max-depth",
            "8",
            "--max-traces",
            "1",
            "--format",
            "json",
        ]
    )
    assert code == 0
    both = json.loads(capsys.readouterr().out)
    # With no --environment, a property is checked in every environment it applies to.
    assert [r["environment"] for r in both] == ["ledger", "controller"]
    result = both[1]
    assert {"variant", "property", "environment", "shards", "policy", "status", "depth", "traces"} <= set(result)
    assert result["status"] == "violated" and result["depth"] == 6
    assert result["traces"][0][0]["action"] is None
    assert result["engine"] == "bmc"


@pytest.mark.parametrize(
    ("environment", "variant", "answer"),
    fast_slice(
        [
            ("ledger", "fixed", ("holds_to_depth", 30, "explicit")),
            ("ledger", "as_written", ("violated", 8, "explicit")),
            ("controller", "fixed", ("proved", 30, "spacer")),
            ("controller", "as_written", ("violated", 8, "bmc")),
        ],
        keep=[0, 1],  # the controller's race of a proof against the bounded search: the full suite
    ),
)
def test_engine_auto_picks_the_fastest_engine(capsys, environment, variant, answer):
    """auto: the explicit engine where one shard decides (the ledger environment), else the
    bounded search with a proof racing it (a property that holds comes back proved)."""
    argv = ["check", "--variant", variant, "--property", "no_condemnation_by_inherited_streak"]
    argv += ["--environment", environment, "--shards", "3", "--max-depth", "30", "--max-traces", "1"]
    assert cli.main([*argv, "--engine", "auto", "--format", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert (result["status"], result["depth"], result["engine"]) == answer
    if result["traces"]:
        assert len(result["traces"][0]) == 9 and result["shards"] == 3


def test_a_verdict_that_differs_from_the_expectation_exits_1(tmp_path, capsys):
    text = SPEC.read_text().replace(
        'message = "a freshly loaded engine came back from its first refit holding the dead engine\'s verdict"\n'
        'expect = { as_written = "violated", fixed = "holds", refit_keeps_streak = "holds" }',
        'message = "a freshly loaded engine came back from its first refit holding the dead engine\'s verdict"\n'
        'expect = { as_written = "holds", fixed = "holds", refit_keeps_streak = "holds" }',
    )
    assert text != SPEC.read_text()
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    code = cli.main(
        [
            "check",
            str(spec),
            "--variant",
            "as_written",
            "--property",
            "restarted_engine_refits_healthy",
            "--shards",
            "2",
            "--max-depth",
            "8",
            "--max-traces",
            "1",
        ]
    )
    assert code == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_timeout_gives_unknown_with_what_was_established(capsys):
    code = cli.main(
        [
            "check",
            "--variant",
            "fixed",
            "--property",
            "restart_budget_counts_genuine_failures",
            "--timeout",
            "0.02",
            "--max-depth",
            "20",
        ]
    )
    out = capsys.readouterr().out
    assert code == 3
    assert "UNKNOWN" in out and "holds up to depth" in out


def test_memory_cap_gives_unknown_not_a_crash(capsys):
    code = cli.main(
        [
            "check",
            "--variant",
            "fixed",
            "--property",
            "no_repeat_spurious_condemnation",
            "--memory",
            "16",
            "--max-depth",
            "12",
        ]
    )
    assert code == 3
    assert "memory" in capsys.readouterr().out


def test_interrupt_keeps_what_was_established(monkeypatch, capsys):
    real = bmc.check_property
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(bmc, "check_property", interrupted)
    # One process (--jobs 1): the interrupt is raised in this one (tests/test_parallel_checks.py: on workers).
    argv = ["check", "--variant", "as_written", "--shards", "2", "--max-depth", "7", "--max-traces", "1", "--jobs", "1"]
    code = cli.main(argv)
    captured = capsys.readouterr()
    assert code == 3
    assert "no_condemnation_by_inherited_streak" in captured.out
    assert "interrupted after 1 result" in captured.err


def test_bad_spec_is_exit_2_with_a_location_and_no_traceback(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text(SPEC.read_text().replace("state = DEAD\n", "state = DEDA\n", 1))
    result = subprocess.run(
        [sys.executable, "-m", "ledgercheck.model.cli", "check", str(spec)], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{spec}:" in result.stderr and "unknown name 'DEDA'" in result.stderr


def test_bad_arguments_are_exit_2(capsys):
    assert cli.main(["check", "--variant", "fixd"]) == 2
    assert "did you mean 'fixed'" in capsys.readouterr().err
    assert cli.main(["check", "--policy", "unhealthy_threshold=99"]) == 2


def test_help_shows_examples(capsys):
    try:
        cli.main(["check", "--help"])
    except SystemExit:
        pass
    assert "examples:" in capsys.readouterr().out


def test_options_are_accepted_anywhere_after_the_command() -> None:
    parser = cli.build_parser()
    ns = cli.parse(parser, ["replay", "spec.toml", "--variant", "fixed", "report_failure(1)", "report_failure(2)"])
    assert (ns.command, ns.variant, ns.spec_or_event) == (
        "replay",
        ["fixed"],
        ["spec.toml", "report_failure(1)", "report_failure(2)"],
    )
    ns = cli.parse(parser, ["check", "spec.toml", "--shards", "2", "--policy", "unhealthy_threshold=1"])
    assert (ns.spec, ns.shards, ns.policy) == ("spec.toml", 2, [("unhealthy_threshold", 1)])
    ns = cli.parse(parser, ["diff", "--max-depth", "3", "as_written", "--environment", "ledger", "fixed"])
    assert (ns.a, ns.b, ns.max_depth, ns.environment) == ("as_written", "fixed", 3, "ledger")


def test_a_commands_defaults_do_not_leak_into_another() -> None:
    parser = cli.build_parser()
    assert (cli.parse(parser, ["mutate"]).shards, cli.parse(parser, ["check"]).shards) == (2, None)
    # --max-depth is resolved against the spec's own (`[spec] max_depth`): each command says its fallback
    assert cli.parse(parser, ["mutate"]).max_depth is None and cli.parse(parser, ["check"]).max_depth is None
    helps = {name: " ".join(_help(parser, name).split()) for name in ("mutate", "check")}
    assert "the spec's [spec] max_depth, else 10)" in helps["mutate"]
    assert "the spec's [spec] max_depth, else 12)" in helps["check"]


def _help(parser: object, command: str) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        cli.parse(parser, [command, "--help"])  # type: ignore[arg-type]
    return out.getvalue()


def test_replay_names_the_scenarios_a_spec_has(tmp_path, capsys):
    """No events and no `seed` scenario: the one scenario is replayed; with several, the
    message names them (it said the spec had no scenario)."""
    text = (Path(__file__).resolve().parents[1] / "spec" / "examples" / "breaker.toml").read_text()
    one = text + '\n[scenarios.trip]\nenvironment = "ledger"\nsteps = ["record_failure(0)"]\n'
    path = tmp_path / "breaker.toml"
    path.write_text(one, encoding="utf-8")
    assert cli.main(["replay", str(path)]) == 0
    assert "record_failure(0)" in capsys.readouterr().out
    two = one + '\n[scenarios.calm]\nenvironment = "ledger"\nsteps = ["record_success(0)"]\n'
    path.write_text(two, encoding="utf-8")
    assert cli.main(["replay", str(path)]) == 2
    assert "name the scenario to replay (--scenario NAME; the spec has trip, calm)" in capsys.readouterr().err


def test_a_heartbeat_speaks_now_and_then_and_never_for_a_short_run() -> None:
    """`mutate` in a log (no terminal) ran 409 s without a line; it now says where it is at
    most every HEARTBEAT_SECONDS, and a run shorter than that prints nothing."""
    import io

    from ledgercheck.model.console import Heartbeat

    quiet, chatty = io.StringIO(), io.StringIO()
    slow = Heartbeat(quiet, every=3600)
    for n in range(3):
        slow(f"mutant {n}/3")
    assert quiet.getvalue() == ""
    now = Heartbeat(chatty, every=0)
    now("mutant 1/3: killed_by_property (40s)")
    assert chatty.getvalue() == "ledgercheck: mutant 1/3: killed_by_property (40s)\n"


def test_a_reader_that_leaves_early_does_not_change_the_exit_code(tmp_path):
    """`ledgercheck ci | head -3` under `set -o pipefail` is judged by the command's verdict:
    past a closed pipe the output is dropped and the command runs on to its exit code (a
    trial's failing `gen --check | head -2` exited 0, and `ci` 0 or 1 by how far it got)."""
    import os
    import subprocess
    import sys

    text = SPEC.read_text().replace(
        'message = "a freshly loaded engine came back from its first refit holding the dead engine\'s verdict"\n'
        'expect = { as_written = "violated", fixed = "holds", refit_keeps_streak = "holds" }',
        'message = "a freshly loaded engine came back from its first refit holding the dead engine\'s verdict"\n'
        'expect = { as_written = "holds", fixed = "holds", refit_keeps_streak = "holds" }',
    )
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    command = [sys.executable, "-m", "ledgercheck.model.cli", "check", str(spec), "--variant", "as_written"]
    command += ["--shards", "2", "--max-depth", "8", "--max-traces", "1", "--no-cache", "--jobs", "1"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "LEDGERCHECK_CACHE": str(tmp_path / "cache")}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as process:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()  # the reader leaves, as `head -1` does
        errors = process.stderr.read().decode()
        code = process.wait(timeout=600)
    assert first, errors
    assert code == 1, errors
    assert "Traceback" not in errors and "Exception ignored" not in errors


class _InterruptedSolver:
    """What a Z3 solver says after Ctrl-C reached it in a check: Z3's own handler took the
    signal and cancelled the check."""

    def reason_unknown(self) -> str:
        return "interrupted from keyboard"


def test_ctrl_c_inside_a_solver_call_is_an_interrupt() -> None:
    """Z3 turns Ctrl-C during a check into an `unknown` answer, and Python never hears it: a
    trial's `gen` went on, wrote every file and exited 0. Every check's answer goes through
    `budget.answered`, which raises it again; another unknown (a budget, a timeout) is kept."""
    import pytest

    from ledgercheck.model import budget

    with budget.hears_ctrl_c():
        with pytest.raises(KeyboardInterrupt):
            budget.answered(_InterruptedSolver(), "unknown")
        assert budget.interrupted()
        with pytest.raises(KeyboardInterrupt):  # and once heard, any check after it stops too
            budget.answered(_InterruptedSolver(), "sat")
    assert not budget.interrupted()
    assert budget.answered(_InterruptedSolver(), "sat") == "sat"

    class GaveUp(_InterruptedSolver):
        def reason_unknown(self) -> str:
            return "canceled"

    assert budget.answered(GaveUp(), "unknown") == "unknown"


@pytest.mark.slow
def test_ctrl_c_during_gen_writes_nothing_and_exits_3(tmp_path):
    """SIGINT a few seconds into `gen --no-cache` (in a solver call or not): exit 3, the
    interrupt named, no file written (three of ten tries of a trial's wrote them all)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "generated"
    command = [sys.executable, "-m", "ledgercheck.model.cli", "gen", str(SPEC), "--out", str(out)]
    command += ["--no-cache", "--jobs", "1"]
    env = {**os.environ, "LEDGERCHECK_CACHE": str(tmp_path / "cache")}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as process:
        time.sleep(4.0)
        process.send_signal(signal.SIGINT)
        output, errors = process.communicate(timeout=300)
    assert process.returncode == 3, output + errors
    assert "interrupted" in errors, errors
    assert not out.exists() or not any(out.iterdir())


def test_a_ticker_speaks_while_nothing_else_does() -> None:
    """A solver call of ten minutes says nothing: `ci`'s ticker hands its heartbeat what the
    run is doing every few seconds, until stopped (a trial's log sat silent for 600 s)."""
    import time

    from ledgercheck.model.console import Ticker

    heard: list[str] = []
    ticker = Ticker(heard.append, lambda: "ci: proving", every=0.02)
    deadline = time.monotonic() + 5.0
    while not heard and time.monotonic() < deadline:
        time.sleep(0.01)
    ticker.stop()
    assert heard and heard[0].startswith("ci: proving, ") and heard[0].endswith(" s into the run")
    count = len(heard)
    time.sleep(0.1)
    assert len(heard) <= count + 1  # stopped: at most the line being said as it stopped
