"""What a judged call carries to the worker, and what the chat spans around it tell the judge.

The user's request comes from the first LLM span of the trace that records input messages: its last user
message (earlier turns of a conversation come before it), read with ``conventions.llm_spans.input_messages``.
The reaction to a failed call comes from the next LLM span's output (text and requested calls) and the tool
calls that follow. Both are read only when a judge needs them, and kept capped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from otel_toolcall_eval import _json
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.config.judge import QuestionConfig
from otel_toolcall_eval.conventions.llm_spans import input_messages
from otel_toolcall_eval.records import CallScore, ToolCallRecord

MAX_LATER_CALLS: Final = 3
MAX_FREE_TEXT_FIELDS: Final = 8
_OI_FIRST_ROLE: Final = A.OPENINFERENCE_INPUT_MESSAGES_PREFIX + "0.message.role"
_TL_FIRST_ROLE: Final = A.OPENLLMETRY_PROMPT_PREFIX + "0.role"
_TL_PROMPT = re.compile(r"^gen_ai\.prompt\.(\d+)\.(role|content)$")
_OI_OUTPUT = re.compile(
    r"^llm\.output_messages\.(\d+)\.message\.(?:(content)|tool_calls\.(\d+)\.tool_call\.function\.(name|arguments))$"
)
_TL_COMPLETION = re.compile(r"^gen_ai\.completion\.(\d+)\.(?:(content)|tool_calls\.(\d+)\.(name|arguments))$")


@dataclass(slots=True)
class Reaction:
    """What the assistant did after a failed call."""

    model_output: str | None = None
    requested_calls: list[dict[str, Any]] = field(default_factory=list)
    later_calls: list[dict[str, Any]] = field(default_factory=list)
    model_seen: bool = False

    @property
    def observed(self) -> bool:
        return self.model_seen or bool(self.later_calls)

    def as_data(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.model_seen:
            out["next_model_output"] = self.model_output or ""
            out["next_tool_calls_requested"] = self.requested_calls
        if self.later_calls:
            out["later_tool_calls"] = self.later_calls
        return out


@dataclass(slots=True)
class JudgeItem:
    """One sampled tool call and everything its questions may receive (references; copied only when asked)."""

    record: ToolCallRecord
    score: CallScore
    questions: tuple[QuestionConfig, ...]
    request: str | None = None
    tool_description: str | None = None
    available_tools: tuple[str, ...] = ()
    free_text: dict[str, str] = field(default_factory=dict)
    reaction: Reaction | None = None


def _text_of(content: Any) -> str | None:
    """Text of a message's content in any common shape: a string, GenAI parts or OpenAI content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type") in (None, "text", "input_text", "output_text"):
                text = part.get("content", part.get("text"))
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(texts) if texts else None
    return None


def user_request(attrs: Mapping[str, Any], max_chars: int) -> str | None:
    """The last user message among an LLM span's input messages (GenAI, OpenInference or OpenLLMetry).

    ``None`` when the span records no input messages (look again on the next LLM span); ``""`` when it
    records some but no user text (stop looking: the first LLM span with input is where the request is).
    """
    if A.GEN_AI_INPUT_MESSAGES in attrs or _OI_FIRST_ROLE in attrs:
        messages = input_messages(attrs)
    elif _TL_FIRST_ROLE in attrs:
        indexed: dict[int, dict[str, Any]] = {}
        for key, value in attrs.items():
            if key.startswith(A.OPENLLMETRY_PROMPT_PREFIX) and (m := _TL_PROMPT.match(key)):
                indexed.setdefault(int(m.group(1)), {})[m.group(2)] = value
        messages = [message for _, message in sorted(indexed.items())]
    else:
        return None
    for message in reversed(messages):
        if message.get("role") == "user":
            text = _text_of(message.get("content"))
            if text:
                return text[:max_chars]
    return ""


def model_reaction(attrs: Mapping[str, Any], max_chars: int) -> Reaction | None:
    """The model's output on an LLM span: its text and the calls it requested; ``None`` if none recorded."""
    reaction = Reaction(model_seen=True)
    texts: list[str] = []
    raw = attrs.get(A.GEN_AI_OUTPUT_MESSAGES)
    if raw is not None:
        messages = _json.try_loads(raw)
        for message in messages if isinstance(messages, list) else ():
            if not isinstance(message, Mapping):
                continue
            if message.get("parts") is None and (text := _text_of(message.get("content"))):
                texts.append(text)  # the plain {role, content} shape some SDKs record
            for part in message.get("parts") or ():
                if not isinstance(part, Mapping):
                    continue
                if part.get("type") == "text" and isinstance(part.get("content"), str):
                    texts.append(part["content"])
                elif part.get("type") == "tool_call":
                    reaction.requested_calls.append({"name": part.get("name"), "arguments": part.get("arguments")})
    else:
        calls: dict[tuple[int, int], dict[str, Any]] = {}
        contents: dict[int, str] = {}
        for key, value in attrs.items():
            if key.startswith(A.OPENINFERENCE_OUTPUT_MESSAGES_PREFIX) or key.startswith(
                A.OPENLLMETRY_COMPLETION_PREFIX
            ):
                m = _OI_OUTPUT.match(key) or _TL_COMPLETION.match(key)
                if m is None:
                    continue
                if m.group(2):
                    contents[int(m.group(1))] = str(value)
                else:
                    calls.setdefault((int(m.group(1)), int(m.group(3))), {})[m.group(4)] = value
        if not contents and not calls:
            return None
        texts = [contents[i] for i in sorted(contents)]
        reaction.requested_calls = [
            {"name": c.get("name"), "arguments": _json.try_loads(c.get("arguments"))} for _, c in sorted(calls.items())
        ]
    reaction.model_output = "\n".join(texts)[:max_chars] if texts else None
    return reaction


def later_call(record: ToolCallRecord, score: CallScore) -> dict[str, Any]:
    """A tool call made after a failure, as the error-handling question sees it."""
    arguments = score.arguments if score.arguments is not None else record.raw_arguments
    return {"name": record.name, "arguments": arguments, "outcome": score.outcome.value}


def free_text_arguments(arguments: Any, min_chars: int) -> dict[str, str]:
    """String arguments that read as prose (queries, bodies, titles): long enough and containing a space."""
    found: dict[str, str] = {}

    def walk(value: Any, path: str, depth: int) -> None:
        if len(found) >= MAX_FREE_TEXT_FIELDS or depth > 4:
            return
        if isinstance(value, str):
            if len(value) >= min_chars and " " in value.strip():
                found[path or "value"] = value
        elif isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{path}.{k}" if path else str(k), depth + 1)
        elif isinstance(value, list):
            for i, v in enumerate(value[:20]):
                walk(v, f"{path}[{i}]", depth + 1)

    walk(arguments, "", 0)
    return found
