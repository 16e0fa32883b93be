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
from typing import Any, Final, NamedTuple

from opentelemetry import metrics as metrics_api
from opentelemetry import trace as trace_api
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import SpanKind, TracerProvider

from otel_toolcall_eval import _sdk
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._version import __version__
from otel_toolcall_eval.engine.guard import SEVERITY, Action, Decision, Finding
from otel_toolcall_eval.online.metrics import MAX_SOURCE_LABELS, SOURCE_LABELS_TEXT, Source, source_labels, source_of

SCOPE: Final = "otel_toolcall_eval.guard"
DECISIONS: Final = "toolcall_eval.guard.decisions"
FINDINGS: Final = "toolcall_eval.guard.findings"
MAX_TOOL_LABELS: Final = 200  # distinct tool labels; past this `_other`
MAX_CACHED_FINDINGS: Final = 1024  # kinds of finding whose events are kept built (``GuardRecorder._events_of``)

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
    """Records decisions through the application's tracer and meter providers (the global ones by default).

    Performance: what does not change between decisions is made once, here or at its first use: the span's fixed
    attributes, each finding's two events (on an SDK span, bounded once by the span limits and shared: the SDK's
    ``add_event`` costs a third of a span per event), the source of a resource and agent. A decision then costs a
    dict lookup or two, and a blocked call one span with its own few attributes."""

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
        # the span's attributes every decision shares, first in the order the span lists them
        self._head: dict[str, Any] = {
            A.GEN_AI_OPERATION_NAME: A.APPLY_GUARDRAIL,
            A.GEN_AI_GUARDRAIL_COMPONENT_NAME: A.GUARD_COMPONENT,
            A.GEN_AI_GUARDRAIL_SOURCE: A.GUARD_SOURCE,
            A.GEN_AI_GUARDRAIL_POLICY_ID: policy_id,
            A.GEN_AI_GUARDRAIL_RESULT_TYPE: "action",
        }
        # (the resource, its sources by agent): replaced whole when the resource changes (the global provider set)
        self._sources: tuple[object, dict[str | None, Source]] = (None, {})
        self._events: dict[tuple[str, str, Action, str, bool], _Events] = {}
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

    def decision(self, decision: Decision, *, known: bool, prevented: bool | None = None) -> None:
        """Count ``decision`` and, when it found something (or ``record: all``), write its span. ``prevented``:
        ``decision.stops``, when the caller has it already."""
        if prevented is None:
            prevented = decision.stops
        mode = "enforce" if decision.enforced else "shadow"
        source = self._source()
        findings = decision.findings
        with self._lock:
            tool = self._tool_label(decision.tool, known)
            key = (source, tool, decision.action.value, mode, "true" if prevented else "false")
            self._decisions[key] = self._decisions.get(key, 0) + 1
            for finding in findings:
                fkey = (source, tool, finding.policy, finding.action.value, mode)
                self._findings[fkey] = self._findings.get(fkey, 0) + 1
        if findings or self.record_all:
            self._span(decision, prevented, mode)

    def _source(self) -> Source:
        """The deciding process's source, bounded: its resource's service and version, the current span's agent."""
        provider = self._tracer_provider if self._tracer_provider is not None else trace_api.get_tracer_provider()
        attributes = getattr(trace_api.get_current_span(), "attributes", None)  # a live SDK span's; none for others
        agent = attributes.get(A.GEN_AI_AGENT_NAME) if attributes else None
        resource = getattr(provider, "resource", None)
        known, sources = self._sources
        if resource is not known:
            sources = {}
            self._sources = (resource, sources)
        name = agent if isinstance(agent, str) else None
        source = sources.get(name)
        if source is None:
            source = source_of(resource, agent)
            if len(sources) < MAX_SOURCE_LABELS:  # more agents than labels: the bound's `_other` anyway
                sources[name] = source
        return self._labels.bound(source)

    def _span(self, decision: Decision, prevented: bool, mode: str) -> None:
        deciding = decision.deciding
        findings = decision.findings
        call_id = decision.call_id
        attributes: dict[str, Any] = {
            **self._head,
            A.GEN_AI_GUARDRAIL_RESULT_VALUE: decision.action.value,
            A.GEN_AI_TOOL_NAME: decision.tool,
            A.GUARD_MODE: mode,
            A.GUARD_PREVENTED: prevented,
            A.GUARD_STEP: decision.step,
        }
        if self.policy_version:
            attributes[A.GEN_AI_GUARDRAIL_POLICY_VERSION] = self.policy_version
        if deciding is not None:
            attributes[A.GEN_AI_GUARDRAIL_RESULT_REASON] = deciding.reason
            attributes[A.GUARD_POLICIES] = list(dict.fromkeys(f.policy for f in findings))
        if call_id:
            attributes[A.GEN_AI_TOOL_CALL_ID] = call_id
        if decision.approved is not None:
            attributes[A.GUARD_APPROVED] = decision.approved
        span = self._tracer.start_span(f"{A.APPLY_GUARDRAIL} {A.GUARD_COMPONENT}", kind=SpanKind.INTERNAL,
                                       attributes=attributes)  # fmt: skip
        limits = _sdk.event_limits(span)
        for finding in findings:
            events = self._events_of(finding, prevented, limits)
            if limits is not None:
                _sdk.add_bounded_event(span, A.GEN_AI_GUARDRAIL_RESULT, events.result)
            else:
                span.add_event(A.GEN_AI_GUARDRAIL_RESULT, events.result_plain)
            if call_id:
                span.add_event(A.AGENT_THREAT_DETECTION,
                               {**events.threat_plain, A.AGENT_THREAT_DETECTION_CORRELATION_ID: call_id})  # fmt: skip
            elif limits is not None:
                _sdk.add_bounded_event(span, A.AGENT_THREAT_DETECTION, events.threat)
            else:
                span.add_event(A.AGENT_THREAT_DETECTION, events.threat_plain)
        span.end()

    def _events_of(self, finding: Finding, prevented: bool, limits: Any) -> _Events:
        """A finding's two events' attributes: built at its first decision, then shared (bounded by at most
        ``MAX_CACHED_FINDINGS`` kinds of finding: the policies, their configured rules and the parse statuses)."""
        key = (finding.policy, finding.rule, finding.action, finding.reason, prevented)
        events = self._events.get(key)
        if events is not None and events.limits is limits:
            return events
        result = {
            A.GEN_AI_GUARDRAIL_COMPONENT_NAME: A.GUARD_COMPONENT,
            A.GEN_AI_GUARDRAIL_SOURCE: A.GUARD_SOURCE,
            A.GEN_AI_GUARDRAIL_RESULT_TYPE: "action",
            A.GEN_AI_GUARDRAIL_RESULT_VALUE: finding.action.value,
            A.GEN_AI_GUARDRAIL_RESULT_REASON: finding.reason,
            A.GEN_AI_GUARDRAIL_POLICY_ID: finding.policy,
            A.GEN_AI_GUARDRAIL_POLICY_RULE_ID: finding.rule,
        }
        if self.policy_version:
            result[A.GEN_AI_GUARDRAIL_POLICY_VERSION] = self.policy_version
        threat: dict[str, Any] = {
            A.AGENT_THREAT_DETECTION_RULE_ID: f"{finding.policy}/{finding.rule}",
            A.AGENT_THREAT_DETECTION_RULESET: self.ruleset,
            A.AGENT_THREAT_DETECTION_SEVERITY: SEVERITY[finding.policy],
            A.AGENT_THREAT_DETECTION_ACTION: _taken(finding.action, prevented),
        }
        bounded = limits is not None
        events = _Events(
            limits,
            result,
            threat,
            _sdk.bounded_event_attributes(limits, result) if bounded else None,
            _sdk.bounded_event_attributes(limits, threat) if bounded else None,
        )
        if len(self._events) < MAX_CACHED_FINDINGS:
            self._events[key] = events
        return events

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


class _Events(NamedTuple):
    """One kind of finding's two events: the attributes as built, and (on an SDK span) as bounded once by
    ``limits`` for every span of that provider."""

    limits: Any
    result_plain: dict[str, Any]
    threat_plain: dict[str, Any]
    result: Any
    threat: Any


def _taken(action: Action, prevented: bool) -> str:
    """The enforcement taken at the call (``agent.threat.detection.action``): a block or ask that stopped it; a
    concern that let it run (a warn, a shadow-mode block, an approved ask) is ``warn``; nothing to act on, allow."""
    if action is Action.ALLOW:
        return str(action.value)
    if prevented and action in (Action.BLOCK, Action.ASK):
        return str(action.value)
    return Action.WARN.value
