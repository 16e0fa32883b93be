"""Bounded per-trace state: an LRU of traces with a TTL for traces whose root never ends here.

Expired and evicted traces are handed back to the caller (outside the lock) so their verdict still reaches
the metrics. A small record of recently finished traces lets a span that ends after its root (a tool call the
agent did not wait for) be scored against its trace's history instead of starting a second trace; past it, a
larger record of their ids alone (two generations of ``max_traces`` ids each) still keeps such a span from opening
a new state that would expire and be counted a second time: it is scored against a state of its own, kept nowhere.

A root grace window (``grace_seconds``, ``serve.root_grace_seconds``): a root that ends is *held* with its live
state (``hold_root``) for that long, so that spans of the trace arriving meanwhile (another service's, exported on
its own schedule) are counted in its verdict. The held root leaves with its state, exactly once, through
``on_drop``: when its window ends (``expire``: each new trace, the timer, a flush), when the LRU evicts or the TTL
expires its state, at ``release_held`` (a flush) or ``drain`` (shutdown). Roots end in order, so the windows end in
the order they were opened: one ordered dict of deadlines, no second timer.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from mypy_extensions import mypyc_attr

from otel_toolcall_eval import _fork
from otel_toolcall_eval._lru import pop_expired
from otel_toolcall_eval.checks.late_outcome import AwaitingReply, read_replies
from otel_toolcall_eval.checks.late_schema import WaitingCall, validate_waiting
from otel_toolcall_eval.checks.normalize import arguments_key
from otel_toolcall_eval.checks.same_call import same_call_key
from otel_toolcall_eval.checks.schema import ValidatorCache
from otel_toolcall_eval.engine.requested import Conversations
from otel_toolcall_eval.engine.tally import TraceStats
from otel_toolcall_eval.online.matching import Requests
from otel_toolcall_eval.online.metrics import EvalMetrics, TraceCounts
from otel_toolcall_eval.online.prevented import Prevented
from otel_toolcall_eval.records import (
    CallHistory,
    CallScore,
    LateOutcomeVerdict,
    LateSchemaVerdict,
    ToolDefinition,
    ToolReply,
    new_call_history,
)

FINISHED_TRACES: Final = 256  # finished traces remembered for late spans (also bounded in bytes)
WINDOW: Final = "window"  # ``on_drop``'s reason for a held root whose grace window ended
FLUSH: Final = "flush"  # ... released by ``release_held`` (a flush: the exporter must get it now)

# A held root (``TraceStore.hold_root``): the span, the attributes to add, its attribute copy, and its failed step
# when the root is itself a failed call (``processor._finish_trace``); the span is typed loosely (no SDK import here)
HeldRoot = tuple[Any, dict[str, Any], dict[str, Any] | None, int | None]
_KEY_BYTES: Final = 128  # a remembered call: a compact key (at most 64 characters) in a set
_DEFINITION_FACTOR: Final = 8  # a parsed tool definition, per character of its canonical schema
# argument text of calls waiting for their tool's schema (``checks.late_schema``), per trace: a few dozen usual calls
WAITING_BYTES: Final = 8 * 1024


def state_bytes(state: TraceState) -> int:
    """An estimate of what a finished trace's state keeps alive: its remembered calls and its tool definitions
    (shared with the definition cache while that holds them; counted here as if not, an overestimate)."""
    size = 512 + _KEY_BYTES * (state.history.remembered + len(state.client_spans or ()))
    if state.waiting:
        size += 256 * len(state.waiting) + _DEFINITION_FACTOR * state.waiting_bytes
    for d in (state.tools or {}).values():
        size += 256 + _DEFINITION_FACTOR * len(d.schema_key or "")
    return size


@dataclass(slots=True)
class ScoredChild:
    """The latest scored tool span under a parent span: tells a wrapping second instrumentation of the same call
    (``checks.same_call``).

    The compacted key (``same_call_key``) is computed only when a tool span ends around this one, which few do:
    until then the child keeps the parsed arguments (or, when there are none, the raw text), as the call history
    keeps a tool's first call, or the normalised call when the engine made it already (``normalised``).
    """

    name: str
    span_id: int
    arguments: dict[str, Any] | None = None
    raw_arguments: Any = None
    key: str | bytes | None = None
    normalised: str | None = None

    def arguments_key(self) -> str | bytes:
        """``same_call_key`` of the call's ``arguments_key``, computed once."""
        key = self.key
        if key is None:
            normalised = self.normalised
            if normalised is None:
                normalised = arguments_key(self.name, self.arguments, self.raw_arguments)
            key = self.key = same_call_key(normalised)
            self.arguments = self.raw_arguments = self.normalised = None
        return key


@dataclass(slots=True)
class TraceState:
    """What one trace has shown so far: tool definitions, model turns and the call history."""

    history: CallHistory = field(default_factory=CallHistory)
    tools: dict[str, ToolDefinition] | None = None
    # the calls model turns requested, until tool spans answer them (``online.matching``): made by the first turn
    # that requests calls, or the first tool span that ran before any request
    requests: Requests | None = None
    # ``gen_ai.response.id`` of the model calls counted: an SDK that traces itself and an instrumentation of the same
    # client record one request twice (the Anthropic SDK with OpenLLMetry's instrumentation), counted once
    response_ids: set[str] | None = None
    genai: bool = False
    segment: bool = False  # a span with a remote parent was scored here (``remote_parents="segment"``)
    offered: bool = False  # a model turn inside the trace was offered tools (see ``tool_activity``)
    requested: bool = False  # a model turn inside the trace (not its root) requested calls (see ``tool_activity``)
    # calls scored from the requests (``engine.requested``): while every call of the trace is one of these, no tool
    # span ran, and a request's reply is the only evidence of its call's outcome
    request_scored: int = 0
    # those calls by call id, and by tool name, each -> the model span carrying their scores: a tool span of one that
    # arrives after all (another service's, exported later) points there instead of being counted a second time
    request_scored_ids: dict[str, int] | None = None
    request_scored_names: dict[str, list[int]] | None = None
    # the conversations of an instrumentation whose calls carry no ids, matched by position (Haystack's), and the
    # calls they left unmatched where a history broke (``engine.requested.Conversations``)
    conversations: Conversations | None = None
    # tool name -> calls scored while the trace listed no tools (``tool_known`` absent): checked against a list
    # that arrives on a span ending later (Strands' root ``invoke_agent``); bounded like the call history
    unlisted: dict[str, int] | None = None
    listed_late: bool = False  # a tool list arrived after such calls
    # calls whose arguments were scored while no schema of their tool was known, validated when one arrives
    # (``checks.late_schema``); at most ``max_calls_per_trace`` of them and ``WAITING_BYTES`` of their recorded text
    # (``waiting_bytes``)
    waiting: list[WaitingCall] | None = None
    waiting_bytes: int = 0
    late_schema: LateSchemaVerdict | None = None  # the verdicts of those validated so far
    # model call id -> a call that read as a success on a span whose instrumentation cannot record its error flag,
    # until the next request carries its reply (``checks.late_outcome``; at most ``max_calls_per_trace``)
    awaiting_reply: dict[str, AwaitingReply] | None = None
    late_outcome: LateOutcomeVerdict | None = None  # the outcomes read from those replies so far
    # parent span id -> the latest scored tool span under it (bounded by ``max_calls_per_trace``)
    tool_children: dict[int, ScoredChild] | None = None
    # ``remote_parents="segment"``: span id -> a scored client tool span (an MCP client's), its key compacted, for a
    # server span of the same call that arrives after it (another service's export; bounded like the above)
    client_spans: dict[int, ScoredChild] | None = None
    last_seen: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stats: TraceStats | None = None  # cost, latency, recovery, first failure (issue 18), made on first use
    counts: TraceCounts | None = None  # its source and calls not counted yet (``online.metrics``), on first use
    # the root grace window: the root held until it ends (``TraceStore.hold_root``), taken by whoever releases it
    root: HeldRoot | None = None
    finished: bool = False  # the verdict was written: a span scored into this state now is late
    # among the store's live traces (its root has not ended here, or is held for its window): set False, under the
    # store's lock, when it leaves them (a failed call's span is held only while a later step can decide its class)
    live: bool = True
    prevented: Prevented | None = None  # calls the pre-execution guard stopped (``online.prevented``, issue 31)
    # step -> a held call's span while it is scored, until it is built (``held_spans``: the reservation, and what a
    # step decided meanwhile); None when nothing is being held
    holding: dict[int, Any] | None = None

    def trace_counts(self, metrics: EvalMetrics, span: Any) -> TraceCounts:
        """The trace's ``TraceCounts``, made (its resource read) by the first span that needs it."""
        counts = self.counts
        if counts is None:
            with self.lock:
                counts = self.counts
                if counts is None:
                    counts = self.counts = metrics.trace_counts(span)
                    if self.finished:  # a state made for a span after its trace's verdict (``TraceStore.get``):
                        counts.closed = True  # no verdict will count its calls later: they are counted at once
        return counts

    def add_tools(self, definitions: list[ToolDefinition]) -> None:
        """Copy on write: a reader holding ``tools`` (the judge, on another thread) never sees it change; the
        usual turn repeats the same definitions (one parse cache) and copies nothing."""
        tools = self.tools
        if tools is None:
            self.listed_late = bool(self.unlisted)
        elif all(tools.get(d.name) is d for d in definitions):
            return
        updated = dict(tools) if tools else {}
        for d in definitions:
            if d.parameters is not None or d.name not in updated:  # a bare name never hides a schema
                updated[d.name] = d
        self.tools = updated

    def note_unlisted(self, name: str, max_entries: int) -> None:
        """A call scored while no tool list was known."""
        unlisted = self.unlisted
        if unlisted is None:
            unlisted = self.unlisted = {}
        if name in unlisted or len(unlisted) < max_entries:
            unlisted[name] = unlisted.get(name, 0) + 1

    def unlisted_calls(self, configured: dict[str, ToolDefinition]) -> int:
        """Of the calls scored before the tool list arrived, those of tools not on it (nor configured)."""
        if not self.listed_late or not self.unlisted:
            return 0
        tools = self.tools or {}
        return sum(n for name, n in self.unlisted.items() if name not in tools and name not in configured)

    def note_waiting(self, score: CallScore, max_entries: int) -> None:
        """A call whose arguments wait for their tool's schema (``checks.late_schema.waits_for_schema``)."""
        waiting = self.waiting
        if waiting is None:
            waiting = self.waiting = []
        arguments = score.arguments
        raw = score.raw_arguments
        size = len(raw) if isinstance(raw, str) else 512  # the recorded text's length (a parsed object: a guess)
        # the state keeps no argument text but these, and only up to WAITING_BYTES a trace: past it a call is not
        # validated late (the root's ``trace.late_schema.checked`` says how many were)
        if arguments is not None and len(waiting) < max_entries and self.waiting_bytes + size <= WAITING_BYTES:
            waiting.append(WaitingCall(score.step, score.name, arguments))
            self.waiting_bytes += size

    def validate_waiting(self, cache: ValidatorCache, max_errors: int, max_length: int) -> None:
        """Definitions arrived: the waiting calls of the tools they give a schema are validated now."""
        waiting = self.waiting
        if not waiting or not self.tools:
            return
        still, self.late_schema = validate_waiting(
            waiting, self.tools, cache, self.late_schema, max_errors=max_errors, max_length=max_length
        )
        if len(still) != len(waiting):
            self.waiting = still or None
            if not still:
                self.waiting_bytes = 0

    def note_awaiting_reply(self, call_id: str, score: CallScore, max_entries: int, digest: bytes | None) -> bool:
        """A call that read as a success on a span that cannot record its error: its reply decides
        (``checks.late_outcome``; ``digest``: its normalised form's). False: past the bound, it is not read."""
        awaiting = self.awaiting_reply
        if awaiting is None:
            awaiting = self.awaiting_reply = {}
        if len(awaiting) < max_entries:
            awaiting[call_id] = AwaitingReply(score.step, score.name, digest)
            return True
        return False

    def read_awaited_replies(
        self, replies: list[ToolReply], input_error_types: Any, max_length: int
    ) -> list[tuple[int, Any]]:
        """A model span's input carried these replies: the waiting calls they answer are read now. Returns each
        answered call's step and what its reply said (None: nothing failed), for its held span."""
        awaiting = self.awaiting_reply
        answered: list[tuple[int, Any]] = []
        if awaiting:
            self.late_outcome = read_replies(
                awaiting, replies, self.late_outcome, input_error_types, max_length, answered, self.history
            )
            if not awaiting:
                self.awaiting_reply = None
        return answered

    def unanswered(self) -> list[tuple[int, Any]]:
        """The trace ends: the steps of the calls still waiting for their reply (their held spans go as they read)."""
        awaiting = self.awaiting_reply
        return [(call.step, None) for call in awaiting.values()] if awaiting else []

    def note_request_scored(self, call_id: str, name: str, span_id: int, max_entries: int) -> None:
        """A call scored from the requests, its scores on the model span ``span_id`` (``engine.requested``)."""
        self.request_scored += 1
        ids, names = self.request_scored_ids, self.request_scored_names
        if ids is None or names is None:
            ids, names = self.request_scored_ids, self.request_scored_names = {}, {}
        if len(ids) < max_entries:
            ids[call_id] = span_id
            names.setdefault(name, []).append(span_id)

    def request_scored_span(self, call_id: str | None, name: str, remote: bool) -> ScoredChild | None:
        """The model span carrying the scores of this tool span's call, when it was scored from the requests before
        the span arrived: by its call id, or (no id, or one no request named: a server's JSON-RPC id) by its tool's
        name, once each, unless a request of that name still waits for its span (a remote span: either way)."""
        ids, names = self.request_scored_ids, self.request_scored_names
        if not ids or names is None:
            return None
        span_id = ids.pop(call_id, None) if call_id is not None else None
        requests = self.requests
        if (
            span_id is None
            # no id a waiting request named (none, or a server's JSON-RPC id)
            and (requests is None or call_id not in requests.call_names)
            and names.get(name)
            # a request of its name waits: that one is its own
            and (remote or requests is None or not requests.pending_names.get(name))
        ):
            span_id = names[name].pop(0)
        elif span_id is not None and span_id in names.get(name, ()):
            names[name].remove(span_id)
        return None if span_id is None else ScoredChild(name, span_id)

    @property
    def requests_only(self) -> bool:
        """No tool span was scored in the trace (every call so far came from the requests), and the guard stopped
        none (its spans are tool activity: a stopped call's reply is not a call that ran)."""
        return self.history.calls == self.request_scored and self.prevented is None

    @property
    def tool_activity(self) -> bool:
        """Tool calls scored, or requested by or offered to a model turn of an agent: only such a trace gets a
        verdict (an agent-creation trace, or an instrumented client's own root span, does not: CrewAI's event
        listener leaves the OpenAI instrumentor's chat spans outside the crew's trace, each a root of its own)."""
        return self.history.calls > 0 or self.requested or self.offered or self.prevented is not None

    def seen_response(self, response_id: str, max_entries: int) -> bool:
        """Whether a model call with this response id was counted already (then this span is the same request);
        remembers it otherwise (at most ``max_entries`` per trace: past them a repeat counts again)."""
        seen = self.response_ids
        if seen is None:
            seen = self.response_ids = set()
        elif response_id in seen:
            return True
        if len(seen) < max_entries:
            seen.add(response_id)
        return False


def new_trace_state(now: float) -> TraceState:
    """``TraceState(last_seen=now)``, once per trace, without the Python frame of the dataclass's generated
    ``__init__`` (``records.new_trace_verdict`` says why). ``tests/checks/test_checks.py`` checks it equals the
    dataclass's own construction, field by field."""
    state = TraceState.__new__(TraceState)
    state.history = new_call_history()
    state.tools = None
    state.requests = None
    state.response_ids = None
    state.genai = False
    state.segment = False
    state.offered = False
    state.requested = False
    state.request_scored = 0
    state.request_scored_ids = None
    state.request_scored_names = None
    state.conversations = None
    state.unlisted = None
    state.listed_late = False
    state.waiting = None
    state.waiting_bytes = 0
    state.late_schema = None
    state.awaiting_reply = None
    state.late_outcome = None
    state.tool_children = None
    state.client_spans = None
    state.last_seen = now
    state.lock = threading.Lock()
    state.stats = None
    state.counts = None
    state.root = None
    state.finished = False
    state.live = True
    state.prevented = None
    state.holding = None
    return state


@mypyc_attr(native_class=False)
class TraceStore:
    """Live traces (LRU, TTL), roots held for their grace window, and bounded records of finished traces (their
    states, and more of their ids); thread-safe and fork-safe."""

    def __init__(
        self,
        max_traces: int,
        ttl_seconds: float,
        on_drop: Callable[[int, TraceState, str], None],
        clock: Callable[[], float] = time.monotonic,
        max_finished_bytes: int = 16 * 1024 * 1024,
        grace_seconds: float = 0.0,
    ) -> None:
        self._max = max_traces
        self._max_finished_bytes = max_finished_bytes
        self._ttl = ttl_seconds
        self._grace = grace_seconds
        self._on_drop = on_drop
        self._clock = clock
        self._init_state()
        _fork.reinit_after_fork(self)

    def _init_state(self) -> None:
        self._items: OrderedDict[int, TraceState] = OrderedDict()
        self._finished: OrderedDict[int, tuple[TraceState, int]] = OrderedDict()
        self._finished_bytes = 0
        # trace id -> when its held root's window ends, in that order (every entry's state is in ``_items``)
        self._closing: OrderedDict[int, float] = OrderedDict()
        # ids of finished traces, two generations of at most ``max_traces`` each: the older is dropped whole when the
        # newer is full (sets of ints: a fixed ~100 bytes per id, no per-entry order to keep)
        self._recent: set[int] = set()
        self._older: set[int] = set()
        self._lock = threading.Lock()

    def _after_fork_in_child(self) -> None:
        """The parent's traces are the parent's to finish (its spans are not forwarded twice, held roots neither):
        start empty, with a lock no thread of the parent can be holding."""
        self._init_state()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def held_roots(self) -> int:
        return len(self._closing)

    @property
    def finished_ids(self) -> int:
        return len(self._recent) + len(self._older)

    def get(self, trace_id: int, create: bool = True) -> TraceState | None:
        """The trace's live state, else its finished one (a span that ended after its root), else, for a trace
        remembered as finished only by its id, a state of its own (``finished``, kept nowhere), else a new one."""
        now = self._clock()
        items = self._items
        with self._lock:
            state = items.get(trace_id)
            if state is not None:  # the usual case: a live trace, its state moved to the young end
                items.move_to_end(trace_id)
                state.last_seen = now
                return state
            dropped: list[tuple[int, TraceState, str]] = []
            finished = self._finished.get(trace_id)
            state = None if finished is None else finished[0]
            if state is None and create:
                if trace_id in self._recent or trace_id in self._older:
                    return TraceState(last_seen=now, finished=True)
                self._expire(now, dropped)
                # make room first: a reader of ``len`` on another thread (the background worker fills the
                # store) never sees more than the limit, not even between two statements
                while len(items) >= self._max:
                    tid, old = items.popitem(last=False)
                    self._leave(tid, old)
                    dropped.append((tid, old, "evicted"))
                state = new_trace_state(now)
                items[trace_id] = state
            if state is not None:
                state.last_seen = now
        for item in dropped:
            self._on_drop(*item)
        return state

    def knows(self, trace_id: int) -> bool:
        """Whether the trace has state here, live or finished (dict lookups, no lock: see ``is_live``)."""
        return trace_id in self._items or trace_id in self._finished

    def is_live(self, trace_id: int) -> bool:
        """Whether the trace's root has not ended here yet, or is held for its window (a dict lookup, no lock: a
        racing change is as good as one just before or after; a state says it of itself: ``TraceState.live``)."""
        return trace_id in self._items

    def finish(self, trace_id: int) -> tuple[TraceState | None, bool]:
        """The trace's root ended: its state, and whether this is the first time (False: a trace that finished
        here before, whose state late spans kept adding to, or whose root is held: a second root of the trace).
        The state is remembered as finished."""
        with self._lock:
            items = self._items
            state = items.get(trace_id)
            if state is None:
                finished = self._finished.get(trace_id)
                return (None, False) if finished is None else (finished[0], False)
            if state.root is not None:  # its first root is held for its window: that one writes the verdict
                return state, False
            del items[trace_id]
            self._remember_finished(trace_id, state)
            return state, True

    def hold_root(self, trace_id: int, root: HeldRoot) -> bool:
        """Hold the trace's root for the grace window; False when there is no live state to hold it with (or one
        root is held already): the caller finishes the trace at once."""
        with self._lock:
            state = self._items.get(trace_id)
            if state is None or state.root is not None:
                return False
            state.root = root
            self._closing[trace_id] = self._clock() + self._grace
            return True

    def _leave(self, trace_id: int, state: TraceState) -> None:
        """``state`` left ``_items`` (evicted, expired, its window ended): a held root's trace is finished."""
        state.live = False
        if state.root is not None:
            self._closing.pop(trace_id, None)
            self._remember_finished(trace_id, state)

    def _remember_finished(self, trace_id: int, state: TraceState) -> None:
        """Bounded in traces and in bytes (``state_bytes`` when it finished; late spans add a few calls); the id
        is remembered longer. A state whose root is held is marked finished by whoever takes the root (under the
        state's lock, so a span scored meanwhile is either in the verdict or counted late)."""
        state.live = False
        if state.root is None:
            state.finished = True
        recent = self._recent
        if len(recent) >= self._max:
            self._older = recent
            recent = self._recent = set()
        recent.add(trace_id)
        size = state_bytes(state)
        if size > self._max_finished_bytes:
            return
        finished = self._finished
        finished[trace_id] = (state, size)
        self._finished_bytes += size
        while len(finished) > FINISHED_TRACES or self._finished_bytes > self._max_finished_bytes:
            _, (_, freed) = finished.popitem(last=False)
            self._finished_bytes -= freed

    def expire(self) -> None:
        dropped: list[tuple[int, TraceState, str]] = []
        with self._lock:
            self._expire(self._clock(), dropped)
        for item in dropped:
            self._on_drop(*item)

    def release_held(self) -> None:
        """Every held root now, its window cut short (a flush: the exporter must get every span)."""
        dropped: list[tuple[int, TraceState, str]] = []
        with self._lock:
            closing, items = self._closing, self._items
            while closing:
                tid, _ = closing.popitem(last=False)
                state = items.pop(tid)
                self._remember_finished(tid, state)
                dropped.append((tid, state, FLUSH))
        for item in dropped:
            self._on_drop(*item)

    def drain(self) -> list[tuple[int, TraceState]]:
        """Every live state (held roots' too: the caller releases them), the records of finished ones cleared."""
        with self._lock:
            items = list(self._items.items())
            for _, state in items:
                state.live = False
            self._items.clear()
            self._closing.clear()
            self._finished.clear()
            self._finished_bytes = 0
            self._recent, self._older = set(), set()
        return items

    def _expire(self, now: float, dropped: list[tuple[int, TraceState, str]]) -> None:
        items = self._items
        # windows end in the order they opened (one grace time, a monotonic clock)
        for tid, _ in pop_expired(self._closing, now, _due):
            state = items.pop(tid)
            self._remember_finished(tid, state)
            dropped.append((tid, state, WINDOW))
        # entries are in order of last access, so expired ones sit at the front
        for tid, state in pop_expired(items, now - self._ttl, _last_seen):
            self._leave(tid, state)
            dropped.append((tid, state, "expired"))


def _due(due: float) -> float:
    return due


def _last_seen(state: TraceState) -> float:
    return state.last_seen
