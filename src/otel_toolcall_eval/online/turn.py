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
    requested_calls,
    tool_definitions,
    unknown_tool_replies,
)
from otel_toolcall_eval.online.contain import Contained
from otel_toolcall_eval.online.held_spans import HeldSpans, decide
from otel_toolcall_eval.online.metrics import EvalMetrics
from otel_toolcall_eval.online.trace_state import TraceState
from otel_toolcall_eval.online.trace_stats import Decisions, new_trace_stats

_NOT_TURNS: Final = frozenset({"invoke_agent", "create_agent"})


class TurnStage:
    """Observes LLM spans; built once per pipeline from the config."""

    def __init__(
        self,
        definitions: DefinitionCache,
        limits: Limits,
        prices: Mapping[str, Price],
        metrics: EvalMetrics,
        held: HeldSpans | None,
        contained: Contained,
    ) -> None:
        self.definitions = definitions
        self._max_calls = limits.max_calls_per_trace
        self._max_argument_bytes = limits.max_argument_bytes
        self._prices = prices
        self.metrics = metrics
        self.held = held
        self.contained = contained

    def observe(self, state: TraceState, trace_id: int, attrs: dict[str, Any], is_root: bool) -> None:
        """One LLM span of the trace (``is_root``: the trace's root, an instrumented client's own span)."""
        definitions = tool_definitions(attrs, self.definitions)
        op = attrs.get(A.GEN_AI_OPERATION_NAME)
        not_turn = op in _NOT_TURNS or attrs.get(A.OPENINFERENCE_SPAN_KIND) == "AGENT"
        arguments: dict[str, Any] = {}
        calls = [] if not_turn else requested_calls(attrs, arguments)
        max_calls = self._max_calls
        decided: Decisions | None = None
        with state.lock:
            if state.finished:
                self.metrics.record_late()
            state.genai = True
            if definitions:
                state.add_tools(definitions)
                # a model turn inside an agent's trace that was offered tools decided whether to call one; an agent's
                # creation, or an instrumented client's own root span, decided nothing
                state.offered = state.offered or (op != "create_agent" and not is_root)
            if state.call_names:  # requests no tool span answered yet: did the framework reply "unknown tool"?
                state.note_unknown_replies(unknown_tool_replies(attrs))
            response_id = None if not_turn else attrs.get(A.GEN_AI_RESPONSE_ID)
            if response_id is not None and state.seen_response(str(response_id), max_calls):
                not_turn, calls = True, []  # a second span of a request counted already: its tools only
            if not not_turn:  # a model call: its tokens, cost, and a reaction to a failed call (issue 18)
                stats = state.stats
                if stats is None:
                    stats = state.stats = new_trace_stats()
                decided = stats.on_model_call(attrs, calls, self._prices)
            if calls:
                state.requested = state.requested or not is_root
                state.add_turn(calls, max_calls)
                if arguments:
                    state.add_requested_arguments(arguments, max_calls, self._max_argument_bytes)
        if decided:  # the turn reacted to failed calls: their held spans go, with their class
            decide(self.held, trace_id, decided, self.contained)
