"""The tool's own tests run on the pinned ledger (see `ledger_fixture`): every command and
`load_spec()` called without a spec reads it, in this process and in the subprocesses the
tests start (they inherit the environment)."""

from __future__ import annotations

import os

import pytest
from ledger_fixture import LEDGER_SPEC


def pytest_configure(config: pytest.Config) -> None:
    os.environ["LEDGERCHECK_SPEC"] = str(LEDGER_SPEC)
