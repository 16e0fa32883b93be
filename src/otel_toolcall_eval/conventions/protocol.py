"""What a convention is: the ``Convention`` protocol and the attribute mapping every convention reads.

A module of its own, interpreted in every build: ``Convention`` is a ``runtime_checkable`` ``Protocol`` (the
registry's ``isinstance`` test of what users register), which mypyc cannot compile (compiled, it raises at import
and rejects ``isinstance``); the compiled registry (``registry.py``) imports it from here. ``base.py`` re-exports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval.records import ToolCallRecord

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
