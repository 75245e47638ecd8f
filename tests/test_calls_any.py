"""`calls = "any"`: a property whose verdict counts every call, also those the callers'
contracts rule out. A retired shard must stay retired "whatever is called on it"; dropping the
guard that keeps it so changed only calls outside the contracts, so the property's every
counterexample was a lax trace, which fails nothing: `ci` went green after `gen` absorbed it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledgercheck.model import bmc
from ledgercheck.model.errors import SpecError
from ledgercheck.model.explicit import explicit_check
from ledgercheck.model.prove import prove_property
from ledgercheck.model.spec import contracts_bind, load_spec_text

SPEC = """\
[spec]
name = "doors"
api_class = "Doors"
state_field = "state"
default_shards = 2

[enums.State]
members = ["CLOSED", "OPEN", "RETIRED"]

[fields]
state = { type = "State", initial = "CLOSED" }

[events.open]
call = "open(i)"
requires = "state == CLOSED"
GUARD
body = "state = OPEN"

[events.close]
call = "close(i)"
ignore_when = "state == RETIRED"
body = "state = CLOSED"

[events.retire]
call = "retire(i)"
body = "state = RETIRED"

[environments.ledger]
any_call = true

[properties.retired_stays_retired]
kind = "step"
on = ["open", "close", "retire"]
CALLS
when = "before.state == RETIRED"
assert = "after.state == RETIRED"
expect = { base = "holds" }

[properties.never_two_open]
kind = "invariant"
scope = "fleet"
assert = "count(state == OPEN) <= 2"
expect = { base = "holds" }
"""

GUARDED = 'ignore_when = "state == RETIRED"'


def _spec(calls: str = 'calls = "any"', guard: str = "") -> Any:
    return load_spec_text(SPEC.replace("CALLS", calls).replace("GUARD", guard), "doors.toml").variant()


def test_the_default_counts_the_calls_the_contracts_allow() -> None:
    spec = _spec(calls="")
    prop = spec.properties["retired_stays_retired"]
    assert not prop.counts_any_call and contracts_bind(spec.environment("ledger"), prop)
    found = bmc.check_property(spec, "ledger", prop, shards=1, policy={}, max_depth=4, max_traces=1)
    assert found.status == "holds_to_depth" and found.lax_traces  # only a lax trace breaks it


@pytest.mark.parametrize("engine", ["z3", "explicit"])
def test_every_engine_counts_every_call(engine: str) -> None:
    spec = _spec()
    prop = spec.properties["retired_stays_retired"]
    assert prop.counts_any_call and not contracts_bind(spec.environment("ledger"), prop)
    if engine == "z3":
        found = bmc.check_property(spec, "ledger", prop, shards=1, policy={}, max_depth=4, max_traces=1, lax=False)
    else:
        found = explicit_check(spec, "ledger", prop, shards=1, policy={}, max_depth=4, max_traces=1)
    assert (found.status, found.depth) == ("violated", 2)
    assert [s.action for s in found.traces[0].steps[1:]] == ["retire", "open"]


@pytest.mark.parametrize("engine", ["explicit", "spacer", "kind"])
def test_a_guarded_spec_is_proved_over_every_call(engine: str) -> None:
    spec = _spec(guard=GUARDED)
    proof = prove_property(spec, "ledger", spec.properties["retired_stays_retired"], shards=2, policy={}, engine=engine)
    assert proof.status == "proved", proof.note


def test_check_names_the_call_outside_the_contracts(tmp_path: Path, capsys: Any) -> None:
    from ledgercheck.model.cli import main

    path = tmp_path / "doors.toml"
    path.write_text(SPEC.replace("CALLS", 'calls = "any"').replace("GUARD", ""), encoding="utf-8")
    assert main(["check", str(path), "--property", "retired_stays_retired", "--no-cache"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "MISMATCH: the spec expects holds" in out
    assert "the callers' contracts rule out step 2, open(0): the property counts every call" in out


def test_properties_judged_apart_are_searched_apart() -> None:
    """One explicit search of both kinds would bind the contracts for both, or for neither."""
    from ledgercheck.model.explicit import explicit_check_all

    spec = _spec()
    props = [spec.properties["never_two_open"], spec.properties["retired_stays_retired"]]
    both = explicit_check_all(spec, "ledger", props, shards=2, policy={}, max_depth=4, max_traces=1)
    assert [r.property for r in both] == ["never_two_open", "retired_stays_retired"]
    assert [r.status for r in both] == ["holds_to_depth", "violated"]


@pytest.mark.parametrize(
    ("calls", "message"),
    [
        ('calls = "every"', "calls is 'allowed' (the calls the callers' contracts allow, the default) or 'any'"),
        ('calls = "any"\non = ["open"]', None),
    ],
)
def test_a_bad_calls_value_is_refused(calls: str, message: str | None) -> None:
    if message is None:
        with pytest.raises(SpecError):  # `on` twice: a TOML error, named like any other
            _spec(calls=calls)
        return
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _spec(calls=calls)


def test_a_liveness_property_keeps_the_contracts() -> None:
    text = SPEC.replace("CALLS", "").replace("GUARD", "")
    text += '\n[properties.closes]\nkind = "eventually"\ncalls = "any"\nwhen = "state == OPEN"\n'
    text += 'assert = "state == CLOSED"\nexpect = { base = "violated" }\n'
    with pytest.raises(SpecError, match="a liveness property assumes the callers' contracts"):
        load_spec_text(text, "doors.toml")


def test_mutate_judges_a_check_kept_only_within_the_contracts_within_them(tmp_path: Path, capsys: Any) -> None:
    """The unmutated doors keep `retired_stays_retired` only within the contracts (an `open`
    of a retired door breaks it): mutants get that check within them, as `check` judges it,
    where it used to be excluded and a mutant `ci` catches was reported a survivor."""
    import json

    from ledgercheck.model.cli import main

    path = tmp_path / "doors.toml"
    path.write_text(SPEC.replace("CALLS", "").replace("GUARD", ""), encoding="utf-8")
    code = main(["mutate", str(path), "--format", "json", "--jobs", "1"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["baseline"]["excluded_checks"] == []  # it was excluded, and nothing killed (11 survivors)
    killed = [o for o in report["outcomes"] if o["status"] == "killed_by_property"]
    assert killed and all(o["detail"].startswith("retired_stays_retired (ledger,") for o in killed), killed
    assert {o["ident"] for o in killed} >= {"close:weaken a guard:False"}  # a retired door closed, within them


def test_ci_s_trace_names_the_call_outside_the_contracts(tmp_path: Path, capsys: Any) -> None:
    from ledgercheck.model.cli import main

    path = tmp_path / "doors.toml"
    path.write_text(SPEC.replace("CALLS", 'calls = "any"').replace("GUARD", ""), encoding="utf-8")
    assert main(["ci", str(path), "--no-cache"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "MISMATCH base / retired_stays_retired (ledger)" in out, out
    assert "the callers' contracts rule out step 2, open(0): the property counts every call" in out, out
