"""Independent jobs give the same results, in the same order, on every executor: one
process, a local pool, or Ray; `ledgercheck mutate` prints the same bytes whichever runs it."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from ledgercheck.model import cli, executor
from ledgercheck.model.errors import ProcessDied, UsageError

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


def test_each_worker_keeps_to_a_stretch_of_the_jobs_and_steals_from_the_end_of_another():
    """Neighbouring jobs share their set-up (a variant's encoding), so a pool's workers each
    start on a stretch of the list of their own: the two workers of eight jobs on the first
    and the fifth, each going on in order; the one done first takes the other's last job."""
    done_order: list[tuple[int, int]] = []

    def done(index: int, result: tuple[int, int]) -> None:
        done_order.append((index, result[1]))

    lost = lambda job, why: (-1, -1)  # noqa: E731 - never called
    executor.run_all(_announced_square, 1, list(range(8)), executor.ExecutorConfig(jobs=2), lost, done=done)
    by_worker: dict[int, list[int]] = {}
    for index, pid in done_order:
        by_worker.setdefault(pid, []).append(index)
    assert sorted(jobs[0] for jobs in by_worker.values()) == [0, 4]
    assert sorted(index for jobs in by_worker.values() for index in jobs) == list(range(8))


def test_lanes_hand_out_stretches_then_the_fullest_lanes_last_job():
    lanes = executor._Lanes("abcdefg", 2)
    assert [lanes.take(0) for _ in range(3)] == [(0, "a"), (1, "b"), (2, "c")]
    assert lanes.take(0) == (6, "g")  # its own lane is empty: the other's last job
    assert lanes.take(1) == (3, "d")
    lanes.put_back(1, (3, "d"))  # a worker that died idle: the job goes back where it was
    assert len(lanes) == 3 and lanes.drain() == [(3, "d"), (4, "e"), (5, "f")]
    assert not lanes


def _announced_square(shared: int, job: int, progress: executor.Progress | None) -> tuple[int, int]:
    """A `Beside` or `run_all` job: says what it does, fails on a negative number, dies on 99."""
    if progress is not None:
        progress(f"squaring {job}")
    if job < 0:
        raise ValueError(f"no square of {job} here")
    if job == 99:
        os.kill(os.getpid(), signal.SIGKILL)
    return shared * job * job, os.getpid()


FORKS = pytest.mark.skipif(not executor.Beside.possible(), reason="Beside forks, on Linux only")


@FORKS
def test_beside_runs_its_job_in_a_process_of_its_own_and_forwards_what_it_says():
    heard: list[str] = []
    side = executor.Beside(_announced_square, 10, 3, heard.append, "a square")
    assert side.pid in executor._BESIDE  # a local pool counts its memory with its workers'
    value, pid = side.result()
    assert value == 90 and pid == side.pid != os.getpid()
    assert side.pid not in executor._BESIDE
    assert heard == ["squaring 3"] and side.done()
    assert not side.process.is_alive()


@FORKS
def test_beside_raises_what_its_job_raised_and_says_how_its_process_died():
    with pytest.raises(ValueError, match="no square of -2 here"):
        executor.Beside(_announced_square, 1, -2, None, "a square").result()
    with pytest.raises(ProcessDied, match="the process running a square was killed by SIGKILL"):
        executor.Beside(_announced_square, 1, 99, None, "a square").result()


def _sleeper(folder: str, job: int, progress: executor.Progress | None) -> int:
    """Leaves its pid in `folder`, then sleeps far longer than any test waits."""
    import time

    Path(folder, f"{job}.pid").write_text(str(os.getpid()))
    time.sleep(120)
    return job


def _nested_sleeper(folder: str, job: int, progress: executor.Progress | None) -> int:
    """A `Beside` job that runs `_sleeper` in a `Beside` of its own, as a split enumeration does."""
    return executor.Beside(_sleeper, folder, job + 1, None, "the inner sleeper").result()


def _gone(pid: int) -> bool:
    """No such process, or only its exit status left (a zombie nobody has reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@FORKS
def test_what_a_beside_forks_is_counted_with_it_and_dies_with_it(tmp_path):
    """A process a `Beside` job forks (a run of a split enumeration) counts against the memory
    budget with it (`_family`), and does not outlive it when it is stopped (killed)."""
    import time

    outer = executor.Beside(_nested_sleeper, str(tmp_path), 1, None, "the outer sleeper")
    deadline = time.monotonic() + 30
    while not (tmp_path / "2.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    inner = int((tmp_path / "2.pid").read_text())
    assert executor.family(outer.pid)[0] == outer.pid and inner in executor.family(outer.pid)
    outer.stop()
    while not _gone(inner) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not _gone(inner):
        os.kill(inner, signal.SIGKILL)  # not left sleeping after the failure
        pytest.fail(f"the inner process {inner} outlived the Beside that forked it")


class _Enough(Exception):
    pass


def test_an_exception_from_poll_stops_the_running_workers_and_is_raised(tmp_path):
    asked: list[int] = []

    def poll() -> None:
        asked.append(len(list(tmp_path.glob("*.pid"))))
        if asked[-1] == 2:  # both workers are inside a job
            raise _Enough

    lost = lambda job, why: -1  # noqa: E731 - never called: the jobs are stopped, not lost
    with pytest.raises(_Enough):
        executor.run_all(_sleeper, str(tmp_path), [1, 2, 3], executor.ExecutorConfig(jobs=2), lost, poll=poll)
    pids = [int(p.read_text()) for p in tmp_path.glob("*.pid")]
    assert len(pids) == 2
    for pid in pids:  # stopped and reaped, not left sleeping
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_one_after_the_other_poll_is_asked_before_each_job():
    seen: list[int] = []

    def poll() -> None:
        if len(seen) == 2:
            raise _Enough

    def done(index: int, result: tuple[int, int]) -> None:
        seen.append(result[0])

    lost = lambda job, why: (-1, -1)  # noqa: E731
    with pytest.raises(_Enough):
        executor.run_all(_announced_square, 1, [1, 2, 3], executor.SERIAL, lost, done=done, poll=poll)
    assert seen == [1, 4]


def test_bad_settings_are_usage_errors():
    with pytest.raises(UsageError, match="--jobs must be positive"):
        executor.ExecutorConfig(jobs=0)
    with pytest.raises(UsageError, match="unknown executor"):
        executor.ExecutorConfig(kind="cluster")


def test_missing_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` then raises ImportError
    with pytest.raises(UsageError, match=r"pip install 'ledgercheck\[ray\]'"):
        list(executor.run_jobs(_slow_square, JOBS, executor.ExecutorConfig(kind="ray", jobs=2)))


class _RayWithARunningCluster:
    """Ray as it answers where `ray start` runs a cluster on this machine: `ray.init` joins
    it, and refuses a CPU count for it (`refusal`: the message it refuses with)."""

    def __init__(self, refusal: str) -> None:
        self.refusal = refusal
        self.calls: list[dict[str, object]] = []

    def is_initialized(self) -> bool:
        return False

    def init(self, **options: object) -> None:
        self.calls.append(options)
        if "num_cpus" in options:
            raise ValueError(self.refusal)


def test_ray_joins_the_cluster_ray_start_runs_on_this_machine(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    ray = _RayWithARunningCluster("When connecting to an existing cluster, num_cpus and num_gpus must not be provided.")
    executor._ray_init(ray, executor.ExecutorConfig(kind="ray", jobs=2))
    assert ray.calls == [
        {"num_cpus": 2, "log_to_driver": False, "include_dashboard": False},
        {"log_to_driver": False},  # joined, its own CPUs deciding
    ]


def test_ray_refusing_for_another_reason_is_not_hidden(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    ray = _RayWithARunningCluster("num_cpus must be positive")
    with pytest.raises(ValueError, match="must be positive"):
        executor._ray_init(ray, executor.ExecutorConfig(kind="ray", jobs=2))
    assert len(ray.calls) == 1


class _RayWithNoClusterThere:
    """Ray as it answers where RAY_ADDRESS names a cluster that does not answer (or refuses
    the connection: Ray's token authentication)."""

    def is_initialized(self) -> bool:
        return False

    def init(self, **options: object) -> None:
        raise ConnectionError("Failed to connect to Ray cluster at 192.0.2.9:6379")


def test_a_cluster_that_does_not_answer_is_a_usage_error_naming_it(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "192.0.2.9:6379")
    with pytest.raises(UsageError, match=r"RAY_ADDRESS=192\.0\.2\.9:6379 .*RAY_ADDRESS=auto"):
        executor._ray_init(_RayWithNoClusterThere(), executor.ExecutorConfig(kind="ray", jobs=2))


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
    # address='local': an instance of the test's own, even where `ray start` runs a cluster here
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)
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
