"""The tool's own tests run on the pinned ledger (see `ledger_fixture`): every command and
`load_spec()` called without a spec reads it, in this process and in the subprocesses the
tests start (they inherit the environment). The fixtures several test files share live here.

Speed tiers: tests that run the whole tool end to end are marked `slow`, and so are all but a
representative case of each large sweep (`tiers.fast_slice`); the fast lane is
`pytest -m "not slow"` (see the README)."""

from __future__ import annotations

import os
import sys

import pytest
from ledger_fixture import LEDGER_SPEC

from ledgercheck.model.spec import SpecFile, load_spec


def pytest_configure(config: pytest.Config) -> None:
    os.environ["LEDGERCHECK_SPEC"] = str(LEDGER_SPEC)
    # The tests are about solving: no check of theirs is answered by an earlier one's result
    # (tests/test_resultcache.py turns the cache of results back on, in a folder of its own, and
    # so do the tests of a user's second command, through `caches.own_caches`).
    os.environ["LEDGERCHECK_RESULTS"] = "off"


@pytest.fixture(autouse=True)
def _no_remembered_proofs() -> None:
    """Each test solves what it asks: no invariant Spacer found in an earlier test of the same
    process answers it (`model.spacer` remembers them per process; not imported here)."""
    spacer = sys.modules.get("ledgercheck.model.spacer")
    if spacer is not None:
        spacer._FOUND.clear()


@pytest.fixture(scope="session")
def spec_file() -> SpecFile:
    """The pinned ledger, parsed once for the whole run (tests read it, never change it)."""
    return load_spec()
