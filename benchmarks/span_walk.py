"""One tool span's walk through ``on_end``: how often the code moves between the project's modules (issue 27).

Not a timing: a count of where the code goes, which says how much of the online side a reader follows to see
what happens to one span. ``python -m benchmarks.span_walk`` ends a few agent traces (``workload.agent_traces``:
a root, two chat spans with tool definitions, five tool spans; invalid arguments, a 5-field schema and the
benchmarks' policies) through the processor in front of a ``SimpleSpanProcessor`` (inline evaluation: the whole
walk is on the thread that ends the span), then ends the next trace's third tool span under ``sys.setprofile``.

Every Python ``call`` and ``return`` event is mapped to the module the code runs in afterwards (a call: the
callee's module; a return: the caller's). Modules outside the project (the SDK, the standard library) are
transparent: an excursion into them and back is no move. Of the resulting sequence of project modules:

- *stays*: maximal runs in one module (a move to another module starts a new stay);
- *modules*: the distinct modules visited;
- *returns*: stays in a module the walk had already left (coming back to it);
- *climbs*: moves into a module of a higher layer than the one left (``tests/test_architecture.py``'s layers;
  a call back up, or the return from a call down that must then come back).

Run it on the default (interpreted) install: compiled modules call each other in C, which the profiler does not
see. ``--show`` prints the walk itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

PROJECT = "otel_toolcall_eval"


@dataclass
class Walk:
    stays: list[str] = field(default_factory=list)

    grain: str = "online"

    def add(self, module: str | None) -> None:
        if module is None or not (module == PROJECT or module.startswith(PROJECT + ".")):
            return
        if self.grain != "module":  # the architecture's units: a top-level module or package, online/'s modules
            from tests.test_architecture import _unit

            module = _unit(module)
        if not self.stays or self.stays[-1] != module:
            self.stays.append(module)

    def summary(self, layer_of: dict[str, int]) -> dict[str, Any]:
        seen: set[str] = set()
        returns = climbs = 0
        for i, module in enumerate(self.stays):
            if module in seen:
                returns += 1
            seen.add(module)
            if i and layer_of[module] < layer_of[self.stays[i - 1]]:  # a smaller index is a higher layer
                climbs += 1
        return {"stays": len(self.stays), "modules": len(seen), "returns": returns, "climbs": climbs}


def _module(frame: FrameType | None) -> str | None:
    return None if frame is None else frame.f_globals.get("__name__")


def _online_side(module: str) -> bool:
    return module == PROJECT + ".processor" or module.startswith(PROJECT + ".online")


def _attributed(frame: FrameType | None, grain: str) -> str | None:
    """The module the code runs in; for ``grain="online"``, the outermost module below the online side's code
    (what the online side called: the engine's scoring, with the checks it runs, is one stay in the engine)."""
    module = _module(frame)
    if grain != "online" or module is None or not module.startswith(PROJECT):
        return module
    chain = []
    while frame is not None:
        name = _module(frame)
        if name is not None and name.startswith(PROJECT):
            chain.append(name)
        frame = frame.f_back
    for name in reversed(chain):  # outermost first
        if not _online_side(name):
            return name
    return module


def layer_of_modules(modules: list[str]) -> dict[str, int]:
    from tests.test_architecture import LAYER_OF, _unit

    return {m: LAYER_OF[m if m in LAYER_OF else _unit(m)] for m in modules}


def walk_one_tool_span(grain: str = "online", valid: bool = False) -> Walk:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import Span

    from benchmarks.workload import SCHEMA_5, NoopExporter, agent_traces, end_agent_trace, policy_config
    from otel_toolcall_eval import ToolCallEvalProcessor

    processor = ToolCallEvalProcessor(SimpleSpanProcessor(NoopExporter()), policy_config(SCHEMA_5))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("span-walk")
    walk = Walk(grain=grain)

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            walk.add(_attributed(frame, grain))
        elif event == "return":
            walk.add(_attributed(frame.f_back, grain))

    def end_profiled(span: Span, k: int) -> None:
        if k != 2:
            span.end()
            return
        sys.setprofile(profile)
        try:
            span.end()
        finally:
            sys.setprofile(None)

    traces = agent_traces(4, fields=5, valid=valid, calls=4)
    for t in traces[:-1]:  # warm: definitions parsed, validators built, tallies made
        end_agent_trace(tracer, t)
    end_agent_trace(tracer, traces[-1], end_profiled)
    provider.shutdown()
    return walk


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--show", action="store_true", help="print the walk, one stay a line")
    parser.add_argument(
        "--grain",
        choices=("online", "unit", "module"),
        default="online",
        help="online (default): the units the online side's code moves between, what they call in turn folded in; "
        "unit: every move between the architecture test's units; module: every move between modules",
    )
    parser.add_argument("--valid", action="store_true", help="valid arguments (a successful call; default: invalid)")
    args = parser.parse_args(argv)
    walk = walk_one_tool_span(args.grain, args.valid)
    if args.show:
        for module in walk.stays:
            print(module)
    print(json.dumps(walk.summary(layer_of_modules(walk.stays))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
