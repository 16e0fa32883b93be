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

Exactly once: a slot is *reserved* under the trace's lock while the call is scored, before any later step of
the trace can decide it, and *filled* with the span's parts once they are built. Every slot leaves the table
under this module's lock exactly once (decided, expired, flushed), and whoever takes it out forwards the span;
a slot taken out before it was filled is only marked, and ``fill`` then forwards the span itself. Spans are
forwarded outside the lock (a downstream export may take its time), and the enriched copy is built once, when
the span is released.
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

Decisions = Iterable[tuple[int, str, str]]  # (step, tool, recovery class): ``engine.tally.Decisions``

# why a held span went out without its class (the ``reason`` label of ``toolcall_eval.recovery.unclassified``)
MAX_HELD: Final = "max_held_spans"
MAX_PER_TRACE: Final = "max_held_spans_per_trace"
MAX_HOLD: Final = "max_hold_seconds"
FLUSH: Final = "flush"
SHUTDOWN: Final = "shutdown"
TRACE_END: Final = "trace_end"  # a call waiting for its reply: the trace ended (its root, or its state let go) first

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
                    if not slot.read:
                        self._on_unread(slot.reason)
                    settle = slot.settle
                    if settle is not None:
                        settle(slot.read, slot.found, extra)
                elif cls is not None:
                    extra[A.RECOVERY_CLASS] = cls
                else:
                    self._on_unclassified(slot.reason)
                out: ReadableSpan = self._build(span, extra, slot.attrs)
            except Exception:  # noqa: BLE001 - forwarded unscored rather than lost
                out = span
            slot.span = slot.extra = slot.attrs = slot.settle = None
            self._forward(out)


def decide(
    held: HeldSpans | None, trace_id: int, decided: Iterable[tuple[int, str, str]], contained: Contained
) -> None:
    """``held.decide``, contained (what a stage calls once a step decided earlier failed calls' classes)."""
    if held is None:
        return
    try:
        held.decide(trace_id, decided)
    except Exception:  # noqa: BLE001
        contained.failed("held.decide")


def answer(
    held: HeldSpans | None, trace_id: int, answered: list[tuple[int, Any]], contained: Contained, read: bool = True
) -> None:
    """``held.answer``, contained (what a stage calls once replies were read, or the trace ended without them)."""
    if held is None or not answered:
        return
    try:
        held.answer(trace_id, answered, read)
    except Exception:  # noqa: BLE001
        contained.failed("held.answer")


def _since(slot: Slot) -> float:
    return slot.since


def _ignore(reason: str) -> None:
    pass
