"""TLS for both receivers, from ``serve.tls``: the PEM files read and checked once, before anything listens.

Read at start-up rather than at the first connection so that a wrong path, an unreadable file or a key that does
not belong to the certificate is a config error naming the field (exit 2), not a receiver that accepts
connections and fails every handshake. gRPC takes the bytes (``grpc.ssl_server_credentials``); the HTTP receiver
an ``ssl.SSLContext`` built from the same files. With ``client_ca_file`` both require a client certificate that
CA signed (mutual TLS); without it, any client that trusts the certificate may connect (a bearer token can still
be required on top, ``serve.bearer_token_env``).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

from otel_toolcall_eval.config import ConfigError
from otel_toolcall_eval.config.serve import ServeTls

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


def _read(path: str, field: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_PEM_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"serve.tls.{field}: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > _MAX_PEM_BYTES:
        raise ConfigError(f"serve.tls.{field}: {path} is larger than {_MAX_PEM_BYTES} bytes: not a PEM file")
    if b"-----BEGIN " not in data:
        raise ConfigError(f"serve.tls.{field}: {path} is not a PEM file (no -----BEGIN line)")
    return data


def _no_password() -> bytes:
    return b""  # an encrypted key fails to load (never a prompt on the service's terminal)


def load_tls(settings: ServeTls) -> TlsMaterial:
    """The files of ``serve.tls``, read and checked (the key matches the certificate, the CA bundle parses)."""
    cert = _read(settings.cert_file, "cert_file")
    key = _read(settings.key_file, "key_file")
    client_ca = None if settings.client_ca_file is None else _read(settings.client_ca_file, "client_ca_file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(Path(settings.cert_file), Path(settings.key_file), password=_no_password)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"serve.tls.key_file: {settings.key_file} is not the unencrypted private key of "
            f"serve.tls.cert_file {settings.cert_file} ({exc.reason or exc})"
        ) from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cadata=client_ca.decode("ascii", "replace"))
        except ssl.SSLError as exc:
            raise ConfigError(
                f"serve.tls.client_ca_file: {settings.client_ca_file}: no CA certificate ({exc.reason or exc})"
            ) from None
        context.verify_mode = ssl.CERT_REQUIRED
    return TlsMaterial(cert, key, client_ca, context)
