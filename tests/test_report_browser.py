"""The HTML report in a real browser: headless Chromium loads it from file://, with every
network name unresolvable, and must show every result, log nothing to the console and fetch
nothing. A screenshot is kept under the test's tmp_path as an artefact.

Skipped only when Chromium is not installed (`apt-get install chromium`; `.ci/run` does it).
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from ledgercheck.model.cli import main
from ledgercheck.model.diagram import LABEL_CHAR, LINE

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

# Hosts Chromium itself calls in the background (updates, time, accounts), whatever the flags;
# every name is unresolvable in these runs, so nothing leaves the machine either way.
BROWSER_HOSTS = re.compile(r"^https?://([a-z0-9-]+\.)*(google|googleapis|gvt1|gstatic|chromium)\.(com|org)(/|:|$)")


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


class Rows(HTMLParser):
    """The verdict rows (data-variant, data-property, data-status) and the page's elements."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, str, str, str]] = []
        self.tags: dict[str, int] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        values = dict(attrs)
        if tag == "tr" and values.get("data-variant"):
            self.rows.append(
                (
                    values["data-variant"] or "",
                    values["data-property"] or "",
                    values.get("data-environment") or "",
                    values["data-status"] or "",
                )
            )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, object]]]:
    """The report of a small run, and the same run's results as `check --format json` gives them
    (read from a cache of results of the fixture's own, which the report's run filled: the
    suite runs with the cache off, and tests/test_resultcache.py shows it prints what solving does)."""
    out = tmp_path_factory.mktemp("report")
    page = out / "report.html"
    args = ["--shards", "2", "--max-depth", "6", "--max-traces", "1"]
    args += ["--property", "restarted_engine_refits_healthy", "--property", "suspicion_survives_abort"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LEDGERCHECK_CACHE", str(out / "cache"))
        patch.delenv("LEDGERCHECK_RESULTS", raising=False)
        assert main(["report", "--html", str(page), *args]) == 0
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert main(["check", *args, "--format", "json"]) == 0
    assert list((out / "cache" / "results").glob("result-*.pickle"))  # the report's run filled it
    return page, json.loads(buffer.getvalue())


def test_report_loads_in_chromium_and_shows_every_result(
    report: tuple[Path, list[dict[str, object]]], tmp_path: Path
) -> None:
    page, results = report
    url = page.resolve().as_uri()
    net_log = tmp_path / "net-log.json"
    run = chromium(tmp_path, "--enable-logging=stderr", "--v=0", f"--log-net-log={net_log}", "--dump-dom", url)
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    parser = Rows()
    parser.feed(dom)
    expected = [(str(r["variant"]), str(r["property"]), str(r["environment"]), str(r["status"])) for r in results]
    # every variant x both properties x every environment they apply to: one row each
    assert len({row[2] for row in expected}) >= 2 and len(expected) == len(set(expected))
    assert sorted(parser.rows) == sorted(expected)
    # one state diagram per group of variants that draw the same picture
    assert parser.tags.get("svg", 0) == dom.count('class="diagram"') >= 1 and parser.tags.get("script", 0) == 0
    figures = sum(len(r["traces"]) + len(r.get("lax_traces", [])) for r in results)  # type: ignore[arg-type]
    violated = [r for r in results if r["status"] == "violated"]
    assert violated and all(len(r["traces"]) == 1 for r in violated)  # type: ignore[arg-type]
    assert dom.count('class="panels"') == figures  # every trace (and lax trace) drawn once, in panels
    for _, prop, _, _ in expected:
        assert prop in dom

    console = [
        line
        for line in run.stderr.splitlines()
        if ("CONSOLE" in line or "Uncaught" in line or "Not allowed to load" in line) and page.name in line
    ]
    assert console == [], "\n".join(console)

    if net_log.exists():  # every URL the browser asked for: the page asks for none
        urls = set(re.findall(r'"url":"([^"]+)"', net_log.read_text(encoding="utf-8", errors="replace")))
        fetched = sorted(u for u in urls if not u.startswith(("file:", "data:")) and not BROWSER_HOSTS.match(u))
        assert fetched == [], fetched


def test_report_screenshot(report: tuple[Path, list[dict[str, object]]], tmp_path: Path) -> None:
    page, _ = report
    shot = tmp_path / "report.png"
    run = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,2000", page.resolve().as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000  # a rendered page, not a blank one


# Measures the rendered page (in a test copy only: the report itself has no script): the right
# edge of every breaking step's header cell, and the box of every label of the state diagram.
MEASURE = """<script>
window.addEventListener("load", () => {
  const breaks = [...document.querySelectorAll("th.breaks")].map((th) => th.getBoundingClientRect().right);
  const labels = [...document.querySelectorAll("svg.state-diagram")].map((svg) =>
    [...svg.querySelectorAll("text.edge-label")].map((t) => {
      const r = t.getBoundingClientRect();
      return [r.left, r.top, r.right, r.bottom, t.textContent];
    }));
  const out = document.createElement("pre");
  out.id = "geometry";
  out.textContent = JSON.stringify({ breaks, labels });
  document.body.appendChild(out);
});
</script>"""


def measured(page: Path, tmp_path: Path) -> dict[str, Any]:
    probe = tmp_path / "measured.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    run = chromium(tmp_path, "--window-size=1400,1000", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="geometry">(.*?)</pre>', run.stdout, re.S)
    assert found, run.stdout[-2000:]
    return dict(json.loads(html.unescape(found.group(1))))


def test_breaking_step_is_within_the_first_screen_width(
    report: tuple[Path, list[dict[str, object]]], tmp_path: Path
) -> None:
    page, _ = report
    geometry = measured(page, tmp_path)
    assert geometry["breaks"], "no breaking step is marked"
    assert max(geometry["breaks"]) <= 1400


def test_no_two_diagram_labels_overlap(report: tuple[Path, list[dict[str, object]]], tmp_path: Path) -> None:
    page, _ = report
    geometry = measured(page, tmp_path)
    for labels in geometry["labels"]:
        assert labels
        for index, a in enumerate(labels):
            for b in labels[index + 1 :]:
                apart = a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
                assert apart, f"{a[4]!r} overlaps {b[4]!r}"


def test_no_label_crosses_an_arrow_it_does_not_belong_to(report: tuple[Path, list[dict[str, object]]]) -> None:
    """From the SVG as written: each label's box (as the layout sized it) against the points of
    every other arrow; labels and arrows come in the same order (edges, then "from any state")."""
    page, _ = report
    for picture in re.findall(r"<svg class=\"state-diagram\".*?</svg>", page.read_text(encoding="utf-8"), re.S):
        labels, curves = label_boxes(picture), arrow_points(picture)
        assert labels and len(labels) == len(curves)
        for index, (text, box) in enumerate(labels):
            for other, points in enumerate(curves):
                inside = [p for p in points if box[0] < p[0] < box[2] and box[1] < p[1] < box[3]]
                assert other == index or not inside, f"label {text!r} crosses arrow {other}"


def label_boxes(picture: str) -> list[tuple[str, tuple[float, float, float, float]]]:
    out = []
    for body in re.findall(r'<text class="edge-label[^"]*"[^>]*>(.*?)</text>', picture):
        spans = re.findall(r'<tspan x="([-\d.]+)" y="([-\d.]+)">(.*?)</tspan>', body)
        lines = [html.unescape(text) for _, _, text in spans]
        centre, first = float(spans[0][0]), float(spans[0][1])
        top = first - 1 - LINE * 0.78
        width = max(len(line) for line in lines) * LABEL_CHAR + 6
        out.append((" ".join(lines), (centre - width / 2, top, centre + width / 2, top + len(lines) * LINE + 2)))
    return out


def arrow_points(picture: str) -> list[list[tuple[float, float]]]:
    out = []
    for path in re.findall(r'<path class="edge[^"]*" d="([^"]+)"', picture):
        n = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", path)]
        a, q, b = (n[0:2], n[2:4], n[4:6]) if len(n) == 6 else (n[0:2], [(n[0] + n[2]) / 2, (n[1] + n[3]) / 2], n[2:4])
        points = []
        for k in range(129):
            t = k / 128
            u = 1 - t
            points.append(tuple(u * u * a[i] + 2 * u * t * q[i] + t * t * b[i] for i in (0, 1)))
        out.append(points)  # type: ignore[arg-type]
    return out
