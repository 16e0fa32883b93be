"""The per-case diff against a previous JSON report (``--baseline``): what flipped, what moved.

The baseline's cases are held as small tuples keyed by id (memory grows with the baseline's size, the one
place it does); the current cases stream past them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from otel_toolcall_eval.dataset.errors import LocatedError
from otel_toolcall_eval.offline.reports.format import CASE_METRICS, SHOWN, json_metric, metric
from otel_toolcall_eval.offline.result import EvalResult

MAX_LISTED = 100
MOVE = 0.005  # a per-case metric change smaller than this is noise in a diff


class BaselineError(LocatedError):
    """The baseline file is not a JSON report of this tool."""


@dataclass(slots=True)
class Baseline:
    path: str
    report: dict[str, Any]  # the head of the previous report (summary, slices, per_tool, ...)
    cases: dict[str, tuple[Any, ...]]  # id -> (passed, *CASE_METRICS)


@dataclass(slots=True)
class Flip:
    id: str
    reasons: list[str]
    changes: list[tuple[str, Any, Any]]


@dataclass(slots=True)
class BaselineDiff:
    baseline: Baseline
    summary: list[tuple[str, Any, Any]]  # (metric, before, after) for every shown metric
    regressions: list[Flip] = field(default_factory=list)
    fixes: list[Flip] = field(default_factory=list)
    moved: list[Flip] = field(default_factory=list)
    regressed: int = 0
    fixed: int = 0
    moved_count: int = 0
    added: list[str] = field(default_factory=list)
    added_count: int = 0
    removed: list[str] = field(default_factory=list)
    removed_count: int = 0


def load_baseline(path: str | Path) -> Baseline:
    try:
        data = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise BaselineError(path, None, None, f"cannot read: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise BaselineError(path, None, None, f"not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("summary"), dict):
        raise BaselineError(path, None, "summary", "missing: is this a JSON report of `otel-toolcall-eval eval`?")
    raw_cases = data.pop("cases", None)
    if not isinstance(raw_cases, list):
        raise BaselineError(path, None, "cases", "missing or not a list")
    cases: dict[str, tuple[Any, ...]] = {}
    for i, case in enumerate(raw_cases):
        if not isinstance(case, dict) or not isinstance(case.get("id"), str) or "passed" not in case:
            raise BaselineError(path, None, f"cases.{i}", "each case needs an 'id' and 'passed'")
        cases[case["id"]] = (bool(case["passed"]), *(case.get(m) for m in CASE_METRICS))
    return Baseline(str(path), data, cases)


def compare(result: EvalResult, baseline: Baseline) -> BaselineDiff:
    summary = [(path, json_metric(baseline.report, path), metric(result.scores, path)) for path in SHOWN]
    diff = BaselineDiff(baseline, summary)
    remaining = dict(baseline.cases)
    for row in result.cases:
        before = remaining.pop(row["id"], None)
        if before is None:
            diff.added_count += 1
            if len(diff.added) < MAX_LISTED:
                diff.added.append(row["id"])
            continue
        was, now = before[0], bool(row["passed"])
        changes = [(m, b, row.get(m)) for m, b in zip(CASE_METRICS, before[1:], strict=True) if _moved(b, row.get(m))]
        if was and not now:
            diff.regressed += 1
            if len(diff.regressions) < MAX_LISTED:
                diff.regressions.append(Flip(row["id"], row.get("reasons") or [], changes))
        elif now and not was:
            diff.fixed += 1
            if len(diff.fixes) < MAX_LISTED:
                diff.fixes.append(Flip(row["id"], [], changes))
        elif changes:
            diff.moved_count += 1
            if len(diff.moved) < MAX_LISTED:
                diff.moved.append(Flip(row["id"], row.get("reasons") or [], changes))
    diff.removed_count = len(remaining)
    diff.removed = sorted(remaining)[:MAX_LISTED]
    return diff


def _moved(before: Any, after: Any) -> bool:
    if isinstance(before, bool) or isinstance(after, bool) or before is None or after is None:
        return bool(before != after)
    if isinstance(before, (int, float)) and isinstance(after, (int, float)):
        return abs(after - before) >= MOVE
    return bool(before != after)
