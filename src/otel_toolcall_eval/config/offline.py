"""Offline-evaluation settings: the gate's thresholds and spread guard, and how arguments are compared.

They live under ``gate:`` and ``arguments:`` of the one config file (``EvalConfig``); this module must not
import ``otel_toolcall_eval.config`` (that module imports this one).
"""

from __future__ import annotations

import importlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from otel_toolcall_eval.checks.argument_match import (
    DEFAULT_DATE_FORMATS,
    Normalizer,
    RapidfuzzSimilarity,
    TextSimilarity,
)
from otel_toolcall_eval.checks.trajectory import ArgsMode, TrajectoryMode
from otel_toolcall_eval.config import catalog


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # no option means nan or inf


class SimilarityConfig(_Strict):
    """How free-text fields are compared: a rapidfuzz scorer by default, or your embedding model."""

    scorer: Literal["ratio", "partial_ratio", "token_sort_ratio", "token_set_ratio", "WRatio", "QRatio"] = Field(
        default="token_sort_ratio", description="the rapidfuzz.fuzz scorer"
    )
    threshold: float = Field(default=0.8, ge=0.0, le=1.0, description="similarity at or above this matches")
    embedding: str | None = Field(
        default=None,
        description="import path 'pkg.mod:factory' of a zero-argument callable returning an object with "
        "similarity(expected, actual) -> float in [0, 1] (e.g. cosine of sentence embeddings); replaces rapidfuzz",
    )

    @field_validator("embedding")
    @classmethod
    def _import_path(cls, value: str | None) -> str | None:
        if value is not None and ":" not in value:
            raise ValueError(f"'{value}' must look like 'package.module:factory'")
        return value

    def build(self) -> TextSimilarity:
        if self.embedding is None:
            return RapidfuzzSimilarity(self.scorer)
        module, _, attr = self.embedding.partition(":")
        try:
            factory: Any = importlib.import_module(module)
        except ImportError as exc:
            raise ValueError(f"arguments.similarity.embedding: cannot import '{module}': {exc}") from None
        for part in attr.split("."):
            factory = getattr(factory, part, None)
            if factory is None:
                raise ValueError(f"arguments.similarity.embedding: '{module}' has no '{attr}'")
        model = factory()
        if not callable(getattr(model, "similarity", None)):
            raise ValueError(f"arguments.similarity.embedding: {self.embedding}() has no similarity(a, b) method")
        return model  # type: ignore[no-any-return]


class ArgumentMatchConfig(_Strict):
    """Normalisation before comparing an expected argument with the actual one (see checks.argument_match)."""

    case_insensitive: bool = Field(default=True, description="'Paris' == 'paris'")
    strip_whitespace: bool = Field(default=True, description="' Paris ' == 'Paris'")
    dates: bool = Field(default=True, description="'2024-03-05' == 'March 5, 2024'")
    date_formats: list[str] = Field(
        default_factory=lambda: list(DEFAULT_DATE_FORMATS),
        description="strptime formats tried after ISO 8601",
    )
    id_prefixes: list[str] = Field(default_factory=list, description="'ORD-12345' == '12345' with ['ORD-']")
    numeric_strings: bool = Field(default=True, description="'12345' == 12345")
    null_equals_absent: bool = Field(default=True, description="null == a missing key")
    empty_string_equals_absent: bool = Field(default=False, description="'' == a missing key")
    free_text: dict[str, list[str]] = Field(
        default_factory=dict,
        description="tool name (or '*' for every tool) -> argument names compared by similarity, not equality",
    )
    similarity: SimilarityConfig = Field(
        default_factory=SimilarityConfig, description="how free-text fields are compared (`arguments.similarity.*`)"
    )

    @field_validator("date_formats")
    @classmethod
    def _formats(cls, value: list[str]) -> list[str]:
        for fmt in value:
            if "%" not in fmt:
                raise ValueError(f"'{fmt}' is not a strptime format (no % directive)")
        return value

    def normalizer(self) -> Normalizer:
        return Normalizer(
            case_insensitive=self.case_insensitive,
            strip_whitespace=self.strip_whitespace,
            dates=self.dates,
            date_formats=tuple(self.date_formats),
            id_prefixes=tuple(sorted(self.id_prefixes, key=len, reverse=True)),
            numeric_strings=self.numeric_strings,
            null_is_absent=self.null_equals_absent,
            empty_string_is_absent=self.empty_string_equals_absent,
        )

    def free_text_fields(self, tool: str) -> frozenset[str]:
        return frozenset(self.free_text.get(tool, ())) | frozenset(self.free_text.get("*", ()))


class TrajectoryConfig(_Strict):
    """The default trajectory match (checks.trajectory) for cases whose dataset row sets none; off without a mode."""

    mode: TrajectoryMode | None = Field(
        default=None,
        description="`strict`, `unordered`, `subset` or `superset` for every case without its own `trajectory`; "
        "null: only cases that set one are matched",
    )
    args: ArgsMode = Field(
        default="exact", description="how arguments match: `exact`, `ignore`, `subset` or `superset`"
    )
    tool_args: dict[str, ArgsMode] = Field(
        default_factory=dict, description="per tool name, an argument mode that replaces `args` (a case's win)"
    )


class GateConfig(_Strict):
    """Thresholds per metric (keys are summary paths, optionally scoped) and the N-sample spread guard."""

    min: dict[str, float] = Field(default_factory=dict, description="metric -> lowest passing value")
    max: dict[str, float] = Field(default_factory=dict, description="metric -> highest passing value")
    max_spread: float | None = Field(
        default=None,
        ge=0.0,
        description="with several runs: the largest allowed max - min of each gated metric across runs",
    )

    @field_validator("min", "max")
    @classmethod
    def _known_metrics(cls, value: dict[str, float]) -> dict[str, float]:
        for path in value:
            catalog.resolve(path)
        return value
