"""Argument normalisation for comparing calls: keys sorted, strings case- and whitespace-folded.

Returns a string key, never a hash of the raw value, so lists and dicts in arguments cannot crash the
comparison (two peer libraries crash hashing exactly that).
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson


def _fold(value: Any) -> Any:
    # Exact-type tests first: JSON from orjson has only these types, and ``type(x) is`` is cheaper than
    # ``isinstance``; anything else (subclasses, tuples) takes the general branch below.
    kind = type(value)
    if kind is str:
        return " ".join(value.split()).casefold()
    if kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        out = {}
        for k, v in value.items():
            kv = type(v)
            if kv is str:
                v = " ".join(v.split()).casefold()
            elif kv is list:
                v = [" ".join(x.split()).casefold() if type(x) is str else _fold(x) for x in v]
            elif kv is float:  # what ``_fold_general`` does, without its two calls and four isinstance checks
                if v.is_integer():
                    v = int(v)
            elif not (kv is int or kv is bool or v is None):
                v = _fold(v)
            out[k if type(k) is str else str(k)] = v
        return out
    if kind is list:
        return [_fold(v) for v in value]
    return _fold_general(value)


def _fold_general(value: Any) -> Any:
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
    """One string that is equal for two calls exactly when they are the same call after normalisation.

    Never raises: a value nested too deeply even to ``repr`` (untrusted input: a run file's arguments as a JSON
    value a thousand levels deep) gets a key of its own, so it is never "the same" as another call."""
    try:
        if arguments is None:
            body = raw if isinstance(raw, str) else repr(raw)
            return name + "\x00raw\x00" + body
        try:
            return name + "\x00" + orjson.dumps(_fold(arguments), option=orjson.OPT_SORT_KEYS, default=str).decode()
        except (TypeError, orjson.JSONEncodeError, RecursionError):  # mixed key types, or nesting too deep
            return name + "\x00repr\x00" + repr(arguments)
    except RecursionError:
        return f"{name}\x00deep\x00{next(_UNCOMPARABLE)}"


_UNCOMPARABLE = itertools.count()  # ``next`` on it is atomic (one C call under the GIL)
