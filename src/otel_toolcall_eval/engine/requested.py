"""Score a call the model requested that ran on no tool span, from the requests alone.

Some instrumentations record tool activity only in model requests: the Anthropic SDK's tool runner under
OpenInference's or OpenLLMetry's instrumentation of the client runs its tools on no span. A careful reader of such a
trace still scores each requested call: its tool name against the definitions the model was offered, its arguments
against the tool's schema, and, once the next request carries the call's result back, its outcome (the request's
error flag where recorded, an unknown-tool reply, a rejection of the input). This is that reading, as the engine's
one scorer applied to a record built from the request and the reply, so a call scored here is scored by exactly
the checks a tool span's call is (``engine.call.Scorer.score``), counted in the same history (the root's verdict
counts it). The processor calls it from its model-turn handling (``online.pipeline``), and replay through the
processor; the record's convention, ``REQUEST_CONVENTION``, marks it as coming from the request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from otel_toolcall_eval.checks.outcome import REPLY_ERROR
from otel_toolcall_eval.engine.call import Scorer
from otel_toolcall_eval.records import (
    NO_ERROR,
    CallHistory,
    CallScore,
    ToolCallRecord,
    ToolDefinition,
    ToolReply,
)

REQUEST_CONVENTION: Final = "request"  # the convention of a call scored from the requests (no tool span)


def requested_call_record(
    call_id: str, name: str, arguments: Any, reply: ToolReply | None, trace_id: str = ""
) -> ToolCallRecord:
    """The call as the requests recorded it: its arguments from the request that asked for it (None: not
    recorded), its result and error flag from the reply the next request carried (None: no reply seen yet)."""
    record = ToolCallRecord(name, raw_arguments=arguments, call_id=call_id, convention=REQUEST_CONVENTION)
    record.trace_id = trace_id
    if reply is not None:
        record.result = reply.content
        record.result_recorded = reply.content is not None
        record.error = REPLY_ERROR if reply.is_error else NO_ERROR
    return record


def score_requested_call(
    scorer: Scorer,
    history: CallHistory,
    record: ToolCallRecord,
    *,
    trace_tools: dict[str, ToolDefinition] | None,
    batch: int | None,
) -> CallScore:
    """``Scorer.score`` of a call built by ``requested_call_record``: every per-call check, added to ``history``."""
    return scorer.score(record, history, trace_tools=trace_tools, batch=batch)


def answered_requests(replies: Sequence[ToolReply], pending: Mapping[str, str]) -> list[tuple[ToolReply, str]]:
    """The replies that answer a request still waiting (``pending``: call id -> tool name), each with its tool's
    name, in the reply's order; a call id answered twice in one request counts once."""
    out: list[tuple[ToolReply, str]] = []
    seen: set[str] = set()
    for reply in replies:
        name = pending.get(reply.call_id)
        if name is not None and reply.call_id not in seen:
            seen.add(reply.call_id)
            out.append((reply, name))
    return out
