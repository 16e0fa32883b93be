"""The shared scenario (``tests/framework_scenario.py``) as a hand-written tool-calling loop on the plain OpenAI client,
instrumented only with the official OpenAI instrumentation (opentelemetry-instrumentation-openai-v2) and its
util-genai ``execute_tool`` spans (``TelemetryHandler.tool``) around each tool the loop runs.

It runs in the AutoGen environment (``make test-autogen``), which pins what the instrumentation 2.4b0 imports with
(util-genai 1.1b0, FACTS.md); where it is absent this test skips, and the unit suite replays the spans it recorded
(``tests/fixtures/frameworks/openai_v2-*.json``).

The loop is what a user writes without a framework: an application span around it, one chat completion per turn with
the tools offered, each requested call run under a tool span whose call id is the model's; a tool the loop does not
have raises ``KeyError("unknown tool: ...")`` inside its tool span (and that text goes back to the model); it checks no
arguments itself, so the bad enum runs.

Modes: the default (no content: neither the chat spans nor the tool spans record arguments, results or the tools
offered) and ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`` (arguments and results on the tool spans, messages on
the chat spans; still no tool definitions: 2.4b0 does not record the request's tools).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.framework_scenario import (
    EXPECTED,
    FINAL_TEXT,
    POPULATION_SCHEMA,
    WEATHER_SCHEMA,
    check,
    get_population,
    get_weather,
    record,
)
from tests.integration.scripted_openai import scripted_openai

pytestmark = pytest.mark.integration

pytest.importorskip(
    "opentelemetry.instrumentation.openai_v2",
    reason="opentelemetry-instrumentation-openai-v2 is not installed: it runs in the autogen environment "
    "(make test-autogen)",
)
pytest.importorskip("opentelemetry.util.genai.handler", reason="opentelemetry-util-genai is not installed")

MODES = {
    "default": {},
    "capture": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    },
}
TOOLS: dict[str, tuple[Callable[..., Any], str, dict[str, Any]]] = {
    "get_weather": (get_weather, "Current weather in a city.", WEATHER_SCHEMA),
    "get_population": (get_population, "Population of a city.", POPULATION_SCHEMA),
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_openai_v2_tool_calling_loop(
    provider: tuple[TracerProvider, InMemorySpanExporter, InMemorySpanExporter],
    mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from openai import OpenAI
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.util.genai.handler import TelemetryHandler

    tp, exporter, raw = provider
    for key, value in MODES[mode].items():
        monkeypatch.setenv(key, value)
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tp)
    handler = TelemetryHandler(tracer_provider=tp)  # reads the capture mode now
    tracer = tp.get_tracer("weather-app")
    offered = [
        {"type": "function", "function": {"name": name, "description": doc, "parameters": schema}}
        for name, (_, doc, schema) in TOOLS.items()
    ]
    try:
        with scripted_openai() as fake, tracer.start_as_current_span("weather request"):
            client = OpenAI(
                base_url=fake.base_url, api_key="test-key", max_retries=0, http_client=httpx.Client(trust_env=False)
            )
            messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris, Rome and Oslo?"}]
            for _ in range(10):
                reply = client.chat.completions.create(model="fake-model", messages=messages, tools=offered)
                message = reply.choices[0].message
                if not message.tool_calls:
                    break
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls:
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": _run(handler, call)})
            assert message.content == FINAL_TEXT
    finally:
        instrumentor.uninstrument()
    tp.force_flush()
    record(f"openai_v2-{mode}", raw.get_finished_spans())
    check(list(exporter.get_finished_spans()), EXPECTED[f"openai_v2-{mode}"])


def _run(handler: Any, call: Any) -> str:
    """Run one requested call under a util-genai tool span; its error text is what goes back to the model."""
    name, arguments = call.function.name, json.loads(call.function.arguments)
    try:
        with handler.tool(name, tool_call_id=call.id, tool_type="function") as invocation:
            invocation.arguments = arguments
            if name not in TOOLS:
                raise KeyError(f"unknown tool: {name}")
            invocation.tool_result = str(TOOLS[name][0](**arguments))
            return str(invocation.tool_result)
    except (KeyError, ConnectionError) as exc:
        return f"error: {exc}"
