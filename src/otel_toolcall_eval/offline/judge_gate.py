"""Judge verdicts in the offline report, and the refusal to gate on a judge nobody has calibrated.

``eval --judge-verdicts FILE`` adds a ``judge`` block to the report's summary (per question: verdicts, pass rate,
mean score, error rate), shown in every report and never gated by default. A gate threshold on
``judge.<question>.<metric>`` is allowed only when the question has a calibration record for the judge's
current fingerprint that meets ``judge.calibration.min_kappa`` and ``min_items``, and when the verdicts were made
under that same fingerprint; otherwise ``eval`` stops before scoring with ``JudgeUncalibrated`` (exit 3).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from otel_toolcall_eval._text import markdown_code
from otel_toolcall_eval.config import ConfigError, EvalConfig
from otel_toolcall_eval.config.judge import PASS_SCORE
from otel_toolcall_eval.errors import JudgeUncalibrated
from otel_toolcall_eval.judge.calibration import uncalibrated
from otel_toolcall_eval.judge.fingerprint import fingerprints


def gated_questions(config: EvalConfig) -> list[str]:
    """The judge questions the gate has thresholds on, in config order."""
    keys: Iterable[str] = (*config.gate.min, *config.gate.max)
    return list(dict.fromkeys(k.split(".")[1] for k in keys if k.startswith("judge.")))


def check_judge_gate(config: EvalConfig, verdicts: Sequence[dict[str, Any]] | None) -> None:
    """Raise ``JudgeUncalibrated`` (or ``ConfigError``) when the gate may not use the judge's verdicts."""
    questions = gated_questions(config)
    if not questions:
        return
    if config.judge is None:
        raise ConfigError(f"gate: judge.{questions[0]}.* is gated, but the config has no judge section")
    problems = uncalibrated(config.judge, questions)
    if verdicts is not None:
        prints = fingerprints(config.judge)
        for question in questions:
            stale = sum(1 for v in verdicts if v["question"] == question and v["fingerprint"] != prints.get(question))
            if stale:
                problems.append(
                    f"{question}: {stale} verdict(s) were made by another judge configuration than the config's "
                    f"(fingerprint {prints.get(question)}): rerun `judge run`"
                )
    if problems:
        raise JudgeUncalibrated(problems)


def judge_summary(verdicts: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per question: verdicts, errors, pass rate (score >= ``PASS_SCORE``), mean score and error rate."""
    out: dict[str, dict[str, Any]] = {}
    for v in verdicts:
        block = out.setdefault(v["question"], {"questions": 0, "verdicts": 0, "errors": 0, "passed": 0, "_sum": 0.0})
        block["questions"] += 1
        if v.get("label") is None:
            block["errors"] += 1
            continue
        block["verdicts"] += 1
        score = float(v.get("score") or 0.0)
        block["_sum"] += score
        block["passed"] += score >= PASS_SCORE
    for block in out.values():
        total = block.pop("_sum")
        n = block["verdicts"]
        block["pass_rate"] = block["passed"] / n if n else None
        block["mean_score"] = total / n if n else None
        block["error_rate"] = block["errors"] / block["questions"] if block["questions"] else None
    return out


def render_markdown(summary: dict[str, dict[str, Any]], gated: Sequence[str]) -> str:
    """The judge block for the Markdown report / pull-request comment."""
    lines = ["", "### Judge verdicts", "", "| question | verdicts | pass rate | mean score | errors | gated |"]
    lines.append("|---|---|---|---|---|---|")
    for question, b in summary.items():
        rate = "n/a" if b["pass_rate"] is None else f"{b['pass_rate']:.1%}"
        mean = "n/a" if b["mean_score"] is None else f"{b['mean_score']:.3f}"
        gate = "yes (calibrated)" if question in gated else "no"
        lines.append(f"| `{markdown_code(question)}` | {b['verdicts']} | {rate} | {mean} | {b['errors']} | {gate} |")
    return "\n".join(lines) + "\n"
