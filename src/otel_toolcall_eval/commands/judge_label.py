"""``otel-toolcall-eval judge label QUEUE --labels LABELS --rater NAME``: the labelling page, on 127.0.0.1.

Serves the page until Ctrl-C; every label is in the labels file the moment it is given (``judge.label_server``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval.dataset.errors import LocatedError
from otel_toolcall_eval.errors import ExitCode, UsageError
from otel_toolcall_eval.judge.label_server import LabelSession, make_server, read_queue


def register(judge_sub: Any) -> None:
    parser = judge_sub.add_parser("label", help="label a queue in the browser (a local page on 127.0.0.1)")
    parser.add_argument("queue", type=Path, help="the queue file of `judge queue`")
    parser.add_argument("--labels", type=Path, required=True, help="the labels file labels are appended to (JSONL)")
    parser.add_argument("--rater", required=True, help="your name: several raters can label one queue")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free one)")
    parser.add_argument(
        "--show-verdict", action="store_true", help="show the judge's label (off by default: it anchors the rater)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console) -> int:
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port: {args.port} is not a port")
    try:
        session = LabelSession(read_queue(args.queue), args.labels, args.rater, show_verdict=args.show_verdict)
    except LocatedError:
        raise  # a damaged queue or labels file: "file:line: field: message", as every bad file is named
    except ValueError as exc:  # the rater's name
        raise UsageError(f"--{exc}") from None
    server = make_server(session, args.port)
    host, port = server.server_address[:2]
    state = session.state()
    console.print(
        Text(
            terminal_safe(
                f"labelling {args.queue} as {args.rater}: {state['labelled']} of {state['total']} done; "
                f"open http://{host!s}:{port}/ (Ctrl-C to stop; every label is saved at once)"
            )
        ),
        soft_wrap=True,
    )
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return ExitCode.OK
