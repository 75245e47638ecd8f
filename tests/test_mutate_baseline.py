"""`ledgercheck mutate` scores against an honest baseline.

A property check or a generated test that already fails on the unmutated reference variant
"kills" every mutant and says nothing about any of them: it must be left out of the score,
and an unclean baseline must be reported, by name, before the score.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledgercheck.codegen.render import DEFAULT_DEPTH, DEFAULT_TRACES, establish_counterexamples, plan_tests
from ledgercheck.model import cli
from ledgercheck.model.executor import ExecutorConfig
from ledgercheck.model.runs import CheckRequest, run_checks
from ledgercheck.model.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
BREAKER = ROOT / "spec" / "examples" / "breaker.toml"
FAST = ["--max-depth", "6", "--shards", "2"]


def _unclean_breaker(tmp_path: Path) -> Path:
    """The example breaker, whose only variant is expected to violate one property (its
    generated tests are strict xfails: they fail on it by the property alone, which is their
    pass), plus a property whose expectation is wrong: a failure while half open does not
    close the breaker, yet the spec says this holds."""
    text = BREAKER.read_text(encoding="utf-8")
    right = 'when = "before.state == HALF_OPEN"\nassert = "after.state == OPEN"'
    assert text.count(right) == 1
    path = tmp_path / "breaker.toml"
    wrong = 'when = "before.state == HALF_OPEN"\nassert = "after.state == CLOSED"'
    path.write_text(text.replace(right, wrong), encoding="utf-8")
    return path


@pytest.mark.slow
def test_unclean_baseline_is_named_before_the_score_and_excluded_from_it(tmp_path, capsys):
    path = _unclean_breaker(tmp_path)
    code = cli.main(["mutate", str(path), *FAST, "--workers", "1", "--max-mutants", "8", "--seed", "0"])
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    score_at = next(i for i, line in enumerate(lines) if " mutants of breaker.toml:" in line)
    report = lines[:score_at]
    assert report[0].startswith(
        "baseline (unmutated base): NOT CLEAN; 2 of 6 property checks and 3 of 3 generated tests pass."
    )
    for policy in ("shipped", "smallest"):
        assert f"  property half_open_failure_reopens (ledger, {policy} policy): violated, expected holds" in report
        assert (
            f"  property failures_reset_when_closed (ledger, {policy} policy): violated, as the spec expects" in report
        )
    tests = [test for _, (_, _, group) in plan_tests(load_spec(str(path))).items() for test in group]
    assert len(tests) == 3 and all(test.known_violation for test in tests)
    # Their strict xfails pass on the unmutated base: none is excluded. They kill the mutants
    # that change what their traces do on the way (when they were counted as failing on the
    # base, they were excluded and the score said nothing of them).
    assert not any(line.startswith("  generated test ") for line in report)
    assert lines[score_at] == (
        "8 mutants of breaker.toml: 2 killed by properties, 4 killed by generated tests, 2 survived; "
        "score 6/8 = 75%; excluded (fail on the unmutated base): 4 of 6 property checks, 0 of 3 generated tests"
    )
    assert sum(line.startswith("survivor (") for line in lines[score_at:]) == 2


def test_unclean_baseline_in_json(tmp_path, capsys):
    path = _unclean_breaker(tmp_path)
    code = cli.main(["mutate", str(path), *FAST, "--workers", "1", "--max-mutants", "8", "--format", "json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert {"mutants", "score", "outcomes", "baseline"} <= set(data)
    assert data["score"] == {"killed_by_property": 2, "killed_by_tests": 4, "survived": 2, "undecided": 0, "invalid": 0}
    baseline = data["baseline"]
    assert (baseline["variant"], baseline["clean"], baseline["checks"], baseline["tests"]) == ("base", False, 6, 3)
    assert baseline["failing_tests"] == []
    unclean = sorted((c["property"], c["policy"]) for c in baseline["excluded_checks"] if not c["clean"])
    assert unclean == [("half_open_failure_reopens", "shipped"), ("half_open_failure_reopens", "smallest")]
    assert all(c["verdict"] == "violated" and not c["usable"] for c in baseline["excluded_checks"])


@pytest.mark.slow
def test_bundled_spec_has_a_clean_baseline(capsys):
    """Only checks a call outside the callers' contracts breaks are left out, as before the
    baseline was reported: those never could kill a mutant, so the score is unchanged."""
    code = cli.main(["mutate", *FAST, "--workers", "2", "--max-mutants", "3", "--format", "json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    baseline = data["baseline"]
    # The reference variant: the first in which every property is expected to hold.
    assert baseline["clean"] is True and baseline["variant"] == "refit_keeps_streak"
    assert baseline["failing_tests"] == [] and baseline["tests"] > 0
    spec = load_spec().variant("refit_keeps_streak")
    applicable = sum(prop.applies_to(env) for prop in spec.properties.values() for env in spec.environments)
    assert baseline["checks"] == 2 * applicable  # the shipped and the smallest policy
    for check in baseline["excluded_checks"]:
        assert check["environment"] == "ledger" and check["clean"], check
        assert (check["verdict"], check["contract_verdict"], check["expected"]) == (
            "violated",
            "holds_to_depth",
            "holds",
        )
    killed = data["score"]["killed_by_property"] + data["score"]["killed_by_tests"]
    assert killed + data["score"]["survived"] + data["score"]["invalid"] == data["mutants"] == 3


@pytest.mark.parametrize("name", ["breaker.toml", "timed_breaker.toml", "listener_breaker.toml"])
def test_the_plan_from_one_batch_of_checks_is_the_plan_found_one_check_at_a_time(name):
    """`mutate` runs the checks the generated tests are drawn from as one batch on its workers
    (`establish_counterexamples`): exactly the checks `plan_tests` runs by itself (each
    property where a variant does not expect it to hold), and the same tests from them."""
    spec_file = load_spec(str(ROOT / "spec" / "examples" / name))
    found = establish_counterexamples(spec_file, DEFAULT_DEPTH, DEFAULT_TRACES, ExecutorConfig(jobs=2))
    expected_pairs = {
        (variant, prop.name)
        for variant in spec_file.variants
        for prop in spec_file.variant(variant).properties.values()
        if prop.expect.get(variant) != "holds"
    }
    assert {(variant, prop) for variant, prop, _ in found.results} == expected_pairs
    alone = plan_tests(spec_file)
    batched = plan_tests(spec_file, verdicts=found)
    assert alone and [(k, v[1], v[2]) for k, v in batched.items()] == [(k, v[1], v[2]) for k, v in alone.items()]


def test_run_checks_keeps_only_the_jobs_it_is_asked_for_in_the_specs_order():
    spec_file = load_spec(str(BREAKER))
    request = CheckRequest(spec_file, max_depth=3, max_traces=1, lax=False)
    every = [(r.variant, r.property, r.environment) for r in run_checks(request)]
    kept = {every[-1], every[0]}
    some = run_checks(request, only=lambda job: job in kept)
    assert [(r.variant, r.property, r.environment) for r in some] == [every[0], every[-1]]


def test_the_baseline_found_beside_the_plan_is_the_baseline_found_on_the_workers(monkeypatch):
    """With workers, `mutate` runs the baseline's checks one after the other in a process of
    their own while the workers run the plan's checks: the same baseline as on the workers."""
    from ledgercheck.model import executor, mutate

    started = []

    class Spy(executor.Beside):  # type: ignore[type-arg]
        def __init__(self, *args):
            started.append(args[-1])
            super().__init__(*args)

    monkeypatch.setattr(executor, "Beside", Spy)
    spec_file = load_spec(str(ROOT / "spec" / "examples" / "listener_breaker.toml"))
    spec = spec_file.variant(spec_file.variants[0])
    baseline, _, _ = mutate.run_mutation(spec_file, shards=2, depth=4, workers=2, max_mutants=1, seed=0)
    assert started == (["the baseline's checks"] if executor.Beside.possible() else [])
    on_workers = mutate.baseline_checks(spec, 2, 4, ExecutorConfig(jobs=2))
    assert baseline.checks == on_workers and len(on_workers) == len(mutate._checks(spec))


def test_the_baseline_checks_not_finished_beside_the_plan_go_to_the_workers(monkeypatch, tmp_path):
    """The process beside the plan's checks is stopped when the plan is made: the checks it
    finished are kept, the others run on the workers, and the baseline is the same."""
    import multiprocessing
    import time

    from ledgercheck.codegen import render
    from ledgercheck.model import executor, mutate

    if not executor.Beside.possible():
        pytest.skip("Beside forks, on Linux only")
    marker = tmp_path / "two-done"
    real_check, real_establish = mutate._baseline_check, render.establish_counterexamples
    real_baseline = mutate.baseline_checks
    done_beside = []

    def check_then_stall(spec, check, shards, depth):
        if multiprocessing.current_process().name == "ledgercheck-beside":
            done_beside.append(check)
            if len(done_beside) == 3:  # two sent: stall until the command stops this process
                marker.write_text("two")
                time.sleep(120)
        return real_check(spec, check, shards, depth)

    def establish_after_two(*args):
        for _ in range(600):
            if marker.exists():
                break
            time.sleep(0.1)
        return real_establish(*args)

    starts = []

    def baseline_from(spec, shards, depth, config=None, start=0):
        starts.append(start)
        return real_baseline(spec, shards, depth, config, start)

    monkeypatch.setattr(mutate, "_baseline_check", check_then_stall)
    monkeypatch.setattr(render, "establish_counterexamples", establish_after_two)
    monkeypatch.setattr(mutate, "baseline_checks", baseline_from)
    spec_file = load_spec(str(ROOT / "spec" / "examples" / "listener_breaker.toml"))
    baseline, _, _ = mutate.run_mutation(spec_file, shards=2, depth=4, workers=2, max_mutants=1, seed=0)
    assert starts[0] == 2  # two from beside the plan, the rest from the workers
    spec = spec_file.variant(spec_file.variants[0])
    assert baseline.checks == real_baseline(spec, 2, 4) and len(baseline.checks) > 2


def _checks_answering(monkeypatch, statuses: dict[str, str]) -> None:
    """Every mutant check answers as `statuses` says per property name (default: holds)."""
    from types import SimpleNamespace

    from ledgercheck.model import mutate

    def answer(spec, env, prop, **kwargs):
        status = statuses.get(prop.name, "holds_to_depth")
        traces = [SimpleNamespace(depth=3)] if status == "violated" else []
        return SimpleNamespace(status=status, note="the solver answered unknown (incomplete)", traces=traces)

    monkeypatch.setattr(mutate, "_check", answer)


def _one_mutant_job(checks: list[tuple[str, str, str]]) -> tuple:
    from ledgercheck.model import mutate
    from ledgercheck.model.spec import reference_variant

    spec_file = load_spec()
    variant = reference_variant(spec_file)
    mutant = mutate.enumerate_mutants(spec_file.variant(variant))[0]
    return (spec_file.source.text, spec_file.path, variant, mutant, 1, 4, [], checks)


def test_a_mutant_whose_check_is_unknown_is_undecided_never_a_survivor(monkeypatch):
    """A mutant whose property check the solver could not decide was reported `survived`:
    a claim that no property sees it, resting on a check that established nothing. It is
    `undecided`, naming the check; a later check that breaks still kills it."""
    from ledgercheck.model import mutate

    checks = [("ledger", "retire_retires", "shipped"), ("ledger", "failed_restart_is_dead", "shipped")]
    _checks_answering(monkeypatch, {"retire_retires": "unknown"})
    outcome = mutate._evaluate(_one_mutant_job(checks))
    assert outcome.status == "undecided"
    assert outcome.detail == (
        "retire_retires (ledger, shipped policy): unknown (the solver answered unknown (incomplete))"
    )
    _checks_answering(monkeypatch, {"retire_retires": "unknown", "failed_restart_is_dead": "violated"})
    outcome = mutate._evaluate(_one_mutant_job(checks))
    assert outcome.status == "killed_by_property"
    assert outcome.detail == "failed_restart_is_dead (ledger, shipped policy): 3-step trace"
    _checks_answering(monkeypatch, {})
    assert mutate._evaluate(_one_mutant_job(checks)).status == "survived"


def test_undecided_mutants_are_left_out_of_the_score_and_exit_3(monkeypatch, capsys):
    """The score counts only mutants with a verdict; the command names the undecided ones
    and exits 3 (unknown is never a pass), in text and in JSON."""
    from ledgercheck.model import mutate
    from ledgercheck.model.errors import EXIT_UNKNOWN

    spec = load_spec()
    mutants = mutate.enumerate_mutants(spec.variant("fixed"))[:3]
    outcomes = [
        mutate.Outcome(mutants[0].ident, "killed_by_property", "retire_retires (ledger, shipped policy): 2-step trace"),
        mutate.Outcome(mutants[1].ident, "undecided", "retire_retires (ledger, shipped policy): unknown (why)"),
        mutate.Outcome(mutants[2].ident, "survived", ""),
    ]
    baseline = mutate.Baseline("fixed", (), 0, ())
    monkeypatch.setattr(mutate, "run_mutation", lambda *a, **k: (baseline, mutants, outcomes))
    assert cli.main(["mutate", "--max-depth", "4", "--no-progress"]) == EXIT_UNKNOWN
    captured = capsys.readouterr()
    assert "1 killed by properties, 0 killed by generated tests, 1 survived, 1 undecided; score 1/2 = 50%" in (
        captured.out
    )
    assert f"\nundecided ({mutants[1].kind}; retire_retires (ledger, shipped policy): unknown (why)):\n" in captured.out
    assert "1 mutant(s) undecided" in captured.err
    assert cli.main(["mutate", "--max-depth", "4", "--no-progress", "--format", "json"]) == EXIT_UNKNOWN
    report = json.loads(capsys.readouterr().out)
    assert report["score"]["undecided"] == 1
    assert [o["status"] for o in report["outcomes"]] == ["killed_by_property", "undecided", "survived"]
