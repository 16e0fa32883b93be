"""The processor's own metrics, through the application's MeterProvider: the primary source for alerting.

Names follow OTel metric naming; the README's metric table lists the Prometheus name each becomes.
Tool names are bounded as a label: names the model invented (unknown tools) become ``_unknown`` and
distinct names past ``MAX_TOOL_LABELS`` become ``_other``.
"""

from __future__ import annotations

import threading
from typing import Final, NamedTuple

from opentelemetry import metrics as metrics_api
from opentelemetry.metrics import MeterProvider

from otel_toolcall_eval import __version__
from otel_toolcall_eval.records import CallScore, TraceVerdict

MAX_TOOL_LABELS: Final = 200


class MetricDoc(NamedTuple):
    name: str
    kind: str
    unit: str
    labels: str
    prometheus: str
    meaning: str


TOOL_CALLS: Final = "toolcall_eval.tool_calls"
VIOLATIONS: Final = "toolcall_eval.violations"
TRACES: Final = "toolcall_eval.traces"
TRACE_TOOL_CALLS: Final = "toolcall_eval.trace.tool_calls"
INTERNAL_ERRORS: Final = "toolcall_eval.internal_errors"
STATE_DROPPED: Final = "toolcall_eval.state.dropped"

METRICS: Final[tuple[MetricDoc, ...]] = (
    MetricDoc(
        TOOL_CALLS,
        "counter",
        "{call}",
        "`tool`, `outcome`",
        "toolcall_eval_tool_calls_total",
        "tool calls scored, by tool and outcome",
    ),
    MetricDoc(
        VIOLATIONS,
        "counter",
        "{violation}",
        "`tool`, `violation`",
        "toolcall_eval_violations_total",
        "policy violations and trajectory findings (`duplicate`, `repeated_failure`, `over_budget`, `schema_invalid`, `parse_failed`, `unknown_tool`, policy kinds)",
    ),
    MetricDoc(
        TRACES,
        "counter",
        "{trace}",
        "`composite_ok`, `finalized_by`",
        "toolcall_eval_traces_total",
        "traces with a verdict; `finalized_by` is `root`, `expired`, `evicted` or `shutdown`",
    ),
    MetricDoc(
        TRACE_TOOL_CALLS,
        "histogram",
        "{call}",
        "`composite_ok`",
        "toolcall_eval_trace_tool_calls_bucket",
        "tool calls per finished trace",
    ),
    MetricDoc(
        INTERNAL_ERRORS,
        "counter",
        "{error}",
        "`stage`",
        "toolcall_eval_internal_errors_total",
        "evaluation failures (the span was forwarded unscored)",
    ),
    MetricDoc(
        STATE_DROPPED,
        "counter",
        "{trace}",
        "`reason`",
        "toolcall_eval_state_dropped_total",
        "per-trace state dropped before its root ended (`evicted` by the LRU bound, `expired` by the TTL)",
    ),
)


class EvalMetrics:
    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        meter = (meter_provider or metrics_api.get_meter_provider()).get_meter("otel_toolcall_eval", __version__)
        self._calls = meter.create_counter(TOOL_CALLS, unit="{call}", description=METRICS[0].meaning)
        self._violations = meter.create_counter(VIOLATIONS, unit="{violation}", description=METRICS[1].meaning)
        self._traces = meter.create_counter(TRACES, unit="{trace}", description=METRICS[2].meaning)
        self._per_trace = meter.create_histogram(
            TRACE_TOOL_CALLS,
            unit="{call}",
            description=METRICS[3].meaning,
            explicit_bucket_boundaries_advisory=[0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 100],
        )
        self._errors = meter.create_counter(INTERNAL_ERRORS, unit="{error}", description=METRICS[4].meaning)
        self._dropped = meter.create_counter(STATE_DROPPED, unit="{trace}", description=METRICS[5].meaning)
        self._tools: set[str] = set()
        self._lock = threading.Lock()

    def _tool_label(self, score: CallScore) -> str:
        if score.tool_known is False:
            return "_unknown"
        name = score.name
        if name in self._tools:
            return name
        with self._lock:
            if len(self._tools) >= MAX_TOOL_LABELS:
                return "_other"
            self._tools.add(name)
        return name

    def record_call(self, score: CallScore) -> None:
        tool = self._tool_label(score)
        self._calls.add(1, {"tool": tool, "outcome": score.outcome.value})
        findings = [v.split(":", 1)[0] for v in score.violations]
        if score.duplicate:
            findings.append("duplicate")
        if score.repeated_failure:
            findings.append("repeated_failure")
        if score.over_budget:
            findings.append("over_budget")
        if score.schema_valid is False:
            findings.append("schema_invalid")
        if score.parse_ok is False:
            findings.append("parse_failed")
        if score.tool_known is False:
            findings.append("unknown_tool")
        for kind in findings:
            self._violations.add(1, {"tool": tool, "violation": kind})

    def record_trace(self, verdict: TraceVerdict, finalized_by: str) -> None:
        ok = "true" if verdict.composite_ok else "false"
        self._traces.add(1, {"composite_ok": ok, "finalized_by": finalized_by})
        self._per_trace.record(verdict.tool_calls, {"composite_ok": ok})

    def record_error(self, stage: str) -> None:
        self._errors.add(1, {"stage": stage})

    def record_dropped(self, reason: str) -> None:
        self._dropped.add(1, {"reason": reason})
