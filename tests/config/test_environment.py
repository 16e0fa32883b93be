"""``OTEL_TOOLCALL_EVAL_*`` variables: the config file's keys, the same validation, errors naming the variable;
and the span processors the zero-code configurator builds for the SDK's exporters."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval.config import ConfigError, EvalConfig, environment
from otel_toolcall_eval.configurator import ExportProcessors
from otel_toolcall_eval.processor import ToolCallEvalProcessor


def test_a_variable_sets_a_key_read_as_yaml() -> None:
    config = environment.load(
        {
            "OTEL_TOOLCALL_EVAL_POLICIES__STEP_BUDGET": "8",
            "OTEL_TOOLCALL_EVAL_POLICIES__MUST_NOT_CALL": "[drop_table, delete_user]",
            "OTEL_TOOLCALL_EVAL_EVALUATION__MODE": "inline",
            "OTHER": "x",
        }
    )
    assert config.policies.step_budget == 8
    assert config.policies.must_not_call == ["drop_table", "delete_user"]
    assert config.evaluation.mode == "inline"


def test_no_variable_is_the_default_config() -> None:
    assert environment.load({}).model_dump() == EvalConfig().model_dump()


def test_an_invalid_value_names_the_variable_and_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        environment.load({"OTEL_TOOLCALL_EVAL_POLICIES__STEP_BUDGET": "many"})
    assert "OTEL_TOOLCALL_EVAL_POLICIES__STEP_BUDGET (policies.step_budget): Input should be a valid integer" in str(
        err.value
    )


def test_an_unknown_key_is_named_like_the_files() -> None:
    with pytest.raises(
        ConfigError, match=r"OTEL_TOOLCALL_EVAL_POLICIES__STEPBUDGET \(policies.stepbudget\): unknown key"
    ):
        environment.load({"OTEL_TOOLCALL_EVAL_POLICIES__STEPBUDGET": "3"})
    with pytest.raises(ConfigError, match="OTEL_TOOLCALL_EVAL_POLICIES__: not a config key"):
        environment.load({"OTEL_TOOLCALL_EVAL_POLICIES__": "3"})


def test_variables_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("policies:\n  step_budget: 4\n  must_not_call: [rm]\n")
    config = environment.load({"OTEL_TOOLCALL_EVAL_CONFIG": str(path), "OTEL_TOOLCALL_EVAL_POLICIES__STEP_BUDGET": "9"})
    assert (config.policies.step_budget, config.policies.must_not_call) == (9, ["rm"])
    assert environment.load({"OTEL_TOOLCALL_EVAL_CONFIG": str(path)}).policies.step_budget == 4


def test_the_files_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("policies:\n  step_budget: x\n")
    with pytest.raises(ConfigError, match=f"{path}: invalid configuration"):
        environment.load({"OTEL_TOOLCALL_EVAL_CONFIG": str(path)})


@pytest.mark.parametrize(("value", "on"), [("", True), ("true", True), ("0", False), ("false", False), ("Off", False)])
def test_enabled(value: str, on: bool) -> None:
    assert environment.enabled({"OTEL_TOOLCALL_EVAL_ENABLED": value}) is on


def test_enabled_rejects_anything_else() -> None:
    with pytest.raises(ConfigError, match="OTEL_TOOLCALL_EVAL_ENABLED"):
        environment.enabled({"OTEL_TOOLCALL_EVAL_ENABLED": "maybe"})


def test_variable_of_is_the_inverse() -> None:
    assert environment.variable_of("policies.step_budget") == "OTEL_TOOLCALL_EVAL_POLICIES__STEP_BUDGET"


def test_two_exporters_get_each_span_once_scored_once() -> None:
    builder = ExportProcessors(EvalConfig())
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    provider = TracerProvider()
    built = [builder(first), builder(second)]
    assert isinstance(built[0], ToolCallEvalProcessor) and not isinstance(built[1], ToolCallEvalProcessor)
    assert builder.config.evaluation.mode == "background"  # every downstream is a BatchSpanProcessor
    for processor in built:
        provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent"):
        with tracer.start_as_current_span(
            "execute_tool x",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "x",
                "gen_ai.tool.call.arguments": "{",
            },
        ):
            pass
    provider.shutdown()
    for exporter in (first, second):
        spans = exporter.get_finished_spans()
        assert sorted(s.name for s in spans) == ["execute_tool x", "invoke_agent"]
        tool = next(s for s in spans if s.name == "execute_tool x")
        assert tool.attributes is not None and tool.attributes["toolcall_eval.parse_ok"] is False
