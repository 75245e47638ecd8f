"""Differential testing: the clean-room implementations against the executable model.

Seeded random sequences of the ledger's write calls (all eleven, plausible arguments, any
shard, now and then an unknown shard index) drive an implementation from `tests/impl/` and
the executable model of a spec variant side by side. After every call everything the API
shows must agree: every snapshot field of every shard (states by name), `state_of`,
`membership_epoch`, the three query methods, the number of log lines printed, and whether
the call raised (and what).

Most calls are ones the ledger's callers would make in the current state (the spec's
`requires`); the rest are any call at all, so the lax guards of ledger.md section 2 are
exercised too.

The subtle copy (`report_success` ignored unless SERVING) must diverge from `fixed`. In the
traces below (shipped policy, 4 shards) 5 of the 20 seeds diverge, first at calls 61 to 98,
always at a report_success outside the callers' contract. Shrunk, the shortest are 3 calls:
    report_failure(1, RuntimeError('generation failed'))    # HEALTHY -> SUSPECT, streak 1
    mark_weights_partial(1)                                  # SUSPECT -> STALE
    report_success(1)                                        # model: streak 0; subtle: streak 1
(also with `retire(i, reason=...)` in the middle): a completed request on a shard that is not
serving; the model (no guard, ledger.md section 2) clears the streak, the subtle copy keeps it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tiers import fast_slice

from ledgercheck.model.interpreter import build_api
from ledgercheck.model.spec import load_spec

IMPL_DIR = Path(__file__).resolve().parent / "impl"
SHARDS = 4
URLS = [f"http://shard-{i}" for i in range(SHARDS)]
SEEDS = range(20)
CALLS_PER_SEED = 100  # 2000 calls per comparison
POLICIES: dict[str, dict[str, int]] = {
    "shipped": {},
    "tight": {"unhealthy_threshold": 2, "healthy_threshold": 1, "max_restart_attempts_per_shard": 2},
}
QUERIES = ("serving_shards", "absent_shards", "suspected_shards")


def load_impl(stem: str) -> ModuleType:
    """A file of tests/impl, loaded by path (no package, nothing on sys.path)."""
    name = f"_differential_{stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, IMPL_DIR / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def model_api(variant: str) -> Any:
    return build_api(load_spec().variant(variant))


@functools.cache
def field_names() -> tuple[str, ...]:
    return tuple(f.name for f in load_spec().variant("fixed").fields)


# --- calls --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    method: str
    shard: int
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()

    def apply(self, ledger: Any) -> None:
        getattr(ledger, self.method)(self.shard, *self.args, **dict(self.kwargs))

    def __str__(self) -> str:
        parts = [str(self.shard), *map(repr, self.args), *(f"{k}={v!r}" for k, v in self.kwargs)]
        return f"{self.method}({', '.join(parts)})"


def _error() -> RuntimeError:
    return RuntimeError("generation failed")


ARGS: dict[str, Callable[[random.Random], tuple[tuple[Any, ...], dict[str, Any]]]] = {
    "record_probe": lambda r: ((), {"ok": r.random() < 0.5, "error": r.choice(["", "probe timed out"])}),
    "report_failure": lambda r: ((_error(),), {}),
    "report_success": lambda r: ((), {}),
    "record_actor_death": lambda r: ((), r.choice([{}, {"error": "actor died"}])),
    "condemn_silent_participant": lambda r: ((), {"reason": "silent during weight transfer"}),
    "mark_weights_partial": lambda r: ((), {}),
    "mark_restarting": lambda r: ((), {}),
    "mark_loaded": lambda r: ((), r.choice([{}, {"base_url": None}, {"base_url": f"http://new-{r.randrange(3)}"}])),
    "mark_restart_failed": lambda r: ((), {}),
    "report_refit": lambda r: ((), {"weight_version": r.randrange(100)}),
    "retire": lambda r: ((), {"reason": "retired by operator"}),
}
WEIGHTS = {name: 1.0 for name in ARGS} | {"retire": 0.15, "record_probe": 2.0, "report_failure": 2.0}


def random_call(rng: random.Random, model: Any) -> Call:
    """Mostly a call the callers would make now (per the model's `requires`), else any call."""
    names = list(ARGS)
    weights = [WEIGHTS[n] for n in names]
    if rng.random() < 0.02:
        name = rng.choices(names, weights)[0]
        args, kwargs = ARGS[name](rng)
        return Call(name, rng.choice([-1, SHARDS, SHARDS + 5]), args, tuple(kwargs.items()))
    contract = rng.random() < 0.75
    for _ in range(50):
        name = rng.choices(names, weights)[0]
        shard = rng.randrange(SHARDS)
        args, kwargs = ARGS[name](rng)
        if not contract or model.contract_allows(name, shard, kwargs):
            return Call(name, shard, args, tuple(kwargs.items()))
    return Call(name, shard, args, tuple(kwargs.items()))


def random_trace(seed: int, policy: dict[str, int], variant: str = "fixed") -> list[Call]:
    """A seeded trace, its contract-following choices made against the model of `variant`."""
    rng = random.Random(seed)
    api = model_api(variant)
    model = api.Ledger(shard_count=SHARDS, policy=api.Policy(**policy), base_urls=list(URLS), echo=False)
    calls = []
    for _ in range(CALLS_PER_SEED):
        call = random_call(rng, model)
        calls.append(call)
        with contextlib.suppress(KeyError):
            call.apply(model)
    return calls


# --- observation --------------------------------------------------------------------------


def name_of(value: Any) -> Any:
    return getattr(value, "name", value)


def observe(ledger: Any) -> dict[str, Any]:
    records = ledger.snapshot()
    assert len(records) == SHARDS
    return {
        "records": [{f: name_of(getattr(rec, f)) for f in field_names()} for rec in records],
        "state_of": [name_of(ledger.state_of(i)) for i in range(SHARDS)],
        "membership_epoch": ledger.membership_epoch,
        **{q: list(getattr(ledger, q)()) for q in QUERIES},
    }


def step(ledger: Any, call: Call) -> tuple[str | None, int]:
    """Apply one call: the exception it raised (type name) and the log lines it produced."""
    out = io.StringIO()
    before = len(getattr(ledger, "log_lines", ()))
    raised = None
    with contextlib.redirect_stdout(out):
        try:
            call.apply(ledger)
        except Exception as exc:  # compared, not swallowed
            raised = type(exc).__name__
    if hasattr(ledger, "log_lines"):  # the model, built with echo=False, keeps its lines
        lines = len(ledger.log_lines) - before
    else:
        lines = len([line for line in out.getvalue().splitlines() if line.strip()])
    return raised, lines


@dataclass
class Divergence:
    index: int
    call: Call
    what: str


class Pair:
    def __init__(self, impl_stem: str, variant: str, policy: dict[str, int]) -> None:
        module = load_impl(impl_stem)
        self.impl = module.GenerationFleetHealth(
            shard_count=SHARDS, policy=module.FleetHealthPolicy(**policy), base_urls=list(URLS)
        )
        api = model_api(variant)
        self.model = api.Ledger(shard_count=SHARDS, policy=api.Policy(**policy), base_urls=list(URLS), echo=False)

    def first_divergence(self, calls: Sequence[Call], seen: set[str] | None = None) -> Divergence | None:
        if (a := observe(self.impl)) != (b := observe(self.model)):
            return Divergence(-1, Call("<initial>", -1), f"impl {a}\nmodel {b}")
        for index, call in enumerate(calls):
            impl_step = step(self.impl, call)
            model_step = step(self.model, call)
            if impl_step != model_step:
                return Divergence(index, call, f"(raised, log lines): impl {impl_step}, model {model_step}")
            a, b = observe(self.impl), observe(self.model)
            if a != b:
                diffs = [f"{k}: impl {a[k]!r} != model {b[k]!r}" for k in a if a[k] != b[k]]
                return Divergence(index, call, "; ".join(diffs))
            if seen is not None:
                seen.update(a["state_of"])
                seen.add(f"call:{call.method}")
                if impl_step[1]:
                    seen.add(f"changed:{call.method}")
        return None


def divergence(impl_stem: str, variant: str, policy: dict[str, int], calls: Sequence[Call]) -> Divergence | None:
    return Pair(impl_stem, variant, policy).first_divergence(calls)


def shrink(impl_stem: str, variant: str, policy: dict[str, int], calls: list[Call]) -> list[Call]:
    """Greedily drop calls while the pair still diverges; returns the calls up to the divergence."""
    found = divergence(impl_stem, variant, policy, calls)
    assert found is not None
    calls = calls[: found.index + 1]
    changed = True
    while changed:
        changed = False
        for k in range(len(calls)):
            candidate = calls[:k] + calls[k + 1 :]
            found = divergence(impl_stem, variant, policy, candidate)
            if found is not None:
                calls = candidate[: found.index + 1]
                changed = True
                break
    return calls


def report(trace: Sequence[Call], found: Divergence) -> str:
    shown = "\n".join(f"  {i}: {c}" for i, c in enumerate(trace[: found.index + 1]))
    return f"diverged at call {found.index} ({found.call}): {found.what}\n{shown}"


# --- the comparisons ----------------------------------------------------------------------


MATCHING = [
    ("clean-vs-fixed", "fleet_health_clean", "fixed"),
    ("as_written-vs-as_written", "fleet_health_as_written", "as_written"),
]


# The fast lane compares the clean implementation with `fixed` at the shipped policy.
@pytest.mark.parametrize(
    ("impl_stem", "variant", "policy"),
    fast_slice(
        pytest.param(stem, variant, policy, id=f"{label}-{policy}")
        for policy in POLICIES
        for label, stem, variant in MATCHING
    ),
)
def test_implementation_matches_model(impl_stem: str, variant: str, policy: str) -> None:
    seen: set[str] = set()
    for seed in SEEDS:
        trace = random_trace(seed, POLICIES[policy], variant)
        found = Pair(impl_stem, variant, POLICIES[policy]).first_divergence(trace, seen)
        assert found is None, f"seed {seed}: " + report(trace, found)
    # The traces are worth something: every state visited, every call made and effective.
    states = {"HEALTHY", "SUSPECT", "DEAD", "RESTARTING", "STALE", "RETIRED"}
    assert states <= seen, states - seen
    assert {f"call:{m}" for m in ARGS} <= seen
    assert {f"changed:{m}" for m in ARGS if m != "report_success"} <= seen


@pytest.mark.parametrize(
    ("impl_stem", "variant"),
    fast_slice(
        [
            pytest.param("fleet_health_clean", "as_written", id="clean-vs-as_written"),
            pytest.param("fleet_health_as_written", "fixed", id="as_written-vs-fixed"),
        ]
    ),
)
def test_traces_tell_the_variants_apart(impl_stem: str, variant: str) -> None:
    """The same traces are sharp enough to see the fix: crossing the pairs diverges, at mark_loaded."""
    policy = POLICIES["shipped"]
    found_any = []
    for seed in SEEDS:
        found = divergence(impl_stem, variant, policy, random_trace(seed, policy, variant))
        if found is not None:
            found_any.append(found)
            assert found.call.method == "mark_loaded", found
    assert found_any


@pytest.mark.slow
def test_subtle_copy_diverges_from_fixed() -> None:
    policy = POLICIES["shipped"]
    divergent = []
    for seed in SEEDS:
        trace = random_trace(seed, policy)
        found = divergence("fleet_health_subtle", "fixed", policy, trace)
        if found is not None:
            # The one change: a completed request on a non-serving shard.
            assert found.call.method == "report_success", report(trace, found)
            assert "consecutive_reported_failures" in found.what, found.what
            divergent.append(trace)
    assert divergent, "the random traces never told the subtle copy from the model of `fixed`"
    shortest = min((shrink("fleet_health_subtle", "fixed", policy, t) for t in divergent), key=len)
    # A streak needs a failed request; a serving shard's success clears it the same in both; so
    # three calls (fail, leave SERVING, succeed) is as short as a divergence can be.
    assert len(shortest) == 3, [str(c) for c in shortest]
    first, middle, last = shortest
    assert first.method == "report_failure" and last.method == "report_success", [str(c) for c in shortest]
    assert first.shard == middle.shard == last.shard
    assert middle.method in {
        "mark_weights_partial",
        "retire",
        "record_actor_death",
        "condemn_silent_participant",
    }, [str(c) for c in shortest]


def test_clean_snapshot_returns_copies() -> None:
    module = load_impl("fleet_health_clean")
    ledger = module.GenerationFleetHealth(shard_count=2, policy=module.FleetHealthPolicy(), base_urls=["a", "b"])
    records = ledger.snapshot()
    records[0].state = module.ShardState.DEAD
    records[0].consecutive_reported_failures = 99
    records.clear()
    assert ledger.state_of(0) is module.ShardState.HEALTHY
    assert ledger.snapshot()[0].consecutive_reported_failures == 0


def test_clean_module_shape() -> None:
    module = load_impl("fleet_health_clean")
    assert issubclass(module.ShardState, str)
    assert [s.value for s in module.ShardState] == [s.name.lower() for s in module.ShardState]
    policy = module.FleetHealthPolicy()
    assert (
        policy.unhealthy_threshold,
        policy.healthy_threshold,
        policy.max_restart_attempts_per_shard,
        policy.min_healthy_shards,
    ) == (3, 2, 5, 1)
    for name in ("unhealthy_threshold", "healthy_threshold", "min_healthy_shards"):
        with pytest.raises(ValueError):
            module.FleetHealthPolicy(**{name: 0})
    with pytest.raises(TypeError):
        module.GenerationFleetHealth(4, module.FleetHealthPolicy())
    ledger = module.GenerationFleetHealth(shard_count=2, policy=module.FleetHealthPolicy(), clock=lambda: 12.5)
    assert [r.base_url for r in ledger.snapshot()] == [None, None]
    for bad in (-1, 2, "0"):
        with pytest.raises(KeyError):
            ledger.state_of(bad)
    with pytest.raises(KeyError):
        ledger.report_success(2)
    ledger.retire(1, reason="x")
    with pytest.raises(module.FleetExhaustedError):
        module.GenerationFleetHealth(
            shard_count=2, policy=module.FleetHealthPolicy(min_healthy_shards=3)
        ).raise_if_exhausted()
    ledger.raise_if_exhausted()  # one of two serving, one needed
