"""Score one tool call with every deterministic check, in the one order the online and offline paths share."""

from __future__ import annotations

from dataclasses import dataclass

from otel_toolcall_eval.checks.argument_rules import argument_rule_violations
from otel_toolcall_eval.checks.destructive import unconfirmed_destructive
from otel_toolcall_eval.checks.duplicate import is_duplicate
from otel_toolcall_eval.checks.must_not_call import must_not_call_violation
from otel_toolcall_eval.checks.normalize import arguments_key
from otel_toolcall_eval.checks.outcome import classify_outcome
from otel_toolcall_eval.checks.parse import parse_arguments, single_parameter
from otel_toolcall_eval.checks.repeated_failure import failure_key, is_repeated_failure
from otel_toolcall_eval.checks.required_steps import missing_required_steps
from otel_toolcall_eval.checks.schema import ValidatorCache, resolve_schema, validate_arguments
from otel_toolcall_eval.checks.step_budget import over_budget
from otel_toolcall_eval.checks.unknown_tool import tool_known
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.records import CallHistory, CallScore, ToolCallRecord, ToolDefinition


@dataclass(slots=True)
class Scorer:
    """Holds what is built once (config lookups, the validator cache); ``score`` itself keeps no state."""

    config: EvalConfig
    cache: ValidatorCache

    @classmethod
    def from_config(cls, config: EvalConfig) -> Scorer:
        return cls(config, ValidatorCache(config.limits.validator_cache_size))

    def score(
        self,
        record: ToolCallRecord,
        history: CallHistory,
        *,
        trace_tools: dict[str, ToolDefinition] | None = None,
        batch: int | None = None,
    ) -> CallScore:
        """Score ``record`` against the trace's earlier calls, then add it to ``history``."""
        config = self.config
        limits = config.limits
        policies = config.policies
        config_tools = config.tool_definitions()
        name = record.name

        span_schema = ToolDefinition(name, record.span_schema) if record.span_schema is not None else None
        resolved = resolve_schema(name, trace_tools, span_schema, config_tools)
        definition = resolved.definition
        params = definition.parameters if definition is not None else None

        single, is_string = single_parameter(params)
        parsed = parse_arguments(
            record.raw_arguments,
            single_param=single,
            string_param=is_string,
            max_bytes=limits.max_argument_bytes,
            unparseable=record.arguments_unparseable,
        )
        available = _available(trace_tools, config_tools)
        known = tool_known(name, available)

        schema_verdict = None
        if parsed.value is not None and definition is not None:
            schema_verdict = validate_arguments(
                parsed.value,
                definition,
                self.cache,
                max_errors=limits.max_schema_errors,
                max_length=limits.max_attribute_length,
            )
        outcome, source = classify_outcome(
            parse_ok=parsed.status.parsed,
            tool_known=known,
            schema_valid=None if schema_verdict is None else schema_verdict.valid,
            error=record.error,
            result=record.result,
            result_recorded=record.result_recorded,
            input_error_types=config.errors.input_error_types,
            empty_results=config.errors.empty_results,
        )

        step = history.calls + 1
        violations: list[str] = []
        weight = 0
        forbidden = must_not_call_violation(name, policies.must_not_call)
        if forbidden:
            violations.append(forbidden)
            weight += 1
        missing = missing_required_steps(history, name, batch, policies.required_steps)
        violations.extend(missing)
        weight += len(missing)
        destructive = unconfirmed_destructive(history, name, batch, policies.destructive_tools)
        if destructive:
            violations.append(destructive[0])
            weight += destructive[1]
        rule_violations = argument_rule_violations(name, parsed.value, policies.argument_rules, self.cache)
        violations.extend(rule_violations)
        weight += len(rule_violations)

        args_key = arguments_key(name, parsed.value, record.raw_arguments)
        error_name = record.error.exception_type or record.error.error_type or record.error.retry_cause
        fkey = failure_key(args_key, outcome, source, error_name)
        score = CallScore(
            name=name,
            step=step,
            outcome=outcome,
            parse_ok=parsed.status.parsed,
            parse_status=parsed.status,
            tool_known=known,
            schema_valid=None if schema_verdict is None else schema_verdict.valid,
            schema_errors=() if schema_verdict is None else schema_verdict.errors,
            schema_source=resolved.source,
            schema_drift=resolved.drift,
            error_source=source,
            batch=batch,
            duplicate=is_duplicate(history, args_key),
            repeated_failure=is_repeated_failure(history, fkey),
            over_budget=over_budget(step, policies.step_budget),
            violations=violations,
            violation_weight=weight,
            arguments=parsed.value,
        )
        history.add(score, args_key, fkey, limits.max_calls_per_trace)
        return score


def _available(
    trace_tools: dict[str, ToolDefinition] | None, config_tools: dict[str, ToolDefinition]
) -> set[str] | dict[str, ToolDefinition] | None:
    if trace_tools and config_tools:
        return set(trace_tools) | set(config_tools)
    if trace_tools:
        return trace_tools
    if config_tools:
        return config_tools
    return None
