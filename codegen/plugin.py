"""The pytest plugin that generated tests run under (registered by the package).

Options (each also by its neutral name, without `ledger-`: `--impl`, `--variant`,
`--conform`, `--conform-depth`, ...; the old names stay):
  --ledger-variant NAME      run against the executable model of another spec variant
  --ledger-impl TARGET       run against any implementation with the ledger's API:
                             `module:Class` or `path/to/file.py:Class`
  --ledger-call-timeout S    a call of the implementation that has not returned after S
                             seconds fails its test, named (default: conform's, 10 s; 0: none)
  --ledger-conform TARGET    add conformance tests of an implementation against the model
                             (`ledgercheck conform` as one test per trace; model.conformance.items)
  --ledger-outcomes DIR      note what each generated test did, from its check rather than
                             pytest's reports, in DIR (`ledgercheck ci`; codegen.outcomes)
The default is the executable model of the variant the test's expectations come from
(`fixed` for the bundled spec). The fixture `ledger_factory` is also `impl_factory`.

Every pytest run in an environment with ledgercheck installed loads this plugin, so it
imports the model (and Z3) only when one of its options or fixtures is used: the imports
of the model live inside the functions that need them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ledgercheck.codegen.meaning import Meaning
    from ledgercheck.model.conformance.monitor import LedgerCheck
    from ledgercheck.model.spec import SpecFile

LedgerFactory = Callable[..., tuple[Any, "LedgerCheck"]]
ImplFactory = LedgerFactory


def _neutral(option: str) -> str:
    """`--ledger-impl` -> `--impl`: the option's name for any state machine."""
    return "--" + option.removeprefix("--ledger-")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ledgercheck", "ledgercheck generated tests")

    def add(name: str, **options: Any) -> None:
        group.addoption(name, _neutral(name), **options)

    add(
        "--ledger-variant",
        default=None,
        metavar="NAME",
        help="run generated tests against the executable model of this spec variant",
    )
    add(
        "--ledger-impl",
        default=None,
        metavar="TARGET",
        help="run generated tests against module:Class or path/to/file.py:Class",
    )
    add(
        "--ledger-call-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a call of the implementation that has not returned after this long fails its test "
        "(default: conform's --call-timeout; 0: none)",
    )
    add(
        "--ledger-conform",
        default=None,
        metavar="TARGET",
        help="add conformance tests of module:Class or path/to/file.py:Class against the model "
        "(the variant of --ledger-variant, default: the one whose properties all hold)",
    )
    add(
        "--ledger-conform-spec",
        default=None,
        metavar="PATH",
        help="spec file (default: bundled)",
    )
    add(
        "--ledger-conform-depth",
        type=int,
        default=None,
        metavar="D",
        help="enumerate every call sequence up to D (default: that of `ledgercheck conform`; 0: none)",
    )
    add(
        "--ledger-conform-shards",
        type=int,
        default=None,
        metavar="N",
        help="fleet size",
    )
    add(
        "--ledger-conform-random",
        type=int,
        default=300,
        metavar="N",
        help="random calls in all (default 300)",
    )
    add(
        "--ledger-conform-seed",
        type=int,
        default=0,
        metavar="S",
        help="random seed (default 0)",
    )
    add(
        "--ledger-conform-counterexamples",
        action="store_true",
        help="also replay every counterexample of the checker (slow the first time; cached like `conform`)",
    )
    add(
        "--ledger-outcomes",
        default=None,
        metavar="DIR",
        help="write what each generated test did, read from its check and not from pytest's reports, to a file "
        "in DIR (`ledgercheck ci` judges the tests by it)",
    )


_CONFIGURED: dict[str, pytest.Config] = {}
"""This process's runs: the `first` configured (a later one is an in-process run inside a
test: never watched, its process is the outer run's), and the one `watched` (in the child
that runs the tests, `codegen.guard`)."""


def pytest_configure(config: pytest.Config) -> None:
    """The first run of the process, against an implementation, is watched from a parent
    process (`codegen.guard`): the implementation cannot end it with a pass."""
    if _CONFIGURED.setdefault("first", config) is not config:
        return
    drives = config.getoption("--ledger-impl", default=None) or config.getoption("--ledger-conform", default=None)
    if drives and not hasattr(config, "workerinput"):  # an xdist worker: its controller watches
        from ledgercheck.codegen import guard

        if guard.possible():
            guard.watch(config)
            _CONFIGURED["watched"] = config


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    watched = _CONFIGURED.get("watched")
    if watched is not None:
        from ledgercheck.codegen import guard

        guard.starting(watched, nodeid)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """`--ledger-outcomes DIR`: this process's notes of the generated tests it ran."""
    folder = session.config.getoption("--ledger-outcomes", default=None)
    if folder and _NOTES:
        from ledgercheck.codegen import outcomes

        outcomes.write(Path(folder), _NOTES)
        _NOTES.clear()


_NOTES: list[Any] = []
"""What each generated test this process ran did (`codegen.outcomes.Note`), under --ledger-outcomes."""


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if _CONFIGURED.get("watched") is config:
        from ledgercheck.codegen import guard

        guard.finished(config)


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect the items
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--ledger-conform TARGET`: one conformance test per trace (see model.conformance.items)."""
    if config.getoption("--ledger-conform", default=None):
        from ledgercheck.model.conformance.items import collect

        items.extend(collect(session))


def pytest_report_header(config: pytest.Config) -> str | None:
    impl = config.getoption("--ledger-impl", default=None)
    variant = config.getoption("--ledger-variant", default=None)
    if impl:
        return f"ledgercheck: generated tests run against {impl}"
    if variant:
        return f"ledgercheck: generated tests run against the model of variant {variant!r}"
    return None


class StaleSpecWarning(UserWarning):
    """The spec's meaning changed since the tests were generated (`--ledger-impl` runs them anyway)."""


STALE: pytest.StashKey[str] = pytest.StashKey()
_SPEC_FILES: dict[Path, SpecFile] = {}
_MEANINGS: dict[Path, Meaning] = {}


def _spec_file(path: Path) -> SpecFile:
    from ledgercheck.model.spec import load_spec

    if path not in _SPEC_FILES:
        _SPEC_FILES[path] = load_spec(path)
    return _SPEC_FILES[path]


def _meaning(path: Path) -> Meaning:
    from ledgercheck.codegen.meaning import meaning_of

    if path not in _MEANINGS:
        _MEANINGS[path] = meaning_of(_spec_file(path))
    return _MEANINGS[path]


def staleness(spec_path: Path, recorded: str, parts: Mapping[str, str] | None) -> str | None:
    """None while the spec means what it meant when the tests were generated; else which
    parts changed. Comments, formatting, docs and messages are not meaning (codegen.meaning)."""
    from ledgercheck.codegen.meaning import changed_parts

    current = _meaning(spec_path)
    if current.digest == recorded:
        return None
    what = changed_parts(parts, current.parts) if parts else []
    named = ", ".join(what) if what else "its meaning"
    return f"{spec_path.name}: {named} changed since these tests were generated; run `ledgercheck gen`"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A test that failed for any reason against a stale spec says so beside its failure."""
    outcome = yield
    report = outcome.get_result()
    note = item.stash.get(STALE, None)
    if note and report.failed and note not in report.longreprtext:
        report.sections.append(("ledgercheck: stale spec", note))


@pytest.fixture
def ledger_factory(request: pytest.FixtureRequest) -> Iterator[LedgerFactory]:
    """Builds the implementation under test and the check that watches it.

    Against the model (the default, or `--ledger-variant`), a spec whose meaning changed
    fails the test: the model the test was derived from is gone. Against `--ledger-impl`,
    the implementation's own verdict matters more than the spec's freshness: the test runs,
    and the staleness is a warning (and leads the failure message if the test fails)."""
    from ledgercheck.model.binding import BindingError
    from ledgercheck.model.conformance import deadline
    from ledgercheck.model.conformance.defaults import CALL_TIMEOUT
    from ledgercheck.model.conformance.implementation import ManualClock, load_implementation, model_implementation
    from ledgercheck.model.conformance.monitor import LedgerCheck
    from ledgercheck.model.errors import LedgercheckError

    config = request.config
    checks: list[LedgerCheck] = []
    call_timeout = config.getoption("--ledger-call-timeout")
    limit = CALL_TIMEOUT if call_timeout is None else call_timeout

    def make(
        spec_rel: str,
        spec_meaning: str,
        prop: str,
        expected_from: str,
        *,
        shards: int,
        policy: Mapping[str, int],
        parts: Mapping[str, str] | None = None,
    ) -> tuple[Any, LedgerCheck]:
        spec_path = (Path(str(request.node.path)).parent / spec_rel).resolve()
        impl_target = config.getoption("--ledger-impl")
        problem = stale = clock = None
        if not spec_path.is_file():
            pytest.fail(f"cannot read the spec these tests were generated from ({spec_path})", pytrace=False)
        try:
            stale = staleness(spec_path, spec_meaning, parts)
        except LedgercheckError as exc:
            problem = f"ledgercheck: {exc}"
        if problem is None and stale is not None:
            if not impl_target:
                pytest.fail(stale, pytrace=False)
            request.node.stash[STALE] = stale
            warnings.warn(StaleSpecWarning(stale), stacklevel=2)
        if problem is None:
            try:
                monitor_spec = _spec_file(spec_path).variant(expected_from)
                monitor_spec.property(prop)
                variant = config.getoption("--ledger-variant") or expected_from
                if impl_target:
                    impl = load_implementation(impl_target, monitor_spec)
                else:
                    impl = model_implementation(_spec_file(spec_path).variant(variant))
                # a spec with a [clock]: the test's tick steps move the clock the implementation reads
                clock = ManualClock() if monitor_spec.clock is not None else None
                try:
                    with deadline.limited(limit):
                        ledger = impl.build(shards, policy, clock=clock)
                except deadline.TooLong:
                    problem = (
                        f"ledgercheck: the implementation's construction ({shards} instance(s)) did not return within "
                        f"{limit:g} s (--call-timeout)"
                    )
                except (TypeError, BindingError) as exc:
                    raise impl.cannot_build(exc, clock=clock is not None) from exc
                if problem is None and impl_target and monitor_spec.binding is not None:
                    _check_binding(impl, monitor_spec, shards, policy)
            except LedgercheckError as exc:
                problem = f"ledgercheck: {exc}"
        if problem is not None:  # failed outside the except block: no exception chain in the report
            pytest.fail(f"{stale}\n{problem}" if stale else problem, pytrace=False)
        from ledgercheck.codegen.coverage import MODULE_PREFIX

        # A coverage test watches its property; a known violation's test expects the property
        # to break (its xfail): either way a failure on the way is not the property's.
        xfail = request.node.get_closest_marker("xfail")
        expects_violation = xfail is not None and xfail.kwargs.get("raises") is not None
        coverage_test = Path(str(request.node.path)).name.startswith(MODULE_PREFIX)
        watched = coverage_test or expects_violation
        kept = monitor_spec.properties[prop].expect.get(monitor_spec.variant) != "violated"
        check = LedgerCheck(
            ledger,
            monitor_spec,
            prop,
            shards,
            policy,
            note=stale,
            clock=clock,
            about_property=not watched,
            call_timeout=limit,
            judges=kept or not coverage_test,
            model_of=None if impl_target else variant,
        )
        if impl_target:  # built and bound: a failure from here on is the calls'
            _known_to_the_reference(request, _spec_file(spec_path), prop, expected_from)
        checks.append(check)
        return ledger, check

    yield make
    if config.getoption("--ledger-outcomes", default=None):
        _NOTES.append(_note(request, checks))


def _note(request: pytest.FixtureRequest, checks: list[LedgerCheck]) -> Any:
    """What the test did, from its checks: each ran to its end, or where the first did not."""
    from ledgercheck.codegen import outcomes

    outcome, message = outcomes.FINISHED, ""
    if not checks:
        outcome, message = outcomes.FAILED, "the test made no check (its ledger was not built)"
    for check in checks:
        if not check.finished:
            broke, message = check.failure if check.failure is not None else (False, "")
            outcome = outcomes.VIOLATED if broke else outcomes.FAILED
            break
    node = request.node
    return outcomes.Note(
        str(Path(str(node.path)).resolve()),
        getattr(node, "originalname", node.name),
        outcome,
        bool(node.stash.get(_REFERENCE_XFAIL, False)),
        message,
    )


_REFERENCE_XFAIL: pytest.StashKey[bool] = pytest.StashKey()


def _known_to_the_reference(request: pytest.FixtureRequest, spec_file: SpecFile, prop: str, expected_from: str) -> None:
    """A spec that names the variant its implementation is meant to be (`[spec]
    reference_variant`), where that variant is expected to violate `prop`: this test expects
    what another variant does, so against the implementation it documents the violation the
    spec expects of it, a strict xfail (conform compares the class with its variant). Only a
    declared reference: where it is inferred (the first variant, none holding every property),
    the implementation of a known bug still fails the tests of its fix."""
    declared = spec_file.variant().declared_reference
    if declared is None or declared == expected_from:
        return
    declared_prop = spec_file.variant(declared).properties.get(prop)
    if declared_prop is not None and declared_prop.expect.get(declared) == "violated":
        reason = (
            f"the implementation is meant to be {declared} ([spec] reference_variant), which the spec expects to "
            f"violate {prop}; this test expects what {expected_from} does"
        )
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
        request.node.stash[_REFERENCE_XFAIL] = True


def _check_binding(impl: Any, spec: Any, shards: int, policy: Mapping[str, int]) -> None:
    """A binding that names what the class lacks fails the test as `conform` refuses it (the
    binding's line, what is missing), not with an AttributeError in the middle of a step.
    Checked on an instance of its own: the check follows read paths, and calls on the way."""
    from ledgercheck.model.conformance.implementation import ImplementationError, ManualClock

    probe = impl.build(shards, policy, clock=ManualClock() if spec.clock is not None else None)
    missing = impl.missing_api(probe, spec)
    if missing:
        raise ImplementationError(f"{impl.label}: " + "\n  ".join(missing))


@pytest.fixture
def impl_factory(ledger_factory: LedgerFactory) -> ImplFactory:
    """`ledger_factory` by its neutral name (the old one stays)."""
    return ledger_factory
