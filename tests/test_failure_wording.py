"""What a failure leads with. A divergence's one-line summary (ci's DIVERGES line) led with a
count of log lines where the state differed too; a generated test that failed against the
spec's own model said "the implementation does not do what ... does" with no implementation
involved (a hand-edited or stale test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ledgercheck.model.conformance.observation import Outcome, compare


def test_a_divergence_leads_with_the_call_and_the_state_not_the_log_lines() -> None:
    model = {(0, "state"): "SUSPECT", (0, "streak"): 1}
    impl = {(0, "state"): "HEALTHY", (0, "streak"): 1}
    found = compare(model, impl, Outcome(None, 1), Outcome(None, 0), None)
    assert [d.key for d in found] == [(0, "state"), ("logs",)]
    found = compare(model, impl, Outcome("KeyError", 0), Outcome(None, 0), None)
    assert [d.key for d in found] == [("raised",), (0, "state")]


SPEC = """\
[spec]
name = "bucket"
api_class = "Bucket"
state_field = "state"
default_shards = 1

[enums.State]
members = ["FULL", "PARTIAL", "EMPTY"]

[fields]
state = { type = "State", initial = "FULL" }
tokens = { type = "int", initial = 2 }

[events.take]
call = "take(i)"
body = \"\"\"
if tokens > 0:
    tokens = tokens - 1
    state = PARTIAL
if tokens == 0:
    state = EMPTY
\"\"\"

[environments.ledger]
any_call = true

[properties.never_negative]
kind = "invariant"
assert = "tokens >= 0"
expect = { base = "holds" }
"""


def test_a_test_failing_against_the_spec_s_model_says_so(tmp_path: Path) -> None:
    (tmp_path / "bucket.toml").write_text(SPEC, encoding="utf-8")
    out_dir = tmp_path / "generated"
    gen = subprocess.run(
        [sys.executable, "-m", "ledgercheck.model.cli", "gen", str(tmp_path / "bucket.toml"), "--out", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert gen.returncode == 0, gen.stdout + gen.stderr
    module = out_dir / "test_branches_of_take.py"
    text = module.read_text(encoding="utf-8")
    assert 'state="EMPTY"' in text
    module.write_text(text.replace('state="EMPTY"', 'state="PARTIAL"', 1), encoding="utf-8")  # a hand edit
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout
    assert "the spec's model no longer does what base did when this test was generated" in run.stdout
    assert "the implementation does not do what" not in run.stdout


def test_one_shard_is_one_shard() -> None:
    from ledgercheck.model.spacer import Scope

    assert Scope(False).phrase(1) == "1 shard"
    assert Scope(False, found_on=1).phrase(2).startswith("2 shards, from an invariant found on 1 shard")
