"""What ``Scorer.score`` would flag about a tool call, asked before the call runs (the guard's question).

The same check functions as ``engine.call``, on the same inputs (the policy, the trace's ``CallHistory``, the tools
offered, the model turn), in the same order; the history is only read, never added to: the call has not happened
yet, and a call the guard stops never happens (the processor never sees it either).

Everything ``score`` decides from the call itself and the earlier calls is known in advance: parse, known tool,
schema, undeclared arguments, must-not-call, required steps, destructive tools, argument rules, the step budget and
duplicates. One verdict is not: a repeated failure is a call that failed before AND fails again the same way. Before
it runs, the question is whether the same call (the same normalised form) failed before: ``failed_before``. When it
then fails the same way, ``score`` calls it a repeated failure; ``tests/guard/test_parity.py`` proves both halves.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from otel_toolcall_eval.checks.argument_rules import argument_rule_violations
from otel_toolcall_eval.checks.destructive import unconfirmed_destructive
from otel_toolcall_eval.checks.must_not_call import must_not_call_violation
from otel_toolcall_eval.checks.normalize import arguments_key
from otel_toolcall_eval.checks.parse import object_or_none, parse_arguments
from otel_toolcall_eval.checks.required_steps import missing_required_steps
from otel_toolcall_eval.checks.schema import validate_with
from otel_toolcall_eval.checks.step_budget import over_budget
from otel_toolcall_eval.checks.undeclared import VIOLATION as UNDECLARED
from otel_toolcall_eval.checks.undeclared import undeclared_in
from otel_toolcall_eval.checks.unknown_tool import tool_known
from otel_toolcall_eval.engine.call import Scorer, position_of
from otel_toolcall_eval.records import CallHistory, Outcome, ParseStatus, ToolDefinition, call_digest


@dataclass(slots=True)
class PreCheck:
    """The verdicts of a call that has not run yet, one field per check ``Scorer.score`` runs.

    ``violations`` is exactly the list ``score`` would write (same strings, same order); the fields before it say
    which policy each came from, so a caller never parses a configured rule's name to find its policy.

    Performance: not ``frozen`` (nothing changes it once made): a frozen dataclass's ``__init__`` sets each of its
    16 fields through ``object.__setattr__``, which in the pure build cost a fifth of a plain span per decision.
    """

    name: str
    step: int  # the call's step if it runs: the trace's calls so far, plus one
    parse_status: ParseStatus
    arguments: dict[str, Any] | None
    tool_known: bool | None
    schema_valid: bool | None
    schema_errors: tuple[str, ...]
    must_not_call: str | None
    undeclared_arguments: tuple[str, ...]
    undeclared_violation: str | None  # set when ``policies.undeclared_arguments: fail``
    missing_steps: tuple[str, ...]
    unconfirmed_destructive: str | None
    argument_rules: tuple[str, ...]  # the names of the broken argument rules
    over_budget: bool | None
    duplicate: bool
    failed_before: bool

    @property
    def parse_ok(self) -> bool | None:
        return self.parse_status.parsed

    @property
    def violations(self) -> list[str]:
        out = [self.must_not_call] if self.must_not_call else []
        if self.undeclared_violation:
            out.append(self.undeclared_violation)
        out.extend(self.missing_steps)
        if self.unconfirmed_destructive:
            out.append(self.unconfirmed_destructive)
        out.extend(self.argument_rules)
        return out


def precheck(
    scorer: Scorer,
    name: str,
    raw_arguments: Any,
    history: CallHistory,
    *,
    trace_tools: dict[str, ToolDefinition] | None = None,
    batch: int | None = None,
    forbidden: frozenset[str] | None = None,
    failed_calls: Container[bytes] = (),
) -> PreCheck:
    """The verdicts ``scorer.score`` would give a call of ``name`` with ``raw_arguments`` made now.

    ``failed_calls``: the ``records.call_digest`` of every earlier call of the trace that did not succeed (the
    history keeps failures keyed with their error, which a call that has not run does not have yet).
    """
    policy = scorer.policy
    limits = policy.limits
    # the scorer's memo of the tool's schema resolution: the same validator, single parameter and declared names
    _, single, is_string, validator, declared, offered = scorer._resolve(name, trace_tools, None)
    arguments = object_or_none(raw_arguments, limits.max_argument_bytes)
    status = ParseStatus.OK
    if arguments is None:
        parsed = parse_arguments(
            raw_arguments, single_param=single, string_param=is_string, max_bytes=limits.max_argument_bytes
        )
        arguments, status = parsed.value, parsed.status
    known = True if offered else tool_known(name, trace_tools, policy.tools)
    schema_valid: bool | None = None
    schema_errors: tuple[str, ...] = ()
    if arguments is not None and validator is not None:
        verdict = validate_with(validator, arguments, limits.max_schema_errors, limits.max_attribute_length)
        schema_valid, schema_errors = verdict.valid, verdict.errors

    forbidden_set = policy.must_not_call if forbidden is None else forbidden
    banned = must_not_call_violation(name, forbidden_set) if forbidden_set else None
    undeclared: tuple[str, ...] = ()
    if declared is not None and arguments and not declared.issuperset(arguments):
        undeclared = undeclared_in(arguments, declared, limits.max_attribute_length)
    index = scorer._policies
    required = index.required.get(name)
    missing = tuple(missing_required_steps(history, name, batch, required)) if required else ()
    destructive_rules = index.destructive.get(name)
    destructive = unconfirmed_destructive(history, name, batch, destructive_rules) if destructive_rules else None
    rules = index.rules.get(name)
    broken = tuple(argument_rule_violations(name, arguments, rules, scorer.cache)) if rules else ()

    duplicate = failed_before = False
    if status is not ParseStatus.ABSENT and name in history.pending:  # an earlier call of the tool: compare
        call = call_digest(arguments_key(name, arguments, raw_arguments))
        first = history.pending.get(name)  # the tool's first call, not digested yet (``CallHistory.pending``)
        if first is not None and call_digest(arguments_key(name, first.arguments, first.raw_arguments)) == call:
            duplicate = True
            failed_before = first.outcome is not Outcome.SUCCESS
        duplicate = duplicate or call in history.seen_calls
        failed_before = failed_before or call in failed_calls
    step = history.calls + 1
    return PreCheck(
        name,
        step,
        status,
        arguments,
        known,
        schema_valid,
        schema_errors,
        banned,
        undeclared,
        UNDECLARED if undeclared and policy.undeclared_arguments_fail else None,
        missing,
        None if destructive is None else destructive[0],
        broken,
        over_budget(position_of(history, step, batch), policy.step_budget),  # the engine's rule for a batch
        duplicate,
        failed_before,
    )
