"""One engine: a call gets the same verdicts through the processor, through ``replay`` and as a run line in ``eval``.

The two divergences a reviewer found between the online and offline paths are pinned first; then a property test
generates traces (valid, invalid, unparseable, bare and unrecorded arguments; offered, config-only and unknown tools;
duplicates, repeated failures, failed runs, every policy, parallel batches) and scores each three ways.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, example, given, settings
from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval.dataset.models import DatasetCase
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runner import evaluate
from otel_toolcall_eval.offline.runs import parse_run_line
from otel_toolcall_eval.offline.score import score_case
from otel_toolcall_eval.replay import replay_spans
from otel_toolcall_eval.replay.otlp import encode_json, request_from_json, spans_from_request
from tests.helpers import (
    PARITY_CONFIG,
    UNRECORDED,
    offline_rows,
    online_rows,
    parity_traces,
    record_parity_trace,
    tool_definitions,
)


def _run_line(turns: list[list[tuple[str, Any]]], chat: list[bool], failed: bool) -> dict[str, Any]:
    calls = []
    for t, turn in enumerate(turns):
        for name, arguments in turn:
            call: dict[str, Any] = {"name": name, "arguments": arguments}
            if chat[t]:
                call["batch"] = t
            calls.append(call)
    return {"id": "case", "tool_calls": calls, **({"error": "boom"} if failed else {})}


def _case(offered: list[str]) -> DatasetCase:
    return DatasetCase.model_validate(
        {
            "id": "case",
            "user_input": "do it",
            "available_tools": tool_definitions(offered),
            "expected_tool_calls": [],
            "expected_no_tool": True,
        }
    )


def _offline(offered: list[str], line: dict[str, Any]) -> list[dict[str, Any]]:
    prep = Preparer(PARITY_CONFIG)
    result = score_case(prep.prepare(_case(offered)), parse_run_line("run.jsonl", 1, orjson.dumps(line)), prep)
    return offline_rows(result.checks)


def _replayed(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    document = json.loads(json.dumps(encode_json(spans)))
    return replay_spans(spans_from_request(request_from_json(document)), PARITY_CONFIG).spans


# --- the two divergences, pinned ------------------------------------------------------------------------------


def test_a_configured_tool_the_trace_did_not_offer_is_known_on_every_path() -> None:
    """The config defines ``lookup``, the trace offers only ``search``, the agent calls ``lookup``: one meaning of
    "known" (offered or configured), so a ``required_steps`` prerequisite counts in production and in CI alike."""
    turns, chat = [[("lookup", {"id": 1})]], [True]
    pipe = record_parity_trace(turns, ["search"], chat, failed=False)
    online = online_rows(pipe.spans())
    assert online[0]["tool_known"] is True and online[0]["outcome"] == "success"
    offline = _offline(["search"], _run_line(turns, chat, failed=False))
    assert offline[0]["tool_known"] is True and offline[0]["outcome"] == "success"
    assert offline == online


def test_calls_without_recorded_arguments_are_not_duplicates_on_any_path(tmp_path: Path) -> None:
    """Two ``ping`` calls whose arguments were not recorded (``harvest --runs-out`` writes ``"arguments": null``
    then) cannot be told apart: neither path calls the second a duplicate, nor inflates duplicate_call_rate."""
    turns, chat = [[("ping", UNRECORDED)], [("ping", UNRECORDED)]], [True, True]
    pipe = record_parity_trace(turns, ["ping"], chat, failed=False)
    assert [r["duplicate"] for r in online_rows(pipe.spans())] == [False, False]
    line = _run_line(turns, chat, failed=False)
    assert [r["duplicate"] for r in _offline(["ping"], line)] == [False, False]
    dataset, runs = tmp_path / "cases.jsonl", tmp_path / "run.jsonl"
    dataset.write_text(_case(["ping"]).model_dump_json() + "\n")
    runs.write_text(json.dumps(line) + "\n")
    report = evaluate(dataset, [runs], PARITY_CONFIG).report
    assert report["summary"]["duplicate_call_rate"] == 0.0


# --- the property ------------------------------------------------------------------------------------------------


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=parity_traces())
# a call whose id the request named without arguments, beside another call of its tool's name that has some: it
# borrows nothing (a by-name fallback once gave it the other call's arguments)
@example(
    trace=([[("search", None), ("authenticate", {}), ("search", {"q": "paris"})]], ["authenticate"], [True], False)
)
def test_processor_replay_and_eval_give_identical_per_call_verdicts(
    trace: tuple[list[list[tuple[str, Any]]], list[str], list[bool], bool],
) -> None:
    turns, offered, chat, failed = trace
    pipe = record_parity_trace(turns, offered, chat, failed)
    spans = pipe.spans()
    online = online_rows(spans)
    assert len(online) == sum(len(t) for t in turns)
    assert online_rows(_replayed(spans)) == online
    offline = _offline(offered if any(chat) else [], _run_line(turns, chat, failed))
    assert offline == online
