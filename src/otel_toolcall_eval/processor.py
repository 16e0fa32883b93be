"""``ToolCallEvalProcessor``: the online adapter's public face.

It wraps the processor that exports and forwards every span to it: non-tool spans untouched (the same
object), tool spans and trace roots as an enriched copy carrying the scores. Nothing raises into the
application: a failed evaluation is counted, logged (rate-limited) and the span is forwarded unscored.

The face checks its arguments and hands the rest to a private pipeline (``otel_toolcall_eval.online``,
docs/design.md), as the SDK's ``BatchSpanProcessor`` is a face over its private worker: the SDK's ``on_end`` is
bound straight to the pipeline's (no frame of the face on the span path), ``on_start`` and ``_on_ending`` straight
to the downstream processors' (or to the SDK's no-op when none overrides it).
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import TracerProvider

from otel_toolcall_eval import _sdk
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
        remote_parents: ``"root"`` (the default): a span whose parent is remote is the local root of this process's
            part and finishes the trace here; ``"segment"`` (what ``serve`` uses, ``serve.remote_parents``): it
            finishes nothing, the span with no parent does, else the trace's TTL (``finalized_by="segment"``).
        root_grace_seconds: how long a finished trace's root is held before its verdict is written, so that spans of
            the trace arriving meanwhile count in it (``serve.root_grace_seconds``; 0, the default: at once). The
            root goes out once, with the verdict, when the window ends, or sooner when its state is evicted, at a
            flush or at shutdown; a span arriving after that is scored per call and counted late.

    Where scoring runs is ``config.evaluation.mode``: on the thread that ends the span (``inline``), or on one
    worker thread behind a bounded queue (``background``: ``on_end`` costs the application an append);
    ``auto`` (the default) picks background when every downstream processor is a ``BatchSpanProcessor``,
    whose export is asynchronous anyway, and inline otherwise, so a ``SimpleSpanProcessor`` still exports
    scored spans before ``end()`` returns. ``force_flush(T)`` and ``shutdown(T)`` score what is queued first;
    the queue, the judge and the downstream processors share one deadline, T from the call.
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
        if isinstance(downstream, SpanProcessor):
            processors: tuple[SpanProcessor, ...] = (downstream,)
        else:
            processors = tuple(downstream)
            bad = [p for p in processors if not isinstance(p, SpanProcessor)]
            if bad or not processors:
                raise TypeError(
                    "downstream: expected a SpanProcessor or a non-empty sequence of them, got "
                    f"{type(bad[0]).__name__ if bad else 'an empty sequence'}"
                )
        if config is not None and not isinstance(config, EvalConfig):
            raise TypeError(f"config: expected EvalConfig or None, got {type(config).__name__}")
        pipeline, lifecycle = build(
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
        self._pipeline, self._lifecycle = pipeline, lifecycle
        self.config = pipeline.config
        self.conventions = pipeline.conventions
        self.metrics = pipeline.metrics
        self.judge = pipeline.judge
        # The SDK calls these three hooks for every span: bound straight to the pipeline and the fan-out (no frame
        # of the face between), or, when no downstream processor overrides the SDK's no-op (a BatchSpanProcessor),
        # to that no-op itself (what the SDK calls without the processor)
        self.on_end = pipeline.on_end  # type: ignore[method-assign]
        fan, first = pipeline.downstream, processors[0]
        self.on_start = fan.on_start if fan.on_start_to else first.on_start  # type: ignore[method-assign]
        self._on_ending = fan.on_ending if fan.on_ending_to else _sdk.own_on_ending(first)  # type: ignore[method-assign,assignment]

    # --- SpanProcessor (the three span hooks are replaced per instance in ``__init__``) --------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._pipeline.downstream.on_start(span, parent_context)

    def _on_ending(self, span: Span) -> None:
        self._pipeline.downstream.on_ending(span)

    def on_end(self, span: ReadableSpan) -> None:
        self._pipeline.on_end(span)

    def shutdown(self, timeout_millis: float = 30000) -> None:
        """Score and forward what is queued, let the judge drain, then shut the downstream processors down:
        the queue and the judge share one deadline, ``timeout_millis`` from now. A span that ends meanwhile is
        scored inline and forwarded."""
        self._lifecycle.shutdown(timeout_millis)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Score and forward what is queued, wait for the judge, then flush the downstream processors: all
        within one deadline, ``timeout_millis`` from now."""
        return self._lifecycle.force_flush(timeout_millis)

    @property
    def traces_in_flight(self) -> int:
        """Traces whose root has not ended here yet (tests, benchmarks)."""
        return len(self._pipeline.store)
