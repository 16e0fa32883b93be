"""``otel-toolcall-eval judge queue VERDICTS --config CONFIG --out QUEUE``: sample judged calls for labelling.

Stratified per question by the judge's label and by whether the judge disagrees with the deterministic checks
(``judge.queue``); sized per question for a target width of the agreement's interval, or given with ``--size``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.text import Text

from otel_toolcall_eval._files import write_atomically
from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval.commands._types import finite
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.errors import ExitCode, UsageError
from otel_toolcall_eval.judge.queue import MAX_QUEUE, build_queue, size_for_width
from otel_toolcall_eval.judge.verdicts import read_verdicts


def register(judge_sub: Any) -> None:
    parser = judge_sub.add_parser("queue", help="sample judged calls into a labelling queue (stratified)")
    parser.add_argument("verdicts", type=Path, nargs="+", help="verdicts file(s) of `judge run`")
    parser.add_argument("--config", type=Path, required=True, help="config with the judge section (the scales)")
    parser.add_argument("--out", type=Path, required=True, help="the queue file to write (JSONL)")
    parser.add_argument("--size", type=int, help=f"items per question (default: from --ci-width; max {MAX_QUEUE:,})")
    parser.add_argument(
        "--ci-width", type=finite, default=0.2, help="target width of the 95%% interval of raw agreement (default 0.2)"
    )
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (the same verdicts, the same queue)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console) -> int:
    judge = EvalConfig.load(args.config).judge
    if judge is None:
        raise UsageError(f"{args.config}: no judge section (its questions define the scales)")
    if args.size is not None and not 1 <= args.size <= MAX_QUEUE:
        raise UsageError(f"--size: {args.size} is not between 1 and {MAX_QUEUE:,}")
    if not 0 < args.ci_width <= 1:
        raise UsageError(f"--ci-width: {args.ci_width} is not in (0, 1]")
    size = args.size or size_for_width(args.ci_width)
    verdicts = [v for path in args.verdicts for v in read_verdicts(path)]
    items = build_queue(verdicts, {q.name: q for q in judge.questions}, size, seed=args.seed)
    if not items:
        raise UsageError("no verdicts with a label for the config's questions: nothing to label")
    with write_atomically(args.out, "wb") as handle:
        for item in items:
            handle.write(orjson.dumps(item) + b"\n")
    counts: dict[str, int] = {}
    for item in items:
        counts[item["question"]] = counts.get(item["question"], 0) + 1
    shown = ", ".join(f"{q} {n}" for q, n in counts.items())
    console.print(Text(terminal_safe(f"queue: {args.out}: {len(items)} items ({shown}; target {size} per question)")))
    return ExitCode.OK
