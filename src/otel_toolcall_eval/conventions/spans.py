"""Reading a span into a record: what every convention does on every tool span, compiled in the opt-in build.

The free functions of ``base.py`` (which re-exports them) and the body of ``AttributeConvention``'s ``extract``
and ``tool_name``, taking the convention as an argument: ``AttributeConvention`` itself stays an interpreted
dataclass users subclass (``attribute.py``), while the work per span runs here, where mypyc turns it into C
(``setup.py``'s ``COMPILED``). Without the compiled build the same source runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import _json, _sdk
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._sdk import plain_attributes as plain_attributes  # re-exported (base.py)
from otel_toolcall_eval._sdk import span_events as span_events
from otel_toolcall_eval._sdk import span_links as span_links
from otel_toolcall_eval.conventions.protocol import Attrs
from otel_toolcall_eval.conventions.shapes import apply as apply_shape
from otel_toolcall_eval.conventions.shapes import shape_for
from otel_toolcall_eval.records import NO_ERROR, ErrorEvidence, ToolCallRecord, new_tool_call_record

# An exception message is kept up to this many characters: the judge shows at most 512 of them and redacts 4 KiB
# past that cut first (judge.questions.REDACT_LOOKAHEAD), so a secret that straddles 512 is replaced whole.
MAX_EXCEPTION_MESSAGE = 512 + 4096


class AttributeFields(Protocol):
    """Where an attribute convention reads each field from (``AttributeConvention``'s fields). Typed as what is
    done with them (iterated, tested), not as the dataclass declares them: compiled code checks a declared
    ``tuple`` or ``bool`` at run time, and a user's list of keys must work in both builds."""

    @property
    def name(self) -> str: ...
    @property
    def name_keys(self) -> Sequence[str]: ...
    @property
    def argument_keys(self) -> Sequence[str]: ...
    @property
    def result_keys(self) -> Sequence[str]: ...
    @property
    def call_id_keys(self) -> Sequence[str]: ...
    @property
    def schema_keys(self) -> Sequence[str]: ...
    @property
    def unwrap_args(self) -> object: ...
    @property
    def span_name_prefixes(self) -> Sequence[str]: ...
    @property
    def _overrides_tool_name(self) -> bool: ...

    def tool_name(self, span: ReadableSpan, attrs: Attrs) -> Any: ...


def first(attrs: Attrs, keys: Sequence[str]) -> tuple[Any, bool]:
    """The value of the first of ``keys`` the attributes carry, and whether one did."""
    for key in keys:
        if key in attrs:
            return attrs[key], True
    return None, False


def error_evidence(span: ReadableSpan, attrs: Attrs) -> ErrorEvidence:
    """Status, the first exception event and ``error.type``: the ways every convention records a failure
    (``NO_ERROR`` when there is none, the usual case)."""
    exception_type = exception_message = None
    status_error, description = _sdk.error_status(span)
    events = _sdk.event_items(span)
    for event in events if events else ():
        if event.name == "exception":
            ev = event.attributes or {}
            exception_type = str(ev.get("exception.type") or "Exception")
            message = ev.get("exception.message")
            # Bounded, and long enough that the judge redacts before it cuts to 512 (a cut secret leaks its start)
            exception_message = None if message is None else str(message)[:MAX_EXCEPTION_MESSAGE]
            break
    error_type = attrs.get(A.ERROR_TYPE)
    retry = attrs.get(A.PYDANTIC_AI_RETRY_CAUSE)
    if not status_error and exception_type is None and error_type is None and retry is None:
        return NO_ERROR
    return ErrorEvidence(
        status_error,
        description,
        exception_type,
        exception_message,
        None if error_type is None else str(error_type),
        None if retry is None else str(retry),
    )


def hex_ids(span: ReadableSpan) -> tuple[str, str, str | None]:
    """The span's trace id, span id and parent span id in the formats of ``format_trace_id`` / ``format_span_id``
    (``""`` without a context, None without a parent), without two calls per id."""
    ctx, parent = _sdk.span_ids(span)
    trace_hex = span_hex = ""
    parent_hex = None
    try:  # ``int.to_bytes(...).hex()`` is the f-string's lowercase, zero-padded digits at half its cost
        if _sdk.CONTEXT_ITEMS:  # the SDK's SpanContext is a tuple: its ids by index, no call per id (every tool span)
            if ctx is not None:
                trace_hex = ctx[0].to_bytes(16, "big").hex()
                span_hex = ctx[1].to_bytes(8, "big").hex()
            if parent is not None:
                parent_hex = parent[1].to_bytes(8, "big").hex()
            return trace_hex, span_hex, parent_hex
        if ctx is not None:
            trace_hex = _sdk.trace_id_of(ctx).to_bytes(16, "big").hex()
            span_hex = _sdk.span_id_of(ctx).to_bytes(8, "big").hex()
        if parent is not None:
            parent_hex = _sdk.span_id_of(parent).to_bytes(8, "big").hex()
    except OverflowError:  # not an OTLP id (negative, or wider than its field): printed as it is
        if ctx is not None:
            trace_hex, span_hex = f"{_sdk.trace_id_of(ctx):032x}", f"{_sdk.span_id_of(ctx):016x}"
        parent_hex = f"{_sdk.span_id_of(parent):016x}" if parent is not None else None
    return trace_hex, span_hex, parent_hex


def base_record(span: ReadableSpan, name: Any, convention: str) -> ToolCallRecord:
    """The record with the span's identity filled in (the start of a custom convention's ``extract``)."""
    trace_hex, span_hex, parent_hex = hex_ids(span)
    start, end = _sdk.span_times(span)
    return ToolCallRecord(
        name=name if isinstance(name, str) else ("" if name is None else str(name)),
        convention=convention,
        trace_id=trace_hex,
        span_id=span_hex,
        parent_span_id=parent_hex,
        start_ns=start,
        end_ns=end,
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


_SCHEMA_KEYWORDS = frozenset({"properties", "$schema", "$ref", "anyOf", "oneOf", "allOf"})


def is_json_schema(value: Any) -> bool:
    """A tool span's "schema" is used only when it is a JSON Schema of the arguments object: a ``type`` that is a
    string (or list of them) or a schema keyword at the top. A parameter map such as smolagents' ``inputs``
    (``{"city": {"type": ...}}``) validates every call as a schema (unknown keywords are annotations), and
    must not stand in for the definitions the model saw."""
    if not isinstance(value, dict) or not value:
        return False
    kind = value.get("type")
    if isinstance(kind, str) or (isinstance(kind, list) and all(isinstance(k, str) for k in kind)):
        return True
    return any(key in value and isinstance(value[key], (dict, list, str)) for key in _SCHEMA_KEYWORDS) and not (
        "properties" in value and not isinstance(value["properties"], dict)
    )


def tool_name(convention: AttributeFields, span: ReadableSpan, attrs: Attrs) -> Any:
    """``AttributeConvention.tool_name``: the first non-empty name key, else the span name (less a prefix)."""
    name = None
    name_keys = convention.name_keys
    for key in name_keys:  # ``first``, inlined: this runs for every tool span
        if key in attrs:
            name = attrs[key]
            if name:
                return name
            break
    span_name = span.name or ""
    for prefix in convention.span_name_prefixes:
        if span_name.startswith(prefix):
            return span_name[len(prefix) :]
    return span_name if not name_keys else name


def attribute_record(convention: AttributeFields, span: ReadableSpan, attrs: Attrs) -> ToolCallRecord | None:
    """``AttributeConvention.extract``: every field read from where ``convention`` says, in one record (None: the
    shape table says the span is no call)."""
    attrs = plain_attributes(attrs)
    raw = result = call_id = None
    recorded = False
    # inline lookups (not ``first``): this runs for every tool span
    for key in convention.argument_keys:
        if key in attrs:
            raw = attrs[key]
            break
    for key in convention.result_keys:
        if key in attrs:
            result, recorded = attrs[key], True
            break
    for key in convention.call_id_keys:
        if key in attrs:
            call_id = attrs[key]
            break
    schema = None
    schema_keys = convention.schema_keys
    if schema_keys:
        found = first(attrs, schema_keys)[0]
        if found is not None:  # most tool spans carry none: no decode, no schema test
            schema = _json.try_loads(found)
    # a subclass's own ``tool_name`` (a method call), the shared body otherwise
    name = convention.tool_name(span, attrs) if convention._overrides_tool_name else tool_name(convention, span, attrs)
    trace_hex, span_hex, parent_hex = hex_ids(span)
    start, end = _sdk.span_times(span)
    # every field in one call (what ``base_record`` fills, plus the rest): this runs per tool span
    record = new_tool_call_record(
        name if isinstance(name, str) else ("" if name is None else str(name)),
        unwrap_args_kwargs(raw) if convention.unwrap_args and raw is not None else raw,
        result,
        recorded,
        error_evidence(span, attrs),
        None if call_id is None else str(call_id),
        convention.name,
        schema if schema is not None and is_json_schema(schema) else None,
        trace_hex,
        span_hex,
        parent_hex,
        start,
        end,
    )
    # where the instrumentation that wrote the span keeps each part, whichever convention claimed it (shapes.py)
    shape = shape_for(span.instrumentation_scope)
    if shape is not None and not apply_shape(shape, record, span, attrs):
        return None
    return record
