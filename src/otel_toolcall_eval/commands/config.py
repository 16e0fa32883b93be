"""``otel-toolcall-eval config check FILE``: validate a config file and print what it sets."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.errors import ExitCode


def register(sub: Any) -> None:
    config = sub.add_parser("config", help="configuration commands")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    check = config_sub.add_parser("check", help="validate a config file and print what it sets")
    check.add_argument("file", type=Path)
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace, console: Console) -> int:
    config = EvalConfig.load(args.file)
    console.print(f"[green]{escape(str(args.file))}: valid[/]")
    console.print_json(config.model_dump_json(exclude_defaults=True, by_alias=True))
    return ExitCode.OK
