"""The ``serve:`` section of the config file: where the scoring service listens, its limits, and its next hop.

Every limit is here because the service reads untrusted traffic: a message size cap (gRPC and HTTP), a queue
counted in spans between receiving and scoring (full: the receivers answer with OTLP's retryable codes), a cap on
concurrent requests and a deadline for the drain at shutdown. This module must not import
``otel_toolcall_eval.config`` (that module imports this one).
"""

from __future__ import annotations

import re
from typing import Literal, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

# How a span whose parent is remote (another service's span, through traceparent) is treated: "root", the local
# root of this process's part, finishes the trace (what the in-process processor does: nothing above it comes
# here); "segment" finishes nothing, so the trace's true root (no parent at all) gets the whole trace's verdict
# when the service receives every service's spans (docs/serve.md, "Traces across services").
RemoteParents = Literal["segment", "root"]
REMOTE_PARENTS: tuple[str, ...] = get_args(RemoteParents)
# The longest root grace window (``root_grace_seconds``; the processor's argument of that name checks it too): the
# root's export is delayed that long, and the trace's state and its root stay in memory meanwhile.
MAX_ROOT_GRACE_SECONDS = 300.0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # no option means nan or inf


# an HTTP header name (RFC 9110 token); gRPC metadata keys are its lower-case form, so names are compared that way
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# a header value the next hop can take: printable ASCII and spaces (gRPC metadata allows no more), no CR or LF
_HEADER_VALUE = re.compile(r"[\x20-\x7e]*")


def endpoint_scheme(endpoint: str) -> Literal["http", "https", ""]:
    """``http`` / ``https`` from the endpoint's URL, or ``""`` for a bare ``host:port`` (a gRPC target)."""
    scheme = urlsplit(endpoint).scheme.lower() if "://" in endpoint else ""
    return "https" if scheme == "https" else "http" if scheme == "http" else ""


class ServeExportTls(_Strict):
    """TLS to the next hop or the metrics receiver, named as the Collector's ``tls:`` client settings are. The
    endpoint's scheme decides first (``https://`` is TLS, ``http://`` plaintext, as for the OTLP exporters); this
    block says whom to trust and which certificate to show, and turns TLS on for a bare ``host:port`` gRPC
    endpoint. ``insecure: true`` is the Collector's plaintext switch, so it may not be combined with a file or an
    ``https://`` endpoint (a contradiction is a config error, never a silent choice). The files are read and checked
    at start-up (``serve.tls.load_export_tls``)."""

    ca_file: str | None = Field(
        default=None,
        min_length=1,
        description="PEM CA bundle to trust for the next hop's certificate (none: the exporters' default roots)",
    )
    cert_file: str | None = Field(
        default=None, min_length=1, description="PEM client certificate chain (mutual TLS; with key_file)"
    )
    key_file: str | None = Field(
        default=None,
        min_length=1,
        validate_default=True,
        description="PEM private key of cert_file (not encrypted; with cert_file)",
    )
    insecure: bool = Field(default=False, description="true: plaintext to the next hop (the Collector's tls.insecure)")

    @field_validator("key_file")
    @classmethod
    def _pair(cls, value: str | None, info: ValidationInfo) -> str | None:
        cert = info.data.get("cert_file")
        if (value is None) != (cert is None) and "cert_file" in info.data:
            raise ValueError("cert_file and key_file go together (both: mutual TLS, neither: no client certificate)")
        return value

    @field_validator("insecure")
    @classmethod
    def _plaintext_has_no_files(cls, value: bool, info: ValidationInfo) -> bool:
        files = [name for name in ("ca_file", "cert_file", "key_file") if info.data.get(name)]
        if value and files:
            need = "needs" if len(files) == 1 else "need"
            raise ValueError(f"true means plaintext, but {' and '.join(files)} {need} TLS: drop one or the other")
        return value


class OtlpDestination(_Strict):
    """Where the service sends OTLP of its own, and how: the protocol, the endpoint, TLS, headers and a timeout.
    Shared by the scored spans' next hop (``export``) and the service's metrics (``metrics_export``), so that both
    take the same settings with the same checks; ``serve.export.next_hop`` resolves either."""

    protocol: Literal["grpc", "http"] = Field(default="grpc", description="OTLP over gRPC or over HTTP (protobuf)")
    endpoint: str | None = Field(
        default=None,
        description="OTLP endpoint, e.g. http://127.0.0.1:4317 (gRPC) or https://collector:4318 (HTTP); https: TLS",
    )
    tls: ServeExportTls | None = Field(
        default=None, description="TLS to the receiver: CA to trust, client certificate (none: the scheme decides)"
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="headers sent with every export (not secrets: see headers_env)"
    )
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="header name -> environment variable holding its value (an API key), read at start-up",
    )
    timeout_seconds: float = Field(
        default=10.0, gt=0, le=600, description="per export request, its retries included (the OTLP exporters')"
    )

    @field_validator("endpoint")
    @classmethod
    def _http_needs_a_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("protocol") == "http" and not endpoint_scheme(value):
            raise ValueError(f"protocol http needs an http:// or https:// URL, got {value!r}")
        return value

    @field_validator("tls")
    @classmethod
    def _tls_fits_the_scheme(cls, value: ServeExportTls | None, info: ValidationInfo) -> ServeExportTls | None:
        endpoint = info.data.get("endpoint")
        if value is None or endpoint is None:
            return value
        scheme = endpoint_scheme(endpoint)
        if scheme == "http" and not value.insecure:
            raise ValueError(
                f"the endpoint {endpoint} is plaintext (http://): use https:// for TLS, or drop tls "
                "(tls.insecure: true says plaintext)"
            )
        if scheme == "https" and value.insecure:
            raise ValueError(f"insecure: true (plaintext) contradicts the https:// endpoint {endpoint}")
        return value

    @field_validator("headers", "headers_env")
    @classmethod
    def _header_names(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        seen = {k.lower() for k in info.data.get("headers", {})} if info.field_name == "headers_env" else set()
        for name, text in value.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a header name")
            if name.lower() in seen:
                raise ValueError(f"{name!r} is set twice (header names are case-insensitive)")
            seen.add(name.lower())
            if info.field_name == "headers" and not _HEADER_VALUE.fullmatch(text):
                raise ValueError(f"the value of {name!r} has a character a header cannot carry (printable ASCII)")
            if info.field_name == "headers_env" and not text:
                raise ValueError(f"{name!r}: no environment variable named")
        return value


class ServeExport(OtlpDestination):
    """The next hop of the scored spans (a Collector, Jaeger, Tempo) and the export queue in front of it."""

    max_queue_spans: int = Field(
        default=8_192,
        ge=1,
        le=1_000_000,
        description="scored spans waiting for export; when full, scoring waits (never a drop), then receiving",
    )
    max_batch_spans: int = Field(default=512, ge=1, le=100_000, description="spans per export request")
    schedule_delay_millis: int = Field(default=1_000, ge=1, le=60_000, description="longest wait to fill a batch")

    @model_validator(mode="after")
    def _batch_fits(self) -> ServeExport:
        if self.max_batch_spans > self.max_queue_spans:
            raise ValueError("max_batch_spans must not exceed max_queue_spans")
        return self


# How the exported counters and histograms aggregate over time (the exporters' ``preferred_temporality``):
# cumulative, the OTLP default, totals since start; delta, per export interval (what some backends require).
# Gauges and up-down counters stay cumulative either way, as OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE
# has it.
Temporality = Literal["cumulative", "delta"]


class ServeMetricsExport(OtlpDestination):
    """The service's metrics (its own and the processor's) pushed over OTLP to a Collector or any OTLP metrics
    receiver, every ``interval_seconds`` and once more at shutdown; beside or instead of ``prometheus_port``."""

    endpoint: str = Field(
        min_length=1,
        description="OTLP endpoint, e.g. http://collector:4317 (gRPC) or https://collector:4318 (HTTP); https: TLS",
    )
    interval_seconds: float = Field(
        default=10.0, ge=0.1, le=3_600, description="how often the metrics are collected and exported"
    )
    temporality: Temporality = Field(
        default="cumulative", description="cumulative (totals since start) or delta (per interval) for counters"
    )


class ServeTls(_Strict):
    """TLS on both receivers (PEM files, read once at start-up); with ``client_ca_file`` a client certificate
    signed by that CA is required (mutual TLS). A file that is missing or unreadable fails the start naming the
    field (``serve.Service``), not at the first connection."""

    cert_file: str = Field(min_length=1, description="PEM certificate chain the receivers present")
    key_file: str = Field(min_length=1, description="PEM private key of cert_file (not encrypted)")
    client_ca_file: str | None = Field(
        default=None, min_length=1, description="PEM CA bundle: clients must present a certificate it signed (mTLS)"
    )


class ServeConfig(_Strict):
    """``otel-toolcall-eval serve``: OTLP in (gRPC and HTTP), the online processor, OTLP out."""

    host: str = Field(default="127.0.0.1", min_length=1, description="address both receivers bind")
    http_port: int | None = Field(default=4318, ge=0, le=65_535, description="OTLP/HTTP port; 0 picks a free one")
    grpc_port: int | None = Field(default=4317, ge=0, le=65_535, description="OTLP/gRPC port; 0 picks a free one")
    max_message_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        le=512 * 1024 * 1024,
        description="largest request body, after decompression for HTTP; larger: HTTP 413, gRPC RESOURCE_EXHAUSTED",
    )
    max_queue_spans: int = Field(
        default=20_000, ge=1, le=10_000_000, description="received spans waiting to be scored; full: 429/UNAVAILABLE"
    )
    max_queue_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=64 * 1024,
        le=64 * 1024 * 1024 * 1024,
        description=(
            "accepted spans not yet exported (queued, being scored, held, in the export queue), counted in their "
            "encoded size; full: 429/UNAVAILABLE (one request is always taken when nothing is held)"
        ),
    )
    max_inflight_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=1024 * 1024,
        le=64 * 1024 * 1024 * 1024,
        description=(
            "memory of the requests being read and decoded at once, estimated from each body's size and structure; "
            "taken: 503/UNAVAILABLE with a retry delay; a request that alone would need more: 413/INVALID_ARGUMENT"
        ),
    )
    max_span_attributes: int = Field(
        default=1_024,
        ge=1,
        le=1_000_000,
        description="attributes of one span, event, link, resource or scope; more: that span refused (partial success)",
    )
    max_array_values: int = Field(
        default=4_096, ge=1, le=1_000_000, description="values of one array or key-value list in an attribute value"
    )
    max_value_depth: int = Field(
        default=8, ge=1, le=64, description="arrays and key-value lists nested in one attribute value"
    )
    max_concurrent_requests: int = Field(
        default=32, ge=1, le=10_000, description="authenticated HTTP requests and gRPC calls handled at once"
    )
    max_pending_connections: int = Field(
        default=64,
        ge=1,
        le=100_000,
        description="HTTP connections not (yet) in an authenticated request; more: the oldest of them is closed",
    )
    idle_timeout_seconds: float = Field(
        default=30.0, gt=0, le=3_600, description="an HTTP keep-alive connection waiting for its next request"
    )
    head_timeout_seconds: float = Field(
        default=10.0, gt=0, le=600, description="an HTTP request's line and headers, from their first byte to the last"
    )
    request_timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3_600,
        description="an HTTP request's body once its headers are in, and a whole gRPC call, server-side",
    )
    retry_after_seconds: int = Field(default=1, ge=1, le=3_600, description="what a rejected sender is told to wait")
    shutdown_timeout_seconds: float = Field(
        default=10.0, gt=0, le=3_600, description="SIGTERM: the deadline to drain, score and export what was accepted"
    )
    bearer_token_env: str | None = Field(
        default=None,
        min_length=1,
        description="name of an environment variable holding the bearer token the receivers require (none: open)",
    )
    tls: ServeTls | None = Field(default=None, description="TLS on both receivers (none: plaintext)")
    prometheus_port: int | None = Field(default=None, ge=0, le=65_535, description="expose metrics for Prometheus")
    remote_parents: RemoteParents = Field(
        default="segment",
        description="segment: a remote-parented span waits for its trace's true root (else the TTL); root: it is one",
    )
    root_grace_seconds: float = Field(
        default=5.0,
        ge=0,
        le=MAX_ROOT_GRACE_SECONDS,
        description=(
            "a finished trace's root waits this long for the trace's late spans (other services' exports) before "
            "its verdict is written and it is exported; 0: at once"
        ),
    )
    export: ServeExport = Field(default_factory=ServeExport)
    metrics_export: ServeMetricsExport | None = Field(
        default=None, description="push the metrics over OTLP (none: only prometheus_port, if set)"
    )

    @model_validator(mode="after")
    def _one_receiver(self) -> ServeConfig:
        if self.http_port is None and self.grpc_port is None:
            raise ValueError("set http_port or grpc_port (or both)")
        return self
