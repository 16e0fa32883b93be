"""The typed hooks features plug into: lists of callables, bound once by ``build`` (as httpx's event hooks).

The pipeline's stages return results; the pipeline hands them to these hooks. A feature (the judge, sessions)
is a few callables in these lists, never a branch of the span path: a pipeline without features pays one test of
an empty tuple per kind. Held spans and held roots are not hooks: they decide when a span is forwarded, so they
are built into the stages.

Every hook runs on the thread that scores (the application's inline, the worker in background mode), except the
call hooks of a span held for its late outcome (``held_spans``): they run on the thread that releases it, the
timer's when ``limits.max_hold_seconds`` does. So hooks are thread-safe (inline mode calls them from every
application thread anyway) and must not block; a hook that raises is contained by the pipeline (counted under
``hook.<kind>``, the span goes on).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from otel_toolcall_eval._deadline import Deadline
from otel_toolcall_eval.records import CallScore, ToolCallRecord, ToolDefinition, TraceVerdict


@dataclass(slots=True)
class TraceFinished:
    """A trace the pipeline let go of, the event ``on_trace_finished`` hooks receive."""

    trace_id: int
    span_id: int  # its root span's id; 0 when no root ended here (evicted, expired, a segment, shutdown)
    verdict: TraceVerdict | None  # None: no tool activity, no verdict
    first: bool  # the first time the trace finished here (False: a second root of a trace finished already)
    known: bool  # the pipeline had state for the trace (False: a root nothing here had seen)
    # its source as its metrics were labelled (``metrics.Source``, bounded: service, agent, version); empty when
    # the trace had no verdict
    source: tuple[str, str, str] = ("", "", "")


# One scored call: (trace id, record, score, the trace's tools then (a snapshot that never changes), the attributes
# the span's copy will carry: a hook may add its own, e.g. the judge's ``judge.sampled``)
OnCallScored = Callable[[int, ToolCallRecord, CallScore, Mapping[str, ToolDefinition] | None, dict[str, Any]], None]
# One model turn (an LLM span) of the trace: (trace id, its attributes)
OnModelTurn = Callable[[int, Mapping[str, Any]], None]
OnTraceFinished = Callable[[TraceFinished], None]
OnFlush = Callable[[Deadline], bool]  # False: not everything was done within the deadline
OnShutdown = Callable[[Deadline], object]
OnTick = Callable[[], bool]  # the timer's tick: True while the feature still has something to watch


class KeyWatch(Protocol):
    """A feature that reads an attribute found on otherwise plain spans (sessions: the conversation id): spans
    carrying one of ``keys`` pass the gate until ``noted`` says their trace's value is known."""

    @property
    def keys(self) -> frozenset[str]: ...

    def noted(self, trace_id: int) -> bool:
        """The trace's value is noted already: another span carrying it goes on as plain traffic."""

    def note(self, trace_id: int, attrs: Mapping[str, Any]) -> None:
        """A span of the trace carrying one of ``keys`` (its attributes)."""


@dataclass(frozen=True, slots=True)
class Hooks:
    """Every hook list of one pipeline, bound at build time (tuples: they never change afterwards)."""

    on_call_scored: tuple[OnCallScored, ...] = ()
    # only the calls that did not succeed (sessions' repeated failures): a successful call costs such a feature nothing
    on_call_failed: tuple[OnCallScored, ...] = ()
    on_model_turn: tuple[OnModelTurn, ...] = ()
    on_trace_finished: tuple[OnTraceFinished, ...] = ()
    on_flush: tuple[OnFlush, ...] = ()
    on_shutdown: tuple[OnShutdown, ...] = ()
    on_tick: tuple[OnTick, ...] = ()
    watches: tuple[KeyWatch, ...] = ()

    def __add__(self, other: Hooks) -> Hooks:
        """Both features' hooks, ``self``'s first in every list."""
        return Hooks(
            self.on_call_scored + other.on_call_scored,
            self.on_call_failed + other.on_call_failed,
            self.on_model_turn + other.on_model_turn,
            self.on_trace_finished + other.on_trace_finished,
            self.on_flush + other.on_flush,
            self.on_shutdown + other.on_shutdown,
            self.on_tick + other.on_tick,
            self.watches + other.watches,
        )
