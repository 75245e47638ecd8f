"""Every (property, variant) has an expected verdict, so every verdict is a match or a mismatch.

A verdict nobody expected used to print VIOLATED and exit 0 (and pass in JUnit): a new variant,
or a property without `expect`, was checked and silently not judged. The loader now refuses
such a spec with the place to fix it, and `default` states the verdict of the variants an
`expect` does not name.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ledger_fixture import LEDGER_SPEC

from ledgercheck.model.cli import main
from ledgercheck.model.errors import SpecError
from ledgercheck.model.spec import load_spec_text

ROOT = Path(__file__).resolve().parents[1]
FLEET = LEDGER_SPEC.read_text(encoding="utf-8")
BREAKER = (ROOT / "spec" / "examples" / "breaker.toml").read_text(encoding="utf-8")
HEADLINE = "no_condemnation_by_inherited_streak"
HEADLINE_EXPECT = 'did not fail"\nexpect = { as_written = "violated", fixed = "holds", refit_keeps_streak = "holds" }'
HEADLINE_VERDICTS = {"as_written": "violated", "fixed": "holds", "refit_keeps_streak": "holds"}
# A breaker whose failed half-open trial starts the count afresh: the README's deliberately
# false claim (`failures_reset_when_closed`) is violated as written and holds in `fixed`.
BREAKER_WITH_FIX = (
    BREAKER.replace('expect = { base = "holds" }', 'expect = { default = "holds" }')
    .replace('expect = { base = "violated" }', 'expect = { base = "violated", fixed = "holds" }')
    .rstrip("\n")
    + """

[variants.base]
doc = "the breaker as written"

[[variants.fixed.patch]]
event = "cool_down"
after = "state = HALF_OPEN"
insert = "failures = 0"
"""
)


def line_of(text: str, snippet: str) -> int:
    assert text.count(snippet) == 1, snippet
    return text[: text.index(snippet)].count("\n") + 1


def check(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["check", str(path), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_property_of_the_shipped_spec_expects_a_verdict_for_every_variant() -> None:
    spec_file = load_spec_text(FLEET, "fleet_health.toml")
    for variant in spec_file.variants:
        for prop in spec_file.variant(variant).properties.values():
            assert tuple(prop.expect) == spec_file.variants, prop.name
            assert set(prop.expect.values()) <= {"holds", "violated"}


def test_a_property_without_expect_is_refused_at_its_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = BREAKER.replace('message = "the failure count ran past the threshold"\nexpect = { base = "violated" }\n', "")
    assert text != BREAKER
    path = tmp_path / "breaker.toml"
    path.write_text(text, encoding="utf-8")
    code, _, err = check(path, capsys, "--environment", "ledger", "--max-depth", "1")
    assert code == 2
    line = line_of(text, "[properties.failures_reset_when_closed]")
    assert err.startswith(f"ledgercheck: {path}:{line}:2: property 'failures_reset_when_closed' has no expected ")
    assert "variant 'base'" in err and "Traceback" not in err


def test_a_new_variant_is_refused_at_its_table_naming_the_properties(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = FLEET.rstrip("\n") + '\n\n[variants.retry]\ndoc = "a third variant"\n'
    path = tmp_path / "fleet.toml"
    path.write_text(text, encoding="utf-8")
    code, _, err = check(path, capsys, "--max-depth", "1")
    assert code == 2
    line = line_of(text, "[variants.retry]")
    assert re.match(rf"ledgercheck: {re.escape(str(path))}:{line}:2: variant 'retry' has no expected verdict", err)
    first_properties = list(load_spec_text(FLEET).variant().properties)[:3]
    assert all(name in err for name in first_properties), err


def test_a_variant_named_default_is_refused() -> None:
    text = FLEET.rstrip("\n") + "\n\n[variants.default]\n"
    with pytest.raises(SpecError) as caught:
        load_spec_text(text, "fleet.toml")
    assert caught.value.where.line == line_of(text, "[variants.default]")
    assert "'default' cannot name a variant" in caught.value.message


@pytest.mark.parametrize(
    "written",
    [
        '{ default = "holds", as_written = "violated" }',
        '{ as_written = "violated", default = "holds" }',
        '{ default = "violated", fixed = "holds", refit_keeps_streak = "holds" }',
        '{ as_written = "violated", default = "holds", fixed = "holds" }',  # default between named ones
        '{ as_written = "violated", fixed = "holds", refit_keeps_streak = "holds", default = "holds" }',  # unneeded
    ],
)
def test_default_gives_the_verdict_of_every_variant_not_named(written: str) -> None:
    text = FLEET.replace(HEADLINE_EXPECT, f'did not fail"\nexpect = {written}')
    assert text != FLEET
    prop = load_spec_text(text).variant("fixed").properties[HEADLINE]
    assert dict(prop.expect) == HEADLINE_VERDICTS


def test_a_default_alone_covers_every_variant() -> None:
    text = FLEET.replace(HEADLINE_EXPECT, 'did not fail"\nexpect = { default = "holds" }')
    prop = load_spec_text(text).variant().properties[HEADLINE]
    assert dict(prop.expect) == {"as_written": "holds", "fixed": "holds", "refit_keeps_streak": "holds"}


def test_a_default_must_be_a_verdict() -> None:
    text = FLEET.replace(HEADLINE_EXPECT, 'did not fail"\nexpect = { default = "hold" }')
    with pytest.raises(SpecError) as caught:
        load_spec_text(text, "fleet.toml")
    assert caught.value.where.line == line_of(text, 'expect = { default = "hold" }')
    assert "verdict of 'default' must be 'holds' or 'violated', not 'hold' (did you mean 'holds'?)" in str(caught.value)


def readme_spec() -> str:
    """The complete small spec the README's "Writing a spec" section shows."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Writing a spec", 1)[1]
    return section.split("```toml\n", 1)[1].split("```", 1)[0]


def test_the_readme_example_is_checked_as_its_base_variant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "breaker.toml"
    path.write_text(readme_spec(), encoding="utf-8")
    code, out, err = check(path, capsys, "--environment", "ledger", "--max-depth", "4", "--format", "json")
    assert code == 0, err
    (result,) = json.loads(out)
    assert (result["variant"], result["expected"], result["matches"]) == ("base", "holds", True)


def test_a_declared_base_is_checked_beside_a_patched_variant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`base` declared with no patch is the spec as written; the expectations of both variants
    are met, and the JSON gives `expected` and `matches` for every result."""
    spec_file = load_spec_text(BREAKER_WITH_FIX)
    assert spec_file.variants == ("base", "fixed")
    as_written = load_spec_text(BREAKER).variant()
    assert spec_file.variant("base").events == as_written.events
    assert spec_file.variant("fixed").events != as_written.events
    path = tmp_path / "breaker.toml"
    path.write_text(BREAKER_WITH_FIX, encoding="utf-8")
    code, out, err = check(path, capsys, "--environment", "ledger", "--max-depth", "6", "--format", "json")
    assert code == 0, err
    results = json.loads(out)
    assert len(results) == 6
    assert all(r["expected"] in ("holds", "violated") and r["matches"] is True for r in results), results
    verdicts = {(r["variant"], r["property"]): r["status"] for r in results}
    assert verdicts[("base", "failures_reset_when_closed")] == "violated"
    assert verdicts[("fixed", "failures_reset_when_closed")] == "holds_to_depth"


def test_a_violated_property_expected_to_hold_exits_1_and_fails_in_junit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = BREAKER.replace('expect = { base = "violated" }', 'expect = { base = "holds" }')
    path = tmp_path / "breaker.toml"
    path.write_text(text, encoding="utf-8")
    argv = ("--environment", "ledger", "--max-depth", "6", "--property", "failures_reset_when_closed")
    code, out, _ = check(path, capsys, *argv)
    assert code == 1
    assert "MISMATCH: the spec expects holds" in out
    code, out, _ = check(path, capsys, *argv, "--format", "junit")
    assert code == 1
    root = ET.fromstring(out)
    assert root.get("failures") == "1"
    (case,) = root.iter("testcase")
    assert (case.get("classname"), case.get("name")) == ("base", "failures_reset_when_closed")
    failure = case.find("failure")
    assert failure is not None and "the spec expects holds" in (failure.get("message") or "")
