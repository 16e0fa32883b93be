"""Span typing: a convention recognises a tool span and normalises it to a ``ToolCallRecord``.

Conventions are a registry: users register their own (``DEFAULT_REGISTRY.register(MyConvention())``, or a
``ConventionRegistry`` passed to the processor). The first convention whose ``match`` accepts a span wins, so
specific conventions come before general ones.

This module is where they are imported from; the parts live in modules that the opt-in compiled build
(``setup.py``) can treat apart: ``protocol.py`` (the ``runtime_checkable`` ``Convention``, interpreted),
``attribute.py`` (``AttributeConvention``, the dataclass users subclass, interpreted), ``spans.py`` (reading a
span into a record, compiled) and ``registry.py`` (``ConventionRegistry``, compiled).
"""

from __future__ import annotations

from otel_toolcall_eval.conventions.attribute import AttributeConvention
from otel_toolcall_eval.conventions.protocol import Attrs, Convention
from otel_toolcall_eval.conventions.registry import _CANDIDATE_SETS, ConventionRegistry
from otel_toolcall_eval.conventions.spans import (
    MAX_EXCEPTION_MESSAGE,
    base_record,
    error_evidence,
    is_json_schema,
    plain_attributes,
    span_events,
    span_links,
    unwrap_args_kwargs,
)

__all__ = [
    "MAX_EXCEPTION_MESSAGE",
    "_CANDIDATE_SETS",
    "AttributeConvention",
    "Attrs",
    "Convention",
    "ConventionRegistry",
    "base_record",
    "error_evidence",
    "is_json_schema",
    "plain_attributes",
    "span_events",
    "span_links",
    "unwrap_args_kwargs",
]
