"""Which Z3 settings are fastest for the bounded model checker's queries?

Two choices, measured on the checker's own encoding and unrolling (`model.bmc.Checker`):

* the solver: `z3.SolverFor("QF_LIA")` (what `Checker` uses for a concrete policy) or
  `z3.Solver()` (Z3's default combined solver);
* how "the property fails first at depth d" is asked: under an assumption literal
  (`solver.check(goal)`, what `Checker` does: nothing is retracted) or inside
  `push()` / `pop()` around the goal.

Two variations of the fastest pair (`SolverFor(QF_LIA)` with an assumption literal):

* `+por`: the partial-order reduction `Checker(por=True)` adds (adjacent steps of different
  shards that commute are kept in one order);
* `+symmetry`: the symmetry breaking `Checker(symmetry_breaking=True)` adds (the shards other
  than the focus shard are first named by an action in increasing order);
* `+bounds`: `Checker(bounds=True)`, what the checker does by default since this measurement:
  every counter that can never be negative (`model.reduction.nonnegative_counters`: it starts
  non-negative, is only set to non-negative constants and only grows) is stated `x >= 0` at
  every step, a bounded integer range the solver can use. The other columns run with
  `bounds=False`. (Bit-vector sorts would need a second encoding of every operation; not
  measured.)

Each configuration answers the same questions (the first depth with a violation, or none up
to the depth); the time is the solver's part (encoding and unrolling included, trace
extraction not), the median of `--repeat` runs in one process, configurations interleaved.

    python bench/solver_settings.py              # prints the table
    python bench/solver_settings.py --write      # and puts it in bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import z3  # noqa: E402

from ledgercheck.model import bmc  # noqa: E402
from ledgercheck.model.spec import load_spec  # noqa: E402

PROPERTY = "no_condemnation_by_inherited_streak"
SOLVERS = ("SolverFor(QF_LIA)", "Solver()")
MODES = ("assumption", "push/pop", "assumption+por", "assumption+symmetry", "assumption+bounds")
BEGIN, END = "<!-- bench/solver_settings.py: begin -->", "<!-- bench/solver_settings.py: end -->"


def first_violation(spec: Any, env: str, shards: int, depth: int, solver_kind: str, mode: str) -> tuple[str, float]:
    """The first depth with a violation ('violated @ d') or 'holds to d', and the seconds."""
    start = time.monotonic()
    prop = spec.properties[PROPERTY]
    por = mode.endswith("+por")
    checker = bmc.Checker(
        spec,
        env,
        prop,
        shards,
        spec.default_policy(),
        contracts=spec.environment(env).any_call,
        por=por,
        symmetry_breaking=mode.endswith("+symmetry"),
        bounds=mode.endswith("+bounds"),
    )
    ctx = checker.ctx
    solver = z3.SolverFor("QF_LIA", ctx=ctx) if solver_kind == SOLVERS[0] else z3.Solver(ctx=ctx)
    solver.add(checker.enc.initial(checker.states[0].state))
    checker.solver = solver  # the unrolling adds its transitions to this solver from here on
    bad: list[Any] = []
    for d in range(depth + 1):
        if d > 0:
            checker.deepen()
        if d == 0:
            checker._bound(checker.states[0])  # the first state's bounds went to the replaced solver
        now = checker._bad_at(d)
        query = z3.And([now, *[z3.Not(b) for b in bad]]) if bad else now
        bad.append(now)
        if mode != MODES[1]:
            goal = z3.Bool(f"goal@{d}", ctx)
            solver.add(z3.Implies(goal, query))
            answer = solver.check(goal)
        else:
            solver.push()
            solver.add(query)
            answer = solver.check()
            solver.pop()
        if answer == z3.sat:
            return f"violated @ {d}", time.monotonic() - start
        if answer == z3.unknown:
            return "unknown", time.monotonic() - start
    return f"holds to {depth}", time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", default="4,8", help="fleet sizes (default 4,8)")
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="put the table in bench/RESULTS.md")
    ns = parser.parse_args(argv)
    spec_file = load_spec()
    tasks = []
    for n in (int(s) for s in ns.shards.split(",")):
        for env in ("controller", "ledger"):
            tasks.append(("cex", "as_written", env, n))
            tasks.append(("bounded", "fixed", env, n))
    configs = [(s, m) for s in SOLVERS for m in MODES[:2]] + [(SOLVERS[0], m) for m in MODES[2:]]
    times: dict[tuple[Any, ...], list[float]] = {}
    answers: dict[tuple[Any, ...], set[str]] = {}
    load = os.getloadavg()[0]
    for _ in range(ns.repeat):
        for task in tasks:
            name, variant, env, n = task
            for config in configs:
                answer, seconds = first_violation(spec_file.variant(variant), env, n, ns.depth, *config)
                times.setdefault((task, config), []).append(seconds)
                answers.setdefault(task, set()).add(answer)
                print(f"{name:8} {env:10} N={n:<3} {config[0]:18} {config[1]:10} {seconds:7.2f}s  {answer}", flush=True)
    header = "| task | environment | N | answer | " + " | ".join(f"{s}, {m}" for s, m in configs) + " |"
    rows = [header, "|---|---|---:|---|" + "---:|" * len(configs)]
    wins: dict[tuple[str, str], int] = {c: 0 for c in configs}
    for task in tasks:
        medians = [statistics.median(times[(task, c)]) for c in configs]
        best = min(medians)
        wins[configs[medians.index(best)]] += 1
        cells = [f"**{m:.2f}**" if m == best else f"{m:.2f}" for m in medians]
        answer = " / ".join(sorted(answers[task]))
        rows.append(f"| {task[0]} | {task[2]} | {task[3]} | {answer} | " + " | ".join(cells) + " |")
    text = "\n".join(rows)
    summary = ", ".join(f"{s} with {m}: fastest on {w}" for (s, m), w in wins.items())
    print()
    print(text)
    print(summary)
    if ns.write:
        section = f"""## Z3 settings for the bounded model checker

`python bench/solver_settings.py {" ".join(sys.argv[1:])}` on {datetime.date.today().isoformat()}
(`nproc` = {os.cpu_count()}, load average {load:.1f} at the start; Z3 {z3.get_version_string()}). Seconds to
the answer (median of {ns.repeat} runs in one process, configurations interleaved), depth
{ns.depth}, property `{PROPERTY}`: `cex` in `as_written` (stops at the first violation),
`bounded` in `fixed` (every depth unsatisfiable). The fastest configuration of each row is in
bold. Counts: {summary}.

{text}
"""
        from bench.run import write_section

        path = ROOT / "bench" / "RESULTS.md"
        write_section(path, section, (BEGIN, END))
        print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
