"""The config's trajectory policies on a run line: the online checks, over a ``CallHistory`` built call by call.

``policies.required_steps``, ``destructive_tools``, ``argument_rules`` and ``step_budget`` are judged by the
same pure functions ``scoring.Scorer.score`` calls (``checks.required_steps``, ``checks.destructive``,
``checks.argument_rules``, ``checks.step_budget``), in the same order, on a history that records each call the
way ``Scorer.score`` does. So a change that makes the agent skip a prerequisite fails the CI gate as it would
fail a trace. ``must_not_call`` stays apart (``score.py``): its own count and gate check, as before.

What a run line cannot say, decided here:

- Outcome: a run line records no per-call result, so ``checks.outcome`` classifies each call from what is
  known: a call whose arguments do not parse, of a tool not offered, or failing its schema is a malformed
  call; when the line records an ``error`` every call counts as failed (the line does not say which one did);
  any other call counts as succeeded. As online, only a succeeded call is a prerequisite or a confirmation.
- Turns: calls sharing a ``batch`` are one model turn, and turns follow each other in the order their labels
  first appear in ``tool_calls``; an ordering rule is met only by a call of an earlier turn. A call without a
  ``batch`` is a call whose turn is unknown, as a span with no LLM turn is online: any earlier success counts,
  and a success of its own counts for every later call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from otel_toolcall_eval.checks.destructive import VIOLATION as DESTRUCTIVE
from otel_toolcall_eval.checks.normalize import arguments_key
from otel_toolcall_eval.checks.outcome import classify_outcome
from otel_toolcall_eval.checks.repeated_failure import failure_key
from otel_toolcall_eval.checks.schema import ValidatorCache
from otel_toolcall_eval.checks.step_budget import over_budget
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.records import CallHistory, CallScore, ErrorEvidence
from otel_toolcall_eval.scoring import PolicyIndex, policy_violations

if TYPE_CHECKING:  # score.py imports this module
    from otel_toolcall_eval.offline.score import CallCheck

OVER_BUDGET = "over_budget"
REQUIRED_STEP = "missing_required_step:"  # the prefix ``checks.required_steps`` words its violations with
MAX_CALLS_LISTED = 5  # per reason
_NO_ERROR = ErrorEvidence()
_RUN_FAILED = "; the run recorded an error, so no call counts as succeeded"


class PolicyViolation(NamedTuple):
    """One broken policy: the violation as online (``missing_required_step:<tool>``, ``unconfirmed_destructive``,
    an argument rule's name, ``over_budget``), the call that broke it (1-based) and, for the budget, the budget."""

    violation: str
    tool: str | None  # None for over_budget: the case broke it, not one call
    call: int  # the call's position; for over_budget, the number of calls
    budget: int | None = None


def policy_reasons(violations: Sequence[PolicyViolation], *, run_failed: bool = False) -> list[str]:
    """One reason per (violation, tool), naming its calls: ``policy: missing_required_step:authenticate
    (send_email, call 2)``; a tool that broke the same rule on many calls lists the first few. After a run
    error an ordering rule says why its prerequisite did not count."""
    calls: dict[tuple[str, str | None], list[int]] = {}
    budget: dict[tuple[str, str | None], int | None] = {}
    for v in violations:
        key = (v.violation, v.tool)
        calls.setdefault(key, []).append(v.call)
        budget[key] = v.budget
    out = []
    for (violation, tool), positions in calls.items():
        if tool is None:
            out.append(f"policy: {violation} ({positions[0]} calls, budget {budget[(violation, tool)]})")
            continue
        listed = ", ".join(str(p) for p in positions[:MAX_CALLS_LISTED])
        more = f" and {len(positions) - MAX_CALLS_LISTED} more" if len(positions) > MAX_CALLS_LISTED else ""
        why = _RUN_FAILED if run_failed and _is_ordering(violation) else ""
        out.append(f"policy: {violation} ({tool}, call{'s' if len(positions) > 1 else ''} {listed}{more}{why})")
    return out


class PolicyChecker:
    """The config's policies indexed by tool, built once per evaluation (``build`` gives None without any)."""

    def __init__(self, config: EvalConfig, cache: ValidatorCache) -> None:
        policies = config.policies
        self.budget = policies.step_budget
        self.cache = cache
        self.max_remembered = config.limits.max_calls_per_trace
        self.input_errors = frozenset(config.errors.input_error_types)
        self.empty_results = frozenset(config.errors.empty_results)
        self.index = PolicyIndex.from_config(config)  # what ``Scorer`` builds: a rule list per tool

    @classmethod
    def build(cls, config: EvalConfig, cache: ValidatorCache) -> PolicyChecker | None:
        """None when the config has none of these policies: the common case then costs one ``is None`` per case."""
        p = config.policies
        if p.step_budget is None and not (p.required_steps or p.destructive_tools or p.argument_rules):
            return None
        return cls(config, cache)

    def check(
        self, calls: Sequence[CallCheck], batches: Sequence[int | None] | None, error: str | None
    ) -> list[PolicyViolation]:
        """Every policy violation of one run line's calls, in call order (the budget last)."""
        out: list[PolicyViolation] = []
        history = CallHistory()
        evidence = _NO_ERROR if error is None else ErrorEvidence(status_error=True, status_description=error)
        error_name = None  # what ``Scorer.score`` takes from the call's error type: a run line has none per call
        turns = _turns(batches) if batches is not None else None
        for i, c in enumerate(calls):
            name = c.name
            batch = turns[i] if turns is not None else None
            outcome, source = classify_outcome(
                parse_ok=c.parse_ok,
                tool_known=c.known,
                schema_valid=c.schema_valid,
                error=evidence,
                result=None,
                result_recorded=False,
                input_error_types=self.input_errors,
                empty_results=self.empty_results,
            )
            step = history.calls + 1
            violations: list[str] = []
            weight = policy_violations(self.index, history, name, batch, c.args, self.cache, violations)
            out += [PolicyViolation(v, name, step) for v in violations]
            args_key = arguments_key(name, c.args, c.raw)
            score = CallScore(
                name,
                step,
                outcome,
                parse_ok=c.parse_ok,
                tool_known=c.known,
                schema_valid=c.schema_valid,
                error_source=source,
                batch=batch,
                violations=violations,
                violation_weight=weight,
                arguments=c.args,
                arguments_key=args_key,
            )
            history.add(score, args_key, failure_key(args_key, outcome, source, error_name), self.max_remembered)
        if over_budget(len(calls), self.budget):  # the trace's verdict online: its last step over the budget
            out.append(PolicyViolation(OVER_BUDGET, None, len(calls), self.budget))
        return out


def _is_ordering(violation: str) -> bool:
    """A rule that needs an earlier success (``checks.required_steps``, ``checks.destructive``)."""
    return violation == DESTRUCTIVE or violation.startswith(REQUIRED_STEP)


def _turns(batches: Sequence[int | None]) -> list[int | None]:
    """Batch labels as turn numbers in the order each label first appears (None stays None)."""
    order: dict[int, int] = {}
    out: list[int | None] = []
    for b in batches:
        if b is None:
            out.append(None)
            continue
        turn = order.get(b)
        if turn is None:
            turn = order[b] = len(order)
        out.append(turn)
    return out
