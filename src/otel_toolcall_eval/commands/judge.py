"""``otel-toolcall-eval judge check CONFIG``: validate the judge section and show what the budget buys.

Prints the provider, the questions and the fields each receives, and, for a given traffic of tool calls, the
even-pace evaluations per period and the sampling probability of each risk class, from the same formula the
sampler uses (with the configured token priors standing in for measured usage).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from otel_toolcall_eval.commands import agreement, judge_label, judge_queue, judge_run
from otel_toolcall_eval.commands._types import finite
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.config.judge import JudgeConfig
from otel_toolcall_eval.errors import ExitCode, UsageError
from otel_toolcall_eval.judge.ledger import period_bounds
from otel_toolcall_eval.judge.sampler import CLASSES, solve_rate, weights_of

# The clock the budget period is read from: a seam for tests (the month's length changes the printed rate).
clock: Callable[[], float] = time.time


def _positive(text: str) -> float:
    value = finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _share(text: str) -> float:
    value = finite(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a share between 0 and 1")
    return value


def register(sub: Any) -> None:
    judge = sub.add_parser("judge", help="LLM-judge commands")
    judge_sub = judge.add_subparsers(dest="judge_command", required=True)
    check = judge_sub.add_parser("check", help="validate the judge section and show the sampling it implies")
    check.add_argument("file", help="the config file (YAML or JSON) with a judge section")
    check.add_argument("--traffic", type=_positive, default=1.0, help="tool calls per second (default 1)")
    check.add_argument(
        "--flagged", type=_share, default=0.05, help="share of calls the checks flag as failed (default 0.05)"
    )
    check.set_defaults(func=run_check)
    agreement.register(judge_sub)
    judge_run.register(judge_sub)
    judge_queue.register(judge_sub)
    judge_label.register(judge_sub)


def even_pace(config: JudgeConfig, traffic: float, flagged: float, now: float) -> tuple[float, float, float | None]:
    """(cost per evaluation, evaluations per period, base rate) at the even pace, with the token priors."""
    s = config.sampling
    cost = config.price.cost(s.prior_input_tokens, s.prior_output_tokens)
    if config.budget is None or cost == 0:
        return cost, float("inf"), s.max_rate
    start, end = period_bounds(now, config.budget.period)
    evals_per_period = config.budget.amount / cost
    by_class = [traffic * (1 - flagged), 0.0, traffic * flagged, 0.0, 0.0]  # flagged calls as execution failures
    rate = solve_rate(by_class, weights_of(s.risk_weights), evals_per_period / (end - start))
    return cost, evals_per_period, None if rate is None else min(rate, s.max_rate)


def run_check(args: argparse.Namespace, console: Console) -> int:
    config = EvalConfig.load(args.file)
    judge = config.judge
    if judge is None:
        raise UsageError(f"{args.file}: no judge section (no judge section, no judge)")
    console.print(f"[green]{args.file}: valid judge section[/]")
    key = "none (no key sent)"
    if judge.api_key_env:
        key = f"${judge.api_key_env} " + ("is set" if os.environ.get(judge.api_key_env) else "[red]is NOT set[/]")
    console.print(f"provider {judge.provider} at {judge.url}, model {judge.model}; API key: {key}")

    questions = Table("question", "applies to", "receives", "labels (score)")
    for q in judge.questions:
        labels = ", ".join(f"{s.label} ({s.score:g})" for s in q.scale)
        questions.add_row(q.name, q.when, ", ".join(q.fields), labels)
    console.print(questions)

    cost, per_period, rate = even_pace(judge, args.traffic, args.flagged, clock())
    currency = judge.budget.currency if judge.budget else ""
    console.print(
        f"cost per judged call (priors: {judge.sampling.prior_input_tokens} input and "
        f"{judge.sampling.prior_output_tokens} output tokens, all its questions): {cost:.6f} {currency}"
    )
    if judge.budget is None or rate is None:
        console.print(f"no budget (free model): every call is sampled at the max rate {judge.sampling.max_rate:g}")
        return ExitCode.OK
    console.print(
        f"budget {judge.budget.amount:g} {currency} per {judge.budget.period} buys {per_period:,.0f} evaluations; "
        f"at {args.traffic:g} calls/s with {args.flagged:.0%} flagged, the base rate is {rate:.6f}"
    )
    table = Table("risk class", "weight", "probability")
    for name, weight in zip(CLASSES, weights_of(judge.sampling.risk_weights), strict=True):
        table.add_row(name, f"{weight:g}", f"{min(1.0, rate * weight):.6f}")
    console.print(table)
    return ExitCode.OK
