"""The state diagram of a spec, derived from the spec by running it, drawn as inline SVG.

Nodes are the members of the state enum (`spec.state_enum`); an edge A -> B is labelled with
every event that can move the state field from A to B. Edges are not written by hand: a
bounded breadth-first search drives the executable model (`Machine` over `ConcreteBackend`)
with every event and the argument values the spec gives reason to try in each state
(`model.arguments`, as the coverage search does) and the ticks of the spec's `[clock]`, one
shard, from the initial state, and
records each call that changes the state field. The search follows only calls within the
callers' contracts (`requires`); a call that breaks its contract is recorded as a *lax*
edge when it moves the state, and never explored further. It runs under each policy it is
given (the run's policy and the smallest declared values, so that thresholds are crossed
within the bound). An edge shown can happen; an edge missing was not found within the bound.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledgercheck.model.arguments import Calls
from ledgercheck.model.interpreter import advance_timers, clock_steps, initial_store
from ledgercheck.model.semantics import ConcreteBackend, Effects, Key, Machine
from ledgercheck.model.spec import Spec

DEFAULT_DEPTH = 8


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    events: tuple[str, ...]


@dataclass(frozen=True)
class StateDiagram:
    states: tuple[str, ...]
    initial: str | None
    edges: tuple[Edge, ...]  # within the callers' contracts
    lax_edges: tuple[Edge, ...]  # only by a call outside its contract
    depth: int
    explored: int  # distinct ledger states visited

    def same_picture(self, other: StateDiagram) -> bool:
        return (self.states, self.initial, self.edges, self.lax_edges) == (
            other.states,
            other.initial,
            other.edges,
            other.lax_edges,
        )


def minimal_policy(spec: Spec) -> dict[str, int]:
    return spec.smallest_policy()


def state_diagram(
    spec: Spec, policies: Sequence[Mapping[str, int]] | None = None, depth: int = DEFAULT_DEPTH
) -> StateDiagram:
    """Explore one shard under each policy (default: the shipped one and the smallest one)."""
    if policies is None:
        policies = [spec.resolve_policy({}), minimal_policy(spec)]
    unique: list[dict[str, int]] = []
    for policy in policies:
        if dict(policy) not in unique:
            unique.append(dict(policy))
    found: dict[tuple[str, str, str], bool] = {}  # (from, to, event) -> within a contract
    explored = 0
    for policy in unique:
        explored += _explore(spec, policy, depth, found)
    states = tuple(spec.enums[spec.state_enum].members)
    initial = next((f.initial for f in spec.fields if f.name == spec.state_field), None)

    def edges(within: bool) -> tuple[Edge, ...]:
        merged: dict[tuple[str, str], set[str]] = {}
        for (source, target, event), ok in found.items():
            if ok == within:
                merged.setdefault((source, target), set()).add(event)
        order = {s: i for i, s in enumerate(states)}
        return tuple(
            Edge(s, t, tuple(sorted(events)))
            for (s, t), events in sorted(merged.items(), key=lambda item: (order[item[0][0]], order[item[0][1]]))
        )

    return StateDiagram(
        states, str(initial) if initial is not None else None, edges(True), edges(False), depth, explored
    )


def _explore(spec: Spec, policy: Mapping[str, int], depth: int, found: dict[tuple[str, str, str], bool]) -> int:
    machine: Machine[Any] = Machine(spec, ConcreteBackend(), dict(policy), 1)
    store = initial_store(spec, 1, policy, ["shard-0"])
    keys: list[Key] = [(0, f.name) for f in spec.fields] + [(None, g.name) for g in spec.globals if not g.metric]
    state_key: Key = (0, spec.state_field)
    ticks = clock_steps(spec, policy)
    calls = Calls(spec, ticks)  # the arguments the spec gives reason to try, per state; the clock's ticks
    seen = {tuple(store[k] for k in keys)}
    frontier = [store]
    for _ in range(depth):
        following: list[dict[Key, Any]] = []
        for current in frontier:
            for event, name, arg_items in calls(current):
                if event is None:  # time passes: no arrow, but the states behind a timeout
                    after = dict(current)
                    advance_timers(spec, after, ticks[name])
                    key = tuple(after[k] for k in keys)
                    if key not in seen:
                        seen.add(key)
                        following.append(after)
                    continue
                args = dict(arg_items)
                after = dict(current)
                effects: Effects[Any] = Effects()
                machine.call_event(event, 0, args, after, machine.true, effects)
                record = effects.calls[-1]
                within = bool(record.contract_ok)
                before_state, after_state = current[state_key], after[state_key]
                if before_state != after_state:
                    edge = (str(before_state), str(after_state), event.name)
                    found[edge] = found.get(edge, False) or within
                if not within:
                    continue
                key = tuple(after[k] for k in keys)
                if key not in seen:
                    seen.add(key)
                    following.append(after)
        frontier = following
        if not frontier:
            break
    return len(seen)


# --- SVG -----------------------------------------------------------------------------------

NODE_FONT = 14.0
LABEL_FONT = 12.0
NODE_CHAR = 9.5  # average width of an upper-case character at NODE_FONT, in px
LABEL_CHAR = 6.9  # ... of a lower-case character at LABEL_FONT
LINE = 14.0
EXACT_ORDER_LIMIT = 8  # up to this many states, the circle order is chosen to minimise crossings


def _text(value: str) -> str:
    return html.escape(value).replace("://", "&#58;//")


def wildcard_events(diagram: StateDiagram) -> dict[str, tuple[str, ...]]:
    """Events that move *every* other state to one target (like `retire`): drawn once, as
    "from any state", instead of one arrow per source. Target -> events."""
    others = len(diagram.states) - 1
    if others < 3:
        return {}
    sources: dict[tuple[str, str], set[str]] = {}
    for edge in diagram.edges:
        for event in edge.events:
            sources.setdefault((event, edge.target), set()).add(edge.source)
    out: dict[str, list[str]] = {}
    for (event, target), froms in sources.items():
        if len(froms) == others:
            out.setdefault(target, []).append(event)
    return {target: tuple(sorted(events)) for target, events in out.items()}


def drawn_edges(diagram: StateDiagram) -> list[Edge]:
    """The arrows drawn: every edge, without the events shown as "from any state"."""
    wild = wildcard_events(diagram)
    out = []
    for edge in diagram.edges:
        events = tuple(e for e in edge.events if e not in wild.get(edge.target, ()))
        if events:
            out.append(Edge(edge.source, edge.target, events))
    return out


def circle_order(states: Sequence[str], edges: Sequence[Edge]) -> list[str]:
    """The order of the states around the circle: the fewest crossing chords (exhaustively
    for small diagrams; the first such order from the enum's own), else the enum's order."""
    states = list(states)
    if len(states) <= 3 or len(states) > EXACT_ORDER_LIMIT:
        return states
    pairs = sorted({tuple(sorted((e.source, e.target))) for e in edges if e.source != e.target})
    best, best_cost = states, None
    for rest in itertools.permutations(states[1:]):
        order = [states[0], *rest]
        if order[1] > order[-1]:  # each circle once, not also its mirror image
            continue
        index = {s: i for i, s in enumerate(order)}
        chords = [tuple(sorted((index[a], index[b]))) for a, b in pairs]
        cost = sum(1 for (a, b), (c, d) in itertools.combinations(chords, 2) if a < c < b < d or c < a < d < b)
        if best_cost is None or cost < best_cost:
            best, best_cost = order, cost
    return best


@dataclass
class _Box:
    x0: float
    y0: float
    x1: float
    y1: float

    def overlap(self, other: _Box) -> float:
        """The area this box shares with another."""
        w = min(self.x1, other.x1) - max(self.x0, other.x0)
        h = min(self.y1, other.y1) - max(self.y0, other.y0)
        return w * h if w > 0 and h > 0 else 0.0

    def crosses(self, a: tuple[float, float], b: tuple[float, float], pad: float = 0.0) -> bool:
        """Whether the segment a-b meets the box grown by `pad` (exact: Liang-Barsky clipping)."""
        x0, y0, x1, y1 = self.x0 - pad, self.y0 - pad, self.x1 + pad, self.y1 + pad
        dx, dy = b[0] - a[0], b[1] - a[1]
        low, high = 0.0, 1.0
        for p, q in ((-dx, a[0] - x0), (dx, x1 - a[0]), (-dy, a[1] - y0), (dy, y1 - a[1])):
            if p == 0:
                if q < 0:
                    return False
                continue
            t = q / p
            if p < 0:
                low = max(low, t)
            else:
                high = min(high, t)
            if low > high:
                return False
        return True


def _bezier(p0: tuple[float, float], q: tuple[float, float], p2: tuple[float, float], t: float) -> tuple[float, float]:
    u = 1 - t
    return (u * u * p0[0] + 2 * u * t * q[0] + t * t * p2[0], u * u * p0[1] + 2 * u * t * q[1] + t * t * p2[1])


def svg(diagram: StateDiagram, title: str, ident: str = "sd") -> str:
    """The diagram as inline SVG with no external reference: the states on a circle (in the
    order with the fewest crossings), one labelled arrow per (from, to) pair (both directions
    of a pair curve apart), events that reach a state from every other state as one "from
    any state" note, and an arrow from nowhere into the initial state. Each label takes the
    candidate position that overlaps the fewest states, labels and arrows."""
    edges = drawn_edges(diagram)
    wild = wildcard_events(diagram)
    states = circle_order(diagram.states, edges)
    count = max(len(states), 1)
    longest = max((len(s) for s in states), default=4)
    node_r = max(36.0, longest * NODE_CHAR / 2 + 10)
    ring = max(260.0, count * (node_r * 2 + 110) / (2 * math.pi))
    pos: dict[str, tuple[float, float]] = {}
    for index, state in enumerate(states):
        angle = -math.pi / 2 + 2 * math.pi * index / count
        pos[state] = (ring * math.cos(angle), ring * math.sin(angle))
    pairs = {(e.source, e.target) for e in edges}
    node_boxes = [_Box(x - node_r - 3, y - node_r - 3, x + node_r + 3, y + node_r + 3) for x, y in pos.values()]
    placed: list[_Box] = []
    body: list[str] = []
    labels: list[str] = []
    leaders: list[str] = []

    # geometry first: every arrow, as a quadratic curve and as segments labels should avoid
    curves: list[tuple[Edge, tuple[float, float], tuple[float, float], tuple[float, float]]] = []
    for edge in edges:
        (x0, y0), (x2, y2) = pos[edge.source], pos[edge.target]
        dx, dy = x2 - x0, y2 - y0
        chord = math.hypot(dx, dy) or 1.0
        nx, ny = dy / chord, -dx / chord  # the left of the direction of travel
        bend = 0.14 * chord if (edge.target, edge.source) in pairs else 0.0
        q = ((x0 + x2) / 2 + nx * bend, (y0 + y2) / 2 + ny * bend)
        start = _towards(x0, y0, q[0], q[1], node_r)
        end = _towards(x2, y2, q[0], q[1], node_r + 2)
        curves.append((edge, start, q, end))
    pieces = 32
    segments = [
        (number, _bezier(a, q, b, k / pieces), _bezier(a, q, b, (k + 1) / pieces))
        for number, (_, a, q, b) in enumerate(curves)
        for k in range(pieces)
    ]
    for number, target in enumerate(wild, len(curves)):  # the "from any state" arrows, straight
        x, y = pos[target]
        norm = math.hypot(x, y) or 1.0
        ux, uy = x / norm, y / norm
        segments.append((number, (x + ux * (node_r + 46), y + uy * (node_r + 46)), (x + ux * node_r, y + uy * node_r)))
    owner = [-1]  # the arrow the label being placed belongs to (-1: none)
    # Each segment with its bounding box: a label box clear of the bounding box cannot meet the
    # segment, so most segments are ruled out by four comparisons instead of clipped. The slack
    # leaves every near case to the exact clipping, so the layout is the one clipping alone gives.
    slack = 1e-6
    bounded = [
        (k, a, b, min(a[0], b[0]) - slack, min(a[1], b[1]) - slack, max(a[0], b[0]) + slack, max(a[1], b[1]) + slack)
        for k, a, b in segments
    ]

    def meets(box: _Box, pad: float, mine: bool) -> int:
        """How many segments of the label's own arrow (mine) or of the others meet the box."""
        x0, y0, x1, y1 = box.x0 - pad, box.y0 - pad, box.x1 + pad, box.y1 + pad
        count = 0
        for k, a, b, lx, ly, hx, hy in bounded:
            if (k == owner[0]) != mine or hx < x0 or lx > x1 or hy < y0 or ly > y1:
                continue
            count += box.crosses(a, b, pad)
        return count

    def place(candidates: Sequence[tuple[float, float, float, float, float]], lines: Sequence[str]) -> _Box:
        """The best box centred at one of the candidates (x, y, penalty for going there, and the
        point it labels); a box that ends up away from its point gets a leader line to it."""
        width = max(len(line) for line in lines) * LABEL_CHAR + 6
        height = len(lines) * LINE + 2
        best: tuple[float, _Box, tuple[float, float]] | None = None
        for x, y, penalty, ax, ay in candidates:
            box = _Box(x - width / 2, y - height / 2, x + width / 2, y + height / 2)
            cost = penalty
            cost += 40 * sum(box.overlap(n) for n in node_boxes) / 100
            # another label or another arrow under a label makes it unreadable: a hard cost
            cost += 10_000 * sum(1 for other in placed if box.overlap(other) > 0)
            cost += 10_000 * meets(box, 2.0, mine=False)
            cost += 6 * meets(box, 0.0, mine=True)
            if best is None or cost < best[0]:
                best = (cost, box, (ax, ay))
        assert best is not None
        _, box, (ax, ay) = best
        nx, ny = min(max(ax, box.x0), box.x1), min(max(ay, box.y0), box.y1)
        if math.hypot(nx - ax, ny - ay) > 14:
            leaders.append(
                f'<path class="leader" d="M {ax:.1f} {ay:.1f} L {nx:.1f} {ny:.1f}" stroke="#74c0fc" '
                f'stroke-width="1" stroke-dasharray="2 2"/>'
            )
        return box

    def around(
        a: tuple[float, float], q: tuple[float, float], b: tuple[float, float], lines: Sequence[str]
    ) -> list[tuple[float, float, float, float, float]]:
        width = max(len(line) for line in lines) * LABEL_CHAR + 6
        height = len(lines) * LINE + 2
        out = []
        for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8):
            x, y = _bezier(a, q, b, t)
            tx = 2 * (1 - t) * (q[0] - a[0]) + 2 * t * (b[0] - q[0])
            ty = 2 * (1 - t) * (q[1] - a[1]) + 2 * t * (b[1] - q[1])
            norm = math.hypot(tx, ty) or 1.0
            nx, ny = ty / norm, -tx / norm
            for side in (1.0, -1.0):
                for step in (0.0, 10.0, 24.0, 40.0, 60.0, 90.0, 130.0, 180.0):
                    push = abs(nx) * width / 2 + abs(ny) * height / 2 + 4 + step
                    penalty = step * 0.6 + abs(t - 0.5) * 40 + (8 if side < 0 else 0)
                    out.append((x + side * nx * push, y + side * ny * push, penalty, x, y))
        return out

    def label(box: _Box, lines: Sequence[str], cls: str) -> str:
        cx = (box.x0 + box.x1) / 2
        top = box.y0 + 1 + LINE * 0.78
        spans = "".join(
            f'<tspan x="{cx:.1f}" y="{top + i * LINE:.1f}">{_text(line)}</tspan>' for i, line in enumerate(lines)
        )
        return (
            f'<text class="{cls}" text-anchor="middle" font-size="{LABEL_FONT:.0f}" fill="#1864ab" '
            f'stroke="#fff" stroke-width="4" paint-order="stroke" stroke-linejoin="round">{spans}</text>'
        )

    if diagram.initial in pos:
        x, y = pos[diagram.initial]
        diag = node_r / math.sqrt(2)
        body.append(
            f'<path class="initial" d="M {x - diag - 44:.1f} {y - diag - 22:.1f} L {x - diag - 2:.1f} '
            f'{y - diag - 2:.1f}" stroke="#495057" stroke-width="1.5" marker-end="url(#{ident}-arrow)"/>'
        )
        placed.append(_Box(x - diag - 50, y - diag - 28, x - diag, y - diag))
    for number, (edge, a, q, b) in enumerate(curves):
        owner[0] = number
        name = f"{edge.source} to {edge.target}: {', '.join(edge.events)}"
        body.append(
            f'<path class="edge" d="M {a[0]:.1f} {a[1]:.1f} Q {q[0]:.1f} {q[1]:.1f} {b[0]:.1f} {b[1]:.1f}" '
            f'fill="none" stroke="#495057" stroke-width="1.5" marker-end="url(#{ident}-arrow)">'
            f"<title>{_text(name)}</title></path>"
        )
        box = place(around(a, q, b, edge.events), edge.events)
        placed.append(box)
        labels.append(label(box, edge.events, "edge-label"))
    for number, (target, events) in enumerate(wild.items(), len(curves)):
        owner[0] = number
        x, y = pos[target]
        norm = math.hypot(x, y) or 1.0
        ux, uy = x / norm, y / norm  # outwards, away from the circle's centre
        sx, sy = x + ux * (node_r + 46), y + uy * (node_r + 46)
        ex, ey = x + ux * (node_r + 2), y + uy * (node_r + 2)
        body.append(
            f'<path class="edge any-state" d="M {sx:.1f} {sy:.1f} L {ex:.1f} {ey:.1f}" stroke="#495057" '
            f'stroke-width="1.5" stroke-dasharray="4 3" marker-end="url(#{ident}-arrow)"><title>'
            f"{_text(f'any state to {target}: ' + ', '.join(events))}</title></path>"
        )
        lines = ["from any state:", *events]
        height = len(lines) * LINE + 2
        box = place(
            [(sx + ux * (height / 2 + 4 + k), sy + uy * (height / 2 + 4 + k), k, sx, sy) for k in (0, 12, 24)], lines
        )
        placed.append(box)
        labels.append(label(box, lines, "edge-label any-state"))
    reached = {e.source for e in diagram.edges} | {e.target for e in diagram.edges} | {diagram.initial}
    for state in states:
        x, y = pos[state]
        initial = state == diagram.initial
        body.append(
            f'<g class="node{" initial-state" if initial else ""}"><circle cx="{x:.1f}" cy="{y:.1f}" '
            f'r="{node_r:.1f}" fill="{"#e7f5ff" if state in reached else "#f1f3f5"}" stroke="#1864ab" '
            f'stroke-width="{"3" if initial else "1.6"}"/><text x="{x:.1f}" y="{y + NODE_FONT * 0.35:.1f}" '
            f'text-anchor="middle" font-size="{NODE_FONT:.0f}" font-weight="600" fill="#212529">'
            f"{_text(state)}</text></g>"
        )
    boxes = placed + node_boxes
    margin = 12.0
    left = min(b.x0 for b in boxes) - margin
    top = min(b.y0 for b in boxes) - margin
    width = max(b.x1 for b in boxes) + margin - left
    height = max(b.y1 for b in boxes) + margin - top
    head = [
        f'<svg class="state-diagram" viewBox="{left:.0f} {top:.0f} {width:.0f} {height:.0f}" width="{width:.0f}" '
        f'height="{height:.0f}" role="img" aria-labelledby="{ident}-title" font-family="system-ui, sans-serif">',
        f'<title id="{ident}-title">{_text(title)}</title>',
        "<defs>"
        f'<marker id="{ident}-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#495057"/></marker>'
        "</defs>",
    ]
    return "\n".join([*head, *body, *leaders, *labels, "</svg>"])


def _towards(x: float, y: float, tx: float, ty: float, distance: float) -> tuple[float, float]:
    dx, dy = tx - x, ty - y
    length = math.hypot(dx, dy) or 1.0
    return x + dx / length * distance, y + dy / length * distance
