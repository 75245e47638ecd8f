"""Conformance passes an int argument the values the spec gives reason to try: a constant it is
compared with (one either side), and in each state the field it is compared with. Off-by-one
at such a boundary is the bug an implementation most often has, and 0..2 (the enumeration)
or 0..9 (random traces) never meets a boundary at 100 or at the tokens a bucket holds."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ledgercheck.model.conformance.checker import Conformance
from ledgercheck.model.conformance.implementation import load_implementation
from ledgercheck.model.conformance.sources import random_scripts
from ledgercheck.model.conformance.values import IntValues
from ledgercheck.model.errors import SpecError
from ledgercheck.model.spec import load_spec_text

SPEC = """\
[spec]
name = "bucket"
api_class = "Bucket"
state_field = "state"
default_shards = 1

[enums.State]
members = ["OPEN", "EMPTY"]

[policy]
max_request = {{ default = {max_request}, min = 1, max = 1000 }}

[fields]
state = {{ type = "State", initial = "OPEN" }}
tokens = {{ type = "int", initial = {tokens} }}

[events.take]
call = "take(i, n: int)"
body = \"\"\"
if args.n <= max_request and args.n <= tokens:
    tokens = tokens - args.n
if tokens == 0:
    state = EMPTY
\"\"\"

[environments.ledger]
any_call = true

[properties.never_negative]
kind = "invariant"
assert = "tokens >= 0"
expect = {{ base = "holds" }}

[implementation]
construct = {{ n = "instances", max_request = "max_request" }}

[implementation.fields]
state = "slots[i].state"
tokens = "slots[i].tokens"
"""

CLASS = """\
class Slot:
    def __init__(self, tokens):
        self.state = "OPEN"
        self.tokens = tokens


class Bucket:
    def __init__(self, n, max_request):
        self.max_request = max_request
        self.slots = [Slot({tokens}) for _ in range(n)]

    def take(self, i, n):
        slot = self.slots[i]
        if {check}:
            slot.tokens -= n
            if slot.tokens == 0:
                slot.state = "EMPTY"
"""
RIGHT = "n <= self.max_request and n <= slot.tokens"
AT_THE_LIMIT = "n < self.max_request and n <= slot.tokens"  # a request of exactly max_request refused
AT_THE_TOKENS = "n <= self.max_request and n < slot.tokens"  # the last tokens never taken


def _write(tmp_path: Path, check: str, tokens: int = 500, max_request: int = 100) -> tuple[Path, str]:
    (tmp_path / "bucket.toml").write_text(SPEC.format(tokens=tokens, max_request=max_request), encoding="utf-8")
    (tmp_path / "bucket.py").write_text(CLASS.format(tokens=tokens, check=check), encoding="utf-8")
    return tmp_path / "bucket.toml", f"{tmp_path / 'bucket.py'}:Bucket"


def _conform(capsys: Any, spec: Path, target: str, *more: str) -> tuple[int, str]:
    from ledgercheck.model.cli import main

    code = main(["conform", str(spec), "--impl", target, "--depth", "2", "--random", "100", *more])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_the_right_class_conforms(tmp_path: Path, capsys: Any) -> None:
    code, out = _conform(capsys, *_write(tmp_path, RIGHT))
    assert code == 0, out
    assert "enumeration      1 shard," in out  # one shard, said so


def test_a_boundary_at_a_policy_constant_is_met(tmp_path: Path, capsys: Any) -> None:
    code, out = _conform(capsys, *_write(tmp_path, AT_THE_LIMIT))
    assert code == 1, out
    assert "take(0, n=100)" in out
    assert "shard 0 tokens: model 400, implementation 500" in out


def test_the_constant_is_read_at_the_policy_conform_runs_under(tmp_path: Path, capsys: Any) -> None:
    spec, target = _write(tmp_path, AT_THE_LIMIT)
    code, out = _conform(capsys, spec, target, "--policy", "max_request=57")
    assert code == 1, out
    assert "take(0, n=57)" in out


def test_a_boundary_at_a_field_s_value_is_met_in_the_state_that_has_it(tmp_path: Path, capsys: Any) -> None:
    code, out = _conform(capsys, *_write(tmp_path, AT_THE_TOKENS, tokens=50, max_request=1000))
    assert code == 1, out
    assert "take(0, n=50)" in out
    assert "shard 0 tokens: model 0, implementation 50" in out


def test_the_values_are_the_spec_s_constants_and_fields_each_side() -> None:
    spec = load_spec_text(SPEC.format(tokens=50, max_request=100), "bucket.toml").variant()
    values = IntValues(spec, spec.default_policy())
    assert {99, 100, 101} <= set(values.fixed("take", "n"))
    assert set(IntValues(spec, {"max_request": 7}).fixed("take", "n")) >= {6, 7, 8}
    assert 100 not in IntValues(spec, {"max_request": 7}).fixed("take", "n")
    store = {(0, "tokens"): 37, (1, "tokens"): 3, (0, "state"): "OPEN", (1, "state"): "OPEN"}
    assert {36, 37, 38} <= set(values.at("take", "n", store, 0))
    assert {2, 3, 4} <= set(values.at("take", "n", store, 1))
    assert values.reads(2) == ((0, "tokens"), (1, "tokens"))


def test_the_enumeration_adds_a_state_s_calls_only_where_they_are_new(tmp_path: Path) -> None:
    spec_path, target = _write(tmp_path, RIGHT, tokens=50, max_request=1000)
    spec = load_spec_text(spec_path.read_text(encoding="utf-8"), str(spec_path)).variant()
    conformance = Conformance(spec, load_implementation(target, spec), spec.default_policy())
    static = conformance.calls_at(1)
    ns = sorted(dict(c.args)["n"] for c in static if c.shard == 0)
    assert ns == [0, 1, 2, 999, 1000, 1001]
    extra = conformance.calls_in_state({(0, "tokens"): 50, (0, "state"): "OPEN"}, 1, set(static))
    assert sorted(dict(c.args)["n"] for c in extra) == [49, 50, 51]
    assert conformance.calls_in_state({(0, "tokens"): 1, (0, "state"): "OPEN"}, 1, set(static)) == []


def test_random_traces_draw_the_spec_s_values_too() -> None:
    spec = load_spec_text(SPEC.format(tokens=500, max_request=100), "bucket.toml").variant()
    scripts = random_scripts(spec, 1, spec.default_policy(), 200, seed=0)
    ns = [dict(c.args)["n"] for s in scripts for c in s.calls]
    assert any(n >= 10 for n in ns)  # beyond 0..9: a value of the spec's
    assert any(n < 10 for n in ns)  # and the small ones still


def test_an_unbound_field_the_class_lacks_is_a_binding_error(tmp_path: Path, capsys: Any) -> None:
    spec, target = _write(tmp_path, RIGHT)
    text = spec.read_text(encoding="utf-8").replace('tokens = "slots[i].tokens"\n', "")
    spec.write_text(text, encoding="utf-8")
    code, out = _conform(capsys, spec, target)
    assert code == 2, out
    assert "the implementation has no tokens (needed by field tokens, which [implementation.fields] does" in out
    assert 'bind it with a read path that names the index (`tokens = "...(i).tokens"`' in out
    assert "bucket.toml:" in out


def test_a_slice_in_a_call_path_is_refused_with_its_line() -> None:
    text = SPEC.format(tokens=5, max_request=5).replace('"slots[i].tokens"', '"slots[0:1].tokens"')
    with pytest.raises(SpecError, match=r"bucket.toml:\d+:\d+: 'slots\[0:1\].tokens': a slice is not allowed"):
        load_spec_text(text, "bucket.toml")


def test_ci_s_children_load_the_one_module_ci_found(tmp_path: Path) -> None:
    """`ci --impl module:Class` run from the module's folder, its tests elsewhere: the tests
    (run from their own folder) and conformance (run from here) load the same module, even
    where the tests' folder holds another of that name."""
    import os
    import subprocess
    import sys

    from caches import own_caches

    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    (here / "bucket.toml").write_text(SPEC.format(tokens=5, max_request=3), encoding="utf-8")
    (here / "mybucket.py").write_text(CLASS.format(tokens=5, check=RIGHT), encoding="utf-8")
    (there / "mybucket.py").write_text('raise ImportError("the other mybucket")\n', encoding="utf-8")
    env = own_caches(tmp_path / "cache", {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")})
    out = str(there / "generated_tests")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "ledgercheck.model.cli", *args]
        return subprocess.run(argv, cwd=here, capture_output=True, text=True, env=env, timeout=300)

    assert run("gen", "bucket.toml", "--out", out).returncode == 0
    passed = run("ci", "bucket.toml", "--impl", "mybucket:Bucket", "--out", out)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert re.search(r"tests vs implementation\s+passed", passed.stdout)
    assert "the other mybucket" not in passed.stdout


REFUNDS = """\
[spec]
name = "refunds"
api_class = "Orders"
state_field = "state"
default_shards = 1

[enums.State]
members = ["OPEN", "PAID"]

[fields]
state = { type = "State", initial = "OPEN" }
paid = { type = "int", initial = 0 }
refunded = { type = "int", initial = 0 }

[events.pay]
call = "pay(i, amount: int)"
examples = { amount = "40" }
body = \"\"\"
if state == OPEN and args.amount > 0:
    paid = args.amount
    state = PAID
\"\"\"

[events.refund]
call = "refund(i, amount: int)"
body = \"\"\"
if args.amount <= paid - refunded:
    refunded = refunded + args.amount
\"\"\"

[environments.ledger]
any_call = true

[properties.never_over_refunded]
kind = "invariant"
assert = "refunded <= paid"
expect = { base = "holds" }

[implementation.fields]
state = "orders[i].state"
paid = "orders[i].paid"
refunded = "orders[i].refunded"

[implementation]
construct = { n = "instances" }
"""

ORDERS = """\
class Order:
    def __init__(self):
        self.state, self.paid, self.refunded = "OPEN", 0, 0


class Orders:
    def __init__(self, n):
        self.orders = [Order() for _ in range(n)]

    def pay(self, i, amount):
        order = self.orders[i]
        if order.state == "OPEN" and amount > 0:
            order.paid, order.state = amount, "PAID"

    def refund(self, i, amount):
        order = self.orders[i]
        left = order.paid - order.refunded
        if amount > left or ({bug} and order.refunded > 0 and amount == left):
            return  # {bug}: after a partial refund, what is left cannot be refunded in one go
        order.refunded += amount
"""


def test_a_boundary_at_a_difference_of_fields_is_met(tmp_path: Path, capsys: Any) -> None:
    """`args.amount <= paid - refunded`: the boundary is what is left (40 - 15 = 25), not 40
    or 15 either side; a class refusing, after a partial refund, to refund exactly what is
    left conformed."""
    spec = load_spec_text(REFUNDS, "refunds.toml").variant()
    values = IntValues(spec, spec.default_policy())
    store = {(0, "state"): "PAID", (0, "paid"): 40, (0, "refunded"): 15}
    assert {24, 25, 26} <= set(values.at("refund", "amount", store, 0))
    (tmp_path / "refunds.toml").write_text(REFUNDS, encoding="utf-8")
    for bug, expected in (("False", 0), ("True", 1)):
        module = f"orders_{bug.lower()}"  # a module of its own: the first is imported already
        (tmp_path / f"{module}.py").write_text(ORDERS.format(bug=bug), encoding="utf-8")
        target = f"{tmp_path / module}.py:Orders"
        code, out = _conform(capsys, tmp_path / "refunds.toml", target, "--no-policies", "--depth", "3")
        assert code == expected, out
        if expected:
            assert "diverges from the model of 'base'" in out and "shard 0 refunded: model" in out, out
