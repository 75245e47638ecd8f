"""A call of the implementation that never returns is named within `--call-timeout`, in
conform and in the generated tests, where it used to keep both silent until the whole time
budget (ten minutes by default) ran out. Never a pass: conform exits 3, the test fails."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ledgercheck.model.conformance import deadline

SPEC = """\
[spec]
name = "bucket"
api_class = "Bucket"
state_field = "state"
default_shards = 1

[enums.State]
members = ["FULL", "PARTIAL", "EMPTY"]

[policy]
capacity = { default = 3, min = 1, max = 4 }

[fields]
state = { type = "State", initial = "FULL" }
tokens = { type = "int", initial = "capacity" }

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

[properties.never_over_capacity]
kind = "invariant"
assert = "tokens <= capacity"
expect = { base = "holds" }

[implementation]
construct = { n = "instances", capacity = "capacity" }

[implementation.fields]
state = "slots[i].state"
tokens = "slots[i].tokens"
"""

# The third take of a full bucket of 3 spins, and swallows what an `except Exception` can.
CLASS = """\
class Slot:
    def __init__(self, tokens):
        self.state = "FULL"
        self.tokens = tokens


class Bucket:
    def __init__(self, n, capacity):
        self.slots = [Slot(capacity) for _ in range(n)]

    def take(self, i):
        slot = self.slots[i]
        while slot.tokens == 1 and slot.state == "PARTIAL":
            try:
                pass
            except Exception:
                pass
        if slot.tokens > 0:
            slot.tokens -= 1
            slot.state = "PARTIAL"
        if slot.tokens == 0:
            slot.state = "EMPTY"
"""


@pytest.fixture
def bucket(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "bucket.toml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "spinning.py").write_text(CLASS, encoding="utf-8")
    return tmp_path / "bucket.toml", f"{tmp_path / 'spinning.py'}:Bucket"


def _ledgercheck(*args: str, cwd: Path | None = None) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "ledgercheck.model.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )
    return done.returncode, done.stdout + done.stderr


def _generated_tests(out_dir: Path, target: str, limit: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The generated tests in `out_dir` against `target`, each call limited to `limit` seconds."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out_dir), "--impl", target]
    return subprocess.run([*command, "--call-timeout", limit], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_conform_names_the_call_that_does_not_return(bucket: tuple[Path, str]) -> None:
    spec, target = bucket
    code, out = _ledgercheck("conform", str(spec), "--impl", target, "--call-timeout", "0.5", "--time-budget", "240")
    assert code == 3, out
    assert "did not return within 0.5 s (--call-timeout) from the calls take(0), take(0), take(0) on 1 instance" in out
    assert "budget" not in out
    assert "reproduce:\n  import sys; sys.path.insert(0, " in out and "\n  from spinning import Bucket" in out
    assert out.rstrip().endswith("bucket.take(0)")


@pytest.mark.slow  # waits out a budget or a call limit of 3 s and more
def test_without_a_limit_the_budget_still_names_it(bucket: tuple[Path, str]) -> None:
    spec, target = bucket
    code, out = _ledgercheck("conform", str(spec), "--impl", target, "--call-timeout", "0", "--time-budget", "3")
    assert code == 3, out
    assert "the time budget" in out and "did not return from the calls take(0), take(0), take(0)" in out


def test_a_negative_limit_is_refused(bucket: tuple[Path, str]) -> None:
    spec, target = bucket
    code, out = _ledgercheck("conform", str(spec), "--impl", target, "--call-timeout", "-1")
    assert code == 2, out
    assert "--call-timeout must be >= 0" in out


def test_ci_fails_the_tests_and_names_the_call(bucket: tuple[Path, str]) -> None:
    spec, target = bucket
    out_dir = spec.parent / "generated"
    code, out = _ledgercheck("gen", str(spec), "--out", str(out_dir))
    assert code == 0, out
    code, out = _ledgercheck(
        "ci", str(spec), "--impl", target, "--out", str(out_dir), "--call-timeout", "0.5", cwd=spec.parent
    )
    flat = " ".join(out.split())
    assert code == 1, out
    assert "UNDECIDED conformance: ledgercheck: the implementation did not return within 0.5 s (--call-timeout)" in flat
    assert "step 3: take(0) did not return within 0.5 s (--call-timeout)" in flat  # a generated test's failure


def test_the_limit_is_taken_only_where_sigalrm_is_free() -> None:
    def elsewhere() -> None:
        raise AssertionError("never called")

    previous = signal.signal(signal.SIGALRM, lambda signum, frame: None)  # another plugin's, say pytest-timeout's
    try:
        assert deadline.install(elsewhere) is False
        assert deadline.ready() is False
    finally:
        signal.signal(signal.SIGALRM, previous)
    answers: list[bool] = []
    worker = threading.Thread(target=lambda: answers.append(deadline.install(elsewhere)))
    worker.start()
    worker.join()
    assert answers == [False]  # a thread cannot take a signal: the budget bounds its calls


def test_an_interrupted_call_raises_past_except_exception() -> None:
    def expired() -> Any:
        raise deadline.TooLong

    previous = signal.getsignal(signal.SIGALRM)
    try:
        assert deadline.install(expired)
        deadline.arm(0.2)
        with pytest.raises(deadline.TooLong):
            while True:
                try:
                    pass
                except Exception:
                    pass
    finally:
        deadline.disarm()
        signal.signal(signal.SIGALRM, previous)


def test_a_constructor_that_does_not_return_is_named(tmp_path: Path) -> None:
    (tmp_path / "bucket.toml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "stuck.py").write_text(
        CLASS.replace(
            "        self.slots = [", "        while capacity > 0:\n            pass\n        self.slots = ["
        ),
        encoding="utf-8",
    )
    target = f"{tmp_path / 'stuck.py'}:Bucket"
    code, out = _ledgercheck("conform", str(tmp_path / "bucket.toml"), "--impl", target, "--call-timeout", "0.5")
    assert code == 3, out
    assert "did not return within 0.5 s (--call-timeout) from its construction on 1 instance" in out
    out_dir = tmp_path / "generated"
    code, out = _ledgercheck("gen", str(tmp_path / "bucket.toml"), "--out", str(out_dir))
    assert code == 0, out
    done = _generated_tests(out_dir, target, "0.5", tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the implementation's construction (1 instance(s)) did not return within 0.5 s" in done.stdout


@pytest.mark.slow  # waits out a budget or a call limit of 3 s and more
def test_after_one_hang_later_calls_of_the_run_get_a_second(bucket: tuple[Path, str]) -> None:
    """Every test that reaches the same hang waited the whole limit: 35 tests, 350 s of a
    silent ci. After the first, a call gets AFTER_A_HANG (1 s) at most."""
    spec, target = bucket
    out_dir = spec.parent / "generated"
    code, out = _ledgercheck("gen", str(spec), "--out", str(out_dir))
    assert code == 0, out
    done = _generated_tests(out_dir, target, "3", spec.parent)
    assert done.returncode == 1, done.stdout
    failures = done.stdout.split("short test summary info")[0]  # (the summary may repeat each message)
    assert failures.count("did not return within 3 s (--call-timeout):") == 1, done.stdout
    assert "did not return within 1 s (--call-timeout) (a call of this run already did not return" in failures
