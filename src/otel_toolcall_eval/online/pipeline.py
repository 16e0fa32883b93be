"""The online pipeline: what happens to every span ``ToolCallEvalProcessor`` (the public face) receives.

A plain class (it subclasses nothing from the SDK, so mypyc compiles it as a native class: attribute reads are
slot reads, not dict lookups). The face binds the SDK's ``on_end`` straight to ``Pipeline.on_end``: no frame of
the face on the span path. A span meets, in order: the gate (plain traffic goes straight to ``forward``), the
queue (``background``: scored on the worker thread), recognition and reading (the conventions), scoring a call
or observing a model turn against the trace's state (``trace_state``), finishing the trace at its root (verdict
and stats), the enriched copy (``enrich``) and ``forward``. Held failed spans (``held_spans``) and held roots
decide when a span goes out; sessions and the judge are fed from here. Flush, shutdown and the timer are in
``lifecycle``; ``build`` assembles the whole from the config.

Nothing here raises into the application: a failed evaluation is counted, logged (rate-limited) and the span is
forwarded unscored, exactly once.
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from otel_toolcall_eval import _sdk
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._ticker import Ticker
from otel_toolcall_eval.checks.cost import tool_latency
from otel_toolcall_eval.checks.same_call import same_call_key, wraps_same_call
from otel_toolcall_eval.checks.verdict import trace_verdict
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.conventions import ConventionRegistry
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
from otel_toolcall_eval.online.contain import Contained
from otel_toolcall_eval.online.enrich import EnrichedSpan, call_attributes, verdict_attributes
from otel_toolcall_eval.online.forward import FanOut
from otel_toolcall_eval.online.held_spans import HeldSpans, Slot
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

_NOT_TURNS: Final = frozenset({"invoke_agent", "create_agent"})


class Pipeline:
    """The per-span work and the per-trace state of one ``ToolCallEvalProcessor``.

    Built by ``build.build`` (which resolves the config's defaults, the judge and the evaluation mode, and
    attaches the queue and the timer); ``lifecycle.Lifecycle`` flushes and shuts it down.
    """

    def __init__(
        self,
        downstream: FanOut,
        contained: Contained,
        config: EvalConfig,
        conventions: ConventionRegistry,
        metrics: EvalMetrics,
        judge: JudgeHook | None,
        *,
        segments: bool,
        grace_seconds: float,
        meter_provider: Any = None,
        logger_provider: Any = None,
    ) -> None:
        self.config = config
        self.conventions = conventions
        self.metrics = metrics
        self.judge = judge
        self.downstream = downstream
        self.contained = contained
        self._forward = downstream.forward
        self._only_on_end = downstream.processors[0].on_end if len(downstream.processors) == 1 else None
        limits = config.limits
        self.scorer = Scorer(config.policy(), key_failed_first_calls=True)  # trace_stats digests failed calls
        self.definitions = DefinitionCache(max_bytes=limits.max_cache_bytes)
        self._max_calls = limits.max_calls_per_trace
        # "segment": a span with a remote parent is part of a trace whose root is in another service (``serve``
        # receiving both): it finishes nothing; the true root does, else the TTL (``finalized_by="segment"``)
        self._segments = segments
        self._config_tools = config.tool_definitions()
        # the root grace window (0: off; then the root's path pays one attribute test)
        self.grace = grace_seconds
        self.store = TraceStore(
            limits.max_traces,
            limits.trace_ttl_seconds,
            self._on_drop,
            max_finished_bytes=limits.max_cache_bytes,
            grace_seconds=grace_seconds,
        )
        # cost, latency, recovery and the tool list (issue 18)
        self._prices = config.pricing.table()
        self._currency = config.pricing.currency if self._prices else None
        self._tool_lists = ToolListChanges()
        self._fingerprints = Fingerprints(limits.max_cache_bytes)
        self._histograms = config.metrics.histograms
        self._gate_of: frozenset[str] | None = None
        self._gate: frozenset[str] | None = None  # the keys that make a span worth a look (session keys included)
        self._work_gate: frozenset[str] | None = None  # the keys a convention or an LLM check reads
        # sessions: a plain span carrying a conversation id is evaluated only while its trace has none noted yet
        sessions = config.sessions
        self._session_keys: tuple[str, ...] = tuple(sessions.attributes) if sessions.enabled else ()
        self._session_gate: frozenset[str] | None = frozenset(self._session_keys) or None
        # trace ids whose conversation id is noted, oldest first, at most ``limits.max_traces`` (no lock: a fork
        # cannot leave one held; a trim that races with an insertion just stops early)
        self.conversation_known: dict[int, None] = {}
        self.sessions: SessionRollup | None = None
        if sessions.enabled:
            self.sessions = SessionRollup(
                step_budget=sessions.step_budget,
                max_sessions=limits.max_sessions,
                idle_seconds=limits.session_idle_seconds,
                meter_provider=meter_provider,
                logger_provider=logger_provider,
                on_error=self._failed,
            )
        # failed tool spans held until their recovery class is known (issue 18; limits.max_held_spans 0: none)
        self.held: HeldSpans | None = None
        if limits.max_held_spans:
            self.held = HeldSpans(
                max_spans=limits.max_held_spans,
                max_per_trace=limits.max_held_spans_per_trace,
                max_seconds=limits.max_hold_seconds,
                forward=self._forward,
                on_unclassified=metrics.record_unclassified,
            )
        self.ticker: Ticker | None = None  # attached by ``build`` (it calls ``lifecycle``) when anything waits
        self.background: BackgroundQueue | None = None  # attached by ``build`` in background mode

    # --- the span path ---------------------------------------------------------------------------------
    def on_end(self, span: ReadableSpan) -> None:
        """The SDK's ``on_end``, bound straight to the face's (never raises into the code that ended the span)."""
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
                try:  # one downstream processor (the usual case): called directly, no frame of the fan-out on
                    only(span)  # the plain path (tests/test_plain_span_path.py counts them)
                except Exception:  # noqa: BLE001
                    self.contained.log.error("downstream.on_end", "downstream on_end failed")
                return
            background = self.background
            # queued: the worker scores and forwards it. ``submit`` raises only before the span is queued (then
            # it is scored here, once; see ``BackgroundQueue.submit``)
            if background is not None and background.submit(span):
                return
        except Exception:  # noqa: BLE001 - never raise into the code that ended the span
            pass
        self.evaluate_and_forward(span)

    def evaluate_and_forward(self, span: ReadableSpan) -> None:
        """Score ``span`` and forward the result (None: held until its recovery class is known, forwarded
        then); on any failure forward it unscored (never raises)."""
        out: ReadableSpan | None = span
        try:
            out = self._evaluate(span)
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

    # --- evaluation ----------------------------------------------------------------------------
    def _evaluate(self, span: ReadableSpan) -> ReadableSpan | None:
        key = _sdk.span_key(span)
        if key is None:
            return span
        trace_id, span_id, parent, remote = key  # ``parent``: the parent's span id, None for a root
        gate = self._gate
        if (
            (parent is None or remote)  # only these pass ``on_end``'s gate without a key a check reads
            and gate is not None
            and not _sdk.carries_any(span, gate)
            and not self.store.knows(trace_id)
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
        if session_gate is not None and not session_gate.isdisjoint(attrs) and trace_id not in self.conversation_known:
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

        state = self.store.get(trace_id)
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
                    state.note_tool_child(parent, inner, self._max_calls)
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
                    if sent is None and record.raw_arguments is None and record.call_id not in state.call_names:
                        # no id the requests named (none recorded, or a server's own JSON-RPC id): the one pending
                        # request of this tool's name, when there is exactly one. A call id a request did name
                        # that carried no arguments borrows nothing: another call's arguments are not its own.
                        sent = _only_request_of(state.call_names, requested, record.name)
                    if record.raw_arguments is None:
                        record.raw_arguments = sent
                    if not requested:
                        state.call_arguments = None
                late = record.convention in LATE_REQUEST_CONVENTIONS
                batch = state.batch_for(record.call_id, record.name, self._max_calls, late, remote)
                score = self.scorer.score(record, state.history, trace_tools=state.tools, batch=batch)
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
                    state.note_tool_child(parent, child, self._max_calls)
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
                    held = self.held
                    # held until its recovery class is known: reserved now, before a later step can decide it
                    if (
                        held is not None
                        and not is_root
                        and stats.waits_for(score.step)
                        and self.store.is_live(trace_id)  # a span after its root: nothing is left to decide it
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

    def _note_prevented(self, trace_id: int, parent: int | None, attrs: dict[str, Any]) -> None:
        """The guard stopped a call (``online.prevented``): remembered for the trace's verdict, and so that a
        framework's own span of that call, ending after the guard's span inside it, is not scored as a call."""
        found = stopped_call(attrs)
        state = self.store.get(trace_id) if found is not None else None
        if state is None or found is None:
            return
        with state.lock:
            if state.prevented is None:
                state.prevented = Prevented()
            state.prevented.note(found[0], parent, found[1], self._max_calls)

    def _claim_prevented(self, state: TraceState, span_id: int, call_id: str | None) -> bool:
        with state.lock:
            return state.prevented is not None and state.prevented.claims(span_id, call_id)

    def _note_segment(self, trace_id: int) -> None:
        """A remote-parented span that is neither a tool nor an LLM span (the local root of a service's part, say
        an MCP server's request span): its trace, if it has tool activity here, waits for the true root. A trace
        without state here gets none (plain remote-parented traffic costs no memory)."""
        state = self.store.get(trace_id, create=False)
        if state is not None:
            with state.lock:
                state.segment = True

    def _hold(self, slot: Slot, span: ReadableSpan, extra: dict[str, Any], attrs: dict[str, Any]) -> None:
        held = self.held
        assert held is not None
        timed = self._start_timer()  # the max hold time holds when no span comes to trigger it: the timer expires
        # the span is the held table's from here: nothing may raise past this (it would be forwarded twice)
        held.fill(slot, span, extra, attrs, not timed)  # never raises; forwards it now if it was decided meanwhile

    def _start_timer(self) -> bool:
        """Start (or wake) the timer; never raises. False when there is none or it cannot start (the interpreter is
        exiting: counted), so what it would release waits for the next span, a flush or shutdown."""
        ticker = self.ticker
        if ticker is None:
            return False
        try:
            ticker.ensure_started()
        except Exception:  # noqa: BLE001
            self._failed("timer.start")
            return False
        return True

    def _decide(self, trace_id: int, decided: Decisions) -> None:
        held = self.held
        if held is None:
            return
        try:
            held.decide(trace_id, decided)
        except Exception:  # noqa: BLE001
            self._failed("held.decide")

    def _observe_llm_span(self, trace_id: int, attrs: dict[str, Any], is_root: bool = False) -> None:
        definitions = tool_definitions(attrs, self.definitions)
        op = attrs.get(A.GEN_AI_OPERATION_NAME)
        not_turn = op in _NOT_TURNS or attrs.get(A.OPENINFERENCE_SPAN_KIND) == "AGENT"
        arguments: dict[str, Any] = {}
        calls = [] if not_turn else requested_calls(attrs, arguments)
        state = self.store.get(trace_id)
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
                self._failed("judge.observe")

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
        if self.grace and self.store.hold_root(trace_id, (span, extra, attrs, failed_step)):
            # the root is the store's now: nothing may raise past here (it would be forwarded twice); the timer ends
            # the window when no span comes to end it
            self._start_timer()
            return None
        state, first = self.store.finish(trace_id)
        return self._root_verdict(trace_id, state, first, span, extra, attrs, failed_step)

    def release_root(self, trace_id: int, state: TraceState) -> None:
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
            self._failed("root.release")
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
                self._failed("judge.trace_done")
        sessions = self.sessions
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
        known = self.conversation_known
        if self._session_gate is None or not known:
            return False
        key = _sdk.span_key(span)  # a dict lookup first: most traces carry no conversation id
        if key is None or key[0] not in known:
            return False
        work = self._work_gate
        # a root, or a span a convention or an LLM check reads: evaluated
        return not (key[2] is None or key[3] or work is None or _sdk.carries_any(span, work))

    def _note_conversation(self, trace_id: int, attrs: dict[str, Any]) -> None:
        """The first conversation id seen on a span of the trace is the trace's (``sessions.attributes``)."""
        cid = conversation_id(attrs, self._session_keys, self.config.limits.max_attribute_length)
        if cid is None:
            return
        state = self.store.get(trace_id)
        assert state is not None
        with state.lock:
            if state.conversation_id is None:
                state.conversation_id = cid
        known = self.conversation_known
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
        sessions = self.sessions
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
            ticker = self.ticker
            if ticker is not None:  # an open session now: the timer emits it once idle, traffic or not
                ticker.ensure_started()
        except Exception:  # noqa: BLE001
            self._failed("sessions.turn")

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
            self.release_root(trace_id, state)
            return
        self.metrics.record_dropped(reason)
        judge = self.judge
        if judge is not None:
            self._safe(lambda: judge.trace_done(trace_id), "judge.trace_done")
        # a trace seen only as remote-parented segments, whose true root never came: its verdict counts here
        self.record_unfinished(trace_id, state, "segment" if reason == "expired" and state.segment else reason)

    def record_unfinished(self, trace_id: int, state: TraceState, reason: str) -> None:
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
            self._failed("judge.offer")
            return False

    def _failed(self, key: str) -> None:
        self.contained.failed(key)

    def _safe(self, fn: Any, key: str) -> Any:
        return self.contained.safe(fn, key)


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


def _scored_client(clients: dict[int, ScoredChild], parent: int | None, record: ToolCallRecord) -> ScoredChild | None:
    """A remote-parented tool span whose parent is a client tool span of the same call scored already (the agent's
    export came first): the call was counted on that span, this one points at it (``same_call_as``)."""
    if parent is None:
        return None
    client = clients.get(parent)
    if client is None or not wraps_same_call(record.name, record.raw_arguments, client.name, client.arguments_key()):
        return None
    return client


def _safe_name(span: Any) -> str:
    try:
        return str(span.name)[:100]
    except Exception:  # noqa: BLE001
        return "?"
