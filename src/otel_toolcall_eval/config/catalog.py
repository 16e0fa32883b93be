"""Every offline metric, named once: the summary, the gate's threshold keys and the docs table read this list.

A gate key is a metric's path in the JSON report's ``summary`` (``tool_selection.f1``), optionally scoped to a
slice, a difficulty or a tool: ``slices.ordered-dependency.order_score``, ``difficulty.hard.pass_rate``,
``per_tool.get_order.recall``; or a judge question's: ``judge.tool_appropriateness.pass_rate``.
"""

from __future__ import annotations

from dataclasses import dataclass

from otel_toolcall_eval.slices import Difficulty, Slice


@dataclass(frozen=True, slots=True)
class Metric:
    path: str
    better: str  # "higher" or "lower"
    meaning: str


SUMMARY_METRICS: tuple[Metric, ...] = (
    Metric("pass_rate", "higher", "cases that passed / cases"),
    Metric("tool_selection.precision", "higher", "sum TP / sum |A| over cases (multisets of names)"),
    Metric("tool_selection.recall", "higher", "sum TP / sum |E| over cases"),
    Metric("tool_selection.f1", "higher", "2 sum TP / (sum |E| + sum |A|)"),
    Metric("tool_selection.mean_case_f1", "higher", "mean of the per-case F1"),
    Metric("schema_validity", "higher", "calls valid against their tool's schema / calls with a known schema"),
    Metric("argument_accuracy", "higher", "matched calls whose arguments pass all three layers / matched calls"),
    Metric(
        "required_args_match",
        "higher",
        "matched calls whose expected arguments match after normalisation / matched calls that reached that layer",
    ),
    Metric("free_text_similarity", "higher", "mean of the lowest free-text similarity per matched call"),
    Metric(
        "order_score",
        "higher",
        "mean over cases with expected calls of 2k / (|E| + |A|), k = longest in-order subsequence of the matched "
        "pairs (T-Eval)",
    ),
    Metric("order_edit_distance", "lower", "mean over cases with expected calls of Levenshtein(E, A) / max(|E|, |A|)"),
    Metric("unnecessary_call_rate", "lower", "no-tool cases with a call / no-tool cases"),
    Metric("missed_call_rate", "lower", "tool cases without any call / tool cases"),
    Metric("parse_failure_rate", "lower", "calls whose arguments did not parse / calls"),
    Metric("unknown_tool_rate", "lower", "calls of a tool the model was not offered / calls (where tools are known)"),
    Metric(
        "duplicate_call_rate",
        "lower",
        "calls repeating an earlier call of the case (same normalised arguments) / calls",
    ),
    Metric(
        "undeclared_argument_rate",
        "lower",
        "calls with an argument their tool's schema does not declare (checks.undeclared) / calls",
    ),
    Metric("error_rate", "lower", "cases whose run recorded an error / cases"),
    Metric("missing_runs", "lower", "cases with no line in the run file"),
    Metric("must_not_call_violations", "lower", "calls of a must-not-call tool (any one fails the gate)"),
    Metric(
        "policy_violations",
        "lower",
        "calls breaking `policies.required_steps`, `destructive_tools` or `argument_rules`, plus cases over "
        "`policies.step_budget` (any one fails the gate; reported only when the config has such policies)",
    ),
    Metric(
        "trajectory_match_rate",
        "higher",
        "cases whose calls match a reference list under their trajectory mode (`strict`, `unordered`, `subset`, "
        "`superset`, `in_order`; checks.trajectory) / cases with a mode (reported only when some case has one)",
    ),
    Metric("latency_ms.mean", "lower", "mean latency_ms of the cases that recorded one"),
    Metric("latency_ms.max", "lower", "largest latency_ms"),
    Metric("tokens.mean", "lower", "mean tokens of the cases that recorded them"),
)

TOOL_METRICS: tuple[Metric, ...] = (
    Metric("recall", "higher", "correct / expected: expected calls of the tool that were made"),
    Metric("precision", "higher", "correct / called: calls of the tool that were expected"),
    Metric("argument_accuracy", "higher", "matched calls of the tool with correct arguments / matched calls"),
)

# Per judge question, from ``eval --judge-verdicts`` (gate key ``judge.<question>.<metric>``); gating on one needs a
# calibrated judge (``judge.calibration``), else ``eval`` refuses to start (exit 3).
JUDGE_METRICS: tuple[Metric, ...] = (
    Metric("pass_rate", "higher", "verdicts whose label scores >= 0.5 / verdicts (errors excluded)"),
    Metric("mean_score", "higher", "mean score of the verdicts"),
    Metric("error_rate", "lower", "questions without a verdict (judge errors) / questions asked"),
)

BY_PATH: dict[str, Metric] = {m.path: m for m in SUMMARY_METRICS}
JUDGE_BY_NAME: dict[str, Metric] = {m.path: m for m in JUDGE_METRICS}
TOOL_BY_NAME: dict[str, Metric] = {m.path: m for m in TOOL_METRICS}
SLICES: tuple[str, ...] = tuple(s.value for s in Slice)
DIFFICULTIES: tuple[str, ...] = tuple(d.value for d in Difficulty)


def resolve(path: str) -> Metric:
    """The metric a (possibly scoped) gate key names; ValueError naming what is wrong."""
    if path in BY_PATH:
        return BY_PATH[path]
    scope, _, rest = path.partition(".")
    if scope in ("slices", "difficulty"):
        group, _, metric = rest.partition(".")
        allowed = SLICES if scope == "slices" else DIFFICULTIES
        if group not in allowed:
            raise ValueError(
                f"'{path}': unknown {scope[:-1] if scope == 'slices' else scope} '{group}' ({', '.join(allowed)})"
            )
        if metric not in BY_PATH:
            raise ValueError(f"'{path}': unknown metric '{metric}' (one of: {', '.join(BY_PATH)})")
        return BY_PATH[metric]
    if scope == "per_tool":
        tool, _, metric = rest.rpartition(".")
        if not tool or metric not in TOOL_BY_NAME:
            raise ValueError(f"'{path}': expected per_tool.<tool>.<{'|'.join(TOOL_BY_NAME)}>")
        return TOOL_BY_NAME[metric]
    if scope == "judge":
        question, _, metric = rest.partition(".")
        if not question or metric not in JUDGE_BY_NAME:
            raise ValueError(f"'{path}': expected judge.<question>.<{'|'.join(JUDGE_BY_NAME)}>")
        return JUDGE_BY_NAME[metric]
    raise ValueError(
        f"'{path}': unknown metric (one of: {', '.join(BY_PATH)}; or scoped: slices.<slice>.<metric>, "
        "difficulty.<level>.<metric>, per_tool.<tool>.<metric>, judge.<question>.<metric>)"
    )
