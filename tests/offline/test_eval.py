"""``otel-toolcall-eval eval`` end to end: files in, reports out, the gate's exit codes, the baseline diff."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.dataset import template_cases, write_cases
from otel_toolcall_eval.offline.pipeline import run_pipeline
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runner import evaluate
from tests.helpers import BAD, GOOD, write_run

FORBIDDEN = {**GOOD, "clear-calendar": [{"name": "delete_all_events", "arguments": {}}]}


pytestmark = pytest.mark.usefixtures("wide_console")  # conftest.py


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gate.yaml"
    path.write_text(text)
    return path


GATE = """
gate:
  min:
    tool_selection.f1: 0.9
    argument_accuracy: 0.8
    slices.ordered-dependency.order_score: 0.9
  max:
    unnecessary_call_rate: 0.0
"""


def test_a_correct_run_passes_and_writes_every_report(
    tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path, GOOD, extra={"order-status": {"latency_ms": 800, "tokens": 340}})
    out = {k: tmp_path / f"report.{k}" for k in ("json", "md", "xml", "html")}
    code = main(
        ["eval", "--dataset", str(dataset), "--runs", str(run), "--config", str(_config(tmp_path, GATE)),
         "--json", str(out["json"]), "--markdown", str(out["md"]), "--junit", str(out["xml"]), "--html", str(out["html"])]
    )  # fmt: skip
    assert code == 0
    report = json.loads(out["json"].read_text())
    assert report["summary"]["tool_selection"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "mean_case_f1": 1.0}
    assert report["summary"]["unnecessary_call_rate"] == 0.0 and report["summary"]["pass_rate"] == 1.0
    assert report["per_tool"]["get_order"] == {
        "expected": 1, "correct": 1, "recall": 1.0, "called": 1, "precision": 1.0, "argument_accuracy": 1.0,
    }  # fmt: skip
    assert report["gate"]["passed"] is True and report["gate"]["failures"] == []
    case = next(c for c in report["cases"] if c["id"] == "order-status")
    required = {"id", "precision", "recall", "f1", "schema_valid", "required_args_match", "order_score",
                "unnecessary_calls", "parse_failures", "must_not_call_violations", "passed"}  # fmt: skip
    assert required <= set(case) and case["latency_ms"] == 800.0 and case["required_args_match"] is True
    # no trajectory policies configured: no policy count, row key or gate check (reports as before)
    assert "policy_violations" not in report["summary"] and all("policy_violations" not in c for c in report["cases"])
    assert [c["kind"] for c in report["gate"]["checks"]].count("policy") == 0
    assert [c["id"] for c in report["cases"]] == [c.id for c in template_cases()]
    assert "✅ Tool-call evaluation passed" in out["md"].read_text()
    assert out["html"].read_text().startswith("<!doctype html>")
    suites = ET.parse(out["xml"]).getroot()
    assert suites.get("tests") == str(5 + len(report["gate"]["checks"])) and suites.get("failures") == "0"
    stdout = capsys.readouterr().out
    assert "5 cases, 5 passed" in stdout and "gate passed" in stdout and "Per tool" in stdout


def test_a_regression_fails_the_gate_and_the_markdown_shows_the_diff(
    tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(_config(tmp_path, GATE))
    baseline = tmp_path / "main.json"
    assert (
        main(["eval", "--dataset", str(dataset), "--runs", str(write_run(tmp_path, GOOD)), "--json", str(baseline)])
        == 0
    )
    md, js, xml = tmp_path / "pr.md", tmp_path / "pr.json", tmp_path / "pr.xml"
    bad = write_run(tmp_path, BAD, "bad.jsonl")
    code = main(
        ["eval", "--dataset", str(dataset), "--runs", str(bad), "--config", config, "--baseline", str(baseline),
         "--markdown", str(md), "--json", str(js), "--junit", str(xml)]
    )  # fmt: skip
    assert code == 1
    report = json.loads(js.read_text())
    failures = report["gate"]["failures"]
    assert any(f.startswith("tool_selection.f1 ") for f in failures)
    assert any(f.startswith("slices.ordered-dependency.order_score 0.5000 < 0.9") for f in failures)
    assert any(f.startswith("unnecessary_call_rate 1.0000 > 0") for f in failures)
    cases = {c["id"]: c for c in report["cases"]}
    assert cases["order-status"]["parse_failures"] == 1 and cases["order-status"]["f1"] == 1.0
    assert cases["dentist-and-reminder"]["recall"] == 0.5 and cases["dentist-and-reminder"]["precision"] == 1.0
    assert cases["thanks"]["unnecessary_calls"] == 1 and cases["clear-calendar"]["passed"] is True
    text = md.read_text()
    assert text.startswith("## ❌ Tool-call evaluation failed")
    assert "**4 regressed** · 0 fixed" in text
    assert "| `dentist-and-reminder` | missing create_reminder | recall 1.000 → 0.500; f1 1.000 → 0.667" in text
    assert "| `move-standup` | order: expected list_events > update_event; got update_event > list_events" in text
    assert "| `tool_selection.recall` | 0.833 | 1.000 | -0.167 |" in text
    junit = ET.parse(xml).getroot()
    failed = {tc.get("name") for tc in junit.iter("testcase") if tc.find("failure") is not None}
    assert {"order-status", "dentist-and-reminder", "move-standup", "thanks"} <= failed
    assert "clear-calendar" not in failed
    assert "gate failed" in capsys.readouterr().out


def test_must_not_call_fails_the_run_without_any_threshold(
    tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    js = tmp_path / "r.json"
    assert (
        main(["eval", "--dataset", str(dataset), "--runs", str(write_run(tmp_path, FORBIDDEN)), "--json", str(js)]) == 1
    )
    gate = json.loads(js.read_text())["gate"]
    assert gate["failures"] == ["must-not-call: 1 call(s) of forbidden tools (cases: clear-calendar)"]
    out = capsys.readouterr().out
    assert "must-not-call: delete_all_events" in out and "no thresholds configured" in out


def test_n_samples_gate_on_the_mean_and_guard_the_spread(tmp_path: Path, dataset: Path) -> None:
    good, bad = write_run(tmp_path, GOOD, "a.jsonl"), write_run(tmp_path, BAD, "b.jsonl")
    steady = _config(tmp_path, "gate:\n  min: {pass_rate: 0.5}\n  max_spread: 0.2\n")
    js = tmp_path / "n.json"
    assert main(["eval", "--dataset", str(dataset), "--runs", str(good), str(good), "--config", str(steady)]) == 0
    code = main(
        ["eval", "--dataset", str(dataset), "--runs", str(good), str(bad), str(good), "--config", str(steady),
         "--json", str(js)]
    )  # fmt: skip
    assert code == 1
    report = json.loads(js.read_text())
    assert report["summary"]["pass_rate"] == pytest.approx((1.0 + 0.2 + 1.0) / 3)  # the mean passes 0.5 ...
    assert report["gate"]["failures"] == [
        "pass_rate varies by 0.8000 across 3 runs (max_spread 0.2)"
    ]  # ... not the spread
    assert report["spread"]["summary"]["pass_rate"] == pytest.approx(0.8)
    assert [r["summary"]["passed"] for r in report["runs_detail"]] == [5, 1, 5]
    flaky = next(c for c in report["cases"] if c["id"] == "thanks")
    assert flaky["samples"] == 3 and flaky["pass_rate"] == pytest.approx(2 / 3) and flaky["passed"] is False
    assert flaky["reasons"] == ["run 2: unexpected get_order"]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "order-status", "tool_calls": []}', "{not json"], "run.jsonl:2: not valid JSON"),
        (['{"id": "order-status"}'], "run.jsonl:1: tool_calls: required (use [] when the agent called no tool)"),
        (['{"id": "order-status", "tool_calls": [{"arguments": "{}"}]}'], "run.jsonl:1: tool_calls.0.name: required"),
        (['{"id": "order-status", "tool_calls": [{"type": "function", "function": {"arguments": "{}"}}]}'],
         "run.jsonl:1: tool_calls.0.function.name: required"),
        (['{"id": "nope", "tool_calls": []}'], "run.jsonl:1: id: 'nope' is not a case of"),
        (['{"id": "thanks", "tool_calls": []}', '{"id": "thanks", "tool_calls": []}'],
         "run.jsonl:2: id: duplicate id 'thanks' (also line 1)"),
        (['{"id": "thanks", "tool_calls": [], "latency_ms": "fast"}'], "run.jsonl:1: latency_ms: must be a number"),
        (['{"id": "thanks", "tool_calls": [{"name": "a", "batch": "1"}]}'], "run.jsonl:1: tool_calls.0.batch: must be"),
    ],
)  # fmt: skip
def test_bad_run_files_exit_2_naming_file_line_and_field(
    tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str], lines: list[str], message: str
) -> None:
    run = tmp_path / "run.jsonl"
    run.write_text("\n".join(lines) + "\n")
    assert main(["eval", "--dataset", str(dataset), "--runs", str(run)]) == 2
    assert message in capsys.readouterr().err


def test_the_html_report_shows_the_baseline_diff_like_the_markdown(tmp_path: Path, dataset: Path) -> None:
    baseline = tmp_path / "main.json"
    assert (
        main(["eval", "--dataset", str(dataset), "--runs", str(write_run(tmp_path, GOOD)), "--json", str(baseline)])
        == 0
    )
    page = tmp_path / "pr.html"
    bad = write_run(tmp_path, BAD, "bad.jsonl")
    assert main(
        ["eval", "--dataset", str(dataset), "--runs", str(bad), "--baseline", str(baseline), "--html", str(page)]
    ) in (0, 1)
    html = page.read_text()
    assert '<h2 id="baseline">Changes since baseline' in html
    assert "4 regressed</b> · 0 fixed" in html
    assert "<td><code>dentist-and-reminder</code></td><td>missing create_reminder</td>" in html
    assert "recall 1.000 → 0.500; f1 1.000 → 0.667" in html
    assert "<td><code>tool_selection.recall</code></td><td>0.833</td><td>1.000</td><td>-0.167</td>" in html
    without = tmp_path / "plain.html"
    assert main(["eval", "--dataset", str(dataset), "--runs", str(bad), "--html", str(without)]) in (0, 1)
    assert "Changes since baseline" not in without.read_text()


def test_bad_dataset_config_and_baseline_exit_2(
    tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path, GOOD)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(dataset.read_text() + '{"id": "x", "user_input": "hi"}\n')
    assert main(["eval", "--dataset", str(broken), "--runs", str(run)]) == 2
    assert f"{broken}:6: expected_no_tool: false, but expected_tool_calls is empty" in capsys.readouterr().err
    duplicate = tmp_path / "dup.jsonl"
    duplicate.write_text(dataset.read_text() + dataset.read_text().splitlines()[3] + "\n")
    assert main(["eval", "--dataset", str(duplicate), "--runs", str(run)]) == 2
    assert f"{duplicate}:6: id: duplicate id 'thanks' (also line 4)" in capsys.readouterr().err
    bad_gate = _config(tmp_path, "gate:\n  min:\n    tool_selection.f2: 0.9\n")
    assert main(["eval", "--dataset", str(dataset), "--runs", str(run), "--config", str(bad_gate)]) == 2
    err = capsys.readouterr().err
    assert "gate.min" in err and "'tool_selection.f2': unknown metric" in err
    not_report = tmp_path / "not-a-report.json"
    not_report.write_text('{"hello": 1}')
    assert main(["eval", "--dataset", str(dataset), "--runs", str(run), "--baseline", str(not_report)]) == 2
    assert f"{not_report}: summary: missing" in capsys.readouterr().err
    assert main(["eval", "--dataset", str(tmp_path / "none.jsonl"), "--runs", str(run)]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_missing_run_lines_fail_the_case_and_the_gate(tmp_path: Path, dataset: Path) -> None:
    partial = {k: v for k, v in GOOD.items() if k != "thanks"}
    result = evaluate(dataset, [write_run(tmp_path, partial)])
    try:
        rows = {r["id"]: r for r in result.cases}
        assert rows["thanks"]["passed"] is False and rows["thanks"]["reasons"] == [
            "no line for this case in the run file"
        ]
        assert result.report["summary"]["missing_runs"] == 1
        assert result.gate.failures == ["missing runs: 1 case(s) have no line in a run file (cases: thanks)"]
    finally:
        result.close()


def _close(a: Any, b: Any) -> bool:
    """Equal, floats to 1e-9 (sums in another order differ in the last bits)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, abs=1e-9)
    return bool(a == b)


def _summary(dataset: Path, runs: list[Path], **kwargs: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with evaluate(dataset, list(runs), **kwargs) as result:
        return result.report, sorted(result.cases, key=lambda r: r["id"])


def test_run_order_does_not_matter(tmp_path: Path, dataset: Path) -> None:
    in_order = _summary(dataset, [write_run(tmp_path, BAD)])
    shuffled = dict(reversed(list(BAD.items())))
    assert _close(_summary(dataset, [write_run(tmp_path, shuffled, "shuffled.jsonl")]), in_order)


def test_chunks_pair_across_boundaries_and_workers_agree(tmp_path: Path) -> None:
    """Many small chunks (and a shuffled run) pair the same as one chunk; two worker processes agree."""
    cases = template_cases()
    big = [c.model_copy(update={"id": f"{c.id}-{i}"}) for i in range(40) for c in cases]
    dataset = tmp_path / "big.jsonl"
    write_cases(dataset, big)
    calls = {f"{case_id}-{i}": (BAD if i % 3 else GOOD)[case_id] for i in range(40) for case_id in GOOD}
    run = write_run(tmp_path, dict(sorted(calls.items(), key=lambda kv: hash(kv[0]) % 97)), "mixed.jsonl")
    config = EvalConfig()
    expected_report, expected_rows = _summary(dataset, [run])
    outcome = run_pipeline(dataset, [str(run), str(run)], config, Preparer(config), chunk_size=7)
    try:
        rows = sorted(outcome.store, key=lambda r: r["id"])
        assert [r["id"] for r in rows] == [r["id"] for r in expected_rows]
        assert [r["f1"] for r in rows] == [r["f1"] for r in expected_rows]
        assert _close(outcome.aggregates[0].report()["summary"], expected_report["summary"])
    finally:
        outcome.store.close()
    parallel_report, parallel_rows = _summary(dataset, [run], jobs=2)
    assert _close(parallel_report, expected_report) and parallel_rows == expected_rows


def test_csv_dataset_and_progress(tmp_path: Path) -> None:
    dataset = tmp_path / "dataset.csv"
    write_cases(dataset, template_cases())
    seen: list[int] = []
    report, rows = _summary(dataset, [write_run(tmp_path, GOOD)], progress=seen.append)
    assert report["summary"]["pass_rate"] == 1.0 and len(rows) == 5 and seen[-1] == 5


def test_confusion_matrix_and_per_slice(tmp_path: Path, dataset: Path) -> None:
    report, _ = _summary(dataset, [write_run(tmp_path, FORBIDDEN)])
    matrix = report["confusion_matrix"]
    labels = matrix["labels"]
    cell = {(e, c): matrix["counts"][i][j] for i, e in enumerate(labels) for j, c in enumerate(labels)}
    assert cell[("get_order", "get_order")] == 1 and cell[("(none)", "(none)")] == 1
    assert cell[("confirm_action", "delete_all_events")] == 1
    assert report["slices"]["must-not-call"]["pass_rate"] == 0.0 and report["slices"]["single-tool"]["pass_rate"] == 1.0
    assert report["difficulty"]["hard"]["cases"] == 2


def test_junit_rendered_while_scoring_equals_junit_rendered_after(tmp_path: Path, dataset: Path) -> None:
    from otel_toolcall_eval.offline.reports.junit import write_junit

    run = write_run(tmp_path, BAD)
    texts = []
    for during in (True, False):
        result = evaluate(dataset, [run], junit=during)
        try:
            assert result.cases.has_junit is during
            out = tmp_path / f"junit-{during}.xml"
            write_junit(result, out)
            texts.append(out.read_text().replace(result.generated_at, "T"))
        finally:
            result.close()
    assert texts[0] == texts[1]
    cases = [tc for tc in ET.fromstring(texts[0]).iter("testcase") if tc.get("classname", "").startswith("cases.")]
    assert len(cases) == 5 and sum(tc.find("failure") is not None for tc in cases) == 4


def test_duplicates_across_chunks_are_caught(tmp_path: Path, dataset: Path) -> None:
    from otel_toolcall_eval.dataset.errors import DatasetError
    from otel_toolcall_eval.offline.runs import RunFileError

    config = EvalConfig()
    lines = dataset.read_text().splitlines()
    twice = tmp_path / "twice.jsonl"
    twice.write_text("\n".join([*lines, lines[0]]) + "\n")  # order-status again, 5 lines later
    run = write_run(tmp_path, GOOD)
    with pytest.raises(DatasetError) as info:  # chunks of 2 lines: the two rows meet only in the id hashes
        run_pipeline(twice, [str(run)], config, Preparer(config), chunk_size=2)
    assert (info.value.line, info.value.field) == (6, "id")
    assert "duplicate id 'order-status' (also line 1)" in info.value.message
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text(run.read_text() + run.read_text().splitlines()[0] + "\n")
    with pytest.raises(RunFileError) as run_info:
        run_pipeline(dataset, [str(doubled)], config, Preparer(config), chunk_size=2)
    assert run_info.value.line == 6 and "the case already has a line in this run" in run_info.value.message


def test_blank_lines_keep_line_numbers(tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_text("\n\n".join(dataset.read_text().splitlines()) + "\n")  # a blank line between rows
    run = tmp_path / "run.jsonl"
    good = [json.dumps({"id": k, "tool_calls": v}) for k, v in GOOD.items()]
    run.write_text("\n".join([good[0], "   ", good[1], '{"id": "thanks"}', *good[2:]]) + "\n")
    assert main(["eval", "--dataset", str(spaced), "--runs", str(run)]) == 2
    assert f"{run}:4: tool_calls: required" in capsys.readouterr().err
    run.write_text("\n".join([good[0], "   ", *good[1:]]) + "\n")
    with evaluate(spaced, [run]) as result:
        assert result.cases.count == 5 and result.gate.passed
