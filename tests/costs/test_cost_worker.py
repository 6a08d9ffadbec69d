"""The cost tasks in a real Celery worker: a recorded run gets its cost, a price correction
re-costs the days it covers (the numbers change to the corrected ones, once)."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import transaction

from accelboard.costs.models import CostDaily, RunCost
from accelboard.costs.pricebook_services import price_row_saved
from accelboard.costs.services import cost_day_compute
from tests.costs.builders import accelerator_price_create, host_place, minutes_load, site_create
from tests.factories import H100, accelerator_type_from, host_create, run_create
from tests.test_celery_worker import WAIT_S, Worker, worker  # noqa: F401 - the worker fixture

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


def _wait(check, proc: Worker):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if proc.process.poll() is not None:
            break
        time.sleep(0.25)
    pytest.fail(f"the worker did not get there within {WAIT_S}s; log:\n{proc.output()[-4000:]}")


def test_it_costs_a_recorded_run_and_recosts_days_after_a_price_correction(team, worker: Worker) -> None:  # noqa: F811
    h100 = accelerator_type_from(H100)
    host, gpus = host_create(team=team, gpus=1, gpu_name=H100["driver_name"])
    host_place(host, site=site_create())
    price = accelerator_price_create(accelerator_type=h100)  # $12.29 per GPU-hour
    day = datetime.now(UTC).date() - timedelta(days=2)
    minutes_load(
        gpus=gpus,
        start=datetime.combine(day, datetime.min.time(), tzinfo=UTC),
        minutes=60,
        util=50.0,
        power_w=None,
    )
    cost_day_compute(day=day)
    assert CostDaily.objects.get().capacity_cost == Decimal("12.2900")

    # 1. run_record enqueues the run's cost once its transaction commits.
    run = run_create(team=team, accelerator_type=h100, host=host, metrics={"throughput_tokens_per_s": 1000.0})
    cost = _wait(lambda: RunCost.objects.filter(run=run).first(), worker)
    # 1e6 / 1000 s × $12.29 / 3600 = $3.413889 per 1M tokens.
    assert cost.capacity_cost_per_1m == Decimal("3.413889")

    # 2. A price correction (saved as the admin does) re-costs the days the row covers.
    with transaction.atomic():
        price.price_per_hour = Decimal("54.076")
        price.save()
        assert price_row_saved(row=price, today=datetime.now(UTC).date()) == 1

    _wait(lambda: CostDaily.objects.filter(capacity_cost=Decimal("6.7595")).exists(), worker)
    assert CostDaily.objects.count() == 1
    assert CostDaily.objects.get().day == day and isinstance(day, date)
