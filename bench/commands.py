"""Benchmark: ledgercheck's commands as a user runs them, whole process, in one run.

Groups (`--groups`, comma-separated; all by default):

* `startup`: the interpreter alone; importing the spec loader; importing it and loading the
  bundled spec with the compiled-spec cache off (`LEDGERCHECK_CACHE=off`) and warm;
* `find`:    `check --engine auto --max-traces 1` of `no_condemnation_by_inherited_streak` in
  `as_written` (its shortest counterexample): `ledger` at N = 1, 4, 16, `controller` at 4, 8;
* `depth20`: the same in `fixed` to depth 20 (none there);
* `proof`:   `prove` of it in `fixed`;
* `proveall`: `prove` of every property of `fixed` in `controller` (the coupled fleet) at
  N = 4, 8, 16: where Spacer's work grows with the fleet, and proofs from a smaller fleet
  (`model/smallfleet.py`) keep it flat;
* `plain`:   `ledgercheck check` (every property, environment and variant; plain
  `ledgercheck` is this and a hint) with its default workers (`--jobs` = the cores) and with
  `--jobs 1` (one check after the other); the two outputs must be byte-identical;
* `ci`:      `ledgercheck ci` on the bundled spec, default workers and `--jobs 1` (outputs
  compared with the step times masked);
* `plain` also once with every search in Z3's integers (`LEDGERCHECK_BITVECTORS=off`; its
  output is not compared: it may find other equally short traces);
* `plain` and `ci` also once more with the cache of results on and warmed by one run before
  the measured ones (`model/resultcache.py`; every other row runs with it off, so every other
  figure is of solving);
* `mutate`:  `ledgercheck mutate` on a sample of mutants with `--jobs 1`, `--jobs 2` and
  `--executor ray --jobs 2` (skipped when Ray is not installed), the last twice: once starting
  a local Ray instance of its own (Ray's start counted), once on a running cluster of two
  workers (`ray start --head --num-cpus 2`, joined with `RAY_ADDRESS=auto`, as a user who
  already runs Ray has one); the outputs must be byte-identical (the table says whether they
  were);
* `conform`: `ledgercheck conform` of the clean implementation (`tests/impl`) against `fixed`,
  its counterexamples checked afresh (`--no-cache`), with `--jobs 1`, `--jobs 2` and
  `--executor ray --jobs 2`, a local instance of its own and the running cluster (outputs
  compared with the times masked).

Every run is a fresh process (`bench.run.run_process`: wall-clock time, peak RSS). The compiled
spec cache is a private folder, warmed before the runs (as a user's is after their first run).
It prints one table of medians, then the ratios computed from that same run, and writes both
to bench/RESULTS.md (its own section). No test is timed; read figures from one run together.

    python bench/commands.py                       # everything: several minutes
    python bench/commands.py --quick               # one run each, small mutate sample
    python bench/commands.py --groups startup,find --repeat 7
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.run import PROPERTY, RESULTS, _child_env, run_process, write_section  # noqa: E402
from ledgercheck.model.numbers import DISABLED, SWITCH  # noqa: E402  (no Z3: the switch's name)

GROUPS = ("startup", "find", "depth20", "proof", "proveall", "plain", "ci", "mutate", "conform")
HEAVY = ("proveall", "plain", "ci", "mutate", "conform")
"""Groups run `--repeat-heavy` times (each run takes seconds to minutes)."""
PROVE_ALL = (4, 8, 16)
MARKERS = ("<!-- bench/commands.py: begin -->", "<!-- bench/commands.py: end -->")
HEADLINE = [("ledger", 1), ("ledger", 4), ("ledger", 16), ("controller", 4), ("controller", 8)]
LEDGERCHECK = [sys.executable, "-m", "ledgercheck.model.cli"]
MUTATE_SIZE = ["--max-depth", "6", "--shards", "2"]  # as the mutate tests run it: a sample in minutes
CACHED = {"LEDGERCHECK_RESULTS": "on"}  # the cache of results, off in every other row
INTEGERS_ROW = f"check, integers ({DISABLED})"
RAY_ARGV = ["--executor", "ray", "--jobs", "2"]
RAY_OWN = " ".join(RAY_ARGV)
RAY_RUNNING = f"{RAY_OWN}, running cluster"
ON_CLUSTER = {"RAY_ADDRESS": "auto"}
"""A row's environment on the running cluster: Ray's name for the one `ray start` runs here
(its token found with it; an address given by hand is refused by Ray's authentication)."""


@dataclass
class Row:
    group: str
    label: str
    cmd: list[str]
    env: dict[str, str] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    peaks: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    outputs: list[bytes] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    timed_out: bool = False
    warm_up: bool = False
    """Run once, unmeasured, before the rounds (to fill the cache of results)."""

    @property
    def median(self) -> float | None:
        return None if self.timed_out or not self.seconds else statistics.median(self.seconds)

    def cell(self) -> str:
        if self.timed_out:
            return "timeout"
        return "-" if self.median is None else f"{self.median:.2f}"


def _check(env: str, shards: int, variant: str, depth: int | None = None) -> list[str]:
    argv = ["check", "--variant", variant, "--property", PROPERTY, "--environment", env, "--shards", str(shards)]
    argv += ["--engine", "auto", "--max-traces", "1", "--format", "json"]
    return [*LEDGERCHECK, *argv, *(["--max-depth", str(depth)] if depth else [])]


def _rows(groups: list[str], mutants: int) -> list[Row]:
    rows: list[Row] = []
    loader = "from ledgercheck.model.spec import load_spec; load_spec()"
    if "startup" in groups:
        rows += [
            Row("startup", "python -c pass", [sys.executable, "-c", "pass"]),
            Row("startup", "import ledgercheck.model.spec", [sys.executable, "-c", "import ledgercheck.model.spec"]),
            Row(
                "startup", "import + load_spec, cache off", [sys.executable, "-c", loader], {"LEDGERCHECK_CACHE": "off"}
            ),
            Row("startup", "import + load_spec, cache warm", [sys.executable, "-c", loader]),
        ]
    for env, n in HEADLINE:
        if "find" in groups:
            rows.append(Row("find", f"{env} N={n}", _check(env, n, "as_written")))
        if "depth20" in groups:
            rows.append(Row("depth20", f"{env} N={n}", _check(env, n, "fixed", 20)))
        if "proof" in groups:
            argv = ["prove", "--variant", "fixed", "--property", PROPERTY, "--environment", env, "--shards", str(n)]
            rows.append(Row("proof", f"{env} N={n}", [*LEDGERCHECK, *argv, "--format", "json"]))
    if "proveall" in groups:
        for n in PROVE_ALL:
            argv = [
                "prove",
                "--variant",
                "fixed",
                "--environment",
                "controller",
                "--shards",
                str(n),
                "--format",
                "json",
            ]
            rows.append(Row("proveall", f"controller N={n}", [*LEDGERCHECK, *argv]))
    if "find" in groups:
        rows.append(
            Row("find", "ledger N=4, cache off", _check("ledger", 4, "as_written"), {"LEDGERCHECK_CACHE": "off"})
        )
    if "plain" in groups:
        rows.append(Row("plain", "check, default workers", [*LEDGERCHECK, "check"]))
        rows.append(Row("plain", "check --jobs 1", [*LEDGERCHECK, "check", "--jobs", "1"]))
        rows.append(Row("plain", "check, results cached", [*LEDGERCHECK, "check"], CACHED, warm_up=True))
        rows.append(Row("plain", INTEGERS_ROW, [*LEDGERCHECK, "check"], {SWITCH: "off"}))
    if "ci" in groups:
        rows.append(Row("ci", "ci, default workers", [*LEDGERCHECK, "ci"]))
        rows.append(Row("ci", "ci --jobs 1", [*LEDGERCHECK, "ci", "--jobs", "1"]))
        rows.append(Row("ci", "ci, results cached", [*LEDGERCHECK, "ci"], CACHED, warm_up=True))
    if "mutate" in groups:
        sample = [*LEDGERCHECK, "mutate", "--max-mutants", str(mutants), "--seed", "0", *MUTATE_SIZE, "--no-progress"]
        rows += [
            Row("mutate", "--jobs 1", [*sample, "--jobs", "1"]),
            Row("mutate", "--jobs 2", [*sample, "--jobs", "2"]),
        ]
        if importlib.util.find_spec("ray") is None:  # not imported: this process stays small (see main)
            print("mutate: Ray is not installed; --executor ray is not measured", file=sys.stderr)
        else:
            rows.append(Row("mutate", RAY_OWN, [*sample, *RAY_ARGV]))
            rows.append(Row("mutate", RAY_RUNNING, [*sample, *RAY_ARGV], dict(ON_CLUSTER)))
    if "conform" in groups:
        impl = str(ROOT / "tests" / "impl" / "fleet_health_clean.py") + ":GenerationFleetHealth"
        conform = [*LEDGERCHECK, "conform", "--impl", impl, "--variant", "fixed", "--no-cache"]
        rows += [
            Row("conform", "--jobs 1", [*conform, "--jobs", "1"]),
            Row("conform", "--jobs 2", [*conform, "--jobs", "2"]),
        ]
        if importlib.util.find_spec("ray") is not None:
            rows.append(Row("conform", RAY_OWN, [*conform, *RAY_ARGV]))
            rows.append(Row("conform", RAY_RUNNING, [*conform, *RAY_ARGV], dict(ON_CLUSTER)))
    return rows


def _ratio(rows: dict[tuple[str, str], Row], slow: tuple[str, str], fast: tuple[str, str]) -> str:
    a, b = rows.get(slow), rows.get(fast)
    if a is None or b is None or a.median is None or b.median is None:
        return "-"
    return f"{a.median / b.median:.2f}x"


def ratios(rows: list[Row]) -> list[tuple[str, str]]:
    """(what, ratio) pairs, each from two rows of this run."""
    index = {(r.group, r.label): r for r in rows}
    out = [
        (
            "load_spec: cache off / warm",
            _ratio(index, ("startup", "import + load_spec, cache off"), ("startup", "import + load_spec, cache warm")),
        ),
        (
            "find, ledger N=4: cache off / warm",
            _ratio(index, ("find", "ledger N=4, cache off"), ("find", "ledger N=4")),
        ),
    ]
    for group in ("find", "depth20", "proof"):
        out.append((f"{group}: ledger N=16 / N=1", _ratio(index, (group, "ledger N=16"), (group, "ledger N=1"))))
        out.append(
            (f"{group}: controller N=8 / N=4", _ratio(index, (group, "controller N=8"), (group, "controller N=4")))
        )
        out.append(
            (
                f"{group}: ledger N=4 / start-up (import + load, warm)",
                _ratio(index, (group, "ledger N=4"), ("startup", "import + load_spec, cache warm")),
            )
        )
    out.append(
        (
            "prove, every controller property: N=16 / N=4",
            _ratio(index, ("proveall", "controller N=16"), ("proveall", "controller N=4")),
        )
    )
    out.append(
        (
            "plain check: --jobs 1 / default workers",
            _ratio(index, ("plain", "check --jobs 1"), ("plain", "check, default workers")),
        )
    )
    out.append(("ci: --jobs 1 / default workers", _ratio(index, ("ci", "ci --jobs 1"), ("ci", "ci, default workers"))))
    out.append(
        (
            "plain check: integers / bit-vectors (default workers)",
            _ratio(index, ("plain", INTEGERS_ROW), ("plain", "check, default workers")),
        )
    )
    out.append(
        (
            "plain check: solved / results cached",
            _ratio(index, ("plain", "check, default workers"), ("plain", "check, results cached")),
        )
    )
    out.append(
        ("ci: solved / results cached", _ratio(index, ("ci", "ci, default workers"), ("ci", "ci, results cached")))
    )
    out += _same_output(rows, "plain", "plain check: output byte-identical across --jobs and runs")
    out += _same_output(rows, "ci", "ci: output identical across --jobs and runs (step times masked)", _mask_times)
    for group, same, normal in (
        ("mutate", "output byte-identical across executors and runs", lambda out: out),
        ("conform", "output identical across executors and runs (times masked)", _mask_times),
    ):
        one = (group, "--jobs 1")
        out.append((f"{group}: --jobs 1 / --jobs 2", _ratio(index, one, (group, "--jobs 2"))))
        out.append(
            (f"{group}: --jobs 1 / ray, 2 workers (a local instance of its own)", _ratio(index, one, (group, RAY_OWN)))
        )
        out.append(
            (f"{group}: --jobs 1 / ray, 2 workers (a running cluster)", _ratio(index, one, (group, RAY_RUNNING)))
        )
        out += _same_output(rows, group, f"{group}: {same}", normal)
    return [(what, value) for what, value in out if value != "-"]


def _same_output(
    rows: list[Row], group: str, what: str, normal: Callable[[bytes], bytes] = lambda out: out
) -> list[tuple[str, str]]:
    """Whether every run of every row of `group` printed the same (as `normal` reads it); a
    run in integers is not compared (it may find other equally short traces)."""
    rows = [r for r in rows if r.label != INTEGERS_ROW]
    outputs = [normal(o) for r in rows if r.group == group for o in r.outputs]
    if len({id(r) for r in rows if r.group == group and r.outputs}) < 2:
        return []
    return [(what, "yes" if all(o == outputs[0] for o in outputs) else "NO")]


def _mask_times(output: bytes) -> bytes:
    """`ci`'s summary without its step times (they differ from run to run), nor the count of
    verdicts answered from the cache of results (the cached row's only other difference)."""
    output = re.sub(rb"; \d+ answered from the cache of results \(--no-cache solves them again\)", b"", output)
    return re.sub(rb" *\d+\.\d+ ?s", b" #.# s", output)  # the padding too: 5.1 s and 105.1 s


def table(rows: list[Row]) -> str:
    lines = ["| group | run | median s | runs | CPU s | peak MiB | exit |", "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        peak = f"{statistics.median(r.peaks):.0f}" if r.peaks else "-"
        cpu = f"{statistics.median(r.cpu):.2f}" if r.cpu else "-"
        codes = ",".join(str(c) for c in sorted(set(r.codes))) or "-"
        lines.append(f"| {r.group} | {r.label} | {r.cell()} | {len(r.seconds)} | {cpu} | {peak} | {codes} |")
    lines += ["", "| ratio (same run) | value |", "|---|---:|"]
    lines += [f"| {what} | {value} |" for what, value in ratios(rows)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", default=",".join(GROUPS), help="comma-separated, of: " + ", ".join(GROUPS))
    parser.add_argument("--repeat", type=int, default=None, help="runs of each light command (default 5)")
    parser.add_argument(
        "--repeat-heavy", type=int, default=None, help="runs of proveall, plain, ci, mutate and conform (default 3)"
    )
    parser.add_argument("--mutants", type=int, default=None, help="mutants in the mutate sample (default 8)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run (default 600)")
    parser.add_argument("--quick", action="store_true", help="one run each, 4 mutants")
    parser.add_argument("--out", default=str(RESULTS), help="the Markdown file to write ('-' for none)")
    ns = parser.parse_args(argv)
    groups = [g for g in ns.groups.split(",") if g]
    unknown = set(groups) - set(GROUPS)
    if unknown:
        parser.error(f"unknown group(s): {', '.join(sorted(unknown))}")
    repeat = ns.repeat or (1 if ns.quick else 5)
    heavy = ns.repeat_heavy or (1 if ns.quick else 3)
    mutants = ns.mutants or (4 if ns.quick else 8)
    # Linux counts a child's peak RSS from this process's size at the fork: keep this process
    # small (bytecode compiled in a child, no Ray or Z3 imported before the runs).
    run_process([sys.executable, "-c", "from bench.run import _warm_bytecode; _warm_bytecode()"], 300)
    cache = tempfile.mkdtemp(prefix="ledgercheck-bench-cache-")
    base_env = _child_env() | {"LEDGERCHECK_CACHE": cache}
    base_env.pop("LEDGERCHECK_SPEC", None)
    run_process(
        [sys.executable, "-c", "from ledgercheck.model.spec import load_spec; load_spec()"], 60, base_env
    )  # warm
    rows = _rows(groups, mutants)
    for row in rows:
        if row.warm_up:
            run_process(row.cmd, ns.timeout, base_env | row.env)
    load_before = os.getloadavg()
    started = time.monotonic()
    # The rows on a running cluster come last, with the cluster up only for them: while it
    # runs, `--executor ray` joins it, so no other row could start an instance of its own.
    on_cluster = [row for row in rows if row.env == ON_CLUSTER]
    _rounds([row for row in rows if row not in on_cluster], ns.timeout, base_env, repeat, heavy)
    if on_cluster:
        if not _start_cluster(base_env):  # said on stderr: those rows are not measured
            rows = [row for row in rows if row not in on_cluster]
        else:
            try:
                _rounds(on_cluster, ns.timeout, base_env, repeat, heavy)
            finally:
                run_process([_ray_command(), "stop", "--force"], 120, base_env)
    elapsed = time.monotonic() - started
    shutil.rmtree(cache, ignore_errors=True)
    text = table(rows)
    print()
    print(text)
    if ns.out != "-":
        write_section(Path(ns.out), _report(text, repeat, heavy, mutants, load_before, elapsed), MARKERS)
        print(f"\nwritten to {ns.out}")
    return 0


def _rounds(rows: list[Row], timeout: float, base_env: dict[str, str], repeat: int, heavy: int) -> None:
    """Run the rows in interleaved rounds (a burst of load from other jobs spreads over
    every row, not one), each run a fresh process."""
    for round_number in range(max(repeat, heavy)):
        for row in rows:
            runs = heavy if row.group in HEAVY else repeat
            if round_number >= runs or row.timed_out:
                continue
            done = run_process(row.cmd, timeout, base_env | row.env)
            if done.timed_out:
                row.timed_out = True
            else:
                row.seconds.append(done.seconds)
                row.peaks.append(done.peak_mib)
                row.cpu.append(done.cpu_seconds)
                row.codes.append(done.returncode)
                row.outputs.append(done.stdout)
            print(f"round {round_number + 1}: {row.group:8} {row.label:40} {done.seconds:7.2f}s", flush=True)


def _start_cluster(env: dict[str, str]) -> bool:
    """Start a local Ray cluster of two workers, as `ray start` does for a user (False, said
    on stderr, when it does not start). Its start is not measured: the rows that use it
    (`ON_CLUSTER`) stand for a user whose cluster is already running."""
    started = run_process(
        [_ray_command(), "start", "--head", "--num-cpus", "2", "--include-dashboard=false", "--disable-usage-stats"],
        180,
        env,
    )
    if started.timed_out or started.returncode != 0:
        print("ray start failed: the running-cluster rows are not measured", file=sys.stderr)
        return False
    return True


def _ray_command() -> str:
    """Ray's command line, beside this interpreter (the venv's) or else on the PATH."""
    beside = Path(sys.executable).with_name("ray")
    return str(beside) if beside.exists() else shutil.which("ray") or "ray"


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _report(text: str, repeat: int, heavy: int, mutants: int, load_before: tuple[float, ...], elapsed: float) -> str:
    import z3

    try:
        import ray

        ray_version = f"Ray {ray.__version__}"
    except ImportError:
        ray_version = "Ray not installed"
    argv = " ".join(sys.argv[1:]) or "(defaults)"
    return f"""## Commands as a user runs them

`python bench/commands.py {argv}` on {datetime.date.today().isoformat()}: `nproc` = {os.cpu_count()},
{platform.machine()}, Python {platform.python_version()}, Z3 {z3.get_version_string()}, {ray_version};
load average {load_before[0]:.1f} at the start and {os.getloadavg()[0]:.1f} at the end (the machine
is shared: other jobs ran alongside); {elapsed / 60:.1f} minutes in all.

Whole process (interpreter start, imports, spec loading included), from the project's root.
Medians of {repeat} run(s) for start-up, find, depth 20 and proof, {heavy} for `check`,
`ci`, `mutate`, `conform` and *proveall*; rounds interleaved, so a burst of load spreads over every row. The
compiled-spec cache is warm (a private folder) except where a row says *cache off*. Property
`{PROPERTY}`, shipped policy; *find*: `check --engine auto --max-traces 1` in `as_written`;
*depth20*: the same in `fixed` with `--max-depth 20`; *proof*: `prove` in `fixed`; *proveall*:
`prove` of every property of `fixed` in `controller`; *mutate*: a
sample of {mutants} mutants of the bundled spec (`--max-mutants {mutants} --seed 0 {" ".join(MUTATE_SIZE)}`: the
baseline's 64 checks and 40 generated tests, then the mutants), its Ray run including the
start of a local Ray instance; *conform*: the clean implementation of `tests/impl` against
`fixed` with every source at its default (enumeration to depth 4, 1000 random calls, the
checker's counterexamples checked afresh: only they are spread over the workers).
*default workers*: `--jobs` left out, so as many workers as the process may use cores
({_cores()} here). *CPU s*: user and system time of the process and of the children it
waited for (the local pool's workers; not Ray's, which its own daemons start). *peak MiB*: the
process's own peak RSS. *exit*: the exit codes seen.
SPIN is not measured here: no SPIN model of the ledger is in bench/ (and `spin` is not
installed on this machine).

{text}
"""


if __name__ == "__main__":
    sys.exit(main())
