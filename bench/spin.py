"""Benchmark: SPIN's compiled verifier as the yardstick, beside ledgercheck, in one run.

The question is the headline property (`no_condemnation_by_inherited_streak`) in the `ledger`
environment at N = 1, 4, 16 shards: find its shortest counterexample in `as_written`, search
`fixed` to depth 20, and prove it in `fixed`. SPIN answers on bench/spin/fleet_health.pml, a
hand-written Promela model of the same ledger (one process per shard, so partial-order
reduction applies; counters saturated, so the search is finite). Its build (`spin -a` and
gcc) and its run are timed apart, as the issue asks. Before a find figure is trusted, SPIN's
shortest trail must have as many calls as ledgercheck's counterexample has steps.

Every run is a fresh process (`bench.run.run_process`: wall time, peak RSS); SPIN's verifier
is built with state compression (COLLAPSE) and capped at `--memory` MiB (pan's MEMLIM) and
`--timeout` seconds; a search it cannot finish is reported as such, never as a verdict. Prints a table of medians
and the ratios from that same run, and writes them to bench/RESULTS.md (its own section).
Needs `spin` and `gcc` (Debian: `apt-get install spin gcc`). No test is timed.

    python bench/spin.py                 # N = 1, 4, 16, three runs each
    python bench/spin.py --shards 1,4 --repeat 5
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.commands import LEDGERCHECK, _check  # noqa: E402
from bench.run import PROPERTY, RESULTS, run_process, write_section  # noqa: E402

MODEL = ROOT / "bench" / "spin" / "fleet_health.pml"
MARKERS = ("<!-- bench/spin.py: begin -->", "<!-- bench/spin.py: end -->")
# question -> (ledgercheck variant, SPIN defines, gcc defines, pan options)
QUESTIONS = {
    "find": ("as_written", [], ["-DBFS"], []),
    "depth20": ("fixed", ["-DFIXED"], ["-DBFS"], ["-m20"]),
    "proof": ("fixed", ["-DFIXED"], [], ["-m1000000"]),
}


@dataclass
class Figures:
    """The medians' raw material for one (question, N)."""

    build: list[float] = field(default_factory=list)
    spin: list[float] = field(default_factory=list)
    spin_peak: list[float] = field(default_factory=list)
    ours: list[float] = field(default_factory=list)
    spin_verdict: str = ""
    ours_verdict: str = ""
    agree: str = ""


def _build(folder: Path, shards: int, spin_defines: list[str], gcc_defines: list[str], memory: int) -> float:
    """`spin -a` and gcc in `folder`; returns their seconds (both counted as the build)."""
    generated = run_process(_in(folder, ["spin", f"-DSHARDS={shards}", *spin_defines, "-a", str(MODEL)]), 120)
    if generated.returncode != 0:
        raise SystemExit(f"spin -a failed: {generated.stdout.decode()} {generated.stderr.decode()}")
    gcc = ["gcc", "-O2", "-DSAFETY", "-DCOLLAPSE", f"-DMEMLIM={memory}", *gcc_defines, "-o", "pan", "pan.c"]
    compiled = run_process(_in(folder, gcc), 300)
    if compiled.returncode != 0:
        raise SystemExit(f"gcc failed: {compiled.stderr.decode()[-2000:]}")
    return generated.seconds + compiled.seconds


def _in(folder: Path, cmd: list[str]) -> list[str]:
    """`cmd` run in `folder` (run_process starts children in the project's root; SPIN's
    generated files and its trail belong in the scratch folder)."""
    return ["sh", "-c", f"cd {shlex.quote(str(folder))} && exec {shlex.join(cmd)}"]


def _pan(folder: Path, options: list[str], timeout: float) -> tuple[float, float, str, int | None]:
    """Run the verifier; returns seconds, peak MiB, its verdict and the trail's call count."""
    trail = folder / "fleet_health.pml.trail"
    trail.unlink(missing_ok=True)
    done = run_process(_in(folder, ["./pan", *options]), timeout)
    text = done.stdout.decode(errors="replace")
    if done.timed_out:
        verdict = "timeout"
    elif "assertion violated" in text:  # the search stops at its first error: an answer
        verdict = "violated"
    elif "MEMLIM" in text or "out of memory" in text:
        verdict = "out of memory"
    elif "Search not completed" in text:
        verdict = "incomplete"
    elif "errors: 0" in text:
        verdict = "holds" if "-m20" in options else "proved"
    else:
        verdict = f"? (exit {done.returncode})"
    calls = None
    if trail.exists():
        calls = sum(1 for line in trail.read_text().splitlines() if line and not line.startswith("-"))
    return done.seconds, done.peak_mib, verdict, calls


def _ours(question: str, shards: int, timeout: float) -> tuple[float, str, int | None]:
    variant = QUESTIONS[question][0]
    if question == "proof":
        argv = ["prove", "--variant", variant, "--property", PROPERTY, "--environment", "ledger"]
        cmd = [*LEDGERCHECK, *argv, "--shards", str(shards), "--format", "json"]
    else:
        cmd = _check("ledger", shards, variant, 20 if question == "depth20" else None)
    done = run_process(cmd, timeout)
    try:
        result = json.loads(done.stdout)
        first = result[0] if isinstance(result, list) else result["results"][0]
        return done.seconds, str(first["status"]), first.get("depth")
    except (ValueError, KeyError, IndexError, TypeError):
        return done.seconds, "timeout" if done.timed_out else f"? (exit {done.returncode})", None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", default="1,4,16", help="fleet sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (medians)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    parser.add_argument("--memory", type=int, default=2048, help="SPIN verifier's memory cap (MiB)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    args = parser.parse_args(argv)
    missing = [tool for tool in ("spin", "gcc") if shutil.which(tool) is None]
    if missing:
        print(f"bench/spin.py needs {' and '.join(missing)} (Debian: apt-get install spin gcc)", file=sys.stderr)
        return 2
    sizes = [int(n) for n in args.shards.split(",")]
    load_before = os.getloadavg()
    figures: dict[tuple[str, int], Figures] = {}
    with tempfile.TemporaryDirectory(prefix="ledgercheck-spin-") as scratch:
        for shards in sizes:
            for question, (_, spin_defines, gcc_defines, options) in QUESTIONS.items():
                folder = Path(scratch) / f"{question}-{shards}"
                folder.mkdir()
                cell = figures[(question, shards)] = Figures()
                for _ in range(args.repeat):
                    cell.build.append(_build(folder, shards, spin_defines, gcc_defines, args.memory))
                    seconds, peak, cell.spin_verdict, calls = _pan(folder, options, args.timeout)
                    cell.spin.append(seconds)
                    cell.spin_peak.append(peak)
                    ours, cell.ours_verdict, depth = _ours(question, shards, args.timeout)
                    cell.ours.append(ours)
                    if question == "find":
                        cell.agree = "yes" if calls is not None and calls == depth else f"no ({calls} vs {depth})"
                says = f"SPIN {cell.spin_verdict}, ledgercheck {cell.ours_verdict}"
                print(f"{question} N={shards}: {says}", file=sys.stderr)
    section = _report(figures, sizes, args, load_before, os.getloadavg())
    print(section)
    if not args.no_write:
        write_section(RESULTS, section, MARKERS)
    return 0


def _report(
    figures: dict[tuple[str, int], Figures],
    sizes: list[int],
    args: argparse.Namespace,
    load_before: tuple[float, float, float],
    load_after: tuple[float, float, float],
) -> str:
    def med(values: list[float]) -> float:
        return statistics.median(values)

    lines = [
        "## SPIN's compiled verifier as the yardstick (bench/spin.py)",
        "",
        f"{datetime.date.today().isoformat()}, {platform.python_version()}, {os.cpu_count()} cores, "
        f"load average {load_before[0]:.1f} before and {load_after[0]:.1f} after; medians of {args.repeat}; "
        f"SPIN's verifier capped at {args.memory} MiB and {args.timeout:g} s. Headline property, `ledger` "
        "environment; SPIN on bench/spin/fleet_health.pml. Build = `spin -a` + gcc; run = the verifier alone.",
        "",
        "| question | N | SPIN build s | SPIN run s | SPIN peak MiB | SPIN says | ledgercheck s | ledgercheck says "
        "| ours / SPIN run | ours / (build + run) | same trace length |",
        "|---|---:|---:|---:|---:|---|---:|---|---:|---:|---|",
    ]
    for shards in sizes:
        for question in QUESTIONS:
            cell = figures[(question, shards)]
            build, run, ours = med(cell.build), med(cell.spin), med(cell.ours)
            if cell.spin_verdict in ("violated", "holds", "proved"):
                ratios = f"{ours / run:.1f}x | {ours / (build + run):.2f}x"
            else:  # SPIN gave no answer: there is nothing to compare with
                ratios = "no SPIN answer | no SPIN answer"
            lines.append(
                f"| {question} | {shards} | {build:.2f} | {run:.3f} | {med(cell.spin_peak):.0f} | {cell.spin_verdict} "
                f"| {ours:.2f} | {cell.ours_verdict} | {ratios} | {cell.agree or '-'} |"
            )
    lines += [
        "",
        "Where SPIN gives no answer (out of memory, timeout) there is no ratio: ledgercheck's "
        "figure then stands alone. SPIN's model is a translation by hand: a figure counts only where "
        "the two agree on the verdict (and, for find, on the counterexample's length).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
