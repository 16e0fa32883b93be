"""A bounded reading of the Python reprs some instrumentations record where JSON belongs.

OpenInference's Haystack instrumentation records an LLM span's input as a JSON object whose items are the reprs of
Haystack's dataclasses: ``Tool(name='get_weather', description='...', parameters={...}, function=<function ...>)``
for each tool offered, ``ChatMessage(_role=<ChatRole.TOOL: 'tool'>, _content=[ToolCallResult(result='...',
origin=ToolCall(...), error=True)], ...)`` for each message. The tool definitions and the replies the model got back
are recorded there and nowhere else. Which attribute, which key of it and which class is read is the shape table's
row of the span's scope (``shapes.ReprSlice``), never guessed from a value.

Trace data is untrusted, so this evaluates nothing and is bounded in bytes and work:

- a repr longer than ``MAX_REPR_CHARS`` is not read, nor a list of more than ``MAX_ITEMS`` of them;
- objects in angle brackets outside string literals (``<function get_weather at 0x7f..>``, ``<ChatRole.TOOL:
  'tool'>``) become ``None`` in one linear scan;
- what is left is parsed by CPython's own parser (``ast.parse``, no evaluation; it refuses more than ~200 nested
  brackets) into a syntax tree that ``_value`` walks into plain values: literals, lists, tuples, dicts, and a call
  ``Name(k=v, ...)`` as a dict of its keyword arguments with its class name under ``CLASS_KEY``. Names, operators
  and attribute access have no value (None).

Cost: linear in the text (the scan, the parser, the walk over at most ``MAX_REPR_CHARS`` characters' worth of
nodes), once per distinct repr (``calls_of`` keeps what each gave, bounded in bytes).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any, Final

from otel_toolcall_eval._lru import BytesBoundedCache

CLASS_KEY: Final = "__class__"  # a call's class name, in the dict of its keyword arguments
MAX_REPR_CHARS: Final = 64 * 1024  # one repr (one tool, one message): longer is not read
MAX_ITEMS: Final = 256  # reprs read from one list (tools offered, messages of a request)
MAX_INPUT_CHARS: Final = 1024 * 1024  # the JSON attribute holding the list: longer is not decoded
# Every request of a conversation carries its whole history again (Haystack's ``messages``): what each repr holds is
# kept by its text, so a conversation's k-th request parses its new messages only, not k of them. What the walk gives
# costs a multiple of the text (dicts, lists: ~5x measured for definitions, see llm_spans); bounded in bytes.
FOUND_COST_FACTOR: Final = 8
_FOUND: BytesBoundedCache[tuple[str, str], tuple[dict[str, Any], ...]] = BytesBoundedCache(8 * 1024 * 1024, 4096)


def read(text: str) -> Any:
    """The plain value of one repr; None when it is too long, not a repr of literals and calls, or nests too deeply.
    Never raises."""
    if len(text) > MAX_REPR_CHARS:
        return None
    cleaned = _without_angle_objects(text)
    if cleaned is None:
        return None
    try:
        tree = ast.parse(cleaned, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # ValueError: a NUL byte
        return None
    try:
        return _value(tree.body)
    except RecursionError:
        return None


def calls_of(items: Any, cls: str) -> Iterator[dict[str, Any]]:
    """Every call of ``cls`` in the reprs ``items`` (a list of strings), as its keyword arguments, in the order they
    are written: a repr that is one (``Tool(...)``), or calls nested in one (the ``ToolCallResult(...)`` inside a
    ``ChatMessage(...)``). A repr that does not mention ``cls`` is not parsed."""
    if not isinstance(items, list):
        return
    opening = cls + "("
    for item in items[:MAX_ITEMS]:
        if isinstance(item, str) and opening in item:
            key = (cls, item)
            found = _FOUND.get(key)
            if found is None:
                found = tuple(_found(read(item), cls))
                _FOUND.put(key, found, FOUND_COST_FACTOR * len(item) + 256)
            yield from found


def _found(value: Any, cls: str) -> Iterator[dict[str, Any]]:
    """The calls of ``cls`` in a read value, in document order (iterative: the value nests at most as deep as the
    parser allowed)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            if node.get(CLASS_KEY) == cls:
                yield node
            else:
                stack.extend(reversed(list(node.values())))
        elif type(node) is list:
            stack.extend(reversed(node))


def _without_angle_objects(text: str) -> str | None:
    """``text`` with each ``<...>`` outside string literals replaced by ``None`` (nested ones too); None when a
    string literal or an angle bracket is left open."""
    out: list[str] = []
    start = 0  # of the text not copied yet
    depth = 0  # angle brackets open
    quote = ""  # the open string literal's quote character
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "<":
            if depth == 0:
                out.append(text[start:i])
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
            if depth == 0:
                out.append("None")
                start = i + 1
        i += 1
    if quote or depth:
        return None
    out.append(text[start:])
    return "".join(out)


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        value = node.value  # bytes, complex and Ellipsis have no plain value
        return value if value is None or isinstance(value, (str, int, float, bool)) else None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            k = _value(key) if key is not None else None
            if isinstance(k, (str, int, float, bool)) or k is None:
                out[k] = _value(item)
        return out
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name is None:  # not a repr's ``Class(...)``: a call of a call, a lambda, a subscript
            return None
        call: dict[str, Any] = {CLASS_KEY: name}
        for keyword in node.keywords:
            if keyword.arg is not None:
                call[keyword.arg] = _value(keyword.value)
        return call
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):  # a negative number
        operand = _value(node.operand)
        return -operand if isinstance(operand, (int, float)) and not isinstance(operand, bool) else None
    return None
