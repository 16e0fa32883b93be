"""How a guard decision is recorded: an ``apply_guardrail`` span with the GenAI guardrail convention's attributes,
its findings as ``gen_ai.guardrail.result`` and ``agent.threat.detection`` events, and two counters.

Why a span. The convention's ``gen_ai.guardrail.result`` event is what an in-process guardrail emits; a call the
guard stops has no tool span to carry it, and the evaluation side (a span processor, the scoring service) reads
spans, not logs. ``agent.threat.detection``'s own note allows "a separately-scoped enforcement span owned by the
detection layer": this is that span, named and attributed as the convention's ``apply_guardrail`` operation, kind
INTERNAL (the guard is in-process, not a remote client), a child of whatever is current (the agent run, or the tool
span when a framework calls the hook inside it). Its events are span events, which every trace backend shows.

What is recorded is what the guard decided (``gen_ai.guardrail.result.value`` = ``block`` in shadow mode too) and
what was done about it: ``agent.threat.detection.action`` is the enforcement taken at the call, so a shadow-mode
``block`` records ``warn`` (the call proceeded, the concern is recorded). Argument values are never recorded.

Counters are observable, read at collection (``metrics`` says why: ``Counter.add`` costs more than the decision).
They carry the deciding process's source as the processor's metrics do (``service.name`` and ``service.version``
of the tracer provider's resource, ``gen_ai.agent.name`` of the span current at the call, when it names one),
through the same bound (``online.metrics.SourceLabels``), so the guard's rates compare with the scores by
service, agent and version.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, Final

from opentelemetry import metrics as metrics_api
from opentelemetry import trace as trace_api
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import SpanKind, TracerProvider

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._version import __version__
from otel_toolcall_eval.engine.guard import SEVERITY, Action, Decision
from otel_toolcall_eval.online.metrics import SOURCE_LABELS_TEXT, Source, source_labels, source_of

SCOPE: Final = "otel_toolcall_eval.guard"
DECISIONS: Final = "toolcall_eval.guard.decisions"
FINDINGS: Final = "toolcall_eval.guard.findings"
MAX_TOOL_LABELS: Final = 200  # distinct tool labels; past this `_other`

# (name, kind, labels, Prometheus name, meaning): the metric table of docs/guardrail.md
GUARD_METRICS: Final = (
    (
        DECISIONS,
        "counter",
        f"{SOURCE_LABELS_TEXT}, `tool`, `decision`, `mode`, `prevented`",
        "toolcall_eval_guard_decisions_total",
        "one per call the guard decided: `decision` allow|warn|ask|block, `mode` enforce|shadow, `prevented` "
        "true when the call did not run",
    ),
    (
        FINDINGS,
        "counter",
        f"{SOURCE_LABELS_TEXT}, `tool`, `policy`, `action`, `mode`",
        "toolcall_eval_guard_findings_total",
        "one per broken policy of a decided call (a call can break several)",
    ),
)


class GuardRecorder:
    """Records decisions through the application's tracer and meter providers (the global ones by default)."""

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        *,
        record_all: bool = False,
        policy_id: str = "toolcall-eval",
        policy_version: str = "",
        known_tools: Iterable[str] = (),
    ) -> None:
        provider = tracer_provider if tracer_provider is not None else trace_api.get_tracer_provider()
        self._tracer = provider.get_tracer(SCOPE, __version__)
        self._tracer_provider = tracer_provider  # None: the global one, read per decision (it may be set later)
        meters = meter_provider if meter_provider is not None else metrics_api.get_meter_provider()
        meter = meters.get_meter(SCOPE, __version__)
        self.record_all = record_all
        self.policy_id = policy_id
        self.policy_version = policy_version
        self.ruleset = f"otel-toolcall-eval@{policy_version or __version__}"
        self._known = set(known_tools)
        self._lock = threading.Lock()
        self._labels = source_labels(meters)
        self._decisions: dict[tuple[Source, str, str, str, str], int] = {}
        self._findings: dict[tuple[Source, str, str, str, str], int] = {}
        meter.create_observable_counter(
            DECISIONS, [self._observe_decisions], unit="{call}", description=GUARD_METRICS[0][4]
        )
        meter.create_observable_counter(
            FINDINGS, [self._observe_findings], unit="{finding}", description=GUARD_METRICS[1][4]
        )

    def _tool_label(self, tool: str, known: bool) -> str:
        """Bounded: a name the model invented is ``_unknown``; past ``MAX_TOOL_LABELS`` names, ``_other``."""
        if not known:
            return "_unknown"
        if tool in self._known or len(self._known) < MAX_TOOL_LABELS:
            self._known.add(tool)
            return tool
        return "_other"

    def decision(self, decision: Decision, *, known: bool) -> None:
        """Count ``decision`` and, when it found something (or ``record: all``), write its span."""
        prevented = decision.stops
        mode = "enforce" if decision.enforced else "shadow"
        source = self._source()
        with self._lock:
            tool = self._tool_label(decision.tool, known)
            key = (source, tool, decision.action.value, mode, "true" if prevented else "false")
            self._decisions[key] = self._decisions.get(key, 0) + 1
            for finding in decision.findings:
                fkey = (source, tool, finding.policy, finding.action.value, mode)
                self._findings[fkey] = self._findings.get(fkey, 0) + 1
        if decision.findings or self.record_all:
            self._span(decision, prevented)

    def _source(self) -> Source:
        """The deciding process's source, bounded: its resource's service and version, the current span's agent."""
        provider = self._tracer_provider if self._tracer_provider is not None else trace_api.get_tracer_provider()
        attributes = getattr(trace_api.get_current_span(), "attributes", None)  # a live SDK span's; none for others
        agent = attributes.get(A.GEN_AI_AGENT_NAME) if attributes else None
        return self._labels.bound(source_of(getattr(provider, "resource", None), agent))

    def _span(self, decision: Decision, prevented: bool) -> None:
        deciding = decision.deciding
        attributes: dict[str, Any] = {
            A.GEN_AI_OPERATION_NAME: A.APPLY_GUARDRAIL,
            A.GEN_AI_GUARDRAIL_COMPONENT_NAME: A.GUARD_COMPONENT,
            A.GEN_AI_GUARDRAIL_SOURCE: A.GUARD_SOURCE,
            A.GEN_AI_GUARDRAIL_POLICY_ID: self.policy_id,
            A.GEN_AI_GUARDRAIL_RESULT_TYPE: "action",
            A.GEN_AI_GUARDRAIL_RESULT_VALUE: decision.action.value,
            A.GEN_AI_TOOL_NAME: decision.tool,
            A.GUARD_MODE: "enforce" if decision.enforced else "shadow",
            A.GUARD_PREVENTED: prevented,
            A.GUARD_STEP: decision.step,
        }
        if self.policy_version:
            attributes[A.GEN_AI_GUARDRAIL_POLICY_VERSION] = self.policy_version
        if deciding is not None:
            attributes[A.GEN_AI_GUARDRAIL_RESULT_REASON] = deciding.reason
            attributes[A.GUARD_POLICIES] = list(dict.fromkeys(f.policy for f in decision.findings))
        if decision.call_id:
            attributes[A.GEN_AI_TOOL_CALL_ID] = decision.call_id
        if decision.approved is not None:
            attributes[A.GUARD_APPROVED] = decision.approved
        span = self._tracer.start_span(f"{A.APPLY_GUARDRAIL} {A.GUARD_COMPONENT}", kind=SpanKind.INTERNAL,
                                       attributes=attributes)  # fmt: skip
        for finding in decision.findings:
            common = {
                A.GEN_AI_GUARDRAIL_POLICY_ID: finding.policy,
                A.GEN_AI_GUARDRAIL_POLICY_RULE_ID: finding.rule,
            }
            result = {
                A.GEN_AI_GUARDRAIL_COMPONENT_NAME: A.GUARD_COMPONENT,
                A.GEN_AI_GUARDRAIL_SOURCE: A.GUARD_SOURCE,
                A.GEN_AI_GUARDRAIL_RESULT_TYPE: "action",
                A.GEN_AI_GUARDRAIL_RESULT_VALUE: finding.action.value,
                A.GEN_AI_GUARDRAIL_RESULT_REASON: finding.reason,
                **common,
            }
            if self.policy_version:
                result[A.GEN_AI_GUARDRAIL_POLICY_VERSION] = self.policy_version
            span.add_event(A.GEN_AI_GUARDRAIL_RESULT, result)
            threat: dict[str, Any] = {
                A.AGENT_THREAT_DETECTION_RULE_ID: f"{finding.policy}/{finding.rule}",
                A.AGENT_THREAT_DETECTION_RULESET: self.ruleset,
                A.AGENT_THREAT_DETECTION_SEVERITY: SEVERITY[finding.policy],
                A.AGENT_THREAT_DETECTION_ACTION: _taken(finding.action, prevented),
            }
            if decision.call_id:
                threat[A.AGENT_THREAT_DETECTION_CORRELATION_ID] = decision.call_id
            span.add_event(A.AGENT_THREAT_DETECTION, threat)
        span.end()

    def _observe_decisions(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            items = list(self._decisions.items())
        with_source = self._labels.with_source
        for (source, tool, decision, mode, prevented), value in items:
            labels = {"tool": tool, "decision": decision, "mode": mode, "prevented": prevented}
            yield Observation(value, with_source(source, labels))

    def _observe_findings(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            items = list(self._findings.items())
        with_source = self._labels.with_source
        for (source, tool, policy, action, mode), value in items:
            yield Observation(
                value, with_source(source, {"tool": tool, "policy": policy, "action": action, "mode": mode})
            )


def _taken(action: Action, prevented: bool) -> str:
    """The enforcement taken at the call (``agent.threat.detection.action``): a block or ask that stopped it; a
    concern that let it run (a warn, a shadow-mode block, an approved ask) is ``warn``; nothing to act on, allow."""
    if action is Action.ALLOW:
        return str(action.value)
    if prevented and action in (Action.BLOCK, Action.ASK):
        return str(action.value)
    return Action.WARN.value
