"""Offline judge runs: ask the judge's questions about the calls of a run file, with a response cache.

Each case of the dataset is scored as ``eval`` scores it (so a question's ``when`` sees the same outcome and
step), then every call gets the questions that apply to it, with what the dataset knows: the user's request
(``user_input``), the offered tools and their descriptions, and, for a failed call, the calls that followed as
its reaction. The requests go through the online judge's own code (``Judge.ask``): the same prompt, redaction,
retries, answer parsing and budget ceiling (``judge.budget``). A verdict already in the cache (keyed by the
question's fingerprint and the exact data it receives, ``judge.cache``) costs nothing and sends nothing.

The output is a verdicts file (JSONL, one judged question a line, format ``judge.verdicts``): what
``eval --judge-verdicts`` reports and gates on and what ``judge queue`` samples for human labelling. Bounded:
at most ``max_calls`` calls are judged per run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
from opentelemetry import _logs as logs_api
from opentelemetry import metrics as metrics_api
from opentelemetry import trace as trace_api

from otel_toolcall_eval._files import write_atomically
from otel_toolcall_eval.config import ConfigError, EvalConfig
from otel_toolcall_eval.config.judge import QuestionConfig
from otel_toolcall_eval.dataset import read_cases
from otel_toolcall_eval.judge.cache import ResponseCache, cache_key
from otel_toolcall_eval.judge.context import MAX_LATER_CALLS, JudgeItem, Reaction, free_text_arguments, later_call
from otel_toolcall_eval.judge.emit import MAX_EXPLANATION, Verdict
from otel_toolcall_eval.judge.fingerprint import fingerprints
from otel_toolcall_eval.judge.judge import BudgetExhausted, Judge
from otel_toolcall_eval.judge.questions import applies, call_view, missing, question_data
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runs import RunCase, iter_run
from otel_toolcall_eval.offline.score import score_case

DEFAULT_MAX_CALLS: Final = 10_000


@dataclass
class JudgeRunSummary:
    """What a run asked and got; ``verdicts`` counts the questions answered (asked or from the cache)."""

    questions_asked: int = 0
    cached: int = 0
    errors: int = 0
    first_error: str | None = None  # the first provider error, as the judge reported it (kind: message)
    skipped: int = 0  # questions whose data the dataset does not have
    budget_stopped: bool = False
    calls_left_out: int = 0  # beyond max_calls
    cost: float = 0.0
    by_question: dict[str, int] = field(default_factory=dict)

    @property
    def verdicts(self) -> int:
        return self.cached + self.questions_asked - self.errors


@dataclass(slots=True)
class _Task:
    case: str
    call: int
    item: JudgeItem
    question: QuestionConfig
    data: dict[str, Any]
    key: str
    flagged: bool
    view: dict[str, Any]


def judge_run(
    dataset: str | Path,
    run: str | Path,
    config: EvalConfig,
    out: str | Path,
    *,
    cache: ResponseCache | None = None,
    max_calls: int = DEFAULT_MAX_CALLS,
    dataset_format: str | None = None,
    transport: Any = None,
) -> JudgeRunSummary:
    """Judge the calls of ``run`` (cases from ``dataset``), write the verdicts to ``out``; ``LocatedError`` on
    bad input, ``ConfigError`` without a judge section."""
    judge_config = config.judge
    if judge_config is None:
        raise ConfigError("judge: the config has no judge section (no judge section, no judge)")
    judge = Judge(
        judge_config,
        tracer_provider=trace_api.NoOpTracerProvider(),
        meter_provider=metrics_api.NoOpMeterProvider(),
        logger_provider=logs_api.NoOpLoggerProvider(),
        known_tools=config.policy().tools,
        transport=transport,
    )
    prints = fingerprints(judge_config)
    summary = JudgeRunSummary()
    tasks = list(_tasks(dataset, run, config, judge, prints, summary, max_calls, dataset_format))
    lines = asyncio.run(_ask_all(judge, tasks, prints, cache, summary))
    with write_atomically(out, "wb") as handle:
        for line in lines:
            handle.write(orjson.dumps(line) + b"\n")
    return summary


def _tasks(
    dataset: str | Path,
    run: str | Path,
    config: EvalConfig,
    judge: Judge,
    prints: dict[str, str],
    summary: JudgeRunSummary,
    max_calls: int,
    dataset_format: str | None,
) -> Iterator[_Task]:
    judge_config = judge.config
    prep = Preparer(config)
    runs: dict[str, RunCase] = {}
    for line in iter_run(run):
        runs.setdefault(line.id, line)
    calls = 0
    for case in read_cases(dataset, dataset_format):
        found = runs.get(case.id)
        if found is None or not found.calls:
            continue
        prepared = prep.prepare(case)
        entry = found
        result = score_case(prepared, entry, prep)
        offered = prepared.tools.offered or dict(config.policy().tools)
        for index, (record, score) in enumerate(zip(entry.calls, result.checks, strict=True)):
            if calls >= max_calls:
                summary.calls_left_out += 1
                continue
            calls += 1
            definition = offered.get(record.name)
            item = JudgeItem(
                record=record,
                score=score,
                questions=(),
                request=case.user_input or None,
                tool_description=definition.description if definition is not None else None,
                available_tools=tuple(offered),
            )
            flagged = judge.sampler.risk_class(score) != 0
            if score.arguments is not None:
                item.free_text = free_text_arguments(score.arguments, judge_config.min_free_text_chars)
            later = [
                later_call(r, s)
                for r, s in list(zip(entry.calls, result.checks, strict=True))[index + 1 : index + 1 + MAX_LATER_CALLS]
            ]
            item.reaction = Reaction(later_calls=later) if later else None
            for question in judge_config.questions:
                if not applies(question, item):
                    continue
                if missing(question, item) is not None:
                    summary.skipped += 1
                    continue
                data = question_data(question, item, judge.redactor, judge_config.max_field_chars)
                key = cache_key(prints[question.name], question.name, data)
                view = call_view(item, judge.redactor, judge_config.max_field_chars)
                yield _Task(case.id, index, item, question, data, key, flagged, view)


async def _ask_all(
    judge: Judge, tasks: list[_Task], prints: dict[str, str], cache: ResponseCache | None, summary: JudgeRunSummary
) -> list[dict[str, Any]]:
    lines: list[dict[str, Any] | None] = [None] * len(tasks)
    slots = asyncio.Semaphore(judge.config.concurrency)
    stop = asyncio.Event()

    async def one(i: int, task: _Task, client: Any) -> None:
        hit = cache.get(task.key) if cache is not None else None
        if hit is not None:
            summary.cached += 1
            lines[i] = _line(task, prints, hit, cached=True)
            return
        if stop.is_set():
            return
        async with slots:
            if stop.is_set():
                return
            try:
                verdict = await judge.ask(task.question, task.item, client)
            except BudgetExhausted:
                summary.budget_stopped = True
                stop.set()
                return
        summary.questions_asked += 1
        summary.cost += verdict.cost
        value = _stored(verdict)
        if verdict.error is None and cache is not None:
            cache.put(task.key, value)
        if verdict.error is not None:
            summary.errors += 1
            if summary.first_error is None:
                summary.first_error = f"{verdict.error}: {verdict.error_message or ''}".rstrip(": ")[:500]
        lines[i] = _line(task, prints, value, cached=False, cost=verdict.cost)

    async with judge.client() as client:
        await asyncio.gather(*(one(i, t, client) for i, t in enumerate(tasks)))
    out = [line for line in lines if line is not None]
    for line in out:
        summary.by_question[line["question"]] = summary.by_question.get(line["question"], 0) + 1
    return out


def _stored(verdict: Verdict) -> dict[str, Any]:
    return {
        "label": verdict.label,
        "score": verdict.score,
        "explanation": (verdict.explanation or "")[:MAX_EXPLANATION] if verdict.error is None else None,
        "error": verdict.error,
        "model": verdict.model,
        "input_tokens": verdict.input_tokens,
        "output_tokens": verdict.output_tokens,
    }


def _line(
    task: _Task, prints: dict[str, str], value: dict[str, Any], *, cached: bool, cost: float = 0.0
) -> dict[str, Any]:
    return {
        "item": f"{task.case}/{task.call}",
        "case": task.case,
        "call": task.call,
        "tool": task.item.record.name,
        "flagged": task.flagged,
        "question": task.question.name,
        "fingerprint": prints[task.question.name],
        "label": value.get("label"),
        "score": value.get("score"),
        "explanation": value.get("explanation"),
        "error": value.get("error"),
        "model": value.get("model"),
        "cost": cost,
        "cached": cached,
        "data": task.data,
        "tool_call": task.view,
    }
