"""Fleet Celery tasks and the beat schedule: env overrides, partitions ahead, rollup refresh."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from celery.schedules import crontab
from django.db import connections

from accelboard.celery import build_beat_schedule
from accelboard.core.models import JobRun
from accelboard.env import ConfigError
from accelboard.fleet import partition_services, rollup_services, tasks
from accelboard.fleet.models import TELEMETRY_COLUMNS, TelemetryDirtyRange, TelemetryRollup
from tests import factories

pytestmark = pytest.mark.django_db


def test_it_schedules_every_entry_with_an_expiry_below_its_interval() -> None:
    schedule = build_beat_schedule({})
    assert schedule["telemetry-partitions"]["task"] == "accelboard.fleet.tasks.telemetry_partitions_maintain"
    assert schedule["telemetry-rollups"]["task"] == "accelboard.fleet.tasks.telemetry_rollups_refresh"
    assert schedule["telemetry-rollups"]["schedule"] == crontab(minute="*")
    assert schedule["telemetry-rollups"]["options"]["expires"] < 60


def test_it_honours_env_overrides_of_the_beat_schedule() -> None:
    schedule = build_beat_schedule(
        {"ACCELBOARD_BEAT_TELEMETRY_ROLLUPS": "off", "ACCELBOARD_BEAT_TELEMETRY_PARTITIONS": "*/15 2 * * 1"}
    )
    assert "telemetry-rollups" not in schedule
    assert schedule["telemetry-partitions"]["schedule"] == crontab(minute="*/15", hour="2", day_of_week="1")


@pytest.mark.parametrize("value", ["every minute", "61 * * * *", "* * * *", "*/0 * * * *"])
def test_it_rejects_a_malformed_crontab_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="ACCELBOARD_BEAT_TELEMETRY_ROLLUPS"):
        build_beat_schedule({"ACCELBOARD_BEAT_TELEMETRY_ROLLUPS": value})


def test_it_creates_partitions_ahead_and_drops_expired_ones(settings: Any) -> None:
    settings.TELEMETRY_PARTITIONS_AHEAD_DAYS = 2
    settings.TELEMETRY_RETENTION_DAYS = 5
    now = datetime(2034, 5, 10, 8, 0, tzinfo=UTC)
    partition_services.telemetry_partitions_ensure(start=now - timedelta(days=8), end=now - timedelta(days=7))
    with mock.patch("accelboard.fleet.tasks.datetime", wraps=datetime) as clock:
        clock.now.return_value = now
        result = tasks.telemetry_partitions_maintain.apply().get()
    days = partition_services.telemetry_partition_days()
    assert [d for d in days if d >= date(2034, 5, 1)] == [date(2034, 5, d) for d in range(9, 13)]
    assert result == {"created": 4, "dropped": 2}
    job = JobRun.objects.get(name="telemetry_partitions_maintain")
    assert job.status == "succeeded" and job.detail["dropped"] == ["2034-05-02", "2034-05-03"]


def _load(team: Any, start: datetime, seconds: int) -> Any:
    host, (gpu,) = factories.host_create(team=team, gpus=1)
    rows = [
        tuple(
            {
                "time": start + timedelta(seconds=s),
                "host_id": host.pk,
                "accelerator_id": gpu.pk,
                "power_w": 100.0,
                "energy_mj": 1_000_000 + 100_000 * s,
            }.get(column)
            for column in TELEMETRY_COLUMNS
        )
        for s in range(seconds)
    ]
    partition_services.telemetry_partitions_ensure(start=start, end=start + timedelta(seconds=seconds))
    partition_services.telemetry_copy(rows=rows)
    return gpu


def test_it_rolls_up_the_range_ingest_enqueues(team: Any) -> None:
    start = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    gpu = _load(team, start, 180)
    result = tasks.telemetry_rollups_refresh_range.apply(
        args=[start.isoformat(), (start + timedelta(seconds=179)).isoformat()]
    ).get()
    assert result["ranges"] == 1
    minutes = TelemetryRollup.objects.filter(width_s=60, accelerator=gpu).order_by("bucket")
    assert [(r.samples, r.energy_j) for r in minutes] == [(60, 5900.0), (60, 6000.0), (60, 6000.0)]
    assert TelemetryRollup.objects.get(width_s=3600, accelerator=gpu).energy_j == 17900.0
    assert not TelemetryDirtyRange.objects.exists()
    assert JobRun.objects.get(name="telemetry_rollups_refresh_range").rows == result["rows"]


def test_it_refuses_a_range_that_is_not_an_aware_iso_timestamp(team: Any) -> None:
    with pytest.raises(ValueError, match="start_iso"):
        tasks.telemetry_rollups_refresh_range.apply(args=["yesterday", "2026-11-20T10:00:00+00:00"]).get()
    with pytest.raises(ValueError, match="end_iso.*timezone"):
        tasks.telemetry_rollups_refresh_range.apply(
            args=["2026-11-20T10:00:00+00:00", "2026-11-20T10:05:00"]
        ).get()
    assert not TelemetryDirtyRange.objects.exists()


def test_it_drains_marks_and_the_recent_window_on_the_periodic_pass(team: Any) -> None:
    now = datetime(2026, 11, 20, 12, 0, 30, tzinfo=UTC)
    recent = _load(team, now - timedelta(minutes=3), 120)
    old_start = datetime(2026, 11, 19, 3, 0, tzinfo=UTC)
    old = _load(team, old_start, 60)
    rollup_services.telemetry_rollups_mark_dirty(start=old_start, end=old_start + timedelta(seconds=59))
    with mock.patch("accelboard.fleet.tasks.datetime", wraps=datetime) as clock:
        clock.now.return_value = now
        result = tasks.telemetry_rollups_refresh.apply(kwargs={"minutes": 10}).get()
    assert result["ranges"] == 2
    assert TelemetryRollup.objects.filter(width_s=60, accelerator=recent).count() == 3  # 11:57:30-11:59:29
    assert TelemetryRollup.objects.get(width_s=60, accelerator=old).samples == 60
    assert not TelemetryDirtyRange.objects.exists()


def test_the_periodic_pass_leaves_the_marks_to_a_running_drain(team: Any) -> None:
    start = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    gpu = _load(team, start, 60)
    rollup_services.telemetry_rollups_mark_dirty(start=start, end=start + timedelta(seconds=59))
    holder = connections.create_connection("default")  # a drain in another process holds the lock
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [rollup_services._ADVISORY_ROLLUPS])
        assert tasks.telemetry_rollups_refresh.apply().get() == {"rows": 0, "ranges": 0, "skipped": 1}
        assert JobRun.objects.get(name="telemetry_rollups_refresh").detail == {
            "skipped": "a drain is running"
        }
        assert TelemetryDirtyRange.objects.count() == 1
    finally:
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [rollup_services._ADVISORY_ROLLUPS])
        holder.close()
    # The next pass (or drain) takes it.
    assert tasks.telemetry_rollups_refresh.apply().get()["ranges"] == 1
    assert TelemetryRollup.objects.get(width_s=60, accelerator=gpu).samples == 60
    assert not TelemetryDirtyRange.objects.exists()
