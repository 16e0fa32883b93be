"""``otel-toolcall-eval eval``: score run files against a dataset, write reports, and gate.

Exit 0 when the gate passes, 1 when it fails (a threshold missed, a spread too wide, a must-not-call
violation, a case missing from a run), 2 on bad input or usage with the file, line and field, 3 when the gate
names a judge metric and the judge has no valid calibration record (``offline.judge_gate``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from otel_toolcall_eval._files import write_atomically, write_via
from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.dataset.errors import LocatedError
from otel_toolcall_eval.errors import ExitCode, UsageError
from otel_toolcall_eval.offline.judge_gate import gated_questions
from otel_toolcall_eval.offline.judge_gate import render_markdown as judge_markdown
from otel_toolcall_eval.offline.reports.baseline import Baseline, compare, load_baseline
from otel_toolcall_eval.offline.reports.html import write_html
from otel_toolcall_eval.offline.reports.json_report import write_json
from otel_toolcall_eval.offline.reports.junit import write_junit
from otel_toolcall_eval.offline.reports.markdown import render_markdown
from otel_toolcall_eval.offline.reports.terminal import print_report
from otel_toolcall_eval.offline.result import EvalResult
from otel_toolcall_eval.offline.runner import auto_jobs, evaluate

PROGRESS_FROM_BYTES = 2_000_000  # show a progress bar for datasets larger than this (on a terminal)


def register(sub: Any) -> None:
    parser = sub.add_parser("eval", help="score run files against a ground-truth dataset and gate on the result")
    parser.add_argument("--dataset", type=Path, required=True, help="the dataset (.jsonl or .csv)")
    parser.add_argument(
        "--runs", type=Path, nargs="+", required=True, help="run file(s), JSONL; several = N samples (gate on the mean)"
    )
    parser.add_argument("--config", type=Path, help="config with gate thresholds and argument matching")
    parser.add_argument("--json", type=Path, help="write the JSON report (the next run's --baseline)")
    parser.add_argument("--markdown", type=Path, help="write the Markdown report (a pull-request comment)")
    parser.add_argument("--junit", type=Path, help="write JUnit XML")
    parser.add_argument("--html", type=Path, help="write one self-contained HTML report")
    parser.add_argument(
        "--baseline", type=Path, help="a previous JSON report: adds the per-case diff to the Markdown and HTML reports"
    )
    parser.add_argument("--dataset-format", choices=["jsonl", "csv"], help="default: from the extension")
    parser.add_argument(
        "--judge-verdicts",
        type=Path,
        help="a verdicts file of `judge run`: reported per question; gated only when the gate names judge.* "
        "metrics and the judge is calibrated (else exit 3)",
    )
    parser.add_argument(
        "--jobs", type=int, help="worker processes (default: one per CPU for large datasets, else none)"
    )
    parser.add_argument("--show", type=int, default=20, help="cases to list in the terminal (default 20)")
    parser.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="progress bar (default: on a terminal, for large datasets)",
    )  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console) -> int:
    config = EvalConfig.load(args.config) if args.config else EvalConfig()
    try:
        baseline = load_baseline(args.baseline) if args.baseline else None
        result = _evaluate(args, config, console)
    except LocatedError as exc:
        raise UsageError(str(exc)) from None
    try:
        _write_reports(args, result, baseline, console)
        print_report(result, console, max_cases=args.show)
        if "judge" in result.report["summary"]:
            _print_judge(result, console)
    finally:
        result.close()
    return ExitCode.OK if result.gate.passed else ExitCode.GATE_FAILED


def _evaluate(args: argparse.Namespace, config: EvalConfig, console: Console) -> EvalResult:
    show = args.progress
    if show is None:
        show = console.is_terminal and _size(args.dataset) > PROGRESS_FROM_BYTES
    jobs = args.jobs if args.jobs is not None else auto_jobs(args.dataset)
    junit = args.junit is not None
    if not show:
        return evaluate(
            args.dataset, args.runs, config, dataset_format=args.dataset_format, jobs=jobs, junit=junit,
            judge_verdicts=args.judge_verdicts,
        )  # fmt: skip
    total = _count_lines(args.dataset)
    columns = (TextColumn("scoring"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("cases", total=total)
        return evaluate(
            args.dataset,
            args.runs,
            config,
            dataset_format=args.dataset_format,
            jobs=jobs,
            junit=junit,
            progress=lambda done: bar.update(task, completed=done),
            judge_verdicts=args.judge_verdicts,
        )


def _write_reports(args: argparse.Namespace, result: EvalResult, baseline: Baseline | None, console: Console) -> None:
    # Each report is written beside its target and renamed over it: one that fails keeps the previous file.
    written = []
    diff = compare(result, baseline) if baseline is not None else None
    if args.json:
        write_via(args.json, lambda tmp: write_json(result, tmp))
        written.append(args.json)
    if args.markdown:
        with write_atomically(args.markdown) as handle:
            handle.write(render_markdown(result, diff))
            if "judge" in result.report["summary"]:
                handle.write(judge_markdown(result.report["summary"]["judge"], gated_questions(result.config)))
        written.append(args.markdown)
    elif baseline is not None and not args.html:
        console.print("[yellow]note:[/] --baseline adds to the Markdown and HTML reports: pass --markdown or --html")
    if args.junit:
        write_via(args.junit, lambda tmp: write_junit(result, tmp))
        written.append(args.junit)
    if args.html:
        write_via(args.html, lambda tmp: write_html(result, tmp, diff))
        written.append(args.html)
    if written:
        console.print("reports: " + ", ".join(escape(str(p)) for p in written), highlight=False, soft_wrap=True)


def _print_judge(result: EvalResult, console: Console) -> None:
    gated = gated_questions(result.config)
    table = Table("question", "verdicts", "pass rate", "mean score", "errors", "gated", title="judge verdicts")
    for question, b in result.report["summary"]["judge"].items():
        table.add_row(
            Text(terminal_safe(question)),
            str(b["verdicts"]),
            "n/a" if b["pass_rate"] is None else f"{b['pass_rate']:.1%}",
            "n/a" if b["mean_score"] is None else f"{b['mean_score']:.3f}",
            str(b["errors"]),
            "yes (calibrated)" if question in gated else "no",
        )
    console.print(table)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _count_lines(path: Path) -> int | None:
    """Lines in the file (a close upper bound on its cases), read in blocks; None if unreadable."""
    try:
        with open(path, "rb") as handle:
            return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))
    except OSError:
        return None
