"""Arguments that are amounts, compared by what they amount to: money in a declared currency, in major or minor
units (``"£12.50"`` == ``1250`` for an amount in pence), and physical quantities in a declared unit (``"5 km"`` ==
``5000`` for a length in metres).

A bare number (or numeric string) is in the argument's declared unit; text that names its currency or unit is
read and converted: an amount written with its currency is in major units (``"£12.50"``, ``"12.50 GBP"``), a
quantity written with a unit is converted to the declared one (``"5 km"`` -> 5000 m). A currency other than the
declared one, or a unit of another dimension, is a mismatch (no exchange rates).

The data comes from maintained libraries, never a table of ours: a currency's minor-unit exponent (ISO 4217 as
CLDR carries it) and the symbols it is written with, from babel; amounts as written (separators, symbol before
or after), from price-parser; units and conversions, from pint. They are the optional ``units`` extra, imported
only when a spec is built, so a config without units never loads them.

Values are untrusted, so the work per value is bounded and nothing is evaluated: text over ``MAX_TEXT``
characters is not an amount; numbers are read by a regular expression with a short exponent; pint sees only the
unit part, after a pattern has bounded it to a few unit words with one-digit powers; a magnitude that is not
finite or exceeds ``MAX_MAGNITUDE`` (in the declared unit) is not an amount. A value that is not an amount
equals no other value.
"""

from __future__ import annotations

import math
import re
import threading
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

EXTRA = "units"
INSTALL_HINT = "pip install 'otel-toolcall-eval[units]'"
MAX_TEXT = 64  # characters: "1,234,567.89 GBP" and "12.5 kilometer / hour" fit many times over
MAX_MAGNITUDE = 1e30  # in the declared unit: past any real amount, far below float overflow
_MAX_INT_BITS = 128  # a JSON integer wider than this is no amount (and is not converted to Decimal or float)

_NUMBER = r"[+-]?(?:\d{1,3}(?:,\d{3})+(?:\.\d{1,30})?|\d{1,30}(?:\.\d{0,30})?|\.\d{1,30})(?:[eE][+-]?\d{1,3})?"
_WORD = r"(?:[^\W\d_]|[°%])+"
_POWER = r"(?:\s*(?:\^|\*\*)\s*-?\d)?"
# words meet at an operator or a space, never inside a word: a failing match backtracks linearly, not per split
_UNIT = rf"{_WORD}{_POWER}(?:(?:\s*[*/·]\s*|\s+){_WORD}{_POWER}){{0,3}}"
_QUANTITY = re.compile(rf"\s*({_NUMBER})\s*({_UNIT})?\s*")
_UNIT_MARKS = frozenset(" */·^-°%0123456789")
_AMOUNT_REST = re.compile(r"[\s\d.,'’\u00a0\u202f]*")  # what may stand beside the number and the currency


# what a parser may raise on text that is no unit (pint tokenises with the standard library's tokenize)
_PARSE_ERRORS: tuple[type[Exception], ...] = (
    ValueError,
    TypeError,
    AttributeError,
    KeyError,
    IndexError,
    SyntaxError,
    ArithmeticError,
    AssertionError,  # pint's expression parser asserts on some token sequences
    InvalidOperation,
    tokenize.TokenError,
)


class MissingExtra(ImportError):
    """The ``units`` extra is not installed; the message says how to install it."""


def require() -> None:
    """Raise MissingExtra unless the libraries of the units extra import (checked at start-up, every time)."""
    try:
        import babel.numbers  # noqa: F401
        import pint  # noqa: F401
        import price_parser  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(f"needs the '{EXTRA}' extra ({INSTALL_HINT}): {exc}") from None


def _bounded(value: Any) -> Decimal | None:
    """A JSON number as a Decimal, or None when it is no amount (a bool, too wide, not finite)."""
    kind = type(value)
    if kind is int:
        return Decimal(value) if value.bit_length() <= _MAX_INT_BITS else None
    if kind is float:
        return Decimal(repr(value)) if math.isfinite(value) else None
    return None


@dataclass(frozen=True, slots=True)
class Money:
    """An amount of ``currency``; bare numbers are in its minor units (cents, pence) when ``minor_units``."""

    currency: str
    exponent: int  # ISO 4217 minor-unit digits: 2 for GBP, 0 for JPY, 3 for BHD
    minor_units: bool
    forms: frozenset[str]  # how the currency may be written, case-folded: its code and its symbols

    def amount(self, value: Any) -> Decimal | None:
        """The value in minor units, or None when it is not an amount of this currency."""
        if type(value) is str:
            parsed = _parse_money(value)
            if parsed is None:
                return None
            number, written = parsed
            if written is None:
                minor = number if self.minor_units else number.scaleb(self.exponent)
            elif written.casefold() in self.forms:
                minor = number.scaleb(self.exponent)  # written with its currency: major units
            else:
                return None
        else:
            plain = _bounded(value)
            if plain is None:
                return None
            minor = plain if self.minor_units else plain.scaleb(self.exponent)
        return minor if minor.is_finite() and abs(minor) <= MAX_MAGNITUDE else None

    def equal(self, expected: Any, actual: Any) -> bool:
        e = self.amount(expected)
        return e is not None and e == self.amount(actual)


@lru_cache(maxsize=8192)
def _parse_money(text: str) -> tuple[Decimal, str | None] | None:
    """(amount, currency as written or None) of text that is an amount and nothing else."""
    if len(text) > MAX_TEXT:
        return None
    from price_parser import Price

    price = Price.fromstring(text)
    if price.amount is None:
        return None
    rest = text.replace(price.currency, "", 1) if price.currency else text
    negative = rest.strip().startswith("-")  # price-parser drops the sign
    if not _AMOUNT_REST.fullmatch(rest.strip().removeprefix("-").removeprefix("+")):
        return None  # other words beside the amount ("about 12 pounds", "12 and 3"): not an amount
    amount = Decimal(price.amount)
    return (-amount if negative else amount), price.currency


def check_currency(currency: str) -> str:
    """The ISO 4217 code of ``currency`` when babel knows it; ValueError otherwise (MissingExtra without babel)."""
    require()
    from babel.numbers import list_currencies

    code = currency.upper()
    if code not in list_currencies():
        raise ValueError(f"'{currency}' is not an ISO 4217 currency code babel knows")
    return code


@lru_cache(maxsize=256)
def money(currency: str, minor_units: bool = False) -> Money:
    """The spec of an amount of ``currency`` (an ISO 4217 code babel knows); ValueError for an unknown one."""
    code = check_currency(currency)
    from babel import Locale, localedata
    from babel.core import get_global
    from babel.numbers import get_currency_precision, get_currency_symbol

    forms = {code.casefold(), get_currency_symbol(code, "en").casefold()}
    # the symbol as written where the currency is legal tender ("$" for CAD in en_CA, "A$" in English)
    territories = {t for t, used in get_global("territory_currencies").items() if any(u[0] == code for u in used)}
    for identifier in localedata.locale_identifiers():
        if identifier.rsplit("_", 1)[-1] in territories:
            symbol = Locale.parse(identifier).currency_symbols.get(code)
            if symbol:
                forms.add(symbol.casefold())
    return Money(code, get_currency_precision(code), minor_units, frozenset(forms))


@dataclass(frozen=True, slots=True)
class PhysicalQuantity:
    """A quantity whose bare numbers are in ``unit``; text with another unit of the same dimension converts."""

    unit: str
    tolerance: float = 1e-9  # relative: 1 mi == 1609.344 m, whatever the float rounding of the conversion
    _convert: Callable[[str], float | None] = field(repr=False, compare=False, default=lambda text: None)

    def magnitude(self, value: Any) -> float | None:
        """The value in the declared unit, or None when it is not a quantity of its dimension."""
        if type(value) is str:
            out = self._convert(value)
        else:
            number = _bounded(value)
            out = float(number) if number is not None else None
        return out if out is not None and math.isfinite(out) and abs(out) <= MAX_MAGNITUDE else None

    def equal(self, expected: Any, actual: Any) -> bool:
        e = self.magnitude(expected)
        if e is None:
            return False
        a = self.magnitude(actual)
        return a is not None and math.isclose(e, a, rel_tol=self.tolerance, abs_tol=1e-12)


_REGISTRY_LOCK = threading.Lock()
_REGISTRY: list[Any] = []


def _registry() -> Any:
    """pint's unit registry, built once per process (parsing its definitions takes a second or more)."""
    with _REGISTRY_LOCK:
        if not _REGISTRY:
            import pint

            _REGISTRY.append(pint.UnitRegistry(cache_folder=None))  # no cache files written
        return _REGISTRY[0]


@lru_cache(maxsize=256)
def physical(unit: str) -> PhysicalQuantity:
    """The spec of a quantity in ``unit`` (a unit pint knows: ``m``, ``metre``, ``km/h``, ``degC``)."""
    require()
    import pint

    registry = _registry()
    errors: tuple[type[Exception], ...] = (pint.errors.PintError, *_PARSE_ERRORS)
    try:
        target = registry.parse_units(unit)
    except errors as exc:
        raise ValueError(f"'{unit}' is not a unit pint knows: {exc}") from None

    @lru_cache(maxsize=8192)
    def convert(text: str) -> float | None:
        if len(text) > MAX_TEXT:
            return None
        match = _QUANTITY.fullmatch(text)
        if match is None:
            return None
        number, written = float(match.group(1).replace(",", "")), match.group(2)
        if written is None:
            return number
        if not all(c.isalpha() or c in _UNIT_MARKS for c in written):
            return None  # "\w" admits numerals such as "¼", which are no unit
        try:
            return float(registry.Quantity(number, registry.parse_units(written)).to(target).magnitude)
        except errors:
            return None

    return PhysicalQuantity(str(target), _convert=convert)
