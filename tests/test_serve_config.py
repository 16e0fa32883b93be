"""The ``serve:`` section and the ``serve`` command's flags: errors name the field, unknown keys fail, and the
service refuses to start without a next hop (exit 2, no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.config import ConfigError, EvalConfig


def test_defaults_listen_on_loopback_otlp_ports() -> None:
    serve = EvalConfig().serve
    assert (serve.host, serve.http_port, serve.grpc_port) == ("127.0.0.1", 4318, 4317)
    assert serve.export.endpoint is None and serve.bearer_token_env is None


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"http_prot": 1}, "serve.http_prot: unknown key"),
        ({"http_port": 70000}, "serve.http_port"),
        ({"max_queue_spans": 0}, "serve.max_queue_spans"),
        ({"export": {"protocol": "udp"}}, "serve.export.protocol"),
        ({"export": {"max_queue_spans": 10, "max_batch_spans": 20}}, "serve.export"),
        ({"http_port": None, "grpc_port": None}, "serve"),
        ({"shutdown_timeout_seconds": float("nan")}, "serve.shutdown_timeout_seconds"),
    ],
)
def test_bad_serve_settings_name_the_field(section: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        EvalConfig.from_dict({"serve": section})


def test_cli_flag_errors_name_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--http-port", "99999", "--export-endpoint", "http://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "serve.http_port" in err and "Traceback" not in err


def test_no_next_hop_is_a_config_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("serve:\n  http_port: 0\n  grpc_port: 0\n")
    assert main(["serve", "--config", str(config)]) == 2
    assert "serve.export.endpoint" in capsys.readouterr().err


def test_a_missing_token_variable_is_a_config_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_TOKEN_VAR", raising=False)
    config = EvalConfig.from_dict({"serve": {"bearer_token_env": "NO_SUCH_TOKEN_VAR"}})
    from otel_toolcall_eval.serve import Service

    with pytest.raises(ConfigError, match=r"serve\.bearer_token_env"):
        Service(config, span_exporter=InMemorySpanExporter())
