"""Read and write datasets as JSONL (for the harness) and CSV (for people), losslessly in both directions.

A CSV cell of a JSON-valued column holds JSON text; an empty cell means the column's default. Writing
normalises nothing the model keeps, so ``read(write(cases)) == cases`` for both formats, and JSONL written
here survives JSONL -> CSV -> JSONL byte for byte. Every error names the file, the line (and for CSV the row)
and the column.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import orjson
from pydantic import ValidationError

from otel_toolcall_eval import _json
from otel_toolcall_eval.dataset.errors import DatasetError
from otel_toolcall_eval.dataset.fast import SharedTools, case_from
from otel_toolcall_eval.dataset.models import COLUMNS, JSON_COLUMNS, ColumnError, DatasetCase, ExpectedCall

__all__ = [
    "FORMATS",
    "DatasetError",
    "Format",
    "RawReader",
    "RawRecord",
    "Row",
    "case_to_dict",
    "decode",
    "detect_format",
    "dump_cases",
    "iter_rows",
    "loads_strict",
    "parse_jsonl_line",
    "read_cases",
    "write_cases",
]

Format = Literal["jsonl", "csv"]
FORMATS: dict[str, Format] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
_TEXT_COLUMNS = frozenset({"user_input"})  # an empty cell is an empty string, not "absent"

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # tool schemas in a cell easily pass the 128 KiB default


@dataclass(slots=True, frozen=True)
class Row:
    """One case with where it came from (line of its first character; CSV rows count data rows from 1)."""

    line: int
    case: DatasetCase
    row: int | None = None


def detect_format(path: str | Path, given: str | None = None) -> Format:
    if given is not None:
        if given not in ("jsonl", "csv"):
            raise DatasetError(path, None, None, f"unknown format '{given}' (jsonl or csv)")
        return "csv" if given == "csv" else "jsonl"
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise DatasetError(path, None, None, "cannot tell the format from the extension: use .jsonl or .csv")
    return fmt


@dataclass(slots=True)  # not frozen: one per line read, and a frozen init costs ~5x
class RawRecord:
    """A case as read, not yet validated: a JSONL line (bytes) or a CSV row's cells."""

    line: int
    row: int | None
    payload: bytes | list[str]


class RawReader:
    """Streams a dataset file's records without validating them, so validation can happen elsewhere (in
    worker processes, for the parallel evaluator). ``header`` is the CSV header once iteration has begun."""

    def __init__(self, path: str | Path, fmt: str | None = None) -> None:
        self.path = path
        self.format: Format = detect_format(path, fmt)
        self.header: list[str] | None = None

    def __iter__(self) -> Iterator[RawRecord]:
        """Raises ``DatasetError`` for what no later row can recover from (unreadable file, bad header, bad CSV)."""
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise DatasetError(self.path, None, None, f"cannot read: {exc.strerror}") from None
        with handle:
            if self.format == "jsonl":
                for number, text in enumerate(handle, start=1):
                    if number == 1 and text.startswith(b"\xef\xbb\xbf"):
                        text = text[3:]
                    if text.strip():
                        yield RawRecord(number, None, text)
                return
            yield from self._csv(io.TextIOWrapper(handle, encoding="utf-8-sig", newline=""))

    def _csv(self, handle: Iterable[str]) -> Iterator[RawRecord]:
        path = self.path
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            return
        except (csv.Error, UnicodeDecodeError) as exc:
            raise DatasetError(path, 1, None, f"not valid CSV: {exc}") from None
        unknown = [c for c in header if c not in COLUMNS]
        if unknown:
            raise DatasetError(path, 1, unknown[0], f"unknown column (the columns are: {', '.join(COLUMNS)})")
        if len(set(header)) != len(header):
            dup = next(c for c in header if header.count(c) > 1)
            raise DatasetError(path, 1, dup, "column appears twice")
        self.header = header
        number = 0
        while True:
            start = reader.line_num + 1
            try:
                cells = next(reader)
            except StopIteration:
                return
            except (csv.Error, UnicodeDecodeError) as exc:  # the reader cannot resync after this
                raise DatasetError(path, start, None, f"not valid CSV: {exc}") from None
            if not any(cell.strip() for cell in cells):
                continue
            number += 1
            yield RawRecord(start, number, cells)


def decode(path: str | Path, record: RawRecord, header: list[str] | None) -> DatasetCase:
    """Validate one raw record; ``DatasetError`` names its line, row and column."""
    if isinstance(record.payload, bytes):
        return parse_jsonl_line(path, record.line, record.payload)
    assert header is not None
    return _csv_case(path, record.line, record.row or 0, header, record.payload)


def iter_rows(path: str | Path, fmt: str | None = None, *, collect: list[DatasetError] | None = None) -> Iterator[Row]:
    """Stream the cases of a file. The first bad row raises, unless ``collect`` gathers the row errors instead."""
    reader = RawReader(path, fmt)
    for record in reader:
        try:
            case = decode(path, record, reader.header)
        except DatasetError as exc:
            if collect is None:
                raise
            collect.append(exc)
            continue
        yield Row(record.line, case, record.row)


def read_cases(path: str | Path, fmt: str | None = None) -> list[DatasetCase]:
    return [row.case for row in iter_rows(path, fmt)]


def parse_jsonl_line(path: str | Path, number: int, text: str | bytes) -> DatasetCase:
    """One JSONL line to a case, errors mapped onto ``file:line: column``.

    A line of the common shape is read by plain code (``dataset.fast``: the same case, or None and the model
    decides), and a tool list seen on a line before is not decoded again."""
    if isinstance(text, bytes):
        shared = _SHARED_TOOLS.split(text, _exact, _json.MAX_DEPTH)
        if shared is not None:
            case = case_from(*shared)
            if case is not None:
                return case
    try:
        data = loads_strict(text)
    except (ValueError, RecursionError) as exc:
        raise DatasetError(path, number, None, f"not valid JSON: {exc}") from None
    if _json.text_too_deep(text, data):
        items = data.items() if isinstance(data, dict) else ()
        column = next((str(k) for k, v in items if _json.too_deep(v, _json.MAX_DEPTH - 1)), None)
        raise DatasetError(path, number, column, _TOO_DEEP)
    case = case_from(data)
    if case is None:
        try:
            case = DatasetCase.model_validate(data)
        except ValidationError as exc:
            raise _row_error(path, number, exc) from None
    if isinstance(text, bytes):
        _SHARED_TOOLS.learn(text, data.get("available_tools"), _exact)
    return case


_SHARED_TOOLS = SharedTools()  # per process: keyed by the lists' text, so any file may use what another taught


# Ground truth nested deeper than arguments may be could never match a call (and would exhaust the recursive
# walks of validation and matching): the row is refused with its line and column.
_TOO_DEEP = f"nested deeper than {_json.MAX_DEPTH} levels"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# orjson turns integers past 64 bits into floats (not lossless): a run of 19+ digits sends the text to the
# standard library instead. Found by mapping every digit to "0" and searching for 19 of them, which is ~30x
# faster than the regular expression ``\d{19,}`` on a typical line.
_DIGITS_BYTES = bytes.maketrans(b"0123456789", b"0000000000")
_DIGITS_STR = str.maketrans("123456789", "000000000")
_RUN_BYTES = b"0" * 19
_RUN_STR = "0" * 19


def _exact(text: bytes) -> bool:
    """Whether orjson decodes ``text`` exactly (no digit run that could be an integer past 64 bits)."""
    return _RUN_BYTES not in text.translate(_DIGITS_BYTES)


def _long_digit_run(text: str | bytes) -> bool:
    if isinstance(text, bytes):
        return _RUN_BYTES in text.translate(_DIGITS_BYTES)
    return _RUN_STR in text.translate(_DIGITS_STR)


def loads_strict(text: str | bytes) -> Any:
    """Strict JSON (no NaN/Infinity), exact: orjson, or the standard library when a 19+ digit run could be an
    integer wider than 64 bits (which orjson would round to a float)."""
    if not _long_digit_run(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise ValueError(str(exc)) from None
    try:  # json.loads raises ValueError subclasses (decode errors included)
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise ValueError(str(exc)) from None


def _row_error(path: str | Path, line: int, exc: ValidationError, row: int | None = None) -> DatasetError:
    errors = exc.errors()
    first = errors[0]
    loc = [str(p) for p in first["loc"]]
    if first["type"] == "json_invalid":
        return DatasetError(path, line, None, f"not valid JSON: {first['msg']}", row)
    if first["type"] == "model_type":
        return DatasetError(path, line, None, "a case must be a JSON object", row)
    column = loc[0] if loc else None
    message = _message(first)
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, ColumnError):
        column, message = cause.column, cause.message
    if len(loc) > 1:
        message = ".".join(loc[1:]) + ": " + message
    for other in errors[1:3]:
        message += f"; {'.'.join(str(p) for p in other['loc'])}: {_message(other)}"
    if len(errors) > 3:
        message += f" (and {len(errors) - 3} more)"
    return DatasetError(path, line, column, message, row)


def _message(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown column" if len(err["loc"]) == 1 else "unknown key"
    if err["type"] == "missing":
        return "required"
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")


def _csv_case(path: str | Path, line: int, number: int, header: list[str], cells: list[str]) -> DatasetCase:
    if len(cells) > len(header):
        raise DatasetError(path, line, None, f"{len(cells)} cells but {len(header)} columns", number)
    data: dict[str, Any] = {}
    for column, cell in zip(header, cells, strict=False):  # a short row leaves the rest at their defaults
        if cell == "" and column not in _TEXT_COLUMNS:
            continue  # the column's default
        if column in JSON_COLUMNS:
            try:
                data[column] = loads_strict(cell)
            except (ValueError, RecursionError) as exc:
                raise DatasetError(path, line, column, f"not valid JSON text: {exc}", number) from None
            if _json.text_too_deep(cell, data[column], _json.MAX_DEPTH - 1):
                raise DatasetError(path, line, column, _TOO_DEEP, number)
        else:
            data[column] = cell
    try:
        return DatasetCase.model_validate(data)
    except ValidationError as exc:
        raise _row_error(path, line, exc, number) from None


def case_to_dict(case: DatasetCase) -> dict[str, Any]:
    """The canonical JSON form: every column, ``None`` left out; a call's defaults left out."""
    out: dict[str, Any] = {}
    for column in COLUMNS:
        value = getattr(case, column)
        if value is None:
            continue
        if column == "expected_tool_calls":
            value = [call_to_dict(c) for c in value]
        elif column == "acceptable_alternatives":
            value = [[call_to_dict(c) for c in alt] for alt in value]
        elif column == "trajectory":
            value = value.model_dump(exclude_defaults=True)
        elif hasattr(value, "value"):
            value = value.value
        out[column] = value
    return out


def call_to_dict(call: ExpectedCall) -> dict[str, Any]:
    out: dict[str, Any] = {"name": call.name, "args": call.args}
    if not call.required_args_only:
        out["required_args_only"] = False
    if call.batch is not None:
        out["batch"] = call.batch
    if call.arg_options:
        out["arg_options"] = call.arg_options
    if call.optional_args:
        out["optional_args"] = call.optional_args
    if call.exact_args:
        out["exact_args"] = call.exact_args
    return out


def _json_text(value: Any) -> str:
    # allow_nan=False: what we write is strict JSON every other tool reads
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def write_cases(path: str | Path, cases: Iterable[DatasetCase], fmt: str | None = None) -> int:
    """Write ``cases`` to a file; returns how many."""
    kind = detect_format(path, fmt)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        return dump_cases(handle, cases, kind)


def dump_cases(handle: IO[str], cases: Iterable[DatasetCase], fmt: Format) -> int:
    """Write ``cases`` to an open text stream. CSV leaves a column empty when it holds the default empty list."""
    count = 0
    if fmt == "jsonl":
        for case in cases:
            handle.write(_json_text(case_to_dict(case)) + "\n")
            count += 1
        return count
    writer = csv.writer(handle, lineterminator="\r\n")  # RFC 4180; and a lone \r in a cell gets quoted
    writer.writerow(COLUMNS)
    for case in cases:
        data = case_to_dict(case)
        writer.writerow([_cell(column, data.get(column)) for column in COLUMNS])
        count += 1
    return count


def _cell(column: str, value: Any) -> str:
    if value is None:
        return ""
    if column in JSON_COLUMNS:
        return "" if value == [] else _json_text(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
