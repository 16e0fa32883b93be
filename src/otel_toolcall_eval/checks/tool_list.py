"""The tool list the model saw, as a fingerprint: a recall drop can then be traced to a tool that disappeared.

The fingerprint is the first 16 hex digits of the BLAKE2b hash of the offered tools sorted by name, each as its
name and its canonical parameter schema (``ToolDefinition.schema_key``: the schema's JSON with sorted keys; empty
when the tool was offered by name only). Descriptions are left out: a reworded description is not a changed tool
list. Equal lists hash equal in every process and release (no per-process salt).
"""

from __future__ import annotations

from collections.abc import Mapping
from hashlib import blake2b
from typing import Final

from otel_toolcall_eval.records import ToolDefinition

FINGERPRINT_DIGITS: Final = 16


def tool_list_fingerprint(tools: Mapping[str, ToolDefinition]) -> str:
    h = blake2b(digest_size=FINGERPRINT_DIGITS // 2)
    for name in sorted(tools):
        h.update(name.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
        h.update((tools[name].schema_key or "").encode("utf-8", "surrogatepass"))
        h.update(b"\x01")
    return h.hexdigest()
