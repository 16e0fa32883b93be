"""JSON helpers shared by conventions and checks: orjson on the hot path, canonical keys for caches."""

from __future__ import annotations

from typing import Any

import orjson

JSONDecodeError = orjson.JSONDecodeError


def loads(text: str | bytes) -> Any:
    return orjson.loads(text)


def dumps(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def canonical(value: Any) -> str:
    """Sorted-key JSON: equal schemas give equal strings, whatever their key order."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str).decode()


def try_loads(value: Any) -> Any:
    """Decode a JSON string; return anything else (or an undecodable string) unchanged."""
    if isinstance(value, (str, bytes)):
        try:
            return orjson.loads(value)
        except (orjson.JSONDecodeError, RecursionError, TypeError):
            return value
    return value
