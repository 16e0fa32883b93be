"""Formatting shared by the reports, so every report shows a metric the same way."""

from __future__ import annotations

from typing import Any

from otel_toolcall_eval.config import catalog
from otel_toolcall_eval.config.catalog import SUMMARY_METRICS
from otel_toolcall_eval.offline.gate import lookup
from otel_toolcall_eval.offline.scores import RunReport

# The metrics shown in summary tables, by catalog path (the same key the gate config uses).
SHOWN: tuple[str, ...] = tuple(m.path for m in SUMMARY_METRICS)
COUNTS = frozenset({"missing_runs", "must_not_call_violations", "policy_violations"})

# The per-case metrics compared against a baseline.
CASE_METRICS: tuple[str, ...] = (
    "precision",
    "recall",
    "f1",
    "argument_accuracy",
    "order_score",
    "schema_valid",
    "required_args_match",
    "trajectory_match",  # only rows of cases with a trajectory mode have it (None otherwise: never "moved")
)


def num(value: Any, *, count: bool = False) -> str:
    """A metric for people: 3 decimals, counts as integers (a mean count keeps one decimal), "-" for no value."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if count:
            return f"{int(value):,}" if value.is_integer() else f"{value:,.1f}"
        return f"{value:.3f}"
    return str(value)


def shown(path: str, value: Any) -> str:
    """A summary metric by its catalog path."""
    return num(value, count=is_count(path))


def delta(before: Any, after: Any, *, count: bool = False) -> str:
    """after - before, signed; counts (and latencies) without decimals."""
    if not isinstance(before, (int, float)) or not isinstance(after, (int, float)):
        return ""
    if isinstance(before, bool) or isinstance(after, bool):
        return ""
    d = float(after) - float(before)
    if abs(d) < 5e-4:
        return "0"
    return f"{d:+,.0f}" if count else f"{d:+.3f}"


def is_count(path: str) -> bool:
    return path in COUNTS or path.startswith(("latency_ms", "tokens"))


def json_metric(report: dict[str, Any], path: str) -> Any:
    """A metric of a JSON report read back from a file (a baseline, possibly of an older version: any key may be
    missing, and a missing one is no value), by its catalog path."""
    scope, _, rest = path.partition(".")
    if scope in ("slices", "difficulty"):
        group, _, name = rest.partition(".")
        block = _dig(report, f"{scope}.{group}") if isinstance(report.get(scope), dict) else None
        if not isinstance(block, dict) or not block.get("cases"):
            return None
        return _dig(block, name)
    if scope == "per_tool" and path not in catalog.BY_PATH:
        tool, _, name = rest.rpartition(".")
        tools = report.get("per_tool")
        block = tools.get(tool) if isinstance(tools, dict) else None
        return block.get(name) if isinstance(block, dict) else None
    summary = report.get("summary")
    return _dig(summary, path) if isinstance(summary, dict) else None


def _dig(block: dict[str, Any], path: str) -> Any:
    value: Any = block
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def metric(report: RunReport, path: str) -> Any:
    """A metric of a typed report by its catalog path (``offline.scores``)."""
    return lookup(report, path)


def pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def changes(moved: list[tuple[str, Any, Any]]) -> str:
    """A case's moved metrics as ``metric before → after; ...`` (``-`` when none): the baseline diff's column."""
    return "; ".join(f"{m} {num(b)} → {num(a)}" for m, b, a in moved) or "-"
