"""The drain's partials of an agent's batch: each partial's first readings come from its first
sample, and that sample adds no energy of its own (issue 37: the drain's statement)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from accelboard.api.services import telemetry_batch_ingest
from accelboard.fleet import rollup_services

pytestmark = pytest.mark.django_db


def _partials() -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT bucket, samples, first_energy_mj, last_energy_mj, first_power_w, energy_j, power_samples "
            "FROM fleet_telemetrypartial ORDER BY bucket"
        )
        return cursor.fetchall()


@pytest.mark.parametrize("first_read", [True, False])
def test_the_drain_takes_a_partials_first_readings_from_its_first_sample(team: Any, first_read: bool) -> None:
    """Two minutes of one GPU in one batch, samples shuffled: each minute's partial has the
    counter and power of its first sample (NULL where that sample has none), the last counter
    of its last sample, and energy from the deltas after its first sample only."""
    minute = (datetime.now(UTC) - timedelta(hours=1)).replace(second=0, microsecond=0)
    start = minute.timestamp() + 50
    samples = []
    for i in range(20):  # 10 samples in each of two minutes, 1 s apart
        first = i in (0, 10)
        blank = first and not first_read
        samples.append(
            {
                "time": start + i,
                "gpu": "GPU-x",
                "power_w": None if blank else 100.0 + i,
                "energy_mj": None if blank else 1_000_000 + 100_000 * i,
            }
        )
    samples.reverse()
    telemetry_batch_ingest(
        team=team,
        payload={
            "batch_id": "one",
            "host": {"hostname": "node-x"},
            "accelerators": [{"uuid": "GPU-x", "index": 0}],
            "samples": samples,
        },
    )
    rollup_services.telemetry_rollups_drain()
    (bucket_a, n_a, first_a, last_a, power_a, energy_a, powers_a), second = _partials()
    bucket_b, n_b, first_b, last_b, power_b, energy_b, powers_b = second
    assert (bucket_a, bucket_b) == (minute, minute + timedelta(minutes=1))
    assert (n_a, n_b) == (10, 10)
    if first_read:
        assert (first_a, power_a, first_b, power_b) == (1_000_000, 100.0, 2_000_000, 110.0)
        assert (powers_a, powers_b) == (10, 10)
    else:
        assert (first_a, power_a, first_b, power_b) == (None, None, None, None)
        assert (powers_a, powers_b) == (9, 9)
    assert (last_a, last_b) == (1_900_000, 2_900_000)
    # Nine deltas of 100 J inside each partial; with a blank first sample, its second sample has
    # no counter before it in the partial either, so eight. Nothing for the first sample itself.
    assert energy_a == pytest.approx(900.0 if first_read else 800.0)
    assert energy_b == pytest.approx(900.0 if first_read else 800.0)


def _hot_updates() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'fleet_telemetryrollup'"
        )
        return cursor.fetchone()


def test_a_drain_rewrites_the_current_minutes_rollups_in_place(team: Any) -> None:
    """200 GPUs fill a dozen pages of minute and hour rollups; a second drain in the same minute
    rewrites every one of those rows, and every rewrite is a HOT update (the new version on the
    old one's page, no new index entries): the table keeps room on each page for it (migration
    0017). With 70 % of each page filled, about half of them moved to another page."""
    minute = (datetime.now(UTC) - timedelta(hours=1)).replace(second=0, microsecond=0)
    hosts = [f"node-{h}" for h in range(25)]

    def send(first_second: int) -> None:
        for host in hosts:
            gpus = [f"GPU-{host}-{g}" for g in range(8)]
            telemetry_batch_ingest(
                team=team,
                payload={
                    "batch_id": f"{host}-{first_second}",
                    "host": {"hostname": host},
                    "accelerators": [{"uuid": gpu, "index": g} for g, gpu in enumerate(gpus)],
                    "samples": [
                        {
                            "time": minute.timestamp() + s,
                            "gpu": gpu,
                            "power_w": 300.0 + s,
                            "energy_mj": 10**9 + s,
                        }
                        for s in range(first_second, first_second + 10)
                        for gpu in gpus
                    ],
                },
            )

    send(0)
    rollup_services.telemetry_rollups_drain()
    before = _hot_updates()
    send(10)
    rollup_services.telemetry_rollups_drain()
    updates, hot = (after - was for after, was in zip(_hot_updates(), before, strict=True))
    assert updates == 2 * 200  # each GPU's minute and hour rows
    assert hot == updates
