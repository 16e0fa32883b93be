"""Memory bounded in bytes: per-trace state keeps compact call keys, caches hold at most ``limits.max_cache_bytes``.

Measured with ``tracemalloc`` (the Python objects the processor keeps after the spans are gone), never with time.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import set_span_in_context

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval.config import ConfigError

MiB = 1024 * 1024


class Discard(SpanProcessor):
    """Keeps nothing: what stays in memory is the processor's."""

    def on_end(self, span: ReadableSpan) -> None:
        pass


def retained(work: Callable[[], Any]) -> tuple[int, Any]:
    """Bytes still allocated (traced) after ``work`` returns and garbage is collected, and its result."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = work()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, result
    finally:
        tracemalloc.stop()


def provider_with(config: dict[str, Any]) -> tuple[TracerProvider, ToolCallEvalProcessor]:
    processor = ToolCallEvalProcessor(Discard(), EvalConfig.from_dict({"evaluation": {"mode": "inline"}, **config}))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider, processor


def test_trace_state_keeps_no_argument_text() -> None:
    """Oversized (not parsed) and large parsed arguments: the trace remembers a digest of each call, not its text."""
    provider, processor = provider_with({})
    tracer = provider.get_tracer("t")
    root = tracer.start_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"})
    ctx = set_span_in_context(root)

    def calls() -> None:
        for i in range(300):
            # odd: 100 KB, oversized (scored, not parsed); even: 40 KB, within the limit (parsed, normalised)
            oversized = f'{{"q": "{i:06d}{"x" * 100_000}"}}'
            arguments = oversized if i % 2 else json.dumps({"q": f"{i:06d}" + "y" * 40_000})
            attrs = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.arguments": arguments,
            }
            tracer.start_span("execute_tool search", context=ctx, attributes=attrs).end()

    grown, _ = retained(calls)
    assert processor.traces_in_flight == 1
    assert grown < 1 * MiB, f"{grown / MiB:.1f} MiB kept for 300 calls"  # ~21 MiB of argument text went through
    root.end()
    provider.shutdown()


def big_definitions(i: int, fields: int = 1_500) -> str:
    """About 100 KB of tool definitions, different for every ``i`` (a new deployment, a per-user tool set)."""
    properties = {f"p{k}": {"type": "string", "description": f"field {k} of deployment {i}"} for k in range(fields)}
    tool = {"type": "function", "name": "search", "parameters": {"type": "object", "properties": properties}}
    return json.dumps([tool])


def test_definition_validator_and_resolution_caches_are_bounded_in_bytes() -> None:
    limit = 1 * MiB
    provider, processor = provider_with({"limits": {"max_cache_bytes": limit}})
    tracer = provider.get_tracer("t")
    texts = [big_definitions(i) for i in range(60)]  # made before measuring: 60 x ~100 KB

    def traces() -> None:
        for text in texts:
            with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
                chat = {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": text}
                with tracer.start_as_current_span("chat", attributes=chat):
                    pass
                tool = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": '{"p1": "x", "p2": 3}',
                }
                with tracer.start_as_current_span("execute_tool search", attributes=tool):
                    pass

    grown, _ = retained(traces)
    assert processor._pipeline.definitions.bytes <= limit
    assert processor._pipeline.scorer.cache.bytes <= limit
    assert processor._pipeline.scorer._resolved.bytes <= limit
    # three caches of at most 1 MiB (estimated) each; unbounded in bytes they kept ~60 MiB here
    assert grown < 6 * MiB, f"{grown / MiB:.1f} MiB kept after 60 traces of 100 KB definitions"
    provider.shutdown()


def test_a_cache_byte_limit_below_the_minimum_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"limits\.max_cache_bytes: Input should be greater than or equal to 4096"):
        EvalConfig.from_dict({"limits": {"max_cache_bytes": 10}})


def _agent_trace(tracer: Any) -> None:
    """An agent's trace: its root, a model turn, one tool call."""
    with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": '{"q": "x"}',
        }
        with tracer.start_as_current_span("execute_tool search", attributes=tool):
            pass


def test_the_record_of_finished_trace_ids_is_bounded() -> None:
    """Finished traces' ids (a late span of one opens no new trace) are two generations of ``limits.max_traces``:
    once both are full, more traces keep no more memory (what stays is the records' steady size)."""
    provider, processor = provider_with({"limits": {"max_traces": 500}})
    tracer = provider.get_tracer("t")

    def traces(n: int) -> Callable[[], None]:
        return lambda: [_agent_trace(tracer) for _ in range(n)] and None

    traces(2_000)()  # both generations full
    store = processor._pipeline.store
    assert 500 < store.finished_ids <= 1_000
    kept_2k, _ = retained(traces(2_000))
    kept_8k, _ = retained(traces(8_000))
    assert store.finished_ids <= 1_000
    # unbounded, 6,000 more ids would be ~900 KB more (a set slot and the id's int, ~150 bytes each)
    assert kept_8k < kept_2k + 200 * 1024, (
        f"{kept_2k / 1024:.0f} KiB after 2,000 traces, {kept_8k / 1024:.0f} after 8,000"
    )
    provider.shutdown()


class Count(SpanProcessor):
    """Counts what it is given per span id (nothing else kept)."""

    def __init__(self) -> None:
        self.seen: dict[int, int] = {}

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.context
        assert ctx is not None
        self.seen[ctx.span_id] = self.seen.get(ctx.span_id, 0) + 1


def test_held_roots_are_bounded_by_the_trace_lru() -> None:
    """Roots held for their grace window live with their trace's state: at most ``limits.max_traces`` of them; an
    evicted one goes out with its verdict, and every span is forwarded exactly once."""
    downstream = Count()
    config = EvalConfig.from_dict({"evaluation": {"mode": "inline"}, "limits": {"max_traces": 50}})
    processor = ToolCallEvalProcessor(downstream, config, root_grace_seconds=300)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    most = 0
    for _ in range(400):
        _agent_trace(tracer)
        most = max(most, processor._pipeline.store.held_roots)
    assert most == 50 and processor.traces_in_flight <= 50
    assert len(downstream.seen) == 400 * 2 - 50  # the 50 newest roots are still held
    provider.shutdown()
    assert len(downstream.seen) == 400 * 2 and set(downstream.seen.values()) == {1}
