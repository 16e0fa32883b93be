"""Recorded-trace files are untrusted: every malformed shape is the project's error (exit 2, ``file: where:
what``), ``--lenient`` skips the bad record and goes on, and no file makes the reader hold unbounded memory."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.replay import ReplayInputError, read_file
from otel_toolcall_eval.replay.formats import ReadLimits
from tests.helpers import JAEGER_TRACE, OTLP_SPAN, OTLP_TRACE_ID, otlp_document


def _otlp_with(**fields: Any) -> dict[str, Any]:
    return otlp_document({**OTLP_SPAN, **fields})


def _jaeger_with(path: str, value: Any) -> dict[str, Any]:
    """JAEGER_TRACE in a ``data`` list with one field replaced; ``path`` like ``spans.0.tags``."""
    trace = copy.deepcopy(JAEGER_TRACE)
    target: Any = trace
    *parents, last = path.split(".")
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return {"data": [trace]}


def _deep_value(depth: int) -> str:
    """An attribute value nested ``3 * depth`` JSON levels deep, as text (Python's json recurses)."""
    return '{"arrayValue": {"values": [' * depth + '{"stringValue": "x"}' + "]}}" * depth


def _text(document: Any) -> str:
    """One line of JSON; ``"DEEP"`` stands for a deeply nested attribute value."""
    return json.dumps(document).replace('"DEEP"', _deep_value(200))


MALFORMED: dict[str, tuple[Any, str]] = {
    # OTLP JSON
    "resourceSpans an int": ({"resourceSpans": 5}, "resourceSpans"),
    "resourceSpans item a string": ({"resourceSpans": ["x"]}, "resourceSpans"),
    "spans not a list": ({"resourceSpans": [{"scopeSpans": [{"spans": {"a": 1}}]}]}, "spans"),
    "span id an int": (_otlp_with(spanId=123), "spanId"),
    "span id too short": (_otlp_with(spanId="abcd"), "spanId"),
    "trace id too long": (_otlp_with(traceId=OTLP_TRACE_ID + "00"), "traceId"),
    "trace id not hex, wrong length": (_otlp_with(traceId="zz"), "traceId"),
    "trace id all zeros": (_otlp_with(traceId="0" * 32), "traceId"),
    "parent id wrong length": (_otlp_with(parentSpanId="abcdef"), "parentSpanId"),
    "attributes not a list": (_otlp_with(attributes=5), "attributes"),
    "attribute value a string": (_otlp_with(attributes=[{"key": "k", "value": "v"}]), "attributes"),
    "int value not a number": (_otlp_with(attributes=[{"key": "k", "value": {"intValue": "x"}}]), "intValue"),
    "time negative": (_otlp_with(startTimeUnixNano="-5"), "startTimeUnixNano"),
    "time a list": (_otlp_with(endTimeUnixNano=[1]), "endTimeUnixNano"),
    "link id wrong length": (_otlp_with(links=[{"traceId": OTLP_TRACE_ID, "spanId": "01"}]), "links"),
    "events a dict": (_otlp_with(events={"name": "x"}), "events"),
    "attribute nested 600 deep": (_otlp_with(attributes=[{"key": "k", "value": "DEEP"}]), "deeper than"),
    "Tempo trace an int": ({"trace": 5}, "trace"),
    "Tempo batches a string": ({"batches": "x"}, "batches"),
    # Jaeger JSON
    "Jaeger data an int": ({"data": 5}, "data"),
    "Jaeger trace a string": ({"data": ["x"]}, "data[0]"),
    "Jaeger spans an int": (_jaeger_with("spans", 5), "data[0].spans"),
    "Jaeger span a list": (_jaeger_with("spans.0", [1]), "data[0].spans[0]"),
    "Jaeger span id an int": (_jaeger_with("spans.1.spanID", 12), "data[0].spans[1].spanID"),
    "Jaeger span id too long": (_jaeger_with("spans.1.spanID", "1" * 17), "data[0].spans[1].spanID"),
    "Jaeger trace id negative": (_jaeger_with("spans.1.traceID", "-5"), "data[0].spans[1].traceID"),
    "Jaeger tags not a list": (_jaeger_with("spans.1.tags", 5), "data[0].spans[1].tags"),
    "Jaeger logs not a list": (_jaeger_with("spans.2.logs", "x"), "data[0].spans[2].logs"),
    "Jaeger log fields an int": (_jaeger_with("spans.2.logs.0.fields", 3), "data[0].spans[2].logs[0].fields"),
    "Jaeger log timestamp a dict": (_jaeger_with("spans.2.logs.0.timestamp", {}), "logs[0].timestamp"),
    "Jaeger start time text": (_jaeger_with("spans.1.startTime", "soon"), "data[0].spans[1].startTime"),
    "Jaeger duration negative": (_jaeger_with("spans.1.duration", -1), "data[0].spans[1].duration"),
    "Jaeger start time past 2**64 ns": (_jaeger_with("spans.1.startTime", 2**60), "data[0].spans[1].startTime"),
    "Jaeger references an int": (_jaeger_with("spans.1.references", 7), "data[0].spans[1].references"),
    "Jaeger reference a string": (_jaeger_with("spans.1.references", ["x"]), "data[0].spans[1].references[0]"),
    "Jaeger processes a list": (_jaeger_with("processes", [1]), "data[0].processes"),
    "Jaeger process a string": (_jaeger_with("processes", {"p1": "x"}), "data[0].processes.p1"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_documents_name_the_file_and_the_field(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    document, where = MALFORMED[name]
    path = tmp_path / "trace.json"
    text = json.dumps(document, indent=1)  # pretty-printed: a whole-file document
    path.write_text(_text(document) if '"DEEP"' in text else text)  # (the deep one on one line: still one)
    with pytest.raises(ReplayInputError) as info:
        read_file(path)
    assert str(info.value).startswith(f"{path}: ") and where in str(info.value)
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "trace.json: " in err and "Traceback" not in err


@pytest.mark.parametrize("name", list(MALFORMED))
def test_lenient_skips_the_malformed_line_and_keeps_the_others(tmp_path: Path, name: str) -> None:
    document, where = MALFORMED[name]
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(otlp_document()) + "\n" + _text(document) + "\n" + json.dumps(otlp_document()) + "\n")
    with pytest.raises(ReplayInputError, match=rf"traces\.jsonl:2: .*{where.replace('[', '.').replace(']', '.')}"):
        read_file(path)
    report = read_file(path, strict=False)
    assert len(report.spans) == 2 and len(report.errors) == 1 and report.errors[0].startswith(f"{path}:2: ")


def test_protobuf_span_ids_of_the_wrong_length(tmp_path: Path) -> None:
    from otel_toolcall_eval.replay.otlp import request_from_json

    message = request_from_json(otlp_document())
    message.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x01\x02\x03"
    bad = message.SerializeToString()
    good = _proto_message()
    framed = tmp_path / "bad.pb"
    framed.write_bytes(len(bad).to_bytes(4, "big") + bad)
    with pytest.raises(ReplayInputError, match=r"bad\.pb: message 1 \(byte 0\): resourceSpans\[0\]\..*spanId: 3 bytes"):
        read_file(framed)
    framed.write_bytes(len(good).to_bytes(4, "big") + good + len(bad).to_bytes(4, "big") + bad)
    report = read_file(framed, strict=False)
    assert len(report.spans) == 1 and len(report.errors) == 1 and "message 2 (byte" in report.errors[0]
    plain = tmp_path / "bad-plain.pb"
    plain.write_bytes(bad)  # one TracesData message, no framing
    with pytest.raises(ReplayInputError, match=r"bad-plain\.pb: resourceSpans\[0\]\..*spanId"):
        read_file(plain)


# --- size, compression, streaming -------------------------------------------------------------------


def test_a_whole_file_document_over_the_limit_is_refused_naming_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps(otlp_document(), indent=2))
    size = path.stat().st_size
    with pytest.raises(ReplayInputError, match=r"big\.json: .*larger than the .*--max-record-size"):
        read_file(path, limits=ReadLimits(max_record_bytes=size // 2))
    assert len(read_file(path, limits=ReadLimits(max_record_bytes=size)).spans) == 1


def test_line_formats_stream_past_the_record_limit(tmp_path: Path) -> None:
    """JSON lines and length-prefixed protobuf are read a record at a time: a file many times the limit is
    fine, one record over it is not."""
    line = json.dumps(otlp_document()).encode() + b"\n"
    path = tmp_path / "many.jsonl"
    path.write_bytes(line * 200)
    limits = ReadLimits(max_record_bytes=len(line) + 10)
    assert len(read_file(path, limits=limits).spans) == 200
    path.write_bytes(line * 3 + b'{"resourceSpans": [' + b" " * (2 * len(line)) + b"]}\n" + line)
    with pytest.raises(ReplayInputError, match=r"many\.jsonl:4: .*larger than"):
        read_file(path, limits=limits)
    assert len(read_file(path, strict=False, limits=limits).spans) == 4
    message = _proto_message()
    framed = tmp_path / "many.pb"
    framed.write_bytes((len(message).to_bytes(4, "big") + message) * 200)
    assert len(read_file(framed, limits=ReadLimits(max_record_bytes=len(message) + 10)).spans) == 200
    with pytest.raises(ReplayInputError, match=r"many\.pb: message 1 \(byte 0\): .*larger than"):
        read_file(framed, limits=ReadLimits(max_record_bytes=len(message) - 1))


def _proto_message() -> bytes:
    from otel_toolcall_eval.replay.otlp import request_from_json

    return request_from_json(otlp_document()).SerializeToString()


def test_zstd_bomb_stops_at_the_decompression_limit(tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard")
    line = (json.dumps(otlp_document()) + "\n").encode()
    bomb = zstandard.ZstdCompressor(level=19).compress(line * ((64 << 20) // len(line)))  # 64 MiB of spans
    assert len(bomb) < 64 << 10
    native = tmp_path / "bomb.zst"
    native.write_bytes(bomb)
    framed = tmp_path / "bomb-framed.zst"
    framed.write_bytes(len(bomb).to_bytes(4, "big") + bomb)
    limits = ReadLimits(max_decompressed_bytes=1 << 20)
    for path in (native, framed):
        with pytest.raises(ReplayInputError, match=r"inflates past the 1 MiB limit \(--max-decompressed\)"):
            read_file(path, limits=limits)
    blank = tmp_path / "blank.zst"
    blank.write_bytes(zstandard.ZstdCompressor(level=19).compress(b"\n" * (64 << 20)))  # 64 MiB of blank lines
    with pytest.raises(ReplayInputError, match=r"not a trace file: 10,000 records in a row"):
        read_file(blank)  # under the default limit, and nothing in it: stopped early
    assert ReadLimits().max_decompressed_bytes < 2 << 30  # the 2 GiB bomb of the issue stops by default


def test_truncated_zstd_is_an_error_not_an_empty_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zstandard = pytest.importorskip("zstandard")
    text = (json.dumps(otlp_document()) + "\n").encode() * 50
    whole = zstandard.ZstdCompressor().compress(text)
    path = tmp_path / "cut.zst"
    path.write_bytes(whole)
    assert len(read_file(path).spans) == 50
    for cut in (len(whole) - 3, len(whole) // 2, 12):
        path.write_bytes(whole[:cut])
        with pytest.raises(ReplayInputError, match=r"cut\.zst: truncated zstd"):
            read_file(path)
    framed = tmp_path / "cut-framed.zst"
    frame = whole[: len(whole) - 3]
    framed.write_bytes(len(frame).to_bytes(4, "big") + frame)
    with pytest.raises(ReplayInputError, match=r"cut-framed\.zst: message 1 \(byte 0\): truncated zstd"):
        read_file(framed)
    assert main(["replay", str(path)]) == 2
    assert "truncated zstd" in capsys.readouterr().err


def test_cli_decompression_limit_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zstandard = pytest.importorskip("zstandard")
    path = tmp_path / "big.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress((json.dumps(otlp_document()) + "\n").encode() * 20_000))
    assert main(["replay", str(path), "--max-decompressed", "1M"]) == 2
    assert "inflates past the 1 MiB limit (--max-decompressed)" in capsys.readouterr().err
    assert main(["replay", str(path), "--max-decompressed", "1G"]) == 0
    with pytest.raises(SystemExit) as info:
        main(["replay", str(path), "--max-decompressed", "lots"])
    assert info.value.code == 2


def test_malformed_jaeger_answers_are_warnings_not_tracebacks() -> None:
    import httpx

    from otel_toolcall_eval.replay.remote import fetch_jaeger

    good = copy.deepcopy(JAEGER_TRACE)
    bad = _jaeger_with("spans.1.spanID", 12)["data"][0]
    bad["traceID"] = "00000000000000000000000000000bad"
    page = {"data": [5, bad, good]}

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=page if "offset" not in str(request.url) else {"data": []})

    result = fetch_jaeger(
        "http://127.0.0.1:1", "svc", now=1_700_000_100, limit=5, transport=httpx.MockTransport(answer)
    )
    assert result.trace_ids == [JAEGER_TRACE["traceID"]] and len(result.spans) == 3
    assert any("not an object" in e for e in result.errors)
    assert f"trace {bad['traceID']}: spans[1].spanID: 12 is not an id of 1 to 16 hex digits" in result.errors


# --- garbage: nothing in it is a trace (issue 29) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"\x00" * 532, r"zeros\.bin: holds no trace: 133 records read as otlp-proto-file, none with a span"),
        (b"", r"zeros\.bin: holds no trace: the file is empty"),
        (b"\n\n  \n", r"zeros\.bin: holds no trace: 3 records"),
        (
            b'{"resourceSpans": []}\n{"resourceSpans": []}\n',
            r"zeros\.bin: holds no trace: 2 records read as otlp-jsonl",
        ),
        (b"\x0a\x00", r"zeros\.bin: holds no trace: 1 record read as otlp-proto, none with a span"),
    ],
)
def test_a_file_that_holds_no_trace_exits_2_saying_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, what: str
) -> None:
    """A file of zeros was an endless run of empty length-prefixed messages: "replayed 0 spans", exit 0."""
    path = tmp_path / "zeros.bin"
    path.write_bytes(content)
    with pytest.raises(ReplayInputError, match=what):
        read_file(path)
    for command in ("replay", "harvest", "doctor"):
        extra = ["--out", str(tmp_path / "h.jsonl"), "--where", "tool=x"] if command == "harvest" else []
        assert main([command, str(path), *extra]) == 2, command
        err = capsys.readouterr().err
        assert "holds no trace" in err and "Traceback" not in err


def test_lenient_reading_of_a_file_of_bad_records_is_no_trace_either(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"b": 2}\n')
    with pytest.raises(ReplayInputError, match=r"bad\.jsonl: holds no trace: 2 records .*\(2 skipped as unreadable\)"):
        read_file(path, strict=False)


def test_empty_records_count_against_the_limits(tmp_path: Path) -> None:
    """Records in a row that hold no span stop the read at ``max_empty_records``, wherever they come from, and
    the read stops there, not at the end of the input (so the cost is bounded, whatever the file's size)."""
    zeros = tmp_path / "zeros.bin"
    zeros.write_bytes(b"\x00" * (4 * 2000) + _framed_proto())
    limits = ReadLimits(max_empty_records=1000)
    with pytest.raises(ReplayInputError, match=r"not a trace file: 1,000 records in a row \(to message 1001 "):
        read_file(zeros, limits=limits)
    assert len(read_file(zeros).spans) == 1  # under the default, the span after them is read
    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(b"\n" * 2000 + json.dumps(otlp_document()).encode() + b"\n")
    with pytest.raises(ReplayInputError, match=r"1,000 records in a row \(to line 1001\) hold no span"):
        read_file(blank, limits=limits)
    lenient = tmp_path / "bad.jsonl"
    lenient.write_bytes(b'{"a": 1}\n' * 2000)
    with pytest.raises(ReplayInputError, match=r"1,000 records in a row \(to line 1001\) hold no span"):
        read_file(lenient, strict=False, limits=limits)


def test_a_zstd_bomb_of_empty_messages_stops_promptly(tmp_path: Path) -> None:
    """64 KiB inflating to 2 GiB of zeros: before, a decode per 4 bytes and no end in 150 s; now the read stops
    at the 10,001st empty message, 40 KB into the stream, long before the decompression limit."""
    zstandard = pytest.importorskip("zstandard")
    frame = zstandard.ZstdCompressor(level=3).compress(b"\x00" * (64 << 20))
    bomb = frame * 32  # 2 GiB: one stream of 32 frames, as the native layout allows
    assert len(bomb) < 128 << 10
    path = tmp_path / "bomb.zst"
    path.write_bytes(bomb)
    with pytest.raises(
        ReplayInputError,
        match=r"bomb\.zst: not a trace file: 10,000 records in a row \(to message 10001 \(byte 40000\)\)",
    ):
        read_file(path)


def _framed_proto() -> bytes:
    message = _proto_message()
    return len(message).to_bytes(4, "big") + message
