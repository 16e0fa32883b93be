"""Score LLM-agent tool calls where they already live: in OpenTelemetry traces.

The public surface is ``__all__``, nothing else (as httpx does: a small explicit surface over private modules).
Names load on first use (PEP 562), so ``import otel_toolcall_eval.checks.parse`` does not pull in the processor,
the OpenTelemetry SDK or pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from otel_toolcall_eval._version import __version__

if TYPE_CHECKING:
    from otel_toolcall_eval.config import ConfigError, EvalConfig, ToolSchema
    from otel_toolcall_eval.conventions import AttributeConvention, Convention, ConventionRegistry, default_registry
    from otel_toolcall_eval.processor import ToolCallEvalProcessor

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "AttributeConvention": "otel_toolcall_eval.conventions",
    "ConfigError": "otel_toolcall_eval.config",
    "Convention": "otel_toolcall_eval.conventions",
    "ConventionRegistry": "otel_toolcall_eval.conventions",
    "EvalConfig": "otel_toolcall_eval.config",
    "ToolCallEvalProcessor": "otel_toolcall_eval.processor",
    "ToolSchema": "otel_toolcall_eval.config",
    "default_registry": "otel_toolcall_eval.conventions",
}

__all__ = [
    "AttributeConvention",
    "ConfigError",
    "Convention",
    "ConventionRegistry",
    "EvalConfig",
    "ToolCallEvalProcessor",
    "ToolSchema",
    "__version__",
    "default_registry",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'otel_toolcall_eval' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
