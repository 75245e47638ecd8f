"""`raises = [{ after = "...", error = "..." }]`: a call that changes the state and then
raises (pybreaker's breaker trips on a failure and raises CircuitBreakerError in the same
call). `when` entries are read as the call begins and the call then changes nothing; an
`after` entry is read on the record the call left (`old.x`: before it), its changes kept. A
new-user trial could not model the library's default that way and had to construct it with
the flag off. Every engine reads the one parsed entry through the shared executor: the
checker, the executable model, the coverage search and conformance agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledgercheck.codegen.coverage import search
from ledgercheck.model.cli import main
from ledgercheck.model.errors import SpecError
from ledgercheck.model.interpreter import build_api
from ledgercheck.model.spec import load_spec_text

SPEC = """\
[spec]
name = "breaker"
api_class = "Breaker"
state_field = "state"
default_shards = 1

[enums.Mode]
members = ["CLOSED", "OPEN"]

[policy]
trip_after = { default = 2, min = 1, max = 4 }

[fields]
state = { type = "Mode", initial = "CLOSED" }
failures = { type = "int", initial = 0 }

[events.fail]
call = "fail(i)"
raises = [
    { when = "state == OPEN", error = "Refused" },
    { after = "state == OPEN and old.state != OPEN", error = "Tripped" },
]
body = \"\"\"
failures = failures + 1
if failures >= trip_after:
    state = OPEN
\"\"\"

[events.reset]
call = "reset(i)"
body = \"\"\"
failures = 0
state = CLOSED
\"\"\"

[environments.ledger]
any_call = true

[properties.a_trip_raises]
kind = "step"
on = ["fail"]
when = "before.state == CLOSED and after.state == OPEN"
assert = "raised"
expect = { base = "holds" }

[properties.a_raise_changes_nothing]
kind = "step"
on = ["fail"]
when = "raised"
assert = "after.failures == before.failures"
expect = { base = "violated" }

[implementation]
target = "breaker.py:Breaker"
instances = "indexed"
construct = { trip_after = "trip_after" }

[implementation.fields]
state = "state"
failures = "failures"
"""

CLASS = """\
class Refused(Exception):
    pass


class Tripped(Exception):
    pass


class Breaker:
    def __init__(self, trip_after):
        self.trip_after = trip_after
        self.state = "CLOSED"
        self.failures = 0

    def fail(self, i):
        if self.state == "OPEN":
            raise Refused()
        self.failures += 1
        if self.failures >= self.trip_after:
            self.state = "OPEN"
            raise Tripped()

    def reset(self, i):
        self.failures = 0
        self.state = "CLOSED"
"""


def _spec(text: str = SPEC) -> Any:
    return load_spec_text(text, "breaker.toml")


def test_the_model_keeps_the_changes_of_a_call_that_raises_after() -> None:
    api = build_api(_spec().variant())
    breaker = api.Ledger(shard_count=1, policy=api.Policy(trip_after=2), base_urls=None)
    breaker.fail(0)
    with pytest.raises(api.errors["Tripped"]):
        breaker.fail(0)
    assert (breaker.snapshot()[0].state.name, breaker.snapshot()[0].failures) == ("OPEN", 2)
    with pytest.raises(api.errors["Refused"]):  # read as the call begins: nothing changes
        breaker.fail(0)
    assert breaker.snapshot()[0].failures == 2


@pytest.mark.parametrize("engine", ["z3", "explicit"])
def test_every_engine_reads_the_outcome_alike(engine: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "breaker.toml").write_text(SPEC)
    assert main(["check", str(tmp_path / "breaker.toml"), "--engine", engine, "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "a_raise_changes_nothing                  VIOLATED, depth 2" in out, out
    assert "[raised Tripped]" in out, out  # the breaking call's outcome, in the figure


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('{ when = "state == OPEN", after = "state == OPEN", error = "E" }', "not both"),
        ('{ error = "E" }', "missing 'when'"),
        ('{ after = "old.stat == OPEN", error = "E" }', "stat"),
    ],
)
def test_a_wrong_entry_is_refused_with_its_line(entry: str, message: str) -> None:
    raises = SPEC[SPEC.index("raises = [") : SPEC.index("]\nbody")] + "]"
    with pytest.raises(SpecError) as caught:
        _spec(SPEC.replace(raises, f"raises = [{entry}]"))
    assert message in str(caught.value) and "breaker.toml:19" in str(caught.value), str(caught.value)


def test_a_query_has_no_after_entry() -> None:
    text = SPEC.replace(
        "[events.fail]",
        '[queries]\nq = { api = "q", raises = [{ after = "count(state == OPEN) > 0", error = "E" }] }\n\n[events.fail]',
    )
    with pytest.raises(SpecError, match="unknown key 'after'"):
        _spec(text)


def test_the_coverage_search_reads_an_after_entry_on_the_record_the_call_left() -> None:
    spec_file = _spec()
    found = search(spec_file, spec_file.variant())
    labels = {str(branch) for branch in found.traces}
    assert any("Tripped" in label for label in labels), labels
    # `old.state != OPEN` false while the rest holds: the call was refused before it ran
    (unreached,) = found.unreachable
    branch = unreached.branch
    assert (branch.error, branch.text, branch.taken) == ("Tripped", "old.state != OPEN", False)


@pytest.mark.parametrize(("change", "code"), [("", 0), ("            raise Tripped()", 1)])
def test_conform_compares_the_outcome_and_the_state_it_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str, code: int
) -> None:
    (tmp_path / "breaker.toml").write_text(SPEC)
    (tmp_path / "breaker.py").write_text(CLASS.replace(change, "            pass") if change else CLASS)
    assert main(["conform", str(tmp_path / "breaker.toml")]) == code
    out = capsys.readouterr().out
    if code:
        assert "exception raised: model Tripped, implementation None" in out, out


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            '{ when = "state == OPEN", error = "Refused" }',
            '{ when = "old.state == OPEN", error = "Refused" }',
            "old (the record before the call) is read where the call has run: a history block, an event's returns "
            "and a raises entry's `after`",
        ),
        ("failures = failures + 1", "failures = failures + 1\nif true:\n    pass", "unknown name 'true': expressions"),
    ],
)
def test_wrong_words_get_what_to_write(old: str, new: str, message: str) -> None:
    """Two messages a trial found wrong or bare: `old.` in a `when` entry said it is read "in a
    history block only" (returns and `after` read it too); TOML's `true` in a block said only
    `unknown name 'true'`."""
    with pytest.raises(SpecError) as caught:
        _spec(SPEC.replace(old, new))
    assert message in str(caught.value), str(caught.value)


def test_a_misspelt_error_name_is_named_as_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`error = "Trippd"` where the class raises Tripped: a divergence (what the spec says is
    not what the class does) that says the spec more likely misspells it."""
    (tmp_path / "breaker.toml").write_text(SPEC.replace('error = "Tripped"', 'error = "Trippd"'))
    (tmp_path / "breaker.py").write_text(CLASS)
    assert main(["conform", str(tmp_path / "breaker.toml"), "--no-policies", "--no-counterexamples"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "(the spec's raises names Trippd, the class raised Tripped: a misspelt error in the spec?" in out, out


def test_the_reproducer_runs_past_a_raise_and_prints_what_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reproducer stopped at the first call the spec says raises (Tripped), before the bug,
    and printed nothing, and imported its class only when run from the class's own folder
    (message-queue recheck). Run as a script from elsewhere, it now shows the divergence."""
    import subprocess
    import sys

    (tmp_path / "breaker.toml").write_text(SPEC)
    wrong = '    def reset(self, i):\n        self.failures = 1 if self.state == "OPEN" else 0'
    (tmp_path / "breaker.py").write_text(CLASS.replace("    def reset(self, i):\n        self.failures = 0", wrong))
    assert main(["conform", str(tmp_path / "breaker.toml"), "--no-policies", "--no-counterexamples"]) == 1
    out = capsys.readouterr().out
    script = "\n".join(line[2:] for line in out.split("reproduce:\n", 1)[1].splitlines())
    assert "with contextlib.suppress(Exception): breaker.fail(0)  # raises Tripped, as the spec says" in script, script
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "repro.py").write_text(script + "\n")
    run = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path / "elsewhere", capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1"], run.stdout  # the class's failures, where the model has 0
    assert "print(breaker.failures)  # the model: 0" in script, script
