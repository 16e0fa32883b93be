"""Argument parse check: did the recorded arguments become a JSON object?

A parse failure is its own score, never a wrong-tool miss. A bare value (LangChain records a
single-argument tool's input as just ``Paris``) maps onto the tool's only parameter when there is one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from otel_toolcall_eval import _json
from otel_toolcall_eval.records import ParsedArguments, ParseStatus


def _too_deep_verdict() -> ParsedArguments:
    """A parse verdict, not an evaluation error: no later walk (normaliser, validator) sees such arguments."""
    return ParsedArguments(ParseStatus.TOO_DEEP, error=f"arguments nest deeper than {_json.MAX_DEPTH} levels")


def _too_deep(exc: Exception) -> bool:
    text = str(exc).lower()
    return isinstance(exc, RecursionError) or "recursion" in text or "depth" in text


def parse_arguments(
    raw: Any,
    *,
    single_param: str | None = None,
    string_param: bool = False,
    max_bytes: int = 65_536,
    unparseable: bool = False,
) -> ParsedArguments:
    """``string_param``: the single parameter is a string, so a bare ``12345`` stays the text it was.
    ``unparseable``: the instrumentation itself recorded that the model's arguments did not parse."""
    if unparseable:
        return ParsedArguments(ParseStatus.INVALID_JSON, error="the SDK could not parse the model's arguments")
    if raw is None:
        return ParsedArguments(ParseStatus.ABSENT)
    if type(raw) is not str:  # the common case, a JSON string, skips the ABC checks
        if isinstance(raw, Mapping):
            arguments = dict(raw)
            return _too_deep_verdict() if _json.too_deep(arguments) else ParsedArguments(ParseStatus.OK, arguments)
        if isinstance(raw, (list, tuple)) and _json.too_deep(raw):
            return _too_deep_verdict()
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="replace")
        if not isinstance(raw, str):
            value: Any = list(raw) if isinstance(raw, (tuple, list)) else raw
            return _map_bare(value, single_param, "arguments are a JSON " + type(value).__name__ + ", not an object")
    if len(raw) > max_bytes:  # characters >= bytes/4: checking length first keeps the common case cheap
        return ParsedArguments(ParseStatus.OVERSIZED, error=f"arguments longer than {max_bytes} bytes")
    if not raw or raw.isspace():
        # an empty string is what several SDKs record for a call without arguments
        return ParsedArguments(ParseStatus.OK, {})
    try:
        value = orjson.loads(raw)
    except (orjson.JSONDecodeError, RecursionError) as exc:
        if _too_deep(exc):
            return _too_deep_verdict()
        # text that starts like JSON and does not parse is broken JSON, never a bare value
        if single_param is not None and not raw.lstrip().startswith(("{", "[")):
            return ParsedArguments(ParseStatus.BARE_VALUE, {single_param: raw})
        return ParsedArguments(ParseStatus.INVALID_JSON, error=f"invalid JSON: {str(exc)[:120]}")
    if _json.text_too_deep(raw, value):
        return _too_deep_verdict()
    if isinstance(value, dict):
        return ParsedArguments(ParseStatus.OK, value)
    if single_param is not None and string_param and not isinstance(value, (str, list)):
        return ParsedArguments(ParseStatus.BARE_VALUE, {single_param: raw})
    return _map_bare(value, single_param, f"arguments are a JSON {type(value).__name__}, not an object")


def _map_bare(value: Any, single_param: str | None, error: str) -> ParsedArguments:
    if single_param is not None:
        return ParsedArguments(ParseStatus.BARE_VALUE, {single_param: value})
    return ParsedArguments(ParseStatus.NOT_OBJECT, error=error)


def single_parameter(schema: Mapping[str, Any] | None) -> tuple[str | None, bool]:
    """The schema's only property, which a bare value maps onto, and whether it is a string."""
    if not schema:
        return None, False
    props = schema.get("properties")
    if isinstance(props, Mapping) and len(props) == 1:
        name, spec = next(iter(props.items()))
        if not isinstance(name, str):
            return None, False
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        is_string = kind == "string" or (isinstance(kind, list) and "string" in kind)
        return name, is_string
    return None, False


_FLAT = frozenset((dict, list, tuple))  # the containers ``_json.too_deep`` walks into


def object_or_none(raw: Any, max_bytes: int) -> dict[str, Any] | None:
    """The arguments when they already are a JSON object (an object recorded as such, or a JSON object string
    within the size limit), else None, and then ``parse_arguments`` decides.

    The same verdict as ``parse_arguments`` (``OK`` and the object) for the common case, without building its
    record: the engine calls this first for every call. An object is returned as recorded, not copied (the
    engine never mutates arguments).
    """
    kind = type(raw)
    if kind is dict:  # nested too deeply: ``parse_arguments`` says TOO_DEEP
        if _FLAT.isdisjoint(map(type, raw.values())):  # flat (``too_deep``'s own first test, without its frame)
            flat: dict[str, Any] = raw
            return flat
        return None if _json.too_deep(raw) else raw
    if kind is not str or not raw or len(raw) > max_bytes:
        return None
    try:
        value = orjson.loads(raw)
    except (orjson.JSONDecodeError, RecursionError):
        return None
    if type(value) is not dict:
        return None
    # ``text_too_deep``'s own first test without its frame: fewer brackets than levels allowed cannot nest too deep
    if raw.count("{") + raw.count("[") <= _MAX_DEPTH:
        return value
    return None if _json.too_deep(value) else value


_MAX_DEPTH = _json.MAX_DEPTH
