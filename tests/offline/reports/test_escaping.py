"""Text from run files (tool names, error text) in the reports: shown as written, never as markup.

The Markdown report is rendered with markdown-it-py (CommonMark with raw HTML on, plus tables: what GitHub
accepts in a pull-request comment) and the HTML it produces is checked, not the Markdown source."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from otel_toolcall_eval._text import markdown_code, markdown_text, terminal_safe
from otel_toolcall_eval.cli import main
from otel_toolcall_eval.dataset import template_cases, write_cases
from tests.helpers import GOOD

HOSTILE = [
    "</details><!-- everything below is hidden",
    "![pixel](http://198.51.100.7/track.png)",
    "[click](http://198.51.100.7/) <img src=http://198.51.100.7/x.png> <script>alert(1)</script>",
    "ping @octocat and @org/team",
    "pipe | breaks ` the table",
    "\x1b[2J\x1b]0;owned\x07\x1b[32mgate passed\x1b[0m",
]


def _render(text: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(text)


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_text_renders_as_the_text_itself(text: str) -> None:
    html = _render(f"| a | b |\n|---|---|\n| {markdown_text(text)} | `{markdown_code(text)}` |\n")
    assert "<img" not in html and "<a " not in html and "<!--" not in html and "<script" not in html
    assert "</details>" not in html and "\x1b" not in html
    assert html.count("<td>") == 2  # one row of two cells: no pipe split the row
    prose = re.sub(r"<code>.*?</code>", "", html)  # GitHub links no mention inside code
    assert "@octocat" not in prose and "@org" not in prose  # a zero-width space follows each @


def test_terminal_safe_strips_escape_sequences_and_controls() -> None:
    assert terminal_safe("\x1b[2J\x1b]0;owned\x07\x1b[32mok\x1b[0m\x07\x00 done\ttab\nline") == "ok done\ttab\nline"
    assert terminal_safe("plain text ✓") == "plain text ✓"
    assert terminal_safe("csi \x9b31m 8-bit") == "csi  8-bit"


def test_hostile_tool_names_in_every_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    dataset = tmp_path / "dataset.jsonl"
    write_cases(dataset, template_cases())
    calls = dict(GOOD)
    calls["thanks"] = [{"name": name, "arguments": {}} for name in HOSTILE]
    run = tmp_path / "run.jsonl"
    errors = {"order-status": "</details><!-- @octocat ![e](http://198.51.100.7/e.png)"}  # a run's error text
    run.write_text(
        "".join(json.dumps({"id": k, "tool_calls": v, "error": errors.get(k)}) + "\n" for k, v in calls.items())
    )
    md, html_report = tmp_path / "report.md", tmp_path / "report.html"
    code = main(
        ["eval", "--dataset", str(dataset), "--runs", str(run), "--markdown", str(md), "--html", str(html_report)]
    )
    assert code in (0, 1)
    source = md.read_text()
    rendered = _render(source)
    assert "<img" not in rendered and "<!--" not in rendered and "<script" not in rendered
    assert rendered.count("<details>") == rendered.count("</details>") == source.count("<details>")
    assert "@octocat" not in re.sub(r"<code>.*?</code>", "", rendered)
    assert "unexpected" in rendered and "pixel" in rendered  # the names are still there, as text
    assert "![e](http://198.51.100.7/e.png)" in rendered and "&lt;/details&gt;" in rendered  # as text
    out = capsys.readouterr()
    assert "\x1b]0;owned" not in out.out and "\x1b[2J" not in out.out
    page = html_report.read_text()
    assert "<script>alert(1)" not in page and "<!-- everything" not in page
    assert not re.search(r"<img[^>]*198\.51\.100\.7", page)
