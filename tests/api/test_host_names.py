"""Host names resolve within the token's team (issue 34, finding 4): one team's names neither block
another team's agents nor tell anyone which names another team uses, and nothing one team sends
is stored against, or priced with, another team's host of the same name.

Here ``other_team`` (token ``other_token``) is the team that registered "bravo-node-02" first;
``team`` (``ingest_token``) sends under the same name afterwards."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime
from typing import Any

import openpyxl
from django.test import Client
from django.urls import reverse

from accelboard.costs.serving_cost_services import serving_cost_day_compute
from accelboard.fleet.models import Accelerator, Host, TelemetrySample
from accelboard.serving.models import InferenceMetric
from tests.costs.builders import accelerator_price_create, electricity_price_create, host_place, site_create
from tests.factories import H100, accelerator_type_from

from .conftest import inference_payload, post_json, telemetry_payload

TELEMETRY = "/api/v1/telemetry"
INFERENCE = "/api/v1/inference-metrics"
THEIR_GPU = "GPU-0ther000-0000-4000-8000-00000000000b"


def _telemetry(hostname: str, gpus: tuple[str, str], *, n: int = 4, batch_id: str | None = None) -> dict:
    payload = telemetry_payload(n=n, hostname=hostname, batch_id=batch_id)
    first, second = payload["accelerators"]
    renamed = {first["uuid"]: gpus[0], second["uuid"]: gpus[1]}
    for gpu in payload["accelerators"]:
        gpu["uuid"] = renamed[gpu["uuid"]]
    for sample in payload["samples"]:
        sample["gpu"] = renamed[sample["gpu"]]
    return payload


def _their_host(client: Client, other_token: str) -> Host:
    payload = _telemetry("bravo-node-02", (THEIR_GPU, THEIR_GPU[:-1] + "c"), n=2)
    response = post_json(client, TELEMETRY, payload, other_token)
    assert response.status_code == 200, response.content
    return Host.objects.get(hostname="bravo-node-02")


def _without_batch_id(response: Any) -> dict[str, Any]:
    return {key: value for key, value in response.json().items() if key != "batch_id"}


def test_telemetry_under_another_teams_host_name_answers_as_an_unused_name(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    theirs = _their_host(client, other_token)

    taken = post_json(client, TELEMETRY, _telemetry("bravo-node-02", ("GPU-b1", "GPU-b2")), ingest_token)
    unused = post_json(client, TELEMETRY, _telemetry("charlie-node-03", ("GPU-c1", "GPU-c2")), ingest_token)

    assert taken.status_code == unused.status_code == 200, taken.content
    assert (
        _without_batch_id(taken)
        == _without_batch_id(unused)
        == {"accepted": 4, "duplicate_samples": 0, "duplicate": False}
    )
    # The sender got a host of its own under that name; the other team's is untouched.
    ours = Host.objects.get(team=team, hostname="bravo-node-02")
    assert ours.pk != theirs.pk
    assert set(Accelerator.objects.filter(host=ours).values_list("uuid", flat=True)) == {"GPU-b1", "GPU-b2"}
    theirs.refresh_from_db()
    assert theirs.team_id == other_team.pk
    assert TelemetrySample.objects.filter(host=theirs).count() == 2
    assert TelemetrySample.objects.filter(host=ours).count() == 4

    # The team that had the name first is not blocked: its agent goes on as before.
    again = _telemetry("bravo-node-02", (THEIR_GPU, THEIR_GPU[:-1] + "c"), n=2, batch_id="theirs-again")
    again["samples"] = [{**s, "time": s["time"] + 10} for s in again["samples"]]
    response = post_json(client, TELEMETRY, again, other_token)
    assert response.status_code == 200, response.content
    assert TelemetrySample.objects.filter(host=theirs).count() == 4
    assert Host.objects.filter(hostname="bravo-node-02").count() == 2


def test_a_team_registering_a_name_after_another_team_is_not_blocked_either(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    # The squatting order of the finding: the sender takes the name first, its owner comes later.
    squat = post_json(client, TELEMETRY, _telemetry("bravo-node-02", ("GPU-b1", "GPU-b2")), ingest_token)
    assert squat.status_code == 200, squat.content
    payload = _telemetry("bravo-node-02", (THEIR_GPU, THEIR_GPU[:-1] + "c"), n=2)
    response = post_json(client, TELEMETRY, payload, other_token)
    assert response.status_code == 200, response.content
    assert Host.objects.get(team=other_team, hostname="bravo-node-02").accelerators.count() == 2
    assert Host.objects.get(team=team, hostname="bravo-node-02").accelerators.count() == 2


def test_serving_metrics_under_another_teams_host_name_are_stored_against_the_senders_own_host(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    theirs = _their_host(client, other_token)
    payload = inference_payload(host="bravo-node-02", batch_id="b1")
    payload["intervals"][0]["accelerator_uuids"] = []
    taken = post_json(client, INFERENCE, payload, ingest_token)
    unused = post_json(
        client, INFERENCE, {**payload, "host": "charlie-node-03", "batch_id": "b2"}, ingest_token
    )
    assert taken.status_code == unused.status_code == 200, taken.content
    assert _without_batch_id(taken) == _without_batch_id(unused)

    assert not InferenceMetric.objects.filter(host=theirs).exists()
    row = InferenceMetric.objects.select_related("host").get(batch_id="b1")
    assert (row.team_id, row.host.team_id, row.host.hostname) == (team.pk, team.pk, "bravo-node-02")
    assert row.host.pk != theirs.pk
    # The sender's agent, with the sender's token, then reports on that very host.
    response = post_json(client, TELEMETRY, _telemetry("bravo-node-02", ("GPU-b1", "GPU-b2")), ingest_token)
    assert response.status_code == 200, response.content
    assert Accelerator.objects.get(uuid="GPU-b1").host_id == row.host_id


def test_the_senders_serving_costs_never_show_the_other_teams_pue_or_price(
    client: Client, login_client: Any, team: Any, other_team: Any, finance: Any, ingest_token: str,
    other_token: str,
) -> None:  # fmt: skip
    h100 = accelerator_type_from(H100)
    theirs = _their_host(client, other_token)
    site = site_create()
    host_place(theirs, site=site)  # aws, us-east-1: priced below
    accelerator_price_create(accelerator_type=h100)  # aws p5: $12.29 per GPU-hour
    electricity_price_create(site=site, pue=1.58)
    # The sender's own H100s (on another of its hosts), named by its serving batch for a host
    # name the other team uses.
    ours = _telemetry("alpha-node-01", ("GPU-a1", "GPU-a2"), n=2)
    for gpu in ours["accelerators"]:
        gpu["name"] = H100["driver_name"]
    assert post_json(client, TELEMETRY, ours, ingest_token).status_code == 200
    payload = inference_payload(host="bravo-node-02", batch_id="b1")
    payload["intervals"][0]["accelerator_uuids"] = ["GPU-a1"]
    day = date.today()
    payload["intervals"][0]["interval_start"] = datetime.now(UTC).replace(minute=0, second=0).isoformat()
    assert post_json(client, INFERENCE, payload, ingest_token).status_code == 200
    assert serving_cost_day_compute(day=day) == 1

    response = login_client(finance).get(
        reverse("costs:drill"),
        {"month": f"{day:%Y-%m}", "model": "Llama-3.1-8B", "format": "xlsx", "table": "serving"},
    )
    assert response.status_code == 200, response.content[:300]
    sheet = openpyxl.load_workbook(io.BytesIO(response.content), read_only=True)["serving"]
    header, *rows = [list(row) for row in sheet.iter_rows(values_only=True)]
    rows = [row for row in rows if row[0] != "Total"]
    assert len(rows) == 1
    row = dict(zip(header, rows[0], strict=True))
    assert row["Host"] == "bravo-node-02"
    assert row["PUE"] is None  # the sender's own host has no site: no PUE, not the other team's 1.58
    priced = [
        name
        for name in header
        if name and "price" in name.lower() and "Stale" not in name and row[name] is not None
    ]
    assert priced == [], {name: row[name] for name in priced}
