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

from otel_toolcall_eval.config.offline import GateConfig
from otel_toolcall_eval.offline.scores import MetricRef, RunReport, compile_metric

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


@dataclass(slots=True, frozen=True)
class CompiledGate:
    """The gate config with every metric key compiled to the typed field it reads (``offline.scores``), once, at
    start-up: a key that names no field fails there (``compile_gate``), before anything is scored."""

    min: tuple[tuple[MetricRef, float], ...]
    max: tuple[tuple[MetricRef, float], ...]
    spread: tuple[MetricRef, ...]  # pass_rate and every gated key, for the spread guard
    max_spread: float | None


def compile_gate(config: GateConfig) -> CompiledGate:
    """``ValueError`` naming the field (``gate.min.<key>: ...``) for a key that names no metric."""
    refs: dict[str, MetricRef] = {}
    bounds: dict[str, list[tuple[MetricRef, float]]] = {"min": [], "max": []}
    for kind, thresholds in (("min", config.min), ("max", config.max)):
        for key, threshold in thresholds.items():
            try:
                ref = refs.get(key) or compile_metric(key)
            except ValueError as exc:
                raise ValueError(f"gate.{kind}.{key}: {exc}") from None
            refs[key] = ref
            bounds[kind].append((ref, threshold))
    spread = tuple(refs.get(k) or compile_metric(k) for k in dict.fromkeys(["pass_rate", *config.min, *config.max]))
    return CompiledGate(tuple(bounds["min"]), tuple(bounds["max"]), spread, config.max_spread)


def lookup(report: RunReport, key: str) -> Any:
    """A metric's value in a typed report, by its gate key (compiled on each call: for reports, not loops)."""
    return compile_metric(key).read(report)


def evaluate_gate(report: RunReport, spread: RunReport | None, gate: CompiledGate, runs: int) -> GateResult:
    result = GateResult()
    summary = report.summary
    examples = report.examples
    hard = (
        # (summary field, kind, examples key, what one is, the check when there are none)
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
        count = getattr(summary, key)  # policy_violations is None when no policy is configured
        if count:
            ids = ", ".join(examples.get(example_key, []))
            label = {"must_not_call": "must-not-call", "missing_runs": "missing runs"}.get(kind, kind)
            result.checks.append(GateCheck(key, kind, 0, count, False, f"{label}: {count:g} {what} (cases: {ids})"))
        elif count is not None and none is not None:
            result.checks.append(GateCheck(key, kind, 0, 0, True, none))
    for kind, bounds in (("min", gate.min), ("max", gate.max)):
        for ref, threshold in bounds:
            result.checks.append(_threshold(ref.key, kind, threshold, ref.read(report)))
    if runs > 1 and gate.max_spread is not None and spread is not None:
        for ref in gate.spread:
            value = ref.read(spread)
            if value is None:
                continue
            ok = value <= gate.max_spread + 1e-12
            message = (
                f"{ref.key} spread {value:.4f} <= {gate.max_spread:g} across {runs} runs"
                if ok
                else f"{ref.key} varies by {value:.4f} across {runs} runs (max_spread {gate.max_spread:g})"
            )
            result.checks.append(GateCheck(ref.key, "spread", gate.max_spread, value, ok, message))
    return result


def _threshold(path: str, kind: str, threshold: float, value: Any) -> GateCheck:
    if not isinstance(value, (int, float)):
        return GateCheck(path, kind, threshold, None, False, f"{path} has no value (no cases to measure it on)")
    ok = value >= threshold - 1e-12 if kind == "min" else value <= threshold + 1e-12
    op = (">=" if ok else "<") if kind == "min" else ("<=" if ok else ">")
    return GateCheck(path, kind, threshold, float(value), ok, f"{path} {value:.4f} {op} {threshold:g}")
