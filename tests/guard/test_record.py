"""The guard's counters as Prometheus sees them: names and labels from the real exporter, as GUARD_METRICS says."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import INVALID_SPAN_CONTEXT, NonRecordingSpan
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval.guard import Guard
from otel_toolcall_eval.guard.record import GUARD_METRICS, MAX_TOOL_LABELS

ROOT = Path(__file__).resolve().parents[2]


def test_the_exporter_emits_what_the_metric_table_says() -> None:
    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)])
    tracing = TracerProvider(resource=Resource.create({"service.name": "travel", "service.version": "1.5.0"}))
    config = EvalConfig.from_dict({"policies": {"must_not_call": ["wipe"]}})
    guard = Guard(config, meter_provider=provider, tracer_provider=tracing)
    with tracing.get_tracer("agent").start_as_current_span("invoke_agent", attributes={"gen_ai.agent.name": "x"}):
        guard.check("wipe", {})
        guard.check("search", {})
    emitted: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name.startswith("toolcall_eval_guard_"):
                labels = {k for k in sample.labels if not k.startswith("otel_scope_")}  # the exporter's own
                emitted.setdefault(sample.name, set()).update(labels)
    documented = {
        prom: {label.replace(".", "_") for label in re.findall(r"`([\w.]+)`", labels)}
        for _, _, labels, prom, _ in GUARD_METRICS
    }
    assert emitted == documented
    provider.shutdown()


def test_tool_labels_are_bounded() -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    guard = Guard(EvalConfig(), meter_provider=MeterProvider(metric_readers=[reader]))
    for i in range(MAX_TOOL_LABELS + 50):
        guard.check(f"tool_{i}", {})
    data = reader.get_metrics_data()
    tools = {
        p.attributes["tool"]
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "toolcall_eval.guard.decisions"
        for p in m.data.data_points
    }
    assert len(tools) == MAX_TOOL_LABELS + 1 and "_other" in tools


def test_decisions_carry_the_service_agent_and_version_through_the_processors_bound() -> None:
    """The guard's counters are by the deciding process's source (issue 30): the tracer provider's resource and
    the agent of the span current at the call; sources share the processor's bound on the same MeterProvider."""
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from otel_toolcall_eval.online.metrics import LABEL_OVERFLOW, MAX_SOURCE_LABELS, OTHER, source_labels

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    tracing = TracerProvider(resource=Resource.create({"service.name": "travel", "service.version": "1.5.0"}))
    guard = Guard(EvalConfig.from_dict({"policies": {"must_not_call": ["wipe"]}}), meter_provider=meters,
                  tracer_provider=tracing)  # fmt: skip
    with tracing.get_tracer("agent").start_as_current_span("run", attributes={"gen_ai.agent.name": "planner"}):
        guard.check("wipe", {})
    guard.check("search", {})  # no current span: no agent
    labels = source_labels(meters)
    for n in range(MAX_SOURCE_LABELS - 2):  # the processor's sources fill the bound the guard shares (2 are its own)
        labels.bound((f"svc-{n}", "", ""))
    guard.check("search", {})  # a source labelled before the bound keeps its labels
    with tracing.get_tracer("agent").start_as_current_span("run", attributes={"gen_ai.agent.name": "booker"}):
        guard.check("search", {})  # a new one past it: `_other`, counted

    def points(name: str) -> list[tuple[dict[str, Any], int]]:
        data = reader.get_metrics_data()
        assert data is not None
        return [
            (dict(p.attributes or {}), p.value)
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == name
            for p in m.data.data_points
        ]

    source = {"service.name": "travel", "service.version": "1.5.0"}
    decisions = points("toolcall_eval.guard.decisions")
    blocked = source | {"gen_ai.agent.name": "planner", "tool": "wipe"}
    allowed = {"tool": "search", "decision": "allow", "mode": "enforce", "prevented": "false"}
    other = {"service.name": OTHER, "gen_ai.agent.name": OTHER, "service.version": OTHER}
    assert sorted(decisions, key=repr) == sorted(
        [
            (blocked | {"decision": "block", "mode": "enforce", "prevented": "true"}, 1),
            (source | allowed, 2),
            (other | allowed, 1),
        ],
        key=repr,
    )
    (finding,) = points("toolcall_eval.guard.findings")
    assert finding[0].items() >= blocked.items()
    assert points(LABEL_OVERFLOW) == [({"label": "source"}, 1)]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_the_block_rate_tests_catch_a_changed_threshold(tmp_path: Path) -> None:
    """deploy/prometheus/tests/guard.test.yml is not vacuous: at a 50 % threshold the 40 % service stays silent."""
    rules = ROOT / "deploy" / "prometheus" / "rules" / "toolcall-eval.rules.yml"
    text = rules.read_text()
    assert "job:toolcall_eval_guard_blocks:ratio_rate10m > 0.20\n" in text
    (tmp_path / "rules").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "rules" / rules.name).write_text(text.replace("ratio_rate10m > 0.20\n", "ratio_rate10m > 0.50\n"))
    suite = ROOT / "deploy" / "prometheus" / "tests" / "guard.test.yml"
    (tmp_path / "tests" / suite.name).write_text(suite.read_text())
    result = subprocess.run(["promtool", "test", "rules", str(tmp_path / "tests" / suite.name)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert result.returncode != 0 and "ToolCallGuardBlockRateHigh" in result.stdout + result.stderr


class _VendorSpan(NonRecordingSpan):
    """A span of a tracer provider that is not the SDK's (a vendor's own): it keeps what it is given."""

    def __init__(self, name: str, attributes: dict[str, Any]) -> None:
        super().__init__(INVALID_SPAN_CONTEXT)
        self.name, self.attributes, self.events = name, dict(attributes), []  # type: ignore[misc]

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        self.events.append((name, dict(attributes or {})))


class _VendorProvider(TracerProvider):
    def __init__(self) -> None:
        super().__init__(resource=Resource.get_empty())
        self.ended: list[_VendorSpan] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        provider = self

        class _Tracer:
            def start_span(self, name: str, kind: Any = None, attributes: Any = None) -> _VendorSpan:
                span = _VendorSpan(name, attributes)
                provider.ended.append(span)
                return span

        return _Tracer()


def test_a_findings_events_are_the_same_on_every_span_whichever_provider_records_them() -> None:
    """A kind of finding's events are built once: on the SDK's spans their attributes are bounded once by the
    provider's limits and shared (``_sdk.EVENT_SPANS``, which this SDK must allow: else the guard silently pays
    the SDK's ``add_event`` per event); a span of another provider gets the same through its own ``add_event``."""
    from opentelemetry.sdk.trace import SpanLimits
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_toolcall_eval import _sdk

    assert _sdk.EVENT_SPANS
    config = EvalConfig.from_dict({"policies": {"must_not_call": ["wipe"]}})
    exporter = InMemorySpanExporter()
    sdk = TracerProvider(resource=Resource.get_empty(), span_limits=SpanLimits(max_attribute_length=12))
    sdk.add_span_processor(SimpleSpanProcessor(exporter))
    vendor = _VendorProvider()
    for provider in (sdk, vendor):
        guard = Guard(config, tracer_provider=provider, meter_provider=MeterProvider())
        for scope in ("a", "b"):
            guard.check("wipe", {}, scope=scope)
        guard.check("wipe", {}, scope="c", call_id="call_7")
    on_sdk = [[(e.name, dict(e.attributes)) for e in span.events] for span in exporter.get_finished_spans()]
    on_vendor = [span.events for span in vendor.ended]
    assert len(on_sdk) == len(on_vendor) == 3
    assert on_sdk[0] == on_sdk[1] and on_vendor[0] == on_vendor[1]  # the same finding, the same events
    (_, result), (_, threat) = on_vendor[0]
    assert result["gen_ai.guardrail.result.reason"] == "the tool is on policies.must_not_call"
    assert threat["agent.threat.detection.rule_id"] == "must_not_call/must_not_call"
    cut = {k: v[:12] if isinstance(v, str) else v for k, v in result.items()}  # the SDK provider's own limit
    assert on_sdk[0] == [("gen_ai.guardrail.result", cut), on_sdk[0][1]]
    assert on_sdk[0][1][1] == {k: v[:12] if isinstance(v, str) else v for k, v in threat.items()}
    correlated = on_vendor[2][1][1]
    assert correlated == {**threat, "agent.threat.detection.correlation_id": "call_7"}
    assert on_sdk[2][1][1]["agent.threat.detection.correlation_id"] == "call_7"
    assert "agent.threat.detection.correlation_id" not in on_sdk[0][1][1]  # the shared record is not the call's
    with pytest.raises(TypeError):  # shared by many spans: nobody may change it
        exporter.get_finished_spans()[0].events[0].attributes["x"] = 1  # type: ignore[index]
