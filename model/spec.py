"""The parsed spec: declarations, events, environments, properties and variants.

`load_spec` reads a TOML spec file, validates every declaration against the others and
compiles every expression and block into `model.ir`. A spec file describes one base
ledger plus *variants*, each an overlay of small statement patches; `SpecFile.variant`
returns the fully compiled `Spec` of one variant. Every mistake is a `SpecError` naming
the file, the line and what is wrong.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import os
import string
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from ledgercheck.model import compose, ir, lang
from ledgercheck.model.binding import Binding, parse_binding
from ledgercheck.model.errors import Location, SpecError, UsageError, did_you_mean
from ledgercheck.model.ir import BOOL, INT, STR, Type
from ledgercheck.model.lang import Param, Scope, Signature
from ledgercheck.model.source import KeyPath, SpecSource, parse_source


def bundled_spec_folder() -> Path:
    """Where the bundled specs are: `ledgercheck/spec/`, package data installed beside the
    model package (the package-dir mapping puts spec/ of a checkout in the same place). The
    lookup is anchored on this module's own file, in `ledgercheck.model`: a data-only
    namespace package does not resolve through importlib.resources under setuptools'
    editable install, and importing importlib.resources (which brings tempfile and shutil)
    cost every command's start about 8 ms under `python -X importtime`."""
    return Path(__file__).parent.parent / "spec"


DEFAULT_SPEC = bundled_spec_folder() / "fleet_health.toml"
VERDICTS = ("holds", "violated")
# The one variant of a spec that declares no [variants]: the spec as written, no patch applied.
BASE_VARIANT = "base"
# The key of a property's `expect` that gives the verdict of every variant it does not name.
DEFAULT_EXPECTATION = "default"


class PropertyKind(StrEnum):
    """What a property constrains (its `kind`). A `StrEnum`, as `model.result.Status` is: it
    compares equal to, prints as and serialises to its value."""

    INVARIANT = "invariant"
    """Every reachable state (of the focus shard, or of the fleet)."""
    STEP = "step"
    """Every call of the events named in `on`: the states before and after it."""
    EVENTUALLY = "eventually"
    """Liveness: whenever `when` holds, `assert` holds then or later (fair lassos refute it)."""


PROPERTY_KINDS = tuple(kind.value for kind in PropertyKind)
# What a [variants.X] table may hold: statement patches, the variant it starts from, table
# overrides and removals (model.compose), and the variant whose expectations it shares.
VARIANT_KEYS = ("doc", "patch", "from", "override", "remove", "expect_like")
PATCH_KEYS = (
    "event",
    "action",
    "block",
    "after",
    "before",
    "replace",
    "insert",
    "remove",
    "ignore_when",
    "requires",
    "when",
    "doc",
)
MAX_SHARDS = 64


def policy_text(policy: Mapping[str, int]) -> str:
    """A policy as every output writes it: `unhealthy_threshold=2, healthy_threshold=1`."""
    return ", ".join(f"{name}={value}" for name, value in policy.items())


def plural(count: int, word: str) -> str:
    """A count as every output writes it: `1 shard`, `2 shards`."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


INDEX_PLACEHOLDER = "index"
"""In a notification's `text`: the instance that announces it (a parameter of that name wins)."""


@dataclass(frozen=True)
class ConformDefaults:
    """`[conform]`: the spec owner's defaults for `conform` (and `ci`, which takes no option
    for them); each None where the table leaves it to conform's own default, and every one
    overridden by the command-line option of the same name."""

    depth: int | None = None
    random: int | None = None
    shards: int | None = None
    merge: str | None = None
    run_calls: int | None = None


MAX_SPEC_DEPTH = 64
"""The deepest `[spec] max_depth` (a bound on how long a run can be asked to search by default)."""


@dataclass(frozen=True)
class EnumDecl:
    name: str
    members: tuple[str, ...]
    api_values: Mapping[str, str]


@dataclass(frozen=True)
class VarDecl:
    """A state variable: a ledger field, a history field, a fleet value or an env variable."""

    name: str
    type: Type
    initial: object
    kind: str  # "ledger" | "history" | "global" | "env"
    initial_from: str | None = None
    doc: str = ""
    metric: bool = False
    # A timer (`type = "timer"`): an int that every clock tick advances (time since it was set).
    timer: bool = False
    persistent: bool = False
    """Carried across process incarnations on purpose (a ledger field): trace figures do
    not flag its held-over values with `!`."""
    initial_policy: str | None = None
    """An int that starts at a policy constant (`initial = "capacity"`): its initial value is
    that constant's at the policy checked (a term where the policy is symbolic), and `initial`
    is None, so that no engine can take one policy's value for every policy's."""

    def initial_at(self, policy: Mapping[str, Any]) -> Any:
        """The initial value at `policy` (constant name -> value, or -> term)."""
        return policy[self.initial_policy] if self.initial_policy is not None else self.initial


@dataclass(frozen=True)
class PolicyDecl:
    name: str
    default: int
    min: int
    max: int
    duration: bool = False  # `type = "duration"`: a length of time, in the clock's units


@dataclass(frozen=True)
class Raise:
    """`raises = [{ when = "...", error = "Name" }]`: the call raises `error` when `when`
    holds as it begins, and then changes nothing. `{ after = "...", error = "Name" }`
    (`after` True): the call runs, and raises when the condition holds of the record after it
    (`old.x`: before it), its changes kept (a breaker that trips and refuses the call)."""

    when: ir.Expr
    error: str
    text: str
    line: int
    after: bool = False


@dataclass(frozen=True)
class Query:
    """`[queries.name]`: a read-only call. Either the shards a condition holds of (`when`:
    `serving_shards()` returns their indices, and `name` is a predicate other expressions may
    use), or, with `raises` and/or `returns` and no `when`, a call over the whole fleet
    (`raise_if_exhausted()`: raises when too few shards serve). Neither kind changes the
    state, so no search reads them; conformance compares them after every call."""

    name: str
    expr: ir.Expr | None  # None: a fleet query
    api: str | None
    text: str
    raises: tuple[Raise, ...] = ()
    returns: ir.Expr | None = None
    returns_text: str = ""
    line: int = 0
    """The line of its `api` (of its table, without one): where a class that lacks it is told to look."""

    @property
    def fleet(self) -> bool:
        return self.expr is None


@dataclass(frozen=True)
class Event:
    """One API call. `ignore_when` already includes the `raises` conditions (a call that
    raises changes nothing, as an ignored one), so every engine skips the body alike."""

    name: str
    signature: Signature
    ignore_when: ir.Expr | None
    requires: ir.Expr | None
    body: tuple[ir.Stmt, ...]
    history: tuple[ir.Stmt, ...]
    examples: Mapping[str, str]
    body_text: str
    line: int
    raises: tuple[Raise, ...] = ()
    returns: ir.Expr | None = None  # evaluated on the record after the call
    returns_text: str = ""
    requires_text: str = ""
    """The callers' contract as written (patches applied), for what says which call broke it."""


@dataclass(frozen=True)
class Notification:
    """`[notifications.name]`: something a call announces besides its result and its state
    (a listener callback, a log line), with typed arguments. Event bodies, history blocks
    and on_state_change announce it with `emit.name(args)`; a step property reads whether a
    call did with `emitted(name)`; `log_format` (the table's `text`) renders it as a log
    line, `{param}` standing for an argument."""

    name: str
    params: tuple[Param, ...]
    doc: str
    log_format: str | None
    line: int

    def render(self, args: Mapping[str, object], index: int | None = None) -> str | None:
        """The log line announcing it with `args` on instance `index` (`{index}` in the text,
        where no parameter has that name), or None without a `text`."""
        if self.log_format is None:
            return None
        return self.log_format.format(**{INDEX_PLACEHOLDER: index, **args})  # an enum member: its name


@dataclass(frozen=True)
class Clock:
    """`[clock]`: time in whole units. Every environment gets one action per step, which
    advances every timer by that many units; `drive` says how a test drives an
    implementation's own clock: a constructor parameter taking a callable that returns the
    time (`param`), or a function to patch (`patch`, e.g. "time.monotonic")."""

    unit: str
    steps: tuple[tuple[str, str], ...]  # (action name, step: an int literal or a policy name)
    drive_param: str | None
    drive_patch: str | None
    doc: str = ""
    drive_where: Location | None = field(default=None, compare=False)
    """Where the spec says how the clock is driven (`drive`, else `[clock]`): what a
    constructor parameter the class does not take names."""


@dataclass(frozen=True)
class Action:
    """One atomic step of an environment: shard parameters, value parameters, a guard and
    a body that calls ledger events. In the `ledger` environment each event is an action."""

    name: str
    doc: str
    shard_params: tuple[str, ...]
    value_params: tuple[Param, ...]
    when: ir.Expr
    body: tuple[ir.Stmt, ...]
    line: int


@dataclass(frozen=True)
class Fairness:
    """Weak fairness of a group of environment actions, per shard: a run in which some action
    of the group is enabled on shard i from some point on, forever, takes one of them on
    shard i again and again. What a liveness property (`kind = "eventually"`) may assume;
    safety properties ignore it."""

    actions: tuple[str, ...]
    doc: str

    def text(self) -> str:
        return f"weak fairness of {' | '.join(self.actions)} per shard" + (f" ({self.doc})" if self.doc else "")


@dataclass(frozen=True)
class Environment:
    name: str
    doc: str
    vars: tuple[VarDecl, ...]
    actions: tuple[Action, ...]
    any_call: bool
    fairness: tuple[Fairness, ...] = ()

    def action(self, name: str) -> Action:
        for action in self.actions:
            if action.name == name:
                return action
        raise UsageError(
            f"environment {self.name!r} has no action {name!r}{did_you_mean(name, [a.name for a in self.actions])}"
        )

    def fairness_text(self) -> str:
        """The fairness assumptions, as printed with every liveness verdict."""
        if not self.fairness:
            return f"no fairness assumed (environment {self.name} declares none)"
        return "assuming " + "; ".join(f.text() for f in self.fairness)


@dataclass(frozen=True)
class Property:
    name: str
    claim: int | None
    doc: str
    kind: PropertyKind
    on: tuple[str, ...]
    when: ir.Expr | None
    check: ir.Expr
    message: str
    expect: Mapping[str, str]  # every variant -> "holds" | "violated", its `default` resolved
    environments: tuple[str, ...] | None
    fleet: bool
    line: int
    when_text: str
    assert_text: str
    view: tuple[str, ...] | None = None
    lemmas: tuple[ir.Expr, ...] = ()
    lemma_texts: tuple[str, ...] = ()
    claim_text: str = ""
    counts_any_call: bool = False
    """`calls = "any"`: the verdict counts every call, also those the callers' contracts
    (`requires`) rule out; for a property about what a call outside them must not do
    ("a retired shard stays retired, whatever is called on it"), whose every trace would
    otherwise be a lax one that fails nothing."""

    def applies_to(self, environment: str) -> bool:
        return self.environments is None or environment in self.environments

    @property
    def leads_from(self) -> ir.Expr:
        """P of an `eventually` property (P leads to `assert`): its `when`, true without one."""
        return self.when if self.when is not None else ir.TRUE


CONTRACTS_PROPERTY = "callers_keep_the_contracts"
"""The property `Spec.contract_property` derives: the callers the spec models keep the
events' contracts. Its name is what `ci` prints and `check --property` asks for."""


def contracts_bind(env: Environment, props: Property | Sequence[Property]) -> bool:
    """Whether the callers' contracts bind the calls a verdict on `props` counts: in an
    environment that may call anything (elsewhere the environment's actions are the callers),
    unless the properties are judged over any call (`calls = "any"`). Properties searched
    together are judged alike (`model.explicit` searches them apart otherwise)."""
    group = [props] if isinstance(props, Property) else list(props)
    return env.any_call and not any(p.counts_any_call for p in group)


@dataclass(frozen=True)
class Scenario:
    """A named trace written in the spec: environment actions as calls, e.g. `report_failure(1)`."""

    name: str
    doc: str
    environment: str
    focus: int | None
    shards: int | None
    steps: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Spec:
    """One variant of a spec, compiled: the single source of truth for both back ends."""

    path: str
    sha256: str
    name: str
    title: str
    variant: str
    variant_doc: str
    variants: tuple[str, ...]
    api_module: str
    api_class: str
    api_policy_class: str
    api_enum: str
    state_field: str
    state_enum: str
    default_shards: int
    log: str
    enums: Mapping[str, EnumDecl]
    sets: Mapping[str, tuple[str, tuple[str, ...]]]
    policy: Mapping[str, PolicyDecl]
    fields: tuple[VarDecl, ...]
    globals: tuple[VarDecl, ...]
    history: tuple[VarDecl, ...]
    queries: Mapping[str, Query]
    on_state_change: tuple[ir.Stmt, ...]
    events: Mapping[str, Event]
    environments: Mapping[str, Environment]
    properties: Mapping[str, Property]
    scenarios: Mapping[str, Scenario] = field(default_factory=dict)
    binding: Binding | None = None
    """How a real class implements the spec (`[implementation]`; see `model.binding`)."""
    # `[spec] default_environment`: where a command runs when it is given no --environment.
    declared_default_environment: str | None = None
    clock: Clock | None = None
    notifications: Mapping[str, Notification] = field(default_factory=dict)
    """`[notifications]`: what calls announce (see `Notification`); empty when none are declared."""
    conform: ConformDefaults | None = None
    """`[conform]`: how `conform` (and so `ci`) searches this spec's implementations by default."""
    declared_reference: str | None = None
    """`[spec] reference_variant`: the variant the spec's implementation is meant to be (see
    `reference_variant`)."""
    accepted_weakenings: Mapping[str, str] = field(default_factory=dict)
    """`[weakened]`: the changes that check less which the spec accepts, each with its reason
    (`ci --base`, `model.weakening`); the same for every variant."""
    max_depth: int | None = None
    """`[spec] max_depth`: the depth every search of this spec goes to unless `--max-depth` says
    otherwise (a counterexample 14 steps deep is found by `ci` too, which takes no option)."""

    def search_depth(self, given: int | None, fallback: int) -> int:
        """The depth a command searches to: the one given (`--max-depth`), else the spec's own
        (`[spec] max_depth`), else the command's default (`fallback`)."""
        if given is not None:
            return given
        return self.max_depth if self.max_depth is not None else fallback

    @property
    def has_contracts(self) -> bool:
        """Whether the callers' contracts rule any call out (an event with a `requires`)."""
        return any(event.requires is not None for event in self.events.values())

    @property
    def timers(self) -> tuple[VarDecl, ...]:
        return tuple(v for v in (*self.shard_vars, *self.globals) if v.timer)

    @property
    def default_environment(self) -> str:
        """The environment a command uses when none is given: the one the spec declares, else
        `ledger` (the any-call environment of the bundled spec), else the spec's first."""
        if self.declared_default_environment:
            return self.declared_default_environment
        return "ledger" if "ledger" in self.environments else next(iter(self.environments))

    @property
    def observed_fields(self) -> tuple[str, ...]:
        """Ledger fields that something in the spec reads: the ones a trace's view shows.
        A field that is only written (a version number, a metric) makes no trace distinct."""
        parts: list[object] = [[q.expr, [r.when for r in q.raises], q.returns] for q in self.queries.values()]
        for event in self.events.values():
            parts += [event.ignore_when, event.requires, event.body, event.history, event.returns]
        for env in self.environments.values():
            parts += [[a.when for a in env.actions], [a.body for a in env.actions]]
        parts += [[p.when, p.check] for p in self.properties.values()]
        reads = ir.field_reads(parts)
        return tuple(f.name for f in self.fields if f.name in reads)

    @property
    def shard_vars(self) -> tuple[VarDecl, ...]:
        """Per-shard state: the ledger's fields, then the history fields."""
        return self.fields + self.history

    def environment(self, name: str) -> Environment:
        if name not in self.environments:
            raise UsageError(
                f"unknown environment {name!r}{did_you_mean(name, self.environments)}; "
                f"the spec has {', '.join(self.environments)}"
            )
        return self.environments[name]

    def property(self, name: str) -> Property:
        """A property of the spec's, or the one `contract_property` derives from it (which no
        loop over `properties` meets: `check --property callers_keep_the_contracts` asks it)."""
        if name == CONTRACTS_PROPERTY and name not in self.properties:
            derived = self.contract_property()
            if derived is None:
                raise UsageError(f"{name}: no environment's actions call an event with a requires (nothing to keep)")
            return derived
        if name not in self.properties:
            raise UsageError(f"unknown property {name!r}{did_you_mean(name, self.properties)}")
        return self.properties[name]

    def contract_property(self) -> Property | None:
        """Whether the callers the spec models keep the contracts the ledger relies on: a step
        property derived from the spec, `callers_keep_the_contracts`; None where no
        environment's actions call an event with a `requires`.

        An event's `requires` is what its callers promise (the ledger does not check it), and
        where an environment may call anything a verdict counts only the calls the contracts
        allow. So those verdicts are about the real system only if its real callers keep them,
        and the spec models those callers too: an environment whose actions are a controller's
        flows. A flow edited to call an event outside its contract (a refit reported for a
        DEAD shard, which the ledger returns to HEALTHY) breaks no property checked where any
        call may be made, since that environment never makes the call. This property is
        checked at every call of an event with a `requires`, in every environment whose actions
        call one: the call is within the contract (read on the called shard before the call,
        with its arguments, as where the ledger is called directly). No loop over `properties`
        meets it: `ci` checks it in a step of its own, `check --property` asks it by name."""
        events = tuple(name for name, event in self.events.items() if event.requires is not None)
        environments = tuple(
            name
            for name, env in self.environments.items()
            if not env.any_call and ir.called_events([a.body for a in env.actions]) & set(events)
        )
        if not environments:
            return None
        return Property(
            name=CONTRACTS_PROPERTY,
            claim=None,
            doc=(
                "Every call an action makes keeps the called event's callers' contract (its requires): "
                "the verdicts where any call may be made count only such calls."
            ),
            kind=PropertyKind.STEP,
            on=events,
            when=None,
            check=ir.LocalRef(ir.CONTRACT_KEPT, BOOL),
            message="an action called an event outside its callers' contract (requires)",
            expect={self.variant: "holds"},
            environments=environments,
            fleet=False,
            line=0,
            when_text="",
            assert_text="; ".join(f"{name}: {self.events[name].requires_text}" for name in events),
        )

    def default_policy(self) -> dict[str, int]:
        return {name: decl.default for name, decl in self.policy.items()}

    def largest_policy(self) -> dict[str, int]:
        """Every policy constant at its declared max."""
        return {name: decl.max for name, decl in self.policy.items()}

    def smallest_policy(self) -> dict[str, int]:
        """Every policy constant at its declared min."""
        return {name: decl.min for name, decl in self.policy.items()}

    def resolve_policy(self, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
        """Shipped defaults with overrides applied, each checked against its declared range."""
        policy = self.default_policy()
        for name, value in (overrides or {}).items():
            if name not in self.policy:
                raise UsageError(f"unknown policy constant {name!r}{did_you_mean(name, self.policy)}")
            decl = self.policy[name]
            if not isinstance(value, int) or isinstance(value, bool) or not decl.min <= value <= decl.max:
                raise UsageError(f"policy {name}={value!r} is out of range [{decl.min}, {decl.max}]")
            policy[name] = value
        return policy


# --- the file, before a variant is chosen ------------------------------------------------


@dataclass(frozen=True)
class SpecFile:
    """A loaded spec file: its source and the compiled spec of every variant."""

    path: str
    source: SpecSource
    compiled: Mapping[str, Spec] = field(default_factory=dict)

    @property
    def binding(self) -> Binding | None:
        """How a real class implements the spec (`[implementation]`; the same for every variant)."""
        return next(iter(self.compiled.values())).binding

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(self.compiled)

    def variant(self, name: str | None = None) -> Spec:
        if name is None:
            return next(iter(self.compiled.values()))
        if name not in self.compiled:
            raise UsageError(
                f"unknown variant {name!r}{did_you_mean(name, self.compiled)}; "
                f"the spec {Path(self.path).name} has {', '.join(self.compiled)}"
            )
        return self.compiled[name]


def reference_variant(spec_file: SpecFile) -> str:
    """The variant the implementation is meant to be: the one `[spec] reference_variant`
    names, else the first variant every property holds in, the properties no variant holds
    aside (a known limitation every variant shares tells none of them apart: a trial that
    documented one saw `gen` and `conform` move to the first variant, the one with the bug),
    else the first variant. What `gen` takes the generated tests' expectations from, what
    `mutate` mutates and what `conform` compares with."""
    declared = spec_file.variant().declared_reference
    if declared is not None:
        return declared
    shared = known_limitations(spec_file)
    holding = (name for name in spec_file.variants if _holds_everything(spec_file, name, shared))
    return next(holding, spec_file.variants[0])


def known_limitations(spec_file: SpecFile) -> tuple[str, ...]:
    """The properties no variant is expected to hold, in spec order."""
    names: dict[str, bool] = {}
    for variant in spec_file.variants:
        for name, prop in spec_file.variant(variant).properties.items():
            names[name] = names.get(name, False) or prop.expect.get(variant) == "holds"
    return tuple(name for name, held in names.items() if not held)


def _holds_everything(spec_file: SpecFile, name: str, aside: tuple[str, ...] = ()) -> bool:
    properties = spec_file.variant(name).properties
    return all(p.expect.get(name) == "holds" for key, p in properties.items() if key not in aside)


def reference_reason(spec_file: SpecFile) -> str:
    """Why `reference_variant` is the variant it is, in words for a report's header."""
    if spec_file.variant().declared_reference is not None:
        return "the spec's reference_variant"
    reference = reference_variant(spec_file)
    if _holds_everything(spec_file, reference):
        return "the first variant every property holds in"
    shared = known_limitations(spec_file)
    if _holds_everything(spec_file, reference, shared):
        return f"the first variant every property holds in but {', '.join(shared)}, which no variant holds"
    return "the first variant: none holds every property; [spec] reference_variant names the one meant"


def default_spec() -> Path:
    """The spec a command reads when none is named: `$LEDGERCHECK_SPEC` if set, else the
    bundled ledger spec."""
    override = os.environ.get("LEDGERCHECK_SPEC")
    return Path(override) if override else DEFAULT_SPEC


def load_spec(path: str | Path | None = None) -> SpecFile:
    """Load, validate and compile a spec file (the `default_spec()` if None) and all of its
    variants; a spec compiled before is read from the cache (`model.speccache`)."""
    from ledgercheck.model import speccache

    path = path or default_spec()
    return speccache.cached(str(path), speccache.read_bytes(path), SpecFile, lambda: _load(compose.read_composed(path)))


def load_spec_text(text: str, name: str = "<spec>") -> SpecFile:
    """Like load_spec, for spec text already in memory (tests, generated specs)."""
    return _load(compose.compose(parse_source(name, text)))


def _load(source: SpecSource) -> SpecFile:
    compiled: dict[str, Spec] = {}
    for name in _variant_names(source):
        compiled[name] = _Builder(compose.variant_source(source, name), name).build()
    first = next(iter(compiled.values()))
    binding = parse_binding(source, first)
    if binding is not None:
        compiled = {name: dataclasses.replace(spec, binding=binding) for name, spec in compiled.items()}
    return SpecFile(source.path, source, compiled)


def _variant_names(source: SpecSource) -> tuple[str, ...]:
    """The variants a spec file declares, in file order; `base` when it declares none.

    `default` cannot name a variant: in a property's `expect` it means "every variant not
    named here", and a variant of that name would make `expect = { default = ... }` say two
    things at once."""
    table = _table(source, source.data, ("variants",), required=False)
    if DEFAULT_EXPECTATION in table:
        raise SpecError(
            source.lines.first_within(("variants", DEFAULT_EXPECTATION)),
            f"{DEFAULT_EXPECTATION!r} cannot name a variant: in a property's expect, "
            f'{DEFAULT_EXPECTATION} = "holds" | "violated" is the verdict of every variant it does not name',
        )
    return tuple(table) or (BASE_VARIANT,)


# --- building one variant ----------------------------------------------------------------


def _table(source: SpecSource, data: Any, keys: KeyPath, required: bool = True) -> dict[str, Any]:
    node: Any = data
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            if required:
                raise source.error(keys, f"missing table [{'.'.join(map(str, keys))}]")
            return {}
        node = node[key]
    if not isinstance(node, dict):
        raise source.error(keys, f"[{'.'.join(map(str, keys))}] must be a table")
    return node


HOOK = "on_state_change"
"""The spec table of what every change of a shard's state runs; also the name its branches and
mutants go by where an event's name would stand (`codegen.coverage`, `model.mutate`)."""

_KNOWN_TOP = (
    "spec",
    "enums",
    "sets",
    "policy",
    "fields",
    "globals",
    "queries",
    "on_state_change",
    "history",
    "events",
    "environments",
    "properties",
    "variants",
    "scenarios",
    "clock",
    "implementation",
    "notifications",
    "conform",
    "weakened",
)


class _Builder:
    """Compiles one variant of a spec source into a `Spec`."""

    def __init__(self, source: SpecSource, variant: str) -> None:
        self.source = source
        self.variant = variant
        self.data = source.data
        self.patches = self._patches()

    # -- helpers --

    def fail(self, keys: KeyPath, message: str) -> SpecError:
        return self.source.error(keys, message)

    def _check_keys(self, table: Mapping[str, Any], keys: KeyPath, allowed: tuple[str, ...]) -> None:
        for key in table:
            if key not in allowed:
                raise self.fail(
                    (*keys, key),
                    f"unknown key {key!r} in [{'.'.join(map(str, keys)) or 'top level'}]{did_you_mean(key, allowed)}",
                )

    def _str(self, table: Mapping[str, Any], key: str, keys: KeyPath, default: str | None = None) -> str:
        if key not in table:
            if default is None:
                raise self.fail(keys, f"missing {key!r}")
            return default
        value = table[key]
        if not isinstance(value, str):
            raise self.fail((*keys, key), f"{key!r} must be a string, not {type(value).__name__}")
        return value

    def _int(self, table: Mapping[str, Any], key: str, keys: KeyPath, default: int | None = None) -> int:
        if key not in table:
            if default is None:
                raise self.fail(keys, f"missing {key!r}")
            return default
        value = table[key]
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail((*keys, key), f"{key!r} must be an integer, not {type(value).__name__}")
        if abs(value) > lang.MAX_INT:
            raise self.fail((*keys, key), f"{key!r} is out of range")
        return value

    def where(self, keys: KeyPath) -> lang.Where:
        """Map positions inside a string value (1-based line, 0-based col) to the file."""
        loc = self.source.lines.value_where(keys)
        raw_lines = self.source.raw_lines_of(loc.path)
        start = raw_lines[loc.line - 1][loc.col - 1 :] if 0 < loc.line <= len(raw_lines) else ""
        multiline = start.startswith(('"""', "'''"))
        first_empty = multiline and start[3:].strip() == ""

        def locate(line: int, col: int) -> Location:
            if not multiline:
                return Location(loc.path, loc.line, loc.col + 1 + col)
            if first_empty:
                return Location(loc.path, loc.line + line, col + 1)
            if line == 1:
                return Location(loc.path, loc.line, loc.col + 3 + col)
            return Location(loc.path, loc.line + line - 1, col + 1)

        return locate

    # -- the build --

    def build(self) -> Spec:
        data = self.data
        self._check_keys(data, (), _KNOWN_TOP)
        head = _table(self.source, data, ("spec",))
        self._check_keys(
            head,
            ("spec",),
            (
                "name",
                "title",
                "api_module",
                "api_class",
                "api_policy_class",
                "api_enum",
                "state_field",
                "default_shards",
                "log",
                "default_environment",
                "max_depth",
                "reference_variant",
            ),
        )
        vtable = _table(self.source, data, ("variants", self.variant), required=False)
        for name, table in _table(self.source, data, ("variants",), required=False).items():
            if isinstance(table, dict):  # every variant's, so no verdict gap is reported before a typo
                self._check_keys(table, ("variants", name), VARIANT_KEYS)
        self.enums = self._enums()
        self.sets = self._sets()
        self.policy = self._policy()
        self.fields = self._vars(("fields",), "ledger", required=True)
        self.globals = self._vars(("globals",), "global")
        history_table = _table(self.source, data, ("history",), required=False)
        self._check_keys(history_table, ("history",), ("fields",))
        self.history = self._vars(("history", "fields"), "history")
        self._check_unique()
        state_field = self._str(head, "state_field", ("spec",))
        field_types = {f.name: f.type for f in self.fields}
        if state_field not in field_types:
            raise self.fail(
                ("spec", "state_field"),
                f"state_field {state_field!r} is not a field{did_you_mean(state_field, field_types)}",
            )
        state_type = field_types[state_field]
        if state_type.kind != "enum" or state_type.optional:
            raise self.fail(("spec", "state_field"), "the state field must have a (non-optional) enum type")
        default_shards = self._int(head, "default_shards", ("spec",), 4)
        if not 1 <= default_shards <= MAX_SHARDS:
            raise self.fail(("spec", "default_shards"), f"default_shards must be in [1, {MAX_SHARDS}]")
        max_depth = self._int(head, "max_depth", ("spec",), 0) if "max_depth" in head else None
        if max_depth is not None and not 1 <= max_depth <= MAX_SPEC_DEPTH:
            raise self.fail(("spec", "max_depth"), f"max_depth must be in [1, {MAX_SPEC_DEPTH}]")
        self.state_field = state_field
        self.clock = self._clock()
        self.queries = self._queries()
        self.notifications = self._notifications()
        self.conform = self._conform()
        self.on_state_change = self._on_state_change(state_type)
        self.events = self._events()
        environments = self._environments()
        properties = self._properties(environments)
        default_environment = self._str(head, "default_environment", ("spec",), "")
        if default_environment and default_environment not in environments:
            raise self.fail(
                ("spec", "default_environment"),
                f"default_environment {default_environment!r} is not an environment of the spec"
                f"{did_you_mean(default_environment, environments)}",
            )
        enum_name = state_type.enum or ""
        variants = _variant_names(self.source)
        reference = self._str(head, "reference_variant", ("spec",), "")
        if reference and reference not in variants:
            raise self.fail(
                ("spec", "reference_variant"),
                f"reference_variant {reference!r} is not a variant of the spec{did_you_mean(reference, variants)}",
            )
        variant_doc = ""
        if vtable:
            variant_doc = self._str(vtable, "doc", ("variants", self.variant), "")
        return Spec(
            path=self.source.path,
            sha256=hashlib.sha256(self.source.digest_text.encode("utf-8")).hexdigest(),
            name=self._str(head, "name", ("spec",)),
            title=self._str(head, "title", ("spec",), ""),
            variant=self.variant,
            variant_doc=variant_doc,
            variants=variants,
            api_module=self._str(head, "api_module", ("spec",), ""),
            api_class=self._str(head, "api_class", ("spec",), "Ledger"),
            api_policy_class=self._str(head, "api_policy_class", ("spec",), "FleetHealthPolicy"),
            api_enum=self._str(head, "api_enum", ("spec",), enum_name),
            state_field=state_field,
            state_enum=enum_name,
            default_shards=default_shards,
            log=self._str(head, "log", ("spec",), "shard {shard}: {old} -> {new} ({event})"),
            enums=self.enums,
            sets=self.sets,
            policy=self.policy,
            fields=self.fields,
            globals=self.globals,
            history=self.history,
            queries=self.queries,
            on_state_change=self.on_state_change,
            events=self.events,
            environments=environments,
            properties=properties,
            scenarios=self._scenarios(environments, default_shards),
            declared_default_environment=default_environment or None,
            clock=self.clock,
            notifications=self.notifications,
            conform=self.conform,
            max_depth=max_depth,
            declared_reference=reference or None,
            accepted_weakenings=self._weakened(),
        )

    def _enums(self) -> dict[str, EnumDecl]:
        table = _table(self.source, self.data, ("enums",))
        enums: dict[str, EnumDecl] = {}
        seen: dict[str, str] = {}
        for name, body in table.items():
            keys = ("enums", name)
            self._ident(name, keys)
            if not isinstance(body, dict):
                raise self.fail(keys, f"enum {name!r} must be a table with 'members'")
            self._check_keys(body, keys, ("members", "api_values", "doc"))
            members = body.get("members")
            if not isinstance(members, list) or not members or not all(isinstance(m, str) for m in members):
                raise self.fail((*keys, "members"), "members must be a non-empty list of names")
            if len(set(members)) != len(members):
                raise self.fail((*keys, "members"), "duplicate member")
            for member in members:
                self._ident(member, (*keys, "members"))
                if member in seen:
                    raise self.fail((*keys, "members"), f"member {member!r} is already in enum {seen[member]!r}")
                seen[member] = name
            api = body.get("api_values", "names")
            if api == "lower":
                values = {m: m.lower() for m in members}
            elif api == "names":
                values = {m: m for m in members}
            elif isinstance(api, dict) and set(api) == set(members) and all(isinstance(v, str) for v in api.values()):
                values = dict(api)
            else:
                raise self.fail((*keys, "api_values"), "api_values must be 'lower', 'names' or a table of every member")
            enums[name] = EnumDecl(name, tuple(members), values)
        return enums

    def _ident(self, name: str, keys: KeyPath) -> None:
        if not name.isidentifier() or name.startswith("_"):
            raise self.fail(keys, f"{name!r} is not a valid name (letters, digits, '_'; not starting with '_')")

    def _sets(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        table = _table(self.source, self.data, ("sets",), required=False)
        sets: dict[str, tuple[str, tuple[str, ...]]] = {}
        members_of = {m: e.name for e in self.enums.values() for m in e.members}
        for name, members in table.items():
            keys = ("sets", name)
            self._ident(name, keys)
            if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
                raise self.fail(keys, f"set {name!r} must be a list of enum members")
            enum_names = set()
            for member in members:
                if member not in members_of:
                    raise self.fail(keys, f"set {name!r}: unknown member {member!r}{did_you_mean(member, members_of)}")
                enum_names.add(members_of[member])
            if len(enum_names) > 1:
                raise self.fail(keys, f"set {name!r} mixes members of {', '.join(sorted(enum_names))}")
            if not enum_names:
                raise self.fail(keys, f"set {name!r} is empty")
            sets[name] = (enum_names.pop(), tuple(members))
        return sets

    def _policy(self) -> dict[str, PolicyDecl]:
        table = _table(self.source, self.data, ("policy",), required=False)
        policy: dict[str, PolicyDecl] = {}
        for name, body in table.items():
            keys = ("policy", name)
            self._ident(name, keys)
            if isinstance(body, int) and not isinstance(body, bool):
                body = {"default": body}
            if not isinstance(body, dict):
                raise self.fail(keys, f"policy {name!r} must be an integer or a table with 'default'")
            self._check_keys(body, keys, ("default", "min", "max", "doc", "type"))
            ptype = self._str(body, "type", keys, "int")
            if ptype not in ("int", "duration"):
                raise self.fail((*keys, "type"), f"a policy value is an 'int' or a 'duration', not {ptype!r}")
            default = self._int(body, "default", keys)
            low = self._int(body, "min", keys, 0)
            high = self._int(body, "max", keys, max(default, low, 16))
            if not low <= default <= high:
                raise self.fail((*keys, "default"), f"policy {name}: default {default} is outside [{low}, {high}]")
            policy[name] = PolicyDecl(name, default, low, high, ptype == "duration")
        return policy

    def type_of(self, text: str, keys: KeyPath) -> Type:
        optional = text.endswith("?")
        base = text[:-1] if optional else text
        if base.endswith(" | None"):
            base, optional = base[: -len(" | None")], True
        base = base.strip()
        if base in ("bool", "int", "str", "any"):
            return Type(base, None, optional)
        if base == "duration":  # a length of time in the clock's units: an int to both engines
            return Type("int", None, optional)
        if base in self.enums:
            return Type("enum", base, optional)
        known = ["bool", "int", "str", "any", *self.enums]
        raise self.fail(keys, f"unknown type {base!r}{did_you_mean(base, known)}")

    def _value(self, raw: object, vtype: Type, keys: KeyPath) -> object:
        if raw == "None" or raw is None:
            if not vtype.optional:
                raise self.fail(keys, f"None is not a value of {vtype}")
            return None
        if vtype.kind == "bool" and isinstance(raw, bool):
            return raw
        if vtype.kind == "int" and isinstance(raw, int) and not isinstance(raw, bool):
            if abs(raw) > lang.MAX_INT:
                raise self.fail(keys, "the integer is out of range")
            return raw
        if vtype.kind == "enum" and isinstance(raw, str):
            members = self.enums[vtype.enum or ""].members
            if raw not in members:
                raise self.fail(keys, f"{raw!r} is not a member of {vtype.enum}{did_you_mean(raw, members)}")
            return raw
        if vtype.kind == "str" and isinstance(raw, str):
            return raw
        hint = ""
        if isinstance(raw, str) and raw in self.policy:
            hint = " (only an int may start at a policy constant)"
        article = "an" if str(vtype)[:1] in "aeiou" else "a"
        raise self.fail(keys, f"initial value {raw!r} is not {article} {vtype}{hint}")

    def _vars(self, where: KeyPath, kind: str, required: bool = False) -> tuple[VarDecl, ...]:
        table = _table(self.source, self.data, where, required=required)
        result = []
        for name, body in table.items():
            keys = (*where, name)
            self._ident(name, keys)
            if not isinstance(body, dict):
                raise self.fail(keys, f'{name!r} must be a table like {{ type = "int", initial = 0 }}')
            self._check_keys(body, keys, ("type", "initial", "initial_from", "doc", "metric", "persistent"))
            timer = body.get("type") == "timer"
            vtype = INT if timer else self.type_of(self._str(body, "type", keys), (*keys, "type"))
            if timer and (not isinstance(body.get("initial"), int) or body["initial"] < 0):
                raise self.fail((*keys, "initial"), "a timer needs an initial value: a non-negative integer")
            if vtype.kind == "any":
                raise self.fail((*keys, "type"), "a state variable cannot have type 'any'")
            initial_from = body.get("initial_from")
            if initial_from is not None:
                if kind != "ledger" or not isinstance(initial_from, str) or not initial_from.isidentifier():
                    raise self.fail((*keys, "initial_from"), "initial_from names a constructor argument of the ledger")
                if vtype.kind != "str":
                    raise self.fail((*keys, "initial_from"), "only str fields can come from the constructor")
                initial: object = None
                initial_policy: str | None = None
            elif "initial" not in body:
                raise self.fail(keys, f"{name!r} needs an 'initial' value")
            else:
                initial_policy = self._initial_policy(body["initial"], vtype, (*keys, "initial"))
                initial = None if initial_policy else self._value(body["initial"], vtype, (*keys, "initial"))
            metric = body.get("metric", False)
            if not isinstance(metric, bool):
                raise self.fail((*keys, "metric"), "metric must be true or false")
            persistent = body.get("persistent", False)
            if not isinstance(persistent, bool) or (persistent and kind != "ledger"):
                raise self.fail((*keys, "persistent"), "persistent is true or false, and only on a ledger field")
            doc = body.get("doc", "")
            result.append(
                VarDecl(name, vtype, initial, kind, initial_from, str(doc), metric, timer, persistent, initial_policy)
            )
        return tuple(result)

    def _initial_policy(self, raw: object, vtype: Type, keys: KeyPath) -> str | None:
        """The policy constant an int starts at (`initial = "capacity"`), or None for a value."""
        if not isinstance(raw, str) or raw == "None" or vtype.kind != "int":
            return None
        if raw not in self.policy:
            known = did_you_mean(raw, list(self.policy))
            raise self.fail(keys, f"initial value {raw!r} is neither an integer nor a policy constant{known}")
        return raw

    def _check_unique(self) -> None:
        seen: dict[str, str] = {}
        groups = [
            ("enum", list(self.enums)),
            ("enum member", [m for e in self.enums.values() for m in e.members]),
            ("set", list(self.sets)),
            ("policy constant", list(self.policy)),
            ("field", [f.name for f in self.fields]),
            ("fleet value", [g.name for g in self.globals]),
            ("history field", [h.name for h in self.history]),
        ]
        reserved = {
            "args",
            "old",
            "new",
            "before",
            "after",
            "shards",
            "count",
            "exists",
            "forall",
            "True",
            "False",
            "None",
        }
        for what, names in groups:
            for name in names:
                if name in reserved:
                    raise self.source.error(self._key_of(what, name), f"{what} {name!r} uses a reserved name")
                if name in seen and not (what == "enum member" and seen[name] == "enum member"):
                    raise self.source.error(
                        self._key_of(what, name), f"{what} {name!r} clashes with the {seen[name]} of the same name"
                    )
                seen[name] = what

    def _key_of(self, what: str, name: str) -> KeyPath:
        places = {
            "enum": ("enums", name),
            "set": ("sets", name),
            "policy constant": ("policy", name),
            "field": ("fields", name),
            "fleet value": ("globals", name),
            "history field": ("history", "fields", name),
        }
        return places.get(what, ("enums",))

    # -- scopes --

    def scope(self, keys: KeyPath, context: str, **overrides: Any) -> Scope:
        fields: dict[str, tuple[Type, str]] = {f.name: (f.type, "ledger") for f in self.fields}
        fields.update({h.name: (h.type, "history") for h in self.history})
        base = Scope(
            where=self.where(keys),
            context=context,
            fields=fields,
            globals={g.name: g.type for g in self.globals},
            policy=frozenset(self.policy),
            enum_members={m: e.name for e in self.enums.values() for m in e.members},
            enums={e.name: e.members for e in self.enums.values()},
            sets=self.sets,
            queries={name: q.expr for name, q in getattr(self, "queries", {}).items() if q.expr is not None},
        )
        for key, value in overrides.items():
            setattr(base, key, value)
        return base

    def _queries(self) -> dict[str, Query]:
        table = _table(self.source, self.data, ("queries",), required=False)
        queries: dict[str, Query] = {}
        self.queries = queries
        for name, body in table.items():
            keys = ("queries", name)
            self._ident(name, keys)
            if name in self.sets or name in {f.name for f in self.shard_fields()}:
                raise self.fail(keys, f"query {name!r} clashes with another name")
            if isinstance(body, str):
                body = {"when": body}
            if not isinstance(body, dict):
                raise self.fail(keys, f"query {name!r} must be a condition or a table with 'when'")
            self._check_keys(body, keys, ("when", "api", "doc", "raises", "returns"))
            api = body.get("api")
            if api is not None and (not isinstance(api, str) or not api.isidentifier()):
                raise self.fail((*keys, "api"), "api must be a method name")
            line = self.source.lines.value_where((*keys, "api") if api is not None else keys).line
            if "raises" in body or "returns" in body:
                queries[name] = dataclasses.replace(self._fleet_query(name, body, api), line=line)
                continue
            text = self._str(body, "when", keys)
            scope = self.scope((*keys, "when"), f"query {name}")
            expr = lang.compile_expr(text, scope, BOOL)
            queries[name] = Query(name, expr, api, text, line=line)
        return queries

    def _fleet_query(self, name: str, body: Mapping[str, Any], api: Any) -> Query:
        """A query over the whole fleet (`raises` and/or `returns`, read in the state it is
        called in, with `count`/`exists`/`forall` over the shards as in a fleet property)."""
        keys: KeyPath = ("queries", name)
        if "when" in body:
            raise self.fail(
                keys,
                f"query {name!r} has both 'when' (the shards it holds of) and 'raises'/'returns' (a call over the "
                "whole fleet): a query is one or the other",
            )
        if api is None:
            raise self.fail(keys, f"query {name!r} needs 'api': the method that conformance calls")
        fleet: dict[str, Any] = dict(readable_kinds=frozenset({"ledger", "history"}), self_shard=False, aggregates=True)
        raises = self._raises(keys, f"query {name}: raises", body.get("raises"), fleet, after_allowed=False)
        returns_text = body.get("returns")
        returns = None
        if returns_text is not None:
            if not isinstance(returns_text, str) or not returns_text.strip():
                raise self.fail((*keys, "returns"), "returns must be an expression over the fleet")
            returns = lang.compile_expr(returns_text, self.scope((*keys, "returns"), f"query {name}: returns", **fleet))
            if returns.type.kind in ("any", "shard"):
                raise self.fail((*keys, "returns"), f"a query cannot return a value of type {returns.type}")
        return Query(name, None, api, "", raises, returns, (returns_text or "").strip())

    def shard_fields(self) -> tuple[VarDecl, ...]:
        return self.fields + self.history

    def _weakened(self) -> dict[str, str]:
        """`[weakened]`: "what" = "why", each a change `ci --base` would fail on, accepted."""
        table = _table(self.source, self.data, ("weakened",), required=False)
        accepted: dict[str, str] = {}
        for key, reason in table.items():
            if not isinstance(reason, str) or not reason.strip():
                raise self.fail(
                    ("weakened", key),
                    f'[weakened] {key!r} needs a reason, as text: "{key}" = "why checking less is right here"',
                )
            accepted[key] = reason.strip()
        return accepted

    def _conform(self) -> ConformDefaults | None:
        table = _table(self.source, self.data, ("conform",), required=False)
        if not table:
            return None
        keys: KeyPath = ("conform",)
        self._check_keys(table, keys, ("depth", "random", "shards", "merge", "run_calls"))
        values: dict[str, Any] = {}
        bounds = (("depth", 0, 12), ("random", 0, 1_000_000), ("shards", 1, MAX_SHARDS), ("run_calls", 2, 100_000))
        for name, low, high in bounds:
            if name in table:
                values[name] = self._int(table, name, keys)
                if not low <= values[name] <= high:
                    raise self.fail((*keys, name), f"{name} must be in [{low}, {high}]")
        if "merge" in table:
            values["merge"] = self._str(table, "merge", keys)
            if values["merge"] not in ("ledger", "full"):
                raise self.fail((*keys, "merge"), f"merge is 'ledger' or 'full', not {values['merge']!r}")
        return ConformDefaults(**values)

    def _notifications(self) -> dict[str, Notification]:
        """`[notifications.name]`: `params` (a typed parameter list, like an action's),
        `doc`, and `text` (the log line: `{param}` placeholders only)."""
        table = _table(self.source, self.data, ("notifications",), required=False)
        found: dict[str, Notification] = {}
        for name, body in table.items():
            keys: KeyPath = ("notifications", name)
            self._ident(name, keys)
            if not isinstance(body, dict):
                raise self.fail(keys, f'notification {name!r} must be a table like {{ params = "failures: int" }}')
            self._check_keys(body, keys, ("params", "doc", "text"))
            params_text = self._str(body, "params", keys, "")
            params: tuple[Param, ...] = ()
            if params_text.strip():
                scope = self.scope((*keys, "params"), f"notification {name}: params")
                where: KeyPath = (*keys, "params")
                signature = lang.parse_signature(
                    f"{name}(self_, {params_text})", scope, functools.partial(self._annotation_at, where)
                )
                params = signature.params
                for param in params:
                    if param.type.kind in ("shard", "any"):
                        raise self.fail(
                            (*keys, "params"),
                            f"notification {name}: {param.name!r} cannot be a {param.type.kind} "
                            "(the announcing instance is implicit; arguments are spec values)",
                        )
            text = body.get("text")
            if text is not None:
                text = self._str(body, "text", keys)
                self._check_format(text, [p.name for p in params], (*keys, "text"))
            found[name] = Notification(
                name, params, self._str(body, "doc", keys, ""), text, self.source.lines.line_of(keys)
            )
        return found

    def _check_format(self, text: str, names: list[str], keys: KeyPath) -> None:
        """A log line's text: literal text, `{param}` placeholders and `{index}` (the instance
        announcing it), nothing else."""
        try:
            pieces = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise self.fail(keys, f"text {text!r} is not a format: {exc}") from None
        for _, field_name, spec_text, conversion in pieces:
            if field_name is None:
                continue
            if field_name not in names and field_name != INDEX_PLACEHOLDER:
                known = [*names, INDEX_PLACEHOLDER]
                raise self.fail(
                    keys,
                    f"text: {{{field_name}}} is not a parameter of the notification, nor {{{INDEX_PLACEHOLDER}}} "
                    f"(the instance){did_you_mean(field_name, known)}",
                )
            if spec_text or conversion:
                raise self.fail(keys, f"text: {{{field_name}}} takes no format spec or conversion")

    def _emittable(self) -> dict[str, tuple[Param, ...]]:
        return {name: n.params for name, n in self.notifications.items()}

    def _on_state_change(self, state_type: Type) -> tuple[ir.Stmt, ...]:
        table = _table(self.source, self.data, ("on_state_change",), required=False)
        if not table:
            return ()
        self._check_keys(table, ("on_state_change",), ("body",))
        text = self._str(table, "body", ("on_state_change",))
        scope = self.scope(
            ("on_state_change", "body"),
            "on_state_change",
            self_shard=False,
            locals={"old": state_type, "new": state_type},
            writable_globals=frozenset(g.name for g in self.globals),
            notifications=self._emittable(),
        )
        return lang.compile_block(text, scope)

    # -- events --

    def _patches(self) -> dict[str, list[tuple[KeyPath, dict[str, Any]]]]:
        """This variant's statement patches (after those of the variants it starts `from`),
        grouped by event name, or by `environment.action` for a patch of an action."""
        patches: dict[str, list[tuple[KeyPath, dict[str, Any]]]] = {}
        self.action_patches: dict[str, list[tuple[KeyPath, dict[str, Any]]]] = {}
        for variant in compose.variant_chain(self.source, self.variant):
            table = _table(self.source, self.data, ("variants", variant), required=False)
            raw = table.get("patch", []) if isinstance(table, dict) else []
            if not isinstance(raw, list):
                raise self.fail(
                    ("variants", variant, "patch"), "patch must be an array of tables ([[variants.X.patch]])"
                )
            for index, patch in enumerate(raw):
                keys: KeyPath = ("variants", variant, "patch", index)
                if not isinstance(patch, dict):
                    raise self.fail(keys, "each patch must be a table")
                self._check_keys(patch, keys, PATCH_KEYS)
                if ("event" in patch) == ("action" in patch):
                    raise self.fail(keys, "a patch names exactly one of 'event' or 'action' (environment.action)")
                if "action" in patch:
                    target = self._str(patch, "action", keys)
                    if target.count(".") != 1:
                        hint = (
                            f"; the state-change hook is replaced by [variants.{variant}.override.{HOOK}] body = ..."
                            if target == HOOK
                            else ""
                        )
                        raise self.fail((*keys, "action"), f"action must read environment.action, not {target!r}{hint}")
                    self.action_patches.setdefault(target, []).append((keys, patch))
                    continue
                if "when" in patch:
                    raise self.fail(
                        (*keys, "when"), "'when' patches an action's guard; an event's are ignore_when and requires"
                    )
                event = self._str(patch, "event", keys)
                patches.setdefault(event, []).append((keys, patch))
        return patches

    def _events(self) -> dict[str, Event]:
        table = _table(self.source, self.data, ("events",))
        events: dict[str, Event] = {}
        for event_name in self.patches:
            if event_name not in table:
                keys = self.patches[event_name][0][0]
                raise self.fail(
                    (*keys, "event"), f"patch of unknown event {event_name!r}{did_you_mean(event_name, table)}"
                )
        signatures: dict[str, Signature] = {}
        for name, body in table.items():
            keys = ("events", name)
            self._ident(name, keys)
            if not isinstance(body, dict):
                raise self.fail(keys, f"event {name!r} must be a table")
            self._check_keys(
                body,
                keys,
                ("call", "ignore_when", "requires", "body", "history", "examples", "doc", "raises", "returns"),
            )
            call = self._str(body, "call", keys)
            scope = self.scope((*keys, "call"), f"event {name}: call")
            signature = lang.parse_signature(call, scope, functools.partial(self._annotation_at, (*keys, "call")))
            if signature.name != name:
                raise self.fail((*keys, "call"), f"the call is named {signature.name!r}, the event {name!r}")
            signatures[name] = signature
        for name, body in table.items():
            events[name] = self._event(name, body, signatures[name])
        return events

    def _annotation_at(self, keys: KeyPath, text: str, node: object) -> Type:
        return self._annotation(text, keys)

    def _annotation(self, text: str, keys: KeyPath) -> Type:
        if text == "shard":
            return lang.SHARD
        return self.type_of(text, keys)

    def _event(self, name: str, body: dict[str, Any], signature: Signature) -> Event:
        keys = ("events", name)
        args = {p.name: p.type for p in signature.params}
        ledger_fields = frozenset(f.name for f in self.fields)
        history_fields = frozenset(h.name for h in self.history)
        texts = {"body": self._str(body, "body", keys, ""), "history": self._str(body, "history", keys, "")}
        guards: dict[str, str | None] = {k: body.get(k) for k in ("ignore_when", "requires")}
        line_maps: dict[str, lang.Where] = {k: self.where((*keys, k)) for k in texts}
        for patch_keys, patch in self.patches.get(name, []):
            for guard in ("ignore_when", "requires"):
                if guard in patch:
                    guards[guard] = patch[guard]
            if any(k in patch for k in ("after", "before", "replace", "remove", "insert")):
                block = patch.get("block", "body")
                if not isinstance(block, str) or block not in texts:
                    raise self.fail((*patch_keys, "block"), "block must be 'body' or 'history'")
                texts[block], line_maps[block] = self._apply_patch(texts[block], line_maps[block], patch, patch_keys)
        ignore_when = requires = None
        for guard in ("ignore_when", "requires"):
            text = guards[guard]
            if text is None:
                continue
            if not isinstance(text, str):
                raise self.fail((*keys, guard), f"{guard} must be a string")
            scope = self.scope((*keys, guard), f"event {name}: {guard}", args=args)
            compiled = lang.compile_expr(text, scope, BOOL)
            if guard == "ignore_when":
                ignore_when = compiled
            else:
                requires = compiled
        body_scope = self.scope(
            (*keys, "body"),
            f"event {name}: body",
            args=args,
            writable_fields=ledger_fields,
            where=line_maps["body"],
            notifications=self._emittable(),
        )
        compiled_body = lang.compile_block(texts["body"], body_scope)
        history_scope = self.scope(
            (*keys, "history"),
            f"event {name}: history",
            args=args,
            readable_kinds=frozenset({"ledger", "history"}),
            snapshots=frozenset({"old"}),
            writable_fields=history_fields,
            where=line_maps["history"],
            notifications=self._emittable(),
        )
        compiled_history = lang.compile_block(texts["history"], history_scope)
        raises = self._raises(keys, f"event {name}: raises", body.get("raises"), {"args": args})
        if any(not r.after for r in raises):
            conditions = tuple(r.when for r in raises if not r.after)
            conditions += (ignore_when,) if ignore_when is not None else ()
            ignore_when = conditions[0] if len(conditions) == 1 else ir.BoolOp("or", conditions)
        returns_text = body.get("returns")
        returns = None
        if returns_text is not None:
            if not isinstance(returns_text, str) or not returns_text.strip():
                raise self.fail(
                    (*keys, "returns"),
                    "returns must be an expression over the record after the call (old.x: before it)",
                )
            returns = lang.compile_expr(
                returns_text,
                self.scope((*keys, "returns"), f"event {name}: returns", args=args, snapshots=frozenset({"old"})),
            )
            if returns.type.kind in ("any", "shard"):
                raise self.fail((*keys, "returns"), f"an event cannot return a value of type {returns.type}")
        examples = body.get("examples", {})
        if not isinstance(examples, dict) or not all(isinstance(v, str) for v in examples.values()):
            raise self.fail((*keys, "examples"), "examples must be a table of argument = 'python expression'")
        for arg, example in examples.items():
            if arg not in args:
                raise self.fail(
                    (*keys, "examples", arg), f"event {name} has no argument {arg!r}{did_you_mean(arg, args)}"
                )
            _check_example(example, self.fail, (*keys, "examples", arg))
        return Event(
            name,
            signature,
            ignore_when,
            requires,
            compiled_body,
            compiled_history,
            dict(examples),
            texts["body"],
            self.source.lines.line_of(keys),
            raises,
            returns,
            (returns_text or "").strip(),
            str(guards["requires"] or "").strip(),
        )

    def _raises(
        self, owner: KeyPath, context: str, raw: Any, overrides: Mapping[str, Any], after_allowed: bool = True
    ) -> tuple[Raise, ...]:
        """`raises = [{ when = "cond", error = "ErrorName" }, ...]`, first match wins; an entry
        with `after` instead of `when` (where `after_allowed`: a call with a body) is read on
        the record after the call. `raises = []` raises nothing (a variant that takes its
        errors away says so)."""
        keys: KeyPath = (*owner, "raises")
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise self.fail(keys, 'raises must be a list of tables: [{ when = "condition", error = "ErrorName" }]')
        found = []
        for item in raw:
            if not isinstance(item, dict):
                raise self.fail(keys, 'each raises entry is a table: { when = "condition", error = "ErrorName" }')
            self._check_keys(
                item, keys, ("when", "after", "error", "doc") if after_allowed else ("when", "error", "doc")
            )
            error = self._str(item, "error", keys)
            if not error.isidentifier() or not error[0].isupper():
                raise self.fail(keys, f"error must name an exception class (CamelCase), not {error!r}")
            after = "after" in item
            if after == ("when" in item):
                raise self.fail(
                    keys,
                    "each raises entry has 'when' (read as the call begins: it then changes nothing) or 'after' "
                    "(read on the record after it, old.x before: its changes kept), not both"
                    if after
                    else "missing 'when'",
                )
            text = self._str(item, "after" if after else "when", keys)
            reads = {**overrides, "snapshots": frozenset({"old"})} if after else overrides
            scope = self.scope(keys, context, **reads)
            found.append(
                Raise(lang.compile_expr(text, scope, BOOL), error, text.strip(), self.source.lines.line_of(keys), after)
            )
        return tuple(found)

    def _apply_patch(
        self, text: str, where: lang.Where, patch: dict[str, Any], keys: KeyPath
    ) -> tuple[str, lang.Where]:
        """Insert, replace or remove statements of a block, anchored on a statement's text."""
        anchors = [k for k in ("after", "before", "replace", "remove") if k in patch]
        if len(anchors) != 1:
            raise self.fail(keys, "a patch needs exactly one of 'after', 'before', 'replace' or 'remove'")
        mode = anchors[0]
        anchor_text = patch[mode]
        if not isinstance(anchor_text, str):
            raise self.fail((*keys, mode), f"{mode!r} must be the text of one statement")
        insert = patch.get("insert", "")
        if not isinstance(insert, str):
            raise self.fail((*keys, "insert"), "insert must be a string of statements")
        if mode in ("after", "before") and not insert.strip():
            raise self.fail(keys, f"a patch with {mode!r} needs 'insert'")
        source_lines = textwrap.dedent(text).split("\n")
        try:
            tree = ast.parse("\n".join(source_lines))
            anchor = textwrap.dedent(anchor_text).strip()
            if anchor.endswith(":"):  # a compound statement's header: `if cond:`
                anchor += "\n    pass"
            wanted = _stmt_head(ast.parse(anchor).body[0])
        except (SyntaxError, IndexError, ValueError, RecursionError, MemoryError):
            hint = ""
            if textwrap.dedent(anchor_text).strip().startswith(("elif ", "else:")):
                hint = ": an `elif` or `else` is part of its `if`, which the anchor names (`if cond:`)"
            raise self.fail((*keys, mode), f"the anchor must be one valid statement of the block{hint}") from None
        matches = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and _stmt_head(n) == wanted]
        if len(matches) != 1:
            found = "no" if not matches else f"{len(matches)}"
            what = f"event {patch['event']!r}" if "event" in patch else f"action {patch.get('action')!r}"
            raise self.fail(
                (*keys, mode),
                f"{found} statement(s) of {what} read {wanted!r}; the anchor must match exactly one",
            )
        node = matches[0]
        indent = " " * node.col_offset
        new_lines = (
            [indent + line if line.strip() else line for line in textwrap.dedent(insert).strip("\n").split("\n")]
            if insert.strip()
            else []
        )
        start, end = node.lineno - 1, (node.end_lineno or node.lineno)
        origin = [where(i + 1, 0) for i in range(len(source_lines))]
        insert_where = self.where((*keys, "insert"))
        inserted = [insert_where(i + 1, 0) for i in range(len(new_lines))]
        if mode == "after":
            lines = source_lines[:end] + new_lines + source_lines[end:]
            origins = origin[:end] + inserted + origin[end:]
        elif mode == "before":
            lines = source_lines[:start] + new_lines + source_lines[start:]
            origins = origin[:start] + inserted + origin[start:]
        else:
            lines = source_lines[:start] + new_lines + source_lines[end:]
            origins = origin[:start] + inserted + origin[end:]

        def locate(line: int, col: int) -> Location:
            if 1 <= line <= len(origins):
                base = origins[line - 1]
                return Location(base.path, base.line, col + 1)
            return origins[-1] if origins else self.source.where(*keys)

        return "\n".join(lines), locate

    # -- time --

    def _clock(self) -> Clock | None:
        """`[clock]`: its unit, its steps (one tick action per step) and how an
        implementation's clock is driven. Timers need one; a clock with no timer is allowed
        (its ticks change nothing)."""
        table = _table(self.source, self.data, ("clock",), required=False)
        timers = [v for v in (*self.fields, *self.history, *self.globals) if v.timer]
        if not table:
            if timers:
                where = ("history", "fields") if timers[0].kind == "history" else ("fields",)
                if timers[0].kind == "global":
                    where = ("globals",)
                raise self.fail((*where, timers[0].name, "type"), "a timer needs a [clock] to advance it")
            return None
        keys: KeyPath = ("clock",)
        self._check_keys(table, keys, ("doc", "unit", "steps", "action", "drive"))
        action = self._str(table, "action", keys, "tick")
        self._ident(action, (*keys, "action"))
        raw_steps = table.get("steps", [1])
        if not isinstance(raw_steps, list) or not raw_steps:
            raise self.fail((*keys, "steps"), "steps must be a non-empty list of integers >= 1 or policy names")
        steps: list[tuple[str, str]] = []
        for step in raw_steps:
            if isinstance(step, bool) or not isinstance(step, (int, str)):
                raise self.fail((*keys, "steps"), f"a step is an integer >= 1 or a policy name, not {step!r}")
            if isinstance(step, int) and not 1 <= step <= lang.MAX_INT:
                raise self.fail((*keys, "steps"), f"a step must be at least 1, not {step}")
            if isinstance(step, str):
                if step not in self.policy:
                    raise self.fail(
                        (*keys, "steps"), f"step {step!r} is not a policy constant{did_you_mean(step, self.policy)}"
                    )
                if self.policy[step].min < 1:
                    raise self.fail((*keys, "steps"), f"step {step!r} must have min >= 1: time only moves forward")
            name = action if len(raw_steps) == 1 else f"{action}_{step}"
            if any(name == taken for taken, _ in steps):
                raise self.fail((*keys, "steps"), f"step {step!r} is listed twice")
            steps.append((name, str(step)))
        drive = table.get("drive", {"param": "clock"})
        if not isinstance(drive, dict) or len(drive) != 1 or next(iter(drive)) not in ("param", "patch"):
            raise self.fail(
                (*keys, "drive"),
                'drive must be { param = "clock" } (a constructor argument) or { patch = "time.monotonic" }',
            )
        how, target = next(iter(drive.items()))
        if not isinstance(target, str) or not all(part.isidentifier() for part in target.split(".")):
            raise self.fail((*keys, "drive", how), f"{how} must be a Python name, not {target!r}")
        if how == "param" and "." in target:
            raise self.fail((*keys, "drive", how), "a constructor parameter is a plain name")
        return Clock(
            self._str(table, "unit", keys, "s"),
            tuple(steps),
            target if how == "param" else None,
            target if how == "patch" else None,
            self._str(table, "doc", keys, ""),
            self.source.lines.where((*keys, "drive") if "drive" in table else keys),
        )

    def _clock_actions(self, env_vars: tuple[VarDecl, ...], taken: set[str]) -> tuple[Action, ...]:
        """One action per clock step: every timer (per shard, fleet-wide and the
        environment's own) advances by the step, as `t = t + step` (a counter update, which
        the reduction saturates where the timer is only compared with constants)."""
        if self.clock is None:
            return ()
        line = self.source.lines.line_of(("clock",))
        actions = []
        for name, step_text in self.clock.steps:
            if name in taken:
                raise self.fail(("clock", "action"), f"the clock's action {name!r} clashes with an action of that name")
            step: ir.Expr = ir.PolicyRef(step_text) if step_text in self.policy else ir.Const(int(step_text), INT)
            body: list[ir.Stmt] = []
            shard_timers = [v for v in (*self.fields, *self.history) if v.timer]
            if shard_timers:
                updates = tuple(
                    ir.Assign(
                        "field",
                        v.name,
                        "s",
                        ir.Arith("+", ir.FieldRef(v.name, "s", None, INT), step),
                        line,
                        f"s.{v.name} += {step_text}",
                    )
                    for v in shard_timers
                )
                body.append(ir.ForShards("s", updates, line, "for s in shards:"))
            for var in (*self.globals, *env_vars):
                if var.timer:
                    value = ir.Arith("+", ir.GlobalRef(var.name, INT), step)
                    body.append(ir.Assign("global", var.name, "", value, line, f"{var.name} += {step_text}"))
            if not body:
                body.append(ir.Pass(line))
            doc = f"the clock advances {step_text} {self.clock.unit}"
            actions.append(Action(name, doc, (), (), ir.Const(True, BOOL), tuple(body), line))
        return tuple(actions)

    # -- environments --

    def _environments(self) -> dict[str, Environment]:
        table = _table(self.source, self.data, ("environments",))
        environments: dict[str, Environment] = {}
        for name, body in table.items():
            keys = ("environments", name)
            self._ident(name, keys)
            if not isinstance(body, dict):
                raise self.fail(keys, f"environment {name!r} must be a table")
            self._check_keys(body, keys, ("doc", "any_call", "vars", "actions", "fairness"))
            any_call = body.get("any_call", False)
            if not isinstance(any_call, bool):
                raise self.fail((*keys, "any_call"), "any_call must be true or false")
            env_vars = self._vars((*keys, "vars"), "env")
            taken = {f.name for f in self.fields + self.history + self.globals} | set(self.policy) | set(self.sets)
            for var in env_vars:
                if var.name in taken or var.name in self.queries:
                    raise self.fail(
                        (*keys, "vars", var.name), f"environment variable {var.name!r} clashes with another name"
                    )
            if any_call:
                if "actions" in body:
                    raise self.fail((*keys, "actions"), "an any_call environment has no actions of its own")
                actions = tuple(self._call_action(event) for event in self.events.values())
            else:
                actions_table = _table(self.source, self.data, (*keys, "actions"))
                actions = tuple(self._action(keys, env_vars, action, spec) for action, spec in actions_table.items())
                if not actions:
                    raise self.fail(keys, f"environment {name!r} has no actions")
            actions += self._clock_actions(env_vars, {a.name for a in actions})
            fairness = self._fairness(keys, body.get("fairness", []), actions)
            environments[name] = Environment(
                name, self._str(body, "doc", keys, ""), env_vars, actions, any_call, fairness
            )
        if not environments:
            raise self.fail(("environments",), "the spec declares no environment")
        for target, patches in self.action_patches.items():
            known = [f"{e.name}.{a.name}" for e in environments.values() if not e.any_call for a in e.actions]
            if target not in known:
                raise self.fail(
                    (*patches[0][0], "action"), f"patch of unknown action {target!r}{did_you_mean(target, known)}"
                )
        return environments

    def _fairness(self, keys: KeyPath, raw: Any, actions: tuple[Action, ...]) -> tuple[Fairness, ...]:
        """`fairness = [{ weak = ["a", "b"], doc = "..." }, ...]`: groups of action names."""
        if not isinstance(raw, list):
            raise self.fail((*keys, "fairness"), "fairness must be a list of tables: { weak = [action names] }")
        names = [a.name for a in actions]
        groups = []
        for index, item in enumerate(raw):
            where: KeyPath = (*keys, "fairness", index)
            if not isinstance(item, dict):
                raise self.fail((*keys, "fairness"), "each fairness entry must be a table: { weak = [action names] }")
            self._check_keys(item, where, ("weak", "doc"))
            weak = item.get("weak")
            if not isinstance(weak, list) or not weak or not all(isinstance(a, str) for a in weak):
                raise self.fail(where, "weak must be a non-empty list of action names")
            for action in weak:
                if action not in names:
                    raise self.fail(where, f"unknown action {action!r}{did_you_mean(action, names)}")
            groups.append(Fairness(tuple(weak), self._str(item, "doc", where, "")))
        return tuple(groups)

    def _call_action(self, event: Event) -> Action:
        """The `ledger` environment's action for one event: any shard, any arguments."""
        shard = event.signature.shard_param
        params = tuple(p for p in event.signature.params if p.type.kind != "any")
        args: list[tuple[str, ir.Expr]] = []
        for p in event.signature.params:
            if p.type.kind == "any":
                args.append((p.name, ir.Const(p.default if p.has_default else "", STR)))
            else:
                args.append((p.name, ir.ArgRef(p.name, p.type)))
        call = ir.CallEvent(event.name, shard, tuple(args), event.line, f"{event.name}({shard}, ...)")
        return Action(event.name, f"call {event.name}", (shard,), params, ir.Const(True, BOOL), (call,), event.line)

    def _action(self, env_keys: KeyPath, env_vars: tuple[VarDecl, ...], name: str, body: Any) -> Action:
        keys = (*env_keys, "actions", name)
        self._ident(name, keys)
        if not isinstance(body, dict):
            raise self.fail(keys, f"action {name!r} must be a table")
        self._check_keys(body, keys, ("doc", "params", "when", "body"))
        params_text = self._str(body, "params", keys, "")
        shard_params: list[str] = []
        value_params: list[Param] = []
        if params_text.strip():
            scope = self.scope((*keys, "params"), f"action {name}: params")
            signature = lang.parse_signature(
                f"{name}(_self_, {params_text})".replace("_self_", "self_"),
                scope,
                lambda t, n: self._annotation(t, (*keys, "params")),
            )
            for param in signature.params:
                if param.type.kind == "shard":
                    shard_params.append(param.name)
                elif param.type.kind == "any":
                    raise self.fail((*keys, "params"), "an action parameter cannot be of type 'any'")
                else:
                    value_params.append(param)
        when_text = self._str(body, "when", keys, "True")
        body_text = self._str(body, "body", keys)
        body_where = self.where((*keys, "body"))
        when_keys: KeyPath = (*keys, "when")
        for patch_keys, patch in self.action_patches.get(f"{env_keys[-1]}.{name}", []):
            for key in ("block", "ignore_when", "requires"):
                if key in patch:
                    raise self.fail((*patch_keys, key), f"{key!r} patches an event; an action has a 'when' and a body")
            if "when" in patch:
                when_text = self._str(patch, "when", patch_keys)
                when_keys = (*patch_keys, "when")
            if any(k in patch for k in ("after", "before", "replace", "remove", "insert")):
                body_text, body_where = self._apply_patch(body_text, body_where, patch, patch_keys)
        env_types = {g.name: g.type for g in self.globals} | {v.name: v.type for v in env_vars}
        common = dict(
            self_shard=False,
            globals=env_types,
            shard_vars=frozenset(shard_params),
            params={p.name: p.type for p in value_params},
            aggregates=True,
            events={n: e.signature for n, e in self.events.items()},
        )
        when_scope = self.scope(when_keys, f"action {name}: when", **common)
        when = lang.compile_expr(when_text, when_scope, BOOL)
        body_scope = self.scope(
            (*keys, "body"),
            f"action {name}: body",
            writable_globals=frozenset(v.name for v in env_vars),
            where=body_where,
            **common,
        )
        block = lang.compile_block(body_text, body_scope)
        return Action(
            name,
            self._str(body, "doc", keys, ""),
            tuple(shard_params),
            tuple(value_params),
            when,
            block,
            self.source.lines.line_of(keys),
        )

    # -- scenarios --

    def _scenarios(self, environments: Mapping[str, Environment], default_shards: int) -> dict[str, Scenario]:
        table = _table(self.source, self.data, ("scenarios",), required=False)
        scenarios: dict[str, Scenario] = {}
        for name, body in table.items():
            keys = ("scenarios", name)
            self._ident(name, keys)
            if not isinstance(body, dict):
                raise self.fail(keys, f"scenario {name!r} must be a table")
            self._check_keys(body, keys, ("doc", "environment", "focus", "shards", "steps"))
            env = self._str(body, "environment", keys)
            if env not in environments:
                raise self.fail((*keys, "environment"), f"unknown environment {env!r}{did_you_mean(env, environments)}")
            shards = self._int(body, "shards", keys, default_shards)
            if not 1 <= shards <= MAX_SHARDS:
                raise self.fail((*keys, "shards"), f"shards must be in [1, {MAX_SHARDS}]")
            focus = body.get("focus")
            if focus is not None and (not isinstance(focus, int) or isinstance(focus, bool) or not 0 <= focus < shards):
                raise self.fail((*keys, "focus"), f"focus must be a shard index in [0, {shards - 1}]")
            steps = body.get("steps")
            if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
                raise self.fail((*keys, "steps"), 'steps must be a list of calls, e.g. "report_failure(1)"')
            actions = {a.name for a in environments[env].actions}
            for step in steps:
                head = step.split("(", 1)[0].strip()
                if head not in actions:
                    raise self.fail(
                        (*keys, "steps"), f"scenario {name}: {env} has no action {head!r}{did_you_mean(head, actions)}"
                    )
            scenarios[name] = Scenario(
                name,
                self._str(body, "doc", keys, ""),
                env,
                focus,
                shards,
                tuple(steps),
                self.source.lines.line_of(keys),
            )
        return scenarios

    # -- properties --

    def _properties(self, environments: Mapping[str, Environment]) -> dict[str, Property]:
        table = _table(self.source, self.data, ("properties",), required=False)
        properties: dict[str, Property] = {}
        variants = _variant_names(self.source)
        gaps: dict[str, tuple[str, ...]] = {}
        named: set[str] = set()
        all_fields = frozenset({"ledger", "history"})
        for name, body in table.items():
            keys = ("properties", name)
            self._ident(name, keys)
            if not isinstance(body, dict):
                raise self.fail(keys, f"property {name!r} must be a table")
            self._check_keys(
                body,
                keys,
                (
                    "claim",
                    "doc",
                    "kind",
                    "on",
                    "when",
                    "assert",
                    "message",
                    "expect",
                    "environments",
                    "scope",
                    "view",
                    "lemmas",
                    "claim_text",
                    "calls",
                ),
            )
            kind_text = self._str(body, "kind", keys, PropertyKind.INVARIANT.value)
            if kind_text not in PROPERTY_KINDS:
                raise self.fail(
                    (*keys, "kind"),
                    f"kind must be one of {', '.join(PROPERTY_KINDS)}{did_you_mean(kind_text, PROPERTY_KINDS)}",
                )
            kind = PropertyKind(kind_text)
            scope_kind = self._str(body, "scope", keys, "shard")
            if scope_kind not in ("shard", "fleet"):
                raise self.fail((*keys, "scope"), "scope must be 'shard' or 'fleet'")
            fleet = scope_kind == "fleet"
            on: tuple[str, ...] = ()
            if kind == PropertyKind.STEP:
                raw_on = body.get("on")
                if not isinstance(raw_on, list) or not raw_on or not all(isinstance(e, str) for e in raw_on):
                    raise self.fail((*keys, "on"), "a step property needs 'on', a list of event names")
                for event in raw_on:
                    if event not in self.events:
                        raise self.fail((*keys, "on"), f"unknown event {event!r}{did_you_mean(event, self.events)}")
                on = tuple(raw_on)
                if fleet:
                    raise self.fail((*keys, "scope"), "step properties are about the shard an event is called on")
            elif kind == PropertyKind.EVENTUALLY and fleet:
                raise self.fail((*keys, "scope"), "an eventually property is about one shard (scope = 'shard')")
            elif "on" in body:
                raise self.fail((*keys, "on"), "'on' is only for step properties")
            env_names = body.get("environments")
            envs: tuple[str, ...] | None = None
            if env_names is not None:
                if not isinstance(env_names, list) or not all(isinstance(e, str) for e in env_names):
                    raise self.fail((*keys, "environments"), "environments must be a list of names")
                for env in env_names:
                    if env not in environments:
                        raise self.fail(
                            (*keys, "environments"), f"unknown environment {env!r}{did_you_mean(env, environments)}"
                        )
                envs = tuple(env_names)
            if kind == PropertyKind.STEP:
                overrides: dict[str, Any] = dict(
                    readable_kinds=all_fields, snapshots=frozenset({"before", "after"}), self_shard=False
                )
                overrides["locals"] = self._outcome_locals(on)
                overrides["args"] = self._common_args(on)
                overrides["args_owner"] = (
                    f"the event {on[0]} has no argument"
                    if len(on) == 1
                    else f"the events {', '.join(on)} do not all take, with one type, an argument"
                )
                overrides["emitted"] = frozenset(self.notifications)
            elif fleet:
                overrides = dict(readable_kinds=all_fields, self_shard=False, aggregates=True)
            else:
                overrides = dict(readable_kinds=all_fields)
            env_types = {v.name: v.type for e in environments.values() for v in e.vars}
            overrides["globals"] = {g.name: g.type for g in self.globals} | env_types
            when_text = self._str(body, "when", keys, "")
            when = None
            if when_text.strip():
                when = lang.compile_expr(
                    when_text, self.scope((*keys, "when"), f"property {name}: when", **overrides), BOOL
                )
            assert_text = self._str(body, "assert", keys)
            check = lang.compile_expr(
                assert_text, self.scope((*keys, "assert"), f"property {name}: assert", **overrides), BOOL
            )
            expect, gaps[name] = self._expect(keys, body.get("expect"), variants)
            named.update(body.get("expect") or ())
            claim = body.get("claim")
            if claim is not None and (not isinstance(claim, int) or isinstance(claim, bool)):
                raise self.fail((*keys, "claim"), "claim must be an integer")
            view = body.get("view")
            if view is not None:
                field_names = [f.name for f in self.fields]
                if not isinstance(view, list) or not view or not all(isinstance(v, str) for v in view):
                    raise self.fail((*keys, "view"), "view must be a list of ledger field names")
                for item in view:
                    if item not in field_names:
                        raise self.fail((*keys, "view"), f"unknown field {item!r}{did_you_mean(item, field_names)}")
            calls = self._str(body, "calls", keys, "allowed")
            if calls not in ("allowed", "any"):
                raise self.fail(
                    (*keys, "calls"),
                    f"calls is 'allowed' (the calls the callers' contracts allow, the default) or 'any', not {calls!r}",
                )
            if calls == "any" and kind == PropertyKind.EVENTUALLY:
                raise self.fail(
                    (*keys, "calls"),
                    "a liveness property assumes the callers' contracts: calls = 'any' "
                    "is for invariants and step properties",
                )
            raw_lemmas = body.get("lemmas", [])
            if not isinstance(raw_lemmas, list) or not all(isinstance(t, str) for t in raw_lemmas):
                raise self.fail((*keys, "lemmas"), "lemmas must be a list of per-shard invariant expressions")
            lemma_scope = dict(readable_kinds=all_fields)
            lemma_scope["globals"] = overrides["globals"]
            lemmas = tuple(
                lang.compile_expr(text, self.scope((*keys, "lemmas"), f"property {name}: lemma", **lemma_scope), BOOL)
                for text in raw_lemmas
            )
            properties[name] = Property(
                name=name,
                claim=claim,
                doc=self._str(body, "doc", keys, ""),
                kind=kind,
                on=on,
                when=when,
                check=check,
                message=self._str(body, "message", keys, f"property {name} failed"),
                expect=expect,
                environments=envs,
                fleet=fleet,
                line=self.source.lines.line_of(keys),
                when_text=when_text.strip(),
                assert_text=assert_text.strip(),
                view=tuple(view) if view is not None else None,
                lemmas=lemmas,
                lemma_texts=tuple(t.strip() for t in raw_lemmas),
                claim_text=self._str(body, "claim_text", keys, ""),
                counts_any_call=calls == "any",
            )
        self._check_expectations(gaps, named, variants)
        return properties

    def _common_args(self, on: tuple[str, ...]) -> dict[str, Type]:
        """The arguments a step property may read as `args.x`: those every event in `on` takes,
        with one type (`on = ["take", "put"]`, both with `n: int`, read `args.n`)."""
        signatures = [{p.name: p.type for p in self.events[e].signature.params} for e in on]
        first, *rest = signatures
        return {name: t for name, t in first.items() if all(other.get(name) == t for other in rest)}

    def _outcome_locals(self, on: tuple[str, ...]) -> dict[str, Type]:
        """What a step property may say of the call's outcome: `raised` (it raised one of its
        `raises` errors), and `result` (its `returns` value) when every event in `on` returns
        a value of one type."""
        found: dict[str, Type] = {"raised": BOOL}
        returns = [self.events[e].returns for e in on]
        types = {r.type for r in returns if r is not None}
        if len(types) == 1 and None not in returns:
            found["result"] = types.pop()
        return found

    def _expect(self, keys: KeyPath, raw: Any, variants: tuple[str, ...]) -> tuple[dict[str, str], tuple[str, ...]]:
        """A property's expected verdict for every variant: the ones its `expect` names, the
        rest from its `default`. Also returns the variants left with neither, for
        `_check_expectations` to report once every property is known."""
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise self.fail(
                (*keys, "expect"),
                'expect must be a table: variant = "holds" | "violated", and optionally default = "holds" | "violated"',
            )
        for variant, verdict in raw.items():
            if variant != DEFAULT_EXPECTATION and variant not in variants:
                raise self.fail((*keys, "expect", variant), _unknown_variant(variant, variants))
            if verdict not in VERDICTS:
                hint = did_you_mean(verdict, VERDICTS) if isinstance(verdict, str) else ""
                raise self.fail(
                    (*keys, "expect", variant),
                    f"expected verdict of {variant!r} must be 'holds' or 'violated', not {verdict!r}{hint}",
                )
        default = raw.get(DEFAULT_EXPECTATION)
        likes = self._expect_likes(variants)

        def verdict_of(variant: str) -> Any:
            if variant in raw:
                return raw[variant]
            return verdict_of(likes[variant]) if variant in likes else default

        expect = {v: verdict_of(v) for v in variants}
        missing = tuple(v for v, verdict in expect.items() if verdict is None)
        return {v: verdict for v, verdict in expect.items() if verdict is not None}, missing

    @functools.cached_property
    def _expect_like_table(self) -> dict[str, str]:
        """`expect_like = "other"` of each variant: it expects what `other` expects wherever a
        property's expect does not name it."""
        declared = _table(self.source, self.data, ("variants",), required=False)
        likes: dict[str, str] = {}
        for name, body in declared.items():
            if isinstance(body, dict) and "expect_like" in body:
                other = body["expect_like"]
                keys: KeyPath = ("variants", name, "expect_like")
                if not isinstance(other, str) or other not in declared or other == name:
                    raise self.fail(
                        keys, f"expect_like names no other variant: {other!r}{did_you_mean(str(other), declared)}"
                    )
                likes[name] = other
        for name in likes:
            seen = [name]
            while seen[-1] in likes:
                seen.append(likes[seen[-1]])
                if seen[-1] in seen[:-1]:
                    raise self.fail(
                        ("variants", name, "expect_like"), f"expect_like makes a cycle: {' -> '.join(seen)}"
                    )
        return likes

    def _expect_likes(self, variants: tuple[str, ...]) -> dict[str, str]:
        return {v: other for v, other in self._expect_like_table.items() if v in variants}

    def _check_expectations(
        self, gaps: Mapping[str, tuple[str, ...]], named: set[str], variants: tuple[str, ...]
    ) -> None:
        """Every (property, variant) must have an expected verdict, written or defaulted: a
        verdict nobody expected cannot be a mismatch, so a new variant or property would
        otherwise be checked, printed and exit 0 whatever it found.

        A declared variant that no property names is reported at the variant (someone just
        added it); any other gap at the property's `expect` (or the property itself)."""
        declared = _table(self.source, self.data, ("variants",), required=False)
        for variant in variants:
            lacking = [name for name, missing in gaps.items() if variant in missing]
            if lacking and variant in declared and variant not in named and variant not in self._expect_like_table:
                raise SpecError(
                    self.source.lines.first_within(("variants", variant)),
                    f"variant {variant!r} has no expected verdict in any property: add "
                    f'{variant} = "holds" or "violated" to the expect of {_names(lacking)} '
                    f"(or give those properties a {DEFAULT_EXPECTATION})",
                )
        for name, missing in gaps.items():
            if missing:
                variants_text = ", ".join(repr(v) for v in missing)
                raise SpecError(
                    self.source.lines.first_within(("properties", name, "expect")),
                    f"property {name!r} has no expected verdict for variant{'s' if len(missing) > 1 else ''} "
                    f'{variants_text}: add {missing[0]} = "holds" or "violated" to its expect, or '
                    f'{DEFAULT_EXPECTATION} = "holds" | "violated" for every variant it does not name',
                )


def _unknown_variant(variant: str, variants: tuple[str, ...]) -> str:
    message = (
        f"unknown variant {variant!r}{did_you_mean(variant, (*variants, DEFAULT_EXPECTATION))}; "
        f"the spec has {', '.join(variants)}"
    )
    if variant == BASE_VARIANT:
        message += (
            f" ({BASE_VARIANT!r} is the spec as written only when it declares no [variants]; "
            f"declare [variants.{BASE_VARIANT}] with no patch to check it alongside the others)"
        )
    return message


def _names(names: list[str], most: int = 6) -> str:
    """'a, b and c', or the first few and how many more: an error message stays one line."""
    shown = names[:most]
    more = len(names) - len(shown)
    if more:
        return f"{', '.join(shown)} and {more} more"
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


def _stmt_head(node: ast.stmt) -> str:
    if isinstance(node, ast.If):
        return f"if {ast.unparse(node.test)}:"
    if isinstance(node, ast.For):
        return f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}:"
    return ast.unparse(node).split("\n")[0]


_EXAMPLE_CALLS = {"RuntimeError", "ValueError", "TimeoutError", "ConnectionError", "OSError", "Exception"}


def _check_example(text: str, fail: Any, keys: KeyPath) -> None:
    """An argument example is rendered into generated tests, so it must be a literal or a
    built-in exception built from literals: nothing else can reach generated code."""
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise fail(keys, f"example {text[:80]!r} is not a Python expression{_quote_hint(text)}") from None
    if isinstance(node, ast.Constant):
        return
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _EXAMPLE_CALLS
        and not node.keywords
        and all(isinstance(a, ast.Constant) for a in node.args)
    ):
        return
    raise fail(keys, f"example {text!r} must be a literal or a built-in exception of literals{_quote_hint(text)}")


def _quote_hint(text: str) -> str:
    """For an example written as bare text (`tcp://db-1:5432`, `alice`): how to write it as
    the string it means, quoted inside the TOML string."""
    if text.strip() and not text.strip().startswith(("'", '"')):
        return f" (a string is quoted inside the TOML string: '\"{text.strip()[:60]}\"')"
    return ""


__all__ = [
    "DEFAULT_SPEC",
    "default_spec",
    "Action",
    "Environment",
    "Event",
    "Notification",
    "Property",
    "PropertyKind",
    "Query",
    "Spec",
    "SpecFile",
    "VarDecl",
    "load_spec",
    "load_spec_text",
    "reference_variant",
    "known_limitations",
    "INT",
]
