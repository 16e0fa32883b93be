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
