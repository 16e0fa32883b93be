"""The documentation's pictures, taken from the real pages and the real command line: ``make pictures``.

- ``scored-trace.svg``: ``otel-toolcall-eval demo`` printing one scored trace (a fixed seed: an unparseable call, its
  repetition and a must-not-call tool), the terminal output recorded by rich as SVG.
- ``html-report.png``: ``otel-toolcall-eval eval --html`` on the template dataset and a run with failing cases,
  rendered by Debian's chromium (headless) at 1400x1000.
- ``label-page.png``: ``otel-toolcall-eval judge label`` serving a queue of judged calls on 127.0.0.1, in the same
  chromium through playwright, at 1400x1000.

Every page is rendered offline (nothing is fetched: the pages carry their own styles and scripts). The Grafana
dashboard is not pictured: it needs a Grafana server, which neither Debian nor PyPI provides here.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images"
CLI = [sys.executable, "-m", "otel_toolcall_eval.cli"]
SIZE = (1400, 1000)


def chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found is None:
        sys.exit("Debian's chromium is needed: apt-get install chromium")
    return found


def scored_trace() -> Path:
    from rich.console import Console
    from rich.text import Text

    env = {**os.environ, "COLUMNS": "110", "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    command = [*CLI, "demo", "--traces", "1", "--show", "1", "--seed", "4", "--failure-rate", "0.15"]
    shown = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    tree = shown.split("Tool calls by outcome")[0].rstrip()
    console = Console(record=True, width=110, file=io.StringIO(), force_terminal=True)
    console.print("$ otel-toolcall-eval demo --traces 1 --show 1 --seed 4 --failure-rate 0.15", style="bold")
    console.print(Text.from_ansi(tree))
    path = OUT / "scored-trace.svg"
    path.write_text(console.export_svg(title="otel-toolcall-eval demo: one scored trace"))
    return path


RUN = [  # passing and failing cases, so every part of the report has content
    {"id": "order-status", "tool_calls": [{"name": "get_order", "arguments": '{"order_id": "12345"}'}]},
    {"id": "dentist-and-reminder",
     "tool_calls": [{"name": "create_event", "arguments": {"start": "2025-03-05T15:00"}}]},
    {"id": "move-standup", "tool_calls": [
        {"name": "list_events", "arguments": {"date": "2025-03-06"}},
        {"name": "update_event", "arguments": {"event_id": "e1", "start": "2025-03-06T14:00:00"}},
    ]},
    {"id": "thanks", "tool_calls": []},
    {"id": "clear-calendar", "tool_calls": [{"name": "delete_all_events", "arguments": {}}]},
]  # fmt: skip


def html_report(work: Path) -> Path:
    from otel_toolcall_eval.dataset import template_cases, write_cases

    dataset, run, report = work / "dataset.jsonl", work / "run.jsonl", work / "report.html"
    write_cases(dataset, template_cases())
    run.write_text("".join(json.dumps(line) + "\n" for line in RUN))
    command = [*CLI, "eval", "--dataset", dataset.name, "--runs", run.name, "--html", report.name]
    subprocess.run(command, cwd=work, capture_output=True, check=False)  # exit 1: the gate fails, as intended
    path = OUT / "html-report.png"
    subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={work}/p",
         f"--window-size={SIZE[0]},{SIZE[1]}", f"--screenshot={path}", report.as_uri()],
        capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    return path


def label_page(work: Path) -> Path:
    from playwright.sync_api import sync_playwright

    verdicts, queue, config = work / "verdicts.jsonl", work / "queue.jsonl", work / "judge.yaml"
    config.write_text(
        json.dumps({"judge": {"provider": "openai", "model": "gpt-4o-mini", "questions": ["tool_appropriateness"],
                              "price": {"input_per_million": 0, "output_per_million": 0}}})
    )  # fmt: skip
    requests = ["where is order 12345?", "email Sam the Q3 report", "cancel my dentist appointment on Friday"]
    tools = ["get_order", "send_email", "delete_event"]
    args: list[dict[str, object]] = [
        {"order_id": "12345"},
        {"to": ["sam@example.com"], "subject": "Q3 report", "body": "Hi Sam, the Q3 report is attached."},
        {"event_id": "evt-1"},
    ]
    rows = []
    for i, (request, tool, arguments) in enumerate(zip(requests, tools, args, strict=True)):
        label = ["appropriate", "appropriate", "inappropriate"][i]
        rows.append({
            "item": f"case-{i}/0", "case": f"case-{i}", "call": 0, "tool": tool, "flagged": i == 2,
            "question": "tool_appropriateness", "fingerprint": "0123456789abcdef", "label": label,
            "score": 0.0 if i == 2 else 1.0, "error": None, "model": "gpt-4o-mini", "cost": 0.0, "cached": False,
            "explanation": "the user asked to cancel, not to delete" if i == 2 else "the tool fits the request",
            "data": {"request": request, "tool_name": tool, "available_tools": tools, "arguments": arguments},
            "tool_call": {"tool_name": tool, "arguments": arguments, "result": {"ok": True}, "outcome": "success"},
        })  # fmt: skip
    verdicts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    subprocess.run([*CLI, "judge", "queue", str(verdicts), "--config", str(config), "--out", str(queue)], check=True)
    server = subprocess.Popen(
        [*CLI, "judge", "label", str(queue), "--labels", str(work / "labels.jsonl"), "--rater", "docs"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip
    try:
        assert server.stdout is not None
        found = re.search(r"http://127\.0\.0\.1:\d+/", server.stdout.readline())
        if found is None:
            sys.exit("judge label did not print its address")
        path = OUT / "label-page.png"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": SIZE[0], "height": SIZE[1]})
            page.goto(found.group(0))
            page.wait_for_selector("#item")
            page.screenshot(path=str(path))
            browser.close()
        return path
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for path in (scored_trace(), html_report(Path(tmp)), label_page(Path(tmp))):
            print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
