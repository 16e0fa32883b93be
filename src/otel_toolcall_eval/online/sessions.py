"""Session rollup online: the turns (traces) of a conversation folded into one verdict, emitted once it is idle.

A trace joins a session through the first conversation id (``sessions.attributes``) seen on any of its spans
(agent frameworks put it on chat or agent spans, not always on the root). Its turn (``checks.session``) is added
when its root ends. A session is finished when no turn arrived for ``limits.session_idle_seconds`` (checked
by the processor's timer thread, ``_ticker``, whenever a trace finishes, and at ``force_flush``/``shutdown``,
which also finish every open session), or when
``limits.max_sessions`` are open and it is the least recently active (evicted: counted, still emitted). Its
verdict goes out as a ``gen_ai.evaluation.result`` log record (parented to the last turn's root span, carrying
``gen_ai.conversation.id``) and as metrics. State per session is a few counters and at most
``checks.session.MAX_FAILURE_KEYS`` 16-byte digests, so memory is bounded by ``max_sessions``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from mypy_extensions import mypyc_attr
from opentelemetry import _logs as logs_api
from opentelemetry import trace as trace_api
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from otel_toolcall_eval import _fork
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._deadline import Deadline
from otel_toolcall_eval._lru import pop_expired
from otel_toolcall_eval._version import __version__
from otel_toolcall_eval.checks.session import MAX_FAILURE_KEYS, SessionTally, SessionVerdict, TurnSummary
from otel_toolcall_eval.engine import call_digest_of
from otel_toolcall_eval.online.hooks import Hooks, TraceFinished
from otel_toolcall_eval.online.metrics import NO_SOURCE, SessionMetrics, Source
from otel_toolcall_eval.records import CallScore, Outcome, ToolCallRecord, ToolDefinition, TraceVerdict

SCOPE: Final = "otel_toolcall_eval.sessions"  # the instrumentation scope users filter on: kept when the module moved


def conversation_id(attrs: Any, keys: tuple[str, ...], max_length: int) -> str | None:
    """The first of ``keys`` that ``attrs`` holds a non-empty value for, as text cut to ``max_length`` (an id
    from trace data is untrusted: it becomes a dictionary key and an attribute value, never a metric label)."""
    for key in keys:
        value = attrs.get(key)
        if value is None or value == "" or isinstance(value, (list, tuple, dict)):
            continue
        text = value if isinstance(value, str) else str(value)
        return text[:max_length]
    return None


def turn_summary(verdict: TraceVerdict | None, failed_calls: Iterable[bytes] | None) -> TurnSummary:
    """A finished trace as a turn; ``verdict`` None: a trace without tool activity (it holds)."""
    if verdict is None:
        return TurnSummary()
    return TurnSummary(
        tool_calls=verdict.tool_calls,
        errors=verdict.errors,
        violations=verdict.violations,
        composite_ok=verdict.composite_ok,
        failed_calls=frozenset(failed_calls) if failed_calls else frozenset(),
    )


@dataclass(slots=True)
class _Open:
    tally: SessionTally = field(default_factory=SessionTally)
    last_seen: float = 0.0
    trace_id: int = 0  # the last turn's root span: the record's context
    span_id: int = 0
    source: Source = NO_SOURCE  # the last turn with a verdict's (its metrics' labels): the session's metrics'


@mypyc_attr(native_class=False)
class SessionRollup:
    """Open sessions (LRU with an idle TTL), their verdicts emitted once finished. Thread-safe and fork-safe;
    ``clock`` is injectable so tests drive the idle time without sleeping."""

    def __init__(
        self,
        *,
        step_budget: int | None,
        max_sessions: int,
        idle_seconds: float,
        meter_provider: Any = None,
        logger_provider: logs_api.LoggerProvider | None = None,
        on_error: Callable[[str], None] = lambda _stage: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._budget = step_budget
        self._max = max_sessions
        self._idle = idle_seconds
        self._clock = clock
        self._on_error = on_error
        self._metrics = SessionMetrics(meter_provider)
        self._logger_provider = logger_provider
        self._logger: logs_api.Logger | None = None
        self._init_state()
        _fork.reinit_after_fork(self)

    def _init_state(self) -> None:
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._lock = threading.Lock()

    def _after_fork_in_child(self) -> None:
        """The parent's sessions are the parent's to emit."""
        self._init_state()

    def __len__(self) -> int:
        return len(self._open)

    def add_turn(
        self, conversation: str, turn: TurnSummary, trace_id: int, span_id: int, source: Source = NO_SOURCE
    ) -> None:
        now = self._clock()
        done: list[tuple[str, _Open, str]] = []
        with self._lock:
            self._expire(now, done)
            session = self._open.get(conversation)
            if session is None:
                while len(self._open) >= self._max:
                    old_id, old = self._open.popitem(last=False)
                    done.append((old_id, old, "evicted"))
                session = self._open[conversation] = _Open()
            else:
                self._open.move_to_end(conversation)
            session.tally.add(turn)
            session.last_seen = now
            if span_id:  # a trace dropped before its root ended has no root span to point at
                session.trace_id, session.span_id = trace_id, span_id
            if source != NO_SOURCE:  # a turn without tool activity has no verdict, nor its source
                session.source = source
        self._emit_all(done)

    def expire(self) -> None:
        """Finish the sessions idle for longer than ``limits.session_idle_seconds``."""
        done: list[tuple[str, _Open, str]] = []
        with self._lock:
            self._expire(self._clock(), done)
        self._emit_all(done)

    def finish_all(self, reason: str) -> None:
        """Finish every open session (``flush`` or ``shutdown``): the idle ones as ``idle``."""
        done: list[tuple[str, _Open, str]] = []
        with self._lock:
            self._expire(self._clock(), done)
            done.extend((cid, s, reason) for cid, s in self._open.items())
            self._open.clear()
        self._emit_all(done)

    def _expire(self, now: float, done: list[tuple[str, _Open, str]]) -> None:
        # in order of last activity: the idle ones are at the front
        done.extend((cid, session, "idle") for cid, session in pop_expired(self._open, now - self._idle, _last_seen))

    # --- out ---------------------------------------------------------------------------------------
    def _emit_all(self, done: list[tuple[str, _Open, str]]) -> None:
        for cid, session, reason in done:
            try:
                if reason == "evicted":
                    self._metrics.record_dropped(reason)
                self._emit(cid, session, reason)
            except Exception:  # noqa: BLE001 - one failing export does not stop the others
                self._on_error("sessions.emit")

    def _emit(self, cid: str, session: _Open, reason: str) -> None:
        verdict = session.tally.verdict(self._budget)
        self._metrics.record_session(verdict.outcome, verdict.turns, reason, session.source)
        logger = self._logger
        if logger is None:
            provider = self._logger_provider or logs_api.get_logger_provider()
            logger = self._logger = provider.get_logger(SCOPE, __version__)
        context = None
        if session.trace_id and session.span_id:
            last = SpanContext(
                session.trace_id, session.span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
            )
            context = trace_api.set_span_in_context(NonRecordingSpan(last))
        logger.emit(
            event_name=A.GEN_AI_EVALUATION_RESULT, context=context, attributes=record_attributes(cid, verdict, reason)
        )


def _last_seen(session: _Open) -> float:
    return session.last_seen


def record_attributes(cid: str, verdict: SessionVerdict, finalized_by: str) -> dict[str, Any]:
    """What a session's ``gen_ai.evaluation.result`` record carries (the README's session-record rows)."""
    return {
        A.GEN_AI_EVALUATION_NAME: A.SESSION_EVALUATION_NAME,
        A.GEN_AI_EVALUATION_SCORE_LABEL: verdict.outcome,
        A.GEN_AI_EVALUATION_SCORE_VALUE: verdict.turns_ok / verdict.turns if verdict.turns else 1.0,
        A.GEN_AI_CONVERSATION_ID: cid,
        A.SESSION_TURNS: verdict.turns,
        A.SESSION_TOOL_CALLS: verdict.tool_calls,
        A.SESSION_ERRORS: verdict.errors,
        A.SESSION_VIOLATIONS: verdict.violations,
        A.SESSION_TURNS_OK: verdict.turns_ok,
        A.SESSION_REPEATED_FAILURES: verdict.repeated_failures,
        A.SESSION_OVER_BUDGET: verdict.over_budget,
        A.SESSION_FINALIZED_BY: finalized_by,
    }


@dataclass(slots=True)
class TraceTurn:
    """What sessions keep of one trace until its root ends: its conversation id (the first seen) and the digests
    of its failing calls (None until one; a list: a set is 216 bytes for the usual one or two)."""

    conversation: str | None = None
    failed_calls: list[bytes] | None = None
    done: bool = False  # its turn was added: kept only so the gate lets its other spans go as plain traffic


@mypyc_attr(native_class=False)  # registered with ``_fork`` by weak reference: a native class has none
class SessionTraces:
    """Sessions as a feature of the pipeline (``online.hooks``): a bounded per-trace table (at most ``max_traces``
    traces, oldest first out) fed by the hooks, each finished trace's turn added to its ``SessionRollup``.

    Thread-safe (one lock, held for a dict operation) and fork-safe (the child starts empty)."""

    def __init__(
        self,
        rollup: SessionRollup,
        *,
        attributes: tuple[str, ...],
        max_traces: int,
        max_attribute_length: int,
        wake: Callable[[], object] = lambda: None,
    ) -> None:
        self.rollup = rollup
        self._attributes = attributes
        self._keys = frozenset(attributes)
        self._max = max_traces
        self._max_length = max_attribute_length
        self.wake = wake  # starts the timer once a session is open (set by ``build`` once the timer exists)
        self._init_state()
        _fork.reinit_after_fork(self)

    def _init_state(self) -> None:
        self._traces: OrderedDict[int, TraceTurn] = OrderedDict()
        self._lock = threading.Lock()

    def _after_fork_in_child(self) -> None:
        """The parent's traces are the parent's to finish."""
        self._init_state()

    def __len__(self) -> int:
        return len(self._traces)

    def get(self, trace_id: int) -> TraceTurn | None:
        return self._traces.get(trace_id)

    def hooks(self) -> Hooks:
        return Hooks(
            on_call_failed=(self.on_call_scored,),
            on_trace_finished=(self.on_trace_finished,),
            on_flush=(self.on_flush,),
            on_shutdown=(self.on_shutdown,),
            on_tick=(self.on_tick,),
            watches=(self,),
        )

    # --- the gate's watch (``hooks.KeyWatch``) ---------------------------------------------------------------
    @property
    def keys(self) -> frozenset[str]:
        return self._keys

    def noted(self, trace_id: int) -> bool:
        """A dict lookup, no lock: a racing change is as good as one just before or after."""
        turn = self._traces.get(trace_id)
        return turn is not None and turn.conversation is not None

    def note(self, trace_id: int, attrs: Mapping[str, Any]) -> None:
        """The first conversation id seen on a span of the trace is the trace's (``sessions.attributes``)."""
        cid = conversation_id(attrs, self._attributes, self._max_length)
        if cid is None:
            return
        with self._lock:
            turn = self._turn(trace_id)
            if turn.conversation is None:
                turn.conversation = cid

    # --- hooks -----------------------------------------------------------------------------------------
    def on_call_scored(
        self,
        trace_id: int,
        record: ToolCallRecord,
        score: CallScore,
        tools: Mapping[str, ToolDefinition] | None,
        extra: dict[str, Any],
    ) -> None:
        """A failing call: its digest (the recovery check's, kept on the score) for failures repeated across
        turns."""
        if score.outcome is Outcome.SUCCESS:
            return
        digest = score.digest  # taken already by the trace's recovery numbers, usually
        if digest is None:
            digest = call_digest_of(score)
        with self._lock:
            turn = self._turn(trace_id)
            if turn.done:  # a span after its root: its turn is in its session already
                return
            failed = turn.failed_calls
            if failed is None:
                turn.failed_calls = [digest]
            elif len(failed) < MAX_FAILURE_KEYS and digest not in failed:
                failed.append(digest)

    def on_trace_finished(self, event: TraceFinished) -> None:
        """The trace's turn joins its session; a trace of no conversation lets idle sessions go instead."""
        turn = None
        if event.first:
            with self._lock:
                turn = self._traces.get(event.trace_id)
                if turn is not None:
                    if turn.conversation is None or turn.done:
                        del self._traces[event.trace_id]
                        turn = None if turn.done else turn
                    else:
                        turn.done = True  # kept (its failed calls dropped) for the gate's ``noted``
        if turn is None or turn.conversation is None:
            if event.span_id or event.known:
                self.rollup.expire()  # any finished trace lets idle sessions go (and the timer, once it runs)
            return
        failed, turn.failed_calls = turn.failed_calls, None
        self.rollup.add_turn(
            turn.conversation, turn_summary(event.verdict, failed), event.trace_id, event.span_id, event.source
        )
        self.wake()  # an open session now: the timer emits it once idle, traffic or not

    def on_flush(self, deadline: Deadline) -> bool:
        """What is open is emitted now (a flush may be the last chance: serverless, exit)."""
        self.rollup.finish_all("flush")
        return True

    def on_shutdown(self, deadline: Deadline) -> None:
        self.rollup.finish_all("shutdown")

    def on_tick(self) -> bool:
        self.rollup.expire()
        return len(self.rollup) > 0

    def _turn(self, trace_id: int) -> TraceTurn:
        """The trace's entry, made (and the least recently used let go past ``max_traces``, as the trace store lets
        go of its traces) when new; under the lock."""
        traces = self._traces
        turn = traces.get(trace_id)
        if turn is not None:
            traces.move_to_end(trace_id)
        else:
            while len(traces) >= self._max:
                traces.popitem(last=False)
            turn = traces[trace_id] = TraceTurn()
        return turn
