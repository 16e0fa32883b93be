"""The shared scenario (``tests/framework_scenario.py``) through a CrewAI crew with OpenInference's CrewAI and OpenAI
instrumentors, in both of the CrewAI instrumentor's modes.

CrewAI 1.15 pulls chromadb, onnxruntime and lancedb and pins mcp, openai and pydantic below the dev environment, so it
lives in its own extra and environment (``make test-crewai``); where it is absent this test skips, and the unit suite
replays the spans it recorded (``tests/fixtures/frameworks/crewai-*.json``). CrewAI's built-in telemetry exports only
to CrewAI's own collector: it is switched off (``CREWAI_DISABLE_TELEMETRY``), nothing leaves 127.0.0.1.

Modes: the instrumentor's default (wrappers around ``Crew.kickoff`` / ``Task._execute_core`` / the tools: one trace,
the OpenAI instrumentor's chat spans inside it) and ``use_event_listener=True`` (spans from CrewAI's event bus: its
own ``llm_call`` spans carry the definitions as one ``llm.tools`` attribute whose parameters are Python reprs, the
unknown tool is a ``book_flight.run`` span marked OK whose result says "not found", and the OpenAI instrumentor's
chat spans are not inside the crew's trace but roots of their own).
"""

# no ``from __future__ import annotations``: pydantic builds the tools' argument schemas from live annotations
import os
from typing import Literal

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from tests.framework_scenario import EXPECTED, FINAL_TEXT, check, get_population, record
from tests.integration.scripted_openai import scripted_openai

pytestmark = pytest.mark.integration

# before CrewAI is imported: its telemetry would export to its own collector (FACTS.md)
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_DISABLE_TRACKING", "true")

pytest.importorskip("crewai", reason="crewai is not installed: it has its own extra and environment (make test-crewai)")
pytest.importorskip("openinference.instrumentation.crewai", reason="the crewai extra is not installed")

MODES = {"wrapper": False, "listener": True}


class WeatherArgs(BaseModel):
    city: str
    unit: Literal["celsius", "fahrenheit"]


class PopulationArgs(BaseModel):
    city: str


@pytest.mark.parametrize("mode", sorted(MODES))
def test_crewai_crew(provider: tuple[TracerProvider, InMemorySpanExporter, InMemorySpanExporter], mode: str) -> None:
    from crewai import LLM, Agent, Crew, Task
    from crewai.tools import BaseTool
    from openinference.instrumentation.crewai import CrewAIInstrumentor
    from openinference.instrumentation.openai import OpenAIInstrumentor

    class Weather(BaseTool):
        name: str = "get_weather"
        description: str = "Current weather in a city."
        args_schema: type[BaseModel] = WeatherArgs

        def _run(self, city: str, unit: str) -> str:
            return f"sunny, 21 degrees {unit}, in {city}"

    class Population(BaseTool):
        name: str = "get_population"
        description: str = "Population of a city."
        args_schema: type[BaseModel] = PopulationArgs

        def _run(self, city: str) -> int:
            return get_population(city)

    tp, exporter, raw = provider
    crewai_instrumentor, openai_instrumentor = CrewAIInstrumentor(), OpenAIInstrumentor()
    crewai_instrumentor.instrument(tracer_provider=tp, use_event_listener=MODES[mode])
    openai_instrumentor.instrument(tracer_provider=tp)
    try:
        with scripted_openai() as fake:  # CrewAI's native OpenAI provider: chat completions with tools
            llm = LLM(model="openai/fake-model", base_url=fake.base_url, api_key="test-key", max_retries=0)
            agent = Agent(
                role="assistant",
                goal="answer",
                backstory="a weather assistant",
                tools=[Weather(), Population()],
                llm=llm,
                max_iter=10,
                cache=False,
                verbose=False,
            )
            task = Task(description="Weather in Paris, Rome and Oslo?", expected_output="text", agent=agent)
            result = Crew(agents=[agent], tasks=[task], verbose=False).kickoff()
            assert str(result).strip() == FINAL_TEXT
            assert len(fake.requests) == 6  # five scripted tool calls, then the final answer
    finally:
        openai_instrumentor.uninstrument()
        crewai_instrumentor.uninstrument()
    tp.force_flush()
    record(f"crewai-{mode}", raw.get_finished_spans())
    check(list(exporter.get_finished_spans()), EXPECTED[f"crewai-{mode}"])
