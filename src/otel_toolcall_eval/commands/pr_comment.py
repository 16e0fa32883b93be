"""``otel-toolcall-eval pr-comment --report report.md``: post the gate's Markdown report where a reviewer reads it.

Run in a GitHub Actions job (``action.yml`` at the repository root does). It appends the report to the job summary
($GITHUB_STEP_SUMMARY) and creates or updates ONE comment on the pull request: its own earlier comment is found by a
hidden marker, over every page of the comment list, and edited, so a pull request never collects one comment per
push. "Its own" means written by the token's user: the marker alone proves nothing (anyone can write it, and a
gate report in a comment its author can edit is a report anyone can rewrite), so a marked comment counts only when
its author is the token's login (``GET /user``) or, for an app's installation token (which ``/user`` refuses), the
app's bot: ``github-actions[bot]`` for the workflow's GITHUB_TOKEN, ``--comment-author`` for another app. A fork's
read-only token (403/404 listing or creating) or a missing token leaves the job summary only, with a warning, exit
0: a gate must not fail because it could not talk. An edit of its own comment that GitHub refuses exits 2 (the
report would otherwise be silently missing), as does any other API error, with the status and GitHub's message.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

import httpx
import orjson
from rich.console import Console
from rich.markup import escape
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    wait_exponential,
)

from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval.errors import ExitCode, UsageError

MARKER = "<!-- otel-toolcall-eval -->"
MAX_COMMENT = 65_536  # GitHub rejects a longer issue-comment body (characters)
MAX_SUMMARY = 1_000_000  # a step's summary is capped at 1 MiB; stay under it (UTF-8 bytes may exceed characters)
MAX_PAGES = 50  # x 100 comments per page: the search for the earlier comment is bounded
MAX_EVENT_BYTES = 5_000_000
TIMEOUT = httpx.Timeout(30.0)
TRUNCATED = (
    "\n\n---\n_The report was cut to fit a comment ({limit:,} characters): the full report is in the job summary._\n"
)
DEGRADED = (403, 404)  # a fork's token may not comment: the job summary still carries the report
ACTIONS_BOT = "github-actions[bot]"  # the author of what the workflow's GITHUB_TOKEN writes
RETRIES = 2  # GET and PATCH only, on 429, 5xx and transport errors: a retried POST could comment twice
BACKOFF = 1.0  # seconds before the first retry, doubling (a seam for tests)


def register(sub: Any) -> None:
    parser = sub.add_parser("pr-comment", help="post the Markdown report as one (updated) pull-request comment")
    parser.add_argument("--report", type=Path, required=True, help="the Markdown report (eval --markdown)")
    parser.add_argument(
        "--append",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="more Markdown to add below the report, e.g. the judge's ungated scores (repeatable)",
    )
    parser.add_argument("--repo", help="owner/name (default: $GITHUB_REPOSITORY)")
    parser.add_argument("--pr", type=int, help="pull-request number (default: from $GITHUB_EVENT_PATH)")
    parser.add_argument("--api-url", help="REST API root (default: $GITHUB_API_URL or https://api.github.com)")
    parser.add_argument(
        "--comment",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="post the comment (default: yes); --no-comment prints it instead",
    )
    parser.add_argument(
        "--comment-author",
        metavar="LOGIN",
        help="the login the token comments as, when GitHub cannot say (an app's token: '<app-slug>[bot]'); default: "
        f"GET /user, or {ACTIONS_BOT} for an installation token",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console) -> int:
    body = _body(args.report, args.append)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        _append_summary(Path(summary), body)
        console.print("job summary: written")
    if not args.comment:  # the comment as it would be posted, to read or to post by other means
        comment = _cap(MARKER + "\n" + body, MAX_COMMENT)
        console.print(terminal_safe(comment), markup=False, highlight=False, soft_wrap=True)
        return ExitCode.OK
    repo = args.repo or os.environ.get("GITHUB_REPOSITORY")
    number = args.pr if args.pr is not None else _pr_number(os.environ.get("GITHUB_EVENT_PATH"))
    token = os.environ.get("GITHUB_TOKEN")
    if number is None:
        console.print("[yellow]note:[/] not a pull-request event (no PR number): job summary only")
        return ExitCode.OK
    if not repo or not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo):
        raise UsageError(f"--repo: expected owner/name, got {repo!r} (or set $GITHUB_REPOSITORY)")
    if not token:
        console.print("[yellow]warning:[/] $GITHUB_TOKEN is not set: no pull-request comment, job summary only")
        return ExitCode.OK
    api = (args.api_url or os.environ.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/")
    comment = _cap(MARKER + "\n" + body, MAX_COMMENT)
    try:
        with httpx.Client(base_url=api, headers=_headers(token), timeout=TIMEOUT, follow_redirects=False) as client:
            action, url = _upsert(client, repo, number, comment, args.comment_author)
    except _ApiError as exc:
        if exc.method == "PATCH":  # its own comment exists and could not be edited: the report is missing
            raise UsageError(f"GitHub API: the edit of the earlier comment was refused: {exc}") from None
        if exc.status in DEGRADED:
            detail = escape(terminal_safe(exc.detail))
            console.print(
                f"[yellow]warning:[/] GitHub answered {exc.status} ({detail}): the token may not comment "
                "(a fork's pull request gets a read-only token); job summary only",
                highlight=False,
                soft_wrap=True,
            )
            if os.environ.get("GITHUB_ACTIONS") == "true":  # an annotation on the run's page, not only in the log
                console.print(
                    f"::warning title=otel-toolcall-eval::no pull-request comment (GitHub answered {exc.status}); "
                    "the report is in the job summary",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
            return ExitCode.OK
        raise UsageError(f"GitHub API: {exc}") from None
    except httpx.HTTPError as exc:
        raise UsageError(f"GitHub API at {api}: {type(exc).__name__}: {exc}") from None
    console.print(f"pull-request comment {action}: {escape(terminal_safe(url))}", highlight=False, soft_wrap=True)
    return ExitCode.OK


class _ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, detail: str) -> None:
        self.method = method
        self.status = status
        self.detail = detail
        super().__init__(f"{method} {path}: {status} {detail}")


def _headers(token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "otel-toolcall-eval",
    }


def _transient(response: httpx.Response) -> bool:
    return response.status_code == 429 or response.status_code >= 500


def _last(state: RetryCallState) -> Any:
    assert state.outcome is not None
    return state.outcome.result()  # the last answer (or the last transport error, raised)


def _send(client: httpx.Client, method: str, url: str, body: dict[str, str] | None = None) -> httpx.Response:
    """One request; GET and PATCH (idempotent) retried with backoff on transient failures (tenacity)."""
    if method == "POST":
        return client.request(method, url, json=body)
    retrying = Retrying(
        stop=stop_after_attempt(RETRIES + 1),
        wait=wait_exponential(multiplier=BACKOFF),
        retry=retry_if_exception_type(httpx.TransportError) | retry_if_result(_transient),
        retry_error_callback=_last,
        reraise=True,
    )
    response: httpx.Response = retrying(client.request, method, url, json=body)
    return response


def _check(response: httpx.Response) -> Any:
    if response.is_success:
        try:
            return response.json()
        except ValueError:
            status = response.status_code
            raise _ApiError(response.request.method, response.request.url.path, status, "not JSON") from None
    try:
        detail = str(response.json().get("message", ""))[:300]
    except (ValueError, AttributeError):
        detail = response.text[:300]
    raise _ApiError(response.request.method, response.request.url.path, response.status_code, detail)


def _upsert(client: httpx.Client, repo: str, number: int, body: str, author: str | None) -> tuple[str, str]:
    """Edit this tool's earlier comment if the pull request has one, else create it: ("updated"|"created", url)."""
    existing = _find_own(client, repo, number, author)
    if existing is not None:
        data = _check(_send(client, "PATCH", f"/repos/{repo}/issues/comments/{existing}", {"body": body}))
        return "updated", str(data.get("html_url", ""))
    data = _check(_send(client, "POST", f"/repos/{repo}/issues/{number}/comments", {"body": body}))
    return "created", str(data.get("html_url", ""))


def _login(client: httpx.Client) -> str:
    """The login the token writes as: ``GET /user``'s, or the workflow's bot for an installation token (GitHub
    answers 403 "Resource not accessible by integration" to ``/user`` for those)."""
    response = _send(client, "GET", "/user")
    if response.status_code in (401, 403):
        return ACTIONS_BOT
    data = _check(response)
    login = data.get("login") if isinstance(data, dict) else None
    if not isinstance(login, str) or not login:
        raise _ApiError("GET", "/user", response.status_code, "no login in the answer")
    return login


def _find_own(client: httpx.Client, repo: str, number: int, author: str | None = None) -> int | None:
    """The id of the first comment that starts with the marker and was written by the token's own login
    (``author``, else asked once, at the first marked comment), following the Link header's next pages."""
    url: str | None = f"/repos/{repo}/issues/{number}/comments?per_page=100"
    root = str(client.base_url).rstrip("/")
    for _ in range(MAX_PAGES):
        if url is None:
            return None
        response = _send(client, "GET", url)
        page = _check(response)
        if not isinstance(page, list):
            raise _ApiError("GET", response.request.url.path, response.status_code, "the comment list is not a list")
        for comment in page:
            if not isinstance(comment, dict) or not str(comment.get("body", "")).startswith(MARKER):
                continue
            user = comment.get("user")
            if author is None:
                author = _login(client)
            if not isinstance(user, dict) or user.get("login") != author:
                continue  # a marked comment someone else wrote (and can edit): never ours
            if isinstance(comment.get("id"), int):
                return int(comment["id"])
        url = response.links.get("next", {}).get("url")
        if url is not None and not url.startswith(root + "/"):
            url = None  # a next page elsewhere than the API is not followed
    return None


def _body(report: Path, extras: list[Path]) -> str:
    parts = []
    for path in [report, *extras]:
        try:
            parts.append(path.read_text(encoding="utf-8").rstrip() + "\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path}: cannot read: {exc}") from None
    return "\n".join(parts)


def _cap(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a line end with a note saying where the rest is."""
    if len(text) <= limit:
        return text
    note = TRUNCATED.format(limit=limit)
    head = text[: limit - len(note)]
    cut = head.rfind("\n")
    return (head[:cut] if cut > 0 else head) + note


def _append_summary(path: Path, body: str) -> None:
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(_cap(body, MAX_SUMMARY) + "\n")
    except OSError as exc:
        raise UsageError(f"$GITHUB_STEP_SUMMARY: {path}: {exc}") from None


def _pr_number(event_path: str | None) -> int | None:
    """The pull request's number from the workflow's event payload (pull_request and issue_comment events)."""
    if not event_path:
        return None
    try:
        with open(event_path, "rb") as handle:
            event = orjson.loads(handle.read(MAX_EVENT_BYTES))
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(f"$GITHUB_EVENT_PATH: {event_path}: {exc}") from None
    if not isinstance(event, dict):
        return None
    pr = event.get("pull_request")
    issue = event.get("issue")
    if not isinstance(pr, dict) and isinstance(issue, dict) and "pull_request" in issue:
        pr = issue  # a comment on a pull request: the issue is the pull request
    number = pr.get("number") if isinstance(pr, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None
