"""The width a bounded search's bit-vectors are given (`model.widths`), and that searching
with them answers as searching with Z3's integers does.

A width too narrow would let a sum wrap and the search answer for another system, so the
analysis is checked three ways: against the largest value the interpreter reaches by
brute force; by a width one bit narrower than the one proven, which gives a wrong answer
on a spec built to need it (so the proof is not slack that hides a wrong width); and by the
verdicts and shortest lengths of every bundled check, the same with bit-vectors and without.
"""

from __future__ import annotations

import itertools
import pickle
from pathlib import Path
from typing import Any

import pytest
from tiers import fast_slice

from ledgercheck.model import bmc, widths
from ledgercheck.model.numbers import INTEGERS, SWITCH, Numbers, signed_bits
from ledgercheck.model.result import EncodingMismatch
from ledgercheck.model.semantics import ConcreteBackend, Machine
from ledgercheck.model.spec import Spec, load_spec

ROOT = Path(__file__).resolve().parents[1]
LEDGER = ROOT / "tests" / "fixtures" / "ledger" / "spec" / "fleet_health.toml"
BREAKER = ROOT / "spec" / "examples" / "breaker.toml"

COUNTER = """
[spec]
name = "counter"
state_field = "state"
default_shards = 1

[enums.Mode]
members = ["ON", "OFF"]

[fields]
state = { type = "Mode", initial = "ON" }
ticks = { type = "int", initial = 0 }
{extra_fields}

[events.tick]
call = "tick(i{params})"
body = \"\"\"
ticks = ticks + 1
{extra_body}
\"\"\"

[environments.ledger]
doc = "any call"
any_call = true

[properties.stays_small]
doc = "the count stays small"
kind = "invariant"
assert = "{check}"
message = "the count grew"
expect = {{ base = "violated" }}
"""


def _counter(
    tmp_path: Path, check: str = "ticks < 40", *, params: str = "", extra_fields: str = "", body: str = ""
) -> Spec:
    text = COUNTER.replace("{{", "{").replace("}}", "}")
    text = text.replace("{check}", check).replace("{params}", params)
    text = text.replace("{extra_fields}", extra_fields).replace("{extra_body}", body)
    path = tmp_path / "counter.toml"
    path.write_text(text, encoding="utf-8")
    spec_file = load_spec(path)
    return spec_file.variant(spec_file.variants[0])


def _check(spec: Spec, depth: int, prop: str = "stays_small") -> Any:
    return bmc.check_property(
        spec, "ledger", spec.properties[prop], shards=1, policy=spec.default_policy(), max_depth=depth, max_traces=1
    )


def test_the_width_holds_the_deepest_count_and_one_bit_less_answers_wrongly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _counter(tmp_path, check="ticks <= 31")
    width = widths.analyse(spec, spec.environment("ledger"), 1, spec.default_policy(), 45)
    assert width.numbers.bounded and width.peak >= 45
    assert width.numbers.width == signed_bits(width.peak) == 7
    result = _check(spec, 45)
    assert (result.status, result.depth) == ("violated", 32)
    # Six bits hold -32..31: the count wraps from 31 to -32 and never exceeds 31, and the
    # search would say the property holds. The proven width is what makes the answer right.
    narrow = widths.Width(Numbers(6), width.peak, width.tokens)
    monkeypatch.setattr(bmc.widths, "width_for", lambda *args: narrow)
    wrong = _check(spec, 45)
    assert wrong.status == "holds_to_depth"


def test_a_violation_the_interpreter_does_not_see_is_an_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a width too narrow makes the solver see a violation (40 wraps to -24 in six
    bits, so `ticks < 40` fails at once), the replay of its trace on the interpreter breaks
    nothing, and the search says so instead of reporting it."""
    spec = _counter(tmp_path, check="ticks < 40")
    narrow = widths.Width(Numbers(6))
    monkeypatch.setattr(bmc.widths, "width_for", lambda *args: narrow)
    with pytest.raises(EncodingMismatch, match="the interpreter's replay of it does not"):
        _check(spec, 45)


def _stored_widths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of the test's own, and no width this process already knows."""
    monkeypatch.setenv("LEDGERCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(widths, "_WIDTHS", {})
    return tmp_path / "cache" / "widths"


def _refuse_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    def analysed(*args: Any) -> Any:
        raise AssertionError("analysed although the width was stored")

    monkeypatch.setattr(widths, "analyse", analysed)


def test_a_width_is_analysed_once_per_machine_and_read_back_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _stored_widths(tmp_path, monkeypatch)
    spec = _counter(tmp_path, check="ticks <= 31")
    env = spec.environment("ledger")
    first = widths.width_for(spec, env, 1, spec.default_policy(), 45)
    assert first == widths.analyse(spec, env, 1, spec.default_policy(), 45) and first.numbers.width == 7
    assert len(list(folder.glob("width-*.pickle"))) == 1
    monkeypatch.setattr(widths, "_WIDTHS", {})  # as a new process would start
    _refuse_analysis(monkeypatch)
    assert widths.width_for(spec, env, 1, spec.default_policy(), 45) == first
    # another question is another entry: a deeper search, another policy, another fleet
    monkeypatch.undo()
    folder = _stored_widths(tmp_path, monkeypatch)
    deeper = widths.width_for(spec, env, 1, spec.default_policy(), 100)
    assert deeper.peak > first.peak
    widths.width_for(spec, env, 2, spec.default_policy(), 45)
    assert len(list(folder.glob("width-*.pickle"))) == 3


def test_an_edited_spec_never_reads_the_width_of_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stored_widths(tmp_path, monkeypatch)
    small = _counter(tmp_path, check="ticks <= 31")
    env = small.environment("ledger")
    assert widths.width_for(small, env, 1, small.default_policy(), 45).peak < 200
    sums = _counter(tmp_path, check="ticks + 200 < 240")  # the same file, edited
    monkeypatch.setattr(widths, "_WIDTHS", {})
    assert widths.width_for(sums, sums.environment("ledger"), 1, sums.default_policy(), 45).peak >= 245


def test_a_damaged_stored_width_is_analysed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _stored_widths(tmp_path, monkeypatch)
    spec = _counter(tmp_path, check="ticks <= 31")
    env = spec.environment("ledger")
    width = widths.width_for(spec, env, 1, spec.default_policy(), 45)
    (entry,) = folder.glob("width-*.pickle")
    for damage in (entry.read_bytes()[:20], b"not a pickle", pickle.dumps(("another question", (3, 0, 0, "")))):
        entry.write_bytes(damage)
        monkeypatch.setattr(widths, "_WIDTHS", {})
        assert widths.width_for(spec, env, 1, spec.default_policy(), 45) == width
        assert entry.read_bytes() != damage  # rewritten whole


def test_with_the_cache_off_no_width_is_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGERCHECK_CACHE", "off")
    monkeypatch.setattr(widths, "_WIDTHS", {})
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    spec = _counter(tmp_path, check="ticks <= 31")
    assert widths.width_for(spec, spec.environment("ledger"), 1, spec.default_policy(), 45).numbers.width == 7
    assert not any(tmp_path.rglob("width-*.pickle"))


def test_the_width_grows_with_the_depth(tmp_path: Path) -> None:
    spec = _counter(tmp_path)
    env = spec.environment("ledger")
    peaks = [widths.analyse(spec, env, 1, spec.default_policy(), depth).peak for depth in (5, 20, 100, 1000)]
    assert peaks == sorted(peaks) and peaks[0] < peaks[-1]
    assert widths.analyse(spec, env, 1, spec.default_policy(), 1000).numbers.width == signed_bits(1001)


def test_a_property_that_computes_needs_room_for_its_sums(tmp_path: Path) -> None:
    spec = _counter(tmp_path, check="ticks + 200 < 240")
    width = widths.analyse(spec, spec.environment("ledger"), 1, spec.default_policy(), 45)
    assert width.peak >= 200 + 45
    result = _check(spec, 45)
    assert (result.status, result.depth) == ("violated", 40)


def test_an_int_parameter_computed_with_keeps_integers(tmp_path: Path) -> None:
    spec = _counter(tmp_path, params=", step: int", body="ticks = ticks + args.step")
    width = widths.analyse(spec, spec.environment("ledger"), 1, spec.default_policy(), 12)
    assert width.numbers == INTEGERS
    assert "int parameter is computed with" in width.why
    # The search still finds the shortest violation: one call with a step of 39 or more.
    result = _check(spec, 12)
    assert (result.status, result.depth) == ("violated", 1)


def test_an_int_parameter_compared_by_order_keeps_integers(tmp_path: Path) -> None:
    spec = _counter(
        tmp_path,
        params=", version: int",
        extra_fields='version = { type = "int", initial = 0 }',
        body="if args.version > version:\n    version = args.version",
    )
    width = widths.analyse(spec, spec.environment("ledger"), 1, spec.default_policy(), 12)
    assert width.numbers == INTEGERS and "compared (>)" in width.why


def test_an_int_parameter_only_stored_is_renamed_around_what_it_meets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version only stored and compared for equality: its values are renamed around the
    numbers it meets (here 37, in the property), which the width must hold."""
    spec = _counter(
        tmp_path,
        check="version != 37",
        params=", version: int",
        extra_fields='version = { type = "int", initial = 0 }',
        body="version = args.version",
    )
    width = widths.analyse(spec, spec.environment("ledger"), 1, spec.default_policy(), 12)
    assert width.numbers.bounded and width.peak >= 37
    result = _check(spec, 12)
    assert (result.status, result.depth) == ("violated", 1)
    assert result.traces[0].steps[1].args == {"version": 37}
    # In six bits 37 is -27, which no parameter value (>= 0) equals: the property would hold.
    monkeypatch.setattr(bmc.widths, "width_for", lambda *args: widths.Width(Numbers(6)))
    assert _check(spec, 12).status == "holds_to_depth"


def test_numbers_beyond_the_widest_bit_vector_keep_integers(tmp_path: Path) -> None:
    spec = _counter(tmp_path, check="ticks < 40000000")
    width = widths.analyse(spec, spec.environment("ledger"), 1, spec.default_policy(), 12)
    assert width.numbers == INTEGERS and "more than" in width.why


def test_text_needs_room_for_a_value_per_parameter_per_step(tmp_path: Path) -> None:
    spec = _counter(
        tmp_path,
        params=", url: str",
        extra_fields='address = { type = "str?", initial = "None" }',
        body="address = args.url",
    )
    env = spec.environment("ledger")
    shallow = widths.analyse(spec, env, 1, spec.default_policy(), 10)
    deep = widths.analyse(spec, env, 1, spec.default_policy(), 400)
    assert shallow.numbers.bounded and deep.numbers.bounded
    assert deep.tokens >= 400 and deep.numbers.width >= signed_bits(400)
    assert shallow.tokens < deep.tokens


def test_text_is_never_a_number() -> None:
    backend = widths.IntervalBackend.__new__(widths.IntervalBackend)
    backend.peak, backend.texts = 0.0, set()
    with pytest.raises(widths.Unbounded):
        backend.join(widths.TOKEN, widths.Interval(0, 3))
    with pytest.raises(widths.Unbounded):
        backend.arith("+", widths.TOKEN, widths.Interval(0, 3))
    assert backend.join(widths.TOKEN, widths.NONE_VALUE) is widths.TOKEN


def _reachable_peak(spec: Spec, environment: str, shards: int, depth: int) -> int:
    """The largest magnitude of a number any state of at most `depth` steps holds, by brute
    force over the interpreter (every action, every binding, small parameter values)."""
    env = spec.environment(environment)
    policy = spec.default_policy()
    machine: Machine[Any] = Machine(spec, ConcreteBackend(), policy, shards)
    keys = machine.state_keys(env.vars)
    decls = {(i, v.name): v for i in range(shards) for v in spec.shard_vars}
    decls.update({(None, v.name): v for v in (*spec.globals, *env.vars)})
    start = {}
    for key, var in decls.items():
        start[key] = f"http://shard-{key[0]}" if var.initial_from else var.initial
    choices = []
    for action in env.actions:
        for combo in itertools.product(range(shards), repeat=len(action.shard_params)):
            binding = dict(zip(action.shard_params, combo, strict=True))
            domains = []
            for param in action.value_params:
                kind = param.type.kind
                domains.append(
                    [True, False] if kind == "bool" else ["http://a", "http://b"] if kind in ("str", "any") else [0, 1]
                )
            for values in itertools.product(*domains):
                choices.append((action, binding, dict(zip((p.name for p in action.value_params), values, strict=True))))
    frontier = {tuple(start[k] for k in keys)}
    seen = set(frontier)
    peak = 0
    for _ in range(depth):
        following = set()
        for state in frontier:
            for action, binding, values in choices:
                store = dict(zip(keys, state, strict=True))
                if not machine.enabled(action, binding, values, store):
                    continue
                machine.run_action(action, binding, values, store)
                frozen = tuple(store[k] for k in keys)
                if frozen not in seen:
                    seen.add(frozen)
                    following.add(frozen)
        frontier = following
    for state in seen:
        for value in state:
            if isinstance(value, int) and not isinstance(value, bool):
                peak = max(peak, abs(value))
    return peak


@pytest.mark.parametrize(
    ("path", "environment", "shards", "depth"),
    fast_slice([(BREAKER, "ledger", 2, 8), (LEDGER, "controller", 1, 8), (LEDGER, "controller", 2, 5)], (0, 1)),
)
def test_every_value_the_interpreter_reaches_fits(path: Path, environment: str, shards: int, depth: int) -> None:
    spec_file = load_spec(path)
    for variant in spec_file.variants:
        spec = spec_file.variant(variant)
        width = widths.analyse(spec, spec.environment(environment), shards, spec.default_policy(), depth)
        assert width.numbers.bounded, width.why
        reached = _reachable_peak(spec, environment, shards, depth)
        assert reached <= width.peak < 2 ** (width.numbers.width - 1), (variant, reached, width)


def test_the_bundled_ledger_is_bit_vectors_in_both_environments() -> None:
    """Its `int` parameter (report_refit's weight_version) is only stored, so it is renamed as
    text is; the widths stay small."""
    spec_file = load_spec(LEDGER)
    for variant in spec_file.variants:
        spec = spec_file.variant(variant)
        for environment in ("ledger", "controller"):
            for shards in (1, 4, 8):
                width = widths.analyse(spec, spec.environment(environment), shards, spec.default_policy(), 12)
                assert width.numbers.bounded and width.numbers.width <= 10, (environment, shards, width)


CHECKS = [
    (path, variant, environment, 3, 10)
    for path in (LEDGER, BREAKER)
    for variant in load_spec(path).variants
    for environment in load_spec(path).variant(variant).environments
]
# The fast lane: the breaker, and the coupled fleet smaller and shallower.
CHECKS.append((LEDGER, "fixed", "controller", 2, 7))


@pytest.mark.parametrize(
    ("path", "variant", "environment", "shards", "depth"),
    fast_slice(
        [pytest.param(*c, id=f"{c[0].stem}-{c[1]}-{c[2]}-{c[3]}-{c[4]}") for c in CHECKS],
        (len(CHECKS) - 2, len(CHECKS) - 1),
    ),
)
def test_bit_vectors_and_integers_give_the_same_verdicts(
    path: Path, variant: str, environment: str, shards: int, depth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every safety property: the same status, depth and number of traces, and every trace
    replayed on the interpreter (the search does that as it reads a model)."""
    spec = load_spec(path).variant(variant)
    policy = spec.default_policy()
    shards = min(spec.default_shards, shards)
    contracts = spec.environment(environment).any_call
    compared = 0
    for prop in spec.properties.values():
        if prop.kind == "eventually" or not prop.applies_to(environment):
            continue
        answers = []
        for switch in ("on", "off"):
            monkeypatch.setenv(SWITCH, switch)
            checker = bmc.Checker(spec, environment, prop, shards, policy, contracts=contracts, depth=depth)
            assert checker.enc.numbers.bounded == (switch == "on"), checker.width
            result = checker.run(depth, 2)
            answers.append((result.status, result.depth, [t.depth for t in result.traces]))
        assert answers[0] == answers[1], (prop.name, answers)
        compared += 1
    assert compared > 0
