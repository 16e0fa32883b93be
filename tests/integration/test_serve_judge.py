"""The judge behind the scoring service: its verdict spans and events reach the service's next hop.

In-process, the judge's verdict spans go to the application's TracerProvider; a service has no application, so
it gives the judge a TracerProvider of its own that exports through the same span exporter as the scored spans
(and its ``gen_ai.evaluation.result`` events through the OTLP logs exporter beside it). The judge is the local
fake of the model API (``judge_server``); the next hop is a real OTLP receiver (``otlp_receiver``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.judge.emit import SCOPE, SPAN_PREFIX
from otel_toolcall_eval.serve import Service
from tests.helpers import agent_traces, config_for, wait_until

from .judge_server import OPENAI_KEY, FakeJudgeServer, fake_judge_server
from .otlp_receiver import GrpcTraceReceiver, attributes

pytestmark = pytest.mark.integration


@pytest.fixture
def judge_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeJudgeServer]:
    monkeypatch.setenv("SERVE_JUDGE_KEY", OPENAI_KEY)
    with fake_judge_server() as fake:
        yield fake


def judged_config(receiver: GrpcTraceReceiver, judge: FakeJudgeServer) -> EvalConfig:
    base = config_for(receiver)
    section = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "base_url": judge.openai_url,
        "api_key_env": "SERVE_JUDGE_KEY",
        "price": {"input_per_million": 0.15, "output_per_million": 0.6},
        "budget": {"amount": 5},
        "sampling": {"initial_rate": 1.0, "update_interval_seconds": 3600},
        "questions": ["argument_quality"],
        "retry_backoff_seconds": 0.01,
    }
    return base.model_copy(update={"judge": type(base).model_validate({"judge": section}).judge})


def test_verdict_spans_and_events_reach_the_next_hop(
    receiver: GrpcTraceReceiver, judge_server: FakeJudgeServer
) -> None:
    svc = Service(judged_config(receiver, judge_server))
    svc.start()
    try:
        exporter = HttpSpanExporter(endpoint=f"http://127.0.0.1:{svc.http_port}/v1/traces")
        # the in-process reference runs without the judge: its calls would reach the fake server too
        sent = agent_traces(exporter, config_for(receiver), traces=4, seed=17)
        wait_until(lambda: len(judge_server.requests) > 0, "the first judge call")
    finally:
        report = svc.stop(timeout=20)
    assert report.complete and report.exported == len(sent)  # the verdict spans are not counted as received ones
    arrived = receiver.spans()
    verdicts = [s for s in arrived if s.span.name.startswith(SPAN_PREFIX)]
    scored = {s.span.span_id: s for s in arrived if not s.span.name.startswith(SPAN_PREFIX)}
    assert len(scored) == len(sent) == len(arrived) - len(verdicts)  # every received span exactly once
    answered = [r for r in judge_server.requests if r.usage is not None]
    assert verdicts and len(verdicts) == len(answered)
    for v in verdicts:
        assert v.scope.name == SCOPE
        assert attributes(v.resource.attributes)["service.name"] == "otel-toolcall-eval"
        (link,) = v.span.links
        judged = scored[link.span_id]  # the verdict points at a call the service scored and exported
        assert judged.span.name.startswith("execute_tool") and link.trace_id == judged.span.trace_id
        assert v.span.trace_id == judged.span.trace_id and v.span.parent_span_id == judged.span.span_id
        attrs = attributes(v.span.attributes)
        assert attrs[A.GEN_AI_EVALUATION_NAME] == "argument_quality" and A.GEN_AI_EVALUATION_SCORE_LABEL in attrs
        assert attributes(judged.span.attributes)[A.JUDGE_SAMPLED] is True
    # the verdicts' events (the demo agent's conversations also end in session verdicts: not the judge's)
    named = [(r, attributes(r.attributes).get(A.GEN_AI_EVALUATION_NAME)) for r in receiver.log_records()]
    events = [r for r, name in named if name and name != A.SESSION_EVALUATION_NAME]
    assert {(r.trace_id, r.span_id) for r in events} == {(v.span.trace_id, v.span.links[0].span_id) for v in verdicts}
