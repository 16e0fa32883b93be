"""The production-to-regression loop is lossless (issue 29): a trace scored by the processor, written as an OTLP file,
harvested (``harvest --out --runs-out``) and evaluated (``eval``'s scorer over the harvested row and run line) gives
the processor's verdicts, every one: per call, and the recovery class of each failed call.

Before, run lines carried each call's name, arguments and batch but not its error or result, so a trace whose two
identical calls both failed showed no repeated failure offline, no recovery class, and a prerequisite that failed
online (``missing_required_step``) counted as done.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import Status, StatusCode

from tests.helpers import (
    PARITY_ARGUMENTS,
    PARITY_CONFIG,
    PARITY_OFFERED,
    encoded_arguments,
    harvested,
    harvested_offline,
    harvested_online,
    make_pipeline,
    tool_definitions,
)

# what happened when a call ran: its result, or how it failed (status, exception event, error.type)
EXECUTIONS: dict[str, dict[str, Any]] = {
    "ok": {"result": "ok"},
    "empty": {"result": ""},
    "unrecorded": {},
    "status": {"status": "backend unavailable"},
    "timeout": {"status": "timed out", "exception": ("TimeoutError", "read timed out after 30 s")},
    "rejected": {"status": "bad input", "exception": ("ValueError", "Validation failed for input parameters: q")},
    "error_type": {"error_type": "tool_error", "result": '{"isError": true}'},
    "secret": {"status": "denied", "exception": ("PermissionError", "token sk-live-0123456789abcdef0123 refused")},
}
Turn = list[tuple[str, Any, str]]


def _trace(turns: list[Turn], offered: list[str], answer: bool) -> Any:
    """The trace an instrumented agent emits, through the processor: per turn a chat span that offers the tools and
    requests the turn's calls, then one execute_tool span per call, executed as ``EXECUTIONS`` says; then, with
    ``answer``, a last chat span that answers without a tool."""
    pipe = make_pipeline(PARITY_CONFIG)
    tracer = pipe.tracer
    with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for t, calls in enumerate(turns):
            parts = [
                {"type": "tool_call", "id": f"c{t}.{i}", "name": name}
                | ({} if arguments is None else {"arguments": encoded_arguments(arguments)})
                for i, (name, arguments, _) in enumerate(calls)
            ]
            attrs = {
                "gen_ai.operation.name": "chat",
                "gen_ai.tool.definitions": json.dumps(tool_definitions(offered)),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
                "gen_ai.usage.input_tokens": 100 + t,
                "gen_ai.usage.output_tokens": 10,
            }
            with tracer.start_as_current_span("chat", attributes=attrs):
                pass
            for i, (name, arguments, how) in enumerate(calls):
                execution = EXECUTIONS[how]
                attrs = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": f"c{t}.{i}",
                }
                encoded = encoded_arguments(arguments)
                if encoded is not None:
                    attrs["gen_ai.tool.call.arguments"] = encoded
                if "error_type" in execution:
                    attrs["error.type"] = execution["error_type"]
                with tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs) as span:
                    if "exception" in execution:
                        kind, message = execution["exception"]
                        span.add_event("exception", {"exception.type": kind, "exception.message": message})
                    if "status" in execution:
                        span.set_status(Status(StatusCode.ERROR, execution["status"]))
                    if "result" in execution:
                        span.set_attribute("gen_ai.tool.call.result", execution["result"])
        if answer:
            reply = [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]
            with tracer.start_as_current_span(
                "chat", attributes={"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(reply)}
            ):
                pass
    return pipe


def _assert_same(tmp_path: Path, traces: list[tuple[list[Turn], list[str], bool]]) -> None:
    pipes = [_trace(turns, offered, answer) for turns, offered, answer in traces]
    cases, lines = harvested(tmp_path, pipes)
    assert len(lines) == len(pipes)
    for pipe in pipes:
        trace_id = next(s.context.trace_id for s in pipe.spans())
        key = f"trace-{trace_id:032x}"
        online = harvested_online(pipe)
        offline = harvested_offline(cases[key], lines[key])
        assert offline[0] == online[0], (lines[key], online[0])
        assert offline[1] == online[1], (lines[key], online[1])


def test_two_identical_failed_calls_are_a_repeated_failure_and_a_repeat_offline_too(tmp_path: Path) -> None:
    turns: list[Turn] = [[("search", {"q": "paris"}, "timeout")], [("search", {"q": "paris"}, "timeout")]]
    _assert_same(tmp_path, [(turns, ["search"], True)])
    cases, lines = harvested(tmp_path, [_trace(turns, ["search"], True)])
    (line,) = lines.values()
    assert line["tool_calls"][0]["error"] == {
        "type": "TimeoutError",
        "message": "read timed out after 30 s",
        "status": "timed out",
    }
    rows, recovery = harvested_offline(next(iter(cases.values())), line)
    assert [r["repeated_failure"] for r in rows] == [False, True]
    assert recovery == ["repeated", "handed_back"]


def test_a_prerequisite_that_failed_online_is_not_done_offline(tmp_path: Path) -> None:
    """``required_steps``: authenticate before send_email; authenticate ran and failed."""
    turns: list[Turn] = [[("authenticate", {}, "status")], [("send_email", {"to": "a@b.c"}, "ok")]]
    _assert_same(tmp_path, [(turns, ["authenticate", "send_email"], True)])
    cases, lines = harvested(tmp_path, [_trace(turns, ["authenticate", "send_email"], True)])
    rows, _ = harvested_offline(next(iter(cases.values())), next(iter(lines.values())))
    assert "missing_required_step:authenticate" in (rows[1]["violations"] or [])


def test_run_lines_carry_results_latency_tokens_and_redacted_errors(tmp_path: Path) -> None:
    turns: list[Turn] = [[("search", {"q": "x"}, "secret"), ("ping", {}, "ok")]]
    _, lines = harvested(tmp_path, [_trace(turns, ["search", "ping"], False)])
    (line,) = lines.values()
    failed, ok = line["tool_calls"]
    assert failed["error"]["message"] == "token [REDACTED] refused"  # the judge's default redaction
    assert ok["result"] == "ok" and "error" not in ok
    assert all(isinstance(c["latency_ms"], float) and c["latency_ms"] >= 0 for c in line["tool_calls"])
    assert line["tokens"] == {"input": 100, "output": 10} and line["answered"] is False
    assert line["latency_ms"] >= max(c["latency_ms"] for c in line["tool_calls"])


NAMES = st.sampled_from(sorted(PARITY_ARGUMENTS))


@st.composite
def traces(draw: st.DrawFn) -> tuple[list[Turn], list[str], bool]:
    turns = []
    for _ in range(draw(st.integers(1, 4))):
        calls = []
        for name in draw(st.lists(NAMES, min_size=1, max_size=3)):
            calls.append(
                (name, draw(st.sampled_from(PARITY_ARGUMENTS[name])), draw(st.sampled_from(sorted(EXECUTIONS))))
            )
        turns.append(calls)
    offered = draw(
        st.lists(st.sampled_from(sorted(PARITY_OFFERED)), unique=True, min_size=1, max_size=len(PARITY_OFFERED))
    )
    return turns, offered, draw(st.booleans())


@pytest.mark.parametrize("seed", [0])
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(batch=st.lists(traces(), min_size=1, max_size=3))
def test_processor_otlp_file_harvest_and_eval_give_every_verdict_equal(
    tmp_path: Path, seed: int, batch: list[tuple[list[Turn], list[str], bool]]
) -> None:
    _assert_same(tmp_path, batch)
