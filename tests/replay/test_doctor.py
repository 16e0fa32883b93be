"""``otel-toolcall-eval doctor`` on the spans real frameworks recorded (``tests/fixtures/frameworks/``) and on
hand-made traces: what it recognised, which evidence was missing, the setting it names, and its exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.errors import ExitCode
from otel_toolcall_eval.replay import doctor
from otel_toolcall_eval.replay.otlp import encode_json
from tests.framework_scenario import fixture_path


def _doctor_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _only_group(report: dict[str, Any]) -> dict[str, Any]:
    assert len(report["coverage"]) == 1, report["coverage"]
    group: dict[str, Any] = report["coverage"][0]
    return group


def test_hidden_inputs_name_the_openinference_setting(capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _doctor_json(capsys, str(fixture_path("llama_index-hidden")))
    assert code == ExitCode.OK
    group = _only_group(report)
    assert group["framework"].startswith("LlamaIndex")
    assert (group["tool_spans"], group["with_arguments"], group["with_schema"]) == (4, 0, 4)
    assert (group["succeeded"], group["succeeded_with_result"], group["failed"]) == (3, 0, 1)
    assert any("no arguments" in f and "OPENINFERENCE_HIDE_INPUTS" in f for f in group["fixes"])
    assert any("no result" in f for f in group["fixes"])
    assert report["healthy"] is False
    # the framework's own steps named like tools (``BaseWorkflowAgent.call_tool``) are not reported: the trace has
    # recognised tool spans
    assert report["unrecognised"] == []


def test_content_mode_of_the_same_framework_needs_no_argument_fix(capsys: pytest.CaptureFixture[str]) -> None:
    _, report = _doctor_json(capsys, str(fixture_path("llama_index-content")))
    group = _only_group(report)
    assert group["with_arguments"] == group["tool_spans"] == 4
    assert not any("no arguments" in f for f in group["fixes"])


def test_autogen_default_names_the_genai_content_capture_and_fails_the_gate(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor", str(fixture_path("autogen-default")), "--json", "--fail-on-gaps"])
    report = json.loads(capsys.readouterr().out)
    assert code == ExitCode.GATE_FAILED
    group = _only_group(report)
    assert group["scope"] == "autogen-core" and group["with_arguments"] == 0
    assert any("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY" in f for f in group["fixes"])
    _, report = _doctor_json(capsys, str(fixture_path("autogen-capture")))
    group = _only_group(report)
    assert group["with_arguments"] == group["arguments_from_request"] == 4  # taken from the chat spans, by call id


def test_crewai_event_listener_points_to_the_wrapper_mode_for_schemas(capsys: pytest.CaptureFixture[str]) -> None:
    _, report = _doctor_json(capsys, str(fixture_path("crewai-listener")))
    group = _only_group(report)
    assert group["framework"].startswith("CrewAI")
    assert (group["tool_spans"], group["unknown_tool_calls"], group["with_schema"]) == (5, 1, 0)
    assert group["tools_without_schema"] == ["get_weather", "get_population"]  # the unknown tool needs none
    assert any("no schema" in f and "use_event_listener" in f for f in group["fixes"])
    assert report["traces"] == 7 and report["traces_with_verdict"] == 1  # the detached chat-span roots get none


def test_a_complete_trace_is_healthy_also_when_the_tool_list_arrives_on_the_root(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["doctor", str(fixture_path("strands-default")), "--json", "--fail-on-gaps"])
    report = json.loads(capsys.readouterr().out)
    assert code == ExitCode.OK, report
    group = _only_group(report)
    assert group["with_tool_list"] == group["tool_spans"] == 5
    assert group["fixes"] == [] and report["healthy"] is True


def _span(name: str, attrs: dict[str, Any], span_id: int, *, scope: str = "acme.agent") -> ReadableSpan:
    return ReadableSpan(
        name=name,
        context=SpanContext(0xABC, span_id, False, trace_flags=TraceFlags(TraceFlags.SAMPLED)),
        parent=None,
        attributes=attrs,
        resource=Resource({"service.name": "acme"}),
        instrumentation_scope=InstrumentationScope(scope),
        start_time=span_id,
        end_time=span_id + 1,
    )


def _write(tmp_path: Path, spans: list[ReadableSpan]) -> Path:
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(encode_json(spans)))
    return path


def test_spans_that_look_like_tool_calls_get_a_convention_to_register(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    attrs = {"acme.span.kind": "tool", "acme.tool_name": "get_weather", "acme.tool_args": '{"city": "Paris"}'}
    path = _write(tmp_path, [_span("acme tool", attrs, 1), _span("acme tool", attrs, 2), _span("plain", {}, 3)])
    code, report = _doctor_json(capsys, str(path))
    assert code == ExitCode.OK and report["coverage"] == []
    [suspect] = report["unrecognised"]
    assert (suspect["service"], suspect["scope"], suspect["span_name"], suspect["spans"]) == (
        "acme",
        "acme.agent",
        "acme tool",
        2,
    )
    assert suspect["hinting_attributes"] == ["acme.tool_name", "acme.tool_args"]
    assert "detect_key='acme.span.kind', detect_values=frozenset({'tool'})" in suspect["fix"]
    assert "name_keys=('acme.tool_name',), argument_keys=('acme.tool_args',)" in suspect["fix"]
    assert main(["doctor", str(path), "--fail-on-gaps"]) == ExitCode.GATE_FAILED


def test_trace_text_is_escaped_in_the_terminal_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hostile = "[bold red]x[/] \x1b]8;;http://example.invalid\x1b\\link\x1b]8;;\x1b\\ \x1b[2J"
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": hostile}
    path = _write(tmp_path, [_span(hostile, attrs, 1, scope=hostile)])
    assert main(["doctor", str(path)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "[bold red]x[/]" in out  # printed as text, not applied as markup


def test_unrecognised_groups_are_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spans = [_span(f"tool step {i}", {"x.tool_name": f"t{i}"}, i + 1) for i in range(doctor.MAX_SUSPECTS + 30)]
    _, report = _doctor_json(capsys, str(_write(tmp_path, spans)))
    assert len(report["unrecognised"]) == doctor.MAX_SUSPECTS
    assert report["truncated"] is True


def test_a_bad_trace_file_exits_2_naming_the_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"resourceSpans": []}\n{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "ab"}]}]}]}\n')
    assert main(["doctor", str(path)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "bad.jsonl:2:" in err and "Traceback" not in err


def test_no_source_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == ExitCode.BAD_INPUT
    assert "give trace files" in capsys.readouterr().err


def test_the_named_fix_for_missing_schemas_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """openai-v2 2.4b0 records no request tools: doctor says to list the schemas under ``tools:``; with them the
    schema check runs (and catches the bad enum)."""
    from tests.framework_scenario import POPULATION_SCHEMA, WEATHER_SCHEMA

    fixture = str(fixture_path("openai_v2-capture"))
    _, report = _doctor_json(capsys, fixture)
    assert any("`tools:` in the config" in f for f in _only_group(report)["fixes"])
    config = tmp_path / "toolcall-eval.json"
    tools = [
        {"name": "get_weather", "parameters": WEATHER_SCHEMA},
        {"name": "get_population", "parameters": POPULATION_SCHEMA},
    ]
    config.write_text(json.dumps({"tools": tools}))
    _, report = _doctor_json(capsys, fixture, "--config", str(config))
    group = _only_group(report)
    assert group["with_schema"] == 4 and group["with_tool_list"] == 5 and group["fixes"] == []
    from otel_toolcall_eval import EvalConfig
    from otel_toolcall_eval.replay import replay_spans
    from tests.framework_scenario import recorded, scored

    spans = scored(replay_spans(recorded("openai_v2-capture"), EvalConfig.from_dict({"tools": tools})).spans)
    assert [(s.attributes or {}).get("toolcall_eval.schema_valid") for s in spans] == [True, True, False, None, True]


# --- doctor checks what it extracted (issue 26) ---------------------------------------------------------

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def _child(name: str, attrs: dict[str, Any], span_id: int, scope: str) -> ReadableSpan:
    return ReadableSpan(
        name=name,
        context=SpanContext(0xABD, span_id, False, trace_flags=TraceFlags(TraceFlags.SAMPLED)),
        parent=SpanContext(0xABD, 1, False),
        attributes=attrs,
        resource=Resource({"service.name": "acme"}),
        instrumentation_scope=InstrumentationScope(scope),
        start_time=span_id,
        end_time=span_id + 1,
    )


def _agent_trace(tool_spans: list[ReadableSpan]) -> list[ReadableSpan]:
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.tool.definitions": json.dumps([{"name": "get_weather", "parameters": WEATHER}]),
    }
    root = ReadableSpan(
        name="agent",
        context=SpanContext(0xABD, 1, False, trace_flags=TraceFlags(TraceFlags.SAMPLED)),
        resource=Resource({"service.name": "acme"}),
        instrumentation_scope=InstrumentationScope("acme.agent"),
        start_time=1,
        end_time=100,
    )
    return [_child("chat", chat, 2, "acme.agent"), *tool_spans, root]


def _genai_tool(arguments: dict[str, Any], span_id: int, scope: str, name: str = "get_weather") -> ReadableSpan:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": json.dumps(arguments)}
    if name:
        attrs["gen_ai.tool.name"] = name
    return _child(f"execute_tool {name}", attrs, span_id, scope)


def test_an_unstripped_wrapper_is_suspected_and_fails_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An instrumentation (no row in the shape table) that wraps the arguments: every call is invalid with the same
    undeclared keys, and the keys hit the schema one level down: doctor names the misread, not a worse model."""
    wrapped = {"inputs": {"city": "Paris", "unit": "celsius"}, "tags": []}
    spans = _agent_trace(
        [_genai_tool(wrapped, 3, "acme.instrumentation"), _genai_tool(wrapped, 4, "acme.instrumentation")]
    )
    path = _write(tmp_path, spans)
    _, report = _doctor_json(capsys, str(path))
    group = _only_group(report)
    assert (group["wrapper_suspected"], group["schema_invalid"]) == (2, 2)
    assert group["shared_undeclared_keys"] == ["inputs", "tags"]
    assert any("wrapper" in f and "`acme.instrumentation`" in f for f in group["fixes"])
    assert any("same undeclared keys (inputs, tags)" in f for f in group["fixes"])
    # content switch: the scope has no row, so none is guessed from the convention
    assert not any("OTEL_INSTRUMENTATION_GENAI" in f for f in group["fixes"])
    assert main(["doctor", str(path), "--fail-on-gaps"]) == ExitCode.GATE_FAILED
    capsys.readouterr()


def test_valid_arguments_are_no_wrapper(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _agent_trace([_genai_tool({"city": "Paris", "unit": "celsius"}, 3, "acme.x")]))
    group = _only_group(_doctor_json(capsys, str(path))[1])
    assert (group["wrapper_suspected"], group["schema_invalid"], group["without_name"]) == (0, 0, 0)
    assert not any("wrapper" in f or "undeclared" in f or "no tool name" in f for f in group["fixes"])


def test_calls_without_a_tool_name_and_unused_definitions_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, _agent_trace([_genai_tool({"city": "Paris"}, 3, "acme.x", name="")]))
    group = _only_group(_doctor_json(capsys, str(path))[1])
    assert group["without_name"] == 1 and group["unused_definitions"] == ["get_weather"]
    assert any("no tool name" in f for f in group["fixes"])
    assert any("defines tools (get_weather) that no call here names" in f for f in group["fixes"])


def test_a_trace_with_tool_activity_only_in_model_requests_gets_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parts = [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}]
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
    }
    path = _write(tmp_path, [_span("chat", chat, 1)])
    _, report = _doctor_json(capsys, str(path))
    assert report["traces_with_requests_only"] == 1 and "scored from the requests alone" in report["requests_only_fix"]
    assert main(["doctor", str(path), "--fail-on-gaps"]) == ExitCode.GATE_FAILED
    assert "carry tool activity only in model requests" in capsys.readouterr().out


def test_the_requests_only_line_counts_the_calls_scored_from_the_requests(capsys: pytest.CaptureFixture[str]) -> None:
    """The Anthropic tool runner under OpenInference's instrumentation: its tools run on no span; the five calls are
    scored from the requests, and doctor says so (still a gap: no span of a call, no latency)."""
    path = str(fixture_path("anthropic_openinference-content"))
    _, report = _doctor_json(capsys, path)
    assert (report["traces_with_requests_only"], report["calls_scored_from_requests"]) == (1, 5)
    assert main(["doctor", path, "--fail-on-gaps"]) == ExitCode.GATE_FAILED
    assert "(5 call(s) scored from the requests)" in capsys.readouterr().out


def test_the_content_switch_comes_from_the_scopes_row(capsys: pytest.CaptureFixture[str]) -> None:
    _, report = _doctor_json(capsys, str(fixture_path("langgraph_openllmetry-hidden")))
    fixes = " ".join(_only_group(report)["fixes"])
    assert "TRACELOOP_TRACE_CONTENT" in fixes and "OTEL_INSTRUMENTATION_GENAI" not in fixes


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_model_spans_without_tool_spans_get_their_scopes_row(mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Haystack's Agent under OpenInference: model spans only (its tools run on no span). The line names what that
    scope cannot record and its own content switch (from the shape table), and the gate fails."""
    code = main(["doctor", str(fixture_path(f"haystack-{mode}")), "--json", "--fail-on-gaps"])
    report = json.loads(capsys.readouterr().out)
    assert code == ExitCode.GATE_FAILED
    assert report["coverage"] == [] and report["healthy"] is False
    (line,) = report["model_spans_only"]
    assert "`openinference.instrumentation.haystack`" in line
    assert "outside any component span" in line and "OPENINFERENCE_HIDE_INPUTS" in line
    assert report["traces_with_requests_only"] == (1 if mode == "content" else 0)


@pytest.mark.parametrize("name", ["autogen-default", "autogen-capture"])
def test_an_agent_creation_trace_is_no_trace_of_model_spans_only(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """AutoGen's agent creation is a trace of its own with a ``create_agent`` span and no model request: nothing to
    say about model spans without tool spans (the line would tell a user of AutoGen that its tools ran on no span)."""
    _, report = _doctor_json(capsys, str(fixture_path(name)))
    assert report["model_spans_only"] == []


@pytest.mark.parametrize(
    ("name", "where"),
    [("llama_index-content", "holds object reprs"), ("openai_v2-default", "openai-v2 2.4b0 records none")],
)
def test_the_missing_tool_list_advice_comes_from_the_scopes_row(
    name: str, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """LlamaIndex's model client is instrumented (its ``llm.tools`` holds object reprs), and the official OpenAI
    instrumentation records no request tools: "instrument the model client" would send the user in a circle. The
    row says where its definitions are; the setting that helps is the config's ``tools:``."""
    _, report = _doctor_json(capsys, str(fixture_path(name)))
    (fix,) = [f for f in _only_group(report)["fixes"] if "no tool list" in f]
    assert where in fix and "`tools:` in the config" in fix
    assert "instrument the model client" not in fix


@pytest.mark.parametrize("name", ["openai_agents-hidden", "smolagents-hidden", "openai_agents_js-hidden"])
def test_hidden_definitions_name_the_content_switch_not_another_instrumentation(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inputs hidden: the model client is instrumented, its definitions hidden with the rest. The schema and
    tool-list fixes say where the row records them and the switch that shows them, not "instrument the model
    client"."""
    _, report = _doctor_json(capsys, str(fixture_path(name)))
    fixes = [f for f in _only_group(report)["fixes"] if "no schema" in f or "no tool list" in f]
    assert fixes
    assert all("OPENINFERENCE_HIDE_INPUTS" in f and "instrument the model client" not in f for f in fixes)


def test_a_switch_already_on_is_not_advised_again(capsys: pytest.CaptureFixture[str]) -> None:
    """AutoGen with content capture on records arguments but no schema anywhere: the schema fix says where (none)
    and the config's ``tools:``, not the capture switch the trace already shows on."""
    _, report = _doctor_json(capsys, str(fixture_path("autogen-capture")))
    (fix,) = [f for f in _only_group(report)["fixes"] if "calls had no schema" in f]
    assert "`tools:` in the config" in fix and "CAPTURE_MESSAGE_CONTENT" not in fix


@pytest.mark.parametrize(("name", "lone"), [("crewai-listener", 5), ("haystack-content", 0)])
def test_model_requests_detached_from_the_agents_trace_are_told_apart(
    name: str, lone: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """CrewAI's event-listener mode: the OpenAI instrumentation's chat spans do not see the crew's context, so each
    request is a trace of its own (a lone model span as root) while the tool spans ran in the crew's trace: the
    fix is the context, not "instrument the framework" (it is). Haystack's requests sit under its agent's root: the
    tools really ran on no span."""
    main(["doctor", str(fixture_path(name)), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["traces_of_a_lone_request"] == lone
    assert (report["lone_request_fix"] is not None) is bool(lone)
    main(["doctor", str(fixture_path(name))])
    assert ("a model request alone" in capsys.readouterr().out) is bool(lone)


def test_calls_left_unmatched_by_a_compacted_history_are_a_gap(capsys: pytest.CaptureFixture[str]) -> None:
    """Haystack's Agent with its ``CompactionHook``: two calls were waiting where the history was trimmed, so their
    replies cannot be matched by position; doctor counts them, says why and what to change, and the gate fails."""
    code = main(["doctor", str(fixture_path("haystack-compacted")), "--json", "--fail-on-gaps"])
    report = json.loads(capsys.readouterr().out)
    assert code == ExitCode.GATE_FAILED
    assert (report["calls_unmatched_by_position"], report["calls_scored_from_requests"]) == (2, 3)
    assert "CompactionHook" in report["unmatched_fix"]
    main(["doctor", str(fixture_path("haystack-compacted"))])
    assert "2 requested call(s) not matched by position" in " ".join(capsys.readouterr().out.split())
    _, whole = _doctor_json(capsys, str(fixture_path("haystack-two_agents")))
    assert (whole["calls_unmatched_by_position"], whole["unmatched_fix"]) == (0, None)


def test_semantic_kernel_plain_mode_asks_for_its_own_sensitive_switch(capsys: pytest.CaptureFixture[str]) -> None:
    """SK's definitions come on the root after the tool spans: the schema is in the trace (not a missing schema);
    what is missing is the arguments, and the switch named is SK's own, not the OTel GenAI content variables."""
    _, report = _doctor_json(capsys, str(fixture_path("semantic_kernel-plain")))
    group = _only_group(report)
    assert (group["tool_spans"], group["with_arguments"], group["with_schema"], group["with_tool_list"]) == (4, 0, 4, 4)
    (fix, _) = group["fixes"]
    assert "no arguments" in fix and "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE" in fix
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" not in json.dumps(report)
    _, report = _doctor_json(capsys, str(fixture_path("semantic_kernel-sensitive")))
    assert report["healthy"] is True  # its schemas validated the calls on the root (trace.late_schema.*)


def test_beeai_hidden_names_its_switch_and_its_error_event_spans_are_no_nameless_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, report = _doctor_json(capsys, str(fixture_path("beeai-hidden")))
    group = _only_group(report)
    assert group["framework"].startswith("BeeAI")
    assert (group["tool_spans"], group["without_name"]) == (5, 0)  # the two ``error`` children are not calls
    assert any("no arguments" in f and "OPENINFERENCE_HIDE_INPUTS" in f for f in group["fixes"])


def test_pydantic_ai_through_logfire_names_its_own_content_switch(capsys: pytest.CaptureFixture[str]) -> None:
    _, report = _doctor_json(capsys, str(fixture_path("pydantic_ai_logfire-hidden")))
    group = _only_group(report)
    fixes = [f for f in group["fixes"] if "no arguments" in f]
    assert fixes and all("logfire.instrument_pydantic_ai(include_content=True)" in f for f in fixes)
    assert not any("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in f for f in group["fixes"])


def test_litellm_raw_request_spans_listing_the_tools_are_not_unrecognised_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, report = _doctor_json(capsys, str(fixture_path("litellm-default")))
    assert report["unrecognised"] == []
    group = _only_group(report)  # the application's own tool spans, under the root LiteLLM stamped
    assert (group["tool_spans"], group["with_arguments"]) == (5, 5)


@pytest.mark.parametrize(("fixture", "model_roots"), [("litellm-hidden", 1), ("litellm-request_spans", 0)])
def test_a_root_stamped_with_a_model_request_is_a_gap_naming_the_span_per_request_setting(
    capsys: pytest.CaptureFixture[str], fixture: str, model_roots: int
) -> None:
    """LiteLLM writes each request onto the application's root, where one request's attributes survive: model calls
    and tokens undercounted, the tools offered unrecorded; its setting for a span per request is named."""
    code = main(["doctor", str(fixture_path(fixture)), "--json", "--fail-on-gaps"])
    report = json.loads(capsys.readouterr().out)
    assert report["traces_with_model_root"] == model_roots
    if model_roots:
        assert code == ExitCode.GATE_FAILED
        assert "USE_OTEL_LITELLM_REQUEST_SPAN=true" in report["model_root_fix"]
    else:
        assert report["model_root_fix"] is None


def test_tools_listed_by_name_only_are_not_called_missing(capsys: pytest.CaptureFixture[str]) -> None:
    """Semantic Kernel without an agent: the functions offered by name only (``sk.available_functions``); doctor
    says the schemas are missing, not that the trace has no definitions of the tools."""
    _, report = _doctor_json(capsys, str(fixture_path("semantic_kernel-kernel")))
    group = _only_group(report)
    assert (group["tool_spans"], group["with_schema"], group["with_tool_list"]) == (4, 0, 4)
    (fix,) = [f for f in group["fixes"] if "had no schema" in f]
    assert "by name only" in fix and "no definitions of these tools in the trace" not in fix
