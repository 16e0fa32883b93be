"""Render the offline-evaluation doc's reference tables from the models and the metric catalogue.

``python -m otel_toolcall_eval.offline.docs docs/offline-eval.md`` rewrites the tables between the doc's
``<!-- table:NAME -->`` markers; a test fails when the doc and the code disagree.
"""

from __future__ import annotations

import re
import sys
import types
import typing
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from otel_toolcall_eval.config.catalog import SUMMARY_METRICS, TOOL_METRICS
from otel_toolcall_eval.config.offline import (
    ArgumentMatchConfig,
    ArgumentRule,
    GateConfig,
    SimilarityConfig,
    TrajectoryConfig,
)
from otel_toolcall_eval.dataset.models import JSON_COLUMNS, DatasetCase, ExpectedCall, TrajectoryOptions


def _type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type(a) for a in args if a is not type(None)) + (" or null" if type(None) in args else "")
    if origin is list:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return "object" if args[1] is Any else f"object of {_type(args[1])}"
    if origin is typing.Literal:
        return " / ".join(f"`{a}`" for a in args)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " / ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {"ExpectedCall": "call", "TrajectoryOptions": "trajectory options"}.get(
            annotation.__name__, annotation.__name__
        )
    return {str: "string", bool: "bool", int: "int", float: "number", Any: "any"}.get(annotation, str(annotation))


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, BaseModel):
        return "(see below)"
    if isinstance(value, list) and len(value) > 3:
        return f"{len(value)} formats (see `checks.argument_match`)"
    return f"`{_json(value)}`"


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def fields_table(model: type[BaseModel], *, json_columns: tuple[str, ...] = ()) -> str:
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        kind = _type(field.annotation)
        if name in json_columns:
            kind += " (JSON text in CSV)"
        default = _default(field) if field.default is not PydanticUndefined or field.default_factory else "required"
        rows.append(f"| `{name}` | {kind} | {default} | {_cell(field.description or '')} |")
    return "\n".join(rows)


def metrics_table() -> str:
    rows = ["| metric (gate key) | better | formula |", "|---|---|---|"]
    rows += [f"| `{m.path}` | {m.better} | {_cell(m.meaning)} |" for m in SUMMARY_METRICS]
    return "\n".join(rows)


def tool_metrics_table() -> str:
    rows = ["| metric (`per_tool.<tool>.<metric>`) | better | formula |", "|---|---|---|"]
    rows += [f"| `{m.path}` | {m.better} | {_cell(m.meaning)} |" for m in TOOL_METRICS]
    return "\n".join(rows)


TABLES: dict[str, Callable[[], str]] = {
    "dataset-columns": lambda: fields_table(DatasetCase, json_columns=JSON_COLUMNS),
    "expected-call": lambda: fields_table(ExpectedCall),
    "offline-metrics": metrics_table,
    "tool-metrics": tool_metrics_table,
    "gate-config": lambda: fields_table(GateConfig),
    "argument-config": lambda: fields_table(ArgumentMatchConfig),
    "similarity-config": lambda: fields_table(SimilarityConfig),
    "argument-rule": lambda: fields_table(ArgumentRule),
    "trajectory-options": lambda: fields_table(TrajectoryOptions),
    "trajectory-config": lambda: fields_table(TrajectoryConfig),
}


def render(text: str) -> str:
    for name, fn in TABLES.items():
        pattern = re.compile(rf"(<!-- table:{name} -->\n)(?:.*?\n)?(<!-- /table:{name} -->)", re.S)
        m = pattern.search(text)
        if m is None:
            raise ValueError(f"the doc lacks the <!-- table:{name} --> markers")
        text = text[: m.start()] + m.group(1) + fn() + "\n" + m.group(2) + text[m.end() :]
    return text


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/offline-eval.md")
    path.write_text(render(path.read_text()))
