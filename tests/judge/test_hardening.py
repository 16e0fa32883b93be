"""The judge against hostile input (issue 15): answers that stall a regex, secrets cut in half, numbers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_toolcall_eval.cli import build_parser, main
from otel_toolcall_eval.config import ConfigError, EvalConfig
from otel_toolcall_eval.config.judge import BUILTIN
from otel_toolcall_eval.conventions.base import error_evidence
from otel_toolcall_eval.judge import Judge, JudgeConfig
from otel_toolcall_eval.judge.context import JudgeItem, Reaction
from otel_toolcall_eval.judge.questions import (
    MAX_ANSWER_CHARS,
    AnswerError,
    Redactor,
    parse_answer,
    question_data,
)
from otel_toolcall_eval.records import CallScore, Outcome, ToolCallRecord
from tests.helpers import make_pipeline, tool_span

APPROPRIATE = BUILTIN["tool_appropriateness"]


def test_a_huge_answer_with_a_whitespace_run_is_rejected_without_scanning_it() -> None:
    """Red before: the code-fence regex backtracked over the run (quadratic: a 1 MB answer runs for hours).

    The parse runs in a subprocess with a 60 s timeout, so the old code fails by timing out instead of hanging
    the suite; the new code rejects the answer by its length, before any scan.
    """
    script = textwrap.dedent(
        """
        from otel_toolcall_eval.config.judge import BUILTIN
        from otel_toolcall_eval.judge.questions import AnswerError, parse_answer
        text = '```json\\n{"label": "appropriate", "explanation": "fits"}' + ' ' * 1_000_000 + 'x'
        try:
            parse_answer(BUILTIN["tool_appropriateness"], text, None)
        except AnswerError as exc:
            print(exc.kind)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "answer_too_large"


@pytest.mark.parametrize(
    "text",
    [
        # a run of whitespace just inside the cap, between the fences and after the object
        "```json\n" + '{"label": "acceptable", "explanation": "ok"}' + " \t" * (MAX_ANSWER_CHARS // 2 - 40) + "\n```",
        "```" + " " * (MAX_ANSWER_CHARS - 100) + '{"label": "acceptable"}' + "x",
        '{"label": "acceptable"}' + "`" * (MAX_ANSWER_CHARS - 100),
    ],
)
def test_pathological_answers_within_the_cap_parse(text: str) -> None:
    assert len(text) <= MAX_ANSWER_CHARS
    assert parse_answer(APPROPRIATE, text, None).label == "acceptable"


def test_the_cap_is_on_the_answer_text() -> None:
    fits = '{"label": "appropriate"}'.ljust(MAX_ANSWER_CHARS)
    assert parse_answer(APPROPRIATE, fits, None).label == "appropriate"
    with pytest.raises(AnswerError) as info:
        parse_answer(APPROPRIATE, fits + " ", None)
    assert info.value.kind == "answer_too_large"


# --- redaction comes before every cut (item 5) ------------------------------------------------------------
API_KEY = "sk-live-abcdefghijklmnopqrstuvwxyz0123"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"
CARD = 4111111111111111


def _judge(**section: Any) -> Judge:
    config = {
        "provider": "openai",
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "price": {"input_per_million": 0, "output_per_million": 0},
        "questions": ["tool_appropriateness", "error_handling"],
        **section,
    }
    return Judge(JudgeConfig.model_validate(config))


def _messages(text: str) -> dict[str, Any]:
    return {"gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])}


def _leaks(text: str, secret: str) -> bool:
    """Whether any 8-character piece of ``secret`` appears in ``text`` (a cut secret leaks its start)."""
    return any(secret[i : i + 8] in text for i in range(len(secret) - 7))


def test_a_request_cut_at_max_request_chars_never_keeps_the_start_of_a_secret() -> None:
    judge = _judge(max_request_chars=100)
    for secret in (API_KEY, JWT):
        for offset in range(80, 100):  # the cut falls at every position inside the secret
            trace_id = hash((secret, offset)) & 0xFFFF_FFFF  # a new trace each time: the request is read once
            judge.observe_llm_span(trace_id, _messages("x" * offset + " " + secret + " and more text after it"))
            ctx = judge._traces.peek(trace_id)
            assert ctx is not None and ctx.request is not None
            assert ctx.request.startswith("x" * offset) and len(ctx.request) <= 100
            assert not _leaks(ctx.request, secret), (offset, ctx.request)


def test_the_models_reaction_cut_at_max_field_chars_never_keeps_the_start_of_a_secret() -> None:
    judge = _judge(max_field_chars=64)
    for offset in range(40, 64):
        pending = JudgeItem(
            ToolCallRecord(name="search"),
            CallScore(name="search", step=1, outcome=Outcome.SUCCESS),
            (),
            reaction=Reaction(),
        )
        with judge._traces.lock:  # a sampled failed call of the trace waits for the model's reaction
            ctx = judge._traces.get_or_create(offset, [])
            ctx.request, ctx.pending = "r", [pending]
        output = [{"role": "assistant", "parts": [{"type": "text", "content": "y" * offset + " " + API_KEY + " z"}]}]
        judge.worker.submit = lambda item: True  # type: ignore[method-assign]  # only the reaction is under test
        judge.observe_llm_span(offset, {"gen_ai.output.messages": json.dumps(output)})
        assert pending.reaction is not None and pending.reaction.model_output is not None
        assert not _leaks(pending.reaction.model_output, API_KEY), offset


def test_an_exception_message_past_512_characters_is_redacted_before_it_is_cut() -> None:
    p = make_pipeline()
    tool_span(p.tracer, "search", {"q": "x"}, error=RuntimeError("e" * 490 + " " + JWT + " " + API_KEY))
    span = p.one("execute_tool search")
    record = ToolCallRecord(name="search", raw_arguments='{"q": "x"}')
    record.error = error_evidence(span, span.attributes or {})
    failed = JudgeItem(record, CallScore(name="search", step=1, outcome=Outcome.EXECUTION_FAILED), ())
    redact = Redactor(JudgeConfig.model_validate(_config()).redact)
    data = json.dumps(question_data(BUILTIN["error_handling"], failed, redact, 4000))
    assert "e" * 490 in data and not _leaks(data, JWT) and not _leaks(data, API_KEY)


def test_numbers_that_match_a_pattern_are_redacted() -> None:
    record = ToolCallRecord(name="pay", raw_arguments=json.dumps({"card": CARD, "amount": 12.5}))
    score = CallScore(
        name="pay", step=1, outcome=Outcome.EXECUTION_FAILED, arguments={"card": CARD, "amount": 12.5, "n": [CARD]}
    )
    failed = JudgeItem(record, score, ())
    redact = Redactor(JudgeConfig.model_validate(_config()).redact)
    data = question_data(BUILTIN["error_handling"], failed, redact, 4000)
    assert str(CARD) not in json.dumps(data)
    assert data["arguments"] == {"card": "[REDACTED]", "amount": 12.5, "n": ["[REDACTED]"]}


def test_a_private_key_is_redacted_with_or_without_its_end_line() -> None:
    redact = Redactor(JudgeConfig.model_validate(_config()).redact)
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA+/abc=\n"
    assert redact(f"a {block}-----END RSA PRIVATE KEY----- b") == "a [REDACTED] b"
    assert "MIIE" not in redact(f"cut off: {block[:45]}")


def _config() -> dict[str, Any]:
    return {"provider": "openai", "model": "m", "price": {"input_per_million": 0, "output_per_million": 0}}


# --- the spend ceiling holds when the server ignores max_tokens (item 6) --------------------------------------
def test_a_server_that_ignores_max_tokens_cannot_take_spend_past_the_ceiling() -> None:
    """Red before: reported usage was settled uncapped (one answer took spend to 30x the ceiling)."""
    sent: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        body = {
            "id": "r",
            "model": "m",
            "choices": [{"message": {"role": "assistant", "content": '{"label": "appropriate", "explanation": "x"}'}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 30_000},  # max_tokens was 300
        }
        return httpx.Response(200, json=body)

    reader = InMemoryMetricReader()
    config = JudgeConfig.model_validate(
        {
            **_config(),
            "base_url": "http://127.0.0.1:9/v1",
            "price": {"input_per_million": 0, "output_per_million": 1000},  # 0.001 per output token
            "budget": {"amount": 1.0},  # three worst cases (300 output tokens: 0.3 each)
            "max_output_tokens": 300,
            "concurrency": 1,  # one call in flight: the answers settle in turn
            "questions": ["tool_appropriateness"],
        }
    )
    now = [datetime(2026, 12, 10, tzinfo=timezone.utc).timestamp()]
    judge = Judge(
        config,
        meter_provider=MeterProvider(metric_readers=[reader]),
        transport=httpx.MockTransport(answer),
        clock=lambda: now[0],
    )
    try:
        for n in range(1, 4):
            record = ToolCallRecord(name="search", raw_arguments="{}", trace_id=f"{n:032x}", span_id=f"{n:016x}")
            score = CallScore(name="search", step=1, outcome=Outcome.SUCCESS, arguments={})
            assert judge.worker.submit(JudgeItem(record, score, (BUILTIN["tool_appropriateness"],), request="r"))
        assert judge.force_flush(20_000)
    finally:
        judge.shutdown(5_000)
    assert len(sent) == 1  # the first answer reached the ceiling: nothing more was sent
    assert judge.ledger.spent() == pytest.approx(1.0)  # recorded spend is the ceiling, never past it
    assert judge.ledger.remaining() == 0.0
    over = _metric(reader, "toolcall_eval.judge.over_reported")
    assert over == pytest.approx(30.0 - 0.3)  # what the server reported beyond the reservation, counted
    assert judge.sampler.tokens_out <= 300  # the pacing learnt at most the worst case, not 30,000 tokens
    judge.sampler.update()
    for _ in range(100):
        judge.sampler.decide(0, 0)
    now[0] += 60
    assert judge.sampler.update() == 0.0  # at the ceiling: nothing is sampled for the rest of the period
    now[0] = datetime(2027, 1, 1, 0, 1, tzinfo=timezone.utc).timestamp()
    assert judge.ledger.remaining() == 1.0  # the next period starts from zero
    for _ in range(100):
        judge.sampler.decide(0, 0)
    now[0] += 60
    assert 0.0 < judge.sampler.update() <= config.sampling.max_rate  # paced again, and bounded


def _metric(reader: InMemoryMetricReader, name: str) -> float:
    data = reader.get_metrics_data()
    total = 0.0
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    total += sum(p.value for p in metric.data.data_points)
    return total


# --- non-finite numbers are refused, on the command line and in the config (item 7) --------------------------
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "Infinity"])
@pytest.mark.parametrize("option", ["--traffic", "--flagged"])
def test_judge_check_rejects_non_finite_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    """Red before: ``--traffic nan`` printed "no budget (free model)" for a budgeted config."""
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "judge": {
                    **_config(),
                    "price": {"input_per_million": 1, "output_per_million": 1},
                    "budget": {"amount": 5},
                }
            }
        )
    )
    with pytest.raises(SystemExit) as exit_:
        main(["judge", "check", str(path), f"{option}={value}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert option in err and "finite" in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["nan", "inf"])
@pytest.mark.parametrize("option", ["--traces-per-second", "--duration", "--failure-rate"])
def test_demo_rejects_non_finite_numbers(capsys: pytest.CaptureFixture[str], option: str, value: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["demo", option, value])  # parsed only: the demo itself never starts
    assert exit_.value.code == 2 and option in capsys.readouterr().err


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"budget": {"amount": float("inf")}}, "judge.budget.amount"),
        ({"price": {"input_per_million": float("nan"), "output_per_million": 1}}, "judge.price.input_per_million"),
        ({"request_timeout_seconds": float("inf")}, "judge.request_timeout_seconds"),
        ({"sampling": {"max_catchup": float("inf")}}, "judge.sampling.max_catchup"),
        (
            {
                "questions": [
                    {
                        "name": "q",
                        "prompt": "p",
                        "fields": ["tool_name"],
                        "scale": [{"label": "a", "score": float("nan")}, {"label": "b", "score": 0}],
                    }
                ]
            },
            "judge.questions.0.scale.0.score",
        ),
    ],
)
def test_config_rejects_non_finite_numbers(section: dict[str, Any], field: str) -> None:
    base = {**_config(), "price": {"input_per_million": 1, "output_per_million": 1}, "budget": {"amount": 5}}
    with pytest.raises(ConfigError) as err:
        EvalConfig.from_dict({"judge": {**base, **section}})
    assert field in str(err.value) and "finite" in str(err.value)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"limits": {"trace_ttl_seconds": float("inf")}}, "limits.trace_ttl_seconds"),
        ({"arguments": {"similarity": {"threshold": float("nan")}}}, "arguments.similarity.threshold"),
    ],
)
def test_eval_config_rejects_non_finite_numbers(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        EvalConfig.from_dict(data)
    assert field in str(err.value)
