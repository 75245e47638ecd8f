"""Where independent jobs run: one process, a local process pool, or a Ray cluster.

A job is a picklable top-level function and one argument. `run_jobs` yields the results in the
order of the jobs, whatever the executor, so a command's output is byte-identical between
`--jobs 1`, `--jobs N` and `--executor ray`:

* `local` (the default): a process pool of `jobs` workers (the machine's cores when not
  given); `jobs` = 1 runs every job in this process, one after the other;
* `ray`: one Ray task per job. The cluster is found by Ray's own conventions: an already
  initialised Ray, else `ray.init()`, which connects to `RAY_ADDRESS` when it is set, else to
  the cluster `ray start` runs on this machine, and otherwise starts a local instance (of
  `jobs` CPUs when given; no dashboard). On a cluster that was already running, its own CPUs
  decide how many jobs run at once. Ray is an optional
  dependency (`pip install ledgercheck[ray]`); without it the command stops with a usage
  error that says how to install it.

Closing the generator early (a spent budget) cancels the jobs not yet started.

`run_all` is the fuller form the checking commands use (`check`, `report`, `ci`): a value
every job shares (sent once per worker, not once per job), progress from the workers
forwarded to the command's stderr, a callback as each job finishes, and the command's budget
held across the workers (`model.budget`):

* each worker runs under a copy of the command's budget: the same deadline (measured from
  the command's start, not the worker's) and the same memory ceiling for its own process, so
  a search in a worker stops and answers `unknown` exactly where it would have in one process;
* the local pool also adds up the resident memory of the command, all its workers and any
  `Beside` process running: when the total reaches the memory budget, the command's budget
  is spent, the workers are stopped and every job not answered gets `lost(job, why)` (an
  `unknown` result, never a pass);
* a worker that does not stop within `GRACE` seconds of the deadline is stopped, and a worker
  that dies (killed, out of memory, a crash in native code) loses only the job it was running,
  which gets `lost(job, why)` naming how it died; the other jobs go on in a new worker;
* an exception a job raises stops every worker and is raised again in the command, as it
  would have been in one process; so is Ctrl-C, with the results finished so far already
  passed to `done`; and so is one raised by the caller's `poll`, asked while the jobs run, which
  is how a command stops its checks when other work it does meanwhile has already decided.

`Beside` runs one job in a forked local process of its own while the command waits on other
jobs, under the same budget: `conform`'s enumeration while the executor runs its checker's
checks, `mutate`'s baseline checks while it runs those its generated tests are drawn from.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Generator, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ledgercheck.model import budget
from ledgercheck.model.errors import ProcessDied, UsageError

EXECUTORS = ("local", "ray")
GRACE = 5.0
"""Seconds a worker may take past the deadline to answer `unknown` before it is stopped."""

In = TypeVar("In")
Out = TypeVar("Out")
Shared = TypeVar("Shared")
Progress = Callable[[str], None]


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
        return self.jobs if self.jobs is not None else available_cores()

    def parallel(self, jobs: int) -> bool:
        """Whether `jobs` jobs run anywhere but one after the other in this process."""
        return jobs > 1 and (self.kind == "ray" or self.local_workers > 1)


SERIAL = ExecutorConfig(jobs=1)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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


def for_command(ns: argparse.Namespace) -> ExecutorConfig:
    """The executor a command's options ask for; one after the other for a command without
    `--executor` (its `--jobs`, if any, is its own)."""
    return from_namespace(ns) if hasattr(ns, "executor") else SERIAL


_ACTIVE: ContextVar[ExecutorConfig] = ContextVar("ledgercheck_executor", default=SERIAL)


def active() -> ExecutorConfig:
    """The running command's executor (one after the other outside a command: library callers
    and tests choose theirs with `using`)."""
    return _ACTIVE.get()


@contextlib.contextmanager
def using(config: ExecutorConfig) -> Iterator[ExecutorConfig]:
    """Make `config` the executor of the checks run for the duration of a command."""
    token = _ACTIVE.set(config)
    try:
        yield config
    finally:
        _ACTIVE.reset(token)


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


def _ray_init(ray: Any, config: ExecutorConfig) -> None:
    """Connect to the cluster by Ray's conventions (see the module's notes). A local instance
    the command starts has no dashboard: nobody would look at it, and starting it costs about
    a second of the two cores it shares with the checks (Ray's start, 2.8 s against 4.0 s)."""
    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS")
    if address:
        try:
            ray.init(log_to_driver=False)
        except ConnectionError as exc:  # unreachable, or refused (Ray's token authentication)
            raise UsageError(
                f"--executor ray: no Ray cluster answered at RAY_ADDRESS={address} ({exc}); "
                "RAY_ADDRESS=auto joins the cluster `ray start` runs on this machine"
            ) from None
    elif config.jobs is None:
        ray.init(log_to_driver=False, include_dashboard=False)
    else:
        try:
            ray.init(num_cpus=config.jobs, log_to_driver=False, include_dashboard=False)
        except ValueError as exc:
            # `ray start` runs a cluster on this machine, which `ray.init()` joins; it refuses
            # a CPU count for a cluster it did not start. Its own CPUs then decide.
            if "existing cluster" not in str(exc):
                raise
            ray.init(log_to_driver=False)


def _ray(function: Callable[[In], Out], jobs: Sequence[In], config: ExecutorConfig) -> Iterator[Out]:
    ray = ray_module()
    _ray_init(ray, config)
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


# --- run_all: shared data, progress, budgets across workers --------------------------------


@dataclass(frozen=True)
class _Limits:
    """The command's budget as a worker rebuilds it: its start as a wall-clock time (the
    monotonic clock means nothing in another process or machine), its size, and what ran out."""

    seconds: float | None
    memory_mib: int | None
    started: float
    spent: str | None

    @classmethod
    def of(cls, limits: budget.Budget) -> _Limits:
        return cls(limits.seconds, limits.memory_mib, time.time() - (time.monotonic() - limits.start), limits.spent)

    def budget(self) -> budget.Budget:
        start = time.monotonic() - max(0.0, time.time() - self.started)
        return budget.Budget(self.seconds, self.memory_mib, start=start, spent=self.spent)


def run_all(
    function: Callable[[Shared, In, Progress | None], Out],
    shared: Shared,
    jobs: Sequence[In],
    config: ExecutorConfig,
    lost: Callable[[In, str], Out],
    progress: Progress | None = None,
    done: Callable[[int, Out], None] | None = None,
    poll: Callable[[], None] | None = None,
) -> list[Out]:
    """`function(shared, job, progress)` for every job, returned in the order of `jobs`.
    `done(index, result)` is called as each job finishes: in order with one worker, in any
    order with several. A job no worker answered (see the module's notes) gets
    `lost(job, why)`. `progress` receives the workers' progress messages (a local pool
    forwards them; Ray's workers keep theirs). `poll()` is called between jobs, and at least
    every quarter of a second while workers run them; an exception it raises stops them all
    and is raised here."""
    finished: dict[int, Out] = {}

    def record(index: int, result: Out) -> None:
        finished[index] = result
        if done is not None:
            done(index, result)

    if not config.parallel(len(jobs)):
        for index, job in enumerate(jobs):
            if poll is not None:
                poll()
            record(index, function(shared, job, progress))
    elif config.kind == "ray":
        _ray_all(function, shared, jobs, config, lost, record, poll)
    else:
        size = min(config.local_workers, len(jobs))
        _LocalPool(function, shared, jobs, size, lost, progress, record, poll).run()
    return [finished[index] for index in range(len(jobs))]


@dataclass
class _Worker(Generic[In]):
    process: Any
    conn: Any
    lane: int
    job: tuple[int, In] | None = None


class _Lanes(Generic[In]):
    """The jobs not yet handed out, in contiguous lanes, one per worker slot: a worker takes
    its own lane's jobs in order, and once it is empty the last job of the fullest lane.

    Neighbouring jobs share their set-up (a check's encoding is built once per variant and
    environment in each process, `model.encoding.encoding_for`), so a worker that keeps to
    one stretch of the list builds what it needs once, where handing each free worker the
    next job in the list would have every worker build nearly everything. Which worker runs
    a job changes no result: the output is the same whatever the order."""

    def __init__(self, jobs: Sequence[In], lanes: int) -> None:
        tasks = list(enumerate(jobs))
        bounds = [len(tasks) * lane // lanes for lane in range(lanes + 1)]
        self.lanes = [collections.deque(tasks[bounds[i] : bounds[i + 1]]) for i in range(lanes)]

    def __bool__(self) -> bool:
        return any(self.lanes)

    def __len__(self) -> int:
        return sum(len(lane) for lane in self.lanes)

    def take(self, lane: int) -> tuple[int, In]:
        own = self.lanes[lane]
        if own:
            return own.popleft()
        return max(self.lanes, key=len).pop()

    def put_back(self, lane: int, task: tuple[int, In]) -> None:
        self.lanes[lane].appendleft(task)

    def drain(self) -> list[tuple[int, In]]:
        """Every job left, in the order of the list; the lanes empty."""
        left = sorted((task for lane in self.lanes for task in lane), key=lambda task: task[0])
        for lane in self.lanes:
            lane.clear()
        return left


class _LocalPool(Generic[Shared, In, Out]):
    """Worker processes fed one job at a time over a pipe each, so the command knows which job
    every worker is running (a worker that dies loses that job only) and can stop any of them."""

    def __init__(
        self,
        function: Callable[[Shared, In, Progress | None], Out],
        shared: Shared,
        jobs: Sequence[In],
        size: int,
        lost: Callable[[In, str], Out],
        progress: Progress | None,
        record: Callable[[int, Out], None],
        poll: Callable[[], None] | None = None,
    ) -> None:
        import multiprocessing

        self.function, self.shared, self.size, self.lost = function, shared, size, lost
        self.progress, self.record, self.poll = progress, record, poll
        self.context = multiprocessing.get_context()
        self.limits = budget.active()
        self.queue = _Lanes(jobs, size)
        self.workers: list[_Worker[In]] = []
        self.starts = 0

    def run(self) -> None:
        from multiprocessing.connection import wait

        try:
            while self.queue or any(w.job is not None for w in self.workers):
                while self.queue and len(self.workers) < self.size:
                    if self.starts >= self.size + len(self.queue) + 8:  # workers die before any job
                        raise ProcessDied("worker processes keep dying before they take a job")
                    self.workers.append(self._start())
                for worker in self.workers:
                    if worker.job is None:
                        self._feed(worker)
                ready = wait([w.conn for w in self.workers] + [w.process.sentinel for w in self.workers], 0.25)
                for worker in list(self.workers):
                    if worker.conn in ready or worker.process.sentinel in ready:
                        self._serve(worker)
                self._watch_budget()
                if self.poll is not None:
                    self.poll()
        finally:
            for worker in self.workers:
                _stop(worker.process, worker.conn, kill=worker.job is not None)

    def _start(self) -> _Worker[In]:
        lane = min(set(range(self.size)) - {w.lane for w in self.workers})  # a dead worker's, if any
        ours, theirs = self.context.Pipe()
        args = (theirs, self.function, self.shared, _Limits.of(self.limits), self.progress is not None)
        process = self.context.Process(target=_worker_main, args=args, name="ledgercheck-worker", daemon=False)
        process.start()
        theirs.close()
        self.starts += 1
        return _Worker(process, ours, lane)

    def _feed(self, worker: _Worker[In]) -> None:
        if not self.queue:
            return
        task = self.queue.take(worker.lane)
        try:
            worker.conn.send(task)
        except OSError:  # it died idle: the job goes back, and `_serve` retires the worker
            self.queue.put_back(worker.lane, task)
            return
        worker.job = task

    def _serve(self, worker: _Worker[In]) -> None:
        """Read what a worker sent (progress, a result, an error), or bury it if it died."""
        while True:
            alive = worker.process.is_alive()  # before the poll: a dead worker's last words are in the pipe
            try:
                if not worker.conn.poll():
                    if not alive:
                        raise EOFError
                    return
                kind, payload = worker.conn.recv()
            except (EOFError, OSError):
                self._retire(worker, _death(worker.process))
                return
            if kind == "progress":
                if self.progress is not None:
                    self.progress(payload)
            elif kind == "error":
                raise payload
            elif worker.job is not None:
                index, _ = worker.job
                worker.job = None
                result, spent = payload
                _note_spent(self.limits, spent)
                self.record(index, result)

    def _retire(self, worker: _Worker[In], why: str) -> None:
        """Stop a worker (dead, or stopped by the budget); the job it was running is lost."""
        _stop(worker.process, worker.conn, kill=True)
        self.workers.remove(worker)
        if worker.job is not None:
            index, job = worker.job
            worker.job = None
            self.record(index, self.lost(job, why))

    def _watch_budget(self) -> None:
        limits = self.limits
        workers = 0.0
        if limits.spent is None and limits.memory_mib is not None:
            workers = sum(budget.resident_mib(w.process.pid) for w in self.workers if w.process.is_alive())
        spent = overdue(limits, workers)
        if spent is None:
            return
        for worker in [w for w in self.workers if w.job is not None]:
            self._retire(worker, f"the {spent} ran out while a worker process searched it; not established")
        for index, job in self.queue.drain():
            self.record(index, self.lost(job, f"the {spent} ran out before it was searched"))


def _worker_main(
    conn: Any, function: Callable[[Any, Any, Progress | None], Any], shared: Any, limits: _Limits, report: bool
) -> None:
    """A worker: jobs from `conn` until it closes, each under the command's budget."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpgid(0, 0)  # its own group: Ctrl-C is the command's to handle, and `_stop` ends its children too
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    own = limits.budget()

    def forward(message: str) -> None:
        conn.send(("progress", message))

    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        _, job = task
        try:
            with budget.using(own):
                result = function(shared, job, forward if report else None)
        except BaseException as exc:  # noqa: BLE001 - raised again in the command (KeyboardInterrupt too)
            _send_error(conn, exc)
            return
        conn.send(("done", (result, own.spent)))


_PR_SET_PDEATHSIG = 1
"""Linux's prctl option: the signal a process gets when the one that forked it ends."""


def _beside_main(parent: int, *args: Any) -> None:
    """A `Beside` process: a worker that dies with the process that forked it (Linux's
    parent-death signal), so what it forks in turn (the runs of a split enumeration, each a
    `Beside` of its own group) does not outlive it when it is stopped."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the signal was asked for
        os._exit(1)
    _worker_main(*args)


def family(pid: int) -> list[int]:
    """`pid` and every process descended from it (Linux: /proc/PID/task/TID/children; else
    `pid` alone)."""
    found, todo = [pid], [pid]
    while todo:
        parent = todo.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                with open(f"/proc/{parent}/task/{thread}/children", encoding="ascii") as handle:
                    children = [int(child) for child in handle.read().split()]
            except (OSError, ValueError):
                continue
            found += children
            todo += children
    return found


def _note_spent(limits: budget.Budget, spent: str | None) -> None:
    """A budget a worker found spent is the command's too (its exit code and message)."""
    if spent is not None and limits.spent is None:
        limits.spent = spent


def _send_error(conn: Any, exc: BaseException) -> None:
    try:
        conn.send(("error", exc))
    except Exception:  # noqa: BLE001 - an exception that does not pickle: its text
        conn.send(("error", RuntimeError("".join(traceback.format_exception(exc)))))


def _death(process: Any) -> str:
    return f"the worker process checking it {_ending(process)}; not established"


def _ending(process: Any) -> str:
    """How a process that stopped answering ended."""
    process.join(1.0)
    code = process.exitcode
    if code is None:
        how = "stopped answering"
    elif code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    return how


def _stop(process: Any, conn: Any, kill: bool) -> None:
    """End a worker: politely when it is idle, else its whole process group at once."""
    if not kill and process.is_alive():
        with contextlib.suppress(OSError, ValueError):
            conn.send(None)
        process.join(2.0)
    if process.is_alive():
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            process.kill()
    process.join()
    conn.close()


class Beside(Generic[Shared, In, Out]):
    """`function(shared, job, send)` in a local process of its own, started at once and
    collected later, so the command can wait on other jobs meanwhile. It runs as a pool's
    worker does (`_worker_main`): under the command's budget, an exception it raises raised
    again by `result`. What it passes to `send` (a line of progress, or a result it has
    finished before the whole job) reaches the command's `send` when the command looks
    (`done`, `result`).

    The process is a fork of the command's, so `shared` is the command's live state as it is
    (an implementation loaded from a file need not pickle, nor import in a fresh process);
    only `job` and the result are sent. Forking is safe on Linux only (macOS's system
    libraries are not, Windows has none): elsewhere `possible()` is false and the caller
    runs the job itself.
    """

    @staticmethod
    def possible() -> bool:
        import multiprocessing

        return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()

    def __init__(
        self,
        function: Callable[[Shared, In, Callable[[Any], None] | None], Out],
        shared: Shared,
        job: In,
        send: Callable[[Any], None] | None,
        what: str,
    ) -> None:
        """`what` names the job in the error of a process that died ("the enumeration")."""
        import multiprocessing

        context = multiprocessing.get_context("fork")
        ours, theirs = context.Pipe()
        limits = _Limits.of(budget.active())
        args = (os.getpid(), theirs, function, shared, limits, send is not None)
        self.process = context.Process(target=_beside_main, args=args, name="ledgercheck-beside", daemon=False)
        try:
            self.process.start()
        finally:
            theirs.close()
        self.conn, self.send, self.what = ours, send, what
        self.pid: int = self.process.pid or 0
        _BESIDE.add(self.pid)
        self.outcome: tuple[str, Any] | None = None
        self.stopped = False
        with contextlib.suppress(OSError):  # it died at once: `done` and `result` say how
            ours.send((0, job))

    def done(self) -> bool:
        """Whether the job has finished (or its process died); never waits."""
        return self._read(wait=False)

    def wait(self, seconds: float) -> bool:
        """Whether the job has finished (or its process died), waiting up to about `seconds`."""
        if self._read(wait=False):
            return True
        with contextlib.suppress(OSError, EOFError):
            self.conn.poll(seconds)
        return self._read(wait=False)

    def result(self) -> Out:
        """The job's result, waiting for it; its exception, or `ProcessDied` if its process died."""
        self._read(wait=True)
        self.stop()
        assert self.outcome is not None
        kind, payload = self.outcome
        if kind == "error":
            raise payload
        if kind == "died":
            raise ProcessDied(payload)
        result, spent = payload
        _note_spent(budget.active(), spent)
        return result  # type: ignore[no-any-return]

    def stop(self) -> None:
        """End the process (at once if it is still running its job)."""
        if not self.stopped:
            self.stopped = True
            _stop(self.process, self.conn, kill=self.outcome is None)
            _BESIDE.discard(self.pid)

    def _read(self, wait: bool) -> bool:
        while self.outcome is None:
            alive = self.process.is_alive()  # before the poll: a dead process's last words are in the pipe
            try:
                if not self.conn.poll(None if wait else 0):
                    if alive:
                        return False
                    raise EOFError
                kind, payload = self.conn.recv()
            except (EOFError, OSError):
                self.outcome = ("died", f"the process running {self.what} {_ending(self.process)}")
                break
            if kind == "progress":
                if self.send is not None:
                    self.send(payload)
            else:
                self.outcome = (kind, payload)
        return True


def overdue(limits: budget.Budget, extra_mib: float = 0.0) -> str | None:
    """The budget the command's other processes have outlived, or None: the memory budget at
    once (counted with theirs: `extra_mib` and every `Beside` process's family), the time
    budget once GRACE is past the deadline (within it, they answer `unknown` themselves,
    with what they established; one that has not is stopped)."""
    if limits.spent is None and limits.memory_mib is not None:
        extra_mib += sum(budget.resident_mib(pid) for side in _BESIDE for pid in family(side))
        limits.exhausted(extra_mib=extra_mib)
    spent = limits.spent
    if spent is None or spent.startswith("time"):
        deadline = limits.deadline
        if deadline is None or time.monotonic() < deadline + GRACE:
            return None
        spent = limits.exhausted(memory=False) or "time budget"
    return spent


_BESIDE: set[int] = set()
"""The processes of the running `Beside` jobs: a local pool counts their memory, and that of
the processes they fork, with its own workers' against the command's budget."""


def _ray_task(function: Callable[[Any, Any, Progress | None], Any], boxed: list[Any], job: Any, limits: _Limits) -> Any:
    """Runs on a Ray worker: one job under the command's budget. The shared value comes as a
    reference (in a list, which Ray passes as it is) and is fetched once per worker process:
    the jobs a worker runs see one object, as a local worker's do, and so reuse what is kept
    per object (a variant's encodings), instead of each rebuilding it from its own copy."""
    (ref,) = boxed
    key = ref.hex()
    shared = _RAY_SHARED.get(key)
    if shared is None:
        import ray

        shared = ray.get(ref)
        _RAY_SHARED.clear()  # one run's value at a time
        _RAY_SHARED[key] = shared
    with budget.using(limits.budget()) as own:
        return function(shared, job, None), own.spent


_RAY_SHARED: dict[str, Any] = {}


def _ray_all(
    function: Callable[[Shared, In, Progress | None], Out],
    shared: Shared,
    jobs: Sequence[In],
    config: ExecutorConfig,
    lost: Callable[[In, str], Out],
    record: Callable[[int, Out], None],
    poll: Callable[[], None] | None = None,
) -> None:
    ray = ray_module()
    _ray_init(ray, config)
    limits = budget.active()
    remote = ray.remote(_ray_task)
    shared_ref = ray.put(shared)
    pending = {remote.remote(function, [shared_ref], job, _Limits.of(limits)): index for index, job in enumerate(jobs)}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.25)
            for ref in ready:
                index = pending.pop(ref)
                try:
                    result, spent = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    raise cause if isinstance(cause, Exception) else exc from None
                except ray.exceptions.RayError as exc:  # the worker died, or Ray lost the task
                    record(index, lost(jobs[index], f"the Ray task checking it failed ({type(exc).__name__})"))
                else:
                    _note_spent(limits, spent)
                    record(index, result)
            if poll is not None:
                poll()
            deadline = limits.deadline
            if deadline is not None and time.monotonic() >= deadline + GRACE:
                spent = limits.exhausted() or "time budget"
                for ref, index in list(pending.items()):
                    ray.cancel(ref, force=True)
                    record(index, lost(jobs[index], f"the {spent} ran out while it was searched (on Ray)"))
                pending.clear()
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
