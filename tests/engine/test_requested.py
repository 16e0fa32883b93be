"""Calls that ran on no tool span, scored from the model requests alone (``engine.requested``, issue 26).

The pure check first (a record built from the request and the reply, scored by the engine's one scorer), the
reading of replies from a model span's input, then the online path: a trace whose tool activity is only in model
requests (the Anthropic SDK's tool runner under OpenInference's or OpenLLMetry's instrumentation) gets a verdict per
call, marked as coming from the request, on the model span whose input carried the result back; the root counts it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from otel_toolcall_eval.checks.outcome import error_reply
from otel_toolcall_eval.conventions.llm_spans import requested_calls, span_tool_replies, tool_replies
from otel_toolcall_eval.conventions.shapes import shape_named
from otel_toolcall_eval.engine import Scorer
from otel_toolcall_eval.engine.requested import (
    REQUEST_CONVENTION,
    Conversations,
    answered_requests,
    requested_call_record,
)
from otel_toolcall_eval.records import CallHistory, Outcome, ToolDefinition, ToolReply
from tests.helpers import WEATHER_SCHEMA, WEATHER_TOOL, OfferedJudge, genai_turn, make_pipeline, scores, tool_span

TOOLS = {"get_weather": ToolDefinition("get_weather", WEATHER_SCHEMA)}


def _score(name: str, arguments: Any, reply: ToolReply | None, history: CallHistory | None = None) -> Any:
    record = requested_call_record("c1", name, arguments, reply)
    return Scorer().score(record, history or CallHistory(), trace_tools=TOOLS, batch=1)


# --- the pure check ---------------------------------------------------------------------------------------


def test_a_requested_call_is_scored_against_the_definitions_and_its_reply() -> None:
    ok = _score("get_weather", '{"city": "Oslo"}', ToolReply("c1", "sunny"))
    assert (ok.outcome, ok.parse_ok, ok.tool_known, ok.schema_valid) == (Outcome.SUCCESS, True, True, True)
    bad = _score("get_weather", {"city": 3}, ToolReply("c1", "error", is_error=True))
    assert (bad.outcome, bad.error_source, bad.schema_valid) == (Outcome.MALFORMED_CALL, "schema", False)
    unknown = _score("book_flight", {"to": "Oslo"}, ToolReply("c1", "Error: Tool 'book_flight' not found", True))
    assert (unknown.outcome, unknown.error_source, unknown.tool_known) == (
        Outcome.MALFORMED_CALL,
        "unknown_tool",
        False,
    )


def test_the_replys_error_flag_decides_the_outcome_and_a_rejection_text_says_why() -> None:
    failed = _score("get_weather", {"city": "Oslo"}, ToolReply("c1", "ConnectionError('down')", is_error=True))
    assert (failed.outcome, failed.error_source) == (Outcome.EXECUTION_FAILED, "error.type")
    text = "ValueError('Invalid arguments for function get_weather')"
    rejected = _score("get_weather", {"city": "Oslo"}, ToolReply("c1", text, is_error=True))
    assert (rejected.outcome, rejected.error_source) == (Outcome.MALFORMED_CALL, "input_rejected")
    # no flag recorded (OpenLLMetry's GenAI parts): the text of an ordinary reply is never guessed at
    unflagged = _score("get_weather", {"city": "Oslo"}, ToolReply("c1", "ConnectionError('down')"))
    assert unflagged.outcome is Outcome.SUCCESS


def test_a_requested_call_without_recorded_arguments_gets_no_parse_or_schema_verdict() -> None:
    score = _score("get_weather", None, ToolReply("c1", "sunny"))
    assert (score.parse_ok, score.schema_valid, score.tool_known) == (None, None, True)


def test_it_is_counted_in_the_traces_history_like_a_tool_spans_call() -> None:
    history = CallHistory()
    _score("get_weather", {"city": "Oslo"}, ToolReply("c1", "sunny"), history)
    again = _score("get_weather", {"city": "Oslo"}, ToolReply("c1", "sunny"), history)
    assert (history.calls, again.step, again.duplicate) == (2, 2, True)
    assert requested_call_record("c1", "t", None, None).convention == REQUEST_CONVENTION


def test_only_replies_to_waiting_requests_are_answered_once_each() -> None:
    replies = [ToolReply("c1", "a"), ToolReply("zz", "b"), ToolReply("c1", "again"), ToolReply("c2", "c")]
    answered = answered_requests(replies, {"c1": "get_weather", "c2": "get_population"})
    assert [(r.call_id, r.content, name) for r, name in answered] == [
        ("c1", "a", "get_weather"),
        ("c2", "c", "get_population"),
    ]


# --- replies read from a model span's input -----------------------------------------------------------------


def _anthropic_turn(call_id: str, content: str, is_error: bool) -> dict[str, Any]:
    """OpenInference's Anthropic LLM span answering ``call_id``: indexed messages, and the request body."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    if is_error:
        block["is_error"] = True
    return {
        "openinference.span.kind": "LLM",
        "input.value": json.dumps({"model": "m", "messages": [{"role": "user", "content": [block]}]}),
        "llm.input_messages.0.message.role": "tool",
        "llm.input_messages.0.message.tool_call_id": call_id,
        "llm.input_messages.0.message.content": content,
    }


HAYSTACK_OI = shape_named("openinference.instrumentation.haystack")


def test_the_anthropic_request_bodys_error_flag_is_read_only_where_the_shape_row_says_so() -> None:
    attrs = _anthropic_turn("c1", "ConnectionError('down')", is_error=True)
    assert tool_replies(attrs, anthropic_body=True) == [ToolReply("c1", "ConnectionError('down')", True)]
    assert tool_replies(attrs) == [ToolReply("c1", "ConnectionError('down')", None)]
    assert tool_replies(_anthropic_turn("c1", "sunny", is_error=False), anthropic_body=True)[0].is_error is False


def _haystack_turn(replies: list[tuple[str, bool]], calls: list[tuple[str, str]] = ()) -> dict[str, Any]:
    """OpenInference's Haystack LLM span: no call ids anywhere; the user's message, then per reply the assistant's
    call and its tool message (roles only in the indexed messages, the ``ToolCallResult`` in the ``input.value``
    reprs); ``calls``: what this turn requests ((name, JSON arguments))."""
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user"}
    messages = ["ChatMessage(_role=<ChatRole.USER: 'user'>, _content=[TextContent(text='Weather?')], _meta={})"]
    for i, (text, error) in enumerate(replies):
        attrs[f"llm.input_messages.{2 * i + 1}.message.role"] = "assistant"
        attrs[f"llm.input_messages.{2 * i + 2}.message.role"] = "tool"
        origin = "ToolCall(tool_name='t', arguments={}, id=None, extra=None)"
        messages.append("ChatMessage(_role=<ChatRole.ASSISTANT: 'assistant'>, _content=[" + origin + "])")
        result = f"ToolCallResult(result={text!r}, origin={origin}, error={error})"
        messages.append(f"ChatMessage(_role=<ChatRole.TOOL: 'tool'>, _content=[{result}], _meta={{}})")
    attrs["input.value"] = json.dumps({"messages": messages, "tools": []})
    for j, (name, arguments) in enumerate(calls):
        attrs[f"llm.output_messages.0.message.tool_calls.{j}.tool_call.function.name"] = name
        attrs[f"llm.output_messages.0.message.tool_calls.{j}.tool_call.function.arguments"] = arguments
    return attrs


def test_without_call_ids_calls_and_replies_are_matched_by_position_where_the_shape_row_says_so() -> None:
    """Haystack's row (``positional_calls``): a call gets its position in the conversation (after the tool messages
    its request carried), the k-th tool message answers it with the text and error flag of its ``ToolCallResult``
    repr; without the row nothing is identified."""
    first = _haystack_turn([], [("get_weather", '{"city": "Oslo"}'), ("book_flight", "{}")])
    sent: dict[str, Any] = {}
    assert requested_calls(first, sent, positional="@") == [("@0", "get_weather"), ("@1", "book_flight")]
    assert sent == {"@0": '{"city": "Oslo"}', "@1": "{}"}
    assert requested_calls(first) == [(None, "get_weather"), (None, "book_flight")]
    second = _haystack_turn([("sunny", False), ("Tool 'book_flight' not found", True)], [("get_weather", "{}")])
    assert requested_calls(second, None, positional="@") == [("@2", "get_weather")]
    assert HAYSTACK_OI is not None
    positional = {"positional": "@", "replies_repr": HAYSTACK_OI.replies_repr}
    assert tool_replies(second, **positional) == [
        ToolReply("@0", "sunny", False),
        ToolReply("@1", "Tool 'book_flight' not found", True),
    ]
    assert tool_replies(second) == []
    # the reprs unreadable (cut): the tool messages still answer by position, their content unrecorded
    second["input.value"] = second["input.value"][:200] + "..."
    assert tool_replies(second, **positional) == [ToolReply("@0", None, None), ToolReply("@1", None, None)]


@pytest.mark.parametrize(
    ("text", "failed"),
    [
        ("ConnectionError('census service unreachable')", True),  # the Anthropic tool runner: repr(exc)
        ("requests.exceptions.ReadTimeout(...)", False),  # not an exception type's name
        ("httpx.ConnectTimeoutError('x')", True),
        ("Error executing tool get_population", True),  # the MCP Python SDK's server
        ("  error: the census service is down", True),
        ('[{"type": "text", "text": "Error: down"}]', True),  # content blocks, flattened
        ("sunny, no error reported", False),
        ("Errors are rare in Paris", False),
        ("The ValueError( was caught", False),  # only at the start of the reply
        (None, False),
        (42, False),
    ],
)
def test_a_reply_that_says_its_tool_failed_is_recognised_at_its_start(text: Any, failed: bool) -> None:
    assert error_reply(text) is failed


def test_the_replys_text_flags_an_error_only_where_the_scopes_row_records_no_flag() -> None:
    parts = [
        {"type": "tool_call_response", "id": "c1", "response": "ConnectionError('down')"},
        {"type": "tool_call_response", "id": "c2", "response": "sunny"},
    ]
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps([{"role": "user", "parts": parts}])}
    assert [r.is_error for r in tool_replies(attrs, error_text=True)] == [True, None]

    class Span:
        def __init__(self, scope: str) -> None:
            self.instrumentation_scope = InstrumentationScope(scope, "0.62.4")

    assert [r.is_error for r in span_tool_replies(Span("opentelemetry.instrumentation.anthropic"), attrs)] == [
        True,
        None,
    ]
    # a scope whose row records the flag, and one without a row: the text is never guessed at
    assert [r.is_error for r in span_tool_replies(Span("openinference.instrumentation.anthropic"), attrs)] == [
        None,
        None,
    ]
    assert [r.is_error for r in span_tool_replies(Span("my.instrumentation"), attrs)] == [None, None]


def test_genai_tool_call_response_parts_are_replies_without_a_flag() -> None:
    parts = [{"type": "tool_call_response", "id": "c1", "response": "sunny"}]
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps([{"role": "user", "parts": parts}])}
    assert tool_replies(attrs) == [ToolReply("c1", "sunny", None)]


# --- the online path ------------------------------------------------------------------------------------------


def _chat(p: Any, name: str, calls: list[tuple[str, str, Any]] = (), replies: list[tuple[str, str]] = ()) -> None:
    """A GenAI chat span offering the weather tool, answering ``replies`` ((id, text)) and requesting ``calls``."""
    genai_turn(p.tracer, name, calls, replies, tools=[WEATHER_TOOL])


def test_a_trace_with_tool_activity_only_in_requests_gets_a_verdict_per_call() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        _chat(p, "turn 1", [("c1", "get_weather", {"city": 3}), ("c2", "book_flight", {"to": "Oslo"})])
        _chat(p, "turn 2", [("c3", "get_weather", {"city": "Rome"})], [("c1", "error"), ("c2", "not found")])
        _chat(p, "turn 3", [("c4", "get_weather", {"city": "Oslo"})], [("c3", "sunny")])  # c4: never answered
    answered = scores(p.one("turn 2"))
    assert answered["requested.0.tool"] == "get_weather" and answered["requested.0.call_id"] == "c1"
    assert answered["requested.0.convention"] == "request"
    assert (answered["requested.0.outcome"], answered["requested.0.error_source"]) == ("malformed_call", "schema")
    assert (answered["requested.1.tool_known"], answered["requested.1.error_source"]) == (False, "unknown_tool")
    assert answered["requested.0.batch"] == answered["requested.1.batch"] == 1  # one parallel batch
    assert scores(p.one("turn 3"))["requested.0.outcome"] == "success"
    assert scores(p.one("turn 1")) == {}
    root = scores(p.one("agent"))
    assert (root["trace.tool_calls"], root["trace.request_scored_calls"], root["trace.errors"]) == (3, 3, 2)
    assert (root["trace.unexecuted_calls"], root["trace.correct"]) == (1, False)


@pytest.mark.parametrize("span_id", ["c1", None, "rpc-7"])  # the model's id; none; a server's own (by name)
def test_a_mixed_trace_scores_the_request_no_span_ran_for_and_not_the_calls_with_spans(span_id: str | None) -> None:
    """Some tools ran on spans, one request on none (a tool the agent does not have): that request is scored from
    the requests like a trace with no tool span at all, not only counted in ``trace.unknown_tool_requests``; the call
    its span claimed (by id, or by name when the span records none or another id) is not scored a second time."""
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        _chat(p, "turn 1", [("c1", "get_weather", {"city": "Oslo"})])
        tool_span(p.tracer, "get_weather", {"city": "Oslo"}, call_id=span_id, result="sunny")
        _chat(p, "turn 2", [("c2", "book_flight", {"to": "Oslo"})], [("c1", "sunny")])
        _chat(p, "turn 3", [], [("c2", "Error: tool book_flight not found")])
    assert not any(k.startswith("requested.") for k in scores(p.one("turn 2")))
    answered = scores(p.one("turn 3"))
    assert (answered["requested.0.tool"], answered["requested.0.call_id"]) == ("book_flight", "c2")
    assert (answered["requested.0.outcome"], answered["requested.0.error_source"]) == ("malformed_call", "unknown_tool")
    assert "requested.1.tool" not in answered
    root = scores(p.one("agent"))
    assert (root["trace.tool_calls"], root["trace.request_scored_calls"], root["trace.errors"]) == (2, 1, 1)
    assert (root["trace.unexecuted_calls"], root["trace.unknown_tool_requests"], root["trace.correct"]) == (0, 0, False)


def test_the_calls_scored_from_requests_are_counted_under_their_own_convention() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        _chat(p, "turn 1", [("c1", "get_weather", {"city": "Oslo"})])
        _chat(p, "turn 2", [], [("c1", "sunny")])
    conventions = {labels.get("convention") for labels, _ in p.metric_points("toolcall_eval.coverage.calls")}
    assert conventions == {REQUEST_CONVENTION}


# --- offline: harvest's run lines carry them, eval gives the same verdicts -------------------------------------


@pytest.mark.parametrize(
    "fixture", ["anthropic_openinference-content", "anthropic_openllmetry-content", "haystack-content"]
)
def test_harvest_and_eval_give_the_calls_scored_from_requests_their_online_verdicts(
    tmp_path: Path, fixture: str
) -> None:
    """The Anthropic tool runner under OpenInference's or OpenLLMetry's instrumentation, and Haystack's Agent under
    OpenInference's (their tools run on no span), scored by the processor, written as OTLP JSON, harvested
    (``--runs-out``) and evaluated by ``eval``'s scorer: every call is in the run line with the arguments the model
    sent and the reply's error (OpenLLMetry's: read from the reply's text, its row records no flag; Haystack's:
    matched by position, from the ``ToolCallResult`` repr), and gets the verdicts it got online."""
    from otel_toolcall_eval.cli import main
    from otel_toolcall_eval.dataset import read_cases
    from otel_toolcall_eval.replay import replay_spans
    from otel_toolcall_eval.replay.otlp import encode_json
    from tests.framework_scenario import KEYS, recorded, requested_scores
    from tests.helpers import harvested_offline

    spans = replay_spans(recorded(fixture)).spans
    online = requested_scores(spans)
    assert len(online) == 5
    source, cases, runs = tmp_path / "traces.json", tmp_path / "cases.jsonl", tmp_path / "runs.jsonl"
    source.write_text(json.dumps(encode_json(list(spans))))
    command = [
        "harvest",
        str(source),
        "--where",
        "toolcall_eval.trace.correct = false",
        "--out",
        str(cases),
        "--runs-out",
        str(runs),
    ]
    assert main(command) == 0
    (case,) = read_cases(cases)
    (line,) = [json.loads(text) for text in runs.read_text().splitlines()]
    assert [c["name"] for c in line["tool_calls"]] == [name for name, _ in online]
    sent = line["tool_calls"][2]["arguments"]  # as the model span recorded them: JSON text, or an object
    assert (json.loads(sent) if isinstance(sent, str) else sent) == {"city": "Oslo", "unit": "kelvin"}
    assert line["tool_calls"][4]["error"] == {"error_type": "tool_error"}
    rows, _ = harvested_offline(case, line)
    offline = [{key: row[key.removeprefix("toolcall_eval.")] for key in KEYS} for row in rows]
    assert offline == [scores for _, scores in online]


def test_a_tool_span_arriving_after_its_call_was_scored_from_the_requests_is_not_counted_twice() -> None:
    """Another service's tool span, exported after the agent's next model span: the call was scored from the
    requests already; the tool span points at the model span that carries its scores (``same_call_as``)."""
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        _chat(p, "turn 1", [("c1", "get_weather", {"city": "Oslo"}), ("c2", "get_weather", {"city": "Rome"})])
        _chat(p, "turn 2", [], [("c1", "sunny"), ("c2", "rain")])
        tool_span(p.tracer, "get_weather", {"city": "Oslo"}, call_id="c1", result="sunny")  # by its call id
        tool_span(p.tracer, "get_weather", {"city": "Rome"}, call_id="rpc-9")  # a server's id: by name
    answered = f"{p.one('turn 2').context.span_id:016x}"
    late = [scores(s) for s in p.spans() if s.name == "execute_tool get_weather"]
    assert [s.get("same_call_as") for s in late] == [answered, answered]
    assert not any("outcome" in s for s in late)
    root = scores(p.one("agent"))
    assert (root["trace.tool_calls"], root["trace.request_scored_calls"]) == (2, 2)


# --- the features: the judge and sessions see them as they see a tool span's call -----------------------------


def test_the_judge_is_offered_each_call_scored_from_the_requests_and_the_span_says_it_sampled() -> None:
    judge = OfferedJudge()
    p = make_pipeline(judge=judge)
    with p.tracer.start_as_current_span("agent"):
        _chat(p, "turn 1", [("c1", "get_weather", {"city": "Oslo"}), ("c2", "get_weather", {"city": 3})])
        _chat(p, "turn 2", [], [("c1", "sunny"), ("c2", "ValueError('bad city')")])
    answered = p.one("turn 2")
    assert [(r.call_id, s.outcome) for _, r, s, _ in judge.offered] == [
        ("c1", Outcome.SUCCESS),
        ("c2", Outcome.MALFORMED_CALL),
    ]
    trace_id, record, _, tools = judge.offered[0]
    # the judge's verdict links to the model span that carries the call's scores
    assert (trace_id, record.trace_id) == (answered.context.trace_id, f"{answered.context.trace_id:032x}")
    assert record.span_id == f"{answered.context.span_id:016x}"
    assert json.loads(record.raw_arguments) == {"city": "Oslo"} and tools is not None and "get_weather" in tools
    got = scores(answered)
    assert (got["requested.0.judge.sampled"], got["requested.1.judge.sampled"]) == (True, True)
    assert "judge.sampled" not in got  # the model span itself was not judged


def test_a_failure_scored_from_the_requests_repeated_in_a_later_turn_fails_the_session() -> None:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    from otel_toolcall_eval import attributes as A

    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    p = make_pipeline(logger_provider=logger_provider)
    for turn in range(2):  # the same call, failing the same way (schema-invalid), in two turns of one conversation
        with p.tracer.start_as_current_span(f"agent {turn}", attributes={A.GEN_AI_CONVERSATION_ID: "conv"}):
            _chat(p, "ask", [("c1", "get_weather", {"city": 3})])
            _chat(p, "answer", [], [("c1", "city must be a string")])
    p.provider.force_flush()
    (record,) = logs.get_finished_logs()
    session = dict(record.log_record.attributes or {})
    assert (session[A.SESSION_TURNS], session[A.SESSION_ERRORS], session[A.SESSION_REPEATED_FAILURES]) == (2, 2, 1)


# --- calls matched by position: one conversation at a time, never across a broken history ----------------------


def test_conversations_count_positions_apart_and_start_an_epoch_where_a_history_breaks() -> None:
    conversations = Conversations()
    assert conversations.prefix("a", ["u"], 10) == ("@a.0.", "")
    assert conversations.prefix("b", ["u"], 10) == ("@b.0.", "")  # another conversation: positions of its own
    assert conversations.prefix("a", ["u", "c1", "r1"], 10) == ("@a.0.", "")  # extends: the same count
    assert conversations.prefix("a", ["u", "c1", "r1"], 10) == ("@a.0.", "")  # sent again as it was
    # trimmed (the first reply dropped for a note), then extended again: a new epoch, and the one it broke off
    assert conversations.prefix("a", ["u", "note", "c2", "r2"], 10) == ("@a.1.", "@a.0.")
    assert conversations.prefix("a", ["u", "note", "c2", "r2", "c3", "r3"], 10) == ("@a.1.", "")
    assert conversations.prefix("a", ["u", "note", "c2"], 10) == ("@a.2.", "@a.1.")  # shorter: broken too
    assert conversations.prefix("a", ["u", "note", "c2X"], 10) == ("@a.3.", "@a.2.")  # rewritten in place
    assert conversations.prefix("c", ["u"], 2) == ("", "")  # past the bound: no positions at all
    assert conversations.unmatched == 0  # the caller counts what was waiting


_HAYSTACK = ("openinference.instrumentation.haystack", "0.1.46")
_OSLO = '{"city": "Oslo", "unit": "celsius"}'


def _agent_turn(p: Any, agent: Any, name: str, attrs: dict[str, Any]) -> None:
    """One of Haystack's model requests (OpenInference's LLM span) under its ``Agent.run`` span ``agent``."""
    from opentelemetry.trace import set_span_in_context

    tracer = p.provider.get_tracer(*_HAYSTACK)
    tracer.start_span(name, context=set_span_in_context(agent), attributes=attrs).end()


def _population_fails(p: Any, agent: Any, carried: list[tuple[str, bool]], asking: str, answering: str) -> None:
    """A request carrying the replies ``carried`` that asks for ``get_population``, then the one that carries them
    and its failure."""
    _agent_turn(p, agent, asking, _haystack_turn(carried, [("get_population", '{"city": "Oslo"}')]))
    _agent_turn(p, agent, answering, _haystack_turn([*carried, ("ConnectionError('down')", True)]))


def _assert_population_failed(p: Any, asking: str, answering: str) -> None:
    """The replies ``asking`` carried answered nothing; ``answering`` scored the call it made as failed."""
    assert not any(key.startswith("requested.") for key in scores(p.one(asking)))
    answered = scores(p.one(answering))
    assert (answered["requested.0.tool"], answered["requested.0.outcome"]) == ("get_population", "execution_failed")


def test_two_agents_in_one_trace_match_their_calls_by_position_each_in_its_own_conversation() -> None:
    """Two ``Agent.run`` conversations interleaved in one trace (agents running side by side): each reply answers
    its own agent's call. Counted per trace, the second agent's first call took the first's position, and the
    first agent's reply ("sunny") answered the second's ``book_flight``."""
    p = make_pipeline()
    haystack = p.provider.get_tracer(*_HAYSTACK)
    with p.tracer.start_as_current_span("app"):
        first, second = haystack.start_span("Agent.run"), haystack.start_span("Agent.run")
        _agent_turn(p, first, "a1", _haystack_turn([], [("get_weather", _OSLO)]))
        _agent_turn(p, second, "b1", _haystack_turn([], [("book_flight", '{"to": "Oslo"}')]))
        _agent_turn(p, first, "a2", _haystack_turn([("sunny", False)]))
        _agent_turn(p, second, "b2", _haystack_turn([("Tool 'book_flight' not found", True)]))
        second.end()
        first.end()
    a2, b2 = scores(p.one("a2")), scores(p.one("b2"))
    assert (a2["requested.0.tool"], a2["requested.0.outcome"]) == ("get_weather", "success")
    assert (b2["requested.0.tool"], b2["requested.0.outcome"]) == ("book_flight", "malformed_call")
    assert a2["requested.0.call_id"] != b2["requested.0.call_id"]
    root = scores(p.one("app"))
    assert (root["trace.request_scored_calls"], root["trace.unexecuted_calls"]) == (2, 0)
    assert "trace.unmatched_requests" not in root


def test_one_agent_run_twice_continues_its_history_in_a_conversation_of_its_own() -> None:
    """The second run of an agent is given the first run's messages and a follow-up: its first request carries the
    first run's reply, which answers nothing of the second run; the second run's call counts after it."""
    p = make_pipeline()
    haystack = p.provider.get_tracer(*_HAYSTACK)
    with p.tracer.start_as_current_span("app"):
        first = haystack.start_span("Agent.run")
        _agent_turn(p, first, "a1", _haystack_turn([], [("get_weather", _OSLO)]))
        _agent_turn(p, first, "a2", _haystack_turn([("sunny", False)]))
        first.end()
        second = haystack.start_span("Agent.run")
        _population_fails(p, second, [("sunny", False)], "b1", "b2")
        second.end()
    assert scores(p.one("a2"))["requested.0.outcome"] == "success"
    _assert_population_failed(p, "b1", "b2")
    root = scores(p.one("app"))
    assert (root["trace.request_scored_calls"], root["trace.unexecuted_calls"]) == (2, 0)
    assert "trace.unmatched_requests" not in root


def test_a_trimmed_history_is_not_matched_by_position_across_the_break() -> None:
    """The third request's history does not extend the second's (its reply replaced): the second's call, waiting
    there, is unmatched, counted on the root and in the coverage metric, never scored with the third request's
    reply ("rain", by position the first); the third request's own call is matched within the new epoch."""
    p = make_pipeline()
    haystack = p.provider.get_tracer(*_HAYSTACK)
    with p.tracer.start_as_current_span("app"):
        agent = haystack.start_span("Agent.run")
        _agent_turn(p, agent, "t1", _haystack_turn([], [("get_weather", _OSLO)]))
        _agent_turn(p, agent, "t2", _haystack_turn([("sunny", False)], [("get_weather", _OSLO)]))
        _population_fails(p, agent, [("rain", False)], "t3", "t4")
        agent.end()
    assert scores(p.one("t2"))["requested.0.outcome"] == "success"
    _assert_population_failed(p, "t3", "t4")
    root = scores(p.one("app"))
    assert (root["trace.request_scored_calls"], root["trace.unmatched_requests"]) == (2, 1)
    assert root["trace.unexecuted_calls"] == 1
    suspect = p.metric_points("toolcall_eval.coverage.suspect")
    assert [(labels["reason"], labels["scope"], n) for labels, n in suspect] == [
        ("position_unmatched", "openinference.instrumentation.haystack", 1)
    ]


@pytest.mark.parametrize("fixture", ["haystack-two_agents", "haystack-compacted"])
def test_harvest_and_eval_agree_with_the_processor_on_conversations_matched_by_position(
    tmp_path: Path, fixture: str
) -> None:
    """The recorded two-agent and compacted Haystack traces: harvest reads each call's arguments and reply under
    the id the processor gave it (its conversation and epoch), and eval gives every call its online verdict."""
    from otel_toolcall_eval.cli import main
    from otel_toolcall_eval.dataset import read_cases
    from otel_toolcall_eval.replay import replay_spans
    from otel_toolcall_eval.replay.otlp import encode_json
    from tests.framework_scenario import KEYS, recorded, requested_scores
    from tests.helpers import harvested_offline

    spans = replay_spans(recorded(fixture)).spans
    online = requested_scores(spans)
    source, cases, runs = tmp_path / "traces.json", tmp_path / "cases.jsonl", tmp_path / "runs.jsonl"
    source.write_text(json.dumps(encode_json(list(spans))))
    command = ["harvest", str(source), "--where", "toolcall_eval.trace.correct = false", "--out", str(cases)]
    assert main([*command, "--runs-out", str(runs)]) == 0
    (case,) = read_cases(cases)
    (line,) = [json.loads(text) for text in runs.read_text().splitlines()]
    assert [c["name"] for c in line["tool_calls"]] == [name for name, _ in online]
    assert all(c["arguments"] is not None for c in line["tool_calls"])  # each found under its id
    rows, _ = harvested_offline(case, line)
    offline = [{key: row[key.removeprefix("toolcall_eval.")] for key in KEYS} for row in rows]
    assert offline == [scores for _, scores in online]
