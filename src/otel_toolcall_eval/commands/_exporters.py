"""OTLP span, metric and log exporters for a user-given endpoint and protocol (demo, replay, serve)."""

from __future__ import annotations

from opentelemetry.sdk._logs.export import LogRecordExporter
from opentelemetry.sdk.metrics.export import MetricExporter
from opentelemetry.sdk.trace.export import SpanExporter


def otlp_exporters(endpoint: str, protocol: str) -> tuple[SpanExporter, MetricExporter]:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=endpoint, insecure=True), OTLPMetricExporter(endpoint=endpoint, insecure=True)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HTTPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HTTPSpanExporter

    base = endpoint.rstrip("/")
    return HTTPSpanExporter(endpoint=base + "/v1/traces"), HTTPMetricExporter(endpoint=base + "/v1/metrics")


def otlp_log_exporter(endpoint: str, protocol: str) -> LogRecordExporter:
    """Where the session verdicts (``gen_ai.evaluation.result`` log records) go, next to the spans."""
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter

        return OTLPLogExporter(endpoint=endpoint, insecure=True)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HTTPLogExporter

    return HTTPLogExporter(endpoint=endpoint.rstrip("/") + "/v1/logs")
