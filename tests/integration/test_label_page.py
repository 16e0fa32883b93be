"""The labelling page in a real headless Chromium (Debian's, driven by Playwright without its browser download):
label a queue from the keyboard, reload in the middle, kill the server with SIGKILL, restart, and nothing is lost;
trace content (a ``<script>`` in a tool argument) shows as text; the judge's verdict is hidden by default."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.dataset.labels import read_labels
from otel_toolcall_eval.judge.label_server import CSP, LabelSession, make_server, read_queue

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright (the Python package) not installed")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)"
)

Q = "tool_appropriateness"
HOSTILE = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
SCALE = ["appropriate", "acceptable", "inappropriate"]
PRICE = {"input_per_million": 0, "output_per_million": 0}
FREE_JUDGE = {"judge": {"provider": "openai", "model": "m", "price": PRICE, "questions": [Q]}}


def _verdicts(path: Path) -> Path:
    rows = []
    for i in range(6):
        label = SCALE[i % 3]
        rows.append({
            "item": f"case-{i}/0", "case": f"case-{i}", "call": 0, "tool": "get_order", "flagged": i == 5,
            "question": Q, "fingerprint": "0123456789abcdef", "label": label, "score": [1.0, 0.5, 0.0][i % 3],
            "explanation": "JUDGE-EXPLANATION", "error": None, "model": "m", "cost": 0.0, "cached": False,
            "data": {"request": f"where is order {i}?", "tool_name": "get_order",
                     "available_tools": ["get_order", "send_email"],
                     "arguments": {"order_id": HOSTILE if i == 0 else str(i)}},
            "tool_call": {"tool_name": "get_order", "arguments": {"order_id": HOSTILE if i == 0 else str(i)},
                          "result": HOSTILE if i == 0 else {"status": "shipped"}, "outcome": "success"},
        })  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def queue(tmp_path: Path) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(FREE_JUDGE))
    out = tmp_path / "queue.jsonl"
    assert (
        main(["judge", "queue", str(_verdicts(tmp_path / "v.jsonl")), "--config", str(config), "--out", str(out)]) == 0
    )
    return out


class Server:
    """``judge label`` as a separate process, so it can be killed as a crash would."""

    def __init__(self, queue: Path, labels: Path, rater: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "otel_toolcall_eval.cli", "judge", "label", str(queue), "--labels", str(labels),
             "--rater", rater],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "300"},
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert found, line + (self.proc.stderr.read() if self.proc.stderr else "")
        self.url = found.group(0)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


@pytest.fixture
def browser() -> Iterator[Any]:
    assert CHROMIUM is not None
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"], headless=True)
        yield b
        b.close()


def _index(page: Any) -> str:
    return str(page.get_attribute("#item", "data-index"))


def _press(page: Any, key: str) -> None:
    """A key, then wait until the page shows another item (the label was saved and the next one loaded)."""
    before = _index(page)
    page.keyboard.press(key)
    page.wait_for_function("(b) => document.getElementById('item').dataset.index !== b", arg=before, timeout=10_000)


@needs_chromium
def test_label_a_queue_with_reload_and_a_killed_server(tmp_path: Path, queue: Path, browser: Any) -> None:
    labels = tmp_path / "labels.jsonl"
    items = read_queue(queue)
    assert len(items) == 6
    server = Server(queue, labels, "ana")
    try:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url)
        page.wait_for_selector("body[data-ready=true]")
        # blind by default: neither the judge's label nor its explanation is on the page
        assert page.locator(".verdict").count() == 0 and "JUDGE-EXPLANATION" not in page.content()
        assert page.locator(".choices button").count() == 4  # three labels and skip
        first = items[int(_index(page))]
        _press(page, "1")
        _press(page, "f")
        page.reload()
        page.wait_for_selector("body[data-ready=true]")
        assert page.text_content("#progress").startswith("2 labelled")  # resumed after a reload
        server.kill()  # SIGKILL: no shutdown handler runs
        written = [json.loads(x) for x in labels.read_text().splitlines()]
        assert [w["humans"]["ana"] for w in written] == ["appropriate", "inappropriate"]
        assert written[0]["item"] == first["item"] and written[0]["judge"] == first["judge"]
        server = Server(queue, labels, "ana")
        page.goto(server.url)
        page.wait_for_selector("body[data-ready=true]")
        assert page.text_content("#progress").startswith("2 labelled")  # nothing lost, nothing twice
        _press(page, "s")  # skipped: not written
        while page.get_attribute("body", "data-done") != "true":
            _press(page, "p")
        assert page.text_content("#progress").startswith("5 labelled, 1 skipped, of 6")
        assert errors == []
    finally:
        server.kill()
    records = read_labels(labels, {Q: SCALE})
    assert len(records) == 5 and all(r.humans[0][0] == "ana" and r.labelled_at for r in records)
    assert main(["judge", "agreement", str(labels)]) == 0


@needs_chromium
def test_at_1400x1000_the_labels_are_in_view_and_long_arguments_wrap(tmp_path: Path, queue: Path, browser: Any) -> None:
    long_value = "lorem ipsum dolor sit amet " * 200 + "x" * 600  # long words and an unbroken run
    lines = []
    for line in queue.read_text().splitlines():
        item = json.loads(line)
        for block in ("data", "tool_call"):
            item[block]["arguments"] = {**item[block]["arguments"], "note": long_value}
        lines.append(json.dumps(item))
    queue.write_text("\n".join(lines) + "\n")
    server = Server(queue, tmp_path / "labels.jsonl", "cy")
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(server.url)
        page.wait_for_selector("body[data-ready=true]")
        for button in page.locator(".choices button").all():
            box = button.bounding_box()
            assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 1000, box
        overflow = page.evaluate("[...document.querySelectorAll('pre')].map((p) => p.scrollWidth - p.clientWidth)")
        assert overflow and max(overflow) <= 1  # wrapped: nothing to scroll sideways
        assert page.evaluate("document.documentElement.scrollWidth") <= 1400
        shot = tmp_path / "label-page.png"
        page.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
    finally:
        server.kill()


@needs_chromium
def test_a_script_in_a_tool_argument_is_shown_as_text(tmp_path: Path, queue: Path, browser: Any) -> None:
    items = read_queue(queue)
    hostile = next(i for i, item in enumerate(items) if item["data"]["arguments"]["order_id"] == HOSTILE)
    # put the hostile item first for this rater: every other item is labelled already
    labels = tmp_path / "labels.jsonl"
    lines = [
        {"item": it["item"], "question": Q, "judge": it["judge"], "humans": {"bo": "appropriate"}}
        for i, it in enumerate(items) if i != hostile
    ]  # fmt: skip
    labels.write_text("".join(json.dumps(x) + "\n" for x in lines))
    session = LabelSession(items, labels, "bo")
    server = make_server(session)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{server.server_port}/")
        page.wait_for_selector("body[data-ready=true]")
        assert _index(page) == str(hostile)
        for kind in ("tool_call", "data"):  # the call, and what the judge received: both as text
            shown = page.text_content(f"[data-kind={kind}] section[data-field=arguments] pre")
            assert json.loads(shown)["order_id"] == HOSTILE and "<script>window.pwned=1</script>" in shown
        assert page.text_content("[data-kind=tool_call] section[data-field=result] pre") == HOSTILE
        assert page.locator("#item script, #item img").count() == 0
        assert page.evaluate("window.pwned") is None
    finally:
        server.shutdown()
        server.server_close()


def test_the_server_answers_only_its_own_host_and_valid_labels(tmp_path: Path, queue: Path) -> None:
    session = LabelSession(read_queue(queue), tmp_path / "labels.jsonl", "cy", show_verdict=True)
    server = make_server(session)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        with httpx.Client(base_url=base) as client:
            page = client.get("/")
            assert page.status_code == 200 and page.headers["content-security-policy"] == CSP
            assert "script-src 'self'" in CSP and "'unsafe-inline'" not in CSP
            state = client.get("/api/state").json()
            assert state["item"]["judge"] in SCALE  # --show-verdict
            assert client.get("/api/state", headers={"Host": "evil.example"}).status_code == 421  # DNS rebinding
            index = state["item"]["index"]
            bad = client.post("/api/label", json={"index": index, "label": "great"})
            assert bad.status_code == 400 and "not one of" in bad.json()["error"]
            cross = client.post("/api/label", json={"index": index, "label": "appropriate"},
                                headers={"Origin": "http://evil.example"})  # fmt: skip
            assert cross.status_code == 403
            form = client.post("/api/label", content=b"index=0&label=appropriate",
                               headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
            assert form.status_code == 415
            assert not (tmp_path / "labels.jsonl").exists()  # nothing written by any of these
            ok = client.post("/api/label", json={"index": index, "label": "acceptable"})
            assert ok.status_code == 200 and ok.json()["labelled"] == 1
            again = client.post("/api/label", json={"index": index, "label": "acceptable"})
            assert again.status_code == 400
    finally:
        server.shutdown()
        server.server_close()


def test_two_raters_on_one_labels_file_merge_per_item(tmp_path: Path, queue: Path) -> None:
    items = read_queue(queue)
    labels = tmp_path / "labels.jsonl"
    for rater, label in (("ana", "appropriate"), ("bo", "inappropriate")):
        session = LabelSession(items, labels, rater)
        assert session.label(0, label) is None
    [record] = [r for r in read_labels(labels) if r.item == items[0]["item"]]
    assert dict(record.humans) == {"ana": "appropriate", "bo": "inappropriate"}


def test_the_queue_covers_each_label_and_the_disagreements(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(FREE_JUDGE))
    rows = []
    for i in range(300):  # 90% appropriate: a random sample of 6 would likely miss the rare labels
        label = "appropriate" if i % 10 else SCALE[1 + (i // 10) % 2]
        rows.append({"item": f"c{i}/0", "question": Q, "fingerprint": "f", "label": label, "flagged": i == 7,
                     "score": {"appropriate": 1.0, "acceptable": 0.5, "inappropriate": 0.0}[label], "data": {}})  # fmt: skip
    (tmp_path / "v.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "q.jsonl"
    args = ["judge", "queue", str(tmp_path / "v.jsonl"), "--config", str(config), "--out", str(out), "--size", "8"]
    assert main(args) == 0
    items = read_queue(out)
    assert len(items) == 8
    assert {i["judge"] for i in items} == set(SCALE)
    assert "appropriate|disagrees" in {i["stratum"] for i in items}  # the one flagged call the judge passed
    assert main(args) == 0 and read_queue(out) == items  # seeded: the same queue again
    assert main([*args[:-2], "--ci-width", "0.2"]) == 0 and len(read_queue(out)) == 97  # (1.96 / 0.2)^2


def test_two_sessions_of_one_rater_saving_one_item(
    tmp_path: Path, queue: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28, finding 8: one rater with the page open twice (two ``judge label`` processes) saves the same item
    from both; the file still loads: the later label wins, with a warning naming the lines, so ``judge agreement``
    exits 0 and a third session starts."""
    labels = tmp_path / "labels.jsonl"
    first, second = Server(queue, labels, "ana"), Server(queue, labels, "ana")
    try:
        for server, label in ((first, "appropriate"), (second, "inappropriate")):
            with httpx.Client(base_url=server.url.rstrip("/")) as client:
                index = client.get("/api/state").json()["item"]["index"]
                assert client.post("/api/label", json={"index": index, "label": label}).status_code == 200
    finally:
        first.kill()
        second.kill()
    assert main(["judge", "agreement", str(labels)]) == 0
    err = capsys.readouterr().err
    assert "labels.jsonl:2" in err and "ana" in err and "line 1" in err and "later label" in err
    [record] = read_labels(labels)
    assert dict(record.humans) == {"ana": "inappropriate"}
    third = Server(queue, labels, "ana")  # starts (it used to refuse the file)
    third.kill()


def test_a_damaged_labels_file_is_named_without_a_stray_option_dash(tmp_path: Path, queue: Path) -> None:
    """Issue 28, finding 8: the error names the file and line as every bad file does (it read '--/path:1: ...')."""
    labels = tmp_path / "labels.jsonl"
    labels.write_text("{not json\n")
    done = subprocess.run(
        [sys.executable, "-m", "otel_toolcall_eval.cli", "judge", "label", str(queue), "--labels", str(labels),
         "--rater", "ana"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip
    assert done.returncode == 2
    assert f"{labels}:1: not JSON" in done.stderr and "--" + str(labels) not in done.stderr
