"""The ``serve:`` section and the ``serve`` command's flags: errors name the field, unknown keys fail, and the
service refuses to start without a next hop (exit 2, no traceback)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.config import ConfigError, EvalConfig
from tests.integration.tls_certs import Pki


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
        ({"remote_parents": "wait"}, "serve.remote_parents"),
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


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("s3cret\n", "whitespace"),  # a mounted secret file's trailing newline
        ("s3cret \r\n", "whitespace"),
        (" s3cret", "whitespace"),
        ("s3c\u00e9ret", "printable ASCII"),
        ("s3c\x7fret", "printable ASCII"),
    ],
)
def test_a_token_no_sender_can_send_is_refused_at_start_up(token: str, why: str, tmp_path: Path) -> None:
    """Issue 28, finding 6: a header value loses its edge whitespace on the wire and carries printable ASCII only,
    so such a token could never match and every sender would get 401 (which OTLP exporters drop); the service
    refuses to start (exit 2) naming the variable, before it listens."""
    import os
    import subprocess
    import sys

    config = tmp_path / "c.yaml"
    config.write_text("serve:\n  http_port: 0\n  grpc_port: 0\n  bearer_token_env: SERVE_TOKEN_FROM_FILE\n")
    cmd = [sys.executable, "-m", "otel_toolcall_eval.cli", "serve", "--config", str(config)]
    cmd += ["--export-endpoint", "http://127.0.0.1:9", "--shutdown-timeout", "1"]
    env = {**os.environ, "SERVE_TOKEN_FROM_FILE": token, "COLUMNS": "400"}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:  # a service that started anyway would run until stopped: bounded here
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError("the service started with a token no sender can send") from None
    assert proc.returncode == 2, err
    assert "serve.bearer_token_env" in err and "SERVE_TOKEN_FROM_FILE" in err and why in err
    assert token.strip() not in err  # the secret itself is never printed


# --- serve.tls: files checked at start-up, errors naming the field -------------------------------------


def _tls_service(**tls: str) -> None:
    from otel_toolcall_eval.serve import Service

    Service(EvalConfig.from_dict({"serve": {"tls": tls}}), span_exporter=InMemorySpanExporter())


def test_tls_files_that_cannot_be_used_name_the_field(pki: Pki, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    not_pem = tmp_path / "notes.txt"
    not_pem.write_text("hello\n")
    unreadable = tmp_path / "locked.pem"
    unreadable.write_bytes(pki.key.read_bytes())
    cert, key, ca = str(pki.cert), str(pki.key), str(pki.ca)
    cases = [
        ({"cert_file": missing, "key_file": key}, r"serve\.tls\.cert_file: cannot read .*nope\.pem"),
        ({"cert_file": cert, "key_file": missing}, r"serve\.tls\.key_file: cannot read"),
        ({"cert_file": cert, "key_file": key, "client_ca_file": missing}, r"serve\.tls\.client_ca_file: cannot read"),
        ({"cert_file": str(not_pem), "key_file": key}, r"serve\.tls\.cert_file: .* is not a PEM file"),
        (
            {"cert_file": cert, "key_file": str(pki.client_key)},
            r"serve\.tls\.key_file: .* not the unencrypted private key",
        ),
        (
            {"cert_file": cert, "key_file": key, "client_ca_file": key},
            r"serve\.tls\.client_ca_file: .* no CA certificate",
        ),
    ]
    if os.geteuid() != 0:  # root reads any file whatever its mode
        unreadable.chmod(0)
        cases.append(({"cert_file": cert, "key_file": str(unreadable)}, r"serve\.tls\.key_file: cannot read"))
    for tls, message in cases:
        with pytest.raises(ConfigError, match=message):
            _tls_service(**tls)
    with pytest.raises(ConfigError, match=r"serve\.tls\.key_file: .*[Ff]ield required"):
        EvalConfig.from_dict({"serve": {"tls": {"cert_file": cert}}})
    _tls_service(cert_file=cert, key_file=key, client_ca_file=ca)  # the right files: no error


def test_tls_flags_override_the_section_and_bad_files_exit_2(pki: Pki, capsys: pytest.CaptureFixture[str]) -> None:
    from otel_toolcall_eval.cli import build_parser
    from otel_toolcall_eval.commands.serve import settings

    args = build_parser().parse_args(
        ["serve", "--tls-cert-file", str(pki.cert), "--tls-key-file", str(pki.key), "--export-endpoint", "x"]
    )
    tls = settings(args).serve.tls
    assert tls is not None and (tls.cert_file, tls.key_file, tls.client_ca_file) == (str(pki.cert), str(pki.key), None)
    base = ["serve", "--http-port", "0", "--grpc-port", "0", "--export-endpoint", "http://127.0.0.1:1"]
    assert main([*base, "--tls-client-ca-file", str(pki.ca)]) == 2  # a CA alone: no certificate to present
    err = capsys.readouterr().err
    assert "serve.tls.cert_file" in err and "Traceback" not in err
    assert main([*base, "--tls-cert-file", "/no/such/cert.pem", "--tls-key-file", str(pki.key)]) == 2
    err = capsys.readouterr().err
    assert "serve.tls.cert_file: cannot read /no/such/cert.pem" in err and "Traceback" not in err


# --- serve.export: TLS to the next hop, headers; contradictions and bad files name the field ---------------


@pytest.mark.parametrize(
    ("export", "field"),
    [
        ({"endpoint": "http://collector:4317", "tls": {"ca_file": "ca.pem"}}, r"serve\.export\.tls: .*plaintext"),
        ({"endpoint": "https://collector:4317", "tls": {"insecure": True}}, r"serve\.export\.tls: .*contradicts"),
        ({"tls": {"insecure": True, "ca_file": "ca.pem"}}, r"serve\.export\.tls\.insecure: .*ca_file needs TLS"),
        ({"tls": {"cert_file": "c.pem"}}, r"serve\.export\.tls\.key_file: .*go together"),
        ({"tls": {"key_file": "k.pem"}}, r"serve\.export\.tls\.key_file: .*go together"),
        ({"tls": {"insecure_skip_verify": True}}, r"serve\.export\.tls\.insecure_skip_verify: unknown key"),
        ({"protocol": "http", "endpoint": "collector:4318"}, r"serve\.export\.endpoint: .*http:// or https://"),
        ({"headers": {"bad name": "x"}}, r"serve\.export\.headers: .*not a header name"),
        ({"headers": {"x-a": "line\nbreak"}}, r"serve\.export\.headers: .*cannot carry"),
        ({"headers": {"X-A": "1"}, "headers_env": {"x-a": "V"}}, r"serve\.export\.headers_env: .*set twice"),
        ({"timeout_seconds": 0}, r"serve\.export\.timeout_seconds"),
    ],
)
def test_export_settings_that_contradict_name_the_field(export: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        EvalConfig.from_dict({"serve": {"export": export}})


@pytest.mark.parametrize(
    ("endpoint", "tls", "secure"),
    [
        ("http://collector:4317", None, False),
        ("http://collector:4317", {"insecure": True}, False),  # the Collector's tls: {insecure: true}
        ("https://collector:4317", None, True),  # the exporter's default roots
        ("collector:4317", None, False),  # a bare gRPC target: plaintext, as before
        ("collector:4317", {}, True),  # ... TLS with a tls block (the Collector's otlp exporter form)
        ("collector:4317", {"insecure": True}, False),
    ],
)
def test_the_scheme_and_the_tls_block_decide_tls_as_the_otlp_exporters_do(
    endpoint: str, tls: dict[str, object] | None, secure: bool
) -> None:
    from otel_toolcall_eval.serve.export import next_hop

    export: dict[str, object] = {"endpoint": endpoint} if tls is None else {"endpoint": endpoint, "tls": tls}
    hop = next_hop(EvalConfig.from_dict({"serve": {"export": export}}).serve.export)
    assert hop.secure is secure and hop.mode == ("on" if secure else "off")


def _export_service(**tls: str) -> None:
    from otel_toolcall_eval.serve import Service

    export = {"endpoint": "https://127.0.0.1:1", "tls": tls}
    service = Service(EvalConfig.from_dict({"serve": {"http_port": 0, "grpc_port": 0, "export": export}}))
    service.start()  # files accepted: nothing is exported, the service starts and stops
    service.stop(timeout=1)


def test_export_tls_files_that_cannot_be_used_name_the_field(pki: Pki, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    not_pem = tmp_path / "notes.txt"
    not_pem.write_text("hello\n")
    ca, cert, key = str(pki.ca), str(pki.client_cert), str(pki.client_key)
    cases = [
        ({"ca_file": missing}, r"serve\.export\.tls\.ca_file: cannot read .*nope\.pem"),
        ({"ca_file": str(not_pem)}, r"serve\.export\.tls\.ca_file: .* is not a PEM file"),
        ({"ca_file": key}, r"serve\.export\.tls\.ca_file: .* no CA certificate"),
        ({"cert_file": missing, "key_file": key}, r"serve\.export\.tls\.cert_file: cannot read"),
        ({"cert_file": cert, "key_file": missing}, r"serve\.export\.tls\.key_file: cannot read"),
        ({"cert_file": cert, "key_file": str(pki.key)}, r"serve\.export\.tls\.key_file: .* not the unencrypted"),
    ]
    for tls, message in cases:
        with pytest.raises(ConfigError, match=message):
            _export_service(**tls)
    _export_service(ca_file=ca, cert_file=cert, key_file=key)  # the right files: no error


def test_a_missing_export_header_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_toolcall_eval.serve import Service

    monkeypatch.delenv("NO_SUCH_API_KEY_VAR", raising=False)
    export = {"endpoint": "http://127.0.0.1:1", "headers_env": {"x-api-key": "NO_SUCH_API_KEY_VAR"}}
    config = EvalConfig.from_dict({"serve": {"export": export}})
    with pytest.raises(ConfigError, match=r"serve\.export\.headers_env\.x-api-key: .*NO_SUCH_API_KEY_VAR"):
        Service(config)
    monkeypatch.setenv("NO_SUCH_API_KEY_VAR", "two\nlines")
    with pytest.raises(ConfigError, match=r"serve\.export\.headers_env\.x-api-key: .*cannot carry"):
        Service(config)


def test_export_tls_flags_override_the_section_and_bad_files_exit_2(
    pki: Pki, capsys: pytest.CaptureFixture[str]
) -> None:
    from otel_toolcall_eval.cli import build_parser
    from otel_toolcall_eval.commands.serve import settings

    flags = ["--export-ca-file", str(pki.ca), "--export-cert-file", str(pki.client_cert)]
    args = build_parser().parse_args(
        ["serve", "--export-endpoint", "https://x:4317", *flags, "--export-key-file", str(pki.client_key)]
    )
    tls = settings(args).serve.export.tls
    assert tls is not None and (tls.ca_file, tls.cert_file, tls.key_file) == (
        str(pki.ca),
        str(pki.client_cert),
        str(pki.client_key),
    )
    base = ["serve", "--http-port", "0", "--grpc-port", "0"]
    assert main([*base, "--export-endpoint", "https://127.0.0.1:1", *flags]) == 2  # a certificate without its key
    err = capsys.readouterr().err
    assert "serve.export.tls.key_file" in err and "Traceback" not in err
    assert main([*base, "--export-endpoint", "http://127.0.0.1:1", "--export-ca-file", str(pki.ca)]) == 2
    err = capsys.readouterr().err
    assert "serve.export.tls" in err and "plaintext" in err and "Traceback" not in err
    assert main([*base, "--export-endpoint", "https://127.0.0.1:1", "--export-ca-file", "/no/such/ca.pem"]) == 2
    err = capsys.readouterr().err
    assert "serve.export.tls.ca_file: cannot read /no/such/ca.pem" in err and "Traceback" not in err


# --- serve.metrics_export: the same settings and checks as serve.export, errors naming its own fields ----------


@pytest.mark.parametrize(
    ("metrics", "field"),
    [
        ({"protocol": "http", "endpoint": "collector:4318"}, r"serve\.metrics_export\.endpoint: .*http:// or https://"),
        ({"protocol": "grpc"}, r"serve\.metrics_export\.endpoint: .*[Ff]ield required"),
        ({"endpoint": ""}, r"serve\.metrics_export\.endpoint"),
        (
            {"endpoint": "http://collector:4317", "tls": {"ca_file": "ca.pem"}},
            r"serve\.metrics_export\.tls: .*plaintext",
        ),
        (
            {"endpoint": "https://collector:4317", "tls": {"insecure": True}},
            r"serve\.metrics_export\.tls: .*contradicts",
        ),
        (
            {"endpoint": "https://collector:4317", "tls": {"cert_file": "c.pem"}},
            r"serve\.metrics_export\.tls\.key_file: .*go together",
        ),
        (
            {"endpoint": "http://collector:4317", "headers": {"bad name": "x"}},
            r"serve\.metrics_export\.headers: .*not a header name",
        ),
        (
            {"endpoint": "http://collector:4317", "headers": {"a": "1"}, "headers_env": {"A": "V"}},
            r"serve\.metrics_export\.headers_env: .*set twice",
        ),
        ({"endpoint": "http://collector:4317", "interval_seconds": 0}, r"serve\.metrics_export\.interval_seconds"),
        ({"endpoint": "http://collector:4317", "interval_seconds": 1e9}, r"serve\.metrics_export\.interval_seconds"),
        ({"endpoint": "http://collector:4317", "timeout_seconds": -1}, r"serve\.metrics_export\.timeout_seconds"),
        ({"endpoint": "http://collector:4317", "temporality": "lowmemory"}, r"serve\.metrics_export\.temporality"),
        # the span export's queue is not the metrics'
        (
            {"endpoint": "http://collector:4317", "max_queue_spans": 5},
            r"serve\.metrics_export\.max_queue_spans: unknown",
        ),
    ],
)
def test_bad_metrics_export_settings_name_the_field(metrics: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        EvalConfig.from_dict({"serve": {"metrics_export": metrics}})


def test_metrics_export_files_and_variables_are_checked_before_anything_starts(
    pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from otel_toolcall_eval.serve import Service

    monkeypatch.delenv("NO_SUCH_METRICS_KEY", raising=False)
    before = set(threading.enumerate())
    cases = [
        (
            {"endpoint": "https://127.0.0.1:1", "tls": {"ca_file": "/no/such/ca.pem"}},
            r"serve\.metrics_export\.tls\.ca_file: cannot read /no/such/ca\.pem",
        ),
        (
            {"endpoint": "https://127.0.0.1:1", "tls": {"cert_file": str(pki.client_cert), "key_file": str(pki.key)}},
            r"serve\.metrics_export\.tls\.key_file: .* not the unencrypted",
        ),
        (
            {"endpoint": "http://127.0.0.1:1", "headers_env": {"x-api-key": "NO_SUCH_METRICS_KEY"}},
            r"serve\.metrics_export\.headers_env\.x-api-key: environment variable NO_SUCH_METRICS_KEY is not set",
        ),
    ]
    for metrics, message in cases:
        config = EvalConfig.from_dict({"serve": {"metrics_export": metrics}})
        with pytest.raises(ConfigError, match=message):
            Service(config, span_exporter=InMemorySpanExporter())
    assert set(threading.enumerate()) <= before  # no metric reader thread left behind


def test_metrics_flags_override_the_section_and_bad_ones_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from otel_toolcall_eval.cli import build_parser
    from otel_toolcall_eval.commands.serve import settings

    config = tmp_path / "c.yaml"
    config.write_text("serve:\n  metrics_export:\n    endpoint: http://old:4317\n    interval_seconds: 30\n")
    args = build_parser().parse_args(
        ["serve", "--config", str(config), "--metrics-endpoint", "https://new:4318", "--metrics-protocol", "http"]
    )
    metrics = settings(args).serve.metrics_export
    assert metrics is not None
    assert (metrics.endpoint, metrics.protocol, metrics.interval_seconds) == ("https://new:4318", "http", 30)
    assert settings(build_parser().parse_args(["serve"])).serve.metrics_export is None  # off by default
    base = ["serve", "--http-port", "0", "--grpc-port", "0", "--export-endpoint", "http://127.0.0.1:1"]
    assert main([*base, "--metrics-protocol", "http", "--metrics-endpoint", "127.0.0.1:4318"]) == 2
    err = capsys.readouterr().err
    assert "serve.metrics_export.endpoint" in err and "http:// or https://" in err and "Traceback" not in err
    assert main([*base, "--metrics-protocol", "grpc"]) == 2  # a protocol but no endpoint
    err = capsys.readouterr().err
    assert "serve.metrics_export.endpoint" in err and "Traceback" not in err
