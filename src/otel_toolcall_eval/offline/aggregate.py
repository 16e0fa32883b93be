"""Roll case results up per slice, per difficulty, per tool and overall, in constant memory per scope.

Every scope keeps sums, never case lists, so a million cases cost what ten do. Rates with an empty
denominator are ``None`` (reported as null, and a gate on them fails as "no data"), never a vacuous 0 or 1.
With several runs (N samples), each run is aggregated on its own and ``combine`` takes the mean of every
metric across runs and its spread (max - min). ``policy_violations`` is reported only when the config has
trajectory policies (``offline.policies``), so a report without them looks as it always did.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from otel_toolcall_eval.checks.necessity import made_unnecessary_call, missed_all_calls, rate
from otel_toolcall_eval.checks.recovery import CLASSES as RECOVERY_CLASSES
from otel_toolcall_eval.checks.selection import NONE, Selection, confusion_label
from otel_toolcall_eval.config.catalog import DIFFICULTIES, SLICES
from otel_toolcall_eval.offline.score import CaseResult
from otel_toolcall_eval.offline.scores import (
    CallCounts,
    LatencyScores,
    RunReport,
    Summary,
    TokenScores,
    ToolScores,
    ToolSelectionScores,
)
from otel_toolcall_eval.offline.sessions import SessionTotals

OTHER = "_other"  # names past the cap share one row, as the online metrics do
MAX_TOOLS = 500
MAX_EXAMPLES = 10
EXAMPLES = ("must_not_call", "missing_runs", "policy")  # the hard failures whose first cases the gate names


@dataclass(slots=True)
class Totals:
    """Sums over the cases of one scope."""

    cases: int = 0
    passed: int = 0
    tp: int = 0
    expected: int = 0
    actual: int = 0
    f1_sum: float = 0.0
    schema_checked: int = 0
    schema_invalid: int = 0
    pairs: int = 0
    args_correct: int = 0
    required_checked: int = 0
    required_ok: int = 0
    free_text_n: int = 0
    free_text_sum: float = 0.0
    order_n: int = 0
    order_sum: float = 0.0
    edit_sum: float = 0.0
    no_tool_cases: int = 0
    unnecessary_cases: int = 0
    tool_cases: int = 0
    missed_cases: int = 0
    parse_failures: int = 0
    unknown_checked: int = 0
    unknown_tools: int = 0
    duplicate_calls: int = 0
    undeclared_calls: int = 0
    errors: int = 0
    missing_runs: int = 0
    must_not_call_violations: int = 0
    policy_violations: int = 0
    trajectory_cases: int = 0  # cases with a trajectory match mode (checks.trajectory)
    trajectory_matched: int = 0
    latency_n: int = 0
    latency_sum: float = 0.0
    latency_max: float | None = None
    tokens_n: int = 0
    tokens_sum: float = 0.0
    # failed calls by recovery class (checks.recovery)
    recovery_corrected_retry: int = 0
    recovery_switched_tool: int = 0
    recovery_handed_back: int = 0
    recovery_repeated: int = 0
    recovery_carried_on: int = 0

    def add(self, r: CaseResult) -> None:
        self.cases += 1
        self.passed += r.passed
        n_actual = len(r.actual)
        self.tp += r.tp
        self.expected += len(r.expected)
        self.actual += n_actual
        self.f1_sum += r.f1
        self.schema_checked += r.schema_checked
        self.schema_invalid += r.schema_invalid
        self.pairs += r.pairs
        self.args_correct += r.args_correct
        self.required_checked += r.required_checked
        self.required_ok += r.required_ok
        if r.free_text_similarity is not None:
            self.free_text_n += 1
            self.free_text_sum += r.free_text_similarity
        if r.order is not None:
            self.order_n += 1
            self.order_sum += r.order.score
            self.edit_sum += r.order.edit_distance
        if r.expected_no_tool:
            self.no_tool_cases += 1
            self.unnecessary_cases += made_unnecessary_call(True, n_actual)
        else:
            self.tool_cases += 1
            self.missed_cases += missed_all_calls(False, n_actual)
        self.parse_failures += r.parse_failures
        self.unknown_checked += r.unknown_checked
        self.unknown_tools += r.unknown_tools
        self.duplicate_calls += r.duplicate_calls
        self.undeclared_calls += r.undeclared_arguments
        self.errors += r.error is not None
        self.missing_runs += r.missing_run
        self.must_not_call_violations += len(r.must_not_call_violations)
        if r.policy_violations:
            self.policy_violations += len(r.policy_violations)
        if r.trajectory_mode is not None:
            self.trajectory_cases += 1
            self.trajectory_matched += bool(r.trajectory_match)
        if r.latency_ms is not None:
            self.latency_n += 1
            self.latency_sum += r.latency_ms
            if self.latency_max is None or r.latency_ms > self.latency_max:
                self.latency_max = r.latency_ms
        if r.tokens is not None:
            self.tokens_n += 1
            self.tokens_sum += r.tokens
        for cls in r.recovery:
            name = "recovery_" + cls
            setattr(self, name, getattr(self, name) + 1)

    def merge(self, other: Totals) -> None:
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name == "latency_max":
                if theirs is not None and (mine is None or theirs > mine):
                    self.latency_max = theirs
            else:
                setattr(self, f.name, mine + theirs)

    def summary(self, *, policies: bool = False, trajectory: bool = False) -> dict[str, Any]:
        """The summary block of the JSON report (``scores`` in its JSON form)."""
        return self.scores(policies=policies, trajectory=trajectory).to_json()

    def scores(self, *, policies: bool = False, trajectory: bool = False) -> Summary:
        """The metrics of ``catalog.SUMMARY_METRICS``, plus counts (``policy_violations`` only with ``policies``: the
        config has trajectory policies; ``trajectory_match_rate`` only with ``trajectory``: some case of the run
        has a trajectory mode)."""
        selected = Selection(self.tp, self.expected, self.actual)  # micro-averaged: the sums of all cases
        cases = self.cases
        return Summary(
            cases,
            self.passed,
            rate(self.passed, cases),
            ToolSelectionScores(
                selected.precision if cases else None,
                selected.recall if cases else None,
                selected.f1 if cases else None,
                self.f1_sum / cases if cases else None,
            ),
            rate(self.schema_checked - self.schema_invalid, self.schema_checked),
            rate(self.args_correct, self.pairs),
            rate(self.required_ok, self.required_checked),
            self.free_text_sum / self.free_text_n if self.free_text_n else None,
            self.order_sum / self.order_n if self.order_n else None,
            self.edit_sum / self.order_n if self.order_n else None,
            rate(self.unnecessary_cases, self.no_tool_cases),
            rate(self.missed_cases, self.tool_cases),
            rate(self.parse_failures, self.actual),
            rate(self.unknown_tools, self.unknown_checked),
            rate(self.duplicate_calls, self.actual),
            rate(self.undeclared_calls, self.actual),
            rate(self.errors, cases),
            self.missing_runs,
            self.must_not_call_violations,
            CallCounts(self.expected, self.actual, self.tp),
            self.no_tool_cases,
            LatencyScores(self.latency_sum / self.latency_n if self.latency_n else None, self.latency_max),
            TokenScores(
                self.tokens_sum / self.tokens_n if self.tokens_n else None,
                self.tokens_sum if self.tokens_n else None,
            ),
            {c: getattr(self, "recovery_" + c) for c in RECOVERY_CLASSES},
            self.policy_violations if policies else None,
            rate(self.trajectory_matched, self.trajectory_cases) if trajectory else None,
            self.trajectory_cases if trajectory else None,
        )


@dataclass(slots=True)
class ToolTotals:
    expected: int = 0
    correct: int = 0
    called: int = 0
    pairs: int = 0
    args_correct: int = 0

    def merge(self, other: ToolTotals) -> None:
        self.expected += other.expected
        self.correct += other.correct
        self.called += other.called
        self.pairs += other.pairs
        self.args_correct += other.args_correct

    def report(self) -> dict[str, Any]:
        return self.scores().to_json()

    def scores(self) -> ToolScores:
        return ToolScores(
            self.expected,
            self.correct,
            rate(self.correct, self.expected),
            self.called,
            rate(self.correct, self.called),
            rate(self.args_correct, self.pairs),
        )


@dataclass(slots=True)
class RunAggregate:
    """Everything one run file rolls up to: sums per (slice, difficulty) cell, merged into scopes at the end."""

    cells: dict[tuple[str, str], Totals] = field(default_factory=dict)
    tools: dict[str, ToolTotals] = field(default_factory=dict)
    confusion: dict[tuple[str, str], int] = field(default_factory=dict)
    violation_examples: list[str] = field(default_factory=list)  # case ids, first few
    missing_examples: list[str] = field(default_factory=list)
    policy_examples: list[str] = field(default_factory=list)
    sessions: SessionTotals | None = None  # None until a case names a session (``offline.sessions``)

    def add(self, r: CaseResult) -> None:
        session_id = r.case.session_id
        if session_id is not None:
            if self.sessions is None:
                self.sessions = SessionTotals()
            self.sessions.add(session_id, r)
        key = (r.slice, r.difficulty)
        cell = self.cells.get(key)
        if cell is None:
            cell = self.cells[key] = Totals()
        cell.add(r)
        tools = self.tools
        actual = r.actual_counts
        # ``per_tool_correct`` (the smaller count of each expected tool) in the loop, without its dict per case
        for name, n in r.expected_counts.items():
            t = tools.get(name) or self._tool(name)
            t.expected += n
            m = actual.get(name, 0)
            t.correct += n if n < m else m
        for name, n in actual.items():
            (tools.get(name) or self._tool(name)).called += n
        for name, verdict, _ in r.pair_verdicts:
            t = tools.get(name) or self._tool(name)
            t.pairs += 1
            t.args_correct += verdict.failed is None
        if len(r.expected) <= 1:
            label = confusion_label(r.expected, r.actual)
            if label is not None:
                pair = (self._label(label[0]), self._label(label[1]))
                self.confusion[pair] = self.confusion.get(pair, 0) + 1
        if r.must_not_call_violations and len(self.violation_examples) < MAX_EXAMPLES:
            self.violation_examples.append(r.id)
        if r.missing_run and len(self.missing_examples) < MAX_EXAMPLES:
            self.missing_examples.append(r.id)
        if r.policy_violations and len(self.policy_examples) < MAX_EXAMPLES:
            self.policy_examples.append(r.id)

    def _tool(self, name: str) -> ToolTotals:
        t = self.tools.get(name)
        if t is None:
            if len(self.tools) >= MAX_TOOLS:
                name = OTHER
                t = self.tools.get(name)
            if t is None:
                t = self.tools[name] = ToolTotals()
        return t

    def _label(self, name: str) -> str:
        return name if name == NONE or name in self.tools else OTHER

    def merge(self, other: RunAggregate) -> None:
        for key, totals in other.cells.items():
            mine = self.cells.get(key)
            if mine is None:
                self.cells[key] = mine = Totals()
            mine.merge(totals)
        for name, tool in other.tools.items():
            self._tool(name).merge(tool)
        for label, n in other.confusion.items():
            self.confusion[label] = self.confusion.get(label, 0) + n
        self.violation_examples = (self.violation_examples + other.violation_examples)[:MAX_EXAMPLES]
        self.missing_examples = (self.missing_examples + other.missing_examples)[:MAX_EXAMPLES]
        self.policy_examples = (self.policy_examples + other.policy_examples)[:MAX_EXAMPLES]
        if other.sessions is not None:
            if self.sessions is None:
                self.sessions = SessionTotals()
            self.sessions.merge(other.sessions)

    def scope(self, slice_: str | None = None, difficulty: str | None = None) -> Totals:
        """The sums of every cell in a slice, a difficulty, or (both None) overall."""
        out = Totals()
        for (s, d), totals in self.cells.items():
            if (slice_ is None or s == slice_) and (difficulty is None or d == difficulty):
                out.merge(totals)
        return out

    def report(self, *, policies: bool = False, session_budget: int | None = None) -> dict[str, Any]:
        """The JSON report's blocks of ``scores``."""
        return self.scores(policies=policies, session_budget=session_budget).to_json()

    def scores(self, *, policies: bool = False, session_budget: int | None = None) -> RunReport:
        """summary, slices, difficulty, per_tool and confusion_matrix (``policies``: the config has trajectory
        policies, so the summaries carry ``policy_violations``; a run with a case that has a trajectory mode carries
        ``trajectory_match_rate`` in every scope); ``sessions`` when cases name one (``session_budget``:
        ``sessions.step_budget``)."""
        overall = self.scope()
        kw = {"policies": policies, "trajectory": overall.trajectory_cases > 0}
        return RunReport(
            overall.scores(**kw),
            {s: self.scope(slice_=s).scores(**kw) for s in SLICES},
            {d: self.scope(difficulty=d).scores(**kw) for d in DIFFICULTIES},
            {name: self.tools[name].scores() for name in sorted(self.tools)},
            confusion_matrix(self.confusion),
            {
                "must_not_call": self.violation_examples,
                "missing_runs": self.missing_examples,
                "policy": self.policy_examples,
            },
            self.sessions.report(session_budget) if self.sessions is not None else None,
        )


def confusion_matrix(cells: dict[tuple[str, str], int]) -> dict[str, Any]:
    """``labels`` (expected tools, then any other called tool, ``(none)`` last) and ``counts[expected][called]``."""
    expected = sorted({e for e, _ in cells} - {NONE})
    called = sorted({c for _, c in cells} - {NONE} - set(expected))
    labels = expected + called
    if any(NONE in pair for pair in cells):
        labels.append(NONE)
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for (e, c), n in cells.items():
        matrix[index[e]][index[c]] += n
    return {"labels": labels, "counts": matrix}


# Counts add up across runs; everything else is averaged.
_SUMMED = frozenset({"must_not_call_violations", "missing_runs", "policy_violations"})


def combine(reports: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The mean report of N runs and the spread (max - min) of each numeric metric; one run is returned as is."""
    if len(reports) == 1:
        return reports[0], None
    tools = sorted({name for r in reports for name in r["per_tool"]})
    absent = ToolTotals().report()  # a tool a run never expected nor called: zero counts, rates undefined
    reports = [{**r, "per_tool": {t: r["per_tool"].get(t, absent) for t in tools}} for r in reports]
    mean = _combine(reports, "mean")
    spread = _combine(reports, "spread")
    mean["confusion_matrix"] = _sum_matrices([r["confusion_matrix"] for r in reports])
    mean["examples"] = {
        key: list(dict.fromkeys(x for r in reports for x in r["examples"][key]))[:MAX_EXAMPLES] for key in EXAMPLES
    }
    spread.pop("confusion_matrix", None)
    spread.pop("examples", None)
    if any("sessions" in r for r in reports):  # the summary is averaged; the rows of each run are kept as they are
        blocks = [r.get("sessions") or {"summary": {}, "sessions": []} for r in reports]
        mean["sessions"] = {
            "summary": _combine([b["summary"] for b in blocks], "mean"),
            "per_run": [b["sessions"] for b in blocks],
        }
        spread["sessions"] = {"summary": _combine([b["summary"] for b in blocks], "spread")}
    return mean, spread


def _combine(values: list[Any], how: str, key: str = "") -> Any:
    if any(isinstance(v, dict) for v in values):
        keys = list(dict.fromkeys(k for v in values if isinstance(v, dict) for k in v))
        return {k: _combine([v.get(k) if isinstance(v, dict) else None for v in values], how, k) for k in keys}
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers:
        return None
    if how == "spread":
        return max(numbers) - min(numbers)
    if key in _SUMMED:
        return sum(numbers)
    return sum(numbers) / len(numbers)


def _sum_matrices(matrices: list[dict[str, Any]]) -> dict[str, Any]:
    cells: dict[tuple[str, str], int] = {}
    for m in matrices:
        labels = m["labels"]
        for i, row in enumerate(m["counts"]):
            for j, n in enumerate(row):
                if n:
                    cells[(labels[i], labels[j])] = cells.get((labels[i], labels[j]), 0) + n
    return confusion_matrix(cells)


def combine_scores(reports: list[RunReport]) -> tuple[RunReport, RunReport | None]:
    """``combine`` for typed reports: the mean and the spread of every numeric field, computed on their JSON form
    (one rule for every field, nested ones included), typed again."""
    if len(reports) == 1:
        return reports[0], None
    mean, spread = combine([r.to_json() for r in reports])
    assert spread is not None
    return RunReport.from_json(mean), RunReport.from_json(spread)
