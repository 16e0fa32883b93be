"""What chat/LLM spans tell about tool calls: the tool definitions the model saw, and the calls it requested.

Definitions sit on the chat span, never on the tool span, so the processor joins them per trace. Parsed
definitions are cached by their raw attribute text: every turn of every trace repeats the same string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from otel_toolcall_eval import _json
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._lru import BytesBoundedCache
from otel_toolcall_eval.conventions import reprs
from otel_toolcall_eval.conventions.shapes import SHAPES, ReprSlice, Shape, shape_for
from otel_toolcall_eval.engine.requested import Conversations
from otel_toolcall_eval.records import ToolDefinition, ToolReply

Attrs = Mapping[str, Any]

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "invoke_agent", "create_agent"})
_OI_TOOL_SCHEMA = re.compile(r"^llm\.tools\.(\d+)\.tool\.json_schema$")
_OI_CALL = re.compile(r"^llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.(id|function\.name)$")
_TL_FUNC = re.compile(r"^llm\.request\.functions\.(\d+)\.(name|description|parameters)$")
_TL_CALL = re.compile(r"^gen_ai\.completion\.(\d+)\.tool_calls\.(\d+)\.(id|name)$")


ADK_LLM_REQUEST = "gcp.vertex.agent.llm_request"  # Google ADK's legacy schema: the whole request, as JSON
# The Vercel AI SDK's legacy model-call spans (its tool definitions and requested calls are on these)
VERCEL_AI_MODEL_CALLS = frozenset({"ai.generateText.doGenerate", "ai.streamText.doStream"})
# the keys a shape row names for a span that lists the tools offered but is no model request (Semantic Kernel's
# ``sk.available_functions``): read only on a span of that row's scope
NAMES_KEYS = frozenset(row.definitions_names for row in SHAPES if row.definitions_names)
LLM_KEYS = frozenset(  # an LLM span carries at least one of these
    {
        A.GEN_AI_OPERATION_NAME,
        A.OPENINFERENCE_SPAN_KIND,
        "llm.request.type",
        A.GEN_AI_TOOL_DEFINITIONS,
        ADK_LLM_REQUEST,
        A.VERCEL_AI_OPERATION_ID,
        *NAMES_KEYS,
    }
)
MAX_NAMES = 256  # tool names read from one ``definitions_names`` attribute


def is_llm_span(attrs: Attrs) -> bool:
    """Cheap test run on every non-tool span: one set operation rejects a span that has none of the keys."""
    if LLM_KEYS.isdisjoint(attrs):
        return False
    op = attrs.get(A.GEN_AI_OPERATION_NAME)
    if op is not None and op in _LLM_OPERATIONS:
        return True
    kind = attrs.get(A.OPENINFERENCE_SPAN_KIND)
    if kind is not None and kind in ("LLM", "AGENT"):
        return True
    if "llm.request.type" in attrs or A.GEN_AI_TOOL_DEFINITIONS in attrs or ADK_LLM_REQUEST in attrs:
        return True
    return attrs.get(A.VERCEL_AI_OPERATION_ID) in VERCEL_AI_MODEL_CALLS or not NAMES_KEYS.isdisjoint(attrs)


def definition_from(item: Any) -> ToolDefinition | None:
    """Accepts the flat ``{type,name,description,parameters}`` and nested ``{type:function,function:{...}}`` shapes."""
    if not isinstance(item, Mapping):
        return None
    inner = item.get("function")
    if isinstance(inner, Mapping):
        item = inner
    name = item.get("name")
    if not isinstance(name, str) or not name:
        return None
    params = item.get("parameters")
    for alias in ("input_schema", "inputSchema", "parameters_json_schema"):  # Anthropic, MCP/Strands, Google ADK
        if params is not None:
            break
        params = item.get(alias)
    params = _json.try_loads(params)
    if isinstance(params, Mapping) and set(params) == {"json"}:  # Strands: ``inputSchema: {json: {...}}``
        params = _json.try_loads(params["json"])
    params = dict(params) if isinstance(params, Mapping) and _is_schema(params) else None
    key = None
    if params is not None:
        # A schema nested too deeply to compare or compile is this tool's problem only: the tool stays
        # known, without a schema, and the span's other definitions are kept.
        try:
            key = None if _json.too_deep(params) else _json.canonical(params)
        except (TypeError, ValueError, RecursionError):  # orjson.JSONEncodeError is a TypeError
            key = None
        if key is None:
            params = None
    description = item.get("description")
    return ToolDefinition(name, params, description if isinstance(description, str) else None, key)


def _is_schema(params: Mapping[str, Any]) -> bool:
    """A JSON Schema's ``properties`` maps names to schemas (objects or booleans). CrewAI's event listener records
    them as Python reprs (``{"city": "{'type': 'string'}"}``): such a definition names a tool, but validating against
    it would pass anything, so the tool stays known without a schema."""
    properties = params.get("properties")
    if properties is None:
        return True
    return isinstance(properties, Mapping) and all(isinstance(v, (Mapping, bool)) for v in properties.values())


# Parsed definitions (dicts, their canonical keys) cost a multiple of the raw text they came from (measured ~5x
# with tracemalloc for JSON schemas); the raw text is the key.
DEFINITION_COST_FACTOR = 8
DEFAULT_CACHE_BYTES = 16 * 1024 * 1024


class DefinitionCache:
    """From a raw definitions string to its parsed tools, bounded in entries and in (estimated) bytes: the
    strings come from trace data. Thread-safe and fork-safe."""

    def __init__(self, maxsize: int = 256, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self._items: BytesBoundedCache[str, tuple[ToolDefinition, ...]] = BytesBoundedCache(max_bytes, maxsize)

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes(self) -> int:
        return self._items.bytes

    def parse(self, raw: str) -> tuple[ToolDefinition, ...]:
        hit = self._items.get(raw)
        if hit is not None:
            return hit
        try:  # not ``try_loads``: one definition nested too deeply must not take the others with it
            value: Any = _json.loads(raw)
        except (_json.JSONDecodeError, RecursionError):
            value = None
        if isinstance(value, Mapping):
            value = [value]
        defs = tuple(d for d in (definition_from(v) for v in value) if d is not None) if isinstance(value, list) else ()
        self._items.put(raw, defs, DEFINITION_COST_FACTOR * len(raw) + 256)
        return defs

    def parse_repr(self, raw: str, cls: str) -> tuple[ToolDefinition, ...]:
        """The definition in one repr of class ``cls`` (Haystack's ``Tool(name=, description=, parameters=)``)."""
        key = f"\0repr\0{cls}\0{raw}"  # never a JSON text's key
        hit = self._items.get(key)
        if hit is not None:
            return hit
        defs = tuple(d for d in map(definition_from, reprs.calls_of([raw], cls)) if d is not None)
        self._items.put(key, defs, DEFINITION_COST_FACTOR * len(key) + 256)
        return defs


def tool_definitions(attrs: Attrs, cache: DefinitionCache, shape: Shape | None = None) -> list[ToolDefinition]:
    """Every tool definition an LLM span carries, in any of the known conventions, and where the row of its scope
    (``shape``) says its instrumentation records them in a form of its own (reprs, a list of names)."""
    out: list[ToolDefinition] = []
    if shape is not None:
        if shape.definitions_repr is not None:
            items = repr_slice(attrs, shape.definitions_repr)
            for item in items[: reprs.MAX_ITEMS] if isinstance(items, list) else ():
                if isinstance(item, str):
                    out.extend(cache.parse_repr(item, shape.definitions_repr.cls))
        names = attrs.get(shape.definitions_names) if shape.definitions_names else None
        if isinstance(names, str) and len(names) <= reprs.MAX_REPR_CHARS:
            out.extend(ToolDefinition(n) for n in (x.strip() for x in names.split(",")[:MAX_NAMES]) if n)
    for key in (A.GEN_AI_TOOL_DEFINITIONS, A.VERCEL_AI_PROMPT_TOOLS):
        raw = attrs.get(key)
        if raw is None:
            continue
        if isinstance(raw, str):
            out.extend(cache.parse(raw))
        elif isinstance(raw, (list, tuple)):  # some SDKs (the Vercel AI SDK) record one JSON string per tool
            for item in raw:
                if isinstance(item, str):
                    out.extend(cache.parse(item))
    functions: dict[str, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith("llm."):
            continue
        if isinstance(value, str) and (_OI_TOOL_SCHEMA.match(key) or key == A.OPENINFERENCE_LLM_TOOLS):
            out.extend(cache.parse(value))  # one definition per attribute, or CrewAI's listener: all in one list
        elif m := _TL_FUNC.match(key):
            functions.setdefault(m.group(1), {})[m.group(2)] = value
    for _, fields in sorted(functions.items(), key=lambda kv: int(kv[0])):
        if (d := definition_from(fields)) is not None:
            out.append(d)
    adk_request = attrs.get(ADK_LLM_REQUEST)
    if isinstance(adk_request, str):
        out.extend(_adk_definitions(adk_request))
    names = attrs.get(A.GEN_AI_AGENT_TOOLS)  # Strands' root span: the agent's tool names (a JSON list, or a list)
    if names is not None:
        names = _json.try_loads(names)
        if isinstance(names, (list, tuple)):
            out.extend(ToolDefinition(n) for n in names if isinstance(n, str) and n)
    return out


def repr_slice(attrs: Attrs, where: ReprSlice) -> Any:
    """The list of reprs a shape row points at: ``where.key`` of the JSON object in ``where.attribute`` (None when
    absent, not such an object, or longer than ``reprs.MAX_INPUT_CHARS``)."""
    raw = attrs.get(where.attribute)
    if not isinstance(raw, str) or len(raw) > reprs.MAX_INPUT_CHARS:
        return None
    value = _json.try_loads(raw)
    return value.get(where.key) if type(value) is dict else None


def _adk_definitions(raw: str) -> list[ToolDefinition]:
    """``config.tools[].function_declarations[]`` of an ADK ``llm_request`` (its legacy telemetry schema)."""
    request = _json.try_loads(raw)
    config = request.get("config") if isinstance(request, Mapping) else None
    tools = config.get("tools") if isinstance(config, Mapping) else None
    out: list[ToolDefinition] = []
    for tool in tools if isinstance(tools, list) else ():
        declarations = tool.get("function_declarations") if isinstance(tool, Mapping) else None
        for declaration in declarations if isinstance(declarations, list) else ():
            if (d := definition_from(declaration)) is not None:
                out.append(d)
    return out


def requested_calls(
    attrs: Attrs, arguments: dict[str, Any] | None = None, positional: str = ""
) -> list[tuple[str | None, str | None]]:
    """``(call_id, tool_name)`` of each tool call the model asked for in this turn (one parallel batch).

    With ``arguments``, also fills it with each identified call's arguments as the model sent them: the evidence for
    a tool span that records none (AutoGen's, beside the official OpenAI instrumentation's chat spans).
    ``positional``: the instrumentation records no call ids (its row's ``positional_calls``): a call without one
    gets its position in the conversation, after the tool messages the request carried, behind this prefix (its
    conversation's and epoch's: ``conversation_prefix``)."""
    return _requested_calls(attrs, arguments, _tool_messages(attrs) if positional else None, positional)


def _tool_messages(attrs: Attrs) -> int:
    return sum(1 for m in input_messages(attrs) if m.get("role") == "tool")


def _requested_calls(
    attrs: Attrs, arguments: dict[str, Any] | None, position: int | None, prefix: str = ""
) -> list[tuple[str | None, str | None]]:
    calls: list[tuple[str | None, str | None]] = []
    raw = attrs.get(A.GEN_AI_OUTPUT_MESSAGES)
    if raw is not None:
        messages = _json.try_loads(raw)
        if isinstance(messages, list):
            for message in messages:
                # ``type(x) is dict`` first: decoded JSON is dicts, and an ABC isinstance check runs Python code
                parts = message.get("parts") if type(message) is dict or isinstance(message, Mapping) else None
                for part in parts if isinstance(parts, list) else ():
                    if (type(part) is dict or isinstance(part, Mapping)) and part.get("type") == "tool_call":
                        calls.append((_str(part.get("id")), _str(part.get("name"))))
                        if arguments is not None and part.get("id") is not None and "arguments" in part:
                            arguments[str(part["id"])] = part["arguments"]
        if calls:
            return calls
    raw = attrs.get(A.VERCEL_AI_RESPONSE_TOOL_CALLS)  # [{toolCallId, toolName, input}]
    if raw is not None:
        items = _json.try_loads(raw)
        for item in items if isinstance(items, list) else ():
            if type(item) is dict:
                call_id = _str(item.get("toolCallId"))
                calls.append((call_id, _str(item.get("toolName"))))
                if arguments is not None and call_id is not None and "input" in item:
                    arguments[call_id] = item["input"]
        if calls:
            return calls
    indexed: dict[tuple[int, int], dict[str, str | None]] = {}
    for key, value in attrs.items():
        if not (key.startswith("llm.output_messages.") or key.startswith("gen_ai.completion.")):
            continue
        m = _OI_CALL.match(key) or _TL_CALL.match(key)
        if m:
            field = "name" if m.group(3) in ("function.name", "name") else "id"
            indexed.setdefault((int(m.group(1)), int(m.group(2))), {})[field] = _str(value)
    for (turn, index), item in sorted(indexed.items()):  # indices need not start at 0 or be contiguous
        call_id = item.get("id")
        if call_id is None and position is not None:
            call_id = f"{prefix}{position + len(calls)}"
        calls.append((call_id, item.get("name")))
        if arguments is not None and call_id is not None:
            key = f"llm.output_messages.{turn}.message.tool_calls.{index}.tool_call.function.arguments"
            if key in attrs:
                arguments[call_id] = attrs[key]
    return calls


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


_OI_MSG = re.compile(r"^llm\.input_messages\.(\d+)\.message\.(.+)$")
_OI_MSG_CALL = re.compile(r"^tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)$")


def input_messages(attrs: Attrs) -> list[dict[str, Any]]:
    """The conversation an LLM span was given, as ``{role, content, tool_calls, tool_call_id}`` messages.

    Assistant tool calls and tool results are kept: a history without them misrepresents what the model saw.
    Reads GenAI ``gen_ai.input.messages`` (parts) and OpenInference ``llm.input_messages.N.message.*``.
    """
    raw = attrs.get("gen_ai.input.messages")
    if raw is not None:
        messages = _json.try_loads(raw)
        if isinstance(messages, list):
            return [m for x in messages for m in _from_parts(x)]
    indexed: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith("llm.input_messages."):
            continue
        m = _OI_MSG.match(key)
        if not m:
            continue
        message = indexed.setdefault(int(m.group(1)), {})
        field = m.group(2)
        if field in ("role", "content", "tool_call_id"):
            message[field] = value
        elif call := _OI_MSG_CALL.match(field):
            calls = message.setdefault("_calls", {})
            name = {"id": "id", "function.name": "name", "function.arguments": "arguments"}[call.group(2)]
            calls.setdefault(int(call.group(1)), {})[name] = value
    out = []
    for _, message in sorted(indexed.items()):
        calls = message.pop("_calls", None)
        if calls:
            message["tool_calls"] = [c for _, c in sorted(calls.items())]
        if "role" in message:
            out.append(message)
    return out


def _from_parts(message: Any) -> list[dict[str, Any]]:
    """One GenAI message; its tool results become one ``tool`` message each, the shape chat APIs use."""
    if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
        return []
    parts = message.get("parts")
    if not isinstance(parts, list):  # already a plain {role, content} message
        return [{k: v for k, v in message.items() if k in ("role", "content", "tool_calls", "tool_call_id")}]
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("content", "")))
        elif kind == "tool_call":
            calls.append({"id": part.get("id"), "name": part.get("name"), "arguments": part.get("arguments")})
        elif kind == "tool_call_response":
            result = part.get("response", part.get("result"))
            results.append({"role": "tool", "tool_call_id": part.get("id"), "content": result})
    out: list[dict[str, Any]] = []
    if texts or calls or not results:
        message_out: dict[str, Any] = {"role": message["role"], "content": "\n".join(texts) if texts else None}
        if calls:
            message_out["tool_calls"] = calls
        out.append(message_out)
    return out + results


def unknown_tool_replies(attrs: Attrs) -> list[str]:
    """Call ids of the tool messages in this LLM span's input that told the model its tool does not exist.

    Frameworks that run no tool span for an unknown tool (LlamaIndex, AutoGen) still send the model a reply such
    as "Tool X not found"; with the call id it is tied to the request the earlier turn made. Called only while a
    trace has unanswered requests.
    """
    from otel_toolcall_eval.checks.outcome import unknown_tool_reply

    return [
        str(m["tool_call_id"])
        for m in input_messages(attrs)
        if m.get("role") == "tool" and m.get("tool_call_id") is not None and unknown_tool_reply(m.get("content"))
    ]


def tool_replies(
    attrs: Attrs,
    anthropic_body: bool = False,
    error_text: bool = False,
    positional: str = "",
    replies_repr: ReprSlice | None = None,
) -> list[ToolReply]:
    """The tool results this LLM span's input carried back to the model (``tool`` messages with a call id).

    ``anthropic_body``: the span's ``input.value`` is the Anthropic Messages request as sent (OpenInference's
    Anthropic instrumentation; its shape row says so), whose ``tool_result`` blocks keep the ``is_error`` flag the
    indexed messages drop. ``error_text``: the instrumentation cannot record the flag at all (its row's
    ``records_error_flag``): a reply whose text says its tool failed (``checks.outcome.error_reply``) is flagged, any
    other keeps None. ``positional``: the messages carry no call ids (its row's ``positional_calls``), so the k-th
    tool message gets the id ``<positional>k`` (this request's prefix: ``conversation_prefix``), its text and error
    flag read from the messages' reprs where recorded (``replies_repr``: Haystack's ``ToolCallResult(result=,
    error=)``). Called only while a trace has requests waiting for their result."""
    from otel_toolcall_eval.checks.outcome import error_reply

    errors: dict[str, bool] = _anthropic_errors(attrs.get("input.value")) if anthropic_body else {}
    out: list[ToolReply] = []
    for m in input_messages(attrs):
        call_id = m.get("tool_call_id")
        if call_id is None and positional and m.get("role") == "tool":
            call_id = f"{positional}{len(out)}"
        if m.get("role") == "tool" and call_id is not None:
            call_id = str(call_id)
            content = m.get("content")
            flag = errors.get(call_id) if anthropic_body else None
            if flag is None and error_text and error_reply(content):
                flag = True
            out.append(ToolReply(call_id, content, flag))
    if positional and replies_repr is not None:
        recorded = _repr_replies(attrs, replies_repr, positional)
        if recorded is not None and len(recorded) == len(out):  # the same tool messages, their content recorded
            return recorded
    return out


def _repr_replies(attrs: Attrs, where: ReprSlice, prefix: str) -> list[ToolReply] | None:
    """Each call of ``where.cls`` (``ToolCallResult(result=, error=)``) in the messages' reprs, in order, with its
    position's id; None when the messages are not recorded or not readable."""
    messages = repr_slice(attrs, where)
    if not isinstance(messages, list):
        return None
    out: list[ToolReply] = []
    for result in reprs.calls_of(messages, where.cls):
        error = result.get("error")
        flag = error if type(error) is bool else None
        out.append(ToolReply(f"{prefix}{len(out)}", result.get("result"), flag))
    return out


def span_tool_replies(span: Any, attrs: Attrs, positional: str = "") -> list[ToolReply]:
    """``tool_replies`` of a model span, read as its instrumentation scope's shape row says (``conventions.shapes``:
    the request body's error flag, or the reply's text where the scope records no flag; ``positional``: this
    request's prefix, ``conversation_prefix``, where the row matches by position)."""
    shape = shape_for(getattr(span, "instrumentation_scope", None))
    if shape is None:
        return tool_replies(attrs)
    return tool_replies(
        attrs,
        shape.anthropic_request_body,
        not shape.records_error_flag,
        positional if shape.positional_calls else "",
        shape.replies_repr,
    )


def conversation_prefix(
    conversations: Conversations, span: Any, attrs: Attrs, shape: Shape | None, max_entries: int
) -> tuple[str, str]:
    """The id prefix of this model span's positions and the prefix of the epoch it broke off from, where its scope's
    row matches calls by position (``engine.requested.Conversations``; ("", "") elsewhere)."""
    found = conversation_of(span, attrs, shape)
    return conversations.prefix(*found, max_entries) if found is not None else ("", "")


def conversation_of(span: Any, attrs: Attrs, shape: Shape | None) -> tuple[str, list[str]] | None:
    """Where its scope's row matches calls by position: this model span's conversation, as the row says (its parent
    span: Haystack's ``Agent.run``, one per run of an agent; or the trace), and what identifies each message it sent
    (the reprs the row reads its replies from, else the indexed messages: a request read one way after one read the
    other is a break, nothing tells them the same). None elsewhere. Reads the span only (no trace state)."""
    if shape is None or not shape.positional_calls:
        return None
    parent = getattr(span, "parent", None) if shape.conversation == "parent" else None
    key = f"{parent.span_id:016x}" if parent is not None else shape.conversation
    recorded = repr_slice(attrs, shape.replies_repr) if shape.replies_repr is not None else None
    if isinstance(recorded, list):
        messages = ["r" + (m if isinstance(m, str) else _json.dumps(m)) for m in recorded]  # within 1 MiB
    else:
        messages = ["i" + _json.dumps(m) for m in input_messages(attrs)]
    return key, messages


def _anthropic_errors(raw: Any) -> dict[str, bool]:
    """``tool_use_id`` -> ``is_error`` of the ``tool_result`` blocks of an Anthropic Messages request body."""
    body = _json.try_loads(raw) if isinstance(raw, str) else raw
    messages = body.get("messages") if isinstance(body, Mapping) else None
    out: dict[str, bool] = {}
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, Mapping) and block.get("type") == "tool_result" and block.get("tool_use_id"):
                out[str(block["tool_use_id"])] = block.get("is_error") is True
    return out
