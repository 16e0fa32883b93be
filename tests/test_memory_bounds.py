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
    assert processor._definitions.bytes <= limit
    assert processor._scorer.cache.bytes <= limit
    assert processor._scorer._resolved.bytes <= limit
    # three caches of at most 1 MiB (estimated) each; unbounded in bytes they kept ~60 MiB here
    assert grown < 6 * MiB, f"{grown / MiB:.1f} MiB kept after 60 traces of 100 KB definitions"
    provider.shutdown()


def test_a_cache_byte_limit_below_the_minimum_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"limits\.max_cache_bytes: Input should be greater than or equal to 4096"):
        EvalConfig.from_dict({"limits": {"max_cache_bytes": 10}})
