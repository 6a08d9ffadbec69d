"""The price book in the admin: validated like an import; a correction re-costs its days."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest

from accelboard.costs.models import AcceleratorPrice, CostDaily
from accelboard.costs.services import cost_day_compute
from tests.costs.builders import accelerator_price_create, host_place, minutes_load, site_create
from tests.factories import H100, accelerator_type_from, host_create

pytestmark = pytest.mark.django_db


def _form(price: AcceleratorPrice, **changes: Any) -> dict[str, Any]:
    data = {
        "accelerator_type": price.accelerator_type_id,
        "accelerator_count": price.accelerator_count,
        "provider": price.provider,
        "region": price.region,
        "instance_type": price.instance_type,
        "pricing_model": price.pricing_model,
        "price_per_hour": str(price.price_per_hour),
        "currency": price.currency,
        "capex": "",
        "lifetime_hours": "",
        "source": price.source,
        "fetched_on": price.fetched_on.isoformat(),
        "valid_from": price.valid_from.isoformat(),
        "valid_to": "",
    }
    return {**data, **changes}


def test_it_lists_the_price_book_and_costs_for_a_superuser(admin_client):
    client = admin_client
    for model in (
        "acceleratorprice",
        "electricityprice",
        "exchangerate",
        "carbonintensity",
        "costdaily",
        "runcost",
    ):
        assert client.get(f"/admin/costs/{model}/").status_code == 200, model


def test_it_refuses_a_spot_price_above_on_demand_and_recosts_after_a_correction(
    team, admin_client, django_capture_on_commit_callbacks
):
    h100 = accelerator_type_from(H100)
    host, gpus = host_create(team=team, gpus=1, gpu_name=H100["driver_name"])
    host_place(host, site=site_create())
    price = accelerator_price_create(accelerator_type=h100)
    minutes_load(gpus=gpus, start=datetime(2026, 11, 2, tzinfo=UTC), minutes=60, util=50.0, power_w=None)
    cost_day_compute(day=date(2026, 11, 2))
    client = admin_client

    response = client.post(
        "/admin/costs/acceleratorprice/add/", _form(price, pricing_model="spot", price_per_hour="120.00")
    )
    assert response.status_code == 200
    assert "spot 120.00 is above on-demand 98.3200" in response.content.decode()
    assert AcceleratorPrice.objects.count() == 1

    with mock.patch("accelboard.costs.tasks.cost_days_recompute.delay") as delay:
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(
                f"/admin/costs/acceleratorprice/{price.pk}/change/", _form(price, price_per_hour="54.0760")
            )
    assert response.status_code == 302
    price.refresh_from_db()
    assert price.price_per_hour == Decimal("54.0760")
    # The one costed day the row covers is queued for recompute (a real worker runs it in
    # test_cost_worker.py); until then the old figure stands.
    delay.assert_called_once_with(["2026-11-02"])
    assert CostDaily.objects.get().capacity_cost == Decimal("12.2900")
