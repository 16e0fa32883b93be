"""Finish a trace: its verdict (``checks.verdict``) and numbers (``trace_stats``) from its state, counted in the
metrics, returned as the root's attributes and a ``hooks.TraceFinished`` event for the features.

A trace finishes when its root ends (or its held root's grace window does), or unfinished when its state is
dropped (evicted, expired, a segment whose true root never came) or at shutdown. Either way the trace's end
decides the failed calls nothing reacted to (``carried_on``), and the calls still waiting for their reply go as
they read (``checks.late_outcome``): their held spans go before the root does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.checks.cost import Price
from otel_toolcall_eval.checks.verdict import trace_verdict
from otel_toolcall_eval.online.contain import Contained
from otel_toolcall_eval.online.held_spans import HeldSpans, answer, decide
from otel_toolcall_eval.online.hooks import TraceFinished
from otel_toolcall_eval.online.metrics import NO_SOURCE, EvalMetrics, Source, TraceCounts
from otel_toolcall_eval.online.trace_state import TraceState
from otel_toolcall_eval.online.trace_stats import Fingerprints, ToolListChanges, root_attributes
from otel_toolcall_eval.records import ToolDefinition, TraceVerdict


class FinishStage:
    """Verdicts and numbers of finished traces; built once per pipeline from the config."""

    def __init__(
        self,
        step_budget: int | None,
        config_tools: dict[str, ToolDefinition],
        prices: Mapping[str, Price],
        currency: str | None,
        metrics: EvalMetrics,
        held: HeldSpans | None,
        contained: Contained,
        *,
        max_cache_bytes: int,
        histograms: bool,
    ) -> None:
        self._step_budget = step_budget
        self._config_tools = config_tools
        self._priced = bool(prices)
        self._currency = currency
        self.metrics = metrics
        self.held = held
        self.contained = contained
        self._histograms = histograms
        self._tool_lists = ToolListChanges()
        self._fingerprints = Fingerprints(max_cache_bytes)

    def root(
        self,
        trace_id: int,
        state: TraceState | None,
        first: bool,
        span: ReadableSpan,
        extra: dict[str, Any],
        attrs: dict[str, Any] | None,
        failed_step: int | None,
    ) -> tuple[dict[str, Any], TraceFinished]:
        """The root ended: ``extra`` (the root's own attributes) with the verdict and the trace's numbers added, and
        the event; counted when ``first`` (a later root of a trace finished here already is not counted again).
        ``failed_step``: the root is itself a failed call, whose recovery class the trace's end decides."""
        ctx = span.context
        span_id = ctx.span_id if ctx is not None else 0
        if state is not None and state.awaiting_reply:
            self._unanswered(trace_id, state)
        if state is None or not state.tool_activity:
            return extra, TraceFinished(trace_id, span_id, None, first, state is not None)
        verdict = self.verdict(state)
        stats_attributes = self._stats_attributes(trace_id, state, verdict)
        if failed_step is not None:
            steps = stats_attributes.get(A.TRACE_RECOVERY_STEPS) or ()
            if failed_step in steps:
                extra[A.RECOVERY_CLASS] = stats_attributes[A.TRACE_RECOVERY_CLASSES][steps.index(failed_step)]
        source = NO_SOURCE
        if first:
            counts = state.trace_counts(self.metrics, span)  # the root's resource and agent are the trace's
            self.metrics.note_root(counts, span, attrs)
            source = self.metrics.record_trace(verdict, "root", counts)
            self._record_stats(state, stats_attributes, source, counts)
        extra.update(verdict_attributes(verdict))
        if state.request_scored:
            extra[A.TRACE_REQUEST_SCORED_CALLS] = state.request_scored
        if state.conversations is not None and state.conversations.unmatched:
            extra[A.TRACE_UNMATCHED_REQUESTS] = state.conversations.unmatched
        if state.prevented is not None:
            extra.update(state.prevented.attributes())
        extra.update(stats_attributes)
        return extra, TraceFinished(trace_id, span_id, verdict, first, True, source)

    def unfinished(self, trace_id: int, state: TraceState, reason: str) -> TraceFinished:
        """A trace let go of before its root ended here (``reason``: evicted, expired, segment, shutdown)."""
        if state.awaiting_reply:
            self._unanswered(trace_id, state)
        if not state.tool_activity:
            return TraceFinished(trace_id, 0, None, True, True)
        verdict = self.verdict(state)
        source = self.metrics.record_trace(verdict, reason, state.counts)
        self._record_stats(state, self._stats_attributes(trace_id, state, verdict), source, None)
        return TraceFinished(trace_id, 0, verdict, True, True, source)

    def verdict(self, state: TraceState) -> TraceVerdict:
        configured = self._config_tools
        unlisted = state.unlisted_calls(configured) if state.listed_late else None
        late = state.late_schema
        outcomes = state.late_outcome
        requests = state.requests
        if requests is None or not requests.turns:
            return trace_verdict(
                state.history, self._step_budget, unlisted_calls=unlisted, late_schema=late, late_outcome=outcomes
            )
        return trace_verdict(
            state.history,
            self._step_budget,
            requests.unknown_tool_requests(state.tools, configured),
            requests.unexecuted_calls,
            unlisted,
            late,
            outcomes,
        )

    def _unanswered(self, trace_id: int, state: TraceState) -> None:
        """The calls still waiting for their reply (``checks.late_outcome``): their held spans go first, as they
        read (counted, ``held_spans.TRACE_END``), so that they are counted before the trace's verdict is."""
        with state.lock:
            steps = state.unanswered()
        answer(self.held, state, trace_id, steps, self.contained, read=False)

    # --- cost, latency, recovery and the tool list (issue 18) -------------------------------------------------
    def _stats_attributes(self, trace_id: int, state: TraceState, verdict: TraceVerdict) -> dict[str, Any]:
        """The root's numbers; the trace's end decides the failed calls nothing reacted to (``carried_on``), and
        their held spans go first."""
        with state.lock:
            stats = state.stats
            settled = stats.settle() if stats is not None and stats.pending is not None else None
            out = root_attributes(
                stats, state.tools, verdict.tool_calls, verdict.errors, self._priced, self._fingerprints
            )
        if settled:
            decide(self.held, state, trace_id, settled, self.contained)
        return out

    def _record_stats(
        self, state: TraceState, stats_attributes: dict[str, Any], source: Source, root: TraceCounts | None
    ) -> None:
        """The trace's numbers by its ``source``; with the ``root``'s counts (the trace finished by its root), whether
        its tool list changed since its service and agent's previous trace."""
        stats = state.stats
        decided = (stats.recoveries or []) if stats is not None else []
        labels = [(stats.metric_label(step, tool), cls) for step, tool, cls in decided] if stats is not None else []
        self.metrics.record_trace_stats(
            stats_attributes, labels, self._currency, histograms=self._histograms, source=source
        )
        fingerprint = stats_attributes.get(A.TRACE_TOOL_LIST_FINGERPRINT)
        if root is None or fingerprint is None:
            return
        if self._tool_lists.changed((root.service, root.agent), fingerprint):
            self.metrics.record_tool_list_change(source)


def verdict_attributes(verdict: TraceVerdict) -> dict[str, Any]:
    """The trace verdict as root-span attributes; the requested-call counts only when requests were recorded."""
    out: dict[str, Any] = {
        A.TRACE_TOOL_CALLS: verdict.tool_calls,
        A.TRACE_ERRORS: verdict.errors,
        A.TRACE_OVER_BUDGET: verdict.over_budget,
        A.TRACE_VIOLATIONS: verdict.violations,
        A.TRACE_VIOLATION_WEIGHT: verdict.violation_weight,
        A.TRACE_CORRECT: verdict.correct,
        A.TRACE_COMPOSITE_OK: verdict.composite_ok,
    }
    if verdict.unexecuted_calls is not None:
        out[A.TRACE_UNEXECUTED_CALLS] = verdict.unexecuted_calls
        out[A.TRACE_UNKNOWN_TOOL_REQUESTS] = verdict.unknown_tool_requests
    if verdict.unlisted_calls is not None:
        out[A.TRACE_UNLISTED_CALLS] = verdict.unlisted_calls
    late = verdict.late_schema
    if late is not None:
        out[A.TRACE_LATE_SCHEMA_CHECKED] = len(late.checked_steps)
        out[A.TRACE_LATE_SCHEMA_INVALID] = len(late.invalid_steps)
        out[A.TRACE_LATE_SCHEMA_CHECKED_STEPS] = list(late.checked_steps)
        if late.invalid_steps:
            out[A.TRACE_LATE_SCHEMA_INVALID_STEPS] = list(late.invalid_steps)
            out[A.TRACE_LATE_SCHEMA_ERRORS] = list(late.errors)
    outcomes = verdict.late_outcome
    if outcomes is not None:
        out[A.TRACE_LATE_OUTCOME_CHECKED] = len(outcomes.checked_steps)
        out[A.TRACE_LATE_OUTCOME_FAILED] = len(outcomes.failed_steps)
        out[A.TRACE_LATE_OUTCOME_CHECKED_STEPS] = list(outcomes.checked_steps)
        if outcomes.failed_steps:
            out[A.TRACE_LATE_OUTCOME_FAILED_STEPS] = list(outcomes.failed_steps)
            out[A.TRACE_LATE_OUTCOME_OUTCOMES] = list(outcomes.outcomes)
            out[A.TRACE_LATE_OUTCOME_ERROR_SOURCES] = list(outcomes.error_sources)
            out[A.TRACE_LATE_OUTCOME_REPLIES] = list(outcomes.replies)
    return out
