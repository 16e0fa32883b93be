"""What the processor calls on a judge: a typed hook, so any judge (the built-in ``Judge``, a test double, a
user's own) plugs in without string dispatch, and keeps its per-trace state itself.

Calls arrive on the thread that scores (the application's inline, the processor's worker in background
mode) and must not block; ``force_flush`` and ``shutdown`` receive the processor's one ``Deadline``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from otel_toolcall_eval._deadline import Deadline
from otel_toolcall_eval.records import CallScore, ToolCallRecord, ToolDefinition


class JudgeHook(Protocol):
    def offer(
        self,
        trace_id: int,
        record: ToolCallRecord,
        score: CallScore,
        tools: Mapping[str, ToolDefinition] | None,
        /,
    ) -> bool:
        """One scored call and the tools its trace offered (a snapshot that never changes): sampled or not."""

    def observe_llm_span(self, trace_id: int, attrs: Mapping[str, Any], /) -> None:
        """An LLM span of the trace (its plain attributes): the user's request, the reaction to a failure."""

    def trace_done(self, trace_id: int, source: tuple[str, str, str], /) -> None:
        """The processor let go of the trace (root ended, evicted, expired, shutdown); ``source``: its (bounded)
        service, agent and version, as its metrics were labelled (empty when it had no verdict)."""

    def force_flush(self, deadline: Deadline, /) -> bool:
        """Wait, until ``deadline`` at most, for what was sampled so far."""

    def shutdown(self, deadline: Deadline, /) -> object:
        """Drain until ``deadline`` at most, then stop."""
