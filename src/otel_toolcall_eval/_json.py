"""JSON helpers shared by conventions and checks: orjson on the hot path, canonical keys for caches."""

from __future__ import annotations

from typing import Any

import orjson

JSONDecodeError = orjson.JSONDecodeError

# How deep untrusted JSON (arguments, tool definitions, messages, dataset cells) may nest. orjson parses up to
# 1024 levels, but jsonschema-rs stops at 255 ("Recursion limit reached"), orjson.dumps at 254, and every
# recursive walk in Python costs frames: anything deeper is refused where it is parsed, so no later walk
# can fail on it. Real tool arguments nest a handful of levels.
MAX_DEPTH = 128
_CONTAINERS = (dict, list, tuple)
_CONTAINER_TYPES = frozenset(_CONTAINERS)


def loads(text: str | bytes) -> Any:
    return orjson.loads(text)


def dumps(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def canonical(value: Any) -> str:
    """Sorted-key JSON: equal schemas give equal strings, whatever their key order."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str).decode()


def try_loads(value: Any) -> Any:
    """Decode a JSON string; return anything else (or an undecodable or too deeply nested string) unchanged."""
    if isinstance(value, (str, bytes)):
        try:
            decoded = orjson.loads(value)
        except (orjson.JSONDecodeError, RecursionError, TypeError):
            return value
        return value if text_too_deep(value, decoded) else decoded
    return value


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether containers nest more than ``limit`` levels (``{"a": 1}`` is one level). Iterative: any depth."""
    kind = type(value)
    if kind is dict:  # the usual arguments: a flat object, decided in one pass in C without the walk's stack
        if _CONTAINER_TYPES.isdisjoint(map(type, value.values())):
            return limit < 1
    elif kind not in _CONTAINERS:
        return False
    stack = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        current, depth = pop()
        if depth > limit:
            return True
        for item in current.values() if type(current) is dict else current:
            if type(item) in _CONTAINERS:
                push((item, depth + 1))
    return False


def text_too_deep(text: str | bytes, value: Any, limit: int = MAX_DEPTH) -> bool:
    """``too_deep`` for a value decoded from ``text``: fewer brackets than levels allowed (the usual case,
    one C-level count) means it cannot be, and only then is the value walked."""
    if isinstance(text, bytes):
        if text.count(b"{") + text.count(b"[") <= limit:
            return False
    elif text.count("{") + text.count("[") <= limit:
        return False
    return too_deep(value, limit)
