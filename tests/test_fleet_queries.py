"""A query over the whole fleet (`raises`/`returns`, no `when`): a read-only call such as the
ledger's `raise_if_exhausted()`, which raises when fewer than `min_healthy_shards` shards serve.
The checker has nothing to search in it (it changes no state), so it was left out of the spec,
and an off-by-one in it passed `conform` and `ci`. Conformance now calls it after every call and
compares what it raised or returned with the model's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledgercheck.model.cli import main
from ledgercheck.model.errors import SpecError
from ledgercheck.model.interpreter import build_api
from ledgercheck.model.spec import load_spec, load_spec_text

ROOT = Path(__file__).resolve().parents[1]
LEDGER = ROOT / "spec" / "fleet_health.toml"
CLEAN = ROOT / "tests" / "impl" / "fleet_health_clean.py"

POOL = """\
[spec]
name = "pool"
api_class = "Pool"
state_field = "state"
default_shards = 3

[enums.State]
members = ["UP", "DOWN"]

[policy]
quorum = { default = 2, min = 1, max = 3 }

[fields]
state = { type = "State", initial = "UP" }

[queries]
QUERIES

[events.fail]
call = "fail(i)"
body = "state = DOWN"

[events.heal]
call = "heal(i)"
body = "state = UP"

[environments.ledger]
any_call = true

[properties.something_is_up]
kind = "invariant"
scope = "fleet"
assert = "exists(state == UP)"
expect = { base = "violated" }
"""

FLEET = (
    'up = { when = "state == UP", api = "up_members" }\n'
    'quorate = { api = "check_quorum", raises = [{ when = "count(state == UP) < quorum", error = "NoQuorum" }], '
    'returns = "count(state == UP)" }\n'
)


def _pool(queries: str = FLEET) -> Any:
    return load_spec_text(POOL.replace("QUERIES", queries), "pool.toml")


def test_the_model_raises_the_declared_error_and_returns_the_value() -> None:
    api = build_api(_pool().variant())
    pool = api.Ledger(shard_count=3, policy=api.Policy(quorum=2), base_urls=None)
    assert pool.check_quorum() == 3
    pool.fail(0)
    assert pool.check_quorum() == 2
    pool.fail(1)
    with pytest.raises(api.errors["NoQuorum"], match=r"check_quorum\(\): count\(state == UP\) < quorum"):
        pool.check_quorum()
    assert pool.up_members() == [2]


@pytest.mark.parametrize(
    ("queries", "message"),
    [
        (
            'q = { when = "state == UP", api = "q", raises = [{ when = "true", error = "E" }] }',
            "query 'q' has both 'when' (the shards it holds of) and 'raises'/'returns' (a call over the whole "
            "fleet): a query is one or the other",
        ),
        ('q = { raises = [{ when = "count(state == UP) < 1", error = "E" }] }', "query 'q' needs 'api'"),
        ('q = { api = "q", returns = "count(stat == UP)" }', "unknown name 'stat'"),
        ('q = { api = "q", raises = [{ when = "count(state == UP) < 1", error = "no_quorum" }] }', "CamelCase"),
    ],
)
def test_a_wrong_fleet_query_is_refused_with_its_line(queries: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        _pool(queries)
    assert message in str(caught.value)
    assert "pool.toml:17" in str(caught.value), str(caught.value)


def test_a_fleet_query_is_no_predicate_of_other_expressions() -> None:
    """A shard query's name reads as a condition elsewhere; a fleet query's (a call that may
    raise) does not."""
    text = POOL.replace("QUERIES", FLEET).replace('assert = "exists(state == UP)"', 'assert = "exists(quorate)"')
    with pytest.raises(SpecError, match="quorate"):
        load_spec_text(text, "pool.toml")


def test_the_ledger_declares_raise_if_exhausted() -> None:
    query = load_spec(str(LEDGER)).variant().queries["exhausted"]
    assert (query.fleet, query.api, [r.error for r in query.raises]) == (True, "raise_if_exhausted", ["Exception"])


def _off_by_one(tmp_path: Path, old: str, new: str) -> str:
    text = CLEAN.read_text()
    assert old in text
    (tmp_path / "fleet_health_exhausted.py").write_text(text.replace(old, new))
    return f"{tmp_path / 'fleet_health_exhausted.py'}:GenerationFleetHealth"


@pytest.mark.parametrize(
    ("new", "said"),
    [
        # the class raised its own FleetExhaustedError, named as it is
        ("if serving <= self.policy.min_healthy_shards:", "model returned, implementation raised FleetExhaustedError"),
        ("if serving < self.policy.min_healthy_shards - 1:", "model raised Exception, implementation returned"),
    ],
)
def test_conform_catches_an_off_by_one_in_raise_if_exhausted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], new: str, said: str
) -> None:
    impl = _off_by_one(tmp_path, "if serving < self.policy.min_healthy_shards:", new)
    code = main(["conform", "--variant", "fixed", "--impl", impl, "--no-policies", "--random", "0", str(LEDGER)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"raise_if_exhausted(): {said}" in out, out


def test_the_clean_ledger_conforms_with_its_query(capsys: pytest.CaptureFixture[str]) -> None:
    impl = f"{CLEAN}:GenerationFleetHealth"
    quick = ["--no-policies", "--random", "0", "--no-counterexamples", "--no-runs", "--no-branches", "--depth", "3"]
    code = main(["conform", "--variant", "fixed", "--impl", impl, *quick, str(LEDGER)])
    assert code == 0, capsys.readouterr().out


POOL_CLASS = """\
class NoQuorum(RuntimeError):
    pass


class Pool:
    def __init__(self, size, quorum):
        self.quorum = quorum
        self.states = ["UP"] * size

    def fail(self, i):
        self.states[i] = "DOWN"

    def heal(self, i):
        self.states[i] = "UP"

    def check_quorum(self):
        up = self.states.count("UP")
        if up < self.quorum:
            raise NoQuorum(up)
        return up

    def up_members(self):
        return [i for i, state in enumerate(self.states) if state == "UP"]
"""

BINDING = """
[implementation]
target = "pool_impl.py:Pool"
instances = "indexed"
construct = { size = "instances", quorum = "quorum" }

[implementation.fields]
state = "states[i]"
"""


@pytest.mark.parametrize(
    ("bug", "diverges"),
    [("", False), ("return up", True), ("if up < self.quorum:", True), ("up_members", True)],
)
def test_a_bound_class_answers_its_fleet_query(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bug: str, diverges: bool
) -> None:
    """A class bound with no adapter: each query, of the fleet or of its shards, is the one
    object's own method (a shard query was refused: 'the implementation has no up_members')."""
    spec = tmp_path / "pool.toml"
    spec.write_text(POOL.replace("QUERIES", FLEET) + BINDING)
    source = POOL_CLASS
    if bug == "return up":
        source = source.replace("        return up\n", "        return up + 1\n")
    elif bug == "up_members":
        source = source.replace('if state == "UP"]', 'if state == "UP"][:1]')
    elif bug:
        source = source.replace(bug, "if up <= self.quorum:")
    (tmp_path / "pool_impl.py").write_text(source)
    code = main(["conform", "--no-policies", str(spec)])
    out = capsys.readouterr().out
    assert code == (1 if diverges else 0), out
    if diverges:
        assert f"{'up_members' if bug == 'up_members' else 'check_quorum'}(): model " in out, out


def test_a_fleet_query_of_one_object_per_instance_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "pool.toml"
    binding = BINDING.replace('instances = "indexed"', 'instances = "each"').replace(
        'construct = { size = "instances", quorum = "quorum" }', 'construct = { size = "1", quorum = "quorum" }'
    )
    spec.write_text(POOL.replace("QUERIES", FLEET.split("\n")[1]) + binding.replace("states[i]", "states[0]"))
    (tmp_path / "pool_impl.py").write_text(POOL_CLASS)
    assert main(["conform", "--no-policies", str(spec)]) == 2
    assert (
        'query quorate: with instances = "each", a query over the whole fleet has no one object to ask check_quorum()'
        in capsys.readouterr().err
    )


MEMBER = """\
class Member:
    def __init__(self):
        self.state = "UP"

    def fail(self):
        self.state = "DOWN"

    def heal(self):
        self.state = "UP"

    def is_up(self):
        return self.state == "UP"
"""


@pytest.mark.parametrize(("bug", "code"), [(False, 0), (True, 1)])
def test_one_object_per_instance_answers_a_shard_query_with_its_own_predicate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bug: bool, code: int
) -> None:
    """`instances = "each"` and a shard query `api = "is_up"`: each object's `is_up()` says
    whether its instance is in the set (a `transitions` model's `may_start()`, `is_running()`).
    It was refused: 'the implementation has no is_up' while every object had it."""
    spec = tmp_path / "pool.toml"
    binding = '\n[implementation]\ntarget = "member.py:Member"\ninstances = "each"\n'
    spec.write_text(POOL.replace("QUERIES", 'up = { when = "state == UP", api = "is_up" }') + binding)
    source = MEMBER.replace('return self.state == "UP"', "return True") if bug else MEMBER
    (tmp_path / "member.py").write_text(source)
    assert main(["conform", "--no-policies", str(spec)]) == code
    out = capsys.readouterr().out
    if bug:
        assert "is_up(): model (), implementation (0,)" in out, out  # shrunk to one shard
        # the reproducer asks the object its own predicate, the model's answer beside it (it
        # printed `member_0.is_up()  # the model: ()`, a list of instances for a bool)
        assert "  print(member_0.is_up())  # the model: false\n" in out, out


@pytest.mark.parametrize(
    ("bug", "wrong"),
    [
        ("", None),
        ("up_members", "up_members() names shards [0], expected: names shards [0, 1"),
        ("if up < self.quorum:", "check_quorum() raises NoQuorum, expected: returns 2"),
    ],
)
def test_the_generated_tests_ask_every_query_after_every_step(tmp_path: Path, bug: str, wrong: str | None) -> None:
    """A query that named one member too few, or a quorum off by one, passed every generated
    test (they compared fields only) and only conform saw it (pod-tracker trial): each step of a
    generated test now asks every query of the spec, answered as the spec's model answers."""
    import subprocess
    import sys

    spec = tmp_path / "pool.toml"
    spec.write_text(POOL.replace("QUERIES", FLEET) + BINDING)
    source = POOL_CLASS
    if bug == "up_members":
        source = source.replace('if state == "UP"]', 'if state == "UP"][:1]')
    elif bug:
        source = source.replace(bug, "if up <= self.quorum:")
    (tmp_path / "pool_impl.py").write_text(source)
    assert main(["gen", str(spec), "--out", str(tmp_path / "tests")]) == 0
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "tests")]
        + ["--impl", f"{tmp_path / 'pool_impl.py'}:Pool"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if wrong is None:
        assert run.returncode == 0, run.stdout + run.stderr
    else:
        assert run.returncode == 1 and wrong in run.stdout, run.stdout + run.stderr


def test_a_query_the_class_lacks_names_its_line_and_a_near_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The query's `api` misspelt: bad input naming the line of that `api` and the class's
    method it was likely meant to be (the adapter's own names are not offered)."""
    text = POOL.replace("QUERIES", FLEET.replace('api = "up_members"', 'api = "up_membrs"')) + BINDING
    spec = tmp_path / "pool.toml"
    spec.write_text(text)
    (tmp_path / "pool_impl.py").write_text(POOL_CLASS)
    assert main(["conform", "--no-policies", str(spec)]) == 2
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "up_membrs" in row)
    err = capsys.readouterr().err
    assert (
        f"pool.toml:{line}: the implementation has no up_membrs (needed by query up) (did you mean 'up_members'?)"
    ) in err, err
