"""A step property reads the arguments of the call it checks (`args.n`), where every event in
its `on` takes them with one type: the solver, the explicit engine, the proof and the
generated tests' monitor all read the same value."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledgercheck.model.errors import SpecError
from ledgercheck.model.spec import load_spec_text

SPEC = """\
[spec]
name = "bucket"
api_class = "Bucket"
state_field = "state"
default_shards = 1

[enums.State]
members = ["OPEN", "EMPTY"]

[policy]
max_request = { default = 3, min = 1, max = 10 }

[fields]
state = { type = "State", initial = "OPEN" }
tokens = { type = "int", initial = 5 }

[events.take]
call = "take(i, n: int)"
body = \"\"\"
if args.n <= max_request and args.n <= tokens:
    tokens = tokens - args.n
if tokens == 0:
    state = EMPTY
\"\"\"

[events.give]
call = "give(i, n: int, why: str | None = None)"
body = \"\"\"
if args.n <= max_request:
    tokens = tokens + args.n
    state = OPEN
\"\"\"

[environments.ledger]
any_call = true

[properties.moves_at_most_n]
kind = "step"
on = ["take", "give"]
assert = "before.tokens - after.tokens <= args.n and after.tokens - before.tokens <= args.n"
expect = { base = "holds" }

[properties.takes_exactly_n]
kind = "step"
on = ["take"]
when = "args.n > 0"
assert = "before.tokens - after.tokens == args.n"
expect = { base = "violated" }
"""


def _check(capsys: Any, spec: Path, *more: str) -> tuple[int, str]:
    from ledgercheck.model.cli import main

    code = main(["check", str(spec), "--no-cache", *more])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("engine", ["z3", "auto"])
def test_the_engines_read_the_call_s_arguments(tmp_path: Path, capsys: Any, engine: str) -> None:
    spec = tmp_path / "bucket.toml"
    spec.write_text(SPEC, encoding="utf-8")
    code, out = _check(capsys, spec, "--engine", engine)
    assert code == 0, out
    assert "takes_exactly_n                          VIOLATED, depth 1" in out
    found = re.search(r"take\(0, n=(\d+)\) \[breaks\]", out)
    assert found is not None, out
    assert int(found.group(1)) > 3  # past max_request (or the tokens): refused, nothing taken
    assert "1 hold up to depth" in out or "1 hold proved" in out


def test_the_proof_reads_them_too(tmp_path: Path, capsys: Any) -> None:
    from ledgercheck.model.cli import main

    spec = tmp_path / "bucket.toml"
    spec.write_text(SPEC, encoding="utf-8")
    code = main(["prove", str(spec), "--property", "moves_at_most_n"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "PROVED" in out
    spec.write_text(SPEC.replace("tokens = tokens + args.n", "tokens = tokens + args.n + 1"), encoding="utf-8")
    code = main(["prove", str(spec), "--property", "moves_at_most_n"])
    out = capsys.readouterr().out
    assert code == 1, out  # a give that adds one more than asked: the property sees it


def test_the_generated_tests_monitor_reads_them(tmp_path: Path, capsys: Any) -> None:
    from ledgercheck.model.cli import main

    spec = tmp_path / "bucket.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "generated_tests"
    assert main(["gen", str(spec), "--out", str(out)]) == 0, capsys.readouterr()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "xfailed" in run.stdout  # takes_exactly_n's counterexamples: the monitor saw args.n break it
    assert "failed" not in run.stdout.replace("xfailed", "")


def test_an_argument_not_every_event_takes_is_refused() -> None:
    bad = SPEC.replace('assert = "before.tokens - after.tokens == args.n"', 'assert = "args.why is None"')
    bad = bad.replace('on = ["take"]\nwhen', 'on = ["take", "give"]\nwhen')
    with pytest.raises(SpecError, match="the events take, give do not all take, with one type, an argument 'why'"):
        load_spec_text(bad, "bucket.toml")
    one = SPEC.replace('assert = "before.tokens - after.tokens == args.n"', 'assert = "args.m == 1"')
    with pytest.raises(SpecError, match="the event take has no argument 'm'"):
        load_spec_text(one, "bucket.toml")


TIMED_BREAKER = Path(__file__).resolve().parents[1] / "spec" / "examples" / "timed_breaker.toml"


@pytest.mark.parametrize(
    ("old", "new", "shown"),
    [
        ('assert = "not raised and result == CLOSED"', 'assert = "not raised and result == OPEN"', "[returned CLOSED]"),
        ('assert = "raised and after.state == OPEN"', 'assert = "not raised"', "[raised CircuitOpenError]"),
    ],
)
def test_a_figure_shows_what_each_call_gave_its_caller(
    tmp_path: Path, capsys: Any, old: str, new: str, shown: str
) -> None:
    """The row `outcome`: what the call returned or raised, marked read where the property
    reads it at the breaking step (a property about `result` is broken by a value the
    figure shows)."""
    text = TIMED_BREAKER.read_text(encoding="utf-8")
    assert text.count(old) == 1
    spec = tmp_path / "breaker.toml"
    spec.write_text(text.replace(old, new), encoding="utf-8")
    code, out = _check(capsys, spec, "--engine", "z3")
    assert code == 1, out  # the changed claim is a mismatch
    rows = [line for line in out.splitlines() if line.startswith("outcome ")]
    assert rows, out
    assert any(shown in row for row in rows), rows


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ('"before.tokens - after.tokens == args.n"', '"before.tokens - after.tokens == n"', "read as args.n"),
        ('"before.tokens - after.tokens == args.n"', '"result == 1"', "declares `returns`, of one type"),
        ('"before.tokens - after.tokens == args.n"', '"tokens == 1"', "read it as after.tokens or before.tokens"),
        ('when = "args.n > 0"', 'when = "args.n = 0"', "an expression compares with =="),
        ('assert = "tokens >= 0"', 'assert = "after.tokens >= 0"', "before and after are read in a step property"),
    ],
)
def test_a_misread_property_says_how_to_read_it(old: str, new: str, says: str) -> None:
    spec = SPEC + '\n[properties.inv]\nkind = "invariant"\nassert = "tokens >= 0"\nexpect = { base = "holds" }\n'
    assert spec.count(old) == 1
    with pytest.raises(SpecError, match=re.escape(says)):
        load_spec_text(spec.replace(old, new), "bucket.toml")


OPENS = """\
[spec]
name = "door"
api_class = "Door"
state_field = "state"
default_shards = 1

[enums.State]
members = ["SHUT", "OPEN"]

[fields]
state = { type = "State", initial = "SHUT" }

[events.open]
call = "open(i)"
returns = "old.state != OPEN"
body = "state = OPEN"

[events.shut]
call = "shut(i)"
body = "state = SHUT"

[environments.ledger]
any_call = true

[properties.open_says_whether_it_opened]
kind = "step"
on = ["open"]
assert = "result == (before.state == SHUT)"
expect = { base = "holds" }

[properties.open_always_opens_something]
kind = "step"
on = ["open"]
assert = "result"
expect = { base = "violated" }
"""


def test_returns_reads_the_record_before_the_call(tmp_path: Path, capsys: Any) -> None:
    """`returns = "old.state != OPEN"`: whether the call changed something, the most common
    return of all, which could not be written (old.x was refused there)."""
    from ledgercheck.model.cli import main

    spec = tmp_path / "door.toml"
    spec.write_text(OPENS, encoding="utf-8")
    for engine in ("z3", "explicit"):
        code, out = _check(capsys, spec, "--engine", engine)
        assert code == 0, out
        assert "open_always_opens_something" in out and "VIOLATED, depth 2" in out
    out_dir = tmp_path / "generated_tests"
    assert main(["gen", str(spec), "--out", str(out_dir)]) == 0, capsys.readouterr()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out_dir)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
