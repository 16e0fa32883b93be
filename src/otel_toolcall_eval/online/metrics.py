"""The processor's own metrics, through the application's MeterProvider: the primary source for alerting.

Names follow OTel metric naming; the README's metric table lists the Prometheus name each becomes.
Tool names are bounded as a label: names the model invented (unknown tools) become ``_unknown`` and
distinct names past ``MAX_TOOL_LABELS`` become ``_other``.

The metrics of a trace and of its calls (counts, findings, recoveries, cost, latency, the tool list) carry the
trace's source (``SOURCE_ATTRIBUTES``: ``service.name`` and ``service.version`` from the resource,
``gen_ai.agent.name`` from the first span of the trace that carries it), so one scorer in front of several agents
reports each of them, and a new version can be compared with the previous one. The agent's name is usually on the
trace's root (``invoke_agent``), which ends after its tool spans: a trace's calls (and their durations) are
therefore tallied on the trace (``TraceCounts``, a few distinct keys) and counted with the source when the trace's
verdict is (``record_trace``). Distinct sources past ``MAX_SOURCE_LABELS`` become ``_other`` (all three values),
one bound per meter (``SourceLabels``, which sessions and the guard use too); every use of an overflow value is
counted in ``toolcall_eval.label_overflow``.

The counters are observable: the application thread only increments an in-process tally (a dict update under
a lock, ~0.2 us), and the SDK reads the totals when its reader collects. A synchronous ``Counter.add`` costs
3-7 us on opentelemetry-sdk 1.45, more than the rest of a span's evaluation. The per-trace histogram stays
synchronous (one record per trace).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Final, NamedTuple, TypeVar

from mypy_extensions import mypyc_attr
from opentelemetry import metrics as metrics_api
from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation

from otel_toolcall_eval import _fork
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._version import __version__
from otel_toolcall_eval.records import CallScore, Outcome, ParseStatus, TraceVerdict

_T = TypeVar("_T")
MAX_TOOL_LABELS: Final = 200
METER: Final = "otel_toolcall_eval"  # the processor's meter (and its sessions'): one set of instruments per meter


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
QUEUE_WAITS: Final = "toolcall_eval.queue.waits"
QUEUE_SIZE: Final = "toolcall_eval.queue.size"
COVERAGE_CALLS: Final = "toolcall_eval.coverage.calls"
COVERAGE_MISSING: Final = "toolcall_eval.coverage.missing"
MISSING_PARTS: Final = ("arguments", "schema", "result")  # the ``missing`` label's values
LATE_SPANS: Final = "toolcall_eval.late_spans"
COVERAGE_SUSPECT: Final = "toolcall_eval.coverage.suspect"
# a scope whose first calls with a schema verdict are all invalid with shared undeclared keys, from this many on
SUSPECT_MIN_CALLS: Final = 3
MAX_SCOPE_LABELS: Final = 200  # instrumentation scopes as a label; past this `_other`
# sessions (``otel_toolcall_eval.online.sessions``)
SESSIONS: Final = "toolcall_eval.sessions"
SESSION_TURNS: Final = "toolcall_eval.session.turns"
SESSION_DROPPED: Final = "toolcall_eval.session.dropped"

# --- cost, latency, recovery and the tool list (issue 18; trace_stats) ---------------------------------------
TRACE_MODEL_CALLS: Final = "toolcall_eval.trace.model_calls"
TRACE_TOKENS: Final = "toolcall_eval.trace.tokens"
TRACE_COST: Final = "toolcall_eval.trace.cost"
TRACE_TOOL_LATENCY: Final = "toolcall_eval.trace.tool_latency"
TRACE_TOOL_ERROR_RATE: Final = "toolcall_eval.trace.tool_error_rate"
TOOL_LATENCY: Final = "toolcall_eval.tool.latency"
RECOVERIES: Final = "toolcall_eval.recoveries"
RECOVERY_UNCLASSIFIED: Final = "toolcall_eval.recovery.unclassified"
LATE_OUTCOME_UNREAD: Final = "toolcall_eval.late_outcome.unread"
TOOL_LIST_CHANGES: Final = "toolcall_eval.tool_list.changes"
MAX_SOURCE_LABELS: Final = 200  # services (with agents and versions) as labels; past this `_other`
# --- the trace's source as metric attributes (issue 30) -------------------------------------------------------
SOURCE_ATTRIBUTES: Final = (A.SERVICE_NAME, A.GEN_AI_AGENT_NAME, A.SERVICE_VERSION)  # the order of a ``Source``
Source = tuple[str, str, str]  # (service.name, gen_ai.agent.name, service.version); "" when not recorded
NO_SOURCE: Final[Source] = ("", "", "")
OTHER: Final = "_other"
OTHER_SOURCE: Final[Source] = (OTHER, OTHER, OTHER)
MAX_LABEL_LENGTH: Final = 128  # a source value is cut to this many characters
MAX_TRACE_KEYS: Final = 64  # distinct call keys a trace tallies before its verdict; past this counted at once
# distinct (call key, findings) entries kept once each and shared by every trace that tallies them (``record_call``);
# past this an entry is a trace's own (still counted right: a key is compared by value)
MAX_SHARED_ENTRIES: Final = 4096
# a trace's first calls are listed (a reference each: 120 bytes for five against a dict's 224); past this many its
# calls are tallied in a dict of (entry -> calls), at most ``MAX_TRACE_KEYS`` keys
MAX_LISTED_CALLS: Final = 16
# a call's key (tool label, outcome, convention, three coverage flags) and its findings, as a trace tallies it: a
# pair, typed as a tuple of any length on purpose: mypyc keeps a fixed-length tuple unboxed and boxes a new one each
# time it stores it, so the compiled build's traces would each hold a copy of the entry they share (``_shared``)
Entry = tuple[Any, ...]
LABEL_OVERFLOW: Final = "toolcall_eval.label_overflow"
OVERFLOW_LABELS: Final = ("tool", "source", "scope")  # the ``label`` values of ``toolcall_eval.label_overflow``
SOURCE_LABELS_TEXT: Final = "`service.name`, `gen_ai.agent.name`, `service.version`"  # as the metric table shows them
_LATENCY_BUCKETS: Final = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]

TRACE_STATS_METRICS: Final[tuple[MetricDoc, ...]] = (
    MetricDoc(
        TRACE_MODEL_CALLS,
        "histogram",
        "{call}",
        SOURCE_LABELS_TEXT,
        "toolcall_eval_trace_model_calls_bucket",
        "model calls per finished trace (traces with at least one)",
    ),
    MetricDoc(
        TRACE_TOKENS,
        "histogram",
        "{token}",
        f"{SOURCE_LABELS_TEXT}, `type`",
        "toolcall_eval_trace_tokens_bucket",
        "tokens per finished trace, by `type` (`input` or `output`)",
    ),
    MetricDoc(
        TRACE_COST,
        "histogram",
        "{cost}",
        f"{SOURCE_LABELS_TEXT}, `currency`",
        "toolcall_eval_trace_cost_bucket",
        "cost per finished trace from `pricing.models` (only with a price table)",
    ),
    MetricDoc(
        TRACE_TOOL_LATENCY,
        "histogram",
        "s",
        SOURCE_LABELS_TEXT,
        "toolcall_eval_trace_tool_latency_seconds_bucket",
        "tool time per finished trace (tool spans' durations summed)",
    ),
    MetricDoc(
        TRACE_TOOL_ERROR_RATE,
        "histogram",
        "1",
        SOURCE_LABELS_TEXT,
        "toolcall_eval_trace_tool_error_rate_bucket",
        "share of a finished trace's tool calls that did not succeed",
    ),
    MetricDoc(
        TOOL_LATENCY,
        "histogram",
        "s",
        f"{SOURCE_LABELS_TEXT}, `tool`",
        "toolcall_eval_tool_latency_seconds_bucket",
        "duration of each tool call, by its trace's source (recorded with the trace's verdict, as the calls are)",
    ),
    MetricDoc(
        RECOVERIES,
        "counter",
        "{call}",
        f"{SOURCE_LABELS_TEXT}, `tool`, `class`",
        "toolcall_eval_recoveries_total",
        "failed calls by what the agent did next: `corrected_retry`, `switched_tool`, `handed_back`, `repeated`, "
        "`carried_on` (counted when the trace finishes)",
    ),
    MetricDoc(
        RECOVERY_UNCLASSIFIED,
        "counter",
        "{span}",
        "`reason`",
        "toolcall_eval_recovery_unclassified_total",
        "failed tool spans forwarded without `recovery.class` because a bound released them before the class was "
        "known: `max_held_spans`, `max_held_spans_per_trace`, `max_hold_seconds`, `flush` or `shutdown` (the root "
        "still counts their class)",
    ),
    MetricDoc(
        LATE_OUTCOME_UNREAD,
        "counter",
        "{span}",
        "`reason`",
        "toolcall_eval_late_outcome_unread_total",
        "tool spans that read as a success on an instrumentation that cannot record a reply's error flag, forwarded "
        "as read (`success`, counted so) before the reply the next model request carries was read into them: a "
        "bound (`max_held_spans`, `max_held_spans_per_trace`, `max_hold_seconds`), a `flush`, `shutdown`, or the "
        "trace's end with no such reply (`trace_end`: its root, or its state let go of: evicted, expired, at "
        "shutdown); a reply read later still counts on the root (`trace.late_outcome.*`)",
    ),
    MetricDoc(
        TOOL_LIST_CHANGES,
        "counter",
        "{trace}",
        SOURCE_LABELS_TEXT,
        "toolcall_eval_tool_list_changes_total",
        "traces whose tool-list fingerprint differs from the previous trace's of the same service and agent "
        "(`gen_ai.agent.name`), by the trace's source (its version: the one whose list changed): a tool an MCP "
        "server stopped advertising shows here",
    ),
)


class _StatsInstruments:
    """The instruments of ``TRACE_STATS_METRICS`` (one set per meter, beside ``_Instruments``)."""

    def __init__(self, meter: Meter) -> None:
        docs = {d.name: d for d in TRACE_STATS_METRICS}
        self.recoveries = _BySource(("tool", "class"))
        self.tool_list_changes = _BySource(())
        self.unclassified = _Tally(("reason",))
        self.unread = _Tally(("reason",))
        for name, tally in (
            (RECOVERIES, self.recoveries),
            (TOOL_LIST_CHANGES, self.tool_list_changes),
            (RECOVERY_UNCLASSIFIED, self.unclassified),
            (LATE_OUTCOME_UNREAD, self.unread),
        ):
            doc = docs[name]
            meter.create_observable_counter(doc.name, callbacks=[tally.observe], unit=doc.unit, description=doc.meaning)

        def histogram(name: str, buckets: list[float]) -> Any:
            doc = docs[name]
            return meter.create_histogram(
                name, unit=doc.unit, description=doc.meaning, explicit_bucket_boundaries_advisory=buckets
            )

        self.model_calls = histogram(TRACE_MODEL_CALLS, [0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 100])
        self.tokens = histogram(TRACE_TOKENS, [100, 300, 1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6, 3e6])
        self.cost = histogram(TRACE_COST, [0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10])
        self.trace_latency = histogram(TRACE_TOOL_LATENCY, _LATENCY_BUCKETS)
        self.error_rate = histogram(TRACE_TOOL_ERROR_RATE, [0, 0.1, 0.25, 0.5, 0.75, 0.99, 1])
        self.tool_latency = histogram(TOOL_LATENCY, _LATENCY_BUCKETS)


METRICS: Final[tuple[MetricDoc, ...]] = (
    MetricDoc(
        TOOL_CALLS,
        "counter",
        "{call}",
        f"{SOURCE_LABELS_TEXT}, `tool`, `outcome`",
        "toolcall_eval_tool_calls_total",
        "tool calls scored, by the trace's source, tool and outcome (counted when the trace's verdict is; a call "
        "after it at once)",
    ),
    MetricDoc(
        VIOLATIONS,
        "counter",
        "{violation}",
        f"{SOURCE_LABELS_TEXT}, `tool`, `violation`",
        "toolcall_eval_violations_total",
        "policy violations and trajectory findings (`duplicate`, `repeated_failure`, `over_budget`, `schema_invalid`, `parse_failed`, `unknown_tool`, policy kinds); a call validated against a schema that arrived after it (`trace.late_schema.*`) counts with its trace's verdict",
    ),
    MetricDoc(
        TRACES,
        "counter",
        "{trace}",
        f"{SOURCE_LABELS_TEXT}, `composite_ok`, `finalized_by`",
        "toolcall_eval_traces_total",
        "traces with a verdict, by source; `finalized_by` is `root`, `expired`, `evicted`, `shutdown` or `segment` (seen only as "
        "remote-parented parts whose true root never came, `serve.remote_parents: segment`)",
    ),
    MetricDoc(
        TRACE_TOOL_CALLS,
        "histogram",
        "{call}",
        f"{SOURCE_LABELS_TEXT}, `composite_ok`",
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
    MetricDoc(
        QUEUE_WAITS,
        "counter",
        "{span}",
        "-",
        "toolcall_eval_queue_waits_total",
        "`evaluation.mode: background`: spans whose `on_end` waited for room in the full queue (back-pressure)",
    ),
    MetricDoc(
        QUEUE_SIZE,
        "gauge",
        "{span}",
        "-",
        "toolcall_eval_queue_size",
        "spans waiting in the background evaluation queue when the metrics were collected (bounded by `evaluation.max_queue_size`)",
    ),
    MetricDoc(
        COVERAGE_CALLS,
        "counter",
        "{call}",
        f"{SOURCE_LABELS_TEXT}, `convention`",
        "toolcall_eval_coverage_calls_total",
        "tool calls scored, by the trace's source and the convention that recognised them: the denominator of the "
        "coverage ratios",
    ),
    MetricDoc(
        COVERAGE_MISSING,
        "counter",
        "{call}",
        f"{SOURCE_LABELS_TEXT}, `convention`, `missing`",
        "toolcall_eval_coverage_missing_total",
        "tool calls scored without evidence a check needs: `missing` is `arguments` (none recorded: no parse or "
        "schema verdict), `schema` (no schema known for a tool not known to be missing: no schema verdict) or "
        "`result` (a successful "
        "call with no recorded result); `otel-toolcall-eval doctor` names the setting that records it",
    ),
    MetricDoc(
        LATE_SPANS,
        "counter",
        "{span}",
        "-",
        "toolcall_eval_late_spans_total",
        "tool and LLM spans that arrived after their trace's verdict was written (after its root and its "
        "`serve.root_grace_seconds`): scored per call (tool spans carry `toolcall_eval.late`), not in the verdict, "
        "no second trace; a steady count says the window is shorter than the exporters' delay",
    ),
    *TRACE_STATS_METRICS,
    # sessions
    MetricDoc(
        SESSIONS,
        "counter",
        "{session}",
        f"{SOURCE_LABELS_TEXT}, `outcome`, `finalized_by`",
        "toolcall_eval_sessions_total",
        "session verdicts: `outcome` `pass` or `fail`; `finalized_by` `idle`, `evicted`, `flush` or `shutdown`",
    ),
    MetricDoc(
        SESSION_TURNS,
        "histogram",
        "{turn}",
        f"{SOURCE_LABELS_TEXT}, `outcome`",
        "toolcall_eval_session_turns_bucket",
        "turns (traces) per finished session; sessions are by the source of their last turn with a verdict",
    ),
    MetricDoc(
        COVERAGE_SUSPECT,
        "counter",
        "{call}",
        "`convention`, `scope`, `reason`",
        "toolcall_eval_coverage_suspect_total",
        "tool calls that look misread rather than wrong, by the instrumentation scope that wrote them: `reason` is "
        "`same_undeclared_keys` (every call of the scope with a schema verdict so far, at least three, was invalid "
        "with the same undeclared argument keys: a wrapper the shape table does not strip), `no_tool_name` or "
        "`position_unmatched` (a call of a scope matched by position, requested before its conversation's history "
        "broke: trimmed or rewritten, so its reply cannot be matched; `trace.unmatched_requests`); a "
        "dashboard shows a misread instrumentation here instead of a model that got worse; `otel-toolcall-eval "
        "doctor` names the row to fix",
    ),
    MetricDoc(
        LABEL_OVERFLOW,
        "counter",
        "{use}",
        "`label`",
        "toolcall_eval_label_overflow_total",
        f"uses of the overflow value `{OTHER}`: `label` `tool` (a call of a tool past {MAX_TOOL_LABELS} distinct "
        f"names), `source` (a trace of a service, agent and version past {MAX_SOURCE_LABELS} distinct ones: all "
        f"three `{OTHER}`) or `scope` (an instrumentation scope past {MAX_SCOPE_LABELS}); steady counts mean a "
        "label carries an unbounded value (a version per build, a name per user)",
    ),
    MetricDoc(
        SESSION_DROPPED,
        "counter",
        "{session}",
        "`reason`",
        "toolcall_eval_session_dropped_total",
        "session state dropped before it went idle (`evicted` by `limits.max_sessions`); its verdict is still emitted",
    ),
)


# The metrics above that carry no source, and why: each is about the processor (its health, its bounds, its
# window) or its labels, not about an agent; the metrics reference lists them (``_docs``, checked by a test)
NOT_BY_SOURCE: Final[dict[str, str]] = {
    INTERNAL_ERRORS: "the processor's own failures (a bug or a hostile span), not an agent's behaviour",
    STATE_DROPPED: "a bound of the processor's memory (`limits.max_traces`, the TTL) shared by every source; the "
    "dropped trace's verdict still counts by its source in `toolcall_eval.traces` (`finalized_by`)",
    QUEUE_WAITS: "the background queue is the processor's, shared by every source",
    QUEUE_SIZE: "the background queue is the processor's, shared by every source",
    LATE_SPANS: "the scorer's window (`serve.root_grace_seconds`) against the exporters' delay; the late call "
    "itself counts by its trace's source in `toolcall_eval.tool_calls`",
    RECOVERY_UNCLASSIFIED: "a bound of the held spans releasing one early; its class still counts by source in "
    "`toolcall_eval.recoveries`",
    LATE_OUTCOME_UNREAD: "a bound of the held spans (or the trace's end) releasing one before its reply; the call "
    "itself counts by its trace's source in `toolcall_eval.tool_calls`",
    COVERAGE_SUSPECT: "a verdict on an instrumentation scope's shape over every service that uses the scope (the "
    "scope names the shape row to fix); `toolcall_eval.coverage.*` split by source",
    LABEL_OVERFLOW: "counts the uses of the overflow value itself (`label` names the bound)",
    SESSION_DROPPED: "a bound of the processor's memory (`limits.max_sessions`); the evicted session's verdict "
    "still counts by its source in `toolcall_eval.sessions`",
}

_OUTCOME_TEXT: dict[Outcome, str] = {o: o.value for o in Outcome}  # a dict lookup, not the Enum.value property
_ABSENT: Final = ParseStatus.ABSENT  # module globals: no enum class attribute lookup per call
_SUCCESS: Final = Outcome.SUCCESS


@mypyc_attr(native_class=False)
class _Tally:
    """Monotonic counts per label set; ``observe`` is the observable counter's callback (runs at collection)."""

    __slots__ = ("__weakref__", "_counts", "_labels", "_lock")

    def __init__(self, labels: tuple[str, ...]) -> None:
        self._labels = labels
        self._counts: dict[tuple[Any, ...], int] = {}
        self._lock = threading.Lock()
        _fork.reinit_after_fork(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # the counts stay: the child's own counts add to what it inherited

    def add(self, key: tuple[Any, ...]) -> None:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    def add_many(self, counts: Iterable[tuple[tuple[Any, ...], int]]) -> None:
        with self._lock:
            own = self._counts
            for key, n in counts:
                own[key] = own.get(key, 0) + n

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(n, dict(zip(self._labels, key, strict=True))) for key, n in self._items()]

    def _items(self) -> list[tuple[tuple[Any, ...], int]]:
        with self._lock:
            return list(self._counts.items())


def source_attributes(source: Source) -> dict[str, str]:
    """A source as metric attributes; a value not recorded is left out (not an empty label)."""
    return {key: value for key, value in zip(SOURCE_ATTRIBUTES, source, strict=True) if value}


@mypyc_attr(native_class=False)
class SourceLabels:
    """The one bound on sources as labels, per meter: every metric labelled by source (the processor's, the
    sessions', the guard's) takes its source through ``bound``, so a meter never reports more than
    ``MAX_SOURCE_LABELS`` sources whichever part counted them; ``toolcall_eval.label_overflow`` is registered here.
    ``source_labels`` gives the meter's one instance."""

    def __init__(self, meter: Meter) -> None:
        self.overflow = _Tally(("label",))
        doc = _doc(LABEL_OVERFLOW)
        meter.create_observable_counter(
            doc.name, callbacks=[self.overflow.observe], unit=doc.unit, description=doc.meaning
        )
        # the sources labelled so far (and the overflow's), with their attributes
        self.attributes: dict[Source, dict[str, str]] = {OTHER_SOURCE: source_attributes(OTHER_SOURCE)}
        self._lock = _SharedLock()

    def bound(self, source: Source) -> Source:
        """``source``, or ``OTHER_SOURCE`` (counted) once ``MAX_SOURCE_LABELS`` others are labelled."""
        attributes = self.attributes
        if source in attributes:
            return source
        with self._lock.lock:
            if source not in attributes:
                if len(attributes) > MAX_SOURCE_LABELS:  # the overflow's own entry is not one of them
                    self.overflow.add(("source",))
                    return OTHER_SOURCE
                attributes[source] = source_attributes(source)
        return source

    def with_source(self, source: Source, labels: dict[str, str]) -> dict[str, str]:
        """A bounded source's attributes and ``labels``, for a synchronous instrument."""
        attributes = self.attributes.get(source)
        return {**attributes, **labels} if attributes else labels


@mypyc_attr(native_class=False)
class _BySource(_Tally):
    """Counts keyed ``(source, *labels)``: the source's three values become its attributes when collected."""

    __slots__ = ()

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        labels = self._labels
        return [
            Observation(n, source_attributes(source) | dict(zip(labels, rest, strict=True)))
            for (source, *rest), n in self._items()
        ]


@mypyc_attr(native_class=False)
class _Calls(_Tally):
    """Scored calls keyed ``(source, tool, outcome, convention, no arguments, no schema, no result)``: the tool-call
    counter and both coverage counters are sums over it, taken when the reader collects (the key space is bounded:
    sources, tool labels, outcomes, registered conventions, three flags)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(("source", "tool", "outcome", "convention", "arguments", "schema", "result"))

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        totals: dict[tuple[Source, str, str], int] = {}
        for (source, tool, outcome, *_), n in self._items():
            key = (source, tool, outcome)
            totals[key] = totals.get(key, 0) + n
        return [
            Observation(n, source_attributes(source) | {"tool": t, "outcome": o})
            for (source, t, o), n in totals.items()
        ]

    def observe_coverage(self, options: CallbackOptions) -> Iterable[Observation]:
        totals: dict[tuple[Source, str], int] = {}
        for (source, _, _, convention, *_), n in self._items():
            key = (source, convention)
            totals[key] = totals.get(key, 0) + n
        return [Observation(n, source_attributes(s) | {"convention": c}) for (s, c), n in totals.items()]

    def observe_missing(self, options: CallbackOptions) -> Iterable[Observation]:
        totals: dict[tuple[Source, str, str], int] = {}
        for (source, _, _, convention, *flags), n in self._items():
            for part, missing in zip(MISSING_PARTS, flags, strict=True):
                if missing:
                    key = (source, convention, part)
                    totals[key] = totals.get(key, 0) + n
        return [
            Observation(n, source_attributes(s) | {"convention": c, "missing": part})
            for (s, c, part), n in totals.items()
        ]


_NO_FINDINGS: Final[tuple[str, ...]] = ()


@mypyc_attr(native_class=False)
class TraceCounts:
    """One trace's source and its calls not counted yet (``EvalMetrics.trace_counts`` makes it, once per trace).

    ``pending`` holds each call's key (tool label, outcome, convention, three coverage flags) and its findings (an
    ``Entry``, shared by the traces that tally it: ``EvalMetrics._entries``): a list of them for the first
    ``MAX_LISTED_CALLS`` calls, then a dict of how many calls had each: a trace's calls share few keys (at most
    ``MAX_TRACE_KEYS``; past that a call is counted at once). ``latencies`` holds the calls' durations (at most
    ``MAX_TRACE_KEYS``). Both are made by the first call that needs them (None until then: 64 and 56 bytes a trace
    otherwise; the latencies only with ``metrics.histograms``).
    ``record_trace`` counts them with the trace's source and sets ``closed``: a call after that (a late span) is
    counted at once with the same source. Guarded by the ``EvalMetrics`` lock."""

    __slots__ = ("agent", "closed", "latencies", "pending", "service", "source", "version")

    def __init__(self, service: str, version: str) -> None:
        self.service = service
        self.version = version
        self.agent = ""
        self.source: Source | None = None  # the bounded label tuple, fixed at the trace's verdict
        self.closed = False  # counted (or made after its trace's verdict): its calls are counted at once
        self.pending: list[Entry] | dict[Entry, int] | None = None
        # (tool label, seconds) of the calls' durations not recorded yet (``metrics.histograms``), as ``pending``
        self.latencies: list[tuple[str, float]] | None = None

    def note_agent(self, attributes: dict[str, Any]) -> None:
        """The first ``gen_ai.agent.name`` of the trace's tool spans is its agent until the root names one (one dict
        lookup per tool span until found)."""
        if not self.agent:
            agent = attributes.get(A.GEN_AI_AGENT_NAME)
            if isinstance(agent, str):
                self.agent = agent[:MAX_LABEL_LENGTH]

    def note_root(self, service: str, version: str, attributes: dict[str, Any] | None) -> None:
        """The root's resource (its ``service`` name and ``version``, ``EvalMetrics.note_root`` reads them) and agent
        are the trace's (in ``serve`` a trace's spans may come from several services: the root's is the agent's);
        what the root does not record stays as noted."""
        self.service = service or self.service
        self.version = version or self.version
        agent = attributes.get(A.GEN_AI_AGENT_NAME) if attributes else None
        if isinstance(agent, str) and agent:
            self.agent = agent[:MAX_LABEL_LENGTH]


def _tallied(entries: list[Entry]) -> dict[Entry, int]:
    """A trace's listed calls as (entry -> calls)."""
    counts: dict[Entry, int] = {}
    for entry in entries:
        counts[entry] = counts.get(entry, 0) + 1
    return counts


def source_of(resource: Any, agent: Any = None) -> Source:
    """The source of a part that is no trace (the guard's decisions): ``resource``'s service name and version, and
    ``agent`` when it is a name, each cut to ``MAX_LABEL_LENGTH`` (not bounded yet: ``SourceLabels.bound``)."""
    return (
        _resource_value(resource, A.SERVICE_NAME),
        agent[:MAX_LABEL_LENGTH] if isinstance(agent, str) else "",
        _resource_value(resource, A.SERVICE_VERSION),
    )


def _resource_value(resource: Any, key: str) -> str:
    value = resource.attributes.get(key) if resource is not None else None
    return value[:MAX_LABEL_LENGTH] if isinstance(value, str) else ""


def _doc(name: str) -> MetricDoc:
    return next(doc for doc in METRICS if doc.name == name)


class _Instruments:
    """One set of instruments and tallies per meter: an observable counter registered twice under one name
    keeps only its first callbacks, so processors sharing a MeterProvider must share the tallies too (their
    counts add up, as they did with synchronous counters)."""

    def __init__(self, meter: Meter) -> None:
        self.calls = _Calls()
        self.violations = _BySource(("tool", "violation"))
        self.traces = _BySource(("composite_ok", "finalized_by"))
        self.labels = _per_meter(
            _LABELS, meter, SourceLabels
        )  # (under _SHARED_LOCK) the meter's bound on sources, whichever part counted them
        self.overflow = self.labels.overflow
        self.errors = _Tally(("stage",))
        self.dropped = _Tally(("reason",))
        self.queue_waits = _Tally(())
        self.late = _Tally(())
        self.suspect = _Tally(("convention", "scope", "reason"))
        self.queues: weakref.WeakSet[Any] = weakref.WeakSet()  # the background queues of processors on this meter
        self.stats = _StatsInstruments(meter)  # issue 18: cost, latency, recovery, tool list
        self._trace_labels: dict[tuple[Source, str], dict[str, str]] = {}  # ``trace_labels``
        for doc, tally in (
            (METRICS[0], self.calls),
            (METRICS[1], self.violations),
            (METRICS[2], self.traces),
            (METRICS[4], self.errors),
            (METRICS[5], self.dropped),
            (METRICS[6], self.queue_waits),
            (METRICS[10], self.late),
            (_doc(COVERAGE_SUSPECT), self.suspect),
        ):
            meter.create_observable_counter(doc.name, callbacks=[tally.observe], unit=doc.unit, description=doc.meaning)
        meter.create_observable_counter(
            COVERAGE_CALLS, callbacks=[self.calls.observe_coverage], unit="{call}", description=METRICS[8].meaning
        )
        meter.create_observable_counter(
            COVERAGE_MISSING, callbacks=[self.calls.observe_missing], unit="{call}", description=METRICS[9].meaning
        )
        meter.create_observable_gauge(
            QUEUE_SIZE, callbacks=[self._observe_queues], unit="{span}", description=METRICS[7].meaning
        )
        self.per_trace = meter.create_histogram(
            TRACE_TOOL_CALLS,
            unit="{call}",
            description=METRICS[3].meaning,
            explicit_bucket_boundaries_advisory=[0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 100],
        )

    def count_trace(
        self,
        source: Source,
        pending: list[Entry] | dict[Entry, int] | None,
        found: list[tuple[tuple[Any, ...], int]],
        ok: str,
        finalized_by: str,
    ) -> None:
        """A trace with its verdict: its ``pending`` calls (``TraceCounts.pending``) and their findings, the
        trace's own findings (``found``: violation keys and counts) and the trace itself, by ``source``, in one
        call. A listed trace's calls are counted a run of the same entry at a time (``record_call`` shares equal
        entries, so a run is an identity test a call): a parallel fan-out of one tool is one key."""
        if pending:
            runs: Iterable[tuple[Entry, int]]
            if isinstance(pending, dict):
                runs = pending.items()
            else:
                runs = []
                last = pending[0]
                n = 0
                for entry in pending:
                    if entry is last:
                        n += 1
                    else:
                        runs.append((last, n))
                        last = entry
                        n = 1
                runs.append((last, n))
            self.count_calls(source, runs, found)
        if found:
            self.violations.add_many(found)
        self.traces.add((source, ok, finalized_by))

    def count_calls(self, source: Source, counted: Iterable[tuple[Entry, int]], found: list[Any]) -> None:
        """Add ``((call key, findings), n)`` pairs to the calls' tally with ``source``; their findings are appended
        to ``found`` (violation keys and counts, for ``violations.add_many``)."""
        calls = self.calls
        with calls._lock:
            own = calls._counts
            for (key, findings), n in counted:
                k = (source, *key)
                own[k] = own.get(k, 0) + n
                for kind in findings:
                    found.append(((source, key[0], kind), n))

    def trace_labels(self, source: Source, ok: str) -> dict[str, str]:
        """The tool-calls histogram's attributes for ``source`` and ``ok``, made once each (at most twice the bounded
        sources): the SDK copies what it is given, so one dict serves every record."""
        key = (source, ok)
        labels = self._trace_labels.get(key)
        if labels is None:
            labels = self._trace_labels[key] = self.labels.with_source(source, {"composite_ok": ok})
        return labels

    def _observe_queues(self, options: CallbackOptions) -> Iterable[Observation]:
        queues = list(self.queues)
        return [Observation(sum(len(q) for q in queues))] if queues else []


_SHARED: weakref.WeakKeyDictionary[Any, _Instruments] = weakref.WeakKeyDictionary()
_LABELS: weakref.WeakKeyDictionary[Any, SourceLabels] = weakref.WeakKeyDictionary()


@mypyc_attr(native_class=False)
class _SharedLock:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        _fork.reinit_after_fork(self)

    def _after_fork_in_child(self) -> None:
        self.lock = threading.Lock()


_SHARED_LOCK = _SharedLock()


def _per_meter(table: weakref.WeakKeyDictionary[Any, _T], meter: Meter, make: Callable[[Meter], _T]) -> _T:
    """``table``'s entry for ``meter``, made when new; under ``_SHARED_LOCK``. A meter that cannot be weakly
    referenced gets one of its own (not shared)."""
    try:
        found = table.get(meter)
    except TypeError:
        return make(meter)
    if found is None:
        found = table[meter] = make(meter)
    return found


def _instruments(meter: Meter) -> _Instruments:
    with _SHARED_LOCK.lock:
        return _per_meter(_SHARED, meter, _Instruments)


def source_labels(meter_provider: MeterProvider | None = None) -> SourceLabels:
    """The bound on sources the processor's metrics on ``meter_provider`` (the global one by default) use: for
    another part (the guard) that labels its metrics by source."""
    meter = (meter_provider or metrics_api.get_meter_provider()).get_meter(METER, __version__)
    with _SHARED_LOCK.lock:
        return _per_meter(_LABELS, meter, SourceLabels)


@mypyc_attr(native_class=False)
class EvalMetrics:
    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        meter = (meter_provider or metrics_api.get_meter_provider()).get_meter(METER, __version__)
        self._instruments = _instruments(meter)
        self._tools: set[str] = set()
        self._resource: tuple[Any, str, str] | None = None  # the last resource read, its service name and version
        # per (convention, scope): the undeclared keys every invalid call shared so far and how many there were;
        # None once a call of the scope was valid (then nothing here suspects it again)
        self._scopes: dict[tuple[str, str], tuple[frozenset[str], int] | None] = {}
        # each distinct (call key, findings) once, the one every trace's ``pending`` holds: a trace keeps a reference
        # per key, not two tuples per call (13 % of what 10,000 open traces kept); at most ``MAX_SHARED_ENTRIES``
        self._entries: dict[Entry, Entry] = {}
        self._lock = threading.Lock()
        _fork.reinit_after_fork(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    def _tool_label(self, name: str | None) -> str:
        """A tool name as a label: ``_unknown`` for a tool the model invented (``tool_known`` False, or no name),
        ``_other`` past ``MAX_TOOL_LABELS`` distinct names."""
        if name is None:
            return "_unknown"
        if name in self._tools:
            return name
        with self._lock:
            if len(self._tools) >= MAX_TOOL_LABELS:
                self._instruments.overflow.add(("tool",))
                return OTHER
            self._tools.add(name)
        return name

    # --- the trace's source (issue 30) -----------------------------------------------------------------
    def trace_counts(self, span: Any) -> TraceCounts:
        """A trace's ``TraceCounts``, its service and version read from ``span``'s resource (once per trace: the
        resource is the process's, or in ``serve`` the sending service's)."""
        last = self._read_resource(span)
        return TraceCounts(last[1], last[2])

    def note_root(self, trace: TraceCounts, root: Any, attributes: dict[str, Any] | None) -> None:
        """The trace's ``root`` ended: its resource and agent are the trace's (``TraceCounts.note_root``)."""
        last = self._read_resource(root)
        trace.note_root(last[1], last[2], attributes)

    def _read_resource(self, span: Any) -> tuple[Any, str, str]:
        """``span``'s resource, its service name and version. In-process every span has the provider's resource:
        read once, then one identity test. A resource's ``attributes`` is the SDK's ``BoundedAttributes``, whose
        ``get`` is two Python calls and, for an absent ``service.version``, a ``KeyError`` raised and caught: the
        root's two reads cost ~6 k instructions a trace in the pure build when the root read them each time."""
        resource = getattr(span, "resource", None)
        last = self._resource
        if last is None or last[0] is not resource:
            last = self._resource = (
                resource,
                _resource_value(resource, A.SERVICE_NAME),
                _resource_value(resource, A.SERVICE_VERSION),
            )
        return last

    def _source(self, trace: TraceCounts) -> Source:
        """The trace's label tuple, bounded: fixed on first use (the trace's verdict, or a call counted at once)."""
        source = trace.source
        if source is None:
            source = trace.source = self._instruments.labels.bound((trace.service, trace.agent, trace.version))
        return source

    def record_call(
        self,
        score: CallScore,
        convention: str = "unknown",
        result_recorded: bool = True,
        trace: TraceCounts | None = None,
        seconds: float | None = None,
    ) -> None:
        """Count a scored call: by tool and outcome, its findings, and what evidence it lacked (coverage), and
        (``seconds``, with ``metrics.histograms``) its duration in ``toolcall_eval.tool.latency``. With the call's
        ``trace``, the call is tallied on it until the trace's verdict (``record_trace``) gives its source."""
        tool = self._tool_label(None if score.tool_known is False else score.name)
        outcome = score.outcome
        key = (
            tool,
            _OUTCOME_TEXT[outcome],
            convention,
            score.parse_status is _ABSENT,  # coverage: no arguments recorded
            score.schema_source is None and score.tool_known is not False,  # no schema (an unknown tool has none)
            not result_recorded and outcome is _SUCCESS,  # no result (a failed call has none to record)
        )
        findings = (
            self._findings(score)
            if (
                score.violations
                or score.duplicate
                or score.repeated_failure
                or score.over_budget
                or score.schema_valid is False
                or score.parse_ok is False
                or score.tool_known is False
            )
            else _NO_FINDINGS
        )
        entry = (key, findings)
        if trace is None:
            self._count(NO_SOURCE, ((entry, 1),))
            if seconds is not None:
                self._instruments.stats.tool_latency.record(seconds, {"tool": tool})
            return
        tallied = False
        with self._lock:
            if not trace.closed:
                if seconds is not None:
                    latencies = trace.latencies
                    if latencies is None:
                        trace.latencies = [(tool, seconds)]
                        seconds = None
                    elif len(latencies) < MAX_TRACE_KEYS:
                        latencies.append((tool, seconds))
                        seconds = None
                pending = trace.pending
                if pending is None:
                    trace.pending = [self._shared(entry)]
                    tallied = True
                elif isinstance(pending, list) and len(pending) < MAX_LISTED_CALLS:
                    pending.append(self._shared(entry))
                    tallied = True
                else:
                    counts = trace.pending = pending if isinstance(pending, dict) else _tallied(pending)
                    n = counts.get(entry)
                    if n is not None:
                        counts[entry] = n + 1
                        tallied = True
                    elif len(counts) < MAX_TRACE_KEYS:
                        counts[self._shared(entry)] = 1
                        tallied = True
                if tallied and seconds is None:
                    return
            source = self._source(trace)  # after the verdict (a late span), or a trace of too many keys or calls
        if not tallied:
            self._count(source, ((entry, 1),))
        if seconds is not None:
            instruments = self._instruments
            instruments.stats.tool_latency.record(seconds, instruments.labels.with_source(source, {"tool": tool}))

    def _shared(self, entry: Entry) -> Entry:
        """``entry`` as every trace holds it (the first equal one seen; under the lock): a trace's ``pending`` keeps
        it for the trace's life, the caller's own tuples go with the call."""
        entries = self._entries
        shared = entries.get(entry)
        if shared is None:
            if len(entries) < MAX_SHARED_ENTRIES:
                entries[entry] = entry
            return entry
        return shared

    def on_call(
        self,
        score: CallScore,
        convention: str,
        result_recorded: bool,
        trace: TraceCounts,
        attributes: dict[str, Any],
        scope: str,
        seconds: float | None,
    ) -> None:
        """What the metrics take of one scored tool span, in one call from the call stage: the trace's agent (its
        first tool span that names one), the call tallied on its trace (``record_call``), the scope's self-check
        (``record_scope``) and, with ``seconds`` (histograms on), the call's latency (``record_call``)."""
        trace.note_agent(attributes)
        self.record_call(score, convention, result_recorded, trace, seconds)
        self.record_scope(score, convention, scope)

    def _count(self, source: Source, counted: Iterable[tuple[Entry, int]]) -> None:
        """Add ``((call key, findings), n)`` pairs to the tool-call and violation tallies, with ``source``."""
        instruments = self._instruments
        found: list[Any] = []
        instruments.count_calls(source, counted, found)
        if found:
            instruments.violations.add_many(found)

    @staticmethod
    def _findings(score: CallScore) -> tuple[str, ...]:
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
        return tuple(findings)

    def record_scope(self, score: CallScore, convention: str, scope: str) -> None:
        """``toolcall_eval.coverage.suspect``: a call that looks misread by its scope's shape (the processor's
        self-check, the signal ``doctor`` reports offline). Costs a test per call unless the call has no name or a
        schema verdict of a scope still under suspicion."""
        if score.name == "":
            self._instruments.suspect.add((convention, self._scope_label(convention, scope), "no_tool_name"))
        valid = score.schema_valid
        if valid is None:
            return
        key = (convention, scope)
        scopes = self._scopes
        if key in scopes and scopes[key] is None:
            return  # a valid call was seen: not suspected
        with self._lock:
            seen = scopes.get(key, ())
            if seen is None:
                return
            if valid or not score.undeclared_arguments:
                if key in scopes or len(scopes) < MAX_SCOPE_LABELS:
                    scopes[key] = None
                return
            undeclared = frozenset(score.undeclared_arguments)
            shared, count = seen if seen else (undeclared, 0)
            shared &= undeclared
            if key not in scopes and len(scopes) >= MAX_SCOPE_LABELS:
                return
            scopes[key] = (shared, count + 1)
        if shared and count + 1 >= SUSPECT_MIN_CALLS:
            self._instruments.suspect.add((convention, self._scope_label(convention, scope), "same_undeclared_keys"))

    def record_unmatched(self, convention: str, scope: str, calls: int) -> None:
        """``toolcall_eval.coverage.suspect`` ``position_unmatched``: ``calls`` of ``scope`` left unmatched where a
        conversation matched by position broke (``engine.requested.Conversations``)."""
        self._instruments.suspect.add_many(
            [((convention, self._scope_label(convention, scope), "position_unmatched"), calls)]
        )

    def _scope_label(self, convention: str, scope: str) -> str:
        if (convention, scope) in self._scopes or len(self._scopes) < MAX_SCOPE_LABELS:
            return scope
        self._instruments.overflow.add(("scope",))
        return OTHER

    def record_trace(self, verdict: TraceVerdict, finalized_by: str, trace: TraceCounts | None = None) -> Source:
        """Count a trace's verdict, and (with its ``trace``) its calls tallied so far, by the trace's source; the
        source (bounded) is returned for the trace's other metrics (``record_trace_stats``, sessions).

        Per trace this is one call into the SDK (the tool-calls histogram's ``record``: ~78 k instructions in the
        pure build, half of them the SDK cleaning and hashing its three or four attributes, see
        docs/performance.md) and one pass over the module's own tallies (``_Instruments.count_trace``)."""
        instruments = self._instruments
        source = NO_SOURCE
        pending: list[Entry] | dict[Entry, int] | None = None
        latencies: list[tuple[str, float]] | None = None
        if trace is not None:
            with self._lock:
                source = self._source(trace)
                pending, trace.pending = trace.pending, None
                latencies, trace.latencies = trace.latencies, None
                trace.closed = True
        found: list[tuple[tuple[Any, ...], int]] = []
        if verdict.unknown_tool_requests:  # no tool span carried these: counted with the trace
            found.append(((source, "_unknown", "unknown_tool"), verdict.unknown_tool_requests))
        late = verdict.late_schema
        if late is not None and late.invalid_tools:  # validated when the schema came (checks.late_schema)
            found.extend(((source, self._tool_label(tool), "schema_invalid"), 1) for tool in late.invalid_tools)
        ok = "true" if verdict.composite_ok else "false"
        instruments.count_trace(source, pending, found, ok, finalized_by)
        if latencies:
            record = instruments.stats.tool_latency.record
            for tool, seconds in latencies:
                record(seconds, instruments.labels.with_source(source, {"tool": tool}))
        instruments.per_trace.record(verdict.tool_calls, instruments.trace_labels(source, ok))
        return source

    def record_error(self, stage: str) -> None:
        self._instruments.errors.add((stage,))

    def record_dropped(self, reason: str) -> None:
        self._instruments.dropped.add((reason,))

    def record_queue_wait(self) -> None:
        self._instruments.queue_waits.add(())

    def record_late(self) -> None:
        """A span of a trace whose verdict was written already (``toolcall_eval.late_spans``)."""
        self._instruments.late.add(())

    def watch_queue(self, queue: Any) -> None:
        """Report ``len(queue)`` as ``toolcall_eval.queue.size`` (summed over the processors on this meter)."""
        self._instruments.queues.add(queue)

    # --- cost, latency, recovery and the tool list (issue 18) ---------------------------------------------
    def record_trace_stats(
        self,
        attributes: dict[str, Any],
        recoveries: Iterable[tuple[str | None, str]],
        currency: str | None,
        *,
        histograms: bool = True,
        source: Source = NO_SOURCE,
    ) -> None:
        """The recoveries as (tool label or None, class), and (``histograms``) the per-trace histograms, read from
        the root attributes ``trace_stats.root_attributes`` made, by the trace's ``source`` (``record_trace``'s)."""
        instruments = self._instruments
        stats = instruments.stats
        recovered = [((source, self._tool_label(tool), cls), 1) for tool, cls in recoveries]
        if recovered:
            stats.recoveries.add_many(recovered)
        if not histograms:
            return
        labels = instruments.labels.attributes.get(source) or {}
        model_calls = attributes.get(A.TRACE_MODEL_CALLS)
        if model_calls:
            stats.model_calls.record(model_calls, labels)
            if A.TRACE_INPUT_TOKENS in attributes:  # absent when no model call recorded a token count
                stats.tokens.record(attributes[A.TRACE_INPUT_TOKENS], {**labels, "type": "input"})
                stats.tokens.record(attributes[A.TRACE_OUTPUT_TOKENS], {**labels, "type": "output"})
            cost = attributes.get(A.TRACE_COST)
            if cost is not None and currency is not None:
                stats.cost.record(cost, {**labels, "currency": currency})
        latency = attributes.get(A.TRACE_TOOL_LATENCY_TOTAL)
        if latency is not None:
            stats.trace_latency.record(latency, labels)
        rate = attributes.get(A.TRACE_TOOL_ERROR_RATE)
        if rate is not None:
            stats.error_rate.record(rate, labels)

    def record_unclassified(self, reason: str) -> None:
        """A held failed span released without its recovery class (``held_spans``)."""
        self._instruments.stats.unclassified.add((reason,))

    def record_unread(self, reason: str) -> None:
        """A held span waiting for its reply's outcome released without it (``held_spans``)."""
        self._instruments.stats.unread.add((reason,))

    def record_tool_list_change(self, source: Source) -> None:
        """A trace whose tool list differs from its service and agent's previous trace's, by its ``source``
        (``record_trace``'s: the version whose tool list changed)."""
        self._instruments.stats.tool_list_changes.add((source,))


@mypyc_attr(native_class=False)
class SessionMetrics:
    """The session instruments: synchronous (a session ends rarely, so ``Counter.add`` costs nothing that matters);
    the SDK hands processors sharing a meter the same instruments."""

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        meter = (meter_provider or metrics_api.get_meter_provider()).get_meter(METER, __version__)
        docs = {m.name: m for m in METRICS}
        self._labels = source_labels(meter_provider)
        self._sessions = meter.create_counter(SESSIONS, unit="{session}", description=docs[SESSIONS].meaning)
        self._turns = meter.create_histogram(
            SESSION_TURNS,
            unit="{turn}",
            description=docs[SESSION_TURNS].meaning,
            explicit_bucket_boundaries_advisory=[1, 2, 3, 5, 8, 13, 21, 34, 55, 100],
        )
        self._dropped = meter.create_counter(
            SESSION_DROPPED, unit="{session}", description=docs[SESSION_DROPPED].meaning
        )

    def record_session(self, outcome: str, turns: int, finalized_by: str, source: Source = NO_SOURCE) -> None:
        """A session's verdict, by the ``source`` of its last turn with a verdict (bounded as its trace's was)."""
        labels = self._labels
        source = labels.bound(source)
        self._sessions.add(1, labels.with_source(source, {"outcome": outcome, "finalized_by": finalized_by}))
        self._turns.record(turns, labels.with_source(source, {"outcome": outcome}))

    def record_dropped(self, reason: str) -> None:
        self._dropped.add(1, {"reason": reason})
