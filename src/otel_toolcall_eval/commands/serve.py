"""``otel-toolcall-eval serve``: the scoring service, configured by the ``serve:`` section and a few flags.

Runs until SIGTERM or SIGINT, then shuts down gracefully (see ``otel_toolcall_eval.serve.Service.stop``); exits 0
when everything accepted was exported, 1 when the deadline or the next hop lost spans, 2 on a bad config
(``errors.ExitCode``).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from rich.console import Console

from otel_toolcall_eval import extras
from otel_toolcall_eval.commands._types import finite
from otel_toolcall_eval.config import ConfigError, EvalConfig
from otel_toolcall_eval.config.serve import ServeConfig
from otel_toolcall_eval.errors import ExitCode

if TYPE_CHECKING:
    from otel_toolcall_eval.serve import Service

# flag -> field of ``serve:`` it overrides
_FLAGS = {
    "host": "host",
    "http_port": "http_port",
    "grpc_port": "grpc_port",
    "prometheus_port": "prometheus_port",
    "shutdown_timeout": "shutdown_timeout_seconds",
}


def register(sub: Any) -> None:
    parser = sub.add_parser("serve", help="score OTLP traces from any agent: receive, score, export")
    parser.add_argument("--config", type=Path, help="config file (its serve: section, policies, judge ...)")
    parser.add_argument("--host", help="address both receivers bind (default 127.0.0.1)")
    parser.add_argument("--http-port", type=int, help="OTLP/HTTP port (default 4318; 0 picks a free one)")
    parser.add_argument("--grpc-port", type=int, help="OTLP/gRPC port (default 4317; 0 picks a free one)")
    parser.add_argument("--export-endpoint", help="the next hop, e.g. http://127.0.0.1:4317")
    parser.add_argument("--export-protocol", choices=["grpc", "http"])
    parser.add_argument("--prometheus-port", type=int, help="expose the metrics for Prometheus on this port")
    parser.add_argument(
        "--metrics-endpoint", help="push the metrics over OTLP to this receiver, e.g. http://127.0.0.1:4317"
    )
    parser.add_argument("--metrics-protocol", choices=["grpc", "http"], help="OTLP protocol of --metrics-endpoint")
    parser.add_argument("--shutdown-timeout", type=finite, help="seconds to drain and export on SIGTERM")
    parser.add_argument("--tls-cert-file", help="PEM certificate chain: both receivers speak TLS only")
    parser.add_argument("--tls-key-file", help="PEM private key of --tls-cert-file")
    parser.add_argument("--tls-client-ca-file", help="PEM CA bundle: require client certificates it signed (mTLS)")
    parser.add_argument("--export-ca-file", help="PEM CA bundle to trust for the next hop's certificate (TLS)")
    parser.add_argument("--export-cert-file", help="PEM client certificate for the next hop (mTLS)")
    parser.add_argument("--export-key-file", help="PEM private key of --export-cert-file")
    parser.set_defaults(func=run)


def settings(args: argparse.Namespace) -> EvalConfig:
    """The config file with the flags applied to its ``serve:`` section, validated again (errors name the field)."""
    config = EvalConfig.load(args.config) if args.config else EvalConfig()
    data = config.serve.model_dump()
    for flag, field in _FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            data[field] = value
    if args.export_endpoint is not None:
        data["export"]["endpoint"] = args.export_endpoint
    if args.export_protocol is not None:
        data["export"]["protocol"] = args.export_protocol
    tls = {field: value for field, value in _tls_flags(args).items() if value is not None}
    if tls:
        data["tls"] = {**(data.get("tls") or {}), **tls}
    export_tls = {field: value for field, value in _export_tls_flags(args).items() if value is not None}
    if export_tls:
        data["export"]["tls"] = {**(data["export"].get("tls") or {}), **export_tls}
    metrics = {"endpoint": args.metrics_endpoint, "protocol": args.metrics_protocol}
    if any(value is not None for value in metrics.values()):  # over the section's, or a section of their own
        data["metrics_export"] = {
            **(data.get("metrics_export") or {}),
            **{field: value for field, value in metrics.items() if value is not None},
        }
    try:
        serve = ServeConfig.model_validate(data)
    except ValidationError as exc:
        fields = "; ".join(f"serve.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid serve settings: {fields}") from None
    return config.model_copy(update={"serve": serve})


def _tls_flags(args: argparse.Namespace) -> dict[str, str | None]:
    return {
        "cert_file": args.tls_cert_file,
        "key_file": args.tls_key_file,
        "client_ca_file": args.tls_client_ca_file,
    }


def _export_tls_flags(args: argparse.Namespace) -> dict[str, str | None]:
    return {
        "ca_file": args.export_ca_file,
        "cert_file": args.export_cert_file,
        "key_file": args.export_key_file,
    }


def run(args: argparse.Namespace, console: Console) -> int:
    from otel_toolcall_eval.serve import Service

    config = settings(args)
    service = Service(config, metric_readers=_prometheus_readers(config.serve))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        service.start()
    except OSError as exc:
        raise ConfigError(f"serve: {exc}") from None
    tls = config.serve.tls
    console.print(
        f"listening http={service.http_port} grpc={service.grpc_port} host={config.serve.host} "
        f"tls={'off' if tls is None else 'mtls' if tls.client_ca_file else 'on'} "
        f"export={config.serve.export.endpoint} ({config.serve.export.protocol}) "
        f"export_tls={'off' if service.next_hop is None else service.next_hop.mode} "
        f"metrics_export={_metrics_line(service)}",
        highlight=False,
        soft_wrap=True,
    )
    console.file.flush()
    while not stop.wait(1.0):
        pass
    report = service.stop()
    console.print(report.summary(), highlight=False, soft_wrap=True)
    # 1 (the gate code): the service's own guarantee, everything accepted exported, did not hold
    code = ExitCode.OK if report.complete else ExitCode.GATE_FAILED
    if report.overran:  # threads still exporting to a next hop that does not answer: exit now, as promised
        console.file.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _metrics_line(service: Service) -> str:
    """``off``, or the metrics' endpoint, protocol and TLS mode (as ``export=`` and ``export_tls=`` say them)."""
    metrics, hop = service.settings.metrics_export, service.metrics_hop
    return "off" if metrics is None or hop is None else f"{metrics.endpoint} ({metrics.protocol}, tls={hop.mode})"


def _prometheus_readers(serve: ServeConfig) -> list[Any]:
    """The Prometheus endpoint's reader (its HTTP server started), for the service's own MeterProvider, which
    shuts it down with the OTLP one (``serve.metrics_export``) at the end of ``Service.stop``."""
    if serve.prometheus_port is None:
        return []
    extras.require("prometheus", "serve --prometheus-port (serve.prometheus_port)")
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import start_http_server

    start_http_server(serve.prometheus_port, addr=serve.host)
    return [PrometheusMetricReader()]
