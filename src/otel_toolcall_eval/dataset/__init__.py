"""The ground-truth dataset: its format (defined once, as pydantic models), JSONL/CSV I/O, template, JSON Schema."""

from otel_toolcall_eval.dataset.errors import DatasetError, LocatedError
from otel_toolcall_eval.dataset.io import case_to_dict, detect_format, iter_rows, read_cases, write_cases
from otel_toolcall_eval.dataset.models import COLUMNS, JSON_COLUMNS, DatasetCase, Difficulty, ExpectedCall, Slice
from otel_toolcall_eval.dataset.schema import dataset_json_schema
from otel_toolcall_eval.dataset.template import template_cases

__all__ = [
    "COLUMNS",
    "JSON_COLUMNS",
    "DatasetCase",
    "DatasetError",
    "Difficulty",
    "ExpectedCall",
    "LocatedError",
    "Slice",
    "case_to_dict",
    "dataset_json_schema",
    "detect_format",
    "iter_rows",
    "read_cases",
    "template_cases",
    "write_cases",
]
