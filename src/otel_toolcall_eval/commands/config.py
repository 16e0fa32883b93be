"""``otel-toolcall-eval config check FILE``: validate a config file and print what it sets."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from otel_toolcall_eval._console import escape
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console


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
