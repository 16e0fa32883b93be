"""The demo agent: each injected failure class shows up as its own finding, and a clean run is all green."""

from __future__ import annotations

import io
import itertools
import json
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from rich.console import Console

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.config.judge import BUILTIN
from otel_toolcall_eval.demo import DemoOptions, run_demo
from otel_toolcall_eval.demo.agent import FAILURE_CLASSES, MAX_TURNS
from tests.helpers import demo_spans


def _run(failures: dict[str, float], traces: int = 12) -> tuple[object, str]:
    out = io.StringIO()
    summary = run_demo(
        DemoOptions(traces=traces, failures=failures, show_traces=1),
        Console(file=out, width=200, force_terminal=False),
    )
    return summary, out.getvalue()


def test_clean_run_is_all_composite_ok() -> None:
    summary, text = _run(dict.fromkeys(FAILURE_CLASSES, 0.0))
    assert summary.traces == 12 and summary.composite_ok == 12  # type: ignore[attr-defined]
    assert "composite ok-rate: 100.0%" in text


EXPECTED = {
    "wrong_tool": lambda s: s.outcomes["get_calendar"]["malformed_call"] > 0,
    "invalid_args": lambda s: sum(c["malformed_call"] for c in s.outcomes.values()) > 0,
    "unparseable_args": lambda s: sum(c["malformed_call"] for c in s.outcomes.values()) > 0,
    "duplicate": lambda s: s.violations["duplicate"] > 0,
    "retry_loop": lambda s: s.violations["repeated_failure"] > 0,
    "tool_error": lambda s: sum(c["execution_failed"] for c in s.outcomes.values()) > 0,
    "over_budget": lambda s: s.violations["over_budget"] > 0,
    "must_not_call": lambda s: s.violations["must_not_call"] > 0,
    "missing_step": lambda s: s.violations["missing_required_step:authenticate"] > 0,
    "unconfirmed_destructive": lambda s: s.violations["unconfirmed_destructive"] > 0,
}


@pytest.mark.parametrize("kind", FAILURE_CLASSES)
def test_each_failure_class_is_detected(kind: str) -> None:
    failures = dict.fromkeys(FAILURE_CLASSES, 0.0)
    failures[kind] = 1.0
    summary, _ = _run(failures, traces=6)
    assert EXPECTED[kind](summary), f"{kind} not detected"
    assert summary.composite_ok < summary.traces  # type: ignore[attr-defined]


def test_cli_demo_prints_scored_spans_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--traces", "8", "--failure-rate", "0", "--inject", "must_not_call=1", "--show", "1"]) == 0
    out = capsys.readouterr().out
    assert "execute_tool delete_all_events" in out and "violations=[must_not_call]" in out
    assert "trace.composite_ok=False" in out
    # the guard (shadow mode, the demo config's) decided before it ran: its span says what it would have done
    assert "tool=delete_all_events" in out and "decision=block" in out and "guard.policies=[must_not_call]" in out
    assert "guard.mode=shadow" in out and "guard.prevented=False" in out
    assert "composite ok-rate: 0.0%" in out


def test_cli_rejects_bad_injection(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["demo", "--inject", "nonsense=2"])
    assert info.value.code == 2
    assert "CLASS=RATE" in capsys.readouterr().err


# --- what the demo feeds besides the processor's call metrics: sessions, the guard, the tool list, the judge ------


class _Kept(MetricExporter):
    """Keeps what the reader exports: the demo shuts its meter provider down, and the last collection is at shutdown."""

    def __init__(self) -> None:
        super().__init__()
        self.points: list[tuple[str, dict[str, Any], float]] = []

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        self.points = [
            (metric.name, dict(point.attributes or {}), getattr(point, "value", None) or getattr(point, "count", 0))
            for rm in metrics_data.resource_metrics
            for sm in rm.scope_metrics
            for metric in sm.metrics
            for point in metric.data.data_points
        ]
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass

    def total(self, name: str, **labels: str) -> float:
        return sum(v for n, attrs, v in self.points if n == name and all(attrs.get(k) == x for k, x in labels.items()))


def _run_kept(traces: int, failures: dict[str, float], **options: Any) -> tuple[_Kept, str]:
    kept = _Kept()
    reader = PeriodicExportingMetricReader(kept, export_interval_millis=3_600_000)
    out = io.StringIO()
    run_demo(
        DemoOptions(traces=traces, failures=failures, show_traces=0, metric_readers=[reader], **options),
        Console(file=out, width=200, force_terminal=False),
    )
    return kept, out.getvalue()


def test_conversations_roll_up_into_sessions() -> None:
    kept, _ = _run_kept(40, dict.fromkeys(FAILURE_CLASSES, 0.05))
    sessions = kept.total("toolcall_eval.sessions")
    # 40 requests in conversations of 1 to 4 turns, every session finished at shutdown
    assert 40 / MAX_TURNS <= sessions < 40
    assert kept.total("toolcall_eval.session.turns") == sessions
    assert kept.total("toolcall_eval.sessions", outcome="fail") > 0  # a failing turn fails its conversation


def test_conversation_ids_and_the_tool_list_change_between_requests() -> None:
    spans = demo_spans(200, 0.0, seed=3)
    roots = [s for s in spans if s.parent is None]
    ids = [r.attributes["gen_ai.conversation.id"] for r in roots]
    runs = [len(list(group)) for _, group in itertools.groupby(ids)]
    assert len(set(ids)) == len(runs), "a conversation's turns are consecutive"
    assert max(runs) <= MAX_TURNS and min(runs) >= 1 and len(set(runs)) > 1
    offered = {
        tuple(sorted(d["name"] for d in json.loads(s.attributes["gen_ai.tool.definitions"])))
        for s in spans
        if s.name.startswith("chat ")
    }
    assert len(offered) == 2, "the contacts server's tool comes and goes"


def test_the_tool_list_changes_are_counted() -> None:
    kept, _ = _run_kept(120, dict.fromkeys(FAILURE_CLASSES, 0.0))
    assert kept.total("toolcall_eval.tool_list.changes") > 0


def test_shadow_guard_records_what_it_would_block_and_the_processor_still_scores_it() -> None:
    failures = dict.fromkeys(FAILURE_CLASSES, 0.0)
    failures["must_not_call"] = 1.0
    kept, _ = _run_kept(6, failures)
    blocked = kept.total("toolcall_eval.guard.decisions", tool="delete_all_events", decision="block", mode="shadow")
    assert blocked == 6
    assert kept.total("toolcall_eval.guard.findings", policy="must_not_call") == 6
    assert kept.total("toolcall_eval.violations", violation="must_not_call") == 6  # it ran: shadow stops nothing
    assert kept.total("toolcall_eval.guard.decisions", decision="allow") > 0


def test_enforced_guard_stops_the_call_before_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["demo", "--traces", "4", "--failure-rate", "0", "--inject", "must_not_call=1", "--guard", "enforce"]
    assert main([*argv, "--show", "1"]) == 0
    out = capsys.readouterr().out
    assert "apply_guardrail" in out and "trace.prevented_tools=[delete_all_events]" in out
    assert "execute_tool delete_all_events" not in out and "guard.prevented=True" in out
    assert "composite ok-rate: 100.0%" in out  # the call the model asked for never ran


def test_guard_off_records_no_decision() -> None:
    kept, _ = _run_kept(4, dict.fromkeys(FAILURE_CLASSES, 0.0), guard_mode="off")
    assert kept.total("toolcall_eval.guard.decisions") == 0
    assert kept.total("toolcall_eval.traces") == 4


def test_judge_flag_runs_the_real_judge_against_the_scripted_stand_in() -> None:
    kept, text = _run_kept(20, dict.fromkeys(FAILURE_CLASSES, 0.1), judge=True)
    assert "scripted stand-in for a hosted model" in text and "not a model" in text
    assert "judge: scripted answers" in text
    assert kept.total("toolcall_eval.judge.verdicts") > 0
    assert kept.total("toolcall_eval.judge.cost") > 0
    # its verdict spans go through the demo's provider, the processor included: they add no trace and no late span
    assert kept.total("toolcall_eval.traces", finalized_by="root") == 20
    assert kept.total("toolcall_eval.late_spans") == 0
    verdicts = {(a["question"], a["label"]) for n, a, _ in kept.points if n == "toolcall_eval.judge.verdicts"}
    assert {q for q, _ in verdicts} >= {"tool_appropriateness", "error_handling"}
    assert all(label in {s.label for s in BUILTIN[q].scale} for q, label in verdicts)  # no error verdict


def test_without_judge_flag_no_judge_runs() -> None:
    kept, text = _run_kept(4, dict.fromkeys(FAILURE_CLASSES, 0.0))
    assert kept.total("toolcall_eval.judge.verdicts") == 0 and "scripted answers" not in text
    assert "The LLM judge is off: `otel-toolcall-eval demo --judge`" in text
    assert "pip install 'otel-toolcall-eval[judge]'" in text.replace("\n", " ")  # the extra's name kept: no markup


def test_judge_verdicts_show_under_the_calls_they_judge(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--traces", "6", "--judge", "--show", "2", "--failure-rate", "0.2", "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert "toolcall_eval.judge tool_appropriateness" in out
    assert "model=scripted-stand-in" in out and "label=" in out and "score=" in out
