"""Cost and latency of a trace as numbers: model calls, tokens, cost from a price table, tool latency and errors.

Token counts come from the model-call spans only: an agent span (GenAI ``invoke_agent``, OpenInference ``AGENT``)
repeats the sum of its turns (Strands, smolagents), and Google ADK's legacy ``call_llm`` span repeats its child
``generate_content``'s usage, so counting either would double the tokens. Attribute names, newest first (a span
carrying both spellings, as Strands' does, is counted once): ``gen_ai.usage.input_tokens`` /
``gen_ai.usage.output_tokens``, the older ``gen_ai.usage.prompt_tokens`` / ``completion_tokens``, OpenInference's
``llm.token_count.prompt`` / ``.completion``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

INPUT_TOKEN_KEYS: Final = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
OUTPUT_TOKEN_KEYS: Final = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)
MODEL_KEYS: Final = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
MODEL_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})
MAX_TOKENS: Final = 1 << 40  # a count above this is not a token count (untrusted input): ignored


class Price(NamedTuple):
    """Per 1,000,000 tokens, in the price table's currency."""

    input_per_million: float
    output_per_million: float


class ModelUsage(NamedTuple):
    model: str | None
    input_tokens: int | None
    output_tokens: int | None


_new_usage: Any = tuple.__new__  # a ``ModelUsage`` without the NamedTuple's Python-level ``__new__`` (per model span)


def _count(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = attrs.get(key)
        if value is None:
            continue
        if isinstance(value, bool):
            return None
        if isinstance(value, str):  # some exporters record numbers as text
            value = value.strip()
            if not value.isdigit() or len(value) > 15:
                return None
            value = int(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and 0 <= value <= MAX_TOKENS:
            return value
        return None
    return None


def is_model_call(attrs: Mapping[str, Any]) -> bool:
    """A span that is one model call (not an agent span summing its turns), whatever it recorded: hidden inputs and
    outputs and a model that reports no usage leave a request with neither tokens nor output messages. A step an
    instrumentation marks as a model span beside the request (LlamaIndex's ``_prepare_chat_with_tools``) is told
    by its scope's row (``Shape.not_requests``), never from what it recorded."""
    op = attrs.get("gen_ai.operation.name")
    if op is not None:
        return op in MODEL_OPERATIONS
    kind = attrs.get("openinference.span.kind")
    if kind is not None:
        return kind in ("LLM", "llm")
    return attrs.get("llm.request.type") in ("chat", "completion")  # OpenLLMetry


def model_usage(attrs: Mapping[str, Any]) -> ModelUsage | None:
    """The model call's model and token counts; None when the span is not a model call."""
    if not is_model_call(attrs):
        return None
    model = next((v for k in MODEL_KEYS if isinstance(v := attrs.get(k), str) and v), None)
    usage: ModelUsage = _new_usage(
        ModelUsage, (model, _count(attrs, INPUT_TOKEN_KEYS), _count(attrs, OUTPUT_TOKEN_KEYS))
    )
    return usage


def price_for(prices: Mapping[str, Price], model: str | None) -> Price | None:
    """The model's price: its exact name, else the longest configured name it starts with followed by ``-`` or
    ``@`` (``gpt-4o-2024-08-06`` takes ``gpt-4o``'s price), else None."""
    if model is None or not prices:
        return None
    found = prices.get(model)
    if found is not None:
        return found
    best: str | None = None
    for name in prices:
        if model.startswith(name) and model[len(name) : len(name) + 1] in ("-", "@") and len(name) > len(best or ""):
            best = name
    return None if best is None else prices[best]


@dataclass(slots=True)
class TraceCost:
    """Running model-call totals of one trace (bounded: a few numbers, whatever its length); made for the trace's
    first model call only, so a trace without one pays nothing."""

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    unpriced_calls: int = 0  # model calls whose model has no price (or that recorded no model)
    counted_calls: int = 0  # model calls that recorded a token count (none: the tokens are unknown, not zero)

    def add_model_call(self, usage: ModelUsage, prices: Mapping[str, Price]) -> None:
        self.model_calls += 1
        if usage.input_tokens is not None or usage.output_tokens is not None:
            self.counted_calls += 1
        tokens_in = usage.input_tokens or 0
        tokens_out = usage.output_tokens or 0
        self.input_tokens += tokens_in
        self.output_tokens += tokens_out
        price = price_for(prices, usage.model)
        if price is None:
            self.unpriced_calls += 1
        else:
            self.cost += (tokens_in * price.input_per_million + tokens_out * price.output_per_million) / 1e6


def new_trace_cost() -> TraceCost:
    """``TraceCost()`` for a trace's first model call, without the Python frame of the dataclass's generated
    ``__init__`` (``records.new_trace_verdict`` says why); ``tests/checks/test_checks.py`` checks it equals
    ``TraceCost()``."""
    cost = TraceCost.__new__(TraceCost)
    cost.model_calls = 0
    cost.input_tokens = 0
    cost.output_tokens = 0
    cost.cost = 0.0
    cost.unpriced_calls = 0
    cost.counted_calls = 0
    return cost


def error_rate(tool_calls: int, errors: int) -> float | None:
    return None if tool_calls <= 0 else errors / tool_calls
