"""The service's own exports: the next hop (``serve.export``: spans and logs) and the metrics
(``serve.metrics_export``), with TLS, headers and a timeout, configured the same way for both.

Resolved once at start-up (``next_hop``), before anything listens, so that a bad certificate file, a key that is
not the certificate's or an unset header variable is a config error naming the field (exit 2), not an export that
fails at the first batch. Whether the connection is TLS follows the OTLP exporters and the Collector: an
``https://`` endpoint is TLS, ``http://`` plaintext, and a bare ``host:port`` (gRPC) is TLS when
``serve.export.tls`` is set without ``insecure: true`` (the config rejects the contradictions). The span exporter
re-sends received messages over both protocols (``serve.encode``); the log exporter (session verdicts, judge
events) goes to the same endpoint with the same TLS and headers. The metrics go to their own endpoint through the
SDK's OTLP metric exporter, resolved by the same ``next_hop`` (errors naming ``serve.metrics_export``).

One trap handled here: the HTTP exporters go through requests, which lets ``REQUESTS_CA_BUNDLE`` /
``CURL_CA_BUNDLE`` from the environment override the session's CA bundle (psf/requests#3829). With a ``ca_file``
configured the session keeps that file, so the setting means what it says on a machine that exports those
variables; proxies and everything else from the environment still apply.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import requests
from opentelemetry.sdk._logs.export import LogRecordExporter
from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
)
from opentelemetry.sdk.metrics.export import AggregationTemporality, MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.trace.export import SpanExporter

from otel_toolcall_eval.config import ConfigError
from otel_toolcall_eval.config.serve import OtlpDestination, ServeMetricsExport, Temporality, endpoint_scheme
from otel_toolcall_eval.serve.encode import grpc_exporter, http_exporter
from otel_toolcall_eval.serve.tls import ExportTlsMaterial, load_export_tls

if TYPE_CHECKING:
    from requests.sessions import _Settings  # the stubs' name for what merge_environment_settings returns


class _PinnedCaSession(requests.Session):
    """A requests session whose own ``verify`` (the configured CA file) wins over the environment's bundle."""

    def merge_environment_settings(
        self, url: str | bytes | None, proxies: Any, stream: Any, verify: Any, cert: Any
    ) -> _Settings:
        merged = super().merge_environment_settings(url, proxies, stream, verify, cert)
        if verify is None:  # the exporter never passes one: the session's is the configured file
            merged["verify"] = self.verify
        return merged


@dataclass(frozen=True)
class NextHop:
    """``serve.export`` (or ``serve.metrics_export``) resolved: whether to use TLS, the checked files, the headers
    with their values."""

    settings: OtlpDestination
    endpoint: str
    secure: bool
    tls: ExportTlsMaterial | None
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names (gRPC metadata needs them so)

    @property
    def mode(self) -> str:
        """``off``, ``on`` or ``mtls``: what the start-up line prints for the export."""
        if not self.secure:
            return "off"
        return "mtls" if self.tls is not None and self.tls.cert is not None else "on"

    def _grpc_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "endpoint": self.endpoint,
            "insecure": not self.secure,
            "timeout": self.settings.timeout_seconds,
        }
        if self.headers:
            kwargs["headers"] = dict(self.headers)
        if self.secure and self.tls is not None:  # else the SDK's default roots (or OTEL_EXPORTER_OTLP_CERTIFICATE)
            kwargs["credentials"] = self.tls.grpc_credentials()
        return kwargs

    def _http_kwargs(self, path: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "endpoint": self.endpoint.rstrip("/") + path,
            "timeout": self.settings.timeout_seconds,
        }
        if self.headers:
            kwargs["headers"] = dict(self.headers)
        tls = self.tls.settings if self.tls is not None else None
        if self.secure and tls is not None:
            if tls.ca_file is not None:
                kwargs["certificate_file"] = tls.ca_file
                kwargs["session"] = _PinnedCaSession()
            if tls.cert_file is not None:
                kwargs["client_certificate_file"] = tls.cert_file
                kwargs["client_key_file"] = tls.key_file
        return kwargs

    def span_exporter(self) -> SpanExporter:
        """The SDK's OTLP exporter of the protocol, re-sending the received messages with the scores added."""
        if self.settings.protocol == "grpc":
            return grpc_exporter(**self._grpc_kwargs())
        return http_exporter(**self._http_kwargs("/v1/traces"))

    def log_exporter(self) -> LogRecordExporter:
        if self.settings.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter

            return OTLPLogExporter(**self._grpc_kwargs())
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HTTPLogExporter

        return HTTPLogExporter(**self._http_kwargs("/v1/logs"))

    def metric_exporter(self, temporality: Temporality) -> MetricExporter:
        """The SDK's OTLP metric exporter of the protocol, with the temporality asked for."""
        preferred = _preferred_temporality(temporality)
        if self.settings.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

            return OTLPMetricExporter(**self._grpc_kwargs(), preferred_temporality=preferred)
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HTTPMetricExporter

        return HTTPMetricExporter(**self._http_kwargs("/v1/metrics"), preferred_temporality=preferred)


def _preferred_temporality(temporality: Temporality) -> dict[type, AggregationTemporality]:
    """Counters and histograms as asked; up-down counters and gauges cumulative (as the SDK's ``DELTA`` preference
    has them: a delta of a level means nothing). Explicit, so the config, not the environment, decides."""
    summed = AggregationTemporality.DELTA if temporality == "delta" else AggregationTemporality.CUMULATIVE
    level = AggregationTemporality.CUMULATIVE
    return {
        Counter: summed,
        Histogram: summed,
        ObservableCounter: summed,
        UpDownCounter: level,
        ObservableUpDownCounter: level,
        ObservableGauge: level,
    }


def metric_reader(hop: NextHop, settings: ServeMetricsExport) -> PeriodicExportingMetricReader:
    """The reader pushing the metrics to ``hop`` every ``interval_seconds`` (it starts its thread at once: build it
    after every check that can refuse the config)."""
    return PeriodicExportingMetricReader(
        hop.metric_exporter(settings.temporality),
        export_interval_millis=settings.interval_seconds * 1000,
        export_timeout_millis=settings.timeout_seconds * 1000,
    )


def next_hop(settings: OtlpDestination, field: str = "serve.export") -> NextHop:
    """Check ``settings`` (``serve.export``, or the section ``field`` names) against the files and the environment
    (``ConfigError`` naming the field)."""
    if not settings.endpoint:
        raise ConfigError(
            f"{field}.endpoint: required" + (" (or --export-endpoint)" if field == "serve.export" else "")
        )
    scheme = endpoint_scheme(settings.endpoint)
    tls = settings.tls
    secure = scheme == "https" or (scheme == "" and tls is not None and not tls.insecure)
    material = load_export_tls(tls, f"{field}.tls") if tls is not None and secure else None
    headers = {name.lower(): value for name, value in settings.headers.items()}
    for name, variable in settings.headers_env.items():
        value = os.environ.get(variable)
        if not value:
            raise ConfigError(f"{field}.headers_env.{name}: environment variable {variable} is not set")
        if any(not (" " <= ch <= "~") for ch in value):
            raise ConfigError(
                f"{field}.headers_env.{name}: environment variable {variable} holds a character a header "
                "cannot carry (printable ASCII only)"
            )
        headers[name.lower()] = value
    return NextHop(settings, settings.endpoint, secure, material, headers)
