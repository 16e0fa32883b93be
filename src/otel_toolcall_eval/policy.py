"""The policy objects every check and the engine read: plain, frozen, built once from the config file.

``config.EvalConfig`` is the file format (pydantic: it validates and names the field of an error); it compiles to
one ``Policy`` (``EvalConfig.policy()``). Checks and the engine import this module, never ``config``: so a check is
a pure function of records and these objects, and importing one loads neither pydantic nor OpenTelemetry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from otel_toolcall_eval import _json
from otel_toolcall_eval.records import ToolDefinition

DEFAULT_INPUT_ERROR_TYPES: tuple[str, ...] = (
    "ValidationError",
    "ModelRetry",
    "ToolRetryError",
    "InvalidArgument",
    "TypeError",
    "tool_input_error",
)
DEFAULT_EMPTY_RESULTS: tuple[str, ...] = ("", "null", "None", "[]", "{}", '""')


@dataclass(frozen=True, slots=True)
class RequiredStep:
    """``tool`` must have succeeded in an earlier turn before any call of ``before``."""

    tool: str
    before: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DestructiveTool:
    """``tool`` must follow a successful call of one of ``confirm_with`` in an earlier turn."""

    tool: str
    confirm_with: tuple[str, ...] = ("confirm",)
    irreversibility: int = 1  # the weight of a violation


@dataclass(frozen=True, slots=True)
class ArgumentRule:
    """A JSON Schema fragment that ``tool``'s arguments must satisfy beyond its own schema."""

    tool: str
    schema: dict[str, Any]
    name: str = "argument_rule"  # the violation it reports
    schema_key: str = ""  # the validator cache's key; derived from ``schema`` when empty

    def __post_init__(self) -> None:
        if not self.schema_key:
            object.__setattr__(self, "schema_key", "rule\x00" + _json.canonical(self.schema))


@dataclass(frozen=True, slots=True)
class ErrorRules:
    """How failures split into ``malformed_call`` (the model's fault) and ``execution_failed``."""

    input_error_types: frozenset[str] = frozenset(DEFAULT_INPUT_ERROR_TYPES)
    empty_results: frozenset[str] = frozenset(DEFAULT_EMPTY_RESULTS)


@dataclass(frozen=True, slots=True)
class ScoringLimits:
    """The bounds the engine applies to one call and one trace's memory of earlier calls."""

    max_argument_bytes: int = 65_536
    max_attribute_length: int = 256
    max_schema_errors: int = 3
    max_calls_per_trace: int = 1_000
    validator_cache_size: int = 512
    max_cache_bytes: int = 16 * 1024 * 1024  # each cache built from trace data (estimated bytes)


@dataclass(frozen=True, slots=True)
class Policy:
    """Everything the engine needs to score a call: the configured tools, the trajectory policies, the error
    rules and the limits. ``Policy()`` runs every check that needs no configuration.

    ``tools`` are the configured tool definitions: with the tools a trace (or a dataset case) offered, they are
    the tools the agent has (see ``checks.unknown_tool``), and their schemas stand in where the trace has none.
    """

    tools: dict[str, ToolDefinition] = field(default_factory=dict)
    must_not_call: frozenset[str] = frozenset()
    step_budget: int | None = None
    required_steps: tuple[RequiredStep, ...] = ()
    destructive_tools: tuple[DestructiveTool, ...] = ()
    argument_rules: tuple[ArgumentRule, ...] = ()
    undeclared_arguments_fail: bool = False  # an undeclared argument is a violation (else only reported)
    errors: ErrorRules = field(default_factory=ErrorRules)
    limits: ScoringLimits = field(default_factory=ScoringLimits)

    @property
    def has_trajectory_rules(self) -> bool:
        """Any of ``required_steps``, ``destructive_tools``, ``argument_rules`` or ``step_budget``."""
        return bool(
            self.step_budget is not None or self.required_steps or self.destructive_tools or self.argument_rules
        )
