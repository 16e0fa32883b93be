"""The ``pricing:`` and ``metrics:`` sections: a price table per model, so a trace's token usage becomes a cost, and
whether the per-trace cost and latency histograms are recorded.

Validated with the rest of the config (errors name the field, e.g.
``pricing.models.gpt-4o.input_per_million: Input should be greater than or equal to 0``); the price table is
compiled to the plain ``checks.cost.Price`` table the processor reads.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from otel_toolcall_eval.checks.cost import Price


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ModelPrice(_Strict):
    input_per_million: float = Field(ge=0, description="price of 1,000,000 input (prompt) tokens")
    output_per_million: float = Field(ge=0, description="price of 1,000,000 output (completion) tokens")


class Pricing(_Strict):
    """``models``: model name -> price; a recorded model name also takes the price of the longest configured
    name it extends by ``-...`` or ``@...`` (``gpt-4o-2024-08-06`` -> ``gpt-4o``)."""

    currency: str = Field(default="USD", min_length=1, max_length=16, description="the prices' currency (a label)")
    models: dict[str, ModelPrice] = Field(
        default_factory=dict, description="model name -> price, for toolcall_eval.trace.cost"
    )

    @field_validator("models")
    @classmethod
    def _names(cls, value: dict[str, ModelPrice]) -> dict[str, ModelPrice]:
        bad = [name for name in value if not name.strip()]
        if bad:
            raise ValueError("a model name must not be empty")
        return value

    def table(self) -> dict[str, Price]:
        return {name: Price(p.input_per_million, p.output_per_million) for name, p in self.models.items()}


class MetricsConfig(_Strict):
    """``histograms``: record the per-trace cost and latency histograms and the per-tool latency histogram. Off by
    default: each is a synchronous SDK ``Histogram.record`` (about 50,000 instructions on opentelemetry-sdk 1.45; 11
    for an agent trace of 5 tool calls, +16 % of the whole trace's instructions: docs/performance.md), and the
    numbers are on the root span anyway (the Collector's spanmetrics connector makes per-tool latency histograms
    from the exported spans). Off, the root span still carries every number and the counters still count."""

    histograms: bool = Field(
        default=False, description="also record the per-trace and per-tool histograms (each a synchronous record)"
    )
