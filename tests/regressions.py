"""A corpus of single-line regressions of spec/fleet_health.toml, and how to check one.

Each `Regression` is one plausible slip a maintainer could make in the spec (ledger.md is
the ground truth of what each line is for): an off-by-one threshold, a dropped reset, a
swapped target state, a weakened callers' contract, half of the seed's fix removed. `SEEN`
holds the ones some property notices: `ledgercheck check` must then exit 1 with a
MISMATCH line naming one of `properties`. `UNSEEN` holds edits no property notices, each
with the reason; they document what the properties do not constrain.

`checker_command` is the one place that says which command checks a regressed spec, so the
corpus can move to another command (a check of every environment at once) by changing it.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ledger_fixture import LEDGER_GENERATED, LEDGER_SPEC

from ledgercheck.model import cli

ROOT = Path(__file__).resolve().parent.parent
SPEC = LEDGER_SPEC
GENERATED = LEDGER_GENERATED


@dataclass(frozen=True)
class Regression:
    """One line of the spec replaced (or deleted, with `replacement` ""), and who should notice.
    A `replacement` that keeps the line and adds one after it ("line\nadded") is an added line:
    for a line a variant's patch anchors on, which no edit may remove.

    `within` names the TOML table (its header line) the line belongs to, for lines the spec
    repeats verbatim in several tables (every `ignore_when` guard, for one): the line must
    then occur exactly once in that table. Without it, exactly once in the whole spec."""

    name: str
    original: str
    replacement: str
    properties: tuple[str, ...]
    environment: str
    why: str
    within: str | None = None


@dataclass(frozen=True)
class CheckRun:
    """What `ledgercheck ci` and then `ledgercheck gen` said about one regressed spec, and
    whether `gen` left the generated tests byte-identical."""

    ci_code: int
    ci_output: str
    gen_code: int
    gen_output: str
    generated_unchanged: bool

    def summary(self) -> list[str]:
        """The head of ci's output: its verdict line and one line per problem."""
        return self.ci_output.split("\n\n", 1)[0].splitlines()

    def mismatches(self) -> set[tuple[str, str]]:
        """(environment, property) of every MISMATCH line of ci's summary."""
        found = set()
        for line in self.summary():
            match = re.match(r"\s+MISMATCH\s+\S+ / (\S+) \((\S+)\):", line)
            if match:
                found.add((match.group(2), match.group(1)))
        return found


def _table_span(lines: list[str], header: str) -> range:
    starts = [i for i, line in enumerate(lines) if line.strip() == header]
    if len(starts) != 1:
        raise ValueError(f"table {header!r} occurs {len(starts)} times in the spec")
    start = starts[0] + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("[")), len(lines))
    return range(start, end)


def locate(text: str, regression: Regression) -> int:
    """The index of the regression's line; ValueError unless it occurs exactly once."""
    lines = text.split("\n")
    span = _table_span(lines, regression.within) if regression.within else range(len(lines))
    where = [i for i in span if lines[i] == regression.original]
    if len(where) != 1:
        scope = regression.within or "the spec"
        raise ValueError(f"{regression.name}: {regression.original!r} occurs {len(where)} times in {scope}")
    return where[0]


def apply(text: str, regression: Regression) -> str:
    """The spec text with the regression's line replaced, or deleted."""
    lines = text.split("\n")
    index = locate(text, regression)
    lines[index : index + 1] = [regression.replacement] if regression.replacement else []
    return "\n".join(lines)


def checker_command(spec_path: Path) -> list[str]:
    """The command that checks a regressed spec: the one a ledger repository's CI runs."""
    return ["ci", str(spec_path), "--no-progress"]


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def run_checker(spec_path: Path) -> CheckRun:
    """`checker_command`, then `ledgercheck gen`, in this process (the second reuses the
    first's verdicts: same spec bytes)."""
    generated = spec_path.parent.parent / "generated_tests"
    before = _snapshot(generated)
    ci_out, gen_out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(ci_out):
        ci_code = cli.main(checker_command(spec_path))
    with contextlib.redirect_stdout(gen_out):
        gen_code = cli.main(["gen", str(spec_path), "--no-progress"])
    unchanged = _snapshot(generated) == before
    return CheckRun(ci_code, ci_out.getvalue(), gen_code, gen_out.getvalue(), unchanged)


def write_regressed(regression: Regression, directory: Path) -> Path:
    """A ledger repository with the regression: spec/fleet_health.toml and the generated
    tests of the spec before it."""
    (directory / "spec").mkdir()
    path = directory / "spec" / "fleet_health.toml"
    path.write_text(apply(SPEC.read_text(encoding="utf-8"), regression), encoding="utf-8")
    shutil.copytree(GENERATED, directory / "generated_tests", ignore=shutil.ignore_patterns("__pycache__"))
    return path


R = Regression

SEEN: tuple[Regression, ...] = (
    # Off-by-one thresholds.
    R(
        "report_failure_threshold_off_by_one",
        "if consecutive_reported_failures >= unhealthy_threshold:",
        "if consecutive_reported_failures > unhealthy_threshold:",
        ("full_streak_condemns",),
        "ledger",
        "a shard whose request streak reaches T is not condemned until T + 1",
    ),
    R(
        "probe_failure_threshold_off_by_one",
        "    if consecutive_probe_failures >= unhealthy_threshold:",
        "    if consecutive_probe_failures > unhealthy_threshold:",
        ("full_streak_condemns",),
        "ledger",
        "T failed probes in a row no longer condemn",
    ),
    R(
        "probe_recovery_threshold_off_by_one",
        "    if state == SUSPECT and consecutive_probe_successes >= healthy_threshold:",
        "    if state == SUSPECT and consecutive_probe_successes > healthy_threshold:",
        ("suspect_recovers_on_probes",),
        "ledger",
        "a SUSPECT shard needs H + 1 answered probes to be trusted again",
    ),
    R(
        "restart_budget_off_by_one",
        "if restart_attempts > max_restart_attempts_per_shard:",
        "if restart_attempts >= max_restart_attempts_per_shard:",
        ("restart_budget_is_enforced",),
        "ledger",
        "the shard is retired on its M-th restart instead of the (M + 1)-th",
    ),
    # Dropped resets.
    R(
        "probe_success_keeps_failure_streak",
        "    consecutive_probe_failures = 0",
        "",
        ("no_condemnation_by_inherited_streak",),
        "ledger",
        "failed probes accumulate across answered ones: a restarted shard dies of probes that were not in a row",
    ),
    R(
        "probe_failure_keeps_success_streak",
        "    consecutive_probe_successes = 0",
        "",
        ("suspect_recovers_on_probes",),
        "ledger",
        "answered probes accumulate across failed ones: a SUSPECT shard recovers too early",
    ),
    R(
        "refit_keeps_request_streak",
        "    consecutive_reported_failures = 0",
        "",
        ("refit_starts_streaks_afresh", "restarted_engine_refits_healthy"),
        "ledger",
        "a shard a refit returns to HEALTHY keeps its request streak",
    ),
    R(
        "refit_keeps_probe_failures",
        "consecutive_probe_failures = 0",
        "",
        ("refit_starts_streaks_afresh",),
        "ledger",
        "a refit no longer clears the probe failure streak",
        within="[events.report_refit]",
    ),
    # Wrong accounting.
    R(
        "restart_counts_twice",
        "restart_attempts = restart_attempts + 1",
        "restart_attempts = restart_attempts + 2",
        ("restart_budget_counts_genuine_failures",),
        "ledger",
        "one restart spends two attempts of the budget",
    ),
    R(
        "probe_success_counts_twice",
        "    consecutive_probe_successes = consecutive_probe_successes + 1",
        "    consecutive_probe_successes = consecutive_probe_successes + 2",
        ("suspect_recovers_on_probes",),
        "ledger",
        "each answered probe counts twice towards recovery",
    ),
    # Swapped target states.
    R(
        "request_streak_condemns_to_stale",
        "    state = DEAD",
        "    state = STALE",
        ("full_streak_condemns",),
        "ledger",
        "a full request streak parks the shard STALE instead of condemning it",
    ),
    R(
        "probe_streak_condemns_to_restarting",
        "        state = DEAD",
        "        state = RESTARTING",
        ("full_streak_condemns",),
        "ledger",
        "a full probe streak skips DEAD",
    ),
    R(
        "refit_promotes_to_suspect",
        "    state = HEALTHY",
        "    state = SUSPECT",
        ("restarted_engine_refits_healthy",),
        "ledger",
        "a completed refit leaves every shard SUSPECT",
        within="[events.report_refit]",
    ),
    R(
        "restart_goes_back_to_dead",
        "    state = RESTARTING",
        "    state = DEAD",
        ("restart_budget_is_enforced",),
        "ledger",
        "a restart within the budget leaves the shard DEAD",
    ),
    R(
        "restart_budget_exhausted_is_not_retired",
        "    state = RETIRED",
        "    state = RESTARTING",
        ("restart_budget_is_enforced",),
        "ledger",
        "a shard past its budget is restarted anyway",
    ),
    R(
        "retire_kills",
        "state = RETIRED",
        "state = DEAD",
        ("retire_retires",),
        "ledger",
        "retire leaves the shard DEAD, to be restarted",
    ),
    R(
        "loaded_replacement_serves",
        "state = STALE",
        # A line added after it: replacing the line would leave refit_keeps_streak's patch
        # (`before = "state = STALE"`) without its anchor, a SpecError, not a regression.
        "state = STALE\nstate = HEALTHY",
        ("loaded_replacement_waits_for_a_refit",),
        "ledger",
        "a loaded replacement serves before a refit gives it the current weights",
        within="[events.mark_loaded]",
    ),
    R(
        "failed_restart_is_stale",
        "state = DEAD",
        "state = STALE",
        ("failed_restart_is_dead",),
        "ledger",
        "a failed restart leaves the shard STALE",
        within="[events.mark_restart_failed]",
    ),
    # Inverted or dropped conditions, weakened contracts.
    R(
        "refit_reads_verdict_inverted",
        # Inverted where the verdict is read: `if was == SUSPECT:` is an anchor of
        # refit_keeps_streak's patch, which no edit may remove.
        "was = state_before_partial",
        "was = SUSPECT if state_before_partial == HEALTHY else HEALTHY",
        ("suspicion_survives_abort",),
        "ledger",
        "a refit promotes the SUSPECT shard and demotes the HEALTHY one",
    ),
    R(
        "abort_forgets_verdict",
        "    state_before_partial = state",
        "    pass",
        ("suspicion_survives_abort",),
        "ledger",
        "an aborted refit no longer records what the shard was: a still-failing shard is promoted",
    ),
    R(
        "refit_ignores_verdict",
        "was = state_before_partial",
        "was = HEALTHY",
        ("suspicion_survives_abort",),
        "ledger",
        "a refit reads no verdict at all",
    ),
    R(
        "restart_contract_weakened",
        'requires = "state == DEAD"',
        'requires = "state != RETIRED"',
        ("restart_budget_counts_genuine_failures",),
        "ledger",
        "callers may restart a serving shard: a restart no death earned",
    ),
    # Seen through a variant's expected violation, which disappears.
    R(
        "restart_not_counted",
        "restart_attempts = restart_attempts + 1",
        "",
        ("restart_budget_counts_genuine_failures",),
        "ledger",
        "the counter never moves: as_written no longer shows claim 6's violation, which the spec expects",
    ),
    # The seed's fix, without its second line.
    R(
        "fix_keeps_verdict",
        "state_before_partial = None",
        "",
        ("restarted_engine_refits_healthy", "no_condemnation_by_inherited_streak"),
        "ledger",
        "the fix without its second line: a reload keeps the dead engine's SUSPECT verdict",
        within="[[variants.fixed.patch]]",
    ),
    # A guard against calls outside the callers' contracts, seen by a property judged over any call.
    R(
        "probe_guard_dropped",
        'ignore_when = "state not in SERVING"',
        'ignore_when = "False"',
        ("traffic_to_a_shard_out_of_service_is_ignored",),
        "ledger",
        "every ignore_when is implied by the event's `requires`: a probe of a shard out of service is a call "
        'outside the callers\' contracts, which that property counts (calls = "any")',
        within="[events.record_probe]",
    ),
)

UNSEEN: tuple[Regression, ...] = (
    R(
        "fix_keeps_request_streak",
        "consecutive_reported_failures = 0",
        "",
        (),
        "ledger",
        "the fix without its first line: the reloaded shard keeps the dead engine's streak only while STALE, "
        "where no request reaches it; the fix's second line clears the verdict, so its first refit resets "
        "the streak anyway (a conformance run or the generated tests still see the snapshot field)",
        within="[[variants.fixed.patch]]",
    ),
    R(
        "log_line_changed",
        'log = "fleet-health: shard {shard} {old} -> {new} ({event})"',
        'log = "fleet-health: shard {shard} is now {new}"',
        (),
        "ledger",
        "a log line's text: no property reads the log",
    ),
    R(
        "membership_epoch_not_bumped",
        "    membership_epoch = membership_epoch + 1",
        "    pass",
        (),
        "ledger",
        "membership_epoch is a metric: no property reads it",
    ),
    R(
        "refit_forgets_weight_version",
        "weight_version = args.weight_version",
        "",
        (),
        "ledger",
        "weight_version: no property says which weights a shard holds",
    ),
    R(
        "reload_keeps_old_address",
        "    base_url = args.base_url",
        "    pass",
        (),
        "ledger",
        "base_url: no property says traffic goes to the new address",
    ),
    R(
        "death_leaves_probe_streak",
        "consecutive_probe_failures = unhealthy_threshold",
        "",
        (),
        "ledger",
        "a DEAD shard is never probed, and mark_loaded and report_refit reset the probe streaks before it serves",
    ),
    R(
        "partial_guard_dropped",
        "if state != STALE:",
        "if True:",
        (),
        "ledger",
        "only a call outside the contracts marks a STALE shard partial again (callers mark serving shards)",
    ),
    R(
        "fix_inserted_one_line_earlier",
        'after = "consecutive_probe_successes = 0"',
        'after = "consecutive_probe_failures = 0"',
        (),
        "ledger",
        "the same two resets, one statement earlier: the same ledger",
    ),
)
