"""Evaluate run files against a dataset: stream, score every case, aggregate, gate.

Memory stays flat in the number of cases: cases stream from the dataset, run lines stream from the run files,
aggregates are sums, and per-case rows spool to a temporary file the reports read back. Large datasets are
scored in worker processes (``offline.pipeline``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from otel_toolcall_eval.config import ConfigError, EvalConfig
from otel_toolcall_eval.judge.verdicts import read_verdicts
from otel_toolcall_eval.offline.aggregate import combine_scores
from otel_toolcall_eval.offline.gate import compile_gate, evaluate_gate
from otel_toolcall_eval.offline.judge_gate import check_judge_gate, judge_summary
from otel_toolcall_eval.offline.pipeline import run_pipeline
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.result import EvalResult
from otel_toolcall_eval.offline.scores import JudgeScores

PARALLEL_FROM_BYTES = 16_000_000  # below this, starting worker processes costs more than it saves


def auto_jobs(dataset: str | Path) -> int:
    try:
        size = Path(dataset).stat().st_size
    except OSError:
        return 1
    if size < PARALLEL_FROM_BYTES:
        return 1
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def evaluate(
    dataset: str | Path,
    runs: list[str | Path],
    config: EvalConfig | None = None,
    *,
    dataset_format: str | None = None,
    jobs: int | None = 1,
    junit: bool = False,
    progress: Callable[[int], None] | None = None,
    judge_verdicts: str | Path | None = None,
) -> EvalResult:
    """Score every case of ``dataset`` in each run file. Raises ``LocatedError`` on bad input.

    ``jobs``: worker processes; 1 scores inline, None picks ``auto_jobs``. Workers are spawned, so a script
    calling this with ``jobs != 1`` needs the usual ``if __name__ == "__main__":`` guard. ``junit``: render
    each case's JUnit test case while scoring (in the workers), for ``write_junit``. ``judge_verdicts``: a
    verdicts file of ``judge run``, reported under ``summary.judge``; a gate on it needs a calibrated judge
    (``JudgeUncalibrated`` before anything is scored).
    """
    config = config or EvalConfig()
    try:
        gate = compile_gate(config.gate)  # every gated key read from a typed field, checked before scoring
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    verdicts = read_verdicts(judge_verdicts) if judge_verdicts is not None else None
    check_judge_gate(config, verdicts)
    try:
        prep = Preparer(config)
    except ValueError as exc:  # the embedding factory failed to import or build
        raise ConfigError(str(exc)) from None
    run_paths = [str(r) for r in runs]
    if jobs is None:
        jobs = auto_jobs(dataset)
    outcome = run_pipeline(
        dataset, run_paths, config, prep, dataset_format=dataset_format, jobs=jobs, junit=junit, progress=progress
    )
    aggregates, store = outcome.aggregates, outcome.store
    per_run = [
        a.scores(policies=prep.has_policies, session_budget=prep.config.sessions.step_budget) for a in aggregates
    ]
    report, spread = combine_scores(per_run)
    if verdicts is not None:
        judged = {q: JudgeScores(**block) for q, block in judge_summary(verdicts).items()}
        report = replace(report, summary=replace(report.summary, judge=judged))
    checked = evaluate_gate(report, spread, gate, len(run_paths))
    return EvalResult(str(dataset), run_paths, per_run, report, spread, store, checked, config)
