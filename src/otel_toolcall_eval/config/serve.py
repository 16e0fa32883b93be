"""The ``serve:`` section of the config file: where the scoring service listens, its limits, and its next hop.

Every limit is here because the service reads untrusted traffic: a message size cap (gRPC and HTTP), a queue
counted in spans between receiving and scoring (full: the receivers answer with OTLP's retryable codes), a cap on
concurrent requests and a deadline for the drain at shutdown. This module must not import
``otel_toolcall_eval.config`` (that module imports this one).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

# How a span whose parent is remote (another service's span, through traceparent) is treated: "root", the local
# root of this process's part, finishes the trace (what the in-process processor does: nothing above it comes
# here); "segment" finishes nothing, so the trace's true root (no parent at all) gets the whole trace's verdict
# when the service receives every service's spans (docs/serve.md, "Traces across services").
RemoteParents = Literal["segment", "root"]
REMOTE_PARENTS: tuple[str, ...] = get_args(RemoteParents)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # no option means nan or inf


class ServeExport(_Strict):
    """The next hop of the scored spans (a Collector, Jaeger, Tempo) and the export queue in front of it."""

    endpoint: str | None = Field(
        default=None, description="OTLP endpoint, e.g. http://127.0.0.1:4317 (gRPC) or http://127.0.0.1:4318 (HTTP)"
    )
    protocol: Literal["grpc", "http"] = "grpc"
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
    max_concurrent_requests: int = Field(default=32, ge=1, le=10_000, description="HTTP connections and gRPC RPCs")
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
    export: ServeExport = Field(default_factory=ServeExport)

    @model_validator(mode="after")
    def _one_receiver(self) -> ServeConfig:
        if self.http_port is None and self.grpc_port is None:
            raise ValueError("set http_port or grpc_port (or both)")
        return self
