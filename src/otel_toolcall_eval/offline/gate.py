"""The CI gate: thresholds per metric, hard failures, and the spread guard for N-sample runs.

The gate fails when any of these holds, whatever the aggregates:

- a must-not-call tool was called in any case of any run,
- a configured trajectory policy (``policies.required_steps``, ``destructive_tools``, ``argument_rules``,
  ``step_budget``) was broken in any case of any run,
- a case has no line in a run file (an incomplete run proves nothing),
- a configured ``min`` / ``max`` threshold is missed by the metric's mean over the runs, or the metric has no
  value (no cases to measure it on: a gate on nothing is a failure, not a pass),
- with several runs and ``max_spread`` set, a gated metric (or ``pass_rate``) varies across runs by more
  than ``max_spread`` (max - min): the mean of an unstable agent is not a result.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from otel_toolcall_eval.config import catalog
from otel_toolcall_eval.config.offline import GateConfig

HARD_KINDS = ("must_not_call", "policy", "missing_runs")  # checks that allow none, whatever the thresholds


@dataclass(slots=True, frozen=True)
class GateCheck:
    metric: str
    kind: str  # "min", "max", "spread", or one of HARD_KINDS
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
    examples = report.get("examples", {})
    hard = (
        # (summary key, kind, examples key, what one is, the check when there are none)
        (
            "must_not_call_violations",
            "must_not_call",
            "must_not_call",
            "call(s) of forbidden tools",
            "no must-not-call",
        ),
        ("policy_violations", "policy", "policy", "violation(s) of configured policies", "no policy violations"),
        ("missing_runs", "missing_runs", "missing_runs", "case(s) have no line in a run file", None),
    )
    for key, kind, example_key, what, none in hard:
        count = summary.get(key)
        if count is None and key != "policy_violations":  # that one is absent when no policy is configured
            count = 0
        if count:
            ids = ", ".join(examples.get(example_key, []))
            label = {"must_not_call": "must-not-call", "missing_runs": "missing runs"}.get(kind, kind)
            result.checks.append(GateCheck(key, kind, 0, count, False, f"{label}: {count:g} {what} (cases: {ids})"))
        elif count is not None and none is not None:
            result.checks.append(GateCheck(key, kind, 0, 0, True, none))
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
