"""The configuration file (YAML or JSON), validated once at start-up.

Unknown keys and invalid rules fail fast with a pydantic error that names the field, e.g.
``policies.required_steps.0.before: Field required``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import jsonschema_rs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from otel_toolcall_eval import _json
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval import policy as P
from otel_toolcall_eval.checks.schema import SchemaCompileError, compile_schema
from otel_toolcall_eval.config.guard import GuardConfig
from otel_toolcall_eval.config.imports import import_object
from otel_toolcall_eval.config.judge import JudgeConfig
from otel_toolcall_eval.config.offline import ArgumentMatchConfig, GateConfig, TrajectoryConfig
from otel_toolcall_eval.config.serve import ServeConfig
from otel_toolcall_eval.config.trace_stats import MetricsConfig, Pricing
from otel_toolcall_eval.errors import ToolcallEvalError
from otel_toolcall_eval.records import ToolDefinition


class ConfigError(ToolcallEvalError, ValueError):
    """The configuration is invalid; the message names the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # no option means nan or inf


# An empty registry: an unknown ``$schema`` is an error, never a download (jsonschema-rs fetches it otherwise).
_NO_FETCH = jsonschema_rs.Registry([])


def _check_schema(schema: dict[str, Any], where: str) -> dict[str, Any]:
    try:  # against its draft's meta-schema (``$schema``, else 2020-12): the hot path's library, no second one
        jsonschema_rs.meta.validate(schema, registry=_NO_FETCH)
    except jsonschema_rs.ValidationError as exc:
        path = "/".join(str(p) for p in exc.instance_path)
        raise ValueError(f"{where} is not a valid JSON Schema at '{path}': {exc.message}") from None
    except jsonschema_rs.ReferencingError as exc:  # an unknown ``$schema``
        raise ValueError(f"{where} is not a valid JSON Schema: {exc}") from None
    try:  # the hot path compiles it without fetching anything: a reference outside the document cannot work
        compile_schema(schema)
    except SchemaCompileError as exc:
        raise ValueError(f"{where} cannot be used: {exc}") from None
    return schema


def schema_from_model(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


def schema_from_function(func: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema of a function's parameters, as agent frameworks derive it from type hints."""
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(func).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in ("self", "ctx"):
            continue
        annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (annotation, default)
    model = create_model(f"{func.__name__}_args", **fields)
    schema: dict[str, Any] = model.model_json_schema()
    schema.pop("title", None)
    return schema


class ToolSchema(_Strict):
    """A tool schema from the config: JSON Schema, a pydantic model or a function, made JSON Schema once."""

    name: str = Field(min_length=1, description="the tool's name, as the spans record it")
    description: str | None = Field(default=None, description="the tool's description (not scored)")
    parameters: dict[str, Any] | None = Field(
        default=None, description="its arguments' JSON Schema; give exactly one of parameters, model or function"
    )
    model: str | None = Field(default=None, description="import path 'pkg.mod:Model' of a pydantic model")
    function: str | None = Field(default=None, description="import path 'pkg.mod:func' of a Python function")

    @model_validator(mode="after")
    def _one_source(self) -> ToolSchema:
        given = [k for k in ("parameters", "model", "function") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'parameters', 'model' or 'function'")
        return self

    @field_validator("parameters")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else _check_schema(value, "parameters")

    @classmethod
    def from_model(cls, name: str, model: type[BaseModel], description: str | None = None) -> ToolSchema:
        return cls(name=name, description=description, parameters=schema_from_model(model))

    @classmethod
    def from_function(cls, func: Callable[..., Any], name: str | None = None) -> ToolSchema:
        return cls(name=name or func.__name__, description=inspect.getdoc(func), parameters=schema_from_function(func))

    def definition(self) -> ToolDefinition:
        params = self.parameters
        if params is None:
            target = import_object(self.model or self.function or "")
            if self.model is not None:
                if not (isinstance(target, type) and issubclass(target, BaseModel)):
                    raise ValueError(f"'{self.model}' is not a pydantic model")
                params = schema_from_model(target)
            else:
                if not callable(target):
                    raise ValueError(f"'{self.function}' is not callable")
                params = schema_from_function(target)
        return ToolDefinition(self.name, params, self.description, _json.canonical(params))


class RequiredStep(_Strict):
    """``tool`` must have succeeded in an earlier turn before any call of ``before``."""

    tool: str = Field(min_length=1, description="the tool that must have succeeded first")
    before: list[str] = Field(
        min_length=1, description="tools that need it: a call of one without it is missing_required_step:<tool>"
    )

    def compile(self) -> P.RequiredStep:
        return P.RequiredStep(self.tool, tuple(self.before))


class DestructiveTool(_Strict):
    """``tool`` must follow a successful call of one of ``confirm_with`` in an earlier turn."""

    tool: str = Field(min_length=1, description="the destructive tool: unconfirmed, a call is unconfirmed_destructive")
    confirm_with: list[str] = Field(
        default_factory=lambda: ["confirm"], min_length=1, description="tools whose success confirms it"
    )
    irreversibility: int = Field(default=1, ge=1, le=10, description="weight of a violation")

    def compile(self) -> P.DestructiveTool:
        return P.DestructiveTool(self.tool, tuple(self.confirm_with), self.irreversibility)


class ArgumentRule(_Strict):
    """A JSON Schema fragment that ``tool``'s arguments must satisfy beyond its own schema."""

    tool: str = Field(min_length=1, description="the tool whose arguments the rule checks")
    name: str = Field(default="argument_rule", min_length=1, description="the violation it reports")
    schema_: dict[str, Any] = Field(alias="schema", description="a JSON Schema fragment the arguments must satisfy")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)

    @field_validator("schema_")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_schema(value, "schema")

    def compile(self) -> P.ArgumentRule:
        return P.ArgumentRule(self.tool, self.schema_, self.name)


class Policies(_Strict):
    """The rules a trace (offline: a case) must keep, beyond what each call's schema says."""

    step_budget: int | None = Field(
        default=None,
        ge=1,
        description="the most tool calls a trace may make; later calls get over_budget (a parallel batch counts "
        "where it starts: issued within the budget, it runs whole)",
    )
    must_not_call: list[str] = Field(
        default_factory=list, description="tools that must never be called: one call fails the trace (must_not_call)"
    )
    required_steps: list[RequiredStep] = Field(default_factory=list)
    destructive_tools: list[DestructiveTool] = Field(default_factory=list)
    argument_rules: list[ArgumentRule] = Field(default_factory=list)
    undeclared_arguments: Literal["report", "fail"] = Field(
        default="report",
        description=(
            "an argument the tool's schema does not declare (and does not explicitly allow): report it "
            "(toolcall_eval.undeclared_arguments) or also fail the call (violation undeclared_argument)"
        ),
    )


class ErrorClassification(_Strict):
    """How failures split into ``malformed_call`` (the model's fault) and ``execution_failed``."""

    input_error_types: list[str] = Field(
        default_factory=lambda: list(P.DEFAULT_INPUT_ERROR_TYPES),
        description="exception or error.type names (last dotted part) meaning the tool rejected its input",
    )
    empty_results: list[str] = Field(
        default_factory=lambda: list(P.DEFAULT_EMPTY_RESULTS), description="result texts that count as empty_result"
    )

    def compile(self) -> P.ErrorRules:
        return P.ErrorRules(frozenset(self.input_error_types), frozenset(self.empty_results))


class Limits(_Strict):
    """Bounds on what the processor holds and writes: memory stays bounded whatever the traffic."""

    max_traces: int = Field(default=10_000, ge=1, description="traces held at once (LRU)")
    trace_ttl_seconds: float = Field(
        default=300.0, gt=0, description="a trace whose root never ends expires after this"
    )
    max_calls_per_trace: int = Field(
        default=1_000, ge=1, description="calls remembered per trace for trajectory checks"
    )
    max_argument_bytes: int = Field(
        default=65_536, ge=1, description="larger arguments are scored as oversized, not parsed"
    )
    max_attribute_length: int = Field(default=256, ge=16, description="cap on each string written")
    max_schema_errors: int = Field(default=3, ge=1, description="schema errors written per call")
    validator_cache_size: int = Field(default=512, ge=1, description="compiled schema validators kept (LRU)")
    max_cache_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=4096,
        description="bytes (estimated) each of the definition, validator and schema-resolution caches may hold",
    )
    # sessions (see ``Sessions``)
    max_sessions: int = Field(
        default=10_000, ge=1, description="open sessions held at once (LRU); the oldest is emitted and dropped"
    )
    session_idle_seconds: float = Field(
        default=300.0, gt=0, description="a session with no new turn for this long is finished and emitted"
    )
    # failed tool spans held until their recovery class is decided (see ``held_spans``)
    max_held_spans: int = Field(
        default=1_000,
        ge=0,
        description="tool spans held back at once: failed ones until their recovery class is known, and ones that "
        "cannot record an error until their reply's outcome is read; 0: none held",
    )
    max_held_spans_per_trace: int = Field(default=32, ge=1, description="tool spans one trace may hold back at once")
    max_hold_seconds: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="the longest a tool span is held back; then it is forwarded without its class (or as it read)",
    )

    def compile(self) -> P.ScoringLimits:
        return P.ScoringLimits(
            max_argument_bytes=self.max_argument_bytes,
            max_attribute_length=self.max_attribute_length,
            max_schema_errors=self.max_schema_errors,
            max_calls_per_trace=self.max_calls_per_trace,
            validator_cache_size=self.validator_cache_size,
            max_cache_bytes=self.max_cache_bytes,
        )


class Evaluation(_Strict):
    """Where the processor scores: on the thread that ends the span, or on one worker thread behind a queue."""

    mode: Literal["auto", "inline", "background"] = Field(
        default="auto",
        description=(
            "inline: scored before on_end returns; background: on_end queues the span for a worker thread; "
            "auto: background when every downstream processor is a BatchSpanProcessor (export is asynchronous "
            "anyway), else inline"
        ),
    )
    max_queue_size: int = Field(
        default=2_048, ge=1, description="background: spans waiting; a full queue makes on_end wait for room"
    )
    max_delay_millis: int = Field(
        default=100, ge=1, le=60_000, description="background: the longest a span waits before it is scored"
    )


class Sessions(_Strict):
    """Traces that share a conversation id roll up into a session verdict (``otel_toolcall_eval.online.sessions``)."""

    enabled: bool = Field(default=True, description="roll traces up into sessions and emit their verdicts")
    attributes: list[str] = Field(
        default_factory=lambda: list(A.SESSION_ID_ATTRIBUTES),
        min_length=1,
        description="span attributes holding the conversation id, in order of preference (any span of a trace)",
    )
    step_budget: int | None = Field(
        default=None, ge=1, description="tool calls allowed over a whole session; none: no session budget"
    )

    @field_validator("attributes")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        if any(not name for name in value):
            raise ValueError("an attribute name cannot be empty")
        return value


class EvalConfig(_Strict):
    """What the online and offline evaluators need; ``EvalConfig()`` runs every check that needs no config."""

    tools: list[ToolSchema] = Field(default_factory=list)
    policies: Policies = Field(default_factory=Policies)
    errors: ErrorClassification = Field(default_factory=ErrorClassification)
    limits: Limits = Field(default_factory=Limits)
    evaluation: Evaluation = Field(default_factory=Evaluation)
    judge: JudgeConfig | None = Field(default=None, description="LLM-judge settings (see docs/judge.md)")
    gate: GateConfig = Field(default_factory=GateConfig, description="offline CI gate: thresholds and spread guard")
    arguments: ArgumentMatchConfig = Field(
        default_factory=ArgumentMatchConfig, description="offline argument matching: normalisation, free text"
    )
    trajectory: TrajectoryConfig = Field(
        default_factory=TrajectoryConfig,
        description="offline trajectory match modes (strict, unordered, subset, superset): the default for cases",
    )
    serve: ServeConfig = Field(default_factory=ServeConfig, description="the scoring service (docs/serve.md)")
    # --- trace cost (issue 18) ---
    pricing: Pricing = Field(default_factory=Pricing, description="price per model, per 1M tokens (trace cost)")
    metrics: MetricsConfig = Field(default_factory=MetricsConfig, description="the cost and latency histograms")
    sessions: Sessions = Field(default_factory=Sessions, description="session rollup by conversation id")
    guard: GuardConfig = Field(
        default_factory=GuardConfig, description="the pre-execution guard: mode, action per policy (docs/guardrail.md)"
    )

    _definitions: dict[str, ToolDefinition] | None = PrivateAttr(default=None)
    _policy: P.Policy | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _unique_tools(self) -> EvalConfig:
        names = [t.name for t in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"tools: duplicate names {dupes}")
        return self

    @classmethod
    def load(cls, path: str | Path) -> EvalConfig:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read config: {exc.strerror}") from None
        import yaml  # here, not at the top: a config built in code needs no YAML parser at the processor's import

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from None
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, source: str = "config") -> EvalConfig:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: the top level must be a mapping, got {type(data).__name__}")
        try:
            config = cls.model_validate(data)
            config.tool_definitions()  # import models/functions now: fail at start-up, not on the first span
        except ValidationError as exc:
            raise ConfigError(f"{source}: invalid configuration\n{_format_errors(exc)}") from None
        except ValueError as exc:
            raise ConfigError(f"{source}: tools: {exc}") from None
        return config

    def tool_definitions(self) -> dict[str, ToolDefinition]:
        """Configured schemas by tool name, resolved (imports included) once."""
        if self._definitions is None:
            self._definitions = {t.name: t.definition() for t in self.tools}
        return self._definitions

    def policy(self) -> P.Policy:
        """The plain policy object the engine and the checks read, compiled once from this file format."""
        if self._policy is None:
            p = self.policies
            self._policy = P.Policy(
                tools=self.tool_definitions(),
                must_not_call=frozenset(p.must_not_call),
                step_budget=p.step_budget,
                required_steps=tuple(r.compile() for r in p.required_steps),
                destructive_tools=tuple(d.compile() for d in p.destructive_tools),
                argument_rules=tuple(r.compile() for r in p.argument_rules),
                undeclared_arguments_fail=p.undeclared_arguments == "fail",
                errors=self.errors.compile(),
                limits=self.limits.compile(),
            )
        return self._policy


def _format_errors(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"  {loc}: {msg}")
    return "\n".join(lines)
