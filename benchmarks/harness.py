"""What every suite shares: sizes, interleaved rounds reduced to medians, the figure record, child processes.

Why interleaved rounds: on a shared 2-core machine the speed drifts by more than the effects measured here,
so baseline and subject alternate round by round (ABBA order) and a figure is the median of the per-round
ratios; the medians of each side are kept for the table and the JSON.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

REPO_ROOT = Path(__file__).resolve().parents[1]

Status = Literal["met", "missed", "info", "unavailable", "error"]


@dataclass(frozen=True)
class Sizes:
    """How much work each figure does; ``FULL`` is what ``make bench`` reports, ``QUICK`` the CI smoke run."""

    name: str
    rounds: int  # interleaved rounds per comparison (each side runs this many)
    plain_spans: int  # non-tool spans per round
    tool_traces: int  # traces per round in the tool-span figures (TOOL_CALLS timed calls each)
    memory_traces: int
    memory_calls_per_trace: int
    memory_max_traces: int | None  # None: the default limit (EvalConfig().limits.max_traces)
    judge_decisions: int  # sampling decisions per round
    offline_cases: int  # cases per round in the offline throughput figures
    deepeval_cases: int  # DeepEval is ~100x slower: fewer cases per round, same rate
    e2e_cases: int  # cases in the end-to-end offline run
    # seconds a child-process figure may take: a guard against a hung child, not a speed limit (a loaded machine
    # runs the 1,000,000-span memory child ten times slower than an idle one: 600 s was not enough at load 30)
    child_timeout: float
    # sessions (benchmarks.session_memory): spans streamed, conversations they go round-robin over, max_sessions
    session_spans: int = 1_000_000
    session_count: int = 200_000
    session_max: int | None = None  # None: the default limit (EvalConfig().limits.max_sessions)


FULL = Sizes(
    name="full",
    rounds=21,
    plain_spans=2_000,
    tool_traces=150,
    memory_traces=200_000,
    memory_calls_per_trace=5,
    memory_max_traces=None,
    judge_decisions=20_000,
    offline_cases=100_000,
    deepeval_cases=1_000,
    e2e_cases=1_000_000,
    child_timeout=3600.0,
)
QUICK = Sizes(
    name="quick",
    rounds=9,
    plain_spans=300,
    tool_traces=20,
    memory_traces=4_000,
    memory_calls_per_trace=5,
    memory_max_traces=800,  # small enough that the run goes well past the limit
    judge_decisions=1_000,
    offline_cases=1_000,
    deepeval_cases=30,
    e2e_cases=10_000,
    child_timeout=120.0,
    session_spans=40_000,
    session_count=4_000,
    session_max=800,  # small enough that the run goes well past the limit
)


@dataclass
class Comparison:
    """Per-round costs of the baseline and the subject, measured alternately (same units, lower is cheaper)."""

    baseline: list[float]
    subject: list[float]

    @property
    def baseline_median(self) -> float:
        return statistics.median(self.baseline)

    @property
    def subject_median(self) -> float:
        return statistics.median(self.subject)

    @property
    def ratio(self) -> float:
        """Median of the per-round ratios: each subject round against the baseline round beside it."""
        return statistics.median(s / b for s, b in zip(self.subject, self.baseline, strict=True))

    def as_json(self) -> dict[str, Any]:
        return {
            "baseline_rounds": [round(v, 3) for v in self.baseline],
            "subject_rounds": [round(v, 3) for v in self.subject],
            "baseline_median": round(self.baseline_median, 3),
            "subject_median": round(self.subject_median, 3),
            "ratio": round(self.ratio, 4),
        }


def interleave(
    baseline: Callable[[], float], subject: Callable[[], float], rounds: int, *, warmup: int = 1
) -> Comparison:
    """Run ``rounds`` rounds of each, alternating ABBA; each callable runs one round and returns its cost.

    A full collection before every round keeps one side's garbage from being collected on the other's clock;
    collection *during* a round stays in, because the application pays for it.
    """
    for _ in range(warmup):
        baseline()
        subject()
    b: list[float] = []
    s: list[float] = []
    for i in range(rounds):
        order = ((b, baseline), (s, subject)) if i % 2 == 0 else ((s, subject), (b, baseline))
        for out, fn in order:
            gc.collect()
            out.append(fn())
    return Comparison(b, s)


@dataclass
class Figure:
    """One row of the table and one entry of the JSON."""

    id: str
    title: str
    measured: str
    baseline: str
    ratio: float | None
    target: str
    status: Status
    note: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    suite: str = ""  # the module that measured it (set by the runner)

    @property
    def met(self) -> bool | None:
        return {"met": True, "missed": False}.get(self.status)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["met"] = self.met
        return out


def part(rows: Sequence[tuple[str, str]], measure: Callable[[], list[Figure]]) -> list[Figure]:
    """One independently measured part of a suite: its figures, or, when it raises, one ``error`` row for each of
    ``rows`` (id, title) with the exception (its traceback on stderr). A suite made of parts keeps the figures of
    the parts that ran when another crashes (a callgrind child on a loaded machine must not throw away the CPU-time
    figures measured before it); an error row still makes ``python -m benchmarks`` exit 1."""
    try:
        return measure()
    except Exception as exc:  # noqa: BLE001 - reported as error rows, the run exits 1
        traceback.print_exc()
        return [Figure(fig_id, title, "-", "-", None, "-", "error", note=f"crashed: {exc!r}") for fig_id, title in rows]


def at_most(ratio: float, limit: float) -> Status:
    return "met" if ratio <= limit else "missed"


def unavailable(fig_id: str, title: str, target: str, why: str) -> Figure:
    """A row for a figure whose subject does not exist yet: no number rather than a made-up one."""
    return Figure(fig_id, title, "-", "-", None, target, "unavailable", note=why)


def us(ns: float) -> str:
    return f"{ns / 1000:.2f} us"


def mib(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:.1f} MiB"


def run_child(module: str, args: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None) -> Any:
    """Run ``python -m module args --json FILE`` in a fresh process and a scratch folder; return the JSON.

    Figures that need a clean process (memory from a known start) or that import heavy peers with side
    effects (files in the working folder, global settings) run this way. The child's output is discarded
    unless it fails.
    """
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        out = Path(tmp) / "result.json"
        child_env = dict(os.environ)
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
        child_env.update(env or {})
        proc = subprocess.run(
            [sys.executable, "-m", module, *args, "--json", str(out)],
            cwd=tmp,
            env=child_env,
            stdout=subprocess.DEVNULL,  # peers print progress indicators; errors arrive on stderr
            stderr=subprocess.PIPE,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0 or not out.exists():
            tail = proc.stderr.decode(errors="replace")[-2000:]
            raise RuntimeError(f"{module} exited with {proc.returncode}:\n{tail}")
        return json.loads(out.read_text())
