"""One ``build`` that assembles a pipeline from the config: what ``ToolCallEvalProcessor`` is made of.

Here, once, are the decisions the span path must not make per span: the config's defaults, whether a judge runs
(``config.judge``), where scoring runs (``config.evaluation.mode``: ``auto`` picks the background queue when every
downstream processor is a ``BatchSpanProcessor``, whose export is asynchronous anyway, and inline otherwise, so a
``SimpleSpanProcessor`` still exports scored spans before ``end()`` returns) and whether a timer is needed.
"""

from __future__ import annotations

from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import TracerProvider

from otel_toolcall_eval._ticker import Ticker
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.conventions import ConventionRegistry, default_registry
from otel_toolcall_eval.judge.hook import JudgeHook
from otel_toolcall_eval.online.background import BackgroundQueue
from otel_toolcall_eval.online.contain import Contained, RateLimitedLog
from otel_toolcall_eval.online.forward import FanOut
from otel_toolcall_eval.online.hooks import Hooks
from otel_toolcall_eval.online.judging import JudgeFeature
from otel_toolcall_eval.online.lifecycle import Lifecycle, timer_period
from otel_toolcall_eval.online.metrics import EvalMetrics
from otel_toolcall_eval.online.pipeline import Pipeline
from otel_toolcall_eval.online.sessions import SessionRollup, SessionTraces


def build(
    processors: tuple[SpanProcessor, ...],
    config: EvalConfig | None = None,
    *,
    conventions: ConventionRegistry | None = None,
    meter_provider: MeterProvider | None = None,
    judge: JudgeHook | bool | None = None,
    tracer_provider: TracerProvider | None = None,
    logger_provider: LoggerProvider | None = None,
    segments: bool = False,
    grace_seconds: float = 0.0,
) -> tuple[Pipeline, Lifecycle]:
    """The pipeline and its lifecycle (the arguments are ``ToolCallEvalProcessor``'s, checked there)."""
    config = config or EvalConfig()
    metrics = EvalMetrics(meter_provider)
    limits = config.limits
    if judge is None and config.judge is not None:
        from otel_toolcall_eval.judge import Judge

        judge = Judge(
            config.judge,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            known_tools=config.tool_definitions(),
            max_traces=limits.max_traces,
        )
    log = RateLimitedLog()  # one for the pipeline and the fan-out
    contained = Contained(metrics.record_error, log)
    # the features, plugged in through the hook lists (bound here, once): sessions, then the judge
    hooks = Hooks()
    sessions = config.sessions
    rollup: SessionRollup | None = None
    traces: SessionTraces | None = None
    if sessions.enabled:
        rollup = SessionRollup(
            step_budget=sessions.step_budget,
            max_sessions=limits.max_sessions,
            idle_seconds=limits.session_idle_seconds,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            on_error=contained.failed,
        )
        traces = SessionTraces(
            rollup,
            attributes=tuple(sessions.attributes),
            max_traces=limits.max_traces,
            max_attribute_length=limits.max_attribute_length,
        )
        hooks += traces.hooks()
    judge_hook = None if judge is None or isinstance(judge, bool) else judge
    if judge_hook is not None:
        hooks += JudgeFeature(judge_hook, contained).hooks()
    pipeline = Pipeline(
        FanOut(processors, log),
        contained,
        config,
        conventions or default_registry(),
        metrics,
        hooks,
        segments=segments,
        grace_seconds=float(grace_seconds),
        judge=judge_hook,
        sessions=rollup,
    )
    lifecycle = Lifecycle(pipeline)
    if pipeline.sessions is not None or pipeline.held is not None or pipeline.grace:  # starts on first use
        pipeline.ticker = Ticker(
            timer_period(
                limits.session_idle_seconds if pipeline.sessions is not None else None,
                limits.max_hold_seconds if pipeline.held is not None else None,
                pipeline.grace or None,
            ),
            lifecycle.tick,
        )
        if traces is not None:  # an open session: the timer emits it once idle, traffic or not
            traces.wake = pipeline.start_timer
    evaluation = config.evaluation
    if evaluation.mode == "background" or (
        evaluation.mode == "auto" and all(isinstance(p, BatchSpanProcessor) for p in processors)
    ):
        pipeline.background = BackgroundQueue(
            pipeline.evaluate_and_forward,
            max_size=evaluation.max_queue_size,
            max_delay_seconds=evaluation.max_delay_millis / 1000,
            on_wait=metrics.record_queue_wait,
        )
        metrics.watch_queue(pipeline.background)
    return pipeline, lifecycle
