"""The online pipeline: what happens to every span ``ToolCallEvalProcessor`` (the public face) receives.

A plain class (it subclasses nothing from the SDK, so mypyc compiles it as a native class: attribute reads are
slot reads, not dict lookups). The face binds the SDK's ``on_end`` straight to ``Pipeline.on_end``: no frame of
the face on the span path. A span meets, in order: the gate (``gate``: plain traffic goes straight to
``forward``), the queue (``background``: scored on the worker thread), recognition and reading (the conventions),
scoring a call (``call``) or observing a model turn (``turn``) against the trace's state (``trace_state``),
finishing the trace at its root (``finish``: verdict and stats), the enriched copy (``enrich``) and ``forward``.
Each stage returns its result; the pipeline writes it, hands it to the features' hooks (``hooks``: the judge,
sessions) and forwards the span. Held spans (``held_spans``: failed ones, and ones waiting for their reply's
outcome, whose hooks run when it settles them) and held roots decide when a span goes out.
Flush, shutdown and the timer are in ``lifecycle``; ``build`` assembles the whole from the config.

Nothing here raises into the application: a failed evaluation is counted, logged (rate-limited) and the span is
forwarded unscored, exactly once.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import _sdk
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._ticker import Ticker
from otel_toolcall_eval.checks.late_outcome import ReplyVerdict, with_reply_outcome
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.conventions import ConventionRegistry
from otel_toolcall_eval.conventions.llm_spans import DefinitionCache, is_llm_span
from otel_toolcall_eval.conventions.registry import SpanReading, read_span
from otel_toolcall_eval.engine import Scorer
from otel_toolcall_eval.judge.hook import JudgeHook
from otel_toolcall_eval.online.background import BackgroundQueue
from otel_toolcall_eval.online.call import CallStage, Counted, call_attributes
from otel_toolcall_eval.online.contain import Contained
from otel_toolcall_eval.online.enrich import EnrichedSpan, requested_keys
from otel_toolcall_eval.online.finish import FinishStage
from otel_toolcall_eval.online.forward import FanOut
from otel_toolcall_eval.online.gate import Gate
from otel_toolcall_eval.online.held_spans import HeldSpans
from otel_toolcall_eval.online.hooks import Hooks, TraceFinished
from otel_toolcall_eval.online.metrics import EvalMetrics
from otel_toolcall_eval.online.sessions import SessionRollup
from otel_toolcall_eval.online.trace_state import HeldRoot, TraceState, TraceStore
from otel_toolcall_eval.online.turn import RequestScored, TurnStage
from otel_toolcall_eval.records import CallScore, Outcome, ToolCallRecord, ToolDefinition


class Pipeline:
    """The per-span work and the per-trace state of one ``ToolCallEvalProcessor``.

    Built by ``build.build`` (which resolves the config's defaults, the judge, sessions and the evaluation mode,
    binds the features' hooks, and attaches the queue and the timer); ``lifecycle.Lifecycle`` flushes and shuts it
    down.
    """

    def __init__(
        self,
        downstream: FanOut,
        contained: Contained,
        config: EvalConfig,
        conventions: ConventionRegistry,
        metrics: EvalMetrics,
        hooks: Hooks | None = None,
        *,
        segments: bool,
        grace_seconds: float,
        judge: JudgeHook | None = None,
        sessions: SessionRollup | None = None,
    ) -> None:
        hooks = hooks or Hooks()
        self.config = config
        self.conventions = conventions
        self.metrics = metrics
        self.hooks = hooks
        self.judge = judge  # the features behind the hooks (lifecycle, tests); the span path calls only the hooks
        self.sessions = sessions
        self.downstream = downstream
        self.contained = contained
        self._only_on_end = downstream.processors[0].on_end if len(downstream.processors) == 1 else None
        self._forward = downstream.forward if self._only_on_end is None else self._forward_only
        # the hook lists the span path runs (each an empty tuple when no feature plugs in: one test)
        self._on_call_scored = hooks.on_call_scored
        self._on_call_failed = hooks.on_call_failed
        self._on_model_turn = hooks.on_model_turn
        self._on_trace_finished = hooks.on_trace_finished
        self._watches = hooks.watches
        limits = config.limits
        self.scorer = Scorer(config.policy(), key_failed_first_calls=True)  # the tally digests failed calls
        self.definitions = DefinitionCache(max_bytes=limits.max_cache_bytes)
        # "segment": a span with a remote parent is part of a trace whose root is in another service (``serve``
        # receiving both): it finishes nothing; the true root does, else the TTL (``finalized_by="segment"``)
        self._segments = segments
        # the root grace window (0: off; then the root's path pays one attribute test)
        self.grace = grace_seconds
        self.store = TraceStore(
            limits.max_traces,
            limits.trace_ttl_seconds,
            self._on_drop,
            max_finished_bytes=limits.max_cache_bytes,
            grace_seconds=grace_seconds,
        )
        self.gate = Gate(hooks.watches)
        # failed tool spans held until their recovery class is known (issue 18), and spans that cannot record an error
        # until their reply is read (issue 26; limits.max_held_spans 0: none)
        self.held: HeldSpans | None = None
        if limits.max_held_spans:
            self.held = HeldSpans(
                max_spans=limits.max_held_spans,
                max_per_trace=limits.max_held_spans_per_trace,
                max_seconds=limits.max_hold_seconds,
                forward=self._forward,
                on_unclassified=metrics.record_unclassified,
                on_unread=metrics.record_unread,
            )
        histograms = config.metrics.histograms
        prices = config.pricing.table()
        self.calls = CallStage(
            self.scorer,
            self.store,
            metrics,
            self.held,
            contained,
            max_calls=limits.max_calls_per_trace,
            segments=segments,
            histograms=histograms,
        )
        self.turns = TurnStage(self.definitions, limits, prices, metrics, self.held, contained, self.scorer)
        self.finish = FinishStage(
            config.policies.step_budget,
            config.tool_definitions(),
            prices,
            config.pricing.currency if prices else None,
            metrics,
            self.held,
            contained,
            max_cache_bytes=limits.max_cache_bytes,
            histograms=histograms,
        )
        self.ticker: Ticker | None = None  # attached by ``build`` (it calls ``lifecycle``) when anything waits
        self.background: BackgroundQueue | None = None  # attached by ``build`` in background mode

    # --- the span path ---------------------------------------------------------------------------------
    def on_end(self, span: ReadableSpan) -> None:
        """The SDK's ``on_end``, bound straight to the face's (never raises into the code that ended the span)."""
        read: SpanReading | None = None
        try:
            gate = self.gate
            conventions = self.conventions
            keys = conventions.detect_keys  # may change when conventions are registered later
            if keys is not gate.of:
                gate.refresh(keys)
            background = self.background
            if background is None:  # inline: the gate, the read and recognising it in one call
                read = read_span(conventions, span, gate.keys, True)  # None: a plain child (or nothing to read)
                plain = read is None or (
                    gate.noting and read[0][2] is not None and not read[0][3] and gate.only_watched(span)
                )
            else:
                child = _sdk.is_plain_child(span, gate.keys)  # None: a root or a remote parent, never a noted one
                plain = bool(child) or (child is not None and gate.noting and gate.only_watched(span))
            if plain:
                # neither a tool nor an LLM span, nor a root, nor a watched value its trace has not noted yet: as is
                only = self._only_on_end
                if only is None:
                    self._forward(span)
                    return
                try:  # one downstream processor (the usual case): called directly, no frame of the fan-out on
                    only(span)  # the plain path (tests/online/test_plain_span_path.py counts them)
                except Exception:  # noqa: BLE001
                    self.contained.log.error("downstream.on_end", "downstream on_end failed")
                return
            # queued: the worker scores and forwards it. ``submit`` raises only before the span is queued (then
            # it is scored here, once; see ``BackgroundQueue.submit``)
            if background is not None and background.submit(span):
                return
        except Exception:  # noqa: BLE001 - never raise into the code that ended the span
            pass
        self.evaluate_and_forward(span, read)

    def evaluate_and_forward(self, span: ReadableSpan, read: SpanReading | None = None) -> None:
        """Score ``span`` (``read``: its ids, attributes and record when the gate read them already) and forward the
        result (None: held until its recovery class is known, forwarded then); on any failure forward it unscored
        (never raises)."""
        out: ReadableSpan | None = span
        try:
            out = self._evaluate(span, read)
        except Exception as exc:  # noqa: BLE001 - never raise into the code that ended the span
            self.metrics.record_error("evaluate")
            self.contained.log.error(
                "evaluate", "toolcall-eval: evaluating span %r failed; forwarded unscored", _safe_name(span)
            )
            try:
                out = EnrichedSpan(span, {A.EVAL_ERROR: type(exc).__name__})
            except Exception:  # noqa: BLE001
                out = span
        if out is not None:
            self._forward(out)

    def _forward_only(self, span: ReadableSpan) -> None:
        """``forward`` with one downstream processor (the usual case): its ``on_end`` called from here, contained,
        without a move into the fan-out."""
        try:
            self._only_on_end(span)  # type: ignore[misc]  # set whenever this is bound
        except Exception:  # noqa: BLE001
            self.contained.log.error("downstream.on_end", "downstream on_end failed")

    def _evaluate(self, span: ReadableSpan, read: SpanReading | None) -> ReadableSpan | None:
        """One span past the gate, through its stage: the span to forward (None: held, forwarded later)."""
        # The span's ids, one C-level copy of its attributes and the tool call a convention reads from it, in one
        # call into the conventions (``conventions.registry.read_span``): every step (the LLM checks, the stages,
        # the enriched copy) reads these instead of the span, whose SDK proxy copies, iterates and looks up keys in
        # Python. No copy for a root (or a remote-parented span) that no check reads (only these pass ``on_end``'s
        # gate without a key a check reads): plain traffic's roots, which the gate cannot tell from an agent's until
        # the trace's state is looked up.
        if read is None:  # not read at the gate (background mode: the worker reads it here)
            read = read_span(self.conventions, span, self.gate.keys, False)
            if read is None:
                return span
        (trace_id, span_id, parent, remote), found, record = read  # ``parent``: the parent's span id, None: a root
        if found is None:
            found = _sdk.attributes_dict(span) if self.store.knows(trace_id) else None
            if found is None:
                return span
        attrs = found
        is_root = parent is None or (remote and not self._segments)
        watches = self._watches
        if watches:
            watched = self.gate.watched
            if watched is not None and not watched.isdisjoint(attrs):  # the set test in C first: most spans have none
                self._note_watched(trace_id, attrs)
        if record is not None:
            state = self.store.get(trace_id)
            assert state is not None
            result = self.calls.score(state, span, record, trace_id, span_id, parent, remote, is_root, attrs)
            score = result.score
            late = result.late  # its held span waits for its reply: counted and offered when that settles it
            if score is not None and late is None and (self._on_call_scored or self._on_call_failed):
                self._call_hooks(trace_id, record, score, result.tools, result.extra)
            if is_root:
                return self._finish_trace(trace_id, span, result.extra, attrs, result.failed_step)
            held_step = result.held_step
            if held_step is not None:
                settle = None
                if late is not None and score is not None:
                    settle = partial(self._settle, trace_id, record, score, result.tools, attrs, late)
                held = self.held
                assert held is not None
                timed = self.start_timer()  # the max hold time holds when no span comes to trigger it
                # the span is the held table's from here: nothing may raise past this (it would be forwarded twice);
                # ``hold`` never raises, and forwards it now if a step decided it meanwhile (or a bound says no)
                held.hold(state, trace_id, held_step, span, result.extra, attrs, not timed, settle)
                return None
            return EnrichedSpan(span, result.extra, attrs)
        requested: dict[str, Any] | None = None  # calls scored from the requests, answered in this span's input
        if is_llm_span(attrs):
            state = self.store.get(trace_id)
            assert state is not None
            answered = self.turns.observe(state, trace_id, attrs, is_root, span)
            if answered is not None:
                requested = answered.extra
                if self._on_call_scored or self._on_call_failed:
                    self._requested_scored(trace_id, answered)
            if self._on_model_turn:
                for turn_hook in self._on_model_turn:
                    try:
                        turn_hook(trace_id, attrs)
                    except Exception:  # noqa: BLE001
                        self._failed("hook.on_model_turn")
        elif A.GUARD_PREVENTED in attrs:  # the guard's span of a call it stopped (issue 31)
            state = self.store.get(trace_id)
            assert state is not None
            self.calls.note_prevented(state, parent, attrs)
        if is_root:
            return self._finish_trace(trace_id, span, requested or {}, attrs)
        if remote and self._segments:
            self._note_segment(trace_id)
        return EnrichedSpan(span, requested, attrs) if requested else span

    def _requested_scored(self, trace_id: int, answered: RequestScored) -> None:
        """The calls scored from the requests go to the ``on_call_scored`` hooks as a tool span's call does (the
        judge samples them, sessions count their failures); what a hook adds goes on the model span under the
        call's ``toolcall_eval.requested.<N>.`` prefix."""
        for index, record, score in answered.calls:
            added: dict[str, Any] = {}
            self._call_hooks(trace_id, record, score, answered.tools, added)
            if added:
                requested_keys(index, added, answered.extra)

    def _call_hooks(
        self,
        trace_id: int,
        record: ToolCallRecord,
        score: CallScore,
        tools: Mapping[str, ToolDefinition] | None,
        extra: dict[str, Any],
    ) -> None:
        """One scored call to the ``on_call_scored`` hooks, and, when it did not succeed, the ``on_call_failed``
        ones (each contained: counted under ``hook.<kind>``)."""
        for hook in self._on_call_scored:
            try:
                hook(trace_id, record, score, tools, extra)
            except Exception:  # noqa: BLE001
                self._failed("hook.on_call_scored")
        if score.outcome is not Outcome.SUCCESS:
            for hook in self._on_call_failed:
                try:
                    hook(trace_id, record, score, tools, extra)
                except Exception:  # noqa: BLE001
                    self._failed("hook.on_call_failed")

    def _settle(
        self,
        trace_id: int,
        record: ToolCallRecord,
        score: CallScore,
        tools: Mapping[str, ToolDefinition] | None,
        attrs: dict[str, Any],
        counted: Counted,
        read: bool,
        found: ReplyVerdict | None,
        extra: dict[str, Any],
    ) -> None:
        """A held call that waited for its reply (``held_spans``), released: the outcome the reply gave written on
        its copy (``read``; ``found`` None: nothing failed), then counted and offered to the hooks, once."""
        try:
            if read:
                if found is not None:
                    score = with_reply_outcome(score, found)
                    extra.update(call_attributes(score, record.convention))
                extra[A.LATE_OUTCOME_READ] = True
            counts, scope, seconds = counted
            self.metrics.on_call(score, record.convention, record.result_recorded, counts, attrs, scope, seconds)
        except Exception:  # noqa: BLE001
            self._failed("held.settle")
        if self._on_call_scored or self._on_call_failed:
            self._call_hooks(trace_id, record, score, tools, extra)

    def _note_watched(self, trace_id: int, attrs: dict[str, Any]) -> None:
        """A span carrying a watched key (a conversation id): its trace gets state here, so that its root, even one
        no check reads, finishes it (and the watching feature sees it finish)."""
        self.store.get(trace_id)
        gate = self.gate
        for watch in self._watches:
            if not watch.noted(trace_id):
                try:
                    watch.note(trace_id, attrs)
                except Exception:  # noqa: BLE001
                    self._failed("hook.watch")
                    continue
                if not gate.noting and watch.noted(trace_id):
                    gate.noting = True  # from now on the gate asks the watches about spans carrying their keys

    def _note_segment(self, trace_id: int) -> None:
        """A remote-parented span that is neither a tool nor an LLM span (the local root of a service's part, say
        an MCP server's request span): its trace, if it has tool activity here, waits for the true root. A trace
        without state here gets none (plain remote-parented traffic costs no memory)."""
        state = self.store.get(trace_id, create=False)
        if state is not None:
            with state.lock:
                state.segment = True

    def start_timer(self) -> bool:
        """Start (or wake) the timer; never raises. False when there is none or it cannot start (the interpreter is
        exiting: counted), so what it would release waits for the next span, a flush or shutdown."""
        ticker = self.ticker
        if ticker is None:
            return False
        if ticker.awake:  # running, not parked: ``ensure_started`` would do nothing
            return True
        try:
            ticker.ensure_started()
        except Exception:  # noqa: BLE001
            self._failed("timer.start")
            return False
        return True

    # --- finishing a trace ------------------------------------------------------------------------
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
        out through ``release_root``)."""
        root: HeldRoot = (span, extra, attrs, failed_step)
        if self.grace and self.store.hold_root(trace_id, root):
            # the root is the store's now: nothing may raise past here (it would be forwarded twice); the timer ends
            # the window when no span comes to end it
            self.start_timer()
            return None
        state, first = self.store.finish(trace_id)
        return self._root_verdict(trace_id, state, first, root)

    def release_root(self, trace_id: int, state: TraceState) -> None:
        """A held root's window is over (or cut short): it goes out with the verdict of everything that arrived
        until now, exactly once (whoever takes ``state.root`` forwards it; never raises)."""
        with state.lock:  # a span being scored into the state is in the verdict; one scored after it is late
            root = state.root
            state.root = None
            state.finished = True
        if root is None:
            return
        span, extra, attrs, _ = root
        out: ReadableSpan = span
        try:
            out = self._root_verdict(trace_id, state, True, root)
        except Exception:  # noqa: BLE001 - forwarded with its own scores rather than lost
            self._failed("root.release")
            try:
                out = EnrichedSpan(span, extra, attrs) if extra else span
            except Exception:  # noqa: BLE001
                out = span
        self._forward(out)

    def _root_verdict(self, trace_id: int, state: TraceState | None, first: bool, root: HeldRoot) -> ReadableSpan:
        """The finished trace's root, with its verdict and numbers; the event to the hooks."""
        span, extra, attrs, failed_step = root
        extra, event = self.finish.root(trace_id, state, first, span, extra, attrs, failed_step)
        if self._on_trace_finished:
            self._trace_finished(event)
        return EnrichedSpan(span, extra, attrs) if extra else span

    def _on_drop(self, trace_id: int, state: TraceState, reason: str) -> None:
        if state.root is not None:  # a held root: its window ended, or was cut short (evicted, expired, a flush)
            self.release_root(trace_id, state)
            return
        self.metrics.record_dropped(reason)
        # a trace seen only as remote-parented segments, whose true root never came: its verdict counts here
        self.record_unfinished(trace_id, state, "segment" if reason == "expired" and state.segment else reason)

    def record_unfinished(self, trace_id: int, state: TraceState, reason: str) -> None:
        """A trace let go of before its root ended here: its verdict counted, the event to the hooks."""
        event = self.finish.unfinished(trace_id, state, reason)
        if self._on_trace_finished:
            self._trace_finished(event)

    def _trace_finished(self, event: TraceFinished) -> None:
        for hook in self._on_trace_finished:
            try:
                hook(event)
            except Exception:  # noqa: BLE001
                self._failed("hook.on_trace_finished")

    def _failed(self, key: str) -> None:
        self.contained.failed(key)


def _safe_name(span: Any) -> str:
    try:
        return str(span.name)[:100]
    except Exception:  # noqa: BLE001
        return "?"
