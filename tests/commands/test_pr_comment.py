"""``pr-comment`` and ``action.yml`` against a local fake of GitHub's REST API (127.0.0.1 only).

The fake keeps the comments of each pull request, pages the list (with a Link header, as GitHub does) and can be
told to answer a status instead, so create-then-update, pagination, the fork's 403 and other errors are real HTTP.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.commands.pr_comment import MARKER, MAX_COMMENT
from otel_toolcall_eval.dataset import template_cases, write_cases
from tests.helpers import BAD, GOOD

ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/agent"
PR = 7


@dataclass
class FakeGitHub:
    page_size: int = 3  # GitHub pages by per_page (at most 100); a small page makes pagination show up
    comments: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)
    fail: dict[str, int] = field(default_factory=dict)  # method -> status to answer instead
    flaky: list[tuple[str, int]] = field(default_factory=list)  # (method, status) answered once each, first
    url: str = ""
    next_id: int = 1000
    login: str | None = None  # GET /user's login; None: 403, as for an installation token (GITHUB_TOKEN)
    author: str = "github-actions[bot]"  # who the comments the token creates are by

    def add(self, body: str, login: str = "someone") -> int:
        self.next_id += 1
        self.comments.append({"id": self.next_id, "body": body, "user": {"login": login}})
        return self.next_id


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _handle(self, method: str) -> None:
            fake.requests.append((method, self.path))
            fake.auth.append(self.headers.get("Authorization", ""))
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            if fake.flaky and fake.flaky[0][0] == method:
                self._send(fake.flaky.pop(0)[1], {"message": "Server Error"})
                return
            if method in fake.fail:
                self._send(fake.fail[method], {"message": "Resource not accessible by integration"})
                return
            url = urlsplit(self.path)
            if method == "GET" and url.path == "/user":
                if fake.login is None:
                    self._send(403, {"message": "Resource not accessible by integration"})
                else:
                    self._send(200, {"login": fake.login, "type": "User"})
            elif method == "GET" and url.path == f"/repos/{REPO}/issues/{PR}/comments":
                query = parse_qs(url.query)
                size = min(int(query.get("per_page", ["30"])[0]), fake.page_size)
                page = int(query.get("page", ["1"])[0])
                items = fake.comments[(page - 1) * size : page * size]
                headers = {}
                if page * size < len(fake.comments):
                    headers["Link"] = f'<{fake.url}{url.path}?per_page=100&page={page + 1}>; rel="next"'
                self._send(200, items, headers)
            elif method == "POST" and url.path == f"/repos/{REPO}/issues/{PR}/comments":
                new = fake.add(body["body"], login=fake.author)
                self._send(201, {"id": new, "body": body["body"], "html_url": f"https://example.test/c/{new}"})
            elif method == "PATCH" and (m := re.fullmatch(rf"/repos/{REPO}/issues/comments/(\d+)", url.path)):
                target = next((c for c in fake.comments if c["id"] == int(m.group(1))), None)
                if target is None:
                    self._send(404, {"message": "Not Found"})
                    return
                target["body"] = body["body"]
                self._send(200, {**target, "html_url": f"https://example.test/c/{target['id']}"})
            else:
                self._send(404, {"message": "Not Found"})

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture
def env(tmp_path: Path, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "synchronize", "number": PR, "pull_request": {"number": PR}}))
    values = {
        "GITHUB_API_URL": github.url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_TOKEN": "t0ken",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "COLUMNS": "300",
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr("otel_toolcall_eval.commands.pr_comment.BACKOFF", 0.0)
    return values


def _report(tmp_path: Path, text: str, name: str = "report.md") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _own(github: FakeGitHub) -> list[dict[str, Any]]:
    return [c for c in github.comments if c["body"].startswith(MARKER)]


def test_first_run_creates_the_comment_and_the_second_updates_it(
    tmp_path: Path, github: FakeGitHub, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    github.add("LGTM")
    first = _report(tmp_path, "## ❌ Tool-call evaluation failed\n\n| case | was | now |\n")
    assert main(["pr-comment", "--report", str(first)]) == 0
    assert "created" in capsys.readouterr().out
    [comment] = _own(github)
    assert comment["body"] == MARKER + "\n" + first.read_text()
    assert ("POST", f"/repos/{REPO}/issues/{PR}/comments") in github.requests
    assert set(github.auth) == {"Bearer t0ken"}

    second = _report(tmp_path, "## ✅ Tool-call evaluation passed\n", "second.md")
    github.requests.clear()
    assert main(["pr-comment", "--report", str(second)]) == 0
    assert "updated" in capsys.readouterr().out
    assert _own(github) == [{**comment, "body": MARKER + "\n" + second.read_text()}]
    assert github.requests[1] == ("GET", "/user")  # whose is the marked comment: asked once, when one is found
    assert [m for m, _ in github.requests] == ["GET", "GET", "PATCH"]
    assert len(github.comments) == 2  # LGTM and ours: one comment however often it runs
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert first.read_text() in summary and second.read_text() in summary  # appended, one per step


def test_its_earlier_comment_is_found_on_a_later_page(tmp_path: Path, github: FakeGitHub, env: dict[str, str]) -> None:
    for i in range(7):
        github.add(f"review {i}, quoting {MARKER} in the middle is not ours")
    ours = github.add(MARKER + "\nold report", login="github-actions[bot]")
    github.add("after")
    assert main(["pr-comment", "--report", str(_report(tmp_path, "new report\n"))]) == 0
    gets = [path for method, path in github.requests if method == "GET" and path != "/user"]
    assert len(gets) == 3  # pages of 3: ours is the 8th comment
    assert [m for m, _ in github.requests][-1] == "PATCH"
    assert github.requests[-1][1].endswith(f"/comments/{ours}")
    assert [c["body"] for c in _own(github)] == [MARKER + "\nnew report\n"]
    assert len(github.comments) == 9


def test_a_marked_comment_someone_else_wrote_is_never_edited(
    tmp_path: Path, github: FakeGitHub, env: dict[str, str]
) -> None:
    """Issue 28, finding 7: a comment that starts with the marker but was written by another user (who can edit it
    later, rewriting the gate's report) is left alone; the tool creates its own."""
    planted = github.add(MARKER + "\n## ✅ all good (planted)", login="mallory")
    assert main(["pr-comment", "--report", str(_report(tmp_path, "## ❌ failed\n"))]) == 0
    assert ("PATCH", f"/repos/{REPO}/issues/comments/{planted}") not in github.requests
    assert next(c for c in github.comments if c["id"] == planted)["body"].endswith("(planted)")
    [ours] = [c for c in _own(github) if c["user"]["login"] == "github-actions[bot]"]
    assert ours["body"] == MARKER + "\n## ❌ failed\n"


@pytest.mark.parametrize(
    ("token_user", "flag", "author"),
    [
        ("ana", [], "ana"),  # a personal token: GET /user says who
        (None, ["--comment-author", "gate-app[bot]"], "gate-app[bot]"),  # another app's installation token
    ],
)
def test_its_own_comment_is_the_one_its_token_wrote(
    tmp_path: Path, github: FakeGitHub, env: dict[str, str], token_user: str | None, flag: list[str], author: str
) -> None:
    github.login, github.author = token_user, author
    other = github.add(MARKER + "\nby the workflow's bot", login="github-actions[bot]")
    mine = github.add(MARKER + "\nold", login=author)
    assert main(["pr-comment", "--report", str(_report(tmp_path, "new\n")), *flag]) == 0
    assert github.requests[-1] == ("PATCH", f"/repos/{REPO}/issues/comments/{mine}")
    bodies = {c["id"]: c["body"] for c in github.comments}
    assert bodies == {other: MARKER + "\nby the workflow's bot", mine: MARKER + "\nnew\n"}
    assert (("GET", "/user") in github.requests) == (not flag)


@pytest.mark.parametrize("status", [403, 404])
def test_a_refused_edit_fails_loudly(
    tmp_path: Path, github: FakeGitHub, env: dict[str, str], capsys: pytest.CaptureFixture[str], status: int
) -> None:
    """Issue 28, finding 7: its own comment exists and GitHub refuses the edit: exit 2 naming the status, never a
    quiet exit 0 with no report on the pull request."""
    ours = github.add(MARKER + "\nold", login="github-actions[bot]")
    github.fail["PATCH"] = status
    assert main(["pr-comment", "--report", str(_report(tmp_path, "new\n"))]) == 2
    err = capsys.readouterr().err
    assert "edit" in err and str(status) in err and str(ours) in err and "Traceback" not in err


def test_appended_markdown_follows_the_report(tmp_path: Path, github: FakeGitHub, env: dict[str, str]) -> None:
    report = _report(tmp_path, "report\n")
    judge = _report(tmp_path, "### Judge (not gated)\n\n| question | mean |\n", "judge.md")
    assert main(["pr-comment", "--report", str(report), "--append", str(judge)]) == 0
    assert _own(github)[0]["body"] == MARKER + "\nreport\n\n### Judge (not gated)\n\n| question | mean |\n"


@pytest.mark.parametrize(("method", "status"), [("POST", 403), ("GET", 403), ("GET", 404)])
def test_a_read_only_token_degrades_to_the_job_summary(
    tmp_path: Path,
    github: FakeGitHub,
    env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    status: int,
) -> None:
    github.fail[method] = status
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert main(["pr-comment", "--report", str(_report(tmp_path, "the report\n"))]) == 0
    out = capsys.readouterr().out
    assert "warning" in out and str(status) in out and "job summary only" in out
    assert f"\n::warning title=otel-toolcall-eval::no pull-request comment (GitHub answered {status})" in out
    assert github.comments == []
    assert "the report" in Path(env["GITHUB_STEP_SUMMARY"]).read_text()


def test_other_api_errors_exit_2_with_the_status(
    tmp_path: Path, github: FakeGitHub, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    github.fail["GET"] = 500
    assert main(["pr-comment", "--report", str(_report(tmp_path, "r\n"))]) == 2
    err = capsys.readouterr().err
    assert "GitHub API" in err and "500" in err and "Traceback" not in err
    assert [m for m, _ in github.requests] == ["GET"] * 3  # retried twice, then given up


def test_transient_errors_are_retried_but_a_create_is_not(
    tmp_path: Path, github: FakeGitHub, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    github.flaky = [("GET", 502), ("GET", 429)]
    assert main(["pr-comment", "--report", str(_report(tmp_path, "r\n"))]) == 0
    assert [m for m, _ in github.requests] == ["GET", "GET", "GET", "POST"] and len(_own(github)) == 1
    github.flaky = [("PATCH", 503)]
    assert main(["pr-comment", "--report", str(_report(tmp_path, "s\n"))]) == 0
    assert _own(github)[0]["body"].endswith("s\n")
    github.comments.clear()
    github.requests.clear()
    github.flaky = [("POST", 502)]  # a retried POST might comment twice
    assert main(["pr-comment", "--report", str(_report(tmp_path, "r\n"))]) == 2
    assert [m for m, _ in github.requests] == ["GET", "POST"]
    assert "502" in capsys.readouterr().err


def test_an_unreachable_api_exits_2(tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = main(["pr-comment", "--report", str(_report(tmp_path, "r\n")), "--api-url", f"http://127.0.0.1:{port}"])
    assert code == 2 and "ConnectError" in capsys.readouterr().err


def test_a_long_report_is_cut_to_githubs_limit_with_a_note(
    tmp_path: Path, github: FakeGitHub, env: dict[str, str]
) -> None:
    lines = "".join(f"| case-{i} | ❌ failed | argument_accuracy 0.50 |\n" for i in range(3000))
    assert main(["pr-comment", "--report", str(_report(tmp_path, lines))]) == 0
    body = _own(github)[0]["body"]
    assert len(body) <= MAX_COMMENT
    assert body.endswith("the full report is in the job summary._\n")
    kept = body.split("\n\n---\n")[0]
    assert lines.startswith(kept.removeprefix(MARKER + "\n"))  # cut at a line end
    assert lines in Path(env["GITHUB_STEP_SUMMARY"]).read_text()  # the summary has it all


def test_not_a_pull_request_or_no_token_writes_the_summary_only(
    tmp_path: Path, github: FakeGitHub, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    push = tmp_path / "push.json"
    push.write_text(json.dumps({"ref": "refs/heads/main", "commits": []}))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(push))
    assert main(["pr-comment", "--report", str(_report(tmp_path, "r\n"))]) == 0
    monkeypatch.setenv("GITHUB_EVENT_PATH", env["GITHUB_EVENT_PATH"])
    monkeypatch.delenv("GITHUB_TOKEN")
    assert main(["pr-comment", "--report", str(_report(tmp_path, "r\n"))]) == 0
    assert github.requests == []
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text().count("r\n") == 2


def test_a_comment_on_a_pull_request_event_names_it(tmp_path: Path, github: FakeGitHub, env: dict[str, str]) -> None:
    event = tmp_path / "issue_comment.json"
    event.write_text(json.dumps({"issue": {"number": PR, "pull_request": {"url": "x"}}, "comment": {"id": 1}}))
    os.environ["GITHUB_EVENT_PATH"] = str(event)
    assert main(["pr-comment", "--report", str(_report(tmp_path, "r\n"))]) == 0
    assert len(_own(github)) == 1


def test_bad_inputs_exit_2(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pr-comment", "--report", str(tmp_path / "missing.md")]) == 2
    assert "missing.md: cannot read" in capsys.readouterr().err
    broken = tmp_path / "event.json"
    broken.write_text("{not json")
    assert main(["pr-comment", "--report", str(_report(tmp_path, "r\n"))]) == 2
    assert "$GITHUB_EVENT_PATH" in capsys.readouterr().err
    assert main(["pr-comment", "--report", str(_report(tmp_path, "r\n")), "--pr", "3", "--repo", "no/../slash"]) == 2
    assert "--repo" in capsys.readouterr().err


# --- action.yml: its steps' scripts, run by bash as the runner would, against the same fake -----------------------


def _expand(text: str, inputs: dict[str, str], outputs: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        expr = m.group(1).strip()
        if expr.startswith("inputs."):
            return inputs[expr.removeprefix("inputs.")]
        if expr.startswith("steps.gate.outputs."):
            return outputs[expr.removeprefix("steps.gate.outputs.")]
        raise AssertionError(f"unexpected expression {expr}")

    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


def _run_action(tmp_path: Path, github: FakeGitHub, inputs: dict[str, str]) -> tuple[int, dict[str, str]]:
    """Run each step of the composite action in order (the install step is the venv already here)."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    defaults = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    values = {**defaults, "github-token": "t0ken", "install": "false", **inputs}
    assert all(spec.get("required") is not True or name in inputs for name, spec in action["inputs"].items())
    output_file = tmp_path / "github_output"
    output_file.touch()
    base = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_OUTPUT": str(output_file),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_API_URL": github.url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_PATH": os.environ["GITHUB_EVENT_PATH"],
        "COLUMNS": "200",
    }
    code = 0
    for step in action["runs"]["steps"]:
        outputs = dict(line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line)
        condition = step.get("if")
        if condition and _expand("${{ " + condition.split("==")[0].strip() + " }}", values, outputs) != "true":
            continue
        env = {**base, **{k: _expand(str(v), values, outputs) for k, v in step.get("env", {}).items()}}
        assert step["shell"] == "bash"
        # the runner's bash: `bash --noprofile --norc -eo pipefail {0}`
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _expand(step["run"], values, outputs)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        code = done.returncode
        if code != 0:
            break
    outputs = dict(line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line)
    return code, outputs


def _cases(tmp_path: Path, wrong: bool) -> tuple[Path, Path]:
    dataset = tmp_path / "dataset.jsonl"
    write_cases(dataset, template_cases())
    run = tmp_path / "run.jsonl"
    calls = BAD if wrong else GOOD
    run.write_text("".join(json.dumps({"id": k, "tool_calls": v}) + "\n" for k, v in calls.items()))
    return dataset, run


def test_the_action_gates_comments_and_updates_on_the_next_push(
    tmp_path: Path, github: FakeGitHub, env: dict[str, str]
) -> None:
    dataset, run = _cases(tmp_path, wrong=False)
    baseline = tmp_path / "main.json"
    assert main(["eval", "--dataset", str(dataset), "--runs", str(run), "--json", str(baseline)]) == 0
    dataset, bad = _cases(tmp_path, wrong=True)
    config = tmp_path / "toolcall-eval.yaml"
    config.write_text("gate:\n  min:\n    tool_selection.f1: 0.9\n")
    inputs = {"dataset": str(dataset), "runs": bad.name, "baseline": str(baseline), "config": str(config)}
    code, outputs = _run_action(tmp_path, github, inputs)
    assert code == 1 and outputs["exit-code"] == "1"  # the gate failed, and the job with it
    [comment] = _own(github)
    report = Path(outputs["report"]).read_text()
    assert comment["body"] == MARKER + "\n" + report
    assert "Tool-call evaluation failed" in report and "Regressed (passed → failed)" in report
    assert report in (tmp_path / "summary.md").read_text()

    _, good = _cases(tmp_path, wrong=False)
    inputs["runs"] = good.name
    code, _ = _run_action(tmp_path, github, inputs)
    assert code == 0
    assert len(_own(github)) == 1 and "Tool-call evaluation passed" in _own(github)[0]["body"]


def test_the_action_reports_bad_input_in_the_comment_and_fails(
    tmp_path: Path, github: FakeGitHub, env: dict[str, str]
) -> None:
    code, outputs = _run_action(tmp_path, github, {"dataset": "missing.jsonl", "runs": "missing-run.jsonl"})
    assert code == 2 and outputs["exit-code"] == "2"
    assert "did not run (exit 2)" in _own(github)[0]["body"]


def test_the_action_with_comment_false_writes_the_summary_only(
    tmp_path: Path, github: FakeGitHub, env: dict[str, str]
) -> None:
    dataset, run = _cases(tmp_path, wrong=False)
    inputs = {"dataset": str(dataset), "runs": run.name, "comment": "false"}
    code, _ = _run_action(tmp_path, github, inputs)
    assert code == 0 and github.requests == []
    assert "Tool-call evaluation passed" in (tmp_path / "summary.md").read_text()


def test_the_documented_workflows_use_only_the_actions_inputs() -> None:
    inputs = set(yaml.safe_load((ROOT / "action.yml").read_text())["inputs"])
    docs = (ROOT / "docs" / "ci.md").read_text() + (
        ROOT / "docs" / "tutorials" / "failing-trace-to-red-gate.md"
    ).read_text()
    blocks = re.findall(r"```(?:yaml|text)\n(.*?)```", docs, re.S)
    used = []
    for block in blocks:
        if "otel-toolcall-eval@" not in block:
            continue
        loaded = yaml.safe_load(block)
        steps = loaded["jobs"]["gate"]["steps"] if isinstance(loaded, dict) else loaded
        used += [step["with"] for step in steps if "otel-toolcall-eval@" in step.get("uses", "")]
    assert len(used) == 2
    for given in used:
        assert set(given) <= inputs and {"dataset", "runs"} <= set(given)


def test_no_comment_prints_the_comment_and_posts_nothing(
    tmp_path: Path, github: FakeGitHub, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report(tmp_path, "## ❌ Tool-call evaluation failed\n\n| case | was | now |\n")
    assert main(["pr-comment", "--report", str(report), "--no-comment"]) == 0
    out = capsys.readouterr().out
    assert MARKER + "\n" + report.read_text() in out
    assert github.requests == []
