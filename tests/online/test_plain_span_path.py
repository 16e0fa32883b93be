"""What a plain (non-GenAI) span costs on the application thread: the Python frames of the project it enters.

``instructions.plain`` in ``make bench`` counts instructions per plain trace under callgrind; what the processor
adds on the application thread is, per span, the frames it runs. They are counted here (``sys.setprofile``, no
clock), so a frame that creeps back onto the path fails a test rather than moving a figure by a fraction of a
percent, which run-to-run noise hides.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import otel_toolcall_eval
from otel_toolcall_eval import ToolCallEvalProcessor
from otel_toolcall_eval.online import pipeline
from tests.helpers import Recorder

PACKAGE = str(Path(otel_toolcall_eval.__file__).resolve().parent)

# Under the compiled build (tests/compiled_suites.py) the pipeline runs as native code, with no Python frame to
# count: there ``instructions.plain`` in ``make bench`` is the measure.
counts_frames = pytest.mark.skipif(
    not str(pipeline.__file__).endswith(".py"), reason="compiled build: the pipeline runs no Python frames"
)


class _Noop(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _project_frames(run: Callable[[], None]) -> list[str]:
    """The functions of the project entered while ``run`` runs (Python frames only, any depth)."""
    return _frames(run, PACKAGE)


def _frames(run: Callable[[], None], where: str) -> list[str]:
    """The functions entered while ``run`` runs whose file path contains ``where``."""
    entered: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and where in frame.f_code.co_filename:
            entered.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return entered


@counts_frames
def test_a_plain_child_span_enters_two_frames_of_the_project() -> None:
    """``on_end`` and its gate; the SDK's ``on_start`` / ``_on_ending`` calls, which no BatchSpanProcessor needs,
    go to the BatchSpanProcessor's own no-ops as without the processor (they were the fan-out's empty loops)."""
    bsp = BatchSpanProcessor(_Noop())
    provider = TracerProvider()
    provider.add_span_processor(ToolCallEvalProcessor(bsp))
    tracer = provider.get_tracer("t")
    attributes = {"http.route": "/api/records", "http.request.method": "GET"}
    with tracer.start_as_current_span("request", attributes=attributes):

        def child() -> None:
            with tracer.start_as_current_span("work", attributes=attributes):
                pass

        child()  # warm: the gate is built on the first span
        assert _project_frames(child) == ["on_end", "is_plain_child"]
        # and the gate reads the attribute keys without the SDK mapping's Python ``__iter__``
        assert "__iter__" not in _frames(child, "opentelemetry/attributes")
    provider.shutdown()


def test_hooks_still_reach_the_downstream_processors_that_want_them() -> None:
    hooks = Recorder()
    provider = TracerProvider()
    provider.add_span_processor(ToolCallEvalProcessor([BatchSpanProcessor(_Noop()), hooks]))
    with provider.get_tracer("t").start_as_current_span("plain"):
        pass
    provider.shutdown()
    assert hooks.calls[:3] == ["on_start", "_on_ending", "on_end"]  # then the provider's shutdown


@counts_frames
def test_a_plain_root_is_queued_with_three_frames_on_the_application_thread() -> None:
    """Background mode: ``on_end``, its gate and the queue's ``submit``; the conversation check, which only a
    child span can pass, is not run for a root."""
    provider = TracerProvider()
    provider.add_span_processor(ToolCallEvalProcessor(BatchSpanProcessor(_Noop())))
    tracer = provider.get_tracer("t")
    attributes = {"http.route": "/api/records", "http.request.method": "GET"}
    tracer.start_span("request", attributes=attributes).end()  # warm: the gate and the worker
    root = tracer.start_span("request", attributes=attributes)
    assert _project_frames(root.end) == ["on_end", "is_plain_child", "submit"]
    provider.shutdown()


@counts_frames
def test_a_plain_root_of_a_trace_with_no_state_is_forwarded_after_the_gate() -> None:
    """Where the plain root is scored (the worker, or inline here): the gate and the store's lookup, no attribute
    copy, registry, LLM-span checks or trace finish; a root of a trace whose tool spans were seen still gets its
    verdict (the lookup says the trace is known)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_toolcall_eval import attributes as A

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(exporter)))  # inline
    tracer = provider.get_tracer("t")
    attributes = {"http.route": "/api/records", "http.request.method": "GET"}
    tracer.start_span("request", attributes=attributes).end()  # warm
    root = tracer.start_span("request", attributes=attributes)
    frames = _project_frames(root.end)
    # inline, the gate, the read and recognition are one call (``read_span``); in background mode the gate runs alone
    assert frames[:3] == ["on_end", "read_span", "is_plain_child"] and "evaluate_and_forward" in frames
    assert "_finish_trace" not in frames and "recognise" not in frames and "attributes_dict" not in frames
    with tracer.start_as_current_span("request", attributes=attributes):  # a plain root around an agent's tool call
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
        with tracer.start_as_current_span("execute_tool search", attributes=tool):
            pass
    provider.shutdown()
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["request", "request", "execute_tool search", "request"]
    assert all(A.TRACE_TOOL_CALLS not in (s.attributes or {}) for s in spans[:2])
    assert (spans[3].attributes or {})[A.TRACE_TOOL_CALLS] == 1
