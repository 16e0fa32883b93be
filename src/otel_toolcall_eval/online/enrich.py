"""The enriched copy of an ended span: the only supported way for scores to reach the exporter.

``set_attribute`` is a no-op once a span has ended (also in ``_on_ending``), so the wrapping processor
forwards this copy downstream instead. Dropped counts of the original are preserved.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from mypy_extensions import mypyc_attr
from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import _sdk
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.conventions.base import span_events, span_links
from otel_toolcall_eval.records import CallScore, Outcome, ParseStatus, TraceVerdict


def _copy_attributes(span: ReadableSpan) -> dict[str, Any]:
    """A mutable copy of the span's attributes.

    ``dict(proxy)`` walks the SDK's ``BoundedAttributes`` key by key in Python; the proxy's ``copy()`` asks the
    mapping underneath, which returns a plain dict copied in C (5x faster on a tool span).
    """
    attrs = span.attributes
    if type(attrs) is MappingProxyType:
        copied = attrs.copy()
        if type(copied) is dict and copied is not attrs:
            return copied
    return dict(attrs or {})


@mypyc_attr(native_class=False)
class EnrichedSpan(ReadableSpan):
    """``attributes``: the span's attributes as a plain dict when the caller already copied them (copied again
    here, a C-level dict copy, so the caller's dict stays what it read)."""

    def __init__(self, span: ReadableSpan, extra: Mapping[str, Any], attributes: dict[str, Any] | None = None) -> None:
        attributes = _copy_attributes(span) if attributes is None else attributes.copy()
        attributes.update(extra)
        # The SDK's ReadableSpan keeps its state in its __dict__: one C-level copy instead of twelve property
        # reads and a keyword call (checked at import, see ``_sdk.adopt_state``).
        if not _sdk.adopt_state(self, span, attributes):
            super().__init__(**_public_fields(span, attributes))
        self.original = span

    # The copy's attributes are a plain dict, so its own dropped counts would read 0: the original's count.
    @property
    def dropped_attributes(self) -> int:
        return self.original.dropped_attributes

    @property
    def dropped_events(self) -> int:
        return self.original.dropped_events

    @property
    def dropped_links(self) -> int:
        return self.original.dropped_links


def _public_fields(span: ReadableSpan, attributes: dict[str, Any]) -> dict[str, Any]:
    """The ``ReadableSpan`` constructor's arguments that reproduce ``span`` with other attributes (the slow path)."""
    return {
        "name": span.name,
        "context": span.context,
        "parent": span.parent,
        "resource": span.resource,
        "attributes": attributes,
        "events": span_events(span),
        "links": span_links(span),
        "kind": span.kind,
        "status": span.status,
        "start_time": span.start_time,
        "end_time": span.end_time,
        "instrumentation_scope": span.instrumentation_scope,
    }


# ``Enum.value`` is a Python-level property; a dict lookup is not (this runs for every tool span)
_OUTCOME_TEXT: dict[Outcome, str] = {o: o.value for o in Outcome}


def call_attributes(score: CallScore, convention: str) -> dict[str, Any]:
    """The ``toolcall_eval.*`` attributes of one tool span; absent scores are not written."""
    out: dict[str, Any] = {
        A.CONVENTION: convention,
        A.OUTCOME: _OUTCOME_TEXT[score.outcome],
        A.STEP: score.step,
        A.DUPLICATE: score.duplicate,
        A.REPEATED_FAILURE: score.repeated_failure,
    }
    if score.parse_ok is not None:
        out[A.PARSE_OK] = score.parse_ok
    if score.parse_status is ParseStatus.OVERSIZED:
        out[A.ARGUMENTS_OVERSIZED] = True
    if score.tool_known is not None:
        out[A.TOOL_KNOWN] = score.tool_known
    if score.schema_valid is not None:
        out[A.SCHEMA_VALID] = score.schema_valid
        if score.schema_errors:
            out[A.SCHEMA_ERRORS] = list(score.schema_errors)
    if score.undeclared_arguments:
        out[A.UNDECLARED_ARGUMENTS] = list(score.undeclared_arguments)
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


def requested_call_attributes(index: int, call_id: str, score: CallScore, convention: str) -> dict[str, Any]:
    """The scores of a call scored from the requests, as ``toolcall_eval.requested.<index>.*`` on a model span."""
    prefix = f"{A.REQUESTED_PREFIX}{index}."
    out: dict[str, Any] = {prefix + "tool": score.name, prefix + "call_id": call_id}
    return requested_keys(index, call_attributes(score, convention), out)


def requested_keys(index: int, attrs: Mapping[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """A tool span's attributes of a call (``toolcall_eval.<key>``, its scores or what a hook added, such as
    ``judge.sampled``) as the call scored from the requests number ``index`` (``toolcall_eval.requested.<index>.
    <key>``), added to ``out``."""
    prefix = f"{A.REQUESTED_PREFIX}{index}."
    for key, value in attrs.items():
        out[prefix + key.removeprefix(A.PREFIX)] = value
    return out


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


def with_attributes(span: ReadableSpan, attributes: dict[str, Any]) -> ReadableSpan:
    """A copy of ``span`` whose attributes are ``attributes`` (taken as they are, not copied); all else shared.

    Replay uses it to strip the scores of an earlier run. The SDK's ``ReadableSpan`` is copied through its
    ``__dict__`` as in ``EnrichedSpan`` (``_sdk.adopt_state``); any other span type, or an SDK that keeps its
    state differently, goes through the public constructor.
    """
    copy: ReadableSpan = object.__new__(ReadableSpan)
    if _sdk.adopt_state(copy, span, attributes):
        return copy
    return ReadableSpan(**_public_fields(span, attributes))
