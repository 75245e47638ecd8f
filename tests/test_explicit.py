"""The explicit-state engine and the Z3 engine agree on the bundled spec.

For every (variant, property, environment) at 2 shards: the same verdict and the same
shortest depth (up to depth 10 in the controller environment; in the `ledger` environment,
where any call may come at any time, the explicit state space grows about threefold per step,
so the default depth there is 7 and `LEDGERCHECK_EXPLICIT_LEDGER_DEPTH=10` runs the full
check, a matter of minutes). Where a property is violated, both engines list every distinct
view of its shortest counterexamples (the Z3 engine's up to 64 per depth), and the two sets of
views are equal. The reductions of the explicit engine (symmetry, memoisation) change no
answer: checked against a search without them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ledger_fixture import LEDGER_EXAMPLES
from tiers import fast_slice

from ledgercheck.model import bmc
from ledgercheck.model.explicit import explicit_check, explicit_check_all, view_key
from ledgercheck.model.spec import load_spec_text

SHARDS = 2
DEPTHS = {"controller": 10, "ledger": int(os.environ.get("LEDGERCHECK_EXPLICIT_LEDGER_DEPTH", "7"))}
VIEWS = 64  # the Z3 engine tries at most 64 traces per depth
CASES = [(variant, env) for variant in ("as_written", "fixed") for env in ("controller", "ledger")]


def views(result: bmc.Result, spec) -> set:
    return {view_key(t, spec, t.focus) for t in result.traces if t.depth == result.depth}


# The fast lane compares the engines on as_written in the ledger environment; the full suite on all four.
@pytest.mark.parametrize(("variant", "env"), fast_slice(CASES, keep=[CASES.index(("as_written", "ledger"))]))
def test_explicit_engine_agrees_with_z3(spec_file, variant, env):
    spec = spec_file.variant(variant)
    policy = spec.default_policy()
    depth = DEPTHS[env]
    props = [p for p in spec.properties.values() if p.kind != "eventually"]  # liveness: test_liveness.py
    ours = explicit_check_all(spec, env, props, shards=SHARDS, policy=policy, max_depth=depth, max_traces=1)
    for prop, mine in zip(props, ours, strict=True):
        z3_result = bmc.check_property(
            spec, env, prop, shards=SHARDS, policy=policy, max_depth=depth, max_traces=1, lax=False
        )
        what = f"{variant}/{env}/{prop.name}"
        assert (mine.status, mine.depth) == (z3_result.status, z3_result.depth), f"{what}: {mine.note}"
        if mine.status != "violated":
            assert mine.traces == []
            continue
        trace = mine.traces[0]
        assert trace.depth == z3_result.traces[0].depth == mine.depth
        assert [s.to_json().keys() for s in trace.steps] == [s.to_json().keys() for s in z3_result.traces[0].steps]
        assert trace.classification == "reachable" and trace.focus == 0
        # Every distinct view of the shortest counterexamples, from both engines.
        shortest = mine.depth
        listed = explicit_check(spec, env, prop, shards=SHARDS, policy=policy, max_depth=shortest, max_traces=VIEWS)
        solved = bmc.check_property(
            spec, env, prop, shards=SHARDS, policy=policy, max_depth=shortest, max_traces=VIEWS, lax=False
        )
        assert listed.depth == solved.depth == shortest, what
        if len(solved.traces) < VIEWS:
            assert views(listed, spec) == views(solved, spec), what
        assert len(views(listed, spec)) == len(listed.traces), f"{what}: traces with the same view"


@pytest.mark.parametrize(("shards", "reduction"), fast_slice([(3, "symmetry"), (2, "memo")], keep=[1]))
def test_reductions_change_no_answer(spec_file, shards, reduction):
    """Symmetry reduction (at 3 shards, where it merges states) and memoisation, each against a
    search without it: the same shortest depth and the same views."""
    spec = spec_file.variant("as_written")
    policy = spec.default_policy()
    prop = spec.properties["restarted_engine_refits_healthy"]
    fast = explicit_check(spec, "controller", prop, shards=shards, policy=policy, max_depth=6, max_traces=VIEWS)
    plain = explicit_check(
        spec, "controller", prop, shards=shards, policy=policy, max_depth=6, max_traces=VIEWS, **{reduction: False}
    )
    assert (fast.status, fast.depth) == (plain.status, plain.depth) == ("violated", 6)
    assert views(fast, spec) == views(plain, spec)
    if reduction == "symmetry":
        states = [int(r.note.split(" states")[0].split()[-1]) for r in (fast, plain)]
        assert states[0] < states[1], "symmetry reduction merged no states"


# The example breaker, with what the bundled spec lacks: an enum parameter, an aggregate in a
# guard and a loop, a fleet value counted by the state hook, and fleet properties (whose view is
# the actions with their shards, so the view search runs without symmetry reduction).
FLEET_EXTRAS = '''
[globals]
opened = { type = "int", initial = 0 }

[on_state_change]
body = "opened = opened + 1 if new == OPEN else opened"

[environments.ops.actions.fail]
params = "i: shard"
body = "record_failure(i)"

[environments.ops.actions.fail_all_in]
params = "m: Mode"
when = "exists(state == m)"
body = """
for s in shards:
    if s.state == m:
        record_failure(s)
"""

[environments.ops.actions.cool]
params = "i: shard"
when = "i.state == OPEN"
body = "cool_down(i)"

[environments.ops.actions.succeed]
params = "i: shard"
body = "record_success(i)"

[properties.at_most_one_open]
kind = "invariant"
scope = "fleet"
assert = "count(state == OPEN) <= 1"
expect = { base = "violated" }

[properties.few_openings]
kind = "invariant"
scope = "fleet"
assert = "opened <= 2"
expect = { base = "violated" }
'''


@pytest.mark.parametrize("env", ["ledger", "ops"])
def test_fleet_properties_and_enum_parameters(env):
    text = (LEDGER_EXAMPLES / "breaker.toml").read_text() + FLEET_EXTRAS
    spec = load_spec_text(text).variant()
    policy = spec.default_policy()
    for prop in spec.properties.values():
        mine = explicit_check(spec, env, prop, shards=SHARDS, policy=policy, max_depth=8, max_traces=1)
        solved = bmc.check_property(spec, env, prop, shards=SHARDS, policy=policy, max_depth=8, max_traces=1, lax=False)
        assert (mine.status, mine.depth) == (solved.status, solved.depth), prop.name
        if prop.fleet:
            assert mine.status == "violated"
            listed = explicit_check(
                spec, env, prop, shards=SHARDS, policy=policy, max_depth=mine.depth, max_traces=VIEWS
            )
            solved = bmc.check_property(
                spec, env, prop, shards=SHARDS, policy=policy, max_depth=mine.depth, max_traces=VIEWS, lax=False
            )
            assert len(solved.traces) < VIEWS
            assert views(listed, spec) == views(solved, spec), prop.name


def test_int_parameters_are_reported_as_an_under_approximation(spec_file):
    """Without the reduction nothing says weight_version cannot matter: searched over 0..2
    only, no violation found is no verdict (it was `holds_to_depth` with a caveat)."""
    spec = spec_file.variant("fixed")
    prop = spec.properties["restarted_engine_refits_healthy"]
    result = explicit_check(
        spec, "ledger", prop, shards=1, policy=spec.default_policy(), max_depth=3, max_traces=1, reduce=False
    )
    assert result.status == "unknown"
    assert "under-approximation" in result.note and "report_refit.weight_version" in result.note
    assert "not established" in result.note


def test_an_int_parameter_outside_the_cone_needs_one_value(spec_file):
    """report_refit's weight_version only sets a field no property reads: the reduced search
    tries one value and claims no under-approximation."""
    spec = spec_file.variant("fixed")
    prop = spec.properties["restarted_engine_refits_healthy"]
    result = explicit_check(spec, "ledger", prop, shards=1, policy=spec.default_policy(), max_depth=3, max_traces=1)
    assert result.status == "holds_to_depth"
    assert "under-approximation" not in result.note
    assert "weight_version" in result.note.split("outside the cone of influence:")[1].split(";")[0]


def test_not_applicable_and_policy_required(spec_file):
    spec = spec_file.variant("fixed")
    prop = spec.properties["condemned_suspect_carries_verdict"]
    assert (
        explicit_check(spec, "ledger", prop, shards=2, policy=spec.default_policy(), max_depth=3, max_traces=1).status
        == "not_applicable"
    )
    with pytest.raises(Exception, match="concrete policy"):
        explicit_check(spec, "controller", prop, shards=2, policy=None, max_depth=3, max_traces=1)


FIVE = """\
[spec]
name = "five"
state_field = "state"
default_shards = 1

[enums.State]
members = ["OK", "BAD"]

[fields]
state = { type = "State", initial = "OK" }
level = { type = "int", initial = 0 }

[events.put]
call = "put(i, c: int)"
body = \"\"\"
if args.c == 5:
    state = BAD
\"\"\"
ADD_HERE
[environments.ledger]
any_call = true

[properties.never_bad]
kind = "invariant"
assert = "state != BAD"
expect = { base = "holds" }
"""
ADD = '''
[events.add]
call = "add(i, c: int)"
body = """
level = level + args.c
if level > 7:
    state = BAD
"""
'''


@pytest.mark.parametrize("add", [False, True], ids=["put-only", "put-and-add"])
def test_an_int_parameter_searched_over_a_sample_is_never_a_pass(add: bool) -> None:
    """`put(i, 5)` breaks the property in one step. The explicit engine tries ints 0..2: it
    said "holds up to depth 12" (and `auto`, the setting for CI, passed it), or, with `add`,
    reported a 4-step trace as the shortest. Over a sample of an int parameter the property's
    cone reads, the explicit engine's "none found" is unknown, and `auto` and `prove` leave
    the property to Z3, which finds the 1-step trace."""
    from ledgercheck.model import runs
    from ledgercheck.model.explicit import approximated_params
    from ledgercheck.model.prove import prove_property

    spec_file = load_spec_text(FIVE.replace("ADD_HERE", ADD if add else ""), "five.toml")
    spec = spec_file.variant()
    prop = spec.properties["never_bad"]
    policy = spec.default_policy()
    assert approximated_params(spec, spec.environment("ledger"), [prop], policy) == [
        *(["add.c"] if add else []),
        "put.c",
    ]
    alone = explicit_check(spec, "ledger", prop, shards=1, policy=policy, max_depth=12, max_traces=1)
    assert alone.status == ("violated" if add else "unknown"), alone.note
    assert "int parameters" in alone.note
    request = runs.CheckRequest(spec_file, engine="auto", max_traces=1)
    (auto,) = runs.run_checks(request)
    assert (auto.status, auto.depth) == ("violated", 1), auto.note
    proved = prove_property(spec, "ledger", prop, shards=1, policy=policy, engine="auto")
    assert (proved.status, proved.depth) == ("violated", 1), proved.note


def test_an_int_argument_is_a_natural_number_everywhere(tmp_path, capsys) -> None:
    """The solver reads a free int argument as natural (0, 1, 2, ...); the executable model
    took `put(0, c=-3)` and broke the property the proofs said holds. Both now read the same
    spec: the model and `replay` refuse a negative argument, the coverage search never
    tries one, and the branch it alone takes is unreachable."""
    from ledgercheck.codegen import coverage
    from ledgercheck.model import cli, runs
    from ledgercheck.model.interpreter import build_api
    from ledgercheck.model.spec import load_spec_text

    text = FIVE.replace("ADD_HERE", "").replace("args.c == 5", "args.c == -3")
    spec_file = load_spec_text(text, "minus.toml")
    spec = spec_file.variant()
    (result,) = runs.run_checks(runs.CheckRequest(spec_file, engine="z3", max_traces=1))
    assert result.status == "holds_to_depth"
    api = build_api(spec)
    with pytest.raises(ValueError, match=r"put: c = -3: an int argument is a natural number"):
        api.Ledger(shard_count=1, echo=False).put(0, -3)
    path = tmp_path / "minus.toml"
    path.write_text(text, encoding="utf-8")
    assert cli.main(["replay", str(path), "put(0, c=-3)"]) == 2
    assert "an int argument is a natural number" in capsys.readouterr().err
    found = coverage.search(spec_file, spec)
    assert [u.branch.describe for u in found.unreachable] == ["`if args.c == -3:` holds: its body runs"]
    assert all(v >= 0 for call in found.traces.values() for _, args in call for _, v in args if isinstance(v, int))


VIEWED_INT = """\
[spec]
name = "till"
state_field = "state"
default_shards = 1

[enums.S]
members = ["OPEN", "CLOSED"]

[fields]
state = { type = "S", initial = "OPEN" }
total = { type = "int", initial = 0 }

[events.add]
call = "add(i, n: int)"
ignore_when = "state == CLOSED"
body = "total = total + args.n"

[events.close]
call = "close(i)"
body = "state = CLOSED"

[environments.ledger]
any_call = true

[properties.closed_stays_closed]
kind = "step"
on = ["add", "close"]
when = "before.state == CLOSED"
assert = "after.state == CLOSED"
expect = { base = "holds" }

[properties.never_negative]
kind = "invariant"
assert = "total >= 0"
expect = { base = "holds" }
"""


def test_an_int_argument_only_the_trace_view_reads_leaves_the_verdict_to_the_explicit_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`total` is shown in traces (the view: a property reads it), not read by this property: `add`'s n, sampled,
    changes nothing the verdict depends on. `--engine auto` said unknown (exit 3), as if the
    verdict stood on the sample (a pool trial), where `explicit_decides` had chosen it."""
    from ledgercheck.model.cli import main

    spec = tmp_path / "till.toml"
    spec.write_text(VIEWED_INT, encoding="utf-8")
    code = main(["check", str(spec), "--no-cache", "--engine", "auto", "--property", "closed_stays_closed"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "UNKNOWN" not in out
