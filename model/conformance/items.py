"""`pytest --ledger-conform TARGET`: the conformance traces of `ledgercheck conform` as tests.

The plugin (`codegen.plugin`) declares the options and, only when `--ledger-conform` is
given, imports this module, which adds these items after collection, one per trace: the two
enumerations (calls the callers' contracts allow, then any call), each seeded random trace
and, with `--ledger-conform-counterexamples`, each counterexample of the checker. A failing
item shows the shrunk divergence as a figure, the way `ledgercheck conform` prints it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledgercheck.model.conformance.calls import Script
from ledgercheck.model.conformance.checker import Conformance
from ledgercheck.model.conformance.defaults import DEFAULT_DEPTH, ENUMERATION_SHARDS
from ledgercheck.model.conformance.divergence import Divergence
from ledgercheck.model.conformance.implementation import load_target
from ledgercheck.model.conformance.sources import counterexample_scripts, default_cache, default_variant, random_scripts
from ledgercheck.model.errors import LedgercheckError
from ledgercheck.model.spec import load_spec

Job = Callable[[], Divergence | None]


class ConformanceFailure(Exception):
    """The implementation diverged from the model; the message is the whole report."""


class ConformanceItem(pytest.Item):
    """One conformance trace (or one enumeration) as a test."""

    def __init__(self, *, job: Job, checker: Conformance, variant: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._job = job
        self._checker = checker
        self._variant = variant

    def runtest(self) -> None:
        self._checker.limit_calls()  # a call that does not return fails this test, named
        with self._checker.stops_named():
            found = self._job()
        if found is not None:
            raise ConformanceFailure(self._checker.report(self._checker.shrink(found), self._variant))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, (ConformanceFailure, LedgercheckError)):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


def collect(session: pytest.Session) -> list[pytest.Item]:
    """The conformance items for `--ledger-conform`; bad input is a usage error."""
    config = session.config
    target = config.getoption("--ledger-conform")
    try:
        spec_file = load_spec(config.getoption("--ledger-conform-spec"))
        variant = config.getoption("--ledger-variant") or default_variant(spec_file)
        spec = spec_file.variant(variant)
        policy = spec.resolve_policy({})
        checker = Conformance(spec, load_target(target, spec), policy, target)
    except LedgercheckError as exc:
        raise pytest.UsageError(f"--ledger-conform: {exc}") from None
    depth = config.getoption("--ledger-conform-depth")
    if depth is None:
        depth = DEFAULT_DEPTH
    shards = config.getoption("--ledger-conform-shards")
    enum_shards = shards or min(ENUMERATION_SHARDS, spec.default_shards)
    other_shards = shards or spec.default_shards
    jobs: list[tuple[str, Job]] = []

    def enumeration(contract: bool) -> Job:
        def job() -> Divergence | None:
            return checker.enumerate(enum_shards, depth, contract=contract).divergence

        return job

    def replay(script: Script) -> Job:
        return lambda: checker.run(script)

    if depth > 0:
        jobs.append((f"enumerate-contract-depth{depth}-shards{enum_shards}", enumeration(True)))
        jobs.append((f"enumerate-any-depth{depth}-shards{enum_shards}", enumeration(False)))
    calls = config.getoption("--ledger-conform-random")
    seed = config.getoption("--ledger-conform-seed")
    if calls > 0:
        for number, script in enumerate(random_scripts(spec, other_shards, policy, calls, seed), 1):
            jobs.append((f"random-seed{seed}-{number}", replay(script)))
    if config.getoption("--ledger-conform-counterexamples"):
        scripts = counterexample_scripts(spec_file, shards=other_shards, overrides={}, jobs=1, cache=default_cache())
        for script in scripts:
            jobs.append((_slug(script.source), replay(script)))
    items: list[pytest.Item] = []
    for name, job in jobs:
        item_name = f"conformance[{name}]"
        items.append(
            ConformanceItem.from_parent(
                session,
                name=item_name,
                nodeid=f"ledgercheck-conform::{item_name}",
                job=job,
                checker=checker,
                variant=variant,
            )
        )
    # Items that no collector reported: tell the terminal (and any plugin counting) they exist.
    report = pytest.CollectReport("ledgercheck-conform", "passed", None, list(items))
    session.ihook.pytest_collectreport(report=report)
    return items
