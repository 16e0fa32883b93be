"""The CI gate: thresholds per metric, hard failures, and the spread guard for N-sample runs.

The gate fails when any of these holds, whatever the aggregates:

- a must-not-call tool was called in any case of any run,
- a case has no line in a run file (an incomplete run proves nothing),
- a configured ``min`` / ``max`` threshold is missed by the metric's mean over the runs, or the metric has no
  value (no cases to measure it on: a gate on nothing is a failure, not a pass),
- with several runs and ``max_spread`` set, a gated metric (or ``pass_rate``) varies across runs by more
  than ``max_spread`` (max - min): the mean of an unstable agent is not a result.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from otel_toolcall_eval.offline import catalog
from otel_toolcall_eval.offline.config import GateConfig


@dataclass(slots=True, frozen=True)
class GateCheck:
    metric: str
    kind: str  # "min", "max", "spread", "must_not_call", "missing_runs"
    threshold: float | None
    value: float | None
    passed: bool
    message: str


@dataclass(slots=True)
class GateResult:
    checks: list[GateCheck] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[str]:
        return [c.message for c in self.checks if not c.passed]

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "failures": self.failures, "checks": [asdict(c) for c in self.checks]}


def lookup(report: dict[str, Any], path: str) -> Any:
    """A metric's value in a report: summary paths, or ``slices.<s>.``, ``difficulty.<d>.``, ``per_tool.<t>.``."""
    scope, _, rest = path.partition(".")
    if scope in ("slices", "difficulty"):
        group, _, metric = rest.partition(".")
        block = report.get(scope, {}).get(group)
        if block is None or not block.get("cases"):
            return None
        return _dig(block, metric)
    if scope == "per_tool" and path not in catalog.BY_PATH:
        tool, _, metric = rest.rpartition(".")
        return report.get("per_tool", {}).get(tool, {}).get(metric)
    return _dig(report["summary"], path)


def _dig(block: dict[str, Any], path: str) -> Any:
    value: Any = block
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def evaluate_gate(report: dict[str, Any], spread: dict[str, Any] | None, config: GateConfig, runs: int) -> GateResult:
    result = GateResult()
    summary = report["summary"]
    violations = summary["must_not_call_violations"] or 0
    examples = report.get("examples", {})
    if violations:
        ids = ", ".join(examples.get("must_not_call", []))
        result.checks.append(
            GateCheck(
                "must_not_call_violations", "must_not_call", 0, violations, False,
                f"must-not-call: {violations:g} call(s) of forbidden tools (cases: {ids})",
            )
        )  # fmt: skip
    else:
        result.checks.append(GateCheck("must_not_call_violations", "must_not_call", 0, 0, True, "no must-not-call"))
    missing = summary["missing_runs"] or 0
    if missing:
        ids = ", ".join(examples.get("missing_runs", []))
        result.checks.append(
            GateCheck(
                "missing_runs", "missing_runs", 0, missing, False,
                f"missing runs: {missing:g} case(s) have no line in a run file (cases: {ids})",
            )
        )  # fmt: skip
    for kind, thresholds in (("min", config.min), ("max", config.max)):
        for path, threshold in thresholds.items():
            value = lookup(report, path)
            result.checks.append(_threshold(path, kind, threshold, value))
    if runs > 1 and config.max_spread is not None and spread is not None:
        gated = list(dict.fromkeys(["pass_rate", *config.min, *config.max]))
        for path in gated:
            value = lookup(spread, path)
            if value is None:
                continue
            ok = value <= config.max_spread + 1e-12
            message = (
                f"{path} spread {value:.4f} <= {config.max_spread:g} across {runs} runs"
                if ok
                else f"{path} varies by {value:.4f} across {runs} runs (max_spread {config.max_spread:g})"
            )
            result.checks.append(GateCheck(path, "spread", config.max_spread, value, ok, message))
    return result


def _threshold(path: str, kind: str, threshold: float, value: Any) -> GateCheck:
    if not isinstance(value, (int, float)):
        return GateCheck(path, kind, threshold, None, False, f"{path} has no value (no cases to measure it on)")
    ok = value >= threshold - 1e-12 if kind == "min" else value <= threshold + 1e-12
    op = (">=" if ok else "<") if kind == "min" else ("<=" if ok else ">")
    return GateCheck(path, kind, threshold, float(value), ok, f"{path} {value:.4f} {op} {threshold:g}")
