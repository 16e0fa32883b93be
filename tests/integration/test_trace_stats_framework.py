"""Issue 18 through a real framework: the OpenAI Agents SDK (Responses API against the local fake model server on
127.0.0.1, openinference-instrumentation-openai-agents, content recorded) runs an agent that recovers from
failed tool calls in each of the ways code can tell; the processor writes each failed call's recovery class on
its span, puts the classes, cost, tool latency, the tool-list fingerprint and the first failing step on the root
span, and counts them as metrics."""

# no ``from __future__ import annotations``: the SDK builds a tool's schema from its live annotations
from typing import Literal

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A
from tests.framework_scenario import FINAL_TEXT, get_population, roots_with_verdict
from tests.integration.scripted_openai import scripted_openai

pytestmark = pytest.mark.integration

SCRIPT = [
    ("c1", "get_population", {"city": "Paris"}),  # raises
    ("c2", "get_population", {"city": "Paris"}),  # the same failing call again: repeated
    ("c3", "get_weather", {"city": "Oslo", "unit": "kelvin"}),  # another tool (switched_tool); schema-invalid
    ("c4", "get_weather", {"city": "Oslo", "unit": "celsius"}),  # fixed: corrected_retry
    ("c5", "get_population", {"city": "Oslo"}),  # raises; the model then answers: handed_back
]
PRICE = {"input_per_million": 3.0, "output_per_million": 15.0}


def test_openai_agents_recovery_cost_and_root_cause() -> None:
    pytest.importorskip("agents", reason="the frameworks extra is not installed")
    import openai
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool
    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    @function_tool
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather in a city."""
        return f"sunny, 21 degrees {unit}, in {city}"

    @function_tool(name_override="get_population")
    def agents_population(city: str) -> int:
        """Population of a city."""
        return get_population(city)

    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    config = EvalConfig.from_dict({"pricing": {"models": {"fake-model": PRICE}}, "metrics": {"histograms": True}})
    processor = ToolCallEvalProcessor(
        SimpleSpanProcessor(exporter), config, meter_provider=MeterProvider(metric_readers=[reader]), judge=False
    )
    provider = TracerProvider()  # never the global provider
    provider.add_span_processor(processor)
    instrumentor = OpenAIAgentsInstrumentor()
    # exclusive: the SDK's own trace exporter (to OpenAI's servers) is replaced, nothing leaves 127.0.0.1
    instrumentor.instrument(tracer_provider=provider, config=TraceConfig(), exclusive_processor=True)
    try:
        with scripted_openai(script=SCRIPT) as fake:
            client = openai.AsyncOpenAI(
                base_url=fake.base_url,
                api_key="test-key",
                max_retries=0,
                http_client=httpx.AsyncClient(trust_env=False),
            )
            agent = Agent(
                name="weather",
                instructions="Answer with the tools.",
                tools=[get_weather, agents_population],
                model=OpenAIResponsesModel(model="fake-model", openai_client=client),
            )
            result = Runner.run_sync(agent, "Population and weather of Paris and Oslo?", max_turns=10)
            assert result.final_output == FINAL_TEXT
            assert len(fake.requests) == len(SCRIPT) + 1
    finally:
        instrumentor.uninstrument()
    provider.force_flush()
    spans = list(exporter.get_finished_spans())
    provider.shutdown()

    roots = roots_with_verdict(spans)
    assert len(roots) == 1
    root = dict(roots[0].attributes or {})
    assert root[A.TRACE_TOOL_CALLS] == 5 and root[A.TRACE_ERRORS] == 4
    assert list(root[A.TRACE_RECOVERY_STEPS]) == [1, 2, 3, 5]
    assert list(root[A.TRACE_RECOVERY_CLASSES]) == ["repeated", "switched_tool", "corrected_retry", "handed_back"]
    assert root[A.TRACE_RECOVERY_COUNTS["carried_on"]] == 0
    # each failed tool span, as exported, carries its own class (the processor held it until it was decided)
    tool_spans = sorted(
        (s for s in spans if (s.attributes or {}).get(A.STEP) is not None), key=lambda s: (s.attributes or {})[A.STEP]
    )
    assert [(s.attributes or {}).get(A.RECOVERY_CLASS) for s in tool_spans] == [
        "repeated",
        "switched_tool",
        "corrected_retry",
        None,  # c4 succeeded
        "handed_back",
    ]
    assert len({s.context.span_id for s in spans if s.context is not None}) == len(spans)  # each exported once
    assert (root[A.TRACE_FIRST_FAILURE_STEP], root[A.TRACE_FIRST_FAILURE_TOOL]) == (1, "get_population")
    # the fake model reports 10 input and 5 output tokens per call
    model_calls = len(SCRIPT) + 1
    assert root[A.TRACE_MODEL_CALLS] == model_calls
    assert (root[A.TRACE_INPUT_TOKENS], root[A.TRACE_OUTPUT_TOKENS]) == (10 * model_calls, 5 * model_calls)
    assert root[A.TRACE_COST] == pytest.approx(model_calls * (10 * 3.0 + 5 * 15.0) / 1e6)
    assert root[A.TRACE_UNPRICED_MODEL_CALLS] == 0
    assert root[A.TRACE_TOOL_LATENCY_TOTAL] >= root[A.TRACE_TOOL_LATENCY_MAX] > 0
    assert root[A.TRACE_TOOL_ERROR_RATE] == pytest.approx(4 / 5)
    assert root[A.TRACE_TOOL_LIST_COUNT] == 2 and len(root[A.TRACE_TOOL_LIST_FINGERPRINT]) == 16

    def points(name: str) -> list[tuple[dict[str, object], float]]:
        data = reader.get_metrics_data()
        return [
            (dict(p.attributes or {}), getattr(p, "value", None) or getattr(p, "count", 0))
            for rm in (data.resource_metrics if data else ())
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == name
            for p in m.data.data_points
        ]

    recoveries = {(str(a["tool"]), str(a["class"])): v for a, v in points("toolcall_eval.recoveries")}
    assert recoveries == {
        ("get_population", "repeated"): 1,
        ("get_population", "switched_tool"): 1,
        ("get_weather", "corrected_retry"): 1,
        ("get_population", "handed_back"): 1,
    }
    latency = {str(a["tool"]): v for a, v in points("toolcall_eval.tool.latency")}
    assert latency == {"get_population": 3, "get_weather": 2}
