"""The fixtures several test modules share, defined once (pytest finds them here; no test module defines its own copy
or imports another's). Shared functions and data live in ``tests/helpers.py``; the heavier imports (grpc, cryptography,
the SDK) wait inside the fixtures, so suites that use none of them (the framework environments) never load them.

Hypothesis runs without its per-example deadline: a unit test never depends on machine speed (speed lives in
``make bench``), and a first example that imports a library (scipy, on the first pairing with a choice) or runs
on a loaded machine is slow without being wrong."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.integration.otlp_receiver import GrpcTraceReceiver
    from tests.integration.tls_certs import Pki

settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")


@pytest.fixture
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich wraps at 80 columns otherwise, mid-path: modules of CLI output opt in with
    ``pytestmark = pytest.mark.usefixtures("wide_console")``."""
    monkeypatch.setenv("COLUMNS", "300")


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """The template dataset (``dataset init``'s cases) written to a file."""
    from otel_toolcall_eval.dataset import template_cases, write_cases

    path = tmp_path / "dataset.jsonl"
    write_cases(path, template_cases())
    return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA with server and client certificates (``tests/integration/tls_certs.py``), one per module."""
    from tests.integration.tls_certs import make_pki

    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def receiver() -> Iterator[GrpcTraceReceiver]:
    """A plaintext OTLP gRPC receiver on 127.0.0.1: the next hop of the scoring service."""
    from tests.integration.otlp_receiver import GrpcTraceReceiver

    rx = GrpcTraceReceiver()
    yield rx
    rx.close()


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter, InMemorySpanExporter]]:
    """A framework test's own TracerProvider (never the global one): the processor in front of one exporter (the
    scored spans) and the raw spans in another."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_toolcall_eval import ToolCallEvalProcessor

    exporter, raw = InMemorySpanExporter(), InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(exporter)))
    tp.add_span_processor(SimpleSpanProcessor(raw))
    yield tp, exporter, raw
    tp.shutdown()
