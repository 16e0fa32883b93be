"""Offline sessions: dataset cases sharing a ``session_id`` are reported as sessions too (the JSON result and the
Markdown report), with the figures the online rollup gives, whatever the chunking or the number of workers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.dataset import template_cases, write_cases
from otel_toolcall_eval.offline.pipeline import run_pipeline
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runner import evaluate
from tests.helpers import GOOD

# the template's cases as two conversations; "clear-calendar" belongs to none
SESSIONS = {
    "order-status": "s-orders",
    "thanks": "s-orders",
    "dentist-and-reminder": "s-calendar",
    "move-standup": "s-calendar",
}


def _dataset(tmp_path: Path, copies: int = 1) -> Path:
    cases = [
        c.model_copy(update={"id": f"{c.id}-{i}" if copies > 1 else c.id, "session_id": SESSIONS.get(c.id)})
        for i in range(copies)
        for c in template_cases()
    ]
    path = tmp_path / "dataset.jsonl"
    write_cases(path, cases)
    return path


def _run(tmp_path: Path, lines: list[dict[str, Any]], name: str = "run.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def _lines(copies: int = 1) -> list[dict[str, Any]]:
    out = []
    for i in range(copies):
        suffix = f"-{i}" if copies > 1 else ""
        for case_id, calls in GOOD.items():
            line: dict[str, Any] = {"id": case_id + suffix, "tool_calls": calls}
            if case_id == "order-status":  # the order lookup fails (the run line's error: its calls failed)
                line["error"] = "timeout"
            if case_id == "thanks":  # and the agent calls it again, the same way, in the next turn: failing again
                line["tool_calls"] = GOOD["order-status"]
                line["error"] = "timeout"
            out.append(line)
    return out


def test_cases_sharing_a_session_id_are_reported_as_a_session(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path)
    with evaluate(dataset, [_run(tmp_path, _lines())]) as result:
        block = result.report["sessions"]
    rows = {r["id"]: r for r in block["sessions"]}
    assert block["summary"] == {"sessions": 2, "passed": 1, "pass_rate": 0.5, "untracked_cases": 0}
    orders = rows["s-orders"]
    assert (orders["turns"], orders["tool_calls"], orders["errors"], orders["turns_ok"]) == (2, 2, 2, 0)
    assert orders["repeated_failures"] == 1 and orders["outcome"] == "fail"
    calendar = rows["s-calendar"]
    assert (calendar["turns"], calendar["tool_calls"], calendar["errors"], calendar["turns_ok"]) == (2, 4, 0, 2)
    assert calendar["outcome"] == "pass" and calendar["over_budget"] is False


def test_the_session_step_budget_applies_offline(tmp_path: Path) -> None:
    config = EvalConfig.from_dict({"sessions": {"step_budget": 3}})
    with evaluate(_dataset(tmp_path), [_run(tmp_path, _lines())], config=config) as result:
        rows = {r["id"]: r for r in result.report["sessions"]["sessions"]}
    assert rows["s-calendar"]["over_budget"] is True and rows["s-calendar"]["outcome"] == "fail"
    assert rows["s-orders"]["over_budget"] is False


def test_a_dataset_without_session_ids_reports_as_before(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    write_cases(path, template_cases())
    with evaluate(path, [_run(tmp_path, _lines())]) as result:
        assert "sessions" not in result.report


def test_sessions_are_the_same_across_chunks_and_workers(tmp_path: Path) -> None:
    """Forty copies of each conversation's turns, interleaved, in chunks of 7 and over two workers."""
    dataset = _dataset(tmp_path, copies=40)
    run = _run(tmp_path, list(reversed(_lines(copies=40))))
    config = EvalConfig()
    with evaluate(dataset, [run]) as result:
        whole = result.report["sessions"]
    rows = {r["id"]: r for r in whole["sessions"]}
    assert rows["s-orders"]["turns"] == 80 and rows["s-orders"]["repeated_failures"] == 79
    outcome = run_pipeline(dataset, [str(run)], config, Preparer(config), chunk_size=7)
    try:
        assert outcome.aggregates[0].report()["sessions"] == whole
    finally:
        outcome.store.close()
    with evaluate(dataset, [run], jobs=2) as parallel:
        assert parallel.report["sessions"] == whole


def test_n_runs_average_the_summary_and_keep_each_runs_rows(tmp_path: Path) -> None:
    dataset = _dataset(tmp_path)
    good = _run(tmp_path, [{"id": k, "tool_calls": v} for k, v in GOOD.items()], "good.jsonl")
    with evaluate(dataset, [_run(tmp_path, _lines()), good]) as result:
        block = result.report["sessions"]
    assert block["summary"]["pass_rate"] == 0.75  # 1 of 2, then 2 of 2
    assert [len(rows) for rows in block["per_run"]] == [2, 2]


def test_the_markdown_report_lists_the_sessions_escaped(tmp_path: Path) -> None:
    cases = [c.model_copy(update={"session_id": "<b>@all</b>"}) for c in template_cases()]
    dataset = tmp_path / "d.jsonl"
    write_cases(dataset, cases)
    md = tmp_path / "r.md"
    code = main(["eval", "--dataset", str(dataset), "--runs", str(_run(tmp_path, _lines())), "--markdown", str(md)])
    assert code in (0, 1)
    text = md.read_text()
    assert "### Sessions" in text and "<b>" not in text and "@all" not in text
