"""The plain-code dataset reader (``dataset.fast``) against the model, the one definition of the format.

Every line, valid or not, must give the same case (same values, same fields set, same field order, same types),
or the same error, whether it is read through the fast path and the shared tool lists or through
``DatasetCase.model_validate`` alone. Lines are generated near the common shape with every kind of deviation the
model has a rule or a coercion for.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from otel_toolcall_eval.dataset import io as dataset_io
from otel_toolcall_eval.dataset.errors import DatasetError
from otel_toolcall_eval.dataset.fast import CALL_KINDS, CASE_KINDS, SharedTools, case_from, expected_call
from otel_toolcall_eval.dataset.models import DatasetCase, ExpectedCall

_MISSING: Any = object()

TOOLS = [
    {"type": "function", "name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}},
    {"type": "function", "function": {"name": "book", "parameters": {"type": "object"}}},
    {"name": "pay", "input_schema": {"type": "object"}},
]
NAMES = ["search", "book", "pay", "other", ""]


def _pick(*options: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(options)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.just(_MISSING), strategy)


_values = st.one_of(st.text(max_size=4), st.integers(-3, 3), st.booleans(), st.none(), st.just([1]))
_args = st.dictionaries(_pick("q", "city", "n", "z"), _values, max_size=3)

# Per field, values of every kind the model treats differently: kept, coerced (``1`` or ``"true"`` for a boolean,
# ``1.0`` for an integer), refused by a type or a rule. A generated call or line is a valid one with one or two
# fields replaced by these, so each coercion and rule is reached on its own.
CALL_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "name": _pick(*NAMES, 3, None),
    "args": st.one_of(_args, _pick(None, [], "x")),
    "required_args_only": _pick(True, False, 1, 0, "true", "no", None),
    "batch": _pick(None, 0, 2, -1, 1.0, True, "1"),
    "arg_options": st.one_of(
        st.dictionaries(_pick("q", "city", "w"), st.lists(_values, max_size=2), max_size=2),
        _pick([], {"q": 1}, {"q": (1,)}),
    ),
    "optional_args": st.one_of(st.lists(_pick("q", "city", "w"), max_size=2), _pick([1], "q")),
    "exact_args": st.one_of(st.lists(_pick("q", "city", "w"), max_size=2), _pick([None], ("q",))),
    "extra": st.just(1),
}
good_calls = st.fixed_dictionaries(
    {"name": _pick("search", "book", "pay"), "args": _args},
    optional={"batch": _pick(0, 3), "required_args_only": st.booleans()},
)


@st.composite
def calls(draw: st.DrawFn) -> dict[str, Any]:
    call = draw(good_calls)
    for key in draw(st.lists(st.sampled_from(sorted(CALL_VALUES)), max_size=2)):
        value = draw(CALL_VALUES[key])
        if value is _MISSING:
            call.pop(key, None)
        else:
            call[key] = value
    return call


call_lists = st.one_of(st.lists(good_calls, max_size=3), st.lists(calls(), max_size=3), _pick("x", None, [1]))
tool_lists = st.one_of(
    st.just(TOOLS),
    st.just(TOOLS[:1]),
    st.just([TOOLS[0], TOOLS[0]]),  # a repeated name
    st.just([{"description": "nameless"}]),
    _pick([], "x", [1], None),
)
CASE_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "id": _pick("c1", "c2", "", 5, None, _MISSING),
    "user_input": _pick("hi", "", 3, None, _MISSING),
    "message_history": _pick([], [{"role": "user", "content": "x"}], [{"content": "x"}], [1], "x", None),
    "available_tools": tool_lists,
    "expected_tool_calls": st.one_of(call_lists, st.just(_MISSING)),
    "expected_no_tool": _pick(True, False, "true", "yes", 1, 0, None),
    "acceptable_alternatives": st.one_of(st.lists(call_lists, max_size=2), _pick("x", [[]], None)),
    "must_not_call": st.one_of(st.lists(_pick(*NAMES), max_size=2), _pick([1], "pay", None)),
    "difficulty": _pick("easy", "hard", "medium", "EASY", 1, None),
    "slice": _pick("single-tool", "multi-tool", "no-tool-needed", "must-not-call", "ordered-dependency", "x", None),
    "source_trace_id": _pick("", "abc", None, 1),
    "notes": _pick("", "n", None),
    "session_id": _pick("", "s", None, 2),
    "trajectory": _pick(None, {"mode": "strict"}, {"mode": "x"}),
    "unknown": st.just(1),
}
common_rows = st.fixed_dictionaries(
    {"id": _pick("c1", "c2"), "user_input": _pick("hi", ""), "expected_tool_calls": st.lists(good_calls, min_size=1)},
    optional={"available_tools": st.just(TOOLS), "difficulty": _pick("easy", "hard"), "notes": _pick("", "n")},
)


@st.composite
def deviant_rows(draw: st.DrawFn) -> dict[str, Any]:
    row = draw(common_rows)
    for key in draw(st.lists(st.sampled_from(sorted(CASE_VALUES)), min_size=1, max_size=3)):
        value = draw(CASE_VALUES[key])
        if value is _MISSING:
            row.pop(key, None)
        else:
            row[key] = value
    return row


rows = st.one_of(common_rows, deviant_rows())


def same_case(fast: DatasetCase, model: DatasetCase) -> None:
    """Equal in every way a caller can see: values, types, field order, the fields the line set."""
    assert fast == model
    assert repr(fast) == repr(model)
    assert list(fast.__dict__) == list(model.__dict__)
    assert fast.model_fields_set == model.model_fields_set
    assert fast.model_dump() == model.model_dump()
    assert fast.model_dump_json() == model.model_dump_json()
    for mine, theirs in zip(
        [*fast.expected_tool_calls, *(c for alt in fast.acceptable_alternatives for c in alt)],
        [*model.expected_tool_calls, *(c for alt in model.acceptable_alternatives for c in alt)],
        strict=True,
    ):
        assert type(mine) is ExpectedCall
        assert mine.model_fields_set == theirs.model_fields_set
        assert list(mine.__dict__) == list(theirs.__dict__)


def model_only(data: Any) -> DatasetCase | None:
    try:
        return DatasetCase.model_validate(data)
    except ValidationError:
        return None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows)
def test_fast_reader_gives_the_models_case_or_none(data: dict[str, Any]) -> None:
    fast = case_from(data)
    model = model_only(data)
    if fast is not None:
        assert model is not None, data
        same_case(fast, model)


@settings(max_examples=200, deadline=None)
@given(calls())
def test_fast_call_gives_the_models_call_or_none(data: dict[str, Any]) -> None:
    fast = expected_call(data)
    try:
        model: ExpectedCall | None = ExpectedCall.model_validate(data)
    except ValidationError:
        model = None
    if fast is not None:
        assert model is not None
        assert fast == model and repr(fast) == repr(model) and fast.model_fields_set == model.model_fields_set


def _read(lines: list[bytes], *, fast: bool, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Each line through ``parse_jsonl_line``: its case, or its error's text."""
    with monkeypatch.context() as patch:
        patch.setattr(dataset_io, "_SHARED_TOOLS", SharedTools())
        if not fast:
            patch.setattr(dataset_io, "case_from", lambda data, known=None: None)
            patch.setattr(SharedTools, "learn", lambda *args: None)
        out: list[Any] = []
        for number, line in enumerate(lines, start=1):
            try:
                out.append(dataset_io.parse_jsonl_line("ds.jsonl", number, line))
            except DatasetError as exc:
                out.append(str(exc))
        return out


def _compare(lines: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    fast, model = _read(lines, fast=True, monkeypatch=monkeypatch), _read(lines, fast=False, monkeypatch=monkeypatch)
    for mine, theirs in zip(fast, model, strict=True):
        if isinstance(theirs, str):
            assert mine == theirs
        else:
            assert isinstance(mine, DatasetCase)
            same_case(mine, theirs)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(rows, min_size=1, max_size=4), st.booleans())
def test_lines_read_the_same_through_the_shared_tool_lists(items: list[dict[str, Any]], compact: bool) -> None:
    """Several lines in a row, so a tool list learnt from one is shared with the next; compact (orjson) and
    spaced (json.dumps) JSON."""
    monkeypatch = pytest.MonkeyPatch()
    try:
        lines = [(orjson.dumps(d) if compact else json.dumps(d).encode()) + b"\n" for d in items]
        _compare(lines, monkeypatch)
    finally:
        monkeypatch.undo()


_LINE = {"id": "c1", "user_input": "hi", "available_tools": TOOLS, "expected_tool_calls": [{"name": "search"}]}
_TOOLS = orjson.dumps(TOOLS).decode()


@pytest.mark.parametrize(
    "text",
    [
        # the list twice at the top level (the last one counts), once spelled with an escape
        '{"id":"c1","user_input":"hi","available_tools":' + _TOOLS + ',"expected_tool_calls":[{"name":"search"}],'
        '"available_tools":[]}',
        '{"id":"c1","user_input":"hi","available_tools":' + _TOOLS + ',"expected_tool_calls":[{"name":"search"}],'
        '"available\\u005ftools":"x"}',
        # the list inside another column only
        '{"id":"c1","user_input":"hi","message_history":[{"role":"user","available_tools":' + _TOOLS + "}],"
        '"expected_tool_calls":[{"name":"search"}]}',
        '{"id":"c1","user_input":"hi","notes":{"available_tools":' + _TOOLS + '},"expected_tool_calls":[]}',
        # first and last column; a trailing comma; text after the object; an unclosed object
        '{"available_tools":' + _TOOLS + ',"id":"c1","user_input":"hi","expected_tool_calls":[{"name":"book"}]}',
        '{"id":"c1","user_input":"hi","expected_tool_calls":[{"name":"book"}],"available_tools":' + _TOOLS + "}",
        '{"id":"c1","user_input":"hi","expected_tool_calls":[{"name":"book"}],"available_tools":' + _TOOLS + ",}",
        '{"id":"c1","user_input":"hi","expected_tool_calls":[{"name":"book"}],"available_tools":' + _TOOLS + "}x",
        '{"id":"c1","user_input":"hi","expected_tool_calls":[{"name":"book"}],"available_tools":' + _TOOLS,
        '{,"available_tools":' + _TOOLS + ',"id":"c1"}',
        # a key ending in the column's name; a value that only starts like the list
        '{"id":"c1","user_input":"hi","x\\"available_tools":' + _TOOLS + ',"expected_tool_calls":[{"name":"a"}]}',
        '{"id":"c1","user_input":"hi","available_tools":' + _TOOLS[:-1] + ',{"name":"zz"}],'
        '"expected_tool_calls":[{"name":"zz"}]}',
        # an integer past 64 bits next to the list; NaN; too deep
        '{"id":"c1","user_input":"hi","available_tools":' + _TOOLS + ',"expected_tool_calls":[{"name":"search",'
        '"args":{"q":123456789012345678901234567890}}]}',
        '{"id":"c1","user_input":"hi","available_tools":' + _TOOLS + ',"expected_tool_calls":[{"name":"search",'
        '"args":{"q":NaN}}]}',
        '{"id":"c1","user_input":"hi","available_tools":' + _TOOLS + ',"expected_tool_calls":[{"name":"search",'
        '"args":{"q":' + "[" * 130 + "]" * 130 + "}}]}",
        # the rules across columns, with the shared list's names
        '{"id":"c1","user_input":"hi","available_tools":' + _TOOLS + ',"expected_tool_calls":[{"name":"nope"}]}',
        '{"id":"c1","user_input":"hi","available_tools":' + _TOOLS + ',"expected_tool_calls":[{"name":"pay"}],'
        '"must_not_call":["pay"]}',
        '{"id":"c1","user_input":"hi","available_tools":' + _TOOLS + ',"expected_tool_calls":[{"name":"pay"}],'
        '"message_history":[{"content":"no role"}]}',
    ],
)
def test_lines_built_around_a_shared_list(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a line that teaches the list, lines whose structure around it is unusual read as the model reads
    them."""
    _compare([orjson.dumps(_LINE) + b"\n", text.encode() + b"\n"], monkeypatch)


def test_the_common_shape_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Else the properties above hold trivially: a bench line is built here, and its tool list is shared."""
    from benchmarks.offline_cases import dataset_row

    shared = SharedTools()
    monkeypatch.setattr(dataset_io, "_SHARED_TOOLS", shared)
    monkeypatch.setattr(
        DatasetCase, "model_validate", classmethod(lambda cls, data: pytest.fail("the model was asked"))
    )
    first = orjson.dumps(dataset_row(1)) + b"\n"
    assert case_from(orjson.loads(first)) is not None
    cases = [dataset_io.parse_jsonl_line("ds.jsonl", i, orjson.dumps(dataset_row(i)) + b"\n") for i in range(1, 4)]
    assert shared.hits == 2
    assert cases[1].available_tools is cases[2].available_tools  # one list, shared


def test_every_field_has_a_kind() -> None:
    """A field added to the model without a kind here would never be read by the fast path (or silently
    defaulted): the two lists must name exactly the model's fields."""
    assert set(CASE_KINDS) == set(DatasetCase.model_fields)
    assert set(CALL_KINDS) == set(ExpectedCall.model_fields)


def test_learning_stops_when_lists_do_not_repeat() -> None:
    shared = SharedTools()
    for i in range(200):
        tools = [{"name": f"t{i}"}]
        line = orjson.dumps({"id": "c", "available_tools": tools})
        assert shared.split(line, lambda text: True, 128) is None
        shared.learn(line, tools, lambda text: True)
    assert shared.misses < 100
