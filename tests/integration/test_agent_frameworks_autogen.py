"""The shared scenario (``tests/framework_scenario.py``) through AutoGen's ``AssistantAgent`` (native OpenTelemetry
tool spans) with the official OpenAI instrumentation (opentelemetry-instrumentation-openai-v2) on its model client.

AutoGen pins protobuf 5 and the OpenAI instrumentation 2.4b0 imports only with util-genai 1.1b0, so they live in
their own extra and environment (``make test-autogen``); where they are absent this test skips, and the unit suite
replays the spans it recorded (``tests/fixtures/frameworks/autogen-*.json``).

Modes: the default (no content: AutoGen never records arguments or results) and
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`` (the chat spans carry the messages, so the requested
calls, their arguments and the "not found in any workbench" reply).
"""

# no ``from __future__ import annotations``: AutoGen builds a tool's schema from its live annotations
import asyncio
from typing import Any, Literal

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.framework_scenario import EXPECTED, check, get_population, record
from tests.integration.scripted_openai import scripted_openai

pytestmark = pytest.mark.integration

pytest.importorskip(
    "autogen_agentchat",
    reason="autogen-agentchat is not installed: it has its own extra and environment (make test-autogen)",
)
pytest.importorskip("opentelemetry.instrumentation.openai_v2", reason="the autogen extra is not installed")

MODES = {
    "default": {},
    "capture": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    },
}


def weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
    """Current weather in a city."""
    return f"sunny, 21 degrees {unit}, in {city}"


def population(city: str) -> int:
    """Population of a city."""
    return get_population(city)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_autogen_assistant_agent(
    provider: tuple[TracerProvider, InMemorySpanExporter, InMemorySpanExporter],
    mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.tools import FunctionTool
    from autogen_ext.models.openai import OpenAIChatCompletionClient
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    tp, exporter, raw = provider
    for key, value in MODES[mode].items():
        monkeypatch.setenv(key, value)
    # AutoGen's spans come from the global tracer provider: point its lookups at this test's provider only
    get_tracer = trace.get_tracer
    monkeypatch.setattr(trace, "get_tracer", lambda name, *a, **k: tp.get_tracer(name, *a[:1]))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tp)
    try:
        with scripted_openai() as fake:
            client = OpenAIChatCompletionClient(
                model="fake-model",
                base_url=fake.base_url,
                api_key="test-key",
                max_retries=0,
                http_client=httpx.AsyncClient(trust_env=False),
                model_info={
                    "vision": False,
                    "function_calling": True,
                    "json_output": False,
                    "family": "unknown",
                    "structured_output": False,
                },
            )
            agent = AssistantAgent(
                "weather",
                model_client=client,
                tools=[
                    FunctionTool(weather, "Current weather in a city.", name="get_weather"),
                    FunctionTool(population, "Population of a city.", name="get_population"),
                ],
                max_tool_iterations=10,
            )

            async def main() -> Any:
                return await agent.run(task="Weather in Paris, Rome and Oslo?")

            result = asyncio.run(main())
            assert result.messages[-1].content == "Done."
    finally:
        instrumentor.uninstrument()
        monkeypatch.setattr(trace, "get_tracer", get_tracer)
    tp.force_flush()
    record(f"autogen-{mode}", raw.get_finished_spans())
    check(list(exporter.get_finished_spans()), EXPECTED[f"autogen-{mode}"])
