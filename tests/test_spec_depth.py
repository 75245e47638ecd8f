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


# --- [conform]: the spec owner's defaults for conform, and so for ci ------------------------

BUCKET = """\
[spec]
name = "bucket"
api_class = "Bucket"
state_field = "state"
default_shards = 1

[enums.State]
members = ["FULL", "EMPTY"]

[fields]
state = { type = "State", initial = "FULL" }
tokens = { type = "int", initial = 2 }

[events.take]
call = "take(i)"
body = \"\"\"
if tokens > 0:
    tokens = tokens - 1
if tokens == 0:
    state = EMPTY
\"\"\"

[environments.ledger]
any_call = true

[properties.never_negative]
kind = "invariant"
assert = "tokens >= 0"
expect = { base = "holds" }

[implementation]
construct = { n = "instances" }

[implementation.fields]
state = "slots[i].state"
tokens = "slots[i].tokens"
CONFORM
"""

SLOTS = """\
class Slot:
    def __init__(self):
        self.state, self.tokens = "FULL", 2


class Bucket:
    def __init__(self, n):
        self.slots = [Slot() for _ in range(n)]

    def take(self, i):
        slot = self.slots[i]
        if slot.tokens > 0:
            slot.tokens -= 1
        if slot.tokens == 0:
            slot.state = "EMPTY"
"""


def test_conform_s_defaults_come_from_the_spec_and_yield_to_its_options(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "bucket.toml").write_text(
        BUCKET.replace("CONFORM", '[conform]\ndepth = 3\nrandom = 200\nmerge = "full"'), encoding="utf-8"
    )
    (tmp_path / "slots.py").write_text(SLOTS, encoding="utf-8")
    target = f"{tmp_path / 'slots.py'}:Bucket"
    code, out = _run(capsys, "conform", str(tmp_path / "bucket.toml"), "--impl", target)
    assert code == 0, out
    assert "any call, depth 3:" in out and "random 1 shard: 200 calls" in out, out
    code, out = _run(capsys, "conform", str(tmp_path / "bucket.toml"), "--impl", target, "--depth", "2")
    assert code == 0 and "any call, depth 2:" in out and "200 calls" in out, out


def test_a_bad_conform_table_is_refused_and_it_is_not_the_spec_s_meaning() -> None:
    from ledgercheck.codegen.meaning import meaning_of

    with pytest.raises(SpecError, match="merge is 'ledger' or 'full', not 'all'"):
        load_spec_text(BUCKET.replace("CONFORM", '[conform]\nmerge = "all"'), "bucket.toml")
    with pytest.raises(SpecError, match="unknown key 'deep' in \\[conform\\]"):
        load_spec_text(BUCKET.replace("CONFORM", "[conform]\ndeep = 3"), "bucket.toml")
    plain = meaning_of(load_spec_text(BUCKET.replace("CONFORM", ""), "bucket.toml"))
    tuned = meaning_of(load_spec_text(BUCKET.replace("CONFORM", "[conform]\ndepth = 6"), "bucket.toml"))
    assert plain == tuned  # how conform searches is not what the generated tests expect
