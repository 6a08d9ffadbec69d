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
        (2.70233, "2.7023"),
        (50.2695, "50.2695"),
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
