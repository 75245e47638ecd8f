"""Output formats: the text figure (colour only on a terminal), Markdown for pull-request
reviews, ITF traces, JUnit XML, the HTML report and its state diagram, and progress on stderr.

One check run (2 shards, depth 9, one trace per result: every verdict of the bundled spec at
that bound) feeds most tests; the mismatch tests check one property of a spec copy whose
expectation is wrong on purpose.
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from ledger_fixture import LEDGER_EXAMPLES, LEDGER_SPEC

from ledgercheck.model import bmc
from ledgercheck.model.cli import main
from ledgercheck.model.console import progress_for
from ledgercheck.model.diagram import state_diagram, svg
from ledgercheck.model.figure import ANSI_RESET, colour_enabled, trace_figure
from ledgercheck.model.formats import expectation_text, itf_check, junit_check, markdown_check, render_check
from ledgercheck.model.report import render, write_atomic
from ledgercheck.model.runs import CheckRequest, reading_order, run_checks
from ledgercheck.model.spec import SpecFile, load_spec, load_spec_text

SHARDS = 2
DEPTH = 9
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def results(spec_file: SpecFile) -> list[bmc.Result]:
    """Every property and variant under the controller (slow: the tests that take it are marked so)."""
    found = run_checks(CheckRequest(spec_file, environment="controller", shards=SHARDS, max_depth=DEPTH, max_traces=1))
    assert all(r.matches is not False for r in found), "the bundled spec's expectations hold at this bound"
    return found


@pytest.fixture(scope="module")
def mismatched() -> tuple[SpecFile, list[bmc.Result]]:
    """A spec copy that wrongly expects `suspicion_survives_abort` to be violated in as_written."""
    text = LEDGER_SPEC.read_text(encoding="utf-8")
    head, sep, tail = text.partition("[properties.suspicion_survives_abort]")
    assert sep, "the bundled spec has no suspicion_survives_abort"
    right = 'expect = { as_written = "holds", fixed = "holds", refit_keeps_streak = "holds" }'
    assert right in tail.split("[properties.", 1)[0]
    wrong = head + sep + tail.replace(right, right.replace('as_written = "holds"', 'as_written = "violated"'), 1)
    spec_file = load_spec_text(wrong, "wrong_expectation.toml")
    request = CheckRequest(
        spec_file,
        properties=("suspicion_survives_abort",),
        environment="controller",
        shards=SHARDS,
        max_depth=6,
        max_traces=1,
    )
    found = run_checks(request)
    return spec_file, found


def all_traces(results: list[bmc.Result]) -> list[Any]:
    return [t for r in results for t in (*r.traces, *r.lax_traces)]


# --- the text figure -----------------------------------------------------------------------


@pytest.mark.slow
def test_colour_is_layout_neutral(spec_file: SpecFile, results: list[bmc.Result]) -> None:
    trace = next(t for r in results for t in r.traces)
    spec = spec_file.variant(trace.variant)
    plain = trace_figure(trace, spec, width=100)
    coloured = trace_figure(trace, spec, width=100, colour=True)
    assert "\x1b[" not in plain
    assert ANSI_RESET in coloured and "\x1b[1;33m" in coloured  # changed cells: bold yellow
    assert ANSI.sub("", coloured) == plain


@pytest.mark.slow
def test_inherited_cells_are_red(spec_file: SpecFile, results: list[bmc.Result]) -> None:
    trace = next(t for r in results if r.property == "restarted_engine_refits_healthy" for t in r.traces)
    coloured = trace_figure(trace, spec_file.variant(trace.variant), width=300, colour=True)
    assert re.search(r"\x1b\[31m[^\x1b]*!\x1b\[0m", coloured)


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert colour_enabled(FakeTerminal())
    assert not colour_enabled(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not colour_enabled(FakeTerminal())


def test_replay_output_has_no_ansi_when_not_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert main(["replay"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out and "SUSPECT*" in out


def test_no_color_turns_colour_off_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdout", FakeTerminal())
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("NO_COLOR", "1")
    import sys

    assert main(["replay", "--variant", "as_written"]) == 0
    out = sys.stdout.getvalue()  # type: ignore[attr-defined]
    assert "SUSPECT*" in out and "\x1b[" not in out
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setattr("sys.stdout", FakeTerminal())
    assert main(["replay", "--variant", "as_written"]) == 0
    assert "\x1b[1;33mSUSPECT*" in sys.stdout.getvalue()  # type: ignore[attr-defined]


# --- progress ------------------------------------------------------------------------------


def test_progress_on_a_terminal_only() -> None:
    assert progress_for(None, io.StringIO()) is None
    assert progress_for(False, FakeTerminal()) is None
    lines = io.StringIO()
    explicit = progress_for(True, lines)
    assert explicit is not None
    explicit("p: depth 1")
    assert lines.getvalue() == "p: depth 1\n"
    terminal = FakeTerminal()
    status = progress_for(None, terminal)
    assert status is not None
    status("p: depth 1")
    status("p: depth 2")
    status.close()
    assert terminal.getvalue().endswith("\r\x1b[K") and "p: depth 2" in terminal.getvalue()


def test_check_is_silent_on_stderr_when_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--variant", "fixed", "--property", "suspicion_survives_abort", "--max-depth", "3"])
    assert code == 0
    assert capsys.readouterr().err == ""


# --- Markdown ------------------------------------------------------------------------------


@pytest.mark.slow
def test_markdown_has_a_verdict_line_per_result_and_a_table_per_trace(
    spec_file: SpecFile, results: list[bmc.Result]
) -> None:
    text = markdown_check(spec_file, results)
    lines = text.splitlines()
    for result in results:
        verdicts = [
            line for line in lines if line.startswith("- ") and f"`{result.variant}` / `{result.property}`" in line
        ]
        assert len(verdicts) == 1, result.property
        assert expectation_text(result) in verdicts[0]  # "as expected", or "not applicable" elsewhere
    separators = [line for line in lines if re.fullmatch(r"\|(---\|)+", line)]
    assert len(separators) == len(all_traces(results)) >= 3
    assert "| `state` |" in text and "**`SUSPECT`**" in text  # changed cells bold
    assert re.search(r"`[0-9A-Z]+` !", text)  # an inherited cell


def test_markdown_flags_a_mismatch(mismatched: tuple[SpecFile, list[bmc.Result]]) -> None:
    spec_file, found = mismatched
    text = markdown_check(spec_file, found)
    bad = [line for line in text.splitlines() if "❌" in line]
    assert len(bad) == 1 and "`as_written`" in bad[0] and "MISMATCH" in bad[0]


def test_replay_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert sum(1 for line in out.splitlines() if re.fullmatch(r"\|(---\|)+", line)) == 3  # a table per variant
    assert "### `as_written`" in out and "### `fixed`" in out


# --- ITF -----------------------------------------------------------------------------------


def raw_numbers(value: Any, path: str = "$") -> list[str]:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, (int, float)):
        return [path]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in raw_numbers(v, f"{path}[{i}]")]
    return [p for k, v in value.items() if k != "#meta" for p in raw_numbers(v, f"{path}.{k}")]


@pytest.mark.slow
def test_itf_traces(spec_file: SpecFile, results: list[bmc.Result]) -> None:
    data = json.loads(itf_check(spec_file, results))
    traces = all_traces(results)
    assert isinstance(data, list) and len(data) == len(traces)
    for itf, trace in zip(data, traces, strict=True):
        assert itf["#meta"]["format"] == "ITF"
        assert itf["#meta"]["variant"] == trace.variant
        assert len(itf["states"]) == len(trace.steps) == trace.depth + 1
        for index, state in enumerate(itf["states"]):
            assert state["#meta"] == {"index": index}
            assert set(state) - {"#meta"} == set(itf["vars"])
        assert raw_numbers(itf["states"]) == []  # every integer is {"#bigint": "n"}
        first, last = itf["states"][0], itf["states"][-1]
        assert first["mbt::actionTaken"] == "init"
        assert last["mbt::actionTaken"] == trace.steps[-1].action
        focus = trace.focus or 0
        assert first["shards"][focus]["state"] == {"tag": "HEALTHY", "value": {"#tup": []}}
        assert first["shards"][focus]["state_before_partial"] == {"tag": "None", "value": {"#tup": []}}
        assert last["shards"][focus]["restart_attempts"] == {
            "#bigint": str(trace.steps[-1].after["shards"][focus]["restart_attempts"])
        }


def test_itf_via_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["check", "--variant", "as_written", "--property", "restarted_engine_refits_healthy"]
    code = main(
        [
            *args,
            "--environment",
            "controller",
            "--shards",
            "2",
            "--max-depth",
            "6",
            "--max-traces",
            "1",
            "--format",
            "itf",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data) == 1 and len(data[0]["states"]) == 7


# --- JUnit ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_junit_one_testcase_per_result(spec_file: SpecFile, results: list[bmc.Result]) -> None:
    root = ET.fromstring(junit_check(spec_file, results))
    cases = root.findall(".//testcase")
    ordered = reading_order(results)  # what needs attention first; here the skipped rows go last
    assert [(c.get("classname"), c.get("name")) for c in cases] == [(r.variant, r.property) for r in ordered]
    assert root.findall(".//failure") == [] and root.get("failures") == "0"
    for case, result in zip(cases, ordered, strict=True):
        out = case.find("system-out")
        assert out is not None and out.text is not None
        assert out.text.startswith(f"{result.variant} / {result.property}: ")


def test_junit_failures_exactly_at_mismatches(mismatched: tuple[SpecFile, list[bmc.Result]]) -> None:
    spec_file, found = mismatched
    assert [(r.variant, r.matches) for r in found] == [
        ("as_written", False),
        ("fixed", True),
        ("refit_keeps_streak", True),
    ]
    root = ET.fromstring(render_check("junit", spec_file, found))
    failing = [(c.get("classname"), c.get("name")) for c in root.iter("testcase") if c.find("failure") is not None]
    assert failing == [("as_written", "suspicion_survives_abort")]
    assert root.get("tests") == "3" and root.get("failures") == "1"


@pytest.mark.slow
def test_writers_are_deterministic(spec_file: SpecFile, results: list[bmc.Result]) -> None:
    for fmt in ("markdown", "itf", "junit"):
        assert render_check(fmt, spec_file, results) == render_check(fmt, spec_file, results)


# --- the HTML report -----------------------------------------------------------------------

EXTERNAL = [
    re.compile(r"https?://", re.I),
    re.compile(r"<script\b", re.I),
    re.compile(r"<link\b", re.I),
    re.compile(r"<iframe\b|<object\b|<embed\b|<img\b", re.I),
    re.compile(r"@import|url\((?!#)", re.I),  # url(#id) is a marker inside the page
    re.compile(r"""\b(src|href|xlink:href)\s*=\s*(?!["']?#)""", re.I),  # only links within the page
]


@pytest.mark.slow
def test_report_is_self_contained_and_complete(spec_file: SpecFile, results: list[bmc.Result]) -> None:
    page = render(spec_file, results, {"environment": "controller"}, diagram_depth=6)
    for pattern in EXTERNAL:
        assert not pattern.search(page), f"external reference: {pattern.pattern}"
    for result in results:
        row = re.search(
            rf'<tr class="\w+" data-variant="{result.variant}" data-property="{result.property}" '
            rf'data-status="{result.status}" data-environment="{result.environment}">.*?</tr>',
            page,
        )
        assert row, (result.variant, result.property)
        assert expectation_text(result) in row.group(0)
    # as_written and fixed have the same state diagram; refit_keeps_streak adds STALE -> SUSPECT
    # for a shard with a streak of its own, so its diagram is drawn apart
    assert page.count("<svg") == 2
    assert page.count('<div class="panels">') == len(all_traces(results))  # a figure: panels of tables
    assert 'class="changed"' in page and 'class="inherited"' in page
    assert page == render(spec_file, results, {"environment": "controller"}, diagram_depth=6)


def test_report_command_writes_atomically(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "report.html"
    target.write_text("old page", encoding="utf-8")
    args = ["report", "--html", str(target), "--shards", "2", "--max-depth", "6", "--max-traces", "1"]
    args += ["--variant", "fixed", "--environment", "ledger"]  # one check: the writing is what is tested
    assert main([*args, "--property", "restarted_engine_refits_healthy"]) == 0
    assert "wrote" in capsys.readouterr().out
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "restarted_engine_refits_healthy" in page
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # no temporary file left


def test_report_refuses_an_unwritable_target_before_checking(tmp_path: Path) -> None:
    assert main(["report", "--html", str(tmp_path / "missing" / "r.html")]) == 2
    assert main(["report", "--html", str(tmp_path)]) == 2


def test_write_atomic_keeps_the_old_page_on_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "r.html"
    target.write_text("old", encoding="utf-8")

    def broken(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", broken)
    with pytest.raises(Exception, match="cannot write"):
        write_atomic(target, "new")
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


# --- the state diagram ---------------------------------------------------------------------


def test_state_diagram_is_derived_from_the_spec(spec_file: SpecFile) -> None:
    spec = spec_file.variant("as_written")
    diagram = state_diagram(spec, depth=6)
    assert diagram.states == tuple(spec.enums[spec.state_enum].members)
    edges = {(e.source, e.target): set(e.events) for e in diagram.edges}
    assert {"report_failure", "record_probe"} <= edges[("HEALTHY", "SUSPECT")]
    assert edges[("STALE", "SUSPECT")] == {"report_refit"}
    assert edges[("RESTARTING", "STALE")] == {"mark_loaded"}
    assert "mark_restarting" in edges[("DEAD", "RETIRED")]  # needs the smallest restart budget
    assert ("HEALTHY", "RESTARTING") not in edges  # only outside the callers' contracts:
    assert any(e.source == "HEALTHY" and e.target == "RESTARTING" for e in diagram.lax_edges)
    picture = svg(diagram, "fleet")
    assert picture.startswith("<svg") and picture.count('class="node') == len(diagram.states)
    assert "from any state:" in picture  # retire, once, instead of five arrows


def test_state_diagram_of_another_spec() -> None:
    breaker = load_spec(LEDGER_EXAMPLES / "breaker.toml").variant()
    diagram = state_diagram(breaker, depth=6)
    edges = {(e.source, e.target): set(e.events) for e in diagram.edges}
    assert edges == {
        ("CLOSED", "OPEN"): {"record_failure"},
        ("OPEN", "HALF_OPEN"): {"cool_down"},
        ("HALF_OPEN", "OPEN"): {"record_failure"},
        ("HALF_OPEN", "CLOSED"): {"record_success"},
    }


def test_a_legend_names_only_the_marks_its_spec_can_show(spec_file):
    """`!` (held over from an earlier process incarnation) is the ledger's: a spec with no
    `incarnation` history field never shows it, nor `~` without history fields."""
    from ledgercheck.model.figure import legend, markdown_legend
    from ledgercheck.model.spec import load_spec

    examples = Path(__file__).resolve().parents[1] / "spec" / "examples"
    ledger = spec_file.variant("fixed")
    assert "incarnation" in legend(ledger) and "incarnation" in markdown_legend(ledger)
    timed = load_spec(str(examples / "timed_breaker.toml")).variant()  # history, no incarnations
    assert "incarnation" not in legend(timed) + markdown_legend(timed)
    assert "history (ghost) variable" in legend(timed)
    plain = load_spec(str(examples / "listener_breaker.toml")).variant()  # no history at all
    assert "history" not in legend(plain) + markdown_legend(plain)
    assert legend(plain).startswith("* changed by the step;\n[x] read by the property")


FENCE_SPEC = """\
[spec]
name = "lease"
state_field = "role"
default_shards = 1

[enums.Role]
members = ["FOLLOWER", "LEADER", "FENCED"]

[fields]
role = { type = "Role", initial = "FOLLOWER" }
term = { type = "int", initial = 0 }

[events.win]
call = "win(i)"
body = \"\"\"
term = term + 1
role = LEADER
\"\"\"

[events.fence]
call = "fence(i, fencing: int)"
ignore_when = "role != LEADER or args.fencing <= term + 2"
body = "role = FENCED"

[environments.ledger]
any_call = true

[properties.fenced_has_a_term]
kind = "invariant"
assert = "role != FENCED or term > 0"
expect = { base = "holds" }
"""


def test_the_state_diagram_tries_the_values_an_argument_is_compared_with():
    """`fence` moves LEADER to FENCED only with a fencing term above the leader's by 3: the
    diagram tried 0 and 1 and drew no such edge; it tries the values the spec compares the
    argument with, as the coverage search does (`model.arguments`)."""
    from ledgercheck.model.diagram import state_diagram
    from ledgercheck.model.spec import load_spec_text

    diagram = state_diagram(load_spec_text(FENCE_SPEC, "lease.toml").variant())
    assert ("LEADER", "FENCED", ("fence",)) in [(e.source, e.target, e.events) for e in diagram.edges]


def test_the_state_diagram_lets_time_pass():
    """The timed breaker half-opens only once its timeout has passed: the diagram never
    ticked the clock and drew HALF_OPEN with no arrow in or out."""
    from ledgercheck.model.diagram import state_diagram
    from ledgercheck.model.spec import load_spec

    timed = load_spec(str(Path(__file__).resolve().parents[1] / "spec" / "examples" / "timed_breaker.toml"))
    edges = {(e.source, e.target): e.events for e in state_diagram(timed.variant()).edges}
    assert edges[("OPEN", "HALF_OPEN")] == ("allow",)
    assert edges[("HALF_OPEN", "CLOSED")] == ("record_success",) and edges[("HALF_OPEN", "OPEN")] == ("record_failure",)


def test_markdown_stays_within_a_pull_request_comment(spec_file: SpecFile, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled ledger's full check was 136,543 characters of Markdown, over the 65,536 a
    pull-request comment takes: every verdict line stays, trace tables come while they fit.
    (One variant in one environment: the cut does not depend on how many checks there are, and
    the fast lane need not wait for the module's whole check, which only slow tests take.)"""
    from ledgercheck.model import formats

    request = CheckRequest(spec_file, variants=("as_written",), environment="ledger", shards=SHARDS, max_depth=DEPTH)
    results = run_checks(request.overlay(max_traces=1))
    full = markdown_check(spec_file, results)
    with_traces = [r for r in results if r.traces]
    assert len(with_traces) >= 2
    monkeypatch.setattr(formats, "MAX_MARKDOWN_CHARS", len(full) // 2)
    cut = markdown_check(spec_file, results)
    assert len(cut) < len(full) // 2 + 1000
    assert [line for line in cut.splitlines() if line.startswith("- ")] == [
        line for line in full.splitlines() if line.startswith("- ")
    ]
    assert "result(s) with traces left out, to stay within a pull-request comment" in cut
