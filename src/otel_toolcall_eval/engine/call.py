"""Score one tool call with every deterministic check, in the one order every adapter shares.

The processor (spans), replay (recorded spans, through the processor) and the offline runner (run-file lines)
all call ``Scorer.score`` on a ``ToolCallRecord`` with the trace's (or the case's) ``CallHistory``: per-call
scoring (parse, known tool, schema, outcome, duplicate, repeated failure, step budget, every policy) exists
only here. The offline runner adds only what needs ground truth (selection, argument match, order, necessity).

"Known tool", decided once (``checks.unknown_tool``): the tool is among the tools offered in the trace (or listed in the
dataset case's ``available_tools``) OR among the configured tools. Both are the agent's tools: instrumentations
record definitions per chat span and not every chat span records them (sub-agents, tools an MCP server lists
at run time), and the config is the application's own declaration of what it registered. A call of a tool
neither offered nor configured is the hallucinated-tool decision; with no tool list at all there is no verdict.
"""

# Performance (callgrind, pure build, PYTHONHASHSEED=0; the benchmarks' agent trace of five tool calls, four of them
# schema-invalid in the invalid trace; per trace, start-up subtracted). The processor adds ~2.07 M instructions per
# invalid trace (the SDK alone: ~1.9 M; 1.5x allows ~0.95 M). ``Scorer.score`` over the five calls: 639 k invalid,
# 358 k valid (655 k / 386 k before the outcome fast paths of ``checks.outcome``); reading the five tool spans
# (``conventions.spans.attribute_record``): 167 k (183 k before). Of the invalid trace's engine cost, jsonschema-rs
# building its two error objects per invalid call (``checks.schema.validate_with``) is ~49 k a call, ~196 k a trace
# (a valid call's validation: ~6 k), in Rust and in jsonschema_rs's own ``ValidationError.__init__`` (Python, so
# interpreted in the compiled build too): each error carries its verbose message with the whole instance printed,
# its paths and the instance converted to Python, used or not (upstream; ``is_valid`` alone: ~2 k); the normalised
# form and digest of a call (``checks.normalize``) another ~83 k (~21 k a call; ~35 k and ~140 k before the text path
# of ``normalize._folded_text``, 51a277e). The engine and the reading together are ~40 % of the processor's cost:
# at zero cost the pure build would still be ~1.67x on this trace. Measured per stage (a harness feeding captured
# spans to an inline processor, each function counted apart): the call stage ~945 k (the engine ~620 k of it, the
# schema check ~210 k, the trace's recovery numbers ~63 k, the metrics ~80 k), finishing the trace ~360 k
# (releasing the four held failed spans ~110 k, the metrics ~125 k of which one SDK ``Histogram.record`` ~85 k),
# the model turns ~213 k, reading the eight spans ~198 k.
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from otel_toolcall_eval._lru import BytesBoundedCache
from otel_toolcall_eval.checks.argument_rules import argument_rule_violations
from otel_toolcall_eval.checks.destructive import unconfirmed_destructive
from otel_toolcall_eval.checks.duplicate import is_duplicate
from otel_toolcall_eval.checks.must_not_call import must_not_call_violation
from otel_toolcall_eval.checks.normalize import arguments_key
from otel_toolcall_eval.checks.outcome import classify_outcome, reports_unknown_tool
from otel_toolcall_eval.checks.parse import object_or_none, parse_arguments, single_parameter
from otel_toolcall_eval.checks.repeated_failure import failure_digest, is_repeated_failure
from otel_toolcall_eval.checks.required_steps import missing_required_steps
from otel_toolcall_eval.checks.schema import (
    ResolvedSchema,
    ValidatorCache,
    resolve_schema,
    validate_with,
    validator_for,
)
from otel_toolcall_eval.checks.step_budget import over_budget
from otel_toolcall_eval.checks.undeclared import VIOLATION as UNDECLARED
from otel_toolcall_eval.checks.undeclared import declared_names, undeclared_in
from otel_toolcall_eval.checks.unknown_tool import tool_known
from otel_toolcall_eval.policy import ArgumentRule, DestructiveTool, Policy, RequiredStep
from otel_toolcall_eval.records import (
    NO_ERROR,
    CallHistory,
    CallScore,
    Outcome,
    ParseStatus,
    ToolCallRecord,
    ToolDefinition,
    call_digest,
    new_call_score,
)

# the schema to use, its single parameter, whether that is a string, the schema's compiled validator, the
# argument names it declares (None: it allows others or cannot tell; checks.undeclared), whether the trace's
# tool list offers the tool (then it is known without asking ``checks.unknown_tool``)
_Resolution = tuple[ResolvedSchema, str | None, bool, Any, frozenset[str] | None, bool]


@dataclass(slots=True, frozen=True)
class PolicyIndex:
    """The trajectory policies indexed by the tool they apply to, built once per config: for a call, each list is
    usually empty, so the policies of a call cost three dict lookups."""

    required: dict[str, list[RequiredStep]]
    destructive: dict[str, list[DestructiveTool]]
    rules: dict[str, list[ArgumentRule]]

    @classmethod
    def from_policy(cls, policy: Policy) -> PolicyIndex:
        required: dict[str, list[RequiredStep]] = {}
        for step in policy.required_steps:
            for before in dict.fromkeys(step.before):
                required.setdefault(before, []).append(step)
        destructive: dict[str, list[DestructiveTool]] = {}
        for tool in policy.destructive_tools:
            destructive.setdefault(tool.tool, []).append(tool)
        rules: dict[str, list[ArgumentRule]] = {}
        for rule in policy.argument_rules:
            rules.setdefault(rule.tool, []).append(rule)
        return cls(required, destructive, rules)


def policy_violations(
    index: PolicyIndex,
    history: CallHistory,
    name: str,
    batch: int | None,
    arguments: dict[str, Any] | None,
    cache: ValidatorCache,
    violations: list[str],
) -> int:
    """Append the call's violations of ``required_steps``, ``destructive_tools`` and ``argument_rules`` (in that
    order) to ``violations``; return their weight. One function for the processor and the offline runner."""
    weight = 0
    required = index.required.get(name)
    if required:
        missing = missing_required_steps(history, name, batch, required)
        violations.extend(missing)
        weight += len(missing)
    destructive_rules = index.destructive.get(name)
    if destructive_rules:
        destructive = unconfirmed_destructive(history, name, batch, destructive_rules)
        if destructive:
            violations.append(destructive[0])
            weight += destructive[1]
    rules = index.rules.get(name)
    if rules:
        broken = argument_rule_violations(name, arguments, rules, cache)
        violations.extend(broken)
        weight += len(broken)
    return weight


class Scorer:
    """Holds what is built once (policy lookups, the validator cache); ``score`` itself keeps no state.

    Policy-derived lookups (the configured schemas, rules indexed by tool) are computed here once, because
    ``score`` runs on the application's thread for every tool span and each rule list is usually empty for
    the tool at hand.
    """

    __slots__ = (
        "_budget",
        "_empty_results",
        "_forbidden",
        "_input_errors",
        "_key_failed_first",
        "_max_attribute",
        "_max_bytes",
        "_max_calls",
        "_max_errors",
        "_policies",
        "_policy_tools",
        "_resolved",
        "_tools",
        "_undeclared_fail",
        "cache",
        "policy",
    )

    def __init__(
        self, policy: Policy | None = None, cache: ValidatorCache | None = None, *, key_failed_first_calls: bool = False
    ) -> None:
        """``key_failed_first_calls``: digest a tool's failed first call at once rather than when a second call of
        that tool arrives (the verdicts are the same either way). For a caller that digests every failed call
        anyway, the processor (the recovery class and the session's repeated failures need it): the call is then
        normalised once, not twice. The offline path leaves it off: most of its first calls are never keyed."""
        policy = policy if policy is not None else Policy()
        self._key_failed_first = key_failed_first_calls
        self.policy = policy
        limits = policy.limits
        self.cache = cache if cache is not None else ValidatorCache(limits.validator_cache_size, limits.max_cache_bytes)
        self._tools = policy.tools
        self._forbidden = policy.must_not_call
        self._policies = PolicyIndex.from_policy(policy)
        index = self._policies  # the tools any trajectory policy applies to: one set test per call
        self._policy_tools = frozenset(index.required) | frozenset(index.destructive) | frozenset(index.rules)
        self._input_errors = policy.errors.input_error_types
        self._empty_results = policy.errors.empty_results
        self._undeclared_fail = policy.undeclared_arguments_fail
        # the limits read on every call, one attribute away instead of two
        self._max_bytes = limits.max_argument_bytes
        self._max_errors = limits.max_schema_errors
        self._max_attribute = limits.max_attribute_length
        self._max_calls = limits.max_calls_per_trace
        self._budget = policy.step_budget
        # (tool name, id of the trace's definition) -> (that definition, its resolution, its single parameter)
        self._resolved: BytesBoundedCache[tuple[str, int], tuple[ToolDefinition | None, _Resolution]] = (
            BytesBoundedCache(limits.max_cache_bytes, limits.validator_cache_size)
        )

    @property
    def input_error_types(self) -> frozenset[str]:
        """The policy's exception types that mean a tool rejected its input (``checks.outcome``)."""
        return self._input_errors

    def score(
        self,
        record: ToolCallRecord,
        history: CallHistory,
        *,
        trace_tools: dict[str, ToolDefinition] | None = None,
        batch: int | None = None,
        forbidden: frozenset[str] | None = None,
    ) -> CallScore:
        """Score ``record`` against the trace's earlier calls, then add it to ``history``.

        ``trace_tools``: the tools offered in the trace (or the dataset case); ``batch``: the model turn that
        issued the call; ``forbidden``: the must-not-call set when it is not the policy's own (a dataset case adds
        its ``must_not_call`` to the config's).
        """
        name = record.name
        max_bytes = self._max_bytes
        resolved, single, is_string, validator, declared, offered = self._resolve(name, trace_tools, record.span_schema)
        raw = record.raw_arguments
        arguments = object_or_none(raw, max_bytes) if not record.arguments_unparseable else None
        if arguments is not None:  # the common case, a JSON object: what parse_arguments returns, without its record
            status = ParseStatus.OK
        else:
            parsed = parse_arguments(
                raw,
                single_param=single,
                string_param=is_string,
                max_bytes=max_bytes,
                unparseable=record.arguments_unparseable,
            )
            arguments, status = parsed.value, parsed.status
        known = True if offered else tool_known(name, trace_tools, self._tools)
        error = record.error
        recorded = record.result_recorded
        # the framework's own word that the tool does not exist beats the definitions (which may arrive later);
        # with no error and no result recorded there is no such word
        if (error is not NO_ERROR or recorded) and reports_unknown_tool(error, record.result, recorded):
            known = False

        schema_verdict = None
        if arguments is not None and validator is not None:
            schema_verdict = validate_with(validator, arguments, self._max_errors, self._max_attribute)
        schema_valid = None if schema_verdict is None else schema_verdict.valid
        parse_ok = _PARSE_OK[status]
        outcome, source = classify_outcome(  # positional, in its parameters' order: the hot path
            parse_ok,
            known,
            schema_valid,
            error,
            record.result,
            recorded,
            self._input_errors,
            self._empty_results,
        )

        step = history.calls + 1
        violations: list[str] = []
        weight = 0
        forbidden_set = self._forbidden if forbidden is None else forbidden
        banned = must_not_call_violation(name, forbidden_set) if forbidden_set else None
        if banned:
            violations.append(banned)
            weight += 1
        undeclared: tuple[str, ...] = ()
        if declared is not None and arguments and not declared.issuperset(arguments):  # a set check in C first
            undeclared = undeclared_in(arguments, declared, self._max_attribute)
        if undeclared and self._undeclared_fail:
            violations.append(UNDECLARED)
            weight += 1
        if name in self._policy_tools:
            weight += policy_violations(self._policies, history, name, batch, arguments, self.cache, violations)

        position = budget_position(history, step, batch)  # recorded with or without a budget (the guard's history)
        score = new_call_score(  # positional: the hot path (``records.new_call_score``)
            name,
            step,
            outcome,
            parse_ok,
            status,
            known,
            schema_valid,
            () if schema_verdict is None else schema_verdict.errors,
            resolved.source,
            resolved.drift,
            source,
            batch,
            None if self._budget is None else over_budget(position, self._budget),
            violations,
            weight,
            arguments,
            raw,
            None if error is NO_ERROR else error.exception_type or error.error_type or error.retry_cause,
            undeclared,
        )
        # ``CallScore.correct`` from the parts at hand: parse, unknown-tool and schema failures are all outcome
        # MALFORMED_CALL (``checks.outcome``); duplicate and repeated failure are added below
        correct = outcome is not _MALFORMED and not violations
        if name not in history.pending:  # ``first_call_of``: nothing to repeat
            if outcome is _SUCCESS or status is ParseStatus.ABSENT or not self._key_failed_first:  # it waits
                history.add(score, None, None, self._max_calls, correct)
            else:  # a failure: the recovery class and the session compare it by its digest now, so it is kept now
                call = call_digest_of(score)
                history.pending[name] = None
                history.add(score, call, failure_digest(call, outcome, score.error_source, score.error_name),
                            self._max_calls, correct)  # fmt: skip
            return score
        first = history.take_pending(name)
        if first is not None:
            first_call = call_digest(arguments_key(name, first.arguments, first.raw_arguments))
            history.remember(
                first_call, failure_digest(first_call, first.outcome, first.error_source, first.error_name)
            )
        call = call_digest_of(score)
        failure = failure_digest(call, score.outcome, score.error_source, score.error_name)
        # arguments not recorded (GenAI content capture is opt-in): two such calls cannot be told apart,
        # so neither is called a repeat of the other
        if status is not ParseStatus.ABSENT:
            score.duplicate = is_duplicate(history, call)
            score.repeated_failure = is_repeated_failure(history, failure)
        correct = correct and not score.duplicate and not score.repeated_failure
        history.add(score, call, failure, self._max_calls, correct)
        return score

    def _resolve(
        self, name: str, trace_tools: dict[str, ToolDefinition] | None, span_schema: dict[str, Any] | None
    ) -> _Resolution:
        """``resolve_schema``, ``single_parameter`` and the schema's validator, memoised per (tool, the trace's
        definition object).

        All three depend only on the trace's definition of the tool (shared by every trace that saw the same
        definitions: they come from one parse cache) and the config; a schema on the span itself is rare and
        not memoised. The entry keeps the definition alive, so its id cannot be reused while it is cached; the
        memo holds at most ``validator_cache_size`` entries and ``max_cache_bytes`` (estimated: the definition's
        schema text, times a factor for its parsed form).
        """
        seen = trace_tools.get(name) if trace_tools else None
        if span_schema is not None:
            schema = ToolDefinition(name, span_schema)
            return self._resolution(resolve_schema(name, trace_tools, schema, self._tools), seen is not None)
        key = (name, id(seen))
        hit = self._resolved.get(key)
        if hit is not None and hit[0] is seen:
            return hit[1]
        value = self._resolution(resolve_schema(name, trace_tools, None, self._tools), seen is not None)
        size = 256 if seen is None or seen.schema_key is None else 8 * len(seen.schema_key) + 256
        self._resolved.put(key, (seen, value), size)
        return value

    def _resolution(self, resolved: ResolvedSchema, offered: bool) -> _Resolution:
        definition = resolved.definition
        if definition is None:
            return resolved, None, False, None, None, offered
        single, is_string = single_parameter(definition.parameters)
        validator = validator_for(definition, self.cache)
        return resolved, single, is_string, validator, declared_names(definition.parameters), offered


_PARSE_OK = {status: status.parsed for status in ParseStatus}  # a dict lookup instead of a property call
_MALFORMED = Outcome.MALFORMED_CALL
_SUCCESS = Outcome.SUCCESS


def call_key(score: CallScore) -> str:
    """The call's normalised form (``checks.normalize.arguments_key``), computed on first use and kept on the
    score: the engine needs it only when a second call of the same tool arrives."""
    key = score.arguments_key
    if key is None:
        key = score.arguments_key = arguments_key(score.name, score.arguments, score.raw_arguments)
    return key


def call_digest_of(score: CallScore) -> bytes:
    """``records.call_digest`` of the call's normalised form, computed once and kept on the score: the duplicate
    check, the recovery class and the session's repeated failures all compare calls by it."""
    digest = score.digest
    if digest is None:
        digest = score.digest = call_digest(call_key(score))
    return digest


def budget_position(history: CallHistory, step: int, batch: int | None) -> int:
    """The step budget's one rule for online and offline: a call's budget position is where its parallel batch
    starts (1 + the calls made before the batch; a call without a batch, its own step). The calls of one batch
    were issued at once, so their order among themselves (the order they ended online, the order a run line
    lists them offline) never decides which is over: a batch issued within the budget runs whole within it, a
    batch issued after it is over as a whole. The trace is over the budget when a call is (``checks.verdict``
    reads the furthest position). A batch label met again after another counts from where it is met again."""
    position = position_of(history, step, batch)
    if batch is not None and history.batch != batch:  # a new batch starts here
        history.batch, history.batch_start = batch, step - 1
    if position > history.budget_position:
        history.budget_position = position
    return position


def position_of(history: CallHistory, step: int, batch: int | None) -> int:
    """``budget_position`` without recording the call (the guard asks before the call runs)."""
    if batch is None or history.batch != batch:
        return step
    return history.batch_start + 1
