"""``ToolCallEvalProcessor``: the online adapter's public face. It checks its arguments and hands the rest to a private
pipeline (``otel_toolcall_eval.online``, docs/explanation/online-pipeline.md), as the SDK's ``BatchSpanProcessor`` is
a face over its private worker: non-tool spans go on untouched (the same object), tool spans and trace roots as an
enriched copy carrying the scores, and nothing raises into the application.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import TracerProvider

from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.config.serve import MAX_ROOT_GRACE_SECONDS, REMOTE_PARENTS
from otel_toolcall_eval.conventions import ConventionRegistry
from otel_toolcall_eval.judge.hook import JudgeHook
from otel_toolcall_eval.online.build import build


class ToolCallEvalProcessor(SpanProcessor):
    """Scores tool calls inline and forwards enriched copies to ``downstream``.

    Args:
        downstream: the processor (or processors) that export, e.g. a ``BatchSpanProcessor``.
        config: policies, registered schemas and limits; ``None`` runs every check that needs no config.
        conventions: the span-typing registry; defaults to the built-in conventions.
        meter_provider: where the processor's metrics go; defaults to the global MeterProvider.
        judge: receives scored calls (see ``otel_toolcall_eval.judge``); by default built from ``config.judge``
            when the config has a judge section; ``False`` disables it.
        tracer_provider: where the judge's verdict spans go; defaults to the global TracerProvider.
        logger_provider: where the judge's ``gen_ai.evaluation.result`` events go; defaults to the global one.
        remote_parents: ``"root"`` (the default): a span with a remote parent is the local root of this process's
            part; ``"segment"`` (``serve.remote_parents``): only the span with no parent finishes the trace.
        root_grace_seconds: how long a finished trace's root is held so that spans arriving meanwhile count in its
            verdict (``serve.root_grace_seconds``; 0, the default: no wait).

    Where scoring runs is ``config.evaluation.mode`` (``inline``, ``background`` or ``auto``: background when every
    downstream processor is a ``BatchSpanProcessor``). ``force_flush(T)`` and ``shutdown(T)`` score what is queued
    first; the queue, the judge and the downstream processors share one deadline, T from the call.
    """

    def __init__(
        self,
        downstream: SpanProcessor | Sequence[SpanProcessor],
        config: EvalConfig | None = None,
        *,
        conventions: ConventionRegistry | None = None,
        meter_provider: MeterProvider | None = None,
        judge: JudgeHook | bool | None = None,
        tracer_provider: TracerProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        remote_parents: str = "root",
        root_grace_seconds: float = 0.0,
    ) -> None:
        if remote_parents not in REMOTE_PARENTS:
            raise ValueError(f"remote_parents: expected one of {', '.join(REMOTE_PARENTS)}, got {remote_parents!r}")
        if not 0 <= root_grace_seconds <= MAX_ROOT_GRACE_SECONDS:  # nan too
            raise ValueError(
                f"root_grace_seconds: expected a number of seconds from 0 to {MAX_ROOT_GRACE_SECONDS:g}, "
                f"got {root_grace_seconds!r}"
            )
        processors = (downstream,) if isinstance(downstream, SpanProcessor) else tuple(downstream)
        bad = [d for d in processors if not isinstance(d, SpanProcessor)]
        if bad or not processors:
            raise TypeError(
                "downstream: expected a SpanProcessor or a non-empty sequence of them, got "
                f"{type(bad[0]).__name__ if bad else 'an empty sequence'}"
            )
        if config is not None and not isinstance(config, EvalConfig):
            raise TypeError(f"config: expected EvalConfig or None, got {type(config).__name__}")
        p, self._lifecycle = build(
            processors,
            config,
            conventions=conventions,
            meter_provider=meter_provider,
            judge=judge,
            tracer_provider=tracer_provider,
            logger_provider=logger_provider,
            segments=remote_parents == "segment",
            grace_seconds=root_grace_seconds,
        )
        self._pipeline = p
        self.config, self.conventions, self.metrics, self.judge = (p.config, p.conventions, p.metrics, p.judge)
        # The SDK calls these three hooks for every span: bound straight to the pipeline's and the fan-out's (no
        # frame of the face between; see ``FanOut.start_hook``). The class keeps the SDK's no-ops.
        self.on_end = p.on_end  # type: ignore[method-assign]
        self.on_start = p.downstream.start_hook  # type: ignore[method-assign]
        self._on_ending = p.downstream.ending_hook  # type: ignore[method-assign,assignment]

    def shutdown(self, timeout_millis: float = 30000) -> None:
        """Score and forward what is queued, let the judge drain, then shut the downstream processors down, within
        one deadline, ``timeout_millis`` from now (a span that ends meanwhile is scored inline and forwarded)."""
        self._lifecycle.shutdown(timeout_millis)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Score and forward what is queued, wait for the judge, then flush the downstream processors, within one
        deadline, ``timeout_millis`` from now."""
        return self._lifecycle.force_flush(timeout_millis)

    @property
    def traces_in_flight(self) -> int:
        """Traces whose root has not ended here yet (tests, benchmarks)."""
        return len(self._pipeline.store)
