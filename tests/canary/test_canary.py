"""Canary checks end to end: labelled serving intervals in, per-interval values worked by hand,
the verdict over generated traffic, the alert a fail opens, the endpoint and the page."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import yaml
from django.test import Client

from accelboard.alerts.choices import AlertKind, Severity
from accelboard.alerts.models import Alert
from accelboard.api.services import token_create
from accelboard.benchmarks.models import Model
from accelboard.canary import analysis
from accelboard.canary.selectors import canary_evaluate
from accelboard.canary.services import CanaryCheckInvalid, canary_check_create, canary_checks_run
from accelboard.notifications.emails import message_build
from accelboard.notifications.route_payloads import RouteAlertRef, RouteRef, route_matches
from accelboard.serving.models import InferenceMetric
from accelboard.serving.services import IntervalInput, inference_metrics_store
from tests.costs.builders import (
    accelerator_price_create,
    electricity_price_create,
    host_place,
    minutes_load,
    site_create,
)
from tests.factories import H100, accelerator_type_create, host_create

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
MINUTES = 60


@pytest.fixture
def hosts(team: Any) -> dict[str, Any]:
    kind = accelerator_type_create(name=H100["name"], match_names=H100["match_names"])
    site = site_create()
    stable, stable_gpus = host_create(team=team, gpus=2, hostname="stable-node")
    canary, canary_gpus = host_create(team=team, gpus=1, hostname="canary-node")
    for host in (stable, canary):
        host_place(host, site=site)
    # 8 GPUs for $98.32/h: $12.29 per GPU-hour; electricity $0.10/kWh at PUE 1.5.
    accelerator_price_create(accelerator_type=kind)
    electricity_price_create(site=site, price_per_kwh="0.10", pue=1.5)
    return {"stable": (stable, stable_gpus), "canary": (canary, canary_gpus)}


def _load(
    team: Any, hosts: dict[str, Any], *, slower: float = 1.0, seed: int = 1, power: bool = False
) -> None:
    """MINUTES one-minute intervals per deployment: stable on 2 GPUs, canary on 1, same traffic per GPU."""
    rng = np.random.default_rng(seed)
    for track, factor in (("stable", 1.0), ("canary", slower)):
        host, gpus = hosts[track]
        if power:
            minutes_load(
                gpus=gpus, start=NOW - timedelta(minutes=MINUTES), minutes=MINUTES, util=80, power_w=600.0
            )
        intervals = []
        for m in range(MINUTES):
            noise = rng.lognormal(0, 0.05, 4)
            intervals.append(
                IntervalInput(
                    model="Llama-3.1-8B",
                    variant="fp8" if track == "stable" else "fp8-next",
                    interval_start=NOW - timedelta(minutes=MINUTES - m),
                    interval_s=60,
                    accelerator_uuids=[g.uuid for g in gpus],
                    requests=300 * len(gpus),
                    errors=0,
                    generated_tokens=int(60_000 * len(gpus) / factor * noise[0]),
                    ttft_ms={"p50": 90 * factor * noise[1], "p99": 400 * factor * noise[2]},
                    itl_ms={"p50": 11 * factor * noise[3], "p99": 30.0},
                    e2e_ms={"p50": 2500 * factor * noise[1], "p99": 7000 * factor * noise[2]},
                    labels={"track": track, "app": "chat"},
                )
            )
        inference_metrics_store(team=team, host=host, batch_id=f"b-{track}", intervals=intervals)


def _check(team: Any, name: str = "chat-canary") -> Any:
    return canary_check_create(
        team=team,
        model=Model.objects.get(name="Llama-3.1-8B"),
        name=name,
        baseline={"track": "stable"},
        canary={"track": "canary"},
        window_minutes=MINUTES,
    )


def test_it_reads_each_intervals_values_as_worked_by_hand(team: Any, hosts: dict[str, Any]) -> None:
    host, gpus = hosts["canary"]
    minutes_load(gpus=gpus, start=NOW - timedelta(minutes=5), minutes=5, util=80, power_w=600.0)
    inference_metrics_store(
        team=team,
        host=host,
        batch_id="one",
        intervals=[
            IntervalInput(
                model="Llama-3.1-8B",
                variant="fp8",
                interval_start=NOW - timedelta(minutes=5),
                interval_s=300,
                accelerator_uuids=[gpus[0].uuid],
                requests=1000,
                errors=20,
                generated_tokens=600_000,
                e2e_ms={"p50": 2000.0, "p99": 6000.0},
                labels={"track": "canary"},
            )
        ],
    )
    check = _check(team)
    report = canary_evaluate(check=check, end=NOW)
    values = {k: v[0] for k, v in report.canary.values.items()}
    assert values["error_rate"] == pytest.approx(0.02)  # 20 / 1000
    assert values["tokens_per_s_per_gpu"] == pytest.approx(2000.0)  # 600,000 / 300 s / 1 GPU
    # 5 minutes x 600 W x 60 s = 180,000 J for 600,000 tokens: 300,000 J per 1M tokens.
    assert values["j_per_1m_tokens"] == pytest.approx(300_000.0)
    # $12.29 x 300/3600 h = $1.024167, + 0.05 kWh x 1.5 x $0.10 = $0.0075; per 1M tokens: / 0.6.
    assert values["cost_per_1m_tokens"] == pytest.approx((12.29 * 300 / 3600 + 0.05 * 1.5 * 0.10) / 0.6)
    assert values["e2e_p50_ms"] == 2000.0
    assert report.baseline.times == []  # nothing labelled stable
    assert report.verdict.verdict == analysis.NO_DATA


def test_it_fails_a_slower_costlier_canary_on_those_metrics_and_alerts_once(
    team: Any, lead: Any, hosts: dict[str, Any]
) -> None:
    _load(team, hosts, slower=1.3, power=True)
    check = _check(team)
    report = canary_evaluate(check=check, end=NOW)
    assert (len(report.baseline.times), len(report.canary.times)) == (MINUTES, MINUTES)
    assert report.verdict.verdict == analysis.FAIL
    failed = set(report.verdict.failed)
    assert {"e2e_p50_ms", "ttft_p50_ms", "tpot_p50_ms", "tokens_per_s_per_gpu", "j_per_1m_tokens"} <= failed
    assert "cost_per_1m_tokens" in failed
    assert "error_rate" not in failed and "tpot_p99_ms" not in failed  # p99 ITL was held equal
    first = canary_checks_run(now=NOW)
    again = canary_checks_run(now=NOW + timedelta(minutes=5))
    assert [(o.verdict, o.created) for o in first] == [(analysis.FAIL, True)]
    assert [(o.verdict, o.created) for o in again] == [(analysis.FAIL, False)]
    alert = Alert.objects.get()
    assert (alert.kind, alert.severity, alert.team_id) == (AlertKind.CANARY, Severity.CRITICAL, team.pk)
    assert alert.title.startswith("Canary chat-canary of Llama-3.1-8B fails: ")
    assert alert.detail["canary"]["verdict"] == "fail"
    # Its email reads as any production alert's (no series, no host).
    email = message_build(to="lead@example.com", user_id=lead.pk, alerts=[alert], mode="immediate", token="t")
    assert "Canary chat-canary" in email.subject
    # The team's routes for production alerts (and for every kind) take it.
    ref = RouteAlertRef(id=alert.pk, team_id=team.pk, kind=alert.kind, severity=alert.severity, opened_at=NOW)
    for kind in ("production", ""):
        route = RouteRef(
            id=1, team_id=team.pk, channel="slack", kind=kind, min_severity="warning", created_at=NOW
        )
        assert route_matches(route, ref)


def test_a_harmless_canary_passes_and_opens_nothing(team: Any, hosts: dict[str, Any]) -> None:
    _load(team, hosts, slower=1.0, power=True)
    _check(team)
    outcomes = canary_checks_run(now=NOW)
    assert [o.verdict for o in outcomes] == [analysis.PASS]
    assert not Alert.objects.exists()


def test_it_refuses_a_bad_check_naming_the_field(team: Any, hosts: dict[str, Any]) -> None:
    _load(team, hosts)
    model = Model.objects.get(name="Llama-3.1-8B")
    with pytest.raises(CanaryCheckInvalid) as caught:
        canary_check_create(team=team, model=model, name="x", baseline={"a": "b"}, canary={"a": "b"})
    assert caught.value.field == "canary"
    with pytest.raises(CanaryCheckInvalid) as caught:
        canary_check_create(
            team=team,
            model=model,
            name="x",
            baseline={"a": "b"},
            canary={"a": "c"},
            min_effects={"speed": 0.1},
        )
    assert caught.value.field == "min_effects.speed"


def _analysis_template() -> dict[str, Any]:
    text = (Path(__file__).resolve().parents[2] / "docs" / "canary.md").read_text()
    block = re.search(r"```yaml\n(kind: AnalysisTemplate.*?)```", text, re.S)
    assert block, "docs/canary.md has the AnalysisTemplate example"
    return yaml.safe_load("apiVersion: argoproj.io/v1alpha1\n" + block.group(1))


def _ns(value: Any) -> Any:
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _ns(v) for k, v in value.items()})
    return [_ns(v) for v in value] if isinstance(value, list) else value


def _argo(expression: str, result: dict[str, Any]) -> bool:
    """An Argo Rollouts condition (expr language) on the web provider's result: the subset the
    example uses (member access, ==, !=, &&, ||, string and boolean literals)."""
    python = (
        expression.replace("&&", " and ")
        .replace("||", " or ")
        .replace("true", "True")
        .replace("false", "False")
    )
    return bool(eval(python, {"__builtins__": {}}, {"result": _ns(result)}))  # noqa: S307 - the doc's literal


def test_the_documented_analysis_template_reads_the_endpoints_json(
    client: Client, team: Any, hosts: dict[str, Any]
) -> None:
    _load(team, hosts, slower=1.3, power=True)
    check = _check(team)
    token = token_create(team=team, kind="read", name="argo")[1]
    metric = _analysis_template()["spec"]["metrics"][0]
    web = metric["provider"]["web"]
    assert web["url"].startswith("https://accelboard.example.com/api/v1/canary/")
    assert web["jsonPath"] == "{$}"
    from unittest import mock  # noqa: PLC0415

    with mock.patch("accelboard.canary.selectors.timezone.now", return_value=NOW):
        response = client.get(f"/api/v1/canary/{check.name}", HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["verdict"] == "fail" and body["failed"] is True
        assert _argo(metric["failureCondition"], body) is True
        assert _argo(metric["successCondition"], body) is False
        gated = client.get(f"/api/v1/canary/{check.name}?gate=true", HTTP_AUTHORIZATION=f"Bearer {token}")
        assert gated.status_code == 412 and gated.json()["verdict"] == "fail"
        InferenceMetric.objects.filter(labels__track="canary").delete()
        _load_harmless(team, hosts)
        body = client.get(f"/api/v1/canary/{check.name}", HTTP_AUTHORIZATION=f"Bearer {token}").json()
        assert body["verdict"] == "pass", json.dumps(body)[:500]
        assert _argo(metric["successCondition"], body) is True
        assert _argo(metric["failureCondition"], body) is False
        gated = client.get(f"/api/v1/canary/{check.name}?gate=true", HTTP_AUTHORIZATION=f"Bearer {token}")
        assert gated.status_code == 200


def _load_harmless(team: Any, hosts: dict[str, Any]) -> None:
    host, gpus = hosts["canary"]
    rows = InferenceMetric.objects.filter(labels__track="stable").order_by("interval_start")
    intervals = [
        IntervalInput(
            model="Llama-3.1-8B",
            variant="fp8-next",
            interval_start=row.interval_start,
            interval_s=row.interval_s,
            accelerator_uuids=[gpus[0].uuid],
            requests=row.requests // 2,
            generated_tokens=row.generated_tokens // 2,
            ttft_ms={"p50": row.ttft_p50_ms, "p99": row.ttft_p99_ms},
            itl_ms={"p50": row.itl_p50_ms, "p99": row.itl_p99_ms},
            e2e_ms={"p50": row.e2e_p50_ms, "p99": row.e2e_p99_ms},
            labels={"track": "canary"},
        )
        for row in rows
    ]
    inference_metrics_store(team=team, host=host, batch_id="harmless", intervals=intervals)


def test_the_endpoint_answers_only_the_tokens_team(
    client: Client, team: Any, other_team: Any, hosts: dict[str, Any]
) -> None:
    _load(team, hosts)
    check = _check(team)
    other = token_create(team=other_team, kind="read", name="x")[1]
    ingest = token_create(team=team, kind="ingest", name="y")[1]
    assert client.get(f"/api/v1/canary/{check.name}", HTTP_AUTHORIZATION=f"Bearer {other}").status_code == 404
    assert (
        client.get(f"/api/v1/canary/{check.name}", HTTP_AUTHORIZATION=f"Bearer {ingest}").status_code == 403
    )
    assert client.get(f"/api/v1/canary/{check.name}").status_code == 401


@pytest.mark.parametrize(
    ("who", "status"), [("lead", 200), ("engineer", 200), ("other_lead", 404), ("outsider", 404)]
)
def test_the_page_shows_the_verdict_to_the_team_only(
    login_client: Any,
    cast: dict[str, Any],
    team: Any,
    hosts: dict[str, Any],
    who: str,
    status: int,
    django_assert_max_num_queries: Any,
) -> None:
    _load(team, hosts, slower=1.3, power=True)
    check = _check(team)
    from unittest import mock  # noqa: PLC0415

    client = login_client(cast[who])
    # A fixed number of queries whatever the intervals: two deployments' rows, GPUs, rollups and
    # agreement, and the price book once.
    with (
        mock.patch("accelboard.canary.selectors.timezone.now", return_value=NOW),
        django_assert_max_num_queries(24),
    ):
        response = client.get(f"/canary/{check.pk}/")
    assert response.status_code == status
    if status == 200:
        page = response.content.decode()
        assert 'id="overall-verdict" data-verdict="fail"' in page
        assert 'data-metric="e2e_p50_ms" data-verdict="fail"' in page
        assert "Mann-Whitney U" in page  # the rule is written on the page
        listing = login_client(cast[who]).get(f"/canary/?model={check.model_id}").content.decode()
        assert f'href="/canary/{check.pk}/"' in listing


def test_serving_intervals_carry_labels_through_the_api(client: Client, team: Any) -> None:
    from tests.api.conftest import inference_payload, post_json, telemetry_payload  # noqa: PLC0415

    token = token_create(team=team, kind="ingest", name="z")[1]
    assert post_json(client, "/api/v1/telemetry", telemetry_payload(n=0), token).status_code == 200
    payload = inference_payload()
    payload["intervals"][0]["labels"] = {"track": "canary"}
    assert post_json(client, "/api/v1/inference-metrics", payload, token).status_code == 200
    assert InferenceMetric.objects.get().labels == {"track": "canary"}
    payload = inference_payload()
    payload["intervals"][0]["labels"] = {"track": 1}
    response = post_json(client, "/api/v1/inference-metrics", payload, token)
    assert response.status_code in (400, 422)
    assert "intervals[0].labels.track" in response.content.decode()
