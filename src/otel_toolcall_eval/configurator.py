"""Zero-code enablement: the SDK's auto-configuration with the processor in front of every exporter.

``opentelemetry-instrument`` (opentelemetry-distro) loads the configurator that ``OTEL_PYTHON_CONFIGURATOR`` names
from the entry-point group ``opentelemetry_configurator``; this package registers ``toolcall_eval`` there::

    OTEL_PYTHON_CONFIGURATOR=toolcall_eval opentelemetry-instrument python app.py

It runs the SDK's own configuration (the ``OTEL_*`` variables: exporters, sampler, resource, metrics, logs) with
one change: the span processor the SDK builds for each exporter is a ``BatchSpanProcessor`` behind one
``ToolCallEvalProcessor``, so each span is exported once, tool spans and roots scored (a processor added beside
the auto-configured exporter instead would export every span twice, once unscored). The processor's config
comes from the ``OTEL_TOOLCALL_EVAL_*`` variables (``config.environment``); an invalid one stops the program at
start-up with the variable and the field named, exit code 2, no traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from otel_toolcall_eval import _sdk
from otel_toolcall_eval.config import EvalConfig, environment
from otel_toolcall_eval.errors import ExitCode, ToolcallEvalError
from otel_toolcall_eval.processor import ToolCallEvalProcessor


class _Exporting(SpanProcessor):
    """The exporters' ``BatchSpanProcessor`` s behind the one ``ToolCallEvalProcessor`` (the SDK asks for a span
    processor per exporter; scoring once and exporting the scored span to each is what a user expects). Only the
    hooks a ``BatchSpanProcessor`` implements are forwarded: its ``on_start`` and ``_on_ending`` are no-ops."""

    def __init__(self) -> None:
        self.processors: list[BatchSpanProcessor] = []

    def on_end(self, span: ReadableSpan) -> None:
        for processor in self.processors:
            processor.on_end(span)

    def shutdown(self) -> None:
        for processor in self.processors:
            processor.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all([processor.force_flush(timeout_millis) for processor in self.processors])


class ExportProcessors:
    """The ``export_span_processor`` the SDK's configuration calls once per exporter: the first call builds the
    ``ToolCallEvalProcessor`` (returned, so the provider calls it), the others add their exporter behind it and
    return a span processor that does nothing."""

    def __init__(self, config: EvalConfig) -> None:
        evaluation = config.evaluation
        if evaluation.mode == "auto":  # every downstream is a BatchSpanProcessor: what ``auto`` picks background for
            config = config.model_copy(update={"evaluation": evaluation.model_copy(update={"mode": "background"})})
        self.config = config
        self.exporting = _Exporting()
        self.processor: ToolCallEvalProcessor | None = None

    def __call__(self, exporter: SpanExporter) -> SpanProcessor:
        self.exporting.processors.append(BatchSpanProcessor(exporter))
        if self.processor is not None:
            return SpanProcessor()
        self.processor = ToolCallEvalProcessor(self.exporting, self.config)
        return self.processor


class ToolCallEvalConfigurator:
    """The ``opentelemetry_configurator`` entry point ``toolcall_eval`` (opentelemetry-instrumentation calls
    ``configure(**kwargs)`` once at start-up, the keywords being the SDK configuration's)."""

    export_processors: ExportProcessors | None = None

    def configure(self, **kwargs: Any) -> None:
        try:
            config = self._config()
        except ToolcallEvalError as exc:
            # Before the application runs: the message, then exit 2. Not SystemExit: raised while Python imports
            # ``site`` (opentelemetry-instrument's sitecustomize), it is a "Fatal Python error" with a traceback;
            # nothing has started yet that an exit handler would need to stop.
            print(f"otel-toolcall-eval: {exc}", file=sys.stderr, flush=True)
            os._exit(ExitCode.BAD_INPUT)
        if config is None:
            _sdk.initialize_sdk(BatchSpanProcessor, **kwargs)
            return
        builder = ExportProcessors(config)
        type(self).export_processors = builder
        _sdk.initialize_sdk(builder, **kwargs)

    @staticmethod
    def _config() -> EvalConfig | None:
        """None: ``OTEL_TOOLCALL_EVAL_ENABLED=false`` (the SDK's configuration as it is)."""
        if not environment.enabled():
            return None
        if os.environ.get("OTEL_CONFIG_FILE"):
            raise ToolcallEvalError(
                "OTEL_CONFIG_FILE is set: the SDK then builds its pipeline from that file and the exporters' span "
                "processors cannot be wrapped; add ToolCallEvalProcessor in code (docs/zero-code.md), or unset it"
            )
        return environment.load()
