"""Real agent frameworks produce the spans; only the model API is faked, locally and offline.

Each framework runs one succeeding and one failing tool call (plus a schema-invalid one) through
``ToolCallEvalProcessor(SimpleSpanProcessor(InMemorySpanExporter()))`` on a fresh ``TracerProvider``, and the
tests assert the ``toolcall_eval.*`` scores on the exported tool spans and the trace verdict on the root span.

* pydantic-ai: ``Agent(FunctionModel(...))`` instrumented in its current span format and in format ``version=2``.
* openai + openinference-instrumentation-openai: a fake chat-completions server on 127.0.0.1; the application runs
  the tools itself under OpenInference ``OITracer`` tool spans.
* LangChain / LangGraph + openinference-instrumentation-langchain: ``create_react_agent`` around a scripted chat model.

Three tests pin span shapes that were once scored wrongly: pydantic-ai's ``{"INVALID_JSON": ...}`` wrapper,
truncated JSON on a one-parameter tool, and a bare ``12345`` for a string parameter.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import ToolNode, create_react_agent
from openinference.instrumentation import OITracer, TraceConfig
from openinference.instrumentation.langchain import LangChainInstrumentor
from openinference.instrumentation.openai import OpenAIInstrumentor
from openinference.semconv.trace import SpanAttributes, ToolCallAttributes
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from otel_toolcall_eval import ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A
from tests.helpers import assert_replay_matches
from tests.integration.scripted_langchain import LANGGRAPH_DEPRECATION, ScriptedChatModel, calls

pytestmark = pytest.mark.integration


# --- shared helpers ---------------------------------------------------------------------------------


@dataclass
class Otel:
    provider: TracerProvider
    exporter: InMemorySpanExporter

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def tool_spans(self) -> list[ReadableSpan]:
        """The spans the processor scored as tool calls."""
        return [s for s in self.spans() if A.OUTCOME in (s.attributes or {})]

    def root(self) -> ReadableSpan:
        roots = [s for s in self.spans() if s.parent is None]
        assert len(roots) == 1, [s.name for s in roots]
        return roots[0]

    def verdict(self) -> dict[str, Any]:
        attrs = dict(self.root().attributes or {})
        return {k: attrs.get(k) for k in VERDICT_KEYS}


VERDICT_KEYS = A.TRACE_VERDICT


def verdict(*, calls: int, errors: int, correct: bool) -> dict[str, Any]:
    """The expected trace verdict (no step budget, no policies configured)."""
    return {
        A.TRACE_TOOL_CALLS: calls,
        A.TRACE_ERRORS: errors,
        A.TRACE_OVER_BUDGET: False,
        A.TRACE_VIOLATIONS: 0,
        A.TRACE_VIOLATION_WEIGHT: 0,
        A.TRACE_CORRECT: correct,
        A.TRACE_COMPOSITE_OK: correct and errors == 0,
    }


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def scores(span: ReadableSpan) -> dict[str, Any]:
    return {k: v for k, v in attrs(span).items() if k.startswith(A.PREFIX)}


def only(spans: Sequence[ReadableSpan], predicate: Callable[[ReadableSpan], bool]) -> ReadableSpan:
    found = [s for s in spans if predicate(s)]
    assert len(found) == 1, [(s.name, attrs(s)) for s in spans]
    return found[0]


def exception_types(span: ReadableSpan) -> list[str]:
    return [str((e.attributes or {}).get("exception.type")) for e in span.events if e.name == "exception"]


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    raw = InMemorySpanExporter()
    provider = TracerProvider()  # never the global provider
    provider.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(exporter)))
    provider.add_span_processor(SimpleSpanProcessor(raw))  # the spans as recorded, without scores
    yield Otel(provider, exporter)
    provider.shutdown()
    # Every framework test doubles as a replay round trip: the recorded spans, through OTLP JSON and
    # `replay`, must get exactly the scores they got online.
    assert_replay_matches(list(raw.get_finished_spans()), list(exporter.get_finished_spans()))


# --- 1. pydantic-ai -----------------------------------------------------------------------------------

PAI_DEPRECATED_FORMAT = "ignore:Instrumentation format versions:UserWarning"


def scripted_model(turns: list[list[ToolCallPart]]) -> FunctionModel:
    """Model turn N returns the tool calls ``turns[N]``; after the last scripted turn, a final text answer."""

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn < len(turns):
            return ModelResponse(parts=list(turns[turn]))
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(fn)


def weather_agent(
    otel: Otel, turns: list[list[ToolCallPart]], version: int | None = None, *, include_content: bool = True
) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(scripted_model(turns))
    kwargs: dict[str, Any] = {} if version is None else {"version": version}
    agent.instrument = InstrumentationSettings(tracer_provider=otel.provider, include_content=include_content, **kwargs)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return f"sunny in {city}"

    @agent.tool_plain
    def get_forecast(city: str, days: int) -> str:
        """Forecast for the next days."""
        raise RuntimeError("forecast backend down")

    return agent


def by_call_id(otel: Otel, call_id: str) -> ReadableSpan:
    return only(otel.tool_spans(), lambda s: attrs(s).get(A.GEN_AI_TOOL_CALL_ID) == call_id)


@pytest.mark.filterwarnings(PAI_DEPRECATED_FORMAT)
@pytest.mark.parametrize("version", [None, 2], ids=["current_format", "version2_running_tool"])
def test_pydantic_ai_success_schema_invalid_and_exception(otel: Otel, version: int | None) -> None:
    turns = [
        [  # one model turn, two parallel calls: one valid, one pydantic-ai rejects (city must be a string)
            ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="call-ok"),
            ToolCallPart("get_weather", {"city": 3}, tool_call_id="call-bad-args"),
        ],
        [ToolCallPart("get_forecast", {"city": "Paris", "days": 2}, tool_call_id="call-raises")],
    ]
    agent = weather_agent(otel, turns, version)

    with pytest.raises(RuntimeError, match="forecast backend down"):  # a tool exception aborts the run
        agent.run_sync("Weather in Paris?")

    tools = otel.tool_spans()
    assert len(tools) == 3
    # the span format really differs between the two instrumentation versions
    for span in tools:
        a = attrs(span)
        if version == 2:
            assert span.name == "running tool"
            assert A.PYDANTIC_AI_TOOL_ARGUMENTS in a and A.GEN_AI_TOOL_CALL_ARGUMENTS not in a
        else:
            assert span.name.startswith("execute_tool ")
            assert A.GEN_AI_TOOL_CALL_ARGUMENTS in a and A.PYDANTIC_AI_TOOL_ARGUMENTS not in a
        assert a[A.CONVENTION] == "genai"

    ok = scores(by_call_id(otel, "call-ok"))
    assert ok[A.OUTCOME] == "success"
    assert ok[A.PARSE_OK] is True
    assert ok[A.TOOL_KNOWN] is True
    assert ok[A.SCHEMA_VALID] is True
    assert ok[A.SCHEMA_SOURCE] == "trace"  # from gen_ai.tool.definitions on the chat span
    assert A.ERROR_SOURCE not in ok
    assert ok[A.BATCH] == 1

    bad = scores(by_call_id(otel, "call-bad-args"))
    assert bad[A.OUTCOME] == "malformed_call"
    assert bad[A.ERROR_SOURCE] == "schema"
    assert bad[A.PARSE_OK] is True
    assert bad[A.SCHEMA_VALID] is False
    assert bad[A.SCHEMA_ERRORS] == ['/city: 3 is not of type "string"']
    assert bad[A.BATCH] == 1  # parallel with call-ok: same model turn

    raised_span = by_call_id(otel, "call-raises")
    assert raised_span.status.status_code is StatusCode.ERROR
    raised = scores(raised_span)
    assert raised[A.OUTCOME] == "execution_failed"
    assert raised[A.ERROR_SOURCE] == "exception"
    assert raised[A.SCHEMA_VALID] is True
    assert raised[A.TOOL_KNOWN] is True
    assert raised[A.BATCH] == 2  # the second model turn
    assert raised[A.STEP] == 3
    assert sorted(scores(s)[A.STEP] for s in tools) == [1, 2, 3]

    root = otel.root()
    assert attrs(root)[A.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert otel.verdict() == verdict(calls=3, errors=2, correct=False)


@pytest.mark.filterwarnings(PAI_DEPRECATED_FORMAT)
@pytest.mark.parametrize("version", [None, 2], ids=["current_format", "version2_running_tool"])
def test_pydantic_ai_clean_run_has_a_passing_verdict(otel: Otel, version: int | None) -> None:
    turns = [
        [
            ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="a"),
            ToolCallPart("get_weather", {"city": "Rome"}, tool_call_id="b"),
        ],
        [ToolCallPart("get_weather", {"city": "Oslo"}, tool_call_id="c")],
    ]
    result = weather_agent(otel, turns, version).run_sync("Weather?")
    assert result.output == "done"

    assert {attrs(s)[A.GEN_AI_TOOL_CALL_ID]: scores(s)[A.BATCH] for s in otel.tool_spans()} == {"a": 1, "b": 1, "c": 2}
    for span in otel.tool_spans():
        s = scores(span)
        assert (s[A.OUTCOME], s[A.SCHEMA_VALID], s[A.TOOL_KNOWN], s[A.DUPLICATE]) == ("success", True, True, False)
    assert otel.verdict() == verdict(calls=3, errors=0, correct=True)


def test_pydantic_ai_model_retry_is_a_rejected_input(otel: Otel) -> None:
    agent: Agent[None, str] = Agent(
        scripted_model([[ToolCallPart("lookup", {"query": "x"}, tool_call_id="r1")]]), retries=2
    )
    agent.instrument = InstrumentationSettings(tracer_provider=otel.provider, include_content=True)

    @agent.tool_plain
    def lookup(query: str) -> str:
        """Look something up."""
        raise ModelRetry("try a more specific query")

    assert agent.run_sync("?").output == "done"  # ModelRetry goes back to the model; the run completes

    s = scores(by_call_id(otel, "r1"))
    assert s[A.OUTCOME] == "malformed_call"
    assert s[A.ERROR_SOURCE] == "input_rejected"  # pydantic_ai.tool.retry.cause = model_retry
    assert s[A.SCHEMA_VALID] is True
    # a call the tool rejected as malformed is not a correct call, whether or not the schema showed why
    assert otel.verdict() == verdict(calls=1, errors=1, correct=False)


def test_pydantic_ai_unregistered_tool_is_scored_from_the_requests(otel: Otel) -> None:
    # pydantic-ai runs no execute_tool span for a tool it does not have: only the chat spans show the request, and
    # the next one the reply ("Unknown tool name"), by its call id: the call is scored from the requests (issue 26)
    turns = [
        [
            ToolCallPart("get_weather", {"city": "Oslo"}, tool_call_id="w1"),
            ToolCallPart("book_flight", {"to": "Oslo"}, tool_call_id="b1"),
        ]
    ]
    assert weather_agent(otel, turns).run_sync("?").output == "done"
    assert [scores(s)[A.OUTCOME] for s in otel.tool_spans()] == ["success"]
    root = attrs(otel.root())
    assert (root[A.TRACE_UNEXECUTED_CALLS], root[A.TRACE_UNKNOWN_TOOL_REQUESTS]) == (0, 0)
    assert (root[A.TRACE_TOOL_CALLS], root[A.TRACE_REQUEST_SCORED_CALLS]) == (2, 1)
    key = A.REQUESTED_PREFIX + "0."
    (scored,) = [a for s in otel.exporter.get_finished_spans() if key + "tool" in (a := scores(s))]
    assert (scored[key + "tool"], scored[key + "call_id"]) == ("book_flight", "b1")
    assert (scored[key + "outcome"], scored[key + "tool_known"]) == ("malformed_call", False)
    # book_flight was never offered: the wrong-tool decision fails the trace though no tool span shows it
    assert root[A.TRACE_CORRECT] is False and root[A.TRACE_COMPOSITE_OK] is False


def test_pydantic_ai_without_content_capture_scores_what_it_can(otel: Otel) -> None:
    """include_content=False (what a privacy-minded deployment runs): no arguments on the spans, so no parse or
    schema verdict, and two calls of one tool are not duplicates of each other; outcomes still count."""
    turns = [
        [ToolCallPart("get_weather", {"city": "Oslo"}, tool_call_id="a")],
        [ToolCallPart("get_weather", {"city": "Rome"}, tool_call_id="b")],
        [ToolCallPart("get_forecast", {"city": "Oslo", "days": 2}, tool_call_id="c")],
    ]
    with pytest.raises(RuntimeError, match="forecast backend down"):  # a tool exception aborts the run
        weather_agent(otel, turns, include_content=False).run_sync("?")
    calls = [scores(s) for s in otel.tool_spans()]
    assert [c[A.OUTCOME] for c in calls] == ["success", "success", "execution_failed"]
    assert all(A.GEN_AI_TOOL_CALL_ARGUMENTS not in attrs(s) for s in otel.tool_spans())
    assert all(A.PARSE_OK not in c and A.SCHEMA_VALID not in c for c in calls)
    assert [c[A.DUPLICATE] for c in calls] == [False, False, False]
    assert otel.verdict() == verdict(calls=3, errors=1, correct=True)


def test_pydantic_ai_invalid_json_arguments_are_a_parse_failure(otel: Otel) -> None:
    turns = [[ToolCallPart("get_weather", '{"city": "Par', tool_call_id="trunc")]]
    assert weather_agent(otel, turns).run_sync("?").output == "done"

    span = by_call_id(otel, "trunc")
    # what pydantic-ai 2.68 records for arguments that are not JSON
    assert json.loads(attrs(span)[A.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"INVALID_JSON": '{"city": "Par'}
    s = scores(span)
    assert s[A.OUTCOME] == "malformed_call"
    assert s[A.PARSE_OK] is False
    assert s[A.ERROR_SOURCE] == "parse"


# --- 2. openai client + openinference-instrumentation-openai -----------------------------------------

OPENAI_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "convert_currency",
            "description": "Convert an amount of euros.",
            "parameters": {
                "type": "object",
                "properties": {"amount": {"type": "number"}, "to": {"type": "string"}},
                "required": ["amount", "to"],
                "additionalProperties": False,
            },
        },
    },
]
OPENAI_SCHEMAS = {t["function"]["name"]: t["function"] for t in OPENAI_TOOLS}


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@dataclass
class FakeChatCompletions:
    """POST /v1/chat/completions: the scripted tool calls first, then a text answer."""

    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    base_url: str = ""

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        if len(self.requests) == 1:
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": self.tool_calls}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "Here you go."}, "stop"
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }


@pytest.fixture
def fake_openai() -> Iterator[FakeChatCompletions]:
    fake = FakeChatCompletions()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            if self.path.rstrip("/") != "/v1/chat/completions":
                self.send_error(404)
                return
            data = json.dumps(fake.respond(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield fake
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def openai_instrumented(otel: Otel) -> Iterator[Otel]:
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=otel.provider)
    yield otel
    instrumentor.uninstrument()


def get_weather_impl(city: str) -> str:
    if city == "Atlantis":
        raise ConnectionError("weather service unreachable")
    return f"sunny in {city}"


def convert_currency_impl(amount: float, to: str) -> str:
    return f"{float(amount) * 1.1:.2f} {to}"


OPENAI_IMPLS: dict[str, Callable[..., str]] = {
    "get_weather": get_weather_impl,
    "convert_currency": convert_currency_impl,
}


def run_openai_agent(otel: Otel, fake: FakeChatCompletions, *, record_tool_parameters: bool) -> str:
    """A hand-written agent loop: the application executes the requested tools under OpenInference tool spans."""
    client = openai.OpenAI(
        base_url=fake.base_url, api_key="test-key", max_retries=0, timeout=5, http_client=httpx.Client(trust_env=False)
    )
    tracer = OITracer(otel.provider.get_tracer("test-app"), config=TraceConfig())
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris and 10 EUR in USD?"}]
    with tracer.start_as_current_span("weather-agent", openinference_span_kind="agent"):
        response = client.chat.completions.create(model="fake-model", messages=messages, tools=OPENAI_TOOLS)  # type: ignore[arg-type]
        assistant = response.choices[0].message
        messages.append(assistant.model_dump(exclude_none=True))
        for call in assistant.tool_calls or []:
            name, raw = call.function.name, call.function.arguments  # type: ignore[union-attr]
            with tracer.start_as_current_span(name, openinference_span_kind="tool") as span:
                if record_tool_parameters:
                    definition = OPENAI_SCHEMAS[name]
                    span.set_tool(name=name, description=definition["description"], parameters=definition["parameters"])
                else:
                    span.set_attribute(SpanAttributes.TOOL_NAME, name)
                span.set_attribute(ToolCallAttributes.TOOL_CALL_ID, call.id)
                span.set_input(raw, mime_type="application/json")
                try:
                    content = OPENAI_IMPLS[name](**json.loads(raw))
                except Exception as exc:
                    span.record_exception(exc)
                    span.set_status(Status(StatusCode.ERROR, str(exc)))
                    content = f"error: {exc}"
                else:
                    span.set_output(content)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        final = client.chat.completions.create(model="fake-model", messages=messages, tools=OPENAI_TOOLS)  # type: ignore[arg-type]
    client.close()
    return final.choices[0].message.content or ""


def by_oi_call_id(otel: Otel, call_id: str) -> ReadableSpan:
    return only(otel.tool_spans(), lambda s: attrs(s).get(ToolCallAttributes.TOOL_CALL_ID) == call_id)


@pytest.mark.parametrize(
    "record_tool_parameters", [True, False], ids=["tool_span_has_parameters", "schema_only_on_llm_span"]
)
def test_openai_openinference_tool_calls(
    openai_instrumented: Otel, fake_openai: FakeChatCompletions, record_tool_parameters: bool
) -> None:
    otel = openai_instrumented
    fake_openai.tool_calls = [
        tool_call("call_ok", "get_weather", '{"city": "Paris"}'),
        tool_call("call_schema", "convert_currency", '{"amount": "ten", "to": "USD"}'),  # amount must be a number
        tool_call("call_raises", "get_weather", '{"city": "Atlantis"}'),
    ]

    assert run_openai_agent(otel, fake_openai, record_tool_parameters=record_tool_parameters) == "Here you go."
    # the application loop really ran against the fake server: the second request carries the three tool results
    assert [m.get("tool_call_id") for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"] == [
        "call_ok",
        "call_schema",
        "call_raises",
    ]

    llm_spans = [s for s in otel.spans() if attrs(s).get(A.OPENINFERENCE_SPAN_KIND) == "LLM"]
    assert len(llm_spans) == 2
    # the definitions the model saw are on the LLM span, the only place the processor can join them from
    assert json.loads(attrs(llm_spans[0])["llm.tools.1.tool.json_schema"])["function"]["name"] == "convert_currency"
    for span in otel.tool_spans():
        assert (A.OPENINFERENCE_TOOL_PARAMETERS in attrs(span)) is record_tool_parameters

    ok = scores(by_oi_call_id(otel, "call_ok"))
    assert ok[A.CONVENTION] == "openinference"
    assert ok[A.OUTCOME] == "success"
    assert ok[A.PARSE_OK] is True
    assert ok[A.TOOL_KNOWN] is True  # only the LLM span's llm.tools.N.tool.json_schema lists the available tools
    assert ok[A.SCHEMA_VALID] is True
    assert ok[A.SCHEMA_SOURCE] == "trace"
    assert ok[A.BATCH] == 1

    schema_bad = scores(by_oi_call_id(otel, "call_schema"))
    assert schema_bad[A.OUTCOME] == "malformed_call"
    assert schema_bad[A.ERROR_SOURCE] == "schema"  # the schema verdict beats the ValueError the tool then raised
    assert schema_bad[A.SCHEMA_VALID] is False
    assert schema_bad[A.SCHEMA_ERRORS] == ['/amount: "ten" is not of type "number"']
    assert schema_bad[A.SCHEMA_SOURCE] == "trace"
    assert schema_bad[A.TOOL_KNOWN] is True
    assert schema_bad[A.BATCH] == 1

    raised_span = by_oi_call_id(otel, "call_raises")
    assert exception_types(raised_span) == ["ConnectionError"]
    raised = scores(raised_span)
    assert raised[A.OUTCOME] == "execution_failed"
    assert raised[A.ERROR_SOURCE] == "exception"
    assert raised[A.SCHEMA_VALID] is True
    assert raised[A.BATCH] == 1
    assert [scores(by_oi_call_id(otel, c))[A.STEP] for c in ("call_ok", "call_schema", "call_raises")] == [1, 2, 3]

    assert otel.root().name == "weather-agent"
    assert otel.verdict() == verdict(calls=3, errors=2, correct=False)


def test_openai_truncated_json_arguments_are_a_parse_failure(
    openai_instrumented: Otel, fake_openai: FakeChatCompletions
) -> None:
    otel = openai_instrumented
    fake_openai.tool_calls = [
        tool_call("call_ok", "get_weather", '{"city": "Paris"}'),
        tool_call("call_truncated", "get_weather", '{"city": "Par'),
    ]
    run_openai_agent(otel, fake_openai, record_tool_parameters=True)

    truncated_span = by_oi_call_id(otel, "call_truncated")
    # the application could not parse them either
    assert exception_types(truncated_span) == ["json.decoder.JSONDecodeError"]
    assert scores(by_oi_call_id(otel, "call_ok"))[A.OUTCOME] == "success"
    s = scores(truncated_span)
    assert s[A.PARSE_OK] is False
    assert s[A.OUTCOME] == "malformed_call"
    assert s[A.ERROR_SOURCE] == "parse"


# --- 3. LangChain / LangGraph + openinference-instrumentation-langchain --------------------------------


@tool("get_weather")
def lc_get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"sunny in {city}"


@tool("get_population")
def lc_get_population(city: str, year: int) -> int:
    """Population of a city in a given year."""
    raise ConnectionError("census service unreachable")


@pytest.fixture
def langchain_instrumented(otel: Otel) -> Iterator[Otel]:
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=otel.provider)
    yield otel
    instrumentor.uninstrument()


def run_react_agent(model: ScriptedChatModel, tools: ToolNode | list[BaseTool]) -> dict[str, Any]:
    agent = create_react_agent(model, tools)
    result: dict[str, Any] = agent.invoke({"messages": [("user", "Weather and population of Paris?")]})
    return result


def lc_tool_span(otel: Otel, name: str, input_value: str) -> ReadableSpan:
    return only(
        otel.tool_spans(),
        lambda s: attrs(s).get(A.OPENINFERENCE_TOOL_NAME) == name and attrs(s).get(A.INPUT_VALUE) == input_value,
    )


@pytest.mark.filterwarnings(LANGGRAPH_DEPRECATION)
def test_langgraph_react_agent_success_and_handled_tool_error(langchain_instrumented: Otel) -> None:
    otel = langchain_instrumented
    model = ScriptedChatModel(
        responses=[
            calls(("c1", "get_weather", {"city": "Paris"}), ("c2", "get_population", {"city": "Paris", "year": 2020})),
            calls(("c3", "get_weather", {"city": "Berlin"})),
            AIMessage(content="Sunny; population unknown."),
        ]
    )
    # LangGraph 1.x's default ToolNode re-raises tool exceptions (it only hands argument-validation errors back to
    # the model); handle_tool_errors=True returns the error to the model as a ToolMessage with status "error".
    result = run_react_agent(model, ToolNode([lc_get_weather, lc_get_population], handle_tool_errors=True))
    assert result["messages"][-1].content == "Sunny; population unknown."
    tool_messages = [m for m in result["messages"] if m.type == "tool"]
    assert [m.status for m in tool_messages] == ["success", "error", "success"]

    tools = otel.tool_spans()
    assert len(tools) == 3
    for span in tools:
        assert ToolCallAttributes.TOOL_CALL_ID not in attrs(span)  # no call id: batches come from name matching
        assert scores(span)[A.CONVENTION] == "openinference"

    # a single-argument tool records the bare value as input.value; the processor maps it onto the only
    # parameter of the schema the LLM span lists (llm.tools.0.tool.json_schema)
    paris = scores(lc_tool_span(otel, "get_weather", "Paris"))
    assert paris[A.PARSE_OK] is True
    assert paris[A.SCHEMA_VALID] is True
    assert paris[A.TOOL_KNOWN] is True
    assert paris[A.SCHEMA_SOURCE] == "trace"
    assert paris[A.OUTCOME] == "success"
    assert paris[A.BATCH] == 1

    # the handled error still reaches the span: OpenInference sets status ERROR and an exception event
    failed_span = lc_tool_span(otel, "get_population", '{"city": "Paris", "year": 2020}')
    assert failed_span.status.status_code is StatusCode.ERROR
    assert exception_types(failed_span) == ["ConnectionError"]
    failed = scores(failed_span)
    assert failed[A.OUTCOME] == "execution_failed"
    assert failed[A.ERROR_SOURCE] == "exception"
    assert failed[A.SCHEMA_VALID] is True
    assert failed[A.BATCH] == 1  # parallel with the Paris weather call

    berlin = scores(lc_tool_span(otel, "get_weather", "Berlin"))
    assert berlin[A.OUTCOME] == "success"
    assert berlin[A.BATCH] == 2  # the second model turn, matched by name after batch 1's call was claimed
    assert berlin[A.STEP] == 3

    assert otel.root().name == "LangGraph"
    # every call was correct as far as arguments go; the execution failure only breaks the composite
    assert otel.verdict() == verdict(calls=3, errors=1, correct=True)


@pytest.mark.filterwarnings(LANGGRAPH_DEPRECATION)
def test_langgraph_default_toolnode_rejects_schema_invalid_arguments(langchain_instrumented: Otel) -> None:
    otel = langchain_instrumented

    @tool
    def get_population(city: str, year: int) -> int:
        """Population of a city in a given year."""
        return 2_100_000

    model = ScriptedChatModel(
        responses=[
            calls(("p1", "get_population", {"city": "Paris", "year": "last year"})),
            calls(("p2", "get_population", {"city": "Paris", "year": 2020})),
            AIMessage(content="About 2.1 million."),
        ]
    )
    result = run_react_agent(model, [get_population])  # default ToolNode: validation errors go back to the model
    assert [m.status for m in result["messages"] if m.type == "tool"] == ["error", "success"]

    rejected_span = lc_tool_span(otel, "get_population", '{"city": "Paris", "year": "last year"}')
    assert exception_types(rejected_span) == ["pydantic_core._pydantic_core.ValidationError"]
    rejected = scores(rejected_span)
    assert rejected[A.OUTCOME] == "malformed_call"
    assert rejected[A.ERROR_SOURCE] == "schema"
    assert rejected[A.SCHEMA_VALID] is False
    assert rejected[A.SCHEMA_ERRORS] == ['/year: "last year" is not of type "integer"']
    assert rejected[A.BATCH] == 1

    retried = scores(lc_tool_span(otel, "get_population", '{"city": "Paris", "year": 2020}'))
    assert retried[A.OUTCOME] == "success"
    assert retried[A.BATCH] == 2
    assert retried[A.REPEATED_FAILURE] is False

    assert otel.verdict() == verdict(calls=2, errors=1, correct=False)


@pytest.mark.filterwarnings(LANGGRAPH_DEPRECATION)
def test_langgraph_bare_string_that_looks_like_json(langchain_instrumented: Otel) -> None:
    otel = langchain_instrumented
    model = ScriptedChatModel(responses=[calls(("z1", "get_weather", {"city": "12345"})), AIMessage(content="Sunny.")])
    result = run_react_agent(model, ToolNode([lc_get_weather]))
    assert [m.content for m in result["messages"] if m.type == "tool"] == ["sunny in 12345"]  # the call succeeded

    s = scores(lc_tool_span(otel, "get_weather", "12345"))
    assert s[A.PARSE_OK] is True
    assert s[A.SCHEMA_VALID] is True
    assert s[A.OUTCOME] == "success"
    assert otel.verdict() == verdict(calls=1, errors=0, correct=True)
