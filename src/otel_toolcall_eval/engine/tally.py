"""A trace's running tally: each call scored against the trace's history and counted in the trace's numbers.

``score_and_count`` is what the online side does with every call, a tool span's or one scored from the requests:
``Scorer.score`` (every per-call check, the call added to the trace's ``CallHistory``), then ``TraceStats.on_call``
(its latency, whether it is the first failing step, and the recovery classes it decides: ``checks.recovery``'s
running form). Pure, like the rest of the engine (no SDK, no config): the online side keeps one ``TraceStats`` per
trace in its state, under the trace's lock, and writes the numbers on the root (``online.trace_stats``); offline
classifies the same recoveries from the whole sequence (``checks.recovery.classify_recoveries``).

Where the recovery class goes: the class is decided by what follows the failure (the next call or model turn,
else the trace's end), after the failed span itself ended. The processor holds a failed span back until then
(``online.held_spans``) and writes ``recovery.class`` on it; ``on_call`` and ``on_model_call`` return the
decisions they made, ``settle`` the ones the trace's end makes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from otel_toolcall_eval.checks.cost import Price, TraceCost, model_usage, new_trace_cost
from otel_toolcall_eval.checks.recovery import CallStep, TurnStep, classify_reaction, react
from otel_toolcall_eval.engine.call import Scorer, call_digest_of
from otel_toolcall_eval.records import CallHistory, CallScore, Outcome, ParseStatus, ToolCallRecord, ToolDefinition

# A ``CallStep`` from a tuple of its fields, without the Python frame of the NamedTuple's own ``__new__`` (one per
# failed call and per call of a tool with a failure waiting; ``records._new_pending`` does the same)
_new_step: Any = tuple.__new__

# An LLM span recorded its output messages (so "no tool call requested" means it answered): one of these keys, or
# a key under one of these prefixes. Not ``output.value``: OpenInference writes it for non-calls too (LlamaIndex's
# preparation step) and as ``__REDACTED__`` when outputs are hidden. Without them a turn is no evidence.
_OUTPUT_KEYS = ("gen_ai.output.messages",)
_OUTPUT_PREFIXES = ("llm.output_messages.", "gen_ai.completion.")


def records_output(attrs: Mapping[str, Any]) -> bool:
    if any(k in attrs for k in _OUTPUT_KEYS):
        return True
    return any(k.startswith(_OUTPUT_PREFIXES) for k in attrs)


def tool_latency(start_ns: int | None, end_ns: int | None) -> float | None:
    """A tool call's duration in seconds; None when not recorded or negative (clock skew). Here, beside the tally
    it feeds (the call stage's latency histogram reads it too)."""
    if start_ns is None or end_ns is None or end_ns < start_ns:
        return None
    return (end_ns - start_ns) / 1e9


def is_failing_step(score: CallScore) -> bool:
    """A step that went wrong: it failed, or it is not correct (unknown tool, invalid arguments, a violation...)."""
    return score.outcome is not Outcome.SUCCESS or not score.correct


Decisions = list[tuple[int, str, str]]  # (step, tool, recovery class)


@dataclass(slots=True)
class TraceStats:
    cost: TraceCost | None = None  # made for the first model call
    tool_latency_total: float = 0.0  # seconds, over the timed tool calls
    tool_latency_max: float = 0.0
    timed_calls: int = 0
    pending: list[CallStep] | None = None  # failed calls waiting for the agent's reaction
    recoveries: list[tuple[int, str, str]] | None = None  # (step, tool, class), in order of decision
    first_failure: tuple[int, str] | None = None  # (step, tool)
    unknown_steps: set[int] | None = None  # failed calls of tools the model invented (metric label ``_unknown``)

    def on_model_call(
        self, attrs: Mapping[str, Any], requested: Sequence[tuple[str | None, str | None]], prices: Mapping[str, Price]
    ) -> Decisions | None:
        """A model span: its usage, and, when a failed call waits, the turn as a reaction (``requested``: the
        (call id, tool name) pairs it asked for). Returns the recoveries it decided (None: none)."""
        usage = model_usage(attrs)
        if usage is None:
            return None
        cost = self.cost
        if cost is None:
            cost = self.cost = new_trace_cost()
        cost.add_model_call(usage, prices)
        if self.pending and (requested or records_output(attrs)):
            return self._react(TurnStep(tuple(name for _, name in requested)))
        return None

    def on_call(self, score: CallScore, start_ns: int | None, end_ns: int | None, max_entries: int) -> Decisions | None:
        """Count one scored call: its latency (from its span's start and end; none when not recorded), whether it
        is the first failing step, and the recovery it decides (of earlier failed calls, returned; None: none) or
        waits for (a failed call, at most ``max_entries`` per trace: then it is the last of ``pending``)."""
        seconds = tool_latency(start_ns, end_ns)
        if seconds is not None:
            self.timed_calls += 1
            self.tool_latency_total += seconds
            if seconds > self.tool_latency_max:
                self.tool_latency_max = seconds
        failing = is_failing_step(score)
        if failing and self.first_failure is None:
            self.first_failure = (score.step, score.name)
        failed = score.outcome is not Outcome.SUCCESS
        pending = self.pending
        if not failed and not pending:
            return None
        needs_key = failed or any(p.name == score.name for p in pending or ())
        step = _new_step(CallStep, (score.name, _digest(score) if needs_key else None, failed, score.step, score.batch))
        decided = self._react(step) if pending else None
        if failed:
            pending = self.pending
            if pending is None:
                pending = self.pending = []
            if len(pending) < max_entries:
                pending.append(step)
                if score.tool_known is False:  # its name is the model's invention: no metric label of its own
                    unknown = self.unknown_steps
                    if unknown is None:
                        unknown = self.unknown_steps = set()
                    unknown.add(score.step)
        return decided

    def _react(self, step: CallStep | TurnStep) -> Decisions | None:
        pending = self.pending
        assert pending is not None
        self.pending, now = react(pending, step)
        if not now:
            return None
        decided = self.recoveries
        if decided is None:
            self.recoveries = now.copy()
        else:
            decided.extend(now)
        return now

    def metric_label(self, step: int, name: str) -> str | None:
        """The tool label of a decided recovery: None for a tool name the model invented."""
        return None if self.unknown_steps and step in self.unknown_steps else name

    def settle(self) -> Decisions:
        """The trace ended (its root, or its state was dropped): failures nothing reacted to are ``carried_on``;
        returns those decisions (every decision is then in ``recoveries``, in step order)."""
        now: Decisions = [(f.step, f.name, classify_reaction(f, None)) for f in self.pending or ()]
        self.pending = None
        decided = self.recoveries
        if decided is None:
            decided = self.recoveries = now.copy()
        else:
            decided.extend(now)
        decided.sort()
        return now

    def close(self) -> Decisions:
        """``settle``, then every decision, in step order."""
        if self.pending is not None:
            self.settle()
        return self.recoveries or []


def new_trace_stats() -> TraceStats:
    """``TraceStats()``, once per trace with a tool call, without the Python frame of the dataclass's generated
    ``__init__`` (``records.new_trace_verdict`` says why); ``tests/checks/test_checks.py`` checks it equals
    ``TraceStats()``."""
    stats = TraceStats.__new__(TraceStats)
    stats.cost = None
    stats.tool_latency_total = 0.0
    stats.tool_latency_max = 0.0
    stats.timed_calls = 0
    stats.pending = None
    stats.recoveries = None
    stats.first_failure = None
    stats.unknown_steps = None
    return stats


def _digest(score: CallScore) -> bytes | None:
    """The call's normalised form as a digest; None when its arguments were not recorded (never "the same")."""
    if score.parse_status is ParseStatus.ABSENT:
        return None
    digest = score.digest  # kept on the score once taken (by the engine, or the first of its readers)
    return call_digest_of(score) if digest is None else digest


def score_and_count(
    scorer: Scorer,
    record: ToolCallRecord,
    history: CallHistory,
    stats: TraceStats,
    max_calls: int,
    trace_tools: dict[str, ToolDefinition] | None,
    batch: int | None,
) -> tuple[CallScore, Decisions | None]:
    """Score ``record`` against its trace (``Scorer.score``: added to ``history``) and count it in the trace's
    numbers (``TraceStats.on_call``, its latency from the record's span times, none for a call scored from the
    requests): the score, and the recoveries it decided of earlier failed calls (None: none). Under the trace's
    lock."""
    score = scorer.score(record, history, trace_tools=trace_tools, batch=batch)
    return score, stats.on_call(score, record.start_ns, record.end_ns, max_calls)
