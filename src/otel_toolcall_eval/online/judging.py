"""The judge as a feature of the pipeline: a ``JudgeHook`` (``otel_toolcall_eval.judge``) plugged into the typed
hook lists (``online.hooks``), so the span path never names it.

Each scored call is offered (sampled or not: the span carries ``toolcall_eval.judge.sampled``), each model turn
observed (the user's request, the reaction to a failure), each finished trace let go of; flush and shutdown share
the pipeline's one deadline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.judge.hook import JudgeHook
from otel_toolcall_eval.online.contain import Contained
from otel_toolcall_eval.online.hooks import Hooks, TraceFinished
from otel_toolcall_eval.records import CallScore, ToolCallRecord, ToolDefinition


class JudgeFeature:
    """The hooks of one judge; a failing offer still marks the span not sampled (counted as ``judge.offer``)."""

    def __init__(self, judge: JudgeHook, contained: Contained) -> None:
        self.judge = judge
        self._contained = contained

    def hooks(self) -> Hooks:
        judge = self.judge
        return Hooks(
            on_call_scored=(self.on_call_scored,),
            on_model_turn=(judge.observe_llm_span,),
            on_trace_finished=(self.on_trace_finished,),
            on_flush=(judge.force_flush,),
            on_shutdown=(judge.shutdown,),
        )

    def on_call_scored(
        self,
        trace_id: int,
        record: ToolCallRecord,
        score: CallScore,
        tools: Mapping[str, ToolDefinition] | None,
        extra: dict[str, Any],
    ) -> None:
        try:
            sampled = bool(self.judge.offer(trace_id, record, score, tools))
        except Exception:  # noqa: BLE001
            self._contained.failed("judge.offer")
            sampled = False
        extra[A.JUDGE_SAMPLED] = sampled

    def on_trace_finished(self, event: TraceFinished) -> None:
        if event.known:  # the judge keeps state only for traces the pipeline saw
            self.judge.trace_done(event.trace_id, event.source)
