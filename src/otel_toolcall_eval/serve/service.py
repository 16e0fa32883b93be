"""The scoring service: receivers -> bounded queue -> one scoring thread -> ``ToolCallEvalProcessor`` -> OTLP.

``Service(config).start()`` binds both receivers (a port of 0 picks a free one: read ``http_port`` /
``grpc_port``); ``stop()`` is the graceful shutdown: refuse new requests (retryable codes, ``/readyz`` 503),
let those in progress finish, drain the queue through the processor, then flush and shut the processor down
(which also gives a verdict to traces whose root never came) so the exporter sends everything accepted, all
within ``serve.shutdown_timeout_seconds``. Session verdicts and the judge's verdict events
(``gen_ai.evaluation.result`` log records) go to the same endpoint over OTLP logs, unless a ``logger_provider`` is
given. With a judge configured, its verdict spans (linked to the judged call) leave through the same span exporter
as the scored spans, from a TracerProvider of the service's own (``own_resource``: ``otel-toolcall-eval``),
unless a ``tracer_provider`` is given: a service has no application whose global provider could carry them.
With ``serve.metrics_export`` (or ``metric_readers``, the CLI's Prometheus reader) and no ``meter_provider``, the
service's and the processor's metrics go through a MeterProvider of the service's own (the same resource),
pushed over OTLP every ``interval_seconds`` and once more at ``stop``, within what is left of its deadline.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk._logs import LoggerProvider as SdkLoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import TracerProvider

from otel_toolcall_eval._version import __version__
from otel_toolcall_eval.config import ConfigError, EvalConfig
from otel_toolcall_eval.processor import ToolCallEvalProcessor
from otel_toolcall_eval.serve.decode import Limits
from otel_toolcall_eval.serve.export import metric_reader, next_hop
from otel_toolcall_eval.serve.grpc_receiver import GrpcReceiver
from otel_toolcall_eval.serve.http_receiver import HttpBounds, HttpReceiver
from otel_toolcall_eval.serve.intake import Intake
from otel_toolcall_eval.serve.metrics import EXPORTED, RECEIVED, SCORED, ServeMetrics
from otel_toolcall_eval.serve.pipeline import (
    Arrivals,
    Borrowed,
    ByteBudget,
    CountingExporter,
    ScoringWorker,
    SpanQueue,
    _ExportWindow,
)
from otel_toolcall_eval.serve.tls import load_tls

logger = logging.getLogger("otel_toolcall_eval.serve")


def own_resource() -> Resource:
    """The resource of what the service emits as itself (the judge's spans, its metrics): ``service.name``
    ``otel-toolcall-eval``, its version, and a ``service.instance.id`` per process unless
    ``OTEL_RESOURCE_ATTRIBUTES`` names one, so that replicas pushing metrics to one Collector stay apart."""
    resource = Resource.create({SERVICE_NAME: "otel-toolcall-eval", SERVICE_VERSION: __version__})
    if SERVICE_INSTANCE_ID in resource.attributes:
        return resource
    return resource.merge(Resource({SERVICE_INSTANCE_ID: str(uuid.uuid4())}))


@dataclass(frozen=True)
class StopReport:
    """What became of the spans accepted since start, at the end of ``Service.stop``."""

    received: int  # accepted (answered 200 / OK)
    scored: int
    exported: int  # acknowledged by the next hop
    export_failed: int  # refused by the next hop, or not reached, before the export timeout
    lost: int  # accepted and not through any export attempt when the stop ended (queued, scoring, exporting)
    export_timed_out: int = 0  # no answer within serve.export.timeout_seconds: the next hop may have them
    overran: bool = False  # the stop's deadline passed before the drain and the export finished

    @property
    def complete(self) -> bool:
        return (
            self.lost == 0 and self.export_failed == 0 and self.export_timed_out == 0 and self.exported == self.received
        )

    def summary(self) -> str:
        """The ``serve`` command's last line: every count, and what it counts."""
        line = (
            f"stopped: received {self.received}, scored {self.scored}, exported {self.exported}, "
            f"export failed {self.export_failed}, export timed out {self.export_timed_out}"
            f"{' (the next hop may have them)' if self.export_timed_out else ''}, lost {self.lost}"
        )
        if self.overran:
            line += " (the shutdown deadline passed: what was still queued or exporting is lost)"
        return line


def _check_token(token: str, variable: str) -> None:
    """A token a sender can present: a header value arrives without its edge whitespace and carries printable
    ASCII only (gRPC metadata, HTTP), so another token would match no request, and every sender would get 401,
    which the OTLP exporters do not retry (their data dropped) while the service looked healthy. Refused here, at
    start-up, naming the variable and never showing the value."""
    where = f"serve.bearer_token_env: environment variable {variable}"
    if token != token.strip():
        raise ConfigError(
            f"{where} starts or ends with whitespace (a secret file's trailing newline?): no sender could present "
            "it; strip it (e.g. $(tr -d '\\n' < file))"
        )
    if any(not (" " <= ch <= "~") for ch in token):
        raise ConfigError(f"{where} holds a character a header cannot carry (printable ASCII only)")


class Service:
    """One scoring service. ``span_exporter`` replaces the OTLP exporter built from ``serve.export``.

    ``scoring=False`` hands received spans straight to the export (same receivers, queue, end order, export
    window and exporter, no processor): the pass-through the serve benchmark measures the scoring against.

    ``meter_provider`` replaces the one built from ``serve.metrics_export`` and ``metric_readers`` (which are then
    not allowed: a given provider's readers are fixed)."""

    def __init__(
        self,
        config: EvalConfig | None = None,
        *,
        span_exporter: SpanExporter | None = None,
        meter_provider: MeterProvider | None = None,
        metric_readers: Sequence[MetricReader] = (),
        logger_provider: LoggerProvider | None = None,
        tracer_provider: TracerProvider | None = None,
        scoring: bool = True,
    ) -> None:
        config = config or EvalConfig()
        serve = config.serve
        self.settings = serve
        if meter_provider is not None and metric_readers:
            raise ValueError("metric_readers go to the service's own MeterProvider: not with a meter_provider")
        self._own_logger_provider: SdkLoggerProvider | None = None
        # the next hop's TLS files and header variables, checked before anything connects: errors name the field
        self.next_hop = None if span_exporter is not None else next_hop(serve.export)
        metrics = serve.metrics_export if meter_provider is None else None
        self.metrics_hop = None if metrics is None else next_hop(metrics, "serve.metrics_export")  # checked alike
        token = None
        if serve.bearer_token_env is not None:
            token = os.environ.get(serve.bearer_token_env)
            if not token:
                raise ConfigError(f"serve.bearer_token_env: environment variable {serve.bearer_token_env} is not set")
            _check_token(token, serve.bearer_token_env)
        self._tls = None if serve.tls is None else load_tls(serve.tls)  # before anything listens: errors name the field
        if self.next_hop is not None:  # after every check that can refuse the config: no channel or thread leaks
            span_exporter = self.next_hop.span_exporter()  # re-sends the received messages with the scores added
            # session verdicts and judge events go where the spans go
            if logger_provider is None and (config.sessions.enabled or config.judge is not None):
                logger_provider = self._own_logger_provider = SdkLoggerProvider()
                self._own_logger_provider.add_log_record_processor(
                    BatchLogRecordProcessor(self.next_hop.log_exporter())
                )
        assert span_exporter is not None  # given, or built from the next hop just above
        self._own_meter_provider: SdkMeterProvider | None = None
        readers = [*metric_readers]
        if self.metrics_hop is not None and metrics is not None:  # first: stopped first at shutdown (its thread)
            readers.insert(0, metric_reader(self.metrics_hop, metrics))
        if readers:
            meter_provider = self._own_meter_provider = SdkMeterProvider(
                metric_readers=readers, resource=own_resource()
            )
        self._queue = SpanQueue(serve.max_queue_spans)
        self.metrics = ServeMetrics(meter_provider, queue_size=self._queue.__len__)
        window = _ExportWindow(serve.export.max_queue_spans)
        # the queue, the export queue, and as much again for spans the processor holds (a trace's late spans)
        self._arrivals = Arrivals(2 * (serve.max_queue_spans + serve.export.max_queue_spans))
        self._exporter = span_exporter  # borrowed by both BatchSpanProcessors, shut down once by ``stop``
        self._own_tracer_provider: SdkTracerProvider | None = None
        if tracer_provider is None and config.judge is not None:
            tracer_provider = self._own_tracer_provider = SdkTracerProvider(resource=own_resource())
            self._own_tracer_provider.add_span_processor(
                BatchSpanProcessor(
                    Borrowed(span_exporter),
                    max_export_batch_size=serve.export.max_batch_spans,
                    schedule_delay_millis=serve.export.schedule_delay_millis,
                )
            )
        self._held = ByteBudget(serve.max_queue_bytes)  # accepted and not yet exported, in encoded bytes
        self._batch = BatchSpanProcessor(
            CountingExporter(
                Borrowed(span_exporter),
                window,
                self.metrics,
                self._arrivals,
                self._held,
                None if self.next_hop is None else serve.export.timeout_seconds,
            ),
            max_queue_size=serve.export.max_queue_spans,
            max_export_batch_size=serve.export.max_batch_spans,
            schedule_delay_millis=serve.export.schedule_delay_millis,
        )
        # Inline: the scoring thread is the service's background worker already, and the processor's own
        # background queue would make it wait a second time for no gain.
        inline = config.model_copy(update={"evaluation": config.evaluation.model_copy(update={"mode": "inline"})})
        try:
            self.processor = ToolCallEvalProcessor(
                self._batch,
                inline,
                meter_provider=meter_provider,
                logger_provider=logger_provider,
                tracer_provider=tracer_provider,
                remote_parents=serve.remote_parents,
                root_grace_seconds=serve.root_grace_seconds,
            )
        except BaseException:  # a judge config error (e.g. its key variable unset): no export thread left behind
            if self._own_tracer_provider is not None:
                self._own_tracer_provider.shutdown()
            if self._own_logger_provider is not None:
                self._own_logger_provider.shutdown()
            self._batch.shutdown()  # type: ignore[no-untyped-call]
            if self._own_meter_provider is not None:
                self._own_meter_provider.shutdown(timeout_millis=1_000)  # nothing counted yet worth waiting for
            raise
        self._window = window
        self._worker = ScoringWorker(
            self._queue, self.processor if scoring else self._batch, window, self.metrics, serve.export.max_batch_spans
        )
        self.intake = Intake(
            self._queue,
            self.metrics,
            token,
            serve.retry_after_seconds,
            serve.max_message_bytes,
            self._arrivals,
            held=self._held,
            inflight=ByteBudget(serve.max_inflight_bytes),
            limits=Limits(serve.max_span_attributes, serve.max_array_values, serve.max_value_depth),
        )
        self._http: HttpReceiver | None = None
        self._grpc: GrpcReceiver | None = None
        self._stopped: StopReport | None = None

    @property
    def http_port(self) -> int | None:
        return None if self._http is None else self._http.port

    @property
    def grpc_port(self) -> int | None:
        return None if self._grpc is None else self._grpc.port

    def start(self) -> None:
        serve = self.settings
        self._worker.start()
        try:
            if serve.http_port is not None:
                self._http = HttpReceiver(
                    serve.host,
                    serve.http_port,
                    self.intake,
                    HttpBounds(
                        max_concurrent=serve.max_concurrent_requests,
                        max_pending=serve.max_pending_connections,
                        idle_seconds=serve.idle_timeout_seconds,
                        head_seconds=serve.head_timeout_seconds,
                        request_seconds=serve.request_timeout_seconds,
                    ),
                    None if self._tls is None else self._tls.http,
                )
                self._http.start()
            if serve.grpc_port is not None:
                self._grpc = GrpcReceiver(
                    serve.host,
                    serve.grpc_port,
                    self.intake,
                    serve.max_concurrent_requests,
                    None if self._tls is None else self._tls.grpc_credentials(),
                    serve.request_timeout_seconds,
                )
                self._grpc.start()
        except OSError:
            self.stop(timeout=1.0)
            raise

    def stop(self, timeout: float | None = None) -> StopReport:
        """Graceful shutdown within ``timeout`` (default ``serve.shutdown_timeout_seconds``), one deadline for the
        whole stop; idempotent. Whatever has not finished by then (a next hop that does not answer, a drain that
        takes longer) is left to daemon threads and counted lost in the report (``overran``)."""
        if self._stopped is not None:
            return self._stopped
        deadline = time.monotonic() + (self.settings.shutdown_timeout_seconds if timeout is None else timeout)
        self.intake.closing = True  # new requests: retryable refusals, /readyz 503
        if self._grpc is not None:
            self._grpc.stop(grace=max(0.0, min(5.0, deadline - time.monotonic())))
        if self._http is not None:
            self._http.stop(deadline)
        drain = threading.Thread(target=self._drain, args=(deadline,), name="toolcall-eval-serve-stop", daemon=True)
        drain.start()
        drain.join(max(0.0, deadline - time.monotonic()))
        received = self.metrics.total(RECEIVED)
        exported = self.metrics.total(EXPORTED, "ok")
        failed = self.metrics.total(EXPORTED, "failed")
        timed_out = self.metrics.total(EXPORTED, "timed_out")
        report = StopReport(
            received=received,
            scored=self.metrics.total(SCORED),
            exported=exported,
            export_failed=failed,
            lost=max(0, received - exported - failed - timed_out),
            export_timed_out=timed_out,
            overran=drain.is_alive(),
        )
        self._stopped = report
        if not report.complete:
            logger.warning("toolcall-eval serve: shutdown incomplete: %s", report)
        return report

    def _drain(self, deadline: float) -> None:
        """Requests in progress, the queue, the scoring, the export and the providers, in that order; on the
        stop's thread, which waits for it no longer than ``deadline``."""
        self.intake.wait_idle(deadline)
        self._queue.close()
        self._worker.join(deadline)
        remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
        self.processor.force_flush(remaining_ms)
        self._window.idle(deadline)
        self.processor.shutdown()  # verdicts for unfinished traces; the BatchSpanProcessor exports the rest
        if self._own_tracer_provider is not None:  # the judge's verdict spans, the last ones drained just now
            self._own_tracer_provider.shutdown()
        if self._own_logger_provider is not None:  # the session verdicts emitted at the flush and the shutdown
            self._own_logger_provider.shutdown()
        self._exporter.shutdown()
        if self._own_meter_provider is not None:  # the final totals, exported once more
            self._shutdown_metrics(deadline)

    def _shutdown_metrics(self, deadline: float) -> None:
        """The metrics' last collection and export, in what is left of the deadline (at least a millisecond, so
        the readers always stop): a dead or slow receiver loses that export, and never delays the stop more."""
        assert self._own_meter_provider is not None
        remaining_ms = max(1.0, (deadline - time.monotonic()) * 1000)
        try:
            self._own_meter_provider.shutdown(timeout_millis=remaining_ms)
        except Exception as exc:  # noqa: BLE001 - the SDK raises a bare Exception naming the readers that failed
            logger.warning("toolcall-eval serve: the metrics' last export did not complete: %s", exc)
