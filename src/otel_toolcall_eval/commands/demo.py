"""``otel-toolcall-eval demo``: the scripted demo agent with the processor attached (no services needed)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from otel_toolcall_eval import extras
from otel_toolcall_eval.commands._types import finite
from otel_toolcall_eval.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from rich.console import Console


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


def register(sub: Any) -> None:
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
    demo.add_argument(
        "--guard",
        choices=["shadow", "enforce", "off"],
        help="the pre-execution guard's mode (default: the config's guard.mode; shadow in the demo's own)",
    )
    demo.add_argument(
        "--judge",
        action="store_true",
        help="run the LLM judge: the config's judge section, else a scripted local stand-in for a hosted model "
        "(fixed rules on 127.0.0.1, not a model: docs/judge.md); needs the judge extra",
    )
    demo.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.otlp_endpoint:
        extras.require("otlp", "demo --otlp-endpoint")
    if args.prometheus_port is not None:
        extras.require("prometheus", "demo --prometheus-port")
    if args.judge:
        extras.require("judge", "demo --judge")
    from otel_toolcall_eval.demo import DemoOptions, run_demo
    from otel_toolcall_eval.demo.agent import FAILURE_CLASSES

    failures = dict.fromkeys(FAILURE_CLASSES, args.failure_rate)
    failures.update(dict(args.inject))
    if args.traces_per_second is not None and args.duration is None:
        raise UsageError("--traces-per-second needs --duration")
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
        guard_mode=args.guard,
        judge=args.judge,
    )
    run_demo(options, console)
    return ExitCode.OK
