"""The ``judge:`` section of the config file: provider, budget, sampling, questions.

Validated with the rest of the config at start-up: unknown keys and bad values fail with the field's path
(``judge.budget.amount: Input should be greater than 0``). API keys never live in the file: only the name of
the environment variable that holds one (``api_key_env``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from otel_toolcall_eval.config.imports import import_object

Provider = Literal["openai", "anthropic"]
Period = Literal["hour", "day", "week", "month"]
When = Literal["always", "failed", "succeeded", "first_call", "free_text"]
# The data a question may receive; each question names the ones it needs and gets nothing else.
FieldName = Literal[
    "request",
    "tool_name",
    "tool_description",
    "available_tools",
    "arguments",
    "free_text_arguments",
    "result",
    "outcome",
    "error",
    "reaction",
]

DEFAULT_BASE_URLS: dict[str, str] = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}

# Secrets that must never reach a third-party judge, whatever the tool recorded.
DEFAULT_REDACTIONS: tuple[str, ...] = (
    r"\bsk-[A-Za-z0-9_-]{16,}",  # OpenAI / Anthropic style API keys
    r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}",
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key ids
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWTs
    # A key block, up to its END line or, cut or not, to the end of the text. No lazy scan for the END line: with
    # many BEGIN lines and no END that was quadratic (a 116 KB text held the GIL for 4 s).
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:[^-]|-(?!----END))*(?:-----END [A-Z ]*PRIVATE KEY-----)?",
    r"\b(?:\d[ -]?){12,18}\d\b",  # card-number-like digit runs
)

_NAME = r"^[a-z][a-z0-9_]{0,62}$"
# A verdict "passes" when its label's score is at least this: the judge's pass rate in ``eval`` and the TPR/TNR of
# a calibration both read it (``QuestionConfig.passing``).
PASS_SCORE: Final = 0.5


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # no option means nan or inf


class Price(_Strict):
    """The judge model's price; cost of a call = input tokens x input price + output tokens x output price."""

    input_per_million: float = Field(ge=0, description="price of 1,000,000 input tokens")
    output_per_million: float = Field(ge=0, description="price of 1,000,000 output tokens")

    @property
    def per_input_token(self) -> float:
        return self.input_per_million / 1e6

    @property
    def per_output_token(self) -> float:
        return self.output_per_million / 1e6

    def cost(self, input_tokens: float, output_tokens: float) -> float:
        return input_tokens * self.per_input_token + output_tokens * self.per_output_token

    @property
    def free(self) -> bool:
        return self.input_per_million == 0 and self.output_per_million == 0


class Budget(_Strict):
    """A spend ceiling per calendar period (UTC), in the currency of ``price``."""

    amount: float = Field(gt=0, description="the most the judge may spend per period")
    period: Period = Field(default="month", description="the calendar period (UTC) the amount is for")
    currency: str = Field(default="USD", min_length=1, max_length=8, description="the amount's currency (a label)")
    ledger_file: Path | None = Field(
        default=None, description="share spend between processes and restarts on this host (a small JSON file)"
    )
    ledger_redis_url_env: str | None = Field(
        default=None,
        min_length=1,
        description="name of an environment variable holding a Redis URL: one budget for every replica (a fleet)",
    )
    ledger_redis_key_prefix: str = Field(
        default="toolcall_eval:judge:spend",
        min_length=1,
        max_length=200,
        description="Redis key prefix; replicas sharing a budget use the same one",
    )
    ledger_redis_timeout_seconds: float = Field(
        default=1.0, gt=0, le=60, description="Redis connect and reply timeout; past it no judge call is sent"
    )

    @model_validator(mode="after")
    def _one_ledger(self) -> Budget:
        if self.ledger_file is not None and self.ledger_redis_url_env is not None:
            raise ValueError("set ledger_file (one host) or ledger_redis_url_env (a fleet), not both")
        return self


class RiskWeights(_Strict):
    """How much likelier a call is judged when the deterministic checks flagged it (a call takes its highest)."""

    clean: float = Field(default=1.0, ge=0, description="a call no check flagged")
    malformed_call: float = Field(default=5.0, ge=0, description="a call whose outcome is malformed_call")
    execution_failed: float = Field(default=5.0, ge=0, description="a call whose outcome is execution_failed")
    empty_result: float = Field(default=3.0, ge=0, description="a call whose outcome is empty_result")
    violation: float = Field(
        default=5.0, ge=0, description="a policy violation, duplicate, repeated failure or over-budget step"
    )


class Sampling(_Strict):
    """Which calls are judged: a budget-paced base rate, weighted by risk, decided from the trace id."""

    risk_weights: RiskWeights = Field(default_factory=RiskWeights)
    max_rate: float = Field(default=1.0, gt=0, le=1, description="the highest base sampling rate")
    initial_rate: float = Field(default=0.1, ge=0, le=1, description="base rate before traffic has been measured")
    update_interval_seconds: float = Field(default=5.0, gt=0, description="how often the rate is recomputed")
    traffic_half_life_seconds: float = Field(default=300.0, gt=0, description="EWMA half-life of the traffic rate")
    max_catchup: float = Field(
        default=2.0, ge=1, description="an underspent period may spend at most this multiple of the even pace"
    )
    prior_input_tokens: int = Field(default=1200, ge=1, description="input tokens per evaluation until measured")
    prior_output_tokens: int = Field(default=120, ge=1, description="output tokens per evaluation until measured")
    seed: int = Field(default=0, ge=0, lt=2**64, description="another seed picks another (deterministic) set of traces")


class Redaction(_Strict):
    """Applied to every string before it reaches the judge: regexes, then an optional function."""

    patterns: list[str] = Field(
        default_factory=lambda: list(DEFAULT_REDACTIONS), description="regular expressions whose matches are replaced"
    )
    replacement: str = Field(default="[REDACTED]", description="what a match is replaced with")
    function: str | None = Field(default=None, description="import path 'pkg.mod:func' of a str -> str function")

    _function: Callable[[str], str] | None = PrivateAttr(default=None)

    @field_validator("patterns")
    @classmethod
    def _compile(cls, value: list[str]) -> list[str]:
        for i, pattern in enumerate(value):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"patterns.{i} is not a valid regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _resolve(self) -> Redaction:
        if self.function is not None:
            target = import_object(self.function)
            if not callable(target):
                raise ValueError(f"function: '{self.function}' is not callable")
            self._function = target
        return self

    def resolved_function(self) -> Callable[[str], str] | None:
        return self._function


class Calibration(_Strict):
    """Where calibration records live and what a judge must reach before its verdicts may gate (docs/judge.md)."""

    file: Path = Field(description="the calibration records (JSONL) that `judge agreement --calibration` appends to")
    min_kappa: float = Field(default=0.6, ge=-1, le=1, description="the lowest Cohen's kappa a gated question needs")
    min_items: int = Field(default=30, ge=1, description="the fewest labelled items a calibration needs")


class Labelling(_Strict):
    """A share of the online judge's verdicts, with the data each question received, appended to a verdicts file
    that ``judge queue`` samples for people to label: how agreement is measured again on recent traffic."""

    file: Path = Field(description="the verdicts file (JSONL) verdicts are appended to")
    share: float = Field(default=0.01, gt=0, le=1, description="share of verdicts kept (deterministic per call)")
    max_items: int = Field(default=10_000, ge=1, description="lines the file may hold; then nothing more is added")


class ScaleItem(_Strict):
    label: str = Field(pattern=_NAME, description="what the judge answers")
    score: float = Field(description="written as gen_ai.evaluation.score.value")
    meaning: str = Field(default="", description="shown to the judge next to the label")


class QuestionConfig(_Strict):
    """One judge question: one judge call per judged tool call."""

    name: str = Field(pattern=_NAME, description="the span is named 'toolcall_eval.judge <name>'")
    prompt: str = Field(min_length=1, description="the question, addressed to the judge")
    fields: list[FieldName] = Field(min_length=1, description="the only data the judge receives")
    scale: list[ScaleItem] = Field(min_length=2, description="the verdicts the judge may give, each with its score")
    when: When = Field(default="always", description="which calls the question applies to")

    @property
    def passing(self) -> frozenset[str]:
        """The labels that count as a pass (score >= ``PASS_SCORE``)."""
        return frozenset(s.label for s in self.scale if s.score >= PASS_SCORE)

    @field_validator("scale")
    @classmethod
    def _unique_labels(cls, value: list[ScaleItem]) -> list[ScaleItem]:
        labels = [s.label for s in value]
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        if dupes:
            raise ValueError(f"duplicate labels {dupes}")
        return value

    @field_validator("fields")
    @classmethod
    def _unique_fields(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a field is listed twice")
        return value


# The built-in questions, by name: a config names one of these or defines its own.
def _scale(*items: tuple[str, float, str]) -> list[ScaleItem]:
    return [ScaleItem(label=label, score=score, meaning=meaning) for label, score, meaning in items]


BUILTIN: Final[dict[str, QuestionConfig]] = {
    q.name: q
    for q in (
        QuestionConfig(
            name="tool_appropriateness",
            prompt=(
                "Was the tool the assistant called the right tool for the user's request, given the tools it had? "
                "Judge only the choice of tool, not its arguments or its result."
            ),
            fields=["request", "tool_name", "available_tools"],
            scale=_scale(
                ("appropriate", 1.0, "the best tool available for the request"),
                ("acceptable", 0.5, "it can serve the request, but another available tool fits better"),
                ("inappropriate", 0.0, "it does not serve the request"),
            ),
        ),
        QuestionConfig(
            name="argument_quality",
            prompt=(
                "Do the free-text arguments of this call (queries, message bodies, titles) express what the user "
                "asked for, precisely and faithfully? Penalise lost constraints, invented facts, wrong people, "
                "dates or places, and content the user did not ask for."
            ),
            fields=["request", "tool_name", "free_text_arguments"],
            scale=_scale(
                ("good", 1.0, "faithful and precise"),
                ("partial", 0.5, "usable, but vague, incomplete or with minor additions"),
                ("poor", 0.0, "misrepresents the request or invents content"),
            ),
            when="free_text",
        ),
        QuestionConfig(
            name="error_handling",
            prompt=(
                "This tool call failed. What did the assistant do next? Classify its reaction from its next output "
                "and the tool calls that followed."
            ),
            fields=["tool_name", "arguments", "error", "reaction"],
            scale=_scale(
                ("corrected_retry", 1.0, "called the same tool again with arguments that address the error"),
                ("switched_tool", 1.0, "used another tool that can achieve the goal"),
                ("handed_back", 1.0, "told the user about the failure or asked the user for what was missing"),
                ("unchanged_retry", 0.25, "called the same tool again without fixing the cause"),
                ("carried_on", 0.0, "continued or answered as if the call had returned data"),
            ),
            when="failed",
        ),
        QuestionConfig(
            name="tool_necessity",
            prompt=(
                "Did answering the user's request need a tool call at all, or could the assistant have answered "
                "well from the conversation and general knowledge alone?"
            ),
            fields=["request", "tool_name"],
            scale=_scale(
                ("necessary", 1.0, "the request needs data or an action only a tool provides"),
                ("optional", 0.5, "a tool helps, but a good answer was possible without one"),
                ("unnecessary", 0.0, "the assistant should have answered directly"),
            ),
            when="first_call",
        ),
    )
}


def _builtin_or_custom(value: Any) -> Any:
    """A string names a built-in question; a mapping defines a custom one."""
    if isinstance(value, str):
        if value not in BUILTIN:
            raise ValueError(f"unknown built-in question '{value}' (built in: {', '.join(BUILTIN)})")
        return BUILTIN[value]
    return value


def _default_questions() -> list[QuestionConfig]:
    return list(BUILTIN.values())


class JudgeConfig(_Strict):
    """Everything the judge needs; ``EvalConfig.judge`` is one of these or ``None`` (no judge)."""

    provider: Provider = Field(description="the API the judge speaks (openai: any OpenAI-compatible server)")
    model: str = Field(min_length=1, description="the judge model's name, as the provider knows it")
    base_url: str | None = Field(default=None, description="default: the provider's public API")
    api_key_env: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="environment variable holding the API key"
    )
    headers: dict[str, str] = Field(default_factory=dict, description="extra non-secret request headers")
    price: Price
    budget: Budget | None = Field(default=None, description="required unless the price is zero")
    sampling: Sampling = Field(default_factory=Sampling)
    concurrency: int = Field(default=4, ge=1, le=256, description="judge calls in flight at once")
    queue_size: int = Field(default=1000, ge=1, description="sampled calls waiting; overflow is dropped and counted")
    request_timeout_seconds: float = Field(
        default=30.0, gt=0, description="each attempt's whole deadline: connect, send, wait and read the answer"
    )
    max_response_bytes: int = Field(
        default=1 << 20, ge=1024, description="a longer answer is not read: a response_too_large error verdict"
    )
    max_retries: int = Field(default=3, ge=0, le=10, description="retries on 429, 5xx, timeouts and connection errors")
    retry_backoff_seconds: float = Field(default=0.5, gt=0, description="first backoff; doubles, with jitter")
    max_retry_wait_seconds: float = Field(default=30.0, gt=0, description="a longer Retry-After gives up instead")
    max_output_tokens: int = Field(default=300, ge=16, description="the most tokens one verdict may take")
    temperature: float | None = Field(default=0.0, ge=0, le=2, description="null: do not send one")
    json_mode: bool = Field(default=True, description="openai: ask for response_format json_object")
    token_limit_param: Literal["max_tokens", "max_completion_tokens"] = Field(
        default="max_tokens", description="the request field the output limit is sent in (models differ)"
    )
    max_field_chars: int = Field(default=4000, ge=64, description="each field is cut to this length")
    max_request_chars: int = Field(default=2000, ge=64, description="the user's request kept per trace")
    min_free_text_chars: int = Field(default=16, ge=1, description="shorter strings are not free text")
    redact: Redaction = Field(default_factory=Redaction)
    parent_to_judged_span: bool = Field(default=True, description="verdict spans are children of the judged span")
    shutdown_timeout_seconds: float = Field(
        default=10.0, ge=0, description="how long shutdown waits for queued verdicts"
    )
    calibration: Calibration | None = Field(
        default=None, description="calibration records and the agreement a gated judge metric needs"
    )
    labelling: Labelling | None = Field(default=None, description="a share of verdicts kept for human labelling")
    questions: list[Annotated[QuestionConfig, BeforeValidator(_builtin_or_custom)]] = Field(
        default_factory=_default_questions, min_length=1
    )

    @model_validator(mode="before")
    @classmethod
    def _no_literal_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and "api_key" in data:
            raise ValueError("api_key: keys are read from the environment only; set api_key_env to the variable's name")
        return data

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError(f"'{value}' is not an http(s) URL")
        return None if value is None else value.rstrip("/")

    @model_validator(mode="after")
    def _consistent(self) -> JudgeConfig:
        if self.budget is None and not self.price.free:
            raise ValueError("budget: required when the price is not zero (the judge must never overspend)")
        names = [q.name for q in self.questions]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"questions: duplicate names {dupes}")
        return self

    @property
    def url(self) -> str:
        return self.base_url or DEFAULT_BASE_URLS[self.provider]

    def needs(self, field: str) -> bool:
        return any(field in q.fields for q in self.questions)
