"""The SDK's private auto-configuration interface the zero-code configurator relies on (``_sdk.initialize_sdk``).

Fails loudly on an SDK release that renames ``_initialize_components`` or drops its ``export_span_processor``
parameter, or stops building each exporter's span processor through it: read ``_sdk.py`` then."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap

from opentelemetry.sdk import _configuration


def test_initialize_components_takes_a_span_processor_builder() -> None:
    parameters = inspect.signature(_configuration._initialize_components).parameters
    assert "export_span_processor" in parameters
    assert "auto_instrumentation_version" in parameters  # what opentelemetry-instrument passes to configure()


def test_the_builder_makes_every_exporters_span_processor() -> None:
    script = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import SpanProcessor
        from otel_toolcall_eval import _sdk

        built = []

        class Marker(SpanProcessor):
            def __init__(self, exporter):
                built.append(type(exporter).__name__)

        _sdk.initialize_sdk(Marker, auto_instrumentation_version="test")
        processors = trace.get_tracer_provider()._active_span_processor._span_processors
        print(built, [type(p).__name__ for p in processors])
        """
    )
    env = {"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "['ConsoleSpanExporter'] ['Marker']"
