"""Production-signal rules, hand-computed, and the pass that turns their findings into alerts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.urls import reverse

from accelboard.alerts import production as rules
from accelboard.alerts.models import Alert, ServingSlo
from accelboard.alerts.production_services import production_check
from accelboard.benchmarks.services import model_variant_get_or_create
from accelboard.fleet.choices import RollupWidth
from accelboard.fleet.models import TelemetryRollup
from accelboard.serving.models import InferenceMetric
from tests.factories import host_create

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def minutes(n: int) -> list[datetime]:
    return [T0 + timedelta(minutes=i) for i in range(n)]


# --- Pure rules ---------------------------------------------------------------------------------


def test_slo_breach_needs_half_the_intervals_and_the_newest() -> None:
    t = minutes(4)
    found = rules.slo_breach(list(zip(t, [180.0, 260.0, 300.0, 240.0], strict=True)), slo_ms=200)
    assert found is not None
    assert found.since == t[1] and found.value == 260.0  # median of 260, 300, 240
    assert found.detail == {"intervals_above": 3, "intervals": 4}
    # Newest back under the SLO: over.
    assert rules.slo_breach(list(zip(t, [250.0, 260.0, 300.0, 190.0], strict=True)), slo_ms=200) is None
    # One of four above: not sustained.
    assert rules.slo_breach(list(zip(t, [150.0, 160.0, 170.0, 240.0], strict=True)), slo_ms=200) is None
    # Too few intervals with data.
    assert rules.slo_breach([(t[0], None), (t[1], 300.0), (t[2], 300.0)], slo_ms=200) is None


def test_decode_speed_drop_compares_per_stream_tokens_per_second() -> None:
    # ITL 20 ms = 50 tok/s per stream; 25 ms = 40 tok/s: a 20% drop exactly, at the same load.
    reference = [(5.0, 20.0)] * 6
    found = rules.decode_speed_drop([(5.0, 25.0)] * 3, reference, since=T0)
    assert found is not None
    assert found.value == pytest.approx(40.0) and found.detail["reference_tokens_per_s"] == pytest.approx(
        50.0
    )
    assert found.detail["drop"] == pytest.approx(0.2)
    assert rules.decode_speed_drop([(5.0, 24.0)] * 3, reference, since=T0) is None  # 16.7%
    assert rules.decode_speed_drop([(5.0, 25.0), (5.0, None)], reference, since=T0) is None
    assert rules.decode_speed_drop([(5.0, 25.0)] * 3, reference[:5], since=T0) is None  # thin reference


def test_decode_speed_drop_reads_the_reference_at_the_load_of_now() -> None:
    # Streams slow down as traffic (and batch size) rises: ITL 20 ms at 2 req/s, 26 ms at 8 req/s.
    reference = [(load, 20.0 + (load - 2.0)) for load in (2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0)]
    # The peak at 8 req/s runs at 26 ms, 13% slower than the reference's median interval, but
    # what the reference itself ran at that load: no drop.
    assert rules.decode_speed_drop([(8.0, 26.0)] * 3, reference, since=T0) is None
    # 33 ms at 8 req/s is 21% below the 38.5 tok/s of 26 ms.
    found = rules.decode_speed_drop([(8.0, 33.0)] * 3, reference, since=T0)
    assert found is not None and found.detail["reference_tokens_per_s"] == pytest.approx(1000 / 26, rel=0.02)
    # Traffic far above anything in the reference (2x its peak): nothing to compare with.
    assert rules.decode_speed_drop([(16.0, 60.0)] * 3, reference, since=T0) is None


def test_throughput_floor_ignores_idle_intervals() -> None:
    t = minutes(4)
    # (start, seconds, requests, tokens): 60000/60 = 1000 tok/s, 54000/60 = 900 tok/s.
    rows = [(t[0], 60, 10, 54_000), (t[1], 60, 0, 0), (t[2], 60, 12, 48_000), (t[3], 60, 9, 57_000)]
    found = rules.throughput_floor(rows, floor_tokens_per_s=1000)
    assert found is not None and found.value == 900.0 and found.since == t[0]
    rows[3] = (t[3], 60, 9, 60_000)
    assert rules.throughput_floor(rows, floor_tokens_per_s=1000) is None


def _intervals(rates: list[float], *, idle_w: float, j_per_token: float) -> list[tuple[float, int, float]]:
    """(seconds, tokens, energy J) of 5-minute intervals: idle power plus energy per token."""
    return [(300.0, int(r * 300), (idle_w + j_per_token * r) * 300) for r in rates]


def test_energy_per_token_rise_at_the_same_load() -> None:
    reference = _intervals([1000.0] * 6, idle_w=0.0, j_per_token=0.10)
    # 0.12 J/token now against 0.10: +20%.
    found = rules.energy_per_token_rise(
        _intervals([1000.0] * 3, idle_w=0.0, j_per_token=0.12), reference, since=T0
    )
    assert found is not None
    assert found.value == pytest.approx(0.12) and found.detail["rise"] == pytest.approx(0.2)
    assert (
        rules.energy_per_token_rise(_intervals([1000.0] * 3, idle_w=0, j_per_token=0.11), reference, since=T0)
        is None
    )
    # Too few tokens, or too few complete intervals now: no judgement.
    assert (
        rules.energy_per_token_rise(_intervals([10.0] * 3, idle_w=0, j_per_token=1.0), reference, since=T0)
        is None
    )
    assert (
        rules.energy_per_token_rise(_intervals([1000.0] * 2, idle_w=0, j_per_token=0.2), reference, since=T0)
        is None
    )


def test_quiet_hours_cost_more_per_token_without_alerting() -> None:
    # 200 W idle + 0.1 J/token: the afternoon at 2,000 tokens/s spends 0.2 J/token, the evening at
    # 500 tokens/s 0.5 J/token, +150% on the same GPUs doing the same work. Not a rise.
    reference = _intervals(
        [2000.0, 1800.0, 1500.0, 1200.0, 1000.0, 800.0, 600.0], idle_w=200.0, j_per_token=0.1
    )
    evening = _intervals([500.0, 520.0, 480.0], idle_w=200.0, j_per_token=0.1)
    assert rules.energy_per_token_rise(evening, reference, since=T0) is None
    # The same evening with 30% more power than that load used to take is a rise.
    hot = [(s, t, e * 1.3) for s, t, e in evening]
    found = rules.energy_per_token_rise(hot, reference, since=T0)
    assert found is not None and found.detail["rise"] == pytest.approx(0.3, abs=0.02)
    assert found.detail["reference_j_per_token"] == pytest.approx(0.5, rel=0.02)


def test_sustained_counts_the_trailing_run_and_a_gap_ends_it() -> None:
    t = minutes(8)
    flags: list[bool | None] = [True, False, True, True, True, True, True, True]
    assert rules.sustained(list(zip(t, flags, strict=True)), min_buckets=5) == t[2]
    flags[5] = None
    assert rules.sustained(list(zip(t, flags, strict=True)), min_buckets=5) is None
    assert rules.memory_high(96.0, 100.0) is True and rules.memory_high(95.0, 100.0) is False
    assert rules.memory_high(None, 100.0) is None
    assert (
        rules.throttled(30, 60) is True and rules.throttled(29, 60) is False and rules.throttled(0, 0) is None
    )


def test_counter_increase_ignores_resets() -> None:
    assert rules.counter_increase(3, [3, 5, 5, None, 6]) == 3
    assert rules.counter_increase(7, [0, 2]) == 2  # driver reload: counts again from the new segment
    assert rules.counter_increase(None, [4, 4]) == 0


# --- The pass -----------------------------------------------------------------------------------


def _rollup(gpu: Any, bucket: datetime, **values: Any) -> TelemetryRollup:
    return TelemetryRollup.objects.create(
        width_s=RollupWidth.MINUTE, bucket=bucket, host=gpu.host, accelerator=gpu, samples=60, **values
    )


@pytest.mark.django_db
def test_the_pass_raises_memory_and_ecc_alerts_once_and_resolves_memory_when_it_clears(team: Any) -> None:
    host, (gpu,) = host_create(team=team, gpus=1)
    now = T0 + timedelta(minutes=15)
    for i in range(-10, 15):
        _rollup(
            gpu,
            T0 + timedelta(minutes=i),
            mem_used_avg_bytes=97.0 if i >= 8 else 50.0,
            mem_total_bytes=100,
            ecc_errors_max=2 if i < 12 else 5,
        )
    summary = production_check(now=now)
    kinds = sorted(Alert.objects.values_list("kind", flat=True))
    assert kinds == ["hardware", "memory"] and len(summary.raised) == 2
    memory = Alert.objects.get(kind="memory")
    assert memory.detail["entity"] == f"gpu:{gpu.pk}" and memory.host == host and memory.team == team
    assert memory.dedupe_key.endswith((T0 + timedelta(minutes=8)).strftime("%Y%m%dT%H%M"))
    assert "3 new ECC" in Alert.objects.get(kind="hardware").detail["reason"]

    assert production_check(now=now).raised == []  # the same episode: no second alert
    assert Alert.objects.count() == 2

    for i in range(15, 20):
        _rollup(
            gpu, T0 + timedelta(minutes=i), mem_used_avg_bytes=50.0, mem_total_bytes=100, ecc_errors_max=5
        )
    later = production_check(now=now + timedelta(minutes=5))
    memory.refresh_from_db()
    assert memory.state == "resolved" and later.resolved == [memory.pk]
    assert Alert.objects.get(kind="hardware").state == "open"  # hardware errors wait for a person


@pytest.mark.django_db
def test_the_pass_checks_serving_latency_against_the_model_slo(
    team: Any, lead: Any, login_client: Any
) -> None:
    host, _ = host_create(team=team, gpus=1)
    variant = model_variant_get_or_create(model="Llama-3.1-8B", variant="fp8", precision="fp8")
    ServingSlo.objects.create(team=team, model=variant.model, p99_latency_ms=500)
    for i in range(8):
        InferenceMetric.objects.create(
            team=team,
            host=host,
            variant=variant,
            interval_start=T0 + timedelta(minutes=2 * i),
            interval_s=120,
            requests=100,
            generated_tokens=20_000,
            e2e_p99_ms=650.0 if i >= 4 else 400.0,
            itl_p50_ms=20.0,
        )
    production_check(now=T0 + timedelta(minutes=16), window=timedelta(minutes=8))
    alert = Alert.objects.get()
    assert (alert.kind, alert.severity, alert.after_mean) == ("slo", "critical", 650.0)
    assert alert.detail["threshold"] == 500
    # Found on the alerts page by model and metric, like a benchmark alert.
    assert (alert.detail["model"], alert.detail["metric"]) == ("Llama-3.1-8B", "latency_e2e_p99_ms")
    # Change against the limit and how consistent the window was (4 of 4 intervals over).
    assert alert.pct_change == pytest.approx(30.0) and alert.confidence == 1.0
    html = login_client(lead).get(reverse("alerts:list")).content.decode()
    row = html[html.index(f'data-alert="{alert.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "+30.0%" in row and "&gt; 99.9%" in row
    # The metric wraps only between its words.
    assert "<code>latency_<wbr>e2e_<wbr>p99_<wbr>ms</code>" in row


@pytest.mark.django_db
def test_the_beat_task_records_its_run(team: Any) -> None:
    from accelboard.alerts.tasks import production_signals_check  # noqa: PLC0415
    from accelboard.core.models import JobRun  # noqa: PLC0415

    result = production_signals_check.apply(kwargs={"window_minutes": 15}).get()
    assert result == {"findings": 0, "raised": 0, "resolved": 0}
    job = JobRun.objects.get(name="alerts_production_check")
    assert job.status == "succeeded" and job.detail["skipped"] is False


@pytest.mark.django_db
def test_the_pass_reads_raw_samples_only_for_gpus_whose_rollups_could_be_throttled(team: Any) -> None:
    """The throttle rule needs fault reasons, which only raw samples hold; the minute rollups count
    every reason (the power cap too), so they bound it: a fault and a power cap both pass the
    rollups, only the fault raises, and a GPU that never throttled is not read raw."""
    from accelboard.alerts.production_services import slowdown_minutes, throttle_candidates  # noqa: PLC0415
    from accelboard.fleet.models import TELEMETRY_COLUMNS  # noqa: PLC0415
    from accelboard.fleet.partition_services import telemetry_copy, telemetry_partitions_ensure  # noqa: PLC0415
    from accelboard.fleet.rollup_services import telemetry_rollups_refresh  # noqa: PLC0415

    _host, (fault, cap, cool) = host_create(team=team, gpus=3)
    start, now = T0, T0 + timedelta(minutes=30)
    reasons = {fault.pk: 0x40, cap.pk: 0x4, cool.pk: 0}  # HW thermal, SW power cap, none
    rows = []
    for gpu in (fault, cap, cool):
        for second in range(0, 30 * 60, 10):
            moment = start + timedelta(seconds=second)
            # The last 10 minutes slowed (or capped), in every sample.
            reason = reasons[gpu.pk] if second >= 20 * 60 else 0
            row = {
                "time": moment, "host_id": gpu.host_id, "accelerator_id": gpu.pk, "power_w": 400.0,
                "energy_mj": 10**9 + second * 400_000, "gpu_util": 90.0, "mem_util": 40.0,
                "mem_used_bytes": 2**30, "mem_total_bytes": 80 * 2**30, "sm_clock_mhz": 1500.0,
                "mem_clock_mhz": 2619.0, "temperature_c": 80.0, "throttle_reasons": reason,
                "ecc_errors": 0, "xid_errors": 0,
            }  # fmt: skip
            rows.append(tuple(row[column] for column in TELEMETRY_COLUMNS))
    telemetry_partitions_ensure(start=start, end=now)
    telemetry_copy(rows=rows)
    telemetry_rollups_refresh(start=start, end=now)

    window = now - timedelta(minutes=15)
    read = list(
        TelemetryRollup.objects.filter(width_s=RollupWidth.MINUTE, bucket__gte=window - timedelta(hours=1))
        .order_by("accelerator_id", "bucket")
        .values_list("accelerator_id", "host_id", "bucket", "samples", "mem_used_avg_bytes",
                     "mem_total_bytes", "throttled_samples", "ecc_errors_max", "xid_errors_max")
    )  # fmt: skip
    per_gpu: dict[int, list[Any]] = {}
    for row in read:
        per_gpu.setdefault(row[0], []).append(row)
    assert sorted(throttle_candidates(per_gpu, start=window, end=now)) == sorted([fault.pk, cap.pk])
    # The candidates' raw minutes are what a read of every GPU gives for them.
    every = slowdown_minutes(start=window, end=now)
    some = slowdown_minutes(start=window, end=now, gpu_ids=[fault.pk, cap.pk])
    assert some == {gpu: every[gpu] for gpu in (fault.pk, cap.pk)}
    assert all(slowed == 6 for slowed, _ in list(some[fault.pk].values())[-10:])
    assert all(slowed == 0 for slowed, _ in some[cap.pk].values())

    production_check(now=now)
    alert = Alert.objects.get(kind="throttle")
    assert alert.detail["entity"] == f"gpu:{fault.pk}"


@pytest.mark.django_db
def test_the_pass_reads_only_gpus_a_rule_could_hold_for_and_resolves_the_others(team: Any) -> None:
    """The screen over the rollups names the GPUs worth reading row by row: memory over the limit
    in some minute, throttling in some minute, a counter that moved. A GPU screened out is judged
    all the same: its memory alert resolves once its window holds only normal minutes."""
    from accelboard.alerts.production_services import gpus_screen  # noqa: PLC0415

    _host, (hot, cool, erring) = host_create(team=team, gpus=3)
    now = T0 + timedelta(minutes=15)
    for i in range(-10, 15):
        _rollup(
            hot, T0 + timedelta(minutes=i), mem_used_avg_bytes=97.0 if i >= 8 else 50.0, mem_total_bytes=100
        )
        _rollup(
            cool, T0 + timedelta(minutes=i), mem_used_avg_bytes=95.0, mem_total_bytes=100, ecc_errors_max=3
        )
        _rollup(
            erring,
            T0 + timedelta(minutes=i),
            mem_used_avg_bytes=10.0,
            mem_total_bytes=100,
            xid_errors_max=1 if i < 14 else 2,
        )
    # 95% is not above the limit; a counter that never moved is no error.
    assert gpus_screen(start=now - timedelta(minutes=15), end=now) == (sorted([hot.pk, erring.pk]), [cool.pk])
    production_check(now=now)
    assert sorted(Alert.objects.values_list("kind", flat=True)) == ["hardware", "memory"]
    memory = Alert.objects.get(kind="memory")
    assert memory.detail["entity"] == f"gpu:{hot.pk}"

    for i in range(15, 31):
        _rollup(hot, T0 + timedelta(minutes=i), mem_used_avg_bytes=50.0, mem_total_bytes=100)
    later = now + timedelta(minutes=16)
    assert hot.pk in gpus_screen(start=later - timedelta(minutes=15), end=later)[1]
    assert production_check(now=later).resolved == [memory.pk]
    memory.refresh_from_db()
    assert memory.state == "resolved"
