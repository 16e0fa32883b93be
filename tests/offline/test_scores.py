"""Typed results: the aggregate's ``RunReport`` is what the gate and the summary tables read; the gate's dotted keys
(the config's file format) are compiled once to the typed fields they name, and a name without a field fails
before anything is scored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_toolcall_eval.config import ConfigError, EvalConfig, catalog
from otel_toolcall_eval.config.offline import GateConfig
from otel_toolcall_eval.dataset import template_cases, write_cases
from otel_toolcall_eval.offline.gate import compile_gate
from otel_toolcall_eval.offline.runner import evaluate
from otel_toolcall_eval.offline.scores import RunReport, compile_metric
from tests.helpers import BAD, GOOD, write_run


def _every_key() -> list[str]:
    keys = [m.path for m in catalog.SUMMARY_METRICS]
    keys += [f"slices.{s}.{m.path}" for s in catalog.SLICES for m in catalog.SUMMARY_METRICS]
    keys += [f"difficulty.{d}.{m.path}" for d in catalog.DIFFICULTIES for m in catalog.SUMMARY_METRICS]
    keys += [f"per_tool.get_order.{m.path}" for m in catalog.TOOL_METRICS]
    keys += [f"per_tool.a.b.{m.path}" for m in catalog.TOOL_METRICS]  # a tool name with a dot in it
    keys += [f"judge.tool_appropriateness.{m.path}" for m in catalog.JUDGE_METRICS]
    return keys


def test_every_catalog_key_names_a_typed_field(tmp_path: Path) -> None:
    dataset = tmp_path / "d.jsonl"
    write_cases(dataset, template_cases())
    with evaluate(dataset, [write_run(tmp_path, GOOD)], EvalConfig()) as result:
        report = result.scores
        summary = result.report["summary"]  # the JSON form, written from the typed one
    for key in _every_key():
        compile_metric(key).read(report)  # no AttributeError: every path is a field
    assert compile_metric("tool_selection.f1").read(report) == summary["tool_selection"]["f1"]
    assert compile_metric("latency_ms.mean").read(report) == summary["latency_ms"]["mean"]
    assert compile_metric("per_tool.get_order.recall").read(report) == result.report["per_tool"]["get_order"]["recall"]
    assert compile_metric("per_tool.never_called.recall").read(report) is None
    for scope, groups in (("slices", report.slices), ("difficulty", report.difficulty)):
        for group, block in groups.items():
            expected = block.pass_rate if block.cases else None  # a scope without cases has no value
            assert compile_metric(f"{scope}.{group}.pass_rate").read(report) == expected
    assert compile_metric("judge.tool_appropriateness.pass_rate").read(report) is None  # no verdicts given


def test_a_key_without_a_typed_field_fails_at_start_up_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^gate\.max\.order_scor: 'order_scor': unknown metric"):
        compile_gate(GateConfig.model_construct(min={"pass_rate": 0.5}, max={"order_scor": 1.0}, max_spread=None))
    bogus = EvalConfig.model_construct(gate=GateConfig.model_construct(min={"pass_rate.x": 1.0}, max={}))
    # before the dataset is opened: a missing file would be a DatasetError
    with pytest.raises(ConfigError, match=r"gate\.min\.pass_rate\.x"):
        evaluate(tmp_path / "no-such-dataset.jsonl", [tmp_path / "no-such-run.jsonl"], bogus)


def test_json_form_round_trips_and_the_gate_reads_the_typed_mean_and_spread(tmp_path: Path) -> None:
    dataset = tmp_path / "d.jsonl"
    write_cases(dataset, template_cases())
    good, bad = write_run(tmp_path, GOOD, "a.jsonl"), write_run(tmp_path, BAD, "b.jsonl")
    config = EvalConfig.model_validate(
        {
            "gate": {"min": {"pass_rate": 0.5, "difficulty.easy.pass_rate": 0.1}, "max_spread": 0.2},
            "policies": {"required_steps": [{"tool": "cancel_order", "before": ["get_order"]}]},
            "trajectory": {"mode": "unordered"},
        }
    )
    with evaluate(dataset, [good, bad, good], config) as result:
        assert result.spread_scores is not None
        for typed in (result.scores, result.spread_scores, *result.per_run_scores):
            assert RunReport.from_json(json.loads(json.dumps(typed.to_json()))) == typed
        assert result.scores.summary.policy_violations is not None
        assert result.scores.summary.trajectory_cases is not None
        assert "trajectory_match_rate" in result.report["summary"]
        spread = result.spread_scores.summary.pass_rate
        assert spread is not None and spread > 0.2
        failures = result.gate.failures
    assert f"pass_rate varies by {spread:.4f} across 3 runs (max_spread 0.2)" in failures
