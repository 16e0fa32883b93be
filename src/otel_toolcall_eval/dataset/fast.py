"""A plain-code reader for dataset lines of the common shape; the pydantic model decides everything else.

The evaluator reads a million lines, and validating each through ``DatasetCase.model_validate`` cost two thirds
of scoring it. Most lines have one shape: known columns only, each holding exactly the JSON type
the model keeps as it is (a string, a boolean, an object, a list of strings or objects, a known enum value), and
the tool list of the line before. For those this module builds the same models directly: each value's type is
checked here, the rules across fields are the model's own functions (``check_call``, ``check_case``), and
nothing is coerced. Anything else (a value the model would coerce, such as ``"true"`` for a boolean, an unknown
key, a ``trajectory``, a rule that fails) gives None and the caller validates with the model, so every accepted
value and every error message stays the model's: ``models.py`` remains the one definition of the format, and
``tests/dataset/test_fast.py`` checks generated valid and invalid lines give the same case, or None.

``SharedTools`` also keeps the text of recent tool lists: a line holding the same text again is parsed around
it, and its cases share the one list object (read-only, as every reader treats a case's tools).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import orjson
from pydantic import BaseModel

from otel_toolcall_eval.dataset.models import (
    EMPTY_IS_NONE,
    ColumnError,
    DatasetCase,
    Difficulty,
    ExpectedCall,
    Slice,
    check_call,
    check_case,
    offered_names,
)

__all__ = ["SharedTools", "case_from"]

_M = TypeVar("_M", ExpectedCall, DatasetCase)
# The four slots every pydantic model instance has, set through their descriptors as ``model_construct`` does
# (it is slow: it inspects each default factory's signature on every call); ``object.__setattr__`` costs twice this.
_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def _instance(cls: type[_M], values: dict[str, Any], given: set[str]) -> _M:
    """A model instance holding ``values`` (every field, checked already); ``given``: the fields the line set."""
    model = _new(cls)
    _set_dict(model, values)
    _set_fields_set(model, given)
    _set_extra(model, None)
    _set_private(model, None)
    return model


def _defaults(
    cls: type[DatasetCase] | type[ExpectedCall],
) -> tuple[dict[str, Any], tuple[tuple[str, Callable[[], Any]], ...], frozenset[str]]:
    """From the model: its fields in order with their immutable defaults, the fields whose default comes from a
    factory (a fresh container per instance) with it, and the required fields."""
    template: dict[str, Any] = {}
    factories: list[tuple[str, Callable[[], Any]]] = []
    required: set[str] = set()
    for name, field in cls.model_fields.items():
        template[name] = None
        if field.is_required():
            required.add(name)
        elif field.default_factory is not None:
            factories.append((name, cast(Callable[[], Any], field.default_factory)))
        else:
            template[name] = field.default
    return template, tuple(factories), frozenset(required)


# What each field holds in the common shape, as a small code the loops below test inline (a function call per
# field cost more than pydantic-core's whole validation). Every field of both models is listed (a test checks).
_NAME, _TEXT, _FLAG, _OBJECT, _OBJECTS, _TEXTS, _BATCH, _OPTIONS = range(8)
_CALLS, _ALTERNATIVES, _DIFFICULTY, _SLICE, _OPTIONAL_TEXT, _NONE = range(8, 14)

CALL_KINDS: dict[str, int] = {
    "name": _NAME,
    "args": _OBJECT,
    "required_args_only": _FLAG,
    "batch": _BATCH,
    "arg_options": _OPTIONS,
    "optional_args": _TEXTS,
    "exact_args": _TEXTS,
}
CASE_KINDS: dict[str, int] = {
    "id": _NAME,
    "user_input": _TEXT,
    "message_history": _OBJECTS,
    "available_tools": _OBJECTS,
    "expected_tool_calls": _CALLS,
    "expected_no_tool": _FLAG,
    "acceptable_alternatives": _ALTERNATIVES,
    "must_not_call": _TEXTS,
    "difficulty": _DIFFICULTY,
    "slice": _SLICE,
    "source_trace_id": _OPTIONAL_TEXT,
    "notes": _OPTIONAL_TEXT,
    "session_id": _OPTIONAL_TEXT,
    "trajectory": _NONE,  # a case's trajectory options: always the model's
}
assert all(CASE_KINDS[name] == _OPTIONAL_TEXT for name in EMPTY_IS_NONE)
_CALL_TEMPLATE, _CALL_FACTORIES, _CALL_REQUIRED = _defaults(ExpectedCall)
assert {"name"} == _CALL_REQUIRED, "expected_call tests the required fields inline"
_CASE_TEMPLATE, _CASE_FACTORIES, _CASE_REQUIRED = _defaults(DatasetCase)
_DIFFICULTIES: dict[Any, Any] = {member.value: member for member in Difficulty}
_SLICES: dict[Any, Any] = {member.value: member for member in Slice}


def _plain(kind: int, value: Any) -> bool:
    """Whether ``value`` is what a field of ``kind`` keeps as it is (the kinds without a conversion)."""
    if kind == _OBJECT:
        return type(value) is dict
    if kind == _NAME:
        return type(value) is str and value != ""
    if kind == _TEXT:
        return type(value) is str
    if kind == _FLAG:
        return type(value) is bool
    if kind == _BATCH:
        return value is None or (type(value) is int and value >= 0)
    if type(value) is not list:
        return kind == _OPTIONS and type(value) is dict and all(type(v) is list for v in value.values())
    if kind == _TEXTS:
        return all(type(item) is str for item in value)
    return kind == _OBJECTS and all(type(item) is dict for item in value)


def expected_call(item: Any) -> ExpectedCall | None:
    """One expected call of the common shape; None: the model decides."""
    if type(item) is not dict:
        return None
    name = item.get("name")  # the one required field (``_CALL_REQUIRED``)
    if type(name) is not str or not name:
        return None
    values = _CALL_TEMPLATE.copy()
    values.update(item)
    if len(item) != 2 or type(item.get("args")) is not dict:  # else ``{name, args}``: most calls, checked
        for key, value in item.items():
            kind = CALL_KINDS.get(key)
            if kind is None or not _plain(kind, value):
                return None
    for key, factory in _CALL_FACTORIES:
        if key not in item:
            values[key] = factory()
    call = _new(ExpectedCall)  # ``_instance``, inline: this runs for every expected call
    _set_dict(call, values)
    _set_fields_set(call, set(item))
    _set_extra(call, None)
    _set_private(call, None)
    if values["arg_options"] or values["optional_args"] or values["exact_args"]:  # else no rule to check
        try:
            check_call(call)
        except ValueError:
            return None
    return call


def _calls(value: Any) -> list[ExpectedCall] | None:
    if type(value) is not list:
        return None
    out = []
    for item in value:
        call = expected_call(item)
        if call is None:
            return None
        out.append(call)
    return out


def case_from(data: Any, known: set[str] | None = None) -> DatasetCase | None:
    """A case of the common shape from a decoded line; None when the model must decide (it may accept the line
    after coercing a value, or give the error). ``known``: the names of the case's tools, when the caller has
    them (``SharedTools``)."""
    if type(data) is not dict:
        return None
    ident, text = data.get("id"), data.get("user_input")  # the required fields (``_CASE_REQUIRED``)
    if type(ident) is not str or not ident or type(text) is not str:
        return None
    values = _CASE_TEMPLATE.copy()
    values["id"], values["user_input"] = ident, text
    found = 2
    # the columns of most lines first, tested inline; a line with any other column takes the loop below
    tools = data.get("available_tools")
    if tools is not None:
        if not _plain(_OBJECTS, tools):
            return None
        values["available_tools"] = tools
        found += 1
    calls = data.get("expected_tool_calls")
    if calls is not None:
        calls = _calls(calls)
        if calls is None:
            return None
        values["expected_tool_calls"] = calls
        found += 1
    difficulty = data.get("difficulty")
    if difficulty is not None:
        difficulty = _DIFFICULTIES.get(difficulty) if type(difficulty) is str else None
        if difficulty is None:
            return None
        values["difficulty"] = difficulty
        found += 1
    if found != len(data) and not _other_columns(data, values):
        return None
    for key, factory in _CASE_FACTORIES:
        if key not in data:
            values[key] = factory()
    case = _instance(DatasetCase, values, set(data))
    try:
        check_case(case, known)
    except ColumnError:
        return None
    return case


_INLINE = frozenset({"id", "user_input", "available_tools", "expected_tool_calls", "difficulty"})


def _other_columns(data: dict[str, Any], values: dict[str, Any]) -> bool:
    """The columns ``case_from`` does not test inline, converted into ``values``; False: the model decides."""
    for key, value in data.items():
        if key in _INLINE:
            if value is None:
                return False  # none of them may be null
            continue
        kind = CASE_KINDS.get(key)
        if kind is None:
            return False
        if kind == _OPTIONAL_TEXT:
            if value == "":  # one spelling of "no value" (the model's ``_empty_is_none``)
                value = None
            elif value is not None and type(value) is not str:
                return False
        elif kind == _SLICE:
            if value is not None:
                value = _SLICES.get(value) if type(value) is str else None
                if value is None:
                    return False
        elif kind == _ALTERNATIVES:
            if type(value) is not list:
                return False
            alternatives = []
            for item in value:
                converted = _calls(item)
                if converted is None:
                    return False
                alternatives.append(converted)
            value = alternatives
        elif kind == _NONE:
            if value is not None:
                return False
        elif not _plain(kind, value):
            return False
        values[key] = value
    return True


_Entry = tuple[bytes, list[dict[str, Any]], set[str], int]  # a list's text, the list, its names, its brackets


class SharedTools:
    """The texts of recent tool lists (compact JSON, as ``orjson.dumps`` writes them), each with its decoded list
    and the names it offers. A line holding one of them again as its ``available_tools`` is decoded around
    it (the rest of the line in two pieces), the list is shared and its names were checked once. Bounded: a
    few lists, learnt only while lists repeat."""

    KEY = b'"available_tools":'

    def __init__(self, size: int = 8, max_bytes: int = 1 << 18) -> None:
        self._entries: list[_Entry] = []  # replaced, never changed in place: a reader needs no lock
        self._size = size
        self._max_bytes = max_bytes
        self.hits = 0
        self.misses = 0

    def split(self, text: bytes, exact: Callable[[bytes], bool], depth: int) -> tuple[dict[str, Any], set[str]] | None:
        """The decoded line with the shared list in its ``available_tools``, and the list's names; None when
        the line does not hold a known list as its top-level column, when a piece around it is not valid JSON
        or not ``exact`` (decoded by orjson as written), or when the line has more than ``depth`` brackets."""
        entries = self._entries
        if not entries:
            return None
        at = text.find(self.KEY)
        if at < 1 or text[at - 1] not in b"{,":
            return None
        start = at + len(self.KEY)
        for entry in entries:
            if text.startswith(entry[0], start):
                break
        else:
            return None
        tools_text, tools, names, brackets = entry
        head, tail = text[:at], text[start + len(tools_text) :]
        if not exact(head) or not exact(tail):
            return None
        count = head.count(b"{") + head.count(b"[") + tail.count(b"{") + tail.count(b"[")
        if count + brackets > depth:
            return None
        try:
            data, rest = _head(head), _tail(tail)
        except orjson.JSONDecodeError:
            return None
        if data is None or rest is None:
            return None  # not the line's own column: the whole line decides
        # a key given twice keeps its first place and its last value, as when the whole line is decoded (the
        # column itself included: a second ``available_tools`` in either piece wins over the list, or is the list)
        data["available_tools"] = tools
        data.update(rest)
        self.hits += 1
        return data, names

    def learn(self, text: bytes, tools: Any, exact: Callable[[bytes], bool]) -> None:
        """After a line was decoded and validated whole: remember its tool list's text, when the line holds it as
        compact JSON and it decodes ``exact``; stops trying once lists do not repeat."""
        if type(tools) is not list or not tools or (self.misses > 64 and self.misses > self.hits):
            return
        self.misses += 1
        try:
            known = offered_names(tools)
            tools_text = orjson.dumps(tools)
        except (ColumnError, TypeError):
            return
        if len(tools_text) > self._max_bytes or self.KEY + tools_text not in text or not exact(tools_text):
            return
        brackets = tools_text.count(b"{") + tools_text.count(b"[")
        self._entries = [(tools_text, tools, known, brackets), *self._entries[: self._size - 1]]


def _head(head: bytes) -> dict[str, Any] | None:
    """The columns before the list: ``{`` alone, or complete members and a comma."""
    if head.strip() == b"{":
        return {}
    if not head.endswith(b","):
        return None
    data = orjson.loads(head[:-1] + b"}")
    return data if type(data) is dict and data else None


def _tail(tail: bytes) -> dict[str, Any] | None:
    """The columns after the list: ``}`` alone, or a comma, complete members and ``}``."""
    if tail[:1] == b"}":
        return {} if not tail[1:].strip() else None
    if tail[:1] != b",":
        return None
    data = orjson.loads(b"{" + tail[1:])
    return data if type(data) is dict and data else None
