"""Observe a model turn: an LLM span's tool definitions, the calls it requested and its tokens, into its trace's
state (``trace_state``); a turn that reacted to failed calls decides their recovery class, and their held spans go.

What the turn means for the features (the judge reads the user's request and the reaction to a failure) is the
pipeline's ``on_model_turn`` hooks' business, not this stage's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.checks.cost import Price
from otel_toolcall_eval.config import Limits
from otel_toolcall_eval.conventions.llm_spans import (
    DefinitionCache,
    conversation_of,
    requested_calls,
    span_tool_replies,
    tool_definitions,
    tool_replies,
    unknown_tool_replies,
)
from otel_toolcall_eval.conventions.shapes import Shape, shape_for
from otel_toolcall_eval.engine import Scorer
from otel_toolcall_eval.engine.requested import (
    REQUEST_CONVENTION,
    Conversations,
    answered_requests,
    requested_call_record,
)
from otel_toolcall_eval.engine.tally import Decisions, new_trace_stats, score_and_count
from otel_toolcall_eval.online.call import call_attributes, claim_request
from otel_toolcall_eval.online.contain import Contained
from otel_toolcall_eval.online.enrich import requested_keys
from otel_toolcall_eval.online.held_spans import HeldSpans, answer, decide
from otel_toolcall_eval.online.matching import Requests
from otel_toolcall_eval.online.metrics import EvalMetrics
from otel_toolcall_eval.online.trace_state import TraceState
from otel_toolcall_eval.records import CallScore, ToolCallRecord, ToolDefinition

_NOT_TURNS: Final = frozenset({"invoke_agent", "create_agent"})


class RequestScored:
    """The calls scored from the requests that one model span's input answered: the attributes the span's copy
    carries (``toolcall_eval.requested.<N>.*``), and each call (N, its record, its score) with the trace's tools
    then (a snapshot that never changes), for the pipeline's ``on_call_scored`` hooks (the judge, sessions)."""

    __slots__ = ("calls", "extra", "tools")

    def __init__(
        self,
        extra: dict[str, Any],
        calls: list[tuple[int, ToolCallRecord, CallScore]],
        tools: Mapping[str, ToolDefinition] | None,
    ) -> None:
        self.extra = extra
        self.calls = calls
        self.tools = tools


class TurnStage:
    """Observes LLM spans; built once per pipeline from the config.

    In a trace whose tool activity is only in model requests (no tool span ran: the Anthropic SDK's tool runner under
    an instrumentation of the model client only), a turn whose input carries the results of calls requested earlier
    is the evidence of those calls: each is scored from the requests (``engine.requested``) here, its scores written
    on this span (``toolcall_eval.requested.<N>.*``), counted in the trace's history and stats.
    """

    def __init__(
        self,
        definitions: DefinitionCache,
        limits: Limits,
        prices: Mapping[str, Price],
        metrics: EvalMetrics,
        held: HeldSpans | None,
        contained: Contained,
        scorer: Scorer | None = None,
    ) -> None:
        self.definitions = definitions
        self.scorer = scorer if scorer is not None else Scorer()
        self._max_errors = limits.max_schema_errors
        self._max_length = limits.max_attribute_length
        self._max_calls = limits.max_calls_per_trace
        self._max_argument_bytes = limits.max_argument_bytes
        self._prices = prices
        self.metrics = metrics
        self.held = held
        self.contained = contained

    def observe(
        self, state: TraceState, trace_id: int, attrs: dict[str, Any], is_root: bool, span: Any = None
    ) -> RequestScored | None:
        """One LLM span of the trace (``is_root``: the trace's root, an instrumented client's own span). Returns the
        calls scored from the requests that this span's input answered (None: none)."""
        shape = shape_for(getattr(span, "instrumentation_scope", None))  # where its scope records what it does
        definitions = tool_definitions(attrs, self.definitions, shape)
        op = attrs.get(A.GEN_AI_OPERATION_NAME)
        not_turn = op in _NOT_TURNS or attrs.get(A.OPENINFERENCE_SPAN_KIND) == "AGENT"
        if shape is not None and not shape.is_request(getattr(span, "name", "")):
            not_turn = True  # a step its instrumentation marks as a model span (its row says which)
        arguments: dict[str, Any] = {}
        positional = ""
        if shape is not None and shape.positional_calls:  # its calls carry no ids (Haystack); as harvest reads it
            positional = self._positions(state, span, attrs, shape)
        calls = [] if not_turn else requested_calls(attrs, arguments, positional)
        max_calls = self._max_calls
        decided: Decisions | None = None
        answered: list[tuple[ToolCallRecord, CallScore]] = []
        read: list[tuple[int, Any]] | None = None  # waiting calls whose replies this span carries
        with state.lock:
            if state.finished:
                self.metrics.record_late()
            state.genai = True
            if definitions:
                state.add_tools(definitions)
                if state.waiting:  # calls scored before their schema came: validated now (checks.late_schema)
                    state.validate_waiting(self.scorer.cache, self._max_errors, self._max_length)
                # a model turn inside an agent's trace that was offered tools decided whether to call one; an agent's
                # creation, or an instrumented client's own root span, decided nothing
                state.offered = state.offered or (op != "create_agent" and not is_root)
            if state.awaiting_reply:  # calls whose spans cannot record an error: their replies (checks.late_outcome)
                read = state.read_awaited_replies(tool_replies(attrs), self.scorer.input_error_types, self._max_length)
            requests = state.requests
            if requests is not None and requests.call_names:
                # requests no tool span answered yet: did the framework reply "unknown tool"?
                requests.note_unknown_replies(unknown_tool_replies(attrs))
                # a request no tool span claimed (none ran, or none for this call): its reply is the evidence
                decided = self._score_answered(state, requests, attrs, span, answered, positional)
            response_id = None if not_turn else attrs.get(A.GEN_AI_RESPONSE_ID)
            if response_id is not None and state.seen_response(str(response_id), max_calls):
                not_turn, calls = True, []  # a second span of a request counted already: its tools only
            if not not_turn:  # a model call: its tokens, cost, and a reaction to a failed call (issue 18)
                stats = state.stats
                if stats is None:
                    stats = state.stats = new_trace_stats()
                turn = stats.on_model_call(attrs, calls, self._prices)
                decided = turn if not decided else decided + (turn or [])
            if calls:
                state.requested = state.requested or not is_root
                if requests is None:
                    requests = state.requests = Requests()
                requests.add_turn(calls, max_calls)
                if arguments:
                    requests.add_requested_arguments(arguments, max_calls, self._max_argument_bytes)
            tools = state.tools
        if read:  # their held spans go, with the outcome their replies gave
            answer(self.held, state, trace_id, read, self.contained)
        if decided:  # the turn reacted to failed calls: their held spans go, with their class
            decide(self.held, state, trace_id, decided, self.contained)
        if not answered:
            return None
        extra: dict[str, Any] = {}
        scored: list[tuple[int, ToolCallRecord, CallScore]] = []
        counts = state.trace_counts(self.metrics, span) if span is not None else None  # outside the state's lock
        for index, (record, score) in enumerate(answered):
            self.metrics.record_call(score, REQUEST_CONVENTION, record.result_recorded, counts)
            extra.update(requested_call_attributes(index, record.call_id or "", score, REQUEST_CONVENTION))
            scored.append((index, record, score))
        return RequestScored(extra, scored, tools)

    def _positions(self, state: TraceState, span: Any, attrs: dict[str, Any], shape: Shape) -> str:
        """The id prefix of this request's positions in its conversation (its scope's row matches calls by position:
        ``engine.requested.Conversations``). Where its history does not extend the previous request's, the calls
        still waiting from before cannot be matched: counted (``trace.unmatched_requests``, the coverage metric)."""
        found = conversation_of(span, attrs, shape)  # outside the trace's lock: a read of the span (up to 1 MiB)
        if found is None:
            return ""
        with state.lock:
            conversations = state.conversations
            if conversations is None:
                conversations = state.conversations = Conversations()
            prefix, broken = conversations.prefix(*found, self._max_calls)
            requests = state.requests
            lost = 0
            if broken and requests is not None:
                lost = sum(1 for call_id in requests.call_names if call_id.startswith(broken))
                conversations.unmatched += lost
        if lost:
            self.metrics.record_unmatched(REQUEST_CONVENTION, shape.scope, lost)
        return prefix

    def _score_answered(
        self,
        state: TraceState,
        requests: Requests,
        attrs: dict[str, Any],
        span: Any,
        out: list[tuple[ToolCallRecord, CallScore]],
        positional: str = "",
    ) -> Decisions | None:
        """The waiting requests this span's input answers, each scored from its request and reply, claimed (no
        longer unexecuted) and counted in the trace's history and stats (under the state's lock); appended to
        ``out`` as (record, score); the record names the model span that carries its scores (what the judge's
        verdict links to). Returns the recoveries they decided."""
        replies = span_tool_replies(span, attrs, positional)
        answered = answered_requests(replies, requests.call_names) if replies else []
        stopped = state.prevented
        if stopped is not None and answered:  # the guard's reply to a call it stopped: no call that ran
            answered = [(r, n) for r, n in answered if r.call_id not in stopped.call_ids and n not in stopped.tools]
        if not answered:
            return None
        decided: Decisions = []
        stats = state.stats
        if stats is None:
            stats = state.stats = new_trace_stats()
        context = getattr(span, "context", None)
        trace_id = f"{context.trace_id:032x}" if context else ""
        span_id = context.span_id if context else 0
        for reply, name in answered:
            sent = requests.call_arguments.pop(reply.call_id, None) if requests.call_arguments else None
            batch = claim_request(requests, reply.call_id, name)
            record = requested_call_record(reply.call_id, name, sent, reply, trace_id)
            record.span_id = f"{span_id:016x}"
            # the engine's one scorer, as for a tool span's call (``engine.requested``), counted in the trace's numbers
            score, now = score_and_count(self.scorer, record, state.history, stats, self._max_calls, state.tools, batch)
            state.note_request_scored(reply.call_id, name, span_id, self._max_calls)
            decided.extend(now or ())
            out.append((record, score))
        return decided or None


def requested_call_attributes(index: int, call_id: str, score: CallScore, convention: str) -> dict[str, Any]:
    """The scores of a call scored from the requests, as ``toolcall_eval.requested.<index>.*`` on a model span."""
    prefix = f"{A.REQUESTED_PREFIX}{index}."
    out: dict[str, Any] = {prefix + "tool": score.name, prefix + "call_id": call_id}
    return requested_keys(index, call_attributes(score, convention), out)
