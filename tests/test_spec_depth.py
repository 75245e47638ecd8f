"""`[spec] max_depth`: the depth every search of a spec goes to unless `--max-depth` says
otherwise. A counterexample 14 steps deep was a MISMATCH in `ci` (which takes no depth
option) for any spec whose owner knew it was there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledgercheck.model.errors import SpecError
from ledgercheck.model.spec import load_spec_text

SPEC = """\
[spec]
name = "counter"
api_class = "Counter"
state_field = "state"
default_shards = 1
DEPTH

[enums.State]
members = ["LOW", "HIGH"]

[fields]
state = { type = "State", initial = "LOW" }
ticks = { type = "int", initial = 0 }

[events.bump]
call = "bump(i)"
body = \"\"\"
if ticks < 20:
    ticks = ticks + 1
if ticks >= 14:
    state = HIGH
\"\"\"

[environments.ledger]
any_call = true

[properties.stays_low]
kind = "invariant"
assert = "state == LOW"
expect = { base = "violated" }
"""


def _write(tmp_path: Path, depth: str) -> Path:
    path = tmp_path / "counter.toml"
    path.write_text(SPEC.replace("DEPTH", depth), encoding="utf-8")
    return path


def _run(capsys: Any, *args: str) -> tuple[int, str]:
    from ledgercheck.model.cli import main

    code = main(list(args))
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())


def test_the_spec_s_depth_is_every_command_s_default(tmp_path: Path, capsys: Any) -> None:
    shallow = _write(tmp_path, "")
    code, out = _run(capsys, "check", str(shallow), "--no-cache")
    assert code == 1 and "MISMATCH" in out, out  # 14 steps deep: not within the default 12
    deep = _write(tmp_path, "max_depth = 16")
    code, out = _run(capsys, "check", str(deep), "--no-cache")
    assert code == 0 and "VIOLATED" in out and "depth 14" in out, out
    code, out = _run(capsys, "check", str(deep), "--no-cache", "--max-depth", "13")  # the option wins
    assert code == 1 and "MISMATCH" in out, out
    code, out = _run(capsys, "gen", str(deep), "--out", str(tmp_path / "generated"))
    assert code == 0, out
    code, out = _run(capsys, "ci", str(deep), "--out", str(tmp_path / "generated"))
    assert code == 0 and "PASSED" in out, out


@pytest.mark.parametrize(
    ("value", "message"), [("0", "max_depth must be in [1, 64]"), ('"deep"', "must be an integer")]
)
def test_a_bad_depth_is_refused_with_its_line(value: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec_text(SPEC.replace("DEPTH", f"max_depth = {value}"), "counter.toml")
    assert message in str(caught.value) and "counter.toml:6" in str(caught.value)


def test_the_depth_is_part_of_the_spec_s_meaning() -> None:
    from ledgercheck.codegen.meaning import meaning_of

    plain = meaning_of(load_spec_text(SPEC.replace("DEPTH", ""), "counter.toml"))
    deep = meaning_of(load_spec_text(SPEC.replace("DEPTH", "max_depth = 16"), "counter.toml"))
    assert [part for part in plain.parts if plain.parts[part] != deep.parts[part]] == ["spec"]
