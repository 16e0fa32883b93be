"""The benchmark suite at its smallest (``--quick``): every suite runs, writes its JSON, and reports each figure.

Nothing here depends on the machine's speed or load: a figure is checked for its status, its rounds and a ratio
that is a positive finite number, never for its size. How fast is ``make bench``'s question (its targets, and
``--fail-on-miss`` to turn a missed target into a failing exit), where the baseline is measured in the same run;
a time ratio of a few ``--quick`` rounds swings with whatever else shares the cores.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest
from benchmarks import SUITES
from benchmarks.__main__ import main

PROCESSOR_FIGURES = (
    "processor.plain_span",
    "processor.tool_span.valid_5",
    "processor.tool_span.invalid_5",
    "processor.tool_span.valid_20",
    "processor.tool_span.invalid_20",
    "processor.tool_span.background.valid_5",
    "processor.tool_span.background.invalid_20",
)
OPTIONAL_FIGURES = ("judge.decision", "offline.vs_ragas", "offline.vs_deepeval", "replay.throughput")


def _measured(f: dict[str, Any]) -> bool:
    """A measured ratio: a positive finite number (how large is not this suite's question)."""
    ratio = f["ratio"]
    return isinstance(ratio, (int, float)) and math.isfinite(ratio) and ratio > 0


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench") / "bench-results.json"
    threads_before = set(threading.enumerate())
    assert main(["--quick", "--json", str(out)]) == 0
    leftover = [t for t in threading.enumerate() if t not in threads_before and t.is_alive() and not t.daemon]
    assert not leftover, f"the suite left threads running: {leftover}"
    result: dict[str, Any] = json.loads(Path(out).read_text())
    return result


def _figures(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in report["figures"]}


def test_every_suite_ran_and_reported(report: dict[str, Any]) -> None:
    figures = _figures(report)
    assert not [f for f in figures.values() if f["status"] == "error"]
    assert {f["suite"] for f in figures.values()} == {s.rsplit(".", 1)[1] for s in SUITES}
    for f in figures.values():
        assert f["status"] in ("met", "missed", "info", "unavailable")
        assert (f["ratio"] is None) == (f["status"] == "unavailable"), f
    assert report["machine"]["nproc"] >= 1 and report["machine"]["python"]


def test_processor_figures_are_measured(report: dict[str, Any]) -> None:
    figures = _figures(report)
    for fid in PROCESSOR_FIGURES:
        f = figures[fid]
        assert f["status"] in ("met", "missed"), f
        rounds = f["data"]
        assert len(rounds["subject_rounds"]) == len(rounds["baseline_rounds"]) == report["sizes"]["rounds"]
        assert _measured(f), f


def test_the_scoring_cpu_is_accounted_for_in_both_modes(report: dict[str, Any]) -> None:
    """Background evaluation moves the scoring off the application thread; the whole-trace CPU still shows it."""
    figures = _figures(report)
    for mode in ("inline", "background"):
        f = figures[f"processor.trace_cpu.{mode}"]
        assert f["status"] == "info" and f["data"]["clock"] == "process_time_ns"
        assert _measured(f), f


def test_memory_is_bounded(report: dict[str, Any]) -> None:
    f = _figures(report)["memory.growth"]
    data = f["data"]
    assert data["limit_reached_at"] is not None, "the quick run must go past the trace limit"
    assert data["growth"] < 64 * 2**20, f["measured"]
    assert max(s[2] for s in data["samples"]) <= data["limit"], "more traces held than the limit"


def test_session_memory_is_bounded(report: dict[str, Any]) -> None:
    f = _figures(report)["memory.sessions"]
    data = f["data"]
    assert data["limit_reached_at"] is not None, "the quick run must go past the session limit"
    assert data["growth"] < 64 * 2**20, f["measured"]
    assert max(s[2] for s in data["samples"]) <= data["limit"], "more sessions held than the limit"


def test_optional_figures_are_measured_or_say_why(report: dict[str, Any]) -> None:
    figures = _figures(report)
    for fid in OPTIONAL_FIGURES:
        f = figures[fid]
        if f["status"] == "unavailable":
            assert f["note"], f"{fid} is unavailable without saying why"
            continue
        assert _measured(f), f


def test_the_service_figures_are_measured(report: dict[str, Any]) -> None:
    """``benchmarks.serve``: two real service processes over gRPC, both measured, and the latency figure has
    samples from both."""
    figures = _figures(report)
    f = figures["serve.throughput"]
    assert f["status"] in ("met", "missed"), f
    assert len(f["data"]["subject_rounds"]) == len(f["data"]["baseline_rounds"]) == report["sizes"]["rounds"]
    assert _measured(f), f
    latency = figures["serve.latency"]["data"]
    assert all(n > 0 for n in latency["samples"].values()), latency
    for side in ("score", "pass"):
        assert 0 < latency["p50_ms"][side] <= latency["p99_ms"][side], latency
    counted = figures["serve.instructions"]  # minutes under callgrind: make bench only
    assert counted["status"] == "unavailable" and "--quick" in counted["note"], counted


def test_a_service_child_runs_under_a_prefix_and_reports_its_stderr() -> None:
    """The instruction figure runs the service child under ``valgrind``; here under ``env``, which runs it
    unchanged: one round through it still reaches the sink scored, and its stderr is readable once it ended."""
    from benchmarks.serve import ServiceProcess, Sink, Traffic, cost_round, recorded_traces

    sink = Sink()
    service = ServiceProcess("score", sink.port, 120, prefix=("env", "PROBE_PREFIX=1"))
    try:
        assert cost_round(sink, service, Traffic(recorded_traces(2))) > 0
        assert service.stop()["complete"]
        assert isinstance(service.stderr_tail(), str)
    finally:
        if service._proc.poll() is None:
            service._proc.kill()
        sink.close()


@pytest.mark.parametrize("kind", ["plain", "valid", "invalid"])
def test_the_callgrind_child_runs_each_kind(kind: str) -> None:
    """``make bench`` counts this child's instructions under callgrind; here it just has to run, both ways."""
    from benchmarks.instructions import _child

    _child(kind, True, 3)
    _child(kind, False, 3)


def test_the_guard_figures_are_measured(report: dict[str, Any]) -> None:
    figures = _figures(report)
    for fig_id in ("guard.decision", "guard.allowed_call", "guard.blocked_call", "guard.decorated_function"):
        assert _measured(figures[fig_id]), figures[fig_id]
        assert len(figures[fig_id]["data"]["subject_rounds"]) == report["sizes"]["rounds"]


# --- a part that fails, a span that is lost (no service started, no clock read: the rules themselves) -------------


def test_a_part_that_fails_is_an_error_row_and_the_other_parts_keep_their_figures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pure build's serve suite lost its CPU-time figure when its callgrind part crashed afterwards."""
    from benchmarks import serve
    from benchmarks.harness import FULL, Figure

    measured = Figure("serve.throughput", "t", "1", "1", 2.0, "<= 2.0x cost", "met")

    def crash(sizes: object) -> Figure:
        raise RuntimeError("the score service exported 633 of 800 spans, lost")

    monkeypatch.setattr(serve, "_with_services", lambda sizes: [measured])
    monkeypatch.setattr(serve, "_instruction_figure", crash)
    figures = serve.run(FULL)
    assert [(f.id, f.status) for f in figures] == [("serve.throughput", "met"), ("serve.instructions", "error")]
    assert "633 of 800" in figures[1].note


class _Steps:
    """A clock that moves only when the wait sleeps, and what the service does meanwhile (one step per sleep)."""

    def __init__(self, steps: list[tuple[str, str, int]]) -> None:
        from otel_toolcall_eval.serve.metrics import ServeMetrics

        self.metrics = ServeMetrics()
        self.now = 0.0
        self._steps = steps

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self._steps:
            name, value, amount = self._steps.pop(0)
            self.metrics.add(name, amount, value)


def _wait(steps: _Steps, want: int, beats: list[dict[str, Any]]) -> dict[str, Any]:
    from benchmarks.serve import wait_exported

    return wait_exported(
        steps.metrics,
        want,
        stall=10.0,
        poll=1.0,
        beat=beats.append,
        heartbeat=5.0,
        clock=lambda: steps.now,
        sleep=steps.sleep,
    )


def test_a_slow_service_is_waited_for_as_long_as_it_makes_progress() -> None:
    """Under callgrind on a loaded machine a round takes many minutes: no deadline while a counter moves."""
    from otel_toolcall_eval.serve.metrics import EXPORTED, SCORED

    # 100 steps of a few spans each, every one 1 s apart: 100 s in all, ten times the stall window
    steps = _Steps([(SCORED, "", 8) if i % 2 else (EXPORTED, "ok", 16) for i in range(100)])
    beats: list[dict[str, Any]] = []
    got = _wait(steps, 800, beats)
    assert (got["state"], got["exported"]) == ("done", 800)
    assert len(beats) >= 15 and all(b["state"] == "waiting" for b in beats)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("toolcall_eval.serve.spans.exported", "failed"),
        ("toolcall_eval.serve.spans.exported", "timed_out"),
        ("toolcall_eval.serve.spans.rejected", "queue_full"),
    ],
)
def test_a_lost_span_fails_the_round_at_once(name: str, value: str) -> None:
    from otel_toolcall_eval.serve.metrics import EXPORTED

    steps = _Steps([(EXPORTED, "ok", 100), (name, value, 1), *[(EXPORTED, "ok", 100)] * 10])
    got = _wait(steps, 800, [])
    assert (got["state"], got["exported"]) == ("lost", 100)
    assert steps.now == 2.0  # not a moment longer: waiting would only hide it


def test_a_span_gone_without_a_count_fails_the_round_after_the_stall_window() -> None:
    from otel_toolcall_eval.serve.metrics import EXPORTED, SCORED

    steps = _Steps([(SCORED, "", 800), (EXPORTED, "ok", 799)])
    got = _wait(steps, 800, [])
    assert (got["state"], got["exported"], got["scored"]) == ("stalled", 799, 800)
    assert 10.0 < steps.now <= 13.0
