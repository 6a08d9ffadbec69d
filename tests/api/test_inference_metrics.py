"""POST /api/v1/inference-metrics: intervals stored per host and variant, idempotent, team-scoped."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accelboard.serving.models import InferenceMetric

from .conftest import inference_payload, post_json, row_counts, telemetry_payload

URL = "/api/v1/inference-metrics"


@pytest.fixture(autouse=True)
def host(client: Client, team: Any, ingest_token: str) -> None:
    """gpu-node-01 and its GPUs, registered to the team by its agent's first telemetry batch."""
    response = post_json(client, "/api/v1/telemetry", telemetry_payload(n=0), ingest_token)
    assert response.status_code == 200, response.content


def test_it_stores_intervals_with_percentiles_and_histograms(
    client: Client, team: Any, ingest_token: str
) -> None:
    payload = inference_payload()
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 200, response.content
    assert response.json() == {"batch_id": payload["batch_id"], "accepted": 1, "duplicate": False}
    row = InferenceMetric.objects.select_related("host", "variant").get()
    assert (row.team_id, row.host.hostname, row.host.team_id) == (team.pk, "gpu-node-01", team.pk)
    assert (row.variant.name, row.variant.precision) == ("fp8", "fp8")
    assert (row.requests, row.errors, row.generated_tokens) == (1200, 3, 307200)
    assert (row.ttft_p50_ms, row.itl_p99_ms, row.e2e_p99_ms) == (85.0, 38.0, 7400.0)
    assert row.histograms == {"ttft_seconds": [[0.05, 310], [0.1, 820], ["+Inf", 1200]]}
    assert row.batch_id == payload["batch_id"]


def test_it_stores_a_retried_batch_once_and_replaces_a_resent_interval(
    client: Client, team: Any, ingest_token: str
) -> None:
    payload = inference_payload()
    post_json(client, URL, payload, ingest_token)
    retry = post_json(client, URL, payload, ingest_token)
    assert retry.json()["duplicate"] is True
    corrected = inference_payload()
    corrected["intervals"][0]["requests"] = 1300
    assert post_json(client, URL, corrected, ingest_token).json()["duplicate"] is False
    assert list(InferenceMetric.objects.values_list("requests", flat=True)) == [1300]


@pytest.mark.parametrize(
    ("mutate", "path", "code"),
    [
        (lambda p: p["intervals"][0].update(variant="mystery"), "intervals[0].variant", "unknown_variant"),
        (lambda p: p["intervals"][0].update(requests=-1), "intervals[0].requests", "greater_than_equal"),
        (lambda p: p["intervals"][0].update(interval_s=0), "intervals[0].interval_s", "greater_than_equal"),
        (lambda p: p["intervals"][0].update(engine="ollama"), "intervals[0].engine", "literal_error"),
        (
            lambda p: p["intervals"][0]["ttft_ms"].update(p95=1.0),
            "intervals[0].ttft_ms.p95",
            "extra_forbidden",
        ),
        (
            lambda p: p["intervals"][0].update(interval_start="2030-01-01T00:00:00Z"),
            "intervals[0].interval_start",
            "time_out_of_range",
        ),
        (
            lambda p: p["intervals"][0]["histograms"].update(ttft_seconds=[["big", 1]]),
            "intervals[0].histograms.ttft_seconds[0][0]",
            "float_type",
        ),
        (
            lambda p: p["intervals"].append(dict(p["intervals"][0])),
            "intervals[1].interval_start",
            "duplicate",
        ),
        (lambda p: p.update(batch_id=""), "batch_id", "string_too_short"),
    ],  # fmt: skip
)
def test_it_rejects_bad_intervals_and_stores_nothing(
    client: Client, team: Any, ingest_token: str, mutate: Any, path: str, code: str
) -> None:
    payload = inference_payload()
    mutate(payload)
    before = row_counts()
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["path"] == path
    assert error["code"].startswith(code.split("_")[0])
    assert row_counts() == before


def test_it_keeps_each_teams_rows_apart_on_a_host_name_both_send(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    assert post_json(client, URL, inference_payload(), ingest_token).status_code == 200
    theirs = inference_payload()
    theirs["intervals"][0]["accelerator_uuids"] = []  # the GPUs are the first team's: a 409
    response = post_json(client, URL, theirs, other_token)
    assert response.status_code == 200, response.content
    assert InferenceMetric.objects.values("team").distinct().count() == 2
    # Each team's rows on its own host of that name: the name is no one's across teams.
    assert set(InferenceMetric.objects.values_list("team_id", "host__team_id")) == {
        (team.pk, team.pk),
        (other_team.pk, other_team.pk),
    }


def test_it_refuses_a_read_token(client: Client, team: Any, read_token: str) -> None:
    assert post_json(client, URL, inference_payload(), read_token).status_code == 403
