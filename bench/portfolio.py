"""Benchmark: is `--engine auto` within 10 % of the fastest single engine on every property?

For every property of the bundled spec in one environment (default `controller`, at the spec's
fleet size or `--shards`), in each variant asked for, it runs `ledgercheck check` once per
engine, `z3`, `explicit` and `auto`, each a fresh process (whole-process time, start-up
included), rounds interleaved, and prints per check the medians, the verdicts (which must agree
between engines: a row where they do not is flagged), the fastest single engine and the ratio
`auto / fastest`. A run killed at `--timeout` counts as that timeout (a lower bound), and that
engine is not run again on that check in later rounds. It writes
the table to bench/RESULTS.md (its own section). No test is timed; read figures from one run.

    python bench/portfolio.py                                  # controller, every variant
    python bench/portfolio.py --variants fixed --repeat 3
    python bench/portfolio.py --environment ledger --timeout 30
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.run import RESULTS, run_process, write_section  # noqa: E402

MARKERS = ("<!-- bench/portfolio.py: begin -->", "<!-- bench/portfolio.py: end -->")
ENGINES = ("z3", "explicit", "auto")
LEDGERCHECK = [sys.executable, "-m", "ledgercheck.model.cli"]
WITHIN = 1.10
"""The issue's target: `auto` at most 10 % slower than the fastest single engine."""


@dataclass
class Cell:
    """One (variant, property) under one engine: its runs and what they answered."""

    seconds: list[float] = field(default_factory=list)
    timed_out: bool = False
    verdicts: set[str] = field(default_factory=set)

    def median(self) -> float:
        return statistics.median(self.seconds)


def _command(variant: str, prop: str, environment: str, engine: str, shards: int | None) -> list[str]:
    cmd = [*LEDGERCHECK, "check", "--variant", variant, "--property", prop, "--environment", environment]
    cmd += ["--engine", engine, "--format", "json", "--jobs", "1"]
    return cmd + (["--shards", str(shards)] if shards else [])


def _verdict(output: bytes) -> str:
    """What one run answered: `violated @ depth` (the shortest counterexample's length), or
    `holds` (up to the depth, or proved: `auto`'s proof race may land where the others bound)."""
    try:
        results = json.loads(output)
    except ValueError:
        return "no output"
    return ", ".join(
        f"violated @ {r['depth']}"
        if r["status"] == "violated"
        else "holds"
        if r["status"] in ("holds_to_depth", "proved")
        else r["status"]
        for r in results
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--environment", default="controller")
    parser.add_argument("--variants", default=None, help="comma-separated (default: every variant)")
    parser.add_argument("--properties", default=None, help="comma-separated (default: every property)")
    parser.add_argument("--shards", type=int, default=None, help="fleet size (default: the spec's)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (default 1)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per run (default 60)")
    parser.add_argument("--out", default=str(RESULTS), help="the Markdown file to write ('-' for none)")
    args = parser.parse_args(argv)

    from ledgercheck.model.spec import bundled_spec_folder, load_spec

    spec_file = load_spec(bundled_spec_folder() / "fleet_health.toml")
    variants = args.variants.split(",") if args.variants else list(spec_file.variants)
    checks = [
        (variant, name)
        for variant in variants
        for name, prop in spec_file.variant(variant).properties.items()
        if prop.applies_to(args.environment) and (not args.properties or name in args.properties.split(","))
    ]
    if not checks:
        parser.error(f"no property of the asked variants applies to {args.environment!r}")
    cells = {(v, p, e): Cell() for v, p in checks for e in ENGINES}
    load_before = os.getloadavg()
    started = time.monotonic()
    for round_number in range(args.repeat):
        for variant, prop in checks:
            for engine in ENGINES:  # interleaved: a burst of load spreads over the engines of a check
                cell = cells[(variant, prop, engine)]
                if cell.timed_out:  # a lower bound already: another run would only add the timeout
                    continue
                done = run_process(_command(variant, prop, args.environment, engine, args.shards), args.timeout)
                cell.seconds.append(done.seconds)
                cell.timed_out |= done.timed_out
                cell.verdicts.add("timeout" if done.timed_out else _verdict(done.stdout))
                line = f"round {round_number + 1}: {variant:<20} {prop:<45} {engine:<8} {done.seconds:6.2f}s"
                print(line, flush=True)
    text = _report(args, checks, cells, load_before, time.monotonic() - started)
    print(text)
    if args.out != "-":
        write_section(Path(args.out), text, MARKERS)
        print(f"written to {args.out}")
    return 0


def _shown(cell: Cell, timeout: float) -> str:
    return f"> {timeout:.0f}" if cell.timed_out else f"{cell.median():.2f}"


def _report(
    args: argparse.Namespace,
    checks: list[tuple[str, str]],
    cells: dict[tuple[str, str, str], Cell],
    load_before: tuple[float, ...],
    elapsed: float,
) -> str:
    rows = []
    ratios: list[float] = []
    disagreements = 0
    for variant, prop in checks:
        mine = {engine: cells[(variant, prop, engine)] for engine in ENGINES}
        singles = {e: c for e, c in mine.items() if e != "auto"}
        best = min(singles, key=lambda e: singles[e].median())
        ratio = mine["auto"].median() / singles[best].median()
        ratios.append(ratio)
        answers = {v for c in mine.values() if not c.timed_out for v in c.verdicts}
        agree = "yes" if len(answers) <= 1 else "**no**"
        disagreements += agree != "yes"
        mark = f"**{ratio:.2f}**" if ratio > WITHIN else f"{ratio:.2f}"
        verdict = sorted(answers)[0] if len(answers) == 1 else "; ".join(sorted(answers)) or "timeout"
        rows.append(
            f"| {variant} | {prop} | {' | '.join(_shown(mine[e], args.timeout) for e in ENGINES)} | {best} | {mark} "
            f"| {verdict} | {agree} |"
        )
    within = sum(1 for r in ratios if r <= WITHIN)
    today = datetime.date.today().isoformat()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    head = f"""## `--engine auto` against the fastest single engine (bench/portfolio.py)

`python bench/portfolio.py {" ".join(sys.argv[1:])}`: {today}, {cores} cores, load average {load_before[0]:.1f} at
the start and {os.getloadavg()[0]:.1f} at the end; {elapsed / 60:.1f} minutes. Environment `{args.environment}`,
{"the spec's fleet" if not args.shards else f"{args.shards} shards"}, shipped policy, `check --property P --engine E
--jobs 1` as a fresh process each (whole-process seconds, medians of {args.repeat}; `> t`: killed at the
timeout). *ratio*: `auto` / the fastest of `z3` and `explicit`, bold above {WITHIN:.2f}. *agree*: the
engines' verdicts (status and depth) are the same. `auto` is within 10 % of the fastest engine on
{within} of {len(ratios)} checks; median ratio {statistics.median(ratios):.2f}, worst {max(ratios):.2f};
verdicts disagree on {disagreements}.

| variant | property | z3 s | explicit s | auto s | fastest | ratio | verdict | agree |
|---|---|---:|---:|---:|---|---:|---|---|"""
    return head + "\n" + "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
