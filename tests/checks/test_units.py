"""Units and currency minor units in argument matching (``arguments.fields``: ``unit``, ``currency``), with the
real libraries of the ``units`` extra (pint, babel, price-parser), which ``make test`` installs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_toolcall_eval.checks import quantities
from otel_toolcall_eval.checks.argument_match import Normalizer, match_arguments
from otel_toolcall_eval.cli import main
from otel_toolcall_eval.config import ConfigError, EvalConfig
from otel_toolcall_eval.dataset.models import DatasetCase
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runs import parse_run_line
from otel_toolcall_eval.offline.score import CaseResult, score_case

NORM = Normalizer()
PENCE = quantities.money("GBP", minor_units=True)
POUNDS = quantities.money("GBP")
METRES = quantities.physical("m")


# --- money ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("written", ["£12.50", "12.50 GBP", "GBP 12.50", "£ 12.50", "GBP12.5", 1250, "1250", 1250.0])
def test_an_amount_in_pence_equals_the_amount_written_in_pounds(written: Any) -> None:
    assert PENCE.equal("£12.50", written)
    assert PENCE.equal(1250, written)


@pytest.mark.parametrize(
    "written",
    [
        "$12.50",  # another currency: no exchange rates
        "12.50",  # a bare number is in the argument's unit: 12.50 pence
        12.5,
        "£12.505",
        "about £12.50",  # other words beside the amount
        "£12.50 or £13",
        "-£12.50",
        True,  # a bool is never an amount
        None,
        "",
        "£" + "9" * 100,  # longer than MAX_TEXT
        2**200,  # wider than any amount
    ],
)
def test_other_amounts_differ(written: Any) -> None:
    assert not PENCE.equal(1250, written)


def test_major_units_and_currency_exponents_come_from_iso_4217() -> None:
    assert POUNDS.equal("£12.50", 12.5) and POUNDS.equal(12.5, "12.50")
    assert not POUNDS.equal("£12.50", 1250)
    yen = quantities.money("JPY", minor_units=True)  # no minor unit: 1250 yen is 1250 in minor units
    assert yen.exponent == 0 and yen.equal("¥1250", 1250) and yen.equal("JPY 1,250", 1250)
    dinar = quantities.money("BHD", minor_units=True)  # three decimals: 1.250 BHD is 1250 fils
    assert dinar.exponent == 3 and dinar.equal("1.25 BHD", 1250)


def test_a_currency_is_written_with_its_code_or_its_local_symbols() -> None:
    assert quantities.money("USD").equal("$5", 5)
    assert quantities.money("CAD").equal("$5", "CA$5")  # "$" in Canada, "CA$" in English elsewhere
    assert not quantities.money("GBP").equal("£5", "€5")
    assert quantities.money("EUR").equal("1.234,56 €", "€1,234.56")  # price-parser reads either separator
    assert quantities.money("GBP").equal("-£3", -3) and not quantities.money("GBP").equal("-£3", 3)


# --- physical units -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("written", ["5 km", "5km", "5000 m", "5,000 m", 5000, 5000.0, "5000", "500000 cm", "5e3 m"])
def test_a_length_in_metres_equals_the_length_written_in_another_unit(written: Any) -> None:
    assert METRES.equal("5 km", written)


@pytest.mark.parametrize(
    "written",
    [
        "5 kg",  # another dimension
        "5 km/h",
        "5 m",
        "five km",
        "5 parsecs of nothing",
        "5 km^1000",  # powers are one digit
        "2**1000 m",  # no arithmetic on the number
        "5e999 km",  # not finite
        "1e29 km",  # past MAX_MAGNITUDE in metres
        "5 " + "k" * 100,
        "__import__('os')",
        True,
    ],
)
def test_other_quantities_differ(written: Any) -> None:
    assert not METRES.equal(5000, written)


def test_conversions_are_pints() -> None:
    assert METRES.equal("1 mile", 1609.344) and METRES.equal("3 ft", 0.9144)
    assert quantities.physical("degC").equal(30, "303.15 K")  # an offset unit converts too
    assert quantities.physical("km/h").equal(36, "10 m/s")


@given(st.text(max_size=80))
def test_any_text_is_an_amount_or_not_without_raising(text: str) -> None:
    for spec in (PENCE, POUNDS, METRES):
        assert isinstance(spec.equal(text, text), bool)


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_minor_and_major_units_agree_for_every_amount(pence: int) -> None:
    pounds = f"{'-' if pence < 0 else ''}£{abs(pence) // 100}.{abs(pence) % 100:02d}"
    assert PENCE.equal(pence, pounds) and POUNDS.equal(pounds, pence / 100 if abs(pence) < 2**53 else pounds)


def test_unknown_units_and_currencies_are_errors() -> None:
    with pytest.raises(ValueError, match="'metrs' is not a unit pint knows"):
        quantities.physical("metrs")
    with pytest.raises(ValueError, match="'ZZZ' is not an ISO 4217"):
        quantities.money("ZZZ")


# --- in the argument match ------------------------------------------------------------------------------------


def test_match_arguments_compares_configured_keys_by_amount() -> None:
    expected = {"amount": "£12.50", "note": "Rent"}
    units = {"amount": PENCE}
    assert match_arguments(expected, {"amount": 1250, "note": "rent"}, NORM, quantities=units).ok
    bad = match_arguments(expected, {"amount": 12.5, "note": "rent"}, NORM, quantities=units)
    assert bad.failed == "required" and bad.mismatched == ("amount",)
    # without the rule, the same values differ: the unit is what makes them equal
    assert match_arguments(expected, {"amount": 1250, "note": "rent"}, NORM).failed == "required"
    # absent stays absent, with the configured null rules
    assert match_arguments({"amount": None}, {}, NORM, quantities=units).ok
    assert match_arguments(expected, {"note": "rent"}, NORM, quantities=units).mismatched == ("amount",)


def test_per_argument_alternatives_compare_by_amount_too() -> None:
    verdict = match_arguments(
        {}, {"distance": 5000}, NORM, options={"distance": ["5 km", "3 mi"]}, quantities={"distance": METRES}
    )
    assert verdict.ok
    far = match_arguments({}, {"distance": 7}, NORM, options={"distance": ["5 km"]}, quantities={"distance": METRES})
    assert far.mismatched == ("distance",)


# --- configured, end to end -----------------------------------------------------------------------------------

CONFIG = {
    "arguments": {
        "fields": {
            "pay": {"amount": {"currency": "GBP", "minor_units": True}},
            "*": {"distance": {"unit": "m"}},
        }
    }
}


def _score(expected: list[dict[str, Any]], calls: list[dict[str, Any]], config: dict[str, Any]) -> CaseResult:
    prep = Preparer(EvalConfig.from_dict(config))
    case = DatasetCase.model_validate({"id": "c1", "user_input": "u", "expected_tool_calls": expected})
    entry = parse_run_line("run.jsonl", 1, orjson.dumps({"id": "c1", "tool_calls": calls}))
    return score_case(prep.prepare(case, 1), entry, prep)


def test_a_configured_amount_passes_in_the_tools_unit_and_fails_in_the_wrong_one() -> None:
    expected = [{"name": "pay", "args": {"amount": "£12.50", "to": "Sam"}}]
    assert _score(expected, [{"name": "pay", "arguments": {"amount": 1250, "to": "sam"}}], CONFIG).passed
    wrong = _score(expected, [{"name": "pay", "arguments": {"amount": 12.5, "to": "sam"}}], CONFIG)
    assert not wrong.passed and any("amount" in r for r in wrong.reasons)
    assert not _score(expected, [{"name": "pay", "arguments": {"amount": 1250, "to": "sam"}}], {}).passed


def test_a_wildcard_rule_applies_to_every_tool_and_a_tools_own_rule_wins() -> None:
    expected = [{"name": "route", "args": {"distance": "5 km"}}]
    assert _score(expected, [{"name": "route", "arguments": {"distance": 5000}}], CONFIG).passed
    own = {"arguments": {"fields": {**CONFIG["arguments"]["fields"], "route": {"distance": {"unit": "km"}}}}}
    assert _score(expected, [{"name": "route", "arguments": {"distance": 5}}], own).passed
    assert not _score(expected, [{"name": "route", "arguments": {"distance": 5000}}], own).passed


def test_the_eval_command_reads_units_from_the_config(tmp_path: Path) -> None:
    dataset, runs, config = tmp_path / "d.jsonl", tmp_path / "r.jsonl", tmp_path / "c.yaml"
    dataset.write_bytes(
        orjson.dumps(
            {"id": "c1", "user_input": "pay", "expected_tool_calls": [{"name": "pay", "args": {"amount": "£12.50"}}]}
        )
    )
    runs.write_bytes(orjson.dumps({"id": "c1", "tool_calls": [{"name": "pay", "arguments": {"amount": 1250}}]}))
    config.write_text(
        "gate:\n  min: {argument_accuracy: 1.0}\narguments:\n  fields:\n    pay:\n      amount: {currency: GBP, minor_units: true}\n"
    )
    assert main(["eval", "--dataset", str(dataset), "--runs", str(runs), "--config", str(config), "--no-progress"]) == 0
    config.write_text("gate:\n  min: {argument_accuracy: 1.0}\n")
    assert main(["eval", "--dataset", str(dataset), "--runs", str(runs), "--config", str(config), "--no-progress"]) == 1


# --- config errors at start-up --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"unit": "metrs"}, "arguments.fields.pay.amount.unit: .*'metrs' is not a unit pint knows"),
        ({"currency": "ZZZ"}, "arguments.fields.pay.amount.currency: .*'ZZZ' is not an ISO 4217"),
        ({"unit": "m", "currency": "GBP"}, "arguments.fields.pay.amount: .*not both"),
        ({"minor_units": True}, "arguments.fields.pay.amount: .*minor_units: needs a currency"),
        ({"unit": "m", "match": "fuzzy"}, "arguments.fields.pay.amount: .*compares text"),
        ({"threshold": 0.5}, "arguments.fields.pay.amount: .*threshold: only with match"),
        ({"unit": "m", "scale": 2}, "arguments.fields.pay.amount.scale: unknown key"),
    ],
)
def test_a_bad_rule_fails_at_start_up_naming_the_field(rule: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        EvalConfig.from_dict({"arguments": {"fields": {"pay": {"amount": rule}}}})


@pytest.mark.parametrize("library", ["pint", "babel.numbers", "price_parser"])
@pytest.mark.parametrize("rule", [{"unit": "m"}, {"currency": "GBP"}])
def test_without_the_extra_a_config_asking_for_units_names_the_field_and_the_extra(
    library: str, rule: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, library, None)  # what an environment without the library gives: ImportError
    with pytest.raises(ConfigError) as raised:
        EvalConfig.from_dict({"arguments": {"fields": {"pay": {"amount": rule}}}})
    field = f"arguments.fields.pay.amount.{next(iter(rule))}"
    assert field in str(raised.value) and "pip install 'otel-toolcall-eval[units]'" in str(raised.value)
