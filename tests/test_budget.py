"""Nothing runs unbounded in silence: exhaustive search only where the reduced state space
is known to be finite (`model.reduction.finite_reduction`), and every command under a
wall-clock and memory budget (`model.budget`) that ends in `unknown`, exit 3, with what
was established."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from budgets import Tripping

from ledgercheck.model import budget, cli, explicit
from ledgercheck.model.errors import EXIT_UNKNOWN
from ledgercheck.model.explicit import explicit_check
from ledgercheck.model.reduction import finite_reduction
from ledgercheck.model.runs import CheckRequest, run_checks
from ledgercheck.model.spec import load_spec

COUNTER_SPEC = '''
[spec]
name = "tally"
title = "A tally that only grows"
api_class = "Tallies"
api_policy_class = "TallyPolicy"
state_field = "state"
default_shards = 2

[enums.Mode]
members = ["ON", "OFF"]
api_values = "lower"

[policy]
step = { default = 1, min = 1, max = 3 }

[fields]
state = { type = "Mode", initial = "ON" }
ticks = { type = "int", initial = 0 }

[events.tick]
call = "tick(i)"
ignore_when = "state != ON"
body = """
ticks = ticks + step
"""

[events.switch]
call = "switch(i)"
body = """
state = OFF if state == ON else ON
"""

[environments.ledger]
doc = "any call at any time"
any_call = true

[properties.ticks_count_up]
doc = "A tick while on adds to the tally: compares the counter with its own earlier value."
kind = "step"
on = ["tick"]
when = "before.state == ON"
assert = "after.ticks > before.ticks"
message = "a tick did not count"
expect = { base = "holds" }

[properties.ticks_stay_small]
doc = "Compares the counter with a constant only: it saturates, the space is finite."
kind = "invariant"
assert = "ticks < 4"
message = "the tally reached 4"
expect = { base = "violated" }
'''


@pytest.fixture
def counter_spec(tmp_path: Path) -> Path:
    path = tmp_path / "tally.toml"
    path.write_text(COUNTER_SPEC, encoding="utf-8")
    return path


def _finiteness(path: Path, prop: str):
    spec = load_spec(str(path)).variant()
    return finite_reduction(spec, spec.environment("ledger"), [spec.properties[prop]], spec.resolve_policy({}))


def test_a_counter_compared_with_its_earlier_value_makes_the_space_infinite(counter_spec):
    infinite = _finiteness(counter_spec, "ticks_count_up")
    assert not infinite.finite
    assert infinite.variable == "field ticks"
    assert "ticks = ticks + step" in infinite.reason and "its own earlier value" in infinite.reason
    assert "ticks_count_up" in infinite.reason
    # Compared with a constant only, the same counter saturates: finite.
    assert _finiteness(counter_spec, "ticks_stay_small").finite


def test_the_ledger_environment_of_the_bundled_spec_is_finite_where_auto_searched_it():
    spec = load_spec().variant("fixed")
    env = spec.environment("ledger")
    prop = spec.properties["no_condemnation_by_inherited_streak"]
    assert finite_reduction(spec, env, [prop], spec.default_policy()).finite


@pytest.fixture
def small_probe(monkeypatch):
    """A smaller state budget for the explicit engine's probe of a space not known to be
    finite: the same outcome (spent, no proof) in a tenth of the states."""
    monkeypatch.setattr(explicit, "PROBE_STATES", 3_000)
    return 3_000


def test_prove_never_ends_on_the_explicit_engine_in_an_infinite_space(counter_spec, capsys, small_probe):
    argv = ["prove", str(counter_spec), "--environment", "ledger", "--property", "ticks_count_up"]
    code = cli.main([*argv, "--time-budget", "60", "--format", "json"])
    (result,) = json.loads(capsys.readouterr().out)
    assert result["engine"] != "explicit"
    assert (code, result["status"]) in ((0, "proved"), (EXIT_UNKNOWN, "unknown"))


@pytest.mark.slow
def test_check_prove_auto_never_ends_on_the_explicit_engine_in_an_infinite_space(counter_spec, capsys, small_probe):
    argv = ["check", str(counter_spec), "--environment", "ledger", "--property", "ticks_count_up", "--prove"]
    code = cli.main([*argv, "--engine", "auto", "--time-budget", "60", "--format", "json"])
    (result,) = json.loads(capsys.readouterr().out)
    assert result["engine"] != "explicit"
    assert (code, result["status"]) in ((0, "proved"), (0, "holds_to_depth"), (EXIT_UNKNOWN, "unknown"))


def test_check_prove_auto_searches_a_finite_space_exhaustively(counter_spec, capsys):
    argv = ["check", str(counter_spec), "--environment", "ledger", "--property", "ticks_stay_small", "--prove"]
    assert cli.main([*argv, "--engine", "auto", "--format", "json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert (result["status"], result["depth"], result["engine"]) == ("violated", 4, "explicit")


def test_the_explicit_engine_proves_nothing_in_an_infinite_space(counter_spec, small_probe):
    spec = load_spec(str(counter_spec)).variant()
    prop = spec.properties["ticks_count_up"]
    result = explicit_check(
        spec, "ledger", prop, shards=2, policy=spec.resolve_policy({}), max_depth=6, max_traces=1, prove=True
    )
    assert result.status == "holds_to_depth" and result.depth >= 6
    assert "no proof" in result.note and "field ticks" in result.note
    assert f"state budget {small_probe}" in result.note


@pytest.mark.parametrize("engine", ["auto", "z3"])
def test_a_tiny_memory_budget_ends_in_unknown_exit_3(engine, capsys):
    argv = ["check", "--environment", "ledger", "--variant", "fixed", "--property", "retire_retires"]
    code = cli.main([*argv, "--engine", engine, "--memory", "16", "--format", "json"])
    out = capsys.readouterr()
    (result,) = json.loads(out.out)
    assert code == EXIT_UNKNOWN
    assert result["status"] == "unknown" and "memory budget (16 MiB) ran out" in result["note"]
    assert "memory budget (16 MiB) ran out" in out.err


def test_prove_under_a_tiny_time_budget_ends_in_unknown_exit_3(capsys):
    argv = [
        "prove",
        "--environment",
        "controller",
        "--variant",
        "fixed",
        "--property",
        "no_condemnation_by_inherited_streak",
    ]
    code = cli.main([*argv, "--time-budget", "0.001", "--format", "json"])
    out = capsys.readouterr()
    (result,) = json.loads(out.out)
    assert code == EXIT_UNKNOWN and result["status"] == "unknown"
    assert "time budget (0.001 s) ran out" in result["note"]


def test_a_proof_keeps_what_the_budget_let_it_establish_and_none_starts_once_it_is_spent():
    """Spent before the proof: unknown at once, no engine started (a spent budget used to let
    every remaining proof build its encodings: `prove --memory 120` took 15.5 s, now 1.7 s).
    Spent during it: unknown with the depth the bounded search reached."""
    from ledgercheck.model.prove import prove_property

    spec = load_spec().variant("fixed")
    prop = spec.property("no_condemnation_by_inherited_streak")
    notes = []
    for after in (0, 1, 2):  # the budget runs out at its after-th look
        with budget.using(Tripping(after)):
            result = prove_property(spec, "controller", prop, shards=4, policy=spec.resolve_policy({}))
        assert result.status == "unknown", (after, result.note)
        notes.append(result.note)
    assert notes[0] == "the time budget (test) ran out before this proof started"
    assert "ran out at depth 0" in notes[1] and "holds up to depth 12" in notes[2], notes


def test_a_budget_running_out_mid_search_keeps_what_was_established(counter_spec, capsys):
    spec_file = load_spec()
    results: list = []
    with budget.using(Tripping(1000)):  # the first search takes about 620 checks, both 1370
        request = CheckRequest(
            spec_file,
            variants=("as_written",),
            properties=("no_condemnation_by_inherited_streak", "retire_retires"),
            environment="ledger",
            max_traces=1,
            engine="explicit",
        )
        run_checks(request, into=results)
    first, second = results
    # The first property's violation (depth 8) was found before the budget ran out ...
    assert (first.status, first.depth, len(first.traces)) == ("violated", 8, 1)
    # ... the second ran out: unknown, naming the budget and the depth it had reached.
    assert second.status == "unknown" and "time budget (test) ran out after depth" in second.note


def test_budget_options_are_checked():
    assert cli.main(["prove", "--time-budget", "0"]) == 2
    assert cli.main(["check", "--memory", "8"]) == 2


def test_the_budget_gives_the_solver_the_smaller_timeout():
    limits = budget.Budget(seconds=100.0, memory_mib=None)
    assert limits.solver_timeout(5.0) == 5.0
    assert 0 < (limits.solver_timeout(None) or 0) <= 100.0
    assert budget.Budget(None, None).solver_timeout(None) is None


def test_gen_that_runs_out_of_budget_writes_nothing(tmp_path, capsys):
    out = tmp_path / "generated"
    assert cli.main(["gen", "--out", str(out), "--time-budget", "0.001"]) == EXIT_UNKNOWN
    captured = capsys.readouterr()
    assert "time budget (0.001 s) ran out" in captured.err
    assert "could not be established" in captured.out  # the gate names what it could not decide
    assert not out.exists() or not any(out.iterdir())


def test_the_watchdog_interrupts_a_solver_call_that_outlives_the_budget():
    """A single hard solver call is cut when the budget runs out (not only between calls):
    pigeonhole, 11 pigeons in 10 holes, takes Z3 far longer than the half second allowed."""
    import z3

    from ledgercheck.model import budget as budget_module

    pigeons, holes = 11, 10
    ctx = z3.Context()
    at = [[z3.Bool(f"p{i}h{j}", ctx) for j in range(holes)] for i in range(pigeons)]
    solver = z3.Solver(ctx=ctx)
    for i in range(pigeons):
        solver.add(z3.Or(*at[i]))
    for j in range(holes):
        for i in range(pigeons):
            for k in range(i + 1, pigeons):
                solver.add(z3.Not(z3.And(at[i][j], at[k][j])))
    with budget_module.using(budget_module.Budget(0.5, None)) as limits:
        assert budget_module.limit_solver(solver) is None
        assert solver.check() == z3.unknown
        assert limits.spent is not None and limits.spent.startswith("time budget")


def test_the_watchdog_ends_with_its_command():
    """A command's watchdog must not outlive the command: a library caller (or a test
    session) running many commands in one process would otherwise keep one polling thread
    per command alive until each deadline."""
    import threading
    import time

    import z3

    def watchdogs() -> int:
        return sum(1 for t in threading.enumerate() if t.name == "ledgercheck-budget" and t.is_alive())

    before = watchdogs()
    with budget.using(budget.Budget(600.0, 4096)):
        assert budget.limit_solver(z3.Solver()) is None
        assert watchdogs() == before + 1
    deadline = time.monotonic() + 5 * budget.WATCH_INTERVAL + 2
    while watchdogs() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert watchdogs() == before


def test_a_z3_error_while_the_budget_is_spent_is_unknown_and_any_other_is_raised(monkeypatch):
    """The watchdog interrupts a check's Z3 context when the budget runs out: a call into Z3
    other than a solver's check then raises (`canceled`, `model is not available`). That check
    is unknown, naming the budget, never an error of the command's (it was a traceback, exit 1);
    the same Z3 error with budget left is a real one, and is raised."""
    import z3

    from ledgercheck.model import executor, runs

    def interrupted(*args, **kwargs):
        budget.active().spent = spent_as
        raise z3.Z3Exception("model is not available")

    monkeypatch.setattr(runs, "_check_one", interrupted)
    request = CheckRequest(load_spec(), variants=("fixed",), properties=("retire_retires",), environment="ledger")
    spent_as = "time budget (test)"
    with budget.using(budget.Budget(None, None)):
        (result,) = run_checks(request, config=executor.SERIAL)
    assert result.status == "unknown" and result.note == "the time budget (test) ran out while it was checked"
    spent_as = None
    with budget.using(budget.Budget(None, None)), pytest.raises(z3.Z3Exception, match="model is not available"):
        run_checks(request, config=executor.SERIAL)


def _interrupted_while(spent_as: list[str | None]):
    """A stand-in for an engine whose call into Z3 the watchdog interrupts: it marks the
    active budget spent as `spent_as[0]` says (None: budget left) and raises what Z3 raises."""
    import z3

    def interrupted(*args, **kwargs):
        budget.active().spent = spent_as[0]
        raise z3.Z3Exception("canceled")

    return interrupted


def test_a_proof_interrupted_in_a_z3_call_is_unknown_and_any_other_z3_error_is_raised(monkeypatch):
    """`prove` (and `claims`, `findings`, which prove) did not convert a Z3 error the spent
    budget caused: a traceback, exit 1. Now the proof is unknown, naming the budget."""
    import z3

    from ledgercheck.model import prove

    spent_as: list[str | None] = ["time budget (test)"]
    monkeypatch.setattr(prove, "_prove", _interrupted_while(spent_as))
    spec = load_spec().variant("fixed")
    prop = spec.property("retire_retires")
    with budget.using(budget.Budget(None, None)):
        result = prove.prove_property(spec, "ledger", prop, shards=1, policy=spec.default_policy())
    assert result.status == "unknown" and result.note == "the time budget (test) ran out while it was proved"
    spent_as[0] = None
    with budget.using(budget.Budget(None, None)), pytest.raises(z3.Z3Exception, match="canceled"):
        prove.prove_property(spec, "ledger", prop, shards=1, policy=spec.default_policy())


def test_a_mutant_check_interrupted_in_a_z3_call_stops_mutate_and_any_other_z3_error_is_raised(monkeypatch):
    """A mutant (or baseline) check whose Z3 call the budget interrupted judges nothing: the
    command stops with `BudgetExhausted` (exit 3), it neither crashes nor scores the mutant."""
    import z3

    from ledgercheck.model import mutate

    spent_as: list[str | None] = ["time budget (test)"]
    monkeypatch.setattr(mutate.bmc, "Checker", _interrupted_while(spent_as))
    spec = load_spec().variant("fixed")
    prop = spec.property("retire_retires")
    policy = spec.default_policy()
    with budget.using(budget.Budget(None, None)), pytest.raises(budget.BudgetExhausted) as stopped:
        mutate._check(spec, "ledger", prop, shards=1, policy=policy, depth=3, contracts=False)
    assert stopped.value.exit_code == EXIT_UNKNOWN
    assert str(stopped.value) == (
        "the time budget (test) ran out during mutate (checking retire_retires in ledger); no score was computed"
    )
    spent_as[0] = None
    with budget.using(budget.Budget(None, None)), pytest.raises(z3.Z3Exception, match="canceled"):
        mutate._check(spec, "ledger", prop, shards=1, policy=policy, depth=3, contracts=False)


def test_any_command_a_z3_call_interrupted_by_the_budget_ends_exit_3_never_a_traceback(monkeypatch, capsys):
    """The command line's net under every engine: a Z3 error the spent budget caused, wherever
    it escapes, exits 3 naming the budget; the same error with budget left stays an error."""
    import z3

    spent_as: list[str | None] = ["time budget (test)"]
    monkeypatch.setattr(cli, "_dispatch", _interrupted_while(spent_as))
    assert cli.main(["diff", "buggy", "fixed", "--time-budget", "60"]) == EXIT_UNKNOWN
    assert capsys.readouterr().err == (
        "ledgercheck: the time budget (test) ran out during `ledgercheck diff`, in a call into Z3; "
        "the results above are what was established\n"
    )
    spent_as[0] = None
    with pytest.raises(z3.Z3Exception, match="canceled"):
        cli.main(["diff", "buggy", "fixed", "--time-budget", "60"])
