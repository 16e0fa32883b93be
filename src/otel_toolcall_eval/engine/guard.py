"""The guard's decision on a call not yet run: the engine's verdicts (``precheck``) to allow, warn, ask, block.

One finding per policy the call breaks; each policy has an action (``allow``, ``warn``, ``ask``, ``block``: the
values of ``agent.threat.detection.action``), configured in ``guard.actions``; the decision is the strongest
action among the findings. Pure: no I/O, no clock, no OpenTelemetry.

Two texts per finding, on purpose: ``reason`` is what the record carries (low-cardinality, no argument values:
``gen_ai.guardrail.result.reason`` MUST NOT contain user content), ``detail`` is what the agent is told (a schema
error quotes the offending value, which is what lets the model correct its call).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

from otel_toolcall_eval.engine.precheck import PreCheck
from otel_toolcall_eval.policy import Policy


class Action(str, Enum):
    """An enforcement action, strongest last (the values of ``agent.threat.detection.action``)."""

    ALLOW = "allow"
    WARN = "warn"
    ASK = "ask"  # not run until approved: a destructive tool without its confirmation, by default
    BLOCK = "block"


_RANK: Final = {Action.ALLOW: 0, Action.WARN: 1, Action.ASK: 2, Action.BLOCK: 3}

# the policies the guard enforces, named as the config names them (``policies.*``) or as the score they mirror
POLICIES: Final = (
    "must_not_call",
    "required_steps",
    "destructive_tools",
    "argument_rules",
    "undeclared_arguments",
    "step_budget",
    "unknown_tool",
    "schema",
    "repeated_failure",
    "duplicate",
)
DEFAULT_ACTIONS: Final[dict[str, Action]] = {
    "must_not_call": Action.BLOCK,
    "required_steps": Action.BLOCK,
    "destructive_tools": Action.ASK,
    "argument_rules": Action.BLOCK,
    "undeclared_arguments": Action.BLOCK,  # a finding only with ``policies.undeclared_arguments: fail``
    "step_budget": Action.BLOCK,
    "unknown_tool": Action.BLOCK,
    "schema": Action.BLOCK,
    "repeated_failure": Action.BLOCK,
    "duplicate": Action.WARN,  # the same call again may be legitimate (polling); the processor scores it
}
# ``agent.threat.detection.severity`` of each policy: a property of the rule, not of the action taken
SEVERITY: Final[dict[str, str]] = {
    "must_not_call": "critical",
    "required_steps": "high",
    "destructive_tools": "high",
    "argument_rules": "high",
    "undeclared_arguments": "medium",
    "step_budget": "medium",
    "unknown_tool": "medium",
    "schema": "medium",
    "repeated_failure": "low",
    "duplicate": "low",
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One broken policy: ``rule`` is the violation the processor writes (e.g. ``missing_required_step:login``)."""

    policy: str
    rule: str
    action: Action
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class Decision:
    """The guard's answer for one call. ``enforced`` False: shadow mode, the call runs whatever the action."""

    tool: str
    action: Action
    findings: tuple[Finding, ...]
    step: int
    enforced: bool = True
    call_id: str | None = None
    approved: bool | None = None  # an ``ask`` the approval hook answered

    @property
    def stops(self) -> bool:
        """The call must not run: an enforced ``block``, or an enforced ``ask`` nobody approved."""
        if not self.enforced:
            return False
        return self.action is Action.BLOCK or (self.action is Action.ASK and self.approved is not True)

    @property
    def policy(self) -> str | None:
        """The policy of the finding that decided (the first with the strongest action)."""
        deciding = self.deciding
        return None if deciding is None else deciding.policy

    @property
    def deciding(self) -> Finding | None:
        for finding in self.findings:
            if finding.action is self.action:
                return finding
        return None

    @property
    def message(self) -> str:
        """What the agent is told when the call is stopped: an answer it can act on."""
        verb = "needs approval" if self.action is Action.ASK else "was blocked"
        details = "; ".join(f.detail for f in self.findings if f.action is not Action.ALLOW)
        return f"The call of tool '{self.tool}' {verb} by the tool-call guard: {details}"


def findings_of(pre: PreCheck, policy: Policy) -> list[tuple[str, str, str, str]]:
    """(policy, rule, reason, detail) for each policy the call breaks, in the engine's order of checks."""
    name = pre.name
    out: list[tuple[str, str, str, str]] = []
    if pre.tool_known is False:
        out.append(("unknown_tool", "unknown_tool", "the tool is neither offered nor configured",
                    f"there is no tool named '{name}'"))  # fmt: skip
    if pre.parse_ok is False:
        rule = f"parse:{pre.parse_status.value}"
        out.append(("schema", rule, f"the arguments are not a JSON object ({pre.parse_status.value})",
                    "the arguments must be a JSON object"))  # fmt: skip
    if pre.schema_valid is False:
        errors = "; ".join(pre.schema_errors)
        out.append(("schema", "schema_invalid", "the arguments do not match the tool's schema",
                    f"the arguments do not match the tool's schema: {errors}"))  # fmt: skip
    if pre.must_not_call:
        out.append(("must_not_call", pre.must_not_call, "the tool is on policies.must_not_call",
                    f"'{name}' must never be called"))  # fmt: skip
    if pre.undeclared_violation:
        names = ", ".join(pre.undeclared_arguments)
        out.append(("undeclared_arguments", pre.undeclared_violation, "arguments the schema does not declare",
                    f"arguments not in the tool's schema: {names}"))  # fmt: skip
    for missing in pre.missing_steps:
        step = missing.split(":", 1)[1] if ":" in missing else missing
        out.append(("required_steps", missing, f"{step} must succeed in an earlier turn first",
                    f"'{step}' must succeed in an earlier turn before '{name}'"))  # fmt: skip
    if pre.unconfirmed_destructive:
        confirm = [c for d in policy.destructive_tools if d.tool == name for c in d.confirm_with]
        either = " or ".join(f"'{c}'" for c in dict.fromkeys(confirm))
        out.append(("destructive_tools", pre.unconfirmed_destructive, "destructive tool without its confirmation",
                    f"'{name}' is destructive: {either} must succeed in an earlier turn first"))  # fmt: skip
    for rule in pre.argument_rules:
        out.append(("argument_rules", rule, f"the arguments break the argument rule {rule}",
                    f"the arguments break the rule '{rule}'"))  # fmt: skip
    if pre.over_budget:
        out.append(("step_budget", "step_budget", "the trace's step budget is spent",
                    f"call {pre.step} is over the step budget of {policy.step_budget} tool calls"))  # fmt: skip
    if pre.failed_before:
        out.append(("repeated_failure", "repeated_failure", "the same call failed earlier in the trace",
                    "the same call failed earlier; change the arguments or the approach"))  # fmt: skip
    if pre.duplicate:  # with a failure repeated too: the processor scores both
        out.append(("duplicate", "duplicate", "the same call was made earlier in the trace",
                    "the same call was made earlier in this run"))  # fmt: skip
    return out


def decide(pre: PreCheck, policy: Policy, actions: dict[str, Action], *, enforced: bool = True,
           call_id: str | None = None) -> Decision:  # fmt: skip
    """The decision for ``pre``: a finding per broken policy, the strongest configured action."""
    found = findings_of(pre, policy)
    if not found:  # the usual call: nothing to weigh
        return Decision(pre.name, Action.ALLOW, (), pre.step, enforced, call_id)
    findings = tuple(
        Finding(p, rule, actions.get(p, DEFAULT_ACTIONS[p]), reason, detail) for p, rule, reason, detail in found
    )
    action = Action.ALLOW
    for finding in findings:
        if _RANK[finding.action] > _RANK[action]:
            action = finding.action
    return Decision(pre.name, action, findings, pre.step, enforced, call_id)
