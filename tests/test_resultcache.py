"""The cache of check results answers exactly what a fresh check would, and only then: an
edited spec, another tool or another question is a miss, an undecided result is never kept,
and a damaged or misplaced entry is never served."""

from __future__ import annotations

from pathlib import Path

import pytest
from ledger_fixture import LEDGER_SPEC
from regressions import SEEN, apply

from ledgercheck.model import budget, resultcache, runs
from ledgercheck.model.result import Result, Status
from ledgercheck.model.runs import CheckRequest, result_json, run_checks
from ledgercheck.model.spec import load_spec, load_spec_text

ROOT = Path(__file__).resolve().parents[1]
PROPERTY = "full_streak_condemns"
REGRESSION = next(r for r in SEEN if r.name == "report_failure_threshold_off_by_one")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A cache of results of this test's own (the suite runs with it turned off)."""
    monkeypatch.setenv("LEDGERCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LEDGERCHECK_RESULTS", raising=False)
    return tmp_path / "cache" / "results"


@pytest.fixture
def solved(monkeypatch):
    """The jobs a run really checked (not answered from the cache)."""
    jobs = []
    original = runs._check_job

    def counting(plan, job, progress):
        jobs.append(job)
        return original(plan, job, progress)

    monkeypatch.setattr(runs, "_check_job", counting)
    return jobs


def _request(spec_file, **changes):
    defaults = {"variants": ("fixed",), "max_depth": 5}
    return CheckRequest(spec_file, properties=(PROPERTY,), environment="ledger", **(defaults | changes))


def _json(results):
    return [result_json(r) for r in results]


def _regressed():
    return load_spec_text(apply(LEDGER_SPEC.read_text(encoding="utf-8"), REGRESSION), f"{REGRESSION.name}.toml")


def test_a_warm_run_prints_what_the_cold_one_did_without_solving(spec_file, folder, solved):
    cold = _json(run_checks(_request(spec_file, variants=None)))
    assert len(solved) == len(cold) == 3 and len(list(folder.glob("result-*.pickle"))) == 3
    warm = _json(run_checks(_request(spec_file, variants=None)))
    assert warm == cold and len(solved) == 3  # nothing solved the second time


def test_an_edited_spec_is_checked_afresh_and_its_regression_seen(spec_file, folder, solved):
    before = run_checks(_request(spec_file))
    assert all(r.matches for r in before)
    after = run_checks(_request(_regressed()))
    assert len(solved) == 2
    assert all(r.matches is False and r.status == Status.VIOLATED for r in after)


def test_another_question_or_another_tool_is_a_miss(spec_file, folder, solved, monkeypatch):
    run_checks(_request(spec_file))
    run_checks(_request(spec_file, max_depth=4))
    run_checks(_request(spec_file, max_traces=1))
    run_checks(_request(spec_file, variants=("as_written",)))
    assert len(solved) == 4
    monkeypatch.setattr(resultcache, "tool", lambda: "a newer ledgercheck")
    run_checks(_request(spec_file))
    assert len(solved) == 5


def test_time_and_memory_limits_do_not_change_the_question(spec_file, folder, solved):
    run_checks(_request(spec_file))
    run_checks(_request(spec_file, timeout=600.0, memory=4096))
    assert len(solved) == 1


def test_an_undecided_result_is_never_kept(spec_file, folder, solved):
    with budget.using(budget.Budget(seconds=1e-9)):
        undecided = run_checks(_request(spec_file))
    assert {r.status for r in undecided} == {Status.UNKNOWN}
    assert not list(folder.glob("result-*.pickle"))
    decided = run_checks(_request(spec_file))
    assert Status.UNKNOWN not in {r.status for r in decided}
    question = resultcache.Question(PROPERTY, "ledger", 1, None, 1, 1, None, False, "z3", True)
    unknown = Result(
        variant="v", property=PROPERTY, environment="ledger", shards=1, policy=None, status=Status.UNKNOWN, depth=0
    )
    resultcache.store(folder, "digest", question, unknown)
    assert not resultcache.entry_path(folder, "digest", question).exists()


def test_a_damaged_or_misplaced_entry_is_not_served(spec_file, folder, solved):
    every = _request(spec_file, variants=None)
    cold = _json(run_checks(every))
    entries = sorted(folder.glob("result-*.pickle"))
    entries[0].write_bytes(entries[0].read_bytes()[:40])  # truncated
    entries[1].write_bytes(entries[2].read_bytes())  # another job's answer under this job's key
    again = _json(run_checks(every))
    assert again == cold and len(solved) == 5  # both checked again, the third served
    assert _json(run_checks(every)) == cold and len(solved) == 5  # and rewritten whole


@pytest.mark.parametrize("setting", [("LEDGERCHECK_RESULTS", "off"), ("LEDGERCHECK_CACHE", "off")])
def test_the_cache_can_be_turned_off(spec_file, folder, solved, monkeypatch, setting):
    monkeypatch.setenv(*setting)
    run_checks(_request(spec_file))
    run_checks(_request(spec_file))
    assert len(solved) == 2 and not folder.exists()


def test_a_spec_read_back_from_the_spec_cache_has_the_digest_of_a_fresh_compile(tmp_path, monkeypatch):
    monkeypatch.setenv("LEDGERCHECK_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "ledger.toml"
    path.write_text(LEDGER_SPEC.read_text(encoding="utf-8"), encoding="utf-8")
    fresh = load_spec(path)
    assert list((tmp_path / "cache").glob("spec-*.pickle"))  # the next load reads it back
    again = load_spec(path)
    assert again is not fresh
    digests = [resultcache.spec_digest(fresh.variant(v)) for v in fresh.variants]
    assert None not in digests and len(set(digests)) == len(digests)
    assert digests == [resultcache.spec_digest(again.variant(v)) for v in fresh.variants]


def test_the_command_line_prints_the_same_bytes_warm_and_no_cache_solves_again(folder, solved, capsys):
    from ledgercheck.model import cli

    args = ["check", "--property", PROPERTY, "--environment", "ledger", "--variant", "fixed"]
    args += ["--max-depth", "5", "--format", "json"]
    printed, said = [], []
    for extra in ([], [], ["--no-cache"]):
        assert cli.main([*args, *extra, "--jobs", "1"]) == 0
        out, err = capsys.readouterr()
        printed.append(out)
        said.append("answered from the cache of results" in err)
    assert printed[0] == printed[1] == printed[2]
    assert said == [False, True, False]  # stderr says which run did not solve
    assert len(solved) == 2  # solved by the first run and by --no-cache's


def test_the_gate_with_a_warm_cache_still_goes_red_on_a_regression(folder, tmp_path):
    """`gen`, then `ci` answered from the cache, then one edited line: `ci` names it."""
    import os
    import subprocess
    import sys

    spec = tmp_path / "spec" / "breaker.toml"
    spec.parent.mkdir()
    text = (ROOT / "spec" / "examples" / "breaker.toml").read_text(encoding="utf-8")
    spec.write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != "LEDGERCHECK_SPEC"}

    def run(*args):
        command = [sys.executable, "-m", "ledgercheck.model.cli", *args, str(spec), "--out", str(tmp_path / "gen")]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)

    assert run("gen").returncode == 0
    warm = run("ci")
    assert warm.returncode == 0, warm.stdout + warm.stderr
    assert "answered from the cache of results" in warm.stdout
    broken = "if state == HALF_OPEN or failures + 1 >= trip_after:"
    spec.write_text(text.replace("if state == HALF_OPEN or failures >= trip_after:", broken), encoding="utf-8")
    red = run("ci")
    assert red.returncode == 1, red.stdout + red.stderr
    assert "MISMATCH" in red.stdout and "trips_only_after_enough_failures" in red.stdout
    assert "answered from the cache of results" not in red.stdout
