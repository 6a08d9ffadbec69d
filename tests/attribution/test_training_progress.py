"""A training job's progress: the API (idempotent, all or nothing, clear 4xx), the job page's step
time, cost and energy per step from its attributed GPU-time (worked by hand), the projection to
its planned steps, and a step-time regression raised as an alert.

The world: one on-prem host of ``team`` with three H100s (12.29 USD per GPU-hour: 98.32 for 8),
its agent reporting Slurm job 4242 holding GPUs A and B (share 1) for two hours from T0, GPU C
held by nobody; every GPU drawing 500 W (30,000 J per minute rollup).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse

from accelboard.alerts.choices import AlertKind
from accelboard.alerts.models import Alert
from accelboard.api.services import token_create
from accelboard.attribution.models import TrainingProgress
from accelboard.attribution.training_alerts import training_regression_check
from accelboard.fleet.ingest_services import telemetry_batch_ingest
from accelboard.fleet.models import Accelerator, Workload
from tests import factories
from tests.api.conftest import post_json
from tests.costs.builders import accelerator_price_create, minutes_load

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 10, 8, 0, tzinfo=UTC)
A, B, C = (f"GPU-00000000-0000-4000-8000-0000000000a{i}" for i in range(1, 4))
URL = "/api/v1/training-progress"
JOB = {"kind": "slurm-job", "uid": "4242"}
# 24 reports 5 minutes apart: 100 steps per interval (3 s per step) for the first 12 intervals,
# then 80 (3.75 s per step, 25 % slower): the slowdown of the issue.
STEPS = [0]
for i in range(24):
    STEPS.append(STEPS[-1] + (100 if i < 12 else 80))


def _point(i: int) -> dict[str, Any]:
    return {
        "at": (T0 + timedelta(minutes=5 * i)).isoformat(),
        "step": STEPS[i],
        "samples": STEPS[i] * 32,
        "loss": 2.0 - i * 0.01,
    }


@pytest.fixture
def job(team: Any) -> dict[str, Any]:
    return job_world(team)


def job_world(team: Any) -> dict[str, Any]:
    """The module docstring's world, through the agent's own ingest; the team's ingest token."""
    h100 = factories.accelerator_type_from(factories.H100)
    job_holds = [
        {
            "gpu": gpu,
            "start": T0.timestamp(),
            "end": (T0 + timedelta(hours=2)).timestamp(),
            "workload": {"kind": "slurm-job", "uid": "4242", "name": "llama-pretrain", "user": "ada"},
            "share": 1.0,
            "basis": "exclusive",
        }
        for gpu in (A, B)
    ]
    telemetry_batch_ingest(
        team_id=team.pk,
        payload={
            "batch_id": "trainer-node:1",
            "host": {"hostname": "trainer-node", "agent_version": "0.1.0", "simulated": True},
            "accelerators": [
                {
                    "uuid": uuid,
                    "index": i,
                    "name": factories.H100["driver_name"],
                    "memory_bytes": 85_520_809_984,
                }
                for i, uuid in enumerate((A, B, C))
            ],
            "samples": [{"time": T0.timestamp(), "gpu": A, "power_w": 500.0}],
            "attribution": job_holds,
        },
    )
    gpus = {a.uuid: a for a in Accelerator.objects.all()}
    minutes_load(gpus=list(gpus.values()), start=T0, minutes=120, util=95.0, power_w=500.0)
    accelerator_price_create(
        accelerator_type=h100,
        price_per_hour="98.32",
        count=8,
        provider="on-prem",
        region="",
        instance_type="",
    )
    _, token = token_create(team=team, kind="ingest")
    workload = Workload.objects.get(team=team, kind="slurm-job", uid="4242")
    return {"token": token, "workload": workload}


def _body(points: list[dict[str, Any]], batch: str = "b1", **extra: Any) -> dict[str, Any]:
    return {"batch_id": batch, "job": JOB, "gpus": [A, B], "planned_steps": 10_000, "points": points, **extra}


def test_it_stores_progress_once_and_answers_a_retry_with_the_first_answer(client, job):
    body = _body([_point(i) for i in range(13)])
    first = post_json(client, URL, body, job["token"])
    assert first.status_code == 200, first.content
    assert first.json() == {
        "batch_id": "b1",
        "accepted": 13,
        "duplicate": False,
        "workload_id": job["workload"].pk,
    }
    again = post_json(client, URL, body, job["token"])
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert TrainingProgress.objects.filter(workload=job["workload"]).count() == 13
    # The same batch id with other points is not a retry: 409, nothing stored.
    other = post_json(client, URL, _body([_point(13)]), job["token"])
    assert other.status_code == 409 and other.json()["error"]["path"] == "batch_id"
    assert TrainingProgress.objects.count() == 13


def _stored() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM attribution_trainingprogress")
        progress = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM api_ingestbatch WHERE kind = 'training'")
        return progress, cursor.fetchone()[0]


@pytest.mark.parametrize(
    ("change", "status", "path", "code"),
    [
        # steps going backwards inside a batch
        (lambda b: b["points"][2].update(step=50), 422, "points[2].step", "steps_backwards"),
        # the same step twice: no progress, no step time
        (lambda b: b["points"][1].update(step=0), 422, "points[1].step", "steps_backwards"),
        # a zero-length interval
        (
            lambda b: b["points"][1].update(at=b["points"][0]["at"]),
            422,
            "points[1].at",
            "zero_length_interval",
        ),
        # a GPU of the host the job does not hold, and one that is nobody's
        (lambda b: b.update(gpus=[A, C]), 422, "gpus[1]", "gpu_not_held"),
        (
            lambda b: b.update(gpus=["GPU-ffffffff-0000-4000-8000-000000000000"]),
            422,
            "gpus[0]",
            "gpu_not_held",
        ),
        # a job nobody reported
        (lambda b: b.update(job={"kind": "slurm-job", "uid": "9999"}), 404, "job.uid", "unknown_job"),
        (lambda b: b.update(job={"kind": "vm", "uid": "4242"}), 422, "job.kind", "enum"),
        (lambda b: b["points"][0].update(step=-1), 422, "points[0].step", "greater_than_equal"),
        (lambda b: b["points"][0].update(at="2026-11-10T08:00:00"), 422, "points[0].at", "invalid_time"),
    ],
)
def test_it_refuses_bad_progress_naming_the_field_and_stores_nothing(client, job, change, status, path, code):
    body = _body([_point(i) for i in range(4)])
    change(body)
    response = post_json(client, URL, body, job["token"])
    assert response.status_code == status, response.content
    answer = response.json()["error"]
    assert (answer["path"], answer["code"]) == (path, code)
    assert _stored() == (0, 0)


def test_it_refuses_points_that_do_not_follow_the_stored_ones(client, job):
    assert post_json(client, URL, _body([_point(i) for i in range(4)]), job["token"]).status_code == 200
    # A later batch starting before the newest stored step: backwards, nothing of it stored.
    late = _body([_point(4), _point(5)], batch="b2")
    late["points"][0]["step"] = STEPS[2]
    response = post_json(client, URL, late, job["token"])
    assert response.status_code == 422 and response.json()["error"]["path"] == "points[0].step"
    assert _stored() == (4, 1)


def test_the_job_page_shows_step_time_cost_and_energy_per_step_worked_by_hand(
    client, job, login_client, lead
):
    assert post_json(client, URL, _body([_point(i) for i in range(25)]), job["token"]).status_code == 200
    alert = training_regression_check(workload=job["workload"])
    page = login_client(lead).get(
        reverse("workloads:detail", args=[job["workload"].pk]), {"start": "2026-11-10"}
    )
    assert page.status_code == 200
    summary = page.context["training"]
    first, last = summary.intervals[0], summary.intervals[-1]
    # By hand, the first interval: 300 s, 100 steps -> 3 s per step; 2 GPUs × 300 s = 600 GPU-s
    # at 12.29 / 3,600 USD per GPU-s = 2.048333… USD -> 0.02048333 per step; 2 × 500 W × 300 s
    # = 300,000 J -> 3,000 J per step.
    assert first.step_time_s == pytest.approx(3.0)
    assert first.gpu_s == pytest.approx(600.0)
    assert first.cost == pytest.approx(600 * 12.29 / 3600)
    assert first.cost_per_step == pytest.approx(0.0204833333)
    assert first.energy_per_step_j == pytest.approx(3000.0)
    # The last: 80 steps in the same 300 s -> 3.75 s, 0.0256041667 USD and 3,750 J per step.
    assert last.step_time_s == pytest.approx(3.75)
    assert last.cost_per_step == pytest.approx(600 * 12.29 / 3600 / 80)
    assert last.energy_per_step_j == pytest.approx(3750.0)
    # Totals add up: 24 intervals of 2.048333 USD = 49.16 USD (2 GPUs × 2 h × 12.29) for 2,160
    # steps; energy 24 × 300,000 J = 7.2 MJ.
    assert summary.cost == pytest.approx(2 * 2 * 12.29)
    # The host's site has no electricity price: the cost is capacity alone (as the daily cost
    # pass's, whose total is capacity + energy cost where priced), and the page says so.
    assert summary.capacity_cost == pytest.approx(49.16) and summary.energy_cost is None
    assert first.capacity_cost == first.cost and first.energy_cost is None
    assert summary.reported_steps == 2160 and summary.energy_j == pytest.approx(7_200_000.0)
    # Projection: 49.16 so far + (10,000 − 2,160) steps × the median of the last 10 intervals'
    # cost per step (all at 80 steps: 0.0256041667) = 49.16 + 200.7367 = 249.8967 USD.
    projection = summary.projection
    assert projection.cost_per_step == pytest.approx(600 * 12.29 / 3600 / 80)
    assert projection.projected_cost == pytest.approx(49.16 + 7840 * 600 * 12.29 / 3600 / 80)
    html = page.content.decode()
    assert 'data-training="energy-cost-per-step">not priced<' in html
    assert 'id="training-chart"' in html and "249.8967" not in html  # money as money: 249.90
    assert "249.90 USD" in html or "249.9 USD" in html
    # The slowdown is an alert like any other, on the alerts page too.
    assert alert is not None and alert.kind == AlertKind.TRAINING
    assert alert.before_mean == pytest.approx(3.0) and alert.after_mean == pytest.approx(3.75)
    assert alert.pct_change == pytest.approx(25.0)
    assert alert.title == "Step time of slurm-job llama-pretrain up 25% since 2026-11-10 09:00 UTC"
    assert f'data-alert="{alert.pk}"' in html
    # Running the check again opens no second alert.
    assert training_regression_check(workload=job["workload"]) == alert
    assert Alert.objects.filter(kind=AlertKind.TRAINING).count() == 1
    alert_page = login_client(lead).get(reverse("alerts:detail", args=[alert.pk]))
    assert alert_page.status_code == 200
    assert f'href="/workloads/{job["workload"].pk}/"' in alert_page.content.decode()


def test_a_steady_job_raises_no_alert(client, job):
    points = [{"at": (T0 + timedelta(minutes=5 * i)).isoformat(), "step": 100 * i} for i in range(25)]
    # A lone slow interval (a checkpoint: 80 steps in the 13th) is not a regression.
    for k in range(13, 25):
        points[k]["step"] -= 20
    assert post_json(client, URL, _body(points), job["token"]).status_code == 200
    assert training_regression_check(workload=job["workload"]) is None
