"""Running checks: which (variant, property, environment) triples a request covers, which
engine answers each, and what the results add up to (exit code, reading order, summary).

The commands (`check`, `report`, `gen`, `ci`) all come through here, so that "every property in
every environment it applies to" means the same thing everywhere and no command can
quietly check less than another. Engines never import this module's callers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ledgercheck.model import budget, executor, ir, offers, resultcache
from ledgercheck.model.errors import EXIT_MISMATCH, EXIT_OK, EXIT_UNKNOWN, UsageError, did_you_mean
from ledgercheck.model.result import Result, Status
from ledgercheck.model.spec import Property, PropertyKind, Spec, SpecFile, contracts_bind

Outcome = Literal["match", "mismatch", "unknown", "skipped", "unexpected"]
"""One word for a result against its expectation (`outcome`)."""

# The order results are read in: what needs attention first.
_READING_ORDER: dict[Outcome, int] = {"mismatch": 0, "unknown": 1, "unexpected": 2, "match": 3, "skipped": 4}


def variants_of(spec_file: SpecFile, names: Sequence[str] | None) -> list[Spec]:
    return [spec_file.variant(n) for n in (names or spec_file.variants)]


def environments_for(spec: Spec, prop: Property, environment: str | None) -> list[str]:
    """The environments a property is checked in: the one asked for (even where the property
    does not apply, which then reports `not_applicable`), or every environment of the spec that
    the property applies to, in the spec's order."""
    if environment is not None:
        spec.environment(environment)
        return [environment]
    return [name for name in spec.environments if prop.applies_to(name)]


DEFAULT_DEPTH = 12
"""How deep `check`, `report`, `gen`, `diff` and `ci` search where neither `--max-depth` nor
the spec's `[spec] max_depth` says."""
MUTATE_DEPTH = 10
"""`mutate`'s search depth (it checks every mutant) where neither `--max-depth` nor the spec's
`[spec] max_depth` says."""
DEFAULT_TRACES = 3
"""How many distinct traces per result they keep by default."""
PROOF_CALL_SECONDS = 30.0
"""Seconds one solver call of a proof `ci` asks for may take (its proofs, its callers'
contracts, the comparison of an edited property with its base's): Spacer, given the whole
budget, spent 600 s on a replica set's term limit that the explicit engine then refutes in half
a second (`_probed_past_the_depth`); past it the proof gives up and the next engine tries."""

EngineChoice = Literal["z3", "explicit", "auto"]
"""`check --engine`: which engine answers a safety property (liveness has one, the lasso search)."""


@dataclass(frozen=True)
class CheckRequest:
    """What to check, in one value: every command that checks builds one (the command line's
    options, or a command's own fixed choices) and hands it to `run_checks`. `overlay` makes
    a variation of it (`request.overlay(lax=False)`) without repeating the rest.

    `variants`, `properties` None mean all of them; `environment` None every environment
    each property applies to; `shards` None the spec's fleet; `policy` None keeps the policy
    constants symbolic (else the overrides of the spec's defaults); `view` None the
    property's own view. `lax` False skips the search for traces that need a call outside
    the callers' contracts (reported beside a verdict, never part of it)."""

    spec_file: SpecFile
    variants: tuple[str, ...] | None = None
    properties: tuple[str, ...] | None = None
    environment: str | None = None
    shards: int | None = None
    policy: Mapping[str, int] | None = field(default_factory=dict)
    max_depth: int = DEFAULT_DEPTH
    max_traces: int = DEFAULT_TRACES
    timeout: float | None = None
    """Seconds per solver call (the command's budget bounds the whole run)."""
    view: tuple[str, ...] | None = None
    prove: bool = False
    memory: int | None = None
    """The solver's memory cap, in MiB."""
    engine: EngineChoice = "z3"
    lax: bool = True

    def __post_init__(self) -> None:
        if self.max_depth < 0 or self.max_traces < 1:
            raise UsageError("--max-depth must be >= 0 and --max-traces >= 1")
        if self.shards is not None and not 1 <= self.shards <= 64:
            raise UsageError("--shards must be in [1, 64]")
        if self.memory is not None and self.memory < 16:
            raise UsageError("--memory is in MiB and must be at least 16")

    def overlay(self, **changes: Any) -> CheckRequest:
        """This request with `changes` made (the fields by name)."""
        return replace(self, **changes)


def run_checks(
    request: CheckRequest,
    progress: Callable[[str], None] | None = None,
    into: list[Result] | None = None,
    config: executor.ExecutorConfig | None = None,
    only: Callable[[tuple[str, str, str]], bool] | None = None,
    poll: Callable[[], None] | None = None,
) -> list[Result]:
    """Check each (variant, property, environment) the request covers, in the spec's order
    (with `only`, just those of them it accepts: a caller that needs some pairs of variant
    and property, not a product of them, still hands its checks to the executor as one batch).

    The checks are independent jobs, run on `config`'s executor (default: the active one,
    `model.executor.using`; one after the other outside a command). Whichever runs them, the
    results come back in the spec's order and are the same, so every format prints the same
    bytes. Results are put in `into` as they come (in the spec's order, whatever finished so
    far), so an interrupted run still has what it established. With several workers,
    `progress` also gets a line as each check finishes, naming it and its verdict. A job asked
    before is answered by `model.resultcache` (what a fresh check would print) and never
    reaches an executor. `poll` is asked while the checks run (`executor.run_all`): an
    exception it raises stops them and is raised here."""
    results = into if into is not None else []
    plan = _plan(request)
    if only is not None:
        plan = replace(plan, jobs=tuple(job for job in plan.jobs if only(job)))
    config = config if config is not None else executor.active()
    first = len(results)
    finished: dict[int, Result] = {}
    known = _Known(plan)
    for index, job in enumerate(plan.jobs):
        hit = known.lookup(job)
        if hit is not None:
            finished[index] = hit
    results[first:] = [finished[i] for i in sorted(finished)]
    missing = [index for index in range(len(plan.jobs)) if index not in finished]
    groups = _groups(plan, missing)
    parallel = config.parallel(len(groups))
    if progress is not None and finished:
        progress(f"{len(finished)} of {len(plan.jobs)} checks answered from the cache of results")

    def finish(index: int, result: Result) -> None:
        finished[index] = result
        known.store(plan.jobs[index], result)
        results[first:] = [finished[i] for i in sorted(finished)]
        if parallel and progress is not None:
            variant, name, environment = plan.jobs[index]
            progress(f"{variant} / {name} ({environment}): {_finished_word(result)} [{len(finished)}/{len(plan.jobs)}]")

    try:
        if parallel:  # a unit is one job of the executor's: its checks in one process
            work = [tuple(plan.jobs[i] for i in group) for group in groups]

            def done(position: int, answers: tuple[Result, ...]) -> None:
                for index, result in zip(groups[position], answers, strict=True):
                    finish(index, result)

            def lost(unit: tuple[tuple[str, str, str], ...], why: str) -> tuple[Result, ...]:
                return tuple(_not_established(plan, job, why) for job in unit)

            executor.run_all(_check_group, plan, work, config, lost, progress, done, poll)
        else:  # in this process: each check's result kept as it comes (an interrupt loses none)
            for group in groups:
                with offers.offering():
                    for index in group:
                        if poll is not None:
                            poll()
                        finish(index, _check_job(plan, plan.jobs[index], progress))
    finally:
        known.close()
    return results


def _groups(plan: _Plan, indices: Sequence[int]) -> list[tuple[int, ...]]:
    """The jobs at `indices` as the units a worker runs: one per (variant, property), its
    environments in the order `_check_group` checks them (those whose callers may call
    anything first, then the spec's order), in the order of each unit's first job. A unit
    is checked in one process whichever executor runs it (a worker's job, or in turn in the
    command's process), so what its earlier checks offer its later ones (`model.offers`) is
    the same on one worker or many."""
    units: dict[tuple[str, str], list[int]] = {}
    for index in indices:
        variant, name, _ = plan.jobs[index]
        units.setdefault((variant, name), []).append(index)
    spec_file = plan.request.spec_file

    def later(index: int) -> bool:
        variant, _, environment = plan.jobs[index]
        return not spec_file.variant(variant).environment(environment).any_call

    return [tuple(sorted(unit, key=later)) for unit in units.values()]


def _check_group(
    plan: _Plan, group: tuple[tuple[str, str, str], ...], progress: Callable[[str], None] | None
) -> tuple[Result, ...]:
    """The checks of one unit of `_groups`, in its order, in one process: an invariant one of
    them proves its property with is offered to the next (`model.offers`), which places
    it on its own fleet and checks it there before asking Spacer anything (a proof of the
    property in the environment whose callers may call anything is often one in the others
    too). An offer that does not check changes nothing: the check goes on as alone."""
    with offers.offering():
        return tuple(_check_job(plan, job, progress) for job in group)


class _Known:
    """The run's side of `model.resultcache`: each job's entry, looked up before any check
    starts and written as each definitive answer comes back."""

    def __init__(self, plan: _Plan) -> None:
        self.plan = plan
        self.where = resultcache.folder()
        self.digests: dict[str, str | None] = {}
        self.wrote = False

    def _key(self, job: tuple[str, str, str]) -> tuple[str, resultcache.Question] | None:
        variant, name, environment = job
        if variant not in self.digests:
            self.digests[variant] = resultcache.spec_digest(self.plan.request.spec_file.variant(variant))
        digest = self.digests[variant]
        if digest is None:
            return None
        request = self.plan.request
        fleet, policy = self.plan.fleets[variant]
        question = resultcache.Question(
            property=name,
            environment=environment,
            shards=fleet,
            policy=None if policy is None else tuple(sorted(policy.items())),
            max_depth=request.max_depth,
            max_traces=request.max_traces,
            view=request.view,
            prove=request.prove,
            engine=request.engine,
            lax=request.lax,
        )
        return digest, question

    def lookup(self, job: tuple[str, str, str]) -> Result | None:
        key = self._key(job) if self.where is not None else None
        return None if key is None or self.where is None else resultcache.lookup(self.where, *key, variant=job[0])

    def store(self, job: tuple[str, str, str], result: Result) -> None:
        key = self._key(job) if self.where is not None else None
        if key is not None and self.where is not None:
            self.wrote |= resultcache.store(self.where, *key, result)

    def close(self) -> None:
        if self.wrote and self.where is not None:
            resultcache.prune(self.where)


@dataclass(frozen=True)
class _Plan:
    """What a worker needs for any of a run's checks (sent to each worker once): the request,
    each variant's fleet and resolved policy, and the (variant, property, environment) jobs."""

    request: CheckRequest
    fleets: Mapping[str, tuple[int, dict[str, int] | None]]
    jobs: tuple[tuple[str, str, str], ...]


def _plan(request: CheckRequest) -> _Plan:
    """Every check a request covers, in the spec's order; every option checked before any runs."""
    spec_file = request.spec_file
    fleets: dict[str, tuple[int, dict[str, int] | None]] = {}
    jobs: list[tuple[str, str, str]] = []
    for spec in variants_of(spec_file, request.variants):
        resolved = spec.resolve_policy(dict(request.policy)) if request.policy is not None else None
        if request.environment is not None:
            spec.environment(request.environment)
        if request.view is not None:
            unknown = [f for f in request.view if f not in {d.name for d in spec.fields}]
            if unknown:
                fields = [d.name for d in spec.fields]
                raise UsageError(f"--view: unknown field {unknown[0]!r}{did_you_mean(unknown[0], fields)}")
        if request.engine == "explicit" and resolved is None:
            raise UsageError("--engine explicit needs a concrete policy (not --symbolic-policy)")
        fleets[spec.variant] = (request.shards or spec.default_shards, resolved)
        for name in request.properties or list(spec.properties):
            prop = spec.property(name)
            jobs += [(spec.variant, name, env_name) for env_name in environments_for(spec, prop, request.environment)]
    return _Plan(request, fleets, tuple(jobs))


def _check_job(plan: _Plan, job: tuple[str, str, str], progress: Callable[[str], None] | None) -> Result:
    """One job of `run_checks` (in whichever process runs it)."""
    variant, name, environment = job
    spent = budget.active().exhausted()
    if spent is not None:  # a spent budget starts no engine: the rest of the run is unknown at once
        return _not_established(plan, job, f"the {spent} ran out before this check started")
    spec = plan.request.spec_file.variant(variant)
    fleet, policy = plan.fleets[variant]
    if progress is not None:
        progress(f"{variant} / {name} ({environment}): checking")
    try:
        prop = spec.property(name)
        if prop.kind == PropertyKind.EVENTUALLY and policy is None and prop.applies_to(environment):
            # The lasso search enumerates states: the other properties are still checked.
            why = "a liveness property is checked at a concrete policy only: check it without --symbolic-policy"
            return Result.not_established(spec, prop, environment, fleet, policy, why)
        result = _check_one(plan.request, spec, environment, prop, shards=fleet, policy=policy, progress=progress)
        if result.status in (Status.PROVED, Status.HOLDS_TO_DEPTH):
            result.vacuous = _vacuous(plan.request, spec, environment, prop, shards=fleet, policy=policy)
        return result
    except Exception as exc:
        spent = budget.interrupted_by(exc)  # the budget, not an error of the check's: unknown
        if spent is None:
            raise
        return _not_established(plan, job, f"the {spent} ran out while it was checked")


def _vacuous(
    request: CheckRequest, spec: Spec, environment: str, prop: Property, *, shards: int, policy: dict[str, int] | None
) -> str:
    """Where a property that holds is about nothing: its `when` never holds (in a reachable
    state of the focus shard, or at a call of its `on`), within the callers' contracts (what
    the verdict counts). Searched as a property of its own, `not when`, where the explicit
    engine decides it (a witness is usually a few steps away: a run pays little for it);
    elsewhere nothing is said (the solver's search would cost as much as the check). A trace
    that breaks it is a witness that the property was exercised; none is vacuity, proved or up
    to the depth searched."""
    if prop.kind not in (PropertyKind.INVARIANT, PropertyKind.STEP) or policy is None:
        return ""
    if prop.when is None and prop.kind == PropertyKind.INVARIANT:
        return ""  # every reachable state is one it is about
    # A step property without `when` is about every call of its events: vacuous where none is
    # ever made (a property moved to an environment whose actions never call its event).
    check = ir.Not(prop.when) if prop.when is not None else ir.Const(False, ir.BOOL)
    witness = replace(prop, name=f"{prop.name} (its when)", when=None, check=check, lemmas=())
    choice = explicit_suits(spec, environment, witness, shards=shards, policy=policy, view=None, prove=True)
    if choice is None:  # the solver's search would cost as much as the check: nothing is said
        return ""
    from ledgercheck.model.explicit import explicit_check

    def search(question: Property) -> Result:
        return explicit_check(
            spec,
            environment,
            question,
            shards=shards,
            policy=policy,
            max_depth=request.max_depth,
            max_traces=1,
            timeout=request.timeout,
            prove=True,
        )

    found = search(witness)
    contracts = contracts_bind(spec.environment(environment), prop) and spec.has_contracts
    where = "in any reachable state" if prop.kind == PropertyKind.INVARIANT else "at any call"
    if found.status == Status.PROVED:
        if not contracts:
            return where
        # Outside the contracts too? Then the property checks nothing at all (a `when` that
        # cannot happen), which `ci` fails; within them only, the lax traces still exercise it.
        lax = replace(witness, counts_any_call=True)
        if explicit_suits(spec, environment, lax, shards=shards, policy=policy, view=None, prove=True) == "search":
            if search(lax).status == Status.PROVED:
                return f"{where}, also outside the callers' contracts"
        return f"{where} within the callers' contracts"
    if found.status == Status.HOLDS_TO_DEPTH and choice == "search":
        return f"up to depth {found.depth}" + (" within the callers' contracts" if contracts else "")
    return ""


def _not_established(plan: _Plan, job: tuple[str, str, str], why: str) -> Result:
    """The result of a check no worker answered: unknown (never a pass), saying why."""
    variant, name, environment = job
    spec = plan.request.spec_file.variant(variant)
    fleet, policy = plan.fleets[variant]
    return Result.not_established(spec, spec.property(name), environment, fleet, policy, why)


def _finished_word(result: Result) -> str:
    """How a progress line names a finished check's answer."""
    if result.status == Status.UNKNOWN:
        return f"unknown ({result.note})" if result.note else "unknown"
    return str(result.status)


def _check_one(
    request: CheckRequest,
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: dict[str, int] | None,
    progress: Callable[[str], None] | None,
) -> Result:
    """One (variant, property, environment): engine choice, then that engine's answer. A
    liveness property goes straight to `model.engines`, which owns the kind rule."""
    if prop.kind != PropertyKind.EVENTUALLY:
        choice: str | None = "search" if request.engine == "explicit" else None
        if request.engine == "auto":
            choice = explicit_suits(
                spec, environment, prop, shards=shards, policy=policy, view=request.view, prove=request.prove
            )
        if choice is not None:
            assert policy is not None
            found = _explicit(request, spec, environment, prop, shards, policy, progress)
            # A probe that neither proved nor refuted leaves the property to the Z3 engines.
            if choice == "search" or found.status in (Status.PROVED, Status.VIOLATED, Status.NOT_APPLICABLE):
                return found
    else:
        choice = None
    from ledgercheck.model import engines  # Z3 loads only when the solver runs

    found = engines.check_property(
        spec,
        environment,
        prop,
        shards=shards,
        policy=policy,
        max_depth=request.max_depth,
        max_traces=request.max_traces,
        timeout=request.timeout,
        progress=progress,
        view=request.view,
        prove=request.prove,
        memory=request.memory,
        race_proof=request.engine == "auto",  # the proof race: Spacer in a second process
        lax=request.lax,
    )
    if (
        request.prove
        and request.engine == "auto"
        and choice is None  # a probe already tried has nothing more to say
        and prop.kind != PropertyKind.EVENTUALLY
        and found.status == Status.HOLDS_TO_DEPTH
        and policy is not None
        and request.view is None
    ):
        return _probed_past_the_depth(request, spec, environment, prop, found, shards, policy, progress)
    return found


def _explicit(
    request: CheckRequest,
    spec: Spec,
    environment: str,
    prop: Property,
    shards: int,
    policy: dict[str, int],
    progress: Callable[[str], None] | None,
) -> Result:
    """The explicit engine's answer to the request's question about `prop`."""
    from ledgercheck.model.explicit import explicit_check

    return explicit_check(
        spec,
        environment,
        prop,
        shards=shards,
        policy=policy,
        max_depth=request.max_depth,
        max_traces=request.max_traces,
        timeout=request.timeout,
        prove=request.prove,
        progress=progress,
    )


def _probed_past_the_depth(
    request: CheckRequest,
    spec: Spec,
    environment: str,
    prop: Property,
    found: Result,
    shards: int,
    policy: dict[str, int],
    progress: Callable[[str], None] | None,
) -> Result:
    """Where no engine proved a property that held to the depth asked (Spacer gave up, or
    ran out of its time): the explicit engine on the whole fleet, past the depth, capped at
    `explicit.PROBE_STATES` states. It finds a violation deeper down (replicas whose shared
    term passed its limit at depth 24, where `ci`'s proofs spent their 600 s in Spacer), or
    runs out of states, a proof; else the bounded verdict stands."""
    if progress is not None:
        progress(
            f"{spec.variant} / {prop.name} ({environment}): no proof; the explicit engine past depth {found.depth}"
        )
    probed = _explicit(request, spec, environment, prop, shards, policy, progress)  # request.prove holds here
    if probed.status in (Status.VIOLATED, Status.PROVED):
        probed.note = f"{found.note}; then {probed.note}" if found.note else probed.note
        probed.seconds += found.seconds
        return probed
    return found


def explicit_suits(
    spec: Spec,
    environment: str,
    prop: Any,
    *,
    shards: int,
    policy: dict[str, int] | None,
    view: tuple[str, ...] | None,
    prove: bool = False,
) -> str | None:
    """`--engine auto`: the explicit engine where its search is small: one shard, or a
    property whose shard evolves on its own (then one shard decides every fleet size).
    "search" where its answer is final: a bounded search (it ends at --max-depth), or with
    `--prove` a reduced state space known to be finite (`model.reduction.finite_reduction`),
    whose exhaustion is a proof. "probe" with `--prove` elsewhere: a search capped at
    `explicit.PROBE_STATES` states that may still exhaust the space (a counter bounded by
    guards) or find a violation; otherwise the Z3 engines decide. None: the Z3 engines."""
    if policy is None or view is not None:
        return None
    if not prop.applies_to(environment):
        return "search"
    from ledgercheck.model.explicit import explicit_decides
    from ledgercheck.model.reduction import finite_reduction

    env = spec.environment(environment)
    if not explicit_decides(spec, env, [prop], shards, policy):
        return None
    if not prove or finite_reduction(spec, env, [prop], policy).finite:
        return "search"
    return "probe"


def exit_code(results: Iterable[Result]) -> int:
    """1 on any mismatch, even where something else is undecided (as `ci` answers: a verdict
    that differs is the finding to act on), else 3 if anything is undecided (never a pass),
    else 0."""
    listed = list(results)
    if any(r.matches is False for r in listed):
        return EXIT_MISMATCH
    if any(r.status == Status.UNKNOWN for r in listed):
        return EXIT_UNKNOWN
    return EXIT_OK


def outcome(result: Result) -> Outcome:
    """One word for a result: 'match', 'mismatch', 'unknown', 'skipped' or 'unexpected' (no expectation)."""
    if result.status == Status.NOT_APPLICABLE:
        return "skipped"
    if result.status == Status.UNKNOWN:
        return "unknown"
    if result.matches is True:
        return "match"
    if result.matches is False:
        return "mismatch"
    return "unexpected"


def reading_order(results: Iterable[Result]) -> list[Result]:
    """Mismatches first, then undecided results, then the rest; stable within each group, so
    the spec's order is kept and the same results always read the same way."""
    return sorted(results, key=lambda r: _READING_ORDER[outcome(r)])


def multi_environment(results: Iterable[Result]) -> bool:
    return len({r.environment for r in results}) > 1


def shortest(result: Result) -> int | None:
    """The length of the shortest trace a violated result has (its depth), else None."""
    if result.status != Status.VIOLATED:
        return None
    lengths = [t.depth for t in result.traces] or [result.depth]
    return min(lengths)


def mismatch_line(result: Result) -> str:
    """'as_written / p (controller): violated, the spec expects holds; shortest trace 8 steps'."""
    found = "unknown" if result.status == Status.UNKNOWN else result.verdict
    line = f"{result.variant} / {result.property} ({result.environment}): {found}"
    if result.status == Status.UNKNOWN:
        line += f", the spec expects {result.expected}" + (f" ({result.note})" if result.note else "")
        return line
    line += f", the spec expects {result.expected}"
    length = shortest(result)
    if length is not None:
        line += f"; shortest trace {length} step{'s' if length != 1 else ''}"
    elif result.status == Status.HOLDS_TO_DEPTH:
        line += f"; no violation up to depth {result.depth}"
    return line


def attention(results: Iterable[Result]) -> list[Result]:
    """The results that keep a run from passing: mismatches, then undecided ones."""
    return [r for r in reading_order(results) if outcome(r) in ("mismatch", "unknown")]


def result_json(result: Result) -> dict[str, Any]:
    """One result as the JSON object of `check --format json` (a public schema)."""
    data: dict[str, Any] = {
        "variant": result.variant,
        "property": result.property,
        "environment": result.environment,
        "shards": result.shards,
        "policy": result.policy,
        "status": result.status,
        "depth": result.depth,
        "expected": result.expected,
        "matches": result.matches,
        "traces": [t.to_json() for t in result.traces],
        "engine": result.engine,
    }
    if any(t.loop_start is not None for t in result.traces):
        # Lasso traces (liveness): per trace, the step the last state returns to.
        data["loop_start"] = [t.loop_start for t in result.traces]
    if result.assumptions:
        data["assumptions"] = result.assumptions
    if result.lax_traces:
        data["lax_traces"] = [t.to_json() for t in result.lax_traces]
    if result.note:
        data["note"] = result.note
    if result.vacuous:  # a property that holds, but whose `when` is never true where it was checked
        data["vacuous"] = result.vacuous
    if result.region is not None:
        data["policy_region"] = result.region
        data["policy_region_text"] = result.region_text()
    return data


__all__ = [
    "DEFAULT_DEPTH",
    "DEFAULT_TRACES",
    "CheckRequest",
    "EngineChoice",
    "Outcome",
    "attention",
    "environments_for",
    "exit_code",
    "explicit_suits",
    "mismatch_line",
    "multi_environment",
    "outcome",
    "reading_order",
    "result_json",
    "run_checks",
    "shortest",
    "variants_of",
]
