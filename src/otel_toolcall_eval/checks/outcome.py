"""Error classification: ``malformed_call`` (a model or prompt bug) versus ``execution_failed`` (infrastructure).

Evidence is read in order of how directly it blames the call: the arguments themselves (parse, unknown
tool, schema), then a tool that rejected its input, then any recorded failure, then an empty result.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, Final, TypeGuard

from otel_toolcall_eval import _json
from otel_toolcall_eval.records import NO_ERROR, ErrorEvidence, Outcome

# What frameworks write when they refuse a call before the tool runs. Matched case-insensitively anywhere in the
# first ``_MAX_TEXT`` characters of a failed span's status description, exception message or result (MCP's
# ``isError`` result), never on a succeeding span's result: a tool may well return the words "validation failed".
#   Strands: ValueError "Validation failed for input parameters: ..."; CrewAI: "Arguments validation failed: ...";
#   pydantic (LlamaIndex, FastMCP, AutoGen, LangChain): "1 validation error for ..."; the Anthropic SDK: "Invalid
#   arguments for function ..."; DSPy's ``Tool``: "Arg unit is invalid: ..."; Semantic Kernel, parsing an argument
#   into its parameter's type: "Parameter unit is expected to be parsed to <enum 'Unit'> but is not."; BeeAI's
#   ``ToolInputValidationError``: "Tool input validation error" (all its exception says with outputs hidden).
_INPUT_REJECTED = re.compile(
    r"validation failed|\bvalidation errors? for\b|\binvalid (?:tool )?(?:arguments|params|parameters)\b|"
    r"\barg [\w.-]{1,100} is invalid\b|\bparameter [\w.-]{1,100} is expected to be parsed to\b|"
    r"\binput validation error\b",
    re.I,
)
# What frameworks write for a call of a tool the agent does not have, as an error or as the result text the model
# gets back on a span marked OK, anywhere in the reply ("Error: ..." first, say). Strands: "Unknown tool: X";
# smolagents: "Unknown tool X, should be one of"; LlamaIndex: "Tool X not found. Please select a tool that is
# available."; CrewAI: "Tool not found"; AutoGen: "Tool 'X' not found in any workbench"; Google ADK: "... failed as
# no tool with that name is available"; LangGraph's ToolNode: "Error: X is not a valid tool, try one of [...]".
_UNKNOWN_TOOL = re.compile(
    r"\bunknown tool\b|\btool\s+(?:'[^']{0,100}'\s*|\"[^\"]{0,100}\"\s*|`[^`]{0,100}`\s*|[\w.:-]{1,100}\s+)?"
    r"not found\b|\bnot found in any workbench\b|\bno tool with that name\b|\bis not a valid tool\b",
    re.I,
)
# What frameworks send the model back when a tool raised, read only where the instrumentation cannot record the
# reply's error flag (its shape row says so: ``records_error_flag``), at the start of the reply: the Anthropic SDK's
# tool runner sends ``repr(exc)`` ("ConnectionError('census service unreachable')"); the MCP Python SDK's server
# "Error executing tool get_population: ..."; LangGraph's ToolNode and many loops "Error: ...". An ordinary result
# that merely mentions an error later on is not one.
_ERROR_REPLY = re.compile(
    r"\s*(?:[A-Za-z_][\w.]{0,100}(?:Error|Exception)(?:Group)?\(|(?i:error\s*:|error executing tool\b))"
)
_MAX_TEXT = 512
# what a reply's error flag stands for (Anthropic's ``is_error``, MCP's ``isError``), where the next request carries
# it or its text tells it: ``error.type = tool_error``, as the MCP conventions write it on a span
REPLY_ERROR: Final = ErrorEvidence(error_type="tool_error")


def reply_text(value: Any) -> Any:
    """A reply made of content blocks (``[{"type": "text", "text": ...}]``, as a list or its JSON, MCP's and
    Anthropic's shape) as its text; any other value as it is."""
    if isinstance(value, str):
        if not value.startswith("[") or '"text"' not in value[:_MAX_TEXT]:
            return value
        value = _json.try_loads(value[: 64 * 1024])
        if not isinstance(value, list):
            return value if isinstance(value, str) else None
    if isinstance(value, list):
        texts = [b.get("text") for b in value if isinstance(b, dict)]
        return "\n".join(t for t in texts if isinstance(t, str)) or None
    return value


def _mentions_tool(text: Any) -> TypeGuard[str]:
    """Cheap pre-filter (runs on every call's result): every unknown-tool phrase says "tool" or "workbench"."""
    return isinstance(text, str) and ("ool" in text or "OOL" in text or "orkbench" in text)


def reports_unknown_tool(error: ErrorEvidence, result: Any, result_recorded: bool) -> bool:
    """The framework said the tool does not exist (as an error, or as the result the model was given)."""
    if error is NO_ERROR:  # no failure recorded (most calls): only the result can say it
        if not result_recorded:
            return False  # nothing was said: the common case of a run line or a span without a result
        return _says_unknown_tool(reply_text(result))
    if not (result_recorded or error.status_description or error.exception_message):
        return False
    for text in (error.status_description, error.exception_message, reply_text(result) if result_recorded else None):
        if _says_unknown_tool(text):
            return True
    return False


def _says_unknown_tool(text: Any) -> bool:
    return _mentions_tool(text) and _UNKNOWN_TOOL.search(text[:_MAX_TEXT]) is not None


def reports_input_rejected(error: ErrorEvidence, result: Any, result_recorded: bool) -> bool:
    """A failed span whose error (or, for MCP's ``isError``, result) says the framework rejected the arguments."""
    if not error.any:
        return False
    for text in (error.status_description, error.exception_message, reply_text(result) if result_recorded else None):
        if isinstance(text, str) and text and _INPUT_REJECTED.search(text[:_MAX_TEXT]):
            return True
    return False


def unknown_tool_reply(text: Any) -> bool:
    """A tool message sent back to the model that says the requested tool does not exist."""
    text = reply_text(text)
    return _mentions_tool(text) and bool(_UNKNOWN_TOOL.search(text[:_MAX_TEXT]))


def error_reply(text: Any) -> bool:
    """A reply sent back to the model that says its tool failed (``_ERROR_REPLY``): the evidence of a call's error
    where the instrumentation cannot record the reply's error flag."""
    text = reply_text(text)
    return isinstance(text, str) and bool(_ERROR_REPLY.match(text[:_MAX_TEXT]))


def _short(type_name: str) -> str:
    return type_name.rsplit(".", 1)[-1]


def classify_outcome(
    parse_ok: bool | None,
    tool_known: bool | None,
    schema_valid: bool | None,
    error: ErrorEvidence,
    result: Any,
    result_recorded: bool,
    input_error_types: Collection[str],
    empty_results: Collection[str],
) -> tuple[Outcome, str | None]:
    """Return the outcome and the evidence that decided it (None for success)."""
    if parse_ok is False:
        return Outcome.MALFORMED_CALL, "parse"
    if tool_known is False:
        return Outcome.MALFORMED_CALL, "unknown_tool"
    if schema_valid is False:
        return Outcome.MALFORMED_CALL, "schema"
    if error is NO_ERROR:  # no failure recorded (the common case): only an empty result can still tell
        if result_recorded and _is_empty(result, empty_results):
            return _EMPTY
        return _SUCCESS
    if error.retry_cause is not None:
        return Outcome.MALFORMED_CALL, "input_rejected"
    for name in (error.exception_type, error.error_type):
        if name and _short(name) in input_error_types:
            return Outcome.MALFORMED_CALL, "input_rejected"
    if reports_input_rejected(error, result, result_recorded):
        return Outcome.MALFORMED_CALL, "input_rejected"
    if error.exception_type:
        return Outcome.EXECUTION_FAILED, "exception"
    if error.error_type:
        return Outcome.EXECUTION_FAILED, "error.type"
    if error.status_error:
        return Outcome.EXECUTION_FAILED, "status"
    if result_recorded and _is_empty(result, empty_results):
        return Outcome.EMPTY_RESULT, "result_text"
    return _SUCCESS


_SUCCESS: tuple[Outcome, str | None] = (Outcome.SUCCESS, None)
_EMPTY: tuple[Outcome, str | None] = (Outcome.EMPTY_RESULT, "result_text")


def _is_empty(result: Any, empty_results: Collection[str]) -> bool:
    if result is None:
        return True
    if isinstance(result, str):
        return result.strip() in empty_results
    if isinstance(result, (list, tuple, dict)):
        return len(result) == 0
    return False
