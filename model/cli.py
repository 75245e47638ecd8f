"""The `ledgercheck` command line.

Exit codes (a public contract, documented in the README): 0 every verdict matches the
spec's expectations (or the command did its job); 1 a verdict differs from its expectation,
or `gen --check` found drift; 2 bad input (spec, arguments, files); 3 the solver could not
decide in time, or an internal inconsistency was detected (never reported as a pass).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from model import budget
from model.console import progress_for
from model.errors import EXIT_OK, EXIT_UNKNOWN, LedgercheckError, UsageError
from model.formats import CHECK_FORMATS, REPLAY_FORMATS, render_check
from model.result import Result
from model.runs import (
    exit_code,
    result_json,
    run_checks,
)
from model.spec import DEFAULT_SPEC, Spec, SpecFile, load_spec
from model.textout import print_results, verdict_line

ALL_FIELDS_HELP = "show every field in trace figures (default: the property's, then the changed ones)"
DEFAULT_DEPTH = 12
DEFAULT_TRACES = 3

EXAMPLES = {
    "replay": "examples:\n  ledgercheck replay                      # the seed's trace, both variants\n"
    "  ledgercheck replay --variant fixed 'report_failure(1)' 'report_failure(1)'\n"
    "  ledgercheck replay --environment controller 'request_fails(0)' 'refit_aborts()' 'recovery()'\n"
    "  ledgercheck replay --variant as_written --format markdown   # a table to paste into a review",
    "check": "examples:\n  ledgercheck check                       # every variant and property, controller, 4 shards\n"
    "  ledgercheck check --variant as_written --property no_condemnation_by_inherited_streak\n"
    "  ledgercheck check --environment ledger --max-traces 6 --format json\n"
    "  ledgercheck check --variant as_written --max-traces 1 --format markdown   # for a PR review\n"
    "  ledgercheck check --format junit > ledgercheck.xml      # one testcase per (variant, property)\n"
    "  ledgercheck check --format itf > traces.itf.json        # traces for Apalache/Quint tooling",
    "gen": "examples:\n  ledgercheck gen                         # regenerate generated_tests/\n"
    "  ledgercheck gen --check                 # exit 1 with a diff when they drifted",
}


def _policy_arg(text: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name.strip(), int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"policy value must be an integer: {text!r}") from None


def build_parser(args: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the arguments, only the command module they name is imported (a
    check that never runs the solver never loads it)."""
    parser = argparse.ArgumentParser(
        prog="ledgercheck",
        description="Model-check a ledger spec with Z3 and turn every counterexample into a pytest case.",
        epilog="examples:\n  ledgercheck                 # check the bundled spec (same as 'ledgercheck check')\n"
        "  ledgercheck replay          # the seed's trace on both variants\n"
        "  ledgercheck gen --check     # are generated_tests/ up to date?\n"
        "  ledgercheck report --html report.html   # verdicts, traces and state diagram on one page",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("spec", nargs="?", default=None, help=f"spec file (default: {DEFAULT_SPEC.name} bundled)")
        p.add_argument(
            "--policy",
            action="append",
            type=_policy_arg,
            default=[],
            metavar="NAME=VALUE",
            help="override a policy constant (repeatable)",
        )
        p.add_argument("--shards", type=int, default=None, help="fleet size (default: the spec's)")

    replay = sub.add_parser(
        "replay",
        help="drive the executable model through events and print each state",
        epilog=EXAMPLES["replay"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument("spec_or_event", nargs="*", metavar="[SPEC] EVENTS", help="a spec file, then calls")
    replay.add_argument("--policy", action="append", type=_policy_arg, default=[], metavar="NAME=VALUE")
    replay.add_argument("--shards", type=int, default=None)
    replay.add_argument("--variant", action="append", default=None, help="variant(s) to replay (default: all)")
    replay.add_argument(
        "--environment",
        default=None,
        help="environment whose actions the events name (default: the spec's default_environment, else ledger)",
    )
    replay.add_argument("--scenario", default=None, help="replay a scenario written in the spec (default: seed)")
    replay.add_argument("--file", default=None, help="read events from a file, one per line")
    replay.add_argument("--shard", type=int, default=None, help="shard to show in the table")
    replay.add_argument("--format", choices=REPLAY_FORMATS, default="text")
    replay.add_argument("--all-fields", action="store_true", help=ALL_FIELDS_HELP)

    check = sub.add_parser(
        "check",
        help="bounded model checking of the spec's properties",
        epilog=EXAMPLES["check"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common(check)
    check.add_argument("--variant", action="append", default=None)
    check.add_argument("--property", action="append", default=None)
    check.add_argument(
        "--environment",
        default=None,
        help="check in this environment only (default: every environment each property applies to)",
    )
    check.add_argument("--max-depth", type=int, default=DEFAULT_DEPTH)
    check.add_argument("--max-traces", type=int, default=DEFAULT_TRACES)
    check.add_argument("--timeout", type=float, default=None, help="seconds per solver call")
    check.add_argument(
        "--memory", type=int, default=None, metavar="MIB", help="memory budget and solver cap, in MiB (default 4096)"
    )
    budget.add_options(check, memory=False)
    check.add_argument(
        "--format",
        choices=CHECK_FORMATS,
        default="text",
        help="text (default), json, markdown (for a PR review), itf (Apalache/Quint traces), junit (CI)",
    )
    check.add_argument("--all-fields", action="store_true", help=ALL_FIELDS_HELP)
    check.add_argument("-v", "--verbose", action="store_true", help="engine details on verdict lines, whole")
    check.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="depth-by-depth progress on stderr (default: a status line when stderr is a terminal)",
    )
    check.add_argument(
        "--symbolic-policy",
        action="store_true",
        help="keep policy constants symbolic (within their declared ranges) and report for which values "
        "each property fails",
    )
    check.add_argument(
        "--view",
        default=None,
        metavar="FIELDS",
        help="comma-separated ledger fields that make two traces distinct (default: the property's view, "
        "else every field the spec reads)",
    )
    check.add_argument(
        "--engine",
        choices=("z3", "explicit", "auto"),
        default="z3",
        help="z3 (bounded model checking, default); explicit (breadth-first search over the executable model, "
        "reduced: cone of influence, saturated counters, symmetry, one shard when the property's shard evolves "
        "alone); auto, the fastest: explicit where one shard decides the property (the ledger environment) or "
        "the fleet has one shard (with --prove: where the reduced state space is known to be finite, else a "
        "bounded probe), else z3 with a Spacer proof racing it in a second process (a property that "
        "holds comes back 'proved'). The explicit engine reports no lax traces",
    )
    check.add_argument(
        "--prove",
        action="store_true",
        help="where no violation is found, try an unbounded proof (Spacer) and report 'proved'",
    )

    gen = sub.add_parser(
        "gen",
        help="generate pytest cases from every counterexample",
        epilog=EXAMPLES["gen"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gen.add_argument("spec", nargs="?", default=None)
    gen.add_argument("--out", default=None, help="output directory (default: generated_tests/)")
    gen.add_argument("--check", action="store_true", help="change nothing; exit 1 with a diff on drift")
    gen.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress on stderr (default: a status line when stderr is a terminal)",
    )
    budget.add_options(gen)
    for module in _command_modules(args):
        module.register(sub)
    return parser


# Commands that live in modules of their own: each has `register(subparsers)`, which adds its
# parser with `set_defaults(run=...)`, and the `run(namespace) -> exit code` it names.
COMMAND_MODULES: tuple[str, ...] = (
    "model.prove",
    "model.diff",
    "model.mutate",
    "model.claims",
    "model.findings",
    "model.conform",
    "model.report",
    "model.ci",
)


def _command_modules(args: Sequence[str] | None = None) -> list[Any]:
    """The command modules to register: all of them, unless `args` name a command (the first
    argument that is not an option), in which case that command's module or none."""
    import importlib

    names = list(COMMAND_MODULES)
    command = next((a for a in args or () if not a.startswith("-")), None)
    if command in ("replay", "check", "gen"):
        names = []
    elif command is not None and f"model.{command}" in COMMAND_MODULES:
        names = [f"model.{command}"]
    return [importlib.import_module(name) for name in names]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args or ["check"])
    first_run = not args
    if first_run:
        args = ["check"]
    ns = parser.parse_args(args)
    try:
        with budget.using(budget.from_options(ns)) as limits:
            code = _dispatch(parser, ns, first_run)
        spent = limits.spent
        if spent is not None:
            print(f"ledgercheck: the {spent} ran out; the results above are what was established", file=sys.stderr)
            return EXIT_UNKNOWN
        return code
    except LedgercheckError as exc:
        print(f"ledgercheck: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        print("ledgercheck: interrupted; nothing was written", file=sys.stderr)
        return EXIT_UNKNOWN


def _dispatch(parser: argparse.ArgumentParser, ns: argparse.Namespace, first_run: bool) -> int:
    """Run the command `ns` names (under the budget `main` made active)."""
    if ns.command == "replay":
        return cmd_replay(ns)
    if ns.command == "check":
        code = cmd_check(ns)
        if first_run:
            print(
                "\nNext: 'ledgercheck replay' shows the seed's trace on both variants; "
                "'ledgercheck gen' writes a pytest case per counterexample; "
                "'ledgercheck check --help' lists the options."
            )
        return code
    if ns.command == "gen":
        from codegen.render import cmd_gen

        return cmd_gen(ns)
    if getattr(ns, "run", None) is not None:
        return int(ns.run(ns))
    parser.print_help()
    return EXIT_OK


def _load(path: str | None) -> SpecFile:
    return load_spec(path)


def _variants(spec_file: SpecFile, names: list[str] | None) -> list[Spec]:
    return [spec_file.variant(n) for n in (names or spec_file.variants)]


# `run_checks`, `exit_code` and `result_json` live in `model.runs`; they are re-exported here
# for callers written against the CLI module.
__all__ = [
    "build_parser",
    "cmd_check",
    "cmd_replay",
    "exit_code",
    "main",
    "print_results",
    "result_json",
    "run_checks",
    "verdict_line",
]


# --- replay ------------------------------------------------------------------------------


def cmd_replay(ns: argparse.Namespace) -> int:
    from model.replay import run

    return run(ns)


# --- check -------------------------------------------------------------------------------


def cmd_check(ns: argparse.Namespace) -> int:
    if ns.max_depth < 0 or ns.max_traces < 1:
        raise UsageError("--max-depth must be >= 0 and --max-traces >= 1")
    if ns.shards is not None and not 1 <= ns.shards <= 64:
        raise UsageError("--shards must be in [1, 64]")
    spec_file = _load(ns.spec)
    progress = progress_for(ns.progress)
    if ns.symbolic_policy and ns.policy:
        raise UsageError("--symbolic-policy and --policy cannot be combined")
    view = tuple(f.strip() for f in ns.view.split(",") if f.strip()) if ns.view else None
    if ns.memory is not None and ns.memory < 16:
        raise UsageError("--memory is in MiB and must be at least 16")
    results: list[Result] = []
    interrupted = False
    try:
        run_checks(
            spec_file,
            ns.variant,
            ns.property,
            ns.environment,
            ns.shards,
            None if ns.symbolic_policy else dict(ns.policy),
            ns.max_depth,
            ns.max_traces,
            ns.timeout,
            progress,
            view,
            prove=ns.prove,
            into=results,
            memory=ns.memory,
            engine=ns.engine,
        )
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if progress is not None:
            progress.close()
    if ns.format == "json":
        print(json.dumps([result_json(r) for r in results], indent=2, default=str))
    elif ns.format == "text":
        print_results(spec_file, results, bool(ns.property), ns.all_fields, ns.verbose)
    else:
        print(render_check(ns.format, spec_file, results, all_fields=ns.all_fields))
    if interrupted:
        print(
            f"ledgercheck: interrupted after {len(results)} result(s); the rest were not established", file=sys.stderr
        )
        return EXIT_UNKNOWN
    return exit_code(results)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
