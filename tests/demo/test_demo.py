"""The demo agent: each injected failure class shows up as its own finding, and a clean run is all green."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.demo import DemoOptions, run_demo
from otel_toolcall_eval.demo.agent import FAILURE_CLASSES


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
    assert "composite ok-rate: 0.0%" in out


def test_cli_rejects_bad_injection(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["demo", "--inject", "nonsense=2"])
    assert info.value.code == 2
    assert "CLASS=RATE" in capsys.readouterr().err
