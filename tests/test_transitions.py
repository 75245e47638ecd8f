"""Every transition of ledger.md section 2 on the executable model.

Each row drives one shard into a start state through the API, makes one call and checks
the *whole* record afterwards: the fields the row names take the given values, every
other field is unchanged. Guards are checked the other way round: in every state of an
event's ignored set, the call changes nothing at all (no field, no history, no epoch, no
log line). Shared behaviour runs on both variants; the fix's one difference (mark_loaded)
has its own tests.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from ledgercheck.model.interpreter import build_api
from ledgercheck.model.spec import load_spec

VARIANTS = ("as_written", "fixed")
SHARDS = 4
URLS = [f"http://shard-{i}" for i in range(SHARDS)]
NEW_URL = "http://replacement"
I = 1  # the shard under test  # noqa: E741
ERR = RuntimeError("generation failed")

SERVING = {"HEALTHY", "SUSPECT"}
ABSENT = {"DEAD", "RESTARTING", "RETIRED"}
ALL_STATES = ("HEALTHY", "SUSPECT", "DEAD", "RESTARTING", "STALE", "RETIRED")

Call = Callable[[Any, int], None]


@functools.cache
def api_for(variant: str) -> Any:
    return build_api(load_spec().variant(variant))


def new_ledger(variant: str, **policy: int) -> Any:
    api = api_for(variant)
    return api.Ledger(shard_count=SHARDS, policy=api.Policy(**policy), base_urls=list(URLS))


# --- the calls, by short name -------------------------------------------------------------

CALLS: dict[str, Call] = {
    "probe_ok": lambda ledger, i: ledger.record_probe(i, ok=True),
    "probe_fail": lambda ledger, i: ledger.record_probe(i, ok=False, error="probe timed out"),
    "fail": lambda ledger, i: ledger.report_failure(i, ERR),
    "success": lambda ledger, i: ledger.report_success(i),
    "actor_death": lambda ledger, i: ledger.record_actor_death(i, error="actor died"),
    "condemn": lambda ledger, i: ledger.condemn_silent_participant(i, reason="silent during weight transfer"),
    "partial": lambda ledger, i: ledger.mark_weights_partial(i),
    "restarting": lambda ledger, i: ledger.mark_restarting(i),
    "loaded": lambda ledger, i: ledger.mark_loaded(i, base_url=NEW_URL),
    "loaded_no_url": lambda ledger, i: ledger.mark_loaded(i),
    "restart_failed": lambda ledger, i: ledger.mark_restart_failed(i),
    "refit": lambda ledger, i: ledger.report_refit(i, weight_version=7),
    "retire": lambda ledger, i: ledger.retire(i, reason="retired by operator"),
}


def drive(ledger: Any, steps: Sequence[str], shard: int = I) -> None:
    for step in steps:
        if step == "dead":  # three failed requests at the shipped threshold (T of this ledger's policy)
            for _ in range(ledger.policy.unhealthy_threshold):
                CALLS["fail"](ledger, shard)
        else:
            CALLS[step](ledger, shard)


# Start states reached through the API only. The "rich" setups leave counters non-zero so
# that an ignored call that wrongly resets or bumps one is caught.
REACH: dict[str, list[str]] = {
    "HEALTHY": [],
    "SUSPECT": ["fail"],
    "DEAD": ["dead"],
    "RESTARTING": ["dead", "restarting"],
    "STALE": ["partial"],
    "RETIRED": ["retire"],
}
RICH: dict[str, list[str]] = {
    "HEALTHY": ["fail", "probe_ok", "probe_ok", "probe_ok"],  # rf=1, ps=3
    "SUSPECT": ["probe_fail", "fail", "probe_ok"],  # pf=0, ps=1, rf=1
    "DEAD": ["probe_fail", "probe_ok", "fail", "fail", "fail"],  # ps=1, rf=3
    "RESTARTING": ["probe_ok", "actor_death", "restarting"],  # pf=3, ra=1
    "STALE": ["probe_fail", "fail", "partial"],  # pf=1, rf=1, sbp=SUSPECT
    "RETIRED": ["probe_fail", "fail", "partial", "retire"],  # pf=1, rf=1, sbp=SUSPECT
}


def record(ledger: Any, shard: int = I) -> dict[str, Any]:
    """One shard's record as a plain dict, states by enum name."""
    rec = ledger.snapshot()[shard]
    values = {}
    for name, value in vars(rec).items():
        values[name] = value.name if name in ("state", "state_before_partial") and value is not None else value
    return values


def whole(ledger: Any) -> tuple[Any, ...]:
    """Everything the model holds: every record, every history block, the epoch."""
    records = [record(ledger, i) for i in range(ledger.shard_count)]
    history = [ledger.history(i) for i in range(ledger.shard_count)]
    return records, history, ledger.membership_epoch


def serving(ledger: Any) -> set[int]:
    return {i for i in range(ledger.shard_count) if ledger.state_of(i).name in SERVING}


def printed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().out.splitlines() if line.strip()]


def test_shipped_policy_defaults() -> None:
    for variant in VARIANTS:
        policy = api_for(variant).Policy()
        assert (
            policy.unhealthy_threshold,
            policy.healthy_threshold,
            policy.max_restart_attempts_per_shard,
            policy.min_healthy_shards,
        ) == (3, 2, 5, 1)


@pytest.mark.parametrize("variant", VARIANTS)
def test_initial_record(variant: str) -> None:
    ledger = new_ledger(variant)
    for i in range(SHARDS):
        assert record(ledger, i) == {
            "state": "HEALTHY",
            "consecutive_probe_failures": 0,
            "consecutive_probe_successes": 0,
            "consecutive_reported_failures": 0,
            "restart_attempts": 0,
            "state_before_partial": None,
            "weight_version": 0,
            "base_url": URLS[i],
        }
    assert ledger.membership_epoch == 0


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("state", ALL_STATES)
def test_setups_reach_their_state(variant: str, state: str) -> None:
    for setups in (REACH, RICH):
        ledger = new_ledger(variant)
        drive(ledger, setups[state])
        assert ledger.state_of(I) == state


# --- transitions that act -------------------------------------------------------------------

PF, PS, RF, RA = (
    "consecutive_probe_failures",
    "consecutive_probe_successes",
    "consecutive_reported_failures",
    "restart_attempts",
)
SBP, WV, URL, ST = "state_before_partial", "weight_version", "base_url", "state"

# (id, setup steps, call, the fields that change and their new values): identical in both variants.
TRANSITIONS: list[tuple[str, list[str], str, dict[str, Any]]] = [
    # record_probe(ok=True)
    ("probe_ok/HEALTHY", [], "probe_ok", {PS: 1}),
    ("probe_ok/SUSPECT resets probe failures", ["probe_fail"], "probe_ok", {PF: 0, PS: 1}),
    ("probe_ok/SUSPECT reaches H -> HEALTHY", ["probe_fail", "probe_ok"], "probe_ok", {PS: 2, ST: "HEALTHY"}),
    (
        "probe_ok/SUSPECT by requests -> HEALTHY keeps request streak",
        ["fail", "fail", "probe_ok"],
        "probe_ok",
        {PS: 2, ST: "HEALTHY"},
    ),
    ("probe_ok/HEALTHY beyond H", ["probe_ok", "probe_ok"], "probe_ok", {PS: 3}),
    # record_probe(ok=False)
    ("probe_fail/HEALTHY -> SUSPECT", [], "probe_fail", {PF: 1, ST: "SUSPECT"}),
    ("probe_fail/HEALTHY resets probe successes", ["probe_ok"], "probe_fail", {PS: 0, PF: 1, ST: "SUSPECT"}),
    ("probe_fail/SUSPECT below T", ["probe_fail"], "probe_fail", {PF: 2}),
    ("probe_fail/SUSPECT reaches T -> DEAD", ["probe_fail", "probe_fail"], "probe_fail", {PF: 3, ST: "DEAD"}),
    ("probe_fail/SUSPECT by requests", ["fail", "probe_ok"], "probe_fail", {PS: 0, PF: 1}),
    # report_failure
    ("fail/HEALTHY -> SUSPECT", [], "fail", {RF: 1, ST: "SUSPECT"}),
    ("fail/SUSPECT below T", ["fail"], "fail", {RF: 2}),
    ("fail/SUSPECT reaches T -> DEAD", ["fail", "fail"], "fail", {RF: 3, ST: "DEAD"}),
    (
        "fail/HEALTHY with streak reaches T -> DEAD",
        ["fail", "fail", "probe_ok", "probe_ok"],
        "fail",
        {RF: 3, ST: "DEAD"},
    ),
    ("fail/SUSPECT by probes", ["probe_fail"], "fail", {RF: 1}),
    # report_success: never ignored, never changes the state
    ("success/HEALTHY with streak", ["fail", "fail", "probe_ok", "probe_ok"], "success", {RF: 0}),
    ("success/SUSPECT", ["fail", "fail"], "success", {RF: 0}),
    ("success/DEAD", ["dead"], "success", {RF: 0}),
    ("success/RESTARTING", ["dead", "restarting"], "success", {RF: 0}),
    ("success/STALE", ["fail", "partial"], "success", {RF: 0}),
    ("success/RETIRED", ["fail", "retire"], "success", {RF: 0}),
    ("success/HEALTHY no streak", [], "success", {}),
    # record_actor_death
    ("actor_death/HEALTHY", ["probe_ok"], "actor_death", {PS: 0, PF: 3, ST: "DEAD"}),
    ("actor_death/SUSPECT", ["probe_fail", "fail"], "actor_death", {PF: 3, ST: "DEAD"}),
    ("actor_death/STALE", ["fail", "partial"], "actor_death", {PF: 3, ST: "DEAD"}),
    # condemn_silent_participant: DEAD, no counter, not state_before_partial
    ("condemn/HEALTHY", ["probe_ok"], "condemn", {ST: "DEAD"}),
    ("condemn/SUSPECT", ["probe_fail", "fail"], "condemn", {ST: "DEAD"}),
    ("condemn/STALE keeps SUSPECT verdict", ["probe_fail", "fail", "partial"], "condemn", {ST: "DEAD"}),
    ("condemn/STALE keeps HEALTHY verdict", ["partial"], "condemn", {ST: "DEAD"}),
    # mark_weights_partial
    ("partial/HEALTHY", ["probe_ok"], "partial", {SBP: "HEALTHY", ST: "STALE"}),
    ("partial/SUSPECT", ["fail"], "partial", {SBP: "SUSPECT", ST: "STALE"}),
    ("partial/STALE keeps verdict", ["fail", "partial"], "partial", {}),
    ("partial/STALE after reload keeps None", ["actor_death", "restarting", "loaded"], "partial", {}),
    # mark_restarting
    ("restarting/DEAD", ["dead"], "restarting", {RA: 1, ST: "RESTARTING"}),
    ("restarting/HEALTHY (lax guard)", [], "restarting", {RA: 1, ST: "RESTARTING"}),
    ("restarting/SUSPECT (lax guard)", ["fail"], "restarting", {RA: 1, ST: "RESTARTING"}),
    ("restarting/STALE (lax guard)", ["partial"], "restarting", {RA: 1, ST: "RESTARTING"}),
    ("restarting/RESTARTING", ["dead", "restarting"], "restarting", {RA: 2}),
    (
        "restarting/DEAD at M -> RETIRED",
        ["dead"] + ["restarting", "restart_failed"] * 5,
        "restarting",
        {RA: 6, ST: "RETIRED"},
    ),
    (
        "restarting/DEAD below M",
        ["dead"] + ["restarting", "restart_failed"] * 4,
        "restarting",
        {RA: 5, ST: "RESTARTING"},
    ),
    # mark_loaded, where both variants agree (no streak, no verdict to clear)
    ("loaded/RESTARTING", ["actor_death", "restarting"], "loaded", {PF: 0, URL: NEW_URL, ST: "STALE"}),
    ("loaded/RESTARTING without base_url", ["actor_death", "restarting"], "loaded_no_url", {PF: 0, ST: "STALE"}),
    ("loaded/HEALTHY (lax guard)", ["probe_ok"], "loaded", {PS: 0, URL: NEW_URL, ST: "STALE"}),
    ("loaded/DEAD by probes (lax guard)", ["probe_fail"] * 3, "loaded", {PF: 0, URL: NEW_URL, ST: "STALE"}),
    # mark_restart_failed
    ("restart_failed/RESTARTING", ["dead", "restarting"], "restart_failed", {ST: "DEAD"}),
    ("restart_failed/DEAD", ["dead"], "restart_failed", {}),
    ("restart_failed/HEALTHY (lax guard)", [], "restart_failed", {ST: "DEAD"}),
    ("restart_failed/STALE (lax guard)", ["partial"], "restart_failed", {ST: "DEAD"}),
    # report_refit: was = sbp; sbp = None; wv; probe counters 0; SUSPECT keeps streak, else reset + HEALTHY
    (
        "refit/STALE verdict SUSPECT -> SUSPECT keeps streak",
        ["probe_fail", "fail", "partial"],
        "refit",
        {SBP: None, WV: 7, PF: 0, ST: "SUSPECT"},
    ),
    (
        "refit/STALE verdict SUSPECT with probe successes",
        ["fail", "fail", "probe_ok", "partial"],
        "refit",
        {SBP: None, WV: 7, PS: 0, ST: "SUSPECT"},
    ),
    (
        "refit/STALE verdict HEALTHY -> HEALTHY resets streak",
        ["fail", "fail", "probe_ok", "probe_ok", "partial"],
        "refit",
        {SBP: None, WV: 7, PS: 0, RF: 0, ST: "HEALTHY"},
    ),
    ("refit/STALE no verdict -> HEALTHY", ["actor_death", "restarting", "loaded"], "refit", {WV: 7, ST: "HEALTHY"}),
    ("refit/DEAD (lax guard) -> HEALTHY", ["dead"], "refit", {WV: 7, RF: 0, ST: "HEALTHY"}),
    (
        "refit/RESTARTING (lax guard) -> HEALTHY",
        ["probe_fail", "dead", "restarting"],
        "refit",
        {WV: 7, PF: 0, RF: 0, ST: "HEALTHY"},
    ),
    ("refit/SUSPECT no verdict -> HEALTHY", ["fail", "probe_fail"], "refit", {WV: 7, PF: 0, RF: 0, ST: "HEALTHY"}),
    ("refit/HEALTHY", ["probe_ok"], "refit", {WV: 7, PS: 0}),
    # retire: never ignored
    ("retire/HEALTHY", [], "retire", {ST: "RETIRED"}),
    ("retire/SUSPECT", ["fail"], "retire", {ST: "RETIRED"}),
    ("retire/DEAD", ["dead"], "retire", {ST: "RETIRED"}),
    ("retire/RESTARTING", ["dead", "restarting"], "retire", {ST: "RETIRED"}),
    ("retire/STALE", ["fail", "partial"], "retire", {ST: "RETIRED"}),
    ("retire/RETIRED", ["retire"], "retire", {}),
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("setup", "call", "changes"), [pytest.param(*row[1:], id=row[0]) for row in TRANSITIONS])
def test_transition(
    variant: str, setup: list[str], call: str, changes: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = new_ledger(variant)
    drive(ledger, setup)
    before = record(ledger)
    others = [record(ledger, i) for i in range(SHARDS) if i != I]
    epoch, was_serving = ledger.membership_epoch, serving(ledger)
    capsys.readouterr()

    CALLS[call](ledger, I)

    assert record(ledger) == {**before, **changes}
    assert [record(ledger, i) for i in range(SHARDS) if i != I] == others
    lines = printed(capsys)
    if before[ST] != record(ledger)[ST]:
        assert len(lines) == 1, lines
        assert before[ST] in lines[0] and record(ledger)[ST] in lines[0] and str(I) in lines[0]
    else:
        assert lines == []
    assert ledger.membership_epoch - epoch == (1 if serving(ledger) != was_serving else 0)


# --- guards: the ignored case changes nothing ------------------------------------------------

# (event call, the states in which the ledger ignores it): ledger.md section 2, "ignored when".
IGNORED: list[tuple[str, set[str]]] = [
    ("probe_ok", {"DEAD", "RESTARTING", "STALE", "RETIRED"}),
    ("probe_fail", {"DEAD", "RESTARTING", "STALE", "RETIRED"}),
    ("fail", {"DEAD", "RESTARTING", "STALE", "RETIRED"}),
    ("actor_death", ABSENT),
    ("condemn", ABSENT),
    ("partial", ABSENT),
    ("restarting", {"RETIRED"}),
    ("loaded", {"RETIRED"}),
    ("loaded_no_url", {"RETIRED"}),
    ("restart_failed", {"RETIRED"}),
    ("refit", {"RETIRED"}),
]
IGNORED_CASES = [
    pytest.param(call, state, steps, id=f"{call}/{state}/{kind}")
    for call, states in IGNORED
    for state in sorted(states)
    for kind, steps in (("plain", REACH[state]), ("rich", RICH[state]))
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("call", "state", "setup"), IGNORED_CASES)
def test_ignored_call_changes_nothing(
    variant: str, call: str, state: str, setup: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = new_ledger(variant)
    drive(ledger, setup)
    assert ledger.state_of(I) == state
    before = whole(ledger)
    capsys.readouterr()
    CALLS[call](ledger, I)
    assert whole(ledger) == before
    assert printed(capsys) == []


# Calls that act but have nothing left to change: mark_weights_partial on STALE keeps the
# verdict and stays STALE; mark_restart_failed on DEAD stays DEAD. The transition table pins them.
NOTHING_LEFT_TO_CHANGE = {("partial", "STALE"), ("restart_failed", "DEAD")}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("call", [call for call, _ in IGNORED])
def test_guard_sets_are_exact(variant: str, call: str) -> None:
    """Outside its ignored set every guarded call acts: it changes the record or the history
    (the history block runs only when the call was not ignored)."""
    ignored = dict(IGNORED)[call]
    for state in ALL_STATES:
        if state in ignored:
            continue
        ledger = new_ledger(variant)
        drive(ledger, RICH[state])
        before = whole(ledger)
        CALLS[call](ledger, I)
        acted = whole(ledger) != before
        if (call, state) in NOTHING_LEFT_TO_CHANGE:
            continue
        assert acted, f"{call} in {state} changed nothing, but {state} is not in its ignored set"


# --- the fix: mark_loaded forgets the dead process's streak and verdict ------------------

# (id, setup, as_written changes, fixed changes)
LOADED_CASES: list[tuple[str, list[str], dict[str, Any], dict[str, Any]]] = [
    (
        "RESTARTING after request streak",
        ["dead", "restarting"],
        {URL: NEW_URL, ST: "STALE"},
        {URL: NEW_URL, RF: 0, ST: "STALE"},
    ),
    (
        "RESTARTING after condemned SUSPECT verdict",
        ["probe_fail", "fail", "fail", "partial", "condemn", "restarting"],
        {PF: 0, URL: NEW_URL, ST: "STALE"},
        {PF: 0, URL: NEW_URL, RF: 0, SBP: None, ST: "STALE"},
    ),
    (
        "STALE with HEALTHY verdict (lax guard)",
        ["fail", "probe_ok", "probe_ok", "partial"],
        {PS: 0, URL: NEW_URL},
        {PS: 0, URL: NEW_URL, RF: 0, SBP: None},
    ),
    ("SUSPECT (lax guard)", ["fail", "fail"], {URL: NEW_URL, ST: "STALE"}, {URL: NEW_URL, RF: 0, ST: "STALE"}),
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("setup", "as_written", "fixed"), [pytest.param(*row[1:], id=row[0]) for row in LOADED_CASES])
def test_mark_loaded_variants_differ(
    variant: str, setup: list[str], as_written: dict[str, Any], fixed: dict[str, Any]
) -> None:
    ledger = new_ledger(variant)
    drive(ledger, setup)
    before = record(ledger)
    CALLS["loaded"](ledger, I)
    changes = as_written if variant == "as_written" else fixed
    assert record(ledger) == {**before, **changes}


@pytest.mark.parametrize(
    ("variant", "state_after_refit", "streak_after_refit"), [("as_written", "SUSPECT", 2), ("fixed", "HEALTHY", 0)]
)
def test_restarted_engine_refit_outcome(variant: str, state_after_refit: str, streak_after_refit: int) -> None:
    """The two lines of the fix are the only difference: after a reload and a refit, the
    replacement starts clean only in `fixed`."""
    ledger = new_ledger(variant)
    drive(ledger, ["fail", "fail", "partial", "condemn", "restarting", "loaded", "refit"])
    assert ledger.state_of(I) == state_after_refit
    assert record(ledger)[RF] == streak_after_refit
    assert record(ledger)[SBP] is None


# --- report_refit is sequential ---------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_report_refit_reads_then_clears_verdict(variant: str) -> None:
    ledger = new_ledger(variant)
    drive(ledger, ["fail", "fail", "partial"])
    assert record(ledger)[SBP] == "SUSPECT"
    assert ledger.suspected_shards() == [I]
    ledger.report_refit(I, weight_version=1)
    # SUSPECT branch: back to SUSPECT, the streak is kept, the verdict is gone.
    assert record(ledger)[ST] == "SUSPECT" and record(ledger)[RF] == 2 and record(ledger)[SBP] is None
    # A second refit reads the cleared field (None), takes the else branch: streak reset, HEALTHY.
    ledger.report_refit(I, weight_version=2)
    assert record(ledger)[ST] == "HEALTHY" and record(ledger)[RF] == 0 and record(ledger)[WV] == 2


@pytest.mark.parametrize("variant", VARIANTS)
def test_report_refit_suspect_branch_keeps_streak_then_one_failure_condemns(variant: str) -> None:
    ledger = new_ledger(variant)
    drive(ledger, ["fail", "fail", "partial", "refit"])
    assert record(ledger)[RF] == 2
    CALLS["fail"](ledger, I)
    assert ledger.state_of(I) == "DEAD"


# --- the fleet: epoch, logs, queries, indices, enum values ----------------------------------

EPOCH_CASES: list[tuple[str, list[str], str, int]] = [
    ("HEALTHY->SUSPECT", [], "fail", 0),
    ("SUSPECT->HEALTHY", ["probe_fail", "probe_ok"], "probe_ok", 0),
    ("HEALTHY->STALE", [], "partial", 1),
    ("SUSPECT->DEAD", ["fail", "fail"], "fail", 1),
    ("HEALTHY->RESTARTING", [], "restarting", 1),
    ("HEALTHY->RETIRED", [], "retire", 1),
    ("STALE->DEAD", ["partial"], "condemn", 0),
    ("DEAD->RESTARTING", ["dead"], "restarting", 0),
    ("RESTARTING->STALE", ["dead", "restarting"], "loaded", 0),
    ("RESTARTING->DEAD", ["dead", "restarting"], "restart_failed", 0),
    ("STALE->HEALTHY", ["partial"], "refit", 1),
    ("STALE->SUSPECT", ["fail", "partial"], "refit", 1),
    ("DEAD->HEALTHY", ["dead"], "refit", 1),
    ("DEAD->RETIRED", ["dead"], "retire", 0),
    ("STALE->STALE", ["partial"], "partial", 0),
    ("RETIRED->RETIRED", ["retire"], "retire", 0),
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("setup", "call", "bump"), [pytest.param(*row[1:], id=row[0]) for row in EPOCH_CASES])
def test_membership_epoch_bumps_when_serving_set_changes(variant: str, setup: list[str], call: str, bump: int) -> None:
    ledger = new_ledger(variant)
    drive(ledger, setup)
    epoch = ledger.membership_epoch
    CALLS[call](ledger, I)
    assert ledger.membership_epoch - epoch == bump


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("seed", range(5))
def test_random_walk_epoch_and_log_lines(variant: str, seed: int, capsys: pytest.CaptureFixture[str]) -> None:
    """Over a long arbitrary call sequence: the epoch moves by one exactly when a call changes
    the set of serving shards, and a call prints one line exactly when it changes a state."""
    rng = random.Random(seed)
    ledger = new_ledger(variant)
    names = sorted(CALLS)
    capsys.readouterr()
    for _ in range(400):
        shard = rng.randrange(SHARDS)
        call = rng.choice(names)
        states = [ledger.state_of(i).name for i in range(SHARDS)]
        epoch, was_serving = ledger.membership_epoch, serving(ledger)
        CALLS[call](ledger, shard)
        after = [ledger.state_of(i).name for i in range(SHARDS)]
        assert ledger.membership_epoch - epoch == (1 if serving(ledger) != was_serving else 0), (call, states, after)
        assert [i for i in range(SHARDS) if states[i] != after[i]] in ([], [shard])
        assert len(printed(capsys)) == (1 if states != after else 0), (call, states, after)


SAME_STATE = [
    ("partial on STALE", ["partial"], "partial"),
    ("retire on RETIRED", ["retire"], "retire"),
    ("restarting on RESTARTING", ["dead", "restarting"], "restarting"),
    ("restart_failed on DEAD", ["dead"], "restart_failed"),
    ("loaded on STALE", ["partial"], "loaded"),
    ("fail on SUSPECT below T", ["fail"], "fail"),
    ("probe_ok on SUSPECT below H", ["fail"], "probe_ok"),
    ("refit on HEALTHY", [], "refit"),
    ("success on HEALTHY", [], "success"),
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("setup", "call"), [pytest.param(*row[1:], id=row[0]) for row in SAME_STATE])
def test_transition_to_same_state_prints_nothing(
    variant: str, setup: list[str], call: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = new_ledger(variant)
    drive(ledger, setup)
    state, epoch = ledger.state_of(I).name, ledger.membership_epoch
    capsys.readouterr()
    CALLS[call](ledger, I)
    assert ledger.state_of(I) == state
    assert ledger.membership_epoch == epoch
    assert printed(capsys) == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_real_state_change_prints_one_line(variant: str, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = new_ledger(variant)
    capsys.readouterr()
    ledger.report_failure(2, ERR)
    lines = printed(capsys)
    assert len(lines) == 1
    assert "2" in lines[0] and "HEALTHY" in lines[0] and "SUSPECT" in lines[0]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("index", [SHARDS, -1, 100])
def test_unknown_shard_raises_key_error(variant: str, call: str, index: int) -> None:
    ledger = new_ledger(variant)
    before = whole(ledger)
    with pytest.raises(KeyError):
        CALLS[call](ledger, index)
    assert whole(ledger) == before


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("index", [SHARDS, -1])
def test_unknown_shard_state_of_raises_key_error(variant: str, index: int) -> None:
    with pytest.raises(KeyError):
        new_ledger(variant).state_of(index)


@pytest.mark.parametrize("variant", VARIANTS)
def test_states_compare_equal_to_name_and_value(variant: str) -> None:
    ledger = new_ledger(variant)
    api = api_for(variant)
    drive(ledger, ["fail"], shard=1)
    drive(ledger, ["partial"], shard=2)
    for shard, name in ((0, "HEALTHY"), (1, "SUSPECT"), (2, "STALE")):
        state = ledger.state_of(shard)
        assert state == name
        assert state == name.lower()
        assert state == api.State[name]
        assert state.value == name.lower()
        assert state != "DEAD" and state != "dead"
        assert ledger.snapshot()[shard].state == name
        assert ledger.snapshot()[shard].state == name.lower()
    assert ledger.snapshot()[2].state_before_partial == "HEALTHY"
    assert ledger.snapshot()[2].state_before_partial == "healthy"
    assert [m.value for m in api.State] == [s.lower() for s in ALL_STATES]


@pytest.mark.parametrize("variant", VARIANTS)
def test_fleet_queries(variant: str) -> None:
    api = api_for(variant)
    ledger = api.Ledger(shard_count=8, policy=api.Policy(), base_urls=[f"http://s{i}" for i in range(8)])
    drive(ledger, [], shard=0)  # HEALTHY
    drive(ledger, ["fail"], shard=1)  # SUSPECT
    drive(ledger, ["fail", "partial"], shard=2)  # STALE, verdict SUSPECT
    drive(ledger, ["partial"], shard=3)  # STALE, verdict HEALTHY
    drive(ledger, ["dead"], shard=4)  # DEAD
    drive(ledger, ["dead", "restarting"], shard=5)  # RESTARTING
    drive(ledger, ["retire"], shard=6)  # RETIRED
    drive(ledger, ["fail", "partial", "condemn", "restarting", "loaded"], shard=7)  # STALE, reloaded
    assert ledger.serving_shards() == [0, 1]
    assert ledger.absent_shards() == [4, 5, 6]
    # as written, the reloaded shard 7 still carries the dead process's SUSPECT verdict
    assert ledger.suspected_shards() == ([1, 2, 7] if variant == "as_written" else [1, 2])


@pytest.mark.parametrize("variant", VARIANTS)
def test_dead_shard_carrying_verdict_is_not_suspected(variant: str) -> None:
    ledger = new_ledger(variant)
    drive(ledger, ["fail", "partial", "condemn"])
    assert record(ledger)[SBP] == "SUSPECT"
    assert ledger.suspected_shards() == []
    assert ledger.absent_shards() == [I]


# --- guards read the policy -------------------------------------------------------------------

# (id, policy overrides, setup, call, changes)
POLICY_CASES: list[tuple[str, dict[str, int], list[str], str, dict[str, Any]]] = [
    ("T=2: second failed request -> DEAD", {"unhealthy_threshold": 2}, ["fail"], "fail", {RF: 2, ST: "DEAD"}),
    ("T=2: second failed probe -> DEAD", {"unhealthy_threshold": 2}, ["probe_fail"], "probe_fail", {PF: 2, ST: "DEAD"}),
    ("T=2: actor death sets probe failures to T", {"unhealthy_threshold": 2}, [], "actor_death", {PF: 2, ST: "DEAD"}),
    ("T=1: one failed request -> DEAD", {"unhealthy_threshold": 1}, [], "fail", {RF: 1, ST: "DEAD"}),
    ("T=5: third failed request stays SUSPECT", {"unhealthy_threshold": 5}, ["fail", "fail"], "fail", {RF: 3}),
    ("T=5: actor death sets probe failures to T", {"unhealthy_threshold": 5}, [], "actor_death", {PF: 5, ST: "DEAD"}),
    ("H=1: one good probe -> HEALTHY", {"healthy_threshold": 1}, ["fail"], "probe_ok", {PS: 1, ST: "HEALTHY"}),
    ("H=3: second good probe stays SUSPECT", {"healthy_threshold": 3}, ["fail", "probe_ok"], "probe_ok", {PS: 2}),
    (
        "H=3: third good probe -> HEALTHY",
        {"healthy_threshold": 3},
        ["fail", "probe_ok", "probe_ok"],
        "probe_ok",
        {PS: 3, ST: "HEALTHY"},
    ),
    (
        "M=0: first restart retires",
        {"max_restart_attempts_per_shard": 0},
        ["dead"],
        "restarting",
        {RA: 1, ST: "RETIRED"},
    ),
    (
        "M=1: first restart allowed",
        {"max_restart_attempts_per_shard": 1},
        ["dead"],
        "restarting",
        {RA: 1, ST: "RESTARTING"},
    ),
    (
        "M=1: second restart retires",
        {"max_restart_attempts_per_shard": 1},
        ["dead", "restarting", "restart_failed"],
        "restarting",
        {RA: 2, ST: "RETIRED"},
    ),
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(
    ("policy", "setup", "call", "changes"), [pytest.param(*row[1:], id=row[0]) for row in POLICY_CASES]
)
def test_guards_read_the_policy(
    variant: str, policy: dict[str, int], setup: list[str], call: str, changes: dict[str, Any]
) -> None:
    ledger = new_ledger(variant, **policy)
    drive(ledger, setup)
    before = record(ledger)
    CALLS[call](ledger, I)
    assert record(ledger) == {**before, **changes}


@pytest.mark.parametrize("variant", VARIANTS)
def test_non_default_threshold_dead_setup(variant: str) -> None:
    ledger = new_ledger(variant, unhealthy_threshold=2)
    drive(ledger, ["dead"])  # two failed requests at T=2
    assert ledger.state_of(I) == "DEAD"
    assert record(ledger)[RF] == 2
