"""Per-trace numbers beside the verdict, as the root carries them: cost and latency, recovery after errors, the first
failing step, and the tool list the model saw. ``root_attributes`` writes them on the local root span; the running
tally they come from (``TraceStats``) is the engine's (``engine.tally``).

The root carries the per-class recovery counts and, step by step, which failed call got which class
(``trace.recovery.steps`` and ``trace.recovery.classes``, parallel lists); the per-tool counts are the
``toolcall_eval.recoveries`` metric. The tool list's fingerprint is memoised (``Fingerprints``), and whether it
changed since the source's previous trace is kept per source (``ToolListChanges``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from mypy_extensions import mypyc_attr

from otel_toolcall_eval import _fork
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._lru import BytesBoundedCache
from otel_toolcall_eval.checks.cost import error_rate
from otel_toolcall_eval.checks.recovery import count_classes
from otel_toolcall_eval.checks.tool_list import tool_list_fingerprint
from otel_toolcall_eval.engine.tally import TraceStats
from otel_toolcall_eval.records import ToolDefinition


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
