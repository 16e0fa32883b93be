"""Same-call check: a tool span directly around another tool span of the same call is a second instrumentation.

Two instrumentations of one call (an MCP client span around the in-process server span, an OpenInference TOOL
span around a framework's ``execute_tool`` span) would otherwise count the call twice, and the second copy
would be flagged a duplicate and fail the trace's composite. The inner span ends first and carries the scores;
the outer one is matched here by tool name and normalised arguments (a span that recorded no arguments does
not contradict the other).
"""

from __future__ import annotations

from typing import Any

from otel_toolcall_eval import _json
from otel_toolcall_eval.checks.normalize import arguments_key
from otel_toolcall_eval.records import call_digest

_SHORT_KEY = 64  # characters: a longer normalised call is kept as its digest


def same_call_key(key: str) -> str | bytes:
    """What a trace keeps of a scored tool span's normalised call, to match a wrapping span against: the key
    when short, else its 16-byte digest (``records.call_digest``: the argument text is never kept)."""
    return key if len(key) <= _SHORT_KEY else call_digest(key)


def wraps_same_call(name: str, raw_arguments: Any, inner_name: str, inner_key: str | bytes | None) -> bool:
    """Whether a tool span named ``name`` with ``raw_arguments`` records the same call as its scored child, whose
    normalised arguments are ``inner_key`` (``same_call_key`` of the child's ``arguments_key``)."""
    if name != inner_name:
        return False
    if inner_key is None or inner_key in (
        same_call_key(arguments_key(name, None, None)),
        same_call_key(arguments_key(name, None, "")),
    ):
        return True  # the child recorded no arguments
    if raw_arguments is None or raw_arguments == "":
        return True
    outer = raw_arguments if isinstance(raw_arguments, dict) else _json.try_loads(raw_arguments)
    if not isinstance(outer, dict):
        return False
    return same_call_key(arguments_key(name, outer)) == inner_key
