"""`ledgercheck ci`: the one command a ledger repository's CI runs.

An engineer who changed the ledger needs one answer, "did my change break anything a property
or a regression test can see?", and needs it named, not buried. So `ci` runs every step that
can say no, and prints a summary that names each failure *before* anything else:

1. verdicts: every variant x every property x every environment the property applies to,
   then the proofs of those that held up to its depth, and whether the callers the spec
   models keep the events' contracts (`Spec.contract_property`);
2. drift: is `generated_tests/` what the spec produces now (`gen --check`)?
3. the generated tests against the spec's executable model (pytest, in a subprocess);
4. with `--impl TARGET`: the generated tests against that implementation, and `conform`.

Steps 3 and 4 run in subprocesses started first, so they overlap with step 1, whose checks run
on the command's executor (`--jobs`, `--executor`: one worker per core by default, see
`model.executor`); step 2 reuses step 1's verdicts, so it waits for them (its search for the
shortest trace to every branch, which needs none, runs in a thread beside them). Exit codes: 0 every
step passed; 1 something failed (a mismatch, drift, a failing test, a divergence), even if
something else was undecided; 3 something was undecided and nothing failed; 2 bad input.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ledgercheck.model import budget, executor
from ledgercheck.model.console import Heartbeat, Ticker, progress_for
from ledgercheck.model.errors import EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_OK, EXIT_UNKNOWN
from ledgercheck.model.runs import (
    DEFAULT_DEPTH,
    DEFAULT_TRACES,
    PROOF_CALL_SECONDS,
    attention,
    mismatch_line,
    outcome,
)
from ledgercheck.model.spec import SpecFile, load_spec

if TYPE_CHECKING:
    from ledgercheck.codegen.gate import Verdicts

PASSED, FAILED, UNDECIDED, SKIPPED = "passed", "FAILED", "UNDECIDED", "skipped"
NOTE = "NOTE"
"""A summary line that explains the failure above it, and is not one itself."""
BAD_INPUT = "BAD INPUT"
"""A step that judged nothing: what it was given was refused (conform refused the binding)."""


@dataclass
class Step:
    """One step of the run: what it is, how it ended, in how long, and what a reader needs."""

    name: str
    status: str = SKIPPED
    headline: str = ""
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)  # one line per failure, for the summary
    detail: str = ""  # the long form, printed after the summary
    notes: list[str] = field(default_factory=list)  # what is worth knowing and fails nothing (vacuity)


CHILD_GRACE = 10.0
"""Seconds a child may run past the command's deadline: a `conform` child (given the time
left as its own budget) stops within its grace period and naming time, then says why."""
WAIT_TICK = 1.0
"""Seconds between two reports of a child still running (a heartbeat prints few of them)."""


@dataclass
class Subprocess:
    """A step running in a child process, its output in a temporary file (no pipe to fill)."""

    argv: list[str]
    started: float
    process: subprocess.Popen[bytes]
    output: IO[bytes]
    ended: list[float] = field(default_factory=list)
    outcomes: tuple[Path, Path] | None = None
    """A run of the generated tests: where its tests note what they did (`--ledger-outcomes`),
    and the folder of the generated modules whose every test must have a note."""

    @classmethod
    def start(cls, argv: list[str], cwd: Path, extra: Mapping[str, str] | None = None) -> Subprocess:
        output = tempfile.TemporaryFile()
        env = {**os.environ, **(extra or {})}
        env.pop("PYTEST_ADDOPTS", None)
        env.setdefault("NO_COLOR", "1")
        env["COLUMNS"] = "400"  # pytest cuts its short summary to the terminal width
        process = subprocess.Popen(
            argv, cwd=cwd, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        child = cls(argv, time.monotonic(), process, output)
        # A watcher notes when the child ends, so its time is its own, not the wait for the others.
        threading.Thread(target=child._watch, daemon=True).start()
        return child

    def _kill_family(self) -> None:
        """Stop the child and everything it started (pytest's forked run, conform's workers):
        killed alone, its children would run on, orphaned, in the call that never returns."""
        from ledgercheck.model.executor import family

        for pid in reversed(family(self.process.pid)):  # the whole family is read before any dies
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def _watch(self) -> None:
        self.process.wait()
        self.ended.append(time.monotonic())

    def finish(self, waiting: Callable[[float], None] | None = None) -> tuple[int, str, float]:
        """The child's exit code, output and seconds, once it ends; a child still running past
        the command's time budget (and the grace a `conform` child needs to name what it was
        doing) is stopped, and ends as undecided (exit 3), with a last line saying so.
        `waiting` is told the child's seconds so far every `WAIT_TICK` while it runs, so that
        a log says where ci is (a slow implementation's tests run for minutes)."""
        limits = budget.active()
        left = limits.remaining()
        until = None if left is None else time.monotonic() + left + CHILD_GRACE
        overran = ""
        try:
            while True:
                slice_ = WAIT_TICK if until is None else max(min(WAIT_TICK, until - time.monotonic()), 0.0)
                try:
                    code = self.process.wait(slice_)
                    break
                except subprocess.TimeoutExpired:
                    if until is not None and time.monotonic() >= until:
                        raise
                    if waiting is not None:
                        waiting(time.monotonic() - self.started)
        except subprocess.TimeoutExpired:
            self._kill_family()
            self.process.wait()
            spent = limits.exhausted(memory=False) or "time budget"
            overran = f"\nledgercheck ci: the {spent} ran out while this step ran; it was stopped\n"
            code = EXIT_UNKNOWN
        while not self.ended:
            time.sleep(0.01)
        seconds = self.ended[0] - self.started
        self.output.seek(0)
        text = self.output.read().decode("utf-8", errors="replace") + overran
        self.output.close()
        return code, text, seconds


def ci_command(
    *,
    spec: str | None,
    impl: str | None,
    out: str | None,
    conform_depth: int | None,
    call_timeout: float | None,
    progress: bool | None,
    base: str | None = None,
) -> int:
    """`ledgercheck ci`: every step, the summary first; exit 0 only when all passed."""
    from ledgercheck.model.conformance.deadline import check_limit

    check_limit(call_timeout)
    spec_file = load_spec(spec)
    was = _base_of(spec_file, base)  # before anything runs: a base that cannot be read is bad input
    from ledgercheck.codegen.render import default_out_dir

    out_dir = Path(out) if out else default_out_dir(spec_file.path)
    named_by_spec = impl is None
    if impl is None:  # the class the spec binds, as `conform` takes it by default
        from ledgercheck.model.conformance.implementation import spec_target

        binding = spec_file.variant().binding
        impl = spec_target(binding.target, spec_file.path) if binding is not None and binding.target else None
    steps: list[Step] = []
    started = time.monotonic()
    reporter = progress_for(progress)
    # a log (CI, neither option): a line now and then, never minutes of silence
    heard: Callable[[str], None] | None = reporter or (Heartbeat(sys.stderr) if progress is None else None)
    say: Callable[[str], None] = heard or (lambda message: None)
    doing = ["ci: checking the verdicts"]
    ticker = Ticker(say, lambda: doing[0])

    def now(what: str) -> None:
        doing[0] = what
        say(what)

    try:
        children = _start_children(impl, conform_depth, call_timeout, spec_file, out_dir, named_by_spec)
        branches = _search_branches_beside(spec_file)
        if base is not None:
            now(f"ci: what does the change check less than the spec at {base}?")
        steps.append(_undecided_if_spent(WEAKENING, lambda: _weakening(spec_file, base, was)))
        now("ci: checking the verdicts")
        verdict_step, verdicts = _verdicts(spec_file, heard)
        steps.append(verdict_step)
        now("ci: proving what held up to the verdicts' depth")
        steps.append(_undecided_if_spent("proofs", lambda: _proofs(spec_file, verdicts, heard)))
        now("ci: do the callers the spec models keep the contracts?")
        steps.append(_undecided_if_spent(CONTRACTS, lambda: _contracts(spec_file, heard)))
        now("ci: is generated_tests/ what the spec produces now?")
        searching = time.monotonic()
        while branches.is_alive():  # a search that cannot reach a branch runs to its bounds
            branches.join(WAIT_TICK)
            seconds = time.monotonic() - searching
            say(
                f"ci: the drift step waits for the coverage tests' search (the shortest trace to every branch), "
                f"{seconds:.0f} s after the verdicts"
            )
        steps.append(_undecided_if_spent("generated tests up to date", lambda: _drift(spec_file, out_dir, verdicts)))
        started_names = {name for name, _ in children}
        for name, child in children:
            say(f"ci: waiting for {name}")
            steps.append(_finish_child(name, child, _waiting_for(name, say)))
    finally:
        ticker.stop()
        if reporter is not None:
            reporter.close()
    for name in ("tests vs model", "tests vs implementation", "conformance"):
        if name not in started_names:
            why = (
                "no --impl given, and the spec's [implementation] names no target"
                if impl is None and name != "tests vs model"
                else f"no {out_dir.name}/ directory"
            )
            steps.append(Step(name, SKIPPED, why))
    order = [
        WEAKENING,
        "verdicts",
        "proofs",
        CONTRACTS,
        "generated tests up to date",
        "tests vs model",
        "tests vs implementation",
        "conformance",
    ]
    steps.sort(key=lambda s: order.index(s.name))
    _reference_note(spec_file, steps)
    _declared_note(spec_file, steps)
    _weaker_conformance_note(spec_file, steps)
    verdicts_failed = any(s.name == "verdicts" and s.status == FAILED for s in steps)
    if verdicts_failed:  # a mismatch: `gen` refuses, so stale tests are not "run gen" yet
        for step in steps:
            step.failures = [_not_yet(line) if STALE in line else line for line in step.failures]
    code = _exit_code(steps)
    _print(spec_file, steps, code, time.monotonic() - started)
    return code


def _start_children(
    target: str | None,
    conform_depth: int | None,
    call_timeout: float | None,
    spec_file: SpecFile,
    out_dir: Path,
    named_by_spec: bool = False,
) -> list[tuple[str, Subprocess]]:
    """The generated tests (against the model; against --impl) and conformance, started now.
    The spec's own target (`named_by_spec`) is conform's to find: a failure to load it then
    names the spec's line, as `conform` alone does."""
    from ledgercheck.model.conformance.implementation import IMPORT_ROOT, import_root

    children: list[tuple[str, Subprocess]] = []
    impl = _absolute_target(target) if target is not None else None
    root = import_root(impl) if impl is not None else None
    # One module for both children: the tests run from their folder, conform from here.
    env = {IMPORT_ROOT: root} if root is not None else {}
    limit = ["--call-timeout", f"{call_timeout:g}"] if call_timeout is not None else []
    if out_dir.is_dir():
        pytest = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "--no-header"]
        pytest.append(str(out_dir.resolve()))  # run from its parent: a relative --out would be read from there
        runs: list[tuple[str, list[str], Mapping[str, str]]] = [("tests vs model", pytest, {})]
        if impl is not None:
            runs.append(("tests vs implementation", [*pytest, "--ledger-impl", impl, *limit], env))
        for name, argv, extra in runs:
            notes = Path(tempfile.mkdtemp(prefix="ledgercheck-outcomes-"))
            child = Subprocess.start([*argv, "--ledger-outcomes", str(notes)], out_dir.parent, extra)
            child.outcomes = (notes, out_dir)
            children.append((name, child))
    if impl is not None:
        conform = [
            sys.executable,
            "-m",
            "ledgercheck.model.cli",
            "conform",
            "--no-progress",  # ci says what it waits for itself
            *([] if named_by_spec else ["--impl", impl]),
            str(Path(spec_file.path).resolve()),
            *limit,
        ]
        if conform_depth is not None:
            conform += ["--depth", str(conform_depth)]
        workers = executor.active()  # where ci's own checks run, conform's run too (`ci --jobs 1`)
        if workers.jobs is not None:
            conform += ["--jobs", str(workers.jobs)]
        if workers.kind != "local":
            conform += ["--executor", workers.kind]
        left = budget.active().remaining()
        if left is not None:  # conform stops within the command's budget, naming what it was doing
            conform += ["--time-budget", f"{max(left, 1.0):.1f}"]
        children.append(("conformance", Subprocess.start(conform, Path.cwd(), env)))
    return children


def _search_branches_beside(spec_file: SpecFile) -> threading.Thread:
    """The shortest trace to every branch of the reference variant, which the drift step
    renders its coverage tests from (most of that step's time, in Python), searched in a
    thread while the verdicts run: it needs none of them. The drift step joins the thread and
    reads the search back (`render.search_branches` remembers it per spec text); a search
    that failed here is left to the drift step, which then raises its error in its turn."""
    from ledgercheck.codegen.render import search_branches

    def search() -> None:
        try:
            search_branches(spec_file)
        except Exception:  # noqa: BLE001 - the drift step searches again and reports it
            pass

    thread = threading.Thread(target=search, name="ledgercheck-ci-branches", daemon=True)
    thread.start()
    return thread


def _absolute_target(target: str) -> str:
    """`path/file.py:Class` made absolute (the children run elsewhere), whether or not the
    file is there: the generated tests, run from their own folder, must not find a file of
    that name there that conformance, run from here, does not (one step passed on a class
    the other could not load); `module:Class` as given."""
    path, sep, name = target.rpartition(":")
    if sep and (path.endswith(".py") or os.sep in path):
        return f"{Path(path).resolve()}:{name}"
    return target


def _verdicts(spec_file: SpecFile, progress: Any) -> tuple[Step, Verdicts]:
    """Every verdict, by the same checks `gen` passes its gate with (so the drift step reuses
    them: one search per (variant, property, environment) for the whole run)."""
    from ledgercheck.codegen.gate import establish

    step = Step("verdicts")
    begin = time.monotonic()
    verdicts = establish(spec_file, spec_file.variant().search_depth(None, DEFAULT_DEPTH), DEFAULT_TRACES, progress)
    results = list(verdicts.results.values())
    step.seconds = time.monotonic() - begin
    flagged = attention(results)
    mismatches = [r for r in flagged if outcome(r) == "mismatch"]
    unknown = [r for r in flagged if outcome(r) == "unknown"]
    variants = len({r.variant for r in results})
    environments = len({r.environment for r in results})
    step.headline = (
        f"{len(results)} verdict(s) ({variants} variant(s), {environments} environment(s)): "
        f"{len(mismatches)} mismatch(es), {len(unknown)} unknown"
    )
    reused = sum(r.reused for r in results)
    if reused:
        step.headline += f"; {reused} answered from the cache of results (--no-cache solves them again)"
    step.failures = [f"MISMATCH  {mismatch_line(r)}" for r in mismatches]
    step.failures += [f"UNKNOWN   {mismatch_line(r)}" for r in unknown]
    from ledgercheck.codegen.gate import checking_nothing, nothing_line
    from ledgercheck.model.textout import vacuous_lines

    empty = checking_nothing(spec_file, results)
    step.failures += [f"VACUOUS   {nothing_line(spec_file, name, where, results)}" for name, where in empty.items()]
    step.notes = [line.strip() for line in vacuous_lines([r for r in results if r.property not in empty])]
    if step.notes:
        step.headline += f"; {len(step.notes)} vacuous (below)"
    step.status = FAILED if mismatches or empty else UNDECIDED if unknown else PASSED
    if flagged:
        step.detail = _traces_of(spec_file, flagged)
    return step, verdicts


def _traces_of(spec_file: SpecFile, results: list[Any]) -> str:
    """Each result's verdict line, its property's doc and its shortest trace: what a step
    that failed on verdicts prints below the summary."""
    from ledgercheck.model.figure import trace_figure
    from ledgercheck.model.textout import outside_contracts_note, verdict_line

    lines: list[str] = []
    for result in results:
        spec = spec_file.variant(result.variant)
        prop = spec.property(result.property)
        lines.append(verdict_line(result, True))
        lines.append(f"   {prop.doc}")
        for trace in result.traces[:1]:
            lines.append(f"-- shortest trace, {trace.length}: {prop.message}")
            lines.append(trace_figure(trace, spec, prop=prop))
            note = outside_contracts_note(trace, prop)
            if note:
                lines.append(note)
        lines.append("")
    return "\n".join(lines)


def _undecided_if_spent(name: str, run: Callable[[], Step]) -> Step:
    """A step run under the command's budget: where the budget runs out in it, the step is
    undecided and says so, and the summary of every step is still printed (the drift step
    stopped `ci` with one line on stderr, and no summary, when the budget ran out in it)."""
    begin = time.monotonic()
    try:
        return run()
    except budget.BudgetExhausted as exc:
        return Step(name, UNDECIDED, str(exc), time.monotonic() - begin, [f"UNDECIDED {name}: {exc}"])


def _proofs(spec_file: SpecFile, verdicts: Verdicts, progress: Any) -> Step:
    """Every verdict that held up to the verdicts' depth where the spec expects it to hold,
    proved (`check --prove --engine auto`: Spacer, k-induction, or an exhausted explicit
    search). A violation past that depth fails the run as a mismatch does: a budget refill
    that let a slot exceed its restarts at depth 15 passed a `ci` that searched to depth 12,
    and `prove` refuted it in under a second. What no engine proves stays what the verdict
    said, held up to the depth, and is named below the summary: never a proof."""
    from ledgercheck.codegen.gate import verdict_request
    from ledgercheck.model.result import Status
    from ledgercheck.model.runs import run_checks

    step = Step("proofs")
    held = [r for r in verdicts.results.values() if r.verdict == "holds" and outcome(r) != "mismatch"]
    # A verdict whose bounded search a checked invariant made unnecessary is proved already.
    proved_before = sum(r.status == Status.PROVED or r.proved_beyond for r in held)
    bounded = {
        (r.variant, r.property, r.environment)
        for r in held
        if r.status == Status.HOLDS_TO_DEPTH and not r.proved_beyond
    }
    if not bounded:
        step.status = PASSED
        step.headline = (
            f"nothing left to prove: the {proved_before} verdict(s) that held were proved as they were checked"
        )
        return step
    begin = time.monotonic()
    depth = spec_file.variant().search_depth(None, DEFAULT_DEPTH)
    # One trace: a verdict needs no more, and the fields that tell traces apart would widen what
    # the explicit search keeps, where it would otherwise exhaust the states that matter.
    request = verdict_request(spec_file, depth, 1).overlay(prove=True, engine="auto", timeout=PROOF_CALL_SECONDS)
    results = run_checks(request, progress, only=lambda job: job in bounded)
    step.seconds = time.monotonic() - begin
    refuted = [r for r in results if outcome(r) == "mismatch"]
    proved = [r for r in results if r.status == Status.PROVED]
    left = [r for r in results if r not in refuted and r not in proved]
    step.headline = (
        f"{proved_before + len(proved)} of the {len(held)} verdict(s) that held up to depth {depth} proved "
        f"({proved_before} as they were checked)"
    )
    step.failures = [f"MISMATCH  {mismatch_line(r)} (past the verdicts' depth {depth})" for r in refuted]
    if left:
        step.headline += f"; {len(left)} held up to depth {depth} only (below)"
        step.notes = [
            f"held up to depth {depth}, not proved: {r.variant} / {r.property} ({r.environment})" for r in left
        ]
    spent = budget.active().exhausted(memory=False)
    step.status = FAILED if refuted else UNDECIDED if spent is not None and left else PASSED
    if refuted:
        step.detail = _traces_of(spec_file, refuted)
    return step


WEAKENING = "weakening"
"""The step that compares the spec with its base (`--base`): what the change checks less."""


def _base_of(spec_file: SpecFile, base: str | None) -> SpecFile | None:
    """The spec at `--base`, read before any step starts (one that cannot be read is bad input)."""
    if base is None:
        return None
    from ledgercheck.model import weakening

    return weakening.base_spec(spec_file, base)


def _weakening(spec_file: SpecFile, base: str | None, was: SpecFile | None) -> Step:
    """`--base REF`: every change from the spec at REF (`was`, None where the spec is new
    there) that checks less (`model.weakening`) fails the run unless `[weakened]` accepts it;
    what ci cannot judge is named below."""
    step = Step(WEAKENING)
    if base is None:
        step.headline = "no --base given (the spec at the base of the change, to compare with)"
        return step
    from ledgercheck.model import weakening

    begin = time.monotonic()
    if was is None:
        step.status = PASSED
        step.headline = f"the spec is new at {base}: nothing to compare"
        return step
    found = weakening.compare(was, spec_file, base)
    step.seconds = time.monotonic() - begin
    step.failures = [f"WEAKENED  {line}" for line in weakening.lines(found.weakened)]
    if found.weakened:
        step.failures.append(
            f"{NOTE}      each checks less than the spec at {base}; accept one with a reason in the spec's "
            f'[weakened] table: "{found.weakened[0].key}" = "why"'
        )
    step.notes = [f"accepted weakening: {w.line()} ({why})" for w, why in found.accepted]
    step.notes += [f"changed since {base}: {line}" for line in weakening.lines(found.changed)]
    step.notes += [f"[weakened] {key!r} accepts nothing this change weakens" for key in found.stale]
    step.status = FAILED if found.weakened else PASSED
    if found.weakened:
        step.headline = f"{len(found.weakened)} change(s) check less than the spec at {base}"
    elif found.accepted:
        step.headline = f"{len(found.accepted)} change(s) check less than at {base}, each accepted in [weakened]"
    else:
        step.headline = f"nothing the spec checks was weakened against {base}"
    return step


CONTRACTS = "callers' contracts"
"""The step that checks the callers the spec models keep the events' `requires`."""


def _contracts(spec_file: SpecFile, progress: Any) -> Step:
    """Whether the environments whose actions are callers (a controller's flows) keep every
    event's callers' contract (`Spec.contract_property`), proved as the proofs step proves, to the
    verdicts' depth and past it. A verdict where any call may be made counts only the calls
    the contracts allow; a flow that makes another call is a trace that verdict never sees
    (a trial's controller reported a refit for a DEAD shard, which the ledger returns to
    HEALTHY, and every property checked in the `ledger` environment still held)."""
    from ledgercheck.codegen.gate import verdict_request
    from ledgercheck.model.result import Status
    from ledgercheck.model.runs import run_checks
    from ledgercheck.model.spec import CONTRACTS_PROPERTY

    step = Step(CONTRACTS)
    variants = tuple(n for n in spec_file.variants if spec_file.variant(n).contract_property() is not None)
    if not variants:
        step.headline = "no environment's actions call an event with a requires"
        return step
    begin = time.monotonic()
    depth = spec_file.variant().search_depth(None, DEFAULT_DEPTH)
    request = verdict_request(spec_file, depth, 1).overlay(
        variants=variants, properties=(CONTRACTS_PROPERTY,), prove=True, engine="auto", timeout=PROOF_CALL_SECONDS
    )
    results = run_checks(request, progress)
    step.seconds = time.monotonic() - begin
    broken = [r for r in results if r.status == Status.VIOLATED]
    unknown = [r for r in results if r.status == Status.UNKNOWN]
    bounded = [r for r in results if r.status == Status.HOLDS_TO_DEPTH]
    environments = " and ".join(dict.fromkeys(r.environment for r in results))
    if broken:
        step.headline = f"the calls of {environments} break a requires in {len(broken)} of {len(results)} check(s)"
    else:
        proved = len(results) - len(unknown) - len(bounded)
        step.headline = f"the calls of {environments} keep every requires: proved in {proved} of {len(results)}"
        step.headline += " check(s)"
        if bounded:
            step.headline += f", {len(bounded)} up to depth {depth} only (below)"
    step.failures = [f"CONTRACT  {_contract_line(spec_file, r)}" for r in broken]
    step.failures += [f"UNKNOWN   {r.variant} / {r.property} ({r.environment}): {r.note}" for r in unknown]
    step.notes = [
        f"callers' contracts kept up to depth {r.depth}, not proved: {r.variant} ({r.environment})" for r in bounded
    ]
    step.status = FAILED if broken else UNDECIDED if unknown else PASSED
    if broken:
        step.detail = _traces_of(spec_file, broken)
    return step


def _contract_line(spec_file: SpecFile, result: Any) -> str:
    """'fixed (controller): refit_lands() calls report_refit on shard 0 outside its requires
    (state == STALE), step 4 of the shortest trace'."""
    from ledgercheck.model.textout import calls_outside_contracts

    trace = min(result.traces, key=lambda t: t.depth)
    for index, step, call in calls_outside_contracts(trace)[:1]:
        args = ", ".join(f"{k}={v!r}" for k, v in call.args.items())
        requires = spec_file.variant(result.variant).events[call.event].requires_text
        return (
            f"{result.variant} ({result.environment}): {step.action}() calls {call.event}({call.shard}"
            f"{', ' + args if args else ''}) outside its requires ({requires}), step {index} of the "
            f"shortest trace ({trace.length})"
        )
    return mismatch_line(result)


def _drift(spec_file: SpecFile, out_dir: Path, verdicts: Verdicts) -> Step:
    """`gen --check`, from the verdicts already established. With a verdict that differs from
    its expectation there is nothing to compare against: `gen` would refuse to write."""
    from ledgercheck.codegen.changes import compare
    from ledgercheck.codegen.render import (
        drift,
        existing_generated,
        foreign_files,
        foreign_line,
        nothing_generated,
        plan_tests,
        render_files,
    )

    step = Step("generated tests up to date")
    if verdicts.mismatches or verdicts.unknown:
        step.status = SKIPPED
        step.headline = (
            "not compared: `gen` refuses to write while a verdict differs from its expectation"
            if verdicts.mismatches
            else "not compared: `gen` refuses to write while a verdict is unknown"
        )
        return step
    begin = time.monotonic()
    foreign = foreign_files(out_dir)
    if foreign:
        step.status = FAILED
        step.headline = f"{len(foreign)} file(s) in {out_dir.name}/ that `gen` did not write run with the tests"
        step.failures = [f"FOREIGN   {foreign_line(out_dir, name)}" for name in foreign]
        return step
    files = render_files(spec_file, out_dir, plan_tests(spec_file, verdicts=verdicts))
    diff = drift(out_dir, files)
    step.seconds = time.monotonic() - begin
    count = sum(text.count("\ndef test_") for text in files.values())
    never = nothing_generated(out_dir) if diff else None
    if never is not None:
        step.status = FAILED
        step.headline = f"{never}: the tests were never generated; run `ledgercheck gen` (with --out {out_dir})"
        step.failures = [f"MISSING   {out_dir.name}/{name} (never generated)" for name in sorted(files)]
    elif diff:
        changes = compare(existing_generated(out_dir), files, spec_file, verdicts)
        behaviour = any(c.behaviour for c in changes)
        names = _drifted_files(diff)
        step.status = FAILED
        kind = "a change of behaviour" if behaviour else "text only (docs, messages, figures)"
        step.headline = f"{out_dir.name}/ is not what the spec produces now ({kind}): run `ledgercheck gen`"
        step.failures = [_drift_line(out_dir, names, changes, kind)]
        step.detail = "\n".join(c.line() for c in changes) + "\n\n"
        step.detail += "".join(diff[:80]) + (f"... ({len(diff) - 80} more diff lines)\n" if len(diff) > 80 else "")
    else:
        step.status = PASSED
        step.headline = f"{len(files)} module(s), {count} test(s), as the spec produces them"
    return step


def _drift_line(out_dir: Path, names: list[str], changes: list[Any], kind: str) -> str:
    """The drift as one line: the modules (named where there are one or two), and what changed
    in the spec where the modules' reasons say (a one-event edit drifted every module, whose
    header holds the spec's meaning: one DRIFT line each named every module but the event)."""
    folder = out_dir.name
    shown = ", ".join(f"{folder}/{name}" for name in names) if len(names) <= 2 else f"{folder}/: {len(names)} modules"
    meant = {c.meaning for c in changes if c.meaning}
    why = f"; the spec's meaning changed: {meant.pop()}" if len(meant) == 1 else ""
    return f"DRIFT     {shown} ({kind}{why})"


def _drifted_files(diff: list[str]) -> list[str]:
    names: list[str] = []
    for line in diff:
        if line.startswith("--- "):
            name = line[4:].split(" (", 1)[0].split("/", 1)[-1]
            if name not in names:
                names.append(name)
    return names


def _waiting_for(name: str, say: Callable[[str], None]) -> Callable[[float], None]:
    def waiting(seconds: float) -> None:
        say(f"ci: waiting for {name}, running for {seconds:.0f} s")

    return waiting


def _finish_child(name: str, child: Subprocess, waiting: Callable[[float], None] | None = None) -> Step:
    try:
        code, text, seconds = child.finish(waiting)
        unseen = _unseen_outcomes(child) if child.outcomes is not None and code == 0 else []
    finally:
        if child.outcomes is not None:
            shutil.rmtree(child.outcomes[0], ignore_errors=True)
    step = Step(name, seconds=seconds)
    lines = [line for line in text.splitlines() if line.strip()]
    last = lines[-1].strip("= ") if lines else f"exit {code}"
    step.headline = last
    if code == 0 and _finished(name, last):
        left_out = _left_out(name, last)
        if left_out is not None:
            return _tests_failed(step, [left_out], text)
        if unseen:
            step.headline = unseen[0]
            return _tests_failed(step, unseen, text)
        step.status = PASSED
        if name == "conformance":  # what its pass says nothing certain about
            step.notes = [f"conformance: {line.strip()}" for line in lines if line.startswith("  not reached ")]
        return step
    configured = _pytest_refused(name, code, lines)
    if configured is not None:  # pytest ran none of the tests: its configuration, not theirs
        step.headline = configured
        return _tests_failed(step, [configured], text)
    if code in (0, EXIT_UNKNOWN):  # no verdict: not a pass, and nothing diverged or failed
        if name == "conformance":  # what it says of itself, not the last line of a reproducer
            said = next((line for line in lines if line.startswith("ledgercheck: ")), None)
            last = step.headline = said if said is not None else last
        step.status = UNDECIDED
        ended = "" if code else f" (exit 0 without {'its verdict' if name == 'conformance' else 'pytest summary'})"
        step.failures = [f"UNDECIDED {name}: {last}{ended}"]
        step.detail = _narrowed(text)
        return step
    step.status = FAILED
    if name == "conformance" and code == EXIT_BAD_INPUT:  # the binding or the target, not the class's behaviour
        said = next((line for line in lines if line.startswith("ledgercheck: ")), last)
        step.headline = said.removeprefix("ledgercheck: ")
        step.status = BAD_INPUT
        step.failures = [f"BAD INPUT {name}: {step.headline}"]
    elif name == "conformance":
        step.headline = _divergence(lines, last)
        step.failures = [f"DIVERGES  {step.headline}"]
    elif refused := _refused(lines):  # every test refused what it was given: one line, nothing was judged
        step.status = BAD_INPUT
        step.headline = refused[0]
        step.failures = [f"BAD INPUT {name}: {step.headline}"]
    else:
        step.failures = _test_failures(name, lines) or [f"TESTS     {name}: {last}"]
    step.detail = _narrowed(text)
    return step


def _tests_failed(step: Step, problems: list[str], text: str) -> Step:
    """`step`, a run of the generated tests, failed for `problems` (one `TESTS` line each)."""
    step.status = FAILED
    step.failures = [f"TESTS     {step.name}: {problem}" for problem in problems]
    step.detail = _narrowed(text)
    return step


PYTEST_USAGE_ERROR = 4


def _pytest_refused(name: str, code: int, lines: list[str]) -> str | None:
    """Why pytest ran none of the generated tests, where its configuration says so: it refused
    its arguments (exit 4; a `-p no:ledgercheck` in `addopts` leaves the plugin's options
    unknown, and the summary named only the rootdir), or it only collected them (`--co` in
    `addopts`: exit 0 and no summary)."""
    if name == "conformance":
        return None
    if code == PYTEST_USAGE_ERROR:
        said = next((line.strip() for line in lines if "error: " in line), lines[0].strip() if lines else "")
        if "--ledger-" in said:
            return (
                f"pytest does not know ledgercheck's options ({said}): its plugin is not loaded (a `-p no:ledgercheck` "
                "in addopts?), and the generated tests need it"
            )
        return f"pytest refused its arguments ({said}): no test ran"
    if code == 0 and lines and re.match(r"^\d+ tests? collected\b", lines[-1].strip("= ")):
        return "pytest only collected the tests and ran none (a --co or --collect-only in addopts?)"
    return None


def _unseen_outcomes(child: Subprocess) -> list[str]:
    """What the generated tests' own notes say pytest's summary did not: a test that never
    ran, or did not pass though pytest counted no failure (`codegen.outcomes`)."""
    from ledgercheck.codegen import outcomes
    from ledgercheck.codegen.render import existing_generated

    assert child.outcomes is not None
    notes, out_dir = child.outcomes
    try:
        tests = outcomes.expected(out_dir, existing_generated(out_dir))
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:  # pytest read them; something changed since
        return [f"cannot read the generated tests' source ({exc})"]
    return outcomes.judge(tests, outcomes.read(notes))


def _divergence(lines: list[str], last: str) -> str:
    """conform's headline (`X diverges from the model of 'v' at call 2 of 2, f(0):`, or `X
    differs from the model of 'v' right after construction:`, and what differs, from the next
    line), not a progress line that says where the divergence was found."""
    headlines = (" diverges from the model of ", " differs from the model of ")  # at a call; right after construction
    at = next((i for i, line in enumerate(lines) if any(h in line for h in headlines)), None)
    if at is None:
        at = next((i for i, line in enumerate(lines) if "diverge" in line.lower()), None)
    if at is None:
        return last
    headline = lines[at].strip()
    if headline.endswith(":") and at + 1 < len(lines):
        headline += " " + lines[at + 1].strip()
    return headline


REFUSED = "Failed: ledgercheck: "
"""How the plugin fails a generated test it could not set up (the target, the binding, the
spec the tests came from), in pytest's short summary."""


def _summary(lines: list[str]) -> list[str]:
    """The lines of pytest's short test summary (`FAILED path::test - message`, `ERROR ...`):
    only those after its header, so that a line the code under test logged (`ERROR    app:
    task 0 dead-lettered`, in a captured-log section) is never taken for a test's result."""
    for index, line in enumerate(lines):
        if _RULE.match(line) and "short test summary info" in line:
            return [entry for entry in lines[index + 1 :] if entry.startswith(("FAILED ", "ERROR "))]
    return []


def _refused(lines: list[str]) -> list[str]:
    """The plugin's refusals, when every test pytest reports failed with one (else none)."""
    messages = [line.split(" - ", 1)[1] if " - " in line else "" for line in _summary(lines)]
    if not messages or not all(m.startswith(REFUSED) for m in messages):
        return []
    return list(dict.fromkeys(m.removeprefix(REFUSED) for m in messages))


STALE = "changed since these tests were generated"
"""What the plugin says of every test of a suite the spec has moved on from (`codegen.plugin`)."""

_RULE = re.compile(r"^([=_-])\1{9,}(?: (.*?) )?\1{9,}$")
"""A separator line of pytest's (`===== FAILURES =====`, `_____ test_name _____`)."""
RULE_WIDTH = 100


def _narrowed(text: str) -> str:
    """pytest's output with its separator lines drawn `RULE_WIDTH` wide: the child runs with a
    wide terminal so that its short summary keeps whole test names, and its separators would
    otherwise fill 400 columns of the command's report."""

    def rule(line: str) -> str:
        found = _RULE.match(line)
        if found is None:
            return line
        char, title = found.group(1), found.group(2)
        return f" {title} ".center(RULE_WIDTH, char) if title else char * RULE_WIDTH

    return "\n".join(rule(line) for line in text.split("\n"))


_PYTEST_SUMMARY = re.compile(r"^\d+ [a-z]+(, \d+ [a-z]+)* in [\d.]+s\b")
"""pytest's last line (`98 passed in 0.58s`, `1 failed, 97 passed, 2 xfailed in 3.10s (0:00:03)`)."""


def _finished(name: str, last: str) -> bool:
    """Whether a child that exited 0 said its verdict: pytest its summary, `conform` its `no
    divergence`. An implementation under test that ends the process it runs in (`os._exit(0)`
    in a method) exits 0 with neither, which must not read as a pass."""
    if name == "conformance":
        return last.endswith("no divergence")
    return _PYTEST_SUMMARY.match(last) is not None


def _left_out(name: str, last: str) -> str | None:
    """What a passing pytest run of the generated tests left unjudged, or None: a skipped or
    deselected test (the generated tests skip none; a hand-written `conftest.py` or an
    `addopts` did, and "102 skipped" read as passed)."""
    if name == "conformance":
        return None
    left = re.findall(r"(\d+) (skipped|deselected)", last)
    if not left:
        return None
    counts = ", ".join(f"{count} {word}" for count, word in left)
    return f"{counts}: the generated tests skip none; something outside them did (a conftest.py, a plugin, addopts)"


def _not_yet(line: str) -> str:
    """A stale-tests failure line while a verdict mismatches: the plugin's advice (`run
    ledgercheck gen`) is for later; `gen` refuses to write until the mismatches are fixed."""
    advice = "run `ledgercheck gen`"
    fixed_first = "fix the mismatches above first (the spec, or its expect): `gen` refuses to write until then"
    return line.replace(advice, fixed_first) if advice in line else f"{line} ({fixed_first})"


def _test_failures(name: str, lines: list[str]) -> list[str]:
    """pytest's short summary folded to one line per test module: how many failed, and the
    first failure's message (what a reader needs to decide where to look)."""
    by_module: dict[str, list[str]] = {}
    for line in _summary(lines):
        test, _, message = line.split(" ", 1)[1].partition(" - ")
        by_module.setdefault(test.split("::", 1)[0], []).append(message.strip())
    firsts = {module: next((m for m in messages if m), "") for module, messages in by_module.items()}
    shared = next(iter(firsts.values())) if len(set(firsts.values())) == 1 else ""
    if len(by_module) > 1 and STALE in shared:
        # one cause, the tests stale after a spec change: one line, not one per module
        count = sum(len(messages) for messages in by_module.values())
        return [f"TESTS     {name}: {count} failed in {len(by_module)} modules ({shared})"]
    out = []
    for module, messages in by_module.items():
        first = firsts[module]
        out.append(f"TESTS     {name}: {module}: {len(messages)} failed" + (f" ({first})" if first else ""))
    return out


def _reference_note(spec_file: SpecFile, steps: list[Step]) -> None:
    """Where the tests against the implementation failed only in modules of properties the
    reference variant is expected to violate, while conformance found it to be that variant:
    the class may be meant to be it (a library with a known flaw), which the spec does not
    say. A note on the failure, which stays one (undeclared, the tests of a fix fail on the
    class with the bug, as they should)."""
    from ledgercheck.model.spec import reference_reason, reference_variant

    by_name = {s.name: s for s in steps}
    tests, conformance = by_name.get("tests vs implementation"), by_name.get("conformance")
    if spec_file.variant().declared_reference is not None or tests is None or conformance is None:
        return
    if tests.status != FAILED or conformance.status != PASSED:
        return
    reference = reference_variant(spec_file)
    properties = spec_file.variant(reference).properties
    violated = {name for name, prop in properties.items() if prop.expect.get(reference) == "violated"}
    modules = [m.group(1) for line in tests.failures if (m := re.search(r"/test_(\w+)\.py: ", line))]
    if not modules or not set(modules) <= violated:
        return
    tests.failures.append(
        f"{NOTE}      these tests expect what another variant does of {', '.join(sorted(set(modules)))}; conformance "
        f"found the class to be {reference!r} ({reference_reason(spec_file)}), which the spec expects to violate "
        f"it: if the class is meant to be {reference!r} (a library with a known flaw), [spec] reference_variant = "
        f"{reference!r} says so, and these tests then expect the violation; if it is not, the class has the bug "
        "the other variant fixes"
    )


def _declared_note(spec_file: SpecFile, steps: list[Step]) -> None:
    """A declared reference the spec expects to violate properties (no other variant's
    shortcomings): against it, their tests pass by failing (strict xfails). Said under the
    table, so that a green run never hides which violations it accepted."""
    from ledgercheck.model.spec import known_limitations

    declared = spec_file.variant().declared_reference
    tests = next((s for s in steps if s.name == "tests vs implementation"), None)
    if declared is None or tests is None:
        return
    shared = set(known_limitations(spec_file))
    properties = spec_file.variant(declared).properties
    accepted = [n for n, p in properties.items() if p.expect.get(declared) == "violated" and n not in shared]
    if accepted:
        tests.notes.append(
            f"accepted: the implementation is declared to be {declared!r} ([spec] reference_variant), which the spec "
            f"expects to violate {', '.join(accepted)}: their tests pass against it when it does (xfailed)"
        )


def _weaker_conformance_note(spec_file: SpecFile, steps: list[Step]) -> None:
    """The spec's `[conform]` settings that search less than conform's own defaults, under the
    table: ci takes them as they are (the spec owner's), and a red-team trial's `depth = 0,
    random = 0` passed three classes the defaults catch, with only a smaller trace count to tell."""
    from ledgercheck.model.conformance.defaults import searched_by_default

    conformance = next((s for s in steps if s.name == "conformance" and s.status != SKIPPED), None)
    given = spec_file.variant().conform
    if conformance is None or given is None:
        return
    defaults = searched_by_default(spec_file.variant().default_shards)
    weaker = [(name, getattr(given, name), default) for name, default in defaults.items()]
    weaker = [(name, value, default) for name, value, default in weaker if value is not None and value < default]
    if weaker:
        said = ", ".join(f"{name} = {value}" for name, value, _ in weaker)
        usual = ", ".join(f"{name} {default}" for name, _, default in weaker)
        conformance.notes.append(
            f"conformance: ran with the spec's [conform] {said}, less than conform's defaults ({usual}): a "
            "divergence only those would reach is not looked for"
        )


def _exit_code(steps: list[Step]) -> int:
    if any(s.status == FAILED for s in steps):
        return EXIT_MISMATCH
    if any(s.status == BAD_INPUT for s in steps):  # a target or binding was refused: nothing judged
        return EXIT_BAD_INPUT
    if any(s.status == UNDECIDED for s in steps):
        return EXIT_UNKNOWN
    return EXIT_OK


def _print(spec_file: SpecFile, steps: list[Step], code: int, seconds: float) -> None:
    spec_name = Path(spec_file.path).name
    verdict = {EXIT_OK: "PASSED", EXIT_MISMATCH: "FAILED", EXIT_UNKNOWN: "UNDECIDED", EXIT_BAD_INPUT: "BAD INPUT"}[code]
    failures = [line for s in steps for line in s.failures]
    problems = sum(not line.startswith(NOTE) for line in failures)  # a note explains the line above it
    print(f"ledgercheck ci {spec_name}: {verdict}" + (f", {problems} problem(s):" if failures else ""))
    for line in failures:
        print(f"  {line}")
    print()
    width = max(len(s.name) for s in steps)
    for s in steps:
        took = f"{s.seconds:5.1f} s" if s.status != SKIPPED else "      "
        print(f"  {s.name:<{width}}  {s.status:<9} {took}  {s.headline}")
    print(f"  {'total':<{width}}  {'':<9} {seconds:5.1f} s")
    notes = [line for s in steps for line in s.notes]
    if notes:
        print()
        for line in notes:
            print(f"  {line}")
    for s in steps:
        if s.detail and s.status != PASSED:
            print()
            print(f"== {s.name}")
            print(s.detail.rstrip())


__all__ = ["ci_command"]
