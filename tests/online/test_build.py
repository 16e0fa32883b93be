"""``build`` on its own (``online/build.py``): the decisions made once from the config, not per span; and the
face (``processor.py``) adding no frame of its own to the span path."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval.online.build import build
from otel_toolcall_eval.online.lifecycle import timer_period
from tests.helpers import Recorder


def _config(**sections: Any) -> EvalConfig:
    return EvalConfig.from_dict(sections)


def test_a_default_config_builds_an_inline_pipeline_whose_timer_waits_for_first_use() -> None:
    pipeline, lifecycle = build((Recorder(),))
    assert pipeline.background is None and pipeline.judge is None
    # sessions and held failed spans are on by default: a timer, started on first use
    assert pipeline.sessions is not None and pipeline.held is not None
    assert pipeline.ticker is not None and not pipeline.ticker.running
    assert lifecycle.pipeline is pipeline
    pipeline, _ = build((Recorder(),), _config(sessions={"enabled": False}, limits={"max_held_spans": 0}))
    assert pipeline.sessions is None and pipeline.held is None and pipeline.ticker is None


def test_the_evaluation_mode_and_the_timer_follow_the_config() -> None:
    batch = BatchSpanProcessor(InMemorySpanExporter())
    try:
        pipeline, _ = build((batch,))
        assert pipeline.background is not None  # auto: every downstream is a batch processor
        pipeline, _ = build((batch,), _config(evaluation={"mode": "inline"}))
        assert pipeline.background is None
    finally:
        batch.shutdown()
    pipeline, _ = build((SimpleSpanProcessor(InMemorySpanExporter()),))
    assert pipeline.background is None
    config = _config(sessions={"enabled": True}, limits={"session_idle_seconds": 40, "max_hold_seconds": 8})
    pipeline, _ = build((Recorder(),), config)
    assert pipeline.sessions is not None and pipeline.ticker is not None
    assert pipeline.ticker.period == timer_period(40, 8) == 2.0


def test_the_face_binds_on_end_straight_to_the_pipeline() -> None:
    """No frame of ``ToolCallEvalProcessor`` between the SDK and the pipeline (the SDK's ``BatchSpanProcessor``
    is a face over its worker the same way)."""
    processor = ToolCallEvalProcessor(Recorder())
    pipeline = processor._pipeline
    assert processor.on_end == pipeline.on_end and processor.on_end.__self__ is pipeline
    assert processor.judge is pipeline.judge and processor.metrics is pipeline.metrics
    assert not isinstance(pipeline, SpanProcessor)  # the pipeline subclasses nothing of the SDK's
