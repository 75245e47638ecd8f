"""Liveness (`kind = "eventually"`): the fair-lasso search of `model.liveness`.

The deliberately broken variant lives in a copy of the spec made here, not in the bundled
spec: a variant that hangs on purpose would add a row to every check, a module to `gen` and
a reference candidate to `mutate`, and users would read it as a finding about the ledger.
"""

from __future__ import annotations

import json
import re

import pytest
import z3
from budgets import Tripping
from tiers import fast_slice

from ledgercheck.model import budget, formats
from ledgercheck.model.cli import main, result_json
from ledgercheck.model.figure import markdown_table, trace_figure
from ledgercheck.model.liveness import _sccs, check_liveness
from ledgercheck.model.spec import SpecFile, load_spec, load_spec_text

PROPERTY = "restart_always_ends"


def hanging_spec() -> SpecFile:
    """The bundled spec plus `restart_hangs`: a failed restart is retried in place, so the
    restart can stay in flight forever (every fair run keeps failing it)."""
    text = load_spec().source.text
    text = re.sub(r'refit_keeps_streak = "(\w+)" \}', r'refit_keeps_streak = "\1", restart_hangs = "holds" }', text)
    start = text.index(f"[properties.{PROPERTY}]")
    end = text.index("[properties.", start + 1)
    block = text[start:end].replace('restart_hangs = "holds"', 'restart_hangs = "violated"')
    text = text[:start] + block + text[end:]
    text += (
        "\n[variants.restart_hangs]\n"
        'doc = "broken on purpose: a failed restart is retried in place and can hang forever"\n\n'
        "[[variants.restart_hangs.patch]]\n"
        'event = "mark_restart_failed"\nreplace = "state = DEAD"\ninsert = "state = RESTARTING"\n'
    )
    return load_spec_text(text, "fleet_health.toml")


@pytest.mark.parametrize("shards", fast_slice([1, 2]))
def test_a_restart_that_can_hang_gives_a_fair_lasso_with_its_loop_marked(shards: int) -> None:
    spec = hanging_spec().variant("restart_hangs")
    prop = spec.property(PROPERTY)
    result = check_liveness(spec, "controller", prop, shards=shards, policy=spec.default_policy(), max_states=20_000)
    assert result.status == "violated" and result.matches is True, result.note
    assert "weak fairness of restart_loaded | restart_fails per shard" in result.assumptions
    trace = result.traces[0]
    start = trace.loop_start
    assert start is not None and 0 < start < trace.depth
    states = [s.after["shards"][0]["state"] for s in trace.steps]
    # From the loop's start on, the shard is RESTARTING at every state, and the loop closes.
    assert all(state == "RESTARTING" for state in states[start:]), states
    # (equal on the cone of influence: every shard's state; a weight version may differ)
    assert [r["state"] for r in trace.steps[-1].after["shards"]] == [
        r["state"] for r in trace.steps[start].after["shards"]
    ]
    # The loop takes the fair group on shard 0 (a restart outcome), so the run is fair.
    assert any(s.action == "restart_fails" and s.shards.get("i") == 0 for s in trace.steps[start + 1 :])
    text = trace_figure(trace, spec, width=10_000)
    assert f"[back to step {start}]" in text and "[loop starts after this]" in text
    assert f"[back to step {start}]" in markdown_table(trace, spec)
    data = result_json(result)
    assert data["loop_start"] == [start] and "fairness" in data["assumptions"]
    itf = json.loads(formats.itf_check(hanging_spec(), [result]))
    assert itf[0]["loop"] == start and itf[0]["#meta"]["loop_start"] == start


def test_without_fairness_even_fixed_has_a_lasso() -> None:
    """The fairness assumption is what the proof rests on: without it, a restart may simply
    never be answered while the rest of the fleet carries on (two shards: with one, a
    RESTARTING shard leaves nothing else enabled, so every run ends its restart anyway)."""
    text = load_spec().source.text
    text = re.sub(r"^fairness = .*\n", "", text, flags=re.MULTILINE)
    spec = load_spec_text(text, "fleet_health.toml").variant("fixed")
    result = check_liveness(
        spec, "controller", spec.property(PROPERTY), shards=2, policy=spec.default_policy(), max_states=20_000
    )
    assert result.status == "violated"
    assert "no fairness assumed" in result.assumptions
    assert result.traces[0].loop_start is not None


@pytest.mark.parametrize("variant", ["as_written", "fixed", "refit_keeps_streak"])
def test_every_real_variant_is_proved_by_exhaustion_at_one_shard(variant: str) -> None:
    spec = load_spec().variant(variant)
    result = check_liveness(spec, "controller", spec.property(PROPERTY), shards=1, policy=spec.default_policy())
    assert result.status == "proved" and result.matches is True, result.note
    assert "exhaustion" in result.note and "SCC" in result.note
    assert "a background restart always ends" in result.assumptions


@pytest.mark.slow
def test_real_variants_hold_to_a_stated_bound_at_four_shards(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--property", PROPERTY, "--variant", "fixed", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"restart_always_ends\s+holds up to depth \d+", out), out
    assert "assuming weak fairness of restart_loaded | restart_fails per shard" in out, out


def test_strongly_connected_components() -> None:
    succ = {0: [1], 1: [2], 2: [0, 3], 3: [3], 4: [0]}
    components = sorted(sorted(c) for c in _sccs([0, 1, 2, 3, 4], succ))
    assert components == [[0, 1, 2], [3], [4]]


def test_an_eventually_property_is_about_one_shard() -> None:
    text = load_spec().source.text.replace(f"[properties.{PROPERTY}]\n", f'[properties.{PROPERTY}]\nscope = "fleet"\n')
    with pytest.raises(Exception, match="about one shard"):
        load_spec_text(text, "fleet_health.toml")


def test_the_z3_lasso_search_finds_the_hanging_restart_and_closes_its_loop() -> None:
    from ledgercheck.model.lasso import z3_lasso

    spec = hanging_spec().variant("restart_hangs")
    result = z3_lasso(spec, "controller", spec.property(PROPERTY), shards=2, policy=spec.default_policy(), max_depth=6)
    assert result.status == "violated" and result.engine == "bmc"
    trace = result.traces[0]
    assert trace.loop_start is not None and trace.loop_start < trace.depth
    states = [[r["state"] for r in s.after["shards"]] for s in trace.steps]
    assert states[-1] == states[trace.loop_start] and states[-1][0] == "RESTARTING"


@pytest.mark.slow
def test_the_z3_lasso_search_needs_fairness_and_goes_deeper_than_the_explicit_bound() -> None:
    from ledgercheck.model.lasso import z3_lasso

    text = re.sub(r"^fairness = .*\n", "", load_spec().source.text, flags=re.MULTILINE)
    unfair = load_spec_text(text, "fleet_health.toml").variant("fixed")
    found = z3_lasso(
        unfair, "controller", unfair.property(PROPERTY), shards=2, policy=unfair.default_policy(), max_depth=6
    )
    assert found.status == "violated" and found.traces[0].loop_start is not None
    spec = load_spec().variant("fixed")
    result = z3_lasso(spec, "controller", spec.property(PROPERTY), shards=4, policy=spec.default_policy(), max_depth=7)
    assert (result.status, result.depth) == ("holds_to_depth", 7), result.note
    assert "a background restart always ends" in result.assumptions


def _z3_lasso_of_fixed(max_depth: int = 4):
    from ledgercheck.model.lasso import z3_lasso

    spec = load_spec().variant("fixed")
    prop = spec.property(PROPERTY)
    return z3_lasso(spec, "controller", prop, shards=2, policy=spec.default_policy(), max_depth=max_depth)


def test_the_z3_lasso_search_stops_when_the_budget_runs_out() -> None:
    """The command's budget stops the lasso search as it stops every other: the answer is
    unknown with the depth established, never `holds` (a run at 16 shards was still searching
    25 minutes after it started, under a 600 s budget, before the search consulted it)."""
    with budget.using(Tripping(3)):
        result = _z3_lasso_of_fixed()
    assert result.status == "unknown", result.note
    assert "the time budget (test) ran out at depth" in result.note and "lasso" in result.note


def test_a_lasso_query_the_solver_gives_up_on_is_unknown(monkeypatch) -> None:
    """Z3 answering unknown (its per-call timeout, or quantifiers it cannot decide) is not
    "no fair lasso": the search says what it established and stops."""
    real = z3.Solver.check
    calls = {"n": 0}

    def gives_up_at_the_fifth(self, *args):
        calls["n"] += 1
        return z3.unknown if calls["n"] == 5 else real(self, *args)

    monkeypatch.setattr(z3.Solver, "check", gives_up_at_the_fifth)
    monkeypatch.setattr(z3.Solver, "reason_unknown", lambda self: "canceled")
    result = _z3_lasso_of_fixed()
    assert result.status == "unknown" and "the solver gave up (canceled) at depth" in result.note, result.note
    assert f"no fair lasso up to depth {result.depth}" in result.note


def test_the_explicit_liveness_search_stops_when_the_budget_runs_out() -> None:
    """The explicit search for a fair lasso consults the command's budget at every state it
    expands (a level of a 16-shard fleet took minutes past a spent budget): unknown, with
    what was expanded, never a proof by exhaustion or `holds`."""
    spec = load_spec().variant("fixed")
    prop = spec.property(PROPERTY)
    with budget.using(Tripping(50)):
        result = check_liveness(spec, "controller", prop, shards=2, policy=spec.default_policy())
    assert result.status == "unknown", result.note
    assert result.note.startswith("the time budget (test) ran out after 50 of "), result.note


SAMPLED_LIVENESS = """\
[spec]
name = "live"
state_field = "state"
default_shards = 1

[enums.State]
members = ["IDLE", "WAITING", "STUCK"]

[fields]
state = { type = "State", initial = "IDLE" }

[events.start]
call = "start(i)"
ignore_when = "state != IDLE"
body = "state = WAITING"

[events.finish]
call = "finish(i, code: int)"
ignore_when = "state != WAITING"
body = \"\"\"
if args.code == 5:
    state = STUCK
else:
    state = IDLE
\"\"\"

[environments.callers]
fairness = [{ weak = ["end"], doc = "a started job always ends" }]

[environments.callers.actions.begin]
params = "i: shard"
when = "i.state == IDLE"
body = "start(i)"

[environments.callers.actions.end]
params = "i: shard, code: int"
when = "i.state == WAITING"
body = "finish(i, code=code)"

[properties.waiting_ends]
kind = "eventually"
when = "state == WAITING or state == STUCK"
assert = "state == IDLE"
message = "a shard never got back to IDLE"
expect = { base = "holds" }
"""


def test_a_lasso_behind_an_int_value_outside_the_sample_is_found():
    """`end(i, 5)` leaves a job STUCK forever. The explicit lasso search tries ints 0..2
    only, found no lasso there, and called that a proof ("proved by exhaustion"); over a
    sample it is no information, and the Z3 lasso search decides."""
    from ledgercheck.model.liveness import check_eventually

    spec = load_spec_text(SAMPLED_LIVENESS, "live.toml").variant()
    prop = spec.properties["waiting_ends"]
    found = check_eventually(spec, "callers", prop, shards=1, policy=spec.default_policy(), max_depth=8)
    assert found.status == "violated", found.note
    proved = check_eventually(spec, "callers", prop, shards=1, policy=spec.default_policy(), max_depth=8, prove=True)
    assert proved.status == "violated", proved.note


def test_a_symbolic_policy_leaves_liveness_unknown_and_checks_the_rest(capsys: pytest.CaptureFixture[str]) -> None:
    """The lasso search enumerates states, so it needs a concrete policy: under
    `--symbolic-policy` a liveness property is UNKNOWN (exit 3, never a pass) and says why,
    where the whole run used to be refused for it (exit 2) and nothing else was checked."""
    code = main(
        [
            "check",
            "--symbolic-policy",
            "--variant",
            "fixed",
            "--environment",
            "controller",
            "--property",
            "restart_always_ends",
            "--property",
            "no_condemnation_by_inherited_streak",
            "--format",
            "json",
            "--max-depth",
            "4",
        ]
    )
    results = {r["property"]: r for r in json.loads(capsys.readouterr().out)}
    assert code == 3
    assert results["restart_always_ends"]["status"] == "unknown"
    assert "checked at a concrete policy only" in results["restart_always_ends"]["note"]
    assert results["no_condemnation_by_inherited_streak"]["status"] in ("holds_to_depth", "proved")


ELECTIONS = """\
[spec]
name = "elections"
api_class = "Node"
state_field = "state"
default_shards = 1

[enums.Role]
members = ["FOLLOWER", "CANDIDATE", "LEADER"]

[fields]
state = { type = "Role", initial = "FOLLOWER" }
term = { type = "int", initial = 0 }
best = { type = "int", initial = 0 }

[events.stand]
call = "stand(i)"
ignore_when = "state == LEADER"
body = \"\"\"
state = CANDIDATE
term = term + 1
if term > best:
    best = term
\"\"\"

[events.win]
call = "win(i)"
ignore_when = "state != CANDIDATE or term == 0"
body = "state = LEADER"

[environments.cluster]
doc = "split votes: a candidate may stand again, term after term"
fairness = [{ weak = ["elect"], doc = "an election is eventually won" }]

[environments.cluster.actions.split]
params = "i: shard"
when = "i.state != LEADER"
body = "stand(i)"

[environments.cluster.actions.elect]
params = "i: shard"
when = "i.state == CANDIDATE and i.term < i.best"
body = "win(i)"

[properties.candidacy_ends]
kind = "eventually"
environments = ["cluster"]
when = "state == CANDIDATE"
assert = "state != CANDIDATE"
expect = { base = "holds" }
"""


def test_a_bounded_lasso_search_over_an_infinite_state_space_says_what_it_cannot_show(capsys) -> None:
    """A candidate that stands again term after term never comes back to a state it was in
    (its term grows): no lasso exists, and the search said `holds up to depth N [as expected]`
    and nothing else (a Raft trial's split votes). It says the space is infinite now, beside
    the verdict, and what that leaves unshown."""
    spec = load_spec_text(ELECTIONS, "elections.toml").variant()
    prop = spec.property("candidacy_ends")
    result = check_liveness(spec, "cluster", prop, shards=1, policy={}, max_states=2_000)
    assert result.status == "holds_to_depth"
    assert "the reduced state space is infinite: field term grows without bound" in result.note
    assert result.note.endswith(
        "a counterexample that never comes back to a state it was in is no lasso, and this search cannot show one"
    )
    from ledgercheck.model.textout import verdict_line

    line = verdict_line(result)
    assert line.splitlines()[-1].strip() == result.note
