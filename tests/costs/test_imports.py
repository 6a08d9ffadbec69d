"""Price-book imports and admin validation: errors name the CSV line and column, all or nothing."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from accelboard.costs.admin import AcceleratorPriceForm
from accelboard.costs.models import AcceleratorPrice
from accelboard.costs.pricebook_services import PriceImportError, pricebook_csv_import
from accelboard.costs.selectors import price_for_host
from accelboard.fleet.catalogue_services import accelerator_types_sync
from accelboard.fleet.models import AcceleratorType
from tests.costs.builders import accelerator_price_create, host_place
from tests.factories import H100, host_create

pytestmark = pytest.mark.django_db

TODAY = date(2026, 11, 30)
HEADER = "accelerator,count,provider,region,instance_type,pricing_model,price,currency,source,fetched_on,valid_from\n"


@pytest.fixture(autouse=True)
def catalogue():
    accelerator_types_sync()


def test_it_imports_a_cloud_instance_csv():
    text = (
        HEADER
        + "h100-sxm-80gb,8,aws,us-east-1,p5.48xlarge,on-demand,98.32,USD,skypilot catalogue,2026-11-20,2026-01-01\n"
        + "H100 SXM 80GB,8,aws,us-east-1,p5.48xlarge,spot,40.00,usd,skypilot catalogue,2026-10-01,2026-01-01\n"
    )
    result = pricebook_csv_import(text=text, format="instances", today=TODAY)
    assert (result.created, result.stale) == (2, 1)  # the spot row was read 60 days ago
    spot = AcceleratorPrice.objects.get(pricing_model="spot")
    assert (spot.accelerator_type.slug, spot.currency, spot.price_per_hour) == (
        "h100-sxm-80gb",
        "USD",
        Decimal("40"),
    )
    assert spot.stale is True


def test_it_names_the_line_and_column_of_every_error_and_writes_nothing():
    h100 = AcceleratorType.objects.get(slug="h100-sxm-80gb")
    existing = accelerator_price_create(accelerator_type=h100, region="eu-west-1", fetched_on=TODAY)
    text = (
        HEADER
        + "h100-sxm-80gb,8,aws,us-east-1,p5.48xlarge,on-demand,98.32,USD,ok,2026-11-20,2026-01-01\n"  # line 2
        + "b200,8,aws,us-east-1,p6.48xlarge,on-demand,120,USD,s,2026-11-20,2026-01-01\n"  # line 3
        + "h200-sxm-141gb,8,aws,us-east-1,p5en.48xlarge,on-demand,700.0,USD,s,2026-11-20,2026-01-01\n"  # line 4
        + "l4,1,gcp,us-central1,g2-standard-4,on-demand,0.70,XYZ,s,2026-11-20,2026-01-01\n"  # line 5
        + "h100-sxm-80gb,8,aws,us-east-1,p5.48xlarge,spot,120,USD,s,2026-11-20,2026-01-01\n"  # line 6
        + "h100-sxm-80gb,8,aws,eu-west-1,p5.48xlarge,on-demand,99,USD,s,2026-11-20,2026-06-01\n"  # line 7
        + "l4,1,gcp,us-central1,g2-standard-4,on-demand,-1,USD,s,2026-11-20,2026-01-01\n"  # line 8
    )
    with pytest.raises(PriceImportError) as caught:
        pricebook_csv_import(text=text, format="instances", today=TODAY)
    errors = caught.value.errors
    assert errors[0] == "line 3, column accelerator: 'b200' is not a known accelerator type"
    assert "line 4, column price: 700.0 is a catalogue placeholder, not a price" in errors
    assert "line 5, column currency: 'XYZ' is not an ISO 4217 currency code" in errors
    assert any(
        e.startswith("line 6, column price: spot 120 is above on-demand 98.32 (line 2)") for e in errors
    )
    assert any(
        e.startswith("line 7, column valid_from: validity overlaps") and f"id={existing.pk}" in e
        for e in errors
    )
    assert "line 8, column price: -1 is not a positive price" in errors
    assert AcceleratorPrice.objects.count() == 1  # nothing half-written


def test_it_imports_an_opencost_price_sheet():
    text = (
        "EndTimestamp,InstanceID,Region,AssetClass,InstanceIDField,InstanceType,MarketPriceHourly,Version\n"
        "2026-11-20 00:00:00 UTC,nvidia-h100,us-east-1,gpu,nvidia.com/gpu_type,H100 SXM 80GB,6.88,\n"
        "2026-11-20 00:00:00 UTC,pvc-1,us-east-1,pv,metadata.name,,0.0001,\n"
        "2026-11-20 00:00:00 UTC,node-1,us-east-1,node,metadata.name,p5.48xlarge,55,\n"
    )
    with pytest.raises(PriceImportError, match="line 4, column AcceleratorType: a node row needs"):
        pricebook_csv_import(
            text=text, format="opencost", today=TODAY, provider="aws", source="opencost sheet"
        )
    result = pricebook_csv_import(
        text="\n".join(text.splitlines()[:3]) + "\n", format="opencost", today=TODAY, provider="aws"
    )
    assert result.created == 1
    row = AcceleratorPrice.objects.get()
    assert (row.accelerator_count, row.price_per_hour, row.valid_from) == (
        1,
        Decimal("6.88"),
        date(2026, 11, 20),
    )

    host, _ = host_create(team=None, gpus=1, gpu_name=H100["driver_name"])
    host_place(host, site=None, instance_type="p5.48xlarge")
    assert price_for_host(host=host, at=datetime(2026, 11, 25, tzinfo=UTC)) == row


def test_it_refuses_an_overlapping_or_placeholder_price_in_the_admin_form():
    h100 = AcceleratorType.objects.get(slug="h100-sxm-80gb")
    accelerator_price_create(accelerator_type=h100, fetched_on=TODAY)
    data = {
        "accelerator_type": h100.pk,
        "accelerator_count": 8,
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "p5.48xlarge",
        "pricing_model": "on-demand",
        "price_per_hour": "700.0",
        "currency": "USD",
        "source": "typed by hand",
        "fetched_on": "2026-11-20",
        "valid_from": "2026-02-01",
    }
    form = AcceleratorPriceForm(data=data)
    assert not form.is_valid()
    assert form.errors["price_per_hour"] == ["700.0 is a catalogue placeholder, not a price"]

    form = AcceleratorPriceForm(data={**data, "price_per_hour": "90.00"})
    assert not form.is_valid()
    assert "validity overlaps existing price row" in form.errors["valid_from"][0]
    assert form.is_valid() is False and AcceleratorPrice.objects.count() == 1


def test_it_loads_the_default_price_book_and_reports_bad_files(tmp_path: Path, capsys):
    call_command("prices", "default", "--if-empty")
    assert AcceleratorPrice.objects.filter(provider="aws").count() == 4
    assert all(p.source and p.fetched_on for p in AcceleratorPrice.objects.all())
    with pytest.raises(CommandError, match="nothing imported"):
        call_command("prices", "default")  # the same rows again overlap themselves
    # A deployment's first start loads it; later starts leave the book to its editors.
    rows = AcceleratorPrice.objects.count()
    call_command("prices", "default", "--if-empty")
    assert AcceleratorPrice.objects.count() == rows
    assert "already has prices" in capsys.readouterr().out
    bad = tmp_path / "prices.csv"
    bad.write_text(HEADER + "l4,1,gcp,us-central1,g2,on-demand,abc,USD,s,2026-11-20,2026-01-01\n")
    with pytest.raises(CommandError):
        call_command("prices", "import", str(bad))
    assert "line 2, column price: 'abc' is not a number" in capsys.readouterr().err
