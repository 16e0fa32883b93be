"""Run files: what the agent did, one JSONL line per case, turned into the records the online path scores.

A line is ``{"id": ..., "tool_calls": [...]}`` with optional ``latency_ms``, ``tokens`` (a number, or an object
of numbers whose ``total`` or sum counts), ``error`` (the run failed: every call counts as failed) and
``answered`` (false: the run did not end with the agent's answer); other keys are ignored (harness metadata).
A call is any of:

- ``{"name", "arguments"}``: arguments an object or a JSON string (the GenAI ``tool_call`` part has this shape),
- an OpenAI ``tool_calls`` item: ``{"id", "type": "function", "function": {"name", "arguments"}}``,
- an Anthropic ``tool_use`` block: ``{"type": "tool_use", "id", "name", "input"}``,

each with an optional ``batch`` (calls of one model turn share it), ``error`` (this call failed: a string, or
``{"type", "message", "status", "error_type", "retry"}``, what ``harvest --runs-out`` writes from the span's
exception, status, ``error.type`` and rejected-input evidence), ``result`` (what the tool returned) and
``latency_ms`` (informational). Parsing is plain code, no pydantic: this
runs once per case on the hot path. Arguments stay as recorded; ``checks.parse`` decides later whether they
parse, exactly as it does for spans.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from otel_toolcall_eval._json import MAX_DEPTH
from otel_toolcall_eval.dataset.errors import LocatedError
from otel_toolcall_eval.records import NO_ERROR, ErrorEvidence, ToolCallRecord, new_tool_call_record


class RunFileError(LocatedError):
    """A run file is unreadable or a line in it is malformed."""


@dataclass(slots=True)
class RunCase:
    id: str
    line: int
    calls: list[ToolCallRecord]
    batches: list[int | None] | None  # None when no call carries a batch
    latency_ms: float | None = None
    tokens: float | None = None
    error: str | None = None
    answered: bool | None = None  # False: the run did not end with the agent's answer (``harvest`` knows)

    def turns(self) -> list[int | None] | None:
        """The ``batch`` labels as 1-based model turns, in the order each label first appears (a call without
        one: turn unknown, None), as the processor numbers the turns of a trace; None when no call has a batch."""
        if self.batches is None:
            return None
        order: dict[int, int] = {}
        out: list[int | None] = []
        for b in self.batches:
            if b is None:
                out.append(None)
                continue
            turn = order.get(b)
            if turn is None:
                turn = order[b] = len(order) + 1
            out.append(turn)
        return out


def iter_run_lines(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a run file with their line numbers, unparsed."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the generator
    except OSError as exc:
        raise RunFileError(path, None, None, f"cannot read: {exc.strerror}") from None
    with handle:
        for number, text in enumerate(handle, start=1):
            if text.strip():
                yield number, text


def iter_run(path: str | Path) -> Iterator[RunCase]:
    """Stream a run file, one case per non-blank line."""
    for number, text in iter_run_lines(path):
        yield parse_run_line(path, number, text)


def parse_run_line(path: str | Path, number: int, text: bytes | str) -> RunCase:
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as exc:  # also JSON nested deeper than orjson's 1,024 levels
        raise RunFileError(path, number, None, f"not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise RunFileError(path, number, None, "a run line must be a JSON object")
    case_id = obj.get("id")
    if isinstance(case_id, int) and not isinstance(case_id, bool):
        case_id = str(case_id)
    if not isinstance(case_id, str) or not case_id:
        raise RunFileError(path, number, "id", "required: the dataset case's id (a non-empty string)")
    raw_calls = obj.get("tool_calls", _MISSING)
    if raw_calls is _MISSING:
        raise RunFileError(path, number, "tool_calls", "required (use [] when the agent called no tool)")
    if raw_calls is None:
        raw_calls = []
    if not isinstance(raw_calls, list):
        raise RunFileError(path, number, "tool_calls", "must be a list of calls")
    calls: list[ToolCallRecord] = []
    batches: list[int | None] = []
    any_batch = False
    for i, item in enumerate(raw_calls):
        record, batch = _call(path, number, i, item)
        calls.append(record)
        batches.append(batch)
        any_batch = any_batch or batch is not None
    entry = RunCase(case_id, number, calls, batches if any_batch else None)
    if len(obj) > 2:  # the optional keys: skipped cheaply when absent
        entry.latency_ms = _number(path, number, "latency_ms", obj.get("latency_ms"))
        entry.tokens = _tokens(path, number, obj.get("tokens"))
        entry.error = _error(obj.get("error"))
        answered = obj.get("answered")
        if answered is not None:
            if not isinstance(answered, bool):
                raise RunFileError(path, number, "answered", "must be true or false")
            entry.answered = answered
        if entry.error is not None:
            # the line does not say which call failed: each counts as failed (fail closed), so none is a
            # prerequisite or a confirmation for the policies; a call with its own error keeps it
            evidence = ErrorEvidence(status_error=True, status_description=entry.error)
            for record in calls:
                if record.error is NO_ERROR:
                    record.error = evidence
    return entry


_MISSING: Any = object()


def _call(path: str | Path, line: int, i: int, item: Any) -> tuple[ToolCallRecord, int | None]:
    where = f"tool_calls.{i}"
    if not isinstance(item, dict):
        raise RunFileError(path, line, where, "a call must be an object")
    function = item.get("function")
    if isinstance(function, dict):  # OpenAI
        name = function.get("name")
        raw = function.get("arguments")
        convention = "openai"
        name_field = f"{where}.function.name"
    elif "input" in item and item.get("type", "tool_use") == "tool_use":  # Anthropic
        name = item.get("name")
        raw = item.get("input")
        convention = "anthropic"
        name_field = f"{where}.name"
    else:
        name = item.get("name")
        raw = item.get("arguments")
        convention = "offline"
        name_field = f"{where}.name"
    if not isinstance(name, str) or not name:
        raise RunFileError(path, line, name_field, "required: the tool's name")
    call_id = item.get("id")
    batch = item.get("batch")
    if batch is not None and (not isinstance(batch, int) or isinstance(batch, bool)):
        raise RunFileError(path, line, f"{where}.batch", "must be an integer")
    error = NO_ERROR
    result: Any = None
    recorded = False
    if len(item) > 2:  # the optional keys of a harvested call: skipped cheaply when absent
        failure = item.get("error")
        if failure is not None and failure is not False:
            error = _call_error(path, line, f"{where}.error", failure)
        if "result" in item:
            result, recorded = item["result"], True
    record = new_tool_call_record(
        name, raw, result, recorded, error, call_id if isinstance(call_id, str) else None, convention, None, "", "",
        None, None, None,
    )  # fmt: skip
    return record, batch


_ERROR_KEYS = ("type", "message", "status", "error_type", "retry")


def _call_error(path: str | Path, line: int, where: str, value: Any) -> ErrorEvidence:
    """One call's ``error``: a string (a failure so described) or the evidence object ``harvest`` writes."""
    if value is True:
        return ErrorEvidence(status_error=True)
    if isinstance(value, str):
        return ErrorEvidence(status_error=True, status_description=value or None)
    if not isinstance(value, dict):
        raise RunFileError(path, line, where, "must be a string or an object (type, message, status, ...)")
    for key in _ERROR_KEYS:
        part = value.get(key)
        if part is not None and not isinstance(part, str) and not (key == "status" and isinstance(part, bool)):
            raise RunFileError(path, line, f"{where}.{key}", "must be a string" + (" or a boolean" * (key == "status")))
    status = value.get("status")
    exception_type = value.get("type") or None
    message = value.get("message") or None
    error_type = value.get("error_type") or None
    retry = value.get("retry") or None
    if status is None and not (exception_type or error_type or retry):
        status = message or True  # {"message": ...} alone: a failure so described
        message = None
    return ErrorEvidence(
        status_error=bool(status),
        status_description=status if isinstance(status, str) and status else None,
        exception_type=exception_type,
        exception_message=message,
        error_type=error_type,
        retry_cause=retry,
    )


def _number(path: str | Path, line: int, field: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RunFileError(path, line, field, "must be a number")
    return float(value)


def _tokens(path: str | Path, line: int, value: Any) -> float | None:
    if isinstance(value, dict):
        if "total" in value:
            return _number(path, line, "tokens.total", value["total"])
        total = 0.0
        for key, part in value.items():
            number = _number(path, line, f"tokens.{key}", part)
            total += number or 0.0
        return total
    return _number(path, line, "tokens", value)


def _error(value: Any) -> str | None:
    if value is None or value is False or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("message", "type", "code"):
            if isinstance(value.get(key), str):
                return str(value[key])
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError: nested deeper than it writes
        return f"an error value nested deeper than {MAX_DEPTH} levels"
