"""A person sees the bug at a glance: the breaking step marked in every format, the fields
that matter first, `persistent` fields not flagged as held over, `replay`'s verdicts.

Most tests replay the seed's scenario (the trace the seed found by hand) on the pinned spec.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ledgercheck.model.breaking import find_break
from ledgercheck.model.cli import main
from ledgercheck.model.errors import SpecError
from ledgercheck.model.figure import (
    BEFORE_LABEL,
    BREAKS_LABEL,
    HISTORY,
    INHERITED,
    LEGEND,
    MARKDOWN_LEGEND,
    figure_of,
    trace_figure,
)
from ledgercheck.model.formats import junit_check, markdown_check
from ledgercheck.model.report import render
from ledgercheck.model.result import Result
from ledgercheck.model.runs import CheckRequest, run_checks
from ledgercheck.model.spec import Spec, SpecFile, load_spec, load_spec_text
from ledgercheck.model.trace import Trace, parse_action_call, replay

HEADLINE = "no_condemnation_by_inherited_streak"


@pytest.fixture(scope="module")
def spec_file() -> SpecFile:
    return load_spec()


def seed_trace(spec: Spec) -> Trace:
    scenario = spec.scenarios["seed"]
    env = spec.environment(scenario.environment)
    steps = [parse_action_call(text, env) for text in scenario.steps]
    return replay(spec, env, scenario.shards or spec.default_shards, spec.resolve_policy(), steps, scenario.focus)


def row_marks(spec: Spec, trace: Trace, name: str) -> str:
    figure = figure_of(trace, spec)
    row = next(r for r in figure.rows if r.name == name)
    return "".join(c.mark for c in row.cells)


def test_a_persistent_field_is_not_flagged_as_held_over(spec_file: SpecFile) -> None:
    spec = spec_file.variant("as_written")
    assert next(f for f in spec.fields if f.name == "restart_attempts").persistent
    trace = seed_trace(spec)
    assert INHERITED not in row_marks(spec, trace, "restart_attempts")
    assert INHERITED in row_marks(spec, trace, "consecutive_reported_failures")


@pytest.fixture(scope="module")
def headline_results(spec_file: SpecFile) -> list[Result]:
    """The headline property on as_written, in the ledger environment: violated, as expected."""
    found = run_checks(CheckRequest(spec_file, ("as_written",), (HEADLINE,), "ledger", 2, {}, 8, 1))
    assert [r.status for r in found] == ["violated"]
    return found


def breaking_step(spec: Spec, trace: Trace) -> int:
    where = find_break(trace, spec, spec.properties[HEADLINE])
    assert where is not None
    return where.step


def test_the_seed_breaks_the_headline_at_its_last_step(spec_file: SpecFile) -> None:
    spec = spec_file.variant("as_written")
    trace = seed_trace(spec)
    assert breaking_step(spec, trace) == trace.depth
    assert (
        find_break(seed_trace(spec_file.variant("fixed")), spec_file.variant("fixed"), spec.properties[HEADLINE])
        is None
    )


def test_text_figure_marks_the_step_the_cells_and_the_message(spec_file: SpecFile) -> None:
    spec = spec_file.variant("as_written")
    prop = spec.properties[HEADLINE]
    trace = seed_trace(spec)
    text = trace_figure(trace, spec, prop=prop, width=120)
    assert f"{BREAKS_LABEL}" in text and BEFORE_LABEL in text  # a step property: before and after
    assert f">> step {trace.depth}, report_failure(1), breaks {HEADLINE} on shard 1:" in text
    assert prop.message in text
    assert "[DEAD*]" in text and "[SUSPECT*]" in text  # the state read before and after
    assert BREAKS_LABEL not in trace_figure(trace, spec, width=120)  # no property, no marking


def test_fields_the_property_reads_come_first_and_the_rest_is_folded(spec_file: SpecFile) -> None:
    spec = spec_file.variant("as_written")
    prop = spec.properties[HEADLINE]
    figure = figure_of(seed_trace(spec), spec, prop=prop)
    names = [r.name for r in figure.rows]
    assert names[0] == "state" and figure.rows[0].read
    ledger = [r for r in figure.rows if r.kind == "field"]
    assert [r.read for r in ledger] == sorted((r.read for r in ledger), reverse=True)
    history = [i for i, r in enumerate(figure.rows) if r.kind == "history"]
    assert history == list(range(history[0], len(names)))  # grouped, last
    assert all(names[i].startswith(HISTORY) for i in history)
    assert "consecutive_probe_failures = 0" in figure.folded
    every = figure_of(seed_trace(spec), spec, prop=prop, all_fields=True)
    assert {f.name for f in spec.fields} <= {r.name for r in every.rows} and not every.folded


def test_markdown_marks_the_breaking_step(spec_file: SpecFile, headline_results: list[Result]) -> None:
    text = markdown_check(spec_file, headline_results)
    assert BREAKS_LABEL.strip() in text and "\\[" in text
    assert f"**step {headline_results[0].depth}" in text
    assert text.index(MARKDOWN_LEGEND) < text.index("| shard")  # the legend before the first table


def test_junit_marks_the_breaking_step(spec_file: SpecFile, headline_results: list[Result]) -> None:
    out = ET.fromstring(junit_check(spec_file, headline_results)).find(".//system-out")
    assert out is not None and out.text is not None
    assert BREAKS_LABEL in out.text and f">> step {headline_results[0].depth}" in out.text
    assert out.text.index(LEGEND) < out.text.index("shard 0")


def test_html_marks_the_breaking_step(spec_file: SpecFile, headline_results: list[Result]) -> None:
    page = render(spec_file, headline_results, {}, diagram_depth=2)
    assert '<th scope="col" class="breaks">' in page
    assert re.search(r'<td class="(changed )?read">DEAD', page)
    prop = spec_file.variant("as_written").properties[HEADLINE]
    assert re.search(rf'<p class="breaks"><strong>step \d+, [^<]*</strong>: {re.escape(prop.message)}', page)
    assert page.index("Where each violated property breaks") < page.index('id="verdicts"')


def test_first_screen_of_check_shows_the_breaking_step(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    main(["check", "--variant", "as_written", "--property", HEADLINE, "--environment", "ledger", "--no-progress"])
    screen = "\n".join(capsys.readouterr().out.splitlines()[:40])
    prop = load_spec().variant("as_written").properties[HEADLINE]
    assert re.search(rf"broken at step \d+: {re.escape(prop.message)}", screen), screen


def test_replay_names_the_setting_every_verdict_and_marks_the_step(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["replay", "--variant", "as_written"]) == 0
    out = capsys.readouterr().out
    screen = "\n".join(out.splitlines()[:40])
    prop = load_spec().variant("as_written").properties[HEADLINE]
    assert "environment ledger, 4 shards, policy unhealthy_threshold=3" in screen
    assert f"BROKEN {HEADLINE}: at step 8, report_failure(1): " in screen
    assert prop.message.split()[0] in screen and "holds on every step: " in screen
    assert out.index(LEGEND) < out.index("shard 1 ")
    assert "report_failure(1) [breaks]" in out and ">> step 8, report_failure(1)" in out
    assert main(["replay", "--variant", "as_written", "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "`report_failure(1) [breaks]`" in markdown and "- BROKEN no\\_condemnation" in markdown


def test_prove_verdict_lines_fit_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    names = ["full_streak_condemns", HEADLINE, "restart_always_ends"]
    args = ["prove", "--environment", "ledger", "--variant", "as_written", "--no-progress"]
    main([*args, *(a for n in names for a in ("--property", n))])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("as_written ")]
    assert len(lines) == 3 and all(len(line) <= 120 for line in lines), lines
    main([*args, "--property", "full_streak_condemns", "-v"])
    assert "explicit-state search" in capsys.readouterr().out  # the engine's details, on request


@pytest.mark.parametrize(
    ("args", "suggestion"),
    [
        (["check", "--property", "full_streak_condemn"], "full_streak_condemns"),
        (["check", "--variant", "as_writen"], "as_written"),
        (["check", "--environment", "ledgr"], "ledger"),
        (["check", "--view", "statee", "--property", "retire_retires"], "state"),
        (["replay", "report_failur(1)"], "report_failure"),
        (["replay", "--scenario", "sed"], "seed"),
    ],
)
def test_a_mistyped_name_gets_a_did_you_mean(
    args: list[str], suggestion: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*args, "--max-depth", "1"] if args[0] == "check" else args) == 2
    assert f"(did you mean {suggestion!r}?)" in capsys.readouterr().err


@pytest.mark.slow
def test_plain_run_fits_in_200_lines_and_names_every_verdict(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    main([])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) < 200, len(lines)
    spec_file = load_spec()
    for name in spec_file.variants:
        for prop in spec_file.variant(name).properties:
            assert prop in out  # every property is named, held or broken
    screen = "\n".join(lines[:60])
    assert f"== as_written / {HEADLINE}" in out and BREAKS_LABEL in out
    assert "VIOLATED" in screen


def test_the_readme_figure_is_what_replay_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README opens with `replay --variant as_written` on the bundled spec at 150 columns."""
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    block = readme.split("## What it found", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("COLUMNS", "150")
    assert main(["replay", str(root / "spec" / "fleet_health.toml"), "--variant", "as_written"]) == 0
    assert block.strip() in capsys.readouterr().out


def test_persistent_is_only_for_a_ledger_field() -> None:
    text = (Path(__file__).resolve().parent / "fixtures" / "ledger" / "spec" / "fleet_health.toml").read_text(
        encoding="utf-8"
    )
    head, sep, tail = text.partition("[history.fields]\n")
    assert sep
    name, _, rest = tail.partition(" = {")
    wrong = head + sep + name + " = { persistent = true," + rest
    with pytest.raises(SpecError, match="persistent"):
        load_spec_text(wrong, "wrong.toml")


def test_junit_failure_message_names_the_breaking_step() -> None:
    """A spec copy that wrongly expects the headline to hold in as_written: the <failure>
    message says where the trace breaks it."""
    text = (Path(__file__).resolve().parent / "fixtures" / "ledger" / "spec" / "fleet_health.toml").read_text(
        encoding="utf-8"
    )
    right = 'expect = { as_written = "violated", fixed = "holds", refit_keeps_streak = "holds" }'
    head, sep, tail = text.partition(f"[properties.{HEADLINE}]")
    assert sep and right in tail.split("[properties.", 1)[0]
    spec_file = load_spec_text(head + sep + tail.replace(right, right.replace('"violated"', '"holds"'), 1), "w.toml")
    results = run_checks(CheckRequest(spec_file, ("as_written",), (HEADLINE,), "ledger", 2, {}, 8, 1))
    failure = ET.fromstring(junit_check(spec_file, results)).find(".//failure")
    assert failure is not None
    message = failure.get("message", "")
    assert f"breaks {HEADLINE}" in message and spec_file.variant().properties[HEADLINE].message in message
