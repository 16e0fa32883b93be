"""A multi-turn conversation recorded from a real framework gets a session verdict.

smolagents (ToolCallingAgent with its ``OpenAIServerModel`` against the local fake of chat completions on 127.0.0.1)
instrumented by openinference-instrumentation-smolagents, three ``agent.run`` calls (three traces) inside
OpenInference's ``using_session``, which puts ``session.id`` on every span the instrumentation creates. Turn 1 calls
a tool that raises, turn 2 a valid call, turn 3 the same failing call again: one failure repeated across turns.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.online import metrics as M
from tests.framework_scenario import CALL_IDS, CALLS, FINAL_TEXT, get_population
from tests.integration.scripted_openai import scripted_openai

pytestmark = pytest.mark.integration

POPULATION, WEATHER = 4, 0  # scenario calls: get_population raises ConnectionError; get_weather(Paris) is valid
FINAL = -1
SCRIPT = [POPULATION, FINAL, WEATHER, FINAL, POPULATION, FINAL]  # the model's answers, request by request


@pytest.fixture
def stack() -> Iterator[tuple[TracerProvider, InMemorySpanExporter, InMemoryLogRecordExporter, InMemoryMetricReader]]:
    exporter, logs, reader = InMemorySpanExporter(), InMemoryLogRecordExporter(), InMemoryMetricReader()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    provider = TracerProvider()  # never the global provider
    provider.add_span_processor(
        ToolCallEvalProcessor(
            SimpleSpanProcessor(exporter),
            meter_provider=MeterProvider(metric_readers=[reader]),
            logger_provider=logger_provider,
        )
    )
    yield provider, exporter, logs, reader
    provider.shutdown()


def test_smolagents_conversation_gets_a_session_verdict(stack: Any) -> None:
    pytest.importorskip("smolagents", reason="the frameworks extra is not installed")
    from openinference.instrumentation import using_session
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    provider, exporter, logs, reader = stack

    @tool
    def get_weather(city: str, unit: str) -> str:
        """Current weather in a city.

        Args:
            city: the city
            unit: celsius or fahrenheit
        """
        return f"sunny, 21 degrees {unit}, in {city}"

    @tool
    def smol_population(city: str) -> int:
        """Population of a city.

        Args:
            city: the city
        """
        return get_population(city)

    smol_population.name = "get_population"

    instrumentor = SmolagentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with scripted_openai() as fake:
            script = iter(SCRIPT)

            def next_turn(body: dict[str, Any]) -> tuple[int, tuple[str, str, dict[str, Any]] | None]:
                with fake.lock:
                    fake.requests.append(body)
                    n = len(fake.requests) - 1
                step = next(script)
                if step == FINAL:
                    return n, (f"call_final_{n}", "final_answer", {"answer": FINAL_TEXT})
                name, args = CALLS[step]
                return n, (f"{CALL_IDS[step]}_{n}", name, args)

            fake.next_turn = next_turn  # type: ignore[method-assign]  # this conversation's script
            model = OpenAIServerModel(
                model_id="fake-model",
                api_base=fake.base_url,
                api_key="test-key",
                client_kwargs={"max_retries": 0, "http_client": httpx.Client(trust_env=False)},
            )
            agent = ToolCallingAgent(tools=[get_weather, smol_population], model=model, max_steps=4, verbosity_level=0)
            with using_session("conversation-42"):
                for question in ("How many people live in Paris?", "Weather in Paris?", "And the population?"):
                    assert agent.run(question) == FINAL_TEXT
            assert len(fake.requests) == len(SCRIPT)
    finally:
        instrumentor.uninstrument()
    provider.force_flush()

    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 3 and len({s.context.trace_id for s in roots}) == 3  # three turns, three traces
    assert all((s.attributes or {}).get("session.id") == "conversation-42" for s in roots)
    records = [r.log_record for r in logs.get_finished_logs()]
    assert len(records) == 1
    record = records[0]
    attrs = dict(record.attributes or {})
    assert record.event_name == A.GEN_AI_EVALUATION_RESULT
    assert attrs[A.GEN_AI_CONVERSATION_ID] == "conversation-42"
    assert attrs[A.SESSION_TURNS] == 3
    # the session's figures are its turns' verdicts, as the roots carry them
    composite = [bool((r.attributes or {})[A.TRACE_COMPOSITE_OK]) for r in roots]
    assert composite.count(True) == 1  # the turn with the valid call
    assert attrs[A.SESSION_TURNS_OK] == 1
    assert attrs[A.SESSION_TOOL_CALLS] == sum(int((r.attributes or {})[A.TRACE_TOOL_CALLS]) for r in roots)
    assert attrs[A.SESSION_ERRORS] == sum(int((r.attributes or {})[A.TRACE_ERRORS]) for r in roots) == 2
    assert attrs[A.SESSION_REPEATED_FAILURES] == 1  # get_population(city=Paris) failed in turns 1 and 3
    assert attrs[A.GEN_AI_EVALUATION_SCORE_LABEL] == "fail"
    assert attrs[A.SESSION_FINALIZED_BY] == "flush"
    last = max(roots, key=lambda s: s.end_time or 0)
    assert (record.trace_id, record.span_id) == (last.context.trace_id, last.context.span_id)
    data = reader.get_metrics_data()
    points = [
        (dict(p.attributes or {}), p.value)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == M.SESSIONS
        for p in m.data.data_points
    ]
    source = {"service.name": last.resource.attributes["service.name"]}  # the agent's, as its traces' metrics are
    assert points == [(source | {"outcome": "fail", "finalized_by": "flush"}, 1)]
