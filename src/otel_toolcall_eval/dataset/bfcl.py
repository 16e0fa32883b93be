"""Import the Berkeley Function Calling Leaderboard's single-turn categories into the one dataset format.

BFCL ships each category as two JSON-lines files: ``BFCL_v4_<category>.json`` (id, the conversation, the
function docs) and ``possible_answer/BFCL_v4_<category>.json`` (id, ``ground_truth``: one ``{function: {param:
[acceptable values]}}`` per expected call). What becomes what:

- a function doc becomes a tool with a JSON Schema: BFCL's Python and Java/JavaScript type names (``dict``,
  ``float``, ``tuple``, ``any``, ``HashMap``, ``long``, ...) map to JSON Schema types; ``any`` sets no type. What
  does not convert cleanly is reported as a warning (``file:line: field: message``) and converted the nearest
  faithful way: an ``enum`` whose members are not of the declared type widens the type to theirs (BFCL's answers
  then use those members), an ``enum`` on an array moves to its items, an unknown type sets no type, an answer
  value of another type than declared (BFCL's "variable" answers) widens that argument's type, so the right
  answer is never schema-invalid under the imported schema;
- an acceptable value outside the declared ``enum`` is added to it (BFCL does not check enums, and its answer key
  is the ground truth); an argument the function does not declare is left out when the answer key lets it be
  absent, and the case is skipped when it does not (BFCL fails every call then);
- an expected argument with one acceptable value goes to ``args``, with several to ``arg_options``; BFCL's ``""``
  among the values means "may be absent" (``optional_args``), ``""`` alone means "must be absent" (the key is
  left out: an extra argument fails, see below); a nested object's or list of objects' per-key alternatives
  are expanded into whole values (at most ``MAX_VARIANTS`` per argument, else the case is skipped with a
  warning);
- every imported call has ``required_args_only: false``: BFCL's answer key names every argument a call may
  carry, and any other argument is BFCL's "unexpected parameter";
- an argument whose acceptable values are all strings where the doc declares another type (BFCL's "variable"
  answers: ``"myItemList"`` for an array) is listed in ``exact_args``: compared exactly, as BFCL does;
- ``parallel`` and ``parallel_multiple`` calls share one batch (a set, in any order);
- ``irrelevance`` and ``live_irrelevance`` become ``expected_no_tool`` cases (the no-tool-needed slice);
  ``live_relevance`` (no answer key: any call counts) becomes one expected call of the first offered tool, each
  other offered tool as an acceptable alternative, and the trajectory mode ``superset`` with arguments
  ``ignore`` that decides the case (``trajectory.decides``): one or more calls, at least one of an offered tool,
  pass, whatever their arguments, as BFCL's relevance rule says.

Multi-turn, memory and web-search categories are scored by executing calls against BFCL's simulated APIs, not by
an answer key: they are refused, naming the categories that import. The input is untrusted: lines are parsed
strictly and bounded in depth, nothing in it names a file to read, and expansion of alternatives is capped.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from otel_toolcall_eval import _json
from otel_toolcall_eval.dataset.errors import DatasetError, LocatedError
from otel_toolcall_eval.dataset.io import _row_error, loads_strict
from otel_toolcall_eval.dataset.models import DatasetCase

AST_CATEGORIES = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
NO_TOOL_CATEGORIES = ("irrelevance", "live_irrelevance")
ANY_CALL_CATEGORIES = ("live_relevance",)
CATEGORIES = (*AST_CATEGORIES, *NO_TOOL_CATEGORIES, *ANY_CALL_CATEGORIES)
MAX_VARIANTS = 1024  # whole values one argument may expand to (BFCL's largest: 128, live_simple_44's body)
MAX_LINE_BYTES = 4 * 1024 * 1024

_FILE_NAME = re.compile(r"BFCL_v\d+_(?P<category>[a-z_]+)\.json")
# BFCL's type names (Python, Java and JavaScript categories) as JSON Schema types; None: no type constraint.
JSON_TYPES: dict[str, str | None] = {
    "string": "string",
    "String": "string",
    "char": "string",
    "integer": "integer",
    "long": "integer",
    "short": "integer",
    "byte": "integer",
    "Bigint": "integer",
    "float": "number",
    "double": "number",
    "number": "number",
    "boolean": "boolean",
    "Boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "tuple": "array",
    "list": "array",
    "Array": "array",
    "ArrayList": "array",
    "Queue": "array",
    "Stack": "array",
    "dict": "object",
    "object": "object",
    "HashMap": "object",
    "Hashtable": "object",
    "any": None,
    "Any": None,
}
# JSON Schema keywords carried over as they are (annotations and bounds BFCL uses); ``optional`` is BFCL's own
# and says what ``required`` already says.
_KEPT = ("description", "default", "format", "maximum", "minimum", "minItems", "maxItems")


@dataclass(slots=True, frozen=True)
class ConversionWarning:
    """Something that did not convert as written, and what was done instead."""

    path: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.field}: {self.message}"


@dataclass(slots=True)
class Imported:
    """The cases of one import, in file order, and every warning met on the way."""

    cases: list[DatasetCase] = field(default_factory=list)
    warnings: list[ConversionWarning] = field(default_factory=list)
    skipped: int = 0


def category_of(path: str | Path) -> str:
    """The BFCL category a file name spells (``BFCL_v4_live_simple.json`` -> ``live_simple``)."""
    match = _FILE_NAME.fullmatch(Path(path).name)
    if match is None:
        raise LocatedError(path, None, None, "not a BFCL file name (BFCL_v<N>_<category>.json); give --category")
    return match["category"]


def answers_path(questions: str | Path) -> Path:
    """Where BFCL keeps a category's answer key: ``possible_answer/`` beside the question file."""
    path = Path(questions)
    return path.parent / "possible_answer" / path.name


def import_bfcl(questions: str | Path, answers: str | Path | None = None, category: str | None = None) -> Imported:
    """Import one BFCL category file (and its answer key, found beside it unless given)."""
    category = category or category_of(questions)
    if category not in CATEGORIES:
        raise LocatedError(
            questions,
            None,
            None,
            f"category '{category}' has no answer key to import (BFCL scores multi-turn, memory and web-search "
            "categories by executing the calls; format_sensitivity lists ids of other categories); importable: "
            + ", ".join(CATEGORIES),
        )
    out = Imported()
    answer_lines: Iterator[tuple[int, dict[str, Any]]] | None = None
    answer_file: Path | None = None
    if category in AST_CATEGORIES:
        answer_file = Path(answers) if answers is not None else answers_path(questions)
        answer_lines = _lines(answer_file)
    for number, entry in _lines(Path(questions)):
        conv = _Converter(str(questions), number, out.warnings)
        case_id = entry.get("id")
        if not isinstance(case_id, str) or not case_id:
            raise DatasetError(questions, number, "id", "missing or not a string")
        answer = None
        if answer_lines is not None and answer_file is not None:
            answer_number, answer = next(answer_lines, (None, None))
            if answer is None or answer_number is None:
                raise DatasetError(answer_file, None, "id", f"no answer for '{case_id}' (file ends first)")
            if answer.get("id") != case_id:
                raise DatasetError(
                    answer_file, answer_number, "id", f"'{answer.get('id')}' where '{case_id}' was expected"
                )
            conv_answer = _Converter(str(answer_file), answer_number, out.warnings)
        try:
            case = _case(entry, category, conv, answer, conv_answer if answer is not None else None)
        except _Skip as skip:
            out.warnings.append(ConversionWarning(skip.path, skip.line, skip.field, skip.message + ": case skipped"))
            out.skipped += 1
            continue
        out.cases.append(case)
    if answer_lines is not None and answer_file is not None:
        extra = next(answer_lines, None)
        if extra is not None:
            raise DatasetError(answer_file, extra[0], "id", f"answer '{extra[1].get('id')}' has no question")
    return out


class _Skip(Exception):
    def __init__(self, path: str, line: int, field: str, message: str) -> None:
        super().__init__(message)
        self.path, self.line, self.field, self.message = path, line, field, message


@dataclass(slots=True)
class _Converter:
    path: str
    line: int
    warnings: list[ConversionWarning]

    def warn(self, where: str, message: str) -> None:
        self.warnings.append(ConversionWarning(self.path, self.line, where, message))

    def error(self, where: str, message: str) -> DatasetError:
        return DatasetError(self.path, self.line, where, message)

    def schema(self, node: Any, where: str) -> dict[str, Any]:
        """One BFCL parameter node as JSON Schema (recursively through properties and items)."""
        if not isinstance(node, dict):
            raise self.error(where, "a parameter must be an object")
        out: dict[str, Any] = {}
        declared = node.get("type")
        json_type: str | None = None
        if isinstance(declared, str) and declared in JSON_TYPES:
            json_type = JSON_TYPES[declared]
        elif declared is not None:
            self.warn(f"{where}.type", f"unknown type {declared!r}: no type constraint")
        if json_type is not None:
            out["type"] = json_type
        for key in _KEPT:
            if key in node:
                out[key] = node[key]
        properties = node.get("properties")
        if properties is not None:
            if not isinstance(properties, dict):
                raise self.error(f"{where}.properties", "must be an object")
            out["properties"] = {k: self.schema(v, f"{where}.properties.{k}") for k, v in properties.items()}
        required = node.get("required")
        if required is not None:
            if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
                raise self.error(f"{where}.required", "must be a list of names")
            known = out.get("properties", {})
            stray = [r for r in required if r not in known]
            for name in stray:
                self.warn(f"{where}.required", f"{name!r} is not among the properties: left out")
            out["required"] = [r for r in required if r in known]
        if "items" in node:
            out["items"] = self.schema(node["items"], f"{where}.items")
        if "enum" in node:
            self._enum(node["enum"], out, where)
        return out

    def _enum(self, members: Any, out: dict[str, Any], where: str) -> None:
        if not isinstance(members, list) or not members:
            self.warn(f"{where}.enum", "not a non-empty list: left out")
            return
        json_type = out.get("type")
        if json_type == "array":
            items = out.setdefault("items", {})
            if "enum" not in items and all(_fits(m, items.get("type")) for m in members):
                items["enum"] = members
                self.warn(f"{where}.enum", "an enum on an array lists its items' values: moved to items")
                return
        if json_type is not None and not all(_fits(m, json_type) for m in members):
            kinds = sorted({_json_type(m) for m in members} | {json_type})
            self.warn(
                f"{where}.enum",
                f"members {_preview(members)} are not all of the declared type {json_type}: type widened to {kinds}",
            )
            out["type"] = kinds
        out["enum"] = members


def _case(
    entry: dict[str, Any], category: str, conv: _Converter, answer: dict[str, Any] | None, aconv: _Converter | None
) -> DatasetCase:
    turns = entry.get("question")
    if not isinstance(turns, list) or not turns or not all(isinstance(t, list) for t in turns):
        raise conv.error("question", "must be a non-empty list of turns (lists of messages)")
    if len(turns) > 1:
        raise conv.error("question", f"{len(turns)} turns: only single-turn categories import")
    messages = turns[0]
    if not messages or not all(isinstance(m, dict) for m in messages):
        raise conv.error("question", "the turn must be a non-empty list of messages")
    last = messages[-1]
    if last.get("role") != "user" or not isinstance(last.get("content"), str):
        raise conv.error("question", "the turn's last message must be the user's, with text content")
    functions = entry.get("function")
    if not isinstance(functions, list) or (not functions and category not in NO_TOOL_CATEGORIES):
        raise conv.error("function", "must be a non-empty list of function docs")
    tools: list[dict[str, Any]] = []
    for i, doc in enumerate(functions):
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
            raise conv.error(f"function.{i}", "a function doc needs a 'name'")
        tool: dict[str, Any] = {"name": doc["name"], "description": str(doc.get("description") or "")}
        tool["parameters"] = conv.schema(doc.get("parameters") or {"type": "dict"}, f"function.{i}.parameters")
        tools.append(tool)
    common: dict[str, Any] = {
        "id": entry["id"],
        "user_input": last["content"],
        "message_history": messages[:-1],
        "available_tools": tools,
        "notes": f"BFCL {category}",
    }
    if category in NO_TOOL_CATEGORIES:
        return _validated(conv, {**common, "expected_no_tool": True})
    if category in ANY_CALL_CATEGORIES:
        first, *rest = ({"name": t["name"]} for t in tools)
        one_or_more = {"mode": "superset", "args": "ignore", "decides": True}
        return _validated(
            conv,
            {
                **common,
                "expected_tool_calls": [first],
                "acceptable_alternatives": [[c] for c in rest],
                "trajectory": one_or_more,
            },
        )
    assert answer is not None and aconv is not None
    calls = _expected(answer, category, aconv, {t["name"]: t for t in tools})
    return _validated(conv, {**common, "expected_tool_calls": calls}, aconv)


def _validated(conv: _Converter, data: dict[str, Any], answers: _Converter | None = None) -> DatasetCase:
    """The case, validated as a dataset row; an error names the file it comes from (the answer key for the
    expected calls, else the question file), the column, then the place inside it."""
    try:
        return DatasetCase.model_validate(data)
    except ValidationError as exc:
        error = _row_error(conv.path, conv.line, exc)
        if answers is not None and error.field == "expected_tool_calls":
            error = DatasetError(answers.path, answers.line, error.field, error.message)
        raise error from None


def _expected(
    answer: dict[str, Any], category: str, conv: _Converter, tools: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    truth = answer.get("ground_truth")
    if not isinstance(truth, list) or not truth:
        raise conv.error("ground_truth", "must be a non-empty list of calls")
    batch = 0 if "parallel" in category else None
    # the declared types before any answer widens them (a tool called twice shares its schema)
    declared = {
        n: {k: p.get("type") for k, p in t["parameters"].get("properties", {}).items() if isinstance(p, dict)}
        for n, t in tools.items()
    }
    calls = []
    for i, item in enumerate(truth):
        if not isinstance(item, dict) or len(item) != 1:
            raise conv.error(f"ground_truth.{i}", "a call is an object with one key, the function's name")
        ((name, params),) = item.items()
        if not isinstance(params, dict):
            raise conv.error(f"ground_truth.{i}.{name}", "the arguments must be an object")
        tool = tools.get(name)
        properties = tool["parameters"].get("properties", {}) if tool else {}
        if tool is not None:
            for key in tool["parameters"].get("required", ()):
                if key not in params:
                    conv.warn(f"ground_truth.{i}.{name}", f"{key!r} is required by the schema, not in the answer")
        args: dict[str, Any] = {}
        options: dict[str, list[Any]] = {}
        optional: list[str] = []
        exact: list[str] = []
        for key, values in params.items():
            where = f"ground_truth.{i}.{name}.{key}"
            if not isinstance(values, list):
                raise conv.error(where, "must be a list of acceptable values")
            if not values:  # BFCL's checker fails every call then (absent or present): a broken answer key
                raise _Skip(conv.path, conv.line, where, "lists no acceptable value, so no call can pass")
            present = [v for v in values if v != ""]
            if tool is not None and key not in properties:
                # BFCL fails every call that passes an argument its function does not declare
                if len(present) == len(values):
                    raise _Skip(conv.path, conv.line, where, "required by the answer key, but not declared")
                conv.warn(where, "not a parameter the function declares: left out (it must be absent)")
                continue
            if not present:
                continue  # "" alone: the argument must be absent (an extra argument fails the call)
            if len(present) < len(values):
                optional.append(key)
                if tool is not None and key in tool["parameters"].get("required", ()):
                    conv.warn(where, "optional in the answer key, but required by the function's schema")
            if declared.get(name, {}).get(key) == "object" and any(
                isinstance(v, dict) and v and not _alternatives_object(v) for v in present
            ):
                conv.warn(
                    where,
                    "an object answer whose values are not lists of alternatives: taken as one whole value (BFCL's "
                    "checker reads each value's characters as its alternatives, so no call passes there)",
                )
            expanded = _expand(present, conv, where)
            if _names_a_variable(declared.get(name, {}).get(key), expanded):
                exact.append(key)
            _widen(properties.get(key), expanded, conv, where)
            if len(expanded) == 1:
                args[key] = expanded[0]
            else:
                options[key] = expanded
        call: dict[str, Any] = {"name": name, "args": args, "required_args_only": False, "batch": batch}
        if options:
            call["arg_options"] = options
        if optional:
            call["optional_args"] = optional
        if exact:
            call["exact_args"] = exact
        calls.append(call)  # validated with the whole case
    return calls


def _names_a_variable(declared: Any, values: list[Any]) -> bool:
    """Is every acceptable value a string where the doc declares another type? BFCL calls such answers variables
    (``"myItemList"`` for an array: a name in the caller's code, mostly Java and JavaScript) and compares them
    exactly, in every language: identifiers are case- and space-sensitive, so the import sets ``exact_args``."""
    if declared is None:
        return False  # ``any`` (no type): BFCL treats the value as a plain string
    kinds = declared if isinstance(declared, list) else [declared]
    return "string" not in kinds and all(isinstance(v, str) for v in values)


def _expand(values: list[Any], conv: _Converter, where: str) -> list[Any]:
    """Whole acceptable values: a nested object's (or list of objects') per-key alternatives multiplied out."""
    out: list[Any] = []
    for value in values:
        if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
            out.extend(_object_variants(value, conv, where))
        elif isinstance(value, list) and value and all(_alternatives_object(v) for v in value):
            per_item = [_object_variants(v, conv, where) for v in value]
            _cap(_product_size(per_item), conv, where)
            out.extend(list(combo) for combo in itertools.product(*per_item))
        else:
            out.append(value)
        _cap(len(out), conv, where)
    unique: list[Any] = []
    seen: set[str] = set()
    for value in out:
        key = _json.canonical(value)
        if key not in seen:
            seen.add(key)
            unique.append(value)
    return unique


def _alternatives_object(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(isinstance(v, list) for v in value.values())


def _object_variants(value: dict[str, list[Any]], conv: _Converter, where: str) -> list[dict[str, Any]]:
    keys = list(value)
    choices = []
    for key in keys:
        options = value[key]
        if not options:
            raise _Skip(conv.path, conv.line, f"{where}.{key}", "lists no acceptable value, so no call can pass")
        choices.append(options)
    _cap(_product_size(choices), conv, where)
    variants = []
    for combo in itertools.product(*choices):
        variants.append({k: v for k, v in zip(keys, combo, strict=True) if v != ""})
    return variants


def _product_size(choices: list[list[Any]]) -> int:
    size = 1
    for options in choices:
        size *= len(options)
        if size > MAX_VARIANTS:
            break
    return size


def _cap(size: int, conv: _Converter, where: str) -> None:
    if size > MAX_VARIANTS:
        raise _Skip(conv.path, conv.line, where, f"more than {MAX_VARIANTS} whole values once expanded")


def _widen(schema: Any, values: list[Any], conv: _Converter, where: str) -> None:
    """An answer value of another type than declared (BFCL's "variable" answers): widen the declared type."""
    if not isinstance(schema, dict):
        return
    members = schema.get("enum")
    if isinstance(members, list):
        outside = [v for v in values if v not in members]
        if outside:
            if any(v is not None for v in outside):
                conv.warn(where, f"acceptable value(s) {_preview(outside)} not in the declared enum: added to it")
            schema["enum"] = [*members, *outside]
    properties = schema.get("properties")
    if isinstance(properties, dict):  # a variable inside an object answer (simple_javascript_5's store)
        for key, inner in properties.items():
            found = [v[key] for v in values if isinstance(v, dict) and key in v]
            if found:
                _widen(inner, found, conv, f"{where}.{key}")
    items = schema.get("items")
    if isinstance(items, dict):  # one level into arrays, as deep as BFCL's own type check goes
        elements = [e for v in values if isinstance(v, list) for e in v]
        if elements:
            _widen(items, elements, conv, f"{where}[]")
    if "type" not in schema:
        return
    declared = schema["type"]
    kinds = declared if isinstance(declared, list) else [declared]
    odd = sorted({_json_type(v) for v in values if not any(_fits(v, k) for k in kinds)})
    if not odd:
        return
    widened = sorted({*kinds, *odd})
    if odd != ["null"]:  # an explicit null among the answers is a plain "may be null", not a conversion problem
        conv.warn(where, f"acceptable value(s) of type {odd} where {declared} is declared: type widened to {widened}")
    schema["type"] = widened


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _fits(value: Any, json_type: Any) -> bool:
    if json_type is None:
        return True
    kind = _json_type(value)
    return kind == json_type or (json_type == "number" and kind == "integer")


def _preview(values: list[Any]) -> str:
    text = _json.dumps(values)
    return text if len(text) <= 80 else text[:77] + "..."


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON-lines file with their line numbers; blank lines skipped."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the generator
    except OSError as exc:
        raise DatasetError(path, None, None, f"cannot read: {exc.strerror}") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            if len(raw) > MAX_LINE_BYTES:
                raise DatasetError(path, number, None, f"line longer than {MAX_LINE_BYTES} bytes")
            try:
                value = loads_strict(raw)
            except (ValueError, RecursionError) as exc:
                raise DatasetError(path, number, None, f"not JSON: {exc}") from None
            if not isinstance(value, dict):
                raise DatasetError(path, number, None, "a line must be a JSON object")
            if _json.too_deep(value):
                raise DatasetError(path, number, None, f"nested deeper than {_json.MAX_DEPTH} levels")
            yield number, value
