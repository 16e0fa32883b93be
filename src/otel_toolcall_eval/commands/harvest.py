"""``otel-toolcall-eval harvest``: selected traces become draft dataset rows; re-harvesting never duplicates."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console

from otel_toolcall_eval._files import StagedFile
from otel_toolcall_eval.commands.replay import add_source_arguments, load_spans
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.config.judge import Redaction
from otel_toolcall_eval.conventions import default_registry
from otel_toolcall_eval.conventions.llm_spans import DefinitionCache
from otel_toolcall_eval.dataset.io import DatasetError, Format, detect_format, dump_cases, read_cases
from otel_toolcall_eval.dataset.models import DatasetCase
from otel_toolcall_eval.errors import ExitCode, OutputError, UsageError
from otel_toolcall_eval.harvest import WhereError, case_from_trace, check_fields, matches, parse_where, run_line
from otel_toolcall_eval.judge.questions import Redactor
from otel_toolcall_eval.replay.engine import end_order, replay_spans


def register(sub: Any) -> None:
    parser = sub.add_parser("harvest", help="turn selected traces into draft dataset rows")
    add_source_arguments(parser)
    parser.add_argument("--where", required=True, help="e.g. 'composite_ok = false' or 'violation = must_not_call'")
    parser.add_argument("--out", type=Path, required=True, help="dataset file to add the rows to (.jsonl or .csv)")
    parser.add_argument("--config", type=Path, help="policy config: scores the traces and names must_not_call tools")
    parser.add_argument(
        "--runs-out", type=Path, help="also write what the agent did in each new row's trace, as an `eval` run file"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console) -> int:
    try:
        conditions = parse_where(args.where)
    except WhereError as exc:
        raise UsageError(str(exc)) from None
    out_format = detect_format(args.out)  # before any work: a wrong extension is a usage error, not a traceback
    for target in (args.out, args.runs_out):
        if target is not None and target.is_dir():
            raise UsageError(f"{target}: cannot write: is a directory")
    config = EvalConfig.load(args.config) if args.config else EvalConfig()
    spans = load_spans(args, console)
    scored = replay_spans(spans, config).spans  # select on the same scores the online processor would write
    try:
        check_fields(conditions, scored)  # a field no span has is a typo, not "0 matched"
    except WhereError as exc:
        raise UsageError(str(exc)) from None
    existing = []
    if args.out.exists() and args.out.stat().st_size > 0:
        try:
            existing = read_cases(args.out)
        except DatasetError as exc:
            raise UsageError(str(exc)) from None
    known = {c.id for c in existing} | {c.source_trace_id for c in existing if c.source_trace_id}
    registry = default_registry()
    cache = DefinitionCache()
    redact = Redactor(config.judge.redact if config.judge is not None else Redaction())  # as the judge redacts
    new = []
    runs: list[dict[str, Any]] = []
    selected = 0
    for group in end_order(scored):
        if not matches(group, conditions):
            continue
        selected += 1
        case = case_from_trace(group, registry, config, cache)
        if case.id in known or case.source_trace_id in known:
            continue
        known.add(case.id)
        new.append(case)
        runs.append(run_line(group, registry, redact))
    _write_both(args.out, out_format, [*existing, *new] if new or not args.out.exists() else None, args.runs_out, runs)
    console.print(
        f"{selected} traces matched '{args.where}': {len(new)} new rows, "
        f"{selected - len(new)} already in {args.out} ({len(existing) + len(new)} rows in all)",
        highlight=False,
    )
    return ExitCode.OK


def _write_both(
    out: Path, fmt: Format, cases: list[DatasetCase] | None, runs_out: Path | None, runs: list[dict[str, Any]]
) -> None:
    """The dataset and the run file are written in full beside their targets first, then renamed: a failure
    before the renames changes neither file (a dataset whose new rows have no run lines would mislead ``eval``)."""
    staged: list[StagedFile] = []
    try:
        if runs_out is not None:
            run_file = StagedFile(runs_out)
            staged.append(run_file)
            run_file.copy_existing()  # the run file is appended to
            with run_file.open("ab") as fh:
                for line in runs:
                    fh.write(orjson.dumps(line) + b"\n")
        if cases is not None:
            dataset = StagedFile(out)
            staged.append(dataset)
            with dataset.open("w") as handle:
                dump_cases(handle, cases, fmt)
    except BaseException as exc:
        for file in staged:
            file.discard()
        if isinstance(exc, OSError):  # writing the staged file (a full disk): named by its target
            raise OutputError(staged[-1].path, exc) from None
        raise
    for file in staged:
        file.commit()
