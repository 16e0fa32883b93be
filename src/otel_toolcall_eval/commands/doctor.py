"""``otel-toolcall-eval doctor``: which checks could run on recorded traces, which could not, and the setting to change.

Reads the same sources as ``replay`` (trace files in every replay format, Jaeger, Tempo), replays them through the
processor and reports per service, convention and instrumentation scope (``replay.doctor``). A recorded trace is
what users have when a verdict looks wrong or is missing, so that is the input; the live processor's share of calls
without evidence is the ``toolcall_eval.coverage.*`` metric.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval.commands.replay import add_source_arguments, load_spans
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.errors import ExitCode
from otel_toolcall_eval.replay.doctor import (
    LONE_REQUEST_FIX,
    MODEL_ROOT_FIX,
    REQUESTS_ONLY_FIX,
    UNMATCHED_FIX,
    Coverage,
    Diagnosis,
    diagnose,
)
from otel_toolcall_eval.replay.engine import replay_spans


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "doctor", help="what the processor recognised in recorded traces, what it could not score, and how to fix it"
    )
    add_source_arguments(parser)
    parser.add_argument("--config", type=Path, help="policy config (toolcall-eval.yaml): its `tools:` schemas count")
    parser.add_argument("--json", action="store_true", help="print the diagnosis as one JSON object")
    parser.add_argument(
        "--fail-on-gaps",
        action="store_true",
        help="exit 1 when a tool span lacks evidence, a span looks like an unrecognised tool call, or none was found",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console) -> int:
    config = EvalConfig.load(args.config) if args.config else None
    spans = load_spans(args, console)
    diagnosis = diagnose(replay_spans(spans, config).spans)
    if args.json:
        sys.stdout.write(orjson.dumps(diagnosis.as_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
        sys.stdout.flush()
    else:
        _print(diagnosis, console)
    if args.fail_on_gaps and not diagnosis.healthy:
        return ExitCode.GATE_FAILED
    return ExitCode.OK


def _safe(text: object) -> str:
    """Trace text for the terminal: no escape sequences, no rich markup."""
    return escape(terminal_safe(str(text)))


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole}" if whole else "-"


def _print(diagnosis: Diagnosis, console: Console) -> None:
    console.print(
        f"{diagnosis.spans} spans in {diagnosis.traces} traces; {diagnosis.verdicts} traces got a verdict",
        highlight=False,
    )
    if not diagnosis.coverage:
        console.print("[yellow]no tool span recognised[/]")
    for c in diagnosis.coverage:
        framework = f" ({_safe(c.framework)})" if c.framework else ""
        console.print(
            f"\n[bold]{_safe(c.service)}[/] · convention [bold]{_safe(c.convention)}[/] · scope {_safe(c.scope)}"
            f"{framework}",
            highlight=False,
            soft_wrap=True,
        )
        table = Table(show_edge=False)
        for column in ("tool spans", "arguments", "schema", "tool list", "result", "failed"):
            table.add_column(column)
        table.add_row(*_row(c))
        console.print(table)
        console.print(f"tools: {_safe(', '.join(c.tools))}", highlight=False, soft_wrap=True)
        if c.wrapping:
            console.print(
                f"{c.wrapping} spans wrap another instrumentation's span of the same call (scored once, on the inner "
                "span)",
                highlight=False,
            )
        for fix in c.fixes:
            console.print(f"[yellow]fix:[/] {_safe(fix)}", highlight=False, soft_wrap=True)
    if diagnosis.suspects:
        table = Table(title="Spans that look like tool calls but matched no convention", title_justify="left")
        for column in ("service", "scope", "span name", "spans", "attributes hinting at a tool"):
            table.add_column(column, overflow="fold")
        for s in diagnosis.suspects:
            table.add_row(_safe(s.service), _safe(s.scope), _safe(s.name), str(s.count), _safe(", ".join(s.keys)))
        console.print(table)
        for s in diagnosis.suspects:
            console.print(f"[yellow]fix[/] {_safe(s.name)}: {_safe(s.fix)}", highlight=False, soft_wrap=True)
    if diagnosis.requests_only:
        console.print(
            f"[yellow]{diagnosis.requests_only} trace(s) carry tool activity only in model requests "
            f"({diagnosis.request_scored} call(s) scored from the requests):[/] {_safe(REQUESTS_ONLY_FIX)}",
            highlight=False,
            soft_wrap=True,
        )
    if diagnosis.lone_requests:
        console.print(
            f"[yellow]{diagnosis.lone_requests} of them:[/] {_safe(LONE_REQUEST_FIX)}", highlight=False, soft_wrap=True
        )
    if diagnosis.unmatched:
        console.print(
            f"[yellow]{diagnosis.unmatched} requested call(s) not matched by position:[/] {_safe(UNMATCHED_FIX)}",
            highlight=False,
            soft_wrap=True,
        )
    for line in diagnosis.model_only:
        console.print(f"[yellow]fix:[/] {_safe(line)}", highlight=False, soft_wrap=True)
    if diagnosis.model_roots:
        console.print(
            f"[yellow]{diagnosis.model_roots} trace(s) whose root is a model request:[/] {_safe(MODEL_ROOT_FIX)}",
            highlight=False,
            soft_wrap=True,
        )
    if diagnosis.truncated:
        console.print("[yellow]more groups than the report keeps: the first ones are shown[/]")
    if diagnosis.healthy:
        console.print("[green]every recognised tool span carried what its checks need[/]")


def _row(c: Coverage) -> list[str]:
    arguments = _share(c.arguments, c.tool_spans)
    if c.arguments_from_request:
        arguments += f" ({c.arguments_from_request} requested)"
    return [
        str(c.tool_spans),
        arguments,
        _share(c.schema, c.tool_spans - c.unknown),
        _share(c.tool_list, c.tool_spans),
        _share(c.result, c.succeeded),
        str(c.failed),
    ]
