"""The pipeline watching itself: ``accelboard status`` and ``/healthz?detail=1``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from accelboard.celery import app
from accelboard.fleet.models import RollupHourBacklog, TelemetryDirtyRange

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def empty_queues() -> None:
    # Messages earlier tests published with no worker to run them would count as a backlog.
    app.control.purge()


def _stale_rollups(minutes: int) -> None:
    mark = TelemetryDirtyRange.objects.create(start=timezone.now(), end=timezone.now())
    TelemetryDirtyRange.objects.filter(pk=mark.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes)
    )


def test_status_exits_0_and_lists_each_check_when_all_keep_up(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("status")
    out = capsys.readouterr().out
    checks = (
        "queue.scheduled",
        "queue.bulk",
        "beat.telemetry_rollups_refresh",
        "rollups.lag",
        "rollups.hour_lag",
    )
    for name in checks:
        assert name in out
    assert out.strip().endswith("pipeline: ok")


def test_status_exits_1_naming_the_rollup_lag_when_the_rollups_fall_behind(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _stale_rollups(minutes=10)
    with pytest.raises(CommandError) as raised:
        call_command("status", "--json")
    assert raised.value.returncode == 1
    out = capsys.readouterr().out
    assert '"status": "lagging"' in out
    assert '"rollups.lag"' in out


def test_healthz_says_lagging_to_anyone_and_shows_the_figures_to_staff_only(
    staff: Any, login_client: Any
) -> None:
    _stale_rollups(minutes=10)
    plain = Client().get("/healthz")
    assert plain.status_code == 200 and plain.json() == {"status": "ok"}

    anonymous = Client().get("/healthz?detail=1").json()
    assert anonymous["pipeline"] == "lagging" and "checks" not in anonymous

    detail = login_client(staff).get("/healthz?detail=1").json()
    lag = next(check for check in detail["checks"] if check["name"] == "rollups.lag")
    assert lag["ok"] is False and lag["value"] >= 600 and lag["detail"]["dirty_ranges"] == 1


def test_status_names_the_hour_rollups_when_their_backlog_waits_too_long(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Hours redone a minute ago with ranges waiting: the drains' normal state.
    now = timezone.now()
    waiting = [[(now - timedelta(hours=1)).isoformat(), now.isoformat()]]
    RollupHourBacklog.objects.create(pk=1, ranges=waiting, refreshed_at=now - timedelta(seconds=60))
    call_command("status")
    assert capsys.readouterr().out.strip().endswith("pipeline: ok")

    # Not redone for ten minutes while ranges wait: the pages' hour rows are stale.
    RollupHourBacklog.objects.filter(pk=1).update(refreshed_at=now - timedelta(minutes=10))
    with pytest.raises(CommandError) as raised:
        call_command("status", "--json")
    assert raised.value.returncode == 1
    out = capsys.readouterr().out
    assert '"status": "lagging"' in out and '"rollups.hour_lag"' in out

    # Nothing waiting: no lag, however long ago the hours were redone.
    RollupHourBacklog.objects.filter(pk=1).update(ranges=[])
    call_command("status")
    assert capsys.readouterr().out.strip().endswith("pipeline: ok")
