"""POST/GET /api/v1/runs, GET series, points and alerts: contract, scopes, isolation, pagination."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accelboard.alerts.models import Alert, AlertMetric
from accelboard.benchmarks.models import BenchmarkRun, MetricValue, Series
from accelboard.fleet.models import Host
from tests.factories import accelerator_type_create, alert_create, host_create, run_create

from .conftest import post_json, row_counts, run_payload

URL = "/api/v1/runs"


@pytest.fixture
def h100(db: None) -> Any:
    return accelerator_type_create(name="H100 SXM 80GB", slug="h100-sxm-80gb", match_names=["H100 80GB HBM3"])


def _get(client: Client, path: str, token: str | None, **params: Any) -> Any:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.get(path, params, **headers)


def test_it_records_a_run_with_its_metrics(client: Client, team: Any, rw_token: str, h100: Any) -> None:
    host_create(team=team, hostname="gpu-node-01")  # registered by its agent
    payload = run_payload()
    response = post_json(client, URL, payload, rw_token)
    assert response.status_code == 201, response.content
    body = response.json()
    run = BenchmarkRun.objects.get(uuid=payload["run_id"])
    assert body == {"run_id": payload["run_id"], "id": run.pk, "url": f"/runs/{run.pk}/", "duplicate": False}
    assert (run.team_id, run.accelerator_type_id, run.branch, run.git_commit) == (
        team.pk,
        h100.pk,
        "main",
        "a1b2c3d",
    )
    assert run.workload.variant.precision == "fp8"
    assert run.workload.batch_size == 64
    assert run.host == Host.objects.get(hostname="gpu-node-01", team=team)
    metric = MetricValue.objects.get(run=run)
    assert (metric.name, metric.value, metric.unit, metric.direction) == (
        "throughput_tokens_per_s",
        4890.0,
        "tokens/s",
        "higher",
    )
    assert metric.samples == [4881.2, 4893.0]
    assert Series.objects.get(pk=metric.series_id).last_value == 4890.0


def test_it_accepts_ingest_tokens_for_agents(client: Client, team: Any, ingest_token: str, h100: Any) -> None:
    assert post_json(client, URL, run_payload(), ingest_token).status_code == 201


def test_it_returns_the_first_result_for_a_retried_run(
    client: Client, team: Any, rw_token: str, h100: Any
) -> None:
    payload = run_payload()
    first = post_json(client, URL, payload, rw_token).json()
    retry = post_json(client, URL, payload, rw_token, gzipped=True)
    assert retry.status_code == 200
    assert retry.json() == {**first, "duplicate": True}
    assert BenchmarkRun.objects.count() == 1
    assert MetricValue.objects.count() == 1


@pytest.mark.parametrize(
    ("change", "path", "code"),
    [
        (
            {"metrics": [{"name": "vibes", "value": 1.0, "unit": "score"}]},
            "metrics[0].name",
            "unknown_metric",
        ),
        (
            {"metrics": [{"name": "throughput_tokens_per_s", "value": 1.0, "unit": "tok/s"}]},
            "metrics[0].unit",
            "unknown_unit",
        ),
        (
            {"metrics": [{"name": "latency_p50_ms", "value": 1.0, "unit": "s"}]},
            "metrics[0].unit",
            "wrong_unit",
        ),
        (
            {
                "metrics": [
                    {"name": "wall_time_s", "value": 1.0, "unit": "s"},
                    {"name": "wall_time_s", "value": 2.0, "unit": "s"},
                ]
            },
            "metrics[1].name",
            "duplicate",
        ),
        (
            {"metrics": [{"name": "latency_p50_ms", "value": "fast", "unit": "ms"}]},
            "metrics[0].value",
            "float_type",
        ),
        ({"metrics": []}, "metrics", "too_short"),
        ({"run_id": "not-a-uuid"}, "run_id", "uuid_parsing"),
        ({"started_at": "2999-01-01T00:00:00Z"}, "started_at", "time_out_of_range"),
        ({"started_at": "1999-12-31T23:59:59Z"}, "started_at", "time_out_of_range"),
        ({"variant": {"name": "fp8", "precision": "fp7"}}, "variant.precision", "literal_error"),
        ({"workload": {"batch_size": "64"}}, "workload.batch_size", "int_type"),
        ({"workload": {"batch_size": 2**40}}, "workload.batch_size", "less_than_equal"),
        ({"hardware": {"accelerator": "Abacus 9000"}}, "hardware.accelerator", "unknown_accelerator"),
        ({"provenance": {"ci_url": "javascript:alert(1)"}}, "provenance.ci_url", "string_pattern_mismatch"),
        ({"colour": "blue"}, "colour", "extra_forbidden"),
        ({"model": None}, "model", "string_type"),
    ],
)
def test_it_rejects_bad_runs_and_stores_nothing(
    client: Client, team: Any, rw_token: str, h100: Any, change: dict[str, Any], path: str, code: str
) -> None:
    before = row_counts()
    response = post_json(client, URL, run_payload(**change), rw_token)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert (error["path"], error["code"]) == (path, code)
    assert row_counts() == before


def test_it_accepts_a_custom_metric_with_a_direction(
    client: Client, team: Any, rw_token: str, h100: Any
) -> None:
    change = {"metrics": [{"name": "vibes", "value": 1.0, "unit": "score", "direction": "higher"}]}
    assert post_json(client, URL, run_payload(**change), rw_token).status_code == 201
    assert MetricValue.objects.get().direction == "higher"


def test_it_refuses_a_read_token_for_writes(client: Client, team: Any, read_token: str, h100: Any) -> None:
    before = row_counts()
    response = post_json(client, URL, run_payload(), read_token)
    assert response.status_code == 403
    assert row_counts() == before


def test_it_refuses_another_teams_run_id_and_never_links_its_host(
    client: Client, team: Any, rw_token: str, other_token: str, h100: Any
) -> None:
    host_create(team=team, hostname="gpu-node-01")
    payload = run_payload()
    assert post_json(client, URL, payload, rw_token).status_code == 201
    before = row_counts()
    reused = {**payload, "hardware": {**payload["hardware"], "host": "research-node"}}
    response = post_json(client, URL, reused, other_token)  # another team's run_id
    assert response.status_code == 409
    assert response.json()["error"]["path"] == "run_id"
    assert row_counts() == before
    other = run_payload()  # same host name, new run: recorded, the name kept as text
    assert post_json(client, URL, other, other_token).status_code == 201
    run = BenchmarkRun.objects.get(uuid=other["run_id"])
    assert (run.host, run.context["host"]) == (None, "gpu-node-01")


# --- Reads ------------------------------------------------------------------------------------


def _record(client: Client, token: str, **change: Any) -> int:
    response = post_json(client, URL, run_payload(**change), token)
    assert response.status_code == 201, response.content
    return response.json()["id"]


def test_it_lists_runs_with_filters_and_next_links(
    client: Client, team: Any, rw_token: str, h100: Any
) -> None:
    ids = [
        _record(client, rw_token, started_at=f"2025-11-{day:02d}T10:00:00Z", provenance={"branch": branch})
        for day, branch in [(1, "main"), (2, "dev"), (3, "main"), (4, "main")]
    ]
    response = _get(client, URL, rw_token, branch="main", page_size=2)
    assert response.status_code == 200, response.content
    page = response.json()
    assert page["count"] == 3
    assert [item["id"] for item in page["items"]] == [ids[3], ids[2]]
    assert page["items"][0]["metrics"][0]["name"] == "throughput_tokens_per_s"
    assert page["previous"] is None
    follow = client.get(page["next"], HTTP_AUTHORIZATION=f"Bearer {rw_token}").json()
    assert [item["id"] for item in follow["items"]] == [ids[0]]
    assert follow["next"] is None
    since = _get(client, URL, rw_token, since="2025-11-02T00:00:00Z", until="2025-11-04T00:00:00Z").json()
    assert [item["id"] for item in since["items"]] == [ids[2], ids[1]]
    assert _get(client, URL, rw_token, accelerator="h100-sxm-80gb").json()["count"] == 4
    assert _get(client, URL, rw_token, model="Other-Model").json()["count"] == 0
    assert _get(client, URL, rw_token, variant="fp8").json()["count"] == 4


def test_it_shows_one_run_and_hides_other_teams_runs(
    client: Client, team: Any, rw_token: str, other_token: str, h100: Any
) -> None:
    run_id = _record(client, rw_token)
    assert _get(client, f"{URL}/{run_id}", rw_token).json()["run_id"]
    assert _get(client, URL, other_token).json()["count"] == 0
    response = _get(client, f"{URL}/{run_id}", other_token)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_it_serves_series_and_their_points(
    client: Client, team: Any, rw_token: str, other_token: str, h100: Any
) -> None:
    for day in (1, 2, 3):
        _record(client, rw_token, started_at=f"2025-11-{day:02d}T10:00:00Z",
                metrics=[{"name": "throughput_tokens_per_s", "value": 100.0 * day, "unit": "tokens/s"}])  # fmt: skip
    series = _get(client, "/api/v1/series", rw_token, metric="throughput_tokens_per_s").json()
    assert series["count"] == 1
    item = series["items"][0]
    assert (item["direction"], item["last_value"], item["accelerator"]) == ("higher", 300.0, "H100 SXM 80GB")
    points = _get(
        client, f"/api/v1/series/{item['id']}/points", rw_token, since="2025-11-02T00:00:00Z"
    ).json()
    assert [p["value"] for p in points["items"]] == [200.0, 300.0]
    assert _get(client, "/api/v1/series", other_token).json()["count"] == 0
    assert _get(client, f"/api/v1/series/{item['id']}/points", other_token).status_code == 404


def test_it_lists_alerts_by_state_and_kind(
    client: Client, team: Any, other_team: Any, read_token: str
) -> None:
    alert_create(team=team, state="open", kind="regression")
    alert_create(team=team, state="resolved", kind="regression")
    alert_create(team=team, state="open", kind="slo")
    alert_create(team=other_team, state="open", kind="regression")
    assert _get(client, "/api/v1/alerts", read_token).json()["count"] == 3
    assert _get(client, "/api/v1/alerts", read_token, state="open", kind="regression").json()["count"] == 1


def test_an_alert_lists_every_metric_its_change_moved(client: Client, team: Any, read_token: str) -> None:
    run = run_create(team=team)
    p99 = run.metrics.get(name="latency_p99_ms").series
    throughput = run.metrics.get(name="throughput_tokens_per_s").series
    alert = alert_create(team=team, severity="critical")
    Alert.objects.filter(pk=alert.pk).update(series=p99, first_run=run)
    AlertMetric.objects.create(alert=alert, series=p99, severity="critical", pct_change=21.0)
    AlertMetric.objects.create(alert=alert, series=throughput, severity="warning", pct_change=-6.0)
    (item,) = _get(client, "/api/v1/alerts", read_token).json()["items"]
    assert sorted((m["metric"], m["severity"], m["pct_change"]) for m in item["metrics"]) == [
        ("latency_p99_ms", "critical", 21.0),
        ("throughput_tokens_per_s", "warning", -6.0),
    ]


def test_it_refuses_reads_to_ingest_tokens_and_strangers(
    client: Client, team: Any, ingest_token: str
) -> None:
    response = _get(client, URL, ingest_token)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "wrong_token_kind"
    response = _get(client, URL, None)
    assert response.status_code == 401
    assert _get(client, URL, None, page=0).status_code in (401, 422)


def test_it_lets_a_logged_in_member_read_their_teams_runs(
    client: Client, team: Any, rw_token: str, lead: Any, other_lead: Any, login_client: Any, h100: Any
) -> None:
    _record(client, rw_token)
    assert login_client(lead).get(URL).json()["count"] == 1
    assert login_client(other_lead).get(URL).json()["count"] == 0
    # A session may read but not write: the write endpoints take tokens only.
    response = login_client(lead).post(URL, data=run_payload(), content_type="application/json")
    assert response.status_code == 401


def test_it_rejects_bad_query_parameters_with_their_name(client: Client, team: Any, read_token: str) -> None:
    response = _get(client, URL, read_token, since="last tuesday")
    assert response.status_code == 422
    assert response.json()["error"]["path"] == "since"
    response = _get(client, URL, read_token, page_size=10_000)
    assert response.status_code == 422
    assert response.json()["error"]["path"] == "page_size"


def test_it_keeps_list_queries_bounded(
    client: Client, team: Any, rw_token: str, h100: Any, django_assert_max_num_queries: Any
) -> None:
    for _ in range(5):
        _record(client, rw_token)
    with django_assert_max_num_queries(5):
        assert _get(client, URL, rw_token).json()["count"] == 5


def test_it_stores_a_run_that_states_no_scenario_as_not_stated(
    client: Client, team: Any, rw_token: str, h100: Any
) -> None:
    payload = run_payload()
    del payload["workload"]["scenario"]
    assert post_json(client, URL, payload, rw_token).status_code == 201
    # never Offline by default: an online benchmark would land among the Offline runs
    assert BenchmarkRun.objects.get().workload.scenario == "unstated"
