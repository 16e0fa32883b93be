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
        text = _folded_text(arguments)
        if text is not None:
            return name + "\x00" + text
        try:
            return name + "\x00" + orjson.dumps(_fold(arguments), option=orjson.OPT_SORT_KEYS, default=str).decode()
        except (TypeError, orjson.JSONEncodeError, RecursionError):  # mixed key types, or nesting too deep
            return name + "\x00repr\x00" + repr(arguments)
    except RecursionError:
        return f"{name}\x00deep\x00{next(_UNCOMPARABLE)}"


# Performance: the common arguments (ASCII, no float, single spaces) need no folding walk: their sorted JSON text
# already is the normalised form, or its lower-cased copy. ``_fold`` over the arguments of the benchmarks' agent
# trace costs ~20 k instructions a call in the pure build (a Python step per value; split, join and casefold per
# string), ``_folded_text`` ~10 k (one orjson call and a few scans of the text in C; ``arguments_key`` 26 k -> 12 k); a
# miss adds at most those ~10 k.
def _folded_text(arguments: Any) -> str | None:
    """``orjson.dumps(_fold(arguments), option=OPT_SORT_KEYS)`` decoded, computed on the text instead of by the walk,
    or None when the text cannot tell (then the walk decides).

    Exact when it answers: the text is ASCII (casefold is lower), has no backslash (every control character,
    whitespace other than the space included, would be escaped, and every quote is a string's delimiter), no two
    spaces in a row and no space next to a quote (orjson writes no space outside strings: each string is already
    split and joined by single spaces), and no float (``_fold`` turns 1.0 into 1; orjson writes every float with a
    "." or an exponent's "e+" or "e-", and no "." nor either pair means none): folding changes no string but for
    its case. Then the text is the normalised form when it has no upper case; or its lower-cased copy when the
    only object is the top one (one "{") and its keys have no upper case (``_fold`` keeps keys as they are)."""
    try:
        text = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    except (TypeError, RecursionError):  # orjson.JSONEncodeError is a TypeError: odd types, non-str keys, depth
        return None
    # single characters first (a scan in C), pairs only when the character is there; a "." anywhere sends the
    # arguments to the walk (a float's, or one in a string: the walk decides), and so does an exponent (orjson
    # writes a float's as "e+" or "e-": 1e+16, 1e-7)
    if not text.isascii() or "\\" in text or "." in text:
        return None
    if " " in text and ("  " in text or '" ' in text or ' "' in text):
        return None
    if ("+" in text and "e+" in text) or ("-" in text and "e-" in text):
        return None
    lower = text.lower()
    if lower == text:
        return text
    if text.count("{") == 1 and type(arguments) is dict:
        keys = "".join(arguments)
        if keys.lower() == keys:
            return lower
    return None


_UNCOMPARABLE = itertools.count()  # ``next`` on it is atomic (one C call under the GIL)
