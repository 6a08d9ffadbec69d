"""The demo's injected benchmark regressions all raise alerts; its noise and its outlier raise none."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from accelboard.alerts.models import Alert, AlertMetric
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.core.models import JobRun
from accelboard.demo import loader

from .invariants import assert_alert_invariants

SMALL_FLAGS = [
    "--hosts=6",
    "--days-runs=20",
    "--days-telemetry=1",
    "--telemetry-interval=900",
    "--serving-interval=900",
    "--now=2026-11-29T22:00:00Z",
]


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def manifest(transactional_db: None, tmp_path: Path) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE fleet_telemetrysample")  # unmanaged: the flush does not empty it
    path = tmp_path / "manifest.json"
    call_command("demo_fleet", *SMALL_FLAGS, f"--manifest={path}", stdout=StringIO())
    return json.loads(path.read_text())


def test_the_demo_raises_exactly_its_injected_regressions(manifest: dict[str, Any]) -> None:
    events = manifest["benchmark_events"]
    regressions = [e for e in events if e.get("expect_alert")]
    expected_series = {item["series_id"] for e in regressions for item in e["series"]}
    assert len(regressions) == 5 and len(expected_series) == 10

    bench_alerts = Alert.objects.filter(kind__in=["regression", "improvement"]).select_related("first_run")
    members = AlertMetric.objects.filter(alert__in=bench_alerts).select_related("alert__first_run", "series")
    by_series = {m.series_id: m for m in members}
    # Every injected regression, every series it moves, in one alert per event (one change is one
    # alert), at (or one run after) its start.
    for event in regressions:
        start = BenchmarkRun.objects.get(uuid=event["first_run_uuid"]).started_at
        alert_ids = set()
        for item in event["series"]:
            member = by_series.get(item["series_id"])
            assert member is not None, f"{event['id']}: no alert on {item['metric']}"
            alert = member.alert
            alert_ids.add(alert.pk)
            assert alert.kind == "regression", (event["id"], item["metric"], alert.title)
            assert 0 <= (alert.first_run.started_at - start).days <= 1, (event["id"], item["metric"])
            assert member.pct_change == pytest.approx(item["pct"], abs=max(3.0, abs(item["pct"]) * 0.25))
            # A regression that the plan reverts is resolved by the detector once two results are
            # back (the last run day is 19); the others stay open.
            reverted = event["end_day"] is not None and event["end_day"] <= 18
            assert alert.state == ("resolved" if reverted else "open"), (event["id"], event["end_day"])
        assert len(alert_ids) == 1, f"{event['id']}: one change, {len(alert_ids)} alerts"
    # Nothing else: no alert on the noise-only series, the outlier or a second alert per series.
    # The slow accuracy drift is the drift check's event; on a long history it also crosses the
    # minimum effect as a level shift, which is a true regression, not noise.
    drifting = {i["series_id"] for e in events if e["kind"] == "drift" for i in e["series"]}
    extra = [
        (
            m.alert.title,
            m.pct_change,
            m.alert.detail.get("reason"),
            m.alert.first_run.started_at.date(),
            m.alert.state,
        )
        for m in members
        if m.series_id not in expected_series | drifting
    ]
    assert extra == []
    assert members.exclude(series_id__in=drifting).count() == len(expected_series)
    assert bench_alerts.exclude(metrics__series_id__in=drifting).count() == len(regressions)
    outlier = next(e for e in events if e["kind"] == "outlier")
    # (Drift alerts on accuracy series are the drift check's, judged by its own tests.)
    assert not members.filter(series_id__in=[i["series_id"] for i in outlier["series"]]).exists()
    assert not members.filter(series_id__in=manifest["series_without_events"]).exists()
    # Severity follows effect and meaning: the L4 driver update (power and energy +15%, both
    # secondary) is a Warning beside the Critical user-facing drops.
    l4 = next(e for e in regressions if e["id"] == "resnet-l4-energy-step")
    assert by_series[l4["series"][0]["series_id"]].alert.severity == "warning"
    assert_alert_invariants()
    seconds = JobRun.objects.filter(name=loader.JOB_NAME).latest("started_at").detail["seconds"]
    print(
        f"demo: alerts step {seconds.get('alerts')} s; {len(regressions)} injected regressions on {len(expected_series)} series -> "
        f"{bench_alerts.exclude(metrics__series_id__in=drifting).count()} alerts "
        f"(+{bench_alerts.filter(metrics__series_id__in=drifting).distinct().count()} on the drifting accuracy series); "
        f"{len(manifest['series_without_events'])} noise-only series -> 0"
    )
