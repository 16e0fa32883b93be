"""OTLP span and metric exporters for a user-given endpoint and protocol (demo, replay)."""

from __future__ import annotations

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
