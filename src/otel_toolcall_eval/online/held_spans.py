"""Tool spans held back until what follows decides what they carry: a failed call's recovery class (issue 18), or
the outcome of a call that read as a success on a span that cannot record its error (issue 26).

A failed call's class (``checks.recovery``) is decided by the step after it (the next call or batch, the next
model turn) or by the trace's end (its root, its state dropped, shutdown), all after the failed span ended. So
the processor does not forward a failed span's enriched copy at once: it waits here and goes out, carrying
``toolcall_eval.recovery.class``, when the class is known. Only failed calls wait (the common path keeps no
state here), and waiting is bounded: ``limits.max_held_spans`` at once, ``limits.max_held_spans_per_trace``
per trace, each at most ``limits.max_hold_seconds``. A span a bound releases first (or a flush, which must
hand everything to the exporter) goes out without the class, counted in ``toolcall_eval.recovery.unclassified``
by reason; the root still counts its class.

The second reason: a call that read as a success on a span whose instrumentation cannot record a reply's error
flag (its shape row, ``records_error_flag``: the MCP SDK's client spans) waits for the reply the next model request
carries back for its call id (``checks.late_outcome``). Its slot is reserved with ``waits_reply``; ``answer`` takes
it out with what the reply said, and the slot's ``settle`` (the pipeline's: the outcome written on the copy, the
call counted in the metrics and offered to the ``on_call_*`` hooks, once) runs before the span is built. Such a
call is counted and offered only then, with its final outcome. Released any other way (a bound, a flush, the
trace's end with no reply: ``TRACE_END``), it goes out as it read, counted in ``toolcall_eval.late_outcome.unread``
by reason, and settled as read. Both reasons share the table and its bounds. A settle runs on the thread that
releases the slot: the scoring one, or the timer's when ``max_hold_seconds`` does (the hooks are thread-safe: inline
mode calls them from every application thread).

Exactly once: the call stage *reserves* a held call's step in its trace's state (``TraceState.holding``) under
the trace's lock while it scores the call, before any later step of the trace can decide it. ``hold``, once the
span's parts are built, moves the step into the table (``reserve``, under the trace's lock too) and *fills* the
slot. So a decision (``decide``, ``answer``: they look under the trace's lock) finds a step either still in its
trace's state, where it is kept for ``hold`` to forward the span with at once, or in the table. Every slot leaves
the table under this module's lock exactly once (decided, expired, flushed), and whoever takes it out forwards the
span; a slot taken out before it was filled is only marked, and ``fill`` then forwards the span itself. Spans are
forwarded outside the locks (a downstream export may take its time), and the enriched copy is built once, when the
span is released.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Final

from mypy_extensions import mypyc_attr
from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import _fork
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._lru import pop_expired
from otel_toolcall_eval.online.contain import Contained
from otel_toolcall_eval.online.enrich import EnrichedSpan
from otel_toolcall_eval.online.trace_state import TraceState

Decisions = Iterable[tuple[int, str, str]]  # (step, tool, recovery class): ``engine.tally.Decisions``

# why a held span went out without its class (the ``reason`` label of ``toolcall_eval.recovery.unclassified``)
MAX_HELD: Final = "max_held_spans"
MAX_PER_TRACE: Final = "max_held_spans_per_trace"
MAX_HOLD: Final = "max_hold_seconds"
FLUSH: Final = "flush"
SHUTDOWN: Final = "shutdown"
TRACE_END: Final = "trace_end"  # a call waiting for its reply: the trace ended (its root, or its state let go) first
COUNTED: Final = ""  # a bound said no at ``reserve``, which counted it: not counted again when it goes

# a step in ``TraceState.holding``: its reservation (a bool: whether it waits for its reply) until something decides
# it first; then (waits for its reply, class, reply read, what it said, reason): what ``Slot`` takes when taken out
Decided = tuple[bool, str | None, bool, Any, str]

# what a call waiting for its reply is settled with: whether the reply was read, what it said (None: nothing failed;
# ``checks.late_outcome.reply_outcome``), and the copy's attributes to write into
Settle = Callable[[bool, Any, dict[str, Any]], None]


class Slot:
    """One held failed span: its parts once filled (``span`` None until then), when it was reserved, and, when
    taken out before it was filled, its class (None: released without) for ``fill`` to forward it with."""

    __slots__ = ("attrs", "cls", "extra", "found", "gone", "read", "reason", "settle", "since", "span", "waits_reply")

    def __init__(self, since: float, waits_reply: bool = False) -> None:
        self.since = since
        self.span: ReadableSpan | None = None
        self.extra: dict[str, Any] | None = None
        self.attrs: dict[str, Any] | None = None
        self.cls: str | None = None
        self.reason = MAX_HOLD  # why it went without a class, or without its reply (when ``read`` is False)
        self.gone = False
        self.waits_reply = waits_reply  # held for its reply's outcome, not for a recovery class
        self.settle: Settle | None = None  # given with its parts (``fill``) when it waits for its reply
        self.read = False  # its reply was read: ``found`` is what it said
        self.found: Any = None


@mypyc_attr(native_class=False)  # registered with ``_fork`` by weak reference: a native class has none
class HeldSpans:
    """The held failed spans, oldest first, keyed by (trace id, step). Thread-safe and fork-safe; ``clock`` is
    injectable so tests drive the hold time without sleeping, ``build`` (the enriched copy) so they make it fail."""

    def __init__(
        self,
        *,
        max_spans: int,
        max_per_trace: int,
        max_seconds: float,
        forward: Callable[[ReadableSpan], None],
        on_unclassified: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        build: Callable[[ReadableSpan, dict[str, Any], dict[str, Any] | None], ReadableSpan] = EnrichedSpan,
        on_unread: Callable[[str], None] | None = None,
    ) -> None:
        self._max = max_spans
        self._max_per_trace = max_per_trace
        self._max_seconds = max_seconds
        self._forward = forward
        self._on_unclassified = on_unclassified
        self._on_unread = on_unread if on_unread is not None else _ignore
        self._clock = clock
        # the enriched copy's constructor; an attribute (not the module's name, which compiled code binds at build
        # time) so a test can make it fail in either build
        self._build = build
        self._init_state()
        _fork.reinit_after_fork(self)

    def _init_state(self) -> None:
        self._items: OrderedDict[tuple[int, int], Slot] = OrderedDict()
        self._per_trace: dict[int, int] = {}
        self._lock = threading.Lock()

    def _after_fork_in_child(self) -> None:
        """The parent's held spans are the parent's to forward (its spans are never forwarded twice)."""
        self._init_state()

    def __len__(self) -> int:
        return len(self._items)

    def reserve(self, trace_id: int, step: int, waits_reply: bool = False) -> Slot | None:
        """A slot for the failed call ``step`` of the trace (``waits_reply``: for the call that waits for its reply)
        (called under the trace's lock); None when a bound says no (counted): the caller forwards the span as
        usual, without the class (or as it read)."""
        with self._lock:
            per_trace = self._per_trace.get(trace_id, 0)
            if per_trace >= self._max_per_trace:
                reason: str | None = MAX_PER_TRACE
            elif len(self._items) >= self._max:
                reason = MAX_HELD
            else:
                reason = None
                slot = Slot(self._clock(), waits_reply)
                self._items[(trace_id, step)] = slot
                self._per_trace[trace_id] = per_trace + 1
        if reason is not None:
            (self._on_unread if waits_reply else self._on_unclassified)(reason)
            return None
        return slot

    def fill(
        self,
        slot: Slot,
        span: ReadableSpan,
        extra: dict[str, Any],
        attrs: dict[str, Any] | None,
        expire: bool = True,
        settle: Settle | None = None,
    ) -> None:
        """The reserved span's parts (its enriched copy is ``EnrichedSpan(span, extra, attrs)``; ``settle``: what
        its release runs first when it waits for its reply); forwarded now when the slot was taken out meanwhile.
        Then what waited too long goes, unless ``expire`` is False (the caller's timer runs ``expire`` on its
        ticks: a fill then skips a lock and a clock read). Never raises."""
        with self._lock:
            slot.span, slot.extra, slot.attrs, slot.settle = span, extra, attrs, settle
            now = slot.gone
        if now:
            self._release([slot])
        if expire:
            self.expire()

    def hold(
        self,
        state: TraceState,
        trace_id: int,
        step: int,
        span: ReadableSpan,
        extra: dict[str, Any],
        attrs: dict[str, Any] | None,
        expire: bool = True,
        settle: Settle | None = None,
    ) -> None:
        """The span of the call ``step``, reserved in its trace's state (``TraceState.holding``) when it was scored,
        now built (``fill``'s arguments): its slot reserved in the table under the trace's lock, so that a decision
        from then on finds it there, and filled. Forwarded at once, settled, when a step decided it meanwhile (kept
        in the state), or when a bound says no (counted by ``reserve``). Never raises."""
        decided: Decided | None = None
        slot: Slot | None = None
        with state.lock:
            holding = state.holding
            mark = holding.pop(step, False) if holding else False
            if holding is not None and not holding:
                state.holding = None  # nothing held for the trace now: no empty dict kept
            if type(mark) is tuple:
                decided = mark
            else:
                slot = self.reserve(trace_id, step, mark)
        if decided is not None:  # decided while it was built: out now, with that
            slot = Slot(self._clock(), decided[0])
            _, slot.cls, slot.read, slot.found, slot.reason = decided
            slot.gone = True
        elif slot is None:  # a bound said no: out now, as it is
            slot = Slot(self._clock(), bool(mark))
            slot.reason = COUNTED
            slot.gone = True
        self.fill(slot, span, extra, attrs, expire, settle)

    def decide(self, trace_id: int, decisions: Iterable[tuple[int, str, str]]) -> None:
        """Recovery classes decided for failed calls of the trace: their held spans go out carrying them."""
        out: list[Slot] = []
        with self._lock:
            items = self._items
            for step, _, cls in decisions:
                slot = items.get((trace_id, step))
                if slot is None or slot.waits_reply:  # not held (a root, a bound said no, or released already)
                    continue
                del items[(trace_id, step)]
                self._uncount(trace_id)
                slot.cls = cls
                slot.gone = True
                if slot.span is not None:
                    out.append(slot)
        self._release(out)

    def answer(self, trace_id: int, answered: Iterable[tuple[int, Any]], read: bool = True) -> None:
        """Replies read for calls of the trace that wait for theirs (step, what the reply said): their held spans go
        out settled with it. ``read`` False: the trace ended with no reply for these steps (``TRACE_END``)."""
        out: list[Slot] = []
        with self._lock:
            items = self._items
            for step, found in answered:
                slot = items.get((trace_id, step))
                if slot is None or not slot.waits_reply:  # not held (a bound said no, or released already)
                    continue
                del items[(trace_id, step)]
                if read:
                    self._uncount(trace_id)
                    slot.read, slot.found, slot.gone = True, found, True
                    if slot.span is not None:
                        out.append(slot)
                else:
                    self._take(trace_id, slot, out, TRACE_END)
        self._release(out)

    def expire(self) -> None:
        """Release what was held for longer than ``max_hold_seconds``, without its class."""
        if not self._items:  # no lock on the usual path: nothing held
            return
        out: list[Slot] = []
        with self._lock:  # in order of reservation: the oldest at the front
            for key, slot in pop_expired(self._items, self._clock() - self._max_seconds, _since):
                self._take(key[0], slot, out, MAX_HOLD)
        self._release(out)

    def release_all(self, reason: str) -> None:
        """Release everything held, without its class (``flush``: the exporter must get it; ``shutdown``)."""
        out: list[Slot] = []
        with self._lock:
            items = list(self._items.items())
            self._items.clear()
            for (trace_id, _), slot in items:
                self._take(trace_id, slot, out, reason)
        self._release(out)

    # --- internals -------------------------------------------------------------------------------
    def _take(self, trace_id: int, slot: Slot, out: list[Slot], reason: str) -> None:
        self._uncount(trace_id)
        slot.reason = reason
        slot.gone = True
        if slot.span is not None:
            out.append(slot)

    def _uncount(self, trace_id: int) -> None:
        per_trace = self._per_trace
        left = per_trace.get(trace_id, 1) - 1
        if left > 0:
            per_trace[trace_id] = left
        else:
            per_trace.pop(trace_id, None)

    def _release(self, slots: list[Slot]) -> None:
        """Forward each slot's span, built with its class or without it (counted by the slot's reason), or settled
        with its reply's outcome or as it read (counted by the reason); one failure costs only that span its
        scores, never the span."""
        for slot in slots:
            span = slot.span
            assert span is not None
            cls = slot.cls
            extra = slot.extra or {}
            try:
                if slot.waits_reply:
                    if not slot.read and slot.reason != COUNTED:
                        self._on_unread(slot.reason)
                    settle = slot.settle
                    if settle is not None:
                        settle(slot.read, slot.found, extra)
                elif cls is not None:
                    extra[A.RECOVERY_CLASS] = cls
                elif slot.reason != COUNTED:
                    self._on_unclassified(slot.reason)
                out: ReadableSpan = self._build(span, extra, slot.attrs)
            except Exception:  # noqa: BLE001 - forwarded unscored rather than lost
                out = span
            slot.span = slot.extra = slot.attrs = slot.settle = None
            self._forward(out)


def decide(
    held: HeldSpans | None,
    state: TraceState,
    trace_id: int,
    decided: Iterable[tuple[int, str, str]],
    contained: Contained,
) -> None:
    """Earlier failed calls' classes a step decided (a stage calls this after the trace's lock): kept in the trace's
    state for a span still being built (``hold`` forwards it), else ``held.decide``; contained."""
    if held is None:
        return
    try:
        if state.holding:
            with state.lock:
                decided = [
                    d for d in decided if not _kept(state.holding, d[0], False, (False, d[2], False, None, MAX_HOLD))
                ]
        held.decide(trace_id, decided)
    except Exception:  # noqa: BLE001
        contained.failed("held.decide")


def answer(
    held: HeldSpans | None,
    state: TraceState,
    trace_id: int,
    answered: list[tuple[int, Any]],
    contained: Contained,
    read: bool = True,
) -> None:
    """Replies read for calls waiting for theirs (``read`` False: the trace ended without them), as ``decide``: kept
    in the trace's state for a span still being built, else ``held.answer``; contained."""
    if held is None or not answered:
        return
    try:
        if state.holding:
            with state.lock:
                answered = [
                    a
                    for a in answered
                    if not _kept(state.holding, a[0], True, (True, None, read, a[1] if read else None, TRACE_END))
                ]
        held.answer(trace_id, answered, read)
    except Exception:  # noqa: BLE001
        contained.failed("held.answer")


def _kept(holding: dict[int, Any] | None, step: int, waits: bool, decided: Decided) -> bool:
    """Under the trace's lock: ``step`` is reserved in its trace's state and not decided yet (a failed call's when
    ``waits`` is False, one waiting for its reply when True): ``decided`` is kept there for ``hold``."""
    mark = holding.get(step) if holding is not None else None
    if type(mark) is not bool or mark != waits:  # not reserved, or decided already
        return False
    assert holding is not None
    holding[step] = decided
    return True


def _since(slot: Slot) -> float:
    return slot.since


def _ignore(reason: str) -> None:
    pass
