"""Where independent jobs run: one process, a local process pool, or a Ray cluster.

A job is a picklable top-level function and one argument. `run_jobs` yields the results in the
order of the jobs, whatever the executor, so a command's output is byte-identical between
`--jobs 1`, `--jobs N` and `--executor ray`:

* `local` (the default): a process pool of `jobs` workers (the machine's cores when not
  given); `jobs` = 1 runs every job in this process, one after the other;
* `ray`: one Ray task per job. The cluster is found by Ray's own conventions: an already
  initialised Ray, else `ray.init()`, which connects to `RAY_ADDRESS` when it is set and
  otherwise starts a local instance (of `jobs` CPUs when given). Ray is an optional
  dependency (`pip install ledgercheck[ray]`); without it the command stops with a usage
  error that says how to install it.

Closing the generator early (a spent budget) cancels the jobs not yet started.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ledgercheck.model.errors import UsageError

EXECUTORS = ("local", "ray")

In = TypeVar("In")
Out = TypeVar("Out")


@dataclass(frozen=True)
class ExecutorConfig:
    """`kind` is one of EXECUTORS; `jobs` the number of parallel workers (None: every core
    for `local`, whatever the cluster offers for `ray`)."""

    kind: str = "local"
    jobs: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise UsageError(f"unknown executor {self.kind!r} (expected one of {', '.join(EXECUTORS)})")
        if self.jobs is not None and self.jobs < 1:
            raise UsageError("--jobs must be positive")

    @property
    def local_workers(self) -> int:
        return self.jobs if self.jobs is not None else os.cpu_count() or 1


def add_options(parser: argparse.ArgumentParser, *aliases: str) -> None:
    """`--jobs N` (with any older spelling in `aliases`) and `--executor {local,ray}`."""
    parser.add_argument(
        "--jobs",
        *aliases,
        dest="jobs",
        type=int,
        default=None,
        help="parallel workers (default: every core; 1 runs the jobs one after the other in this process)",
    )
    parser.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="where the independent jobs run: a local process pool, or a Ray cluster (RAY_ADDRESS, or a "
        "local Ray instance; needs `pip install ledgercheck[ray]`)",
    )


def from_namespace(ns: argparse.Namespace) -> ExecutorConfig:
    return ExecutorConfig(getattr(ns, "executor", "local"), getattr(ns, "jobs", None))


def run_jobs(function: Callable[[In], Out], jobs: Sequence[In], config: ExecutorConfig) -> Generator[Out, None, None]:
    """`function(job)` for every job, yielded in the order of `jobs`."""
    if config.kind == "ray" and jobs:
        yield from _ray(function, jobs, config)
    elif config.local_workers == 1 or len(jobs) <= 1:
        for job in jobs:
            yield function(job)
    else:
        yield from _pool(function, jobs, min(config.local_workers, len(jobs)))


def _pool(function: Callable[[In], Out], jobs: Sequence[In], workers: int) -> Iterator[Out]:
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=workers)
    try:
        yield from pool.map(function, jobs)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def ray_module() -> Any:
    """Ray, or a usage error naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise UsageError("--executor ray needs Ray, which is not installed: pip install 'ledgercheck[ray]'") from None
    return ray


def _ray(function: Callable[[In], Out], jobs: Sequence[In], config: ExecutorConfig) -> Iterator[Out]:
    ray = ray_module()
    if not ray.is_initialized():
        if os.environ.get("RAY_ADDRESS") or config.jobs is None:
            ray.init(log_to_driver=False)
        else:
            ray.init(num_cpus=config.jobs, log_to_driver=False)
    remote = ray.remote(function)
    refs = [remote.remote(job) for job in jobs]
    done = 0
    try:
        for ref in refs:
            yield ray.get(ref)
            done += 1
    finally:
        for ref in refs[done:]:  # closed early: the tasks not yet collected need not run
            ray.cancel(ref)
