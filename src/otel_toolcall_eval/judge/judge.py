"""``Judge``: what the processor calls. Samples on the application thread, judges on the worker's.

The processor calls ``offer`` for every scored tool call, ``observe_llm_span`` for every LLM span (the user's
request; the reaction to a failed call), ``trace_done`` when a trace's state goes, and ``force_flush`` /
``shutdown`` with its own. A sampled call whose questions need the reaction to a failure waits in the trace's
state until the next LLM span (or the end of the trace), then joins the queue.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final

import httpx
from opentelemetry import _logs as logs_api
from opentelemetry import trace as trace_api
from opentelemetry.metrics import MeterProvider

from otel_toolcall_eval.config.judge import JudgeConfig, QuestionConfig
from otel_toolcall_eval.judge import providers
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
from otel_toolcall_eval.judge.ledger import Ledger
from otel_toolcall_eval.judge.questions import (
    REDACT_LOOKAHEAD,
    AnswerError,
    Redactor,
    applies,
    build_prompt,
    missing,
    parse_answer,
    question_data,
    score_of,
)
from otel_toolcall_eval.judge.sampler import Sampler, trace_draw
from otel_toolcall_eval.judge.worker import Worker
from otel_toolcall_eval.records import CallScore, ToolCallRecord, ToolDefinition

MAX_PENDING_PER_TRACE: Final = 8
PROMPT_OVERHEAD_TOKENS: Final = 512  # chat template, tool schema (Anthropic) and message framing


class BudgetExhausted(Exception):
    """The period's ceiling leaves no room for this call's worst case."""


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
        self.ledger = Ledger(config.budget, clock)
        self.sampler = Sampler(config, self.ledger, clock)
        self._draw_seed = self.sampler.seed
        self.worker: Worker[JudgeItem, httpx.AsyncClient] = Worker(
            self._judge,
            self._http,
            concurrency=config.concurrency,
            queue_size=config.queue_size,
            on_drop=self._dropped,
            tick=self._tick,
            interval=config.sampling.update_interval_seconds,
        )
        self.telemetry = JudgeTelemetry(
            provider=config.provider,
            model=config.model,
            parent_to_judged_span=config.parent_to_judged_span,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            queue_size=lambda: self.worker.queued,
            sample_rate=lambda: self.sampler.rate,
        )

    # --- application thread --------------------------------------------------------------------
    def offer(self, record: ToolCallRecord, score: CallScore, state: Any) -> bool:
        """One scored call: sampled (and queued) or not. Cheap unless sampled; never blocks."""
        if state.judge_pending:
            self._follow_up(record, score, state)
        draw = state.judge_draw
        if draw < 0:
            draw = trace_draw(int(record.trace_id or "0", 16), self._draw_seed)
            state.judge_draw = draw
        if not self.sampler.decide(draw, self.sampler.risk_class(score)):
            return False
        return self._accept(record, score, state)

    def observe_llm_span(self, attrs: Mapping[str, Any], state: Any) -> None:
        """An LLM span of the trace: the user's request (once per trace) and the reaction to pending failures."""
        config = self.config
        if self._needs_request and state.judge_request is None:
            # Kept redacted and cut: redaction first, so a cut through a secret cannot keep its start.
            request = user_request(attrs, config.max_request_chars + REDACT_LOOKAHEAD)
            state.judge_request = self._redact.cut(request, config.max_request_chars) if request else request
        if state.judge_pending:
            reaction = model_reaction(attrs, config.max_field_chars + REDACT_LOOKAHEAD)
            if reaction is not None:
                if reaction.model_output:
                    reaction.model_output = self._redact.cut(reaction.model_output, config.max_field_chars)
                with state.lock:
                    pending, state.judge_pending = state.judge_pending, None
                for item in pending or ():
                    item.reaction = _merged(item.reaction, reaction)
                    self.worker.submit(item)

    def trace_done(self, state: Any) -> None:
        """The trace's state is going (root ended, evicted, expired, shutdown): release waiting items."""
        if state.judge_pending:
            with state.lock:
                pending, state.judge_pending = state.judge_pending, None
            for item in pending or ():
                self.worker.submit(item)

    def _accept(self, record: ToolCallRecord, score: CallScore, state: Any) -> bool:
        with state.lock:  # the processor adds tool definitions under this lock
            tools = state.tools or self._known_tools
            definition = tools.get(record.name)
            available = tuple(tools)
        item = JudgeItem(
            record=record,
            score=score,
            questions=(),
            request=state.judge_request or None,
            tool_description=definition.description if definition is not None else None,
            available_tools=available,
        )
        if self._needs_free_text and score.arguments is not None:
            item.free_text = free_text_arguments(score.arguments, self.config.min_free_text_chars)
        item.questions = tuple(q for q in self._questions if applies(q, item))
        if not item.questions:
            self.sampler.no_question()
            return False
        if any("reaction" in q.fields for q in item.questions):
            item.reaction = Reaction()
            with state.lock:
                pending = state.judge_pending
                if pending is None:
                    pending = state.judge_pending = []
                if len(pending) < MAX_PENDING_PER_TRACE:
                    pending.append(item)
                    return True
        return self.worker.submit(item)

    def _follow_up(self, record: ToolCallRecord, score: CallScore, state: Any) -> None:
        """A call after a failure is part of the reaction; ``MAX_LATER_CALLS`` of them complete it."""
        call = later_call(record, score)
        with state.lock:
            pending = state.judge_pending or []
            for item in pending:
                if item.reaction is not None:
                    item.reaction.later_calls.append(call)
            done = [i for i in pending if i.reaction is not None and len(i.reaction.later_calls) >= MAX_LATER_CALLS]
            state.judge_pending = [i for i in pending if i not in done] or None
        for item in done:
            self.worker.submit(item)

    # --- lifecycle -----------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.worker.force_flush(timeout_millis / 1000)

    def shutdown(self, timeout_millis: int | None = None) -> int:
        """Drain within the timeout (default ``shutdown_timeout_seconds``); returns the calls dropped."""
        timeout = self.config.shutdown_timeout_seconds if timeout_millis is None else timeout_millis / 1000
        return self.worker.shutdown(timeout)

    def _tick(self) -> None:
        self.sampler.update()

    def _dropped(self, reason: str, count: int) -> None:
        self.telemetry.dropped(reason, count)

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
        self.sampler.record_eval(tokens_in, tokens_out)

    async def _ask(self, question: QuestionConfig, item: JudgeItem, client: httpx.AsyncClient) -> Verdict:
        config = self.config
        prompt = build_prompt(question, question_data(question, item, self._redact, config.max_field_chars))
        worst = config.price.cost(prompt.size_bytes + PROMPT_OVERHEAD_TOKENS, config.max_output_tokens)
        verdict = Verdict(question=question.name, start_ns=time.time_ns())
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
