"""The HTML report renders in a real browser: Debian's chromium, headless, offline, a fresh profile per run."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.dataset import template_cases, write_cases

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

RUN = [  # a run with passing and failing cases, so every part of the report has content
    {"id": "order-status", "tool_calls": [{"name": "get_order", "arguments": '{"order_id": "12345"}'}]},
    {"id": "dentist-and-reminder", "tool_calls": [{"name": "create_event", "arguments": {"start": "2025-03-05T15:00"}}]},
    {"id": "move-standup", "tool_calls": [
        {"name": "list_events", "arguments": {"date": "2025-03-06"}},
        {"name": "update_event", "arguments": {"event_id": "e1", "start": "2025-03-06T14:00:00"}},
    ]},
    {"id": "thanks", "tool_calls": [{"name": "get_order", "arguments": {"order_id": "<script>alert(1)</script>"}}]},
    {"id": "clear-calendar", "tool_calls": [{"name": "delete_all_events", "arguments": {}}]},
]  # fmt: skip


class DomSummary(HTMLParser):
    """What the test needs from the DOM chromium dumped after running the page's script."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []
        self.cells: list[dict[str, str]] = []
        self.bars: list[dict[str, str]] = []
        self.body: dict[str, str] = {}
        self.scripts_src: list[str] = []
        self._in_count = False
        self.count_text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if tag == "body":
            self.body = a
        elif tag == "tr" and "case" in classes:
            self.rows.append(a)
        elif tag == "rect" and "cell" in classes:
            self.cells.append(a)
        elif tag == "rect" and "bar" in classes:
            self.bars.append(a)
        elif tag in ("script", "link", "img") and (a.get("src") or a.get("href")):
            self.scripts_src.append(a.get("src") or a.get("href", ""))
        self._in_count = a.get("id") == "case-count"

    def handle_data(self, data: str) -> None:
        if self._in_count:
            self.count_text += data

    def handle_endtag(self, tag: str) -> None:
        self._in_count = False


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("html")
    dataset, run, html, js = tmp / "dataset.jsonl", tmp / "run.jsonl", tmp / "report.html", tmp / "report.json"
    write_cases(dataset, template_cases())
    run.write_text("".join(json.dumps(line) + "\n" for line in RUN))
    code = main(["eval", "--dataset", str(dataset), "--runs", str(run), "--html", str(html), "--json", str(js)])
    assert code == 1  # a must-not-call violation: the report still gets written
    return html, json.loads(js.read_text())


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)")
def test_report_renders_rows_bars_and_heatmap_after_scripts(
    tmp_path: Path, report: tuple[Path, dict[str, Any]]
) -> None:
    html, data = report
    done = _chromium(tmp_path, "--virtual-time-budget=3000", "--dump-dom", html.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = DomSummary()
    dom.feed(done.stdout)
    assert dom.body.get("data-ready") == "true", "the page's script did not run to the end"
    assert sorted(r["data-id"] for r in dom.rows) == sorted(c["id"] for c in data["cases"])
    failing = {r["data-id"] for r in dom.rows if "fail" in r["class"].split()}
    assert failing == {c["id"] for c in data["cases"] if not c["passed"]}
    assert dom.count_text == f"showing {len(data['cases'])} of {len(data['cases'])} rows"
    labels = data["confusion_matrix"]["labels"]
    assert len(dom.cells) == len(labels) ** 2
    counted = {(c["data-expected"], c["data-called"]): int(c["data-count"]) for c in dom.cells}
    assert counted[("confirm_action", "delete_all_events")] == 1 and counted[("(none)", "get_order")] == 1
    recall = {b["data-tool"]: float(b["data-recall"]) for b in dom.bars}
    assert recall == {name: t["recall"] for name, t in data["per_tool"].items() if t["expected"]}
    assert recall["create_reminder"] == 0.0 and recall["get_order"] == 1.0
    assert dom.scripts_src == []  # self-contained: nothing fetched from anywhere
    assert "<script>alert(1)</script>" not in done.stdout  # user text is escaped, never markup


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)")
def test_report_screenshot_is_not_blank(tmp_path: Path, report: tuple[Path, dict[str, Any]]) -> None:
    html, _ = report
    shot = tmp_path / "report.png"
    done = _chromium(tmp_path, "--window-size=1280,1600", "--hide-scrollbars", f"--screenshot={shot}", html.as_uri())
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    image = Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")
    assert image.size == (1280, 1600)
    colours = image.getcolors(maxcolors=1 << 16) or []
    assert len(colours) > 50  # text, bars and heatmap, not a blank page
    red = sum(n for n, (r, g, b) in colours if r > 150 and g < 90 and b < 90)  # the failed-gate badge, red cells
    green = sum(n for n, (r, g, b) in colours if g > 120 and r < 90 and b < 120)  # recall bars at 1.0
    assert red > 200 and green > 2000
