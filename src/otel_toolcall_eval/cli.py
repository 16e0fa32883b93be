"""The ``otel-toolcall-eval`` command line: a thin adapter over the library.

Exit codes (``errors.ExitCode``, mapped here and nowhere else): 0 success, 1 a gate failed, 2 bad input, config
or usage, or an output that cannot be written (the message names the file and field), 3 the gate names a judge
metric but the judge is not calibrated, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval._version import __version__
from otel_toolcall_eval.errors import ExitCode, ToolcallEvalError, UsageError

__all__ = ["ExitCode", "UsageError", "build_parser", "main"]  # UsageError: where it was defined before errors.py


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="otel-toolcall-eval", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    for module in COMMANDS:
        importlib.import_module(module).register(sub)
    return parser


# One module per command (as pip's ``cli/``): each adds its subcommands with ``register(subparsers)`` and sets
# ``func=handler`` on them;
# a handler takes the parsed arguments and a Console and returns the exit code.
COMMANDS: tuple[str, ...] = (
    "otel_toolcall_eval.commands.demo",
    "otel_toolcall_eval.commands.config",
    "otel_toolcall_eval.commands.replay",
    "otel_toolcall_eval.commands.harvest",
    "otel_toolcall_eval.commands.doctor",
    "otel_toolcall_eval.commands.judge",
    "otel_toolcall_eval.commands.dataset",
    "otel_toolcall_eval.commands.eval",
    "otel_toolcall_eval.commands.serve",
    "otel_toolcall_eval.commands.pr_comment",
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the only place exceptions become exit codes."""
    args = build_parser().parse_args(argv)
    console = Console()
    try:
        return int(_dispatch(args, console))
    except ToolcallEvalError as exc:
        return _fail(str(exc), exc.exit_code)
    except OSError as exc:  # a file the command opened itself, outside the readers (which name the file)
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}")
    except RecursionError:  # a last guard: every walk over input is depth-bounded, so this is a bug
        return _fail("input nested too deeply to process")
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED


def _dispatch(args: argparse.Namespace, console: Console) -> int:
    handler = getattr(args, "func", None)
    if handler is None:
        return ExitCode.BAD_INPUT
    return int(handler(args, console))


def _fail(message: str, code: ExitCode = ExitCode.BAD_INPUT) -> int:
    err = Console(stderr=True)
    err.print(f"[red]error:[/] {escape(terminal_safe(message))}", highlight=False, soft_wrap=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
