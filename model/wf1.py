"""Liveness proofs by the WF1 rule: "P leads to Q" on the focus shard, from three safety facts
about every reachable state, proved together by Spacer.

The fair-lasso searches (`model.liveness`, `model.lasso`) refute, and they prove only where the
reduced graph is small enough to exhaust: at 4 shards in the controller environment they can
say no more than "no fair lasso up to depth k". Lamport's WF1 rule proves P ~> Q under weak
fairness of one group A of actions (on one shard, or of the fleet) from three premises, each
about a reachable state s and every step s -> s':

1. P and not Q at s, any step: P or Q at s'          (the wait lasts until Q)
2. P and not Q at s, a step of A: Q at s'             (A ends the wait)
3. P and not Q at s: some action of A is enabled      (so weak fairness makes A happen)

A fair run that reaches P and never Q stays in "P and not Q" (1) with A enabled at every state
from there on (3), so weak fairness makes it take A, which reaches Q (2): there is no such run.
(Premise 3 also rules out a run that stops there: a state with A enabled has a successor.)
"Reachable" is an inductive invariant that Spacer finds (the Horn query of a safety proof,
`spacer.horn_proof`, with the premises' violations as its bad conditions), and the invariant is
checked by a plain solver before the proof is believed. Where the premises hold in every state,
reachable or not, a plain solver shows that first and the invariant is `True`.

A member that takes value parameters is enabled when some value enables it (a quantifier):
premise 3 asks instead that one of a few witness values does (`_witnessed`), which is stronger
and so sound. What it does not try, so the lasso search still decides: a property that needs
more than one fair step (a chain P ~> R ~> Q), and a member whose enabling values none of the
witnesses covers.

Groups are per shard as the fairness of `model.spec.Fairness` is: an action belongs to the
shard its first shard parameter names, or to the fleet when it has none. The group on the focus
shard is tried first, then the fleet's.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import z3

from ledgercheck.model import budget
from ledgercheck.model.encoding import NONE_CODE, Encoding, Instance, encoding_for
from ledgercheck.model.result import FOCUS
from ledgercheck.model.spacer import Invariant, holds_everywhere, horn_proof
from ledgercheck.model.spec import Environment, Fairness, Property, Spec, plural


@dataclass(frozen=True)
class LeadsTo:
    """A WF1 proof of a liveness property: the fair group it rests on, and the inductive
    invariant of the reachable states that carries the three premises (checked)."""

    group: str
    """The group, as the note names it: "restart_loaded | restart_fails on shard 0"."""
    invariant: Invariant

    def note(self, prop: Property, shards: int) -> str:
        waiting = f"`{prop.when_text}` and not `{prop.assert_text}`" if prop.when_text else f"not `{prop.assert_text}`"
        return (
            f"proved by the WF1 rule for {plural(shards, 'shard')}: while shard {FOCUS} has "
            f"{waiting}, some action "
            f"of {self.group} is enabled, no step leaves that but to `{prop.assert_text}`, and every "
            "step of the group reaches it (over an inductive invariant of the reachable states, checked)"
        )


def wf1_proof(
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: Mapping[str, int],
    timeout: float | None = None,
    rlimit: int | None = None,
) -> LeadsTo | None:
    """A WF1 proof that the focus shard's P leads to Q, resting on one of the environment's
    weak fairness groups, or None when none is found within `rlimit` (Z3's resource count,
    per group tried) or the budget. None proves nothing either way: the caller searches for
    a lasso."""
    env = spec.environment(environment)
    for group in env.fairness:
        for owner in (FOCUS, None):
            if not any(a.name in group.actions and bool(a.shard_params) == (owner is not None) for a in env.actions):
                continue  # no action of the group belongs there: no encoding to copy
            if budget.active().exhausted() is not None:
                return None
            found = _prove_with(spec, env, prop, group, owner, shards, dict(policy), timeout, rlimit)
            if found is not None:
                return found
    return None


def _prove_with(
    spec: Spec,
    env: Environment,
    prop: Property,
    group: Fairness,
    owner: int | None,
    shards: int,
    policy: dict[str, int],
    timeout: float | None,
    rlimit: int | None,
) -> LeadsTo | None:
    """The three premises for the group's members on `owner` (a shard, or None: the fleet)."""
    enc = encoding_for(spec, env, shards, policy, contracts=env.any_call)

    def member(inst: Instance) -> bool:
        return inst.action.name in group.actions and next(iter(inst.shards.values()), None) == owner

    members = [inst for inst in enc.instances if member(inst)]
    if not members:
        return None
    able = [guard for inst in members for guard in _witnessed(enc, inst)]
    if not able:  # no member whose being enabled can be stated: premise 3 cannot be shown
        return None
    p = enc.machine.invariant(None, prop.leads_from, FOCUS, enc.template)
    q = enc.machine.invariant(None, prop.check, FOCUS, enc.template)
    # The cone: what P and Q read, what the members' guards read; the members stay even where
    # they change nothing P or Q reads (premise 2 is about their steps).
    enc.restrict_to([p, q, *able], member)

    waiting = z3.And(p, z3.Not(q))
    p_next, q_next = _next(enc, p), _next(enc, q)
    taken = z3.Or([enc.act == inst.index for inst in members])
    premises: list[tuple[bool, Any]] = [
        (True, z3.And(waiting, z3.Not(p_next), z3.Not(q_next))),
        (True, z3.And(waiting, taken, z3.Not(q_next))),
        (False, z3.And(waiting, z3.Not(z3.Or(able)))),
    ]
    where = f"on shard {FOCUS}" if owner is not None else "of the fleet"
    name = f"{' | '.join(group.actions)} {where}"
    try:
        if holds_everywhere(enc, premises):
            return LeadsTo(group=name, invariant=Invariant(z3.BoolVal(True, enc.ctx)))
        answer, found, checked = horn_proof(enc, lambda: premises, timeout, rlimit, certify=True)
    except z3.Z3Exception:  # e.g. the memory cap: the lasso search decides
        return None
    if answer != z3.sat or not checked or not isinstance(found, Invariant):
        return None
    return LeadsTo(group=name, invariant=found)


MAX_WITNESSES = 64
"""At most this many choices of a member's parameter values are tried as witnesses."""


def _witnessed(enc: Encoding, inst: Instance) -> list[Any]:
    """Conditions over the state under which `inst` is enabled: its guard, with each value
    parameter replaced by one of a few witnesses. Some value enables the action when one of
    these holds, so premise 3 stated with them is stronger than the rule needs: sound, and
    proved where one witness works in every waiting state. The witnesses: every value of a
    bool or enum parameter (exact); for an int or str parameter, None when it is optional, 0,
    1, and one more than each int or str state variable the guard reads (a token other than a
    given one, a number above a given one; the guard of `restart_loaded`, a new address, takes
    0 or 1)."""
    if not inst.params:
        return [inst.enabled]
    read = enc._reads(inst.enabled)
    numbers = [var for key, var in enc.template.items() if key in read and enc.vars[key].type.kind in ("int", "str")]
    choices: list[list[Any]] = []
    for param in inst.action.value_params:
        kind, ctx = param.type.kind, enc.ctx
        values: list[Any] = [z3.IntVal(NONE_CODE, ctx)] if param.type.optional else []
        if kind == "bool" and not param.type.optional:
            values = [z3.BoolVal(True, ctx), z3.BoolVal(False, ctx)]
        elif kind == "enum":
            values += [z3.IntVal(i, ctx) for i in range(len(enc.spec.enums[param.type.enum or ""].members))]
        elif kind in ("int", "str"):
            values += [z3.IntVal(0, ctx), z3.IntVal(1, ctx), *(var + 1 for var in numbers)]
        else:
            return []
        choices.append([(inst.params[param.name], value) for value in values])
    guards = []
    for combo in itertools.islice(itertools.product(*choices), MAX_WITNESSES):
        guards.append(z3.substitute(inst.enabled, *combo))
    return guards


def _next(enc: Encoding, term: Any) -> Any:
    """`term` (over the template) over the next state."""
    return z3.substitute(term, *[(enc.template[key], enc.next_template[key]) for key in enc.keys])


__all__ = ["LeadsTo", "wf1_proof"]
