"""The Spacer proof: a property's cone of influence (`model.cone`) as three constrained Horn
clauses over an unknown invariant `Inv(state)`: the initial states are in it, it is closed
under the transition, and it contains no bad state (or no bad transition, for a step
property). Satisfiable means an inductive invariant exists: proved, and the invariant is
printed; Z3's Spacer (IC3/PDR) finds the strengthening itself.

A module of its own so that the bounded checker (`model.bmc`, which races this proof beside
its search or tries it after, with `--prove`) and `model.prove` (which tries it after a
bounded refutation, before k-induction) both use it and neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import z3

from ledgercheck.model import budget, cone, ir, offers, smallfleet
from ledgercheck.model.encoding import Encoding
from ledgercheck.model.spec import Property, PropertyKind, Spec, contracts_bind, plural


@dataclass(frozen=True)
class Scope:
    """For which fleets a Spacer proof holds, and where its invariant was found."""

    every_size: bool
    """The cone is the focus shard alone and every action kept acts on it only: the sliced
    system, and so the proof, is the same for every number of shards."""
    found_on: int | None = None
    """The size of the smaller fleet the invariant was found on (`Invariant.found_on`)."""
    found_in: str | None = None
    """The other environment the invariant was found in (`Invariant.found_in`)."""

    def phrase(self, shards: int) -> str:
        """How a note names the fleets proved for (`shards`: the fleet asked)."""
        if self.every_size:
            return "every fleet size"
        asked = plural(shards, "shard")
        if self.found_on is None:
            return asked
        where = f" in the {self.found_in} environment" if self.found_in is not None else ""
        return (
            f"{asked}, from an invariant found on {plural(self.found_on, 'shard')}{where}, placed on every shard "
            "and checked"
        )


CERTIFY_RLIMIT = 2_000_000
"""Z3's resource count allowed for checking one obligation of an invariant (they take
hundredths of a second on the bundled spec); beyond it the invariant is not certified."""


def _bads(enc: Encoding, prop: Property, focus: int | None) -> list[tuple[bool, Any]]:
    """The property's violations (and its lemmas') as `horn_proof` takes them."""
    lemmas = lemma_violation(enc, prop, focus, enc.template)
    if prop.kind == PropertyKind.INVARIANT:
        return [(False, z3.Or(enc.invariant_violation(prop, focus, enc.template), lemmas))]
    found: list[tuple[bool, Any]] = [(True, enc.step_violation(prop, focus))]
    return found + ([] if z3.is_false(lemmas) else [(False, lemmas)])


def _horn(
    enc: Encoding,
    prop: Property,
    focus: int | None,
    timeout: float | None,
    rlimit: int | None = None,
    certify: bool = False,
) -> tuple[Any, Invariant | str, bool | None]:
    """Ask Spacer for an inductive invariant that excludes the property's violations (and
    its lemmas'); see `horn_proof`."""
    return horn_proof(enc, _bads_of(enc, prop, focus), timeout, rlimit, certify)


def horn_proof(
    enc: Encoding,
    bads: Callable[[], Sequence[tuple[bool, Any]]],
    timeout: float | None,
    rlimit: int | None = None,
    certify: bool = False,
) -> tuple[Any, Invariant | str, bool | None]:
    """Ask Spacer for an inductive invariant `Inv(state)` of the encoding that excludes every
    bad condition `bads()` builds (see `_solve`). Returns (z3 answer, the invariant or the
    reason, whether `_certified` checked the invariant: None when not asked). `rlimit` caps
    the search by Z3's resource count (deterministic, unlike a timeout)."""
    answer, found, bad_from, shown = _solve(enc, bads, timeout, rlimit)
    if answer != z3.sat:
        return answer, found, None
    checked = (shown or _certified(enc, found, *_arguments(enc), bad_from)) if certify else None
    return answer, _shown(enc, found), checked


def _arguments(enc: Encoding) -> tuple[list[Any], list[Any]]:
    """The arguments of `Inv` in the current and in the next state: the state variables in
    the order of `enc.keys`, then the symbolic policy's (the same in both)."""
    policy = _policy_arguments(enc)
    return [enc.template[k] for k in enc.keys] + policy, [enc.next_template[k] for k in enc.keys] + policy


def _policy_arguments(enc: Encoding) -> list[Any]:
    """The policy's constants where they are symbolic (arguments of `Inv`), else none."""
    return list(enc.policy_vars.values()) if enc.symbolic_policy else []


def _solve(
    enc: Encoding,
    bads: Callable[[], Sequence[tuple[bool, Any]]],
    timeout: float | None,
    rlimit: int | None,
    trivial: bool = True,
) -> tuple[Any, Any, list[Any], bool]:
    """Spacer's answer for `Inv`: (z3 answer, the invariant's body over Z3's bound variables
    in the order of `_arguments` where sat, else the reason, the bad conditions as terms,
    whether a plain solver has already shown the body an invariant: the `True` below, whose
    certification would ask the same question again).
    `bads()`: `(False, term)` a bad state (over the template), `(True, term)` a bad step
    (over the template, the next state and the action's parameters; the transition is
    conjoined here). They are built after the initial and transition clauses, so a proof's
    terms are made in the same order for every caller (Spacer's answer, and the invariant
    printed, can depend on it). `trivial` False: Spacer is asked even where the invariant
    `True` would do (a smaller fleet's proof, whose invariant must hold on a larger one)."""
    ctx = enc.ctx
    cur = [enc.template[k] for k in enc.keys]
    nxt = [enc.next_template[k] for k in enc.keys]
    policy = _policy_arguments(enc)
    params = [enc.act] + [enc.param_template(a, p.name) for a in enc.environment.actions for p in a.value_params]
    inv = z3.Function("Inv", *[v.sort() for v in cur + policy], z3.BoolSort(ctx))
    solver = z3.SolverFor("HORN", ctx=ctx)
    if timeout:
        solver.set("timeout", max(1, int(timeout * 1000)))
    if rlimit:
        solver.set("rlimit", rlimit)
    false = z3.BoolVal(False, ctx)
    solver.add(z3.ForAll(cur + policy, z3.Implies(enc.initial(enc.template), inv(*cur, *policy))))
    step = z3.And(inv(*cur, *policy), enc.transition_template)
    solver.add(z3.ForAll(cur + nxt + params + policy, z3.Implies(step, inv(*nxt, *policy))))
    conditions = list(bads())
    for is_step, bad in conditions:
        if is_step:
            solver.add(z3.ForAll(cur + nxt + params + policy, z3.Implies(z3.And(step, bad), false)))
        else:
            solver.add(z3.ForAll(cur + policy, z3.Implies(z3.And(inv(*cur, *policy), bad), false)))
    bad_from = _bad_terms(enc, conditions)
    spent = budget.limit_solver(solver, timeout)
    if spent is not None:
        return z3.unknown, f"the {spent} ran out", bad_from, False
    # A step property no step from any state can break (most of them: a fact of each
    # action's effect) needs no invariant: `True` is one, shown by a plain solver in
    # milliseconds, where Spacer takes a tenth of a second and answers with a quantified
    # formula `_certified` cannot check. Not asked for a bad state: one is nearly always
    # met by some unreachable state, and the question's work in the context would only
    # shift what Spacer, asked next, finds within its count.
    if trivial and all(is_step for is_step, _ in conditions) and _unsatisfiable(enc, bad_from):
        return z3.sat, z3.BoolVal(True, ctx), bad_from, True
    answer = budget.answered(solver, solver.check())
    if answer != z3.sat:
        spent = budget.active().exhausted() if answer == z3.unknown else None
        why = (f"the {spent} ran out" if spent else solver.reason_unknown()) if answer == z3.unknown else ""
        return answer, why, bad_from, False
    interp = solver.model()[inv]
    body = interp.else_value() if isinstance(interp, z3.FuncInterp) else interp
    return answer, body, bad_from, False


def _shown(
    enc: Encoding, body: Any, found_on: int | None = None, found_in: str | None = None, offered: bool = False
) -> Invariant:
    """The invariant with the state variables' names in place of Z3's bound variables
    (`found_on`, `found_in`: the smaller fleet and the other environment it was found on,
    see `Scope`; `offered`: placed from an invariant another check of the unit offered).
    Inside a unit of checks (`model.offers`) it also keeps `body` as it can be placed on
    another fleet."""
    named = [z3.Const(str(enc.template[k]).replace("@cur", ""), enc.template[k].sort()) for k in enc.keys]
    named += _policy_arguments(enc)
    try:
        shown = z3.simplify(z3.substitute_vars(body, *named))
    except z3.Z3Exception:
        shown = body
    invariant = Invariant(shown, found_on, found_in)
    invariant.offered = offered
    if offers.active() is not None and not _has_quantifier(body):
        keys = tuple(enc.keys)
        placeable = offers.Placeable(keys, enc.symbolic_policy, body.translate(_shown_context()), enc.environment.name)
        invariant.placeable = placeable
    return invariant


def _shown_context() -> z3.Context:
    if not _SHOWN:
        _SHOWN.append(z3.Context())
    return _SHOWN[0]


_SHOWN: list[z3.Context] = []
"""The one context the remembered invariants are copied into (made at the first; a context
costs milliseconds to make, a proof tried first lands in tenths of a second)."""


class Invariant:
    """An invariant Spacer found, printed only when someone reads it: printing a Z3 term
    runs in Python, node by node, and the proof tried before each bounded search never shows
    its invariant. The term is copied into a context of its own kind (`_SHOWN`), so a
    remembered invariant does not keep the whole encoding alive; printing reads the term's
    structure only, the same in any context."""

    def __init__(self, term: Any, found_on: int | None = None, found_in: str | None = None) -> None:
        self.found_on = found_on
        """The smaller fleet it was found on (`_from_small_fleet`), placed on every shard of
        the fleet asked and checked there; None: found on the fleet asked."""
        self.found_in = found_in
        """The other environment of the spec it was found in (`_from_small_fleet`); None:
        the environment asked."""
        self.offered = False
        """Placed from an invariant another check of the unit offered (`model.offers`): the
        answer is remembered for the unit only, not in `_FOUND`."""
        self.placeable: offers.Placeable | None = None
        """The invariant as another check of the unit can place it (inside a unit only)."""
        self._term: Any = term.translate(_shown_context())
        self._text: str | None = None

    def scope(self, every_size: bool) -> Scope:
        """For which fleets a proof by this invariant holds, and where it was found."""
        return Scope(every_size, self.found_on, self.found_in)

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = str(self._term)
            self._term = None
        return self._text


def _certified(enc: Encoding, body: Any, cur: list[Any], nxt: list[Any], bad_from: list[Any]) -> bool:
    """Check Spacer's answer instead of trusting it: the invariant holds initially, is closed
    under the transition and excludes every bad state or step, each shown unsatisfiable by a
    plain solver. An invariant with quantifiers (what Spacer answers when it needed no
    strengthening) is not checked here, and so not certified."""
    if _has_quantifier(body):
        return False
    now = z3.substitute_vars(body, *cur)
    then = z3.substitute_vars(body, *nxt)
    obligations = [
        z3.And(enc.initial(enc.template), z3.Not(now)),
        z3.And(now, enc.transition_template, z3.Not(then)),
        *(z3.And(now, bad) for bad in bad_from if not z3.is_false(bad)),
    ]
    return _unsatisfiable(enc, obligations)


def holds_everywhere(enc: Encoding, bads: Sequence[tuple[bool, Any]]) -> bool:
    """No state, reachable or not, meets a bad condition (as `horn_proof` takes them): the
    invariant `True` excludes them all, shown by a plain solver. Where that is so, Spacer
    answers with a quantified formula (it needed no strengthening), which `_certified`
    cannot check."""
    return _unsatisfiable(enc, _bad_terms(enc, bads))


def _bad_terms(enc: Encoding, bads: Sequence[tuple[bool, Any]]) -> list[Any]:
    """The bad conditions as terms, a bad step with the transition that takes it."""
    return [z3.And(enc.transition_template, bad) if is_step else bad for is_step, bad in bads]


def _unsatisfiable(enc: Encoding, obligations: Sequence[Any]) -> bool:
    """Each obligation unsatisfiable, shown by a plain solver within `CERTIFY_RLIMIT`."""
    solver = z3.SolverFor("QF_LIA", ctx=enc.ctx)
    solver.set("rlimit", CERTIFY_RLIMIT)
    for obligation in obligations:
        solver.push()
        solver.add(obligation)
        answer = budget.answered(solver, solver.check())
        solver.pop()
        if answer != z3.unsat:
            return False
    return True


def _has_quantifier(term: Any) -> bool:
    seen: set[int] = set()
    todo = [term]
    while todo:
        node = todo.pop()
        if z3.is_quantifier(node):
            return True
        if node.get_id() in seen or not z3.is_app(node):
            continue
        seen.add(node.get_id())
        todo.extend(node.children())
    return False


_FOUND: dict[tuple[Any, ...], tuple[Spec, Invariant, bool, bool | None]] = {}
"""The invariants Spacer found in this process, by question (spec variant, environment,
property, fleet, policy, contracts), with whether each was certified (None: not asked). A
found invariant answers the same question again, whatever limits it comes with: the
limits only stop a search, they do not steer it, so a search that found one finds the same
one. (The bounded checker's capped first proof and a later `--prove` or `prove` of the same
property ask it twice.)"""
_KEPT = 32


def spacer_proof(
    spec: Spec,
    environment: str,
    prop: Property,
    shards: int,
    policy: Mapping[str, int] | None,
    timeout: float | None = None,
    *,
    rlimit: int | None = None,
    certify: bool = False,
    contracts: bool | None = None,
    text: bool = True,
) -> tuple[Any, str, Scope]:
    """Spacer on the property's cone of influence. Returns (answer, invariant or reason,
    scope): for which fleets the proof holds (`Scope`), and where its invariant was found.
    `rlimit` caps the search by Z3's resource count; with `certify`,
    an invariant `_certified` cannot check is answered as unknown. `contracts` None: the
    callers' contracts bind where the environment may call anything (as the verdict's search).
    `text` False: the invariant is not printed (an empty string in its place), for a caller
    that only needs to know whether there is one."""
    env = spec.environment(environment)
    bound = contracts_bind(env, prop) if contracts is None else contracts
    fixed = None if policy is None else tuple(sorted(policy.items()))
    question = (id(spec), environment, prop.name, shards, fixed, bound)
    unit = offers.active()
    hit = _FOUND.get(question)
    if hit is None and unit is not None:
        hit = unit.answers.get(question)
    if hit is not None and hit[0] is spec and not (certify and hit[3] is None):
        spent = budget.active().exhausted()
        if spent is not None:  # as a fresh search would answer: a spent budget starts none
            return z3.unknown, f"the {spent} ran out", hit[1].scope(hit[2])
    else:
        enc = cone.sliced_encoding(spec, environment, prop, shards, policy, contracts=bound)
        focus = cone.focus_of(prop)
        local = (
            focus is not None
            and all(key[0] in (focus, None) for key in enc.keys)
            and all(
                set(inst.shards.values()) <= {focus} and not ir.fleet_wide([inst.action.when, inst.action.body])
                for inst in enc.instances
            )
        )
        answer: Any = None
        found: Invariant | str | None = None
        checked: bool | None = True  # an invariant from a small fleet is checked where it is placed
        if not local:
            answer, found, touched = _from_small_fleet(
                spec, environment, prop, focus, policy, bound, enc, timeout, rlimit
            )
            if found is None and touched:
                enc = cone.sliced_encoding(spec, environment, prop, shards, policy, contracts=bound)
        if found is None:
            answer, found, checked = _horn(enc, prop, focus, timeout, rlimit, certify)
        if not isinstance(found, Invariant):
            return answer, found, Scope(local)
        hit = (spec, found, local, checked)  # the spec kept alive: its id names no other
        if found.offered and unit is not None:
            unit.answers[question] = hit
        else:
            while len(_FOUND) >= _KEPT:
                del _FOUND[next(iter(_FOUND))]
            _FOUND[question] = hit
    _, invariant, local, checked = hit
    scope = invariant.scope(local)
    if certify and not checked:
        return z3.unknown, "spacer's invariant could not be checked", scope
    if unit is not None and invariant.placeable is not None:
        unit.offer(spec, prop.name, invariant.placeable)
    return z3.sat, invariant.text if text else "", scope


SMALL_FLEET_RLIMIT = 6_000_000
"""Z3's resource count allowed for Spacer on each small fleet where a proof is asked for
with no count of its own (`prove`, `--prove`): the bundled spec's small-fleet proofs that
check on the large fleet take up to 5 million (about a second), where Spacer on the whole
fleet takes 2-17 s at 4 and 8 shards. A proof tried first with a count of its own (before
a bounded search) gives each small fleet that count."""


def _from_small_fleet(
    spec: Spec,
    environment: str,
    prop: Property,
    focus: int | None,
    policy: Mapping[str, int] | None,
    contracts: bool,
    enc: Encoding,
    timeout: float | None,
    rlimit: int | None,
) -> tuple[Any, Invariant | str | None, bool]:
    """An invariant Spacer finds on a fleet of `smallfleet.SIZES` shards, placed on every
    shard of `enc`'s fleet (`smallfleet.instantiate`) and checked there (`_certified`):
    (sat, the invariant) where one checks, (unknown, why) where the budget ran out, else
    (None, None) and nothing was decided; then whether any term was built in `enc` (Spacer
    on the whole fleet is then asked in a fresh copy, so that its answer is the one it gives
    without this attempt; a copy made up front would cost one on every success, the common
    case, instead of on a failure).

    The property's invariant on one shard of each other environment of the spec is tried
    the same way (`_small_fleets` gives the order): an environment whose callers follow the
    ledger's contracts (a controller's flows) takes steps the environment that may call
    anything under those contracts also takes, so that environment's invariant is often one
    of the controller too. It is asked first: in a plain run of the bundled spec it checks on
    the controller's four shards for 20 of the 23 controller checks it is offered for, where
    the controller's own one-shard invariant, asked first before, checked for 17 of 26 (the
    rest did not check on four shards, or were not found within the count).
    Before any of them, the invariants the unit's earlier checks proved the property with in
    other environments (`model.offers`) are placed the same way: that is the same candidate
    the one-shard fleet of such an environment usually gives, without Spacer's search.
    Whatever its source, a candidate is only a proof once checked on `enc` itself."""
    count = SMALL_FLEET_RLIMIT if rlimit is None else min(rlimit, SMALL_FLEET_RLIMIT)
    bad_from: list[Any] | None = None
    touched = False
    unit = offers.active()
    for placeable in unit.offered(spec, prop.name, environment) if unit is not None else []:
        touched = True
        candidate = smallfleet.instantiate(placeable, enc, placeable.body, focus)
        if candidate is None:
            continue
        if bad_from is None:
            bad_from = _bad_terms(enc, _bads(enc, prop, focus))
        if _certified(enc, candidate, *_arguments(enc), bad_from):
            found = _shown(enc, candidate, found_on=placeable.shards, found_in=placeable.environment, offered=True)
            return z3.sat, found, touched
    for where, size, bound in _small_fleets(spec, environment, prop, focus, contracts, enc.shards, rlimit):
        small = cone.sliced_encoding(spec, where, prop, size, policy, contracts=bound)
        if not {name for _, name in small.keys} <= {name for _, name in enc.keys}:
            continue  # state the fleet asked does not have: no candidate to place
        answer, body, _, _ = _solve(small, _bads_of(small, prop, focus), timeout, count, trivial=False)
        if answer == z3.unknown and budget.active().exhausted() is not None:
            return answer, str(body), touched
        if answer != z3.sat or _has_quantifier(body):
            continue
        touched = True  # from here on terms are built in `enc`
        candidate = smallfleet.instantiate(small, enc, body, focus)
        if candidate is None:
            continue
        if bad_from is None:
            bad_from = _bad_terms(enc, _bads(enc, prop, focus))
        if _certified(enc, candidate, *_arguments(enc), bad_from):
            other = where if where != environment else None
            return z3.sat, _shown(enc, candidate, found_on=size, found_in=other), touched
    return None, None, touched


def _small_fleets(
    spec: Spec,
    environment: str,
    prop: Property,
    focus: int | None,
    contracts: bool,
    shards: int,
    rlimit: int | None,
) -> list[tuple[str, int, bool]]:
    """The small fleets `_from_small_fleet` asks, in order, as (environment, size,
    contracts): where the environment asked follows its callers' contracts, one shard of
    every other environment the property applies to that may call anything, under those
    contracts; then the environment's own smaller fleets (`smallfleet.SIZES`, the first only
    where the proof has a count of its own); then one shard of every other environment the
    property applies to, with the callers' contracts where it may call anything (as its own
    verdict's search). Only fleets smaller than the one asked (on one as large, Spacer asked
    there directly costs as little) and that have the focus shard."""
    sizes = smallfleet.SIZES if rlimit is None else smallfleet.SIZES[:1]
    own = [(environment, size, contracts) for size in sizes]
    others = [
        (other, 1, spec.environment(other).any_call)
        for other in spec.environments
        if other != environment and prop.applies_to(other)
    ]
    # On each shard, an environment that may call anything takes every step the flows of one
    # that follows its contracts take there, so its one-shard invariant is the likelier to
    # hold on the fleet asked.
    ahead = [] if spec.environment(environment).any_call else [fleet for fleet in others if fleet[2]]
    fleets = ahead + own + [fleet for fleet in others if fleet not in ahead]
    return [(where, size, bound) for where, size, bound in fleets if size < shards and (focus is None or focus < size)]


def _bads_of(enc: Encoding, prop: Property, focus: int | None) -> Callable[[], list[tuple[bool, Any]]]:
    """`_bads` of this encoding, built when called."""
    return lambda: _bads(enc, prop, focus)


def lemma_violation(enc: Encoding, prop: Property, focus: int | None, state: Mapping[Any, Any]) -> Any:
    if not prop.lemmas:
        return z3.BoolVal(False, enc.ctx)
    shards = [focus] if focus is not None else list(range(enc.shards))
    parts = [
        enc.backend.not_(enc.machine.invariant(None, lemma, shard, state)) for lemma in prop.lemmas for shard in shards
    ]
    return enc.backend.or_(parts)


__all__ = ["Scope", "holds_everywhere", "horn_proof", "lemma_violation", "spacer_proof"]
