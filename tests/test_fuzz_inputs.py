"""Fuzz targets for the untrusted-file readers (replay's trace files, the dataset, run files): whatever the
bytes, the result is records or the project's own error (``ToolcallEvalError``, exit 2), never another
exception. A bounded number of examples per target (derandomized, so CI runs the same ones every time);
run more locally with ``FUZZ_EXAMPLES=20000 pytest tests/test_fuzz_inputs.py``."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_toolcall_eval.dataset.io import iter_rows
from otel_toolcall_eval.errors import ToolcallEvalError
from otel_toolcall_eval.offline.runs import iter_run
from otel_toolcall_eval.replay import read_file, replay_spans
from otel_toolcall_eval.replay.formats import ReadLimits
from otel_toolcall_eval.replay.otlp import encode_json

from .helpers import JAEGER_TRACE, OTLP_SPAN, otlp_document

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
LIMITS = ReadLimits(max_record_bytes=64 << 10, max_decompressed_bytes=1 << 20)


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


# JSON values of every type, small, nested a few levels
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def _mutations(document: Any) -> st.SearchStrategy[Any]:
    """``document`` with one value somewhere replaced by any JSON value, or a key dropped."""
    paths: list[tuple[Any, ...]] = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, (*path, k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, (*path, i))

    walk(document, ())

    def apply(choice: tuple[tuple[Any, ...], Any, bool]) -> Any:
        path, new, drop = choice
        copy = json.loads(json.dumps(document))
        if not path:
            return new
        target = copy
        for key in path[:-1]:
            target = target[key]
        if drop and isinstance(target, dict):
            del target[path[-1]]
        else:
            target[path[-1]] = new
        return copy

    return st.tuples(st.sampled_from(paths), JSON, st.booleans()).map(apply)


SEEDS = [
    otlp_document(),
    {"data": [JAEGER_TRACE]},
    {"batches": otlp_document()["resourceSpans"]},
    {"trace": otlp_document(OTLP_SPAN)},
]
DOCUMENTS = st.one_of(*(_mutations(seed) for seed in SEEDS))


def _check_file(path: Path) -> None:
    for strict in (True, False):
        try:
            report = read_file(path, strict=strict, limits=LIMITS)
        except ToolcallEvalError:
            continue
        # what was read goes through the processor and back out as OTLP JSON (``replay --out``) cleanly
        scored = replay_spans(report.spans).spans
        assert len(scored) == len(report.spans)
        if scored:
            orjson.dumps(encode_json(scored))


@FUZZ
@given(data=st.binary(max_size=512))
def test_any_bytes_are_records_or_the_projects_error(workdir: Path, data: bytes) -> None:
    path = workdir / "any.bin"
    path.write_bytes(data)
    _check_file(path)


@FUZZ
@given(documents=st.lists(DOCUMENTS, min_size=1, max_size=3), pretty=st.booleans())
def test_mutated_trace_documents_are_records_or_the_projects_error(
    workdir: Path, documents: list[Any], pretty: bool
) -> None:
    path = workdir / "traces.json"
    if pretty:
        path.write_text(json.dumps(documents[0], indent=1))
    else:
        path.write_text("".join(json.dumps(d) + "\n" for d in documents))
    _check_file(path)


@FUZZ
@given(
    head=st.sampled_from([b"", b"\x28\xb5\x2f\xfd", b"\x00\x00\x00\x10\x28\xb5\x2f\xfd", b"\x0a"]),
    tail=st.binary(max_size=256),
)
def test_compressed_and_framed_prefixes(workdir: Path, head: bytes, tail: bytes) -> None:
    pytest.importorskip("zstandard")
    path = workdir / "framed.bin"
    path.write_bytes(head + tail)
    _check_file(path)


ROW_FIELDS = st.dictionaries(
    st.sampled_from(["id", "user_input", "expected_tool_calls", "available_tools", "must_not_call", "slice", "x"]),
    JSON,
    max_size=5,
)


@FUZZ
@given(rows=st.lists(ROW_FIELDS | JSON, max_size=3), junk=st.binary(max_size=64), fmt=st.sampled_from(["jsonl", "csv"]))
def test_any_dataset_file_is_rows_or_the_projects_error(workdir: Path, rows: list[Any], junk: bytes, fmt: str) -> None:
    path = workdir / f"dataset.{fmt}"
    body = "".join(json.dumps(r) + "\n" for r in rows).encode() + junk
    if fmt == "csv":
        body = b"id,user_input,expected_tool_calls\n" + junk + b"\n" + body
    path.write_bytes(body)
    with suppress(ToolcallEvalError):
        list(iter_rows(path, collect=[]))
    with suppress(ToolcallEvalError):
        list(iter_rows(path))


@FUZZ
@given(
    lines=st.lists(
        st.dictionaries(st.sampled_from(["id", "tool_calls", "error", "tokens", "latency_ms"]), JSON) | JSON, max_size=3
    ),
    junk=st.binary(max_size=32),
)
def test_any_run_file_is_cases_or_the_projects_error(workdir: Path, lines: list[Any], junk: bytes) -> None:
    path = workdir / "run.jsonl"
    path.write_bytes("".join(json.dumps(x) + "\n" for x in lines).encode() + junk)
    with suppress(ToolcallEvalError):
        list(iter_run(path))
