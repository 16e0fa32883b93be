"""``otel-toolcall-eval judge run``: ask the judge's questions about a run file's calls, offline, with a cache.

The verdicts file it writes is what ``eval --judge-verdicts`` reports (and, once calibrated, gates on) and what
``judge queue`` samples for people to label. A rerun over the same cases with the same judge configuration answers
from the cache (``--cache DIR``): no request is sent, nothing is spent.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.errors import ExitCode, UsageError
from otel_toolcall_eval.judge.cache import DEFAULT_MAX_ENTRIES, ResponseCache
from otel_toolcall_eval.offline.judge_run import DEFAULT_MAX_CALLS, judge_run


def register(judge_sub: Any) -> None:
    parser = judge_sub.add_parser("run", help="judge a run file's calls offline (cached), writing a verdicts file")
    parser.add_argument("--dataset", type=Path, required=True, help="the dataset (.jsonl or .csv)")
    parser.add_argument("--run", type=Path, required=True, help="the run file (JSONL) whose calls are judged")
    parser.add_argument("--config", type=Path, required=True, help="config with the judge section")
    parser.add_argument("--out", type=Path, required=True, help="the verdicts file to write (JSONL)")
    parser.add_argument("--cache", type=Path, help="response cache directory (content-addressed; reruns are free)")
    parser.add_argument(
        "--cache-entries", type=int, default=DEFAULT_MAX_ENTRIES, help=f"cache bound (default {DEFAULT_MAX_ENTRIES:,})"
    )
    parser.add_argument(
        "--max-calls", type=int, default=DEFAULT_MAX_CALLS, help=f"calls judged at most (default {DEFAULT_MAX_CALLS:,})"
    )
    parser.add_argument("--dataset-format", choices=["jsonl", "csv"], help="default: from the extension")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.max_calls < 1:
        raise UsageError(f"--max-calls: {args.max_calls} is not a positive number")
    if args.cache_entries < 1:
        raise UsageError(f"--cache-entries: {args.cache_entries} is not a positive number")
    config = EvalConfig.load(args.config)
    cache = ResponseCache(args.cache, max_entries=args.cache_entries) if args.cache else None
    summary = judge_run(
        args.dataset, args.run, config, args.out, cache=cache, max_calls=args.max_calls,
        dataset_format=args.dataset_format,
    )  # fmt: skip
    per_question = ", ".join(f"{q} {n}" for q, n in summary.by_question.items()) or "none"
    currency = config.judge.budget.currency if config.judge and config.judge.budget else ""
    console.print(
        Text(
            terminal_safe(
                f"verdicts: {args.out} ({per_question}); asked {summary.questions_asked}, from the cache "
                f"{summary.cached}, errors {summary.errors}, skipped (data not in the dataset) {summary.skipped}; "
                f"cost {summary.cost:.6f} {currency}".rstrip()
            )
        )
    )
    if summary.calls_left_out:
        console.print(Text(f"note: {summary.calls_left_out} calls beyond --max-calls were not judged"))
    if summary.budget_stopped:
        console.print(Text("note: the judge's budget ceiling was reached: the remaining questions were not asked"))
    if summary.errors and not summary.verdicts:
        # every question asked failed (judge unreachable, a bad key or model): not a run with "errors 11" to
        # read past, but no verdict at all; the verdicts file still holds each question's error
        Console(stderr=True).print(
            Text(
                terminal_safe(
                    f"error: the judge gave no verdict: all {summary.errors} questions failed; "
                    f"the provider's first error: {summary.first_error}"
                )
            ),
            soft_wrap=True,
        )
        return ExitCode.JUDGE_FAILED
    return ExitCode.OK
