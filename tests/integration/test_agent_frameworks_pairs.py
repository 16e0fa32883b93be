"""The shared scenario (``tests/framework_scenario.py``) through more framework x instrumentation pairs (issue 26).

Each pair runs the real framework with its real instrumentation against the local fake of the model API
(``scripted_openai``), in the instrumentation's default mode and with its content capture switched the other way,
and records the spans as fixtures the unit suite replays (``TOOLCALL_EVAL_RECORD_FIXTURES=1`` rewrites them). The
instrumentations here pin what the dev environment does not take, so they live in the ``pairs`` extra and its own
environment (``make test-pairs``); where a package is absent its test skips, and the unit suite still replays the
spans.

- LangGraph ``create_react_agent`` + OpenLLMetry's ``opentelemetry-instrumentation-langchain`` (content switch:
  ``TRACELOOP_TRACE_CONTENT``, on by default).
- Semantic Kernel's own GenAI diagnostics (``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS`` /
  ``..._SENSITIVE``), and Haystack's ``Agent`` with OpenInference's Haystack instrumentation.
"""

# no ``from __future__ import annotations``: LangChain builds a tool's schema from its live annotations
import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import pytest
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import ToolCallEvalProcessor
from tests.framework_scenario import CALLS, FINAL_TEXT, Run, get_population
from tests.framework_scenario import get_weather as plain_weather
from tests.integration.scripted_openai import scripted_openai, tool_loop

pytestmark = pytest.mark.integration

# LiteLLM (under DSPy, and imported by Agno when present) fetches a model cost map from the network unless told not to
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")


class Relay(SpanProcessor):
    """Forwards to the current test's processors: an instrumentor instrumented twice in one process does not record
    the second time (OpenLLMetry's LangChain one), so each is instrumented once, on this module's provider."""

    def __init__(self) -> None:
        self.targets: list[SpanProcessor] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        for target in self.targets:
            target.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for target in self.targets:
            target.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(target.force_flush(timeout_millis) for target in self.targets)


RELAY = Relay()
PROVIDER = TracerProvider()  # never the global provider
PROVIDER.add_span_processor(RELAY)
_INSTRUMENTED: dict[str, Any] = {}


@contextmanager
def instrumented_for_this_run(instrumentor: Any, **options: Any) -> Iterator[None]:
    """Instrument on this module's provider for one run (where the instrumentor uninstruments cleanly)."""
    instrumentor.instrument(tracer_provider=PROVIDER, **options)
    try:
        yield
    finally:
        instrumentor.uninstrument()


def instrumented(name: str, instrumentor: Any) -> None:
    """Instrument once per process, on this module's provider."""
    if name not in _INSTRUMENTED:
        instrumentor.instrument(tracer_provider=PROVIDER)
        _INSTRUMENTED[name] = instrumentor


def hide_openinference(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """OpenInference's privacy switch for ``mode`` "hidden", read by its default TraceConfig when it instruments."""
    monkeypatch.setenv("OPENINFERENCE_HIDE_INPUTS", "true" if mode == "hidden" else "false")
    monkeypatch.setenv("OPENINFERENCE_HIDE_OUTPUTS", "true" if mode == "hidden" else "false")


@pytest.fixture
def run() -> Iterator[Run]:
    exporter, raw = InMemorySpanExporter(), InMemorySpanExporter()
    scoring = ToolCallEvalProcessor(SimpleSpanProcessor(exporter))
    RELAY.targets = [scoring, SimpleSpanProcessor(raw)]
    yield Run(PROVIDER, exporter, raw)
    RELAY.targets = []
    scoring.shutdown()


# --- LangGraph + OpenLLMetry ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_langgraph_openllmetry(run: Run, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("opentelemetry.instrumentation.langchain", reason="the pairs extra is not installed")
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import ToolNode, create_react_agent
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    @tool
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather in a city."""
        return f"sunny, 21 degrees {unit}, in {city}"

    @tool("get_population")
    def population(city: str) -> int:
        """Population of a city."""
        return get_population(city)

    # read at every span: "false" is OpenLLMetry's privacy setting, its default records content
    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "true" if mode == "content" else "false")
    instrumented("langchain", LangchainInstrumentor())
    with scripted_openai() as fake:
        model = ChatOpenAI(base_url=fake.base_url, api_key="test-key", model="fake-model", max_retries=0)
        agent = create_react_agent(model, ToolNode([get_weather, population], handle_tool_errors=True))
        out = agent.invoke({"messages": [("user", "Weather in Paris, Rome and Oslo?")]})
    assert out["messages"][-1].content == FINAL_TEXT
    run.finish(f"langgraph_openllmetry-{mode}")


# --- DSPy ReAct + OpenInference -------------------------------------------------------------------------


def _react_turn(tool: str, args: dict[str, Any]) -> str:
    """One ReAct step as DSPy's ChatAdapter parses it from the model's text."""
    import json

    return (
        f"[[ ## next_thought ## ]]\nCall {tool}.\n\n[[ ## next_tool_name ## ]]\n{tool}\n\n"
        f"[[ ## next_tool_args ## ]]\n{json.dumps(args)}\n\n[[ ## completed ## ]]"
    )


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_dspy_react_openinference(run: Run, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openinference.instrumentation.dspy", reason="the pairs extra is not installed")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "true")  # DSPy would fetch model metadata from the network
    import dspy
    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.dspy import DSPyInstrumentor

    from tests.framework_scenario import CALLS

    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather in a city."""
        return f"sunny, 21 degrees {unit}, in {city}"

    def population(city: str) -> int:
        """Population of a city."""
        return get_population(city)

    # DSPy's ReAct offers only its tools (the model's next_tool_name is a Literal of them), so the scenario's
    # unknown tool cannot be requested: the four other calls, then ``finish``
    texts = [_react_turn(*CALLS[i]) for i in (0, 1, 2, 4)] + [_react_turn("finish", {})]
    texts.append(f"[[ ## reasoning ## ]]\nDone.\n\n[[ ## answer ## ]]\n{FINAL_TEXT}\n\n[[ ## completed ## ]]")
    config = TraceConfig(hide_inputs=True, hide_outputs=True) if mode == "hidden" else TraceConfig()
    # the TraceConfig is bound at instrumentation: DSPy is instrumented afresh for each mode
    with instrumented_for_this_run(DSPyInstrumentor(), config=config), scripted_openai(texts=texts) as fake:
        dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
        lm = dspy.LM("openai/fake-model", api_base=fake.base_url, api_key="test-key", cache=False, num_retries=0)
        tools = [dspy.Tool(get_weather), dspy.Tool(population, name="get_population")]
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
            out = dspy.ReAct("question -> answer", tools=tools)(question="Weather in Paris, Rome and Oslo?")
    assert out.answer == FINAL_TEXT
    run.finish(f"dspy-{mode}")


# --- the Anthropic SDK's tool runner: its own spans, OpenInference's, OpenLLMetry's ------------------------


def _anthropic_tools() -> list[Any]:
    from anthropic import beta_tool

    @beta_tool
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather in a city."""
        return f"sunny, 21 degrees {unit}, in {city}"

    @beta_tool(name="get_population")
    def population(city: str) -> int:
        """Population of a city."""
        return get_population(city)

    return [get_weather, population]


def _run_anthropic_agent(open_telemetry: Any) -> None:
    import anthropic

    with scripted_openai() as fake:
        client = anthropic.Anthropic(
            base_url=fake.base_url.removesuffix("/v1"), api_key="test-key", max_retries=0, open_telemetry=open_telemetry
        )
        runner = client.beta.messages.tool_runner(
            model="fake-model",
            max_tokens=256,
            messages=[{"role": "user", "content": "Weather in Paris, Rome and Oslo?"}],
            tools=_anthropic_tools(),
        )
        final = runner.until_done()
    assert [b.text for b in final.content if b.type == "text"] == [FINAL_TEXT]


@pytest.mark.parametrize("mode", ["default", "content"])
def test_anthropic_tool_runner_own_spans(run: Run, mode: str) -> None:
    pytest.importorskip("anthropic", reason="the pairs extra is not installed")
    # the SDK's own tracing (scope ``com.anthropic.sdk.python``); content: its ``traces.content_mode`` option, or
    # ``ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content``
    traces: dict[str, Any] = {"enabled": True}
    if mode == "content":
        traces["content_mode"] = "content"
    _run_anthropic_agent({"tracer_provider": PROVIDER, "propagation": False, "traces": traces})
    run.finish(f"anthropic_sdk-{mode}")


def _anthropic_with(run: Run, name: str, instrumentor: Any, mode: str) -> None:
    """The tool runner under an instrumentation of the model calls only, in an application's root span (the tools
    run on no span: the SDK's own tracing is off), as a user who adds the instrumentation to their client gets.
    Instrumented for this run only: both instrument the same client methods."""
    with instrumented_for_this_run(instrumentor), PROVIDER.get_tracer("weather-app").start_as_current_span("agent"):
        _run_anthropic_agent({"traces": False})
    run.finish(f"{name}-{mode}")


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_anthropic_tool_runner_openinference(run: Run, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openinference.instrumentation.anthropic", reason="the pairs extra is not installed")
    from openinference.instrumentation.anthropic import AnthropicInstrumentor

    hide_openinference(monkeypatch, mode)
    _anthropic_with(run, "anthropic_openinference", AnthropicInstrumentor(), mode)


def test_anthropic_tool_runner_own_spans_and_openllmetry(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's own tracing and OpenLLMetry's instrumentation of the same client: every request has two spans with
    one ``gen_ai.response.id``, counted once."""
    pytest.importorskip("opentelemetry.instrumentation.anthropic", reason="the pairs extra is not installed")
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "true")
    with instrumented_for_this_run(AnthropicInstrumentor()):
        traces = {"enabled": True, "content_mode": "content"}
        _run_anthropic_agent({"tracer_provider": PROVIDER, "propagation": False, "traces": traces})
    run.finish("anthropic_sdk_openllmetry-content")


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_anthropic_tool_runner_openllmetry(run: Run, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("opentelemetry.instrumentation.anthropic", reason="the pairs extra is not installed")
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "true" if mode == "content" else "false")
    _anthropic_with(run, "anthropic_openllmetry", AnthropicInstrumentor(), mode)


# --- google-genai + opentelemetry-instrumentation-google-genai -------------------------------------------------


@pytest.mark.parametrize("mode", ["default", "capture"])
def test_google_genai_official_instrumentation(run: Run, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("opentelemetry.instrumentation.google_genai", reason="the pairs extra is not installed")
    from google import genai
    from google.genai import types
    from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

    # google-genai's automatic function calling cannot convert a ``Literal`` (nor a str Enum) argument: the
    # scenario's own ``get_weather`` takes the unit as a plain string, so "kelvin" is valid for this tool and runs
    from tests.framework_scenario import get_weather

    if mode == "capture":  # read when the instrumentor is instrumented
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    # google-genai's automatic function calling raises KeyError on a tool it does not have: not requested here
    with (
        instrumented_for_this_run(GoogleGenAiSdkInstrumentor()),
        scripted_openai(order=[0, 1, 2, 4]) as fake,
        PROVIDER.get_tracer("weather-app").start_as_current_span("agent"),
    ):
        client = genai.Client(
            api_key="test-key", http_options=types.HttpOptions(base_url=fake.base_url.removesuffix("/v1"))
        )
        config = types.GenerateContentConfig(tools=[get_weather, get_population])
        out = client.models.generate_content(
            model="fake-model", contents="Weather in Paris, Rome and Oslo?", config=config
        )
    assert out.text == FINAL_TEXT
    run.finish(f"google_genai-{mode}")


# --- Agno + OpenInference ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_agno_openinference(run: Run, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openinference.instrumentation.agno", reason="the pairs extra is not installed")
    from agno.agent import Agent
    from agno.models.openai import OpenAIChat
    from openinference.instrumentation.agno import AgnoInstrumentor

    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather in a city."""
        return f"sunny, 21 degrees {unit}, in {city}"

    hide_openinference(monkeypatch, mode)
    monkeypatch.setenv("AGNO_TELEMETRY", "false")  # Agno's own usage telemetry goes to the network
    with instrumented_for_this_run(AgnoInstrumentor()), scripted_openai() as fake:
        model = OpenAIChat(id="fake-model", base_url=fake.base_url, api_key="test-key", max_retries=0)
        agent = Agent(model=model, tools=[get_weather, get_population], telemetry=False)
        out = agent.run("Weather in Paris, Rome and Oslo?")
    assert out.content == FINAL_TEXT
    run.finish(f"agno-{mode}")


# --- MCP 1.x + OpenLLMetry's opentelemetry-instrumentation-mcp ---------------------------------------------------


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_mcp1_openllmetry(run: Run, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool loop on the OpenAI client (not instrumented) whose tools live on an MCP 1.x FastMCP server, reached over
    the SDK's in-memory transport; OpenLLMetry's MCP instrumentation traces the client's and the server's side."""
    pytest.importorskip("opentelemetry.instrumentation.mcp", reason="the pairs extra is not installed")
    import asyncio

    from mcp.server.fastmcp import FastMCP
    from mcp.shared.memory import create_connected_server_and_client_session
    from opentelemetry.instrumentation.mcp import McpInstrumentor

    server = FastMCP("weather")

    @server.tool()
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather in a city."""
        return f"sunny, 21 degrees {unit}, in {city}"

    server.tool()(get_population)  # the scenario's tool, which raises

    async def agent(base_url: str) -> str:
        async with create_connected_server_and_client_session(server._mcp_server) as session:

            async def call(name: str, arguments: dict[str, Any]) -> str:
                result = await session.call_tool(name, arguments)
                return "\n".join(getattr(c, "text", "") for c in result.content)

            listed = (await session.list_tools()).tools
            return await tool_loop(base_url, [(t.name, t.description, t.inputSchema) for t in listed], call)

    # read at every call; instrumented once (its uninstrument leaves a wrapper, a second one would nest its spans)
    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "true" if mode == "content" else "false")
    instrumented("mcp", McpInstrumentor())
    with scripted_openai() as fake, PROVIDER.get_tracer("weather-app").start_as_current_span("agent"):
        text = asyncio.run(agent(fake.base_url))
    assert text == FINAL_TEXT
    run.finish(f"mcp1_openllmetry-{mode}")


# --- Semantic Kernel's own GenAI diagnostics -------------------------------------------------------------------


def _semantic_kernel_diagnostics(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Switch SK's diagnostics on as a user does, by its environment variables, and route its spans to this module's
    provider. SK reads the variables once, into a settings object per module at import, and takes its tracers from
    the global provider at import: both are replaced here for this run (the variables read by SK's own settings
    class, so a renamed variable fails the test)."""
    import importlib

    from semantic_kernel.utils.telemetry.agent_diagnostics import decorators as agent_diagnostics
    from semantic_kernel.utils.telemetry.model_diagnostics import decorators as model_diagnostics
    from semantic_kernel.utils.telemetry.model_diagnostics import function_tracer
    from semantic_kernel.utils.telemetry.model_diagnostics.model_diagnostics_settings import ModelDiagnosticSettings

    switch = "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS"
    for name in (switch, switch + "_SENSITIVE"):
        monkeypatch.delenv(name, raising=False)
    if mode != "off":
        monkeypatch.setenv(switch + ("_SENSITIVE" if mode == "sensitive" else ""), "true")
    settings = ModelDiagnosticSettings()
    assert settings.enable_otel_diagnostics is (mode == "plain")
    assert settings.enable_otel_diagnostics_sensitive is (mode == "sensitive")
    for module in (agent_diagnostics, model_diagnostics, function_tracer):
        monkeypatch.setattr(module, "MODEL_DIAGNOSTICS_SETTINGS", settings)
    kernel_function = importlib.import_module("semantic_kernel.functions.kernel_function")  # the package's name is
    chat_client = importlib.import_module("semantic_kernel.connectors.ai.chat_completion_client_base")  # a function
    for module in (agent_diagnostics, model_diagnostics, kernel_function, chat_client):
        monkeypatch.setattr(module, "tracer", PROVIDER.get_tracer(module.__name__))


@pytest.mark.parametrize("mode", ["off", "plain", "sensitive", "kernel"])
def test_semantic_kernel_agent(run: Run, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``ChatCompletionAgent`` with a plugin, on SK's OpenAI connector against the local fake. The model is offered
    (and calls) the tools by their fully qualified names (``Weather-get_weather``); the unit is an ``Enum``, which SK
    turns into a JSON Schema enum and parses itself (a ``Literal`` would be advertised as ``{"type": "object"}``).
    ``off``: neither variable set (SK's default), ``plain``: diagnostics, ``sensitive``: diagnostics with content;
    ``kernel``: no agent, the plugin on a ``Kernel`` whose chat service calls the functions itself
    (``FunctionChoiceBehavior.Auto``), diagnostics with content."""
    pytest.importorskip("semantic_kernel", reason="the pairs extra is not installed")
    import asyncio
    from enum import Enum

    from openai import AsyncOpenAI
    from semantic_kernel.agents import ChatCompletionAgent
    from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion
    from semantic_kernel.functions import kernel_function

    from tests.framework_scenario import CALL_IDS, CALLS

    class Unit(str, Enum):
        celsius = "celsius"
        fahrenheit = "fahrenheit"

    class Weather:
        @kernel_function(description="Current weather in a city.")
        def get_weather(self, city: str, unit: Unit) -> str:
            return f"sunny, 21 degrees {Unit(unit).value}, in {city}"

        @kernel_function(name="get_population", description="Population of a city.")
        def population(self, city: str) -> int:
            return get_population(city)

    _semantic_kernel_diagnostics(monkeypatch, "sensitive" if mode == "kernel" else mode)
    # the scenario's calls under the plugin's names; the unknown tool as the model invents it
    script = [
        (call_id, name if name == "book_flight" else f"Weather-{name}", args)
        for call_id, (name, args) in zip(CALL_IDS, CALLS, strict=True)
    ]

    async def agent(base_url: str) -> str:
        client = AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0)
        service = OpenAIChatCompletion(ai_model_id="fake-model", async_client=client)
        weather = ChatCompletionAgent(
            service=service, name="weather_agent", instructions="Answer.", plugins=[Weather()]
        )
        return str((await weather.get_response(messages="Weather in Paris, Rome and Oslo?")).content)

    async def kernel(base_url: str) -> str:
        from semantic_kernel import Kernel
        from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
        from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
        from semantic_kernel.contents import ChatHistory

        client = AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0)
        service = OpenAIChatCompletion(ai_model_id="fake-model", async_client=client)
        weather = Kernel()
        weather.add_service(service)
        weather.add_plugin(Weather(), plugin_name="Weather")
        settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
        history = ChatHistory()
        history.add_user_message("Weather in Paris, Rome and Oslo?")
        reply = await service.get_chat_message_content(history, settings, kernel=weather)
        return str(reply.content if reply is not None else "")

    with scripted_openai(script=script) as fake:
        assert asyncio.run(kernel(fake.base_url) if mode == "kernel" else agent(fake.base_url)) == FINAL_TEXT
    run.finish(f"semantic_kernel-{mode}")


# --- Haystack agents + OpenInference ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_haystack_agent_openinference(run: Run, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Haystack's ``Agent`` on its OpenAI chat generator against the local fake, with OpenInference's Haystack
    instrumentation (which wraps the component classes registered when it instruments: imported first)."""
    pytest.importorskip("openinference.instrumentation.haystack", reason="the pairs extra is not installed")
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")  # Haystack's own usage telemetry goes to the network
    from haystack.dataclasses import ChatMessage
    from openinference.instrumentation.haystack import HaystackInstrumentor

    agent = _haystack_agents()
    hide_openinference(monkeypatch, mode)
    with instrumented_for_this_run(HaystackInstrumentor()), scripted_openai() as fake:
        out = agent(fake.base_url, _haystack_tools()).run(messages=[ChatMessage.from_user("Weather in Paris?")])
    assert out["messages"][-1].text == FINAL_TEXT
    run.finish(f"haystack-{mode}")


def _haystack_agents() -> Any:
    """A maker of Haystack ``Agent``s on its OpenAI chat generator against a local fake (``make(base_url, tools,
    **options)``). Imported before OpenInference instruments: it wraps the component classes registered then."""
    from haystack.components.agents import Agent
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.utils import Secret

    def make(base_url: str, tools: list[Any], **options: Any) -> Any:
        key = Secret.from_token("test-key")
        model = OpenAIChatGenerator(model="fake-model", api_base_url=base_url, api_key=key, max_retries=0)
        return Agent(chat_generator=model, tools=tools, **options)

    return make


def _haystack_tools() -> list[Any]:
    from haystack.tools import create_tool_from_function

    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather in a city."""
        return f"sunny, 21 degrees {unit}, in {city}"

    def population(city: str) -> int:
        """Population of a city."""
        return get_population(city)

    return [create_tool_from_function(get_weather), create_tool_from_function(population, name="get_population")]


def test_haystack_two_agents_in_one_trace_openinference(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Haystack agents in one trace, each a conversation of its own without call ids (issue 26): an orchestrator
    whose tool ``ask_travel_agent`` runs a second ``Agent`` (its ``Agent.run`` span nested in the orchestrator's),
    each on its own local fake. The orchestrator: the valid ``get_weather``, ``ask_travel_agent``, the bad enum; the
    travel agent, in between: the unknown ``book_flight``, the raising ``get_population``. Matched by position per
    trace, the inner agent's calls took the outer's positions: the orchestrator's ``ask_travel_agent`` was lost."""
    pytest.importorskip("openinference.instrumentation.haystack", reason="the pairs extra is not installed")
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")
    from haystack.dataclasses import ChatMessage
    from haystack.tools import create_tool_from_function
    from openinference.instrumentation.haystack import HaystackInstrumentor

    weather, population = _haystack_tools()
    outer_script = [
        ("call_outer_1", "get_weather", CALLS[0][1]),
        ("call_outer_2", "ask_travel_agent", {"question": "Flights and population of Paris?"}),
        ("call_outer_3", "get_weather", CALLS[2][1]),
    ]
    inner_script = [("call_inner_1", *CALLS[3]), ("call_inner_2", *CALLS[4])]
    agent = _haystack_agents()
    hide_openinference(monkeypatch, "content")
    with (
        instrumented_for_this_run(HaystackInstrumentor()),
        scripted_openai(script=outer_script) as outer,
        scripted_openai(script=inner_script) as inner,
    ):
        travel_agent = agent(inner.base_url, [population])

        def ask_travel_agent(question: str) -> str:
            """Ask the travel agent a question."""
            out = travel_agent.run(messages=[ChatMessage.from_user(question)])
            return str(out["messages"][-1].text)

        tools = [weather, create_tool_from_function(ask_travel_agent)]
        orchestrator = agent(outer.base_url, tools)
        with PROVIDER.get_tracer("tests.integration").start_as_current_span("trip planner"):
            out = orchestrator.run(messages=[ChatMessage.from_user("Plan a trip to Paris")])
    assert out["messages"][-1].text == FINAL_TEXT
    assert (len(outer.requests), len(inner.requests)) == (4, 3)
    run.finish("haystack-two_agents")


def test_haystack_compacted_history_openinference(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """Haystack's ``Agent`` with its context compaction (``CompactionHook`` + ``SlidingWindowCompactor``, a
    ``before_llm`` hook): once the conversation fills the window, the request sends a trimmed history (older steps
    replaced by an omission note), whose tool messages no longer count from the conversation's start (issue 26)."""
    pytest.importorskip("openinference.instrumentation.haystack", reason="the pairs extra is not installed")
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")
    from haystack.dataclasses import ChatMessage
    from haystack.hooks.compaction import CompactionHook, SlidingWindowCompactor
    from openinference.instrumentation.haystack import HaystackInstrumentor

    # the fake reports 15 tokens per request: a window this small compacts before the third request and the sixth
    compaction = CompactionHook(SlidingWindowCompactor(), context_window=30, compact_at=0.7, compact_to=0.4)
    make = _haystack_agents()
    hide_openinference(monkeypatch, "content")
    with instrumented_for_this_run(HaystackInstrumentor()), scripted_openai() as fake:
        agent = make(fake.base_url, _haystack_tools(), hooks={"before_llm": [compaction]})
        out = agent.run(messages=[ChatMessage.from_user("Weather in Paris?")])
        sent = [body["messages"] for body in fake.requests]
    assert out["messages"][-1].text == FINAL_TEXT
    # a request whose messages do not start with the previous request's: the history was trimmed
    assert any(now[: len(before)] != before for before, now in itertools.pairwise(sent)), sent
    run.finish("haystack-compacted")


# --- LiteLLM's OTel callback, under an application's own tool spans ------------------------------------------------


class _LoggedRequests:
    """Counts LiteLLM's success callbacks: LiteLLM logs each request from a thread pool after ``completion`` returns,
    and its OTel callback, earlier in ``litellm.callbacks``, has run for every request this one has seen."""

    def __init__(self) -> None:
        from litellm.integrations.custom_logger import CustomLogger

        outer = self

        class Logger(CustomLogger):  # type: ignore[misc]
            def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
                outer.count += 1

        self.count = 0
        self.logger = Logger()

    def wait_for(self, n: int, timeout: float = 10.0) -> None:
        import time

        deadline = time.monotonic() + timeout
        while self.count < n and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.count == n, f"LiteLLM logged {self.count} of {n} requests"


@contextmanager
def _litellm_otel() -> Iterator[_LoggedRequests]:
    """LiteLLM's OTel callback on this module's provider for one test. LiteLLM copies ``litellm.callbacks`` into
    process-wide lists at its first request and keeps them: they are emptied after the test, or every later test whose
    framework calls LiteLLM (DSPy, BeeAI) would record LiteLLM's spans too."""
    import litellm
    from litellm.integrations.opentelemetry import OpenTelemetry

    logged = _LoggedRequests()
    # the documented ``litellm.callbacks = ["otel"]`` builds this logger on the global provider; here on this one
    litellm.callbacks = [OpenTelemetry(tracer_provider=PROVIDER), logged.logger]
    try:
        yield logged
    finally:
        litellm.logging_callback_manager._reset_all_callbacks()


# the application's tools (a hand-written loop: it checks no arguments itself, so the bad enum runs)
LOOP_TOOLS = {"get_weather": plain_weather, "get_population": get_population}


def _loop_offered() -> list[dict[str, Any]]:
    from tests.framework_scenario import POPULATION_SCHEMA, WEATHER_SCHEMA

    schemas = {"get_weather": WEATHER_SCHEMA, "get_population": POPULATION_SCHEMA}
    return [
        {"type": "function", "function": {"name": name, "description": fn.__doc__, "parameters": schemas[name]}}
        for name, fn in LOOP_TOOLS.items()
    ]


def _run_loop_tool(tracer: Any, call: Any) -> str:
    """The application's own ``execute_tool`` span (GenAI conventions, arguments and result opted in) around one
    requested call; a tool it does not have raises ``KeyError("unknown tool: ...")``, whose text goes back."""
    import json

    from opentelemetry.trace import Status, StatusCode

    name, arguments = call.function.name, call.function.arguments
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": arguments,
    }
    with tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes, record_exception=False) as span:
        try:
            if name not in LOOP_TOOLS:
                raise KeyError(f"unknown tool: {name}")
            result = str(LOOP_TOOLS[name](**json.loads(arguments)))
        except (KeyError, ConnectionError) as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            span.set_attribute("error.type", type(exc).__qualname__)
            return f"error: {exc}"
        span.set_attribute("gen_ai.tool.call.result", result)
        return result


LITELLM_MODES = ["default", "hidden", "request_spans"]


@pytest.mark.parametrize("mode", LITELLM_MODES)
def test_litellm_otel_callback(run: Run, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool loop on ``litellm.completion`` with LiteLLM's OTel callback, in the application's root span, whose own
    ``execute_tool`` spans run the tools. Inside a current span LiteLLM writes each request's chat attributes onto that
    span (the root), the last request's last; ``USE_OTEL_LITELLM_REQUEST_SPAN=true`` gives each request a
    ``litellm_request`` span instead. Content is on by default (``turn_off_message_logging`` hides it)."""
    pytest.importorskip("litellm", reason="the pairs extra is not installed")
    import litellm

    if mode == "hidden":
        monkeypatch.setattr(litellm, "turn_off_message_logging", True)
    if mode == "request_spans":
        monkeypatch.setenv("USE_OTEL_LITELLM_REQUEST_SPAN", "true")
    tracer = PROVIDER.get_tracer("weather-app")
    with _litellm_otel() as logged, scripted_openai() as fake, tracer.start_as_current_span("agent"):
        messages: list[Any] = [{"role": "user", "content": "Weather in Paris, Rome and Oslo?"}]
        for _ in range(10):
            reply = litellm.completion(
                model="openai/fake-model",
                api_base=fake.base_url,
                api_key="test-key",
                messages=messages,
                tools=_loop_offered(),
                num_retries=0,
            )
            # LiteLLM logs the request from a thread pool once ``completion`` returns: waited for here, so its span
            # (or its stamp on the root) is written before the tools run, as in an application whose tools take
            # longer than that; a tool span that ends first gets no definitions of its request (the root checks it)
            logged.wait_for(len(fake.requests))
            message = reply.choices[0].message
            if not message.tool_calls:
                break
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": _run_loop_tool(tracer, call)})
        assert message.content == FINAL_TEXT
    run.finish(f"litellm-{mode}")


# --- BeeAI RequirementAgent + OpenInference ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_beeai_openinference(run: Run, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openinference.instrumentation.beeai", reason="the pairs extra is not installed")
    import asyncio

    from beeai_framework.adapters.openai import OpenAIChatModel
    from beeai_framework.agents.requirement import RequirementAgent
    from beeai_framework.tools import tool
    from openinference.instrumentation.beeai import BeeAIInstrumentor

    @tool
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather in a city."""
        return f"sunny, 21 degrees {unit}, in {city}"

    @tool(name="get_population")
    def population(city: str) -> int:
        """Population of a city."""
        return get_population(city)

    hide_openinference(monkeypatch, mode)
    with (
        instrumented_for_this_run(BeeAIInstrumentor()),
        scripted_openai(final_call=("final_answer", {"response": FINAL_TEXT})) as fake,
    ):
        llm = OpenAIChatModel("fake-model", api_key="test-key", base_url=fake.base_url)
        agent = RequirementAgent(llm=llm, tools=[get_weather, population])

        async def main() -> Any:
            return await agent.run("Weather in Paris, Rome and Oslo?")

        out = asyncio.run(main())
    assert out.last_message.text == FINAL_TEXT
    run.finish(f"beeai-{mode}")


# --- pydantic-ai through logfire ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_pydantic_ai_logfire(run: Run, mode: str) -> None:
    """``logfire.configure(additional_span_processors=[...])`` (the processor's one line beside Logfire, nothing sent
    to Logfire) and ``logfire.instrument_pydantic_ai()``; hidden: its ``include_content=False``. pydantic-ai ends the
    run on a tool that raises, so that call comes last."""
    pytest.importorskip("logfire", reason="the pairs extra is not installed")
    import logfire
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    logfire.configure(
        send_to_logfire=False, console=False, additional_span_processors=[RELAY], service_name="weather-app"
    )
    logfire.instrument_pydantic_ai(include_content=mode == "content")
    try:
        with scripted_openai() as fake:
            model = OpenAIChatModel("fake-model", provider=OpenAIProvider(base_url=fake.base_url, api_key="test-key"))
            agent: Agent[None, str] = Agent(model)

            @agent.tool_plain
            def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
                """Current weather in a city."""
                return f"sunny, 21 degrees {unit}, in {city}"

            agent.tool_plain(name="get_population")(get_population)
            with pytest.raises(ConnectionError):
                agent.run_sync("Weather in Paris, Rome and Oslo?")
    finally:
        Agent.instrument_all(False)
        logfire.force_flush()
    run.finish(f"pydantic_ai_logfire-{mode}")
