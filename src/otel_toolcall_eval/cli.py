"""The ``otel-toolcall-eval`` command line: a thin adapter over the library.

Exit codes (``errors.ExitCode``, mapped here and nowhere else): 0 success, 1 a gate failed, 2 bad input, config
or usage, or an output that cannot be written (the message names the file and field), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from otel_toolcall_eval._text import terminal_safe
from otel_toolcall_eval._version import __version__
from otel_toolcall_eval.commands._types import finite
from otel_toolcall_eval.config import ConfigError, EvalConfig
from otel_toolcall_eval.errors import ExitCode, ToolcallEvalError, UsageError

__all__ = ["ExitCode", "UsageError", "build_parser", "main"]  # UsageError: where it was defined before errors.py


def _rate(text: str) -> float:
    value = finite(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not a rate between 0 and 1")
    return value


def _injection(text: str) -> tuple[str, float]:
    from otel_toolcall_eval.demo.agent import FAILURE_CLASSES

    kind, sep, rate = text.partition("=")
    if not sep or kind not in FAILURE_CLASSES:
        raise argparse.ArgumentTypeError(
            f"'{text}': expected CLASS=RATE with CLASS one of {', '.join(FAILURE_CLASSES)}"
        )
    return kind, _rate(rate)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="otel-toolcall-eval", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the scripted demo agent with the processor attached")
    demo.add_argument("--traces", type=int, default=20, help="conversations to run (default 20)")
    demo.add_argument("--failure-rate", type=_rate, default=0.05, help="rate of every failure class (default 0.05)")
    demo.add_argument(
        "--inject",
        type=_injection,
        action="append",
        default=[],
        metavar="CLASS=RATE",
        help="rate of one failure class, overriding --failure-rate (repeatable)",
    )
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--config", type=Path, help="policy config (default: the demo's own)")
    demo.add_argument("--otlp-endpoint", help="export spans and metrics over OTLP, e.g. http://127.0.0.1:4317")
    demo.add_argument("--otlp-protocol", choices=["grpc", "http"], default="grpc")
    demo.add_argument("--prometheus-port", type=int, help="expose the processor's metrics for Prometheus on this port")
    demo.add_argument("--prometheus-host", default="127.0.0.1")
    demo.add_argument("--traces-per-second", type=finite, help="steady load: conversations per second")
    demo.add_argument("--duration", type=finite, help="steady load: seconds to run (live summary)")
    demo.add_argument("--show", type=int, default=3, help="scored traces to print as trees (default 3)")

    config = sub.add_parser("config", help="configuration commands")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    check = config_sub.add_parser("check", help="validate a config file and print what it sets")
    check.add_argument("file", type=Path)

    for module in COMMANDS:
        importlib.import_module(module).register(sub)
    return parser


# Each module here adds its subcommands with ``register(subparsers)`` and sets ``func=handler`` on them;
# a handler takes the parsed arguments and a Console and returns the exit code.
COMMANDS: tuple[str, ...] = (
    "otel_toolcall_eval.commands.replay",
    "otel_toolcall_eval.commands.harvest",
    "otel_toolcall_eval.commands.judge",
    "otel_toolcall_eval.commands.dataset",
    "otel_toolcall_eval.commands.eval",
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the only place exceptions become exit codes."""
    args = build_parser().parse_args(argv)
    console = Console()
    try:
        return int(_dispatch(args, console))
    except ToolcallEvalError as exc:
        return _fail(str(exc))
    except OSError as exc:  # a file the command opened itself, outside the readers (which name the file)
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}")
    except RecursionError:  # a last guard: every walk over input is depth-bounded, so this is a bug
        return _fail("input nested too deeply to process")
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED


def _dispatch(args: argparse.Namespace, console: Console) -> int:
    if args.command == "demo":
        return _demo(args, console)
    if args.command == "config":
        config = EvalConfig.load(args.file)
        console.print(f"[green]{escape(str(args.file))}: valid[/]")
        console.print_json(config.model_dump_json(exclude_defaults=True, by_alias=True))
        return ExitCode.OK
    handler = getattr(args, "func", None)
    if handler is None:
        return ExitCode.BAD_INPUT
    return int(handler(args, console))


def _fail(message: str) -> int:
    err = Console(stderr=True)
    err.print(f"[red]error:[/] {escape(terminal_safe(message))}", highlight=False, soft_wrap=True)
    return ExitCode.BAD_INPUT


def _demo(args: argparse.Namespace, console: Console) -> int:
    from otel_toolcall_eval.demo import DemoOptions, run_demo
    from otel_toolcall_eval.demo.agent import FAILURE_CLASSES

    failures = dict.fromkeys(FAILURE_CLASSES, args.failure_rate)
    failures.update(dict(args.inject))
    if args.traces_per_second is not None and args.duration is None:
        raise ConfigError("--traces-per-second needs --duration")
    options = DemoOptions(
        traces=args.traces,
        failures=failures,
        seed=args.seed,
        config=args.config,
        otlp_endpoint=args.otlp_endpoint,
        otlp_protocol=args.otlp_protocol,
        prometheus_port=args.prometheus_port,
        prometheus_host=args.prometheus_host,
        traces_per_second=args.traces_per_second,
        duration=args.duration,
        show_traces=args.show,
    )
    run_demo(options, console)
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
