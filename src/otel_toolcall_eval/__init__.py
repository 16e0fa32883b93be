"""Score LLM-agent tool calls where they already live: in OpenTelemetry traces."""

__version__ = "0.1.0"

from otel_toolcall_eval.config import ConfigError, EvalConfig, ToolSchema
from otel_toolcall_eval.conventions import Convention, ConventionRegistry, default_registry
from otel_toolcall_eval.processor import ToolCallEvalProcessor

__all__ = [
    "ConfigError",
    "Convention",
    "ConventionRegistry",
    "EvalConfig",
    "ToolCallEvalProcessor",
    "ToolSchema",
    "__version__",
    "default_registry",
]
