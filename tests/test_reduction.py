"""The reduction the explicit engine searches under (`model.reduction`): what it keeps, how
far counters count, when one shard decides every fleet size, and that it is exact."""

from __future__ import annotations

import subprocess
import sys

import pytest
from searches import searched
from tiers import fast_slice

from ledgercheck.model.explicit import explicit_check
from ledgercheck.model.reduction import reduce_for, relevant_actions, shards_independent
from ledgercheck.model.spec import load_spec, load_spec_text

HEADLINE = "no_condemnation_by_inherited_streak"


def saturation(reduction):
    return {node[1]: cap for node, cap in reduction.saturation.items()}


def test_the_headline_property_does_not_see_versions_urls_or_metrics(spec_file):
    spec = spec_file.variant("fixed")
    prop = spec.properties[HEADLINE]
    ledger = reduce_for(spec, spec.environment("ledger"), [prop], spec.default_policy())
    dropped = set(ledger.dropped(spec, spec.environment("ledger")))
    assert {"weight_version", "base_url", "membership_epoch", "genuine_deaths", "verdict_reads"} <= dropped
    assert not dropped & {"state", "consecutive_reported_failures", "restart_attempts", "incarnation"}
    controller = spec.environment("controller")
    dropped = set(reduce_for(spec, controller, [prop], spec.default_policy()).dropped(spec, controller))
    # The controller compares a replacement's address with the old one: base_url matters there.
    assert "base_url" not in dropped and {"trainer_version", "weight_version"} <= dropped


def test_counters_saturate_where_the_policy_says(spec_file):
    spec = spec_file.variant("fixed")
    prop = spec.properties[HEADLINE]
    env = spec.environment("ledger")
    caps = saturation(reduce_for(spec, env, [prop], spec.default_policy()))
    # `>= unhealthy_threshold` needs the threshold itself; `> max_restart_attempts` one more.
    assert caps["consecutive_reported_failures"] == 3
    assert caps["own_request_streak"] == 3
    assert caps["consecutive_probe_successes"] == 2
    assert caps["restart_attempts"] == 6
    assert caps["incarnation"] == 1
    policy = spec.resolve_policy({"unhealthy_threshold": 5, "max_restart_attempts_per_shard": 0})
    caps = saturation(reduce_for(spec, env, [prop], policy))
    assert caps["consecutive_reported_failures"] == 5 and caps["restart_attempts"] == 1


def test_a_field_a_view_shows_is_kept_exact(spec_file):
    spec = spec_file.variant("fixed")
    prop = spec.properties[HEADLINE]
    env = spec.environment("ledger")
    reduction = reduce_for(
        spec, env, [prop], spec.default_policy(), exact_fields=["weight_version", "restart_attempts"]
    )
    assert "weight_version" not in reduction.dropped(spec, env)
    assert "restart_attempts" not in saturation(reduction)


def test_one_shard_decides_the_ledger_environment_not_the_controller(spec_file):
    spec = spec_file.variant("fixed")
    policy = spec.default_policy()
    for prop in spec.properties.values():
        for name, alone in (("ledger", True), ("controller", False)):
            env = spec.environment(name)
            if prop.applies_to(name):
                assert shards_independent(spec, env, [prop], reduce_for(spec, env, [prop], policy)) is alone, prop.name


SMALL = """
[spec]
name = "small"
state_field = "state"
default_shards = 2

[enums.S]
members = ["UP", "DOWN"]

[policy]
limit = { default = 2, min = 0, max = 5 }

[fields]
state = { type = "S", initial = "UP" }
strikes = { type = "int", initial = 0 }
level = { type = "int", initial = 0 }
other = { type = "int", initial = 0 }
noted = { type = "int", initial = 0 }

[events.strike]
call = "strike(i)"
body = '''
strikes = strikes + 1
level = level - 1
noted = noted + 2
if strikes > limit:
    state = DOWN
'''

[events.mark]
call = "mark(i)"
body = '''
other = other + 1
if other >= strikes:
    state = UP
'''

[events.untouched]
call = "untouched(i)"
body = '''
noted = 0
'''

[environments.ledger]
any_call = true

[properties.down_needs_strikes]
kind = "invariant"
when = "state == DOWN"
assert = "level > -9"
expect = { base = "violated" }
"""


def test_what_saturates_and_what_does_not():
    spec = load_spec_text(SMALL, "small.toml").variant()
    env = spec.environment("ledger")
    prop = spec.properties["down_needs_strikes"]
    reduction = reduce_for(spec, env, [prop], spec.default_policy())
    caps = saturation(reduction)
    # strikes is compared with another counter (other >= strikes): its exact value matters.
    assert "strikes" not in caps and "other" not in caps
    # level counts down: no cap above which it stays the same.
    assert "level" not in caps
    assert reduction.dropped(spec, env) == ("noted",)
    assert relevant_actions(spec, env, reduction) == frozenset({"strike", "mark"})


def test_a_variable_compared_only_with_constants_saturates():
    text = SMALL.replace("if other >= strikes:", "if other >= 1:").replace("level = level - 1", "level = level + 1")
    spec = load_spec_text(text, "small.toml").variant()
    env = spec.environment("ledger")
    caps = saturation(reduce_for(spec, env, [spec.properties["down_needs_strikes"]], spec.default_policy()))
    assert caps["strikes"] == 3  # strikes > limit, limit = 2
    assert caps["other"] == 1  # other >= 1
    # level > -9 holds of every value level can take (it starts at 0 and only grows): the
    # cap is its initial value, so the search keeps one.
    assert caps["level"] == 0


@pytest.mark.parametrize("variant", ["as_written", "fixed"])
def test_one_shard_answers_for_sixteen(spec_file, variant):
    spec = spec_file.variant(variant)
    prop = spec.properties[HEADLINE]
    one = explicit_check(spec, "ledger", prop, shards=1, policy=spec.default_policy(), max_depth=12, max_traces=1)
    many = explicit_check(spec, "ledger", prop, shards=16, policy=spec.default_policy(), max_depth=12, max_traces=1)
    assert (one.status, one.depth) == (many.status, many.depth)
    assert "one shard searched" in many.note
    if many.traces:
        assert many.traces[0].shard_count == 16 and one.traces[0].depth == many.traces[0].depth == 8


def test_an_exhausted_reduced_search_is_a_proof_for_every_fleet_size(spec_file):
    spec = spec_file.variant("fixed")
    prop = spec.properties[HEADLINE]
    result = explicit_check(
        spec, "ledger", prop, shards=8, policy=spec.default_policy(), max_depth=20, max_traces=1, prove=True
    )
    assert result.status == "proved" and result.engine == "explicit"
    assert "every fleet size" in result.note
    broken = explicit_check(
        spec_file.variant("as_written"),
        "ledger",
        prop,
        shards=8,
        policy=spec.default_policy(),
        max_depth=20,
        max_traces=1,
        prove=True,
    )
    assert (broken.status, broken.depth) == ("violated", 8)


def _ledger_properties() -> list[tuple[str, str]]:
    spec_file = load_spec()
    return [
        (variant, name)
        for variant in ("as_written", "fixed")
        for name, prop in spec_file.variant(variant).properties.items()
        if prop.applies_to("ledger")
    ]


LEDGER_PROPERTIES = _ledger_properties()


# The fast lane compares the two searches on the headline in as_written; the full suite on every property.
@pytest.mark.parametrize(
    ("variant", "name"),
    fast_slice(LEDGER_PROPERTIES, [LEDGER_PROPERTIES.index(("as_written", HEADLINE))]),
)
def test_the_full_and_reduced_searches_agree_on_the_real_spec(spec_file, variant, name):
    """Every property, both variants, the ledger environment at one shard, to depth 9."""
    spec = spec_file.variant(variant)
    prop = spec.properties[name]
    full = explicit_check(
        spec, "ledger", prop, shards=1, policy=spec.default_policy(), max_depth=9, max_traces=1, reduce=False
    )
    reduced = explicit_check(spec, "ledger", prop, shards=1, policy=spec.default_policy(), max_depth=9, max_traces=1)
    assert (searched(full), full.depth) == (reduced.status, reduced.depth), (variant, prop.name)


def test_a_check_the_explicit_engine_answers_never_loads_the_solver():
    code = (
        "import sys\n"
        "from ledgercheck.model.cli import main\n"
        "code = main(['check', '--environment', 'ledger', '--shards', '16', '--engine', 'auto', '--variant', "
        f"'as_written', '--property', '{HEADLINE}', '--max-traces', '1', '--format', 'json'])\n"
        "assert 'z3' not in sys.modules, 'z3 was imported'\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert '"engine": "explicit"' in done.stdout and '"status": "violated"' in done.stdout


COUPLED = """
[spec]
name = "coupled"
state_field = "state"
default_shards = 3

[enums.S]
members = ["UP", "DOWN"]

[policy]
quorum = { default = 2, min = 1, max = 5 }

[fields]
state = { type = "S", initial = "UP" }
address = { type = "str?", initial_from = "base_urls" }
label = { type = "str?", initial_from = "base_urls" }

[globals]
downs = { type = "int", initial = 0 }

[on_state_change]
body = '''
if new == DOWN:
    downs = downs + 1
else:
    downs = downs - 1
'''

[events.fail]
call = "fail(i)"
ignore_when = "state == DOWN or downs >= quorum"
body = '''
state = DOWN
label = None
'''

[events.move]
call = "move(i, *, to: str)"
ignore_when = "state == UP"
body = '''
if args.to != address:
    address = args.to
    state = UP
'''

[environments.ledger]
any_call = true

[properties.never_all_down]
kind = "invariant"
scope = "fleet"
assert = "count(state == DOWN) < quorum"
expect = { base = "violated" }
"""


def test_a_dropped_text_field_beside_a_kept_one_keeps_symmetry_sound():
    """`label` is written and never read (dropped); `address` is compared (kept). Shards are
    coupled by a fleet value, so three shards are searched with symmetry reduction."""
    spec = load_spec_text(COUPLED, "coupled.toml").variant()
    prop = spec.properties["never_all_down"]
    env = spec.environment("ledger")
    reduction = reduce_for(spec, env, [prop], spec.default_policy())
    assert reduction.dropped(spec, env) == ("label",)
    assert not shards_independent(spec, env, [prop], reduction)
    full = explicit_check(
        spec, "ledger", prop, shards=3, policy=spec.default_policy(), max_depth=6, max_traces=1, reduce=False
    )
    reduced = explicit_check(spec, "ledger", prop, shards=3, policy=spec.default_policy(), max_depth=6, max_traces=1)
    assert (searched(full), full.depth) == (reduced.status, reduced.depth) == ("violated", 2)
    assert int(reduced.note.split(" states")[0].split()[-1]) <= int(full.note.split(" states")[0].split()[-1])


def test_counters_that_never_go_negative():
    from ledgercheck.model.reduction import nonnegative_counters

    spec = load_spec_text(SMALL, "small.toml").variant()
    found = {node[1] for node in nonnegative_counters(spec, spec.environment("ledger"), spec.default_policy())}
    assert found == {"strikes", "other", "noted"}  # level counts down
    ledger = load_spec().variant("fixed")
    found = {node[1] for node in nonnegative_counters(ledger, ledger.environment("ledger"), ledger.default_policy())}
    assert {"consecutive_reported_failures", "restart_attempts", "membership_epoch"} <= found
    assert "weight_version" not in found  # set from an argument


def test_a_timer_compared_with_a_sum_of_constants_saturates_as_with_one() -> None:
    """TIME_WAIT lasts `msl + msl`: the timer compared with that sum was 'read other than in a
    comparison with a constant', so the state space was infinite and a liveness property that
    an exhaustive search proves held only up to a depth (TCP trial). At a concrete policy the
    sum is a constant; at a symbolic one (the constants' least values) it is not."""
    from ledgercheck.model import ir
    from ledgercheck.model.reduction import _constant
    from ledgercheck.model.spec import load_spec

    spec = load_spec().variant("fixed")
    name = next(iter(spec.policy))
    total = ir.Arith("+", ir.PolicyRef(name), ir.PolicyRef(name))
    assert _constant(spec, {name: 3}, total) == 6
    assert _constant(spec, None, total) is None
    assert _constant(spec, None, ir.Arith("-", ir.Const(7, ir.INT), ir.Const(2, ir.INT))) == 5
