"""The `ledgercheck` command line: the commands layer. Every command's options are declared
here (the options several commands share once, as parent parsers), and each command is
dispatched to a plain function below it (`HANDLERS`); nothing below imports this module.
`replay` and `check` print from here; the checks themselves are `model.runs`'s.

Exit codes (a public contract, documented in the README): 0 every verdict matches the
spec's expectations (or the command did its job); 1 a verdict differs from its expectation,
or `gen --check` found drift; 2 bad input (spec, arguments, files); 3 the solver could not
decide in time, or an internal inconsistency was detected (never reported as a pass).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ledgercheck.model import budget, console, executor, resultcache
from ledgercheck.model.console import progress_for
from ledgercheck.model.errors import EXIT_MISMATCH, EXIT_OK, EXIT_UNKNOWN, LedgercheckError, UsageError
from ledgercheck.model.formats import CHECK_FORMATS, REPLAY_FORMATS, render_check
from ledgercheck.model.result import Result
from ledgercheck.model.runs import (
    DEFAULT_DEPTH,
    DEFAULT_TRACES,
    MUTATE_DEPTH,
    CheckRequest,
    exit_code,
    result_json,
    run_checks,
)
from ledgercheck.model.spec import DEFAULT_SPEC, Spec, SpecFile, load_spec
from ledgercheck.model.textout import print_results, verdict_line

ALL_FIELDS_HELP = "show every field in trace figures (default: the property's, then the changed ones)"

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
    "  ledgercheck check --format itf > traces.itf.json        # traces for Apalache/Quint tooling\n"
    "  ledgercheck check --jobs 1              # one check after the other, in this process",
    "gen": "examples:\n  ledgercheck gen                         # regenerate generated_tests/\n"
    "  ledgercheck gen --check                 # exit 1 with a diff when they drifted",
    "prove": "examples:\n"
    "  ledgercheck prove                                   # every property, both variants, controller, 4 shards\n"
    "  ledgercheck prove --variant fixed --property no_condemnation_by_inherited_streak\n"
    "  ledgercheck prove --environment ledger --engine kind --max-k 6",
    "diff": "examples:\n"
    "  ledgercheck diff as_written fixed                        # two variants of the bundled spec\n"
    "  ledgercheck diff old/fleet_health.toml spec/fleet_health.toml:fixed",
    "mutate": "examples:\n"
    "  ledgercheck mutate                       # every mutant of the bundled spec's `fixed`\n"
    "  ledgercheck mutate --max-mutants 20 --seed 1 --jobs 2\n"
    "  ledgercheck mutate --executor ray --jobs 2   # on Ray (RAY_ADDRESS, or a local instance)",
    "report": "examples:\n"
    "  ledgercheck report --html report.html            # every variant and property, controller, 4 shards\n"
    "  ledgercheck report --html report.html --variant as_written --max-traces 1\n"
    "  ledgercheck report spec/examples/breaker.toml --environment ledger --html breaker.html",
    "claims": "examples:\n  ledgercheck claims                     # print the table\n"
    "  ledgercheck claims --write README.md   # update the README\n"
    "  ledgercheck claims --check README.md   # exit 1 when it is stale",
    "findings": "examples:\n  ledgercheck findings                     # print the table\n"
    "  ledgercheck findings --write README.md   # update the README\n"
    "  ledgercheck findings --check README.md   # exit 1 when it is stale",
    "ci": "examples:\n"
    "  ledgercheck ci\n"
    "  ledgercheck ci --impl path/to/fleet_health.py:GenerationFleetHealth\n"
    "  ledgercheck ci spec/fleet_health.toml --out generated_tests\n"
    "  ledgercheck ci --base origin/main   # also fail on what the change checks less",
}

PROGRESS_HELP = "progress on stderr (default: a status line when stderr is a terminal)"
PROVE_ENGINES = ("auto", "spacer", "kind", "explicit")


def _policy_arg(text: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name.strip(), int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"policy value must be an integer: {text!r}") from None


# --- the options several commands share, each declared once ------------------------------
# Each returns a fresh parent parser (argparse shares a parent's actions with its children, so
# one parent per set of defaults keeps one command's defaults from leaking into another's).


def _parent() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(add_help=False)


def spec_option(what: str = "spec file") -> argparse.ArgumentParser:
    parent = _parent()
    parent.add_argument("spec", nargs="?", default=None, help=f"{what} (default: {DEFAULT_SPEC.name} bundled)")
    return parent


def selection_options(verb: str = "check", variants: str = "variant(s)") -> argparse.ArgumentParser:
    """--variant, --property, --environment: which results a run covers."""
    parent = _parent()
    parent.add_argument(
        "--variant", action="append", default=None, help=f"{variants} to {verb}, repeatable (default: all)"
    )
    parent.add_argument(
        "--property", action="append", default=None, help=f"property to {verb}, repeatable (default: all)"
    )
    parent.add_argument(
        "--environment",
        default=None,
        help=f"{verb} in this environment only (default: every environment each property applies to)",
    )
    return parent


def fleet_options(shards: int | None = None, policy: bool = True) -> argparse.ArgumentParser:
    """--shards, and --policy: the fleet and the policy constants a run uses."""
    parent = _parent()
    parent.add_argument(
        "--shards",
        type=int,
        default=shards,
        help=f"fleet size (default: {shards if shards is not None else 'the spec' + chr(39) + 's'})",
    )
    if policy:
        parent.add_argument(
            "--policy",
            action="append",
            type=_policy_arg,
            default=[],
            metavar="NAME=VALUE",
            help="override a policy constant (repeatable)",
        )
    return parent


def depth_options(depth: int = DEFAULT_DEPTH, traces: bool = True) -> argparse.ArgumentParser:
    """--max-depth (and --max-traces): how deep a bounded search goes, how much it keeps."""
    parent = _parent()
    parent.add_argument(
        "--max-depth",
        type=int,
        default=None,
        help=f"search depth, in steps (default: the spec's [spec] max_depth, else {depth})",
    )
    if traces:
        parent.add_argument(
            "--max-traces",
            type=int,
            default=DEFAULT_TRACES,
            help=f"distinct traces kept per result (default {DEFAULT_TRACES})",
        )
    return parent


def solver_options(symbolic: str | None = None) -> argparse.ArgumentParser:
    """--timeout (per solver call), and --symbolic-policy where the command has it."""
    parent = _parent()
    parent.add_argument("--timeout", type=float, default=None, help="seconds per solver call")
    if symbolic is not None:
        parent.add_argument("--symbolic-policy", action="store_true", help=symbolic)
    return parent


def budget_options(memory: bool = True) -> argparse.ArgumentParser:
    """--time-budget (and --memory): the budgets `main` runs every command under."""
    parent = _parent()
    budget.add_options(parent, memory=memory)
    return parent


def progress_option(help_text: str = PROGRESS_HELP) -> argparse.ArgumentParser:
    parent = _parent()
    parent.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help=help_text)
    return parent


def cache_option() -> argparse.ArgumentParser:
    """--no-cache: solve every check again (see `model.resultcache`)."""
    parent = _parent()
    parent.add_argument(
        "--no-cache",
        action="store_true",
        help="solve every check afresh instead of reading the results an earlier run established for the same "
        "spec, question and ledgercheck ($LEDGERCHECK_CACHE/results, default ~/.cache/ledgercheck)",
    )
    return parent


def format_option(choices: Sequence[str], help_text: str = "output format (default: text)") -> argparse.ArgumentParser:
    parent = _parent()
    parent.add_argument("--format", choices=choices, default="text", help=help_text)
    return parent


def table_options() -> argparse.ArgumentParser:
    """--write/--check FILE: the README tables `claims` and `findings` regenerate."""
    parent = _parent()
    parent.add_argument("--write", metavar="README", default=None, help="write the table into this file")
    parent.add_argument("--check", metavar="README", default=None, help="exit 1 when this file's table is stale")
    return parent


def build_parser(args: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command. Building it imports no engine: a command's module loads
    when the command runs (a check that never runs the solver never loads it). `args` is
    accepted for callers written against the older lazy parser and is not needed."""
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

    def command(name: str, help_text: str, *parents: argparse.ArgumentParser, **extra: Any) -> Any:
        return sub.add_parser(
            name,
            help=help_text,
            parents=list(parents),
            epilog=EXAMPLES.get(name),
            formatter_class=argparse.RawDescriptionHelpFormatter,
            **extra,
        )

    replay = command(
        "replay",
        "drive the executable model through events and print each state",
        fleet_options(),
        format_option(REPLAY_FORMATS),
    )
    replay.add_argument("spec_or_event", nargs="*", metavar="[SPEC] EVENTS", help="a spec file, then calls")
    replay.add_argument("--variant", action="append", default=None, help="variant(s) to replay (default: all)")
    replay.add_argument(
        "--environment",
        default=None,
        help="environment whose actions the events name (default: the spec's default_environment, else ledger)",
    )
    replay.add_argument("--scenario", default=None, help="replay a scenario written in the spec (default: seed)")
    replay.add_argument("--file", default=None, help="read events from a file, one per line")
    replay.add_argument("--shard", type=int, default=None, help="shard to show in the table")
    replay.add_argument("--all-fields", action="store_true", help=ALL_FIELDS_HELP)

    check = command(
        "check",
        "bounded model checking of the spec's properties",
        spec_option(),
        selection_options("check"),
        fleet_options(),
        depth_options(),
        solver_options(
            "keep policy constants symbolic (within their declared ranges) and report for which values "
            "each property fails"
        ),
        budget_options(),
        cache_option(),
        progress_option("depth-by-depth progress on stderr (default: a status line when stderr is a terminal)"),
        format_option(
            CHECK_FORMATS,
            "text (default), json, markdown (for a PR review), itf (Apalache/Quint traces), junit (CI)",
        ),
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
        help="z3 (bounded model checking, default; a property the spec expects to hold is first given to Spacer, "
        "whose inductive invariant, once checked, settles every depth at once); explicit (breadth-first "
        "search over the executable model, reduced: cone of influence, saturated counters, symmetry, one "
        "shard when the property's shard evolves alone); auto, the fastest: explicit where one shard decides "
        "the property (the ledger environment) or the fleet has one shard (with --prove: where the reduced "
        "state space is known to be finite, else a bounded probe), else z3 with a Spacer proof racing it in a"
        " second process (a property that holds comes back 'proved'; no race where the spec expects a "
        "violation). The explicit engine reports no lax "
        "traces",
    )
    check.add_argument(
        "--prove",
        action="store_true",
        help="where no violation is found, try an unbounded proof (Spacer) and report 'proved'",
    )
    check.add_argument("--all-fields", action="store_true", help=ALL_FIELDS_HELP)
    check.add_argument("-v", "--verbose", action="store_true", help="engine details on verdict lines, whole")
    executor.add_options(check)

    gen = command(
        "gen",
        "generate pytest cases from every counterexample",
        spec_option(),
        progress_option(),
        budget_options(),
        cache_option(),
    )
    executor.add_options(gen)  # the verdicts its tests are drawn from: independent checks
    gen.add_argument(
        "--out", default=None, help="output directory (default: generated_tests/ beside the spec's folder)"
    )
    gen.add_argument("--check", action="store_true", help="change nothing; exit 1 with a diff on drift")

    prove = command(
        "prove",
        "unbounded proofs (Spacer / k-induction), refutations with the shortest trace",
        spec_option(),
        selection_options("prove"),
        fleet_options(),
        solver_options("prove for every policy in the declared ranges"),
        format_option(("text", "json")),
        progress_option("progress on stderr, a line per phase (default: a status line when stderr is a terminal)"),
        budget_options(),
    )
    prove.add_argument(
        "--engine",
        choices=PROVE_ENGINES,
        default="auto",
        help="auto (default: explicit where one shard decides, else Spacer then k-induction), spacer, kind "
        "(k-induction) or explicit",
    )
    prove.add_argument("--max-k", type=int, default=8, help="deepest k for k-induction (default 8)")
    prove.add_argument("-v", "--verbose", action="store_true", help="the engines' notes on verdict lines, whole")
    executor.add_options(prove)  # the proofs are independent jobs

    diff = command(
        "diff",
        "the shortest trace on which two specs (or variants) disagree, and the verdicts that changed",
        fleet_options(),
        depth_options(traces=False),
        format_option(("text", "json")),
        budget_options(),
    )
    diff.add_argument("a", help="variant name, spec file, or spec.toml:variant")
    diff.add_argument("b", help="variant name, spec file, or spec.toml:variant")
    diff.add_argument(
        "c",
        nargs="?",
        default=None,
        help="with three: the spec, then its two variants (`diff spec.toml fixed as_written`, as --spec)",
    )
    diff.add_argument("--spec", default=None, help="the spec whose variants bare names refer to")
    diff.add_argument(
        "--environment",
        default=None,
        help="the environment both run in (default: the spec's default_environment, else controller where "
        "the spec has one, else ledger, else its first)",
    )

    mutate = command(
        "mutate",
        "mutation testing of the spec: how many single-point mutants do the properties and tests kill?",
        spec_option(),
        fleet_options(shards=2, policy=False),
        depth_options(MUTATE_DEPTH, traces=False),
        format_option(("text", "json"), "text (default) or json (adds a `baseline` object)"),
        progress_option("a line per mutant on stderr (default: when stderr is a terminal)"),
        budget_options(),
    )
    executor.add_options(mutate, "--workers")
    mutate.add_argument("--max-mutants", type=int, default=None, help="check a deterministic sample of this size")
    mutate.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")

    command(
        "claims",
        "regenerate (or check) the README table of the seed's claims from proofs",
        spec_option(),
        table_options(),
        fleet_options(policy=False),
        budget_options(),
    )
    command(
        "findings",
        "regenerate (or check) the README table of what the properties find, from proofs",
        spec_option(),
        table_options(),
        fleet_options(policy=False),
        budget_options(),
    )

    report = command(
        "report",
        "check the spec and write one self-contained HTML page: verdicts, traces, state diagram",
        spec_option(),
        selection_options("check"),
        fleet_options(),
        depth_options(),
        solver_options(),
        progress_option("depth-by-depth progress on stderr (default: a status line when stderr is a terminal)"),
        budget_options(),
        cache_option(),
        description="Run the checks of `ledgercheck check` and write the results as one HTML page that\n"
        "needs nothing else (inline CSS, inline SVG, no script, no network). Exit codes as for check.",
    )
    report.add_argument("--html", required=True, metavar="FILE", help="where to write the page (replaced atomically)")
    executor.add_options(report)

    ci = command(
        "ci",
        "everything a ledger change must pass: verdicts, drift, generated tests, conformance",
        spec_option(),
        budget_options(),
        progress_option(),
        cache_option(),
        description="The one command a ledger repository's CI runs: every property in every environment it "
        "applies to, for every variant; `gen --check`; the generated tests against the executable model, and "
        "with --impl against that implementation, with its conformance. A summary naming each failure comes "
        "first. Exit 0 only when every verdict matches the spec's expectation and nothing drifted or failed.",
    )
    ci.add_argument(
        "--impl", default=None, metavar="TARGET", help="also test this implementation: module:Class or file.py:Class"
    )
    ci.add_argument(
        "--out", default=None, help="the generated tests' folder (default: generated_tests/ beside the spec's folder)"
    )
    ci.add_argument(
        "--conform-depth", type=int, default=None, metavar="D", help="conformance enumeration depth (conform's default)"
    )
    ci.add_argument(
        "--base",
        default=None,
        metavar="REF",
        help="fail on what the change checks less than the spec at REF (a git revision, e.g. origin/main, "
        "or a spec file): a property removed, an expectation turned to violated, a contract added, ...",
    )
    ci.add_argument(
        "--call-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="the longest one call of the implementation may take, in the tests and in conform (conform's default)",
    )
    executor.add_options(ci)

    _conform_parser(sub)
    return parser


def _conform_parser(subparsers: Any) -> None:
    """`conform`: its options (the defaults are the conformance package's own)."""
    from ledgercheck.model.conformance.defaults import (
        CALL_TIMEOUT,
        COUNTEREXAMPLE_DEPTH,
        COUNTEREXAMPLE_TRACES,
        DEFAULT_DEPTH,
        DEFAULT_RANDOM,
        ENUMERATION_SHARDS,
    )

    parser = subparsers.add_parser(
        "conform",
        help="check an implementation against the executable model, call by call",
        description="Drive an implementation of the ledger's API and the executable model of a spec variant "
        "through the same calls (every sequence up to --depth, seeded random traces, the shortest trace to every "
        "branch of the spec, every counterexample "
        "of the checker) and compare everything the API shows after every call.",
        epilog="examples:\n"
        "  ledgercheck conform --impl nemo_rl.models.generation.fleet_health:GenerationFleetHealth\n"
        "  ledgercheck conform --impl tests/impl/fleet_health_clean.py:GenerationFleetHealth --depth 6\n"
        "  ledgercheck conform --impl path/to/fleet_health.py:GenerationFleetHealth --variant as_written "
        "--no-counterexamples",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("spec", nargs="?", default=None, help="spec file (default: the bundled spec)")
    parser.add_argument(
        "--impl",
        default=None,
        metavar="TARGET",
        help="module:Class or path/to/file.py:Class (default: the spec's [implementation] target)",
    )
    parser.add_argument(
        "--variant", default=None, help="the variant to conform to (default: the first whose properties all hold)"
    )
    parser.add_argument(
        "--depth",
        type=int,
        default=None,
        help=f"enumerate every call sequence up to D (default: the spec's [conform] depth, else {DEFAULT_DEPTH})",
    )
    parser.add_argument(
        "--shards",
        type=int,
        default=None,
        help=f"fleet size (default: the spec's default_shards, at most {ENUMERATION_SHARDS} for the enumeration; "
        "the branches' traces use one instance)",
    )
    parser.add_argument(
        "--random",
        type=int,
        default=None,
        metavar="N",
        help=f"random calls in all (default: the spec's [conform] random, else {DEFAULT_RANDOM})",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random traces (default 0)")
    parser.add_argument(
        "--policy",
        action="append",
        type=_policy_arg,
        default=[],
        metavar="NAME=VALUE",
        help="override a policy constant",
    )
    parser.add_argument(
        "--no-counterexamples", action="store_true", help="skip the checker's counterexamples (the slowest source)"
    )
    parser.add_argument(
        "--no-runs",
        action="store_true",
        help="skip the long runs (every pair of calls, and every trace to a branch, made over and over)",
    )
    parser.add_argument(
        "--run-calls",
        type=int,
        default=None,
        metavar="N",
        help="how long each long run is, in calls (default: the spec's [conform] run_calls, else 100); a class "
        "that caps a counter at 256 needs more",
    )
    parser.add_argument(
        "--no-branches",
        action="store_true",
        help="skip the shortest trace to every branch of the spec (the coverage search's, at the policy given), "
        "and the probes along them",
    )
    parser.add_argument(
        "--no-probes",
        action="store_true",
        help="skip the probes: every call at each state the traces to the branches pass through",
    )
    parser.add_argument(
        "--no-policies",
        action="store_true",
        help="skip the random and branch traces at other policies the spec allows (the smallest, the largest, "
        "six drawn with --seed; run only where no --policy is given)",
    )
    parser.add_argument(
        "--cex-depth",
        type=int,
        default=None,
        metavar="K",
        help=f"checker depth for counterexamples (default: the spec's [spec] max_depth, else {COUNTEREXAMPLE_DEPTH})",
    )
    parser.add_argument(
        "--cex-traces",
        type=int,
        default=COUNTEREXAMPLE_TRACES,
        metavar="M",
        help=f"distinct counterexamples per result (default {COUNTEREXAMPLE_TRACES})",
    )
    executor.add_options(parser)  # the checker's counterexamples: independent checks
    parser.add_argument(
        "--merge",
        choices=("ledger", "full"),
        default=None,
        help="enumeration merges prefixes that reach the same model state: its ledger and non-metric fleet "
        "values (ledger, the default unless the spec's [conform] merge says: all the model's behaviour "
        "depends on), or every variable, history and metrics included (full: many more states)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="check afresh instead of reading the counterexamples cached by an earlier run "
        "($LEDGERCHECK_CACHE, default ~/.cache/ledgercheck)",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a line on stderr for each step of the sources (default: a line at most every 30 s, so that a long "
        "run is never silent; --no-progress: none)",
    )
    parser.add_argument(
        "--call-timeout",
        type=float,
        default=CALL_TIMEOUT,
        metavar="SECONDS",
        help=f"a call of the implementation that has not returned after this long is named, and conform exits 3 "
        f"(default {CALL_TIMEOUT:g}; 0: only the time budget bounds it)",
    )
    budget.add_options(parser)


def parse(parser: argparse.ArgumentParser, args: Sequence[str]) -> argparse.Namespace:
    """A command's options are accepted anywhere after it, before or after its positional
    arguments (`replay SPEC --variant V EVENTS...`, `check SPEC --shards 2`)."""
    subparsers = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    choices: dict[str, argparse.ArgumentParser] = subparsers.choices if subparsers is not None else {}
    if args and args[0] in choices:
        ns = choices[args[0]].parse_intermixed_args(list(args[1:]))
        ns.command = args[0]
        return ns
    return parser.parse_args(list(args))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    first_run = not args
    if first_run:
        args = ["check"]
    ns = parse(parser, args)
    with console.past_a_closed_pipe(), budget.hears_ctrl_c():
        code = _main(parser, ns, first_run)
        if budget.interrupted() and code != EXIT_UNKNOWN:  # raised where Python swallowed it (a finalizer)
            print("ledgercheck: interrupted; what was established is above", file=sys.stderr)
            return EXIT_UNKNOWN
        return code


def _main(parser: argparse.ArgumentParser, ns: argparse.Namespace, first_run: bool) -> int:
    try:
        with (
            budget.using(budget.from_options(ns)) as limits,
            executor.using(executor.for_command(ns)),
            resultcache.afresh(getattr(ns, "no_cache", False)),
        ):
            with budget.stops_when_interrupted(
                f"`ledgercheck {ns.command}`, in a call into Z3", "the results above are what was established"
            ):
                code = _dispatch(parser, ns, first_run)
        spent = limits.spent
        if spent is not None:
            print(f"ledgercheck: the {spent} ran out; the results above are what was established", file=sys.stderr)
            # A failure found before the budget ran out stands (`ci` FAILED and exited 3): what
            # was not established is undecided, what was is not undone.
            return code if code == EXIT_MISMATCH else EXIT_UNKNOWN
        return code
    except LedgercheckError as exc:
        print(f"ledgercheck: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # written past `console.past_a_closed_pipe`: the verdict is not known
        print("ledgercheck: the output's reader left before the verdict; no verdict", file=sys.stderr)
        return EXIT_UNKNOWN
    except KeyboardInterrupt:
        print("ledgercheck: interrupted; nothing was written", file=sys.stderr)
        return EXIT_UNKNOWN


def _dispatch(parser: argparse.ArgumentParser, ns: argparse.Namespace, first_run: bool) -> int:
    """Run the command `ns` names (under the budget `main` made active)."""
    if ns.command == "check":
        code = cmd_check(ns)
        if first_run:
            print(
                "\nNext: 'ledgercheck replay' shows the seed's trace on both variants; "
                "'ledgercheck gen' writes a pytest case per counterexample; "
                "'ledgercheck check --help' lists the options."
            )
        return code
    if ns.command == "replay":
        return cmd_replay(ns)
    if ns.command == "conform":
        from ledgercheck.model.conformance.command import run

        return run(ns)
    where = HANDLERS.get(ns.command or "")
    if where is None:
        parser.print_help()
        return EXIT_OK
    module, _, name = where.partition(":")
    function: Callable[..., int] = getattr(importlib.import_module(module), name)
    return int(function(**_options_for(function, ns)))


def _options_for(function: Callable[..., int], ns: argparse.Namespace) -> dict[str, Any]:
    """The parsed options a command's function takes, by name (its parameters are named after them)."""
    return {name: getattr(ns, name) for name in inspect.signature(function).parameters}


# Where each command's function is (all but `replay` and `check`, which live here, and
# `conform`): imported only when the command runs. A new command: its parser in
# `build_parser`, its line here, its function (parameters named after its options) below.
HANDLERS: dict[str, str] = {
    "gen": "ledgercheck.codegen.render:cmd_gen",
    "prove": "ledgercheck.model.prove:prove_command",
    "diff": "ledgercheck.model.diff:diff_command",
    "mutate": "ledgercheck.model.mutate:mutate_command",
    "claims": "ledgercheck.model.claims:claims_command",
    "findings": "ledgercheck.model.findings:findings_command",
    "report": "ledgercheck.model.report:report_command",
    "ci": "ledgercheck.model.ci:ci_command",
}


def _load(path: str | None) -> SpecFile:
    return load_spec(path)


def _variants(spec_file: SpecFile, names: list[str] | None) -> list[Spec]:
    return [spec_file.variant(n) for n in (names or spec_file.variants)]


# `run_checks`, `exit_code` and `result_json` live in `model.runs`; they are re-exported here
# for callers written against the CLI module.
__all__ = [
    "HANDLERS",
    "build_parser",
    "cmd_check",
    "cmd_replay",
    "exit_code",
    "main",
    "parse",
    "print_results",
    "result_json",
    "run_checks",
    "verdict_line",
]


# --- replay ------------------------------------------------------------------------------


def cmd_replay(ns: argparse.Namespace) -> int:
    from ledgercheck.model.replay import run

    return run(ns)


# --- check -------------------------------------------------------------------------------


def cmd_check(ns: argparse.Namespace) -> int:
    spec_file = _load(ns.spec)
    if ns.symbolic_policy and ns.policy:
        raise UsageError("--symbolic-policy and --policy cannot be combined")
    view = tuple(f.strip() for f in ns.view.split(",") if f.strip()) if ns.view else None
    request = CheckRequest(
        spec_file,
        variants=tuple(ns.variant) if ns.variant else None,
        properties=tuple(ns.property) if ns.property else None,
        environment=ns.environment,
        shards=ns.shards,
        policy=None if ns.symbolic_policy else dict(ns.policy),
        max_depth=spec_file.variant().search_depth(ns.max_depth, DEFAULT_DEPTH),
        max_traces=ns.max_traces,
        timeout=ns.timeout,
        view=view,
        prove=ns.prove,
        memory=ns.memory,
        engine=ns.engine,
    )
    progress = progress_for(ns.progress)
    results: list[Result] = []
    interrupted = False
    try:
        run_checks(request, progress, into=results)
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
    reused = sum(r.reused for r in results)
    if reused:
        print(
            f"ledgercheck: {reused} of {len(results)} result(s) answered from the cache of results, as a fresh "
            "check prints them (--no-cache solves them again)",
            file=sys.stderr,
        )
    if interrupted:
        print(
            f"ledgercheck: interrupted after {len(results)} result(s); the rest were not established", file=sys.stderr
        )
        return EXIT_UNKNOWN
    return exit_code(results)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
