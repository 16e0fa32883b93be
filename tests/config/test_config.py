"""The config file: every policy, schema sources, and errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.config import ConfigError, EvalConfig, ToolSchema
from otel_toolcall_eval.demo import default_config_path
from tests.fixtures.tools_module import SendEmail, create_reminder


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolcall-eval.yaml"
    path.write_text(text)
    return path


def test_demo_config_loads_every_policy() -> None:
    config = EvalConfig.load(default_config_path())
    p = config.policies
    assert p.step_budget == 6 and p.must_not_call == ["delete_all_events"]
    assert p.required_steps[0].tool == "authenticate" and "send_email" in p.required_steps[0].before
    assert p.destructive_tools[0].irreversibility == 3
    assert p.argument_rules[0].name == "unscoped_arguments"


def test_tool_schemas_from_json_schema_model_and_function(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
tools:
  - name: lookup
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
  - name: send_email
    model: tests.fixtures.tools_module:SendEmail
  - name: create_reminder
    function: tests.fixtures.tools_module:create_reminder
""",
    )
    defs = EvalConfig.load(path).tool_definitions()
    assert defs["lookup"].parameters == {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert defs["send_email"].parameters == SendEmail.model_json_schema()
    reminder = defs["create_reminder"].parameters
    assert reminder is not None and reminder["required"] == ["text", "at"]
    assert set(reminder["properties"]) == {"text", "at", "repeat"}
    # the Python API builds the same schemas
    assert ToolSchema.from_function(create_reminder).parameters == reminder
    assert ToolSchema.from_model("send_email", SendEmail).parameters == defs["send_email"].parameters


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("policies:\n  step_budjet: 3\n", "policies.step_budjet: unknown key"),
        ("policies:\n  step_budget: 0\n", "policies.step_budget"),
        ("policies:\n  required_steps:\n    - tool: auth\n", "policies.required_steps.0.before: Field required"),
        (
            "policies:\n  destructive_tools:\n    - {tool: rm, irreversibility: 99}\n",
            "policies.destructive_tools.0.irreversibility",
        ),
        ("policies:\n  argument_rules:\n    - {tool: rm, schema: {type: 12}}\n", "policies.argument_rules.0.schema"),
        ("tools:\n  - name: a\n", "give exactly one of 'parameters', 'model' or 'function'"),
        (
            "tools:\n  - {name: a, parameters: {type: object}}\n  - {name: a, parameters: {type: object}}\n",
            "duplicate names ['a']",
        ),
        ("tools:\n  - {name: a, model: 'no.such.module:X'}\n", "cannot import module 'no.such.module'"),
        ("tools:\n  - {name: a, model: 'tests.fixtures.tools_module:NOT_A_MODEL'}\n", "is not a pydantic model"),
        ("limits:\n  max_traces: -1\n", "limits.max_traces"),
        ("- just\n- a list\n", "top level must be a mapping"),
        ("policies: [unclosed\n", "not valid YAML"),
        ("surprise: 1\n", "surprise: unknown key"),
    ],
)
def test_config_errors_name_the_field(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        EvalConfig.load(_write(tmp_path, text))
    assert needle in str(info.value)
    assert str(tmp_path) in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        EvalConfig.load(tmp_path / "nope.yaml")


def test_cli_config_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", str(default_config_path())]) == 0
    assert "valid" in capsys.readouterr().out
    assert main(["config", "check", str(_write(tmp_path, "policies: {bogus: 1}\n"))]) == 2
    assert "policies.bogus: unknown key" in capsys.readouterr().err
