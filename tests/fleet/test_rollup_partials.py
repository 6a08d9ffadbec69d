"""Rollups from the partial aggregates written at ingest equal rollups from raw rows.

The same randomized telemetry (gaps, a gap of exactly the integration limit, counter resets,
NULL fields, a GPU with no energy counter, batches spanning minute boundaries, several batches
per minute, shuffled samples, duplicate batch ids, late batches, a batch resent under a new id)
goes through the ingest service, drained now and then as the product does; the minute, hour and
host rollups it leaves are compared, column by column, with a recomputation from raw rows.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from accelboard.api.services import telemetry_batch_ingest
from accelboard.fleet import partition_services, rollup_services
from accelboard.fleet.models import Accelerator, RollupHourBacklog, TelemetryRawRange, TelemetryRollup
from accelboard.fleet.partials import PARTIAL_COLUMNS, PROFILING_FIELDS, partials_compute

pytestmark = pytest.mark.django_db

GPUS = {
    "node-a": ["GPU-a0", "GPU-a1", "GPU-a2"],  # GPU-a2 has no energy counter
    "node-b": ["GPU-b0", "GPU-b1"],
}
NO_COUNTER = "GPU-a2"
IDLE = "GPU-b1"  # its counter never moves: energy 0, not NULL


def _series(rng: random.Random, gpu: str, start: float, seconds: int) -> list[dict[str, Any]]:
    """About one sample a second with jitter, gaps (one of exactly MAX_INTEGRATION_GAP_S),
    counter resets and NULL readings."""
    samples: list[dict[str, Any]] = []
    moment, counter = start, rng.randrange(10**9, 10**11)
    while moment < start + seconds:
        power = rng.uniform(60, 700)
        roll = rng.random()
        step = 1.0 + rng.choice([0, 0, 0, 0.25, 0.000001, -0.4])
        if roll < 0.01:
            step = rollup_services.MAX_INTEGRATION_GAP_S  # exactly the limit: still integrated
        elif roll < 0.02:
            step = rollup_services.MAX_INTEGRATION_GAP_S + rng.uniform(0.5, 40)
        elif roll < 0.03:
            counter = rng.randrange(0, 10**6)  # a driver reload resets the counter
        if gpu != IDLE:
            counter += int(power * step * 1000)
        sample = {
            "time": round(moment, 6),
            "gpu": gpu,
            "power_w": None if rng.random() < 0.05 else power,
            "energy_mj": None if gpu == NO_COUNTER or rng.random() < 0.03 else counter,
            "gpu_util": None if rng.random() < 0.05 else rng.uniform(0, 100),
            "mem_util": None if rng.random() < 0.05 else rng.uniform(0, 100),
            "mem_used_bytes": None if rng.random() < 0.05 else rng.randrange(0, 80 * 2**30),
            "mem_total_bytes": None if rng.random() < 0.05 else 80 * 2**30,
            "sm_clock_mhz": None if rng.random() < 0.05 else rng.uniform(200, 2000),
            "mem_clock_mhz": None if rng.random() < 0.05 else rng.uniform(200, 3000),
            "temperature_c": None if rng.random() < 0.05 else rng.uniform(30, 90),
            "throttle_reasons": None if rng.random() < 0.05 else rng.choice([0, 0, 1, 4, 8, 0x40]),
            "ecc_errors": None if rng.random() < 0.05 else rng.randrange(0, 3),
            "xid_errors": None if rng.random() < 0.05 else rng.randrange(0, 2),
        }
        if gpu != NO_COUNTER:  # DCGM profiling counters: one GPU without any
            for name in PROFILING_FIELDS:
                sample[name] = None if rng.random() < 0.05 else rng.uniform(0, 100)
        samples.append(sample)
        moment += step
    return samples


def _batches(rng: random.Random, start: float, seconds: int) -> list[dict[str, Any]]:
    """Each host's samples cut by time into batches of 2-25 s (some of 40-90 s, to hold a gap),
    samples shuffled in each."""
    batches = []
    for hostname, gpus in GPUS.items():
        samples = [s for gpu in gpus for s in _series(rng, gpu, start + rng.uniform(0, 3), seconds)]
        cut = start
        n = 0
        while cut < start + seconds + 60:
            width = rng.uniform(40, 90) if rng.random() < 0.2 else rng.uniform(2, 25)
            chunk = [s for s in samples if cut <= s["time"] < cut + width]
            cut += width
            if not chunk:
                continue
            rng.shuffle(chunk)
            n += 1
            batches.append(
                {
                    "batch_id": f"{hostname}-{n}",
                    "host": {"hostname": hostname, "agent_version": "1.0"},
                    "accelerators": [
                        {"uuid": gpu, "index": i, "name": "NVIDIA H100"} for i, gpu in enumerate(gpus)
                    ],
                    "samples": chunk,
                }
            )
    return batches


def _rollups() -> dict[str, dict[tuple[Any, ...], tuple[Any, ...]]]:
    tables = {
        "minute": ("fleet_telemetryrollup", "width_s = 60", ("host_id", "accelerator_id", "bucket")),
        "hour": ("fleet_telemetryrollup", "width_s = 3600", ("host_id", "accelerator_id", "bucket")),
        "host": ("fleet_hostrollup", "true", ("width_s", "host_id", "accelerator_type_id", "bucket")),
    }
    result = {}
    with connection.cursor() as cursor:
        for name, (table, where, key) in tables.items():
            cursor.execute(f"SELECT * FROM {table} WHERE {where}")
            columns = [c.name for c in cursor.description]
            rows = {}
            for row in cursor.fetchall():
                record = dict(zip(columns, row, strict=True))
                record.pop("id")
                rows[tuple(record[k] for k in key)] = tuple(sorted(record.items()))
            result[name] = rows
    return result


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def _assert_equal(got: dict[str, Any], want: dict[str, Any]) -> None:
    for kind in want:
        assert got[kind].keys() == want[kind].keys(), kind
        for key, row in want[kind].items():
            for (name, value), (_, other) in zip(got[kind][key], row, strict=True):
                assert _same(value, other), (kind, key, name, value, other)


def _from_raw_rows(start: float, end: float) -> dict[str, Any]:
    """The rollups of [start, end) (epoch seconds) refreshed from raw rows alone, the stored ones
    deleted first: what the partials' rollups must equal."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM fleet_telemetryrollup; DELETE FROM fleet_hostrollup")
    TelemetryRawRange.objects.create(start=datetime.now(UTC) - timedelta(days=1), end=datetime.now(UTC))
    rollup_services.telemetry_rollups_refresh(
        start=datetime.fromtimestamp(start, UTC), end=datetime.fromtimestamp(end, UTC)
    )
    return _rollups()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_it_rolls_up_partials_exactly_as_raw_rows(team: Any, seed: int) -> None:
    rng = random.Random(seed)
    start = (datetime.now(UTC) - timedelta(hours=3)).replace(minute=58, second=0, microsecond=0)
    batches = _batches(rng, start.timestamp() + rng.uniform(0, 59), seconds=5 * 60)
    order = list(range(len(batches)))
    rng.shuffle(late := [order.pop(rng.randrange(len(order))) for _ in range(4)])
    duplicate = batches[order[len(order) // 2]]
    resent = {**batches[order[len(order) // 3]], "batch_id": "resent-under-a-new-id"}
    partial_rows = 0
    for step, index in enumerate([*order, *late]):
        result = telemetry_batch_ingest(team=team, payload=batches[index])
        assert not result["duplicate"]
        if step == len(order) // 2:
            assert telemetry_batch_ingest(team=team, payload=duplicate)["duplicate"]
            telemetry_batch_ingest(team=team, payload=resent)
        if step % 7 == 0:
            partial_rows += rollup_services.telemetry_rollups_drain().partial_rows
    partial_rows += rollup_services.telemetry_rollups_drain().partial_rows
    assert partial_rows > 0  # the partials path ran
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FILTER (WHERE slot = 0), count(*) FROM fleet_telemetrypartial")
        merged, stored = cursor.fetchone()
    # Appended, never merged: one partial per batch, GPU and minute (the batch resent under a new
    # id stored nothing: its GPU-instants were stored), each in a slot of its own.
    assert merged == 0
    assert stored == sum(len({(s["gpu"], s["time"] // 60) for s in b["samples"]}) for b in batches)
    from_partials = _rollups()

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM fleet_telemetryrollup; DELETE FROM fleet_hostrollup")
    TelemetryRawRange.objects.create(start=start - timedelta(days=1), end=start + timedelta(days=1))
    refresh = rollup_services.telemetry_rollups_refresh(
        start=start - timedelta(hours=1), end=start + timedelta(hours=2)
    )
    assert refresh.partial_rows == 0 and refresh.minute_rows > 0
    from_raw = _rollups()
    assert len(from_raw["minute"]) > 5 * len(GPUS["node-a"])
    _assert_equal(from_partials, from_raw)
    # The profiling counters were rolled up (both ways, compared above), absent where never sent.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.uuid, sum(r.tensor_active_samples), max(r.tensor_active_avg) FROM fleet_telemetryrollup r "
            "JOIN fleet_accelerator a ON a.id = r.accelerator_id WHERE r.width_s = 60 GROUP BY a.uuid"
        )
        profiled = {uuid: (n, top) for uuid, n, top in cursor.fetchall()}
    assert profiled.pop(NO_COUNTER) == (0, None)
    assert profiled and all(n > 0 and 0 < top <= 100 for n, top in profiled.values())


def test_it_rolls_up_from_raw_rows_a_gpu_whose_partials_overlap(team: Any) -> None:
    rng = random.Random(9)
    start = (datetime.now(UTC) - timedelta(hours=2)).replace(second=0, microsecond=0)
    batches = _batches(rng, start.timestamp(), seconds=120)
    for batch in batches:
        telemetry_batch_ingest(team=team, payload=batch)
    # Samples half a second after those of a stored batch (the same samples again would not be
    # stored: a GPU-instant is stored once): the two batches' partials overlap in time.
    shifted = [{**sample, "time": sample["time"] + 0.5} for sample in batches[3]["samples"]]
    telemetry_batch_ingest(team=team, payload={**batches[3], "batch_id": "again", "samples": shifted})
    result = rollup_services.telemetry_rollups_drain()
    from_partials = _rollups()
    assert 0 < result.partial_rows < result.minute_rows
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM fleet_telemetryrollup; DELETE FROM fleet_hostrollup")
    TelemetryRawRange.objects.create(start=start - timedelta(days=1), end=start + timedelta(days=1))
    rollup_services.telemetry_rollups_refresh(
        start=start - timedelta(hours=1), end=start + timedelta(hours=1)
    )
    _assert_equal(from_partials, _rollups())


def test_two_batches_sharing_an_instant_roll_up_from_partials_as_from_raw_rows(team: Any) -> None:
    """Two batches share an instant: the second's sample there is not stored (the GPU-instant is
    stored once, the first batch's), so the partials no longer touch and are read, and they give
    what the raw rows give. (Partials that overlap are read raw:
    ``test_it_rolls_up_from_raw_rows_a_gpu_whose_partials_overlap``.)"""
    start = (datetime.now(UTC) - timedelta(hours=2)).replace(second=20, microsecond=0).timestamp()

    def batch(batch_id: str, seconds: range, counter: int) -> dict[str, Any]:
        samples = [
            {"time": start + s, "gpu": "GPU-a0", "power_w": 300.0, "energy_mj": counter + 300_000 * i}
            for i, s in enumerate(seconds)
        ]
        return {
            "batch_id": batch_id,
            "host": {"hostname": "node-a"},
            "accelerators": [{"uuid": "GPU-a0"}],
            "samples": samples,
        }

    telemetry_batch_ingest(team=team, payload=batch("later", range(10, 16), 10_000_000))
    earlier = telemetry_batch_ingest(team=team, payload=batch("earlier", range(5, 11), 7_500_000))
    assert (earlier["accepted"], earlier["duplicate_samples"]) == (5, 1)
    result = rollup_services.telemetry_rollups_drain()
    assert result.partial_rows == result.minute_rows == 1  # from the partials
    from_partials = _rollups()
    _assert_equal(from_partials, _from_raw_rows(start, start + 60))


def test_it_merges_batches_at_the_limits_as_raw_rows_would(team: Any) -> None:
    """One-sample batches merged into one partial per minute across a gap of exactly the
    integration limit (and just over it), and an idle counter (zero deltas: energy 0, not NULL),
    equal the raw rollups."""
    start = (datetime.now(UTC) - timedelta(hours=2)).replace(second=0, microsecond=0).timestamp()
    gap = rollup_services.MAX_INTEGRATION_GAP_S
    for n, moment in enumerate([0, gap, gap + 1, 2 * gap + 1.000001, 2 * gap + 3, 2 * gap + 4]):
        samples = [
            {"time": start + moment, "gpu": gpu, "power_w": 250.0, "energy_mj": energy}
            for gpu, energy in (("GPU-a2", None), ("GPU-b1", 5_000_000))
        ]
        accelerators = [{"uuid": "GPU-a2"}, {"uuid": "GPU-b1"}]
        batch = {"batch_id": f"b{n}", "host": {"hostname": "node-a"}, "accelerators": accelerators}
        telemetry_batch_ingest(team=team, payload={**batch, "samples": samples})
    assert rollup_services.telemetry_rollups_drain().partial_rows == 4
    from_partials = _rollups()
    energies = sorted(TelemetryRollup.objects.filter(width_s=60).values_list("energy_j", flat=True))
    # 30 s (the limit, integrated) and 1 s in the first minute; past the limit, 2 s, 1 s after.
    assert energies == pytest.approx([0.0, 0.0, 250.0 * (2.999999), 250.0 * (gap + 1)], rel=1e-12)
    _assert_equal(from_partials, _from_raw_rows(start, start + 120))


def test_it_reads_raw_rows_near_rows_copied_without_partials(team: Any) -> None:
    start = (datetime.now(UTC) - timedelta(hours=2)).replace(second=0, microsecond=0)
    for batch in _batches(random.Random(4), start.timestamp(), seconds=60):
        telemetry_batch_ingest(team=team, payload=batch)
    assert rollup_services.telemetry_rollups_drain().partial_rows > 0
    host_id, gpu_id = Accelerator.objects.filter(uuid="GPU-a0").values_list("host_id", "pk").get()
    partition_services.telemetry_copy(
        rows=[(start + timedelta(seconds=90), host_id, gpu_id, 300.0)],
        columns=("time", "host_id", "accelerator_id", "power_w"),
    )
    result = rollup_services.telemetry_rollups_refresh(start=start, end=start + timedelta(minutes=2))
    assert result.partial_rows == 0 and result.minute_rows > 0


def test_partials_of_one_gpu_and_minute_sum_its_samples() -> None:
    micros = [60_000_000 * 10 + s * 1_000_000 for s in (5, 1, 59, 61, 62)]
    import numpy as np

    rows = partials_compute(
        host_id=1,
        accelerator_ids=[7, 7, 7, 7, 7],
        micros=np.array(micros, dtype=np.int64),
        columns={
            "power_w": [100.0, 200.0, None, 50.0, 70.0],
            "energy_mj": [None, None, None, 1000, 4000],
            **{
                name: [None] * 5
                for name in (
                    "gpu_util",
                    "mem_util",
                    "mem_used_bytes",
                    "mem_total_bytes",
                    "sm_clock_mhz",
                    "mem_clock_mhz",
                    "temperature_c",
                    "throttle_reasons",
                    "ecc_errors",
                    "xid_errors",
                )
            },
        },
        max_gap_s=30,
        max_counter_gap_s=6 * 3600,
        throttle_mask=0x4,
    )
    first, second = (dict(zip([n for n, _ in PARTIAL_COLUMNS], row, strict=True)) for row in rows)
    assert (first["samples"], first["power_samples"], first["power_sum"]) == (3, 2, 300.0)
    # 1 s -> 5 s: 100 W x 4 s; 5 s -> 59 s is past the integration limit; 59 s has no power.
    assert first["energy_j"] == 400.0
    assert (first["first_time"], first["last_time"]) == (micros[1], micros[2])
    # 61 s -> 62 s: the counter's 3,000 mJ; the first sample of a partial is stitched at refresh.
    assert (second["samples"], second["energy_j"], second["first_energy_mj"]) == (2, 3.0, 1000)


def _samples(kind: str) -> int:
    width = 60 if kind == "minute" else 3600
    return sum(TelemetryRollup.objects.filter(width_s=width).values_list("samples", flat=True))


def test_ingest_drains_redo_the_hours_once_a_minute_and_the_per_minute_pass_at_once(
    team: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(7)
    start = (datetime.now(UTC) - timedelta(hours=3)).replace(minute=58, second=0, microsecond=0)
    batches = _batches(rng, start.timestamp() + 5, seconds=4 * 60)  # across an hour's end
    batches.sort(key=lambda b: min(s["time"] for s in b["samples"]))
    thirds = [batches[: len(batches) // 3], batches[len(batches) // 3 : 2 * len(batches) // 3]]
    thirds.append(batches[2 * len(batches) // 3 :])
    every = 60.0

    for batch in thirds[0]:
        telemetry_batch_ingest(team=team, payload=batch)
    first = rollup_services.telemetry_rollups_drain(hours_every_s=every)
    assert first.hour_rows > 0  # the first drain has no earlier hour refresh to wait for
    assert _samples("hour") == _samples("minute") > 0

    # Within the minute: the minute rollups now, the hours left in the backlog.
    for batch in thirds[1]:
        telemetry_batch_ingest(team=team, payload=batch)
    second = rollup_services.telemetry_rollups_drain(hours_every_s=every)
    assert second.minute_rows > 0 and second.hour_rows == 0
    assert _samples("hour") < _samples("minute")
    assert RollupHourBacklog.objects.get(pk=1).ranges

    # A minute later a drain with nothing new redoes the backlog's hours.
    later = datetime.now(UTC) + timedelta(seconds=every + 1)
    monkeypatch.setattr(rollup_services.timezone, "now", lambda: later)
    third = rollup_services.telemetry_rollups_drain(hours_every_s=every)
    monkeypatch.undo()
    assert third.minute_rows == 0 and third.hour_rows > 0
    assert RollupHourBacklog.objects.get(pk=1).ranges == []
    assert _samples("hour") == _samples("minute")

    # The per-minute pass (hours_every_s=0) redoes them whatever the time.
    for batch in thirds[2]:
        telemetry_batch_ingest(team=team, payload=batch)
    assert rollup_services.telemetry_rollups_drain(hours_every_s=every).hour_rows == 0
    assert rollup_services.telemetry_rollups_drain().hour_rows > 0
    assert RollupHourBacklog.objects.get(pk=1).ranges == []
    deferred = _rollups()

    # Every row as one refresh of the whole span computes it.
    rollup_services.telemetry_rollups_refresh(
        start=start - timedelta(hours=1), end=start + timedelta(hours=2)
    )
    _assert_equal(deferred, _rollups())


def _partial_rows() -> list[dict[str, Any]]:
    names = [name for name, _ in PARTIAL_COLUMNS]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(names)} FROM fleet_telemetrypartial ORDER BY accelerator_id, bucket"
        )
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def test_the_drain_computes_an_agent_batchs_partials_as_partials_compute_does(team: Any) -> None:
    """An agent's batch stores no partials in its request; the drain computes them from the raw
    rows the batch's transaction wrote, equal, column by column, to ``partials_compute``'s of the
    same samples (the function a remote-write request still runs in its own transaction); a
    second drain adds none."""
    rng = random.Random(11)
    start = (datetime.now(UTC) - timedelta(hours=2)).replace(second=0, microsecond=0)
    gpus = GPUS["node-a"]
    samples = [s for gpu in gpus for s in _series(rng, gpu, start.timestamp() + 30, 70)]  # across a minute
    rng.shuffle(samples)
    batch = {
        "batch_id": "one",
        "host": {"hostname": "node-a"},
        "accelerators": [{"uuid": gpu, "index": i} for i, gpu in enumerate(gpus)],
        "samples": samples,
    }
    telemetry_batch_ingest(team=team, payload=batch)
    assert _partial_rows() == []
    rollup_services.telemetry_rollups_drain()
    got = _partial_rows()
    rollup_services.telemetry_rollups_drain()
    assert _partial_rows() == got

    import numpy as np

    ids = dict(Accelerator.objects.values_list("uuid", "pk"))
    micros = np.array([round(s["time"] * 1_000_000) for s in samples], dtype=np.int64)
    fields = [name for name in samples[0] if name not in ("time", "gpu")]
    want = partials_compute(
        host_id=Accelerator.objects.get(uuid=samples[0]["gpu"]).host_id,
        accelerator_ids=[ids[s["gpu"]] for s in samples],
        micros=micros,
        columns={name: [s.get(name) for s in samples] for name in fields},
        max_gap_s=rollup_services.MAX_INTEGRATION_GAP_S,
        max_counter_gap_s=rollup_services.MAX_COUNTER_GAP_S,
        throttle_mask=rollup_services.THROTTLE_MASK,
    )
    want_rows = sorted(
        (dict(zip([n for n, _ in PARTIAL_COLUMNS], row, strict=True)) for row in want),
        key=lambda row: (row["accelerator_id"], row["bucket"]),
    )
    assert len(got) == len(want_rows) > len(GPUS["node-a"])  # a minute's end inside the batch
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    for row, expected in zip(got, want_rows, strict=True):
        for name, kind in PARTIAL_COLUMNS:
            value = row[name]
            if kind == "timestamptz":
                value = (value - epoch) // timedelta(microseconds=1)
            if kind == "float4" and value is not None:  # the same float4, read as its shortest text
                value, expected[name] = float(np.float32(value)), float(np.float32(expected[name]))
            assert _same(value, expected[name]), (name, value, expected[name])


@pytest.mark.django_db(transaction=True)
def test_batches_committed_one_by_one_roll_up_from_the_drains_partials_as_from_raw_rows() -> None:
    """Each batch in a transaction of its own (as the API commits them, not in a test's
    transaction), drained now and then: the drains' partials give the raw rows' rollups."""
    from accelboard.core.services import team_create

    team = team_create(name="Committed", slug="committed")
    rng = random.Random(5)
    start = (datetime.now(UTC) - timedelta(hours=2)).replace(second=0, microsecond=0)
    for step, batch in enumerate(_batches(rng, start.timestamp() + 7, seconds=150)):
        telemetry_batch_ingest(team=team, payload=batch)
        if step % 4 == 3:
            rollup_services.telemetry_rollups_drain()
    assert rollup_services.telemetry_rollups_drain().partial_rows > 0
    from_partials = _rollups()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM fleet_telemetrypartial")
        assert cursor.fetchone()[0] > 0
        cursor.execute("DELETE FROM fleet_telemetryrollup; DELETE FROM fleet_hostrollup")
    TelemetryRawRange.objects.create(start=start - timedelta(days=1), end=start + timedelta(days=1))
    rollup_services.telemetry_rollups_refresh(
        start=start - timedelta(hours=1), end=start + timedelta(hours=1)
    )
    _assert_equal(from_partials, _rollups())


@pytest.mark.parametrize("last_two_overlap", [False, True])
def test_a_minute_reads_the_two_partials_that_end_last_in_the_minute_before(
    team: Any, last_two_overlap: bool
) -> None:
    """A drain reads, of the GPU's minute before its range, only the two partials that end last.
    Two batches overlapping early in that minute are out of reach of the range's first delta:
    the next minute is rolled up from its partials, and equals the raw rows' rollup. When the two
    that end last overlap, the last sample before the range is not known from them: raw rows."""
    start = (datetime.now(UTC) - timedelta(hours=2)).replace(second=0, microsecond=0).timestamp()
    counter = 10**9

    def send(batch_id: str, seconds: list[float]) -> None:
        nonlocal counter
        samples = []
        for moment in seconds:
            counter += 250_000
            samples.append({"time": start + moment, "gpu": "GPU-a0", "power_w": 250.0, "energy_mj": counter})
        telemetry_batch_ingest(
            team=team,
            payload={
                "batch_id": batch_id,
                "host": {"hostname": "node-a"},
                "accelerators": [{"uuid": "GPU-a0"}],
                "samples": samples,
            },
        )

    send("early", [float(s) for s in range(10)])
    send("early-overlapping", [s + 5.5 for s in range(10)])
    send("late", [float(s) for s in range(30, 40)])
    send("last", [s + (38.5 if last_two_overlap else 40) for s in range(10)])
    assert rollup_services.telemetry_rollups_drain().partial_rows == 0  # its overlap: raw rows
    send("next-minute", [float(s) for s in range(60, 70)])
    result = rollup_services.telemetry_rollups_drain()
    assert result.minute_rows == 1
    assert result.partial_rows == (0 if last_two_overlap else 1)
    from_partials = _rollups()
    _assert_equal(from_partials, _from_raw_rows(start, start + 120))
