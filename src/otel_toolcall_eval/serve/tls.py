"""TLS for both receivers (``serve.tls``) and for the export to the next hop (``serve.export.tls``): the PEM files
read and checked once, before anything listens or connects.

Read at start-up rather than at the first connection so that a wrong path, an unreadable file or a key that does
not belong to the certificate is a config error naming the field (exit 2), not a receiver that accepts
connections and fails every handshake. gRPC takes the bytes (``grpc.ssl_server_credentials``); the HTTP receiver
an ``ssl.SSLContext`` built from the same files. With ``client_ca_file`` both require a client certificate that
CA signed (mutual TLS); without it, any client that trusts the certificate may connect (a bearer token can still
be required on top, ``serve.bearer_token_env``).

The export's files are checked the same way (one reader, one key check): the CA bundle must hold a certificate,
the client key must be the unencrypted key of the client certificate. gRPC gets the bytes
(``grpc.ssl_channel_credentials``); the OTLP/HTTP exporter takes paths (requests reads them per connection), so
it is handed the paths just checked.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

from otel_toolcall_eval.config import ConfigError
from otel_toolcall_eval.config.serve import ServeExportTls, ServeTls

_MAX_PEM_BYTES = 1024 * 1024  # a certificate chain or CA bundle is kilobytes; a larger file is a wrong path


@dataclass(frozen=True)
class TlsMaterial:
    cert: bytes
    key: bytes
    client_ca: bytes | None
    http: ssl.SSLContext

    def grpc_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key, self.cert)], root_certificates=self.client_ca, require_client_auth=self.client_ca is not None
        )


@dataclass(frozen=True)
class ExportTlsMaterial:
    """``serve.export.tls`` checked: the bytes for gRPC, the same files' paths for the HTTP exporter."""

    settings: ServeExportTls
    ca: bytes | None
    cert: bytes | None
    key: bytes | None

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca, private_key=self.key, certificate_chain=self.cert
        )


def _read(path: str, field: str) -> bytes:
    """``field`` is the setting's full name (``serve.tls.cert_file``): every error names it."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_PEM_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{field}: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > _MAX_PEM_BYTES:
        raise ConfigError(f"{field}: {path} is larger than {_MAX_PEM_BYTES} bytes: not a PEM file")
    if b"-----BEGIN " not in data:
        raise ConfigError(f"{field}: {path} is not a PEM file (no -----BEGIN line)")
    return data


def _no_password() -> bytes:
    return b""  # an encrypted key fails to load (never a prompt on the service's terminal)


def _load_pair(context: ssl.SSLContext, cert_file: str, key_file: str, prefix: str) -> None:
    try:
        context.load_cert_chain(Path(cert_file), Path(key_file), password=_no_password)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"{prefix}.key_file: {key_file} is not the unencrypted private key of "
            f"{prefix}.cert_file {cert_file} ({exc.reason or exc})"
        ) from None


def _load_ca(context: ssl.SSLContext, data: bytes, path: str, field: str) -> None:
    try:
        context.load_verify_locations(cadata=data.decode("ascii", "replace"))
    except ssl.SSLError as exc:
        raise ConfigError(f"{field}: {path}: no CA certificate ({exc.reason or exc})") from None


def load_tls(settings: ServeTls) -> TlsMaterial:
    """The files of ``serve.tls``, read and checked (the key matches the certificate, the CA bundle parses)."""
    cert = _read(settings.cert_file, "serve.tls.cert_file")
    key = _read(settings.key_file, "serve.tls.key_file")
    client_ca = None if settings.client_ca_file is None else _read(settings.client_ca_file, "serve.tls.client_ca_file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_pair(context, settings.cert_file, settings.key_file, "serve.tls")
    if client_ca is not None and settings.client_ca_file is not None:
        _load_ca(context, client_ca, settings.client_ca_file, "serve.tls.client_ca_file")
        context.verify_mode = ssl.CERT_REQUIRED
    return TlsMaterial(cert, key, client_ca, context)


def load_export_tls(settings: ServeExportTls, prefix: str = "serve.export.tls") -> ExportTlsMaterial:
    """The files of ``serve.export.tls`` (or ``prefix``: ``serve.metrics_export.tls``), read and checked as the
    receivers' are."""
    ca = None if settings.ca_file is None else _read(settings.ca_file, f"{prefix}.ca_file")
    cert = key = None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # only to check the files; the exporters make their own
    if settings.cert_file is not None and settings.key_file is not None:
        cert = _read(settings.cert_file, f"{prefix}.cert_file")
        key = _read(settings.key_file, f"{prefix}.key_file")
        _load_pair(context, settings.cert_file, settings.key_file, prefix)
    if ca is not None and settings.ca_file is not None:
        _load_ca(context, ca, settings.ca_file, f"{prefix}.ca_file")
    return ExportTlsMaterial(settings, ca, cert, key)
