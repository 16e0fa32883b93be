"""The dataset format: one model, JSONL and CSV losslessly, errors naming line, row and column, the CLI."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.dataset import (
    COLUMNS,
    DatasetCase,
    DatasetError,
    Slice,
    dataset_json_schema,
    iter_rows,
    read_cases,
    template_cases,
    write_cases,
)
from otel_toolcall_eval.dataset.io import case_to_dict

pytestmark = pytest.mark.usefixtures("wide_console")  # conftest.py


TOOL = {"name": "get_order", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}


def _row(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "c1",
        "user_input": "where is my order?",
        "expected_tool_calls": [{"name": "get_order"}],
    }
    base.update(fields)
    return base


def _jsonl(tmp_path: Path, rows: list[Any], name: str = "ds.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_template_has_one_valid_case_per_slice() -> None:
    cases = template_cases()
    assert sorted(c.effective_slice.value for c in cases) == sorted(s.value for s in Slice)
    schema = dataset_json_schema()
    for case in cases:
        jsonschema.validate(case_to_dict(case), schema)


def test_columns_come_from_the_model() -> None:
    assert tuple(DatasetCase.model_fields) == COLUMNS
    assert COLUMNS[:3] == ("id", "user_input", "message_history")


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_template_round_trips(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"ds.{fmt}"
    write_cases(path, template_cases())
    assert read_cases(path) == template_cases()


def test_jsonl_to_csv_to_jsonl_is_byte_identical(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, csv_path, second = tmp_path / "a.jsonl", tmp_path / "b.csv", tmp_path / "c.jsonl"
    assert main(["dataset", "template", "--out", str(first)]) == 0
    assert main(["dataset", "convert", str(first), str(csv_path)]) == 0
    assert main(["dataset", "convert", str(csv_path), str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()
    header = next(csv.reader(io.StringIO(csv_path.read_text())))
    assert tuple(header) == COLUMNS
    # JSON-valued cells hold JSON text a person can read
    first_row = next(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert json.loads(first_row["expected_tool_calls"]) == [{"name": "get_order", "args": {"order_id": "12345"}}]
    assert first_row["expected_no_tool"] == "false" and first_row["message_history"] == ""
    assert "5 cases" in capsys.readouterr().out


# Values that stress a lossless round trip: quotes, commas, newlines, unicode, floats, big ints, nesting.
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=10,
)
NAMES = st.sampled_from(["get_order", "search", "book, hotel", 'say "hi"', "ünïcode"])
CALLS = st.lists(
    st.fixed_dictionaries(
        {"name": NAMES, "args": st.dictionaries(TEXT, JSON, max_size=3)},
        optional={
            "required_args_only": st.booleans(),
            "batch": st.integers(0, 3),
            "arg_options": st.dictionaries(st.sampled_from(["opt_a", "opt_b"]), st.lists(JSON, min_size=1, max_size=2)),
        },
    ),
    min_size=1,
    max_size=3,
)


@st.composite
def cases(draw: st.DrawFn) -> DatasetCase:
    no_tool = draw(st.booleans())
    expected = [] if no_tool else draw(CALLS)
    names = {c["name"] for c in expected}
    data: dict[str, Any] = {
        "id": draw(TEXT.filter(bool)),
        "user_input": draw(TEXT),
        "message_history": draw(st.lists(st.fixed_dictionaries({"role": TEXT, "content": JSON}), max_size=2)),
        "expected_tool_calls": expected,
        "expected_no_tool": no_tool,
        "acceptable_alternatives": draw(st.lists(CALLS, max_size=2)),
        "must_not_call": [
            n for n in draw(st.lists(st.sampled_from(["delete", "drop all"]), max_size=2)) if n not in names
        ],
        "difficulty": draw(st.sampled_from(["easy", "medium", "hard"])),
        "source_trace_id": draw(st.none() | TEXT),
        "notes": draw(st.none() | TEXT),
    }
    return DatasetCase.model_validate(data)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(cases(), min_size=1, max_size=4))
def test_any_dataset_round_trips_through_both_formats(tmp_path: Path, dataset: list[DatasetCase]) -> None:
    for fmt in ("jsonl", "csv"):
        path = tmp_path / f"rt.{fmt}"
        write_cases(path, dataset)
        assert read_cases(path) == dataset, fmt
    jsonl, csv_path, again = tmp_path / "x.jsonl", tmp_path / "x.csv", tmp_path / "y.jsonl"
    write_cases(jsonl, dataset)
    write_cases(csv_path, read_cases(jsonl))
    write_cases(again, read_cases(csv_path))
    assert jsonl.read_bytes() == again.read_bytes()


def test_empty_optional_strings_mean_none() -> None:
    case = DatasetCase.model_validate(_row(source_trace_id="", notes=""))
    assert case.source_trace_id is None and case.notes is None


def _error(path: Path) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        read_cases(path)
    return info.value


@pytest.mark.parametrize(
    ("row", "column", "text"),
    [
        ({"user_input": "x", "expected_tool_calls": [{"name": "a"}]}, "id", "required"),
        (_row(expected_tool_calls=[]), "expected_no_tool", "expected_tool_calls is empty"),
        (_row(expected_no_tool=True), "expected_no_tool", "not empty"),
        (_row(expected_tool_calls=[{"nam": "a"}]), "expected_tool_calls", "0.name: required"),
        (_row(must_not_call=["get_order"]), "must_not_call", "also expected"),
        (_row(available_tools=[TOOL], expected_tool_calls=[{"name": "lookup"}]), "expected_tool_calls", "0.name"),
        (_row(slice="multi-tool"), "slice", "at least two"),
        (_row(difficulty="trivial"), "difficulty", "easy"),
        (_row(colour="blue"), "colour", "unknown column"),
        (_row(message_history=[{"content": "hi"}]), "message_history", "role"),
        (_row(available_tools=[{"description": "no name"}]), "available_tools", "name"),
        (
            _row(expected_tool_calls=[{"name": "a", "args": {"k": 1}, "arg_options": {"k": [2]}}]),
            "expected_tool_calls",
            "also in args",
        ),
        (_row(expected_tool_calls=[{"name": "a", "arg_options": {"k": []}}]), "expected_tool_calls", "lists no value"),
        (_row(expected_tool_calls=[{"name": "a", "optional_args": ["k"]}]), "expected_tool_calls", "neither in args"),
        (
            _row(expected_tool_calls=[{"name": "a", "args": {"k": 1}, "exact_args": ["j"]}]),
            "expected_tool_calls",
            "exact_args: 'j' is neither in args",
        ),
    ],
)
def test_jsonl_errors_name_the_line_and_column(tmp_path: Path, row: dict[str, Any], column: str, text: str) -> None:
    path = _jsonl(tmp_path, [_row(id="ok"), "", row])  # a blank line still counts
    err = _error(path)
    assert (err.path, err.line, err.field) == (str(path), 3, column)
    assert text in err.message
    assert str(err).startswith(f"{path}:3: {column}: ")


def test_jsonl_syntax_errors_and_nan(tmp_path: Path) -> None:
    err = _error(_jsonl(tmp_path, [_row(), '{"id": "x", '], "bad.jsonl"))
    assert err.line == 2 and "not valid JSON" in err.message
    err = _error(
        _jsonl(tmp_path, ['{"id": "x", "user_input": "", "expected_no_tool": true, "notes": NaN}'], "nan.jsonl")
    )
    assert err.line == 1 and "not valid JSON" in err.message
    err = _error(_jsonl(tmp_path, ["[1, 2]"], "list.jsonl"))
    assert "JSON object" in err.message


def test_csv_errors_name_the_row_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "ds.csv"
    write_cases(
        path, [DatasetCase.model_validate(_row(id="a", notes="two\nlines")), DatasetCase.model_validate(_row(id="b"))]
    )
    text = path.read_text().replace('[{""name"": ""get_order"", ""args"": {}}]', '[{""name"": ""get_order""')
    path.write_text(text)
    err = _error(path)
    # row 1 spans lines 2-3, so row 2 starts on line 4
    assert (err.line, err.row, err.field) == (2, 1, "expected_tool_calls")
    assert "not valid JSON text" in err.message and str(err).startswith(f"{path}:2 (row 1): expected_tool_calls:")


def test_csv_unknown_header_and_short_rows(tmp_path: Path) -> None:
    path = tmp_path / "ds.csv"
    path.write_text('id,user_input,expected_tool_calls,colour\nx,hi,"[]",red\n')
    err = _error(path)
    assert (err.line, err.field) == (1, "colour") and "unknown column" in err.message
    path.write_text('id,user_input,expected_tool_calls,expected_no_tool\nx,hi,"[{""name"": ""a""}]"\n')
    (case,) = read_cases(path)  # a short row leaves the rest at their defaults
    assert case.expected_tool_calls[0].name == "a" and case.expected_no_tool is False


def test_validate_collects_every_bad_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _jsonl(tmp_path, [_row(id="a"), _row(id="b", expected_tool_calls=[]), _row(id="a"), _row(id="c", slice="x")])
    assert main(["dataset", "validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: expected_no_tool:" in err
    assert f"{path}:3: id: duplicate id 'a' (also line 1)" in err
    assert f"{path}:4: slice:" in err
    assert "3 invalid row(s), 1 valid" in err


ORDER_TOOL = {
    "name": "get_order",
    "parameters": {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "pattern": "^[0-9]+$"},
            "days": {"type": "integer"},
            "required": {"type": "boolean"},  # a property named "required" is a property, not the keyword
            "filter": {
                "type": "object",
                "properties": {"status": {"enum": ["open", "closed"]}},
                "required": ["status"],
            },
        },
        "required": ["order_id", "days"],
        "additionalProperties": False,
    },
}


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        ({"name": "get_order", "args": {"order_id": "A-1"}}, "[0] get_order: args/order_id: "),
        ({"name": "get_order", "args": {"days": "three"}}, "[0] get_order: args/days: "),
        ({"name": "get_order", "args": {"colour": "red"}}, "[0] get_order: args: "),  # not declared
        ({"name": "get_order", "args": {"required": 1}}, "[0] get_order: args/required: "),
        ({"name": "get_order", "arg_options": {"days": [1, "x"]}}, "[0] get_order: arg_options.days[1]: "),
        ({"name": "get_order", "args": {"filter": {"status": "lost"}}}, "[0] get_order: args/filter/status: "),
    ],
)
def test_validate_checks_expected_arguments_against_the_cases_own_tool_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], call: dict[str, Any], problem: str
) -> None:
    """Expected arguments that break the case's own schema were accepted: no schema-valid call could pass."""
    path = _jsonl(tmp_path, [_row(available_tools=[ORDER_TOOL], expected_tool_calls=[call])])
    assert main(["dataset", "validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:1: expected_tool_calls: {problem}" in err, err
    assert "(the tool's schema in available_tools)" in err


@pytest.mark.parametrize(
    "args",
    [
        {"order_id": "12345"},  # only the keys that matter: "days" is required by the schema, not here
        {"days": 3, "order_id": None},  # null stands for absent
        {"filter": {"status": "open"}, "required": True},
        {},
    ],
)
def test_validate_accepts_partial_expected_arguments_within_the_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: dict[str, Any]
) -> None:
    alternative = [{"name": "get_order", "args": {"order_id": "1"}}]
    row = _row(
        available_tools=[ORDER_TOOL],
        expected_tool_calls=[{"name": "get_order", "args": args}],
        acceptable_alternatives=[alternative],
    )
    path = _jsonl(tmp_path, [row])
    assert main(["dataset", "validate", str(path)]) == 0, capsys.readouterr().err
    bad = _jsonl(
        tmp_path, [{**row, "acceptable_alternatives": [[{"name": "get_order", "args": {"days": 1.5}}]]}], "b.jsonl"
    )
    assert main(["dataset", "validate", str(bad)]) == 2
    assert "acceptable_alternatives[0]: [0] get_order: args/days: " in capsys.readouterr().err


def test_validate_reports_slices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.csv"
    assert main(["dataset", "template", "--out", str(path)]) == 0
    assert main(["dataset", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "5 cases valid" in out and "ordered-dependency 1" in out and "no-tool-needed 1" in out
    single = _jsonl(tmp_path, [_row()], "one.jsonl")
    assert main(["dataset", "validate", str(single)]) == 0
    assert "no cases in slice(s) multi-tool, ordered-dependency" in capsys.readouterr().out


def test_template_and_schema_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dataset", "template", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["slice"] for r in rows] == [s.value for s in Slice]
    assert main(["dataset", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid(_row())
    assert not validator.is_valid(_row(colour="blue"))  # unknown columns are refused by editors too
    assert not validator.is_valid(_row(difficulty="trivial"))


def test_cli_bad_usage_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dataset", "validate", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["dataset", "convert", str(tmp_path / "a.txt"), str(tmp_path / "b.csv")]) == 2
    assert "use .jsonl or .csv" in capsys.readouterr().err
    bad = _jsonl(tmp_path, [_row(), _row(expected_tool_calls=[])], "bad.jsonl")
    out = tmp_path / "out.csv"
    assert main(["dataset", "convert", str(bad), str(out)]) == 2
    assert not out.exists()  # no half-written file
    assert f"{bad}:2: expected_no_tool" in capsys.readouterr().err


def test_iter_rows_streams_with_line_numbers(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [_row(id="a"), "", "", _row(id="b")])
    assert [(r.line, r.case.id) for r in iter_rows(path)] == [(1, "a"), (4, "b")]


def test_offline_doc_tables_match_the_code() -> None:
    from otel_toolcall_eval.offline import docs

    path = Path(__file__).resolve().parents[2] / "docs" / "offline-eval.md"
    text = path.read_text(encoding="utf-8")
    assert docs.render(text) == text, "run: python -m otel_toolcall_eval.offline.docs docs/offline-eval.md"


def test_per_argument_alternatives_are_in_the_json_schema_and_survive_csv(tmp_path: Path) -> None:
    call = {
        "name": "get_order",
        "args": {"order_id": "1"},
        "arg_options": {"unit": ["kg", "lb"]},
        "optional_args": ["unit"],
        "exact_args": ["order_id"],
    }
    case = DatasetCase.model_validate(_row(expected_tool_calls=[call]))
    jsonschema.validate(case_to_dict(case), dataset_json_schema())
    assert case_to_dict(case)["expected_tool_calls"][0]["exact_args"] == ["order_id"]
    properties = dataset_json_schema()["$defs"]["ExpectedCall"]["properties"]
    assert {"arg_options", "optional_args", "exact_args"} <= set(properties)
    path = tmp_path / "ds.csv"
    write_cases(path, [case])
    assert read_cases(path) == [case]
