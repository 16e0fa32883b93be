"""The shared scenario (``tests/framework_scenario.py``) through Google ADK's ``LlmAgent`` and its native spans.

google-adk 2.13 pins opentelemetry 1.44 (the dev environment has 1.45), so it lives in its own extra and
environment (``make test-adk``); where it is absent this test skips, and the unit suite replays the spans it
recorded (``tests/fixtures/frameworks/adk-*.json``). Its ``Gemini`` model reaches a local fake of
``generateContent`` through ``base_url``.

Modes: the default (no arguments; definitions with ``parameters: null``), ``OTEL_SEMCONV_STABILITY_OPT_IN=
gen_ai_latest_experimental`` with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`` (arguments and
schemas), and the legacy schema ``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`` (``gcp.vertex.agent.*`` attributes,
definitions inside the ``llm_request`` JSON of ``call_llm`` spans, which end after their turn's tool spans).
"""

# no ``from __future__ import annotations``: ADK builds a tool's schema from its live annotations
import asyncio
from collections.abc import Iterator
from typing import Any, ClassVar, Literal

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import ToolCallEvalProcessor
from tests.framework_scenario import EXPECTED, FINAL_TEXT, check, get_population, record
from tests.integration.scripted_openai import scripted_openai

pytestmark = pytest.mark.integration

pytest.importorskip(
    "google.adk", reason="google-adk is not installed: it has its own extra and environment (make test-adk)"
)

MODES: dict[str, dict[str, str]] = {
    "default": {},
    "latest": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    },
    "legacy": {"ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "1"},
}


class _Route(SpanProcessor):
    """ADK traces through module-level tracers of the global provider: that provider (set once, in this process
    only) routes every span to the processors of the test that runs."""

    to: ClassVar[list[SpanProcessor]] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        for p in self.to:
            p.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for p in self.to:
            p.on_end(span)


_GLOBAL = TracerProvider()
_GLOBAL.add_span_processor(_Route())


@pytest.fixture
def provider() -> Iterator[tuple[InMemorySpanExporter, InMemorySpanExporter]]:
    if trace.get_tracer_provider() is not _GLOBAL:
        trace.set_tracer_provider(_GLOBAL)
    assert trace.get_tracer_provider() is _GLOBAL, "another global TracerProvider was set first"
    exporter, raw = InMemorySpanExporter(), InMemorySpanExporter()
    _Route.to = [ToolCallEvalProcessor(SimpleSpanProcessor(exporter)), SimpleSpanProcessor(raw)]
    yield exporter, raw
    for p in _Route.to:
        p.shutdown()
    _Route.to = []


def adk_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
    """Current weather in a city."""
    return f"sunny, 21 degrees {unit}, in {city}"


@pytest.mark.parametrize("mode", sorted(MODES))
def test_adk_llm_agent(
    provider: tuple[InMemorySpanExporter, InMemorySpanExporter], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.adk.agents import LlmAgent
    from google.adk.models.google_llm import Gemini
    from google.adk.runners import InMemoryRunner
    from google.adk.tools import FunctionTool
    from google.genai import types

    exporter, raw = provider
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "false")
    for key, value in MODES[mode].items():
        monkeypatch.setenv(key, value)

    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather in a city."""
        return adk_weather(city, unit)

    def population(city: str) -> int:
        """Population of a city."""
        return get_population(city)

    population.__name__ = "get_population"

    with scripted_openai() as fake:
        model = Gemini(model="fake-model", base_url=fake.base_url.removesuffix("/v1"))
        agent = LlmAgent(
            name="weather", model=model, tools=[get_weather, FunctionTool(population)], instruction="Use the tools."
        )
        runner = InMemoryRunner(agent=agent, app_name="scenario")

        async def main() -> list[Any]:
            session = await runner.session_service.create_session(app_name="scenario", user_id="user")
            message = types.Content(role="user", parts=[types.Part(text="Weather in Paris, Rome and Oslo?")])
            return [e async for e in runner.run_async(user_id="user", session_id=session.id, new_message=message)]

        with pytest.raises(ConnectionError, match="census service unreachable"):  # ADK ends the run on it
            asyncio.run(main())
        assert len(fake.requests) == 5
    assert FINAL_TEXT  # the run never gets to the final answer: the raising tool is the last call
    record(f"adk-{mode}", raw.get_finished_spans())
    check(list(exporter.get_finished_spans()), EXPECTED[f"adk-{mode}"])
