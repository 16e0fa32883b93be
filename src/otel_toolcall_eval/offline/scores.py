"""The typed result of an offline evaluation: what ``offline.aggregate`` rolls up, and what the gate and reports read.

A run (or the mean, or the spread, of several runs) is a ``RunReport``: a ``Summary`` overall, one per slice and
per difficulty, a ``ToolScores`` per tool, the confusion matrix and the first cases of each hard failure. Field
names are the metric names of ``config.catalog``, so a gate key, which is the file format (``tool_selection.f1``,
``slices.multi-tool.pass_rate``, ``per_tool.search.recall``, ``judge.<question>.pass_rate``), is compiled once
into a ``MetricRef`` that reads the typed fields (``compile_metric``): a key that names no field fails there,
before anything is scored, not as a missing value after it. ``to_json`` writes the JSON report's blocks.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from otel_toolcall_eval.config import catalog

Number = float  # counts are ints in one run and means (floats) over several


@dataclass(slots=True, frozen=True)
class ToolSelectionScores:
    precision: float | None
    recall: float | None
    f1: float | None
    mean_case_f1: float | None


@dataclass(slots=True, frozen=True)
class CallCounts:
    expected: Number
    actual: Number
    matched: Number


@dataclass(slots=True, frozen=True)
class LatencyScores:
    mean: float | None
    max: float | None


@dataclass(slots=True, frozen=True)
class TokenScores:
    mean: float | None
    total: float | None


@dataclass(slots=True, frozen=True)
class JudgeScores:
    """One judge question's verdicts (``eval --judge-verdicts``; ``offline.judge_gate.judge_summary``)."""

    questions: Number
    verdicts: Number
    errors: Number
    passed: Number
    pass_rate: float | None
    mean_score: float | None
    error_rate: float | None


@dataclass(slots=True, frozen=True)
class Summary:
    """The summary block of one scope (overall, a slice, a difficulty): the metrics of ``catalog.SUMMARY_METRICS``
    and their counts. ``policy_violations`` is None when the config has no trajectory policies (then not reported),
    ``trajectory_cases`` None when no case has a trajectory mode (then neither it nor the rate is reported)."""

    cases: Number
    passed: Number
    pass_rate: float | None
    tool_selection: ToolSelectionScores
    schema_validity: float | None
    argument_accuracy: float | None
    required_args_match: float | None
    free_text_similarity: float | None
    order_score: float | None
    order_edit_distance: float | None
    unnecessary_call_rate: float | None
    missed_call_rate: float | None
    parse_failure_rate: float | None
    unknown_tool_rate: float | None
    duplicate_call_rate: float | None
    undeclared_argument_rate: float | None
    error_rate: float | None
    missing_runs: Number
    must_not_call_violations: Number
    calls: CallCounts
    no_tool_cases: Number
    latency_ms: LatencyScores
    tokens: TokenScores
    recovery: dict[str, Number]
    policy_violations: Number | None = None
    trajectory_match_rate: float | None = None
    trajectory_cases: Number | None = None
    judge: dict[str, JudgeScores] | None = None  # per question, with judge verdicts (the mean report only)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cases": self.cases,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "tool_selection": _plain(self.tool_selection),
            "schema_validity": self.schema_validity,
            "argument_accuracy": self.argument_accuracy,
            "required_args_match": self.required_args_match,
            "free_text_similarity": self.free_text_similarity,
            "order_score": self.order_score,
            "order_edit_distance": self.order_edit_distance,
            "unnecessary_call_rate": self.unnecessary_call_rate,
            "missed_call_rate": self.missed_call_rate,
            "parse_failure_rate": self.parse_failure_rate,
            "unknown_tool_rate": self.unknown_tool_rate,
            "duplicate_call_rate": self.duplicate_call_rate,
            "undeclared_argument_rate": self.undeclared_argument_rate,
            "error_rate": self.error_rate,
            "missing_runs": self.missing_runs,
            "must_not_call_violations": self.must_not_call_violations,
            "calls": _plain(self.calls),
            "no_tool_cases": self.no_tool_cases,
            "latency_ms": _plain(self.latency_ms),
            "tokens": _plain(self.tokens),
            "recovery": dict(self.recovery),
        }
        if self.policy_violations is not None:
            out["policy_violations"] = self.policy_violations
        if self.trajectory_cases is not None:
            out["trajectory_match_rate"] = self.trajectory_match_rate
            out["trajectory_cases"] = self.trajectory_cases
        if self.judge is not None:
            out["judge"] = {q: _plain(j) for q, j in self.judge.items()}
        return out

    @classmethod
    def from_json(cls, block: Mapping[str, Any]) -> Summary:
        """A summary block of the JSON form (the mean or spread ``offline.aggregate.combine`` computes on it)."""
        judge = block.get("judge")
        return cls(
            block["cases"],
            block["passed"],
            block["pass_rate"],
            ToolSelectionScores(**block["tool_selection"]),
            block["schema_validity"],
            block["argument_accuracy"],
            block["required_args_match"],
            block["free_text_similarity"],
            block["order_score"],
            block["order_edit_distance"],
            block["unnecessary_call_rate"],
            block["missed_call_rate"],
            block["parse_failure_rate"],
            block["unknown_tool_rate"],
            block["duplicate_call_rate"],
            block["undeclared_argument_rate"],
            block["error_rate"],
            block["missing_runs"],
            block["must_not_call_violations"],
            CallCounts(**block["calls"]),
            block["no_tool_cases"],
            LatencyScores(**block["latency_ms"]),
            TokenScores(**block["tokens"]),
            dict(block["recovery"]),
            block.get("policy_violations"),
            block.get("trajectory_match_rate"),
            block.get("trajectory_cases"),
            None if judge is None else {q: JudgeScores(**j) for q, j in judge.items()},
        )


@dataclass(slots=True, frozen=True)
class ToolScores:
    """One tool's row of the per-tool table (``catalog.TOOL_METRICS`` and their counts)."""

    expected: Number
    correct: Number
    recall: float | None
    called: Number
    precision: float | None
    argument_accuracy: float | None

    def to_json(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(slots=True, frozen=True)
class RunReport:
    """Everything one run (or the mean or spread of several) rolls up to; ``to_json`` is the JSON report's form."""

    summary: Summary
    slices: dict[str, Summary]
    difficulty: dict[str, Summary]
    per_tool: dict[str, ToolScores]
    confusion_matrix: dict[str, Any] = field(default_factory=dict)  # labels and counts (None in a spread)
    examples: dict[str, list[str]] = field(default_factory=dict)  # the first cases of each hard failure
    sessions: dict[str, Any] | None = None  # the session rollup (``offline.sessions``), when cases name one

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "summary": self.summary.to_json(),
            "slices": {s: b.to_json() for s, b in self.slices.items()},
            "difficulty": {d: b.to_json() for d, b in self.difficulty.items()},
            "per_tool": {t: b.to_json() for t, b in self.per_tool.items()},
            "confusion_matrix": self.confusion_matrix,
            "examples": self.examples,
        }
        if self.sessions is not None:
            out["sessions"] = self.sessions
        return out

    @classmethod
    def from_json(cls, report: Mapping[str, Any]) -> RunReport:
        return cls(
            Summary.from_json(report["summary"]),
            {s: Summary.from_json(b) for s, b in report["slices"].items()},
            {d: Summary.from_json(b) for d, b in report["difficulty"].items()},
            {t: ToolScores(**b) for t, b in report["per_tool"].items()},
            report.get("confusion_matrix") or {},
            report.get("examples") or {},
            report.get("sessions"),
        )


def _plain(value: Any) -> dict[str, Any]:
    """A flat frozen dataclass as a dict, in field order (``dataclasses.asdict`` deep-copies; these hold numbers)."""
    return {f.name: getattr(value, f.name) for f in fields(value)}


# --- gate keys, compiled once ----------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class MetricRef:
    """A gate key compiled to the typed fields it names: ``read(report)`` is the value, None when there is none
    (a slice or difficulty without cases, a tool never expected nor called, a judge question never asked)."""

    key: str
    read: Callable[[RunReport], Any]


def compile_metric(key: str) -> MetricRef:
    """The ``MetricRef`` of a (possibly scoped) gate key; ValueError naming the key when it names no typed field."""
    catalog.resolve(key)  # the catalog's own message for a name it does not know
    if key in catalog.BY_PATH:
        get = _field_reader(Summary, key)
        return MetricRef(key, lambda r: get(r.summary))
    scope, _, rest = key.partition(".")
    if scope in ("slices", "difficulty"):
        group, _, metric = rest.partition(".")
        get = _field_reader(Summary, metric)
        by_scope = operator.attrgetter(scope)

        def scoped(r: RunReport) -> Any:
            block = by_scope(r).get(group)
            return None if block is None or not block.cases else get(block)

        return MetricRef(key, scoped)
    if scope == "per_tool":
        tool, _, metric = rest.rpartition(".")
        get = _field_reader(ToolScores, metric)

        def per_tool(r: RunReport) -> Any:
            block = r.per_tool.get(tool)
            return None if block is None else get(block)

        return MetricRef(key, per_tool)
    question, _, metric = rest.partition(".")  # judge: catalog.resolve allows no other scope
    get = _field_reader(JudgeScores, metric)

    def judged(r: RunReport) -> Any:
        block = (r.summary.judge or {}).get(question)
        return None if block is None else get(block)

    return MetricRef(key, judged)


def _field_reader(kind: type, path: str) -> Callable[[Any], Any]:
    """An attribute getter for a dotted field path of ``kind``, checked against its (nested) dataclass fields."""
    current: Any = kind
    for part in path.split("."):
        known = {f.name: f for f in fields(current)} if isinstance(current, type) else {}
        if part not in known:
            raise ValueError(f"'{path}': no such field of {kind.__name__}")
        current = _NESTED.get(current, {}).get(part)
    return operator.attrgetter(path)


_NESTED: dict[type, dict[str, type]] = {
    Summary: {
        "tool_selection": ToolSelectionScores,
        "calls": CallCounts,
        "latency_ms": LatencyScores,
        "tokens": TokenScores,
    }
}
