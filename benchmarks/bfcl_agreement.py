"""``python -m benchmarks.bfcl_agreement``: our verdicts against BFCL's own AST checker, per mutation class.

For every BFCL category that an answer key scores (``dataset.bfcl.CATEGORIES``, read from the installed
``bfcl-eval`` wheel), each case is imported with ``otel-toolcall-eval dataset import --from bfcl``'s importer and
given a set of synthetic model outputs: the correct calls, and systematic mutations of them (``MUTATIONS``). Each
output is judged twice:

- by BFCL: ``bfcl_eval.eval_checker.ast_eval.ast_checker.ast_checker`` (the module alone; the model-config
  module it imports pulls every provider SDK in, so a one-entry stand-in is put in its place, see
  ``load_bfcl_checker``), and for the relevance categories BFCL's rule from ``eval_runner`` (irrelevance: no
  call; relevance: at least one call), which is two lines and lives in a module that imports the providers too;
- by us: ``offline.score.score_case`` on the imported case, with the default configuration.

The table counts, per mutation class, how often both pass, both fail, or only one passes. Java and JavaScript
cases are given to BFCL as its Java/JavaScript output form (values as source literals: a collection is written as
a literal and kept only when BFCL's own converter reads it back as the same value); the rest, and mutations that
only change a JSON type (which that form cannot show), are left out and counted.

Run ``make bfcl-agreement`` (all cases, about 20 s alone) or ``--limit N`` (the first N cases of each category).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.resources
import json
import re
import sys
import types
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from otel_toolcall_eval.checks.argument_match import same_json
from otel_toolcall_eval.checks.schema_at import SchemaAt
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.dataset import bfcl
from otel_toolcall_eval.dataset.models import DatasetCase
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runs import parse_run_line
from otel_toolcall_eval.offline.score import score_case

MODEL_NAME = "otel-toolcall-eval"  # the stand-in model config's only entry (function names kept as written)
Call = tuple[str, dict[str, Any]]

# Every mutation class, in table order, with what it does.
MUTATIONS: dict[str, str] = {
    "correct": "the first acceptable value of every argument (optional ones included)",
    "optional_omitted": "every argument the answer key marks optional left out",
    "alternative_value": "an argument given its second acceptable value",
    "wrong_value": "one argument given a value the answer key does not list",
    "wrong_type": "one argument given as another JSON type (5 -> '5', 'x' -> 1, true -> 'true')",
    "int_for_float": "a whole number given as an integer where a float is declared (5.0 -> 5)",
    "float_for_int": "an integer given as a float (5 -> 5.0)",
    "null_for_optional": "an optional argument the answer key lets be absent given as null",
    "list_reordered": "an array argument's elements in reverse order",
    "missing_required": "one required argument left out",
    "extra_undeclared": "an argument the function does not declare added",
    "extra_declared": "a declared argument the answer key does not list added (a type-valid value)",
    "case_changed": "a string argument in other case ('Paris' -> 'PARIS')",
    "whitespace_padded": "a string argument with surrounding whitespace",
    "variable_case": "a variable name (a string where the doc declares another type) in other case",
    "variable_whitespace": "a variable name with surrounding whitespace",
    "spaces_removed": "a string argument's inner spaces removed ('New York' -> 'NewYork')",
    "punctuation_changed": "a string argument's punctuation changed ('a, b.' -> 'a b')",
    "date_reformatted": "a date argument in another format (2024-03-05 -> March 05, 2024)",
    "swapped_order": "the calls of a parallel answer in reverse order",
    "wrong_function": "a call renamed to another offered function (or an unknown one)",
    "extra_call": "the first call made twice",
    "missing_call": "the last call left out",
    "no_call": "no call at all",
    "any_call": "one call of the first offered function, required arguments filled (relevance categories)",
    "any_call_twice": "that call made twice (relevance categories)",
}


def data_dir() -> Path:
    """BFCL's data files, as the bfcl-eval wheel ships them."""
    return Path(str(importlib.resources.files("bfcl_eval") / "data"))


def load_bfcl_checker() -> Callable[..., dict[str, Any]]:
    """``ast_checker`` from bfcl-eval, without the provider SDKs its model-config module imports.

    The checker reads the model config in one place (``convert_func_name``: whether a provider spells ``.`` in
    function names as ``_``); our outputs keep the names as written, so a stand-in module with one entry whose
    ``underscore_to_dot`` is False is exactly what the real config says for such a model.
    """
    name = "bfcl_eval.constants.model_config"
    if name not in sys.modules:
        stand_in = types.ModuleType(name)
        stand_in.MODEL_CONFIG_MAPPING = {MODEL_NAME: types.SimpleNamespace(underscore_to_dot=False)}  # type: ignore[attr-defined]
        sys.modules[name] = stand_in
    module = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
    checker: Callable[..., dict[str, Any]] = module.ast_checker
    return checker


@dataclass(slots=True)
class Tally:
    both_pass: int = 0
    both_fail: int = 0
    bfcl_only: int = 0  # BFCL passes, we fail
    ours_only: int = 0  # we pass, BFCL fails
    examples: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.both_pass + self.both_fail + self.bfcl_only + self.ours_only

    @property
    def agreement(self) -> float:
        return (self.both_pass + self.both_fail) / self.total if self.total else 1.0

    def add(self, bfcl_ok: bool, ours_ok: bool, example: str) -> None:
        if bfcl_ok and ours_ok:
            self.both_pass += 1
        elif not bfcl_ok and not ours_ok:
            self.both_fail += 1
        else:
            if bfcl_ok:
                self.bfcl_only += 1
            else:
                self.ours_only += 1
            if len(self.examples) < 3:
                self.examples.append(example)


@dataclass(slots=True)
class Result:
    by_mutation: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    by_category: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    cases: Counter[str] = field(default_factory=Counter)
    left_out: Counter[str] = field(default_factory=Counter)  # why an output was not judged
    import_warnings: int = 0

    def total(self) -> Tally:
        out = Tally()
        for t in self.by_mutation.values():
            out.both_pass += t.both_pass
            out.both_fail += t.both_fail
            out.bfcl_only += t.bfcl_only
            out.ours_only += t.ours_only
        return out


def language_of(category: str) -> str:
    if category.endswith("javascript"):
        return "javascript"
    return "java" if category.endswith("java") else "python"


def run(limit: int | None = None, categories: tuple[str, ...] = bfcl.CATEGORIES) -> Result:
    checker = load_bfcl_checker()
    enums = importlib.import_module("bfcl_eval.constants.enums")
    result = Result()
    prep = Preparer(EvalConfig())
    for category in categories:
        path = data_dir() / f"BFCL_v4_{category}.json"
        imported = bfcl.import_bfcl(path)
        result.import_warnings += len(imported.warnings)
        ours = {case.id: case for case in imported.cases}
        entries = _jsonl(path)
        answers = _jsonl(bfcl.answers_path(path)) if category in bfcl.AST_CATEGORIES else None
        language = getattr(enums.Language, language_of(category).upper())
        for n, entry in enumerate(entries):
            if limit is not None and n >= limit:
                break
            case = ours.get(entry["id"])
            answer = answers[n] if answers is not None else None
            if case is None:
                result.left_out["case skipped by the importer"] += 1
                continue
            prepared = prep.prepare(case)
            judged: list[tuple[str, bool, bool, str]] = []
            for mutation, calls in outputs(entry, answer, case, category):
                if calls is None:
                    continue
                ours_ok = _ours(prep, prepared, case, calls)
                if answer is None:
                    bfcl_ok = (len(calls) == 0) if category in bfcl.NO_TOOL_CATEGORIES else len(calls) > 0
                else:
                    rendered = _render(calls, entry, category)
                    if rendered is None:
                        result.left_out[f"{language_of(category)} collection BFCL's parser cannot read back"] += 1
                        continue
                    bfcl_ok = bool(
                        checker(entry["function"], rendered, answer["ground_truth"], language, category, MODEL_NAME)[
                            "valid"
                        ]
                    )
                judged.append((mutation, bfcl_ok, ours_ok, f"{entry['id']}: {_short(calls)}"))
            if judged and judged[0][0] == "correct" and not judged[0][1] and judged[0][2]:
                # an answer key BFCL's own checker cannot pass (simple_java_64 writes a map's value as a string,
                # which dict_checker reads character by character): it says nothing about either rule
                result.left_out["case whose correct answer BFCL's checker fails"] += len(judged)
                continue
            result.cases[category] += 1
            for mutation, bfcl_ok, ours_ok, example in judged:
                result.by_mutation[mutation].add(bfcl_ok, ours_ok, example)
                result.by_category[category].add(bfcl_ok, ours_ok, example)
    return result


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, "rb") as handle:
        return [orjson.loads(line) for line in handle if line.strip()]


def _short(calls: list[Call]) -> str:
    text = json.dumps([{name: args} for name, args in calls], ensure_ascii=False)
    return text if len(text) <= 160 else text[:157] + "..."


def _ours(prep: Preparer, prepared: Any, case: DatasetCase, calls: list[Call]) -> bool:
    line = {"id": case.id, "tool_calls": [{"name": n, "arguments": a, "batch": 0} for n, a in calls]}
    run_case = parse_run_line("bfcl-outputs.jsonl", 1, orjson.dumps(line))
    return score_case(prepared, run_case, prep).passed


# --- the model outputs --------------------------------------------------------------------------------------


def outputs(
    entry: dict[str, Any], answer: dict[str, Any] | None, case: DatasetCase, category: str
) -> Iterator[tuple[str, list[Call] | None]]:
    """(mutation, calls) for one case; calls None where the mutation does not apply to it."""
    tools = {t["name"]: t["parameters"] for t in case.available_tools}
    if answer is None:  # relevance categories: no answer key, only "a call or none"
        yield "no_call", []
        if tools:
            first = case.available_tools[0]
            call = (first["name"], _filled(first["parameters"]))
            yield "any_call", [call]
            yield "any_call_twice", [call, copy.deepcopy(call)]
        return
    truth = [_declared_only(item, entry) for item in answer["ground_truth"]]
    base = [_base_call(item) for item in truth]
    java_js = language_of(category) != "python"
    yield "correct", base
    yield "optional_omitted", _optional_omitted(truth)
    yield "alternative_value", _alternative(truth, base)
    for mutation, change in _VALUE_MUTATIONS.items():
        if java_js and mutation in ("wrong_type", "int_for_float", "float_for_int"):
            continue  # BFCL's Java/JavaScript output is source text: a JSON type change does not show there
        yield mutation, _mutate_one_value(base, tools, change)
    yield "null_for_optional", _null_for_optional(truth, base)
    yield "list_reordered", _mutate_one_value(base, tools, _reversed_list)
    yield "missing_required", _missing_required(base, tools)
    yield "extra_undeclared", _with_arg(base, "zz_undeclared", 1)
    yield "extra_declared", _extra_declared(base, tools, truth)
    yield "swapped_order", list(reversed(base)) if len(base) > 1 else None
    yield "wrong_function", _wrong_function(base, list(tools))
    yield "extra_call", [*base, copy.deepcopy(base[0])]
    yield "missing_call", base[:-1] if len(base) > 1 else None
    yield "no_call", []


def _present(options: list[Any], index: int = 0) -> Any:
    values = [v for v in options if v != ""]
    return _concrete(values[min(index, len(values) - 1)]) if values else _ABSENT


_ABSENT = object()


def _concrete(value: Any) -> Any:
    """A nested answer (per-key alternatives) as one concrete value: the first alternative of every key."""
    if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
        out = {}
        for k, v in value.items():
            chosen = _present(v)
            if chosen is not _ABSENT:
                out[k] = chosen
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [_concrete(v) for v in value]
    return value


def _declared_only(item: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """An answer-key call without the arguments its function does not declare (a few answer keys list one; BFCL
    fails every call that passes it, so the right answer leaves it out)."""
    ((name, params),) = item.items()
    docs = {f["name"]: f["parameters"].get("properties", {}) for f in entry["function"]}
    if name not in docs:
        return item
    return {name: {k: v for k, v in params.items() if k in docs[name]}}


def _base_call(item: dict[str, Any]) -> Call:
    ((name, params),) = item.items()
    args = {}
    for key, options in params.items():
        chosen = _present(options)
        if chosen is not _ABSENT:
            args[key] = chosen
    return name, args


def _optional_omitted(truth: list[dict[str, Any]]) -> list[Call] | None:
    out, changed = [], False
    for item in truth:
        ((name, params),) = item.items()
        args = {}
        for key, options in params.items():
            if "" in options:
                changed = changed or any(v != "" for v in options)
                continue
            args[key] = _present(options)
        out.append((name, args))
    return out if changed else None


def _alternative(truth: list[dict[str, Any]], base: list[Call]) -> list[Call] | None:
    for i, item in enumerate(truth):
        ((_, params),) = item.items()
        for key, options in params.items():
            if len([v for v in options if v != ""]) > 1:
                out = copy.deepcopy(base)
                out[i][1][key] = _present(options, 1)
                return out
    return None


def _types(schema: Any) -> list[str]:
    declared = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(declared, list):
        return [str(t) for t in declared]
    return [declared] if isinstance(declared, str) else []


def _mutate_one_value(
    base: list[Call], tools: dict[str, dict[str, Any]], change: Callable[[Any, list[str]], Any]
) -> list[Call] | None:
    """The first argument (in call and key order) the change applies to, changed; None when none applies."""
    for i, (name, args) in enumerate(base):
        properties = tools.get(name, {}).get("properties", {})
        for key, value in args.items():
            new = change(value, _types(properties.get(key)))
            if new is not _ABSENT and not (type(new) is type(value) and new == value):
                out = copy.deepcopy(base)
                out[i][1][key] = new
                return out
    return None


def _wrong_value(value: Any, declared: list[str]) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value + 7.5
    if isinstance(value, str):
        return value + "zq" if value else "zq"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["zq"]
    return _ABSENT


def _wrong_type(value: Any, declared: list[str]) -> Any:
    if not declared:
        return _ABSENT  # no declared type (BFCL's any): every type is right
    if isinstance(value, str):
        return 17 if not {"integer", "number"} & set(declared) else _ABSENT
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return _ABSENT


def _int_for_float(value: Any, declared: list[str]) -> Any:
    if isinstance(value, float) and value.is_integer() and "number" in declared:
        return int(value)
    return _ABSENT


def _float_for_int(value: Any, declared: list[str]) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and "integer" in declared:
        return float(value)
    return _ABSENT


def _variable(declared: list[str]) -> bool:
    """A string where the function doc declares another type: the importer widened the type for it. BFCL calls
    these answers variables (names in the caller's code, mostly in Java/JavaScript) and compares them exactly."""
    return "string" in declared and len(declared) > 1


def _string_change(fn: Callable[[str], str], variables: bool = False) -> Callable[[Any, list[str]], Any]:
    def change(value: Any, declared: list[str]) -> Any:
        if not isinstance(value, str) or not value.strip() or _variable(declared) != variables:
            return _ABSENT
        new = fn(value)
        return new if new != value else _ABSENT

    return change


_PUNCTUATION = str.maketrans("", "", ",./-_*^")
_DATE_FORMATS = ("%Y-%m-%d", "%B %d, %Y", "%m/%d/%Y", "%d/%m/%Y", "%Y/%m/%d", "%d %B %Y")


def _reformat_date(text: str) -> str:
    for fmt in _DATE_FORMATS:
        try:
            parsed = datetime.strptime(text.strip(), fmt)
        except ValueError:
            continue
        return parsed.strftime("%B %d, %Y") if fmt == "%Y-%m-%d" else parsed.strftime("%Y-%m-%d")
    return text


_VALUE_MUTATIONS: dict[str, Callable[[Any, list[str]], Any]] = {
    "wrong_value": _wrong_value,
    "wrong_type": _wrong_type,
    "int_for_float": _int_for_float,
    "float_for_int": _float_for_int,
    "case_changed": _string_change(lambda s: s.upper() if s != s.upper() else s.lower()),
    "whitespace_padded": _string_change(lambda s: f"  {s} "),
    "variable_case": _string_change(lambda s: s.upper() if s != s.upper() else s.lower(), variables=True),
    "variable_whitespace": _string_change(lambda s: f"  {s} ", variables=True),
    "spaces_removed": _string_change(lambda s: s.replace(" ", "")),
    "punctuation_changed": _string_change(lambda s: s.translate(_PUNCTUATION)),
    "date_reformatted": _string_change(_reformat_date),
}


def _null_for_optional(truth: list[dict[str, Any]], base: list[Call]) -> list[Call] | None:
    for i, item in enumerate(truth):
        ((_, params),) = item.items()
        for key, options in params.items():
            if "" in options and None not in options:
                out = copy.deepcopy(base)
                out[i][1][key] = None
                return out
    return None


def _reversed_list(value: Any, declared: list[str]) -> Any:
    if isinstance(value, list) and len(value) > 1 and value != value[::-1]:
        return value[::-1]
    return _ABSENT


def _missing_required(base: list[Call], tools: dict[str, dict[str, Any]]) -> list[Call] | None:
    for i, (name, args) in enumerate(base):
        for key in tools.get(name, {}).get("required", []):
            if key in args:
                out = copy.deepcopy(base)
                del out[i][1][key]
                return out
    return None


def _with_arg(base: list[Call], key: str, value: Any) -> list[Call]:
    out = copy.deepcopy(base)
    out[0][1][key] = value
    return out


def _extra_declared(
    base: list[Call], tools: dict[str, dict[str, Any]], truth: list[dict[str, Any]]
) -> list[Call] | None:
    for i, (name, args) in enumerate(base):
        ((_, params),) = truth[i].items()
        for key, schema in tools.get(name, {}).get("properties", {}).items():
            if key not in args and key not in params:
                out = copy.deepcopy(base)
                out[i][1][key] = _sample(schema)
                return out
    return None


def _wrong_function(base: list[Call], names: list[str]) -> list[Call]:
    out = copy.deepcopy(base)
    others = [n for n in names if n != out[0][0]]
    out[0] = (others[0] if others else out[0][0] + "_other", out[0][1])
    return out


def _sample(schema: Any) -> Any:
    """A value the schema accepts: its default or first enum member, else a plain one of its type."""
    if not isinstance(schema, dict):
        return "x"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kinds = _types(schema)
    kind = kinds[0] if kinds else "string"
    plain: dict[str, Any] = {"string": "x", "integer": 1, "number": 1.5, "boolean": True, "null": None}
    if kind == "array":
        return []
    if kind == "object":
        return _filled(schema)
    return plain.get(kind, "x")


def _filled(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties", {})
    return {k: _sample(properties.get(k)) for k in schema.get("required", []) if k in properties}


# --- BFCL's Java / JavaScript output form -------------------------------------------------------------------


def _render(calls: list[Call], entry: dict[str, Any], category: str) -> list[dict[str, Any]] | None:
    """The calls as BFCL's checker takes them: Python values as they are; Java/JavaScript values as source
    literals of the declared type. A collection (array, list, map, object) is written as a literal and read back
    with BFCL's own converter (``java_type_converter``/``js_type_converter``, the parse its checker does): None
    when that does not give back the very value we judge (its parsers are regular expressions: a string element
    with a comma, a nested collection, a string of digits in a map do not survive), so both judge one value."""
    language = language_of(category)
    if language == "python":
        return [{name: args} for name, args in calls]
    declared = {f["name"]: f["parameters"].get("properties", {}) for f in entry["function"]}
    out = []
    for name, args in calls:
        rendered = {}
        for key, value in args.items():
            schema = declared.get(name, {}).get(key, {})
            text = _literal(value, schema, language)
            if text is None:
                return None
            rendered[key] = text
        out.append({name: rendered})
    return out


def _literal(value: Any, schema: dict[str, Any], language: str) -> str | None:
    kind = schema.get("type")
    if isinstance(value, (list, dict)):
        return _collection(value, schema, language)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if language == "java" and kind == "long" and isinstance(value, int):
        return f"{value}L"
    if language == "java" and kind == "float":
        return f"{float(value)}f"
    if kind in ("double", "float"):
        return repr(float(value))
    return str(value)


_NESTED = ("Array", "ArrayList", "array")  # BFCL's NESTED_CONVERSION_TYPE_LIST: converted with the items' type


def _collection(value: list[Any] | dict[str, Any], schema: dict[str, Any], language: str) -> str | None:
    """A list or map as the Java/JavaScript literal BFCL's converter reads back as ``value``; None if none does."""
    kind = schema.get("type")
    items = schema.get("items")
    nested = items.get("type") if kind in _NESTED and isinstance(items, dict) else None
    text = _java_collection(value, kind, nested) if language == "java" else _js_collection(value, kind, nested)
    if text is None:
        return None
    module = "java_type_converter" if language == "java" else "js_type_converter"
    convert = getattr(importlib.import_module(f"bfcl_eval.eval_checker.ast_eval.type_convertor.{module}"), module)
    try:
        back = convert(text, kind, nested) if nested is not None else convert(text, kind)
    except Exception:  # noqa: BLE001 - BFCL's converter raising is "cannot be read back", as its checker would
        return None
    # the same JSON value by our rule, under the argument's schema as imported (``1`` is ``1.0`` where it says
    # number: BFCL's ``float`` items read back as ``60`` from ``60.0``)
    return text if same_json(back, value, SchemaAt.of(_json_types(schema))) else None


def _json_types(node: Any) -> Any:
    """A BFCL parameter doc with its type names as the importer maps them (``float`` -> ``number``, ...)."""
    if isinstance(node, list):
        return [_json_types(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_types(v) for k, v in node.items() if k != "type"}
    if isinstance(node.get("type"), str) and bfcl.JSON_TYPES.get(node["type"]) is not None:
        out["type"] = bfcl.JSON_TYPES[node["type"]]
    return out


def _element(value: Any, nested: Any, quoted: bool, java: bool = True) -> str | None:
    if isinstance(value, (list, dict)) or value is None:
        return None  # BFCL's Java/JavaScript element parsers read scalars only
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"' if quoted else value
    if java and nested == "long":
        return f"{value}L"
    if java and nested == "float" and isinstance(value, float):
        return f"{value}f"
    return repr(value) if isinstance(value, float) else str(value)


def _joined(parts: list[str | None]) -> str | None:
    return None if any(p is None for p in parts) else ", ".join(p for p in parts if p is not None)


def _java_collection(value: list[Any] | dict[str, Any], kind: Any, nested: Any) -> str | None:
    if kind == "HashMap" and isinstance(value, dict):
        puts = [(k, _element(v, None, True)) for k, v in value.items()]
        if any(v is None for _, v in puts):
            return None
        puts_text = " ".join(f'put("{k}", {v});' for k, v in puts)
        return f"new HashMap<String, Object>() {{{{ {puts_text} }}}}" if puts else "new HashMap<>()"
    if kind == "Array" and isinstance(value, list):
        # BFCL converts each element with the items' type, quotes and all: elements are written bare
        body = _joined([_element(v, nested, False) for v in value])
        return None if body is None else f"new {nested or 'Object'}[]{{{body}}}"
    if kind == "ArrayList" and isinstance(value, list):
        if not value:
            return "new ArrayList<>()"
        body = _joined([_element(v, nested, nested in ("String", "char", None)) for v in value])
        return None if body is None else f"new ArrayList<>(Arrays.asList({body}))"
    return None


def _js_collection(value: list[Any] | dict[str, Any], kind: Any, nested: Any) -> str | None:
    if kind == "array" and isinstance(value, list):
        body = _joined([_element(v, nested, nested != "any", java=False) for v in value])
        return None if body is None else f"[{body}]"
    if kind == "dict" and isinstance(value, dict):
        if not value:
            return "{}"
        # BFCL's object parser reads an array or object value with its collection parser
        pairs = [
            (k, _js_collection(v, "array" if isinstance(v, list) else "dict", None))
            if isinstance(v, (list, dict))
            else (k, _element(v, None, True, java=False))
            for k, v in value.items()
        ]
        if any(v is None for _, v in pairs):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    return None


# --- the report ---------------------------------------------------------------------------------------------


def as_json(result: Result) -> dict[str, Any]:
    def tally(t: Tally) -> dict[str, Any]:
        return {
            "total": t.total,
            "both_pass": t.both_pass,
            "both_fail": t.both_fail,
            "bfcl_only": t.bfcl_only,
            "ours_only": t.ours_only,
            "agreement": round(t.agreement, 4),
            "examples": t.examples,
        }

    return {
        "cases": dict(result.cases),
        "left_out": dict(result.left_out),
        "import_warnings": result.import_warnings,
        "total": tally(result.total()),
        "by_mutation": {m: tally(result.by_mutation[m]) for m in MUTATIONS if m in result.by_mutation},
        "by_category": {c: tally(t) for c, t in result.by_category.items()},
    }


@dataclass(frozen=True, slots=True)
class Verdict:
    """How each scorer judges one mutation class where BFCL and ours can differ, and which rule we hold to."""

    bfcl: str
    ours: str
    deepeval: str
    ragas: str
    principled: str  # "ours", "BFCL" or "both"
    why: str


_DEEPEVAL_ARGS = "pass (arguments ignored by default); fail in exact mode"
# DeepEval and Ragas as measured here (ragas 0.4.3, deepeval 4.3.1; shared FACTS): neither normalises case or
# whitespace, DeepEval compares arguments only in its exact mode, Ragas compares argument values as exact strings.
VERDICTS: dict[str, Verdict] = {
    "case_changed": Verdict(
        "pass (lowercases)",
        "pass; fail where the schema's enum does not list it, or its members differ only in case",
        _DEEPEVAL_ARGS,
        "fail",
        "ours",
        "case is folded for free values, but an enum is the tool's contract: `SINE` is not one of "
        "`sine`/`square` and the tool would refuse it (schema validity gates the comparison)",
    ),
    "whitespace_padded": Verdict(
        "pass (deletes every space)",
        "pass; fail where the schema's enum does not list the padded text",
        _DEEPEVAL_ARGS,
        "fail",
        "ours",
        "surrounding whitespace is folded, but not inside an enum (as for case)",
    ),
    "spaces_removed": Verdict(
        "pass (deletes every space)",
        "fail",
        _DEEPEVAL_ARGS,
        "fail",
        "ours",
        "only case and surrounding whitespace are folded: `NewYork` is not `New York`, and `rm -rf /tmp/a b` "
        "is not `rm -rf /tmp/ab`; a configured free-text field compares by similarity instead",
    ),
    "punctuation_changed": Verdict(
        "pass (deletes `,./-_*^`)",
        "fail",
        _DEEPEVAL_ARGS,
        "fail",
        "ours",
        "deleting punctuation changes meaning: `3x**2+2x-1` becomes `3x2+2x1`, `-5` becomes `5`, `a.b_c` becomes `abc`",
    ),
    "date_reformatted": Verdict(
        "fail (unless the answer key lists that spelling)",
        "pass (the same date: ISO 8601 and configured formats)",
        _DEEPEVAL_ARGS,
        "fail",
        "ours",
        "`March 05, 2024` is 2024-03-05. Ambiguous spellings (`05/03/2024`) stay different unless a format is "
        "configured (`arguments.date_formats`), so both fail those",
    ),
    "swapped_order": Verdict(
        "pass, except where its greedy pairing takes a call another expected call needed",
        "pass (optimal assignment, batches are sets)",
        "pass (order ignored by default)",
        "ToolCallAccuracy: fail (strict order); ToolCallF1: pass (sets)",
        "ours",
        "a parallel batch is a set; BFCL pairs greedily in answer order (`parallel_178` reversed fails there)",
    ),
    "variable_whitespace": Verdict(
        "fail, except a JavaScript array or object variable (its collection parser strips the literal first)",
        "fail (compared exactly: the import lists variables in `exact_args`)",
        _DEEPEVAL_ARGS,
        "fail",
        "ours",
        "a variable answer (`myItemList` where an array is declared) is a name in the caller's code, compared "
        "exactly in Java, in Python and for JavaScript scalars by BFCL too; its JavaScript array/object parser "
        "calls `strip()` before reading the literal, which passes `  myItemList ` for those types only",
    ),
}
AGREEING = (
    "Every other class agrees on every output: correct calls, optional arguments omitted, alternative values, "
    "wrong values and types, int for float, a float for an int (`5.0` where the schema says `integer` is another "
    "literal than `5`; only where it says `number` are they one value: docs/offline-eval.md; both rules are "
    "principled there and now agree), null for an optional argument, reordered lists, missing required "
    "or extra undeclared arguments, a declared argument the answer key does not list (the import is strict, "
    "`required_args_only: false`, because BFCL's answer key lists every argument a call may carry), a variable "
    "name in other case (`exact_args`), wrong function, extra or missing call, no call, the irrelevance "
    "categories, and one or more calls for relevance (`trajectory: {mode: superset, args: ignore, decides: "
    "true}`)."
)


def verdict_markdown(report: dict[str, Any]) -> str:
    """The verdict table: one row per class where the scorers differ, its figures from the run."""
    rows = [
        "| class | outputs | agree | BFCL | ours | DeepEval | Ragas | principled | why |",
        "| --- | ---: | ---: | --- | --- | --- | --- | --- | --- |",
    ]
    for name, v in VERDICTS.items():
        t = report["by_mutation"].get(name)
        outputs, agree = (str(t["total"]), f"{100 * t['agreement']:.1f}%") if t else ("-", "-")
        rows.append(
            f"| {name} | {outputs} | {agree} | {v.bfcl} | {v.ours} | {v.deepeval} | {v.ragas} | {v.principled} "
            f"| {v.why} |"
        )
    return "\n".join(rows) + "\n\n" + AGREEING + "\n"


_SECTION = re.compile(r"(<!-- bfcl:(?P<name>[a-z]+) -->\n)(?:.*?\n)?(<!-- /bfcl:(?P=name) -->)", re.S)


def update_docs(path: Path, report: dict[str, Any]) -> None:
    """Rewrite the generated sections of ``path`` (between ``<!-- bfcl:NAME -->`` markers) from ``report``."""
    text = path.read_text(encoding="utf-8")
    parts = {"figures": markdown(report), "verdicts": verdict_markdown(report), "summary": summary(report)}

    def replace(m: re.Match[str]) -> str:
        return m.group(1) + parts[m.group("name")] + m.group(3)

    path.write_text(_SECTION.sub(replace, text), encoding="utf-8")


def summary(report: dict[str, Any]) -> str:
    t = report["total"]
    cases = sum(report["cases"].values())
    left = ", ".join(f"{v} ({k})" for k, v in sorted(report["left_out"].items())) or "none"
    return (
        f"{t['total']} outputs of {cases} cases in {len(report['cases'])} categories; verdicts agree on "
        f"{100 * t['agreement']:.1f}% ({t['bfcl_only']} pass only BFCL, {t['ours_only']} pass only ours); "
        f"{report['import_warnings']} import warnings; left out: {left}.\n"
    )


def markdown(report: dict[str, Any]) -> str:
    """The per-mutation table: outputs, agreement, and which side passes where the two differ."""
    rows = [
        "| mutation | outputs | agree | both pass | both fail | only BFCL passes | only ours passes |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, t in [*report["by_mutation"].items(), ("**all**", report["total"])]:
        rows.append(
            f"| {name} | {t['total']} | {100 * t['agreement']:.1f}% | {t['both_pass']} | {t['both_fail']} "
            f"| {t['bfcl_only']} | {t['ours_only']} |"
        )
    rows.append("")
    rows.append("| category | cases | outputs | agree |")
    rows.append("| --- | ---: | ---: | ---: |")
    for name, t in report["by_category"].items():
        rows.append(f"| {name} | {report['cases'].get(name, 0)} | {t['total']} | {100 * t['agreement']:.1f}% |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bfcl_agreement", description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, help="the first N cases of each category (default: all)")
    parser.add_argument("--json", type=Path, default=Path("bfcl-agreement.json"), help="where to write the figures")
    parser.add_argument("--docs", type=Path, help="rewrite the generated sections of this file (docs/bfcl.md)")
    args = parser.parse_args(argv)
    report = as_json(run(args.limit))
    args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.docs:
        update_docs(args.docs, report)
    sys.stdout.write(summary(report) + "\n" + markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
