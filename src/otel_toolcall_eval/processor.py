"""``ToolCallEvalProcessor``: the online adapter around the pure checks.

It wraps the processor that exports and forwards every span to it: non-tool spans untouched (the same
object), tool spans and trace roots as an enriched copy carrying the scores. Nothing raises into the
application: a failed evaluation is counted, logged (rate-limited) and the span is forwarded unscored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, TracerProvider

from otel_toolcall_eval import _sdk
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._deadline import Deadline
from otel_toolcall_eval._ticker import Ticker
from otel_toolcall_eval.checks.cost import tool_latency
from otel_toolcall_eval.checks.same_call import same_call_key, wraps_same_call
from otel_toolcall_eval.checks.verdict import trace_verdict
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.config.serve import MAX_ROOT_GRACE_SECONDS, REMOTE_PARENTS
from otel_toolcall_eval.conventions import ConventionRegistry, default_registry
from otel_toolcall_eval.conventions.builtin import LATE_REQUEST_CONVENTIONS
from otel_toolcall_eval.conventions.llm_spans import (
    LLM_KEYS,
    DefinitionCache,
    is_llm_span,
    requested_calls,
    tool_definitions,
    unknown_tool_replies,
)
from otel_toolcall_eval.engine import Scorer, call_digest_of
from otel_toolcall_eval.judge.hook import JudgeHook
from otel_toolcall_eval.online.background import BackgroundQueue
from otel_toolcall_eval.online.enrich import EnrichedSpan, call_attributes, verdict_attributes
from otel_toolcall_eval.online.held_spans import FLUSH, SHUTDOWN, HeldSpans, Slot
from otel_toolcall_eval.online.metrics import EvalMetrics
from otel_toolcall_eval.online.prevented import Prevented, stopped_call
from otel_toolcall_eval.online.sessions import SessionRollup, conversation_id, turn_summary
from otel_toolcall_eval.online.trace_state import ScoredChild, TraceState, TraceStore, new_scored_child
from otel_toolcall_eval.online.trace_stats import (
    Decisions,
    Fingerprints,
    ToolListChanges,
    new_trace_stats,
    root_attributes,
    tool_list_source,
)
from otel_toolcall_eval.records import CallScore, Outcome, ToolCallRecord, TraceVerdict

logger = logging.getLogger("otel_toolcall_eval")

_NOT_TURNS = frozenset({"invoke_agent", "create_agent"})


def timer_period(idle_seconds: float | None, hold_seconds: float | None, grace_seconds: float | None = None) -> float:
    """How often the timer wakes: a quarter of the idle time (sessions), of the hold time (held failed spans) and
    of the root grace window, the shortest, but at least every 60 s and at most every second. An idle session is
    emitted between ``session_idle_seconds`` and that plus the period after its last turn; a held span goes at most
    a period after ``max_hold_seconds``, a held root a period after its window (sooner with traffic: every new
    trace ends the windows that are over)."""
    quarters = [t / 4 for t in (idle_seconds, hold_seconds, grace_seconds) if t is not None]
    return min(max(min(quarters, default=60.0), 1.0), 60.0)


class _RateLimitedLog:
    """Log each kind of failure at most once per interval, so a broken span shape cannot flood the logs."""

    def __init__(self, interval: float = 60.0) -> None:
        self._interval = interval
        self._last: dict[str, float] = {}

    def error(self, key: str, msg: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last.get(key, -self._interval) >= self._interval:
            self._last[key] = now
            logger.warning(msg, *args, exc_info=True)


class _FanOut:
    """The downstream processors, each call contained: one failing processor does not stop the others (what the
    SDK's ``SynchronousMultiSpanProcessor`` does for a provider's processors). Hooks a processor inherits as the
    SDK's no-ops are not called (the hot path)."""

    __slots__ = ("_log", "on_ending_to", "on_start_to", "processors")

    def __init__(self, processors: tuple[SpanProcessor, ...], log: _RateLimitedLog) -> None:
        self.processors = processors
        self._log = log
        self.on_start_to = tuple(p for p in processors if _sdk.wants_on_start(p))
        self.on_ending_to = tuple(p for p in processors if _sdk.wants_on_ending(p))

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        for p in self.on_start_to:
            try:
                p.on_start(span, parent_context=parent_context)
            except Exception:  # noqa: BLE001
                self._log.error("downstream.on_start", "downstream on_start failed")

    def on_ending(self, span: Span) -> None:
        for p in self.on_ending_to:
            try:
                _sdk.on_ending(p, span)
            except Exception:  # noqa: BLE001
                self._log.error("downstream._on_ending", "downstream _on_ending failed")

    def on_end(self, span: ReadableSpan) -> None:
        for p in self.processors:
            try:
                p.on_end(span)
            except Exception:  # noqa: BLE001
                self._log.error("downstream.on_end", "downstream on_end failed")

    def force_flush(self, deadline: Deadline) -> bool:
        ok = True
        for p in self.processors:
            try:
                ok = bool(p.force_flush(deadline.remaining_millis())) and ok
            except Exception:  # noqa: BLE001
                self._log.error("downstream.force_flush", "downstream force_flush failed")
                ok = False
        return ok

    def shutdown(self) -> None:
        """The SDK's ``SpanProcessor.shutdown()`` takes no timeout: each processor bounds its own."""
        for p in self.processors:
            try:
                p.shutdown()
            except Exception:  # noqa: BLE001
                self._log.error("downstream.shutdown", "downstream shutdown failed")


def _only_request_of(names: dict[str, str], requested: dict[str, Any], name: str) -> Any:
    """The arguments of the one requested call of ``name`` not yet claimed (popped), or None when there are none or
    several (which of them ran is then unknown: nothing is borrowed)."""
    found = None
    for call_id, requested_name in names.items():
        if requested_name == name and call_id in requested:
            if found is not None:
                return None
            found = call_id
    return None if found is None else requested.pop(found)


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
        self.config = config or EvalConfig()
        self.conventions = conventions or default_registry()
        self.metrics = EvalMetrics(meter_provider)
        limits = self.config.limits
        if judge is None and self.config.judge is not None:
            from otel_toolcall_eval.judge import Judge

            judge = Judge(
                self.config.judge,
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                logger_provider=logger_provider,
                known_tools=self.config.tool_definitions(),
                max_traces=limits.max_traces,
            )
        self.judge: JudgeHook | None = None if judge is None or isinstance(judge, bool) else judge
        self._scorer = Scorer(self.config.policy(), key_failed_first_calls=True)  # trace_stats digests failed calls
        self._definitions = DefinitionCache(max_bytes=limits.max_cache_bytes)
        self._max_calls = limits.max_calls_per_trace
        # "segment": a span with a remote parent is part of a trace whose root is in another service (``serve``
        # receiving both): it finishes nothing; the true root does, else the TTL (``finalized_by="segment"``)
        self._segments = remote_parents == "segment"
        self._config_tools = self.config.tool_definitions()
        # the root grace window (0: off; then the root's path pays one attribute test)
        self._grace = float(root_grace_seconds)
        self._store = TraceStore(
            limits.max_traces,
            limits.trace_ttl_seconds,
            self._on_drop,
            max_finished_bytes=limits.max_cache_bytes,
            grace_seconds=self._grace,
        )
        self._log = _RateLimitedLog()
        # cost, latency, recovery and the tool list (issue 18)
        self._prices = self.config.pricing.table()
        self._currency = self.config.pricing.currency if self._prices else None
        self._tool_lists = ToolListChanges()
        self._fingerprints = Fingerprints(limits.max_cache_bytes)
        self._histograms = self.config.metrics.histograms
        self._shutdown = False
        self._downstream = _FanOut(processors, self._log)
        self._forward = self._downstream.on_end
        self._only_on_end = processors[0].on_end if len(processors) == 1 else None
        # The SDK calls these two hooks for every span: bound straight to the fan-out (no frame of ours between),
        # or, when no downstream processor overrides the SDK's no-op (a BatchSpanProcessor), to that no-op itself
        # (what the SDK calls without the processor; the fan-out's empty loop is a frame and an iteration more)
        fan, first = self._downstream, processors[0]
        self.on_start = fan.on_start if fan.on_start_to else first.on_start  # type: ignore[method-assign]
        self._on_ending = fan.on_ending if fan.on_ending_to else _sdk.own_on_ending(first)  # type: ignore[method-assign,assignment]
        self._gate_of: frozenset[str] | None = None
        self._gate: frozenset[str] | None = None  # the keys that make a span worth a look (session keys included)
        self._work_gate: frozenset[str] | None = None  # the keys a convention or an LLM check reads
        # sessions: a plain span carrying a conversation id is evaluated only while its trace has none noted yet
        sessions = self.config.sessions
        self._session_keys: tuple[str, ...] = tuple(sessions.attributes) if sessions.enabled else ()
        self._session_gate: frozenset[str] | None = frozenset(self._session_keys) or None
        # trace ids whose conversation id is noted, oldest first, at most ``limits.max_traces`` (no lock: a fork
        # cannot leave one held; a trim that races with an insertion just stops early)
        self._conversation_known: dict[int, None] = {}
        self._sessions: SessionRollup | None = None
        self._ticker: Ticker | None = None
        if sessions.enabled:
            self._sessions = SessionRollup(
                step_budget=sessions.step_budget,
                max_sessions=limits.max_sessions,
                idle_seconds=limits.session_idle_seconds,
                meter_provider=meter_provider,
                logger_provider=logger_provider,
                on_error=self._judge_failed,
            )
        # failed tool spans held until their recovery class is known (issue 18; limits.max_held_spans 0: none)
        self._held: HeldSpans | None = None
        if limits.max_held_spans:
            self._held = HeldSpans(
                max_spans=limits.max_held_spans,
                max_per_trace=limits.max_held_spans_per_trace,
                max_seconds=limits.max_hold_seconds,
                forward=self._forward,
                on_unclassified=self.metrics.record_unclassified,
            )
        if self._sessions is not None or self._held is not None or self._grace:  # the thread starts on first use
            self._ticker = Ticker(
                timer_period(
                    limits.session_idle_seconds if self._sessions is not None else None,
                    limits.max_hold_seconds if self._held is not None else None,
                    self._grace or None,
                ),
                self._tick,
            )
        evaluation = self.config.evaluation
        self._background: BackgroundQueue | None = None
        if evaluation.mode == "background" or (
            evaluation.mode == "auto" and all(isinstance(p, BatchSpanProcessor) for p in processors)
        ):
            self._background = BackgroundQueue(
                self._evaluate_and_forward,
                max_size=evaluation.max_queue_size,
                max_delay_seconds=evaluation.max_delay_millis / 1000,
                on_wait=self.metrics.record_queue_wait,
            )
            self.metrics.watch_queue(self._background)

    # --- SpanProcessor -------------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._downstream.on_start(span, parent_context)  # replaced per instance in ``__init__``

    def _on_ending(self, span: Span) -> None:
        self._downstream.on_ending(span)  # replaced per instance in ``__init__``

    def on_end(self, span: ReadableSpan) -> None:
        try:
            keys = self.conventions.detect_keys  # may change when conventions are registered later
            if keys is not self._gate_of:
                work = None if keys is None else keys | LLM_KEYS
                sessions = self._session_gate
                self._gate_of, self._work_gate = keys, work
                self._gate = work if work is None or sessions is None else work | sessions
            plain = _sdk.is_plain_child(span, self._gate)  # None: a root or a remote parent, never a noted one
            if plain or (plain is not None and self._conversation_noted(span)):
                # neither a tool nor an LLM span, nor a root, nor the first conversation id of its trace: as is
                only = self._only_on_end
                if only is None:
                    self._forward(span)
                    return
                try:  # one downstream processor (the usual case): called directly, one frame fewer per span
                    only(span)
                except Exception:  # noqa: BLE001
                    self._log.error("downstream.on_end", "downstream on_end failed")
                return
            background = self._background
            if background is not None and background.submit(span):
                return  # the worker scores and forwards it
        except Exception:  # noqa: BLE001 - never raise into the code that ended the span
            pass
        self._evaluate_and_forward(span)

    def _evaluate_and_forward(self, span: ReadableSpan) -> None:
        """Score ``span`` and forward the result (None: held until its recovery class is known, forwarded
        then); on any failure forward it unscored (never raises)."""
        out: ReadableSpan | None = span
        try:
            out = self._evaluate(span)
        except Exception as exc:  # noqa: BLE001 - never raise into the code that ended the span
            self.metrics.record_error("evaluate")
            self._log.error(
                "evaluate", "toolcall-eval: evaluating span %r failed; forwarded unscored", _safe_name(span)
            )
            try:
                out = EnrichedSpan(span, {A.EVAL_ERROR: type(exc).__name__})
            except Exception:  # noqa: BLE001
                out = span
        if out is None:
            return
        only = self._only_on_end
        if only is None:
            self._forward(out)
            return
        try:  # one downstream processor (the usual case): called directly, one frame fewer per span
            only(out)
        except Exception:  # noqa: BLE001
            self._log.error("downstream.on_end", "downstream on_end failed")

    def shutdown(self, timeout_millis: float = 30000) -> None:
        """Score and forward what is queued, let the judge drain, then shut the downstream processors down:
        the queue and the judge share one deadline, ``timeout_millis`` from now. A span that ends meanwhile is
        scored inline and forwarded."""
        if self._shutdown:
            return
        self._shutdown = True
        deadline = Deadline.after_millis(timeout_millis)
        background = self._background
        if background is not None:  # score and forward what is queued before the state is drained
            self._safe(lambda: background.shutdown(deadline.remaining()), "background.shutdown")
        judge = self.judge
        ticker = self._ticker
        if ticker is not None:
            self._safe(lambda: ticker.stop(deadline.remaining()), "timer.stop")
        for trace_id, state in self._store.drain():
            if state.root is not None:  # a held root: out now, with its verdict
                self._release_root(trace_id, state)
                continue
            if judge is not None:
                self._safe(lambda t=trace_id: judge.trace_done(t), "judge.trace_done")
            self._record_unfinished(trace_id, state, "shutdown")  # their held failed spans go, classified
        held = self._held
        if held is not None:  # what is left (a slot of a span still being scored): out without a class
            self._safe(lambda: held.release_all(SHUTDOWN), "held.shutdown")
        sessions = self._sessions
        if sessions is not None:  # after the unfinished traces joined their sessions
            self._safe(lambda: sessions.finish_all("shutdown"), "sessions.shutdown")
        if judge is not None:
            self._safe(lambda: judge.shutdown(deadline), "judge.shutdown")
        self._downstream.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Score and forward what is queued, wait for the judge, then flush the downstream processors: all
        within one deadline, ``timeout_millis`` from now."""
        deadline = Deadline.after_millis(timeout_millis)
        ok = True
        background = self._background
        if background is not None:  # spans queued before the flush reach the downstream before it flushes
            ok = bool(self._safe(lambda: background.flush(deadline.remaining()), "background.flush"))
        self._store.expire()
        if self._grace:  # held roots go now, with their verdicts (whose end decides their failed calls' classes)
            self._safe(self._store.release_held, "store.release_held")
        held = self._held
        if held is not None:  # the exporter must get every span: held ones go, without a class still undecided
            self._safe(lambda: held.release_all(FLUSH), "held.flush")
        sessions = self._sessions
        if sessions is not None:  # what is open is emitted now (a flush may be the last chance: serverless, exit)
            self._safe(lambda: sessions.finish_all("flush"), "sessions.flush")
        judge = self.judge
        if judge is not None:
            ok = bool(self._safe(lambda: judge.force_flush(deadline), "judge.force_flush")) and ok
        return self._downstream.force_flush(deadline) and ok

    # --- evaluation ----------------------------------------------------------------------------
    def _evaluate(self, span: ReadableSpan) -> ReadableSpan | None:
        ctx, parent = _sdk.span_ids(span)
        if ctx is None:
            return span
        trace_id = _sdk.trace_id_of(ctx)
        remote = parent is not None and _sdk.is_remote(parent)
        gate = self._gate
        if (
            (parent is None or remote)  # only these pass ``on_end``'s gate without a key a check reads
            and gate is not None
            and not _sdk.carries_any(span, gate)
            and not self._store.knows(trace_id)
        ):
            # a root (or a remote-parented span) that no check reads, of a trace nothing here has seen: plain
            # traffic's roots, which the gate cannot tell from an agent's until the trace's state is looked up
            return span
        # One C-level copy read by every step (recognise, extract, the LLM checks, the enriched copy) instead of
        # one per step: the SDK's proxy copies, iterates and looks up keys in Python.
        attrs = _sdk.attributes_dict(span)
        if attrs is None:
            return span
        is_root = parent is None or (remote and not self._segments)
        session_gate = self._session_gate  # the set test in C first: most spans carry no conversation id
        if session_gate is not None and not session_gate.isdisjoint(attrs) and trace_id not in self._conversation_known:
            self._note_conversation(trace_id, attrs)
        convention = self.conventions.recognise(span, attrs)
        record = convention.extract(span, attrs) if convention is not None else None
        if record is None:
            if is_llm_span(attrs):
                self._observe_llm_span(trace_id, attrs, is_root)
            elif A.GUARD_PREVENTED in attrs:  # the guard's span of a call it stopped (issue 31)
                self._note_prevented(trace_id, parent, attrs)
            if is_root:
                return self._finish_trace(trace_id, span, {}, attrs)
            if remote and self._segments:
                self._note_segment(trace_id)
            return span

        span_id = _sdk.span_id_of(ctx)
        state = self._store.get(trace_id)
        assert state is not None
        if state.prevented is not None and self._claim_prevented(state, span_id, record.call_id):
            stopped = {A.CONVENTION: record.convention, A.GUARD_PREVENTED: True}  # a call that never ran: no scores
            return self._finish_trace(trace_id, span, stopped, attrs) if is_root else EnrichedSpan(span, stopped, attrs)
        decided: Decisions | None = None
        slot: Slot | None = None
        with state.lock:
            after_verdict = state.finished  # its verdict is written: scored per call, counted late (under the lock)
            if remote:
                state.segment = True
            children = state.tool_children
            inner = children.pop(span_id, None) if children else None
            if inner is not None and not wraps_same_call(
                record.name, record.raw_arguments, inner.name, inner.arguments_key()
            ):
                inner = None
            if inner is not None:
                score = None  # a second instrumentation of the call its child span already carries the scores of
                if parent is not None:  # a third layer around is the same call too (FastMCP)
                    state.note_tool_child(_sdk.span_id_of(parent), inner, self._max_calls)
            elif (
                remote
                and state.client_spans
                and (inner := _scored_client(state.client_spans, parent, record)) is not None
            ):
                score = None  # the client's span of this call came first (the agent's export) and carries its scores
            else:
                requested = state.call_arguments
                if requested:
                    # the arguments the model sent for this call id: the evidence when the tool span records none;
                    # claimed either way (kept, they would stay for the trace's life: ~700 bytes a trace)
                    sent = requested.pop(record.call_id, None) if record.call_id is not None else None
                    if sent is None and record.raw_arguments is None:
                        # no id the requests named (none recorded, or a server's own JSON-RPC id): the one pending
                        # request of this tool's name, when there is exactly one
                        sent = _only_request_of(state.call_names, requested, record.name)
                    if record.raw_arguments is None:
                        record.raw_arguments = sent
                    if not requested:
                        state.call_arguments = None
                late = record.convention in LATE_REQUEST_CONVENTIONS
                batch = state.batch_for(record.call_id, record.name, self._max_calls, late, remote)
                score = self._scorer.score(record, state.history, trace_tools=state.tools, batch=batch)
                if score.tool_known is None and state.tools is None:
                    state.note_unlisted(record.name, self._max_calls)
                if parent is not None:
                    known_key = score.arguments_key  # normalised already when the tool was called before
                    if known_key is not None:
                        child = new_scored_child(record.name, span_id, None, None, same_call_key(known_key))
                    elif score.arguments is not None:
                        child = new_scored_child(record.name, span_id, score.arguments, None, None)
                    else:
                        child = new_scored_child(record.name, span_id, None, score.raw_arguments, None)
                    state.note_tool_child(_sdk.span_id_of(parent), child, self._max_calls)
                    if self._segments and span.kind is SpanKind.CLIENT:  # its server's span may come later
                        state.note_client_span(span_id, child, self._max_calls)
                seconds = tool_latency(record.start_ns, record.end_ns)
                stats = state.stats
                if stats is None:
                    stats = state.stats = new_trace_stats()
                decided = stats.on_call(score, seconds, self._max_calls)
                if score.outcome is not Outcome.SUCCESS:
                    if self._session_keys:  # for failures repeated across turns (the recovery check's digest, kept)
                        state.note_failed_call(call_digest_of(score))
                    held = self._held
                    # held until its recovery class is known: reserved now, before a later step can decide it
                    if (
                        held is not None
                        and not is_root
                        and stats.waits_for(score.step)
                        and self._store.is_live(trace_id)  # a span after its root: nothing is left to decide it
                    ):
                        slot = held.reserve(trace_id, score.step)
            tools = state.tools
        if decided:  # earlier failed calls this call reacted to: their held spans go first, with their class
            self._decide(trace_id, decided)
        if score is None:
            assert inner is not None
            same: dict[str, Any] = {A.CONVENTION: record.convention, A.SAME_CALL_AS: f"{inner.span_id:016x}"}
            if after_verdict:
                self.metrics.record_late()
                same[A.LATE] = True
            return self._finish_trace(trace_id, span, same, attrs) if is_root else EnrichedSpan(span, same, attrs)
        self.metrics.record_call(score, record.convention, record.result_recorded)
        scope = span.instrumentation_scope  # the self-check of the scope's shape (toolcall_eval.coverage.suspect)
        self.metrics.record_scope(score, record.convention, scope.name if scope is not None else "-")
        if seconds is not None and self._histograms:
            self.metrics.record_tool_latency(score, seconds)
        extra = call_attributes(score, record.convention)
        if after_verdict:
            self.metrics.record_late()
            extra[A.LATE] = True
        if self.judge is not None:
            extra[A.JUDGE_SAMPLED] = self._offer(trace_id, record, score, tools)
        if is_root:
            failed_step = score.step if score.outcome is not Outcome.SUCCESS else None
            return self._finish_trace(trace_id, span, extra, attrs, failed_step)
        if slot is not None:
            self._hold(slot, span, extra, attrs)
            return None
        return EnrichedSpan(span, extra, attrs)

    def _note_prevented(self, trace_id: int, parent: Any, attrs: dict[str, Any]) -> None:
        """The guard stopped a call (``online.prevented``): remembered for the trace's verdict, and so that a
        framework's own span of that call, ending after the guard's span inside it, is not scored as a call."""
        found = stopped_call(attrs)
        state = self._store.get(trace_id) if found is not None else None
        if state is None or found is None:
            return
        with state.lock:
            if state.prevented is None:
                state.prevented = Prevented()
            state.prevented.note(found[0], None if parent is None else _sdk.span_id_of(parent), found[1],
                                 self._max_calls)  # fmt: skip

    def _claim_prevented(self, state: TraceState, span_id: int, call_id: str | None) -> bool:
        with state.lock:
            return state.prevented is not None and state.prevented.claims(span_id, call_id)

    def _note_segment(self, trace_id: int) -> None:
        """A remote-parented span that is neither a tool nor an LLM span (the local root of a service's part, say
        an MCP server's request span): its trace, if it has tool activity here, waits for the true root. A trace
        without state here gets none (plain remote-parented traffic costs no memory)."""
        state = self._store.get(trace_id, create=False)
        if state is not None:
            with state.lock:
                state.segment = True

    def _hold(self, slot: Slot, span: ReadableSpan, extra: dict[str, Any], attrs: dict[str, Any]) -> None:
        held = self._held
        assert held is not None
        timed = self._start_timer()  # the max hold time holds when no span comes to trigger it: the timer expires
        # the span is the held table's from here: nothing may raise past this (it would be forwarded twice)
        held.fill(slot, span, extra, attrs, not timed)  # never raises; forwards it now if it was decided meanwhile

    def _start_timer(self) -> bool:
        """Start (or wake) the timer; never raises. False when there is none or it cannot start (the interpreter is
        exiting: counted), so what it would release waits for the next span, a flush or shutdown."""
        ticker = self._ticker
        if ticker is None:
            return False
        try:
            ticker.ensure_started()
        except Exception:  # noqa: BLE001
            self._judge_failed("timer.start")
            return False
        return True

    def _decide(self, trace_id: int, decided: Decisions) -> None:
        held = self._held
        if held is None:
            return
        try:
            held.decide(trace_id, decided)
        except Exception:  # noqa: BLE001
            self._judge_failed("held.decide")

    def _tick(self) -> bool:
        """The timer (``_ticker``): traces past their TTL (a root that never ends), held spans past their time and
        idle sessions go without waiting for a span. Expiry first: an expired trace's held spans leave classified
        and its turn joins its session before the session's idleness is judged. False when nothing is left to
        watch (no trace in flight, nothing held, no open session): the timer then parks until the next held span
        or session turn."""
        store = self._store
        self._safe(store.expire, "store.expire")
        held = self._held
        if held is not None:
            self._safe(held.expire, "held.expire")
        sessions = self._sessions
        if sessions is not None:
            self._safe(sessions.expire, "sessions.expire")
        return bool(len(store) or (held is not None and len(held)) or (sessions is not None and len(sessions)))

    def _observe_llm_span(self, trace_id: int, attrs: dict[str, Any], is_root: bool = False) -> None:
        definitions = tool_definitions(attrs, self._definitions)
        op = attrs.get(A.GEN_AI_OPERATION_NAME)
        not_turn = op in _NOT_TURNS or attrs.get(A.OPENINFERENCE_SPAN_KIND) == "AGENT"
        arguments: dict[str, Any] = {}
        calls = [] if not_turn else requested_calls(attrs, arguments)
        state = self._store.get(trace_id)
        assert state is not None
        decided: Decisions | None = None
        with state.lock:
            if state.finished:
                self.metrics.record_late()
            state.genai = True
            if definitions:
                state.add_tools(definitions)
                # a model turn inside an agent's trace that was offered tools decided whether to call one; an agent's
                # creation, or an instrumented client's own root span, decided nothing
                state.offered = state.offered or (op != "create_agent" and not is_root)
            if state.call_names:  # requests no tool span answered yet: did the framework reply "unknown tool"?
                state.note_unknown_replies(unknown_tool_replies(attrs))
            response_id = None if not_turn else attrs.get(A.GEN_AI_RESPONSE_ID)
            limit = self.config.limits.max_calls_per_trace
            if response_id is not None and state.seen_response(str(response_id), limit):
                not_turn, calls = True, []  # a second span of a request counted already: its tools only
            if not not_turn:  # a model call: its tokens, cost, and a reaction to a failed call (issue 18)
                stats = state.stats
                if stats is None:
                    stats = state.stats = new_trace_stats()
                decided = stats.on_model_call(attrs, calls, self._prices)
            if calls:
                limits = self.config.limits
                state.requested = state.requested or not is_root
                state.add_turn(calls, limits.max_calls_per_trace)
                if arguments:
                    state.add_requested_arguments(arguments, limits.max_calls_per_trace, limits.max_argument_bytes)
        if decided:  # the turn reacted to failed calls: their held spans go, with their class
            self._decide(trace_id, decided)
        judge = self.judge
        if judge is not None:
            try:
                judge.observe_llm_span(trace_id, attrs)
            except Exception:  # noqa: BLE001
                self._judge_failed("judge.observe")

    def _finish_trace(
        self,
        trace_id: int,
        span: ReadableSpan,
        extra: dict[str, Any],
        attrs: dict[str, Any] | None = None,
        failed_step: int | None = None,
    ) -> ReadableSpan | None:
        """The root ended: the verdict and the trace's numbers on it (``failed_step``: the root is itself a failed
        call, whose recovery class the trace's end decides); None: the root is held for its grace window (it goes
        out through ``_release_root``)."""
        if self._grace and self._store.hold_root(trace_id, (span, extra, attrs, failed_step)):
            # the root is the store's now: nothing may raise past here (it would be forwarded twice); the timer ends
            # the window when no span comes to end it
            self._start_timer()
            return None
        state, first = self._store.finish(trace_id)
        return self._root_verdict(trace_id, state, first, span, extra, attrs, failed_step)

    def _release_root(self, trace_id: int, state: TraceState) -> None:
        """A held root's window is over (or cut short): it goes out with the verdict of everything that arrived
        until now, exactly once (whoever takes ``state.root`` forwards it; never raises)."""
        with state.lock:  # a span being scored into the state is in the verdict; one scored after it is late
            root = state.root
            state.root = None
            state.finished = True
        if root is None:
            return
        span, extra, attrs, failed_step = root
        out: ReadableSpan = span
        try:
            out = self._root_verdict(trace_id, state, True, span, extra, attrs, failed_step)
        except Exception:  # noqa: BLE001 - forwarded with its own scores rather than lost
            self._judge_failed("root.release")
            try:
                out = EnrichedSpan(span, extra, attrs) if extra else span
            except Exception:  # noqa: BLE001
                out = span
        self._forward(out)

    def _root_verdict(
        self,
        trace_id: int,
        state: TraceState | None,
        first: bool,
        span: ReadableSpan,
        extra: dict[str, Any],
        attrs: dict[str, Any] | None,
        failed_step: int | None,
    ) -> ReadableSpan:
        """The finished trace's verdict and numbers on its root, counted when ``first``."""
        judge = self.judge
        if state is not None and judge is not None:
            try:
                judge.trace_done(trace_id)
            except Exception:  # noqa: BLE001
                self._judge_failed("judge.trace_done")
        sessions = self._sessions
        if state is None or not state.tool_activity:
            if sessions is not None:
                self._session_turn(state if first else None, None, trace_id, span)
            return EnrichedSpan(span, extra, attrs) if extra else span
        verdict = self._verdict(state)
        stats_attributes = self._stats_attributes(trace_id, state, verdict)
        if failed_step is not None:
            steps = stats_attributes.get(A.TRACE_RECOVERY_STEPS) or ()
            if failed_step in steps:
                extra[A.RECOVERY_CLASS] = stats_attributes[A.TRACE_RECOVERY_CLASSES][steps.index(failed_step)]
        if first:  # a later root of a trace that finished here already (another segment) is not counted again
            self.metrics.record_trace(verdict, "root")
            self._record_stats(state, stats_attributes, span, attrs)
            if sessions is not None:
                self._session_turn(state, verdict, trace_id, span)
        extra.update(verdict_attributes(verdict))
        if state.prevented is not None:
            extra.update(state.prevented.attributes())
        extra.update(stats_attributes)
        return EnrichedSpan(span, extra, attrs)

    # --- cost, latency, recovery and the tool list (issue 18) -------------------------------------------------
    def _stats_attributes(self, trace_id: int, state: TraceState, verdict: TraceVerdict) -> dict[str, Any]:
        """The root's numbers; the trace's end decides the failed calls nothing reacted to (``carried_on``), and
        their held spans go first."""
        with state.lock:
            stats = state.stats
            settled = stats.settle() if stats is not None and stats.pending is not None else None
            out = root_attributes(
                stats, state.tools, verdict.tool_calls, verdict.errors, bool(self._prices), self._fingerprints
            )
        if settled:
            self._decide(trace_id, settled)
        return out

    def _record_stats(
        self, state: TraceState, stats_attributes: dict[str, Any], root: ReadableSpan | None, attrs: Any
    ) -> None:
        stats = state.stats
        decided = (stats.recoveries or []) if stats is not None else []
        labels = [(stats.metric_label(step, tool), cls) for step, tool, cls in decided] if stats is not None else []
        self.metrics.record_trace_stats(stats_attributes, labels, self._currency, histograms=self._histograms)
        fingerprint = stats_attributes.get(A.TRACE_TOOL_LIST_FINGERPRINT)
        if root is None or fingerprint is None:
            return
        source = tool_list_source(root, attrs)
        if self._tool_lists.changed(source, fingerprint):
            self.metrics.record_tool_list_change(source[0])

    # --- sessions ------------------------------------------------------------------------------
    def _conversation_noted(self, span: ReadableSpan) -> bool:
        """A span the gate let through only for its conversation id, in a trace that has noted one already: it
        is forwarded as is (OpenInference's ``using_session`` puts ``session.id`` on every span). Only spans
        carrying a gate key get here, so plain traffic pays nothing for sessions."""
        known = self._conversation_known
        if self._session_gate is None or not known:
            return False
        ctx, parent = _sdk.span_ids(span)  # a dict lookup first: most traces carry no conversation id
        if ctx is None or _sdk.trace_id_of(ctx) not in known:
            return False
        work = self._work_gate
        # a root, or a span a convention or an LLM check reads: evaluated
        return not (parent is None or _sdk.is_remote(parent) or work is None or _sdk.carries_any(span, work))

    def _note_conversation(self, trace_id: int, attrs: dict[str, Any]) -> None:
        """The first conversation id seen on a span of the trace is the trace's (``sessions.attributes``)."""
        cid = conversation_id(attrs, self._session_keys, self.config.limits.max_attribute_length)
        if cid is None:
            return
        state = self._store.get(trace_id)
        assert state is not None
        with state.lock:
            if state.conversation_id is None:
                state.conversation_id = cid
        known = self._conversation_known
        known[trace_id] = None
        limit = self.config.limits.max_traces
        try:
            while len(known) > limit:
                del known[next(iter(known))]
        except (RuntimeError, KeyError, StopIteration):  # another thread changed it meanwhile: trimmed next time
            pass

    def _session_turn(
        self, state: TraceState | None, verdict: TraceVerdict | None, trace_id: int, span: ReadableSpan | None
    ) -> None:
        """Add the finished trace to its session (contained: a failing rollup never costs the span)."""
        sessions = self._sessions
        if sessions is None:
            return
        try:
            if state is None or state.conversation_id is None:
                sessions.expire()  # any finished trace lets idle sessions go (and the timer, once it runs)
                return
            ctx = span.context if span is not None else None
            sessions.add_turn(
                state.conversation_id,
                turn_summary(verdict, state.failed_calls),
                trace_id,
                ctx.span_id if ctx is not None else 0,
            )
            ticker = self._ticker
            if ticker is not None:  # an open session now: the timer emits it once idle, traffic or not
                ticker.ensure_started()
        except Exception:  # noqa: BLE001
            self._judge_failed("sessions.turn")

    def _verdict(self, state: TraceState) -> TraceVerdict:
        unlisted = state.unlisted_calls(self._config_tools) if state.listed_late else None
        if not state.turns:
            return trace_verdict(state.history, self.config.policies.step_budget, unlisted_calls=unlisted)
        return trace_verdict(
            state.history,
            self.config.policies.step_budget,
            state.unknown_tool_requests(self._config_tools),
            state.unexecuted_calls,
            unlisted,
        )

    def _on_drop(self, trace_id: int, state: TraceState, reason: str) -> None:
        if state.root is not None:  # a held root: its window ended, or was cut short (evicted, expired, a flush)
            self._release_root(trace_id, state)
            return
        self.metrics.record_dropped(reason)
        judge = self.judge
        if judge is not None:
            self._safe(lambda: judge.trace_done(trace_id), "judge.trace_done")
        # a trace seen only as remote-parented segments, whose true root never came: its verdict counts here
        self._record_unfinished(trace_id, state, "segment" if reason == "expired" and state.segment else reason)

    def _record_unfinished(self, trace_id: int, state: TraceState, reason: str) -> None:
        if not state.tool_activity:
            if state.conversation_id is not None:
                self._session_turn(state, None, 0, None)
            return
        verdict = self._verdict(state)
        self.metrics.record_trace(verdict, reason)
        self._record_stats(state, self._stats_attributes(trace_id, state, verdict), None, None)
        if state.conversation_id is not None:
            self._session_turn(state, verdict, 0, None)

    def _offer(self, trace_id: int, record: ToolCallRecord, score: CallScore, tools: Any) -> bool:
        """``judge.offer``, contained (a method, not ``_safe``: a lambda on the span path makes its variables
        cells for the whole calling function)."""
        judge = self.judge
        assert judge is not None
        try:
            return bool(judge.offer(trace_id, record, score, tools))
        except Exception:  # noqa: BLE001
            self._judge_failed("judge.offer")
            return False

    def _judge_failed(self, key: str) -> None:
        self.metrics.record_error(key)
        self._log.error(key, "toolcall-eval: %s failed", key)

    def _safe(self, fn: Any, key: str) -> Any:
        try:
            return fn()
        except Exception:  # noqa: BLE001
            self.metrics.record_error(key)
            self._log.error(key, "toolcall-eval: %s failed", key)
            return False

    # --- introspection (tests, benchmarks) -------------------------------------------------------
    @property
    def traces_in_flight(self) -> int:
        return len(self._store)

    def score_record(self, record: ToolCallRecord) -> CallScore:
        """Score a record outside any trace (used by tests and the offline runner's sanity checks)."""
        state = TraceState()
        return self._scorer.score(record, state.history, trace_tools=state.tools)


def _scored_client(clients: dict[int, ScoredChild], parent: Any, record: ToolCallRecord) -> ScoredChild | None:
    """A remote-parented tool span whose parent is a client tool span of the same call scored already (the agent's
    export came first): the call was counted on that span, this one points at it (``same_call_as``)."""
    if parent is None:
        return None
    client = clients.get(_sdk.span_id_of(parent))
    if client is None or not wraps_same_call(record.name, record.raw_arguments, client.name, client.arguments_key()):
        return None
    return client


def _safe_name(span: Any) -> str:
    try:
        return str(span.name)[:100]
    except Exception:  # noqa: BLE001
        return "?"
