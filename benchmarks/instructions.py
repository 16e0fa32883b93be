"""Instruction counts (callgrind) of whole agent traces with and without the processor: a figure that does not swing.

CPU-time ratios move by +-10 % from run to run on shared machines; the number of instructions a process executes
does not (callgrind counts them, whatever else the machine does). Each figure runs a child process under
``valgrind --tool=callgrind`` that ends N agent traces (a root, two chat spans with the tool definitions, five tool
spans: ``workload.agent_traces`` with four calls after ``authenticate``) through a ``BatchSpanProcessor`` with a
no-op exporter, with and without ``ToolCallEvalProcessor`` in front of it (default mode: background evaluation),
and flushes. The same child with N = 0 measures start-up (imports, the config, the pipeline), which is
subtracted, so the ratio is the per-trace cost: (with(N) - with(0)) / (without(N) - without(0)). Every thread is
counted (the background worker's scoring included). ``PYTHONHASHSEED`` is fixed, so set and dict layouts repeat.

Plain traffic is the same shape of trace with no GenAI attributes (what an instrumented web service sends).
Not part of ``--quick`` (the CI smoke run): under callgrind the children take minutes. Needs ``valgrind`` on the
PATH (Debian's package); without it the figures are reported unavailable.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.harness import Figure, Sizes, unavailable

TRACES = 300  # agent traces per measured child (start-up is measured apart and subtracted)
CALLS_AFTER_AUTH = 4  # + authenticate = five tool spans per trace
KINDS = ("plain", "valid", "invalid")
TARGETS = {"plain": 1.03, "valid": 1.5, "invalid": 1.5}
TITLES = {
    "plain": "plain (non-GenAI) traffic, instructions per trace",
    "valid": "agent trace, valid arguments (5-field schema), instructions per trace",
    "invalid": "agent trace, invalid arguments (5-field schema), instructions per trace",
}
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def _child(kind: str, with_processor: bool, traces: int) -> None:
    """End ``traces`` traces of ``kind`` through the pipeline, then flush (runs under callgrind)."""
    from benchmarks.workload import SCHEMA_5, agent_traces, end_agent_trace, pipeline, policy_config

    config = policy_config(SCHEMA_5) if with_processor and kind != "plain" else None
    pipe = pipeline(config, with_processor=with_processor)
    tracer = pipe.tracer
    prepared = agent_traces(traces, fields=5, valid=kind != "invalid", calls=CALLS_AFTER_AUTH)
    for t in prepared:
        if kind == "plain":  # the same tree, every span with ordinary attributes
            plain = {"http.route": "/api/records", "http.request.method": "GET"}
            with tracer.start_as_current_span("request", attributes=plain):
                for _ in range(2 + 1 + len(t.calls)):
                    with tracer.start_as_current_span("work", attributes=plain):
                        pass
            continue
        end_agent_trace(tracer, t)
    pipe.provider.force_flush()
    pipe.close()


def _count(kind: str, with_processor: bool, traces: int, timeout: float) -> int:
    """Instructions (callgrind's Ir) of one child process."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "benchmarks.instructions",
        "--child",
        kind,
        "--processor" if with_processor else "--no-processor",
        "--traces",
        str(traces),
    ]
    env = dict(os.environ, PYTHONHASHSEED="0")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=root, check=False)
    found = COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind child {kind} failed ({done.returncode}): {done.stderr[-2000:]}")
    return int(found.group(1))


def measure(traces: int = TRACES, timeout: float = 900.0) -> dict[str, Any]:
    """Every count, two children at a time (the machine has two cores; callgrind runs one thread at a time). A
    child that fails costs only its kind's figure: that kind gets ``{"error": ...}``, the others their counts."""
    jobs = [(kind, proc, n) for kind in KINDS for proc in (False, True) for n in (0, traces)]

    def count(job: tuple[str, bool, int]) -> int | str:
        try:
            return _count(job[0], job[1], job[2], timeout)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            return repr(exc)

    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = list(pool.map(count, jobs))
    raw = {f"{kind}/{'with' if proc else 'without'}/{n}": c for (kind, proc, n), c in zip(jobs, counts, strict=True)}
    out: dict[str, Any] = {"traces": traces, "counts": raw}
    for kind in KINDS:
        mine = {k: v for k, v in raw.items() if k.startswith(f"{kind}/")}
        failed = [f"{k}: {v}" for k, v in mine.items() if isinstance(v, str)]
        if failed:
            out[kind] = {"error": "; ".join(failed)}
            continue
        n = {k: v for k, v in mine.items() if isinstance(v, int)}
        with_ = n[f"{kind}/with/{traces}"] - n[f"{kind}/with/0"]
        without = n[f"{kind}/without/{traces}"] - n[f"{kind}/without/0"]
        out[kind] = {"with_per_trace": with_ / traces, "without_per_trace": without / traces, "ratio": with_ / without}
    return out


def run(sizes: Sizes) -> list[Figure]:
    ids = {kind: f"instructions.{kind}" for kind in KINDS}
    if sizes.name == "quick":
        return [
            unavailable(ids[k], TITLES[k], f"<= {TARGETS[k]}x", "not in --quick (minutes under callgrind)")
            for k in KINDS
        ]
    if shutil.which("valgrind") is None:
        return [unavailable(ids[k], TITLES[k], f"<= {TARGETS[k]}x", "valgrind not installed") for k in KINDS]
    result = measure(timeout=sizes.child_timeout)
    figures = []
    for kind in KINDS:
        r = result[kind]
        target = TARGETS[kind]
        if "error" in r:
            figures.append(Figure(ids[kind], TITLES[kind], "-", "-", None, f"<= {target}x", "error", note=r["error"]))
            continue
        figures.append(
            Figure(
                ids[kind],
                TITLES[kind],
                f"{r['with_per_trace']:,.0f} instructions",
                f"{r['without_per_trace']:,.0f} without the processor",
                r["ratio"],
                f"<= {target}x",
                "met" if r["ratio"] <= target else "missed",
                note=f"callgrind, {result['traces']} traces, start-up subtracted, every thread counted",
                data={"counts": {k: v for k, v in result["counts"].items() if k.startswith(kind)}},
            )
        )
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions")
    parser.add_argument("--child", choices=KINDS, help="run one measured child (under callgrind)")
    parser.add_argument("--processor", dest="processor", action="store_true", default=True)
    parser.add_argument("--no-processor", dest="processor", action="store_false")
    parser.add_argument("--traces", type=int, default=TRACES)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.processor, args.traces)
        return 0
    print(json.dumps(measure(args.traces), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
