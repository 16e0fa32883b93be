"""Score a call: a tool span's record against its trace's state, returned as a ``CallResult`` the pipeline writes
and forwards (it never forwards anything itself).

Under the trace's lock: a second instrumentation of a call scored already (``checks.same_call``: it points at that
span, ``same_call_as``), the request it answers claimed (``claim_request``: the batch that issued the call, the
arguments the model sent when the tool span records none), the engine's scores and the trace's running numbers in
one call (``engine.tally.score_and_count``: latency, first failure, recovery); a failed call's slot among the held
spans is reserved there, in the trace's state (``TraceState.holding``), before a later step of the trace can decide
its class, and so is the slot of a call that read as a success on a span that cannot record its error (it waits for
its reply: ``checks.late_outcome``); the pipeline holds the span once it is built (``HeldSpans.hold``). Outside
it: the held spans a call decided go, and the call is counted in the metrics (a call waiting for its reply when its
held span is settled, with the reply's outcome).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.checks.late_schema import waits_for_schema
from otel_toolcall_eval.checks.same_call import wraps_same_call
from otel_toolcall_eval.conventions.builtin import LATE_REQUEST_CONVENTIONS
from otel_toolcall_eval.conventions.shapes import shape_for
from otel_toolcall_eval.engine import Scorer
from otel_toolcall_eval.engine.call import call_digest_of
from otel_toolcall_eval.engine.tally import Decisions, new_trace_stats, score_and_count, tool_latency
from otel_toolcall_eval.online.contain import Contained
from otel_toolcall_eval.online.held_spans import HeldSpans, decide
from otel_toolcall_eval.online.matching import Requests
from otel_toolcall_eval.online.metrics import EvalMetrics, TraceCounts
from otel_toolcall_eval.online.prevented import Prevented, stopped_call
from otel_toolcall_eval.online.trace_state import ScoredChild, TraceState, TraceStore
from otel_toolcall_eval.records import CallScore, Outcome, ParseStatus, ToolCallRecord, ToolDefinition


class CallResult:
    """What scoring one tool span gave: the attributes its copy carries, and for the pipeline what comes next."""

    __slots__ = ("extra", "failed_step", "held_step", "late", "score", "tools")

    def __init__(
        self,
        extra: dict[str, Any],
        score: CallScore | None = None,
        tools: Mapping[str, ToolDefinition] | None = None,
        held_step: int | None = None,
        failed_step: int | None = None,
        late: Counted | None = None,
    ) -> None:
        self.extra = extra
        self.score = score  # None: not a call of its own (the same call as a scored span, or a stopped call)
        self.tools = tools  # the trace's tools when it was scored (a snapshot that never changes)
        # reserved among the held spans (``TraceState.holding``): the span waits for its recovery class, or its reply
        self.held_step = held_step
        self.failed_step = failed_step  # the call failed (its step): the trace's end decides a root's class
        # the slot waits for the call's reply (``checks.late_outcome``): not counted nor offered to the hooks yet;
        # what ``EvalMetrics.on_call`` takes besides the score, for when the reply settles it (``held_spans``)
        self.late = late


# the metrics' arguments of a call counted when its held span is settled: its trace's counts, scope, latency
Counted = tuple[TraceCounts, str, float | None]


class CallStage:
    """Scores tool spans; built once per pipeline from the config."""

    def __init__(
        self,
        scorer: Scorer,
        store: TraceStore,
        metrics: EvalMetrics,
        held: HeldSpans | None,
        contained: Contained,
        *,
        max_calls: int,
        segments: bool,
        histograms: bool,
    ) -> None:
        self.scorer = scorer
        self.store = store
        self.metrics = metrics
        self.held = held
        self.contained = contained
        self._max_calls = max_calls
        # "segment": a span with a remote parent is part of a trace whose root is in another service
        self._segments = segments
        self._histograms = histograms
        # the last instrumentation scope seen and whether its shape row records no reply's error flag: in-process
        # every span of an instrumentation has the same scope object, so its row is looked up once, then one
        # identity test per call (a tuple swapped whole: safe between threads)
        self._scope_row: tuple[Any, bool] | None = None

    def score(
        self,
        state: TraceState,
        span: ReadableSpan,
        record: ToolCallRecord,
        trace_id: int,
        span_id: int,
        parent: int | None,
        remote: bool,
        is_root: bool,
        attrs: dict[str, Any],
    ) -> CallResult:
        if state.prevented is not None and _claim_prevented(state, span_id, record.call_id):
            # a call that never ran: no scores (``online.prevented``)
            return CallResult({A.CONVENTION: record.convention, A.GUARD_PREVENTED: True})
        max_calls = self._max_calls
        decided: Decisions | None = None
        held_step: int | None = None
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
                    _note_tool_child(state, parent, inner, max_calls)
            elif (
                remote
                and state.client_spans
                and (inner := _scored_client(state.client_spans, parent, record)) is not None
            ):
                score = None  # the client's span of this call came first (the agent's export) and carries its scores
            elif state.request_scored and (inner := state.request_scored_span(record.call_id, record.name, remote)):
                score = None  # scored from the requests before this span arrived: that model span carries it
            else:
                requests = state.requests
                model_id: str | None = None  # the model's id of this call, where a request named it
                if requests is None:  # no turn requested a call yet: this one is remembered as answered early
                    requests = state.requests = Requests()
                elif requests.call_arguments:
                    model_id = _borrow_requested(requests, record)
                elif record.call_id is not None and record.call_id in requests.call_names:
                    model_id = record.call_id
                late = record.convention in LATE_REQUEST_CONVENTIONS
                batch = claim_request(requests, record.call_id, record.name, max_calls, late, remote)
                stats = state.stats
                if stats is None:
                    stats = state.stats = new_trace_stats()
                # scored against the trace's history and counted in its numbers, in one call (``engine.tally``)
                score, decided = score_and_count(
                    self.scorer, record, state.history, stats, max_calls, state.tools, batch
                )
                if score.tool_known is None and state.tools is None:
                    state.note_unlisted(record.name, max_calls)
                # its schema may come on a span that ends later (checks.late_schema; a call with a schema does not)
                if score.schema_source is None and waits_for_schema(score):
                    state.note_waiting(score, max_calls)
                held = self.held
                if (
                    model_id is not None
                    and score.outcome is Outcome.SUCCESS
                    and self._no_error_flag(span)
                    # its reply decides (checks.late_outcome); its span waits for it (as a failed one, below)
                    and state.note_awaiting_reply(model_id, score, max_calls, _digest(score))
                    and held is not None
                    and not is_root
                    and state.live
                ):
                    held_step = _reserve(state, score.step, True)
                if parent is not None:  # a server's span of the call may come later when this is its client's
                    client = self._segments and span.kind is SpanKind.CLIENT
                    _note_scored(state, parent, span_id, score, client, max_calls)
                # a failed call is held until its recovery class is known: reserved now, before a later step can
                # decide it (a span after its root, or of a state dropped: nothing is left to decide it; ``live`` is
                # read without the store's lock: a racing change is as good as one just before or after). It waits
                # for its reaction when ``on_call`` kept it pending (past the bound it did not).
                if (
                    held is not None
                    and score.outcome is not Outcome.SUCCESS
                    and not is_root
                    and state.live
                    and (pending := stats.pending)
                    and pending[-1].step == score.step
                ):
                    held_step = _reserve(state, score.step, False)
            tools = state.tools
        if decided:  # earlier failed calls this call reacted to: their held spans go first, with their class
            decide(self.held, state, trace_id, decided, self.contained)
        metrics = self.metrics
        counted: Counted | None = None  # set when its held span waits for its reply
        if score is None:
            assert inner is not None
            extra: dict[str, Any] = {A.CONVENTION: record.convention, A.SAME_CALL_AS: f"{inner.span_id:016x}"}
        else:
            counts = state.counts  # the trace's source: its calls are counted with it (made by its first span)
            if counts is None:
                counts = state.trace_counts(metrics, span)
            scope = span.instrumentation_scope  # the self-check of the scope's shape (toolcall_eval.coverage.suspect)
            scope_name = scope.name if scope is not None else "-"
            seconds = tool_latency(record.start_ns, record.end_ns) if self._histograms else None
            if held_step is not None and score.outcome is Outcome.SUCCESS:  # counted with the outcome its reply gives
                counted = (counts, scope_name, seconds)
            else:
                metrics.on_call(score, record.convention, record.result_recorded, counts, attrs, scope_name, seconds)
            extra = call_attributes(score, record.convention)
        if after_verdict:
            metrics.record_late()
            extra[A.LATE] = True
        if score is None:
            return CallResult(extra)
        failed_step = score.step if score.outcome is not Outcome.SUCCESS else None
        return CallResult(extra, score, tools, held_step, failed_step, counted)

    def _no_error_flag(self, span: ReadableSpan) -> bool:
        """The span's instrumentation cannot record a reply's error flag (its shape row, ``records_error_flag``)."""
        scope = span.instrumentation_scope
        last = self._scope_row
        if last is None or last[0] is not scope:
            shape = shape_for(scope)
            last = self._scope_row = (scope, shape is not None and not shape.records_error_flag)
        return last[1]

    def note_prevented(self, state: TraceState, parent: int | None, attrs: dict[str, Any]) -> None:
        """The guard's span of a call it stopped (``online.prevented``): remembered for the trace's verdict, and so
        that a framework's own span of that call, ending after the guard's span inside it, is not scored."""
        found = stopped_call(attrs)
        if found is None:
            return
        with state.lock:
            if state.prevented is None:
                state.prevented = Prevented()
            state.prevented.note(found[0], parent, found[1], self._max_calls)


# ``Enum.value`` is a Python-level property; a dict lookup is not (this runs for every tool span)
_OUTCOME_TEXT: dict[Outcome, str] = {o: o.value for o in Outcome}


def call_attributes(score: CallScore, convention: str) -> dict[str, Any]:
    """The ``toolcall_eval.*`` attributes of one tool span; absent scores are not written."""
    out: dict[str, Any] = {
        A.CONVENTION: convention,
        A.OUTCOME: _OUTCOME_TEXT[score.outcome],
        A.STEP: score.step,
        A.DUPLICATE: score.duplicate,
        A.REPEATED_FAILURE: score.repeated_failure,
    }
    if score.parse_ok is not None:
        out[A.PARSE_OK] = score.parse_ok
    if score.parse_status is ParseStatus.OVERSIZED:
        out[A.ARGUMENTS_OVERSIZED] = True
    if score.tool_known is not None:
        out[A.TOOL_KNOWN] = score.tool_known
    if score.schema_valid is not None:
        out[A.SCHEMA_VALID] = score.schema_valid
        if score.schema_errors:
            out[A.SCHEMA_ERRORS] = list(score.schema_errors)
    if score.undeclared_arguments:
        out[A.UNDECLARED_ARGUMENTS] = list(score.undeclared_arguments)
    if score.schema_source is not None:
        out[A.SCHEMA_SOURCE] = score.schema_source
    if score.schema_drift is not None:
        out[A.SCHEMA_DRIFT] = score.schema_drift
    if score.error_source is not None:
        out[A.ERROR_SOURCE] = score.error_source
    if score.batch is not None:
        out[A.BATCH] = score.batch
    if score.over_budget is not None:
        out[A.OVER_BUDGET] = score.over_budget
    if score.violations:
        out[A.VIOLATIONS] = list(score.violations)
    return out


def _digest(score: CallScore) -> bytes | None:
    """The call's normalised form, for a failure its reply may report later (``checks.late_outcome``); None when
    its arguments were not recorded (two such calls are never the same: ``engine.call``)."""
    return None if score.parse_status is ParseStatus.ABSENT else call_digest_of(score)


def _note_scored(
    state: TraceState, parent_span_id: int, span_id: int, score: CallScore, client: bool, max_entries: int
) -> None:
    """A scored tool span under ``parent_span_id``: a span ending around it may be a second instrumentation of the
    same call (``tool_children``); ``client``: an MCP client's span whose server's span may come later
    (``client_spans``). Under the trace's lock."""
    known_key = score.arguments_key  # normalised already when the tool was called before
    if known_key is not None:
        child = new_scored_child(score.name, span_id, None, None, None, known_key)
    elif score.arguments is not None:
        child = new_scored_child(score.name, span_id, score.arguments, None, None)
    else:
        child = new_scored_child(score.name, span_id, None, score.raw_arguments, None)
    _note_tool_child(state, parent_span_id, child, max_entries)
    if client:
        clients = state.client_spans
        if clients is None:
            clients = state.client_spans = {}
        if len(clients) < max_entries:
            child.arguments_key()  # compacted now: the state never keeps argument text
            clients[span_id] = child


def new_scored_child(
    name: str,
    span_id: int,
    arguments: dict[str, Any] | None,
    raw_arguments: Any,
    key: str | bytes | None,
    normalised: str | None = None,
) -> ScoredChild:
    """The call stage's constructor of a ``ScoredChild`` (one per scored tool span under a parent): the slots set
    by name, without the Python frame of the dataclass's generated ``__init__`` (``records.new_call_score``), nor a
    move into ``trace_state`` on the span's walk.
    ``tests/checks/test_checks.py`` checks that it sets every field."""
    child = ScoredChild.__new__(ScoredChild)
    child.name = name
    child.span_id = span_id
    child.arguments = arguments
    child.raw_arguments = raw_arguments
    child.key = key
    child.normalised = normalised
    return child


def _reserve(state: TraceState, step: int, waits_reply: bool) -> int:
    """A held call's step reserved in its trace's state, under the trace's lock (``held_spans.HeldSpans.hold`` takes
    it into the table once the span is built; a decision meanwhile is kept beside it)."""
    holding = state.holding
    if holding is None:
        holding = state.holding = {}
    holding[step] = waits_reply
    return step


def _note_tool_child(state: TraceState, parent_span_id: int, child: ScoredChild, max_entries: int) -> None:
    children = state.tool_children
    if children is None:
        children = state.tool_children = {}
    if len(children) < max_entries:
        children[parent_span_id] = child


def _claim_prevented(state: TraceState, span_id: int, call_id: str | None) -> bool:
    with state.lock:
        return state.prevented is not None and state.prevented.claims(span_id, call_id)


def _borrow_requested(requests: Requests, record: ToolCallRecord) -> str | None:
    """The arguments the model sent for this call id: the evidence when the tool span records none; claimed either
    way (kept, they would stay for the trace's life: ~700 bytes a trace). Under the trace's lock. Returns the
    model's id of the call: its own when a request named it, else the one of the request it borrowed from."""
    requested = requests.call_arguments
    assert requested is not None
    call_id = record.call_id
    model_id = call_id if call_id is not None and call_id in requests.call_names else None
    sent = requested.pop(call_id, None) if call_id is not None else None
    if sent is None and record.raw_arguments is None and model_id is None:
        # no id the requests named (none recorded, or a server's own JSON-RPC id): the one pending request of this
        # tool's name, when there is exactly one. A call id a request did name that carried no arguments borrows
        # nothing: another call's arguments are not its own.
        model_id = _only_request_of(requests.call_names, requested, record.name)
        if model_id is not None:
            sent = requested.pop(model_id)
    if record.raw_arguments is None:
        record.raw_arguments = sent
    if not requested:
        requests.call_arguments = None
    return model_id


# --- claiming a request: the call stage's side of request matching (``online.matching``) ---------------------
def claim_request(
    requests: Requests,
    call_id: str | None,
    name: str,
    max_early: int = 0,
    late: bool = False,
    remote: bool = False,
) -> int | None:
    """The turn that issued this call (its parallel batch), its request claimed: by call id, else the earliest
    unclaimed request of this name. Under the trace's lock; here beside ``_borrow_requested`` (the arguments the
    model sent), so a call claims what its request left in one place, without a move into ``matching``.

    Spans reach the engine in end order, and a tool span can come before the model call that asked for it:
    the JS SDK takes each span's start from Date.now() in whole milliseconds (a sub-millisecond tool then
    "ends" before its request), and separate exports, a Collector or another service's exporter reorder too.
    So a call id no request named yet, with no request of its name to claim, is remembered as answered
    (``max_early`` bounds how many; 0 for off): its request may still come. A ``remote`` span (its parent is in
    another service: an MCP server's) is remembered by its name instead, since its id is the server's own (a
    JSON-RPC id), never the model's: the next request of that name is answered. ``late`` is for conventions
    whose model-call span always ends after the tool span it caused (the Vercel AI SDK's legacy spans): such
    an id claims no other request by name once the requests came with ids."""
    pending = requests.pending_names.get(name)
    batches = requests.call_batches
    if call_id is not None and call_id in batches:
        batch = batches.pop(call_id)
        names = requests.call_names
        names.pop(call_id, None)
        if pending and batch in pending:
            pending.remove(batch)
            if not pending:
                _answered(requests, name)
        if not batches:  # every request answered: a dict keeps its grown table after pops, a cleared one not
            batches.clear()
            if not names:
                names.clear()
        return batch
    claims_none = late and requests.identified and call_id is not None
    if max_early and (claims_none or not pending):
        _note_early(requests, call_id, name, remote, max_early)
    if pending and not claims_none:
        batch = pending.pop(0)
        if not pending:
            _answered(requests, name)
        if requests.call_names:  # the request's own id, if it had one: no reply scores that call again
            _claim_id(requests, name, batch)
        return batch
    return None


def _claim_id(requests: Requests, name: str, batch: int) -> None:
    names = requests.call_names
    for call_id, named in names.items():
        if named == name and requests.call_batches.get(call_id) == batch:
            del names[call_id]
            del requests.call_batches[call_id]
            return


def _answered(requests: Requests, name: str) -> None:
    """Every request of ``name`` is claimed: its entry goes (the dict's table too, once it is empty)."""
    names = requests.pending_names
    del names[name]
    if not names:
        names.clear()


def _note_early(requests: Requests, call_id: str | None, name: str, remote: bool, max_early: int) -> None:
    if remote:
        names = requests.early_names
        if names is None:
            names = requests.early_names = {}
        if len(names) < max_early or name in names:
            names[name] = min(names.get(name, 0) + 1, max_early)
    elif call_id is not None:
        early = requests.answered_early
        if early is None:
            early = requests.answered_early = set()
        if len(early) < max_early:
            early.add(call_id)


def _only_request_of(names: dict[str, str], requested: dict[str, Any], name: str) -> str | None:
    """The id of the one requested call of ``name`` whose arguments are not yet claimed, or None when there are none
    or several (which of them ran is then unknown: nothing is borrowed)."""
    found = None
    for call_id, requested_name in names.items():
        if requested_name == name and call_id in requested:
            if found is not None:
                return None
            found = call_id
    return found


def _scored_client(clients: dict[int, ScoredChild], parent: int | None, record: ToolCallRecord) -> ScoredChild | None:
    """A remote-parented tool span whose parent is a client tool span of the same call scored already (the agent's
    export came first): the call was counted on that span, this one points at it (``same_call_as``)."""
    if parent is None:
        return None
    client = clients.get(parent)
    if client is None or not wraps_same_call(record.name, record.raw_arguments, client.name, client.arguments_key()):
        return None
    return client
