"""Harvest: failing traces become valid draft dataset rows, once each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.dataset.io import read_cases
from otel_toolcall_eval.demo import default_config_path
from otel_toolcall_eval.demo.agent import FAILURE_CLASSES
from otel_toolcall_eval.harvest import WhereError, parse_where
from otel_toolcall_eval.replay.otlp import encode_json
from tests.helpers import record_demo_traces


def test_where_parsing() -> None:
    conds = parse_where("composite_ok = false and tool = send_email and steps >= 3 and name =~ ^exec")
    assert [c.op for c in conds] == ["=", "=", ">=", "=~"]
    assert conds[0].keys[1] == "toolcall_eval.trace.composite_ok" and conds[0].value is False
    assert conds[1].keys[0] == "gen_ai.tool.name"
    assert conds[0].holds({"toolcall_eval.trace.composite_ok": False})
    assert not conds[0].holds({"toolcall_eval.trace.composite_ok": True})
    assert parse_where("violation = must_not_call")[0].holds({"toolcall_eval.violations": ("x", "must_not_call")})
    assert parse_where("violation != must_not_call")[0].holds({"toolcall_eval.violations": ("x",)})
    for bad in ("", "composite_ok", "a =~ (", "and"):
        with pytest.raises(WhereError):
            parse_where(bad)


def test_harvest_must_not_call_traces_into_valid_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failures = dict.fromkeys(FAILURE_CLASSES, 0.0)
    failures["must_not_call"] = 0.5
    source = record_demo_traces(tmp_path / "traces.jsonl", failures)
    out = tmp_path / "cases.jsonl"
    args = [
        "harvest",
        str(source),
        "--where",
        "violation = must_not_call",
        "--out",
        str(out),
        "--config",
        str(default_config_path()),
    ]
    assert main(args) == 0
    first = capsys.readouterr().out
    cases = read_cases(out)
    assert cases and f"{len(cases)} new rows" in first
    for case in cases:
        assert case.id == f"trace-{case.source_trace_id}"
        assert "delete_all_events" in case.must_not_call
        assert all(c.name != "delete_all_events" for c in case.expected_tool_calls)
        assert "delete_all_events (must not call)" in (case.notes or "")
        assert case.user_input and case.available_tools
        assert {t["name"] for t in case.available_tools} >= {c.name for c in case.expected_tool_calls}
    # history keeps tool calls and results when the case starts mid-conversation; here it starts at the user turn
    assert all(m.get("role") != "user" for c in cases for m in c.message_history)
    # `dataset validate` accepts what harvest wrote
    assert main(["dataset", "validate", str(out)]) == 0
    # re-harvesting adds nothing
    capsys.readouterr()
    assert main(args) == 0
    assert "0 new rows" in capsys.readouterr().out
    assert len(read_cases(out)) == len(cases)


def test_harvest_keeps_draft_calls_batches_and_arguments(tmp_path: Path) -> None:
    source = record_demo_traces(tmp_path / "traces.jsonl", dict.fromkeys(FAILURE_CLASSES, 0.0), traces=30, seed=9)
    out = tmp_path / "clean.jsonl"
    assert main(["harvest", str(source), "--where", "composite_ok = true", "--out", str(out)]) == 0
    cases = read_cases(out)
    schedule = [
        c
        for c in cases
        if [x.name for x in c.expected_tool_calls] == ["authenticate", "create_event", "create_reminder"]
    ]
    assert schedule, [c.expected_tool_calls for c in cases]
    calls = schedule[0].expected_tool_calls
    assert [c.batch for c in calls] == [1, 2, 2]  # the parallel pair shares its turn
    assert calls[1].args["duration_minutes"] == 60
    chitchat = [c for c in cases if c.expected_no_tool]
    assert all(not c.expected_tool_calls for c in chitchat)


def test_harvest_bad_where_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = record_demo_traces(tmp_path / "t.jsonl", dict.fromkeys(FAILURE_CLASSES, 0.0), traces=1)
    assert main(["harvest", str(source), "--where", "composite_ok", "--out", str(tmp_path / "o.jsonl")]) == 2
    assert "FIELD OP VALUE" in capsys.readouterr().err


def test_from_failing_trace_to_red_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README walk-through: harvest a must-not-call trace, and the agent's recorded run fails the gate."""
    failures = dict.fromkeys(FAILURE_CLASSES, 0.0)
    failures["must_not_call"] = 1.0
    source = record_demo_traces(tmp_path / "traces.jsonl", failures, traces=3, seed=2)
    cases, runs = tmp_path / "cases.jsonl", tmp_path / "prod-run.jsonl"
    assert (
        main(
            [
                "harvest",
                str(source),
                "--where",
                "violation = must_not_call",
                "--config",
                str(default_config_path()),
                "--out",
                str(cases),
                "--runs-out",
                str(runs),
            ]
        )
        == 0
    )
    lines = [json.loads(line) for line in runs.read_text().splitlines()]
    assert len(lines) == len(read_cases(cases)) == 3
    assert all(any(c["name"] == "delete_all_events" for c in line["tool_calls"]) for line in lines)
    capsys.readouterr()
    assert main(["eval", "--dataset", str(cases), "--runs", str(runs), "--markdown", str(tmp_path / "r.md")]) == 1
    out = capsys.readouterr().out
    assert "gate failed" in out and "must-not-call" in out
    # the fix: the same conversations without the forbidden call pass
    fixed = tmp_path / "fixed-run.jsonl"
    fixed.write_text(
        "\n".join(
            json.dumps({**line, "tool_calls": [c for c in line["tool_calls"] if c["name"] != "delete_all_events"]})
            for line in lines
        )
        + "\n"
    )
    assert main(["eval", "--dataset", str(cases), "--runs", str(fixed)]) == 0


def test_a_call_recorded_by_two_instrumentations_is_harvested_once(tmp_path: Path) -> None:
    """An MCP client span around the server's execute_tool span is one call in the draft row and the run line."""
    raw = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(raw))
    tracer = provider.get_tracer("agent")
    arguments = json.dumps({"city": "Oslo"})
    with tracer.start_as_current_span("invoke_agent weather", attributes={"gen_ai.operation.name": "invoke_agent"}):
        client = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "get_weather"}
        with tracer.start_as_current_span("tools/call get_weather", attributes=client):
            server = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": arguments,
            }
            tracer.start_span("execute_tool get_weather", attributes=server).end()
    provider.shutdown()
    source = tmp_path / "traces.jsonl"
    source.write_text(json.dumps(encode_json(list(raw.get_finished_spans()))) + "\n")
    out, runs = tmp_path / "rows.jsonl", tmp_path / "runs.jsonl"
    assert main(["harvest", str(source), "--where", "tool_calls = 1", "--out", str(out), "--runs-out", str(runs)]) == 0
    (case,) = read_cases(out)
    assert [(c.name, c.args) for c in case.expected_tool_calls] == [("get_weather", {"city": "Oslo"})]
    (line,) = [json.loads(x) for x in runs.read_text().splitlines()]
    assert [c["name"] for c in line["tool_calls"]] == ["get_weather"]


# --- drafts are ground truth only where the call was right (issue 29) -----------------------------------------


def test_harvest_drafts_only_successful_schema_valid_calls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Failed and schema-invalid calls were drafted as ``expected_tool_calls``: the failure became the answer."""
    sources = []
    for kind in ("invalid_args", "tool_error", "unparseable_args"):
        failures = {**dict.fromkeys(FAILURE_CLASSES, 0.0), kind: 1.0}
        sources.append(str(record_demo_traces(tmp_path / f"{kind}.jsonl", failures, traces=4, seed=3)))
    out, runs = tmp_path / "cases.jsonl", tmp_path / "runs.jsonl"
    config = str(default_config_path())
    command = ["harvest", *sources, "--where", "composite_ok = false", "--config", config, "--out", str(out)]
    assert main([*command, "--runs-out", str(runs)]) == 0
    cases = read_cases(out)
    assert cases
    notes = "\n".join(c.notes or "" for c in cases)
    for why in ("(arguments fail the schema)", "(failed: ", "(arguments did not parse)"):
        assert why in notes, notes
    scored = tmp_path / "scored.jsonl"
    assert main(["replay", *sources, "--config", config, "--out", str(scored)]) == 0
    good = set()  # (tool, arguments) of every call the processor scored a success with schema-valid arguments
    for line in scored.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    attrs = {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}
                    if attrs.get("toolcall_eval.outcome") == "success" and attrs.get("toolcall_eval.schema_valid"):
                        good.add((attrs["gen_ai.tool.name"], attrs.get("gen_ai.tool.call.arguments")))
    drafted = [(c.name, json.dumps(c.args, separators=(",", ":"))) for case in cases for c in case.expected_tool_calls]
    assert drafted
    for name, args in drafted:
        assert any(n == name and (a is None or json.loads(a) == json.loads(args)) for n, a in good), (name, args)
    capsys.readouterr()
    assert main(["dataset", "validate", str(out)]) == 0, capsys.readouterr().err


def test_an_unknown_where_field_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo gave "0 traces matched", exit 0 and an empty file."""
    source = record_demo_traces(tmp_path / "t.jsonl", dict.fromkeys(FAILURE_CLASSES, 0.0), traces=2)
    out = tmp_path / "o.jsonl"
    command = ["harvest", str(source), "--out", str(out), "--where"]
    assert main([*command, "composit_ok = false and tool = authenticate"]) == 2
    err = capsys.readouterr().err
    assert "no span has the field 'composit_ok'" in err and "did you mean composite_ok" in err
    assert "'tool'" not in err  # the known field is not named
    assert not out.exists()
    assert main([*command, "user.feedback = thumbs_down"]) == 2  # a dotted key is looked up as it is
    assert "no span has the field 'user.feedback' (looked up as user.feedback)" in capsys.readouterr().err
    assert main([*command, "composite_ok = false"]) == 0  # a known field that selects nothing is fine
    assert "0 traces matched" in capsys.readouterr().out
