"""An int may start at a policy constant (`initial = "capacity"`): a bucket that starts full
starts at whatever capacity is checked. Every engine reads the one parsed declaration at the
policy it checks, so each finds the bucket runs dry after exactly `capacity` takes, the proofs
hold at every policy, and conform's largest-policy pass agrees with a class that starts full
(and catches one that starts at a fixed count)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledgercheck.codegen.meaning import meaning_of
from ledgercheck.model import bmc
from ledgercheck.model.errors import SpecError
from ledgercheck.model.explicit import explicit_check
from ledgercheck.model.interpreter import build_api
from ledgercheck.model.prove import prove_property
from ledgercheck.model.reduction import _int_counters
from ledgercheck.model.spec import load_spec_text
from ledgercheck.model.widths import analyse

SPEC = """\
[spec]
name = "bucket"
api_class = "Bucket"
state_field = "state"
default_shards = 1

[enums.State]
members = ["FULL", "PARTIAL", "EMPTY"]

[policy]
capacity = { default = 3, min = 1, max = 6 }

[fields]
state = { type = "State", initial = "FULL" }
tokens = { type = "int", initial = INITIAL }

[events.take]
call = "take(i)"
body = \"\"\"
if tokens > 0:
    tokens = tokens - 1
    state = PARTIAL
if tokens == 0:
    state = EMPTY
\"\"\"

[events.refill]
call = "refill(i)"
body = \"\"\"
tokens = capacity
state = FULL
\"\"\"

[environments.ledger]
any_call = true

[properties.full_means_capacity]
kind = "invariant"
assert = "state != FULL or tokens == capacity"
expect = { base = "holds" }

[properties.never_runs_dry]
kind = "invariant"
assert = "tokens > 0"
expect = { base = "violated" }

[implementation]
construct = { n = "instances", capacity = "capacity" }

[implementation.fields]
state = "slots[i].state"
tokens = "slots[i].tokens"
"""

CLASS = """\
class Slot:
    def __init__(self, tokens):
        self.state = "FULL"
        self.tokens = tokens


class Bucket:
    def __init__(self, n, capacity):
        self.capacity = capacity
        self.slots = [Slot(START) for _ in range(n)]

    def take(self, i):
        slot = self.slots[i]
        if slot.tokens > 0:
            slot.tokens -= 1
            slot.state = "PARTIAL"
        if slot.tokens == 0:
            slot.state = "EMPTY"

    def refill(self, i):
        self.slots[i].tokens = self.capacity
        self.slots[i].state = "FULL"
"""


def _spec(initial: str = '"capacity"') -> Any:
    return load_spec_text(SPEC.replace("INITIAL", initial), "bucket.toml")


def test_the_declaration_names_the_constant_and_holds_no_value() -> None:
    tokens = next(f for f in _spec().variant().fields if f.name == "tokens")
    assert (tokens.initial_policy, tokens.initial) == ("capacity", None)
    assert tokens.initial_at({"capacity": 5}) == 5


@pytest.mark.parametrize(
    ("initial", "message"),
    [
        (
            '"capasity"',
            "initial value 'capasity' is neither an integer nor a policy constant (did you mean 'capacity'?)",
        ),
        ('"FULL"', "initial value 'FULL' is neither an integer nor a policy constant"),
    ],
)
def test_a_name_that_is_no_policy_constant_is_refused_with_its_line(initial: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        _spec(initial)
    assert message in str(caught.value)
    assert "bucket.toml:15" in str(caught.value)


def test_only_an_int_starts_at_a_policy_constant() -> None:
    text = SPEC.replace("INITIAL", "0").replace('state = { type = "State", initial = "FULL" }', "")
    text = text.replace(
        "[fields]",
        '[fields]\nstate = { type = "State", initial = "FULL" }\nopen = { type = "bool", initial = "capacity" }',
    )
    with pytest.raises(SpecError, match="only an int may start at a policy constant"):
        load_spec_text(text, "bucket.toml")
    timer = SPEC.replace("INITIAL", "0").replace(
        "[fields]", '[clock]\nsteps = [1]\n\n[fields]\nage = { type = "timer", initial = "capacity" }'
    )
    with pytest.raises(SpecError, match="a timer needs an initial value: a non-negative integer"):
        load_spec_text(timer, "bucket.toml")


@pytest.mark.parametrize("capacity", [1, 4, 6])
def test_every_engine_starts_the_bucket_at_the_policy_checked(capacity: int) -> None:
    spec = _spec().variant()
    policy = {"capacity": capacity}
    dry, full = spec.properties["never_runs_dry"], spec.properties["full_means_capacity"]
    z3_found = bmc.check_property(spec, "ledger", dry, shards=1, policy=policy, max_depth=8, max_traces=1, lax=False)
    assert (z3_found.status, z3_found.depth) == ("violated", capacity)
    assert z3_found.traces[0].steps[0].after["shards"][0]["tokens"] == capacity
    explicit = explicit_check(spec, "ledger", dry, shards=2, policy=policy, max_depth=8, max_traces=1)
    assert (explicit.status, explicit.depth) == ("violated", capacity)
    for engine in ("explicit", "spacer", "kind"):
        proof = prove_property(spec, "ledger", full, shards=1, policy=policy, engine=engine)
        assert proof.status == "proved", (engine, proof.note)
    api = build_api(spec)
    model = api.Ledger(shard_count=2, policy=api.Policy(capacity=capacity))
    assert [record.tokens for record in model.snapshot()] == [capacity, capacity]


def test_a_symbolic_policy_finds_the_smallest_bucket() -> None:
    spec = _spec().variant()
    found = bmc.check_property(
        spec, "ledger", spec.properties["never_runs_dry"], shards=1, policy=None, max_depth=8, max_traces=1, lax=False
    )
    assert (found.status, found.depth, dict(found.traces[0].policy)) == ("violated", 1, {"capacity": 1})
    proof = prove_property(spec, "ledger", spec.properties["full_means_capacity"], shards=1, policy=None)
    assert proof.status == "proved", proof.note


def test_the_numbers_and_the_counters_follow_the_policy() -> None:
    spec = _spec().variant()
    env = spec.environment("ledger")
    assert analyse(spec, env, 1, {"capacity": 6}, 4).peak >= 6
    # A counter starts at the constant's value, or for a symbolic policy at its least.
    assert _int_counters(spec, env, {"capacity": 6})[("field", "tokens")] == 6
    assert _int_counters(spec, env, None)[("field", "tokens")] == 1


def test_the_meaning_changes_with_where_the_field_starts() -> None:
    starts_full, starts_at_3 = (meaning_of(_spec(initial)).parts for initial in ('"capacity"', "3"))
    assert [part for part in starts_full if starts_full[part] != starts_at_3[part]] == ["fields"]


def _conform(tmp_path: Path, capsys: Any, start: str) -> tuple[int, str]:
    from ledgercheck.model.cli import main

    (tmp_path / "bucket.toml").write_text(SPEC.replace("INITIAL", '"capacity"'), encoding="utf-8")
    (tmp_path / "bucket.py").write_text(CLASS.replace("START", start), encoding="utf-8")
    code = main(["conform", str(tmp_path / "bucket.toml"), "--impl", f"{tmp_path / 'bucket.py'}:Bucket"])
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())


def test_a_class_that_starts_full_conforms_at_the_largest_policy(tmp_path: Path, capsys: Any) -> None:
    code, out = _conform(tmp_path, capsys, "capacity")
    assert code == 0, out
    assert "at the largest policy (capacity=6)" in out


def test_a_class_that_starts_at_a_fixed_count_diverges_at_the_largest_policy(tmp_path: Path, capsys: Any) -> None:
    code, out = _conform(tmp_path, capsys, "3")
    assert code == 1, out
    assert "shard 0 tokens: model 6, implementation 3" in out
    # No event has a `requires`: one pass of the enumeration, and no word of contracts.
    assert "enumeration 1 shard, any call, depth 4" in out and "contracts" not in out


# --- conform tries other policies the spec allows -------------------------------------------

# Wrong at an odd capacity other than 1 and the default 3: at 5 (the largest is 6).
ODD_CAP = CLASS.replace("Slot(START)", "Slot(capacity)").replace(
    "        self.slots[i].tokens = self.capacity\n",
    "        odd = self.capacity % 2 == 1 and self.capacity not in (1, 3)\n"
    "        self.slots[i].tokens = self.capacity - 1 if odd else self.capacity\n",
)


def test_other_policies_are_the_corners_and_a_seeded_draw() -> None:
    from ledgercheck.model.conformance.sources import DRAWN_POLICIES, other_policies

    spec = _spec().variant()
    chosen = other_policies(spec, {"capacity": 3}, seed=0)
    assert chosen == other_policies(spec, {"capacity": 3}, seed=0)  # the same every run
    policies = [policy for _, policy in chosen]
    assert policies[:2] == [{"capacity": 6}, {"capacity": 1}]
    assert {"capacity": 3} not in policies and len(policies) == len({p["capacity"] for p in policies})
    assert len(policies) <= 2 + DRAWN_POLICIES
    assert chosen[0][0] == "the largest policy (capacity=6)" and chosen[1][0] == "the smallest policy (capacity=1)"
    assert all(where.startswith("a policy drawn with seed 0 (capacity=") for where, _ in chosen[2:])
    assert other_policies(spec, {"capacity": 6}, seed=0)[0][0] == "the smallest policy (capacity=1)"


def test_a_class_wrong_at_a_policy_between_the_corners_is_found_there(tmp_path: Path, capsys: Any) -> None:
    from ledgercheck.model.cli import main
    from ledgercheck.model.conformance.sources import other_policies

    (tmp_path / "bucket.toml").write_text(SPEC.replace("INITIAL", '"capacity"'), encoding="utf-8")
    (tmp_path / "bucket.py").write_text(ODD_CAP, encoding="utf-8")
    drawn = [p["capacity"] for _, p in other_policies(_spec().variant(), {"capacity": 3}, seed=0)[2:]]
    assert 5 in drawn  # the seed draws the one policy where the class is wrong
    args = ["conform", str(tmp_path / "bucket.toml"), "--impl", f"{tmp_path / 'bucket.py'}:Bucket"]
    assert main([*args, "--no-policies"]) == 0  # the default (3), the smallest (1) and the largest (6) agree
    capsys.readouterr()
    assert main(args) == 1
    out = " ".join(capsys.readouterr().out.split())
    # every short call sequence is tried there before any random trace
    assert (
        "found by enumeration of every sequence of any call at 1 shard at a policy drawn with seed 0 (capacity=5)"
        in (out)
    )
    assert "at a policy drawn with seed 0 (capacity=5), which the spec allows" in out
    assert "Bucket(n=1, capacity=5)" in out  # the reproducer builds it at that policy
    # Not left to chance: with no random trace at all, the enumeration at that policy finds it.
    assert main([*args, "--random", "0"]) == 1


def test_every_value_of_a_narrow_constant_is_met_at_some_policy() -> None:
    """Six draws over `cluster_size` 1..5 and `election_timeout` 1..6 missed the two-node
    cluster a Raft node handled apart (trial): each constant's values are dealt out now."""
    from ledgercheck.model.conformance.sources import SWEPT_POLICIES, other_policies

    text = SPEC.replace("INITIAL", '"capacity"').replace(
        "[policy]\n",
        "[policy]\nwidth = { default = 3, min = 0, max = 7 }\nwide = { default = 7, min = 1, max = 40 }\n",
    )
    spec = load_spec_text(text, "bucket.toml").variant()
    chosen = [policy for _, policy in other_policies(spec, spec.default_policy(), seed=0)]
    assert len(chosen) <= 2 + SWEPT_POLICIES
    assert {p["width"] for p in chosen} == set(range(8))  # 8 values: every one met
    assert {p["capacity"] for p in chosen} == set(range(1, 7))
    assert len({p["wide"] for p in chosen}) >= SWEPT_POLICIES - 2  # 40 values: as many as there are draws
