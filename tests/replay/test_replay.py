"""Replay: every recorded-trace format reads back to the same spans and the same scores as online."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval.cli import main
from otel_toolcall_eval.demo import default_config_path
from otel_toolcall_eval.demo.agent import FAILURE_CLASSES, ScriptedAgent
from otel_toolcall_eval.replay import ReplayInputError, read_file, replay_spans
from otel_toolcall_eval.replay.jaeger import spans_from_jaeger
from otel_toolcall_eval.replay.otlp import encode_json
from tests.helpers import JAEGER_TRACE, assert_replay_matches, scores

CONFIG = EvalConfig.load(default_config_path())


@pytest.fixture(scope="module")
def recorded() -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    """The demo agent's spans as recorded (raw) and as scored online, with every failure class in the mix."""
    raw, online = InMemorySpanExporter(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(raw))
    provider.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(online), CONFIG))
    agent = ScriptedAgent(provider.get_tracer("demo"), seed=11)
    for _ in range(25):
        agent.run(dict.fromkeys(FAILURE_CLASSES, 0.15))
    provider.shutdown()
    return list(raw.get_finished_spans()), list(online.get_finished_spans())


def _scores_by_id(spans: list[ReadableSpan]) -> dict[int, dict[str, Any]]:
    return {s.context.span_id: scores(s) for s in spans if s.context is not None}


def test_otlp_json_round_trip_gives_online_scores(recorded: tuple[list[ReadableSpan], list[ReadableSpan]]) -> None:
    raw, online = recorded
    assert sum(1 for s in online if "outcome" in scores(s)) > 50
    assert_replay_matches(raw, online, CONFIG)


def _write_formats(tmp_path: Path, raw: list[ReadableSpan]) -> dict[str, Path]:
    half = len(raw) // 2
    files = {
        "otlp-json": tmp_path / "traces.json",
        "otlp-jsonl": tmp_path / "traces.jsonl",
        "otlp-proto-file": tmp_path / "traces.binpb",
        "otlp-proto": tmp_path / "traces.pb",
    }
    files["otlp-json"].write_text(json.dumps(encode_json(raw)))
    files["otlp-jsonl"].write_text(
        json.dumps(encode_json(raw[:half])) + "\n" + json.dumps(encode_json(raw[half:])) + "\n"
    )
    frames = b""
    for chunk in (raw[:half], raw[half:]):
        body = encode_spans(chunk).SerializeToString()
        frames += len(body).to_bytes(4, "big") + body
    files["otlp-proto-file"].write_bytes(frames)
    files["otlp-proto"].write_bytes(encode_spans(raw).SerializeToString())
    return files


def test_every_file_format_reads_back_the_same_spans(
    tmp_path: Path, recorded: tuple[list[ReadableSpan], list[ReadableSpan]]
) -> None:
    raw, online = recorded
    for fmt, path in _write_formats(tmp_path, raw).items():
        report = read_file(path)
        assert report.format == fmt
        assert len(report.spans) == len(raw)
        replayed = replay_spans(report.spans, CONFIG).spans
        assert _scores_by_id(replayed) == _scores_by_id(online), fmt


def test_replay_is_idempotent_on_scored_spans(recorded: tuple[list[ReadableSpan], list[ReadableSpan]]) -> None:
    _, online = recorded
    again = replay_spans(online, CONFIG).spans  # spans that already carry scores are re-scored, not doubled
    assert _scores_by_id(again) == _scores_by_id(online)


def test_bad_lines_name_file_and_line(tmp_path: Path, recorded: tuple[list[ReadableSpan], list[ReadableSpan]]) -> None:
    raw, _ = recorded
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(encode_json(raw[:10])) + "\n{not json\n" + json.dumps({"hello": 1}) + "\n")
    with pytest.raises(ReplayInputError, match=r"mixed\.jsonl:2: "):
        read_file(path)
    report = read_file(path, strict=False)
    assert len(report.spans) == 10
    assert [e.split(": ")[0] for e in report.errors] == [f"{path}:2", f"{path}:3"]
    assert "top-level keys: ['hello']" in report.errors[1]


def test_unreadable_inputs(tmp_path: Path) -> None:
    with pytest.raises(ReplayInputError, match="cannot read"):
        read_file(tmp_path / "missing.json")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x00\x10\x00abc")
    with pytest.raises(ReplayInputError, match="length-prefixed"):
        read_file(junk)


def test_jaeger_json_maps_every_field() -> None:
    spans = {s.name: s for s in spans_from_jaeger({"data": [JAEGER_TRACE]})}
    tool = spans["execute_tool lookup"]
    assert tool.parent is not None and tool.parent.span_id == 1
    assert tool.status.status_code.name == "ERROR" and tool.status.description == "backend down"
    assert (
        tool.attributes["retries"] == 2 and "error" not in tool.attributes and "otel.status_code" not in tool.attributes
    )
    assert [e.name for e in tool.events] == ["exception"]
    assert tool.events[0].attributes["exception.type"] == "ConnectionError"
    assert tool.start_time == 1_700_000_000_001_200_000 and tool.end_time == 1_700_000_000_002_000_000
    assert tool.resource.attributes["service.name"] == "agent-svc"
    assert spans["chat"].kind.name == "CLIENT"
    result = {s.name: scores(s) for s in replay_spans(spans.values()).spans}
    assert result["execute_tool lookup"]["outcome"] == "execution_failed"
    assert result["execute_tool lookup"]["schema_valid"] is True  # definitions joined from the chat span
    assert result["invoke_agent"]["trace.tool_calls"] == 1 and result["invoke_agent"]["trace.composite_ok"] is False


def test_cli_replay_summary_and_scored_output(
    tmp_path: Path, recorded: tuple[list[ReadableSpan], list[ReadableSpan]], capsys: pytest.CaptureFixture[str]
) -> None:
    raw, online = recorded
    source = _write_formats(tmp_path, raw)["otlp-jsonl"]
    out = tmp_path / "scored.jsonl"
    assert main(["replay", str(source), "--config", str(default_config_path()), "--out", str(out), "--show", "1"]) == 0
    text = capsys.readouterr().out
    assert f"replayed {len(raw)} spans in 25 traces" in text and "composite ok-rate" in text
    lines = out.read_text().splitlines()
    assert len(lines) == 25  # one trace a line, the Collector file exporter's shape
    assert _scores_by_id(read_file(out).spans) == _scores_by_id(online)


def test_cli_replay_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay"]) == 2
    assert "give trace files" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"what": 1}')
    assert main(["replay", str(bad)]) == 2
    assert "bad.json: not OTLP JSON or Jaeger JSON" in capsys.readouterr().err


def _zstd_files(tmp_path: Path, raw: list[ReadableSpan]) -> dict[str, tuple[Path, str]]:
    """The Collector file exporter's ``compression: zstd`` layouts (exporter/fileexporter, file_writer.go): by
    default each marshalled message is one zstd frame behind a 4-byte big-endian length, JSON or proto alike;
    with the ``exporter.file.nativeCompression`` gate the whole file is one zstd stream over the usual layout."""
    zstandard = pytest.importorskip("zstandard")
    half = len(raw) // 2
    chunks = (raw[:half], raw[half:])
    json_messages = [json.dumps(encode_json(c)).encode() for c in chunks]
    proto_messages = [encode_spans(c).SerializeToString() for c in chunks]
    compress = zstandard.ZstdCompressor().compress

    def framed(messages: list[bytes]) -> bytes:
        return b"".join(len(m).to_bytes(4, "big") + m for m in messages)

    out = {
        "framed-json": (framed([compress(m) for m in json_messages]), "otlp-jsonl+zstd"),
        "framed-proto": (framed([compress(m) for m in proto_messages]), "otlp-proto-file+zstd"),
        # a native stream written in two flushes: two frames back to back
        "stream-json": (compress(json_messages[0] + b"\n") + compress(json_messages[1] + b"\n"), "otlp-jsonl+zstd"),
        "stream-proto": (compress(framed(proto_messages)), "otlp-proto-file+zstd"),
    }
    files = {}
    for name, (data, fmt) in out.items():
        path = tmp_path / f"{name}.zst"
        path.write_bytes(data)
        files[name] = (path, fmt)
    return files


def test_zstd_compressed_collector_files_read_back_the_same_spans(
    tmp_path: Path, recorded: tuple[list[ReadableSpan], list[ReadableSpan]]
) -> None:
    raw, online = recorded
    for name, (path, fmt) in _zstd_files(tmp_path, raw).items():
        report = read_file(path)
        assert (report.format, len(report.spans)) == (fmt, len(raw)), name
        assert _scores_by_id(replay_spans(report.spans, CONFIG).spans) == _scores_by_id(online), name


def test_broken_zstd_files_name_the_file(
    tmp_path: Path, recorded: tuple[list[ReadableSpan], list[ReadableSpan]], monkeypatch: pytest.MonkeyPatch
) -> None:
    raw, _ = recorded
    path, _ = _zstd_files(tmp_path, raw)["framed-json"]
    data = path.read_bytes()
    truncated = tmp_path / "truncated.zst"
    truncated.write_bytes(data[: len(data) - 10])
    with pytest.raises(ReplayInputError, match=r"truncated\.zst: not a length-prefixed zstd file: .*claims"):
        read_file(truncated)
    corrupt = tmp_path / "corrupt.zst"
    corrupt.write_bytes(b"\x28\xb5\x2f\xfd" + b"\xff" * 40)
    with pytest.raises(ReplayInputError, match=r"corrupt\.zst: corrupt zstd data"):
        read_file(corrupt)
    monkeypatch.setitem(sys.modules, "zstandard", None)  # as if the extra were not installed
    with pytest.raises(ReplayInputError, match=r"otel-toolcall-eval\[zstd\]"):
        read_file(path)
