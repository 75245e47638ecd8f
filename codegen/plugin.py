"""The pytest plugin that generated tests run under (registered by the package).

Options:
  --ledger-variant NAME      run against the executable model of another spec variant
  --ledger-impl TARGET       run against any implementation with the ledger's API:
                             `module:Class` or `path/to/file.py:Class`
  --ledger-conform TARGET    add conformance tests of an implementation against the model
                             (`ledgercheck conform` as one test per trace; codegen.conform_items)
The default is the executable model of the variant the test's expectations come from
(`fixed` for the bundled spec).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from codegen.runtime import ImplementationError, LedgerCheck, load_implementation, model_implementation
from model.errors import LedgercheckError
from model.spec import Spec, load_spec
from model.trace import base_url

LedgerFactory = Callable[..., tuple[Any, LedgerCheck]]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ledgercheck", "ledgercheck generated tests")
    group.addoption(
        "--ledger-variant",
        default=None,
        metavar="NAME",
        help="run generated tests against the executable model of this spec variant",
    )
    group.addoption(
        "--ledger-impl",
        default=None,
        metavar="TARGET",
        help="run generated tests against module:Class or path/to/file.py:Class",
    )
    from codegen.conform_items import add_options

    add_options(group)


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect the items
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--ledger-conform TARGET`: one conformance test per trace (see codegen.conform_items)."""
    if config.getoption("--ledger-conform", default=None):
        from codegen.conform_items import collect

        items.extend(collect(session))


def pytest_report_header(config: pytest.Config) -> str | None:
    impl = config.getoption("--ledger-impl", default=None)
    variant = config.getoption("--ledger-variant", default=None)
    if impl:
        return f"ledgercheck: generated tests run against {impl}"
    if variant:
        return f"ledgercheck: generated tests run against the model of variant {variant!r}"
    return None


_SPECS: dict[str, Spec] = {}


def _spec(path: Path, variant: str) -> Spec:
    key = f"{path}::{variant}"
    if key not in _SPECS:
        _SPECS[key] = load_spec(path).variant(variant)
    return _SPECS[key]


@pytest.fixture
def ledger_factory(request: pytest.FixtureRequest) -> LedgerFactory:
    """Builds the implementation under test and the check that watches it."""
    config = request.config

    def make(
        spec_rel: str, spec_sha: str, prop: str, expected_from: str, *, shards: int, policy: Mapping[str, int]
    ) -> tuple[Any, LedgerCheck]:
        spec_path = (Path(str(request.node.path)).parent / spec_rel).resolve()
        try:
            actual_sha = hashlib.sha256(spec_path.read_bytes()).hexdigest()
        except OSError as exc:
            pytest.fail(
                f"cannot read the spec these tests were generated from ({spec_path}): {exc.strerror}", pytrace=False
            )
        if actual_sha != spec_sha:
            pytest.fail(f"{spec_path} changed since these tests were generated: run `ledgercheck gen`", pytrace=False)
        problem = None
        try:
            monitor_spec = _spec(spec_path, expected_from)
            impl_target = config.getoption("--ledger-impl")
            variant = config.getoption("--ledger-variant") or expected_from
            if impl_target:
                impl = load_implementation(impl_target, monitor_spec)
            else:
                impl = model_implementation(spec_path, variant)
            urls = [base_url(i) for i in range(shards)]
            ledger = impl.build(monitor_spec, shards, policy, urls)
        except (ImplementationError, LedgercheckError) as exc:
            problem = f"ledgercheck: {exc}"
        if problem is not None:  # failed outside the except block: no exception chain in the report
            pytest.fail(problem, pytrace=False)
        return ledger, LedgerCheck(ledger, monitor_spec, prop, shards, policy)

    return make
