"""The LangWatch cookbook "Evaluating Tool Selection" (docs.langwatch.ai/cookbooks/tool-selection): its six queries,
the tools the model called, and its two published tables, reproduced by ``eval`` end to end.

The cookbook's functions: precision = correct calls / calls made (0.0 when nothing was called), recall = correct
calls / expected calls, each rounded to two places; per-tool recall = cases whose expected tool was called / cases
that expected it. Its tables (copied here as data, with the tool names as the cookbook spells them):
"""

from __future__ import annotations

from pathlib import Path

import orjson

from otel_toolcall_eval.dataset.io import write_cases
from otel_toolcall_eval.dataset.models import DatasetCase, ExpectedCall
from otel_toolcall_eval.offline.runner import evaluate

TOOLS = ["send_email", "get_calendar_events", "create_reminder"]

# query, expected, actual (what the cookbook's model called), precision, recall: the per-case table
PER_CASE = [
    ("Send an email to john@example.com about the project update", ["send_email"], [], 0.0, 0.0),
    ("What meetings do I have scheduled for tomorrow?", ["get_calendar_events"], ["get_calendar_events"], 1.0, 1.0),
    ("Set a reminder for my dentist appointment next week", ["create_reminder"], ["create_reminder"], 1.0, 1.0),
    (
        "Check my calendar for next week's meetings and set reminders for each one",
        ["get_calendar_events", "create_reminder"],
        ["get_calendar_events"],
        1.0,
        0.5,
    ),
    (
        "Look up my team meeting schedule and send the agenda to all participants",
        ["get_calendar_events", "send_email"],
        ["get_calendar_events"],
        1.0,
        0.5,
    ),
    (
        "Set a reminder for the client call and send a confirmation email to the team",
        ["create_reminder", "send_email"],
        ["create_reminder", "send_email"],
        1.0,
        1.0,
    ),
]

# tool, correct_calls, expected_calls, recall: the per-tool table (sorted by recall, as published)
PER_TOOL = [
    ("get_calendar_events", 3, 3, 1.00),
    ("create_reminder", 2, 3, 0.67),
    ("send_email", 1, 3, 0.33),
]


def test_the_cookbook_per_case_and_per_tool_tables_reproduce(tmp_path: Path) -> None:
    tools = [{"name": n, "description": n, "parameters": {"type": "object"}} for n in TOOLS]
    cases = [
        DatasetCase(
            id=f"q{i}",
            user_input=query,
            available_tools=tools,
            expected_tool_calls=[ExpectedCall(name=n) for n in expected],
        )
        for i, (query, expected, _, _, _) in enumerate(PER_CASE, 1)
    ]
    dataset = tmp_path / "cookbook.jsonl"
    write_cases(dataset, cases)
    run = tmp_path / "run.jsonl"
    run.write_bytes(
        b"".join(
            orjson.dumps({"id": f"q{i}", "tool_calls": [{"name": n, "arguments": {}} for n in actual]}) + b"\n"
            for i, (_, _, actual, _, _) in enumerate(PER_CASE, 1)
        )
    )
    with evaluate(dataset, [run]) as result:
        rows = {r["id"]: r for r in result.cases}
        got_cases = [(round(rows[f"q{i}"]["precision"], 2), round(rows[f"q{i}"]["recall"], 2)) for i in range(1, 7)]
        assert got_cases == [(p, r) for _, _, _, p, r in PER_CASE]
        per_tool = result.report["per_tool"]
        got_tools = sorted(
            ((t, per_tool[t]["correct"], per_tool[t]["expected"], round(per_tool[t]["recall"], 2)) for t in TOOLS),
            key=lambda row: -row[3],
        )
        assert got_tools == PER_TOOL
