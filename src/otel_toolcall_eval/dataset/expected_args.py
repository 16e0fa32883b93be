"""Expected arguments checked against the case's own tool schemas (``available_tools``).

A case whose expected call breaks the schema of the tool it calls can never be met by a schema-valid call: it
grades every right answer as wrong. ``dataset validate`` reports each such value, and ``harvest`` drafts only
calls that pass (the others are named in ``notes``).

Expected arguments are not a whole call: only the keys that matter are listed (``required_args_only``), an
``arg_options`` key stands apart from ``args``, and null stands for absent (``null_equals_absent``). So every
listed value is checked against the schema with ``required`` dropped at every level, each alternative of an
``arg_options`` key on its own, and null values are not checked. Schemas are compiled with nothing fetched
(``checks.schema.compile_schema``); a schema that does not compile is not this check's business.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from otel_toolcall_eval.checks.schema import SchemaCompileError, compile_schema, validate_with
from otel_toolcall_eval.conventions.llm_spans import definition_from
from otel_toolcall_eval.dataset.models import DatasetCase, ExpectedCall

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMAS = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
)


def without_required(schema: Any, depth: int = 0) -> Any:
    """``schema`` with every ``required`` keyword dropped (a property named ``required`` is kept)."""
    if not isinstance(schema, Mapping) or depth > 64:
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "required" and isinstance(value, list):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {k: without_required(v, depth + 1) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [without_required(v, depth + 1) for v in value]
        elif key in _SCHEMAS:
            out[key] = (
                [without_required(v, depth + 1) for v in value]
                if isinstance(value, list)
                else without_required(value, depth + 1)
            )
        else:
            out[key] = value
    return out


class ToolSchemas:
    """The validators of one case's tools (``required`` dropped), built once per distinct tool list."""

    def __init__(self) -> None:
        self._validators: dict[bytes, dict[str, Any]] = {}

    def of(self, available_tools: list[dict[str, Any]]) -> dict[str, Any]:
        """By tool name: the validator of its schema in ``available_tools`` (a case's tool list)."""
        if not available_tools:
            return {}
        key = orjson.dumps(available_tools)
        found = self._validators.get(key)
        if found is not None:
            return found
        out: dict[str, Any] = {}
        for item in available_tools:
            definition = definition_from(item)
            if definition is None or definition.parameters is None:
                continue
            try:
                out[definition.name] = compile_schema(without_required(definition.parameters))
            except SchemaCompileError:
                continue
        if len(self._validators) > 1024:
            self._validators.clear()
        self._validators[key] = out
        return out


def call_errors(call: ExpectedCall, validator: Any) -> list[str]:
    """What in one expected call's arguments breaks its tool's schema (``validator``: ``ToolSchemas``')."""
    problems: list[str] = []
    args = {k: v for k, v in call.args.items() if v is not None}
    verdict = validate_with(validator, args, max_errors=3)
    for error in verdict.errors:
        pointer, _, message = error.partition(": ")
        problems.append(f"args{'' if pointer == '/' else pointer}: {message}")
    for key, options in call.arg_options.items():
        for index, value in enumerate(options):
            if value is None:
                continue
            verdict = validate_with(validator, {key: value}, max_errors=1)
            problems += [f"arg_options.{key}[{index}]: {e.split(': ', 1)[-1]}" for e in verdict.errors]
    return problems


def argument_errors(case: DatasetCase, schemas: ToolSchemas) -> Iterator[tuple[str, str]]:
    """(column, message) for each expected call, of the expected list or an alternative, whose arguments break
    the schema the case gives its tool."""
    validators = schemas.of(case.available_tools)
    if not validators:
        return
    lists = [("expected_tool_calls", case.expected_tool_calls)]
    lists += [(f"acceptable_alternatives[{i}]", alt) for i, alt in enumerate(case.acceptable_alternatives)]
    for column, calls in lists:
        for index, call in enumerate(calls):
            validator = validators.get(call.name)
            if validator is None:
                continue
            for problem in call_errors(call, validator):
                yield column, f"[{index}] {call.name}: {problem} (the tool's schema in available_tools)"
