"""The shared scenario (``tests/framework_scenario.py``) through Strands Agents and its native OpenTelemetry spans.

Strands (strands-agents 1.62) pins ``mcp<2.2``, which the ``integrations`` extra's fastmcp 4 does not accept, so it
lives in its own extra and environment (``make test-strands``); where it is absent this test skips, and the unit
suite still replays the spans it recorded (``tests/fixtures/frameworks/strands-*.json``).

Modes: the default (arguments and results only as span events, ``gen_ai.tool.json_schema`` on every tool span,
tool names on the root ``invoke_agent`` span) and ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental,
gen_ai_tool_definitions`` (attributes, and the definitions on the root span, which ends after every tool span).
"""

# no ``from __future__ import annotations``: Strands builds a tool's schema from its live annotations
from typing import Literal

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.framework_scenario import EXPECTED, FINAL_TEXT, check, get_population, record
from tests.integration.scripted_openai import scripted_openai

pytestmark = pytest.mark.integration

strands = pytest.importorskip(
    "strands", reason="strands-agents is not installed: it has its own extra and environment (make test-strands)"
)

MODES = {"default": "", "latest": "gen_ai_latest_experimental,gen_ai_tool_definitions"}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_strands_agent(
    provider: tuple[TracerProvider, InMemorySpanExporter, InMemorySpanExporter],
    mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel
    from strands.telemetry import tracer as strands_tracer

    tp, exporter, raw = provider
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", MODES[mode])
    tracer = strands_tracer.Tracer()  # reads the opt-in now
    tracer.tracer_provider, tracer.tracer = tp, tp.get_tracer(tracer.service_name)
    monkeypatch.setattr(strands_tracer, "_tracer_instance", tracer)

    @tool
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather in a city.

        Args:
            city: the city
            unit: the unit
        """
        return f"sunny, 21 degrees {unit}, in {city}"

    @tool(name="get_population")
    def strands_population(city: str) -> int:
        """Population of a city.

        Args:
            city: the city
        """
        return get_population(city)

    with scripted_openai() as fake:  # Strands' OpenAI model streams chat completions
        model = OpenAIModel(
            client_args={"base_url": fake.base_url, "api_key": "test-key", "max_retries": 0}, model_id="fake-model"
        )
        agent = Agent(model=model, tools=[get_weather, strands_population], callback_handler=None)
        assert str(agent("Weather in Paris, Rome and Oslo?")).strip() == FINAL_TEXT
    tp.force_flush()
    record(f"strands-{mode}", raw.get_finished_spans())
    check(list(exporter.get_finished_spans()), EXPECTED[f"strands-{mode}"])
