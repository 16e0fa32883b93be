"""Offline ``eval``: scoring throughput against the peers' deterministic tool-call scorers, and end to end.

Throughput (child process, so the peers' imports and side effects stay out of the suite's process): the same
cases of three calls, each side's inputs built before timing, rounds interleaved. Ours is
``offline.score.score_case`` (all seven metrics of a case); Ragas is ``ToolCallF1`` from
``ragas.metrics.collections``, awaited in one event loop (its fastest path, one metric); DeepEval is
``ToolCorrectnessMetric.measure()`` as shipped (async mode, progress indicator). The peers need
``XDG_DATA_HOME`` (Ragas writes an id file there) and an ``OPENAI_API_KEY`` (DeepEval refuses to build the metric
without one, though it never calls a model): the child gets a scratch folder and a dummy key; no network is used.

End to end: ``otel-toolcall-eval eval`` as users run it (read the JSONL files, score, write the JSON, Markdown,
JUnit and HTML reports), timed by wall clock, peak RSS from the child's own resource usage; "flat" compares the
peak with the same command on a tenth of the cases.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import Comparison, Figure, Sizes, at_most, interleave, mib, run_child, unavailable
from benchmarks.offline_cases import (
    CITIES,
    actual_calls,
    arguments_object,
    cycle,
    dataset_row,
    expected_calls,
    run_line,
    write_files,
)

RAGAS_TARGET = 2.0  # our cost per case / Ragas ToolCallF1's
DEEPEVAL_TARGET = 0.1  # our cost per case / DeepEval's: >= 10x faster
E2E_SECONDS = 60.0
E2E_FLAT_GROWTH = 32 * 2**20  # peak RSS for 10x the cases may grow this much and still be "flat"
POOL = 20_000  # distinct cases; larger rounds cycle through them


def ours_missing() -> str | None:
    try:
        from otel_toolcall_eval.dataset.models import DatasetCase  # noqa: F401
        from otel_toolcall_eval.offline.prepare import Preparer  # noqa: F401
        from otel_toolcall_eval.offline.runs import parse_run_line  # noqa: F401
        from otel_toolcall_eval.offline.score import score_case  # noqa: F401
    except ImportError as exc:
        return f"otel_toolcall_eval.offline not available yet ({exc})"
    return None


def peers_missing() -> str | None:
    missing = [name for name in ("ragas", "deepeval") if importlib.util.find_spec(name) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (the optional 'bench' extra)"
    return None


# --- the child: throughput ---------------------------------------------------------------------


def _ours(pool: int) -> Callable[[int], float]:
    import orjson

    from otel_toolcall_eval import EvalConfig
    from otel_toolcall_eval.dataset.models import DatasetCase
    from otel_toolcall_eval.offline.prepare import Preparer
    from otel_toolcall_eval.offline.runs import parse_run_line
    from otel_toolcall_eval.offline.score import score_case

    prep = Preparer(EvalConfig())
    inputs = [
        (
            prep.prepare(DatasetCase.model_validate(dataset_row(i)), i + 1),
            parse_run_line("runs", i + 1, orjson.dumps(run_line(i))),
        )
        for i in range(pool)
    ]
    exact, wrong = score_case(*inputs[0], prep), score_case(*inputs[2], prep)
    if not (exact.f1 == 1.0 and wrong.f1 < 1.0):
        raise AssertionError(f"our scorer gave f1 {exact.f1} (exact) and {wrong.f1} (wrong tool)")

    def run(count: int) -> float:
        clock = time.perf_counter_ns
        t0 = clock()
        for k in cycle(pool, count):
            case, entry = inputs[k]
            score_case(case, entry, prep)
        return (clock() - t0) / count

    return run


def _ragas(pool: int) -> Callable[[int], float]:
    from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
    from ragas.metrics.collections import ToolCallF1

    metric = ToolCallF1()
    inputs = []
    for i in range(pool):
        calls = [ToolCall(name=c["name"], args=arguments_object(c["arguments"])) for c in actual_calls(i)]
        messages: list[HumanMessage | AIMessage | ToolMessage] = [
            HumanMessage(content=dataset_row(i)["user_input"]),
            AIMessage(content="", tool_calls=calls),
        ]
        inputs.append((messages, [ToolCall(name=e["name"], args=e["args"]) for e in expected_calls(i)]))

    async def score(count: int) -> list[float]:
        return [
            (await metric.ascore(user_input=u, reference_tool_calls=r)).value
            for u, r in (inputs[k] for k in cycle(pool, count))
        ]

    values = asyncio.run(score(3))
    if not (values[0] == 1.0 and values[2] < 1.0):
        raise AssertionError(f"Ragas ToolCallF1 gave {values}")

    def run(count: int) -> float:
        async def loop() -> None:
            for k in cycle(pool, count):
                messages, reference = inputs[k]
                await metric.ascore(user_input=messages, reference_tool_calls=reference)

        t0 = time.perf_counter_ns()
        asyncio.run(loop())
        return (time.perf_counter_ns() - t0) / count

    return run


def _deepeval(pool: int, *, indicator: bool) -> Callable[[int], float]:
    from deepeval.metrics import ToolCorrectnessMetric
    from deepeval.test_case import LLMTestCase
    from deepeval.test_case import ToolCall as DeepEvalCall

    metric = ToolCorrectnessMetric()
    inputs = [
        LLMTestCase(
            input=dataset_row(i)["user_input"],
            actual_output="",
            tools_called=[
                DeepEvalCall(name=c["name"], input_parameters=arguments_object(c["arguments"])) for c in actual_calls(i)
            ],
            expected_tools=[DeepEvalCall(name=e["name"], input_parameters=e["args"]) for e in expected_calls(i)],
        )
        for i in range(pool)
    ]
    metric.measure(inputs[0], _show_indicator=indicator)
    exact = metric.score
    metric.measure(inputs[2], _show_indicator=indicator)
    if not (exact == 1.0 and metric.score is not None and metric.score < 1.0):
        raise AssertionError(f"DeepEval ToolCorrectness gave {exact} and {metric.score}")

    def run(count: int) -> float:
        t0 = time.perf_counter_ns()
        for k in cycle(pool, count):
            metric.measure(inputs[k], _show_indicator=indicator)
        return (time.perf_counter_ns() - t0) / count

    return run


def throughput(cases: int, deepeval_cases: int, rounds: int) -> dict[str, Any]:
    pool = min(cases, POOL)
    de_pool = min(deepeval_cases, pool)
    ours, ragas = _ours(pool), _ragas(pool)
    deepeval, deepeval_quiet = _deepeval(de_pool, indicator=True), _deepeval(de_pool, indicator=False)
    vs_ragas = interleave(lambda: ragas(cases), lambda: ours(cases), rounds)
    vs_deepeval = interleave(lambda: deepeval(deepeval_cases), lambda: ours(deepeval_cases), rounds)
    vs_quiet = interleave(lambda: deepeval_quiet(deepeval_cases), lambda: ours(deepeval_cases), rounds)
    return {
        "cases": cases,
        "deepeval_cases": deepeval_cases,
        "distinct_cases": pool,
        "vs_ragas": vs_ragas.as_json(),
        "vs_deepeval": vs_deepeval.as_json(),
        "vs_deepeval_no_indicator": vs_quiet.as_json(),
    }


# --- the parent: figures -----------------------------------------------------------------------


def _cost_figure(
    fig_id: str, title: str, data: dict[str, Any], peer: str, target: float, target_text: str, **extra: Any
) -> Figure:
    cmp = Comparison(data["baseline_rounds"], data["subject_rounds"])
    return Figure(
        fig_id,
        title,
        f"{cmp.subject_median / 1000:.2f} us/case ({1e9 / cmp.subject_median:,.0f} cases/s)",
        f"{cmp.baseline_median / 1000:.2f} us/case ({peer})",
        cmp.ratio,
        target_text,
        at_most(cmp.ratio, target) if target else "info",
        data={"unit": "ns/case", **data, **extra},
    )


def _throughput_figures(sizes: Sizes) -> list[Figure]:
    rounds = min(sizes.rounds, 5)
    with tempfile.TemporaryDirectory(prefix="bench-xdg-") as xdg:
        env = {"XDG_DATA_HOME": xdg, "DEEPEVAL_TELEMETRY_OPT_OUT": "1", "RAGAS_DO_NOT_TRACK": "true"}
        env.setdefault("OPENAI_API_KEY", os.environ.get("OPENAI_API_KEY") or "sk-dummy-not-used")
        args = [
            "--cases",
            str(sizes.offline_cases),
            "--deepeval-cases",
            str(sizes.deepeval_cases),
            "--rounds",
            str(rounds),
        ]
        result = run_child("benchmarks.offline_eval", args, timeout=sizes.child_timeout, env=env)
    n = f"{result['cases']:,} cases of 3 calls"
    return [
        _cost_figure(
            "offline.vs_ragas",
            f"offline scoring, all seven metrics, vs Ragas ToolCallF1 (one metric), {n}",
            result["vs_ragas"],
            "Ragas ToolCallF1",
            RAGAS_TARGET,
            f"<= {RAGAS_TARGET}x",
        ),
        _cost_figure(
            "offline.vs_deepeval",
            f"offline scoring vs DeepEval ToolCorrectness measure() as shipped, {result['deepeval_cases']:,} cases",
            result["vs_deepeval"],
            "DeepEval",
            DEEPEVAL_TARGET,
            f"<= {DEEPEVAL_TARGET}x (>= 10x faster)",
        ),
        _cost_figure(
            "offline.vs_deepeval_no_indicator",
            "offline scoring vs DeepEval measure() without its progress indicator (for reference)",
            result["vs_deepeval_no_indicator"],
            "DeepEval, no indicator",
            0.0,
            "-",
        ),
    ]


MATCHING_SIZES = (1, 2, 3, 5, 10)


def _matching_inputs(n: int, same_tool: bool) -> tuple[Any, Any, Any]:
    """One case of ``n`` expected calls and its run: one tool called ``n`` times (the calls reversed, each
    expected call leaving ``unit`` open or pinning it), or ``n`` distinct tools called once each."""
    import orjson

    from otel_toolcall_eval import EvalConfig
    from otel_toolcall_eval.dataset.models import DatasetCase
    from otel_toolcall_eval.offline.prepare import Preparer
    from otel_toolcall_eval.offline.runs import parse_run_line

    names = ["get_weather" if same_tool else f"tool_{k}" for k in range(n)]
    expected: list[dict[str, Any]] = [
        {"name": name, "args": {"city": CITIES[k % len(CITIES)], **({"unit": "C"} if k % 2 else {})}}
        for k, name in enumerate(names)
    ]
    made = [{"name": e["name"], "arguments": {"unit": "C", **e["args"]}} for e in expected]
    prep = Preparer(EvalConfig())
    case = DatasetCase.model_validate({"id": "m", "user_input": "u", "expected_tool_calls": expected})
    run = parse_run_line("runs", 1, orjson.dumps({"id": "m", "tool_calls": made[::-1]}))
    return prep.prepare(case, 1), run, prep


def matching_costs(repeat: int) -> dict[str, dict[int, float]]:
    """ns per ``score_case`` for 1-10 calls: all of one tool (an optimal assignment) and all distinct (none)."""
    from otel_toolcall_eval.offline.score import score_case

    out: dict[str, dict[int, float]] = {"same_tool": {}, "distinct_tools": {}}
    for kind, same in (("same_tool", True), ("distinct_tools", False)):
        for n in MATCHING_SIZES:
            case, run, prep = _matching_inputs(n, same)
            if not score_case(case, run, prep).passed:
                raise AssertionError(f"the matching case of {n} {kind} calls did not pass")
            best = float("inf")
            for _ in range(5):  # the best of five rounds: this figure is information, not a target
                t0 = time.perf_counter_ns()
                for _ in range(repeat):
                    score_case(case, run, prep)
                best = min(best, (time.perf_counter_ns() - t0) / repeat)
            out[kind][n] = best
    return out


def _matching_figure(sizes: Sizes) -> Figure:
    costs = matching_costs(max(20, sizes.offline_cases // 10))
    same, distinct = costs["same_tool"], costs["distinct_tools"]
    top = MATCHING_SIZES[-1]
    return Figure(
        "offline.matching",
        f"offline scoring of one case of n calls of one tool (optimal pairing), n = {', '.join(map(str, same))}",
        ", ".join(f"{n}: {v / 1000:.0f} us" for n, v in same.items()),
        ", ".join(f"{n}: {v / 1000:.0f} us" for n, v in distinct.items()) + " (n distinct tools)",
        same[top] / distinct[top],
        "-",
        "info",
        note=f"ratio: {top} calls of one tool against {top} distinct tools",
        data={"unit": "ns/case", "same_tool": same, "distinct_tools": distinct},
    )


def _run_eval(folder: Path, cases: int) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one ``otel-toolcall-eval eval`` run over ``cases`` cases.

    The command's defaults as users get them (worker processes for large datasets). The peak is ``os.wait4``'s
    ``ru_maxrss``: the largest process of the run (the command or a worker it waited for), not their sum.
    """
    dataset, runs = write_files(folder, cases)
    out = folder / f"report-{cases}"
    cmd = [
        sys.executable, "-m", "otel_toolcall_eval.cli", "eval", "--dataset", str(dataset), "--runs", str(runs),
        "--json", f"{out}.json", "--markdown", f"{out}.md", "--junit", f"{out}.xml", "--html", f"{out}.html",
        "--no-progress",
    ]  # fmt: skip
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, cwd=folder, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 1):  # 1 is a failed gate: still a complete run
            err.seek(0)
            raise RuntimeError(f"eval exited with {proc.returncode}: {err.read().decode(errors='replace')[-2000:]}")
    for path in (dataset, runs):
        path.unlink()
    return elapsed, usage.ru_maxrss * 1024


def _end_to_end_figures(sizes: Sizes) -> list[Figure]:
    small_n = max(1, sizes.e2e_cases // 10)
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        small_s, small_rss = _run_eval(Path(tmp), small_n)
        full_s, full_rss = _run_eval(Path(tmp), sizes.e2e_cases)
    growth = full_rss - small_rss
    data = {
        "cases": sizes.e2e_cases,
        "seconds": round(full_s, 2),
        "peak_rss": full_rss,
        "small_cases": small_n,
        "small_seconds": round(small_s, 2),
        "small_peak_rss": small_rss,
    }
    return [
        Figure(
            "offline.e2e_time",
            f"offline eval end to end (read, score, write JSON/Markdown/JUnit/HTML), {sizes.e2e_cases:,} cases",
            f"{full_s:.1f} s ({sizes.e2e_cases / full_s:,.0f} cases/s)",
            f"{small_s:.1f} s for {small_n:,} cases",
            full_s / small_s,
            f"< {E2E_SECONDS:.0f} s" + ("" if sizes.e2e_cases >= 1_000_000 else " (at 1,000,000 cases)"),
            ("met" if full_s < E2E_SECONDS else "missed") if sizes.e2e_cases >= 1_000_000 else "info",
            note="ratio: time against the same run on a tenth of the cases (10x is linear)",
            data={"unit": "s", **data},
        ),
        Figure(
            "offline.e2e_memory",
            f"offline eval end to end, peak RSS, {sizes.e2e_cases:,} cases",
            f"{mib(full_rss)} (+{mib(growth)})",
            f"{mib(small_rss)} for {small_n:,} cases",
            full_rss / small_rss,
            f"flat: <= +{mib(E2E_FLAT_GROWTH)} for 10x the cases",
            "met" if growth <= E2E_FLAT_GROWTH else "missed",
            data={"unit": "bytes", **data},
        ),
    ]


def run(sizes: Sizes) -> list[Figure]:
    why = ours_missing()
    if why is not None:
        return [
            unavailable("offline.vs_ragas", "offline scoring vs Ragas ToolCallF1", f"<= {RAGAS_TARGET}x", why),
            unavailable("offline.vs_deepeval", "offline scoring vs DeepEval", f"<= {DEEPEVAL_TARGET}x", why),
            unavailable("offline.e2e_time", "offline eval end to end", f"< {E2E_SECONDS:.0f} s", why),
        ]
    peers = peers_missing()
    if peers is None:
        figures = _throughput_figures(sizes)
    else:
        figures = [
            unavailable("offline.vs_ragas", "offline scoring vs Ragas ToolCallF1", f"<= {RAGAS_TARGET}x", peers),
            unavailable("offline.vs_deepeval", "offline scoring vs DeepEval", f"<= {DEEPEVAL_TARGET}x", peers),
        ]
    return [*figures, _matching_figure(sizes), *_end_to_end_figures(sizes)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.offline_eval", description=__doc__)
    parser.add_argument("--cases", type=int, required=True, help="cases per round (ours and Ragas)")
    parser.add_argument("--deepeval-cases", type=int, required=True, help="cases per round against DeepEval")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    args.json.write_text(json.dumps(throughput(args.cases, args.deepeval_cases, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
