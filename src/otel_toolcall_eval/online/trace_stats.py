"""Per-trace numbers beside the verdict: cost and latency, recovery after errors, the first failing step, and the
tool list the model saw. The processor feeds one ``TraceStats`` per trace (under the trace's lock) and writes
``root_attributes`` on the local root span.

Where the recovery class goes: the class is decided by what follows the failure (the next call or model turn,
else the trace's end), after the failed span itself ended. The processor holds a failed span back until then
(``held_spans``) and writes ``recovery.class`` on it; ``on_call`` and ``on_model_call`` return the decisions
they made, ``settle`` the ones the trace's end makes. The root carries the per-class counts and, step by step,
which failed call got which class (``trace.recovery.steps`` and ``trace.recovery.classes``, parallel lists);
the per-tool counts are the ``toolcall_eval.recoveries`` metric.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mypy_extensions import mypyc_attr

from otel_toolcall_eval import _fork
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._lru import BytesBoundedCache
from otel_toolcall_eval.checks.cost import Price, TraceCost, error_rate, model_usage, new_trace_cost
from otel_toolcall_eval.checks.recovery import CallStep, TurnStep, classify_reaction, count_classes, react
from otel_toolcall_eval.checks.tool_list import tool_list_fingerprint
from otel_toolcall_eval.engine import call_digest_of
from otel_toolcall_eval.records import CallScore, Outcome, ParseStatus, ToolDefinition

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
    it feeds, rather than among the checks: the call stage's one look at the time, no move into another module."""
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


class Fingerprints:
    """The tool list's fingerprint (``checks.tool_list``) memoised by the definitions themselves: every trace of an
    agent is offered the same tool list, whose definitions come from one parse cache (the same objects), so the
    hash is taken once per list, not per trace.

    Keyed by the definitions' ids; an entry holds the definitions (an id is not reused while its object lives) and
    is checked by identity. Bounded like the other caches of trace data: in entries and in (estimated) bytes, the
    definitions' schema text times a factor (``trace_state.state_bytes``' estimate). Races between threads at
    worst compute a fingerprint twice.
    """

    def __init__(self, max_bytes: int, max_entries: int = 64) -> None:
        self._items: BytesBoundedCache[tuple[int, ...], tuple[tuple[ToolDefinition, ...], str]] = BytesBoundedCache(
            max_bytes, max_entries
        )

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes(self) -> int:
        return self._items.bytes

    def of(self, tools: Mapping[str, ToolDefinition]) -> str:
        definitions = tuple(tools.values())
        key = tuple(map(id, definitions))
        hit = self._items.get(key)
        if hit is not None and hit[0] == definitions:  # tuple equality tests identity first: in C, no __eq__ call
            return hit[1]
        fingerprint = tool_list_fingerprint(tools)
        size = sum(256 + _DEFINITION_FACTOR * len(d.schema_key or "") for d in definitions) + 256
        self._items.put(key, (definitions, fingerprint), size)
        return fingerprint


_DEFINITION_FACTOR = 8  # a parsed tool definition, per character of its canonical schema (as ``state_bytes``)


def root_attributes(
    stats: TraceStats | None,
    tools: Mapping[str, ToolDefinition] | None,
    tool_calls: int,
    errors: int,
    priced: bool,
    fingerprints: Fingerprints | None = None,
) -> dict[str, Any]:
    """The root span's cost, latency, recovery, root-cause and tool-list attributes; absent what was not seen
    (``fingerprints``: the processor's memo of tool-list fingerprints)."""
    out: dict[str, Any] = {}
    rate = error_rate(tool_calls, errors)
    if rate is not None:
        out[A.TRACE_TOOL_ERROR_RATE] = rate
    if tools:
        out[A.TRACE_TOOL_LIST_FINGERPRINT] = (
            tool_list_fingerprint(tools) if fingerprints is None else fingerprints.of(tools)
        )
        out[A.TRACE_TOOL_LIST_COUNT] = len(tools)
    if stats is None:
        return out
    cost = stats.cost
    if cost is not None and cost.model_calls:
        out[A.TRACE_MODEL_CALLS] = cost.model_calls
        if cost.counted_calls:  # none recorded a count: the tokens are unknown, not zero
            out[A.TRACE_INPUT_TOKENS] = cost.input_tokens
            out[A.TRACE_OUTPUT_TOKENS] = cost.output_tokens
        if priced:
            out[A.TRACE_COST] = cost.cost
            out[A.TRACE_UNPRICED_MODEL_CALLS] = cost.unpriced_calls
    if stats.timed_calls:
        out[A.TRACE_TOOL_LATENCY_TOTAL] = stats.tool_latency_total
        out[A.TRACE_TOOL_LATENCY_MAX] = stats.tool_latency_max
    if stats.first_failure is not None:
        out[A.TRACE_FIRST_FAILURE_STEP], out[A.TRACE_FIRST_FAILURE_TOOL] = stats.first_failure
    decided = stats.recoveries if stats.pending is None else stats.close()
    if decided:
        counts = count_classes(c for _, _, c in decided)
        for name, n in counts.items():
            out[A.TRACE_RECOVERY_COUNTS[name]] = n
        out[A.TRACE_RECOVERY_STEPS] = [s for s, _, _ in decided]
        out[A.TRACE_RECOVERY_CLASSES] = [c for _, _, c in decided]
    return out


@mypyc_attr(native_class=False)
class ToolListChanges:
    """The last fingerprint seen per source (service, agent), an LRU of at most ``max_sources`` entries, so
    ``changed`` tells whether a trace's tool list differs from the previous trace's of the same source (the first
    sighting of a source is no change). Thread-safe and fork-safe."""

    def __init__(self, max_sources: int = 1000) -> None:
        self._max = max_sources
        self._last: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._lock = threading.Lock()
        _fork.reinit_after_fork(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._last)

    def changed(self, source: tuple[str, str], fingerprint: str) -> bool:
        with self._lock:
            last = self._last
            previous = last.get(source)
            if previous is not None:
                last.move_to_end(source)
            elif len(last) >= self._max:
                last.popitem(last=False)
            last[source] = fingerprint
        return previous is not None and previous != fingerprint
