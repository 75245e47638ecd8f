"""Benchmark: ledgercheck's engines against the obvious alternatives, as the fleet grows.

For the bundled ledger, the shipped policy, N shards and both environments, three tasks:

* `cex`:     the shortest counterexample of `no_condemnation_by_inherited_streak` (as_written);
* `bounded`: no counterexample of it in `fixed` up to depth D (default 20);
* `prove`:   it holds in `fixed` at every depth (`model.prove.prove_property`, when present).

Engines: `z3` (`bmc.check_property`, one trace, lax=False), `explicit` (`model.explicit`),
`bfs` (plain breadth-first search, `bench/baselines.py`), `hypothesis` (a
RuleBasedStateMachine over the executable model, `bench/baselines.py`; `cex` only: it cannot
show that no counterexample exists) and `prove`.

Every measurement is a fresh process (`python bench/run.py --worker ...`): the time is the
whole process's wall-clock time (interpreter start, imports and spec loading included) and
the memory is the process's peak RSS, read from `os.wait4` (the child's own rusage: the
per-child form of `getrusage(RUSAGE_CHILDREN)`, whose delta cannot be used because
`ru_maxrss` of the children is a maximum, not a sum). Medians over `--repeat` runs; a run
over `--timeout` is killed and counts as a timeout; once an engine times out on a task, it is
not run at larger N. Hypothesis runs `--seeds` seeds, each with `--budget` seconds.

    python bench/run.py                  # everything (a long while)
    python bench/run.py --quick          # N in (1, 2), depth 8, short timeouts: a few minutes at most
    python bench/run.py --shards 1,2,4 --depth 12 --repeat 1
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PROPERTY = "no_condemnation_by_inherited_streak"
ENVIRONMENTS = ("controller", "ledger")
TASKS = ("cex", "bounded", "prove")
ENGINES = {
    "cex": ("ledgercheck", "z3", "explicit", "bfs", "hypothesis"),
    "bounded": ("ledgercheck", "z3", "explicit", "bfs"),
    "prove": ("ledgercheck", "spacer", "explicit"),
}
REFERENCE = {"cex": "ledgercheck", "bounded": "ledgercheck", "prove": "ledgercheck"}
RESULTS = ROOT / "bench" / "RESULTS.md"
BEGIN, END = "<!-- bench/run.py: begin -->", "<!-- bench/run.py: end -->"


# --- one measurement, in a fresh process ---------------------------------------------------


def worker(job: dict[str, Any]) -> dict[str, Any]:
    """Run one engine on one task; returns what it found (printed as JSON by the worker).
    Imports are lazy, as in the command line: an engine that needs no solver never loads Z3."""
    from ledgercheck.model.spec import load_spec

    start = time.monotonic()
    env, shards, depth, engine, task = job["env"], job["shards"], job["depth"], job["engine"], job["task"]
    variant = "as_written" if task == "cex" else "fixed"
    if engine == "ledgercheck":
        return _command_line(job, variant, start)
    spec_file = load_spec()
    spec = spec_file.variant(variant)
    prop = spec.properties[PROPERTY]
    policy = spec.default_policy()
    out: dict[str, Any] = {}
    if engine == "z3":
        from ledgercheck.model import bmc

        result = bmc.check_property(
            spec, env, prop, shards=shards, policy=policy, max_depth=depth, max_traces=1, lax=False
        )
        out = {"status": result.status, "depth": result.depth, "note": result.note}
    elif engine == "explicit":
        from ledgercheck.model.explicit import explicit_check

        result = explicit_check(
            spec, env, prop, shards=shards, policy=policy, max_depth=depth, max_traces=1, prove=task == "prove"
        )
        out = {"status": result.status, "depth": result.depth, "note": result.note}
    elif engine == "spacer":
        from ledgercheck.model.prove import prove_property

        result = prove_property(
            spec, env, prop, shards=shards, policy=policy, timeout=job.get("timeout"), engine="spacer"
        )
        out = {"status": result.status, "depth": result.depth, "note": result.note}
    elif engine == "bfs":
        from bench.baselines import plain_bfs

        outcome = plain_bfs(spec, env, prop, shards, policy, depth)
        out = {"status": outcome.result.status, "depth": outcome.result.depth, "note": outcome.result.note}
    elif engine == "hypothesis":
        from bench.baselines import hypothesis_search

        found = hypothesis_search(spec, env, prop, shards, policy, seed=job["seed"])
        out = {
            "status": "violated" if found.found else "not_found",
            "depth": found.steps,
            "note": found.note,
        }
    elif engine == "startup":
        out = {"status": "ok", "depth": None, "note": "imports and spec loading only"}
    out["engine_seconds"] = time.monotonic() - start
    return out


def _command_line(job: dict[str, Any], variant: str, start: float) -> dict[str, Any]:
    """ledgercheck as a user runs it: `check --engine auto` (or `prove`), JSON on stdout."""
    import contextlib
    import io

    from ledgercheck.model.cli import main

    common = ["--variant", variant, "--property", PROPERTY, "--environment", job["env"], "--shards", str(job["shards"])]
    if job["task"] == "prove":
        argv = ["prove", *common, "--format", "json"]
    else:
        argv = ["check", *common, "--engine", "auto", "--max-depth", str(job["depth"]), "--max-traces", "1"]
        argv += ["--format", "json"]
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        main(argv)
    (result,) = json.loads(buffer.getvalue())
    return {
        "status": result["status"],
        "depth": result["depth"],
        "note": f"{result.get('engine', '?')}: {result.get('note', '')}",
        "engine_seconds": time.monotonic() - start,
    }


def _child_env() -> dict[str, str]:
    """The workers' environment: bytecode cached as on a user's machine (some CI images set
    PYTHONDONTWRITEBYTECODE, which would add compiling every module to every start-up), and
    no check answered from the cache of results (the figures are of solving; a row that
    measures the cache turns it back on)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["LEDGERCHECK_RESULTS"] = "off"
    return env


def _warm_bytecode() -> None:
    """Compile the project's modules once, so that no measured run pays for it."""
    import compileall

    for folder in ("model", "codegen", "bench"):
        compileall.compile_dir(str(ROOT / folder), quiet=1)


@dataclass
class Run:
    seconds: float
    peak_mib: float
    timed_out: bool
    status: str
    depth: int | None = None
    note: str = ""
    error: str = ""


@dataclass
class Process:
    """One finished (or killed) process: wall-clock seconds, peak RSS, exit code, output."""

    seconds: float
    peak_mib: float
    timed_out: bool
    returncode: int
    stdout: bytes
    stderr: bytes
    cpu_seconds: float = 0.0
    """User and system time of the process and the children it waited for."""


def run_process(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> Process:
    """Run `cmd` in a fresh process group from the project's root; kill it after `timeout`
    seconds. The peak RSS is the child's own, from `os.wait4` (its children are not counted)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT, start_new_session=True, env=env or _child_env())
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.005)
        seconds = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        peak = usage.ru_maxrss / 1024  # KiB on Linux
        cpu = usage.ru_utime + usage.ru_stime
        return Process(seconds, peak, timed_out, proc.returncode, out.read(), err.read(), cpu)


def measure(job: dict[str, Any], timeout: float) -> Run:
    """One fresh process: wall-clock seconds, peak RSS (os.wait4), and the worker's answer."""
    done = run_process([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(job)], timeout)
    if done.timed_out:
        return Run(done.seconds, done.peak_mib, True, "timeout")
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        return Run(done.seconds, done.peak_mib, False, "error", error=" | ".join(tail) or f"exit {done.returncode}")
    answer = json.loads(lines[-1])
    return Run(done.seconds, done.peak_mib, False, answer["status"], answer.get("depth"), answer.get("note", ""))


# --- the table ---------------------------------------------------------------------------


@dataclass
class Cell:
    engine: str
    env: str
    shards: int
    task: str
    runs: list[Run] = field(default_factory=list)
    skipped: str = ""

    @property
    def finished(self) -> list[Run]:
        return [r for r in self.runs if not r.timed_out and r.status not in ("error", "not_found")]

    @property
    def median(self) -> float | None:
        done = self.finished
        if not done or (self.engine != "hypothesis" and len(done) < len(self.runs)):
            return None
        return statistics.median(r.seconds for r in done)

    @property
    def peak(self) -> float | None:
        done = self.finished or self.runs
        return statistics.median(r.peak_mib for r in done) if done else None

    def outcome(self) -> str:
        if self.skipped:
            return self.skipped
        if not self.runs:
            return "-"
        if self.engine == "hypothesis":
            found = self.finished
            steps = sorted(r.depth for r in found if r.depth is not None)
            text = f"found by {len(found)}/{len(self.runs)} seeds"
            return text + (f" (failing runs of {steps[0]}..{steps[-1]} steps)" if steps else "")
        if any(r.timed_out for r in self.runs):
            return "timeout"
        errors = [r for r in self.runs if r.status == "error"]
        if errors:
            return f"error: {errors[0].error[:80]}"
        last = self.runs[-1]
        text = last.status if last.depth is None else f"{last.status} @ {last.depth}"
        states = _states(last.note)
        return text + (f", {states}" if states else "")


def _states(note: str) -> str:
    for part in note.replace(";", ",").split(","):
        if " states" in part:
            return part.split("(")[0].strip().replace("explicit-state search: ", "").replace("plain BFS: ", "")
    return ""


def _fmt(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.2f}{unit}" if value < 100 else f"{value:.0f}{unit}"


def table(cells: list[Cell], timeout: float) -> str:
    index = {(c.engine, c.env, c.shards, c.task): c for c in cells}
    rows = [
        "| task | environment | N | engine | median s | peak MiB | ledgercheck / this | result |",
        "|---|---|---:|---|---:|---:|---:|---|",
    ]
    for c in cells:
        ref = index.get((REFERENCE[c.task], c.env, c.shards, c.task))
        ratio = "-"
        if c.engine != REFERENCE[c.task] and ref is not None and ref.median is not None:
            if c.median is not None:
                ratio = f"{ref.median / c.median:.2g}"
            elif c.runs and any(r.timed_out for r in c.runs) and c.engine != "hypothesis":
                ratio = f"< {ref.median / timeout:.2g}"
        median = _fmt(c.median)
        if c.median is None and c.runs and (any(r.timed_out for r in c.runs) or c.engine == "hypothesis"):
            median = f"> {timeout:.0f}" if c.engine != "hypothesis" else "> budget"
        if c.skipped:
            median = "-"
        rows.append(
            f"| {c.task} | {c.env} | {c.shards} | {c.engine} | {median} | {_fmt(c.peak)} | {ratio} | {c.outcome()} |"
        )
    return "\n".join(rows)


# --- the run -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--shards", default=None, help="comma-separated fleet sizes (default 1,2,4,8,16)")
    parser.add_argument("--depth", type=int, default=None, help="depth of the bounded tasks (default 20)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per measurement (default 3)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per run (default 300)")
    parser.add_argument("--seeds", type=int, default=None, help="Hypothesis seeds (default 5)")
    parser.add_argument("--budget", type=float, default=None, help="seconds per Hypothesis seed (default 60)")
    parser.add_argument("--environments", default=",".join(ENVIRONMENTS))
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--engines", default=None, help="only these engines (comma-separated)")
    parser.add_argument("--quick", action="store_true", help="N in (1, 2), depth 8, 1 run, short timeouts")
    parser.add_argument("--out", default=str(RESULTS), help="the Markdown file to write ('-' for none)")
    ns = parser.parse_args(argv)
    if ns.worker:
        print(json.dumps(worker(json.loads(ns.worker))))
        return 0
    quick = ns.quick
    shards = [int(s) for s in (ns.shards or ("1,2" if quick else "1,2,4,8,16")).split(",")]
    depth = ns.depth or (8 if quick else 20)
    repeat = ns.repeat or (1 if quick else 3)
    timeout = ns.timeout or (12.0 if quick else 300.0)
    seeds = ns.seeds or (2 if quick else 5)
    budget = ns.budget or (8.0 if quick else 60.0)
    envs = [e for e in ns.environments.split(",") if e]
    tasks = [t for t in ns.tasks.split(",") if t]
    only = set(ns.engines.split(",")) if ns.engines else None
    _warm_bytecode()
    load_before = os.getloadavg()
    started = time.monotonic()
    startup = [measure({"engine": "startup", "task": "cex", "env": "controller", "shards": 1, "depth": 0}, 60)]
    startup += [measure({"engine": "startup", "task": "cex", "env": "controller", "shards": 1, "depth": 0}, 60)]
    base = statistics.median(r.seconds for r in startup)
    print(f"process start-up (imports, spec): {base:.2f}s, {statistics.median(r.peak_mib for r in startup):.0f} MiB")
    cells: list[Cell] = []
    gave_up: set[tuple[str, str, str]] = set()
    for task in tasks:
        for env in envs:
            for n in shards:
                for engine in ENGINES[task]:
                    if only is not None and engine not in only:
                        continue
                    cell = Cell(engine, env, n, task)
                    cells.append(cell)
                    if (engine, env, task) in gave_up:
                        cell.skipped = "not run (timed out at a smaller N)"
                        print(f"{task:8} {env:10} N={n:<3} {engine:10} skipped", flush=True)
                        continue
                    job = {"engine": engine, "task": task, "env": env, "shards": n, "depth": depth, "timeout": timeout}
                    if engine == "hypothesis":
                        for seed in range(seeds):
                            cell.runs.append(measure({**job, "seed": seed}, budget))
                        if not cell.finished:
                            gave_up.add((engine, env, task))
                    else:
                        for _ in range(repeat):
                            run = measure(job, timeout)
                            cell.runs.append(run)
                            if run.timed_out or run.status in ("error", "n/a"):
                                break
                        if any(r.timed_out for r in cell.runs):
                            gave_up.add((engine, env, task))
                    print(
                        f"{task:8} {env:10} N={n:<3} {engine:10} {_fmt(cell.median, 's'):>8} "
                        f"{_fmt(cell.peak, ' MiB'):>10}  {cell.outcome()}",
                        flush=True,
                    )
    elapsed = time.monotonic() - started
    text = table(cells, timeout)
    print()
    print(text)
    if ns.out != "-":
        report = _report(text, ns, shards, depth, repeat, timeout, seeds, budget, base, startup, load_before, elapsed)
        write_section(Path(ns.out), report)
        print(f"\nwritten to {ns.out}")
    return 0


def _report(
    text: str,
    ns: argparse.Namespace,
    shards: list[int],
    depth: int,
    repeat: int,
    timeout: float,
    seeds: int,
    budget: float,
    base: float,
    startup: list[Run],
    load_before: tuple[float, float, float],
    elapsed: float,
) -> str:
    import hypothesis
    import z3

    load_after = os.getloadavg()
    argv = " ".join(sys.argv[1:]) or "(defaults)"
    return f"""## Engines against the obvious alternatives

`python bench/run.py {argv}` on {datetime.date.today().isoformat()}: `nproc` = {os.cpu_count()},
{platform.processor() or platform.machine()}, Python {platform.python_version()}, Z3 {z3.get_version_string()},
Hypothesis {hypothesis.__version__}; load average {load_before[0]:.1f} at the start and {load_after[0]:.1f}
at the end; {elapsed / 60:.1f} minutes in all.

**Figures are medians on a shared, noisy machine** (other jobs ran alongside: the load average
above counts them), to be read for orders of magnitude, not for small differences.

* Property `{PROPERTY}`, shipped policy, N = {", ".join(map(str, shards))} shards.
  `cex`: its shortest counterexample in `as_written`; `bounded`: none in `fixed` up to depth
  {depth}; `prove`: it holds in `fixed` at every depth.
* Engines. `ledgercheck`: the command line as a user runs it (`ledgercheck check --engine auto
  --max-traces 1 --format json`, or `ledgercheck prove --format json` for `prove`): the
  explicit-state engine where one shard decides the property (the `ledger` environment), Z3
  elsewhere; `z3`: bounded model checking alone (`bmc.check_property`); `explicit`: the
  explicit-state engine (`model.explicit`, reduced: cone of influence, saturated counters,
  symmetry, one shard when the property's shard evolves alone; `prove`: until the reachable
  states are exhausted); `spacer`: `prove_property(engine="spacer")`, a bounded refutation then
  Z3's Spacer; the two baselines, written in the project over the same executable model
  (`bench/baselines.py`): `bfs`, a plain breadth-first search (state hashing, no reduction),
  and `hypothesis`, a `RuleBasedStateMachine` (what a Python user would try first).
* Each run is a fresh process. *median s* is the whole process's wall-clock time, start-up
  included (a process that only imports and loads the spec takes {base:.2f} s and
  {statistics.median(r.peak_mib for r in startup):.0f} MiB; bytecode is compiled once before the runs, as
  an installed package's is); *peak MiB* its peak RSS from `os.wait4`. Medians of {repeat} run(s); a
  run is killed after {timeout:.0f} s (`> {timeout:.0f}`), and an engine that timed out is not run
  at larger N.
* *ledgercheck / this*: the median time of the `ledgercheck` row of the same task, environment
  and N divided by this row's, from the same run: below 1, ledgercheck is faster. `< x`: this
  engine timed out, so the ratio is at most x.
* `hypothesis`: {seeds} seeds, each a process given {budget:.0f} s; *median s* is over the seeds
  that found a failing run (time to the first failure, no shrinking), `> budget` when none did.
  Its failing runs are random programs of up to 30 steps, not shortest counterexamples.
* `bfs` gives int parameters the values 0..2 (the `ledger` environment's
  `report_refit(weight_version)`): an under-approximation. The reduced explicit engine needs no
  such cut there: that parameter only sets a field the property cannot see.

{text}
"""


def write_section(path: Path, section: str, markers: tuple[str, str] = (BEGIN, END)) -> None:
    """Replace one script's section of the results file (between its `markers`), keeping the
    rest (other scripts' sections)."""
    begin, end = markers
    old = path.read_text() if path.exists() else "# Benchmarks\n\n"
    block = f"{begin}\n{section.strip()}\n{end}"
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        _, tail = rest.split(end, 1)
        new = head + block + tail
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    path.write_text(new)


if __name__ == "__main__":
    sys.exit(main())
