"""Training runs: time, energy and cost to train, per iteration and per sample, on the run page,
the hardware page and its CSV, checked by hand against an MLPerf Training result.

The fixture (``fixtures/mlperf_training``) has the structure of an MLPerf Training v4.1
``llama2_70b_lora`` result (``results/<system>/<benchmark>/result_0.txt`` beside
``systems/<system>.json``); the H200 log keeps the published run's run_start and run_stop
(1728027396073 and 1728028793659 ms), its 3,072 samples and global batch size 8.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from accelboard.benchmarks.import_services import run_import
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.costs.run_cost_services import run_cost_compute
from accelboard.fleet.catalogue_services import accelerator_types_sync
from accelboard.fleet.models import AcceleratorType
from accelboard.importers import parse_path
from tests.costs.builders import accelerator_price_create

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent / "fixtures" / "mlperf_training"

# By hand, the 8×H200 result:
#   time to train = 1728028793659 − 1728027396073 = 1,397,586 ms = 1,397.586 s (23.29 min)
#   samples 3,072 (run_stop's samples_count); iterations = 3,072 / 8 = 384
#   price: aws p5en.48xlarge on-demand, 84.80 USD/h for 8 GPUs = 10.60 USD/GPU-hour (the cheapest
#   on-demand row for H200 in the book; the run ran on no host of ours)
#   capacity = 8 × 1,397.586 s × 10.60 / 3,600 = 11,180.688 GPU-s × 10.60 / 3,600
#            = 32.920914666… -> 32.920915 USD; no energy measured, so cost to train = capacity
#   per iteration: 1,397.586 / 384 = 3.639546875 s; 32.920915 / 384 = 0.085731549… USD
#   per sample: 1,397.586 / 3,072 = 0.454943… s; 32.920915 / 3,072 = 0.010716444… USD
# The 8×H100 result: 2,400 s at 98.32 / 8 = 12.29 USD/GPU-hour: 8 × 2,400 × 12.29 / 3,600
#   = 65.546666… -> 65.546667 USD.
H200_TTT_S = 1397.586
H200_COST = 32.920915
H100_COST = 65.546667


@pytest.fixture
def imported(team: Any) -> dict[str, BenchmarkRun]:
    """Both fixture results stored for ``team``, priced (H200, H100) and costed."""
    accelerator_types_sync()
    h200 = AcceleratorType.objects.get(slug="h200-sxm-141gb")
    h100 = AcceleratorType.objects.get(slug="h100-sxm-80gb")
    accelerator_price_create(
        accelerator_type=h200, price_per_hour="84.80", instance_type="p5en.48xlarge", source="aws price list"
    )
    # Dearer on-demand and a spot row: neither is the reference price.
    accelerator_price_create(
        accelerator_type=h200,
        price_per_hour="100.00",
        provider="azure",
        region="eastus",
        instance_type="nd-h200",
    )
    accelerator_price_create(
        accelerator_type=h200, price_per_hour="30.00", instance_type="p5en.48xlarge", pricing_model="spot"
    )
    accelerator_price_create(accelerator_type=h100, price_per_hour="98.32")
    runs = {}
    for parsed in parse_path(FIXTURES):
        run, _ = run_import(
            team=team,
            parsed=parsed,
            raw_name=Path(parsed.source_file).name,
            raw_bytes=None,
            uploaded_via="cli",
            overrides={"model": "Llama-2-70B", "precision": "bf16"},
        )
        run_cost_compute(run=run)
        assert run.accelerator_type is not None
        runs[run.accelerator_type.slug] = run
    return runs


def test_it_costs_an_mlperf_training_result_to_train_as_worked_by_hand(imported: dict[str, BenchmarkRun]):
    run = imported["h200-sxm-141gb"]
    assert run.accelerator_count == 8 and run.workload.batch_size == 8
    t = run.cost.training
    assert t["time_to_train_s"] == pytest.approx(H200_TTT_S)
    assert (t["samples"], t["iterations"], t["iterations_from"]) == (3072, 384, "samples/global_batch_size")
    assert t["capacity_cost_to_train"] == H200_COST and t["cost_to_train"] == H200_COST
    assert "energy_to_train_j" not in t and "energy_cost_to_train" not in t  # not measured: not invented
    assert t["currency"] == "USD"
    assert t["per_iteration_s"] == pytest.approx(3.639546875)
    assert t["per_iteration_cost"] == pytest.approx(H200_COST / 384)
    assert t["per_sample_s"] == pytest.approx(H200_TTT_S / 3072)
    assert t["per_sample_cost"] == pytest.approx(H200_COST / 3072)
    # Invariants: per iteration × iterations and per sample × samples give back the whole.
    assert t["per_iteration_cost"] * t["iterations"] == pytest.approx(t["cost_to_train"])
    assert t["per_sample_s"] * t["samples"] == pytest.approx(t["time_to_train_s"])
    price = run.cost.accelerator_price
    assert price is not None and (price.provider, price.pricing_model, price.price_per_hour) == (
        "aws",
        "on-demand",
        Decimal("84.80"),
    )
    assert "reference-price" in run.cost.flags
    assert imported["h100-sxm-80gb"].cost.training["cost_to_train"] == H100_COST


def test_the_run_page_shows_time_energy_and_cost_to_train(imported, login_client, lead):
    run = imported["h200-sxm-141gb"]
    page = login_client(lead).get(reverse("benchmarks:run_detail", args=[run.pk])).content.decode()
    card = page[page.index('id="run-training"') :]
    card = card[: card.index("</div>")]
    assert "1,397.59 s" in _dd(card, "time") and "23.29 min on 8 accelerators" in _dd(card, "time")
    assert "<strong>32.92 USD</strong>" in _dd(card, "cost")
    assert "32.92 USD" in _dd(card, "capacity")
    assert "not measured" in _dd(card, "energy") and "not measured" in _dd(card, "energy-cost")
    assert "3.64 s · 0.08573 USD" in _dd(card, "per-iteration")
    assert "(384 iterations)" in _dd(card, "per-iteration")
    per_sample = _dd(card, "per-sample")
    assert "0.4549 s · 0.01072 USD" in per_sample and "(3,072 samples)" in per_sample
    price = _dd(card, "price")
    assert "10.60 USD/GPU-hour" in price and "p5en.48xlarge on-demand" in price and "reference price" in price


def _dd(card: str, name: str) -> str:
    start = card.index(f'data-train="{name}"')
    return card[start : card.index("</dd>", start)]


def test_the_hardware_page_and_its_csv_compare_time_and_cost_to_train(imported, login_client, lead):
    run = imported["h200-sxm-141gb"]
    client = login_client(lead)
    query = {"model": run.workload.variant.model_id, "scenario": "training"}
    page = client.get(reverse("dashboard:hardware"), query).content.decode()
    table = page[page.index('data-table="to-train"') :]
    table = table[: table.index("</table>")]
    # Fastest first: the H200's 23.3 min before the H100's 40 min; three significant digits.
    h200_row = table[table.index("8× H200") : table.index("8× H100")]
    h100_row = table[table.index("8× H100") :]
    assert '<td class="num" data-col="ttt">23.3</td>' in h200_row and "<strong>32.9</strong>" in h200_row
    assert '<td class="num" data-col="ttt">40.0</td>' in h100_row and "<strong>65.5</strong>" in h100_row

    response = client.get(reverse("dashboard:hardware"), {**query, "format": "csv", "table": "to-train"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert [r["Accelerator"] for r in rows] == ["H200 SXM 141GB", "H100 SXM 80GB"]
    h200, h100 = rows
    assert float(h200["Time to train (s)"]) == pytest.approx(H200_TTT_S)
    assert float(h200["Cost to train"]) == pytest.approx(H200_COST)
    assert float(h200["Capacity cost to train"]) == pytest.approx(H200_COST)
    assert h200["Energy cost to train"] == ""
    assert h200["Price row"].startswith("10.60 USD/GPU-hour")
    assert float(h100["Cost to train"]) == pytest.approx(H100_COST)
    assert h200["Runs (newest first)"] == str(run.pk)

    # A CSV without a table name is a 400 naming the parameter.
    refused = client.get(reverse("dashboard:hardware"), {**query, "format": "csv"})
    assert refused.status_code == 400 and b"table:" in refused.content


def test_an_estimated_energy_is_not_reported_as_energy_to_train(team):
    from tests.factories import H100, accelerator_type_from, run_create

    h100 = accelerator_type_from(H100)
    run = run_create(
        team=team,
        accelerator_type=h100,
        started_at=datetime(2026, 11, 2, tzinfo=UTC),
        metrics={"throughput_samples_per_s": 100.0, "time_to_train_s": 600.0},
    )
    cost = run_cost_compute(run=run)
    assert cost is not None and cost.energy_source == "board-power-estimate"
    assert cost.training["time_to_train_s"] == 600.0 and "energy_to_train_j" not in cost.training
    assert "cost_to_train" not in cost.training  # no price for H100 in an empty book
