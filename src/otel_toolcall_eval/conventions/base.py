"""Span typing: a convention recognises a tool span and normalises it to a ``ToolCallRecord``.

Conventions are a registry: users register their own (``DEFAULT_REGISTRY.register(MyConvention())``, or a
``ConventionRegistry`` passed to the processor). The first convention whose ``match`` accepts a span wins, so
specific conventions come before general ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode, format_span_id, format_trace_id

from otel_toolcall_eval import _json
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.records import ErrorEvidence, ToolCallRecord

Attrs = Mapping[str, Any]


@runtime_checkable
class Convention(Protocol):
    """How one instrumentation records a tool call."""

    @property
    def name(self) -> str:
        """Written as ``toolcall_eval.convention``; registering a second convention of a name replaces the first."""
        ...

    def match(self, span: ReadableSpan, attrs: Attrs) -> bool:
        """Cheap: runs on every span the application ends."""
        ...

    def extract(self, span: ReadableSpan, attrs: Attrs) -> ToolCallRecord | None:
        """The record, or None when a matching span is not a tool call after all (e.g. an agent handoff)."""
        ...


def _first(attrs: Attrs, keys: Sequence[str]) -> tuple[Any, bool]:
    for key in keys:
        if key in attrs:
            return attrs[key], True
    return None, False


def error_evidence(span: ReadableSpan, attrs: Attrs) -> ErrorEvidence:
    """Status, the first exception event and ``error.type``: the ways every convention records a failure."""
    evidence = ErrorEvidence()
    status = span.status
    if status is not None and status.status_code is StatusCode.ERROR:
        evidence.status_error = True
        evidence.status_description = status.description
    for event in span.events:
        if event.name == "exception":
            ev = event.attributes or {}
            evidence.exception_type = str(ev.get("exception.type") or "Exception")
            message = ev.get("exception.message")
            evidence.exception_message = None if message is None else str(message)[:512]
            break
    error_type = attrs.get(A.ERROR_TYPE)
    if error_type is not None:
        evidence.error_type = str(error_type)
    retry = attrs.get(A.PYDANTIC_AI_RETRY_CAUSE)
    if retry is not None:
        evidence.retry_cause = str(retry)
    return evidence


def base_record(span: ReadableSpan, name: Any, convention: str) -> ToolCallRecord:
    ctx = span.context
    parent = span.parent
    return ToolCallRecord(
        name=name if isinstance(name, str) else ("" if name is None else str(name)),
        convention=convention,
        trace_id=format_trace_id(ctx.trace_id) if ctx is not None else "",
        span_id=format_span_id(ctx.span_id) if ctx is not None else "",
        parent_span_id=format_span_id(parent.span_id) if parent is not None else None,
        start_ns=span.start_time,
        end_ns=span.end_time,
    )


def unwrap_args_kwargs(raw: Any) -> Any:
    """Decorator-based SDKs (OpenLLMetry, Langfuse) record ``{"args": [...], "kwargs": {...}}``.

    Keyword arguments become the call's arguments; positional ones are kept under ``args`` only when there
    are no keyword arguments to speak for the call (a single positional value maps like a bare value).
    """
    value = _json.try_loads(raw)
    if not isinstance(value, dict) or not value or not set(value) <= {"args", "kwargs"}:
        return raw
    kwargs = value.get("kwargs") or {}
    args = value.get("args") or []
    if not isinstance(kwargs, dict):
        return raw
    if args and not kwargs:
        return args[0] if isinstance(args, list) and len(args) == 1 else args
    return kwargs


@dataclass(frozen=True, slots=True)
class AttributeConvention:
    """A convention that is just a detection attribute and where to read each field from.

    ``name_keys`` empty means the span name is the tool name (Laminar, Langfuse).
    """

    name: str
    detect_key: str
    detect_values: frozenset[str]
    name_keys: tuple[str, ...] = ()
    argument_keys: tuple[str, ...] = ()
    result_keys: tuple[str, ...] = ()
    call_id_keys: tuple[str, ...] = (A.GEN_AI_TOOL_CALL_ID,)
    schema_keys: tuple[str, ...] = ()
    unwrap_args: bool = False
    span_name_prefixes: tuple[str, ...] = ()

    def match(self, span: ReadableSpan, attrs: Attrs) -> bool:
        value = attrs.get(self.detect_key)
        return value is not None and value in self.detect_values

    def tool_name(self, span: ReadableSpan, attrs: Attrs) -> Any:
        name, found = _first(attrs, self.name_keys)
        if found and name:
            return name
        span_name = span.name or ""
        for prefix in self.span_name_prefixes:
            if span_name.startswith(prefix):
                return span_name[len(prefix) :]
        return span_name if not self.name_keys else name

    def extract(self, span: ReadableSpan, attrs: Attrs) -> ToolCallRecord | None:
        record = base_record(span, self.tool_name(span, attrs), self.name)
        raw, _ = _first(attrs, self.argument_keys)
        record.raw_arguments = unwrap_args_kwargs(raw) if self.unwrap_args and raw is not None else raw
        record.result, record.result_recorded = _first(attrs, self.result_keys)
        call_id, _ = _first(attrs, self.call_id_keys)
        record.call_id = None if call_id is None else str(call_id)
        if self.schema_keys:
            schema = _json.try_loads(_first(attrs, self.schema_keys)[0])
            if isinstance(schema, dict):
                record.span_schema = schema
        record.error = error_evidence(span, attrs)
        return record


class ConventionRegistry:
    """Ordered conventions; the first match wins. Thread-safe for reads once the processor runs."""

    def __init__(self, conventions: Iterable[Convention] = ()) -> None:
        self._conventions: tuple[Convention, ...] = tuple(conventions)

    def __iter__(self) -> Any:
        return iter(self._conventions)

    def __len__(self) -> int:
        return len(self._conventions)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self._conventions]

    def register(self, convention: Convention, *, first: bool = True) -> None:
        """Add a convention; ``first=True`` (default) lets it override the built-in ones."""
        if not isinstance(convention, Convention):
            raise TypeError(f"{convention!r} lacks name/match/extract")
        existing = tuple(c for c in self._conventions if c.name != convention.name)
        self._conventions = (convention, *existing) if first else (*existing, convention)

    def copy(self) -> ConventionRegistry:
        return ConventionRegistry(self._conventions)

    def recognise(self, span: ReadableSpan, attrs: Attrs) -> Convention | None:
        for convention in self._conventions:
            if convention.match(span, attrs):
                return convention
        return None
