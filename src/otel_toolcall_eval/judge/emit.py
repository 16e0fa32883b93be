"""Verdicts out: a span per verdict, the GenAI ``gen_ai.evaluation.result`` event, and the judge's metrics.

The span ``toolcall_eval.judge <question>`` carries a Link to the judged span and, by default, is its child, so
it shows inside the same trace in Jaeger or Tempo. Its parent context is local (``is_remote=False``): a remote
parent would make the span a trace root to the processor, which would then finish the judged trace early.
The event is a log record whose context is the judged span, as the GenAI conventions ask.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from mypy_extensions import mypyc_attr
from opentelemetry import _logs as logs_api
from opentelemetry import metrics as metrics_api
from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from otel_toolcall_eval import _fork
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._version import __version__
from otel_toolcall_eval.online.metrics import NO_SOURCE, SOURCE_LABELS_TEXT, MetricDoc, Source, source_labels

SCOPE: Final = "otel_toolcall_eval.judge"
SPAN_PREFIX: Final = "toolcall_eval.judge "
MAX_EXPLANATION: Final = 1000
# What the GenAI ``gen_ai.evaluation.result`` event carries (the span adds the judge's model, usage and cost).
_EVENT_ATTRIBUTES: Final = (
    A.GEN_AI_EVALUATION_NAME,
    A.GEN_AI_EVALUATION_SCORE_VALUE,
    A.GEN_AI_EVALUATION_SCORE_LABEL,
    A.GEN_AI_EVALUATION_EXPLANATION,
    A.ERROR_TYPE,
)

VERDICTS: Final = "toolcall_eval.judge.verdicts"
ERRORS: Final = "toolcall_eval.judge.errors"
COST: Final = "toolcall_eval.judge.cost"
TOKENS: Final = "toolcall_eval.judge.tokens"
DROPPED: Final = "toolcall_eval.judge.dropped"
OVER_REPORTED: Final = "toolcall_eval.judge.over_reported"
SKIPPED: Final = "toolcall_eval.judge.skipped"
DURATION: Final = "toolcall_eval.judge.duration"
QUEUE_SIZE: Final = "toolcall_eval.judge.queue.size"
SAMPLE_RATE: Final = "toolcall_eval.judge.sample_rate"
AGREEMENT_KAPPA: Final = "toolcall_eval.judge.agreement.kappa"
AGREEMENT_MIN_KAPPA: Final = "toolcall_eval.judge.agreement.min_kappa"

MAX_WAITING_VERDICTS: Final = 16  # verdicts of one open trace held for its source; past this counted without
# the judge's metrics that carry no source, and why (the metrics reference says it)
NOT_BY_SOURCE: Final = (
    "`toolcall_eval.judge.dropped`, `.over_reported`, `.skipped`, `.queue.size`, `.sample_rate` and `.agreement.*` "
    "are the judge's own queue, budget, sampling and calibration; its verdicts, errors, cost, tokens and duration "
    "carry the judged trace's source, as that trace's metrics were labelled: taken when the trace finishes (only "
    "its root, which ends last, may name the agent), so a verdict answered earlier is counted then (at most "
    f"{MAX_WAITING_VERDICTS} wait per trace; past that, or for an open trace let go of for room or at shutdown, "
    "counted without a source)"
)

JUDGE_METRICS: Final[tuple[MetricDoc, ...]] = (
    MetricDoc(
        VERDICTS,
        "counter",
        "{verdict}",
        f"{SOURCE_LABELS_TEXT}, `question`, `label`",
        "toolcall_eval_judge_verdicts_total",
        "verdicts by the judged trace's source, question and label (counted once that trace finishes)",
    ),
    MetricDoc(
        ERRORS,
        "counter",
        "{error}",
        f"{SOURCE_LABELS_TEXT}, `question`, `error_type`",
        "toolcall_eval_judge_errors_total",
        "judge calls that gave no verdict: `timeout`, `http_<status>`, `connection_error`, `invalid_response`, "
        "`response_too_large`, `non_json_answer`, `answer_too_large`, `invalid_answer`, `empty_answer`, `refused`",
    ),
    MetricDoc(
        COST,
        "counter",
        "{currency}",
        f"{SOURCE_LABELS_TEXT}, `question`",
        "toolcall_eval_judge_cost_total",
        "what the judge's calls cost, in the budget's currency",
    ),
    MetricDoc(
        TOKENS,
        "counter",
        "{token}",
        f"{SOURCE_LABELS_TEXT}, `type` (`input`/`output`)",
        "toolcall_eval_judge_tokens_total",
        "tokens the judge's calls used",
    ),
    MetricDoc(
        OVER_REPORTED,
        "counter",
        "{currency}",
        "`question`",
        "toolcall_eval_judge_over_reported_total",
        "cost the provider reported beyond a call's reservation (it ignored `max_tokens`); spend stops at the ceiling",
    ),
    MetricDoc(
        DROPPED,
        "counter",
        "{call}",
        "`reason`",
        "toolcall_eval_judge_dropped_total",
        "sampled calls not judged: `queue_full`, `budget`, `shutdown`, `worker_error`",
    ),
    MetricDoc(
        SKIPPED,
        "counter",
        "{question}",
        "`question`, `reason`",
        "toolcall_eval_judge_skipped_total",
        "questions not asked because their data was never seen: `missing_request`, `missing_reaction`",
    ),
    MetricDoc(
        DURATION,
        "histogram",
        "s",
        f"{SOURCE_LABELS_TEXT}, `question`",
        "toolcall_eval_judge_duration_seconds_bucket",
        "time per judge call, retries included",
    ),
    MetricDoc(
        QUEUE_SIZE, "gauge", "{call}", "", "toolcall_eval_judge_queue_size", "sampled calls waiting for the judge"
    ),
    MetricDoc(
        SAMPLE_RATE,
        "gauge",
        "1",
        "",
        "toolcall_eval_judge_sample_rate",
        "the paced base sampling rate (a clean call's probability)",
    ),
    MetricDoc(
        AGREEMENT_KAPPA,
        "gauge",
        "1",
        "`question`",
        "toolcall_eval_judge_agreement_kappa",
        "Cohen's kappa of the newest calibration record for the judge's current fingerprint (absent: none)",
    ),
    MetricDoc(
        AGREEMENT_MIN_KAPPA,
        "gauge",
        "1",
        "`question`",
        "toolcall_eval_judge_agreement_min_kappa",
        "`judge.calibration.min_kappa`, per question of the judge (absent without `judge.calibration`)",
    ),
)


@dataclass(slots=True)
class Verdict:
    """One question's answer about one call, or the error that stood in for it."""

    question: str
    label: str | None = None
    score: float | None = None
    explanation: str | None = None
    error: str | None = None
    error_message: str | None = None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    paced_input_tokens: int = 0  # the usage the pacing learns from: as reported, within the reserved worst case
    paced_output_tokens: int = 0
    cost: float = 0.0
    start_ns: int = 0
    end_ns: int = 0
    data: dict[str, Any] | None = None  # what the question received (kept for ``judge.labelling``)


@mypyc_attr(native_class=False)  # registered with ``_fork`` by weak reference
class TraceSources:
    """The source each judged trace's verdicts count under (issue 30). The judge is offered a call before its trace
    names its agent (on the root, which ends last) and often answers before the trace ends: a verdict of a trace
    still open waits for ``finished`` (at most ``MAX_WAITING_VERDICTS`` per trace, ``max_traces`` open traces, the
    oldest let go of first, its verdicts then counted without a source); a finished trace's source is kept for its
    later verdicts (``max_traces``, least recently finished first out). Thread-safe and fork-safe."""

    def __init__(self, max_traces: int) -> None:
        self._max = max_traces
        self._init_state()
        _fork.reinit_after_fork(self)

    def _init_state(self) -> None:
        self._open: OrderedDict[int, list[Verdict]] = OrderedDict()
        self._done: OrderedDict[int, Source] = OrderedDict()
        self._lock = threading.Lock()

    def _after_fork_in_child(self) -> None:
        self._init_state()  # the parent's traces are the parent's

    def opened(self, trace_id: int) -> list[Verdict]:
        """A call of the trace is about to be judged; returns the waiting verdicts of a trace let go of for room."""
        with self._lock:
            if trace_id in self._open or trace_id in self._done:
                return []
            self._open[trace_id] = []
            if len(self._open) > self._max:
                return self._open.popitem(last=False)[1]
        return []

    def finished(self, trace_id: int, source: Source) -> list[Verdict]:
        """The trace's source is known: returns its waiting verdicts."""
        with self._lock:
            waiting = self._open.pop(trace_id, None)
            if waiting is None:
                return []
            self._done[trace_id] = source
            if len(self._done) > self._max:
                self._done.popitem(last=False)
        return waiting

    def let_go_of_open(self) -> list[Verdict]:
        """Every open trace is let go of (shutdown): returns their waiting verdicts."""
        with self._lock:
            waiting = [verdict for verdicts in self._open.values() for verdict in verdicts]
            self._open.clear()
        return waiting

    def source(self, trace_id: int, verdict: Verdict) -> Source | None:
        """The trace's source; None when ``verdict`` now waits for it."""
        with self._lock:
            source = self._done.get(trace_id)
            if source is not None:
                return source
            waiting = self._open.get(trace_id)
            if waiting is not None and len(waiting) < MAX_WAITING_VERDICTS:
                waiting.append(verdict)
                return None
        return NO_SOURCE


class JudgeTelemetry:
    """Where verdicts go. Providers default to the global ones, resolved when the first verdict is emitted.
    Verdict metrics carry the judged trace's source (``TraceSources``), bounded as the processor's are."""

    def __init__(
        self,
        *,
        provider: str,
        model: str,
        parent_to_judged_span: bool,
        tracer_provider: trace_api.TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: logs_api.LoggerProvider | None = None,
        queue_size: Callable[[], int] = lambda: 0,
        sample_rate: Callable[[], float] = lambda: 0.0,
        agreement: Callable[[], list[tuple[str, float | None, float]]] = list,
        max_traces: int = 10_000,
    ) -> None:
        self._provider = provider
        self._labels = source_labels(meter_provider)
        self.sources = TraceSources(max_traces)
        self._model = model
        self._parented = parent_to_judged_span
        self._tracer_provider = tracer_provider
        self._logger_provider = logger_provider
        self._tracer: trace_api.Tracer | None = None
        self._logger: logs_api.Logger | None = None
        meter = (meter_provider or metrics_api.get_meter_provider()).get_meter(SCOPE, __version__)
        docs = {m.name: m for m in JUDGE_METRICS}
        self._verdicts = meter.create_counter(VERDICTS, unit="{verdict}", description=docs[VERDICTS].meaning)
        self._errors = meter.create_counter(ERRORS, unit="{error}", description=docs[ERRORS].meaning)
        self._cost = meter.create_counter(COST, unit="{currency}", description=docs[COST].meaning)
        self._tokens = meter.create_counter(TOKENS, unit="{token}", description=docs[TOKENS].meaning)
        self._dropped = meter.create_counter(DROPPED, unit="{call}", description=docs[DROPPED].meaning)
        self._over = meter.create_counter(OVER_REPORTED, unit="{currency}", description=docs[OVER_REPORTED].meaning)
        self._skipped = meter.create_counter(SKIPPED, unit="{question}", description=docs[SKIPPED].meaning)
        self._duration = meter.create_histogram(
            DURATION,
            unit="s",
            description=docs[DURATION].meaning,
            explicit_bucket_boundaries_advisory=[0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120],
        )

        def observe(fn: Callable[[], float]) -> Callable[[CallbackOptions], Iterable[Observation]]:
            return lambda _options: [Observation(fn())]

        meter.create_observable_gauge(
            QUEUE_SIZE, [observe(queue_size)], unit="{call}", description=docs[QUEUE_SIZE].meaning
        )
        meter.create_observable_gauge(
            SAMPLE_RATE, [observe(sample_rate)], unit="1", description=docs[SAMPLE_RATE].meaning
        )

        def kappas(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(k, {"question": q}) for q, k, _ in agreement() if k is not None]

        def minimums(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(m, {"question": q}) for q, _, m in agreement()]

        meter.create_observable_gauge(AGREEMENT_KAPPA, [kappas], unit="1", description=docs[AGREEMENT_KAPPA].meaning)
        meter.create_observable_gauge(
            AGREEMENT_MIN_KAPPA, [minimums], unit="1", description=docs[AGREEMENT_MIN_KAPPA].meaning
        )

    # --- counters --------------------------------------------------------------------------------
    def dropped(self, reason: str, count: int = 1) -> None:
        if count:
            self._dropped.add(count, {"reason": reason})

    def over_reported(self, question: str, amount: float) -> None:
        self._over.add(amount, {"question": question})

    def skipped(self, question: str, reason: str) -> None:
        self._skipped.add(1, {"question": question, "reason": reason})

    # --- one verdict -------------------------------------------------------------------------------
    def emit(self, verdict: Verdict, trace_id: int, span_id: int) -> None:
        judged = SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        source = self.sources.source(trace_id, verdict)
        if source is not None:  # else counted when its trace finishes
            self._record_metrics(verdict, source)
        self._span(verdict, judged)
        self._event(verdict, judged)

    def opened(self, trace_id: int) -> None:
        """A call of the trace is about to be judged: its verdicts wait for the trace's source."""
        for verdict in self.sources.opened(trace_id):
            self._record_metrics(verdict, NO_SOURCE)

    def let_go_of_open(self) -> None:
        """Shutdown: the verdicts still waiting for a trace's source (a judge used without a pipeline, whose traces
        never finish) are counted without one."""
        for verdict in self.sources.let_go_of_open():
            self._record_metrics(verdict, NO_SOURCE)

    def trace_finished(self, trace_id: int, source: Source) -> None:
        """The trace's source (``online.hooks.TraceFinished.source``): its waiting verdicts are counted with it."""
        for verdict in self.sources.finished(trace_id, source):
            self._record_metrics(verdict, source)

    def _record_metrics(self, v: Verdict, source: Source) -> None:
        labels = self._labels
        bounded = labels.bound(source)
        q = labels.with_source(bounded, {"question": v.question})
        if v.error is None and v.label is not None:
            self._verdicts.add(1, {**q, "label": v.label})
        else:
            self._errors.add(1, {**q, "error_type": v.error or "unknown"})
        if v.cost:
            self._cost.add(v.cost, q)
        if v.input_tokens:
            self._tokens.add(v.input_tokens, labels.with_source(bounded, {"type": "input"}))
        if v.output_tokens:
            self._tokens.add(v.output_tokens, labels.with_source(bounded, {"type": "output"}))
        if v.end_ns >= v.start_ns > 0:
            self._duration.record((v.end_ns - v.start_ns) / 1e9, q)

    def _attributes(self, v: Verdict) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            A.GEN_AI_EVALUATION_NAME: v.question,
            A.JUDGE_PROVIDER: self._provider,
            A.JUDGE_MODEL: v.model or self._model,
            A.JUDGE_INPUT_TOKENS: v.input_tokens,
            A.JUDGE_OUTPUT_TOKENS: v.output_tokens,
            A.JUDGE_COST: v.cost,
        }
        if v.label is not None:
            attrs[A.GEN_AI_EVALUATION_SCORE_LABEL] = v.label
        if v.score is not None:
            attrs[A.GEN_AI_EVALUATION_SCORE_VALUE] = v.score
        if v.explanation:
            attrs[A.GEN_AI_EVALUATION_EXPLANATION] = v.explanation[:MAX_EXPLANATION]
        if v.error is not None:
            attrs[A.ERROR_TYPE] = v.error
        return attrs

    def _span(self, v: Verdict, judged: SpanContext) -> None:
        if self._tracer is None:
            provider = self._tracer_provider or trace_api.get_tracer_provider()
            self._tracer = provider.get_tracer(SCOPE, __version__)
        parent = trace_api.set_span_in_context(NonRecordingSpan(judged)) if self._parented else Context()
        span = self._tracer.start_span(
            SPAN_PREFIX + v.question,
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=self._attributes(v),
            links=[Link(judged)],
            start_time=v.start_ns or None,
        )
        if v.error is not None:
            span.set_status(Status(StatusCode.ERROR, (v.error_message or v.error)[:200]))
        span.end(end_time=v.end_ns or None)

    def _event(self, v: Verdict, judged: SpanContext) -> None:
        if self._logger is None:
            provider = self._logger_provider or logs_api.get_logger_provider()
            self._logger = provider.get_logger(SCOPE, __version__)
        span_attrs = self._attributes(v)
        attrs: dict[str, Any] = {k: span_attrs[k] for k in _EVENT_ATTRIBUTES if k in span_attrs}
        self._logger.emit(
            timestamp=v.end_ns or None,
            context=trace_api.set_span_in_context(NonRecordingSpan(judged)),
            event_name=A.GEN_AI_EVALUATION_RESULT,
            attributes=attrs,
        )
