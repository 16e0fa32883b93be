"""The judge's fingerprint, calibration records, the response cache and the queue's sizing (no network)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from otel_toolcall_eval.checks.agreement import pass_fail_rates
from otel_toolcall_eval.config.judge import BUILTIN, JudgeConfig
from otel_toolcall_eval.judge.cache import ResponseCache, cache_key
from otel_toolcall_eval.judge.calibration import (
    CalibrationError,
    CalibrationRecord,
    append_records,
    read_records,
    uncalibrated,
)
from otel_toolcall_eval.judge.fingerprint import fingerprints
from otel_toolcall_eval.judge.queue import size_for_width

BASE: dict[str, Any] = {
    "provider": "openai",
    "model": "gpt-4o-mini",
    "price": {"input_per_million": 0.15, "output_per_million": 0.6},
    "budget": {"amount": 5},
}


def _config(**extra: Any) -> JudgeConfig:
    return JudgeConfig.model_validate({**BASE, **extra})


@pytest.mark.parametrize(
    "change",
    [
        {"model": "gpt-4.1"},
        {"provider": "anthropic"},
        {"base_url": "http://127.0.0.1:9/v1"},
        {"temperature": 0.3},
        {"max_output_tokens": 100},
        {"json_mode": False},
        {"max_field_chars": 100},
        {"redact": {"patterns": []}},
        {"redact": {"replacement": "***"}},
    ],
)
def test_what_changes_verdicts_changes_every_fingerprint(change: dict[str, Any]) -> None:
    before, after = fingerprints(_config()), fingerprints(_config(**change))
    assert before.keys() == after.keys()
    assert all(before[q] != after[q] for q in before)


@pytest.mark.parametrize(
    "change",
    [
        {"budget": {"amount": 500}},
        {"concurrency": 16},
        {"sampling": {"max_rate": 0.5}},
        {"request_timeout_seconds": 5},
        {"calibration": {"file": "c.jsonl", "min_kappa": 0.9}},
    ],
)
def test_what_only_decides_which_calls_are_judged_keeps_it(change: dict[str, Any]) -> None:
    assert fingerprints(_config()) == fingerprints(_config(**change))


def test_editing_one_question_invalidates_only_that_question() -> None:
    edited = BUILTIN["error_handling"].model_dump()
    edited["prompt"] += " Be strict."
    before = fingerprints(_config())
    after = fingerprints(_config(questions=["tool_appropriateness", "argument_quality", edited, "tool_necessity"]))
    assert [q for q in before if before[q] != after[q]] == ["error_handling"]


def test_pass_fail_rates() -> None:
    human = ["ok", "ok", "ok", "bad", "bad"]
    judge = ["ok", "ok", "bad", "bad", "ok"]
    assert pass_fail_rates(human, judge, {"ok"}) == (pytest.approx(2 / 3), pytest.approx(1 / 2))
    assert pass_fail_rates(["ok"], ["ok"], {"ok"}) == (1.0, None)


def _record(question: str, fingerprint: str, kappa: float | None, n: int = 50) -> CalibrationRecord:
    return CalibrationRecord(
        question=question, fingerprint=fingerprint, provider="openai", model="m", n=n, kappa=kappa,
        kappa_ci=(0.1, 0.9), weighted_kappa=None, raw_agreement=0.8, tpr=0.9, tnr=0.7, labels_from=None,
        labels_to=None, created_at="2026-11-30T00:00:00+00:00",
    )  # fmt: skip


def test_the_newest_record_of_the_current_fingerprint_decides(tmp_path: Path) -> None:
    path = tmp_path / "cal.jsonl"
    config = _config(questions=["tool_appropriateness"], calibration={"file": str(path), "min_kappa": 0.6})
    fp = fingerprints(config)["tool_appropriateness"]
    assert "no record in" in uncalibrated(config, ["tool_appropriateness"])[0]
    append_records(path, [_record("tool_appropriateness", fp, 0.8)])
    assert uncalibrated(config, ["tool_appropriateness"]) == []
    append_records(path, [_record("tool_appropriateness", fp, 0.4)])  # a recalibration that came out worse
    assert "kappa 0.400 is below" in uncalibrated(config, ["tool_appropriateness"])[0]
    append_records(path, [_record("tool_appropriateness", fp, None)])
    assert "kappa n/a is below" in uncalibrated(config, ["tool_appropriateness"])[0]
    append_records(path, [_record("tool_appropriateness", fp, 0.9, n=5)])
    assert (
        "on 5 labelled items, fewer than judge.calibration.min_items 30"
        in uncalibrated(config, ["tool_appropriateness"])[0]
    )
    assert len(read_records(path)) == 4
    assert "judge.calibration is not configured" in uncalibrated(_config(), ["tool_appropriateness"])[0]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "cal.jsonl:1: not JSON"),
        ('{"version": 2}', "cal.jsonl:1: version: expected 1"),
        ('{"version": 1, "question": ""}', "cal.jsonl:1: question: required"),
    ],
)
def test_a_bad_calibration_file_names_file_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "cal.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(CalibrationError) as caught:
        read_records(path)
    assert str(caught.value).startswith(str(tmp_path / message))


def test_the_cache_is_content_addressed_and_bounded(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c", max_entries=10)
    key = cache_key("fp", "q", {"b": 1, "a": [1, 2]})
    assert key == cache_key("fp", "q", {"a": [1, 2], "b": 1})  # canonical: key order does not matter
    assert key != cache_key("fp2", "q", {"a": [1, 2], "b": 1}) != cache_key("fp", "q", {"a": [2, 1], "b": 1})
    assert cache.get(key) is None and cache.misses == 1
    assert cache.put(key, {"label": "ok"}) and cache.get(key) == {"label": "ok"} and cache.hits == 1
    keys = [cache_key("fp", "q", i) for i in range(25)]
    for i, k in enumerate(keys):
        cache.put(k, {"label": str(i)})
        os.utime(cache._path(k), ns=(i * 10**9, i * 10**9))  # distinct ages, whatever the clock's resolution
    assert len(cache) <= 10
    on_disk = list((tmp_path / "c").glob("*/*.json"))
    assert len(on_disk) == len(cache) and cache.get(keys[-1]) == {"label": "24"}  # the newest is kept
    assert not cache.put(cache_key("fp", "q", "big"), {"explanation": "x" * 20_000})  # too large: not kept
    (tmp_path / "c" / keys[-1][:2] / f"{keys[-1]}.json").write_text("{torn")
    assert cache.get(keys[-1]) is None  # unreadable: asked again
    with pytest.raises(ValueError):
        cache.get("../../etc/passwd")
    assert ResponseCache(tmp_path / "c", max_entries=10).__len__() == len(on_disk)


def test_queue_size_for_an_interval_width() -> None:
    assert size_for_width(0.2) == 97  # (1.96 / 0.2)^2 = 96.04
    assert size_for_width(0.1) == 385
    assert size_for_width(0.001) == 10_000  # bounded
    with pytest.raises(ValueError):
        size_for_width(0)


def test_calibration_record_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "cal.jsonl"
    record = _record("q", "f", 0.7)
    append_records(path, [record, record])
    assert read_records(path) == [record, record]
    assert json.loads(path.read_text().splitlines()[0])["kappa_ci"] == [0.1, 0.9]


def test_the_agreement_gauges_follow_the_calibration_file(tmp_path: Path) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from otel_toolcall_eval.judge.judge import Judge

    path = tmp_path / "cal.jsonl"
    config = _config(
        questions=["tool_appropriateness", "error_handling"], calibration={"file": str(path), "min_kappa": 0.6}
    )
    reader = InMemoryMetricReader()
    judge = Judge(config, meter_provider=MeterProvider(metric_readers=[reader]))

    def gauges() -> dict[tuple[str, str], float]:
        data = reader.get_metrics_data()
        out = {}
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name.startswith("toolcall_eval.judge.agreement."):
                        for p in m.data.data_points:
                            out[(m.name.rsplit(".", 1)[1], str(p.attributes["question"]))] = p.value
        return out

    assert gauges() == {("min_kappa", "tool_appropriateness"): 0.6, ("min_kappa", "error_handling"): 0.6}
    fp = fingerprints(config)["tool_appropriateness"]
    append_records(path, [_record("tool_appropriateness", fp, 0.8), _record("error_handling", "other", 0.9)])
    assert gauges()[("kappa", "tool_appropriateness")] == 0.8
    assert ("kappa", "error_handling") not in gauges()  # its record is for another configuration
    append_records(path, [_record("tool_appropriateness", fp, 0.5)])  # a recalibration: the file changed
    assert gauges()[("kappa", "tool_appropriateness")] == 0.5
    judge.shutdown(0)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[1]", "v.jsonl:1: expected a JSON object"),
        ('{"item": "a", "question": "q"}', "v.jsonl:1: fingerprint: required"),
        ('{"item": "a", "question": "q", "fingerprint": "f", "label": null}', "v.jsonl:1: error: a verdict without"),
        ('{"item": "a", "question": "q", "fingerprint": "f", "label": "x", "score": true}', "v.jsonl:1: score:"),
    ],
)
def test_a_bad_verdicts_file_exits_2_naming_file_line_and_field(
    tmp_path: Path, line: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from otel_toolcall_eval.cli import main
    from otel_toolcall_eval.dataset import template_cases, write_cases

    (tmp_path / "v.jsonl").write_text(line + "\n")
    write_cases(tmp_path / "d.jsonl", template_cases())
    (tmp_path / "r.jsonl").write_text('{"id": "thanks", "tool_calls": []}\n')
    args = ["eval", "--dataset", str(tmp_path / "d.jsonl"), "--runs", str(tmp_path / "r.jsonl")]
    assert main([*args, "--judge-verdicts", str(tmp_path / "v.jsonl")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert message in err and "Traceback" not in err
