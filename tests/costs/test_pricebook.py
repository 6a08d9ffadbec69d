"""Price-book validation (accelboard/costs/pricebook.py): every rule, each error naming row and field."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from accelboard.costs.pricebook import pricebook_validate

TODAY = date(2025, 6, 15)


def _row(**overrides: Any) -> dict[str, Any]:
    # AWS p5.48xlarge, 8×H100, on-demand list price as read from the skypilot catalogue.
    row: dict[str, Any] = {
        "id": 1,
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "p5.48xlarge",
        "accelerator": "H100 SXM 80GB",
        "accelerator_count": "8",
        "pricing_model": "on-demand",
        "price_per_hour": "98.32",
        "currency": "USD",
        "source": "skypilot-catalog aws/vms.csv",
        "fetched_on": "2025-06-01",
        "valid_from": "2025-01-01",
        "valid_to": "",
    }
    row.update(overrides)
    return row


def _errors(rows: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(e.index, e.field) for e in pricebook_validate(rows=rows, today=TODAY).errors]


def test_it_accepts_and_normalises_a_good_book():
    rows = [_row(), _row(id=2, pricing_model="spot", price_per_hour="39.33", currency="usd")]
    result = pricebook_validate(rows=rows, today=TODAY)
    assert result.ok
    assert [r.id for r in result.rows] == [1, 2]
    assert result.rows[0].price_per_hour == Decimal("98.32")
    assert result.rows[0].price_per_accelerator_hour == Decimal("12.29")
    assert result.rows[0].valid_from == date(2025, 1, 1)
    assert result.rows[0].valid_to is None
    assert result.rows[1].currency == "USD"
    assert result.stale == ()


@pytest.mark.parametrize("price", ["0", "-1.5", "NaN", "700.0", "700"])
def test_it_rejects_non_positive_and_placeholder_prices(price: str):
    result = pricebook_validate(rows=[_row(price_per_hour=price)], today=TODAY)
    assert [(e.index, e.field) for e in result.errors] == [(0, "price_per_hour")]
    assert result.rows == ()


def test_it_names_the_placeholder():
    (error,) = pricebook_validate(rows=[_row(price_per_hour=700.0)], today=TODAY).errors
    assert str(error) == "row 0, price_per_hour: 700.0 is a catalogue placeholder, not a price"


def test_it_rejects_a_price_that_is_not_a_number():
    (error,) = pricebook_validate(rows=[_row(price_per_hour="$98")], today=TODAY).errors
    assert (error.index, error.field) == (0, "price_per_hour")
    assert "not a number" in error.message


def test_it_rejects_spot_above_on_demand_for_the_same_instance():
    rows = [_row(), _row(id=2, pricing_model="spot", price_per_hour="120.00")]
    result = pricebook_validate(rows=rows, today=TODAY)
    assert [(e.index, e.field) for e in result.errors] == [(1, "price_per_hour")]
    assert "spot 120.00 is above on-demand 98.32 (row 0)" in result.errors[0].message


def test_it_allows_spot_above_on_demand_of_another_region_or_period():
    rows = [
        _row(valid_to="2025-03-01"),
        _row(id=2, pricing_model="spot", price_per_hour="120.00", region="eu-west-1"),
        _row(id=3, pricing_model="spot", price_per_hour="120.00", valid_from="2025-03-01"),
    ]
    assert _errors(rows) == []


def test_it_rejects_overlapping_validity_for_the_same_key():
    rows = [
        _row(valid_to="2025-06-01"),
        _row(id=2, valid_from="2025-05-01", price_per_hour="54.00"),
    ]
    result = pricebook_validate(rows=rows, today=TODAY)
    assert [(e.index, e.field) for e in result.errors] == [(1, "valid_from")]
    assert "overlaps row 0" in result.errors[0].message


def test_it_accepts_back_to_back_validity():
    # The June 2025 cut: the old price ends the day the new one starts (valid_to is exclusive).
    rows = [_row(valid_to="2025-06-01"), _row(id=2, valid_from="2025-06-01", price_per_hour="54.08")]
    assert _errors(rows) == []


def test_it_rejects_an_open_ended_row_overlapping_a_later_one():
    rows = [_row(), _row(id=2, valid_from="2025-06-01", price_per_hour="54.08")]
    assert _errors(rows) == [(1, "valid_from")]


def test_it_rejects_unknown_currencies():
    rows = [_row(currency="USX"), _row(id=2, region="us-west-2", currency="dollars")]
    assert _errors(rows) == [(0, "currency"), (1, "currency")]


def test_it_names_each_missing_field():
    row = _row(source="", fetched_on=None)
    del row["provider"]
    assert _errors([row]) == [(0, "fetched_on"), (0, "provider"), (0, "source")]


def test_it_rejects_bad_dates_counts_and_pricing_models():
    rows = [
        _row(valid_from="01/02/2025"),
        _row(id=2, region="a", valid_from="2025-05-01", valid_to="2025-04-01"),
        _row(id=3, region="b", accelerator_count="eight"),
        _row(id=4, region="c", accelerator_count="0"),
        _row(id=5, region="d", pricing_model="preemptible"),
        _row(id=6, region="e", fetched_on="2025-07-01"),
    ]
    assert _errors(rows) == [
        (0, "valid_from"),
        (1, "valid_to"),
        (2, "accelerator_count"),
        (3, "accelerator_count"),
        (4, "pricing_model"),
        (5, "fetched_on"),
    ]


def test_it_marks_prices_older_than_thirty_days_stale():
    rows = [
        _row(fetched_on="2025-05-16"),  # 30 days before 2025-06-15: still fresh
        _row(id=2, region="eu-west-1", fetched_on="2025-05-15"),  # 31 days: stale
    ]
    result = pricebook_validate(rows=rows, today=TODAY)
    assert result.ok
    assert result.stale == (1,)
    assert [r.stale for r in result.rows] == [False, True]
