"""Span typing: a convention recognises a tool span and normalises it to a ``ToolCallRecord``.

Conventions are a registry: users register their own (``DEFAULT_REGISTRY.register(MyConvention())``, or a
``ConventionRegistry`` passed to the processor). The first convention whose ``match`` accepts a span wins, so
specific conventions come before general ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from otel_toolcall_eval import _json
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.records import NO_ERROR, ErrorEvidence, ToolCallRecord, new_tool_call_record

# An exception message is kept up to this many characters: the judge shows at most 512 of them and redacts 4 KiB
# past that cut first (judge.questions.REDACT_LOOKAHEAD), so a secret that straddles 512 is replaced whole.
MAX_EXCEPTION_MESSAGE = 512 + 4096

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


def plain_attributes(attrs: Attrs | None) -> dict[str, Any]:
    """The attributes as a plain dict, copied once.

    ``ReadableSpan.attributes`` is a read-only proxy over the SDK's ``BoundedAttributes``, whose lookups run in
    Python and raise ``KeyError`` for every absent key; convention checks probe many absent keys, so one C-level
    copy (``BoundedAttributes.copy`` returns a dict) is cheaper than the probes it replaces.
    """
    if type(attrs) is dict:
        return attrs
    if attrs is None:
        return {}
    if type(attrs) is MappingProxyType:
        copied = attrs.copy()
        if type(copied) is dict:
            return copied
    return dict(attrs)


def span_events(span: ReadableSpan) -> Sequence[Any]:
    """The span's events without a copy.

    ``ReadableSpan.events`` copies the SDK's ``BoundedList`` under its lock into a new tuple on every read
    (~0.4 us, paid for every tool span even without events). Once a span has ended nothing appends to that
    list, so reading it in place is safe; any other span type falls back to the public property.
    """
    events = getattr(span, "_events", None)
    return span.events if events is None else events


def span_links(span: ReadableSpan) -> Sequence[Any]:
    """The span's links without a copy (see ``span_events``)."""
    links = getattr(span, "_links", None)
    return span.links if links is None else links


def _first(attrs: Attrs, keys: Sequence[str]) -> tuple[Any, bool]:
    for key in keys:
        if key in attrs:
            return attrs[key], True
    return None, False


def error_evidence(span: ReadableSpan, attrs: Attrs) -> ErrorEvidence:
    """Status, the first exception event and ``error.type``: the ways every convention records a failure
    (``NO_ERROR`` when there is none, the usual case)."""
    status_error = False
    description = exception_type = exception_message = None
    status = span.status
    if status is not None and status.status_code is StatusCode.ERROR:
        status_error = True
        description = status.description
    events = span_events(span)
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


def base_record(span: ReadableSpan, name: Any, convention: str) -> ToolCallRecord:
    """The record with the span's identity filled in (the start of a custom convention's ``extract``)."""
    ctx = span.context
    parent = span.parent
    return ToolCallRecord(
        name=name if isinstance(name, str) else ("" if name is None else str(name)),
        convention=convention,
        # the formats of format_trace_id / format_span_id, without two calls per id
        trace_id=f"{ctx.trace_id:032x}" if ctx is not None else "",
        span_id=f"{ctx.span_id:016x}" if ctx is not None else "",
        parent_span_id=f"{parent.span_id:016x}" if parent is not None else None,
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

    @property
    def detect_keys(self) -> tuple[str, ...]:
        """A span this convention matches carries at least one of these keys (lets the registry skip the rest)."""
        return (self.detect_key,)

    def match(self, span: ReadableSpan, attrs: Attrs) -> bool:
        value = attrs.get(self.detect_key)
        return value is not None and value in self.detect_values

    def tool_name(self, span: ReadableSpan, attrs: Attrs) -> Any:
        name = None
        for key in self.name_keys:  # ``_first``, inlined: this runs for every tool span
            if key in attrs:
                name = attrs[key]
                if name:
                    return name
                break
        span_name = span.name or ""
        for prefix in self.span_name_prefixes:
            if span_name.startswith(prefix):
                return span_name[len(prefix) :]
        return span_name if not self.name_keys else name

    def extract(self, span: ReadableSpan, attrs: Attrs) -> ToolCallRecord | None:
        attrs = plain_attributes(attrs)
        raw = result = call_id = None
        recorded = False
        # inline lookups (not ``_first``): this runs for every tool span
        for key in self.argument_keys:
            if key in attrs:
                raw = attrs[key]
                break
        for key in self.result_keys:
            if key in attrs:
                result, recorded = attrs[key], True
                break
        for key in self.call_id_keys:
            if key in attrs:
                call_id = attrs[key]
                break
        schema = None
        if self.schema_keys:
            schema = _json.try_loads(_first(attrs, self.schema_keys)[0])
        name = self.tool_name(span, attrs)
        ctx = span.context
        parent = span.parent
        trace_hex = span_hex = ""
        parent_hex = None
        try:  # ``int.to_bytes(...).hex()`` is the f-string's lowercase, zero-padded digits at half its cost
            if ctx is not None:
                trace_hex, span_hex = ctx.trace_id.to_bytes(16, "big").hex(), ctx.span_id.to_bytes(8, "big").hex()
            if parent is not None:
                parent_hex = parent.span_id.to_bytes(8, "big").hex()
        except OverflowError:  # not an OTLP id (negative, or wider than its field): printed as it is
            trace_hex, span_hex = (f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}") if ctx is not None else ("", "")
            parent_hex = f"{parent.span_id:016x}" if parent is not None else None
        # every field in one call (what ``base_record`` fills, plus the rest): this runs per tool span
        return new_tool_call_record(
            name if isinstance(name, str) else ("" if name is None else str(name)),
            unwrap_args_kwargs(raw) if self.unwrap_args and raw is not None else raw,
            result,
            recorded,
            error_evidence(span, attrs),
            None if call_id is None else str(call_id),
            self.name,
            schema if is_json_schema(schema) else None,
            trace_hex,
            span_hex,
            parent_hex,
            span.start_time,
            span.end_time,
        )


_CANDIDATE_SETS = 1024  # distinct detect-key sets remembered per registry (traffic shows a handful)
# (conventions, the gate, detect-key set -> conventions to ask, each convention's detect keys): one tuple, so a
# reader on another thread never sees one part of a change without the rest
_Index = tuple[
    tuple["Convention", ...],
    frozenset[str] | None,
    dict[frozenset[str], tuple["Convention", ...]],
    tuple[frozenset[str], ...],
]


def _candidates(
    conventions: tuple[Convention, ...],
    keysets: tuple[frozenset[str], ...],
    present: frozenset[str],
    memo: dict[frozenset[str], tuple[Convention, ...]],
) -> tuple[Convention, ...]:
    """The conventions, in order, that detect on one of the ``present`` keys (remembered in ``memo``)."""
    asked = tuple(c for c, keys in zip(conventions, keysets, strict=True) if not present.isdisjoint(keys))
    if len(memo) >= _CANDIDATE_SETS:
        memo.clear()
    memo[present] = asked
    return asked


def _gate(conventions: tuple[Convention, ...]) -> frozenset[str] | None:
    """Every key some convention needs to see, or None when one of them does not say (then no span is skipped)."""
    keys: set[str] = set()
    for convention in conventions:
        detect = getattr(convention, "detect_keys", None)
        if not detect or not all(isinstance(k, str) for k in detect):
            return None
        keys.update(detect)
    return frozenset(keys)


class ConventionRegistry:
    """Ordered conventions; the first match wins. Thread-safe for reads once the processor runs.

    Most spans are not tool spans: when every convention names its ``detect_keys``, a span that carries none of
    them is rejected with one set operation instead of a ``match`` call per convention.
    """

    def __init__(self, conventions: Iterable[Convention] = ()) -> None:
        self._set(tuple(conventions))

    def _set(self, conventions: tuple[Convention, ...]) -> None:
        gate = _gate(conventions)
        # the detect keys a span carries -> the conventions to ask, in registry order (a chat span is offered to
        # the one convention that detects on ``gen_ai.operation.name``, not to every convention); filled as key
        # sets are seen: at most one entry per subset of the gate that traffic shows, and at most _CANDIDATE_SETS
        keysets = tuple(frozenset(getattr(c, "detect_keys", None) or ()) for c in conventions)
        # ``detect_keys`` is None (no skipping) while the conventions change, so no reader ever skips a span
        # that the new conventions would match; ``_index`` is one assignment for ``recognise``.
        self.detect_keys: frozenset[str] | None = None
        self._index: _Index = (conventions, gate, {}, keysets)
        self.detect_keys = gate  # a span needs one of these keys for any convention here to match

    @property
    def _conventions(self) -> tuple[Convention, ...]:
        return self._index[0]

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
        self._set((convention, *existing) if first else (*existing, convention))

    def copy(self) -> ConventionRegistry:
        return ConventionRegistry(self._conventions)

    def recognise(self, span: ReadableSpan, attrs: Attrs) -> Convention | None:
        """The first convention, in registry order, that matches. Only the conventions whose detect keys the span
        carries are asked (``detect_keys``' contract: a convention matches no span without one of them)."""
        conventions, gate, candidates, keysets = self._index
        if gate is not None:
            present = gate.intersection(attrs)  # in C, over the span's keys
            if not present:
                return None
            asked = candidates.get(present)
            if asked is None:
                asked = _candidates(conventions, keysets, present, candidates)
            conventions = asked
        attrs = plain_attributes(attrs)
        for convention in conventions:
            if convention.match(span, attrs):
                return convention
        return None
