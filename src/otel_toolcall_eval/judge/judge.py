"""``Judge``: what the processor calls. Samples on the application thread, judges on the worker's.

The processor calls it through ``judge.hook.JudgeHook``: ``offer`` for every scored tool call,
``observe_llm_span`` for every LLM span (the user's request; the reaction to a failed call), ``trace_done``
when it lets go of a trace, and ``force_flush`` / ``shutdown`` with its one deadline. The judge keeps its own
per-trace context (``_Traces``: bounded, fork-safe): a sampled call whose questions need the reaction to a
failure waits there until the next LLM span (or the end of the trace), then joins the queue.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx
from opentelemetry import _logs as logs_api
from opentelemetry import trace as trace_api
from opentelemetry.metrics import MeterProvider

from otel_toolcall_eval import _fork
from otel_toolcall_eval._deadline import Deadline
from otel_toolcall_eval.config.judge import JudgeConfig, QuestionConfig
from otel_toolcall_eval.judge import providers
from otel_toolcall_eval.judge.calibration import CalibrationWatch
from otel_toolcall_eval.judge.context import (
    MAX_LATER_CALLS,
    JudgeItem,
    Reaction,
    free_text_arguments,
    later_call,
    model_reaction,
    user_request,
)
from otel_toolcall_eval.judge.emit import JudgeTelemetry, Verdict
from otel_toolcall_eval.judge.fingerprint import fingerprints
from otel_toolcall_eval.judge.ledger import Ledger
from otel_toolcall_eval.judge.questions import (
    REDACT_LOOKAHEAD,
    AnswerError,
    Redactor,
    applies,
    build_prompt,
    call_view,
    missing,
    parse_answer,
    question_data,
    score_of,
)
from otel_toolcall_eval.judge.redis_ledger import make_ledger
from otel_toolcall_eval.judge.sampler import Sampler, trace_draw
from otel_toolcall_eval.judge.verdicts import VerdictLog
from otel_toolcall_eval.judge.worker import Worker
from otel_toolcall_eval.online.metrics import NO_SOURCE, Source
from otel_toolcall_eval.records import CallScore, ToolCallRecord, ToolDefinition

MAX_PENDING_PER_TRACE: Final = 8
MAX_TRACES: Final = 10_000  # traces with a context at once (the processor's default ``limits.max_traces``)
PROMPT_OVERHEAD_TOKENS: Final = 512  # chat template, tool schema (Anthropic) and message framing


class BudgetExhausted(Exception):
    """The period's ceiling leaves no room for this call's worst case."""


@dataclass(slots=True)
class _TraceContext:
    request: str | None = None  # the user's request: None = not seen yet, "" = none recorded
    pending: list[JudgeItem] | None = None  # sampled failed calls waiting for the model's reaction


class _Traces:
    """The judge's per-trace context, bounded (LRU of ``max_traces``); reads take no lock, changes do.

    An evicted trace's waiting items are handed back to be queued, as at the end of the trace."""

    def __init__(self, max_traces: int) -> None:
        self._max = max_traces
        self._init_state()
        _fork.reinit_after_fork(self)

    def _init_state(self) -> None:
        self._items: OrderedDict[int, _TraceContext] = OrderedDict()
        self.lock = threading.Lock()  # guards ``_items`` and every context's ``pending``

    def _after_fork_in_child(self) -> None:
        self._init_state()  # the parent's traces and waiting items are the parent's

    def __len__(self) -> int:
        return len(self._items)

    def peek(self, trace_id: int) -> _TraceContext | None:
        return self._items.get(trace_id)

    def get_or_create(self, trace_id: int, evicted: list[JudgeItem]) -> _TraceContext:
        """Call with ``lock`` held; waiting items of an evicted trace are appended to ``evicted``."""
        items = self._items
        ctx = items.get(trace_id)
        if ctx is None:
            while len(items) >= self._max:
                _, old = items.popitem(last=False)
                evicted.extend(old.pending or ())
            ctx = items[trace_id] = _TraceContext()
        return ctx

    def pop(self, trace_id: int) -> _TraceContext | None:
        with self.lock:
            return self._items.pop(trace_id, None)


class Judge:
    """An LLM judge for sampled tool calls; build one from a ``JudgeConfig`` (the processor does).

    ``redact`` adds a str -> str function after the configured regexes; ``known_tools`` are the tool
    definitions to show the judge when a trace carries none (the processor passes the config's);
    ``transport`` replaces httpx's network transport (tests); ``clock`` is the budget's wall clock.
    """

    def __init__(
        self,
        config: JudgeConfig,
        *,
        tracer_provider: trace_api.TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: logs_api.LoggerProvider | None = None,
        redact: Callable[[str], str] | None = None,
        known_tools: Mapping[str, ToolDefinition] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        max_traces: int = MAX_TRACES,
    ) -> None:
        self.config = config
        self._key = providers.api_key(config)
        self._api = providers.make_api(config)
        self._transport = transport
        self._questions: tuple[QuestionConfig, ...] = tuple(config.questions)
        self._known_tools = dict(known_tools or {})  # the config's tools, for traces that carry none
        self._needs_request = config.needs("request")
        self._needs_free_text = any(q.when == "free_text" or "free_text_arguments" in q.fields for q in self._questions)
        self._redact = Redactor(config.redact, redact)
        self.ledger: Ledger = make_ledger(config.budget, clock)
        self.sampler = Sampler(config, self.ledger, clock)
        self._draw_seed = self.sampler.seed
        self._traces = _Traces(max_traces)
        self.worker: Worker[JudgeItem, httpx.AsyncClient] = Worker(
            self._judge,
            self._http,
            concurrency=config.concurrency,
            queue_size=config.queue_size,
            on_drop=self._dropped,
            tick=self._tick,
            interval=config.sampling.update_interval_seconds,
        )
        self.calibration = CalibrationWatch(config)
        self._fingerprints = fingerprints(config)
        labelling = config.labelling
        self._labelling = VerdictLog(labelling.file, labelling.max_items) if labelling is not None else None
        self._labelling_threshold = int(labelling.share * 2**64) if labelling is not None else 0
        self.telemetry = JudgeTelemetry(
            provider=config.provider,
            model=config.model,
            parent_to_judged_span=config.parent_to_judged_span,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            queue_size=lambda: self.worker.queued,
            sample_rate=lambda: self.sampler.rate,
            agreement=self.calibration.observations,
            max_traces=max_traces,
        )

    # --- application thread (``JudgeHook``) -----------------------------------------------------
    def offer(
        self,
        trace_id: int,
        record: ToolCallRecord,
        score: CallScore,
        tools: Mapping[str, ToolDefinition] | None,
        /,
    ) -> bool:
        """One scored call: sampled (and queued) or not. Cheap unless sampled; never blocks, takes no lock
        unless the trace has calls waiting or this one is sampled."""
        ctx = self._traces.peek(trace_id)
        if ctx is not None and ctx.pending:
            self._follow_up(trace_id, record, score)
        if not self.sampler.decide(trace_draw(trace_id, self._draw_seed), self.sampler.risk_class(score)):
            return False
        self.telemetry.opened(trace_id)  # before the worker can answer: its verdicts wait for the trace's source
        return self._accept(trace_id, record, score, tools, ctx)

    def observe_llm_span(self, trace_id: int, attrs: Mapping[str, Any], /) -> None:
        """An LLM span of the trace: the user's request (once per trace) and the reaction to pending failures."""
        config = self.config
        traces = self._traces
        ctx = traces.peek(trace_id)
        if self._needs_request and (ctx is None or ctx.request is None):
            # Kept redacted and cut: redaction first, so a cut through a secret cannot keep its start.
            request = user_request(attrs, config.max_request_chars + REDACT_LOOKAHEAD)
            if request is not None:
                request = self._redact.cut(request, config.max_request_chars) if request else request
                evicted: list[JudgeItem] = []
                with traces.lock:
                    ctx = traces.get_or_create(trace_id, evicted)
                    if ctx.request is None:
                        ctx.request = request
                self._submit_all(evicted)
        if ctx is not None and ctx.pending:
            reaction = model_reaction(attrs, config.max_field_chars + REDACT_LOOKAHEAD)
            if reaction is not None:
                if reaction.model_output:
                    reaction.model_output = self._redact.cut(reaction.model_output, config.max_field_chars)
                with traces.lock:
                    pending, ctx.pending = ctx.pending, None
                for item in pending or ():
                    item.reaction = _merged(item.reaction, reaction)
                    self.worker.submit(item)

    def trace_done(self, trace_id: int, source: Source = NO_SOURCE, /) -> None:
        """The processor let go of the trace (root ended, evicted, expired, shutdown): release waiting items; its
        verdicts count under its ``source`` (as its metrics were labelled)."""
        self.telemetry.trace_finished(trace_id, source)
        ctx = self._traces.pop(trace_id)
        if ctx is not None:
            self._submit_all(ctx.pending or ())

    def _submit_all(self, items: Any) -> None:
        for item in items:
            self.worker.submit(item)

    def _accept(
        self,
        trace_id: int,
        record: ToolCallRecord,
        score: CallScore,
        tools: Mapping[str, ToolDefinition] | None,
        ctx: _TraceContext | None,
    ) -> bool:
        tools = tools or self._known_tools  # the processor's snapshot: it never changes once handed over
        definition = tools.get(record.name)
        item = JudgeItem(
            record=record,
            score=score,
            questions=(),
            request=(ctx.request if ctx is not None else None) or None,
            tool_description=definition.description if definition is not None else None,
            available_tools=tuple(tools),
        )
        if self._needs_free_text and score.arguments is not None:
            item.free_text = free_text_arguments(score.arguments, self.config.min_free_text_chars)
        item.questions = tuple(q for q in self._questions if applies(q, item))
        if not item.questions:
            self.sampler.no_question()
            return False
        if any("reaction" in q.fields for q in item.questions):
            item.reaction = Reaction()
            traces = self._traces
            evicted: list[JudgeItem] = []
            with traces.lock:
                ctx = traces.get_or_create(trace_id, evicted)
                pending = ctx.pending
                if pending is None:
                    pending = ctx.pending = []
                queued = len(pending) < MAX_PENDING_PER_TRACE
                if queued:
                    pending.append(item)
            self._submit_all(evicted)
            if queued:
                return True
        return self.worker.submit(item)

    def _follow_up(self, trace_id: int, record: ToolCallRecord, score: CallScore) -> None:
        """A call after a failure is part of the reaction; ``MAX_LATER_CALLS`` of them complete it."""
        call = later_call(record, score)
        traces = self._traces
        with traces.lock:
            ctx = traces.peek(trace_id)
            pending = (ctx.pending if ctx is not None else None) or []
            for item in pending:
                if item.reaction is not None:
                    item.reaction.later_calls.append(call)
            done = [i for i in pending if i.reaction is not None and len(i.reaction.later_calls) >= MAX_LATER_CALLS]
            if ctx is not None:
                ctx.pending = [i for i in pending if i not in done] or None
        self._submit_all(done)

    # --- lifecycle -----------------------------------------------------------------------------
    def force_flush(self, timeout: Deadline | int = 30000, /) -> bool:
        """Wait for every queued call: until ``timeout`` (the processor's ``Deadline``, or milliseconds)."""
        deadline = timeout if isinstance(timeout, Deadline) else Deadline.after_millis(timeout)
        return self.worker.force_flush(deadline.remaining())

    def shutdown(self, timeout: Deadline | int | None = None, /) -> int:
        """Drain until ``timeout`` (a ``Deadline`` or milliseconds), and never longer than
        ``shutdown_timeout_seconds``; returns the calls dropped."""
        limit = self.config.shutdown_timeout_seconds
        if timeout is None:
            seconds = limit
        elif isinstance(timeout, Deadline):
            seconds = min(limit, timeout.remaining())
        else:
            seconds = min(limit, max(0, timeout) / 1000)
        dropped = self.worker.shutdown(seconds)
        self.telemetry.let_go_of_open()  # verdicts of traces never finished here: counted without a source, not lost
        return dropped

    def _tick(self) -> None:
        self.sampler.update()

    def _dropped(self, reason: str, count: int) -> None:
        self.telemetry.dropped(reason, count)

    # --- offline runs (``offline.judge_run``): the same requests, budget and parsing, on the caller's loop ------
    @property
    def redactor(self) -> Redactor:
        return self._redact

    def client(self) -> contextlib.AbstractAsyncContextManager[httpx.AsyncClient]:
        """The HTTP client the worker uses (one per event loop)."""
        return self._http()

    async def ask(self, question: QuestionConfig, item: JudgeItem, client: httpx.AsyncClient) -> Verdict:
        """One question about one call: budget reserved and settled, retried, parsed; raises ``BudgetExhausted``."""
        return await self._ask(question, item, client)

    # --- worker thread -------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _http(self) -> AsyncIterator[httpx.AsyncClient]:
        async with providers.new_client(self.config, self._key, self._transport) as client:
            yield client

    async def _judge(self, item: JudgeItem, client: httpx.AsyncClient) -> None:
        trace_id, span_id = int(item.record.trace_id, 16), int(item.record.span_id, 16)
        tokens_in = tokens_out = 0
        for question in item.questions:
            reason = missing(question, item)
            if reason is not None:
                self.telemetry.skipped(question.name, reason)
                continue
            try:
                verdict = await self._ask(question, item, client)
            except BudgetExhausted:
                self.telemetry.dropped("budget", 1)
                break
            tokens_in += verdict.paced_input_tokens
            tokens_out += verdict.paced_output_tokens
            self.telemetry.emit(verdict, trace_id, span_id)
            if self._labelling is not None and verdict.label is not None:
                self._keep_for_labelling(verdict, item, trace_id, span_id)
        self.sampler.record_eval(tokens_in, tokens_out)

    def _keep_for_labelling(self, verdict: Verdict, item: JudgeItem, trace_id: int, span_id: int) -> None:
        """``judge.labelling``: a deterministic share of calls (by trace and span id) goes to the verdicts file."""
        log, threshold = self._labelling, self._labelling_threshold
        if log is None or trace_draw(trace_id ^ span_id, self._draw_seed) >= threshold:
            return
        log.append(
            {
                "item": f"{trace_id:032x}:{span_id:016x}",
                "case": None,
                "call": None,
                "tool": item.record.name,
                "flagged": self.sampler.risk_class(item.score) != 0,
                "question": verdict.question,
                "fingerprint": self._fingerprints.get(verdict.question, ""),
                "label": verdict.label,
                "score": verdict.score,
                "explanation": verdict.explanation,
                "error": None,
                "model": verdict.model,
                "cost": verdict.cost,
                "cached": False,
                "data": verdict.data or {},
                "tool_call": call_view(item, self._redact, self.config.max_field_chars),
            }
        )

    async def _ask(self, question: QuestionConfig, item: JudgeItem, client: httpx.AsyncClient) -> Verdict:
        config = self.config
        data = question_data(question, item, self._redact, config.max_field_chars)
        prompt = build_prompt(question, data)
        worst = config.price.cost(prompt.size_bytes + PROMPT_OVERHEAD_TOKENS, config.max_output_tokens)
        verdict = Verdict(question=question.name, start_ns=time.time_ns(), data=data)
        completion: providers.Completion | None = None
        try:
            async for attempt in providers.retrying(config):
                with attempt:
                    reservation = self.ledger.reserve(worst)
                    if reservation is None:
                        raise BudgetExhausted
                    try:
                        completion = await providers.send(
                            client,
                            self._api,
                            question,
                            prompt,
                            max_bytes=config.max_response_bytes,
                            deadline=config.request_timeout_seconds,
                        )
                    except providers.JudgeCallError as exc:
                        self.ledger.settle(reservation, worst if exc.billed else 0.0)
                        verdict.cost += worst if exc.billed else 0.0
                        raise
                    tokens_in = completion.input_tokens
                    tokens_out = completion.output_tokens
                    # Without reported usage, charge the worst case: spend must never be undercounted.
                    cost = (
                        worst if tokens_in is None or tokens_out is None else config.price.cost(tokens_in, tokens_out)
                    )
                    over = self.ledger.settle(reservation, cost)
                    if over > 0:
                        self.telemetry.over_reported(question.name, over)
                    verdict.cost += cost
                    verdict.input_tokens += tokens_in or 0
                    verdict.output_tokens += tokens_out or 0
                    # The pacing learns a call's cost within its worst case: one absurd usage report must not
                    # starve (or, reported as zero, flood) the sampling of the periods after it.
                    verdict.paced_input_tokens = min(tokens_in or 0, prompt.size_bytes + PROMPT_OVERHEAD_TOKENS)
                    verdict.paced_output_tokens = min(tokens_out or 0, config.max_output_tokens)
        except providers.JudgeCallError as exc:
            verdict.error, verdict.error_message = exc.kind, str(exc)
        verdict.end_ns = time.time_ns()
        if completion is not None:
            verdict.model = completion.model
            try:
                answer = parse_answer(question, completion.text, completion.structured)
            except AnswerError as exc:
                verdict.error, verdict.error_message = exc.kind, str(exc)
            else:
                verdict.label = answer.label
                verdict.score = score_of(question, answer.label)
                verdict.explanation = self._redact(answer.explanation)
        return verdict


def _merged(reaction: Reaction | None, model: Reaction) -> Reaction:
    if reaction is None:
        return model
    reaction.model_output = model.model_output
    reaction.requested_calls = model.requested_calls
    reaction.model_seen = True
    return reaction
