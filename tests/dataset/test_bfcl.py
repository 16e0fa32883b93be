"""BFCL import and agreement, on BFCL's own files: the importer (``dataset import --from bfcl``) converts every
category an answer key scores, reports what does not convert, and our verdicts agree with BFCL's AST checker on
every mutation class where its rule is the principled one (a bounded slice of ``make bfcl-agreement``).

bfcl-eval is installed by the Makefile with ``--no-deps`` (its dependency list pulls in torch): its data files and
its checker module are read from the wheel, nothing is fetched.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by `make test` (Makefile: --no-deps)")

from benchmarks import bfcl_agreement as agreement

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.dataset import bfcl, read_cases, write_cases
from otel_toolcall_eval.dataset.models import DatasetCase, Slice
from otel_toolcall_eval.offline.prepare import Preparer

DATA = agreement.data_dir()
DOCS = Path(__file__).resolve().parents[2] / "docs" / "bfcl.md"


pytestmark = pytest.mark.usefixtures("wide_console")  # conftest.py


def _file(category: str) -> Path:
    return DATA / f"BFCL_v4_{category}.json"


def _case(category: str, case_id: str) -> DatasetCase:
    return next(c for c in bfcl.import_bfcl(_file(category)).cases if c.id == case_id)


def _tool(case: DatasetCase, name: str) -> dict[str, Any]:
    return next(t for t in case.available_tools if t["name"] == name)


def _lines(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


@pytest.mark.parametrize("category", bfcl.CATEGORIES)
def test_every_answer_key_category_imports(category: str) -> None:
    imported = bfcl.import_bfcl(_file(category))
    assert len(imported.cases) + imported.skipped == _lines(_file(category))
    assert len({c.id for c in imported.cases}) == len(imported.cases)
    for warning in imported.warnings:
        assert re.fullmatch(r".+\.json:\d+: [\w.\[\]-]+: .+", str(warning)), str(warning)


def test_function_docs_become_json_schema() -> None:
    case = _case("simple_python", "simple_python_0")
    params = _tool(case, "calculate_triangle_area")["parameters"]
    assert params["type"] == "object"  # BFCL's "dict"
    assert params["properties"]["base"]["type"] == "integer"
    assert params["properties"]["unit"]["type"] == "string"
    assert params["required"] == ["base", "height"]
    # float -> number, tuple -> array, any -> no type constraint
    kinds = {}
    for category in ("simple_python", "parallel", "multiple", "live_simple"):
        for c in bfcl.import_bfcl(_file(category)).cases:
            for tool in c.available_tools:
                for prop in tool["parameters"].get("properties", {}).values():
                    kinds.setdefault(json.dumps(prop.get("type")), prop)
    assert '"number"' in kinds and '"array"' in kinds and '"boolean"' in kinds
    assert all(t in {"string", "integer", "number", "boolean", "array", "object", "null"} for t in _types(kinds))


def _types(kinds: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for key in kinds:
        value = json.loads(key)
        if isinstance(value, list):
            out.update(value)
        elif value is not None:
            out.add(value)
    return out


def test_java_types_map_to_json_types() -> None:
    imported = bfcl.import_bfcl(_file("simple_java"))
    raw = {json.loads(line)["id"]: json.loads(line) for line in _file("simple_java").read_text().splitlines()}
    seen = set()
    for case in imported.cases:
        for doc, tool in zip(raw[case.id]["function"], case.available_tools, strict=True):
            for key, prop in doc["parameters"]["properties"].items():
                converted = tool["parameters"]["properties"][key]
                seen.add((prop["type"], json.dumps(converted.get("type"))))
    mapping = dict(seen)
    assert mapping["HashMap"] in ('"object"', '["object", "string"]')
    assert mapping["long"] in ('"integer"', '["integer", "string"]')
    assert mapping["String"] == '"string"'
    assert ("any", "null") in seen  # any: no type constraint


def test_answers_become_expected_calls_with_alternatives_and_optional_arguments() -> None:
    (call,) = _case("simple_python", "simple_python_0").expected_tool_calls
    # {"base": [10], "height": [5], "unit": ["units", ""]}
    assert call.args == {"base": 10, "height": 5, "unit": "units"}
    assert call.optional_args == ["unit"]
    assert call.required_args_only is False  # BFCL's answer key lists every argument a call may carry
    (call,) = _case("simple_python", "simple_python_2").expected_tool_calls
    # {"x": [4], "y": [5], "z": ["", 0]}
    assert call.optional_args == ["z"] and call.args["z"] == 0


def test_several_acceptable_values_become_arg_options() -> None:
    path_answers = DATA / "possible_answer" / "BFCL_v4_simple_python.json"
    answer = next(json.loads(line) for line in path_answers.read_text().splitlines() if '"simple_python_10"' in line)
    ((_name, params),) = answer["ground_truth"][0].items()
    (call,) = _case("simple_python", "simple_python_10").expected_tool_calls
    for key, values in params.items():
        present = [v for v in values if v != ""]
        if len(present) > 1:
            assert call.arg_options[key] == present
        elif present:
            assert call.args[key] == present[0]
        else:
            assert key not in call.args and key not in call.arg_options  # "" alone: must be absent


def test_nested_alternatives_expand_to_whole_values() -> None:
    (call,) = _case("simple_java", "simple_java_1").expected_tool_calls
    assert call.args["params"] == {"limit": 50, "schemaFilter": "public"}
    (call,) = _case("live_simple", "live_simple_44-18-0").expected_tool_calls
    (key,) = [k for k, v in call.arg_options.items() if len(v) > 64]
    assert len(call.arg_options[key]) == 128 and all(isinstance(v, dict) for v in call.arg_options[key])


def test_parallel_calls_share_a_batch() -> None:
    calls = _case("parallel", "parallel_0").expected_tool_calls
    assert [c.batch for c in calls] == [0, 0]
    assert [c.args["artist"] for c in calls] == ["Taylor Swift", "Maroon 5"]
    assert all(c.batch is None for c in _case("multiple", "multiple_0").expected_tool_calls)


def test_irrelevance_is_no_tool_and_relevance_is_any_offered_call() -> None:
    case = bfcl.import_bfcl(_file("irrelevance")).cases[0]
    assert case.expected_no_tool and case.effective_slice is Slice.NO_TOOL_NEEDED
    case = bfcl.import_bfcl(_file("live_relevance")).cases[0]
    names = [case.expected_tool_calls[0].name] + [alt[0].name for alt in case.acceptable_alternatives]
    assert names == [t["name"] for t in case.available_tools]
    assert all(not c.args for c in case.expected_tool_calls)
    assert case.trajectory is not None
    assert (case.trajectory.mode, case.trajectory.args, case.trajectory.decides) == ("superset", "ignore", True)


def _passes(case: DatasetCase, calls: list[tuple[str, dict[str, Any]]]) -> bool:
    prep = Preparer(EvalConfig())
    return agreement._ours(prep, prep.prepare(case), case, calls)


def test_relevance_passes_one_or_more_calls_as_bfcl_does() -> None:
    case = bfcl.import_bfcl(_file("live_relevance")).cases[0]
    first, last = case.available_tools[0]["name"], case.available_tools[-1]["name"]
    assert _passes(case, [(first, {})])
    assert _passes(case, [(first, {}), (first, {})])  # BFCL: some call was made
    assert _passes(case, [(last, {}), ("not_offered", {})])
    assert not _passes(case, [])
    assert not _passes(case, [("not_offered", {})])  # no call of an offered tool


def test_variable_answers_are_compared_exactly() -> None:
    """BFCL's "variable" answers (a string where the doc declares another type) are names in the caller's code:
    case- and space-sensitive; the import lists them in ``exact_args``, other strings are still folded."""
    case = _case("simple_javascript", "simple_javascript_11")  # items: "myItemList" for an array
    (call,) = case.expected_tool_calls
    assert call.exact_args == ["items"] and call.args["items"] == "myItemList"
    args = dict(call.args)
    assert _passes(case, [(call.name, args)])
    assert not _passes(case, [(call.name, {**args, "items": "MYITEMLIST"})])
    assert not _passes(case, [(call.name, {**args, "items": " myItemList "})])
    assert _passes(case, [(call.name, {**args, "priorityStatus": "URGENT"})])  # a declared string: folded
    (call,) = _case("simple_java", "simple_java_38").expected_tool_calls  # HashMap given as "docFields"
    assert "filteredSource" in call.exact_args
    (call,) = _case("simple_python", "simple_python_0").expected_tool_calls
    assert call.exact_args == []


def test_a_variable_inside_an_object_answer_widens_the_nested_type() -> None:
    # simple_javascript_5: store.initialState is declared dict, the answer names a variable ("initialStateObject")
    case = _case("simple_javascript", "simple_javascript_5")
    store = _tool(case, "manageReactState")["parameters"]["properties"]["store"]
    assert "string" in store["properties"]["initialState"]["type"]
    (call,) = case.expected_tool_calls
    assert _passes(case, [(call.name, dict(call.args))])


def test_collections_are_rendered_as_literals_bfcl_reads_back() -> None:
    java_list = {"type": "ArrayList", "items": {"type": "long"}}
    assert agreement._literal([101, 202], java_list, "java") == "new ArrayList<>(Arrays.asList(101L, 202L))"
    assert agreement._literal(["a b", "c"], {"type": "Array", "items": {"type": "String"}}, "java") == (
        "new String[]{a b, c}"
    )
    assert agreement._literal({"limit": 50, "s": "public"}, {"type": "HashMap"}, "java") == (
        'new HashMap<String, Object>() {{ put("limit", 50); put("s", "public"); }}'
    )
    assert agreement._literal([60.0, 30.5], {"type": "array", "items": {"type": "float"}}, "javascript") == (
        "[60.0, 30.5]"
    )
    assert agreement._literal({"k": ["a"], "n": 1}, {"type": "dict"}, "javascript") == '{k: ["a"], n: 1}'
    # what BFCL's regular-expression parsers cannot give back is not judged (None), never judged wrongly
    assert agreement._literal(["a, b"], {"type": "Array", "items": {"type": "String"}}, "java") is None
    assert agreement._literal(["id", 42], {"type": "ArrayList", "items": {"type": "any"}}, "java") is None
    assert agreement._literal({"k": "50"}, {"type": "dict"}, "javascript") is None  # "50" is read back as 50


def test_an_enum_not_of_the_declared_type_widens_the_type_with_a_warning() -> None:
    imported = bfcl.import_bfcl(_file("live_irrelevance"))
    case = next(c for c in imported.cases if c.id == "live_irrelevance_595-190-0")
    prop = _tool(case, "Services_1_FindProvider")["parameters"]["properties"]["is_unisex"]
    assert prop["type"] == ["boolean", "string"] and prop["enum"] == ["True", "False", "dontcare"]
    warning = next(w for w in imported.warnings if "is_unisex" in w.field)
    assert "not all of the declared type boolean" in warning.message
    assert str(warning).startswith(f"{_file('live_irrelevance')}:")


def test_an_answer_argument_the_function_does_not_declare_is_left_out() -> None:
    # parallel_multiple_12: the answer key lists calculate_magnetic_field's "permeability" under
    # calculate_voltage_difference (["", 0.1]): BFCL fails every call that passes it
    imported = bfcl.import_bfcl(_file("parallel_multiple"))
    case = next(c for c in imported.cases if c.id == "parallel_multiple_12")
    voltage = next(c for c in case.expected_tool_calls if c.name == "calculate_voltage_difference")
    assert "permeability" not in voltage.args and "permeability" not in voltage.arg_options
    assert any(w.field.endswith("calculate_voltage_difference.permeability") for w in imported.warnings)


def test_imported_dataset_round_trips_and_validates(tmp_path: Path) -> None:
    cases = bfcl.import_bfcl(_file("live_multiple")).cases[:50]
    for fmt in ("jsonl", "csv"):
        path = tmp_path / f"cases.{fmt}"
        write_cases(path, cases)
        assert read_cases(path) == cases


def test_cli_imports_reports_warnings_and_the_result_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bfcl.jsonl"
    files = [str(_file(c)) for c in ("simple_java", "parallel", "irrelevance", "live_relevance")]
    assert main(["dataset", "import", "--from", "bfcl", *files, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert re.search(r"warning: \S+BFCL_v4_simple_java\.json:\d+: [\w.\[\]-]+: \S", captured.err)
    total = sum(_lines(Path(f)) for f in files)
    assert f"{total} cases from 4 BFCL file(s)" in captured.out
    assert re.search(r"; \d+ warning\(s\), 0 case\(s\) skipped", captured.out)
    assert main(["dataset", "validate", str(out)]) == 0


def test_cli_refuses_a_category_scored_by_execution(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["dataset", "import", "--from", "bfcl", str(_file("multi_turn_base")), "--out", str(tmp_path / "x.jsonl")]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "multi_turn_base" in err and "importable: simple_python" in err and "Traceback" not in err


def _write(path: Path, rows: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


QUESTION = {
    "id": "simple_python_0",
    "question": [[{"role": "user", "content": "area of a 10 by 5 triangle"}]],
    "function": [
        {
            "name": "area",
            "description": "",
            "parameters": {"type": "dict", "properties": {"base": {"type": "integer"}}, "required": ["base"]},
        }
    ],
}


ANSWER = {"id": "simple_python_0", "ground_truth": [{"area": {"base": [10]}}]}


@pytest.mark.parametrize(
    ("questions", "answers", "where"),
    [
        (["{not json"], [], r"BFCL_v4_simple_python\.json:1: not JSON"),
        (
            [QUESTION],
            [{"id": "other", "ground_truth": [{"area": {"base": [10]}}]}],
            r"possible_answer.*:1: id: 'other'",
        ),
        ([QUESTION], [], r"possible_answer.*: id: no answer for 'simple_python_0'"),
        ([QUESTION], [{"id": "simple_python_0", "ground_truth": {}}], r":1: ground_truth: must be a non-empty list"),
        (
            [QUESTION],
            [{"id": "simple_python_0", "ground_truth": [{"nope": {"base": [1]}}]}],
            r"possible_answer\S+:1: expected_tool_calls: 0\.name: 'nope' is not among available_tools",
        ),
        (
            [{**QUESTION, "question": [[{"content": "hi"}, {"role": "user", "content": "a"}]]}],
            [ANSWER],
            r"(?<!possible_answer)/BFCL_v4_simple_python\.json:1: message_history: 0: a message needs a 'role'",
        ),
        (
            [{**QUESTION, "function": "x"}],
            [ANSWER],
            r"BFCL_v4_simple_python\.json:1: function: must be a non-empty list",
        ),
        ([{**QUESTION, "question": [[{"role": "user", "content": "a"}], []]}], [ANSWER], r":1: question: 2 turns"),
    ],
)
def test_bad_files_exit_2_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], questions: list[Any], answers: list[Any], where: str
) -> None:
    question_file = _write(tmp_path / "BFCL_v4_simple_python.json", questions)
    _write(tmp_path / "possible_answer" / "BFCL_v4_simple_python.json", answers)
    assert main(["dataset", "import", "--from", "bfcl", str(question_file), "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert re.search(where, err), err
    assert "Traceback" not in err and not (tmp_path / "o.jsonl").exists()


def test_expansion_past_the_cap_skips_the_case_with_a_warning(tmp_path: Path) -> None:
    wide = {f"k{i}": [1, 2, 3, ""] for i in range(6)}  # 4**6 = 4096 whole values > MAX_VARIANTS
    question = {**QUESTION}
    question["function"] = [
        {"name": "area", "parameters": {"type": "dict", "properties": {"base": {"type": "dict"}}, "required": []}}
    ]
    path = _write(tmp_path / "BFCL_v4_simple_python.json", [question])
    _write(tmp_path / "possible_answer" / "BFCL_v4_simple_python.json", [
        {"id": "simple_python_0", "ground_truth": [{"area": {"base": [wide]}}]}
    ])  # fmt: skip
    imported = bfcl.import_bfcl(path)
    assert imported.cases == [] and imported.skipped == 1
    assert "more than 1024 whole values" in imported.warnings[0].message


# --- agreement with BFCL's own checker (a slice of `make bfcl-agreement`) ------------------------------------

# Classes where BFCL's rule is the principled one, or the two rules coincide: every output must agree.
MUST_AGREE = (
    "correct",
    "optional_omitted",
    "alternative_value",
    "wrong_value",
    "wrong_type",
    "int_for_float",
    "float_for_int",
    "null_for_optional",
    "list_reordered",
    "missing_required",
    "extra_undeclared",
    "extra_declared",
    "wrong_function",
    "extra_call",
    "missing_call",
    "no_call",
    "any_call",
    "any_call_twice",
    "variable_case",
)
# Classes where we differ on principle: only the side the docs name may pass alone.
ONLY_BFCL_PASSES = ("case_changed", "whitespace_padded", "spaces_removed", "punctuation_changed", "variable_whitespace")
ONLY_OURS_PASSES = ("date_reformatted", "swapped_order")


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return agreement.as_json(agreement.run(limit=12))


def test_every_category_and_mutation_class_is_exercised(report: dict[str, Any]) -> None:
    assert set(report["cases"]) == set(bfcl.CATEGORIES)
    assert set(report["by_mutation"]) <= set(agreement.MUTATIONS)
    assert len(report["by_mutation"]) >= len(agreement.MUTATIONS) - 3  # a few classes are rare in a slice
    assert set(MUST_AGREE + ONLY_BFCL_PASSES + ONLY_OURS_PASSES) == set(agreement.MUTATIONS)


def test_verdicts_agree_where_bfcls_rule_is_the_principled_one(report: dict[str, Any]) -> None:
    for name in MUST_AGREE:
        t = report["by_mutation"].get(name)
        if t is None:
            continue
        assert t["bfcl_only"] == 0 and t["ours_only"] == 0, (name, t["examples"])
    assert report["by_mutation"]["correct"]["both_pass"] >= 100


def test_differences_go_only_the_documented_way(report: dict[str, Any]) -> None:
    for name in ONLY_BFCL_PASSES:
        t = report["by_mutation"].get(name)
        assert t is None or t["ours_only"] == 0, (name, t["examples"])
    for name in ONLY_OURS_PASSES:
        t = report["by_mutation"].get(name)
        assert t is None or t["bfcl_only"] == 0, (name, t["examples"])
    assert report["by_mutation"]["spaces_removed"]["bfcl_only"] > 0  # BFCL deletes every space; we do not


def test_the_docs_explain_every_class_where_the_verdicts_differ() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for name in ONLY_BFCL_PASSES + ONLY_OURS_PASSES:
        assert name in agreement.VERDICTS
        assert re.search(rf"^\| {name} \| \d+ \| [\d.]+% \|", text, re.M), (
            f"docs/bfcl.md lacks {name}: make bfcl-agreement"
        )
    for name in agreement.MUTATIONS:
        assert f"| {name} |" in text


def test_imported_cases_score_through_eval_as_bfcl_does(tmp_path: Path) -> None:
    """End to end with the real commands: import, then `eval` on a run file of correct and mutated outputs; each
    case's verdict is BFCL's (classes where the rules agree)."""
    dataset = tmp_path / "bfcl.jsonl"
    categories = ("parallel_multiple", "live_simple", "irrelevance")
    assert (
        main(["dataset", "import", "--from", "bfcl", *(str(_file(c)) for c in categories), "--out", str(dataset)]) == 0
    )
    cases = {c.id: c for c in read_cases(dataset)}
    checker = agreement.load_bfcl_checker()
    language = __import__("bfcl_eval.constants.enums", fromlist=["Language"]).Language.PYTHON
    lines, expected = [], {}
    for category in categories:
        entries = agreement._jsonl(_file(category))[:15]
        answers = agreement._jsonl(bfcl.answers_path(_file(category)))[:15] if category != "irrelevance" else None
        for n, entry in enumerate(entries):
            answer = answers[n] if answers else None
            wanted = "no_call" if answer is None else ("correct" if n % 2 else "wrong_value")
            calls = dict(agreement.outputs(entry, answer, cases[entry["id"]], category))[wanted]
            assert calls is not None
            if answer is None:
                expected[entry["id"]] = not calls
            else:
                got = checker(
                    entry["function"],
                    [{k: v} for k, v in calls],
                    answer["ground_truth"],
                    language,
                    category,
                    agreement.MODEL_NAME,
                )
                expected[entry["id"]] = bool(got["valid"])
            lines.append({"id": entry["id"], "tool_calls": [{"name": k, "arguments": v, "batch": 0} for k, v in calls]})
    runs = _write(tmp_path / "runs.jsonl", lines)
    report = tmp_path / "report.json"
    main(["eval", "--dataset", str(dataset), "--runs", str(runs), "--json", str(report)])
    rows = {row["id"]: bool(row["passed"]) for row in json.loads(report.read_text())["cases"] if row["id"] in expected}
    assert rows == expected
    assert sum(expected.values()) >= 20 and not all(expected.values())


def test_warnings_from_the_files_reach_the_terminal_without_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    question = {**QUESTION}
    question["function"] = [
        {"name": "area", "parameters": {"type": "dict", "properties": {"b\x1b[2Jx": {"type": "nonsense[red]"}}}}
    ]
    path = _write(tmp_path / "BFCL_v4_simple_python.json", [question])
    _write(tmp_path / "possible_answer" / "BFCL_v4_simple_python.json", [
        {"id": "simple_python_0", "ground_truth": [{"area": {}}]}
    ])  # fmt: skip
    assert main(["dataset", "import", "--from", "bfcl", str(path), "--out", str(tmp_path / "o.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "unknown type 'nonsense[red]'" in err
