"""The bundled ledger spec passes its own gate: `ledgercheck ci` on spec/fleet_health.toml.

This is the one test a ledger edit is meant to fail: the tool's other tests run on a pinned
copy (tests/ledger_fixture.py), so an edit of the ledger shows up here, as the summary of
`ledgercheck ci` (one line per mismatch, drift or failing generated test), not as dozens of
unrelated failures. (The seed's table, tests/test_seed_table.py, and the README's claims and
findings tables, tests/test_claims_and_mutants.py, are about the bundled spec too.)
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from ledger_fixture import BUNDLED_GENERATED, BUNDLED_SPEC, ROOT

pytestmark = pytest.mark.slow


def test_ledgercheck_ci_passes_on_the_bundled_spec() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != "LEDGERCHECK_SPEC"}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgercheck.model.cli",
            "ci",
            str(BUNDLED_SPEC),
            "--out",
            str(BUNDLED_GENERATED),
            "--no-progress",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    if run.returncode != 0:
        head = run.stdout.split("\n\n", 1)[0]
        pytest.fail(
            f"`ledgercheck ci` exits {run.returncode} on the bundled spec:\n{head}\n\n{run.stderr}", pytrace=False
        )
    first, *rest = run.stdout.splitlines()
    assert first == "ledgercheck ci fleet_health.toml: PASSED"
    body = "\n".join(rest)
    for step in ("verdicts", "generated tests up to date", "tests vs model"):
        assert f"  {step} " in body
    assert "environment(s)): 0 mismatch(es), 0 unknown" in body
