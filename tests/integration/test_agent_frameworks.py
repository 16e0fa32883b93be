"""The shared scenario (``tests/framework_scenario.py``) through real agent frameworks and their instrumentations.

LlamaIndex (FunctionAgent + openinference-instrumentation-llama-index), smolagents (ToolCallingAgent with its
``OpenAIServerModel`` against a local fake of chat completions + openinference-instrumentation-smolagents) and the
OpenAI Agents SDK (chat-completions model against the same fake + openinference-instrumentation-openai-agents), each
in OpenInference's default mode (content recorded) and with ``TraceConfig(hide_inputs=True, hide_outputs=True)``
(the privacy setting, ``OPENINFERENCE_HIDE_INPUTS`` / ``OPENINFERENCE_HIDE_OUTPUTS``). Every test records the spans
it produced as a fixture the unit suite replays (``TOOLCALL_EVAL_RECORD_FIXTURES=1`` rewrites them).
"""

# no ``from __future__ import annotations``: LlamaIndex builds a tool's schema from its live annotations
import asyncio
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import ToolCallEvalProcessor
from tests.framework_scenario import CALL_IDS, CALLS, FINAL_TEXT, Run, get_population
from tests.integration.scripted_openai import scripted_openai

pytestmark = pytest.mark.integration

MODES = ["content", "hidden"]


@pytest.fixture
def run() -> Iterator[Run]:
    exporter, raw = InMemorySpanExporter(), InMemorySpanExporter()
    provider = TracerProvider()  # never the global provider
    provider.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(exporter)))
    provider.add_span_processor(SimpleSpanProcessor(raw))
    yield Run(provider, exporter, raw)
    provider.shutdown()


def trace_config(mode: str) -> Any:
    from openinference.instrumentation import TraceConfig

    return TraceConfig(hide_inputs=True, hide_outputs=True) if mode == "hidden" else TraceConfig()


# --- LlamaIndex ---------------------------------------------------------------------------------------


def llama_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
    """Current weather in a city."""
    return f"sunny, 21 degrees {unit}, in {city}"


@pytest.mark.parametrize("mode", MODES)
def test_llama_index_function_agent(run: Run, mode: str) -> None:
    pytest.importorskip("llama_index.core", reason="the frameworks extra is not installed")
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    turn = iter(range(len(CALLS) + 1))

    def model(messages: Any, **kwargs: Any) -> ChatMessage:
        """The scripted model: scenario call N on turn N, then the final text (LlamaIndex's own mock LLM)."""
        n = next(turn)
        if n == len(CALLS):
            return ChatMessage(role="assistant", content=FINAL_TEXT)
        name, args = CALLS[n]
        return ChatMessage(
            role="assistant", blocks=[ToolCallBlock(tool_call_id=CALL_IDS[n], tool_name=name, tool_kwargs=args)]
        )

    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=run.provider, config=trace_config(mode))
    try:
        llm = MockFunctionCallingLLM(response_generator=model, is_chat_model=True)
        tools = [
            FunctionTool.from_defaults(llama_weather, name="get_weather"),
            FunctionTool.from_defaults(get_population),
        ]
        agent = FunctionAgent(tools=tools, llm=llm)

        async def main() -> Any:
            return await agent.run("Weather in Paris, Rome and Oslo?")

        result = asyncio.run(main())
    finally:
        instrumentor.uninstrument()
    assert str(result) == FINAL_TEXT
    run.finish(f"llama_index-{mode}")


# --- smolagents ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_smolagents_tool_calling_agent(run: Run, mode: str) -> None:
    pytest.importorskip("smolagents", reason="the frameworks extra is not installed")
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    @tool
    def get_weather(city: str, unit: str) -> str:
        """Current weather in a city.

        Args:
            city: the city
            unit: celsius or fahrenheit
        """
        return f"sunny, 21 degrees {unit}, in {city}"

    get_weather.inputs["unit"]["enum"] = ["celsius", "fahrenheit"]  # smolagents passes it on in the tool's schema

    @tool
    def smol_population(city: str) -> int:
        """Population of a city.

        Args:
            city: the city
        """
        return get_population(city)

    smol_population.name = "get_population"

    instrumentor = SmolagentsInstrumentor()
    instrumentor.instrument(tracer_provider=run.provider, config=trace_config(mode))
    try:
        with scripted_openai(final_call=("final_answer", {"answer": FINAL_TEXT})) as fake:
            model = OpenAIServerModel(
                model_id="fake-model",
                api_base=fake.base_url,
                api_key="test-key",
                client_kwargs={"max_retries": 0, "http_client": httpx.Client(trust_env=False)},
            )
            agent = ToolCallingAgent(tools=[get_weather, smol_population], model=model, max_steps=8, verbosity_level=0)
            assert agent.run("Weather in Paris, Rome and Oslo?") == FINAL_TEXT
            assert len(fake.requests) == len(CALLS) + 1
    finally:
        instrumentor.uninstrument()
    run.finish(f"smolagents-{mode}")


# --- OpenAI Agents SDK ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_openai_agents_sdk(run: Run, mode: str) -> None:
    pytest.importorskip("agents", reason="the frameworks extra is not installed")
    import openai
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool
    from agents.exceptions import ModelBehaviorError
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    @function_tool
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather in a city."""
        return f"sunny, 21 degrees {unit}, in {city}"

    @function_tool(name_override="get_population")
    def agents_population(city: str) -> int:
        """Population of a city."""
        return get_population(city)

    instrumentor = OpenAIAgentsInstrumentor()
    # exclusive: the SDK's own trace exporter (to OpenAI's servers) is replaced, nothing leaves 127.0.0.1
    instrumentor.instrument(tracer_provider=run.provider, config=trace_config(mode), exclusive_processor=True)
    try:
        # the SDK ends the run on a call of a tool the agent lacks (ModelBehaviorError): that call comes last
        with scripted_openai(order=[0, 1, 2, 4, 3]) as fake:
            client = openai.AsyncOpenAI(
                base_url=fake.base_url,
                api_key="test-key",
                max_retries=0,
                http_client=httpx.AsyncClient(trust_env=False),
            )
            agent = Agent(  # the SDK's default model: the Responses API
                name="weather",
                instructions="Answer with the tools.",
                tools=[get_weather, agents_population],
                model=OpenAIResponsesModel(model="fake-model", openai_client=client),
            )
            with pytest.raises(ModelBehaviorError, match="Tool book_flight not found"):
                Runner.run_sync(agent, "Weather in Paris, Rome and Oslo?", max_turns=10)
    finally:
        instrumentor.uninstrument()
    run.finish(f"openai_agents-{mode}")
