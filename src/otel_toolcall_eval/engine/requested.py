"""Score a call the model requested that ran on no tool span, from the requests alone.

Some instrumentations record tool activity only in model requests: the Anthropic SDK's tool runner under
OpenInference's or OpenLLMetry's instrumentation of the client runs its tools on no span. A careful reader of such a
trace still scores each requested call: its tool name against the definitions the model was offered, its arguments
against the tool's schema, and, once the next request carries the call's result back, its outcome (the request's
error flag where recorded, an unknown-tool reply, a rejection of the input). This is that reading, as the engine's
one scorer applied to a record built from the request and the reply, so a call scored here is scored by exactly
the checks a tool span's call is (``engine.call.Scorer.score``), counted in the same history (the root's verdict
counts it). The processor's model-turn stage (``online.turn``) scores it with ``engine.tally.score_and_count``, as
the call stage does a tool span's call, and replay through the processor; the record's convention,
``REQUEST_CONVENTION``, marks it as coming from the request.

Where the requests and replies carry no call ids (a shape row's ``positional_calls``: Haystack), calls and replies are
matched by position, the k-th tool message of a conversation answering the k-th call it requested; ``Conversations``
keeps that to one conversation at a time and stops it where a history was trimmed or rewritten.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from otel_toolcall_eval.checks.outcome import REPLY_ERROR
from otel_toolcall_eval.records import (
    NO_ERROR,
    ToolCallRecord,
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


class Conversations:
    """The conversations of one trace whose calls carry no ids, each keyed by the span its requests are children of
    (a shape row's ``positional_calls``: Haystack's ``Agent.run``), and the id prefix of each request's positions.

    Position matching holds while each request sends the whole conversation so far, so that the k-th tool message
    answers the k-th call. Two conversations in one trace (two agents, an agent run twice, one agent calling another)
    count their positions apart: their ids differ by the conversation's key. A request whose messages do not start
    with the previous request's of its conversation (a trimmed history, such as Haystack's ``CompactionHook``, or one
    rewritten) breaks the count: its positions start an epoch of their own, so no reply after the break answers a
    call from before it; the caller counts the calls still waiting there as unmatched (``unmatched``), never scored
    with another call's reply. Online (``online.turn``) and harvest (``harvest.cases``) run one of these per trace
    over its model spans in order, so both give a call the same id.

    Bounded: at most ``max_entries`` conversations per trace (further ones get no positions: their calls stay
    unmatched); per conversation an epoch, a count and a 16-byte digest of the previous request's messages.
    """

    __slots__ = ("_seen", "unmatched")

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, int, bytes]] = {}  # key -> (epoch, messages, digest of those messages)
        self.unmatched = 0  # calls left waiting at a break (counted by the caller, who knows which were waiting)

    def prefix(self, key: str, messages: Sequence[str], max_entries: int) -> tuple[str, str]:
        """The id prefix of this request's positions in the conversation ``key`` (``messages``: a text per message of
        the request, what identifies it), and the prefix of the epoch this request broke off from ("" when it
        extends the previous request, or is the first). ("", "") past ``max_entries`` conversations."""
        seen = self._seen.get(key)
        if seen is None and len(self._seen) >= max_entries:
            return "", ""
        epoch, count, before = seen if seen is not None else (0, 0, b"")
        head, whole = _digests(messages, count)
        now = epoch if seen is None or head == before else epoch + 1
        self._seen[key] = (now, len(messages), whole)
        return POSITIONAL_ID + f"{key}.{now}.", "" if now == epoch else POSITIONAL_ID + f"{key}.{epoch}."


POSITIONAL_ID: Final = "@"  # leads the id of a call matched by position: ``@<conversation>.<epoch>.<position>``


def _digests(messages: Sequence[str], count: int) -> tuple[bytes | None, bytes]:
    """The digest of the first ``count`` messages (None when there are fewer) and of them all, in one pass."""
    h = hashlib.blake2b(digest_size=16)
    head = h.digest() if count == 0 else None
    for i, text in enumerate(messages, 1):
        data = text.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
        if i == count:
            head = h.digest()
    return head, h.digest()
