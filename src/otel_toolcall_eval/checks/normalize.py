"""Argument normalisation for comparing calls: keys sorted, strings case- and whitespace-folded.

Returns a string key, never a hash of the raw value, so lists and dicts in arguments cannot crash the
comparison (two peer libraries crash hashing exactly that).
"""

from __future__ import annotations

from typing import Any

import orjson


def _fold(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split()).casefold()
    if isinstance(value, dict):
        return {str(k): _fold(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_fold(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def arguments_key(name: str, arguments: dict[str, Any] | None, raw: Any = None) -> str:
    """One string that is equal for two calls exactly when they are the same call after normalisation."""
    if arguments is None:
        body = raw if isinstance(raw, str) else repr(raw)
        return name + "\x00raw\x00" + body
    try:
        return name + "\x00" + orjson.dumps(_fold(arguments), option=orjson.OPT_SORT_KEYS, default=str).decode()
    except (TypeError, orjson.JSONEncodeError):  # non-string keys mixed with others, or nesting too deep
        return name + "\x00repr\x00" + repr(arguments)
