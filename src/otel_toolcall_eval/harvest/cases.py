"""One trace to one draft dataset row.

``user_input`` and ``message_history`` come from the first chat span's input messages (assistant tool calls
and tool results kept), ``available_tools`` from the definitions the model saw, and the calls the agent
actually made become a *draft* ``expected_tool_calls``, marked for labelling in ``notes``. Only calls that
succeeded with schema-valid arguments are drafted as expected; the others are left out of the draft and named
in the notes with why: a tool that was not offered, a must-not-call tool, arguments that did not parse or
break the schema (the processor's verdict, and the harvested ``available_tools`` schema, which ``dataset
validate`` checks the row against), a call that failed (its outcome). Drafting a failure as ground truth
would turn the production failure into the expected answer.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import format_trace_id

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.checks.outcome import REPLY_ERROR
from otel_toolcall_eval.checks.parse import parse_arguments
from otel_toolcall_eval.config import EvalConfig, Limits
from otel_toolcall_eval.config.judge import Redaction
from otel_toolcall_eval.conventions import ConventionRegistry
from otel_toolcall_eval.conventions.llm_spans import (
    DefinitionCache,
    conversation_prefix,
    input_messages,
    is_llm_span,
    requested_calls,
    span_tool_replies,
    tool_definitions,
)
from otel_toolcall_eval.conventions.shapes import shape_for
from otel_toolcall_eval.dataset.expected_args import ToolSchemas, call_errors
from otel_toolcall_eval.dataset.models import DatasetCase, ExpectedCall
from otel_toolcall_eval.engine.requested import Conversations, requested_call_record
from otel_toolcall_eval.engine.tally import records_output
from otel_toolcall_eval.judge.questions import MAX_ERROR_MESSAGE_CHARS, Redactor
from otel_toolcall_eval.records import ErrorEvidence, ToolCallRecord

_SCHEMAS = ToolSchemas()  # bounded; one compile per distinct tool list
# conversations matched by position per trace: the processor's default bound (``limits.max_calls_per_trace``)
_MAX_CONVERSATIONS = Limits().max_calls_per_trace


def case_id(trace_id: int) -> str:
    """Stable: re-harvesting a trace gives the same id, so it never duplicates a row."""
    return "trace-" + format_trace_id(trace_id)


def case_from_trace(
    spans: Sequence[ReadableSpan], conventions: ConventionRegistry, config: EvalConfig, cache: DefinitionCache
) -> DatasetCase:
    ordered = sorted(spans, key=lambda s: s.start_time or 0)
    trace_id = next(s.context.trace_id for s in ordered if s.context is not None)
    tools: dict[str, dict[str, Any]] = {}
    messages: list[dict[str, Any]] = []
    for span in ordered:
        attrs = span.attributes or {}
        if not is_llm_span(attrs):
            continue
        for d in tool_definitions(attrs, cache, shape_for(span.instrumentation_scope)):
            tools.setdefault(d.name, {"name": d.name, "description": d.description, "parameters": d.parameters})
        if not messages:
            messages = input_messages(attrs)
    user_index = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    user_input = ""
    if user_index is not None:
        content = messages[user_index].get("content")
        user_input = content if isinstance(content, str) else ("" if content is None else str(content))
        history = messages[:user_index]
    else:
        history = messages

    forbidden = set(config.policies.must_not_call)
    expected: list[ExpectedCall] = []
    left_out: list[str] = []
    validators = _SCHEMAS.of(list(tools.values()))
    for attrs, record in _recorded_calls(ordered, conventions):
        if tools and record.name not in tools:
            left_out.append(f"{record.name} (not offered)")
            continue
        if record.name in forbidden:
            left_out.append(f"{record.name} (must not call)")
            continue
        parsed = parse_arguments(record.raw_arguments, max_bytes=config.limits.max_argument_bytes)
        if (parsed.value is None and parsed.status.parsed is False) or attrs.get(A.PARSE_OK) is False:
            left_out.append(f"{record.name} (arguments did not parse)")
            continue
        batch = attrs.get(A.BATCH)
        call = ExpectedCall(name=record.name, args=parsed.value or {}, batch=batch if isinstance(batch, int) else None)
        validator = validators.get(record.name)
        if attrs.get(A.SCHEMA_VALID) is False or (validator is not None and call_errors(call, validator)):
            left_out.append(f"{record.name} (arguments fail the schema)")
            continue
        outcome = attrs.get(A.OUTCOME)
        if outcome is not None and outcome != "success":
            left_out.append(f"{record.name} (failed: {outcome})")
            continue
        expected.append(call)

    findings = _findings(ordered)
    notes = [
        f"DRAFT harvested from trace {format_trace_id(trace_id)}: expected_tool_calls are the calls the agent "
        "made that succeeded with schema-valid arguments; correct them, set difficulty, then remove this line.",
    ]
    if findings:
        notes.append("findings: " + "; ".join(findings))
    if left_out:
        notes.append("left out of the draft: " + ", ".join(left_out))
        if not expected:
            notes.append("no call was drafted: expected_no_tool is a placeholder; list the calls that were needed")
    if not messages:
        notes.append("no input messages recorded (content capture off?): fill in user_input")
    return DatasetCase(
        id=case_id(trace_id),
        user_input=user_input,
        message_history=history,
        available_tools=list(tools.values()),
        expected_tool_calls=expected,
        expected_no_tool=not expected,
        must_not_call=sorted(forbidden - {c.name for c in expected}),
        source_trace_id=format_trace_id(trace_id),
        notes="\n".join(notes),
    )


MAX_RESULT_CHARS = 4096  # a call's result in a run line: enough for every check that reads it (they read 512)


def run_line(
    spans: Sequence[ReadableSpan], conventions: ConventionRegistry, redact: Redactor | None = None
) -> dict[str, Any]:
    """What the agent did in the trace, as a run-file line for ``eval``: every call as recorded, with what the trace
    recorded of its execution, so ``eval`` gives the processor's verdicts (repeated failures, recovery classes,
    prerequisites that failed, cost columns).

    Per call: ``error`` (the span's status, exception, ``error.type`` and rejected-input evidence; texts cut to
    512 characters after redaction with the judge's ``redact`` rules), ``result`` (when recorded; redacted, cut to
    ``MAX_RESULT_CHARS``), ``latency_ms``. Per line: ``latency_ms`` (the trace's span), ``tokens`` (the model
    calls' usage, when recorded) and ``answered`` (the trace ends with a model turn that answered without a
    tool: what follows a failed call last in the trace, ``handed_back`` online too). Evaluated against the
    harvested (and then corrected) row, it reproduces the production failure: the red gate a fix must turn green.
    """
    redact = redact or Redactor(Redaction())
    ordered = sorted(spans, key=lambda s: s.start_time or 0)
    trace_id = next(s.context.trace_id for s in ordered if s.context is not None)
    calls = []
    last_call_end = 0
    for attrs, record in _recorded_calls(ordered, conventions):
        call: dict[str, Any] = {"name": record.name, "arguments": record.raw_arguments}
        batch = attrs.get(A.BATCH)
        if isinstance(batch, int):
            call["batch"] = batch
        error = _error(record.error, redact)
        if error is not None:
            call["error"] = error
        if record.result_recorded:
            call["result"] = _result(record.result, redact)
        if record.start_ns is not None and record.end_ns is not None:
            call["latency_ms"] = round((record.end_ns - record.start_ns) / 1e6, 3)
        last_call_end = max(last_call_end, record.end_ns or 0)
        calls.append(call)
    line: dict[str, Any] = {"id": case_id(trace_id), "tool_calls": calls}
    starts = [s.start_time for s in ordered if s.start_time is not None]
    ends = [s.end_time for s in ordered if s.end_time is not None]
    if starts and ends:
        line["latency_ms"] = round((max(ends) - min(starts)) / 1e6, 3)
    tokens = {}
    for span in ordered:
        attrs = span.attributes or {}
        for key, name in ((A.TRACE_INPUT_TOKENS, "input"), (A.TRACE_OUTPUT_TOKENS, "output")):
            value = attrs.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                tokens[name] = value
    if tokens:
        line["tokens"] = tokens
    line["answered"] = _answered(ordered, last_call_end)
    return line


def _answered(spans: Sequence[ReadableSpan], last_call_end: int) -> bool:
    """Does a model turn that recorded its output, with no tool requested, end after the last call? (The online
    recovery's hand-back: a turn that recorded nothing is no evidence of an answer.)"""
    for span in spans:
        attrs = span.attributes or {}
        if (span.end_time or 0) < last_call_end or not is_llm_span(attrs) or not records_output(attrs):
            continue
        if not requested_calls(attrs):
            return True
    return False


def _error(error: ErrorEvidence, redact: Redactor) -> dict[str, Any] | None:
    """A call's recorded failure for its run line (``offline.runs`` reads it back into the same evidence)."""
    if not error.any:
        return None
    out: dict[str, Any] = {}
    if error.exception_type:
        out["type"] = error.exception_type[:MAX_ERROR_MESSAGE_CHARS]
    if error.exception_message:
        out["message"] = redact.cut(error.exception_message, MAX_ERROR_MESSAGE_CHARS)
    if error.status_error:
        description = error.status_description
        out["status"] = redact.cut(description, MAX_ERROR_MESSAGE_CHARS) if description else True
    if error.error_type:
        out["error_type"] = error.error_type[:MAX_ERROR_MESSAGE_CHARS]
    if error.retry_cause:
        out["retry"] = redact.cut(error.retry_cause, MAX_ERROR_MESSAGE_CHARS)
    return out


def _result(value: Any, redact: Redactor) -> Any:
    """A recorded result, redacted and cut: a string as text, anything else as itself while its JSON is short."""
    if isinstance(value, str):
        return redact.cut(value, MAX_RESULT_CHARS)
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        return None
    if len(text) <= MAX_RESULT_CHARS and redact(text) == text:
        return value
    return redact.cut(text, MAX_RESULT_CHARS)


def _recorded_calls(
    spans: Sequence[ReadableSpan], conventions: ConventionRegistry
) -> Iterator[tuple[Mapping[str, Any], ToolCallRecord]]:
    """Each tool call of the trace once, with its span's attributes: a span that only wraps a call its child span
    records (``toolcall_eval.same_call_as``, a second instrumentation) is skipped. A call that ran on no tool span
    and was scored from the requests (``toolcall_eval.requested.<N>.*`` on the model span whose input answered it)
    comes as the record ``engine.requested`` built online (the arguments the model sent, the reply it got back) with
    its scores under their tool-span names. A call whose span read as a success but whose reply said it failed
    (``trace.late_outcome.*`` on the root: its span cannot record the error) comes with that reply and its flag,
    and the outcome the root gives it."""
    sent: dict[str, Any] = {}  # call id -> the arguments the model sent, from the model spans so far
    names: dict[str, str] = {}  # call id -> the tool the model asked for, from the model spans so far
    conversations = Conversations()  # the ids of calls matched by position, as the processor gave them
    late = _late_outcomes(spans)
    for span in spans:
        attrs = span.attributes or {}
        if A.SAME_CALL_AS in attrs:
            continue
        convention = conventions.recognise(span, attrs)
        record = convention.extract(span, attrs) if convention is not None else None
        if record is not None:
            if sent:
                _borrow(record, sent, names)
            step = attrs.get(A.STEP)
            failed = late.get(step) if late and isinstance(step, int) else None
            if failed is not None:
                record.error, record.result, record.result_recorded = REPLY_ERROR, failed[1], True
                attrs = {**attrs, A.OUTCOME: failed[0]}
            yield attrs, record
        elif is_llm_span(attrs):
            shape = shape_for(span.instrumentation_scope)
            positional, _ = conversation_prefix(conversations, span, attrs, shape, _MAX_CONVERSATIONS)
            yield from _requested(span, attrs, sent, positional)
            for call_id, name in requested_calls(attrs, sent, positional):
                if call_id is not None and name is not None:
                    names[call_id] = name


def _borrow(record: ToolCallRecord, sent: dict[str, Any], names: dict[str, str]) -> None:
    """The arguments the model sent for a tool span's call that records none, as the processor borrows them
    (``online.call``): by its call id (claimed either way), else, when no request named its id, those of the one
    request of its tool's name not claimed yet (the MCP SDK's spans carry a JSON-RPC id). So ``eval`` parses and
    validates what the processor did."""
    call_id = record.call_id
    arguments = sent.pop(call_id, None) if call_id is not None else None
    if record.raw_arguments is not None:
        return
    if arguments is None and (call_id is None or call_id not in names):
        pending = [i for i, name in names.items() if name == record.name and i in sent]
        if len(pending) == 1:
            arguments = sent.pop(pending[0])
    record.raw_arguments = arguments


def _late_outcomes(spans: Sequence[ReadableSpan]) -> dict[int, tuple[str, str]]:
    """Step -> (outcome, reply) of the calls the root says failed by their reply (``checks.late_outcome``)."""
    for span in spans:
        attrs = span.attributes or {}
        steps = _sequence(attrs.get(A.TRACE_LATE_OUTCOME_FAILED_STEPS))
        outcomes = _sequence(attrs.get(A.TRACE_LATE_OUTCOME_OUTCOMES))
        replies = _sequence(attrs.get(A.TRACE_LATE_OUTCOME_REPLIES))
        if steps and len(steps) == len(outcomes) == len(replies):
            return {
                step: (str(outcome), str(reply))
                for step, outcome, reply in zip(steps, outcomes, replies, strict=True)
                if isinstance(step, int)
            }
    return {}


def _sequence(value: Any) -> Sequence[Any]:
    return value if isinstance(value, (list, tuple)) else ()


def _requested(
    span: ReadableSpan, attrs: Mapping[str, Any], sent: dict[str, Any], positional: str
) -> Iterator[tuple[Mapping[str, Any], ToolCallRecord]]:
    """The calls scored from the requests that this model span's input answered, in their order."""
    calls: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(A.REQUESTED_PREFIX):
            index, _, field = key.removeprefix(A.REQUESTED_PREFIX).partition(".")
            if index.isdigit():
                calls.setdefault(int(index), {})[A.PREFIX + field] = value
    if not calls:
        return
    replies = {r.call_id: r for r in span_tool_replies(span, attrs, positional)}
    for _, scored in sorted(calls.items()):
        call_id, tool = scored.get(A.PREFIX + "call_id"), scored.get(A.PREFIX + "tool")
        if isinstance(call_id, str) and isinstance(tool, str):
            yield scored, requested_call_record(call_id, tool, sent.get(call_id), replies.get(call_id))


def _findings(spans: Sequence[ReadableSpan]) -> list[str]:
    out = []
    for span in spans:
        attrs = span.attributes or {}
        if A.TRACE_COMPOSITE_OK in attrs:
            out.append("composite_ok=" + str(attrs[A.TRACE_COMPOSITE_OK]))
        outcome = attrs.get(A.OUTCOME)
        name = str(attrs.get(A.GEN_AI_TOOL_NAME) or attrs.get(A.OPENINFERENCE_TOOL_NAME) or span.name)
        if outcome not in (None, "success"):
            out.append(f"{name}: {outcome}")
        violations = attrs.get(A.VIOLATIONS)
        for v in violations if isinstance(violations, (list, tuple)) else ():
            out.append(f"{name}: {v}")
    return out
