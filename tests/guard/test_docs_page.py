"""docs/guardrail.md stays true: its config loads, its alert is the rule as shipped, the names it shows exist."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval.engine.guard import DEFAULT_ACTIONS, POLICIES

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "guardrail.md").read_text()


def test_the_config_example_loads() -> None:
    (block,) = re.findall(r"```yaml\n(.*?)```", PAGE, re.S)
    config = EvalConfig.from_dict(yaml.safe_load(block), source="docs/guardrail.md")
    assert config.guard.actions == {"duplicate": "allow", "destructive_tools": "block"}


def test_the_policy_table_lists_every_policy_with_its_default_action() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \| .*? \| `(\w+)` \|$", PAGE, re.M))
    assert rows == {p: DEFAULT_ACTIONS[p].value for p in POLICIES}


def test_the_alert_shown_is_the_rule_as_shipped() -> None:
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "rules" / "toolcall-eval.rules.yml").read_text())
    rule = next(r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "ToolCallGuardBlockRateHigh")
    (shown,) = re.findall(r"```promql\n(.*?)```", PAGE, re.S)
    assert shown.strip() == rule["expr"].strip()


def test_the_python_names_it_shows_exist() -> None:
    from otel_toolcall_eval.guard import Guard, ToolCallBlocked, definitions  # noqa: F401
    from otel_toolcall_eval.guard.functions import guarded  # noqa: F401
    from otel_toolcall_eval.guard.langgraph import guarded_tool_node  # noqa: F401
    from otel_toolcall_eval.guard.mcp import GuardMiddleware, guarded_proxy  # noqa: F401
    from otel_toolcall_eval.guard.openai_agents import protect, tool_guardrails  # noqa: F401
    from otel_toolcall_eval.guard.pydantic_ai import GuardCapability  # noqa: F401

    for name in ("check", "record_result", "run", "run_async", "scope"):
        assert hasattr(Guard, name) and f"guard.{name}(" in PAGE, name
