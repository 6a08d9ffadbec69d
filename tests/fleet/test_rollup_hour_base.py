"""The hour pass from its bases (``RollupHourBase``) equals the hour rollups from raw rows.

Each pass sums a GPU's hour from the base (the minutes before ``upto``) and the minutes from
``upto`` on, then moves ``upto`` on; a refresh that rewrites a minute the base sums drops the
hour's base. Batches arrive late, out of order, twice and under a new id, drains run in between
and the passes cross an hour boundary; the hour and host rollups left are compared, column by
column, with a refresh of the same range from raw rows alone (issue 37).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from accelboard.api.services import telemetry_batch_ingest
from accelboard.fleet import rollup_services
from accelboard.fleet.models import RollupHourBacklog, RollupHourBase

from .test_rollup_partials import _assert_equal, _batches, _from_raw_rows, _rollups

pytestmark = pytest.mark.django_db


def _drain_minutes() -> None:
    """A drain that leaves the hours to the passes the test runs itself."""
    RollupHourBacklog.objects.update_or_create(pk=1, defaults={"refreshed_at": timezone.now()})
    rollup_services.telemetry_rollups_drain(hours_every_s=10**9)


def _hours_pass(hour: datetime, now: float) -> None:
    """The hour pass at ``now`` (epoch seconds) over the hour before ``hour`` and ``hour``."""
    rollup_services.telemetry_rollups_hours_refresh(
        ranges=[(hour - timedelta(hours=1), hour + timedelta(hours=1))], now=datetime.fromtimestamp(now, UTC)
    )


def _uptos() -> set[datetime]:
    return set(RollupHourBase.objects.values_list("upto", flat=True))


@pytest.mark.parametrize(("seed", "step"), [(1, 1), (2, 1), (3, 10)])
def test_hours_from_their_bases_equal_hours_from_raw_rows(
    team: Any, seed: int, step: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``step``: the least move of ``upto``, in minutes (10 as shipped; 1 moves it every pass)."""
    monkeypatch.setattr(rollup_services, "HOUR_BASE_STEP", timedelta(minutes=step))
    rng = random.Random(seed)
    # 40 minutes across an hour boundary, both hours recent enough to have bases.
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    start = hour.timestamp() - 25 * 60
    batches = _batches(rng, start, seconds=40 * 60)
    batches.sort(key=lambda b: max(s["time"] for s in b["samples"]))
    order = list(range(len(batches)))
    late = [order.pop(rng.randrange(len(order) // 2)) for _ in range(5)]  # from the first half
    for position, index in enumerate(late):  # each arrives after the passes moved past it
        order.insert(rng.randrange(len(order) // 2, len(order)) + position, index)
    duplicate = batches[order[len(order) // 2]]
    resent = {**batches[order[len(order) // 3]], "batch_id": "resent-under-a-new-id"}
    newest, uptos, dropped = start, set(), 0
    for step, index in enumerate(order):
        telemetry_batch_ingest(team=team, payload=batches[index])
        newest = max(newest, *(s["time"] for s in batches[index]["samples"]))
        if step == len(order) // 2:
            assert telemetry_batch_ingest(team=team, payload=duplicate)["duplicate"]
            telemetry_batch_ingest(team=team, payload=resent)
        if step % 4 == 3:
            before = RollupHourBase.objects.count()
            _drain_minutes()
            dropped += RollupHourBase.objects.count() < before
            _hours_pass(hour, newest + 5)
            uptos |= _uptos()
    _drain_minutes()
    _hours_pass(hour, newest + 5)
    # The bases moved on minute by minute on both sides of the boundary, and late batches
    # dropped some of them.
    moves = 5 if step == 1 else 0
    assert len({u for u in uptos if u <= hour}) > moves and len({u for u in uptos if u > hour}) > moves
    assert dropped > 0
    from_bases = _rollups()
    from_raw = _from_raw_rows(start - 3600, start + 3 * 3600)
    assert len(from_raw["hour"]) == len(from_bases["hour"]) > 0
    _assert_equal(
        {"hour": from_bases["hour"], "host": from_bases["host"]}, {k: from_raw[k] for k in ("hour", "host")}
    )


def _send(team: Any, hostname: str, first: float, seconds: int, batch_id: str) -> None:
    telemetry_batch_ingest(
        team=team,
        payload={
            "batch_id": batch_id,
            "host": {"hostname": hostname},
            "accelerators": [{"uuid": f"GPU-{hostname}", "index": 0}],
            "samples": [
                {
                    "time": first + s,
                    "gpu": f"GPU-{hostname}",
                    "power_w": 100.0 + s % 7,
                    "energy_mj": 10**9 + 10**5 * s,
                }
                for s in range(0, seconds, 2)
            ],
        },
    )


def test_a_late_batch_into_a_summed_minute_drops_the_hours_base(team: Any) -> None:
    """A batch of minute 5 arriving when the hour's base sums minutes 0-26: the drain drops the
    base, the next pass reads the whole hour again (and starts a base anew), and the hour row
    counts the late samples; a batch after ``upto`` leaves the base alone."""
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    t0 = hour.timestamp()
    _send(team, "node-a", t0, 600, "a-1")  # minutes 0-9 (minute 5 of node-b empty)
    _send(team, "node-b", t0, 300, "b-1")  # minutes 0-4
    _send(team, "node-b", t0 + 360, 1440, "b-2")  # minutes 6-29
    _drain_minutes()
    _hours_pass(hour, t0 + 30 * 60)
    assert _uptos() == {hour + timedelta(minutes=27)}
    _send(team, "node-a", t0 + 1800, 60, "a-2")  # minute 30: after upto, the base stays
    _drain_minutes()
    assert _uptos() == {hour + timedelta(minutes=27)}
    _send(team, "node-b", t0 + 300, 60, "b-late")  # minute 5: summed in the base
    _drain_minutes()
    assert _uptos() == set()
    _hours_pass(hour, t0 + 31 * 60)
    assert _uptos() == {hour + timedelta(minutes=28)}
    with connection.cursor() as cursor:
        cursor.execute("SELECT sum(samples) FROM fleet_telemetryrollup WHERE width_s = 3600")
        assert cursor.fetchone()[0] == 300 + 150 + 720 + 30 + 30
    from_bases = _rollups()
    from_raw = _from_raw_rows(t0 - 3600, t0 + 2 * 3600)
    _assert_equal(
        {"hour": from_bases["hour"], "host": from_bases["host"]}, {k: from_raw[k] for k in ("hour", "host")}
    )
