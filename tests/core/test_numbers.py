"""How accelboard writes numbers (``core.numbers``), through the template filter the pages use and
the emails' own helper: never e-notation, at most four significant decimals, bytes in GiB."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelboard.benchmarks.templatetags.benchmark_format import metric_delta, metric_value, sig
from accelboard.core import numbers
from accelboard.notifications import content
from tests.numbers import text_problems


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.000012, "0.000012"),  # was "1.2e-05" on pages (the emails had their own workaround)
        (0.0000123456, "0.00001235"),
        (0.708716, "0.7087"),  # was "0.708716": six significant decimals
        (0.830808, "0.8308"),  # the Profile tab's cost
        (2.70233, "2.702"),  # past two decimals, four significant digits in all
        (6.3927, "6.393"),  # the run page's "6.3927 USD/h" (#33)
        (50.2695, "50.27"),
        (30.3262, "30.33"),  # "30.3262 J" (#33)
        (4890.123, "4,890.12"),
        (19056.63, "19,056.6"),
        (520.0, "520"),
        (0, "0"),
        (-0.0021602, "-0.00216"),
        (76_339_878_590, "76,339,878,590"),
        (None, "—"),
    ],
)
def test_it_writes_a_value_with_significant_digits_and_never_e_notation(value: float, text: str) -> None:
    assert sig(value) == text
    if value is not None:
        assert content.number(value) == text  # the emails write what the pages write


@given(st.floats(min_value=-1e15, max_value=1e15, allow_nan=False, allow_infinity=False))
def test_it_passes_the_number_checks_for_any_value(value: float) -> None:
    assert text_problems(sig(value)) == []
    assert text_problems(sig(value, "+")) == []


def test_it_writes_bytes_in_gib_never_raw() -> None:
    assert metric_value(76_339_878_590, "bytes") == "71.1 GiB"
    assert metric_delta(2**30 / 2, "bytes") == "+0.5 GiB"
    assert numbers.bytes_text(812 * 2**20) == "812 MiB"
    assert text_problems(metric_value(76_339_878_590, "bytes") + " peak memory") == []


def test_it_picks_one_number_of_decimals_for_a_column() -> None:
    # The hardware page's cost column: 0.0312 / 0.03584 / 0.001902 -> one format, four decimals
    # keeping three significant digits of the smallest... and six at most.
    assert numbers.column_decimals([0.0312, 0.03584, 0.001902]) == 5
    assert [numbers.fixed(v, 5) for v in (0.0312, 0.03584, 0.001902)] == ["0.03120", "0.03584", "0.00190"]
    assert numbers.column_decimals([4680.0, 697.1, 1198.0]) == 0
    assert numbers.column_decimals([8.295, 12.71]) == 2
    assert numbers.column_decimals([None, 0]) == 0


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (62.4314, "62.4"),  # the regression email's "± 62.4314" beside the chart legend's "± 62.4"
        (27.4642, "27.5"),
        (194.65, "195"),
        (1234.6, "1,235"),  # never "1.23e+03" (the chart legend's old ",.3g")
        (0.0012345, "0.00123"),
        (0, "0"),
        (None, "—"),
    ],
)
def test_it_writes_a_spread_to_three_significant_digits(value: float | None, text: str) -> None:
    assert numbers.spread(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(6.3927, "6.39"), (1234.5, "1,234.50"), (0.2525, "0.253"), (0.049, "0.049"), (0.8, "0.80"), (0, "0.00")],
)
def test_it_writes_a_price_per_hour_with_cents_or_three_significant_digits(value: float, text: str) -> None:
    assert numbers.money_rate(value) == text
    assert text_problems(f"{text} USD/h") == []


@pytest.mark.parametrize(
    ("joules", "text"),
    [
        (30.3262, "30.3 J"),
        (0.0935, "0.0935 J"),
        (4120.4, "4.12 kJ"),
        (1.35e6, "1.35 MJ"),
        (4.46e7, "12.4 kWh"),
    ],
)
def test_it_writes_energy_in_a_unit_that_scales(joules: float, text: str) -> None:
    assert numbers.energy_text(joules) == text


@pytest.mark.parametrize(
    ("p", "text"),
    [
        (0.0000006948, "< 0.001"),
        (0.000999, "< 0.001"),
        (0.001, "0.001"),
        (0.01234, "0.012"),
        (0.346, "0.35"),
        (1.0, "1"),
    ],
)
def test_it_writes_a_p_value_to_two_significant_digits_or_below_a_floor(p: float, text: str) -> None:
    assert numbers.p_value(p) == text
    assert text_problems(f"p-value {text}") == []
    assert text_problems(numbers.p_value_text(p)) == []


def test_it_writes_a_level_of_bytes_and_its_spread_in_binary_units() -> None:
    text = numbers.level_text(76_403_379_358, 123_338_559, "bytes")
    assert text == "71.16 GiB ± 118 MiB"
    assert text_problems(f"Before {text}") == []
    # What the alert page wrote before (#33), which the page check finds.
    assert text_problems("Before 76,403,379,358 ± 123,338,559 bytes") != []
    assert content.level_text(76_403_379_358, 123_338_559, "bytes") == text
    assert numbers.level_text(4655.19, 62.4314, "ms") == "4,655.19 ± 62.4 ms"


def test_a_column_too_wide_for_one_format_is_written_value_by_value() -> None:
    # The runs list wrote "112.9180" above "0.0066" (one format, four decimals for the smallest).
    values = [0.0066, 27.9852, 112.918]
    decimals = numbers.column_decimals(values, significant=3, most=4)
    assert decimals == 4 and not numbers.column_fits(values, decimals)
    assert [numbers.sig(v, digits=4) for v in values] == ["0.0066", "27.99", "112.9"]
    assert numbers.column_fits([0.0312, 0.5], 4) and numbers.column_fits([40.97, 0.12], 2)
