"""Argument parse check: did the recorded arguments become a JSON object?

A parse failure is its own score, never a wrong-tool miss. A bare value (LangChain records a
single-argument tool's input as just ``Paris``) maps onto the tool's only parameter when there is one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from otel_toolcall_eval.records import ParsedArguments, ParseStatus


def _too_deep(exc: Exception) -> bool:
    text = str(exc).lower()
    return isinstance(exc, RecursionError) or "recursion" in text or "depth" in text


def parse_arguments(raw: Any, *, single_param: str | None = None, max_bytes: int = 65_536) -> ParsedArguments:
    if raw is None:
        return ParsedArguments(ParseStatus.ABSENT)
    if isinstance(raw, Mapping):
        return ParsedArguments(ParseStatus.OK, dict(raw))
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        value: Any = list(raw) if isinstance(raw, (tuple, list)) else raw
        return _map_bare(value, single_param, "arguments are a JSON " + type(value).__name__ + ", not an object")
    if len(raw) > max_bytes:  # characters >= bytes/4: checking length first keeps the common case cheap
        return ParsedArguments(ParseStatus.OVERSIZED, error=f"arguments longer than {max_bytes} bytes")
    if not raw.strip():
        # an empty string is what several SDKs record for a call without arguments
        return ParsedArguments(ParseStatus.OK, {})
    try:
        value = orjson.loads(raw)
    except (orjson.JSONDecodeError, RecursionError) as exc:
        if _too_deep(exc):
            return ParsedArguments(ParseStatus.TOO_DEEP, error="arguments nest deeper than the parser allows")
        if single_param is not None:
            return ParsedArguments(ParseStatus.BARE_VALUE, {single_param: raw})
        return ParsedArguments(ParseStatus.INVALID_JSON, error=f"invalid JSON: {str(exc)[:120]}")
    if isinstance(value, dict):
        return ParsedArguments(ParseStatus.OK, value)
    return _map_bare(value, single_param, f"arguments are a JSON {type(value).__name__}, not an object")


def _map_bare(value: Any, single_param: str | None, error: str) -> ParsedArguments:
    if single_param is not None:
        return ParsedArguments(ParseStatus.BARE_VALUE, {single_param: value})
    return ParsedArguments(ParseStatus.NOT_OBJECT, error=error)


def single_parameter(schema: Mapping[str, Any] | None) -> str | None:
    """The name of the schema's only property, which a bare value maps onto."""
    if not schema:
        return None
    props = schema.get("properties")
    if isinstance(props, Mapping) and len(props) == 1:
        only = next(iter(props))
        return only if isinstance(only, str) else None
    return None
