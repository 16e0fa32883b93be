"""Zero-code enablement for real: an unchanged app under ``opentelemetry-instrument`` (opentelemetry-distro), the
``toolcall_eval`` configurator named by one variable, the SDK's own OTLP exporter sending to a receiver this test
starts on 127.0.0.1. Each span must arrive once, the tool spans and the root scored."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from .otlp_receiver import GrpcTraceReceiver, HttpTraceReceiver, attributes

pytestmark = pytest.mark.integration

INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"

# The application knows nothing of this package: the OpenTelemetry API only, as an instrumented framework writes.
APP = textwrap.dedent(
    """
    import json
    from opentelemetry import trace

    tracer = trace.get_tracer("my.agent")
    for turn in range(2):
        with tracer.start_as_current_span("invoke_agent weather", attributes={"gen_ai.operation.name": "invoke_agent"}):
            with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
                pass
            for args in ('{"city": "Paris"}', '{"town": 3}'):
                with tracer.start_as_current_span("execute_tool get_weather", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.arguments": args}):
                    pass
    print("app done")
    """
)

CONFIG = """\
tools:
  - name: get_weather
    parameters:
      type: object
      properties: {city: {type: string}}
      required: [city]
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    if not INSTRUMENT.exists():
        pytest.skip("opentelemetry-distro is not installed (the dev extra installs it)")
    path = tmp_path / "app.py"
    path.write_text(APP)
    (tmp_path / "toolcall-eval.yaml").write_text(CONFIG)
    return path


def _run(app: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST_"))}
    return subprocess.run(
        [str(INSTRUMENT), sys.executable, str(app)],
        env={
            **base,
            "OTEL_SERVICE_NAME": "zero-code-app",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            **env,
        },
        cwd=app.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(params=["grpc", "http/protobuf"])
def receiver(request: pytest.FixtureRequest) -> Iterator[tuple[str, GrpcTraceReceiver | HttpTraceReceiver]]:
    rx: GrpcTraceReceiver | HttpTraceReceiver = GrpcTraceReceiver() if request.param == "grpc" else HttpTraceReceiver()
    try:
        yield request.param, rx
    finally:
        rx.close()


def test_an_unchanged_app_exports_each_span_once_scored(
    app: Path, receiver: tuple[str, GrpcTraceReceiver | HttpTraceReceiver]
) -> None:
    protocol, rx = receiver
    done = _run(
        app,
        {
            "OTEL_PYTHON_CONFIGURATOR": "toolcall_eval",
            "OTEL_TOOLCALL_EVAL_CONFIG": "toolcall-eval.yaml",
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            # the base URL: the SDK's HTTP exporter adds /v1/traces
            "OTEL_EXPORTER_OTLP_ENDPOINT": rx.base if isinstance(rx, HttpTraceReceiver) else rx.endpoint,
        },
    )
    assert done.returncode == 0, done.stderr
    assert "app done" in done.stdout
    spans = rx.wait_for_spans(8)
    ids = Counter(s.span.span_id for s in spans)
    assert len(spans) == 8 and set(ids.values()) == {1}, "every span exported exactly once"
    tools = [attributes(s.span.attributes) for s in spans if s.span.name == "execute_tool get_weather"]
    assert sorted(t["toolcall_eval.schema_valid"] for t in tools) == [False, False, True, True]
    roots = [attributes(s.span.attributes) for s in spans if s.span.name == "invoke_agent weather"]
    assert [r["toolcall_eval.trace.composite_ok"] for r in roots] == [False, False]
    assert {attributes(s.resource.attributes)["service.name"] for s in spans} == {"zero-code-app"}


def test_the_variables_alone_configure_it(app: Path) -> None:
    rx = GrpcTraceReceiver()
    try:
        done = _run(
            app,
            {
                "OTEL_PYTHON_CONFIGURATOR": "toolcall_eval",
                "OTEL_EXPORTER_OTLP_ENDPOINT": rx.endpoint,
                "OTEL_TOOLCALL_EVAL_POLICIES__MUST_NOT_CALL": "[get_weather]",
            },
        )
        assert done.returncode == 0, done.stderr
        spans = rx.wait_for_spans(8)
        assert len(spans) == 8
        tools = [attributes(s.span.attributes) for s in spans if s.span.name == "execute_tool get_weather"]
        assert all("must_not_call" in t["toolcall_eval.violations"] for t in tools)
    finally:
        rx.close()


def test_an_invalid_variable_stops_the_app_at_start_up_naming_it(app: Path) -> None:
    done = _run(
        app,
        {
            "OTEL_PYTHON_CONFIGURATOR": "toolcall_eval",
            "OTEL_TRACES_EXPORTER": "console",
            "OTEL_TOOLCALL_EVAL_POLICIES__STEP_BUDGET": "many",
        },
    )
    assert done.returncode == 2
    assert "app done" not in done.stdout
    assert "OTEL_TOOLCALL_EVAL_POLICIES__STEP_BUDGET (policies.step_budget)" in done.stderr
    assert "Traceback" not in done.stderr


def test_disabled_it_is_the_sdks_configuration(app: Path) -> None:
    rx = GrpcTraceReceiver()
    try:
        done = _run(
            app,
            {
                "OTEL_PYTHON_CONFIGURATOR": "toolcall_eval",
                "OTEL_TOOLCALL_EVAL_ENABLED": "false",
                "OTEL_EXPORTER_OTLP_ENDPOINT": rx.endpoint,
            },
        )
        assert done.returncode == 0, done.stderr
        spans = rx.wait_for_spans(8)
        assert len(spans) == 8
        assert not any("toolcall_eval.outcome" in attributes(s.span.attributes) for s in spans)
    finally:
        rx.close()
