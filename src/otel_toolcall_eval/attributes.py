"""Every attribute name this project writes or reads, defined once.

The README's attribute table is generated from ``SPAN_ATTRIBUTES`` (see ``tests/test_docs.py``), so
this module is the single source of truth for names, types and meanings.
"""

from __future__ import annotations

from typing import Final, NamedTuple

PREFIX: Final = "toolcall_eval."


class AttributeDoc(NamedTuple):
    name: str
    type: str
    where: str
    meaning: str


# --- scores on each tool span -------------------------------------------------------------------
CONVENTION: Final = PREFIX + "convention"
PARSE_OK: Final = PREFIX + "parse_ok"
ARGUMENTS_OVERSIZED: Final = PREFIX + "arguments_oversized"
TOOL_KNOWN: Final = PREFIX + "tool_known"
SCHEMA_VALID: Final = PREFIX + "schema_valid"
SCHEMA_ERRORS: Final = PREFIX + "schema_errors"
UNDECLARED_ARGUMENTS: Final = PREFIX + "undeclared_arguments"
SCHEMA_SOURCE: Final = PREFIX + "schema_source"
SCHEMA_DRIFT: Final = PREFIX + "schema_drift"
OUTCOME: Final = PREFIX + "outcome"
ERROR_SOURCE: Final = PREFIX + "error_source"
STEP: Final = PREFIX + "step"
BATCH: Final = PREFIX + "batch"
DUPLICATE: Final = PREFIX + "duplicate"
REPEATED_FAILURE: Final = PREFIX + "repeated_failure"
OVER_BUDGET: Final = PREFIX + "over_budget"
VIOLATIONS: Final = PREFIX + "violations"
EVAL_ERROR: Final = PREFIX + "eval_error"
SAME_CALL_AS: Final = PREFIX + "same_call_as"
RECOVERY_CLASS: Final = PREFIX + "recovery.class"  # on a failed call's span (held_spans)
LATE: Final = PREFIX + "late"  # on a tool span that arrived after its trace's verdict (trace_state)
# on a tool span whose outcome was read from the reply the next model request carried (held_spans, late_outcome)
LATE_OUTCOME_READ: Final = PREFIX + "late_outcome.read"
JUDGE_SAMPLED: Final = PREFIX + "judge.sampled"
# a call that ran on no tool span, scored from the requests (``engine.requested``), on the model span whose input
# carried its result back: ``toolcall_eval.requested.<N>.<score>`` (the tool span's score names, N from 0)
REQUESTED_PREFIX: Final = PREFIX + "requested."

# --- the trace verdict on the local root span ---------------------------------------------------
TRACE_TOOL_CALLS: Final = PREFIX + "trace.tool_calls"
TRACE_ERRORS: Final = PREFIX + "trace.errors"
TRACE_OVER_BUDGET: Final = PREFIX + "trace.over_budget"
TRACE_VIOLATIONS: Final = PREFIX + "trace.violations"
TRACE_VIOLATION_WEIGHT: Final = PREFIX + "trace.violation_weight"
TRACE_UNEXECUTED_CALLS: Final = PREFIX + "trace.unexecuted_calls"
TRACE_UNKNOWN_TOOL_REQUESTS: Final = PREFIX + "trace.unknown_tool_requests"
TRACE_UNLISTED_CALLS: Final = PREFIX + "trace.unlisted_calls"
TRACE_LATE_SCHEMA_CHECKED: Final = PREFIX + "trace.late_schema.checked"
TRACE_LATE_SCHEMA_INVALID: Final = PREFIX + "trace.late_schema.invalid"
TRACE_LATE_SCHEMA_CHECKED_STEPS: Final = PREFIX + "trace.late_schema.checked_steps"
TRACE_LATE_SCHEMA_INVALID_STEPS: Final = PREFIX + "trace.late_schema.invalid_steps"
TRACE_LATE_SCHEMA_ERRORS: Final = PREFIX + "trace.late_schema.errors"
TRACE_LATE_OUTCOME_CHECKED: Final = PREFIX + "trace.late_outcome.checked"
TRACE_LATE_OUTCOME_FAILED: Final = PREFIX + "trace.late_outcome.failed"
TRACE_LATE_OUTCOME_CHECKED_STEPS: Final = PREFIX + "trace.late_outcome.checked_steps"
TRACE_LATE_OUTCOME_FAILED_STEPS: Final = PREFIX + "trace.late_outcome.failed_steps"
TRACE_LATE_OUTCOME_OUTCOMES: Final = PREFIX + "trace.late_outcome.outcomes"
TRACE_LATE_OUTCOME_ERROR_SOURCES: Final = PREFIX + "trace.late_outcome.error_sources"
TRACE_LATE_OUTCOME_REPLIES: Final = PREFIX + "trace.late_outcome.replies"
TRACE_CORRECT: Final = PREFIX + "trace.correct"
TRACE_REQUEST_SCORED_CALLS: Final = PREFIX + "trace.request_scored_calls"
TRACE_UNMATCHED_REQUESTS: Final = PREFIX + "trace.unmatched_requests"
TRACE_COMPOSITE_OK: Final = PREFIX + "trace.composite_ok"

TRACE_VERDICT: Final = (
    TRACE_TOOL_CALLS,
    TRACE_ERRORS,
    TRACE_OVER_BUDGET,
    TRACE_VIOLATIONS,
    TRACE_VIOLATION_WEIGHT,
    TRACE_CORRECT,
    TRACE_COMPOSITE_OK,
)

# --- cost, latency, recovery, root cause and the tool list, on the local root span (issue 18; trace_stats) ----
TRACE_MODEL_CALLS: Final = PREFIX + "trace.model_calls"
TRACE_INPUT_TOKENS: Final = PREFIX + "trace.input_tokens"
TRACE_OUTPUT_TOKENS: Final = PREFIX + "trace.output_tokens"
TRACE_COST: Final = PREFIX + "trace.cost"
TRACE_UNPRICED_MODEL_CALLS: Final = PREFIX + "trace.unpriced_model_calls"
TRACE_TOOL_LATENCY_TOTAL: Final = PREFIX + "trace.tool_latency.total"
TRACE_TOOL_LATENCY_MAX: Final = PREFIX + "trace.tool_latency.max"
TRACE_TOOL_ERROR_RATE: Final = PREFIX + "trace.tool_error_rate"
TRACE_TOOL_LIST_FINGERPRINT: Final = PREFIX + "trace.tool_list.fingerprint"
TRACE_TOOL_LIST_COUNT: Final = PREFIX + "trace.tool_list.count"
TRACE_FIRST_FAILURE_STEP: Final = PREFIX + "trace.first_failure.step"
TRACE_FIRST_FAILURE_TOOL: Final = PREFIX + "trace.first_failure.tool"
TRACE_RECOVERY_STEPS: Final = PREFIX + "trace.recovery.steps"
TRACE_RECOVERY_CLASSES: Final = PREFIX + "trace.recovery.classes"
TRACE_RECOVERY_CORRECTED_RETRY: Final = PREFIX + "trace.recovery.corrected_retry"
TRACE_RECOVERY_SWITCHED_TOOL: Final = PREFIX + "trace.recovery.switched_tool"
TRACE_RECOVERY_HANDED_BACK: Final = PREFIX + "trace.recovery.handed_back"
TRACE_RECOVERY_REPEATED: Final = PREFIX + "trace.recovery.repeated"
TRACE_RECOVERY_CARRIED_ON: Final = PREFIX + "trace.recovery.carried_on"
# recovery class (checks.recovery) -> the root attribute counting it
TRACE_RECOVERY_COUNTS: Final[dict[str, str]] = {
    name[len(PREFIX + "trace.recovery.") :]: name
    for name in (
        TRACE_RECOVERY_CORRECTED_RETRY,
        TRACE_RECOVERY_SWITCHED_TOOL,
        TRACE_RECOVERY_HANDED_BACK,
        TRACE_RECOVERY_REPEATED,
        TRACE_RECOVERY_CARRIED_ON,
    )
}

TRACE_STATS_ATTRIBUTES: Final[tuple[AttributeDoc, ...]] = (
    AttributeDoc(
        TRACE_MODEL_CALLS,
        "int",
        "local root span",
        "model calls in the trace (chat / LLM spans; agent spans, which repeat their turns' sums, are not counted); "
        "absent when none was seen",
    ),
    AttributeDoc(
        TRACE_INPUT_TOKENS,
        "int",
        "local root span",
        "input tokens of those calls (`gen_ai.usage.input_tokens`, else `gen_ai.usage.prompt_tokens`, else "
        "`llm.token_count.prompt`); absent when none of them recorded a token count",
    ),
    AttributeDoc(
        TRACE_OUTPUT_TOKENS,
        "int",
        "local root span",
        "output tokens (`gen_ai.usage.output_tokens`, else `gen_ai.usage.completion_tokens`, else "
        "`llm.token_count.completion`); absent when no model call recorded a token count",
    ),
    AttributeDoc(
        TRACE_COST,
        "double",
        "local root span",
        "what the model calls cost by `pricing.models` (per 1M tokens, in `pricing.currency`); priced calls only; "
        "absent without a price table",
    ),
    AttributeDoc(
        TRACE_UNPRICED_MODEL_CALLS,
        "int",
        "local root span",
        "model calls whose model has no price in `pricing.models` (or recorded no model): not in `trace.cost`",
    ),
    AttributeDoc(TRACE_TOOL_LATENCY_TOTAL, "double", "local root span", "tool spans' durations summed, in seconds"),
    AttributeDoc(TRACE_TOOL_LATENCY_MAX, "double", "local root span", "the longest tool span, in seconds"),
    AttributeDoc(
        TRACE_TOOL_ERROR_RATE, "double", "local root span", "`trace.errors / trace.tool_calls` (absent without calls)"
    ),
    AttributeDoc(
        TRACE_TOOL_LIST_FINGERPRINT,
        "string",
        "local root span",
        "16 hex digits of BLAKE2b over the offered tools sorted by name, each its name and canonical parameter "
        "schema (descriptions left out): a changed fingerprint means a tool appeared, vanished or changed its schema",
    ),
    AttributeDoc(
        TRACE_TOOL_LIST_COUNT, "int", "local root span", "tools offered to the model in the trace (all turns, union)"
    ),
    AttributeDoc(
        TRACE_FIRST_FAILURE_STEP,
        "int",
        "local root span",
        "the root cause: step of the first call that failed or was not correct (absent when none)",
    ),
    AttributeDoc(TRACE_FIRST_FAILURE_TOOL, "string", "local root span", "that call's tool"),
    AttributeDoc(
        TRACE_RECOVERY_CORRECTED_RETRY,
        "int",
        "local root span",
        "failed calls after which the same tool was called next with other arguments, and it succeeded; the five recovery counts are written when a call failed",
    ),
    AttributeDoc(
        TRACE_RECOVERY_SWITCHED_TOOL,
        "int",
        "local root span",
        "failed calls after which another tool was called (or asked for) next; the five recovery counts are written when a call failed",
    ),
    AttributeDoc(
        TRACE_RECOVERY_HANDED_BACK,
        "int",
        "local root span",
        "failed calls after which the next model turn answered without a tool (its output messages recorded); the five recovery counts are written when a call failed",
    ),
    AttributeDoc(
        TRACE_RECOVERY_REPEATED,
        "int",
        "local root span",
        "failed calls after which the same call (tool and normalised arguments) was made again; the five recovery counts are written when a call failed",
    ),
    AttributeDoc(
        TRACE_RECOVERY_CARRIED_ON,
        "int",
        "local root span",
        "failed calls after which none of the above followed (a changed retry that failed too, or nothing recorded; the judge's error-handling question covers these); the five recovery counts are written when a call failed",
    ),
    AttributeDoc(
        TRACE_RECOVERY_STEPS,
        "int[]",
        "local root span",
        "the failed calls' steps, in order; `trace.recovery.classes` holds each one's class at the same index "
        "(each failed span also carries its own, `recovery.class`)",
    ),
    AttributeDoc(TRACE_RECOVERY_CLASSES, "string[]", "local root span", "the recovery class of each of those steps"),
)

SPAN_ATTRIBUTES: Final[tuple[AttributeDoc, ...]] = (
    AttributeDoc(
        CONVENTION,
        "string",
        "tool span",
        "which tracing convention recognised the span (`genai`, `mcp`, `openinference`, ...)",
    ),
    AttributeDoc(
        PARSE_OK, "bool", "tool span", "arguments parsed to a JSON object (absent when no arguments were recorded)"
    ),
    AttributeDoc(
        ARGUMENTS_OVERSIZED,
        "bool",
        "tool span",
        "arguments larger than `limits.max_argument_bytes`: not parsed, not validated",
    ),
    AttributeDoc(
        TOOL_KNOWN,
        "bool",
        "tool span",
        "the tool was offered in the trace (or the dataset case) or is configured: the agent has it (absent when neither list is known)",
    ),
    AttributeDoc(
        SCHEMA_VALID,
        "bool",
        "tool span",
        "arguments valid against the tool's JSON Schema (absent when no schema is known)",
    ),
    AttributeDoc(
        SCHEMA_ERRORS,
        "string[]",
        "tool span",
        "the first few validation errors, each `path: message`, capped in count and length",
    ),
    AttributeDoc(
        UNDECLARED_ARGUMENTS,
        "string[]",
        "tool span",
        "argument names the tool's schema does not declare, when it does not explicitly allow extra keys "
        "(`additionalProperties` true or a schema); a violation too with `policies.undeclared_arguments: fail`",
    ),
    AttributeDoc(
        SCHEMA_SOURCE,
        "string",
        "tool span",
        "where the schema came from: `trace` (the definitions the model saw) or `config`",
    ),
    AttributeDoc(SCHEMA_DRIFT, "bool", "tool span", "the trace's schema and the configured schema of this tool differ"),
    AttributeDoc(OUTCOME, "string", "tool span", "`success`, `malformed_call`, `execution_failed` or `empty_result`"),
    AttributeDoc(
        ERROR_SOURCE,
        "string",
        "tool span",
        "the evidence behind a failed outcome: `parse`, `unknown_tool`, `schema`, `input_rejected`, `status`, `exception`, `error.type`, `result_text`",
    ),
    AttributeDoc(
        STEP, "int", "tool span", "1-based position of this call among the trace's tool calls (in order of completion)"
    ),
    AttributeDoc(
        BATCH, "int", "tool span", "1-based model turn that issued the call (parallel calls share it), when known"
    ),
    AttributeDoc(
        DUPLICATE,
        "bool",
        "tool span",
        "an earlier call in the trace had the same name and the same normalised arguments (never when the "
        "arguments were not recorded: such calls cannot be told apart)",
    ),
    AttributeDoc(
        REPEATED_FAILURE, "bool", "tool span", "an earlier call in the trace was the same call and failed the same way"
    ),
    AttributeDoc(OVER_BUDGET, "bool", "tool span", "this call's step is past the configured step budget"),
    AttributeDoc(
        RECOVERY_CLASS,
        "string",
        "failed tool span",
        "what the agent did after this failed call: `corrected_retry`, `switched_tool`, `handed_back`, `repeated` "
        "or `carried_on` (see [Recovery](../explanation/trace-numbers.md)); the span is "
        "held back until the class is known, absent when a bound (`limits.max_held_spans*`, "
        "`limits.max_hold_seconds`) or a flush released it first",
    ),
    AttributeDoc(
        LATE_OUTCOME_READ,
        "bool",
        "tool span",
        "true when this call's `outcome` (and `error_source`) were read from the reply the next model request carried "
        "back for its call id, because its instrumentation cannot record a reply's error flag (the MCP SDK's client "
        "spans: `checks.late_outcome`): the span, read as a success, was held back until that reply; absent when no "
        "reply was read before a bound (`limits.max_held_spans*`, `limits.max_hold_seconds`, a flush) or the trace's "
        "end released it (counted in `toolcall_eval.late_outcome.unread`)",
    ),
    AttributeDoc(
        VIOLATIONS,
        "string[]",
        "tool span",
        "policy violations of this call (`must_not_call`, `missing_required_step:<tool>`, `unconfirmed_destructive`, `argument_rule`)",
    ),
    AttributeDoc(
        EVAL_ERROR,
        "string",
        "tool span",
        "evaluation itself failed on this span (the exception type); the span is forwarded unscored",
    ),
    AttributeDoc(
        REQUESTED_PREFIX,
        "N.<score>",
        "LLM span",
        "a call the model requested that ran on no tool span (the instrumentation records tool activity only in "
        "model requests: the Anthropic SDK under OpenInference's or OpenLLMetry's instrumentation, Haystack's Agent; "
        "or, among calls with spans, a tool the framework ran no span for), scored from the requests on the model "
        "span whose input carried its result back: `toolcall_eval.requested.<N>.` + `tool`, `call_id` (`@<conversation>.<epoch>.<k>`, its "
        "position in its conversation, where the instrumentation records no ids) and each score a tool span carries "
        "(`outcome`, `parse_ok`, `tool_known`, `schema_valid`, `step`, "
        "...; `convention` is `request`); counted in the trace's verdict, its stats and recovery classes, and in "
        "`harvest` run lines; offered to the judge (`toolcall_eval.requested.<N>.judge.sampled`; its verdict links to "
        "this model span) and counted in a session's repeated failures, as a tool span's call is",
    ),
    AttributeDoc(
        SAME_CALL_AS,
        "string",
        "tool span",
        "this span wraps a tool span of the same call (same tool, same normalised arguments) from a second instrumentation, e.g. an MCP client span around the in-process server span: the call is scored and counted once, on that child (its span id, hex); this span carries only this and `convention`",
    ),
    AttributeDoc(
        LATE,
        "bool",
        "tool span",
        "the span arrived after its trace's verdict was written (after the root and its grace window, "
        "`serve.root_grace_seconds`): scored per call, not in the verdict (counted in `toolcall_eval.late_spans`)",
    ),
    AttributeDoc(TRACE_TOOL_CALLS, "int", "local root span", "tool calls in the trace"),
    AttributeDoc(TRACE_ERRORS, "int", "local root span", "calls whose outcome is not `success`"),
    AttributeDoc(TRACE_OVER_BUDGET, "bool", "local root span", "more calls than the step budget"),
    AttributeDoc(TRACE_VIOLATIONS, "int", "local root span", "policy violations in the trace"),
    AttributeDoc(
        TRACE_VIOLATION_WEIGHT,
        "int",
        "local root span",
        "violations weighted: a destructive tool's `irreversibility`, 1 for any other violation",
    ),
    AttributeDoc(
        TRACE_UNEXECUTED_CALLS,
        "int",
        "local root span",
        "tool calls the model requested (chat spans' output messages) that neither a tool span nor a later "
        "request's reply answered, e.g. a tool the framework refused to run without telling the model; "
        "informational, not part of the composite (absent when no requests were recorded)",
    ),
    AttributeDoc(
        TRACE_UNKNOWN_TOOL_REQUESTS,
        "int",
        "local root span",
        "of those, requests naming a tool the model was not offered (nor configured): a wrong-tool decision no tool "
        "span shows (pydantic-ai runs none for a tool it does not have); fails `trace.correct` (absent when no "
        "requests were recorded)",
    ),
    AttributeDoc(
        TRACE_UNLISTED_CALLS,
        "int",
        "local root span",
        "calls scored before the trace's tool list arrived (it came on a span that ended later, e.g. Strands' root "
        "`invoke_agent`: their `tool_known` is absent) whose tool is not on that list; fails `trace.correct` (absent "
        "when no list arrived late)",
    ),
    AttributeDoc(
        TRACE_REQUEST_SCORED_CALLS,
        "int",
        "local root span",
        "of `trace.tool_calls`, the calls scored from the requests (`toolcall_eval.requested.*`: no tool span ran); "
        "absent when none",
    ),
    AttributeDoc(
        TRACE_UNMATCHED_REQUESTS,
        "int",
        "local root span",
        "requested calls of an instrumentation that records no call ids (matched to their replies by position in "
        "their conversation: Haystack's) still waiting when the conversation's history broke (a request whose "
        "messages do not extend the previous one's: trimmed, compacted or rewritten): their replies cannot be matched "
        "by position, so they are not scored (counted in `trace.unexecuted_calls` too; an unknown tool's name still "
        "counts in `trace.unknown_tool_requests`); absent when none",
    ),
    AttributeDoc(
        TRACE_LATE_SCHEMA_CHECKED,
        "int",
        "local root span",
        "calls whose arguments were recorded while no schema of their tool was known, validated when a span that ended "
        "later brought it (Semantic Kernel's root `invoke_agent` carries the only definitions): their tool spans "
        "went out without `schema_valid`, the root carries the verdicts (absent when no call waited for its schema)",
    ),
    AttributeDoc(
        TRACE_LATE_SCHEMA_INVALID,
        "int",
        "local root span",
        "of those, the schema-invalid ones: each fails `trace.correct` and counts as a `schema_invalid` violation of "
        "its tool, as it would had the schema come first",
    ),
    AttributeDoc(
        TRACE_LATE_SCHEMA_CHECKED_STEPS,
        "int[]",
        "local root span",
        "the `step` of each call validated late",
    ),
    AttributeDoc(
        TRACE_LATE_SCHEMA_INVALID_STEPS,
        "int[]",
        "local root span",
        "the `step` of each schema-invalid one (absent when none)",
    ),
    AttributeDoc(
        TRACE_LATE_SCHEMA_ERRORS,
        "string[]",
        "local root span",
        "per invalid step, its tool and first schema error (`tool: /path: message`)",
    ),
    AttributeDoc(
        TRACE_LATE_OUTCOME_CHECKED,
        "int",
        "local root span",
        "calls that read as a success on a tool span whose instrumentation cannot record a reply's error flag (its "
        "shape row: the MCP SDK's client span has no `isError`), whose outcome was read from the reply the next "
        "model request carried back for their call id (`checks.late_outcome`): their tool spans carry that outcome "
        "too (`late_outcome.read`) unless a bound released them first, the root carries the verdicts (absent when no "
        "such reply was read)",
    ),
    AttributeDoc(
        TRACE_LATE_OUTCOME_FAILED,
        "int",
        "local root span",
        "of those, the ones whose reply said the tool failed: each counts in `trace.errors` (the composite fails), and "
        "a rejected input or an unknown tool fails `trace.correct` too, as it would had the span recorded it",
    ),
    AttributeDoc(TRACE_LATE_OUTCOME_CHECKED_STEPS, "int[]", "local root span", "the `step` of each call read late"),
    AttributeDoc(
        TRACE_LATE_OUTCOME_FAILED_STEPS, "int[]", "local root span", "the `step` of each failed one (absent when none)"
    ),
    AttributeDoc(
        TRACE_LATE_OUTCOME_OUTCOMES,
        "string[]",
        "local root span",
        "per failed step, its `outcome` (`execution_failed`, or `malformed_call` for a rejected input or an unknown "
        "tool)",
    ),
    AttributeDoc(
        TRACE_LATE_OUTCOME_ERROR_SOURCES,
        "string[]",
        "local root span",
        "per failed step, its `error_source` (`error.type`: the reply's flag the span could not record; "
        "`input_rejected`; `unknown_tool`)",
    ),
    AttributeDoc(
        TRACE_LATE_OUTCOME_REPLIES,
        "string[]",
        "local root span",
        "per failed step, the reply's text as the model got it (cut to `limits.max_attribute_length`): what `harvest` "
        "gives the call, so `eval` scores it the same",
    ),
    AttributeDoc(
        TRACE_CORRECT,
        "bool",
        "local root span",
        "every call parsed, known, schema-valid where a schema is known, not rejected as malformed, no violation, no duplicate, no repeated failure, no request for (or late-listed call of) an unknown tool",
    ),
    AttributeDoc(
        TRACE_COMPOSITE_OK,
        "bool",
        "local root span",
        "`trace.correct` AND NOT `trace.over_budget` AND `trace.errors == 0`",
    ),
    *TRACE_STATS_ATTRIBUTES,
)

# --- attributes read from instrumentations (not written) ----------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
GEN_AI_TOOL_JSON_SCHEMA: Final = "gen_ai.tool.json_schema"
GEN_AI_AGENT_TOOLS: Final = "gen_ai.agent.tools"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"  # a metric attribute too (``online.metrics.SOURCE_ATTRIBUTES``)
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
ERROR_TYPE: Final = "error.type"
# resource attributes read (and written as metric attributes: which service and version a trace's counts are of)
SERVICE_NAME: Final = "service.name"
SERVICE_VERSION: Final = "service.version"
MCP_METHOD_NAME: Final = "mcp.method.name"
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
OPENINFERENCE_TOOL_NAME: Final = "tool.name"
OPENINFERENCE_TOOL_PARAMETERS: Final = "tool.parameters"
INPUT_VALUE: Final = "input.value"
OUTPUT_VALUE: Final = "output.value"
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_ENTITY_NAME: Final = "traceloop.entity.name"
TRACELOOP_ENTITY_INPUT: Final = "traceloop.entity.input"
TRACELOOP_ENTITY_OUTPUT: Final = "traceloop.entity.output"
LMNR_SPAN_TYPE: Final = "lmnr.span.type"
LMNR_SPAN_INPUT: Final = "lmnr.span.input"
LMNR_SPAN_OUTPUT: Final = "lmnr.span.output"
LANGFUSE_OBSERVATION_TYPE: Final = "langfuse.observation.type"
LANGFUSE_OBSERVATION_INPUT: Final = "langfuse.observation.input"
LANGFUSE_OBSERVATION_OUTPUT: Final = "langfuse.observation.output"
PYDANTIC_AI_TOOL_ARGUMENTS: Final = "tool_arguments"
PYDANTIC_AI_TOOL_RESPONSE: Final = "tool_response"
PYDANTIC_AI_RETRY_CAUSE: Final = "pydantic_ai.tool.retry.cause"
PYDANTIC_AI_FAILURE_STAGE: Final = "pydantic_ai.tool.failure_stage"
# Vercel AI SDK (``ai`` 7, its ``LegacyOpenTelemetry`` integration from ``@ai-sdk/otel``; the current
# ``OpenTelemetry`` integration writes GenAI ``execute_tool`` spans instead)
VERCEL_AI_OPERATION_ID: Final = "ai.operationId"
VERCEL_AI_TOOL_CALL_NAME: Final = "ai.toolCall.name"
VERCEL_AI_TOOL_CALL_ID: Final = "ai.toolCall.id"
VERCEL_AI_TOOL_CALL_ARGS: Final = "ai.toolCall.args"
VERCEL_AI_TOOL_CALL_RESULT: Final = "ai.toolCall.result"
VERCEL_AI_PROMPT_TOOLS: Final = "ai.prompt.tools"
VERCEL_AI_RESPONSE_TOOL_CALLS: Final = "ai.response.toolCalls"

# =================================================================================================
# --- the LLM judge (otel_toolcall_eval.judge) ----------------------------------------------------
# `JUDGE_SAMPLED` (above) is written on tool spans; the names below are written on the judge's own
# verdict spans (`toolcall_eval.judge <question>`) and read from LLM spans for the judge's context.
JUDGE_PROVIDER: Final = PREFIX + "judge.provider"
JUDGE_MODEL: Final = PREFIX + "judge.model"
JUDGE_INPUT_TOKENS: Final = PREFIX + "judge.input_tokens"
JUDGE_OUTPUT_TOKENS: Final = PREFIX + "judge.output_tokens"
JUDGE_COST: Final = PREFIX + "judge.cost"

JUDGE_ATTRIBUTES: Final[tuple[AttributeDoc, ...]] = (
    AttributeDoc(
        JUDGE_SAMPLED,
        "bool",
        "tool span",
        "the judge sampled this call and queued it (absent when no judge is configured); a call scored from the "
        "requests carries it as `toolcall_eval.requested.<N>.judge.sampled` on its model span",
    ),
    AttributeDoc(JUDGE_PROVIDER, "string", "judge span", "the judge's API: `openai` (and compatibles) or `anthropic`"),
    AttributeDoc(JUDGE_MODEL, "string", "judge span", "the judge model, as the provider reported it"),
    AttributeDoc(JUDGE_INPUT_TOKENS, "int", "judge span", "input tokens of the judge call (retries included)"),
    AttributeDoc(JUDGE_OUTPUT_TOKENS, "int", "judge span", "output tokens of the judge call (retries included)"),
    AttributeDoc(
        JUDGE_COST,
        "double",
        "judge span",
        "what the judge call cost, in the budget's currency, retries included: an attempt the provider may have "
        "billed without reporting usage (none reported, timed out after sending) counts its worst case, so an error "
        "verdict (e.g. `http_500` after a timed-out attempt) can carry a cost",
    ),
)

# GenAI evaluation names (semantic conventions): on verdict spans and the `gen_ai.evaluation.result` event.
GEN_AI_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"

# Read from LLM spans: the user's request and the model's reaction to a failed call.
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
OPENINFERENCE_INPUT_MESSAGES_PREFIX: Final = "llm.input_messages."
# CrewAI's OpenInference event listener: every definition in one JSON list (not ``llm.tools.N.tool.json_schema``)
OPENINFERENCE_LLM_TOOLS: Final = "llm.tools"
OPENINFERENCE_OUTPUT_MESSAGES_PREFIX: Final = "llm.output_messages."
OPENLLMETRY_PROMPT_PREFIX: Final = "gen_ai.prompt."
OPENLLMETRY_COMPLETION_PREFIX: Final = "gen_ai.completion."

# =================================================================================================
# --- sessions (otel_toolcall_eval.online.sessions): a conversation's traces rolled up into one verdict ----
# Read from any span of a trace (the first one seen wins); ``sessions.attributes`` in the config may list others.
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
OPENINFERENCE_SESSION_ID: Final = "session.id"  # OpenInference's `using_session`; Langfuse's own SDK writes it too
LANGFUSE_SESSION_ID: Final = "langfuse.session.id"
SESSION_ID_ATTRIBUTES: Final = (GEN_AI_CONVERSATION_ID, OPENINFERENCE_SESSION_ID, LANGFUSE_SESSION_ID)

# Written on the session's `gen_ai.evaluation.result` log record (with `gen_ai.conversation.id` and the GenAI
# evaluation name, label and score).
SESSION_EVALUATION_NAME: Final = PREFIX + "session"
SESSION_TURNS: Final = PREFIX + "session.turns"
SESSION_TOOL_CALLS: Final = PREFIX + "session.tool_calls"
SESSION_ERRORS: Final = PREFIX + "session.errors"
SESSION_VIOLATIONS: Final = PREFIX + "session.violations"
SESSION_TURNS_OK: Final = PREFIX + "session.turns_ok"
SESSION_REPEATED_FAILURES: Final = PREFIX + "session.repeated_failures"
SESSION_OVER_BUDGET: Final = PREFIX + "session.over_budget"
SESSION_FINALIZED_BY: Final = PREFIX + "session.finalized_by"

SESSION_ATTRIBUTES: Final[tuple[AttributeDoc, ...]] = (
    AttributeDoc(
        GEN_AI_CONVERSATION_ID,
        "string",
        "session record",
        "the conversation: the first of `sessions.attributes` (`gen_ai.conversation.id`, `session.id`, "
        "`langfuse.session.id`) seen on any span of each trace",
    ),
    AttributeDoc(SESSION_TURNS, "int", "session record", "turns: traces of the conversation"),
    AttributeDoc(SESSION_TOOL_CALLS, "int", "session record", "tool calls over all turns"),
    AttributeDoc(SESSION_ERRORS, "int", "session record", "calls whose outcome is not `success`, over all turns"),
    AttributeDoc(SESSION_VIOLATIONS, "int", "session record", "policy violations over all turns"),
    AttributeDoc(
        SESSION_TURNS_OK,
        "int",
        "session record",
        "turns whose `trace.composite_ok` held (a turn without tool calls holds)",
    ),
    AttributeDoc(
        SESSION_REPEATED_FAILURES,
        "int",
        "session record",
        "failing calls (same tool, same normalised arguments) an earlier turn had failed already",
    ),
    AttributeDoc(
        SESSION_OVER_BUDGET,
        "bool",
        "session record",
        "more tool calls over the session than `sessions.step_budget` (false when no budget is set)",
    ),
    AttributeDoc(
        SESSION_FINALIZED_BY,
        "string",
        "session record",
        "`idle` (no turn for `limits.session_idle_seconds`), `evicted` (`limits.max_sessions`), `flush` or `shutdown`",
    ),
)

# =================================================================================================
# --- the pre-execution guard (otel_toolcall_eval.guard): its `apply_guardrail` span and events ----
# GenAI guardrail convention (semantic-conventions-genai, development): operation, span and event names.
APPLY_GUARDRAIL: Final = "apply_guardrail"
GEN_AI_GUARDRAIL_RESULT: Final = "gen_ai.guardrail.result"  # the event
GEN_AI_GUARDRAIL_COMPONENT_NAME: Final = "gen_ai.guardrail.component.name"
GEN_AI_GUARDRAIL_SOURCE: Final = "gen_ai.guardrail.source"
GEN_AI_GUARDRAIL_POLICY_ID: Final = "gen_ai.guardrail.policy.id"
GEN_AI_GUARDRAIL_POLICY_VERSION: Final = "gen_ai.guardrail.policy.version"
GEN_AI_GUARDRAIL_POLICY_RULE_ID: Final = "gen_ai.guardrail.policy.rule.id"
GEN_AI_GUARDRAIL_RESULT_TYPE: Final = "gen_ai.guardrail.result.type"
GEN_AI_GUARDRAIL_RESULT_VALUE: Final = "gen_ai.guardrail.result.value"
GEN_AI_GUARDRAIL_RESULT_REASON: Final = "gen_ai.guardrail.result.reason"
# agent threat detection (semantic-conventions-genai model/agent): the event and its attributes
AGENT_THREAT_DETECTION: Final = "agent.threat.detection"
AGENT_THREAT_DETECTION_RULE_ID: Final = "agent.threat.detection.rule_id"
AGENT_THREAT_DETECTION_RULESET: Final = "agent.threat.detection.ruleset"
AGENT_THREAT_DETECTION_SEVERITY: Final = "agent.threat.detection.severity"
AGENT_THREAT_DETECTION_ACTION: Final = "agent.threat.detection.action"
AGENT_THREAT_DETECTION_CORRELATION_ID: Final = "agent.threat.detection.correlation_id"
GUARD_COMPONENT: Final = "otel-toolcall-eval"  # gen_ai.guardrail.component.name: how the evaluation side knows it
GUARD_SOURCE: Final = "tool_input"  # gen_ai.guardrail.source: the guard judges a call's input, before it runs
GUARD_MODE: Final = PREFIX + "guard.mode"
GUARD_PREVENTED: Final = PREFIX + "guard.prevented"
GUARD_STEP: Final = PREFIX + "guard.step"
GUARD_POLICIES: Final = PREFIX + "guard.policies"
GUARD_APPROVED: Final = PREFIX + "guard.approved"
# the evaluation side (online.prevented): on the root of a trace in which the guard stopped calls
TRACE_PREVENTED_CALLS: Final = PREFIX + "trace.prevented_calls"
TRACE_PREVENTED_TOOLS: Final = PREFIX + "trace.prevented_tools"

GUARD_ATTRIBUTES: Final[tuple[AttributeDoc, ...]] = (
    AttributeDoc(GEN_AI_OPERATION_NAME, "string", "guard span", "`apply_guardrail`"),
    AttributeDoc(GEN_AI_GUARDRAIL_COMPONENT_NAME, "string", "guard span, result event", "`otel-toolcall-eval`"),
    AttributeDoc(GEN_AI_GUARDRAIL_SOURCE, "string", "guard span, result event", "`tool_input`"),
    AttributeDoc(
        GEN_AI_GUARDRAIL_POLICY_ID,
        "string",
        "guard span, result event",
        "span: `guard.policy_id` (the configuration enforced); event: the broken policy (`must_not_call`, ...)",
    ),
    AttributeDoc(
        GEN_AI_GUARDRAIL_POLICY_VERSION,
        "string",
        "guard span, result event",
        "16 hex digits of BLAKE2b over the compiled policies and guard actions: changes when the config does",
    ),
    AttributeDoc(
        GEN_AI_GUARDRAIL_POLICY_RULE_ID,
        "string",
        "result event",
        "the violation the processor writes for the same call (`missing_required_step:login`, a rule's name, ...)",
    ),
    AttributeDoc(GEN_AI_GUARDRAIL_RESULT_TYPE, "string", "guard span, result event", "`action`"),
    AttributeDoc(
        GEN_AI_GUARDRAIL_RESULT_VALUE,
        "string",
        "guard span, result event",
        "the guard's decision (span) or the finding's action (event): `allow`, `warn`, `ask` or `block`, "
        "in shadow mode too",
    ),
    AttributeDoc(
        GEN_AI_GUARDRAIL_RESULT_REASON,
        "string",
        "guard span, result event",
        "why, without argument values (the deciding finding's on the span)",
    ),
    AttributeDoc(GEN_AI_TOOL_NAME, "string", "guard span", "the tool the call was for"),
    AttributeDoc(GEN_AI_TOOL_CALL_ID, "string", "guard span", "the call's id, when the framework gave one"),
    AttributeDoc(AGENT_THREAT_DETECTION_RULE_ID, "string", "threat event", "`<policy>/<rule>`"),
    AttributeDoc(AGENT_THREAT_DETECTION_RULESET, "string", "threat event", "`otel-toolcall-eval@<policy version>`"),
    AttributeDoc(
        AGENT_THREAT_DETECTION_SEVERITY,
        "string",
        "threat event",
        "the policy's severity: must_not_call critical; required_steps, destructive_tools, argument_rules high; "
        "repeated_failure, duplicate low; the others medium",
    ),
    AttributeDoc(
        AGENT_THREAT_DETECTION_ACTION,
        "string",
        "threat event",
        "the enforcement taken: `block`/`ask` when it stopped the call, `warn` when the call ran anyway (shadow "
        "mode, an approved ask, a warn), `allow`",
    ),
    AttributeDoc(AGENT_THREAT_DETECTION_CORRELATION_ID, "string", "threat event", "the call's id, when known"),
    AttributeDoc(GUARD_MODE, "string", "guard span", "`enforce` or `shadow`"),
    AttributeDoc(
        GUARD_PREVENTED,
        "bool",
        "guard span, tool span",
        "the call did not run; on a framework's own span of a stopped call (scored as no call), written by the "
        "processor",
    ),
    AttributeDoc(GUARD_STEP, "int", "guard span", "the step the call would have had in its trace"),
    AttributeDoc(GUARD_POLICIES, "string[]", "guard span", "every policy the call broke, in order"),
    AttributeDoc(GUARD_APPROVED, "bool", "guard span", "an `ask` the approval hook answered (true: the call ran)"),
    AttributeDoc(
        TRACE_PREVENTED_CALLS,
        "int",
        "local root span",
        "calls the guard stopped in the trace (not in `trace.tool_calls`, not scored; absent when none)",
    ),
    AttributeDoc(TRACE_PREVENTED_TOOLS, "string[]", "local root span", "their tools, in the order they were stopped"),
)
