"""Raw telemetry storage: daily partitions, retention, rollups checked against pandas, coalescing.

The reference rollups are recomputed here with pandas from the very rows copied in, following
the energy rules of ``rollup_services.telemetry_rollups_refresh``: counter deltas attributed to the
later sample's bucket, a counter that went down contributes nothing, power × dt (gap ≤ 30 s)
where a GPU has no counter.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import psycopg
import pytest
from django.db import IntegrityError, OperationalError, connection, connections, transaction

from accelboard.core.access import EVERY_TEAM
from accelboard.fleet import partition_services, rollup_services, selectors
from accelboard.fleet.models import (
    TELEMETRY_COLUMNS,
    HostRollup,
    TelemetryDirtyRange,
    TelemetryRollup,
    TelemetrySample,
)
from accelboard.fleet.partials import PARTIAL_TABLE
from tests import factories

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 20, 9, 58, 30, tzinfo=UTC)
T1 = datetime(2026, 11, 20, 11, 3, 0, tzinfo=UTC)
RESET_AT = datetime(2026, 11, 20, 10, 20, 0, tzinfo=UTC)
GAP = (datetime(2026, 11, 20, 10, 30, 0, tzinfo=UTC), datetime(2026, 11, 20, 10, 30, 45, tzinfo=UTC))


def _row(**values: Any) -> tuple[object, ...]:
    return tuple(values.get(column) for column in TELEMETRY_COLUMNS)


def _copy(rows: list[tuple[object, ...]]) -> None:
    times = [row[0] for row in rows]
    partition_services.telemetry_partitions_ensure(start=min(times), end=max(times))  # type: ignore[type-var]
    partition_services.telemetry_copy(rows=rows)


@pytest.fixture
def gpus(team: Any) -> dict[str, Any]:
    """Host one (H100 type): GPU ``counter`` (energy counter, reset mid-way) and ``nocounter``
    (power only, one 45 s gap); host two (no known type): GPU ``holes`` (NULL power/util at times)."""
    factories.accelerator_type_from(factories.H100)
    host_one, (counter, nocounter) = factories.host_create(team=team, gpus=2)
    host_two, (holes,) = factories.host_create(team=team, gpus=1, gpu_name="Mystery Accelerator 9000")
    return {"counter": counter, "nocounter": nocounter, "holes": holes, "hosts": [host_one, host_two]}


def _samples(gpus: dict[str, Any], seed: int = 3) -> list[tuple[object, ...]]:
    """Irregular ~1 Hz samples crossing an hour boundary; values exact in float32."""
    rng = np.random.default_rng(seed)
    rows = []
    for name in ("counter", "nocounter", "holes"):
        gpu = gpus[name]
        moment, energy = T0, 5_000_000_000
        while moment < T1:
            moment += timedelta(milliseconds=int(rng.choice([500, 1000, 1000, 1500])))
            if name == "nocounter" and GAP[0] <= moment < GAP[1]:
                continue
            power = float(rng.integers(200, 1400)) / 2
            util = float(rng.integers(0, 101))
            energy += int(power * 1000)
            if name == "counter" and moment >= RESET_AT and energy > 4_000_000_000:
                energy = 12_345  # the driver reloaded: the counter starts again near zero
            missing = name == "holes" and rng.random() < 0.15
            rows.append(
                _row(
                    time=moment,
                    host_id=gpu.host_id,
                    accelerator_id=gpu.pk,
                    power_w=None if missing else power,
                    energy_mj=None if name == "nocounter" else energy,
                    gpu_util=None if missing and rng.random() < 0.5 else util,
                    mem_util=util / 4,
                    mem_used_bytes=int(rng.integers(1, 80)) * 2**30,
                    mem_total_bytes=80 * 2**30,
                    sm_clock_mhz=float(rng.integers(1000, 1980)),
                    mem_clock_mhz=2619.0,
                    temperature_c=float(rng.integers(40, 80)),
                    throttle_reasons=int(rng.choice([0, 0, 0, 0x4, 0x1])),
                    ecc_errors=0,
                    xid_errors=int(rng.choice([0, 0, 0, 13])),
                )
            )
    return rows


def _reference(rows: list[tuple[object, ...]], width: int) -> pd.DataFrame:
    """Rollups of ``width`` seconds per GPU, computed by pandas from the raw rows."""
    frame = pd.DataFrame(rows, columns=list(TELEMETRY_COLUMNS))
    frame["time"] = pd.to_datetime(frame["time"], utc=True)
    frame = frame.sort_values(["accelerator_id", "time"]).reset_index(drop=True)
    for column in ("power_w", "gpu_util", "mem_util", "sm_clock_mhz", "mem_clock_mhz", "temperature_c"):
        frame[column] = frame[column].astype("float64").astype("float32").astype("float64")
    energy = frame["energy_mj"].astype("float64")
    per_gpu = frame.groupby("accelerator_id")
    delta = energy - per_gpu["energy_mj"].shift().astype("float64")
    dt = (frame["time"] - per_gpu["time"].shift()).dt.total_seconds()
    contribution = pd.Series(np.nan, index=frame.index)
    counter = (delta >= 0) & (dt <= rollup_services.MAX_COUNTER_GAP_S)
    contribution[counter] = delta[counter] / 1000.0
    integrate = energy.isna() & frame["power_w"].notna() & (dt <= rollup_services.MAX_INTEGRATION_GAP_S)
    contribution[integrate] = frame["power_w"][integrate] * dt[integrate]
    assert not (contribution < 0).any()
    frame["energy_j"] = contribution
    frame["throttled"] = (frame["throttle_reasons"] & rollup_services.THROTTLE_MASK) != 0
    frame["bucket"] = frame["time"].dt.floor(f"{width}s")
    grouped = frame.groupby(["accelerator_id", "bucket"])
    return pd.DataFrame(
        {
            "host_id": grouped["host_id"].max(),
            "samples": grouped.size(),
            "power_samples": grouped["power_w"].count(),
            "power_avg_w": grouped["power_w"].mean(),
            "power_max_w": grouped["power_w"].max(),
            "energy_j": grouped["energy_j"].sum(min_count=1),
            "gpu_util_samples": grouped["gpu_util"].count(),
            "gpu_util_avg": grouped["gpu_util"].mean(),
            "gpu_util_max": grouped["gpu_util"].max(),
            "mem_util_avg": grouped["mem_util"].mean(),
            "mem_used_avg_bytes": grouped["mem_used_bytes"].mean(),
            "mem_used_max_bytes": grouped["mem_used_bytes"].max(),
            "temperature_max_c": grouped["temperature_c"].max(),
            "sm_clock_avg_mhz": grouped["sm_clock_mhz"].mean(),
            "throttled_samples": grouped["throttled"].sum(),
            "xid_errors_max": grouped["xid_errors"].max(),
        }
    ).reset_index()


def _stored(width: int) -> pd.DataFrame:
    frame = pd.DataFrame(list(TelemetryRollup.objects.filter(width_s=width).values()))
    frame["bucket"] = pd.to_datetime(frame["bucket"], utc=True)
    return frame


def _assert_matches(stored: pd.DataFrame, expected: pd.DataFrame) -> None:
    merged = expected.merge(
        stored, on=["accelerator_id", "bucket"], how="outer", suffixes=("", "_db"), indicator=True
    )
    assert (merged["_merge"] == "both").all(), merged[merged["_merge"] != "both"][
        ["accelerator_id", "bucket"]
    ]
    for column in expected.columns.drop(["accelerator_id", "bucket"]):
        np.testing.assert_allclose(
            merged[f"{column}_db"].astype("float64"),
            merged[column].astype("float64"),
            rtol=1e-9,
            err_msg=column,
        )


# --- Partitions and retention -----------------------------------------------------------------


def test_it_creates_partitions_for_the_days_needed_and_only_those() -> None:
    before = set(partition_services.telemetry_partition_days())
    created = partition_services.telemetry_partitions_ensure(
        start=datetime(2031, 3, 30, 22, 0, tzinfo=UTC), end=datetime(2031, 4, 1, 0, 30, tzinfo=UTC)
    )
    assert created == [date(2031, 3, 30), date(2031, 3, 31), date(2031, 4, 1)]
    assert set(partition_services.telemetry_partition_days()) - before == set(created)
    # Asking again creates nothing, and a time zone other than UTC maps to the UTC day.
    again = partition_services.telemetry_partitions_ensure(
        start=datetime(2031, 3, 31, 1, 0, tzinfo=UTC).astimezone(ZoneInfo("America/New_York")),
        end=datetime(2031, 4, 1, 23, 59, tzinfo=UTC),
    )
    assert again == []


def test_it_refuses_a_partition_range_spanning_centuries() -> None:
    with pytest.raises(ValueError, match="spans"):
        partition_services.telemetry_partitions_ensure(start=datetime(1970, 1, 1, tzinfo=UTC), end=T0)
    assert all(day.year > 1970 for day in partition_services.telemetry_partition_days())


def test_it_rejects_a_sample_outside_every_partition_until_ensure_runs(gpus: dict[str, Any]) -> None:
    gpu = gpus["counter"]
    moment = datetime(2032, 6, 1, 12, 0, tzinfo=UTC)
    row = _row(time=moment, host_id=gpu.host_id, accelerator_id=gpu.pk, power_w=300.0)
    with pytest.raises(IntegrityError, match="no partition"):
        with transaction.atomic():
            partition_services.telemetry_copy(rows=[row])
    assert not TelemetrySample.objects.filter(time=moment).exists()
    assert partition_services.telemetry_partitions_ensure(start=moment, end=moment) == [date(2032, 6, 1)]
    partition_services.telemetry_copy(rows=[row])
    assert TelemetrySample.objects.filter(time=moment, accelerator_id=gpu.pk).count() == 1


def test_it_drops_whole_old_partitions_and_keeps_rollups(gpus: dict[str, Any], settings: Any) -> None:
    settings.TELEMETRY_RETENTION_DAYS = 10
    gpu = gpus["counter"]
    old = datetime(2033, 1, 2, 12, 0, tzinfo=UTC)
    recent = datetime(2033, 1, 14, 12, 0, tzinfo=UTC)
    rows = [
        _row(
            time=old + timedelta(seconds=s),
            host_id=gpu.host_id,
            accelerator_id=gpu.pk,
            power_w=100.0,
            energy_mj=1000 * s,
        )
        for s in range(3)
    ] + [_row(time=recent, host_id=gpu.host_id, accelerator_id=gpu.pk, power_w=100.0, energy_mj=5)]
    _copy(rows)
    partition_services.telemetry_partitions_ensure(start=old, end=recent)
    # The old samples were never rolled up: retention must drain their mark before dropping them.
    rollup_services.telemetry_rollups_mark_dirty(start=old, end=old + timedelta(seconds=2))

    dropped = partition_services.telemetry_retention_apply(today=date(2033, 1, 15))

    assert dropped == [date(2033, 1, 2), date(2033, 1, 3), date(2033, 1, 4)]
    days = partition_services.telemetry_partition_days()
    assert date(2033, 1, 2) not in days and date(2033, 1, 5) in days and date(2033, 1, 14) in days
    assert TelemetrySample.objects.filter(accelerator_id=gpu.pk, time__lt=recent).count() == 0
    assert TelemetrySample.objects.filter(accelerator_id=gpu.pk, time=recent).count() == 1
    rollup = TelemetryRollup.objects.get(width_s=60, accelerator=gpu, bucket=old)
    assert rollup.samples == 3 and rollup.energy_j == pytest.approx(2.0)
    assert TelemetryRollup.objects.filter(width_s=3600, accelerator=gpu, bucket=old).exists()
    assert not TelemetryDirtyRange.objects.exists()


# --- Rollups ------------------------------------------------------------------------------------


def test_it_builds_minute_and_hour_rollups_that_match_pandas(gpus: dict[str, Any]) -> None:
    rows = _samples(gpus)
    _copy(rows)
    result = rollup_services.telemetry_rollups_refresh(start=T0, end=T1)

    _assert_matches(_stored(60), _reference(rows, 60))
    _assert_matches(_stored(3600), _reference(rows, 3600))
    assert result.minute_rows == TelemetryRollup.objects.filter(width_s=60).count()
    # The counter reset contributes nothing, never a negative amount, and energy is still drawn.
    reset_bucket = TelemetryRollup.objects.get(width_s=60, accelerator=gpus["counter"], bucket=RESET_AT)
    assert reset_bucket.energy_j is not None and reset_bucket.energy_j > 0
    assert not TelemetryRollup.objects.filter(energy_j__lt=0).exists()


def test_it_builds_host_rollups_that_match_pandas(gpus: dict[str, Any]) -> None:
    rows = _samples(gpus, seed=5)
    _copy(rows)
    rollup_services.telemetry_rollups_refresh(start=T0, end=T1)
    for width in (60, 3600):
        per_gpu = _reference(rows, width)
        raw = pd.DataFrame(rows, columns=list(TELEMETRY_COLUMNS))
        raw["bucket"] = pd.to_datetime(raw["time"], utc=True).dt.floor(f"{width}s")
        raw["power_w"] = raw["power_w"].astype("float64").astype("float32").astype("float64")
        by_host = raw.groupby(["host_id", "bucket"])
        expected = pd.DataFrame(
            {
                "gpus": by_host["accelerator_id"].nunique(),
                "samples": by_host.size(),
                "power_avg_w": by_host["power_w"].mean(),
                "energy_j": per_gpu.groupby(["host_id", "bucket"])["energy_j"].sum(min_count=1),
                "power_sum_w": per_gpu.groupby(["host_id", "bucket"])["power_avg_w"].sum(min_count=1),
            }
        ).reset_index()
        stored = pd.DataFrame(list(HostRollup.objects.filter(width_s=width).values()))
        stored["bucket"] = pd.to_datetime(stored["bucket"], utc=True)
        merged = expected.merge(
            stored, on=["host_id", "bucket"], how="outer", suffixes=("", "_db"), indicator=True
        )
        assert (merged["_merge"] == "both").all()
        for column in ("gpus", "samples", "power_avg_w", "energy_j", "power_sum_w"):
            np.testing.assert_allclose(merged[f"{column}_db"], merged[column], rtol=1e-9, err_msg=column)
    types = dict(
        HostRollup.objects.filter(width_s=3600)
        .values_list("host__hostname", "accelerator_type__name")
        .distinct()
    )
    assert types == {gpus["hosts"][0].hostname: factories.H100["name"], gpus["hosts"][1].hostname: None}


def test_it_updates_the_bucket_of_a_late_sample_without_duplicates(gpus: dict[str, Any]) -> None:
    rows = _samples(gpus, seed=9)
    late_time = datetime(2026, 11, 20, 10, 41, 59, 999000, tzinfo=UTC)
    gpu = gpus["counter"]
    on_time = [row for row in rows if not (row[2] == gpu.pk and row[0] == late_time)]
    _copy(on_time)
    rollup_services.telemetry_rollups_refresh(start=T0, end=T1)
    before = TelemetryRollup.objects.count()

    previous = max(row for row in on_time if row[2] == gpu.pk and row[0] < late_time)
    late = _row(
        **{**dict(zip(TELEMETRY_COLUMNS, previous, strict=True)), "time": late_time, "power_w": 1500.0}
    )
    _copy([late])
    rollup_services.telemetry_rollups_mark_dirty(start=late_time, end=late_time)
    rollup_services.telemetry_rollups_drain()

    assert TelemetryRollup.objects.count() == before
    all_rows = [*on_time, late]
    _assert_matches(_stored(60), _reference(all_rows, 60))
    _assert_matches(_stored(3600), _reference(all_rows, 3600))
    bucket = TelemetryRollup.objects.get(
        width_s=60, accelerator=gpu, bucket=late_time.replace(second=0, microsecond=0)
    )
    assert bucket.power_max_w == 1500.0


def test_it_coalesces_many_small_batches_into_one_refresh(gpus: dict[str, Any]) -> None:
    rows = _samples(gpus, seed=4)
    rows.sort(key=lambda row: row[0])  # type: ignore[arg-type, return-value]
    for index in range(0, len(rows), 500):
        batch = rows[index : index + 500]
        _copy(batch)
        rollup_services.telemetry_rollups_mark_dirty(start=batch[0][0], end=batch[-1][0])  # type: ignore[arg-type]
    assert TelemetryDirtyRange.objects.count() > 20

    result = rollup_services.telemetry_rollups_drain()

    assert result.ranges == 1
    assert not TelemetryDirtyRange.objects.exists()
    _assert_matches(_stored(60), _reference(rows, 60))
    assert rollup_services.telemetry_rollups_drain().ranges == 0


def test_it_merges_ranges_that_overlap_or_nearly_touch() -> None:
    t = T0
    ranges = [
        (t + timedelta(minutes=10), t + timedelta(minutes=12)),
        (t, t + timedelta(minutes=5)),
        (t + timedelta(minutes=3), t + timedelta(minutes=4)),
        (t + timedelta(minutes=6), t + timedelta(minutes=7)),
        (t + timedelta(minutes=30), t + timedelta(minutes=29)),
    ]
    assert rollup_services.time_ranges_merge(ranges) == [
        (t, t + timedelta(minutes=7)),
        (t + timedelta(minutes=10), t + timedelta(minutes=12)),
        (t + timedelta(minutes=29), t + timedelta(minutes=30)),
    ]


@pytest.mark.django_db(transaction=True)
def test_it_gives_the_same_rows_when_two_refreshes_run_at_once(team: Any) -> None:
    host, gpu_list = factories.host_create(team=team, gpus=3)
    rows = _samples(dict(zip(("counter", "nocounter", "holes"), gpu_list, strict=True)), seed=8)
    _copy(rows)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def refresh() -> None:
        try:
            barrier.wait(timeout=10)
            rollup_services.telemetry_rollups_refresh(start=T0, end=T1)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()

    try:
        threads = [threading.Thread(target=refresh) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        _assert_matches(_stored(60), _reference(rows, 60))
        _assert_matches(_stored(3600), _reference(rows, 3600))
        assert HostRollup.objects.filter(width_s=3600, host=host).count() == 3  # hours 09, 10 and 11
    finally:
        with connection.cursor() as cursor:
            for day in partition_services.telemetry_partition_days():
                cursor.execute(f"DROP TABLE {partition_services.TABLE}_p{day:%Y%m%d}")


def _partition_tables_drop(day: date) -> None:
    with connection.cursor() as cursor:
        for table in (partition_services.TABLE, PARTIAL_TABLE, partition_services.ATTRIBUTION_TABLE):
            cursor.execute(f"DROP TABLE IF EXISTS {table}_p{day:%Y%m%d}")


@pytest.mark.django_db(transaction=True)
def test_creating_a_partition_behind_a_long_reader_does_not_hold_up_the_others() -> None:
    """A long transaction reading the raw table (a rollup drain under a full fleet) holds its
    parent; creating a day's partition needs the parent exclusively, and a request waiting for that
    lock queues every later reader and writer behind it. Creating takes it in short tries, so the
    others go on while the long reader lasts, and the day is made once it ends."""
    day = date(2033, 5, 17)
    moment = datetime(2033, 5, 17, 12, tzinfo=UTC)
    holder = connections.create_connection("default")
    reader = connections.create_connection("default")
    outcome: list[object] = []

    def ensure() -> None:
        try:
            outcome.append(
                partition_services.telemetry_partitions_ensure(start=moment, end=moment, lock_wait_s=60)
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            outcome.append(exc)
        finally:
            connections.close_all()

    try:
        with holder.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute(f"SELECT count(*) FROM {partition_services.TABLE}")
        creator = threading.Thread(target=ensure)
        creator.start()
        # Each read waits at most 5 s for its lock: behind a creator waiting on the holder without
        # tries it would wait until the holder ends, and fail.
        with reader.cursor() as cursor:
            cursor.execute("SET lock_timeout = '5s'")
            for _ in range(6):
                time.sleep(0.3)
                cursor.execute(f"SELECT count(*) FROM {partition_services.TABLE}")
                assert cursor.fetchone() == (0,)
        assert creator.is_alive() and outcome == []  # still trying: the holder holds
        with holder.cursor() as cursor:
            cursor.execute("COMMIT")
        creator.join(timeout=60)
        assert outcome == [[day]]
        assert day in partition_services.telemetry_partition_days()
    finally:
        holder.close()
        reader.close()
        _partition_tables_drop(day)


@pytest.mark.django_db(transaction=True)
def test_creating_gives_up_after_its_wait_and_creates_nothing() -> None:
    day = date(2033, 5, 18)
    moment = datetime(2033, 5, 18, 12, tzinfo=UTC)
    holder = connections.create_connection("default")
    try:
        with holder.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute(f"SELECT count(*) FROM {PARTIAL_TABLE}")
        with pytest.raises(OperationalError) as raised:
            partition_services.telemetry_partitions_ensure(start=moment, end=moment, lock_wait_s=1)
        assert isinstance(raised.value.__cause__, psycopg.errors.LockNotAvailable)
        assert day not in partition_services.telemetry_partition_days()
        with connection.cursor() as cursor:  # the connection's own lock_timeout is back
            cursor.execute("SHOW lock_timeout")
            assert cursor.fetchone() == ("0",)
    finally:
        holder.close()
        _partition_tables_drop(day)


# --- Selectors --------------------------------------------------------------------------------


def test_it_reads_one_gpu_at_a_resolution_chosen_by_span(gpus: dict[str, Any]) -> None:
    rows = _samples(gpus, seed=6)
    _copy(rows)
    rollup_services.telemetry_rollups_refresh(start=T0, end=T1)
    gpu = gpus["counter"]
    expected = _reference(rows, 60)
    expected = expected[expected["accelerator_id"] == gpu.pk]

    res, raw = selectors.accelerator_metrics(accelerator_id=gpu.pk, start=T0, end=T0 + timedelta(minutes=30))
    assert res == "raw" and len(raw) == sum(
        1 for r in rows if r[2] == gpu.pk and r[0] < T0 + timedelta(minutes=30)
    )
    res, minute = selectors.accelerator_metrics(
        accelerator_id=gpu.pk, start=T0 - timedelta(hours=3), end=T1 + timedelta(minutes=1)
    )
    assert res == "minute"
    np.testing.assert_allclose(minute["power_w"], expected["power_avg_w"], rtol=1e-9)
    res, hourly = selectors.accelerator_metrics(accelerator_id=gpu.pk, start=T1 - timedelta(days=3), end=T1)
    assert res == "hour" and len(hourly) == 3
    with pytest.raises(ValueError, match="resolution"):
        selectors.accelerator_metrics(accelerator_id=gpu.pk, start=T0, end=T1, resolution="second")


def test_it_ranks_hosts_by_energy_with_exact_ragged_edges(gpus: dict[str, Any]) -> None:
    rows = _samples(gpus, seed=2)
    _copy(rows)
    rollup_services.telemetry_rollups_refresh(start=T0, end=T1)
    start, end = datetime(2026, 11, 20, 10, 15, tzinfo=UTC), datetime(2026, 11, 20, 11, 2, tzinfo=UTC)
    per_minute = _reference(rows, 60)
    inside = per_minute[(per_minute["bucket"] >= start) & (per_minute["bucket"] < end)]
    expected = (inside.groupby("host_id")["energy_j"].sum() / 3.6e6).sort_values(ascending=False)

    top = selectors.host_energy_top(start=start, end=end, scope=EVERY_TEAM, limit=10)

    assert list(top["host_id"]) == list(expected.index)
    np.testing.assert_allclose(top["energy_kwh"], expected.to_numpy(), rtol=1e-9)
    assert len(selectors.host_energy_top(start=start, end=end, scope=EVERY_TEAM, limit=1)) == 1


def test_it_reports_fleet_utilisation_per_hour_and_type_from_host_rollups(gpus: dict[str, Any]) -> None:
    rows = _samples(gpus, seed=12)
    _copy(rows)
    rollup_services.telemetry_rollups_refresh(start=T0, end=T1)
    frame = selectors.fleet_utilisation_hourly(start=T0 - timedelta(hours=1), end=T1, scope=EVERY_TEAM)
    raw = pd.DataFrame(rows, columns=list(TELEMETRY_COLUMNS))
    raw["bucket"] = pd.to_datetime(raw["time"], utc=True).dt.floor("3600s")
    h100 = raw[raw["accelerator_id"].isin([gpus["counter"].pk, gpus["nocounter"].pk])]
    expected = h100.groupby("bucket")["gpu_util"].mean()
    got = frame[frame["accelerator_type"] == factories.H100["name"]].set_index("bucket")["gpu_util"]
    np.testing.assert_allclose(got.to_numpy(dtype=float), expected.to_numpy(), rtol=1e-9)
    assert set(frame["accelerator_type"]) == {factories.H100["name"], "unknown"}
    assert list(frame[frame["accelerator_type"] == "unknown"]["gpus"]) == [1, 1, 1]


def test_it_rolls_up_a_long_range_in_chunks_exactly(gpus: dict[str, Any], monkeypatch: Any) -> None:
    # Chunks of a few minutes: each boundary falls inside the data, so a delta across a boundary,
    # the counter reset and the 45 s gap all land in some chunk's first or look-ahead bucket.
    monkeypatch.setattr(rollup_services, "ROLLUP_FIRST_CHUNK", timedelta(minutes=7))
    monkeypatch.setattr(rollup_services, "ROLLUP_CHUNK_SAMPLES", 700)
    rows = _samples(gpus, seed=11)
    _copy(rows)

    result = rollup_services.telemetry_rollups_refresh(start=T0, end=T1)

    _assert_matches(_stored(60), _reference(rows, 60))
    _assert_matches(_stored(3600), _reference(rows, 3600))
    assert result.minute_rows == TelemetryRollup.objects.filter(width_s=60).count()


def test_it_gives_the_caller_its_jit_and_work_mem_back(gpus: dict[str, Any]) -> None:
    _copy(_samples(gpus, seed=13))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL work_mem = '3MB'")
        cursor.execute("SET LOCAL jit = on")
        rollup_services.telemetry_rollups_refresh(start=T0, end=T1)
        cursor.execute("SELECT current_setting('work_mem'), current_setting('jit')")
        assert cursor.fetchone() == ("3MB", "on")
    assert TelemetryRollup.objects.filter(width_s=3600).count() == 9  # 3 GPUs x hours 09, 10 and 11


def test_a_drain_of_host_marks_refreshes_only_those_hosts(gpus: dict[str, Any]) -> None:
    rows = _samples(gpus, seed=5)
    _copy(rows)
    host_one = gpus["counter"].host_id
    times = [row[0] for row in rows]
    rollup_services.telemetry_rollups_mark_dirty(start=min(times), end=max(times), host_id=host_one)  # type: ignore[type-var]

    result = rollup_services.telemetry_rollups_drain()

    assert result.ranges == 1
    assert not TelemetryDirtyRange.objects.exists()
    assert set(TelemetryRollup.objects.values_list("host_id", flat=True)) == {host_one}
    mine = [row for row in rows if row[1] == host_one]
    _assert_matches(_stored(60), _reference(mine, 60))
    # The per-minute pass redoes the hours of the marks' range (for every GPU at once, from the
    # minute rows): those of the marked host are there, exact.
    _assert_matches(_stored(3600), _reference(mine, 3600))
    # A mark without a host still means every host.
    rollup_services.telemetry_rollups_mark_dirty(start=min(times), end=max(times))  # type: ignore[type-var]
    rollup_services.telemetry_rollups_drain()
    _assert_matches(_stored(60), _reference(rows, 60))
