"""The enriched copy of an ended span: the only supported way for scores to reach the exporter.

``set_attribute`` is a no-op once a span has ended (also in ``_on_ending``), so the wrapping processor
forwards this copy downstream instead. Dropped counts of the original are preserved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.records import CallScore, TraceVerdict


class EnrichedSpan(ReadableSpan):
    def __init__(self, span: ReadableSpan, extra: Mapping[str, Any]) -> None:
        attributes = dict(span.attributes or {})
        attributes.update(extra)
        super().__init__(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=attributes,
            events=span.events,
            links=span.links,
            kind=span.kind,
            status=span.status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )
        self._dropped = (span.dropped_attributes, span.dropped_events, span.dropped_links)
        self.original = span

    @property
    def dropped_attributes(self) -> int:
        return self._dropped[0]

    @property
    def dropped_events(self) -> int:
        return self._dropped[1]

    @property
    def dropped_links(self) -> int:
        return self._dropped[2]


def call_attributes(score: CallScore, convention: str) -> dict[str, Any]:
    """The ``toolcall_eval.*`` attributes of one tool span; absent scores are not written."""
    out: dict[str, Any] = {
        A.CONVENTION: convention,
        A.OUTCOME: score.outcome.value,
        A.STEP: score.step,
        A.DUPLICATE: score.duplicate,
        A.REPEATED_FAILURE: score.repeated_failure,
    }
    if score.parse_ok is not None:
        out[A.PARSE_OK] = score.parse_ok
    if score.parse_status.value == "oversized":
        out[A.ARGUMENTS_OVERSIZED] = True
    if score.tool_known is not None:
        out[A.TOOL_KNOWN] = score.tool_known
    if score.schema_valid is not None:
        out[A.SCHEMA_VALID] = score.schema_valid
        if score.schema_errors:
            out[A.SCHEMA_ERRORS] = list(score.schema_errors)
    if score.schema_source is not None:
        out[A.SCHEMA_SOURCE] = score.schema_source
    if score.schema_drift is not None:
        out[A.SCHEMA_DRIFT] = score.schema_drift
    if score.error_source is not None:
        out[A.ERROR_SOURCE] = score.error_source
    if score.batch is not None:
        out[A.BATCH] = score.batch
    if score.over_budget is not None:
        out[A.OVER_BUDGET] = score.over_budget
    if score.violations:
        out[A.VIOLATIONS] = list(score.violations)
    return out


def verdict_attributes(verdict: TraceVerdict) -> dict[str, Any]:
    return {
        A.TRACE_TOOL_CALLS: verdict.tool_calls,
        A.TRACE_ERRORS: verdict.errors,
        A.TRACE_OVER_BUDGET: verdict.over_budget,
        A.TRACE_VIOLATIONS: verdict.violations,
        A.TRACE_VIOLATION_WEIGHT: verdict.violation_weight,
        A.TRACE_CORRECT: verdict.correct,
        A.TRACE_COMPOSITE_OK: verdict.composite_ok,
    }
