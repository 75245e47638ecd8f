"""The encoding a process builds once per (variant, environment, fleet, policy) and copies
into a fresh Z3 context for each check (`model.encoding.encoding_for`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import z3

from ledgercheck.model import bmc, cone
from ledgercheck.model import encoding as encoding_module
from ledgercheck.model.encoding import Encoding, encoding_for
from ledgercheck.model.spec import bundled_spec_folder, load_spec

ROOT = Path(__file__).resolve().parent.parent


def _terms(enc: Encoding) -> list[Any]:
    """Every Z3 term an encoding holds, whatever object it sits in."""
    found: list[Any] = []

    def collect(value: Any) -> None:
        if z3.is_ast(value):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                collect(item)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for item in dataclasses.fields(value):
                collect(getattr(value, item.name))

    for name in ("policy_vars", "policy", "template", "next_template", "next_terms", "instances"):
        collect(getattr(enc, name))
    collect([enc.act, enc.enabled_term, enc.transition_template])
    return found


@pytest.mark.parametrize(
    ("spec_path", "environment", "shards"),
    [
        (bundled_spec_folder() / "fleet_health.toml", "controller", 3),
        (ROOT / "spec/examples/listener_breaker.toml", "ledger", 1),
    ],
)
def test_a_copy_holds_only_terms_of_its_own_context(spec_path: Path, environment: str, shards: int) -> None:
    spec = load_spec(spec_path).variant()
    env = spec.environment(environment)
    original = Encoding(spec, env, shards, spec.default_policy())
    first = encoding_for(spec, env, shards, spec.default_policy())
    second = encoding_for(spec, env, shards, spec.default_policy())
    assert first.ctx is not second.ctx
    for copy in (first, second):
        terms = _terms(copy)
        assert len(terms) == len(_terms(original))
        assert all(term.ctx is copy.ctx for term in terms)
    # The same formulas, term for term (printed the same way), as a fresh build, each wrapped
    # as the same kind of term (the copy wraps them without asking Z3 what they are).
    assert [t.sexpr() for t in _terms(first)] == [t.sexpr() for t in _terms(original)]
    assert [type(t) for t in _terms(second)] == [type(t) for t in _terms(original)]


def test_a_copy_of_a_sliced_encoding_is_of_the_slice() -> None:
    """The layout a copy is made from is worked out once per encoding and kept: an encoding
    sliced after it was copied is copied as the slice, not as it was."""
    spec = load_spec(bundled_spec_folder() / "fleet_health.toml").variant("as_written")
    prop = spec.property("no_condemnation_by_inherited_streak")
    enc = encoding_for(spec, spec.environment("controller"), 3, spec.default_policy())
    whole = enc.copy_into(z3.Context())
    assert cone.slice_encoding(enc, prop, ("state",)) > 0
    sliced = enc.copy_into(z3.Context())
    assert len(sliced.keys) == len(enc.keys) < len(whole.keys)
    assert len(sliced.instances) == len(enc.instances)
    assert sliced.transition_template.sexpr() == enc.transition_template.sexpr()
    assert [t.sexpr() for t in _terms(sliced)] == [t.sexpr() for t in _terms(enc)]


def test_a_copy_is_sliced_without_touching_the_one_kept() -> None:
    spec = load_spec(bundled_spec_folder() / "fleet_health.toml").variant("as_written")
    prop = spec.property("no_condemnation_by_inherited_streak")
    checker = bmc.Checker(spec, "controller", prop, 3, spec.default_policy())
    assert checker.sliced > 0
    whole = encoding_for(spec, spec.environment("controller"), 3, spec.default_policy())
    assert len(whole.keys) > len(checker.enc.keys)
    assert [inst.index for inst in whole.instances] == list(range(len(whole.instances)))


def test_a_check_finds_the_same_traces_whatever_ran_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a worker ran before a check (sharing the kept encoding) changes none of its traces:
    the same check first in a process, after another one, and after the kept encodings are
    dropped prints the same traces."""
    spec = load_spec(bundled_spec_folder() / "fleet_health.toml").variant("as_written")
    policy = spec.default_policy()

    def traces(name: str) -> list[Any]:
        result = bmc.Checker(spec, "controller", spec.property(name), 2, policy).run(8, 2)
        return [t.to_json() for t in result.traces]

    monkeypatch.setattr(encoding_module, "_BASES", {})
    first = traces("no_condemnation_by_inherited_streak")
    assert first
    traces("restarted_engine_refits_healthy")
    again = traces("no_condemnation_by_inherited_streak")
    monkeypatch.setattr(encoding_module, "_BASES", {})
    fresh = traces("no_condemnation_by_inherited_streak")
    assert first == again == fresh


def _walked_cone(enc: Encoding, roots: list[Any], keep: Any) -> tuple[list[Any], list[str]]:
    """The cone of influence found the slow way, walking the copy's own terms at every round
    (what `restrict_to` did before it read the shared table of footprints)."""
    cone = set().union(*(enc._reads(r) for r in roots))
    while True:
        relevant = [
            inst for inst in enc.instances if keep(inst) or any(not inst.store[k].eq(enc.template[k]) for k in cone)
        ]
        grown = set(cone)
        for inst in relevant:
            grown |= enc._reads(inst.enabled)
            for key in cone:
                grown |= enc._reads(inst.store[key])
        if grown == cone:
            return [k for k in enc.keys if k in cone], [encoding_module.footprint_name(i) for i in relevant]
        cone = grown


@pytest.mark.parametrize("environment", ["controller", "ledger"])
def test_the_shared_footprints_slice_as_walking_the_copy_does(environment: str) -> None:
    """Every property's slice, read from the table walked once on the kept encoding, keeps
    the variables and actions that walking each copy's own terms keeps."""
    from ledgercheck.model import cone

    spec = load_spec(bundled_spec_folder() / "fleet_health.toml").variant("as_written")
    env = spec.environment(environment)
    compared = 0
    for contracts in (True, False):
        for prop in spec.properties.values():
            if prop.kind.name == "EVENTUALLY" or not prop.applies_to(environment):
                continue
            enc = encoding_for(spec, env, 3, spec.default_policy(), contracts=contracts)
            focus = cone.focus_of(prop)
            roots = cone.roots(enc, prop, focus, cone.view_fields(spec, prop))
            keys, kept = _walked_cone(enc, roots, cone.observes(prop, focus))
            cone.slice_encoding(enc, prop, cone.view_fields(spec, prop))
            assert enc.keys == keys, prop.name
            assert [encoding_module.footprint_name(i) for i in enc.instances] == kept, prop.name
            compared += 1
    assert compared >= 10


def _reads_the_slow_way(enc: Encoding, term: Any) -> set[Any]:
    """The template variables under `term`, found through z3py's own objects."""
    by_id = {var.get_id(): key for key, var in enc.template.items()}
    found: set[Any] = set()
    seen: set[int] = set()
    stack = [term]
    while stack:
        node = stack.pop()
        if node.get_id() in seen:
            continue
        seen.add(node.get_id())
        if z3.is_quantifier(node):
            stack.append(node.body())
        elif z3.is_const(node) and node.get_id() in by_id:
            found.add(by_id[node.get_id()])
        elif z3.is_app(node):
            stack.extend(node.children())
    return found


@pytest.mark.parametrize("environment", ["controller", "ledger"])
def test_the_reads_walked_through_the_c_api_are_those_z3py_finds(environment: str) -> None:
    """`Encoding._reads` walks raw pointers for speed; every guard and update of every
    instance reads what walking z3py's objects reads, and a quantifier's body is walked."""
    spec = load_spec(bundled_spec_folder() / "fleet_health.toml").variant("as_written")
    enc = encoding_for(spec, spec.environment(environment), 2, spec.default_policy())
    terms = [enc.transition_template, enc.enabled_term]
    for inst in enc.instances:
        terms.append(inst.enabled)
        terms.extend(inst.store.values())
    some = enc.template[enc.keys[0]]
    bound = z3.Const("bound", some.sort())
    terms.append(z3.ForAll([bound], z3.Or(bound == some, bound != enc.template[enc.keys[-1]])))
    assert sum(1 for term in terms if _reads_the_slow_way(enc, term)) > len(terms) // 2
    for term in terms:
        assert enc._reads(term) == _reads_the_slow_way(enc, term)


def test_the_encoding_with_contracts_is_derived_and_the_same_terms_as_one_built_with_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the callers' contracts are asked for, the kept encoding is the one without them
    with each guard conjoined with its contracts (one run of every action over the template
    for both): a copy of it is term for term a copy of an encoding built with them, and
    asking in either order gives the same terms."""
    spec = load_spec(bundled_spec_folder() / "fleet_health.toml").variant("as_written")
    env = spec.environment("ledger")
    policy = spec.default_policy()

    def shown(enc: Encoding) -> list[str]:
        return [term.sexpr() for term in _terms(enc)]

    built = Encoding(spec, env, 2, policy, contracts=True).copy_into(z3.Context())
    plain_built = Encoding(spec, env, 2, policy).copy_into(z3.Context())
    assert shown(built) != shown(plain_built), "the contracts change the guards"
    for order in ((True, False), (False, True)):
        monkeypatch.setattr(encoding_module, "_BASES", {})
        made = {contracts: encoding_for(spec, env, 2, policy, contracts=contracts) for contracts in order}
        assert made[True].contracts and not made[False].contracts
        assert shown(made[True]) == shown(built)
        assert shown(made[False]) == shown(plain_built)
        kept = [base for _, base in encoding_module._BASES.values()]
        assert len(kept) == 2 and kept[0].ctx is kept[1].ctx, "one run over the template for both"


def test_terms_made_with_one_call_into_z3_are_the_terms_z3py_makes() -> None:
    """`encoding._and`, `_or`, `_not` and `_if` (what a build makes its terms with) give the
    very terms z3py's And, Or, Not and If give, of the same Python kinds, on Boolean, integer
    and bit-vector branches; anything z3py would coerce or refuse goes to z3py itself. And a
    term's node (`_node`) is the same exactly when z3py says the terms are the same."""
    ctx = z3.Context()
    p, q, r = (z3.Bool(name, ctx) for name in "pqr")
    x, y = z3.Int("x", ctx), z3.Int("y", ctx)
    u, v = z3.BitVec("u", 7, ctx), z3.BitVec("v", 7, ctx)
    made = [
        (encoding_module._and([p, q, r]), z3.And(p, q, r)),
        (encoding_module._and([p]), z3.And([p])),
        (encoding_module._or([p, x > 1]), z3.Or(p, x > 1)),
        (encoding_module._not(p == q), z3.Not(p == q)),
        (encoding_module._if(p, x, y + 1), z3.If(p, x, y + 1)),
        (encoding_module._if(p, z3.IntVal(2, ctx), z3.IntVal(3, ctx)), z3.If(p, z3.IntVal(2, ctx), z3.IntVal(3, ctx))),
        (encoding_module._if(q, u, v), z3.If(q, u, v)),
        (encoding_module._if(r, p, q), z3.If(r, p, q)),
        # z3py's own coercions: a Python value, an integer beside a real
        (encoding_module._and([p, True]), z3.And(p, True)),
        (encoding_module._if(p, x, 3), z3.If(p, x, 3)),
        (encoding_module._if(p, x, z3.Real("w", ctx)), z3.If(p, x, z3.Real("w", ctx))),
    ]
    for ours, theirs in made:
        assert ours.eq(theirs) and type(ours) is type(theirs), (ours, theirs)
    with pytest.raises(z3.Z3Exception):  # refused, as z3py refuses it
        encoding_module._if(p, x, u)
    other = z3.Bool("p", z3.Context())
    with pytest.raises(z3.Z3Exception):  # two contexts: z3py's error, not a crash in Z3
        encoding_module._and([p, other])
    same, different = [(x + 1, x + 1), (p, p)], [(x + 1, 1 + x), (p, q), (u, v)]
    assert all(encoding_module._node(a) == encoding_module._node(b) for a, b in same)
    assert all(encoding_module._node(a) != encoding_module._node(b) for a, b in different)
    assert encoding_module._node(3) is None
