"""The enriched copy of an ended span: the only supported way for scores to reach the exporter.

What goes on the copy each stage returns itself (``call.call_attributes``, ``finish``'s verdict attributes); here
is only the copy, and the prefix under which a model span carries the calls scored from its requests.

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


def requested_keys(index: int, attrs: Mapping[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """A tool span's attributes of a call (``toolcall_eval.<key>``, its scores or what a hook added, such as
    ``judge.sampled``) as the call scored from the requests number ``index`` (``toolcall_eval.requested.<index>.
    <key>``), added to ``out``."""
    prefix = f"{A.REQUESTED_PREFIX}{index}."
    for key, value in attrs.items():
        out[prefix + key.removeprefix(A.PREFIX)] = value
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
