"""Liveness: `kind = "eventually"` properties, checked by a search for fair lassos.

A property `when = P`, `assert = Q`, `kind = "eventually"` says: whenever the focus shard
satisfies P, it satisfies Q then or later (P leads to Q; without `when`, Q eventually holds).
No finite trace can refute that; an infinite one can, and in a finite state graph every
infinite counterexample can be taken lasso-shaped: a stem to a state where P holds and Q does
not, then a path that never satisfies Q into a cycle it repeats forever.

Runs that starve a background task are not real runs: the environment declares what it may
assume as *weak fairness* of groups of actions (`fairness = [{ weak = [...] }]`), per shard.
A cycle is fair when every group that is enabled on a shard at every state of the cycle is
also taken on that shard somewhere in it. A state where no action at all is enabled is a
cycle of its own (the run stutters there forever, and is fair: nothing is enabled).

The search runs on the explicit engine's graph (`model.explicit.Explorer`), with its exact
reduction (cone of influence, saturated counters) but without symmetry reduction, so that
"the same shard" means the same thing around a cycle. It builds the reachable graph breadth
first, then finds the strongly connected components of the part where Q is false (Tarjan's
algorithm). For weak fairness, one check per component suffices: if a group is enabled on
shard i everywhere in a component and never taken in it, no cycle inside it is fair either
(a sub-cycle has fewer edges and no state where the group is disabled). When the reachable
graph is exhausted and no fair component is reachable after P, the property is *proved* for
the reduced finite state space, which is exact; when the search stops at a bound (states,
time), it holds for every lasso whose states lie within that distance of the start.

Where that graph is too large to exhaust (the controller at 4 shards), `check_eventually` tries a
proof by the WF1 rule next (`model.wf1`: three safety premises carried by one inductive invariant
Spacer finds), and only where that does not land the Z3 lasso search (`model.lasso`), which
refutes deeper than the explicit bound but proves nothing.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ledgercheck.model import budget
from ledgercheck.model.errors import UsageError
from ledgercheck.model.explicit import Explorer, Label, finiteness, is_sampled, sampled
from ledgercheck.model.result import FOCUS, NO_LASSO_SHOWS, EncodingMismatch, Result, Status
from ledgercheck.model.spec import Environment, Property, PropertyKind, Spec

MAX_STATES = 100_000
"""States `prove` lets the explicit search build before it stops at a bound."""
CHECK_STATES = 5_000
"""States `check` lets it build (under a second): enough to exhaust one shard's graph."""
CHECK_LASSO_DEPTH = 8
"""Where the explicit graph is too large and no WF1 proof lands, `check` runs the Z3 lasso
search (`model.lasso`) to at most this depth (about 2 s at 4 shards; depth 12 takes 11 s, so
plain `ledgercheck` would slow down by half a minute); `prove` runs it to PROVE_LASSO_DEPTH."""
PROVE_LASSO_DEPTH = 12
WF1_RLIMIT = 3_000_000
"""Z3's resource count for each WF1 proof `check` tries (`model.wf1`), as for the proof tried
before a safety property's bounded search (`bmc.PROOF_FIRST_RLIMIT`): a count, not a timeout,
so whether it lands does not depend on the machine's load. The bundled liveness property needs
0.13 million at 4 shards and 1.25 million at 16. `prove` allows ten times as much."""


def check_eventually(
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: Mapping[str, int] | None,
    max_depth: int,
    timeout: float | None = None,
    prove: bool = False,
) -> Result:
    """The liveness verdict, the cheapest answer first: the explicit search within
    CHECK_STATES (it proves by exhaustion where the reduced graph is small, and finds short
    lassos); where it stops at that bound, a WF1 proof (`model.wf1`); failing that, with
    `prove`, the explicit search within MAX_STATES; then the Z3 lasso search, which reaches
    deeper for the same time.

    A WF1 proof is reported as a safety property's proof tried first is: by `check` as holding
    to `max_depth` (engine `spacer`: every depth holds), by `prove` as proved."""
    explicit = check_liveness(
        spec, environment, prop, shards=shards, policy=policy, timeout=timeout, max_states=CHECK_STATES
    )
    if (explicit.status != Status.HOLDS_TO_DEPTH and not is_sampled(explicit)) or policy is None:
        return explicit
    from ledgercheck.model.wf1 import wf1_proof

    start = time.monotonic()
    rlimit = WF1_RLIMIT * (10 if prove else 1)
    proof = wf1_proof(spec, environment, prop, shards=shards, policy=policy, timeout=timeout, rlimit=rlimit)
    if proof is not None:  # the explicit search's result, with the proof's verdict
        return replace(
            explicit,
            status=Status.PROVED if prove else Status.HOLDS_TO_DEPTH,
            depth=0 if prove else max_depth,
            traces=[],
            seconds=explicit.seconds + time.monotonic() - start,
            note=proof.note(prop, shards),
            engine="spacer",
            invariant=proof.invariant.text if prove else "",
            proved_beyond=not prove,
        )
    spent = explicit.seconds + time.monotonic() - start  # the bounded search and the WF1 attempt
    if prove:
        explicit = check_liveness(
            spec, environment, prop, shards=shards, policy=policy, timeout=timeout, max_states=MAX_STATES
        )
        explicit.seconds += spent
        spent = explicit.seconds
        if explicit.status != Status.HOLDS_TO_DEPTH and not is_sampled(explicit):
            return explicit
    from ledgercheck.model.lasso import z3_lasso

    depth = PROVE_LASSO_DEPTH if prove else min(max_depth, CHECK_LASSO_DEPTH)
    deeper = z3_lasso(spec, environment, prop, shards=shards, policy=policy, max_depth=depth, timeout=timeout)
    deeper.seconds += spent
    if deeper.status == Status.HOLDS_TO_DEPTH:
        if deeper.depth < explicit.depth and not is_sampled(explicit):
            return explicit
        deeper.note += f"; the explicit search: {explicit.note}"
    return deeper


@dataclass
class _Graph:
    """The reachable graph: states, their edges (label, target) and their BFS depth."""

    states: list[tuple[Any, ...]]
    edges: list[list[tuple[Label, int]]]
    depth: list[int]
    parent: list[tuple[int, Label] | None]
    expanded: int
    complete: bool
    spent: str | None = None  # the command's budget that stopped the search, if one did


def check_liveness(
    spec: Spec,
    environment: str,
    prop: Property,
    *,
    shards: int,
    policy: Mapping[str, int] | None,
    timeout: float | None = None,
    max_states: int = MAX_STATES,
) -> Result:
    """Search for a fair lasso that breaks `prop`; prove it by exhaustion when there is none."""
    start = time.monotonic()
    env = spec.environment(environment)
    if not prop.applies_to(environment):
        return Result.not_applicable(spec, prop, environment, shards, policy)
    if policy is None:
        raise UsageError(f"{prop.name}: a liveness property needs a concrete policy (not --symbolic-policy)")
    explorer = _explorer(spec, env, prop, shards, policy)
    deadline = start + timeout if timeout else None
    graph = _explore(explorer, max_states, deadline)
    assumptions = env.fairness_text()
    lasso = _fair_lasso(explorer, env, graph)
    states = len(graph.states)
    if lasso is not None:
        labels, loop_at = lasso
        trace, _, _, _ = explorer.path_trace(labels, FOCUS)
        trace = replace(trace, loop_start=loop_at)
        loop = "no action is enabled there (the run stutters)" if loop_at == trace.depth else f"back to step {loop_at}"
        note = f"a lasso: {trace.length}, then {loop}; explicit search of {states} states"
        return Result(
            variant=spec.variant,
            property=prop.name,
            environment=environment,
            shards=shards,
            policy=policy,
            status=Status.VIOLATED,
            depth=trace.depth,
            traces=[trace],
            expected=prop.expect.get(spec.variant),
            seconds=time.monotonic() - start,
            note=note,
            engine="explicit",
            assumptions=assumptions,
        )
    if graph.complete:
        status, depth = Status.PROVED, max(graph.depth) if graph.depth else 0
        note = (
            f"proved by exhaustion of the reduced finite state space ({states} states, {shards} shard(s)) "
            f"with SCC analysis: no reachable fair cycle avoids it"
        )
    elif graph.spent is not None:  # never a pass: the level in progress was not searched whole
        status = Status.UNKNOWN
        depth = max(graph.depth[graph.expanded - 1] - 1, 0) if graph.expanded else 0
        note = (
            f"the {graph.spent} ran out after {graph.expanded} of {states} states; no fair lasso within depth {depth}"
        )
    else:
        status = Status.HOLDS_TO_DEPTH
        depth = graph.depth[graph.expanded - 1] if graph.expanded else 0
        note = f"no fair lasso within depth {depth} ({states} states; the search stopped at its bound)"
        finite = finiteness(explorer)
        if not finite.finite:  # where a value grows for ever, a run need never come back to a state
            note += f"; {finite}: {NO_LASSO_SHOWS}"
    # no lasso among a sample of its int parameters' values: the Z3 engines decide
    status, note = sampled(explorer.int_params, status, note, name_them=True)
    return Result(
        variant=spec.variant,
        property=prop.name,
        environment=environment,
        shards=shards,
        policy=policy,
        status=status,
        depth=depth,
        traces=[],
        expected=prop.expect.get(spec.variant),
        seconds=time.monotonic() - start,
        note=note,
        engine="explicit",
        assumptions=assumptions,
    )


def _explorer(spec: Spec, env: Environment, prop: Property, shards: int, policy: Mapping[str, int]) -> Explorer:
    """An explorer whose two invariants are P (index 0) and Q (index 1) of the focus shard.
    Its cone holds what P and Q read and everything that can change it; a fair action outside
    the cone still decides which cycles are fair, so then the reduction is not used."""
    p_prop = replace(prop, kind=PropertyKind.INVARIANT, when=None, check=prop.leads_from)
    q_prop = replace(prop, kind=PropertyKind.INVARIANT, when=None)
    props = [p_prop, q_prop]
    explorer = Explorer(spec, env, props, shards, policy, symmetry=False, contracts=env.any_call)
    present = {action.name for action, _ in explorer.instances}
    if any(name not in present for group in env.fairness for name in group.actions):
        explorer = Explorer(spec, env, props, shards, policy, symmetry=False, contracts=env.any_call, reduce=False)
    return explorer


def _explore(explorer: Explorer, max_states: int, deadline: float | None) -> _Graph:
    """Breadth first, level by level; a level is expanded whole or not at all, so the
    expanded states are exactly those within some depth of the start."""
    index = {explorer.initial: 0}
    graph = _Graph([explorer.initial], [], [0], [None], 0, False)
    limits = budget.active()
    level_end = 1
    while graph.expanded < len(graph.states):
        if graph.expanded == level_end:
            level_end = len(graph.states)
            if len(graph.states) > max_states or (deadline is not None and time.monotonic() > deadline):
                return graph
        i = graph.expanded
        graph.spent = limits.exhausted(memory=i % budget.MEMORY_EVERY == 0)
        if graph.spent is not None:  # mid-level: what was expanded stands, nothing is claimed of the rest
            return graph
        out: list[tuple[Label, int]] = []
        for succ in explorer.successors(graph.states[i]):
            j = index.get(succ.state)
            if j is None:
                j = index[succ.state] = len(graph.states)
                graph.states.append(succ.state)
                graph.depth.append(graph.depth[i] + 1)
                graph.parent.append((i, succ.label))
            out.append((succ.label, j))
        graph.edges.append(out)
        graph.expanded += 1
    graph.complete = True
    return graph


def _holds(explorer: Explorer, state: tuple[Any, ...]) -> tuple[bool, bool]:
    """(P, Q) of the focus shard in `state`."""
    broken = explorer.invariants_broken(state)
    return not broken[0], not broken[1]


def _sccs(nodes: Sequence[int], succ: Mapping[int, list[int]]) -> list[list[int]]:
    """Tarjan's strongly connected components, iteratively (graphs here are deep)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    result: list[list[int]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[int, int]] = [(root, 0)]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, k = work[-1]
            targets = succ[node]
            if k < len(targets):
                work[-1] = (node, k + 1)
                nxt = targets[k]
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                result.append(component)
    return result


def _fair_lasso(explorer: Explorer, env: Environment, graph: _Graph) -> tuple[list[Label], int] | None:
    """The labels of a fair lasso and the step its loop returns to, or None."""
    n = graph.expanded
    flags = [_holds(explorer, graph.states[i]) for i in range(len(graph.states))]
    avoid = [i for i in range(n) if not flags[i][1]]
    inside = set(avoid)
    succ = {i: [j for _, j in graph.edges[i] if j in inside] for i in avoid}
    groups = [(g, frozenset(g.actions)) for g in env.fairness]
    keys: list[int | None] = [*range(explorer.n), None]

    def instance(label: Label) -> tuple[str, int | None]:
        action, binding = explorer.instances[label[0]]
        return action.name, next(iter(binding.values()), None)

    def requirement(component: list[int]) -> list[tuple[str, Any]] | None:
        """What a fair cycle through `component` must visit (a state where a group is
        disabled, or an edge that takes it), or None when no cycle in it is fair."""
        members = set(component)
        needs: list[tuple[str, Any]] = []
        for _, names in groups:
            for key in keys:
                disabled = [
                    i
                    for i in component
                    if not any(instance(lab)[0] in names and instance(lab)[1] == key for lab, _ in graph.edges[i])
                ]
                if disabled:
                    needs.append(("state", disabled[0]))
                    continue
                taken = [
                    (i, lab, j)
                    for i in component
                    for lab, j in graph.edges[i]
                    if j in members and instance(lab)[0] in names and instance(lab)[1] == key
                ]
                if not taken:
                    return None
                needs.append(("edge", taken[0]))
        return needs

    fair: dict[int, list[tuple[str, Any]]] = {}
    for component in _sccs(avoid, succ):
        node = component[0]
        stutters = not graph.edges[node] and len(component) == 1
        cyclic = len(component) > 1 or node in succ[node]
        if not (stutters or cyclic):
            continue
        needs = [] if stutters else requirement(component)
        if needs is not None:
            for i in component:
                fair[i] = needs
    if not fair:
        return None
    # States (avoiding Q) from which a fair component is reachable without meeting Q.
    back: dict[int, list[int]] = {i: [] for i in avoid}
    for i in avoid:
        for j in succ[i]:
            back[j].append(i)
    can_reach = set(fair)
    queue = deque(fair)
    while queue:
        j = queue.popleft()
        for i in back[j]:
            if i not in can_reach:
                can_reach.add(i)
                queue.append(i)
    triggers = [i for i in avoid if i in can_reach and flags[i][0]]
    if not triggers:
        return None
    trigger = min(triggers, key=lambda i: (graph.depth[i], i))
    labels = _stem(graph, trigger)
    to_cycle, entry = _path(graph, trigger, lambda i: i in fair, can_reach)
    labels += to_cycle
    loop_at = len(labels)
    members = {i for i in fair if fair[i] is fair[entry]}
    cycle: list[Label] = []
    here = entry
    for kind, what in fair[entry]:
        if kind == "state":
            hop, here = _path(graph, here, lambda i, w=what: i == w, members)
            cycle += hop
        else:
            source, label, target = what
            hop, here = _path(graph, here, lambda i, s=source: i == s, members)
            cycle += [*hop, label]
            here = target
    if here != entry or (not cycle and graph.edges[entry]):
        hop, here = _path(graph, here, lambda i: i == entry, members, nonempty=not cycle)
        cycle += hop
    if here != entry:
        raise EncodingMismatch("internal error: the liveness search's cycle does not close")
    return labels + cycle, loop_at


def _stem(graph: _Graph, node: int) -> list[Label]:
    labels: list[Label] = []
    while graph.parent[node] is not None:
        parent, label = graph.parent[node]  # type: ignore[misc]
        labels.append(label)
        node = parent
    return labels[::-1]


def _path(
    graph: _Graph, source: int, goal: Any, within: set[int] | Mapping[int, Any], nonempty: bool = False
) -> tuple[list[Label], int]:
    """A shortest path from `source` to a node satisfying `goal`, through `within`."""
    if goal(source) and not nonempty:
        return [], source
    parents: dict[int, tuple[int, Label] | None] = {source: None}
    queue = deque([source])
    while queue:
        i = queue.popleft()
        for label, j in graph.edges[i] if i < graph.expanded else ():
            if j not in within:
                continue
            if goal(j):
                path = [label]
                node = i
                while parents[node] is not None:
                    node, step = parents[node]  # type: ignore[misc]
                    path.append(step)
                return path[::-1], j
            if j not in parents:
                parents[j] = (i, label)
                queue.append(j)
    raise EncodingMismatch("internal error: the liveness search lost a path inside its own graph")


__all__ = ["CHECK_STATES", "MAX_STATES", "check_eventually", "check_liveness"]
