"""How a real Python class implements a spec: the `[implementation]` table, and the
ledger-shaped API it gives any class.

Conformance and the generated tests drive an implementation through one API: built as
`Class(shard_count=, policy=, base_urls=)`, every event a method whose first argument is an
instance index, state read through `snapshot()` and `state_of()`, a bad index raising
`KeyError`. The ledger has that shape; a circuit breaker from PyPI does not. Rather than
asking every user for an adapter class, a spec states in a few lines how its class is
built, called and read, and `bound_class` derives the adapter from that statement:

```toml
[implementation]
target = "circuitbreaker:CircuitBreaker"      # what `conform` and the tests use by default
instances = "each"                             # one object per instance ("indexed": one object, index first)
construct = { failure_threshold = "trip_after", recovery_timeout = "cooldown" }
# unknown_index = "refused"                    # indexed: the class gets an index it does not have, and must raise

[implementation.fields]
state = { read = "state", values = { CLOSED = "closed", OPEN = ["open", "half_open"] } }
failures = "failure_count"
open_for = { observe = false }                 # modelled, kept private by the library

[implementation.events]
call_succeeds = "decorate(returning(None))()"
call_fails = { call = "decorate(raising(OSError))()", reraises = "OSError" }

[implementation.notifications]                 # how the class announces the spec's notifications
opened = [{ param = "on_open" }, { logger = "breaker" }]
state_changed = { register = "add_listener", skip = 1 }
```

Announcements (the spec's `[notifications]`) are heard through callbacks the bound class
hands the real one (a constructor keyword, a registration method, an attribute) and through
`logging` handlers on named loggers, during each call only; `Bound.notifications` keeps them
as (channel, instance, payload) for conformance and the generated tests to compare.

Time comes from the spec's `[clock]`: its `drive` names the constructor parameter or the
function to patch (`circuitbreaker.monotonic`), and the bound class hands the real class the
clock that conformance and the generated tests move on every tick.

Every expression is a *call path*: names, attribute access, subscripts by one value
(`slots[i]`, `table["x"]`), calls with positional and keyword arguments, and constants; nothing
else (no operators, no slices, no lambdas), checked when the spec loads and never compiled.
A leading name is, in this order: `self` (the instance), an argument of the event (every one,
defaults filled in), a policy constant, the instance index (an indexed binding's call paths and
every read path: `index`, or the spec's own name for it, the `i` of `call = "lease(i)"`), one
of the helpers `returning(value)` (a function that returns `value`) and `raising(Error)` (a
function that raises `Error`, a built-in exception), an attribute of the instance the call is
made on, or failing that a name of the class's own module (its enum). A `construct` path,
evaluated before there is an instance, names only policy constants, the number of instances
(`instances`, `shard_count`), the helpers and built-in exceptions.

A path the class cannot follow is the binding's mistake, not a divergence: `binding_problems`
follows every path on a fresh instance before anything is compared, and names the spec's
line of what the class lacks.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import enum
import functools
import importlib
import inspect
import logging
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal

from ledgercheck.model.errors import Location, SpecError, builtin_exception, did_you_mean
from ledgercheck.model.source import KeyPath, SpecSource

if TYPE_CHECKING:  # the spec module builds bindings: a runtime import would be a cycle
    from ledgercheck.model.spec import Event, Spec

Instances = Literal["indexed", "each"]
UnknownIndex = Literal["binding", "refused"]

_KEYS = ("target", "instances", "unknown_index", "construct", "fields", "events", "notifications")
_ANNOUNCE_FORMS = ("param", "register", "attribute", "logger")
_HELPERS = ("returning", "raising")
FILE_MODULE_PREFIX = "ledgercheck_impl_"
"""The name a class's module is loaded under from a file target (`path/sched.py:Scheduler`):
the prefix, the file's name and a hash of its path (two files of one name stay apart)."""
SELF = "self"
"""The instance itself, in a call or read path: `self.max_size` is the object's attribute where
a policy constant or an argument of that name would be read by `max_size` alone."""
INSTANCE_COUNT = ("instances", "shard_count")
"""The names a `construct` path reads the number of instances by (`JobTable(n=instances)`):
conformance and the generated tests choose it, so the binding cannot write it down. Both
the binding's word and the ledger's (`shard_count=`); a policy constant of the same name wins."""
INDEX = "index"
"""The name a call or read path of an indexed binding reads the instance index by, besides the
spec's own name for it (the `i` of `call = "lease(i)"`)."""
MAX_EXPRESSION = 500
"""Characters of one call path: a binding is a few words, not a program."""


@dataclass(frozen=True)
class CallPath:
    """One validated call-path expression, with the spec text it came from."""

    text: str
    tree: ast.expr = field(compare=False, repr=False)
    where: Location | None = field(default=None, compare=False, repr=False)
    """Where the spec wrote it: what a binding error names (a path the class cannot follow)."""


@dataclass(frozen=True)
class FieldRead:
    """How one spec field is read off an instance, and how its values map to the spec's."""

    name: str
    read: CallPath | None
    """None: the implementation keeps this field to itself (`observe = false`); it is
    modelled, and never compared."""
    values: Mapping[str, tuple[Any, ...]]
    """Spec member name -> the implementation's values that mean it ("OPEN" -> ("open",
    "half_open") where the library tells apart what the spec does not)."""

    @property
    def observed(self) -> bool:
        return self.read is not None


@dataclass(frozen=True)
class EventCall:
    """How one spec event is performed on an instance: a call path, and the exceptions the
    call is *performed with* (`reraises`: a wrapped function that fails, which the library
    passes on by design). Those are the event's input, not its outcome: the bound call
    catches them, and reports a call that should have passed one on and did not."""

    name: str
    call: CallPath
    reraises: tuple[str, ...] = ()


@dataclass(frozen=True)
class Announcer:
    """One way the real class announces a notification. A callback: handed to the class as a
    constructor keyword (`form = "param"`), to a method called once after construction
    (`"register"`), or set as an attribute (`"attribute"`); it receives `skip` leading
    arguments of its own (the breaker itself), then the notification's arguments, positional
    in declared order or by name. A log line (`"logger"`): a `logging` record on the logger
    named `target`, whose message must be the notification's `text`."""

    notification: str
    form: str
    target: str
    skip: int = 0
    where: Location | None = field(default=None, compare=False, repr=False)
    """Where the binding names it (a constructor keyword it passes is checked against the class)."""

    @property
    def channel(self) -> str:
        """How the announcement is told apart from others: the notification's name for a
        callback, the logger for a log line (one logger may carry several notifications)."""
        return f"log {self.target}" if self.form == "logger" else self.notification


@dataclass(frozen=True)
class Binding:
    target: str | None
    instances: Instances
    construct: tuple[tuple[str, CallPath], ...]
    fields: Mapping[str, FieldRead]
    events: Mapping[str, EventCall]
    announcers: tuple[Announcer, ...] = ()
    """`[implementation.notifications]`: how each observed notification is announced; a
    notification with none is modelled and never compared."""
    construct_where: Location | None = None
    """Where the spec says how the class is built (its `construct`, else `[implementation]`):
    what a construction that fails names."""
    target_where: Location | None = None
    """Where the spec names its `target`: what a target that cannot be loaded names."""
    unknown_index: UnknownIndex = "binding"
    """Who refuses a call naming an index the fleet does not have (the model raises KeyError):
    "binding", the binding itself, so the class never sees one; "refused" (indexed classes),
    the class, which gets the index as it is and must raise (any exception is its KeyError):
    a class whose list of children is indexed by -1 without a check goes on with the last."""

    def observes(self, field: str) -> bool:
        """Whether conformance and the generated tests can read `field` off the implementation."""
        read = self.fields.get(field)
        return read is None or read.observed


# --- loading ------------------------------------------------------------------------------


def parse_binding(source: SpecSource, spec: Spec) -> Binding | None:
    """The spec file's `[implementation]` table, validated against its first variant, or None."""
    table = source.data.get("implementation")
    if table is None:
        return None
    return _Parser(source, spec).binding(table)


class _Parser:
    def __init__(self, source: SpecSource, spec: Spec) -> None:
        self.source = source
        self.spec = spec

    def fail(self, keys: KeyPath, message: str) -> SpecError:
        return self.source.error(keys, message)

    def table(self, value: Any, keys: KeyPath) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(keys, f"[{'.'.join(map(str, keys))}] must be a table")
        return value

    def string(self, value: Any, keys: KeyPath) -> str:
        if not isinstance(value, str):
            raise self.fail(keys, f"{keys[-1]!r} must be a string, not {type(value).__name__}")
        return value

    def known(self, table: Mapping[str, Any], keys: KeyPath, allowed: tuple[str, ...]) -> None:
        for key in table:
            if key not in allowed:
                raise self.fail(
                    (*keys, key),
                    f"unknown key {key!r} in [{'.'.join(map(str, keys))}]{did_you_mean(key, allowed)}; "
                    f"it may have {', '.join(allowed)}",
                )

    def binding(self, raw: Any) -> Binding:
        top: KeyPath = ("implementation",)
        table = self.table(raw, top)
        self.known(table, top, _KEYS)
        target = self.string(table["target"], (*top, "target")) if "target" in table else None
        instances = table.get("instances", "indexed")
        if instances not in ("indexed", "each"):
            raise self.fail((*top, "instances"), f"instances must be 'indexed' or 'each', not {instances!r}")
        unknown = table.get("unknown_index", "binding")
        if unknown not in ("binding", "refused"):
            raise self.fail((*top, "unknown_index"), f"unknown_index must be 'binding' or 'refused', not {unknown!r}")
        if unknown == "refused" and instances != "indexed":
            raise self.fail(
                (*top, "unknown_index"),
                'unknown_index = "refused" needs instances = "indexed" (one object per instance has no object '
                "for an index the fleet does not have)",
            )
        construct = tuple(
            (name, self.construct_path(value, (*top, "construct", name)))
            for name, value in self.table(table.get("construct", {}), (*top, "construct")).items()
        )
        fields = {
            name: self.field(name, value, (*top, "fields", name))
            for name, value in self.table(table.get("fields", {}), (*top, "fields")).items()
        }
        events = {
            name: self.event(name, value, (*top, "events", name))
            for name, value in self.table(table.get("events", {}), (*top, "events")).items()
        }
        notifications = self.table(table.get("notifications", {}), (*top, "notifications"))
        announcers = tuple(
            announcer
            for name, value in notifications.items()
            for announcer in self.announcers(name, value, (*top, "notifications", name))
        )
        built_at = self.source.lines.where((*top, "construct") if "construct" in table else top)
        named_at = self.source.lines.where((*top, "target")) if "target" in table else None
        return Binding(target, instances, construct, fields, events, announcers, built_at, named_at, unknown)

    def construct_path(self, raw: Any, keys: KeyPath) -> CallPath:
        """A `construct` path: the class does not exist yet, so every name in it must be one
        the binding knows (a policy constant, the instance count, a helper, a built-in
        exception); anything else is refused here, with its line, not when conform builds."""
        path = self.path(raw, keys)
        known = [*self.spec.policy, *INSTANCE_COUNT, *_HELPERS]
        names = [node.id for node in ast.walk(path.tree) if isinstance(node, ast.Name)]
        for name in names:
            if name not in known and builtin_exception(name, BaseException) is None:
                raise self.fail(
                    keys,
                    f"{path.text!r} names {name!r}, which a construct path cannot read{did_you_mean(name, known)}: "
                    f"it may name the policy constants, the instance count ({' or '.join(INSTANCE_COUNT)}), "
                    f"{' and '.join(_HELPERS)}, and built-in exceptions",
                )
        return path

    def announcers(self, name: str, raw: Any, keys: KeyPath) -> list[Announcer]:
        """`name = { param = "on_open" }`, or a list of such tables (announced several ways)."""
        declared = self.spec.notifications
        if name not in declared:
            hint = did_you_mean(name, declared) if declared else "; the spec declares no [notifications]"
            raise self.fail(keys, f"{name!r} is not a notification of the spec{hint}")
        items = raw if isinstance(raw, list) and raw else [raw]
        found = []
        for item in items:
            table = self.table(item, keys)
            self.known(table, keys, (*_ANNOUNCE_FORMS, "skip"))
            forms = [form for form in _ANNOUNCE_FORMS if form in table]
            if len(forms) != 1:
                raise self.fail(
                    keys, f"notification {name!r} is announced one way per table: {' | '.join(_ANNOUNCE_FORMS)}"
                )
            form = forms[0]
            target = self.string(table[form], (*keys, form))
            if not all(part.isidentifier() and not part.startswith("_") for part in target.split(".")):
                raise self.fail((*keys, form), f"{form} must be a public Python name, not {target!r}")
            if form == "param" and "." in target:
                raise self.fail((*keys, form), f"{form} is a plain name, not {target!r}")
            skip = table.get("skip", 0)
            if not isinstance(skip, int) or isinstance(skip, bool) or not 0 <= skip <= 8:
                raise self.fail((*keys, "skip"), "skip is how many leading callback arguments to ignore: 0 to 8")
            if form == "logger":
                if "skip" in table:
                    raise self.fail((*keys, "skip"), "skip is for callbacks; a log line is compared by its text")
                if declared[name].log_format is None:
                    raise self.fail(
                        (*keys, form), f"notification {name!r} has no text: declare its log line's text to compare it"
                    )
            found.append(Announcer(name, form, target, skip, self.source.where(*keys, form)))
        return found

    def field(self, name: str, raw: Any, keys: KeyPath) -> FieldRead:
        known = {f.name: f for f in self.spec.fields}
        if name in {g.name for g in self.spec.globals}:
            raise self.fail(
                keys,
                f"{name!r} is a fleet value ([globals]), not a field: it is read off the class's attribute of "
                f"the same name, where the class has one (else a query returns it)",
            )
        if name not in known:
            raise self.fail(keys, f"{name!r} is not a field of the spec{did_you_mean(name, known)}")
        if isinstance(raw, str):
            return FieldRead(name, self.path(raw, keys), {})
        table = self.table(raw, keys)
        self.known(table, keys, ("read", "values", "observe"))
        observe = table.get("observe", True)
        if not isinstance(observe, bool):
            raise self.fail((*keys, "observe"), "observe must be true or false")
        if not observe:
            if len(table) != 1:
                raise self.fail(keys, f"field {name!r} is not observed: it has no read or values")
            return FieldRead(name, None, {})
        if "read" not in table:
            raise self.fail(keys, f'field {name!r} needs read = "attribute or call path" (or observe = false)')
        raw_values = self.table(table.get("values", {}), (*keys, "values"))
        values = {member: tuple(value) if isinstance(value, list) else (value,) for member, value in raw_values.items()}
        enum = known[name].type.enum
        if values and enum is None:
            kind = known[name].type
            raise self.fail((*keys, "values"), f"field {name!r} is a {kind}, not an enum: values map members")
        members = self.spec.enums[enum].members if enum is not None else ()
        for member in values:
            if member not in members:
                raise self.fail(
                    (*keys, "values", member),
                    f"{member!r} is not a member of {enum}{did_you_mean(member, members)}",
                )
        seen = [repr(v) for group in values.values() for v in group]
        if len(set(seen)) != len(seen):
            raise self.fail((*keys, "values"), "two members map to the same implementation value")
        return FieldRead(name, self.path(table["read"], (*keys, "read")), values)

    def event(self, name: str, raw: Any, keys: KeyPath) -> EventCall:
        if name not in self.spec.events:
            raise self.fail(keys, f"{name!r} is not an event of the spec{did_you_mean(name, self.spec.events)}")
        if isinstance(raw, str):
            return EventCall(name, self.path(raw, keys))
        table = self.table(raw, keys)
        self.known(table, keys, ("call", "reraises"))
        if "call" not in table:
            raise self.fail(keys, f'event {name!r} needs call = "call path"')
        raw_errors = table.get("reraises", [])
        errors = [raw_errors] if isinstance(raw_errors, str) else raw_errors
        if not isinstance(errors, list) or not all(isinstance(e, str) and e.isidentifier() for e in errors):
            raise self.fail((*keys, "reraises"), "reraises is an exception name or a list of them")
        return EventCall(name, self.path(table["call"], (*keys, "call")), tuple(errors))

    def path(self, raw: Any, keys: KeyPath) -> CallPath:
        text = self.string(raw, keys)
        if len(text) > MAX_EXPRESSION:
            raise self.fail(keys, f"a call path of {len(text)} characters (at most {MAX_EXPRESSION})")
        try:
            tree = ast.parse(text.strip(), mode="eval").body
        except SyntaxError as exc:
            raise self.fail(keys, f"{text!r} is not a call path: {exc.msg}") from None
        bad = _first_unsupported(tree)
        if bad is not None:
            raise self.fail(
                keys,
                f"{text!r}: {bad} is not allowed in a call path "
                "(names, attributes, subscripts, calls and constants only)",
            )
        return CallPath(text, tree, self.source.lines.where(keys))


def _first_unsupported(node: ast.expr) -> str | None:
    """The first construct outside the call-path language, named, or None."""
    if isinstance(node, ast.Name):
        return None if not node.id.startswith("_") else f"the private name {node.id!r}"
    if isinstance(node, ast.Constant):
        return None if isinstance(node.value, (str, int, float, bool, type(None))) else "this constant"
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            return f"the private attribute {node.attr!r}"
        return _first_unsupported(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return _first_unsupported(node.operand)
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, (ast.Slice, ast.Tuple)):
            return "a slice" if isinstance(node.slice, ast.Slice) else "a subscript by a tuple"
        return _first_unsupported(node.value) or _first_unsupported(node.slice)
    if isinstance(node, ast.Call):
        parts: list[ast.expr] = [node.func, *node.args, *(k.value for k in node.keywords)]
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return "unpacking (* or **)"
        for part in parts:
            bad = _first_unsupported(part)
            if bad is not None:
                return bad
        return None
    return f"a {type(node).__name__}"


# --- evaluating ---------------------------------------------------------------------------


def returning(value: Any) -> Callable[..., Any]:
    """A function that returns `value` whatever it is called with."""

    def function(*args: Any, **kwargs: Any) -> Any:
        return value

    return function


def raising(error: type[BaseException]) -> Callable[..., Any]:
    """A function that raises `error` whatever it is called with."""

    def function(*args: Any, **kwargs: Any) -> Any:
        raise error("raised by the bound call")

    return function


def evaluate(path: CallPath, receiver: Any, names: Mapping[str, Any]) -> Any:
    """Evaluate a call path against `receiver` (the instance) with `names` (arguments,
    policy constants) in scope."""
    return _eval(path.tree, receiver, names)


def _eval(node: ast.expr, receiver: Any, names: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp):
        return -_eval(node.operand, receiver, names)
    if isinstance(node, ast.Name):
        if node.id == SELF:
            return receiver
        if node.id in names:
            return names[node.id]
        if node.id == "returning":
            return returning
        if node.id == "raising":
            return raising
        error = builtin_exception(node.id, BaseException)
        if error is not None and not hasattr(receiver, node.id):
            return error
        found = _module_name(receiver, node.id)  # a name of the class's own module: its enum, a constant
        return getattr(receiver, node.id) if found is _UNKNOWN else found
    if isinstance(node, ast.Attribute):
        return getattr(_eval(node.value, receiver, names), node.attr)
    if isinstance(node, ast.Subscript):
        return _eval(node.value, receiver, names)[_eval(node.slice, receiver, names)]
    if isinstance(node, ast.Call):
        function = _eval(node.func, receiver, names)
        args = [_eval(a, receiver, names) for a in node.args]
        kwargs = {str(k.arg): _eval(k.value, receiver, names) for k in node.keywords}
        return function(*args, **kwargs)
    raise TypeError(f"not a call path: {ast.dump(node)}")  # excluded when the spec loaded


# --- showing what the binding does -------------------------------------------------------

_LITERALS = (int, float, str, bool, type(None))


class _Rendered(ast.NodeTransformer):
    """A call path as the Python it performs: a name in scope becomes its value, a leading
    name that is not one becomes an attribute of `receiver` (the object's variable)."""

    def __init__(self, receiver: str | None, names: Mapping[str, Any], bare: frozenset[str] = frozenset()) -> None:
        self.receiver = receiver
        self.names = names
        self.bare = bare

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id == SELF and self.receiver is not None:
            return ast.copy_location(ast.Name(self.receiver), node)
        if node.id in self.names:
            value = self.names[node.id]
            shown: ast.expr = ast.Constant(value) if isinstance(value, _LITERALS) else ast.Name(repr(value))
            return ast.copy_location(shown, node)
        if self.receiver is None or node.id in _HELPERS or node.id in self.bare:
            return node
        if builtin_exception(node.id, BaseException) is not None:
            return node
        return ast.copy_location(ast.Attribute(ast.Name(self.receiver), node.id, ast.Load()), node)


def render(path: CallPath, receiver: str | None, names: Mapping[str, Any], bare: frozenset[str] = frozenset()) -> str:
    """`path` as a line a user can paste (`job_table.complete(0, 1)`): what `evaluate` does
    with the same names, on the object called `receiver`; `bare` are the names of the class's
    module it reads (imported by the reproducer), left as they are."""
    tree = ast.parse(path.text.strip(), mode="eval").body
    return ast.unparse(_Rendered(receiver, names, bare).visit(tree))


def variable(class_name: str) -> str:
    """The variable a reproducer keeps an instance of `class_name` in (`JobTable` -> `job_table`)."""
    snake = "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(class_name))
    return snake if snake.isidentifier() and snake != "clock" else "instance"


# --- the adapter --------------------------------------------------------------------------


class BindingError(Exception):
    """The bound class cannot be built or called as the binding says (reported, like any
    construction failure, as an input error naming the binding)."""


_READING: ContextVar[Callable[[], float] | None] = ContextVar("ledgercheck_bound_clock", default=None)


class PatchedClock:
    """What a patched time source becomes: the clock of the bound fleet being called or
    read, else the original (so the patch can stay for the life of the process)."""

    def __init__(self, original: Callable[[], float]) -> None:
        self.original = original

    def __call__(self) -> float:
        clock = _READING.get()
        return clock() if clock is not None else self.original()


def _patch(target: str, home: ModuleType) -> None:
    """Replace the time source `target` (`module.function`) by one the bound class moves. A
    class loaded from a file (`path/sched.py:Scheduler`) lives in a module of its own name:
    `sched.monotonic` is patched there, not in a second copy imported as `sched` (whose
    clock the class never reads) or in none."""
    module_name, _, attribute = target.rpartition(".")
    module: Any
    if _is_home(home, module_name):
        module = home
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise BindingError(f"clock patch {target!r}: cannot import {module_name!r}: {exc}") from None
    if not hasattr(module, attribute):
        raise BindingError(f"clock patch {target!r}: {module_name} has no {attribute!r}")
    current = getattr(module, attribute)
    if isinstance(current, type) or not callable(current):
        what = f"the class {current.__name__}" if isinstance(current, type) else f"a {type(current).__name__}"
        raise BindingError(
            f"clock patch {target!r}: {module_name}.{attribute} is {what}, not a function returning the time: the "
            "patch replaces a function the class calls for the time (`time.monotonic`, `sched.monotonic`); a "
            "class read through a method (`datetime.now()`) cannot be driven this way"
        )
    if not isinstance(current, PatchedClock):
        setattr(module, attribute, PatchedClock(current))


def _is_home(home: ModuleType, name: str) -> bool:
    """Whether `name` is how a user names the class's own module (`_user_module_name`)."""
    return name in (home.__name__, _user_module_name(home))


def _user_module_name(home: ModuleType) -> str:
    """The name a user imports the class's module by: its import name, or for a class loaded
    from a file, the file's name without `.py` (not the name it was loaded under)."""
    file = getattr(home, "__file__", None)
    return Path(file).stem if home.__name__.startswith(FILE_MODULE_PREFIX) and file else home.__name__


@contextlib.contextmanager
def _reading(clock: Callable[[], float] | None) -> Iterator[None]:
    token = _READING.set(clock)
    try:
        yield
    finally:
        _READING.reset(token)


def _stopped() -> float:
    return 0.0


def _errors(names: tuple[str, ...], module: Any) -> tuple[type[BaseException], ...]:
    """Exception classes by name: built-ins, else the implementation's module's own."""
    found: list[type[BaseException]] = []
    for name in names:
        error = builtin_exception(name, BaseException) or getattr(module, name, None)
        if not (isinstance(error, type) and issubclass(error, BaseException)):
            raise BindingError(f"reraises {name!r}: neither a built-in exception nor one of {module.__name__}'s")
        found.append(error)
    return tuple(found)


Announced = tuple[str, int, Any]
"""One announcement heard: its channel (`Announcer.channel`), the instance index, and its
payload (a callback's argument values in declared order, or a log line's message)."""
MISSING_ARG = "<missing>"

_LISTENING: ContextVar[Callable[[str, str], None] | None] = ContextVar("ledgercheck_bound_log", default=None)
_LISTENED: set[str] = set()


class _LogListener(logging.Handler):
    """Passes a bound logger's records, as messages, to the bound instance being called (and
    drops them otherwise: the handler stays for the life of the process)."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.DEBUG)
        self.channel = f"log {name}"

    def emit(self, record: logging.LogRecord) -> None:
        sink = _LISTENING.get()
        if sink is not None:
            sink(self.channel, record.getMessage())


def _listen(name: str) -> None:
    """Hear every record of the logger `name`: a handler, and the logger's level lowered to
    DEBUG when it would drop some (a log line is an announcement whatever its level)."""
    if name in _LISTENED:
        return
    logger = logging.getLogger(name)
    logger.addHandler(_LogListener(name))
    if logger.getEffectiveLevel() > logging.DEBUG:
        logger.setLevel(logging.DEBUG)
    _LISTENED.add(name)


def enum_values(spec: Spec, binding: Binding, enum: str) -> dict[str, str]:
    """An implementation's values of a spec enum, by repr, to the member they mean: the
    member names, the enum's `api_values`, and the values a bound field of that enum maps."""
    decl = spec.enums[enum]
    found = {repr(m): m for m in decl.members} | {repr(v): m for m, v in decl.api_values.items()}
    for name, read in binding.fields.items():
        field_decl = next((f for f in spec.fields if f.name == name), None)
        if field_decl is not None and field_decl.type.enum == enum:
            found |= {repr(v): member for member, group in read.values.items() for v in group}
    return found


def heard_value(value: Any, values: Mapping[str, str] | None) -> Any:
    """A callback's argument as the spec writes it: an enum argument's value mapped to its
    member (a Python enum member by its name), anything else as it is."""
    if values is None:
        return value
    found = mapped(value, values)
    return value.name if found is value and isinstance(value, enum.Enum) else found


def mapped(value: Any, table: Mapping[str, str]) -> Any:
    """`value` as a table of implementation values (by repr) maps it, or `value` itself: a
    Python enum member by its name or its value (`Exit.FENCED = "fenced"` is found under
    "fenced"), whichever the table has."""
    if isinstance(value, enum.Enum):
        for key in (repr(value.name), repr(value.value)):
            if key in table:
                return table[key]
        return value
    return table.get(repr(value), value)


def expected_announcements(
    binding: Binding, spec: Spec, notices: Sequence[tuple[str, int, tuple[Any, ...]]]
) -> list[Announced]:
    """What the bound class should have heard for the model's announcements `notices`
    (name, shard, arguments): one entry per way the binding announces each notification;
    notifications it does not bind are not observed."""
    found: list[Announced] = []
    for name, shard, args in notices:
        for announcer in binding.announcers:
            if announcer.notification != name:
                continue
            if announcer.form == "logger":
                decl = spec.notifications[name]
                found.append(
                    (
                        announcer.channel,
                        shard,
                        decl.render(dict(zip([p.name for p in decl.params], args, strict=True)), shard),
                    )
                )
            else:
                found.append((announcer.channel, shard, args))
    return found


def by_channel(announced: Sequence[Announced]) -> tuple[tuple[str, tuple[tuple[int, Any], ...]], ...]:
    """Announcements as compared: in order within each channel (a callback is called in the
    order the class announces, a logger logs in order; the order *between* a callback and a
    log line of one announcement is the class's own business)."""
    channels: dict[str, list[tuple[int, Any]]] = {}
    for channel, index, payload in announced:
        channels.setdefault(channel, []).append((index, payload))
    return tuple((channel, tuple(items)) for channel, items in sorted(channels.items()))


# --- checking a binding against the class ------------------------------------------------

_UNKNOWN: Any = object()
"""A value the binding check cannot know: an event's argument, the result of a call it does
not make."""


class _NotCallable(Exception):
    """A path calls what is not a function (`idle_count()`, where `idle_count` is a property)."""

    def __init__(self, node: ast.expr, value: Any) -> None:
        super().__init__(ast.unparse(node))
        self.node = node
        self.value = value


class _Missing(Exception):
    """An attribute a path names that the object it is looked up on lacks."""

    def __init__(self, node: ast.expr, owner: Any, name: str) -> None:
        super().__init__(name)
        self.node = node
        self.owner = owner
        self.name = name


def _attribute(owner: Any, name: str, node: ast.expr) -> Any:
    """`getattr`, where only the lookup itself failing is the binding's mistake: an error
    raised by the class's own code (a property) is the class's, found when compared."""
    try:
        return getattr(owner, name)
    except AttributeError as exc:
        if getattr(exc, "name", name) == name and getattr(exc, "obj", owner) is owner:
            raise _Missing(node, owner, name) from None
        return _UNKNOWN
    except Exception:
        return _UNKNOWN


def _probe(node: ast.expr, receiver: Any, names: Mapping[str, Any], perform: bool) -> Any:
    """`_eval` as the binding check runs it: every attribute a path names is looked up (one
    missing raises `_Missing`); a call is made only where `perform` and every value it needs
    is known (an event's own call never is), and what the class's code raises is unknown."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp):
        return _eval(node, receiver, names)
    if isinstance(node, ast.Name):
        if node.id == SELF:
            return receiver
        if node.id in names or node.id in _HELPERS or builtin_exception(node.id, BaseException) is not None:
            return _eval(node, receiver, names)
        found = _module_name(receiver, node.id)
        return _attribute(receiver, node.id, node) if found is _UNKNOWN else found
    if isinstance(node, ast.Attribute):
        base = _probe(node.value, receiver, names, True)
        return _UNKNOWN if base is _UNKNOWN else _attribute(base, node.attr, node)
    if isinstance(node, ast.Subscript):
        base = _probe(node.value, receiver, names, True)
        key = _probe(node.slice, receiver, names, True)
        if base is _UNKNOWN or key is _UNKNOWN:
            return _UNKNOWN
        try:  # a key the container lacks yet (a table filled on first use) is not the binding's mistake
            return base[key]
        except Exception:
            return _UNKNOWN
    if isinstance(node, ast.Call):
        function = _probe(node.func, receiver, names, True)
        if function is not _UNKNOWN and not callable(function):
            raise _NotCallable(node.func, function)
        args = [_probe(a, receiver, names, True) for a in node.args]
        kwargs = {str(k.arg): _probe(k.value, receiver, names, True) for k in node.keywords}
        if not perform or any(v is _UNKNOWN for v in (function, *args, *kwargs.values())):
            return _UNKNOWN
        try:
            return function(*args, **kwargs)
        except Exception:
            return _UNKNOWN
    return _UNKNOWN


def _module_name(receiver: Any, name: str) -> Any:
    """`name` in the module the receiver's class is defined in (`CancelMode`, for a call path
    `cancel(i, CancelMode(mode))`), where the receiver has no attribute of that name (the
    instance's come first); else `_UNKNOWN`."""
    if hasattr(receiver, name):
        return _UNKNOWN
    module = sys.modules.get(getattr(type(receiver), "__module__", ""), None)
    return getattr(module, name, _UNKNOWN) if module is not None else _UNKNOWN


def _short(value: Any) -> str:
    """A value in a binding error: short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _public(owner: Any) -> list[str]:
    try:
        return [name for name in dir(owner) if not name.startswith("_")]
    except Exception:
        return []


def _unfollowed(path: CallPath, receiver: Any, names: Mapping[str, Any], perform: bool, needed_by: str) -> list[str]:
    """What `path` names that the class lacks, as a binding error (file:line, what is missing,
    a did-you-mean from the object's attributes), or nothing."""
    try:
        _probe(path.tree, receiver, names, perform)
    except _NotCallable as called:
        where = f"{path.where}: " if path.where is not None else ""
        text = ast.unparse(called.node)
        return [
            f"{where}{needed_by}'s path {path.text!r} calls {text}, which is a {type(called.value).__name__} "
            f"({_short(called.value)}), not a function: drop the ()"
        ]
    except _Missing as missing:
        node = missing.node
        owner = type(receiver).__name__
        if missing.owner is not receiver and isinstance(node, ast.Attribute):
            owner = f"{ast.unparse(node.value)}, a {type(missing.owner).__name__},"
        candidates = _public(missing.owner) + (list(names) if isinstance(node, ast.Name) else [])
        where = f"{path.where}: " if path.where is not None else ""
        return [
            f"{where}the implementation has no {ast.unparse(node)} (needed by {needed_by}: {path.text!r}): "
            f"{owner} has no attribute {missing.name!r}{did_you_mean(missing.name, candidates)}"
        ]
    return []


def _head(tree: ast.expr) -> ast.Name | None:
    """The name a path starts from (`max_size` in `max_size`, `pool` in `pool.slots[i].size`)."""
    node = tree
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node if isinstance(node, ast.Name) else None


def _unread_instance(path: CallPath, obj: Any, names: Mapping[str, Any], policy: Any, field_name: str) -> list[str]:
    """A read path that would not read the implementation, as a binding error: one whose every
    name is a policy constant, the index or a helper (it compares the model with a constant),
    or one that starts from such a name while the object has an attribute of that name too
    (`capacity = "max_size"` read the policy's max_size, never the pool's)."""
    where = f"{path.where}: " if path.where is not None else ""
    head = _head(path.tree)
    if head is not None and head.id != SELF and head.id in names and _has(obj, head.id):
        what = f"the policy constant {head.id}" if head.id in policy else "the instance index"
        return [
            f"{where}field {field_name}'s read path {path.text!r} starts from {head.id!r}, which is {what} "
            f"there, while {type(obj).__name__} has an attribute {head.id!r} too: write self.{head.id} to read "
            "the implementation's"
        ]

    def of_instance(name: str) -> bool:
        known = name in names or name in _HELPERS or builtin_exception(name, BaseException) is not None
        return name == SELF or not known

    if not any(isinstance(n, ast.Name) and of_instance(n.id) for n in ast.walk(path.tree)):
        return [
            f"{where}field {field_name}'s read path {path.text!r} reads nothing of the implementation (its names "
            "are policy constants or the index): it would compare the model with a constant"
        ]
    return []


def _uncallable(method: Callable[..., Any], event: Event, binding: Binding, target_name: str) -> list[str]:
    """An event called by its own name whose method cannot take the call as it is made (the
    index first where indexed, then the spec's arguments): a binding error, not a divergence
    of every trace that calls it."""
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):
        return []
    leading = ["index"] if binding.instances == "indexed" else []
    positional = [*leading, *(p.name for p in event.signature.params if not p.keyword_only)]
    keywords = {p.name: p.name for p in event.signature.params if p.keyword_only}
    try:
        signature.bind(*positional, **keywords)
    except TypeError as exc:
        made = ", ".join([*positional, *(f"{k}=..." for k in keywords)])
        indexed = ' (instances = "indexed" passes the index first)' if leading else ""
        where = f"{binding.construct_where}: " if binding.construct_where is not None else ""
        return [
            f"{where}event {event.name} is called as {event.name}({made}){indexed}, which "
            f"{target_name}.{event.name}{signature} does not take ({exc}); bind it under "
            "[implementation.events], or set instances"
        ]
    return []


def _has(obj: Any, name: str) -> bool:
    """Whether `obj.name` can be read (a property that raises something else counts: the
    comparison reports what it raises)."""
    try:
        getattr(obj, name)
    except AttributeError:
        return False
    except Exception:  # noqa: BLE001 - the class's own error, reported where it is compared
        return True
    return True


def _unbound_field(binding: Binding, name: str, obj: Any, target_name: str) -> str:
    """A field `[implementation.fields]` does not bind, which the class lacks as an attribute
    (what an unbound field is read as): a binding error, with how to bind it."""
    where = f"{binding.construct_where}: " if binding.construct_where is not None else ""
    how = (
        f"; an indexed binding reads an unbound field off the one object for every instance: bind it with a "
        f'read path that names the index (`{name} = "...(i).{name}"` under [implementation.fields])'
        if binding.instances == "indexed"
        else f" (bind it under [implementation.fields], or `{name} = {{ observe = false }}` to leave it unread)"
    )
    return (
        f"{where}the implementation has no {name} (needed by field {name}, which [implementation.fields] does not "
        f"bind, so it is read as the attribute {name!r}): {target_name} has no attribute {name!r}"
        f"{did_you_mean(name, _public(obj))}{how}"
    )


def _check_construct(binding: Binding, target: Callable[..., Any], clock: Any = None) -> None:
    """A construct keyword the class does not take is the binding's mistake: refused when the
    class is bound, naming its line, not reported by every trace as a failed construction."""
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return
    anything = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    takes = [
        name
        for name, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    passed = [("construct", name, path.where) for name, path in binding.construct]
    passed += [(f"notification {a.notification!r}", a.target, a.where) for a in binding.announcers if a.form == "param"]
    if clock is not None and clock.drive_param is not None:
        passed.append(("[clock] drive", clock.drive_param, clock.drive_where))
    shown = f"{getattr(target, '__name__', target)}({', '.join(takes + (['**kwargs'] if anything else []))})"
    for what, name, at in passed:
        if name in takes:
            continue
        where = f"{at}: " if at is not None else ""
        if not anything:
            raise BindingError(f"{where}{what} passes {name}=, which {shown} does not take{did_you_mean(name, takes)}")
        # A class that takes any keyword (a library's base class passes them on) swallows a
        # misspelt one: the policy it was to set never reaches the class. Nearly the name of
        # one it does take is taken for that mistake.
        close = difflib.get_close_matches(name, takes, n=1, cutoff=0.8)
        if close:
            raise BindingError(
                f"{where}{what} passes {name}=, which {shown} takes only through **kwargs, where a misspelt "
                f"keyword is swallowed (did you mean {close[0]!r}?)"
            )


def _shown(value: Any) -> str:
    """A constructor argument in a message: its repr, a class by name, a callback as `...`."""
    if isinstance(value, type):
        return value.__name__
    return "..." if callable(value) else repr(value)


# --- the adapter's helpers ----------------------------------------------------------------


def _defaults(event: Event) -> dict[str, Any]:
    """The event's arguments that have defaults, with them: a bound call gets every argument
    of the event, the ones a caller leaves out (the generated tests do) included."""
    return {p.name: p.default for p in event.signature.params if p.has_default}


def _index_names(spec: Spec) -> frozenset[str]:
    """The spec's names for the instance parameter (the `i` of `call = "lease(i)"`): a read
    path is no event's, so it reads the index by any of them."""
    return frozenset(event.signature.shard_param for event in spec.events.values())


def _imports(binding: Binding, spec: Spec) -> list[str]:
    """What a reproducer of the binding's calls imports besides the user's class: the helpers
    its paths name, `contextlib` for the errors a call passes on, the clock and its patch."""
    used = {
        node.id for call in binding.events.values() for node in ast.walk(call.call.tree) if isinstance(node, ast.Name)
    }
    helpers = sorted(used & set(_HELPERS))
    lines = ["import contextlib"] if any(call.reraises for call in binding.events.values()) else []
    if spec.clock is not None and spec.clock.drive_patch is not None:
        lines.append(f"import {spec.clock.drive_patch.rpartition('.')[0]}")
    if helpers:
        lines.append(f"from ledgercheck.model.binding import {', '.join(helpers)}")
    if spec.clock is not None:
        lines.append("from ledgercheck.model.conformance import ManualClock")
    return lines


def bound_class(binding: Binding, spec: Spec, target: Callable[..., Any]) -> type:
    """A class with the ledger's API whose instances drive `target` as `binding` says."""
    _check_construct(binding, target, spec.clock)
    fields = [f.name for f in spec.fields if binding.observes(f.name)]
    reverse = {
        name: {repr(v): member for member, group in read.values.items() for v in group}
        for name, read in binding.fields.items()
    }
    event_params = {name: [p.name for p in event.signature.params] for name, event in spec.events.items()}
    defaults = {name: _defaults(event) for name, event in spec.events.items()}
    index_names = _index_names(spec)
    home = importlib.import_module(getattr(target, "__module__", "builtins"))
    passed_on = {name: _errors(call.reraises, home) for name, call in binding.events.items()}
    drive = spec.clock
    if drive is not None and drive.drive_patch is not None:
        _patch(drive.drive_patch, home)
    enums = {name: enum_values(spec, binding, name) for name in spec.enums}
    api_value = {
        event.name: {
            p.name: spec.enums[p.type.enum].api_values
            for p in event.signature.params
            if p.type.enum is not None and p.type.enum in spec.enums
        }
        for event in spec.events.values()
    }

    def as_passed(event: str, name: str, value: Any) -> Any:
        """An argument as the class is handed it: an enum member by its API value (the enum's
        `api_values`, else its name), anything else as it is."""
        table = api_value[event].get(name)
        return table.get(value, value) if table is not None and isinstance(value, str) else value

    def passed_args(
        event: str, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A call of the event's own method (no call path), its arguments `as_passed`."""
        params = event_params[event]
        positional = tuple(as_passed(event, params[n], v) if n < len(params) else v for n, v in enumerate(args))
        return positional, {k: as_passed(event, k, v) for k, v in kwargs.items()}

    for announcer in binding.announcers:
        if announcer.form == "logger":
            _listen(announcer.target)
    target_name = getattr(target, "__name__", "Implementation")
    imports = _imports(binding, spec)
    # Names of the class's own module an event's path reads (its enum, say): bare in a reproducer,
    # which imports them beside the class.
    from_module = frozenset(
        n.id
        for call in binding.events.values()
        for n in ast.walk(call.call.tree)
        if isinstance(n, ast.Name) and not hasattr(target, n.id) and hasattr(home, n.id)
    )
    if from_module:
        imports = [f"from {_user_module_name(home)} import {', '.join(sorted(from_module))}", *imports]

    queries = {q.api for q in spec.queries.values() if q.api}  # the one object's own methods
    # One object per instance: a shard query is each object's own predicate (`may_start()`).
    per_object = {q.api for q in spec.queries.values() if q.api and not q.fleet}
    fleet_values = {g.name for g in spec.globals}  # read off the one object's attribute of that name

    class Bound:
        """Built from the spec's [implementation] table (see `model.binding`)."""

        def __init__(
            self,
            shard_count: int,
            policy: Any,
            base_urls: list[str] | None = None,
            clock: Callable[[], float] | None = None,
        ) -> None:
            del base_urls  # the ledger's constructor argument: a bound class has no addresses
            self._policy = {name: getattr(policy, name) for name in spec.policy} if policy is not None else {}
            self._clock = clock or _stopped
            count = shard_count if binding.instances == "each" else 1
            self.notifications: list[Announced] = []
            self._performing: int | None = None
            self._count = shard_count
            self._objects = [self._build(i) for i in range(count)]

        def _build(self, index: int) -> Any:
            names = {**dict.fromkeys(INSTANCE_COUNT, self._count), **self._policy}
            kwargs = {name: evaluate(path, None, names) for name, path in binding.construct}
            if drive is not None and drive.drive_param is not None:
                kwargs[drive.drive_param] = self._clock
            callbacks = [(a, self._callback(a, index)) for a in binding.announcers if a.form != "logger"]
            kwargs.update({a.target: callback for a, callback in callbacks if a.form == "param"})
            with _reading(self._clock):
                try:
                    obj = target(**kwargs)
                except Exception as exc:
                    raise self._not_built(kwargs, exc) from exc
                for announcer, callback in callbacks:
                    # `register = "machine.on_enter_failed"`: a method reached through attributes
                    # (a `transitions` machine's per-state callbacks); `attribute` likewise.
                    *path, last = announcer.target.split(".")
                    try:
                        owner = functools.reduce(getattr, path, obj)
                        if announcer.form == "register":
                            getattr(owner, last)(callback)
                        elif announcer.form == "attribute":
                            setattr(owner, last, callback)
                    except AttributeError as exc:
                        raise BindingError(
                            f"{announcer.where}: notification {announcer.notification!r}: {announcer.form} "
                            f"{announcer.target!r} cannot be followed on {type(obj).__name__}: {exc}"
                        ) from None
            return obj

        @staticmethod
        def _not_built(kwargs: Mapping[str, Any], error: Exception) -> BindingError:
            """The construction that failed, as the binding performs it: the user's class and
            the binding's line, not the ledger's API."""
            where = f"{binding.construct_where}: " if binding.construct_where is not None else ""
            shown = ", ".join(f"{k}={_shown(v)}" for k, v in kwargs.items())
            return BindingError(
                f"{where}{target_name}({shown}), as the binding constructs it, raised {type(error).__name__}: {error}"
            )

        def _heard(self, channel: str, index: int | None, payload: Any) -> None:
            """Keep an announcement made during a call (one made while the class is built or
            read is no call's announcement)."""
            if self._performing is not None:
                where = self._performing if index is None or binding.instances == "indexed" else index
                self.notifications.append((channel, where, payload))

        def _callback(self, announcer: Announcer, index: int) -> Callable[..., None]:
            params = [(p.name, p.type.enum) for p in spec.notifications[announcer.notification].params]

            def callback(*args: Any, **kwargs: Any) -> None:
                # After `skip` arguments of its own: the notification's, positional in declared
                # order, or by name (an argument not given is `<missing>`, and differs).
                given = dict(zip([name for name, _ in params], args[announcer.skip :], strict=False))
                given.update(kwargs)
                payload = tuple(
                    heard_value(given.get(name, MISSING_ARG), enums[enum] if enum is not None else None)
                    for name, enum in params
                )
                self._heard(announcer.channel, index, payload)

            return callback

        def _object(self, index: Any) -> Any:
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < self._count:
                raise KeyError(index)
            return self._objects[index if binding.instances == "each" else 0]

        def _unknown_number(self, index: Any) -> bool:
            """An int index outside the fleet (an indexed class gets it, to refuse it)."""
            return isinstance(index, int) and not isinstance(index, bool) and not 0 <= index < self._count

        def _read_names(self, index: Any) -> dict[str, Any]:
            """What a read path's names mean besides the object's attributes: the index (as
            `index` and by the spec's names for it), then the policy constants."""
            return {INDEX: index, **dict.fromkeys(index_names, index), **self._policy}

        def _call_names(self, event: Event, index: Any, given: Mapping[str, Any]) -> dict[str, Any]:
            return Bound.call_names(event.name, index, given, self._policy)

        @staticmethod
        def call_names(event: str, index: Any, given: Mapping[str, Any], policy: Mapping[str, Any]) -> dict[str, Any]:
            """What an event's call path's names mean: every argument of the event (defaults
            filled in), the policy constants, and for an indexed binding the index (as `index`
            and by the event's own name for it)."""
            passed = {name: as_passed(event, name, value) for name, value in {**defaults[event], **given}.items()}
            names: dict[str, Any] = {**policy, **passed}
            if binding.instances == "indexed":
                names.setdefault(INDEX, index)
                names.setdefault(spec.events[event].signature.shard_param, index)
            return names

        def _read(self, index: int, name: str) -> Any:
            read = binding.fields.get(name)
            obj = self._object(index)
            if read is None:
                return getattr(obj, name)
            if read.read is None:
                raise AttributeError(f"the binding does not observe {name!r}")
            with _reading(self._clock):
                value = evaluate(read.read, obj, self._read_names(index))
            if read.values:
                return mapped(value, reverse[name])
            return value

        @contextlib.contextmanager
        def _announcing(self, index: int) -> Iterator[None]:
            """While a call runs: its callbacks are kept, and so are the records of the
            bound loggers."""
            self._performing = index
            token = _LISTENING.set(lambda channel, payload: self._heard(channel, None, payload))
            try:
                yield
            finally:
                _LISTENING.reset(token)
                self._performing = None

        def snapshot(self) -> list[SimpleNamespace]:
            return [SimpleNamespace(**{name: self._read(i, name) for name in fields}) for i in range(self._count)]

        def state_of(self, index: int) -> Any:
            return self._read(index, spec.state_field)

        def binding_problems(self) -> list[str]:
            """What the binding names that the class lacks, found on this instance before any
            comparison (a typo is bad input, exit 2, not a divergence of every trace): every
            read path followed on the first instance, every call path up to its own call,
            every event called by its own name found."""
            obj = self._object(0)
            problems: list[str] = []
            with _reading(self._clock):
                for name, read in binding.fields.items():
                    if read.read is not None:
                        problems += _unread_instance(read.read, obj, self._read_names(0), self._policy, name)
                        problems += _unfollowed(read.read, obj, self._read_names(0), True, f"field {name}")
                for name in fields:
                    if name not in binding.fields and not _has(obj, name):
                        problems.append(_unbound_field(binding, name, obj, target_name))
                for event in spec.events.values():
                    call = binding.events.get(event.name)
                    if call is None and not callable(getattr(obj, event.name, None)):
                        hint = did_you_mean(event.name, _public(obj))
                        problems.append(
                            f"the implementation has no {event.name} (needed by event {event.name}, which "
                            f"[implementation.events] does not bind): {target_name} has no method {event.name!r}{hint}"
                        )
                    elif call is None:
                        problems += _uncallable(getattr(obj, event.name), event, binding, target_name)
                    elif call is not None:
                        unknown = dict.fromkeys(event_params[event.name], _UNKNOWN)
                        names = self._call_names(event, 0, unknown)
                        problems += _unfollowed(call.call, obj, names, False, f"event {event.name}")
            return problems

        @staticmethod
        def construction_code(shard_count: int, policy: Mapping[str, Any]) -> list[str]:
            """The user's own construction, as the binding performs it: the clock it hands
            the class, each object built, each callback handed over (as `print`)."""
            lines = [*imports, "clock = ManualClock()"] if drive is not None else list(imports)
            if drive is not None and drive.drive_patch is not None:
                lines.append(f"{drive.drive_patch} = clock  # the binding patches the class's time source")
            names = {**dict.fromkeys(INSTANCE_COUNT, shard_count), **policy}
            kwargs = [f"{name}={render(path, None, names)}" for name, path in binding.construct]
            if drive is not None and drive.drive_param is not None:
                kwargs.append(f"{drive.drive_param}=clock")
            kwargs += [f"{a.target}=print" for a in binding.announcers if a.form == "param"]
            for obj in Bound.objects(shard_count):
                lines.append(f"{obj} = {target_name}({', '.join(kwargs)})")
                lines += [f"{obj}.{a.target}(print)" for a in binding.announcers if a.form == "register"]
                lines += [f"{obj}.{a.target} = print" for a in binding.announcers if a.form == "attribute"]
            return lines

        @staticmethod
        def read_code(field: str, index: int, shard_count: int, policy: Mapping[str, Any]) -> str | None:
            """A field's read on the user's object, as the binding reads it
            (`queue.messages[0].receive_count`); None for a field it does not observe."""
            read = binding.fields.get(field)
            if read is None or read.read is None or not 0 <= index < shard_count:
                return None
            obj = Bound.objects(shard_count)[index if binding.instances == "each" else 0]
            names = {INDEX: index, **dict.fromkeys(index_names, index), **policy}
            return render(read.read, obj, names, from_module)

        @staticmethod
        def query_per_object(api: str) -> bool:
            """Whether the query `api` is each object's own predicate (one object per
            instance): a reproducer prints it object by object, not as the list of instances."""
            return binding.instances == "each" and api in per_object

        @staticmethod
        def objects(shard_count: int) -> list[str]:
            """The variables of the objects a reproducer builds: one, or one per instance."""
            name = variable(target_name)
            return [name] if binding.instances == "indexed" else [f"{name}_{i}" for i in range(shard_count)]

        @staticmethod
        def call_code(
            event: str,
            index: int,
            args: Sequence[Any],
            kwargs: Mapping[str, Any],
            shard_count: int,
            policy: Mapping[str, Any],
        ) -> str:
            """One call of the ledger's API (`event(index, *args, **kwargs)`) as the binding
            performs it on the user's class; a call on an unknown instance reaches no object
            where there is one object per instance (an indexed class gets the index, and must
            refuse it)."""
            if not 0 <= index < shard_count and binding.unknown_index == "binding":
                return f"# {event}({index}): no instance {index}: the bound class raises KeyError"
            obj = Bound.objects(shard_count)[index if binding.instances == "each" else 0]
            call = binding.events.get(event)
            if call is None:
                leading = [index] if binding.instances == "indexed" else []
                args, kwargs = passed_args(event, args, kwargs)
                shown = [repr(v) for v in (*leading, *args)] + [f"{k}={v!r}" for k, v in kwargs.items()]
                return f"{obj}.{event}({', '.join(shown)})"
            given = {**dict(zip(event_params[event], args, strict=False)), **kwargs}
            line = render(call.call, obj, Bound.call_names(event, index, given, policy), from_module)
            passed = ", ".join(call.reraises)
            return f"with contextlib.suppress({passed}): {line}" if call.reraises else line

        def __getattr__(self, name: str) -> Any:
            if not name.startswith("_") and name in queries and binding.instances != "each":
                method = getattr(self._objects[0], name)  # the one object's own method

                def query() -> Any:
                    with _reading(self._clock):
                        return method()

                return query
            if not name.startswith("_") and name in per_object and binding.instances == "each":
                predicates = [getattr(obj, name) for obj in self._objects]

                def holding() -> list[int]:
                    with _reading(self._clock):
                        return [index for index, predicate in enumerate(predicates) if predicate()]

                return holding
            if not name.startswith("_") and name in fleet_values and binding.instances != "each":
                # A fleet value the class keeps as an attribute of the same name (`in_use`):
                # compared by conform and read by the generated tests' monitor. A pool class
                # that never gave back a broken connection's slot passed the generated tests
                # while the binding hid its count. A method of that name is no value: a query.
                with _reading(self._clock):
                    value = getattr(self._objects[0], name)
                if callable(value):
                    raise AttributeError(name)
                return value
            if name.startswith("_") or name not in spec.events:
                raise AttributeError(name)
            return self._event(spec.events[name])

        def _event(self, event: Event) -> Callable[..., Any]:
            call = binding.events.get(event.name)
            expected = passed_on.get(event.name, ())
            leading = binding.instances == "indexed"
            passes_unknown = binding.unknown_index == "refused"

            def perform(index: Any, *args: Any, **kwargs: Any) -> Any:
                if passes_unknown and self._unknown_number(index):
                    return refused(index, *args, **kwargs)
                return run(self._object(index), False, index, *args, **kwargs)

            def refused(index: int, *args: Any, **kwargs: Any) -> Any:
                """An index the fleet does not have, passed to the one object as it is: the
                model refuses it (KeyError), and so must the class, with any exception (a
                list indexed by -1 is its last child: a class that does not check goes on)."""
                try:
                    result = run(self._objects[0], True, index, *args, **kwargs)
                except Exception:  # noqa: BLE001 - any refusal is the model's KeyError
                    raise KeyError(index) from None
                return result

            def run(obj: Any, refusing: bool, index: Any, *args: Any, **kwargs: Any) -> Any:
                if call is None:  # the method of the event's name: the index first, if indexed
                    args, kwargs = passed_args(event.name, args, kwargs)
                    with _reading(self._clock), self._announcing(index):
                        return getattr(obj, event.name)(*((index,) if leading else ()), *args, **kwargs)
                given = {**dict(zip(event_params[event.name], args, strict=False)), **kwargs}
                names = self._call_names(event, index, given)
                with _reading(self._clock), self._announcing(index):
                    try:
                        result = evaluate(call.call, obj, names)
                    except expected:
                        if refusing:  # what the call passes on, raised on an index it does not have
                            raise
                        return None
                if expected and not refusing:
                    names_text = ", ".join(e.__name__ for e in expected)
                    raise BindingError(f"{event.name}: the call returned instead of passing on {names_text}")
                return result

            perform.__name__ = event.name
            return perform

    Bound.__name__ = Bound.__qualname__ = f"Bound{target_name}"
    return Bound


def resolve_target(text: str) -> Any:
    """`module:Class` or `module.Class` imported (the binding's `target`)."""
    module_name, sep, attribute = text.partition(":")
    if not sep:
        module_name, _, attribute = text.rpartition(".")
    module = importlib.import_module(module_name)
    value: Any = module
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


__all__ = [
    "Announced",
    "Announcer",
    "Binding",
    "BindingError",
    "CallPath",
    "EventCall",
    "FieldRead",
    "bound_class",
    "by_channel",
    "evaluate",
    "expected_announcements",
    "parse_binding",
    "raising",
    "resolve_target",
    "returning",
]
