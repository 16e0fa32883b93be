"""Offline judge runs, the response cache, calibration records bound to the judge's fingerprint, and the gate's
refusal of an uncalibrated judge, end to end through the CLI against the local fake judge server (127.0.0.1)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.dataset import template_cases, write_cases
from otel_toolcall_eval.errors import ExitCode

from .judge_server import OPENAI_KEY, FakeJudgeServer, Received, Status, fake_judge_server

pytestmark = pytest.mark.integration

RUN = [
    {"id": "order-status", "tool_calls": [{"name": "get_order", "arguments": {"order_id": "12345"}}]},
    {"id": "move-standup", "tool_calls": [
        {"name": "list_events", "arguments": {"date": "2025-03-06"}},
        {"name": "update_event", "arguments": {"event_id": "e1", "start": "2025-03-06T14:00:00"}},
    ]},
    {"id": "thanks", "tool_calls": [{"name": "get_order", "arguments": {"order_id": "<script>alert(1)</script>"}}]},
]  # fmt: skip
Q = "tool_appropriateness"


def pick(request: Received) -> str:
    """The fake judge calls get_order inappropriate for a thank-you, everything else appropriate."""
    data = request.data
    return "inappropriate" if "thank" in str(data.get("request", "")).lower() else request.labels[0]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeJudgeServer]:
    monkeypatch.setenv("CAL_JUDGE_KEY", OPENAI_KEY)
    with fake_judge_server() as fake:
        fake.pick = pick
        yield fake


def _files(tmp_path: Path, server: FakeJudgeServer, **extra: Any) -> dict[str, Path]:
    dataset, run = tmp_path / "dataset.jsonl", tmp_path / "run.jsonl"
    write_cases(dataset, template_cases())
    run.write_text("".join(json.dumps(line) + "\n" for line in RUN))
    judge: dict[str, Any] = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "base_url": server.openai_url,
        "api_key_env": "CAL_JUDGE_KEY",
        "price": {"input_per_million": 0.15, "output_per_million": 0.6},
        "budget": {"amount": 5},
        "retry_backoff_seconds": 0.01,
        "questions": [Q],
        "calibration": {"file": str(tmp_path / "calibration.jsonl"), "min_kappa": 0.6, "min_items": 10},
    }
    judge.update(extra)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"judge": judge, "gate": {"min": {f"judge.{Q}.pass_rate": 0.5}}}))
    return {"dataset": dataset, "run": run, "config": config, "calibration": tmp_path / "calibration.jsonl"}


def _judge_run(f: dict[str, Path], out: Path, cache: Path) -> int:
    args = ["judge", "run", "--dataset", str(f["dataset"]), "--run", str(f["run"]), "--config", str(f["config"])]
    return main([*args, "--out", str(out), "--cache", str(cache)])


def _labels(path: Path, n: int, agree: bool = True) -> Path:
    """n labelled items of Q: the judge and the human agree on all (or disagree on every third)."""
    rows = []
    for i in range(n):
        judge = ["appropriate", "acceptable", "inappropriate"][i % 3]
        human = judge if agree or i % 3 else "appropriate" if judge != "appropriate" else "inappropriate"
        rows.append(
            {"item": f"c{i}", "question": Q, "judge": judge, "human": human, "labelled_at": f"2026-11-{1 + i % 28:02d}"}
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_rerun_answers_from_the_cache_and_sends_nothing(
    tmp_path: Path, server: FakeJudgeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _files(tmp_path, server)
    first, second = tmp_path / "v1.jsonl", tmp_path / "v2.jsonl"
    assert _judge_run(f, first, tmp_path / "cache") == 0
    asked = len(server.requests)
    assert asked == 4  # one question per call: 1 + 2 + 1 calls
    assert _judge_run(f, second, tmp_path / "cache") == 0
    assert len(server.requests) == asked  # the rerun sent nothing
    v1 = [json.loads(x) for x in first.read_text().splitlines()]
    v2 = [json.loads(x) for x in second.read_text().splitlines()]
    assert [v["cached"] for v in v2] == [True] * 4 and [v["cost"] for v in v2] == [0] * 4
    assert [(v["item"], v["label"]) for v in v1] == [(v["item"], v["label"]) for v in v2]
    assert {v["item"]: v["label"] for v in v1}["thanks/0"] == "inappropriate"
    assert all(v["cost"] > 0 for v in v1)
    # the data the judge saw is kept for the labeller, as data: the script tag is a plain string
    thanks = next(v for v in v1 if v["item"] == "thanks/0")
    assert thanks["data"]["tool_name"] == "get_order" and "thank" in thanks["data"]["request"].lower()
    assert thanks["tool_call"] == {
        "tool_name": "get_order",
        "arguments": {"order_id": "<script>alert(1)</script>"},
        "outcome": "success",
    }  # the call as the labeller sees it (a run file records no results)
    assert "from the cache 0" in capsys.readouterr().out  # the first run asked everything


def test_a_changed_prompt_misses_the_cache(tmp_path: Path, server: FakeJudgeServer) -> None:
    f = _files(tmp_path, server)
    assert _judge_run(f, tmp_path / "v1.jsonl", tmp_path / "cache") == 0
    f = _files(tmp_path, server, temperature=0.7)  # changes the fingerprint
    assert _judge_run(f, tmp_path / "v2.jsonl", tmp_path / "cache") == 0
    assert len(server.requests) == 8


def test_the_gate_refuses_an_uncalibrated_judge_then_accepts_a_calibrated_one(
    tmp_path: Path, server: FakeJudgeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _files(tmp_path, server)
    verdicts = tmp_path / "verdicts.jsonl"
    assert _judge_run(f, verdicts, tmp_path / "cache") == 0
    evaluate = ["eval", "--dataset", str(f["dataset"]), "--runs", str(f["run"]), "--config", str(f["config"])]
    evaluate += ["--judge-verdicts", str(verdicts)]
    capsys.readouterr()
    assert main(evaluate) == ExitCode.JUDGE_UNCALIBRATED == 3
    err = capsys.readouterr().err
    assert f"{Q}: not calibrated for judge fingerprint" in err and "judge agreement" in err

    # too low an agreement is recorded, and still refused
    low = _labels(tmp_path / "low.jsonl", 30, agree=False)
    assert main(["judge", "agreement", str(low), "--config", str(f["config"])]) == 0
    [record] = [json.loads(x) for x in f["calibration"].read_text().splitlines()]
    assert record["question"] == Q and record["n"] == 30 and record["kappa"] < 0.6
    assert record["labels_from"] == "2026-11-01" and record["labels_to"] == "2026-11-28"
    capsys.readouterr()
    assert main(evaluate) == 3
    assert "below judge.calibration.min_kappa 0.6" in capsys.readouterr().err

    good = _labels(tmp_path / "good.jsonl", 30)
    assert main(["judge", "agreement", str(good), "--config", str(f["config"])]) == 0
    out = capsys.readouterr().out
    assert "TPR 1.000, TNR 1.000" in out and "since the record of" in out  # agreement over time
    code = main([*evaluate, "--json", str(tmp_path / "report.json")])
    assert code in (0, 1)  # gated now: the gate decides on its thresholds
    report = json.loads((tmp_path / "report.json").read_text())
    block = report["summary"]["judge"][Q]
    assert block["verdicts"] == 4 and block["pass_rate"] == pytest.approx(3 / 4)
    checks = {c["metric"]: c for c in report["gate"]["checks"]}
    assert checks[f"judge.{Q}.pass_rate"]["passed"] is True

    # the model changes: the calibration no longer counts, and the old verdicts neither
    f = _files(tmp_path, server, model="gpt-4.1")
    capsys.readouterr()
    assert main(evaluate) == 3
    err = capsys.readouterr().err
    assert "are for another judge configuration" in err and "rerun `judge run`" in err


def test_judge_metrics_are_reported_without_gating_by_default(tmp_path: Path, server: FakeJudgeServer) -> None:
    f = _files(tmp_path, server)
    verdicts = tmp_path / "verdicts.jsonl"
    assert _judge_run(f, verdicts, tmp_path / "cache") == 0
    config = yaml.safe_load(f["config"].read_text())
    del config["gate"]
    f["config"].write_text(yaml.safe_dump(config))
    md = tmp_path / "report.md"
    args = ["eval", "--dataset", str(f["dataset"]), "--runs", str(f["run"]), "--config", str(f["config"])]
    code = main([*args, "--judge-verdicts", str(verdicts), "--markdown", str(md)])
    assert code in (0, 1)  # the judge is not calibrated, and nothing refuses: it is not gated
    text = md.read_text()
    assert "### Judge verdicts" in text and f"| `{Q}` | 4 | 75.0% |" in text and "| no |" in text


def test_errors_are_not_cached_and_a_bad_calibration_file_exits_2(
    tmp_path: Path, server: FakeJudgeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _files(tmp_path, server, max_retries=0)
    server.script.extend([Status(400)] * 4)
    assert _judge_run(f, tmp_path / "v1.jsonl", tmp_path / "cache") == ExitCode.JUDGE_FAILED  # no verdict at all
    assert {json.loads(x)["error"] for x in (tmp_path / "v1.jsonl").read_text().splitlines()} == {"http_400"}
    assert _judge_run(f, tmp_path / "v2.jsonl", tmp_path / "cache") == 0
    assert len(server.requests) == 8  # asked again: an error is never a cached answer
    f["calibration"].write_text('{"version": 1, "question": "x"}\n')
    args = ["eval", "--dataset", str(f["dataset"]), "--runs", str(f["run"]), "--config", str(f["config"])]
    capsys.readouterr()
    assert main(args) == 2
    assert "calibration.jsonl:1: fingerprint: required" in capsys.readouterr().err


def test_a_judge_that_gives_no_verdict_fails_the_run_with_the_providers_error(
    tmp_path: Path, server: FakeJudgeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The judge unreachable: "errors 4", exit 0 and nothing said about why (issue 29)."""
    f = _files(tmp_path, server, base_url="http://127.0.0.1:1/v1", max_retries=0)
    out = tmp_path / "v.jsonl"
    assert _judge_run(f, out, tmp_path / "cache") == ExitCode.JUDGE_FAILED
    captured = capsys.readouterr()
    assert "errors 4" in captured.out
    assert "error: the judge gave no verdict: all 4 questions failed; the provider's first error: " in captured.err
    assert "connection_error: ConnectError" in captured.err
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 4 and all(v["error"] for v in lines)  # each question's error is kept in the file
    # one verdict is enough for a run to be a run: the working judge answers, the errors stay counted
    f = _files(tmp_path, server)
    assert _judge_run(f, tmp_path / "v2.jsonl", tmp_path / "cache") == 0
