"""The benchmark suite: the processor's cost as a ratio of the SDK's own span cost, memory bounds, offline throughput.

Every figure is a ratio against a baseline measured in the same process and run (these machines are noisy, so
absolute times do not carry over, ratios do), reported as the median over interleaved rounds. Each module in
``SUITES`` measures one group of figures and returns them; ``python -m benchmarks`` runs them all, prints a table
and writes ``bench-results.json``.
"""

from __future__ import annotations

# Run in this order: the cheap in-process figures first, then the ones that run in a child process.
SUITES: tuple[str, ...] = (
    "benchmarks.processor_cost",
    "benchmarks.guard_cost",  # the pre-execution guard per call (issue 31)
    "benchmarks.judge_sampling",
    "benchmarks.memory",
    "benchmarks.session_memory",
    "benchmarks.offline_eval",
    "benchmarks.replay",
    "benchmarks.footprint",  # a wheel and a fresh venv: what `pip install` gives
    "benchmarks.serve",  # two service processes and a sink, real gRPC
    "benchmarks.instructions",  # callgrind children: minutes, so last (and not in --quick)
)
