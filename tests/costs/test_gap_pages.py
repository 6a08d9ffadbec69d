"""Pages say why a cost is missing, and the reason is the real one (``costs.gaps``).

One model on H100s, one configuration per missing input: a run with no host (its price was never
looked up), a run on a host whose provider and region have no price row, and a run on a priced
host that reported no throughput. The hardware page and the profile tab give each its own first
missing input and fix; neither says "no price" for the run without a host.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from accelboard.costs.run_cost_services import run_cost_compute
from accelboard.profiles.services import profile_attach
from tests import factories
from tests.costs.builders import accelerator_price_create, host_place, site_create
from tests.profiles.test_pages import START, _trace

pytestmark = pytest.mark.django_db


@pytest.fixture
def gappy(team: Any) -> dict[str, Any]:
    h100 = factories.accelerator_type_from(factories.H100)
    priced, _ = factories.host_create(
        team=team, gpus=1, hostname="priced-h100", gpu_name=factories.H100["driver_name"]
    )
    host_place(
        priced,
        site=site_create(name="lambda-usw", provider="lambda", region="us-west-1"),
        provider="lambda",
        region="us-west-1",
    )
    unpriced, _ = factories.host_create(
        team=team, gpus=1, hostname="bare-h100", gpu_name=factories.H100["driver_name"]
    )
    host_place(unpriced, site=None, provider="on-prem", region="basement")
    accelerator_price_create(
        accelerator_type=h100, price_per_hour="3.29", count=1, provider="lambda", region="us-west-1"
    )
    runs = {
        "no-host": factories.run_create(team=team, accelerator_type=h100, variant="nohost", started_at=START),
        "no-price": factories.run_create(
            team=team, accelerator_type=h100, variant="noprice", host=unpriced, started_at=START
        ),
        "no-throughput": factories.run_create(
            team=team,
            accelerator_type=h100,
            variant="notps",
            host=priced,
            started_at=START,
            metrics={"latency_p99_ms": 40.0},
        ),
    }
    for run in runs.values():
        run_cost_compute(run=run)
    return runs


def test_the_hardware_page_gives_each_configuration_its_real_first_missing_input(
    gappy: dict[str, Any], lead: Any, login_client: Any
) -> None:
    body = login_client(lead).get(reverse("dashboard:hardware"), {"p99_ms": "100"}).content.decode()
    rows = {
        code: body.split(f'data-config="{variant} on', 1)[1].split("</tr>", 1)[0]
        for code, variant in (("no-host", "nohost"), ("no-price", "noprice"), ("no-throughput", "notps"))
    }
    for code, row in rows.items():
        assert f'data-cost-gap="{code}"' in row, code
    assert ">no price<" not in rows["no-host"] and ">no host<" in rows["no-host"]
    assert "no price row for H100 SXM 80GB at on-prem basement (host bare-h100)" in body
    assert "has no throughput metric to cost a unit of work by" in body
    assert "no price for their accelerator" not in body
    assert "Cost per 1M needs a price for the accelerator" not in body


@pytest.mark.parametrize("code", ["no-host", "no-price"])
def test_the_profile_tab_gives_the_runs_real_first_missing_input(
    gappy: dict[str, Any], lead: Any, login_client: Any, code: str
) -> None:
    run = gappy[code]
    profile_attach(run=run, files=[("t.json", _trace())])
    html = login_client(lead).get(reverse("profiles:run_profile", args=[run.pk])).content.decode()
    card = html.split('id="profile-costs"')[1].split("</section>")[0]
    assert f'data-cost-gap="{code}"' in card
    assert "Fix:" in card
    # The old panel named two causes at once, neither of them the run's.
    assert "no throughput to cost a unit of work by and no price" not in card
