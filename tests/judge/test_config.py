"""The ``judge:`` section: defaults, custom questions, errors that name the field, keys only from the environment."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_toolcall_eval import ConfigError, EvalConfig
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.cli import main
from otel_toolcall_eval.commands import judge as judge_command
from otel_toolcall_eval.config.judge import BUILTIN
from otel_toolcall_eval.judge import JudgeConfig
from otel_toolcall_eval.judge.emit import JUDGE_METRICS
from otel_toolcall_eval.judge.questions import Redactor
from tests.helpers import make_pipeline

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "judge.md"

MINIMAL: dict[str, Any] = {
    "provider": "openai",
    "model": "gpt-4o-mini",
    "api_key_env": "TEST_JUDGE_KEY",
    "price": {"input_per_million": 0.15, "output_per_million": 0.6},
    "budget": {"amount": 50},
}


def judge_config(**overrides: Any) -> dict[str, Any]:
    return {**MINIMAL, **overrides}


def load_error(judge: Any) -> str:
    with pytest.raises(ConfigError) as info:
        EvalConfig.from_dict({"judge": judge})
    return str(info.value)


def test_minimal_section_gets_the_four_builtin_questions_and_provider_defaults() -> None:
    config = EvalConfig.from_dict({"judge": judge_config()}).judge
    assert isinstance(config, JudgeConfig)
    assert [q.name for q in config.questions] == list(BUILTIN)
    assert config.url == "https://api.openai.com/v1"
    assert config.budget is not None and config.budget.period == "month"
    anthropic = JudgeConfig.model_validate(judge_config(provider="anthropic", model="claude-haiku-4-5"))
    assert anthropic.url == "https://api.anthropic.com"
    # each built-in question receives only what it needs
    fields = {q.name: set(q.fields) for q in config.questions}
    assert fields["tool_appropriateness"] == {"request", "tool_name", "available_tools"}
    assert fields["tool_necessity"] == {"request", "tool_name"}
    assert "request" not in fields["error_handling"] and "reaction" in fields["error_handling"]


def test_no_judge_section_means_no_judge() -> None:
    assert EvalConfig.from_dict({}).judge is None
    assert make_pipeline(EvalConfig()).processor.judge is None


@pytest.mark.parametrize(
    ("judge", "needle"),
    [
        (judge_config(budjet={"amount": 1}), "judge.budjet: unknown key"),
        (judge_config(provider="bedrock"), "judge.provider"),
        (judge_config(budget={"amount": 0}), "judge.budget.amount: Input should be greater than 0"),
        (judge_config(budget={"amount": 5, "period": "fortnight"}), "judge.budget.period"),
        (judge_config(api_key="sk-live-123"), "api_key: keys are read from the environment only"),
        (judge_config(api_key_env="not a name"), "judge.api_key_env"),
        (judge_config(base_url="localhost:11434"), "judge.base_url"),
        (judge_config(concurrency=0), "judge.concurrency"),
        (judge_config(sampling={"max_rate": 1.5}), "judge.sampling.max_rate"),
        (judge_config(sampling={"risk_weights": {"failed": 3}}), "judge.sampling.risk_weights.failed: unknown key"),
        ({k: v for k, v in MINIMAL.items() if k != "budget"}, "budget: required when the price is not zero"),
        (judge_config(redact={"patterns": ["ok", "(unclosed"]}), "patterns.1 is not a valid regular expression"),
        (judge_config(redact={"function": "no_such_module:f"}), "cannot import module 'no_such_module'"),
        (judge_config(questions=["tool_appropriateness", "tool_psychic"]), "judge.questions.1"),
        (judge_config(questions=["tool_necessity", "tool_necessity"]), "duplicate names ['tool_necessity']"),
        (judge_config(questions=[]), "judge.questions"),
    ],
)
def test_errors_name_the_field(judge: dict[str, Any], needle: str) -> None:
    assert needle in load_error(judge)


def test_unknown_builtin_question_lists_the_builtin_ones() -> None:
    message = load_error(judge_config(questions=["tool_psychic"]))
    assert "unknown built-in question 'tool_psychic'" in message
    assert all(name in message for name in BUILTIN)


CUSTOM = {
    "name": "pii_in_arguments",
    "prompt": "Do the arguments carry personal data the task does not need?",
    "fields": ["tool_name", "arguments"],
    "scale": [{"label": "clean", "score": 1}, {"label": "leaks", "score": 0, "meaning": "unneeded personal data"}],
    "when": "succeeded",
}


def test_custom_questions_beside_builtin_ones() -> None:
    config = JudgeConfig.model_validate(judge_config(questions=["error_handling", CUSTOM]))
    builtin, custom = config.questions
    assert builtin == BUILTIN["error_handling"]
    assert custom.name == "pii_in_arguments" and custom.when == "succeeded"
    assert [(s.label, s.score) for s in custom.scale] == [("clean", 1.0), ("leaks", 0.0)]
    assert config.needs("arguments") and not config.needs("request")


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"fields": ["tool_name", "user_password"]}, "judge.questions.0.fields.1"),
        ({"fields": ["tool_name", "tool_name"]}, "a field is listed twice"),
        ({"scale": [{"label": "only", "score": 1}]}, "judge.questions.0.scale"),
        ({"scale": [{"label": "a", "score": 1}, {"label": "a", "score": 0}]}, "duplicate labels ['a']"),
        (
            {"scale": [{"label": "Has Space", "score": 1}, {"label": "b", "score": 0}]},
            "judge.questions.0.scale.0.label",
        ),
        ({"name": "Bad Name"}, "judge.questions.0.name"),
        ({"when": "sometimes"}, "judge.questions.0.when"),
        ({"prompt": ""}, "judge.questions.0.prompt"),
        ({"extra": 1}, "judge.questions.0.extra: unknown key"),
    ],
)
def test_custom_question_errors_name_the_field(change: dict[str, Any], needle: str) -> None:
    assert needle in load_error(judge_config(questions=[{**CUSTOM, **change}]))


def test_local_model_needs_no_budget_and_no_key() -> None:
    config = JudgeConfig.model_validate(
        {
            "provider": "openai",
            "model": "qwen2.5:7b",
            "base_url": "http://127.0.0.1:11434/v1/",
            "price": {"input_per_million": 0, "output_per_million": 0},
        }
    )
    assert config.budget is None and config.api_key_env is None
    assert config.url == "http://127.0.0.1:11434/v1"  # trailing slash dropped


def test_api_key_comes_from_the_named_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    config = EvalConfig.from_dict({"judge": judge_config()})
    monkeypatch.delenv("TEST_JUDGE_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"judge\.api_key_env: the environment variable TEST_JUDGE_KEY is not set"):
        make_pipeline(config)
    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-from-env")
    pipeline = make_pipeline(config)  # builds now that the variable is set
    try:
        assert pipeline.processor.judge is not None
        assert "sk-from-env" not in config.model_dump_json()  # the key never enters the config
    finally:
        pipeline.provider.shutdown()


def test_judge_false_disables_a_configured_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_JUDGE_KEY", raising=False)  # would fail if a judge were built
    config = EvalConfig.from_dict({"judge": judge_config()})
    assert make_pipeline(config, judge=False).processor.judge is None


def test_redaction_by_default_hides_secrets_and_runs_a_configured_function() -> None:
    redact = Redactor(JudgeConfig.model_validate(judge_config()).redact)
    text = "key sk-abcdefghijklmnopqrstuv, auth Bearer abcdefghijklmnopqrstuvwxyz, card 4111 1111 1111 1111, city Paris"
    out = redact(text)
    assert "sk-abc" not in out and "abcdefghijklmnopqrstuvwxyz" not in out and "4111" not in out
    assert out.count("[REDACTED]") == 3 and out.endswith("city Paris")
    custom = JudgeConfig.model_validate(
        judge_config(redact={"patterns": [r"Paris"], "replacement": "<city>", "function": "string:capwords"})
    )
    assert Redactor(custom.redact)("weather in paris and Paris") == "Weather In Paris And <city>"


def test_docs_config_examples_are_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every YAML block of docs/judge.md with a judge section loads."""
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), re.S) if b.startswith("judge:")]
    providers = set()
    for block in blocks:
        config = EvalConfig.from_dict(yaml.safe_load(block)).judge
        assert config is not None
        providers.add((config.provider, config.url.startswith("http://127.0.0.1") or "localhost" in config.url))
    assert {("openai", False), ("anthropic", False), ("openai", True)} <= providers  # hosted and local examples


def test_docs_list_every_judge_attribute_and_metric() -> None:
    text = DOCS.read_text()
    for doc in A.JUDGE_ATTRIBUTES:
        assert f"`{doc.name}`" in text, doc.name
    for metric in JUDGE_METRICS:
        assert f"`{metric.name}`" in text and f"`{metric.prometheus}`" in text, metric.name


@pytest.mark.parametrize(
    ("now", "days"),
    [
        (datetime(2027, 2, 10, tzinfo=timezone.utc), 28),
        (datetime(2026, 11, 30, 23, 59, tzinfo=timezone.utc), 30),
        (datetime(2026, 12, 1, tzinfo=timezone.utc), 31),
    ],
)
def test_judge_check_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, now: datetime, days: int
) -> None:
    # the budget period is the calendar month of the injected clock: the rate depends on its length, never on
    # the day the suite runs
    monkeypatch.setattr(judge_command, "clock", now.timestamp)
    path = tmp_path / "judge.yaml"
    path.write_text(yaml.safe_dump({"judge": judge_config(sampling={"risk_weights": {"execution_failed": 4}})}))
    assert main(["judge", "check", str(path), "--traffic", "20", "--flagged", "0.1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    # 50 USD / (1200 x 0.15e-6 + 120 x 0.6e-6) per call = 198,413 evaluations per month
    assert "198,413 evaluations" in out
    rate = re.search(r"the base rate is ([0-9.]+)", out).group(1)  # type: ignore[union-attr]
    # 18 clean calls/s at r, 2 flagged at 4r: (18 + 8) r x seconds in the month = 50 / 252e-6 evaluations
    expected = (50 / (1200 * 0.15e-6 + 120 * 0.6e-6)) / (26 * days * 86400)
    assert rate == f"{expected:.6f}"
    empty = tmp_path / "empty.yaml"
    empty.write_text("policies: {}\n")
    assert main(["judge", "check", str(empty)]) == 2
    assert "no judge section" in capsys.readouterr().err
