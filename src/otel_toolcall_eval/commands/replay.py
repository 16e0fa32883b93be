"""``otel-toolcall-eval replay``: run the online checks on recorded traces, through the same processor."""

from __future__ import annotations

import argparse
import re
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, TaskID

from otel_toolcall_eval._files import write_atomically
from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval.commands._exporters import otlp_exporters
from otel_toolcall_eval.commands._summary import SummaryExporter
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.errors import ExitCode, UsageError
from otel_toolcall_eval.replay.engine import end_order, replay_spans
from otel_toolcall_eval.replay.formats import ReadLimits, ReplayInputError, read_file
from otel_toolcall_eval.replay.otlp import encode_json
from otel_toolcall_eval.replay.remote import FetchResult, fetch_jaeger, fetch_tempo, unique

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")


def duration(text: str) -> float:
    m = _DURATION.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"'{text}': expected a duration like 30m, 2h or 7d")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


_SIZE = re.compile(r"^(\d+)\s*([kmg]?)(?:i?b)?$", re.IGNORECASE)


def byte_size(text: str) -> int:
    """``512M``, ``2G``, ``64k`` or plain bytes (binary units)."""
    m = _SIZE.match(text.strip())
    if not m or int(m.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"'{text}': expected a size like 256M or 2G")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """Where recorded traces come from; shared with ``harvest``."""
    parser.add_argument("files", nargs="*", type=Path, help="OTLP JSON(L)/protobuf or Jaeger JSON files")
    parser.add_argument("--jaeger-url", help="fetch from a running Jaeger, e.g. http://127.0.0.1:16686")
    parser.add_argument("--service", help="with --jaeger-url: the service whose traces to fetch")
    parser.add_argument("--tempo-url", help="fetch from a running Tempo, e.g. http://127.0.0.1:3200")
    parser.add_argument("--query", default="{}", help="with --tempo-url: a TraceQL query (default all traces)")
    parser.add_argument("--lookback", type=duration, default=3600.0, help="how far back to fetch (default 1h)")
    parser.add_argument("--limit", type=int, default=100, help="most traces to fetch (default 100)")
    parser.add_argument("--lenient", action="store_true", help="skip unreadable records instead of stopping")
    defaults = ReadLimits()
    parser.add_argument(
        "--max-record-size", type=byte_size, default=defaults.max_record_bytes, metavar="SIZE",
        help="largest JSON line, protobuf message or whole-file JSON document held at once (default 256M)",
    )  # fmt: skip
    parser.add_argument(
        "--max-decompressed", type=byte_size, default=defaults.max_decompressed_bytes, metavar="SIZE",
        help="most bytes a zstd-compressed file may inflate to (default 1G)",
    )  # fmt: skip


def register(sub: Any) -> None:
    parser = sub.add_parser("replay", help="score recorded traces with the online checks")
    add_source_arguments(parser)
    parser.add_argument("--config", type=Path, help="policy config (toolcall-eval.yaml)")
    parser.add_argument("--out", type=Path, help="write the scored spans as OTLP JSON lines (one trace a line)")
    parser.add_argument("--otlp-endpoint", help="re-export the scored spans over OTLP")
    parser.add_argument("--otlp-protocol", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--show", type=int, default=0, help="print this many scored traces as trees")
    parser.set_defaults(func=run)


def load_spans(args: argparse.Namespace, console: Console) -> list[ReadableSpan]:
    """Every span from the files and remote sources named on the command line; errors go to stderr."""
    if not args.files and not args.jaeger_url and not args.tempo_url:
        raise UsageError("give trace files, --jaeger-url or --tempo-url")
    if args.jaeger_url and not args.service:
        raise UsageError("--jaeger-url needs --service")
    err = Console(stderr=True)
    spans: list[ReadableSpan] = []
    limits = ReadLimits(max_record_bytes=args.max_record_size, max_decompressed_bytes=args.max_decompressed)
    for path in args.files:
        try:
            report = read_file(path, strict=not args.lenient, limits=limits)
        except ReplayInputError as exc:
            raise UsageError(str(exc)) from None
        for message in report.errors:
            err.print(f"[yellow]skipped[/] {escape(terminal_safe(message))}", highlight=False, soft_wrap=True)
        spans.extend(report.spans)
    for fetched in _remote(args, console):
        for message in fetched.errors:
            err.print(
                f"[yellow]warning:[/] {escape(terminal_safe(message))} "
                f"(kept {len(fetched.trace_ids)} traces fetched so far)",
                highlight=False,
            )
        spans.extend(fetched.spans)
    return unique(spans)


def _remote(args: argparse.Namespace, console: Console) -> list[FetchResult]:
    sources = [
        ("Jaeger", fetch_jaeger, args.jaeger_url, args.service),
        ("Tempo", fetch_tempo, args.tempo_url, args.query),
    ]
    results = []
    with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        for label, fetch, url, what in sources:
            if not url:
                continue
            task = progress.add_task(f"fetching from {label}", total=args.limit)
            results.append(
                fetch(
                    url,
                    what,
                    lookback_seconds=args.lookback,
                    limit=args.limit,
                    progress=partial(_advance, progress, task),
                )
            )
    return results


def _advance(progress: Progress, task: TaskID, done: int, total: int) -> None:
    progress.update(task, completed=done, total=total)


def run(args: argparse.Namespace, console: Console) -> int:
    config = EvalConfig.load(args.config) if args.config else None
    spans = load_spans(args, console)
    summary = SummaryExporter(keep_traces=args.show)
    downstream: list[SpanProcessor] = [SimpleSpanProcessor(summary)]
    if args.otlp_endpoint:
        span_exporter, _ = otlp_exporters(args.otlp_endpoint, args.otlp_protocol)
        downstream.append(BatchSpanProcessor(span_exporter))
    result = replay_spans(spans, config, downstream=downstream)
    if args.out:
        with write_atomically(args.out, "wb") as fh:
            for group in end_order(result.spans):
                fh.write(orjson.dumps(encode_json(group)) + b"\n")
    for tree in summary.span_trees():
        console.print(tree)
    console.print(summary.table())
    console.print(
        f"replayed {len(result.spans)} spans in {result.traces} traces" + (f"; wrote {args.out}" if args.out else "")
    )
    return ExitCode.OK
