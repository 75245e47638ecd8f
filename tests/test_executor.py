"""Independent jobs give the same results, in the same order, on every executor: one
process, a local pool, or Ray; `ledgercheck mutate` prints the same bytes whichever runs it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ledgercheck.model import cli, executor
from ledgercheck.model.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
BREAKER = ROOT / "spec" / "examples" / "breaker.toml"
MUTATE = ["mutate", str(BREAKER), "--max-depth", "6", "--shards", "2", "--max-mutants", "6", "--seed", "3"]


def _slow_square(job: tuple[int, float]) -> tuple[int, int]:
    """Earlier jobs sleep longer, so a pool finishes them out of order."""
    import time

    value, delay = job
    time.sleep(delay)
    return value * value, os.getpid()


JOBS = [(value, 0.05 * (4 - value)) for value in range(5)]


def test_serial_runs_in_this_process_in_order():
    results = list(executor.run_jobs(_slow_square, JOBS, executor.ExecutorConfig(jobs=1)))
    assert [square for square, _ in results] == [0, 1, 4, 9, 16]
    assert {pid for _, pid in results} == {os.getpid()}


def test_pool_returns_results_in_input_order():
    results = list(executor.run_jobs(_slow_square, JOBS, executor.ExecutorConfig(jobs=2)))
    assert [square for square, _ in results] == [0, 1, 4, 9, 16]
    assert os.getpid() not in {pid for _, pid in results}


def test_closing_early_stops_the_pool():
    results = executor.run_jobs(_slow_square, JOBS, executor.ExecutorConfig(jobs=2))
    assert next(results)[0] == 0
    results.close()
    assert list(results) == []


def test_bad_settings_are_usage_errors():
    with pytest.raises(UsageError, match="--jobs must be positive"):
        executor.ExecutorConfig(jobs=0)
    with pytest.raises(UsageError, match="unknown executor"):
        executor.ExecutorConfig(kind="cluster")


def test_missing_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` then raises ImportError
    with pytest.raises(UsageError, match=r"pip install 'ledgercheck\[ray\]'"):
        list(executor.run_jobs(_slow_square, JOBS, executor.ExecutorConfig(kind="ray", jobs=2)))


@pytest.mark.slow
def test_mutate_output_is_byte_identical_between_one_and_two_jobs(capsys):
    outputs = []
    for jobs in ("1", "2"):
        assert cli.main([*MUTATE, "--jobs", jobs]) == 0
        outputs.append(capsys.readouterr().out)
    assert " mutants of breaker.toml:" in outputs[0]
    assert outputs[0] == outputs[1]


def _breaker_scripts(**where: object) -> list[object]:
    """`conform`'s checker counterexamples of the example breaker, on the executor `where` names."""
    from ledgercheck.model.conformance import sources
    from ledgercheck.model.spec import load_spec

    sources._COUNTEREXAMPLES.clear()  # the process's memo of them would answer a second call
    return sources.counterexample_scripts(  # type: ignore[return-value]
        load_spec(str(BREAKER)), shards=2, overrides={}, depth=6, cache=None, **where
    )


def test_conform_finds_the_same_counterexamples_on_one_worker_and_two():
    one = _breaker_scripts(jobs=1)
    assert one and _breaker_scripts(jobs=2) == one
    ns = cli.parse(cli.build_parser(), ["conform", "--executor", "ray", "--jobs", "2"])
    assert executor.from_namespace(ns) == executor.ExecutorConfig("ray", 2)


def test_workers_is_still_accepted_for_jobs(capsys):
    assert cli.main([*MUTATE, "--workers", "1", "--format", "json"]) == 0
    assert '"mutants": 6' in capsys.readouterr().out


@pytest.fixture
def local_ray():
    ray = pytest.importorskip("ray")
    # The workers import this test module (for `_slow_square`) from its folder.
    runtime_env = {"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parent)}}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_with_two_workers_matches_serial(local_ray, capsys):
    config = executor.ExecutorConfig(kind="ray", jobs=2)
    results = list(executor.run_jobs(_slow_square, JOBS, config))
    assert [square for square, _ in results] == [0, 1, 4, 9, 16]
    assert os.getpid() not in {pid for _, pid in results}
    outputs = []
    for extra in (["--jobs", "1"], ["--executor", "ray", "--jobs", "2"]):
        assert cli.main([*MUTATE, *extra, "--format", "json"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert _breaker_scripts(executor="ray", jobs=2) == _breaker_scripts(jobs=1)  # conform's checker jobs
