"""`check`, `report` and `ci` run their independent checks on several workers by default
(`--jobs`, `--executor`), and print the same bytes as one after the other (`--jobs 1`): the
results are assembled in the spec's order. The command's budget holds across the workers: a
worker over budget, or one that dies, is reported `unknown` (never a pass), and Ctrl-C leaves
no worker behind and no half-written file."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from ledgercheck.model import budget, cli, executor, runs
from ledgercheck.model.errors import EXIT_UNKNOWN, UsageError
from ledgercheck.model.formats import render_check
from ledgercheck.model.report import render as render_page
from ledgercheck.model.result import Status
from ledgercheck.model.runs import CheckRequest, exit_code, result_json, run_checks
from ledgercheck.model.spec import load_spec
from ledgercheck.model.textout import print_results

ROOT = Path(__file__).resolve().parent.parent
BREAKER = str(ROOT / "spec" / "examples" / "breaker.toml")
TIMED_BREAKER = str(ROOT / "spec" / "examples" / "timed_breaker.toml")
TWO = executor.ExecutorConfig(jobs=2)

needs_fork = pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork", reason="the workers must inherit this test's monkeypatching"
)


def _cli_output(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_two_workers_print_what_one_prints(capsys, fmt):
    serial = _cli_output(capsys, "check", BREAKER, "--format", fmt, "--jobs", "1")
    parallel = _cli_output(capsys, "check", BREAKER, "--format", fmt, "--jobs", "2")
    assert "failures_reset_when_closed" in serial[1]
    assert parallel[:2] == serial[:2]


def test_results_come_back_in_the_specs_order_across_variants_and_environments(spec_file):
    # a property of every variant in both environments, and quick to check: six results to order
    request = CheckRequest(spec_file, properties=("suspicion_survives_abort",), max_depth=2, max_traces=1)
    serial = run_checks(request, config=executor.SERIAL)
    parallel = run_checks(request, config=TWO)
    keys = [(r.variant, r.property, r.environment) for r in serial]
    assert len({variant for variant, _, _ in keys}) > 1 and len({env for _, _, env in keys}) > 1
    assert [(r.variant, r.property, r.environment) for r in parallel] == keys
    assert [result_json(r) for r in parallel] == [result_json(r) for r in serial]


def test_parallel_progress_names_each_finished_check(spec_file):
    lines: list[str] = []
    names = ("retire_retires", "retirement_is_final")
    request = CheckRequest(spec_file, variants=("fixed",), properties=names, environment="ledger", max_depth=4)
    run_checks(request, lines.append, config=TWO)
    finished = [line for line in lines if line.endswith("/2]")]
    assert sorted(line.rsplit(" [", 1)[0] for line in finished) == [
        "fixed / retire_retires (ledger): holds_to_depth",
        "fixed / retirement_is_final (ledger): holds_to_depth",
    ]
    assert sorted(line.rsplit(" [", 1)[1] for line in finished) == ["1/2]", "2/2]"]


def test_the_commands_with_independent_jobs_default_to_one_worker_per_core_and_others_to_one_process():
    parser = cli.build_parser()
    for command in (["check"], ["report", "--html", "x.html"], ["ci"], ["mutate"], ["conform"], ["gen"], ["prove"]):
        config = executor.for_command(cli.parse(parser, command))
        assert (config.kind, config.local_workers) == ("local", executor.available_cores())
        assert executor.for_command(cli.parse(parser, [*command, "--jobs", "1"])) == executor.SERIAL
    assert executor.for_command(cli.parse(parser, ["replay"])) == executor.SERIAL
    assert executor.for_command(cli.parse(parser, ["conform", "--jobs", "3"])) == executor.ExecutorConfig("local", 3)
    assert executor.for_command(cli.parse(parser, ["check", "--executor", "ray"])).kind == "ray"


def test_jobs_one_runs_in_this_process(monkeypatch, spec_file):
    seen: list[int] = []
    original = runs._check_one

    def noting(*args, **kwargs):
        seen.append(os.getpid())
        return original(*args, **kwargs)

    monkeypatch.setattr(runs, "_check_one", noting)
    request = CheckRequest(spec_file, variants=("fixed",), properties=("retire_retires",), max_depth=2)
    with executor.using(executor.SERIAL):
        run_checks(request)
    assert seen and set(seen) == {os.getpid()}


def test_a_spent_time_budget_is_unknown_in_every_worker(capsys):
    argv = ["check", TIMED_BREAKER, "--format", "json", "--jobs", "2", "--time-budget", "0.01"]
    code, out, err = _cli_output(capsys, *argv)
    results = json.loads(out)
    assert code == EXIT_UNKNOWN
    assert results and all(r["status"] == "unknown" and "time budget (0.01 s) ran out" in r["note"] for r in results)
    assert "time budget (0.01 s) ran out" in err


@needs_fork
def test_a_worker_that_dies_loses_only_its_check(monkeypatch, spec_file):
    original = runs._check_one

    def dying(request, spec, environment, prop, **options):
        if prop.name == "retirement_is_final":
            os.kill(os.getpid(), signal.SIGKILL)
        return original(request, spec, environment, prop, **options)

    monkeypatch.setattr(runs, "_check_one", dying)
    request = CheckRequest(
        spec_file,
        variants=("fixed",),
        environment="ledger",
        properties=("retire_retires", "retirement_is_final", "restart_budget_is_enforced"),
        max_depth=3,
    )
    results = run_checks(request, config=TWO)
    assert [r.property for r in results] == list(request.properties or ())
    lost = results[1]
    assert lost.status == Status.UNKNOWN and lost.matches is None
    assert "worker process checking it was killed by SIGKILL" in lost.note
    assert [r.status for r in (results[0], results[2])] == [Status.HOLDS_TO_DEPTH] * 2
    assert exit_code(results) == EXIT_UNKNOWN  # never a pass


# --- the executor's own guarantees, on toy jobs ---------------------------------------------


def _nap(shared: float, job: int, progress) -> int:
    """A job that sleeps `shared` seconds (the last one briefly), then answers its square."""
    if progress is not None:
        progress(f"job {job}")
    time.sleep(shared if job < 3 else 0.01)
    if job == 99:
        raise UsageError("job 99 is refused")
    return job * job


def _lost(job: int, why: str) -> int:
    return -job if "budget" in why else -1000


def test_run_all_returns_the_jobs_order():
    assert executor.run_all(_nap, 0.05, [0, 1, 2, 3], TWO, _lost) == [0, 1, 4, 9]


def test_workers_over_the_memory_budget_are_stopped_and_reported():
    # The command alone stays under the ceiling; with its two workers it does not.
    ceiling = int(budget.resident_mib()) + 20
    with budget.using(budget.Budget(None, ceiling)) as limits:
        results = executor.run_all(_nap, 30.0, [1, 2, 5], TWO, _lost)
    assert results == [-1, -2, -5]
    assert limits.spent == f"memory budget ({ceiling} MiB)"
    assert not multiprocessing.active_children()


def test_a_worker_past_the_deadline_is_stopped(monkeypatch):
    monkeypatch.setattr(executor, "GRACE", 0.2)
    with budget.using(budget.Budget(0.3, None)) as limits:
        started = time.monotonic()
        results = executor.run_all(_nap, 30.0, [1, 2, 3], TWO, _lost)
    assert time.monotonic() - started < 10
    assert results == [-1, -2, -3]
    assert limits.spent == "time budget (0.3 s)"
    assert not multiprocessing.active_children()


def test_an_exception_in_a_worker_is_raised_in_the_command():
    with pytest.raises(UsageError, match="job 99 is refused"):
        executor.run_all(_nap, 0.01, [3, 99, 3, 3], TWO, _lost)
    assert not multiprocessing.active_children()


def test_ctrl_c_stops_every_worker_and_keeps_what_finished():
    finished: dict[int, int] = {}

    def interrupt(index: int, result: int) -> None:
        finished[index] = result
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        executor.run_all(_nap, 30.0, [3, 0, 1], TWO, _lost, done=interrupt)
    assert finished == {0: 9}
    assert not multiprocessing.active_children()


def test_interrupted_report_writes_no_page(monkeypatch, tmp_path):
    """Ctrl-C while the workers check: no page at all, not half of one."""

    def interrupting(option):
        def progress(message: str) -> None:
            if message.endswith("]"):  # the first check finished
                raise KeyboardInterrupt

        progress.close = lambda: None  # type: ignore[attr-defined]
        return progress

    monkeypatch.setattr("ledgercheck.model.report.progress_for", interrupting)
    page = tmp_path / "report.html"
    assert cli.main(["report", TIMED_BREAKER, "--html", str(page), "--jobs", "2"]) == EXIT_UNKNOWN
    assert not page.exists() and not list(tmp_path.iterdir())
    assert not multiprocessing.active_children()


@pytest.mark.slow
def test_the_bundled_specs_plain_run_is_the_same_on_two_workers(capsys):
    """Every property, environment and variant of the pinned ledger, as `ledgercheck` checks it:
    the same bytes in every format from one process and from two workers."""
    spec_file = load_spec()
    outputs = []
    for config in (executor.SERIAL, TWO):
        results = run_checks(CheckRequest(spec_file), config=config)
        print(json.dumps([result_json(r) for r in results], indent=2, default=str))
        print_results(spec_file, results, False, False, False)
        for fmt in ("markdown", "junit"):
            print(render_check(fmt, spec_file, results))
        print(render_page(spec_file, results, {"run": "plain"}))
        outputs.append(capsys.readouterr().out)
    assert "violated" in outputs[0]
    assert outputs[1] == outputs[0]


@pytest.mark.slow
def test_ray_with_two_workers_prints_what_one_process_prints(capsys):
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # never a running cluster
    try:
        serial = _cli_output(capsys, "check", TIMED_BREAKER, "--format", "json", "--jobs", "1")
        on_ray = _cli_output(capsys, "check", TIMED_BREAKER, "--format", "json", "--executor", "ray", "--jobs", "2")
    finally:
        ray.shutdown()
    assert on_ray[:2] == serial[:2]
