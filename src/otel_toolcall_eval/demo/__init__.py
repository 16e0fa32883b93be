"""The demo agent: a scripted calendar/email/reminder assistant with the processor attached.

Runs with no service and no API key; with an OTLP endpoint it feeds a collector, with a Prometheus port it
exposes the processor's metrics for scraping, and with a rate and a duration it is a steady load generator.
Its requests come in conversations (session verdicts), its tool list changes now and then, the guard decides every
call before it runs (``guard.mode`` of the config, shadow in the demo's own), and with ``judge`` a scripted local
stand-in for a hosted judge model answers the LLM judge (``demo.judge``): every panel of the shipped Grafana
dashboard has data from one demo.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

from otel_toolcall_eval._console import escape, have_rich, new_console
from otel_toolcall_eval.commands._exporters import otlp_exporters
from otel_toolcall_eval.commands._summary import SummaryExporter
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.demo.agent import FAILURE_CLASSES, ScriptedAgent
from otel_toolcall_eval.guard import Guard
from otel_toolcall_eval.processor import ToolCallEvalProcessor

if TYPE_CHECKING:
    from rich.console import Console


def default_config_path() -> Path:
    return Path(str(resources.files("otel_toolcall_eval.demo").joinpath("toolcall-eval.yaml")))


@dataclass
class DemoOptions:
    traces: int = 20
    failures: dict[str, float] = field(default_factory=lambda: dict.fromkeys(FAILURE_CLASSES, 0.05))
    seed: int = 7
    config: Path | None = None
    otlp_endpoint: str | None = None
    otlp_protocol: str = "grpc"
    prometheus_port: int | None = None
    prometheus_host: str = "127.0.0.1"
    traces_per_second: float | None = None
    duration: float | None = None
    show_traces: int = 3
    service_name: str = "toolcall-eval-demo"
    guard_mode: str | None = None  # "shadow", "enforce" or "off"; None: the config's ``guard.mode``
    judge: bool = False  # the LLM judge: the config's, else the scripted local stand-in (``demo.judge``)
    metric_readers: list[MetricReader] = field(default_factory=list)  # more readers of the demo's metrics


def run_demo(options: DemoOptions, console: Console | None = None) -> SummaryExporter:
    """Prints with rich (the ``cli`` extra) when it is installed, else plain text: it runs on the core install."""
    console = console or new_console()
    config = EvalConfig.load(options.config or default_config_path())
    stand_in = None
    scratch = None
    if options.judge and config.judge is None:
        from otel_toolcall_eval.config.judge import Calibration
        from otel_toolcall_eval.demo.judge import ScriptedJudgeServer, calibrate, judge_config

        stand_in = ScriptedJudgeServer().start()
        scratch = tempfile.TemporaryDirectory(prefix="toolcall-eval-demo-")
        calibration = Calibration(file=Path(scratch.name) / "calibration.jsonl")
        judge = judge_config(stand_in.url, calibration=calibration)
        config = config.model_copy(update={"judge": judge})
        record = calibrate(judge, calibration.file)
        kappa = "n/a" if record.kappa is None else f"{record.kappa:.2f}"
        console.print(
            f"judge: a scripted stand-in for a hosted model answers on {stand_in.url} (fixed rules, not a model: "
            "its verdicts only show what the judge records; spend priced as a small hosted model's). Its agreement "
            f"with the demo's planted truth, standing in for people's labels: {record.question} kappa "
            f"{kappa} on {record.n} calls"
        )
    resource = Resource.create({"service.name": options.service_name})
    summary = SummaryExporter(keep_traces=options.show_traces)
    readers: list[MetricReader] = list(options.metric_readers)
    downstream: list[SpanProcessor] = [SimpleSpanProcessor(summary)]
    if options.otlp_endpoint:
        span_exporter, metric_exporter = otlp_exporters(options.otlp_endpoint, options.otlp_protocol)
        downstream.append(BatchSpanProcessor(span_exporter))
        readers.append(PeriodicExportingMetricReader(metric_exporter, export_interval_millis=5000))
    if options.prometheus_port is not None:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server

        start_http_server(options.prometheus_port, addr=options.prometheus_host)
        readers.append(PrometheusMetricReader())
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    provider = TracerProvider(resource=resource)
    # the judge's verdict spans go to the demo's provider, beside the spans they judge (docs/judge.md)
    provider.add_span_processor(
        ToolCallEvalProcessor(downstream, config=config, meter_provider=meter_provider, tracer_provider=provider)
    )
    guard = None
    if options.guard_mode != "off":
        guard = Guard(config, mode=options.guard_mode, tracer_provider=provider, meter_provider=meter_provider)
    agent = ScriptedAgent(provider.get_tracer("otel_toolcall_eval.demo"), seed=options.seed, guard=guard)

    try:
        if options.duration is not None:
            _run_steady(agent, options, summary, console)
        else:
            for _ in range(options.traces):
                agent.run(options.failures)
            provider.force_flush()
            rich = have_rich()
            for tree in summary.span_trees() if rich else summary.plain_trees():
                console.print(tree)
            console.print(summary.table() if rich else summary.plain_table())
    finally:
        provider.shutdown()  # the judge's last verdicts first
        meter_provider.shutdown()
        if stand_in is not None:
            stand_in.stop()
        if scratch is not None:
            scratch.cleanup()
    if options.duration is None and stand_in is not None:
        console.print(f"judge: {stand_in.summary()}")
    elif options.duration is None and config.judge is None:
        console.print(
            escape(
                "The LLM judge is off: `otel-toolcall-eval demo --judge` runs it against a scripted local stand-in "
                "for a hosted model (the judge extra: pip install 'otel-toolcall-eval[judge]')"
            )
        )
    return summary


def _run_steady(agent: ScriptedAgent, options: DemoOptions, summary: SummaryExporter, console: Console) -> None:
    rate = options.traces_per_second or 5.0
    deadline = time.monotonic() + (options.duration or 0.0)
    next_at = time.monotonic()
    if not have_rich():  # no live view without rich: the summary at the end
        while time.monotonic() < deadline:
            agent.run(options.failures)
            next_at += 1.0 / rate
            time.sleep(max(0.0, min(next_at - time.monotonic(), deadline - time.monotonic())))
        console.print(summary.plain_table())
        return
    from rich.live import Live

    with Live(summary.table(), console=console, refresh_per_second=2, transient=False) as live:
        while time.monotonic() < deadline:
            agent.run(options.failures)
            next_at += 1.0 / rate
            live.update(summary.table())
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
