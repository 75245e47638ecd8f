"""A property that holds of nothing is said so: its `when` never true where it was checked
(a pool trial: `when = "idle > capacity + 100"` and `assert = "False"` was PROVED)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SPEC = """\
[spec]
name = "door"
state_field = "state"
default_shards = 1

[enums.State]
members = ["SHUT", "OPEN", "JAMMED"]

[fields]
state = {{ type = "State", initial = "SHUT" }}

[events.open]
call = "open(i)"
body = "state = OPEN"

[events.shut]
call = "shut(i)"
body = "state = SHUT"

[environments.ledger]
any_call = true

[properties.jammed_never]
kind = "invariant"
when = "{when}"
assert = "False"
expect = {{ base = "holds" }}
"""


def _check(tmp_path: Path, capsys: Any, when: str, *more: str) -> tuple[int, str]:
    from ledgercheck.model.cli import main

    spec = tmp_path / "door.toml"
    spec.write_text(SPEC.format(when=when), encoding="utf-8")
    code = main(["check", str(spec), "--no-cache", *more])
    return code, capsys.readouterr().out


def test_a_when_never_true_is_reported_as_vacuous(tmp_path: Path, capsys: Any) -> None:
    code, out = _check(tmp_path, capsys, "state == JAMMED")
    assert code == 0, out  # a vacuous property changes no exit code
    assert "VACUOUS   jammed_never (ledger; base): holds, but its when is never true in any reachable state" in out


def test_a_when_that_happens_is_not(tmp_path: Path, capsys: Any) -> None:
    code, out = _check(tmp_path, capsys, "state == JAMMED or state == SHUT")
    assert code == 1, out  # assert False where the when holds: violated, as it should be
    code, out = _check(tmp_path, capsys, "state == JAMMED and state == OPEN")
    assert "VACUOUS" in out


def test_json_names_it(tmp_path: Path, capsys: Any) -> None:
    code, out = _check(tmp_path, capsys, "state == JAMMED", "--format", "json")
    assert code == 0
    results = json.loads(out)["results"] if isinstance(json.loads(out), dict) else json.loads(out)
    assert results[0]["vacuous"] == "in any reachable state"
