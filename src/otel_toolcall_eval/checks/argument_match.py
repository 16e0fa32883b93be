"""Argument accuracy of a call matched to its expected call, in three layers, short-circuited:

1. schema validity (``checks.schema``; a parse failure comes before it and is scored apart),
2. required-argument match over the keys of the expected call only (extras ignored unless the expected call
   says ``required_args_only: false``), after normalisation,
3. free-text similarity for fields declared free text: ``similarity(expected, actual) >= threshold``.

A layer runs only when the one before it passed: a schema-invalid call is not also reported as a value
mismatch. Normalisation (each part configurable) makes two values equal when they differ only in:

- case and surrounding whitespace of strings (case is kept for an argument whose schema declares two enum
  members that differ only in case: ``case_sensitive_keys``),
- the format of a date or date-time (ISO 8601 and the configured ``strptime`` formats; time zones are
  compared in UTC, a naive time never equals an aware one, a date never equals a date-time),
- a configured ID prefix (``ORD-12345`` == ``12345``),
- a numeric string against a number (``"12345"`` == ``12345``; two strings stay strings, so ``"007"`` != ``"7"``),
- null, absent and empty string, as configured (default: null == absent, empty string distinct),
- the unit of an argument configured as an amount (``checks.quantities``: ``"£12.50"`` == ``1250`` in pence,
  ``"5 km"`` == ``5000`` in metres); such an argument compares by amount only.

An argument the expected call lists in ``exact_args`` (``exact``: an identifier, code, a source literal, where
``myList`` and ``MyList`` are different names) is compared without any of that: the same JSON value, strings
character for character; only the null/absent rules apply.

Booleans are never numbers (``true`` != ``1``), and ``1`` equals ``1.0`` only where the tool's schema says
``number`` (``checks.schema_at``): where it says ``integer``, or nothing, ``1.0`` is another literal. Objects
compare key by key with the same rules; arrays compare element by element, in order. The same holds at every
depth: Python's ``==`` on two containers (``{"a": True} == {"a": 1}``) is never taken for JSON equality.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from functools import lru_cache, partial
from typing import Any, Protocol

from otel_toolcall_eval.checks.schema_at import SchemaAt

ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "<absent>"})()

# Performance: the schema is asked only where two values can need it (``under``). Looking it up at every key
# cost the offline scorer ~15 % more instructions per case (a ``checks.schema_at`` walk of its own, interpreted in
# the compiled build too, for every key of a pair that did not pass its fast path, though string against string or
# two equal values of one type never asks).
_NEVER_ASK = frozenset({str, bool, type(None), type(ABSENT)})  # no number, no container inside
_ONE_TYPE_NEVER_ASKS = frozenset({str, bool, int, float, type(None), type(ABSENT)})


def under(schema: SchemaAt | None, where: str | int, expected: Any, actual: Any) -> SchemaAt | None:
    """The schema at an object's key (``str``) or an array's element (``int``) for comparing ``expected`` with
    ``actual`` there; None, without a lookup, when the comparison cannot ask it: it is asked only by two numbers
    of different types, a number and a string (``numeric_strings``) or two containers (numbers inside)."""
    if schema is None:
        return None
    te, ta = type(expected), type(actual)
    if te is ta:
        if te in _ONE_TYPE_NEVER_ASKS:
            return None
    elif te in _NEVER_ASK and ta in _NEVER_ASK:
        return None
    return schema.at_key(where) if isinstance(where, str) else schema.item(where)


# Unambiguous formats tried after ISO 8601; add "%m/%d/%Y" or "%d/%m/%Y" in the config if your data uses one.
DEFAULT_DATE_FORMATS: tuple[str, ...] = (
    "%Y/%m/%d",
    "%Y.%m.%d",
    "%d %B %Y",
    "%d %b %Y",
    "%B %d, %Y",
    "%b %d, %Y",
    "%B %d %Y",
    "%b %d %Y",
    "%Y/%m/%d %H:%M",
    "%Y/%m/%d %H:%M:%S",
    "%B %d, %Y %H:%M",
    "%B %d, %Y %I:%M %p",
    "%b %d, %Y %I:%M %p",
)
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_TIME_DIRECTIVES = ("%H", "%I", "%M", "%S")


class Quantity(Protocol):
    """An argument compared by the amount it stands for (``checks.quantities.Money``, ``PhysicalQuantity``)."""

    def equal(self, expected: Any, actual: Any) -> bool: ...


class TextSimilarity(Protocol):
    """Similarity of two texts in [0, 1]. The default is rapidfuzz; an embedding model is an optional extra."""

    def similarity(self, expected: str, actual: str) -> float: ...


# rapidfuzz.fuzz's scorers the config accepts (``arguments.similarity.scorer``)
SCORERS = ("ratio", "partial_ratio", "token_sort_ratio", "token_set_ratio", "WRatio", "QRatio")


@dataclass(slots=True, frozen=True)
class RapidfuzzSimilarity:
    """rapidfuzz ratio / 100, on lower-cased, punctuation-stripped text (``utils.default_process``). rapidfuzz
    (the offline extra) is imported at the first comparison: the processor's config reaches this module."""

    scorer: str = "token_sort_ratio"
    _fn: Callable[[str, str], float] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.scorer not in SCORERS:
            raise ValueError(f"rapidfuzz.fuzz has no scorer '{self.scorer}'")

    def similarity(self, expected: str, actual: str) -> float:
        fn = self._fn
        if fn is None:
            from rapidfuzz import fuzz, utils

            fn = partial(getattr(fuzz, self.scorer), processor=utils.default_process)
            object.__setattr__(self, "_fn", fn)
        return float(fn(expected, actual)) / 100.0


@dataclass(slots=True, frozen=True)
class Normalizer:
    """The normalisation options, made plain once (``config.offline.ArgumentMatchConfig.normalizer()``)."""

    case_insensitive: bool = True
    strip_whitespace: bool = True
    dates: bool = True
    date_formats: tuple[str, ...] = DEFAULT_DATE_FORMATS
    id_prefixes: tuple[str, ...] = ()
    numeric_strings: bool = True
    null_is_absent: bool = True
    empty_string_is_absent: bool = False

    def absent(self, value: Any) -> bool:
        if value is ABSENT:
            return True
        if value is None:
            return self.null_is_absent
        return self.empty_string_is_absent and value == ""

    def equal(
        self,
        expected: Any,
        actual: Any,
        required_only: bool = True,
        fold_case: bool = True,
        schema: SchemaAt | None = None,
    ) -> bool:
        """Are two argument values the same after normalisation? (``ABSENT`` stands for a missing key.)

        ``fold_case`` False keeps case even when ``case_insensitive`` is set (see ``case_sensitive_keys``);
        ``schema``: the schema at this value (``1`` is ``1.0`` only where it says number).
        """
        te, ta = type(expected), type(actual)
        if te is ta and te is not dict and te is not list and expected == actual:
            return True  # containers never here: Python's == says {"a": True} == {"a": 1}
        e_absent, a_absent = self.absent(expected), self.absent(actual)
        if e_absent or a_absent:
            return e_absent and a_absent
        if te is bool or ta is bool:
            return False  # equal bools returned above; a bool never equals a number or string
        if te is str:
            if ta is str:
                return self._strings_equal(expected, actual, fold_case)
            return ta in (int, float) and self.numeric_strings and same_number(_number(expected), actual, schema)
        if ta is str:
            return te in (int, float) and self.numeric_strings and same_number(expected, _number(actual), schema)
        if te in (int, float) and ta in (int, float):
            return same_number(expected, actual, schema)
        if isinstance(expected, Mapping) and isinstance(actual, Mapping):
            return not self.mismatched_keys(expected, actual, required_only, fold_case=fold_case, schema=schema)
        if isinstance(expected, list) and isinstance(actual, list):
            return len(expected) == len(actual) and all(
                self.equal(e, a, required_only, fold_case, under(schema, i, e, a))
                for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            )
        return False

    def mismatched_keys(
        self,
        expected: Mapping[str, Any],
        actual: Mapping[str, Any],
        required_only: bool = True,
        exact_case: Collection[str] = (),
        fold_case: bool = True,
        quantities: Mapping[str, Quantity] | None = None,
        exact: Collection[str] = (),
        schema: SchemaAt | None = None,
    ) -> list[str]:
        """Keys of ``expected`` whose values differ, then (strict mode) ``+key`` for each extra actual key.

        Keys in ``exact_case`` compare with case kept (``case_sensitive_keys``); keys in ``quantities`` by amount;
        keys in ``exact`` without normalisation (``exact_equal``); ``schema``: the object's schema.
        """
        if quantities or exact:
            bad = []
            for k, e in expected.items():
                a, quantity = actual.get(k, ABSENT), quantities.get(k) if quantities else None
                at = under(schema, k, e, a)
                if k in exact:
                    if not self.exact_equal(e, a, at):
                        bad.append(k)
                elif quantity is not None:
                    if not self.amount_equal(quantity, e, a):
                        bad.append(k)
                elif not self.equal(e, a, required_only, fold_case and k not in exact_case, at):
                    bad.append(k)
        else:
            bad = []
            for k, e in expected.items():
                a = actual.get(k, ABSENT)
                if not self.equal(e, a, required_only, fold_case and k not in exact_case, under(schema, k, e, a)):
                    bad.append(k)
        if not required_only:
            bad += [f"+{k}" for k, a in actual.items() if k not in expected and not self.absent(a)]
        return bad

    def exact_equal(self, expected: Any, actual: Any, schema: SchemaAt | None = None) -> bool:
        """``equal`` without normalisation (``exact_args``): the absent rules, then the same JSON value."""
        e_absent, a_absent = self.absent(expected), self.absent(actual)
        if e_absent or a_absent:
            return e_absent and a_absent
        return same_json(expected, actual, schema)

    def amount_equal(self, quantity: Quantity, expected: Any, actual: Any) -> bool:
        """``equal`` for an argument that is an amount: the absent rules, then by amount (no string folding)."""
        if type(expected) is type(actual) and expected == actual:
            return True
        e_absent, a_absent = self.absent(expected), self.absent(actual)
        if e_absent or a_absent:
            return e_absent and a_absent
        return quantity.equal(expected, actual)

    def _fold(self, text: str, fold_case: bool) -> str:
        if self.strip_whitespace:
            text = text.strip()
        return text.casefold() if self.case_insensitive and fold_case else text

    def _strings_equal(self, expected: str, actual: str, fold_case: bool = True) -> bool:
        e, a = self._fold(expected, fold_case), self._fold(actual, fold_case)
        if e == a:
            return True
        if self.id_prefixes:
            e2, a2 = self._strip_prefix(e), self._strip_prefix(a)
            if e2 == a2:
                return True
        if self.dates:
            de = canonical_datetime(e, self.date_formats)
            return de is not None and de == canonical_datetime(a, self.date_formats)
        return False

    def _strip_prefix(self, text: str) -> str:
        for prefix in self.id_prefixes:
            p = prefix.casefold() if self.case_insensitive else prefix
            if text.startswith(p) and len(text) > len(p):
                return text[len(p) :]
        return text


def same_json(a: Any, b: Any, schema: SchemaAt | None = None) -> bool:
    """Are two parsed JSON values the same value? Strings character for character, a boolean only a boolean
    (Python's ``True == 1`` is not JSON's), numbers by value where ``schema`` says number (``5`` is ``5.0``) and
    of the same literal kind elsewhere; objects key by key, arrays element by element."""
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if ta in (int, float) and tb in (int, float):
        return same_number(a, b, schema)
    if ta is not tb:
        return False
    if ta is list:
        return len(a) == len(b) and all(
            same_json(x, y, under(schema, i, x, y)) for i, (x, y) in enumerate(zip(a, b, strict=True))
        )
    if ta is dict:
        return a.keys() == b.keys() and all(same_json(v, b[k], under(schema, k, v, b[k])) for k, v in a.items())
    return bool(a == b)


def same_number(a: int | float | None, b: int | float | None, schema: SchemaAt | None) -> bool:
    """Two numbers (None: a string that spells none) are one value: of one Python type and equal, or equal where
    the schema says ``number`` (``1`` and ``1.0``; under ``integer`` or no schema ``1.0`` is another literal)."""
    if a is None or b is None or a != b:
        return False
    return type(a) is type(b) or (schema is not None and schema.number)


def identical(a: Any, b: Any) -> bool:
    """The same value of the same Python type at every depth: the fast paths' test, which passes a pair without
    normalising it. Python's ``==`` is not that for containers (``{"a": True} == {"a": 1.0}``)."""
    t = type(a)
    if t is not type(b):
        return False
    if t is dict:
        return a.keys() == b.keys() and all(identical(v, b[k]) for k, v in a.items())
    if t is list:
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def case_sensitive_keys(parameters: Mapping[str, Any] | None) -> frozenset[str]:
    """The top-level arguments whose declared ``enum`` (or its array's ``items.enum``) has two members that
    differ only in case: there ``AA`` and ``aa`` are different values, so case is not folded for that key."""
    if not isinstance(parameters, Mapping):
        return frozenset()
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return frozenset()
    out = []
    for key, schema in properties.items():
        if not isinstance(schema, Mapping):
            continue
        items = schema.get("items")
        for where in (schema, items if isinstance(items, Mapping) else None):
            members = where.get("enum") if where is not None else None
            if isinstance(members, list):
                texts = [m for m in members if isinstance(m, str)]
                if len({m.casefold() for m in texts}) < len(set(texts)):
                    out.append(key)
                    break
    return frozenset(out)


def _number(text: str) -> int | float | None:
    """The number a numeric string spells (ints stay exact), else None."""
    text = text.strip()
    if _INTEGER.fullmatch(text):
        return int(text)
    return float(text) if _NUMBER.fullmatch(text) else None


@lru_cache(maxsize=8192)
def canonical_datetime(text: str, formats: tuple[str, ...] = DEFAULT_DATE_FORMATS) -> str | None:
    """``d:YYYY-MM-DD`` for a date, ``t:<ISO>`` for a naive date-time, ``z:<ISO in UTC>`` for an aware one."""
    text = text.strip()
    if not 6 <= len(text) <= 40 or not any(c.isdigit() for c in text):
        return None
    if len(text) == 10 and text[4] == "-":
        try:
            return "d:" + date.fromisoformat(text).isoformat()
        except ValueError:
            return None
    iso = text[:-1] + "+00:00" if text[-1] in "zZ" else text
    try:
        return _canonical(datetime.fromisoformat(iso.upper() if "t" in iso else iso))
    except ValueError:
        pass
    for fmt in formats:
        try:
            parsed = datetime.strptime(text, fmt)
        except ValueError:
            continue
        if not any(d in fmt for d in _TIME_DIRECTIVES):
            return "d:" + parsed.date().isoformat()
        return _canonical(parsed)
    return None


def _canonical(value: datetime) -> str:
    if value.tzinfo is None:
        return "t:" + value.isoformat()
    return "z:" + value.astimezone(timezone.utc).replace(tzinfo=None).isoformat()


@dataclass(slots=True, frozen=True)
class ArgumentVerdict:
    """``failed``: the first layer that failed (``parse``, ``schema``, ``required``, ``free_text``), or None."""

    failed: str | None
    mismatched: tuple[str, ...] = ()
    similarity: float | None = None  # the lowest free-text similarity compared

    @property
    def ok(self) -> bool:
        return self.failed is None


def closeness(verdict: ArgumentVerdict) -> tuple[bool, float]:
    """(passed, how close in [0, 1]) of a verdict: the weight of a pair when calls are paired (checks.pairing).

    A call that did not parse or fails its schema is not close at all; a value mismatch is closer the fewer
    keys differ; a free-text miss is closer than any value mismatch, by its similarity.
    """
    failed = verdict.failed
    if failed is None:
        return True, 1.0
    if failed == "required":
        return False, 0.5 / max(len(verdict.mismatched), 1)
    if failed == "free_text":
        return False, 0.5 + 0.5 * (verdict.similarity or 0.0)
    return False, 0.0


PASSED = ArgumentVerdict(None)
PARSE_FAILED = ArgumentVerdict("parse")
SCHEMA_FAILED = ArgumentVerdict("schema")


def match_arguments(
    expected: Mapping[str, Any],
    actual: Mapping[str, Any] | None,
    normalizer: Normalizer,
    *,
    parse_ok: bool | None = True,
    schema_valid: bool | None = None,
    required_only: bool = True,
    free_text: Collection[str] = (),
    similarity: TextSimilarity | None = None,
    threshold: float = 0.8,
    exact_case: Collection[str] = (),
    options: Mapping[str, Sequence[Any]] | None = None,
    optional: Collection[str] = (),
    quantities: Mapping[str, Quantity] | None = None,
    text_rules: Mapping[str, tuple[TextSimilarity, float]] | None = None,
    exact: Collection[str] = (),
    schema: SchemaAt | Mapping[str, Any] | None = None,
) -> ArgumentVerdict:
    """The three layers for one matched pair. ``actual`` None with ``parse_ok`` not False: no arguments recorded.

    ``options``: per-argument alternatives (the argument equals one of the values); ``optional``: keys that may
    also be absent (of ``expected`` or ``options``); ``quantities``: keys compared by amount (layer 2);
    ``text_rules``: a free-text key's own similarity and threshold (layer 3; else ``similarity``, ``threshold``);
    ``exact``: keys compared without normalisation (layer 2, never as free text); ``schema``: the tool's
    parameters schema (where it says number, ``1`` is ``1.0``).
    """
    if schema is not None and not isinstance(schema, SchemaAt):
        schema = SchemaAt.of(schema)
    if parse_ok is False:
        return PARSE_FAILED
    if schema_valid is False:
        return SCHEMA_FAILED
    args: Mapping[str, Any] = actual if actual is not None else {}
    if exact and free_text:
        free_text = [k for k in free_text if k not in exact]
    if options or optional:
        return _with_options(
            expected, args, normalizer, options or {}, optional, required_only, free_text, similarity, threshold,
            exact_case, quantities, text_rules, exact, schema,
        )  # fmt: skip
    if required_only and not free_text:
        for key, want in expected.items():  # fast path: identical values need no normalisation
            got = args.get(key, ABSENT)
            if type(got) is not type(want) or got != want:
                break
            if (type(want) is dict or type(want) is list) and not identical(want, got):
                break
        else:
            return PASSED
    if not free_text:
        bad = normalizer.mismatched_keys(
            expected, args, required_only, exact_case, quantities=quantities, exact=exact, schema=schema
        )
        return ArgumentVerdict("required", tuple(bad)) if bad else PASSED
    strict = {k: v for k, v in expected.items() if k not in free_text}
    bad = normalizer.mismatched_keys(strict, args, True, exact_case, quantities=quantities, exact=exact, schema=schema)
    if not required_only:
        bad += [f"+{k}" for k, a in args.items() if k not in expected and not normalizer.absent(a)]
    if bad:
        return ArgumentVerdict("required", tuple(bad))
    lowest: float | None = None
    low_keys: list[str] = []
    for key in free_text:
        if key not in expected:
            continue
        e, a = expected[key], args.get(key, ABSENT)
        rule = text_rules.get(key) if text_rules else None
        measure, least = rule if rule is not None else (similarity or _DEFAULT_SIMILARITY, threshold)
        if isinstance(e, str) and isinstance(a, str):
            score = 1.0 if e == a else measure.similarity(e, a)
        else:
            score = 1.0 if normalizer.equal(e, a, schema=under(schema, key, e, a)) else 0.0
        lowest = score if lowest is None or score < lowest else lowest
        if score < least:
            low_keys.append(key)
    if low_keys:
        return ArgumentVerdict("free_text", tuple(low_keys), lowest)
    return ArgumentVerdict(None, (), lowest)


def _with_options(
    expected: Mapping[str, Any],
    args: Mapping[str, Any],
    normalizer: Normalizer,
    options: Mapping[str, Sequence[Any]],
    optional: Collection[str],
    required_only: bool,
    free_text: Collection[str],
    similarity: TextSimilarity | None,
    threshold: float,
    exact_case: Collection[str],
    quantities: Mapping[str, Quantity] | None,
    text_rules: Mapping[str, tuple[TextSimilarity, float]] | None,
    exact: Collection[str],
    schema: SchemaAt | None,
) -> ArgumentVerdict:
    """``match_arguments`` with per-argument alternatives and optional keys: an optional key that is absent
    is not compared, an option key matches any of its values; the rest as without them."""
    missing = [k for k in optional if normalizer.absent(args.get(k, ABSENT))]
    bad = []
    for key, values in options.items():
        got = args.get(key, ABSENT)
        if key in missing:
            continue
        quantity = quantities.get(key) if quantities else None
        if quantity is not None:
            if not any(normalizer.amount_equal(quantity, v, got) for v in values):
                bad.append(key)
            continue
        if key in exact:
            if not any(normalizer.exact_equal(v, got, under(schema, key, v, got)) for v in values):
                bad.append(key)
            continue
        fold = key not in exact_case
        if not any(normalizer.equal(v, got, required_only, fold, under(schema, key, v, got)) for v in values):
            bad.append(key)
    rest = {k: v for k, v in expected.items() if k not in missing} if missing else expected
    # option keys are expected keys too: never "+key" extras in strict mode
    view = {k: v for k, v in args.items() if k not in options} if not required_only and options else args
    verdict = match_arguments(
        rest, view, normalizer, required_only=required_only, free_text=free_text, similarity=similarity,
        threshold=threshold, exact_case=exact_case, quantities=quantities, text_rules=text_rules, exact=exact,
        schema=schema,
    )  # fmt: skip
    if not bad:
        return verdict
    if verdict.failed == "required":
        return ArgumentVerdict("required", (*bad, *verdict.mismatched))
    return ArgumentVerdict("required", tuple(bad))


_DEFAULT_SIMILARITY = RapidfuzzSimilarity()
