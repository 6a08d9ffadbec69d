"""The demo fleet: deterministic generation, a small load through the real write paths, the
manifest of injected events, the cast of demo users, idempotence, reset and bad flags."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from accelboard.benchmarks.models import BenchmarkRun, MetricValue, Series
from accelboard.core.choices import JobStatus
from accelboard.core.models import JobRun, Membership
from accelboard.costs.models import AcceleratorPrice, ElectricityPrice
from accelboard.demo import benchmark_plan, generator, history_generator, loader, plan
from accelboard.demo import canary as demo_canary
from accelboard.fleet.catalogue import ACCELERATOR_TYPES
from accelboard.fleet.catalogue_services import accelerator_type_match, accelerator_types_sync
from accelboard.fleet.models import Accelerator, AcceleratorType, Host, Site, TelemetryRollup
from accelboard.serving.models import InferenceMetric

NOW = datetime(2026, 11, 29, 22, 0, tzinfo=UTC)
SMALL = {
    "hosts": 6,
    "days_runs": 20,
    "days_telemetry": 2,
    "telemetry_interval_s": 300,
    "serving_interval_s": 900,
}
SMALL_FLAGS = [
    "--hosts=6",
    "--days-runs=20",
    "--days-telemetry=2",
    "--telemetry-interval=300",
    "--serving-interval=900",
    "--now=2026-11-29T22:00:00Z",
]


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    # Fourteen PBKDF2 hashes take ~10 s on this machine; the logins are checked all the same.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def empty_telemetry(transactional_db: None) -> None:
    # The raw table is unmanaged, so the test database flush between tests does not empty it.
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE fleet_telemetrysample")


def _load(tmp_path: Path, *extra: str) -> str:
    out = StringIO()
    call_command("demo_fleet", *SMALL_FLAGS, f"--manifest={tmp_path / 'manifest.json'}", *extra, stdout=out)
    return out.getvalue()


def _config(**changes: Any) -> generator.DemoConfig:
    return generator.DemoConfig(now=NOW, **{**SMALL, **changes})


# --- Pure generation ----------------------------------------------------------------------------


def _everything(config: generator.DemoConfig) -> tuple[Any, ...]:
    hosts = generator.fleet_plan(config)
    events = generator.telemetry_events(config, hosts)
    telemetry = [generator.host_telemetry(config, host, events) for host in hosts]
    runs = history_generator.benchmark_runs(config, hosts)
    serving = history_generator.serving_metrics(config, hosts, events)
    return hosts, events, telemetry, runs, serving


def test_it_generates_identical_data_for_the_same_seed() -> None:
    hosts_a, events_a, telemetry_a, runs_a, serving_a = _everything(_config(seed=7))
    hosts_b, events_b, telemetry_b, runs_b, serving_b = _everything(_config(seed=7))
    assert hosts_a == hosts_b
    assert events_a == events_b
    assert runs_a == runs_b
    for one, two in zip(telemetry_a, telemetry_b, strict=True):
        assert np.array_equal(one.epochs, two.epochs)
        assert one.columns.keys() == two.columns.keys()
        for name in one.columns:
            assert np.array_equal(one.columns[name], two.columns[name]), name
    for one, two in zip(serving_a, serving_b, strict=True):
        for name in one.columns:
            assert np.array_equal(one.columns[name], two.columns[name]), name


def test_it_generates_different_data_for_another_seed() -> None:
    hosts_a, _, telemetry_a, runs_a, _ = _everything(_config(seed=7))
    hosts_b, _, telemetry_b, runs_b, _ = _everything(_config(seed=8))
    assert [h.hostname for h in hosts_a] == [h.hostname for h in hosts_b]
    assert {g.uuid for h in hosts_a for g in h.gpus}.isdisjoint({g.uuid for h in hosts_b for g in h.gpus})
    assert not np.array_equal(telemetry_a[0].columns["power_w"], telemetry_b[0].columns["power_w"])
    assert [r.metrics[0].value for r in runs_a] != [r.metrics[0].value for r in runs_b]


def test_it_keeps_gpu_uuids_stable_when_the_fleet_grows() -> None:
    small = generator.fleet_plan(_config(hosts=3))
    large = generator.fleet_plan(_config(hosts=20))
    assert large[:3] == small
    assert len({g.uuid for h in large for g in h.gpus}) == sum(len(h.gpus) for h in large)
    assert [h.hostname for h in large].count("reno-h100-04") == 1  # templates repeat with new numbers


def test_it_covers_every_catalogued_accelerator_type_in_the_smallest_full_set() -> None:
    hosts = generator.fleet_plan(_config(hosts=6))
    assert {host.gpu for host in hosts} == {entry["slug"] for entry in ACCELERATOR_TYPES}
    for host in hosts:
        expected = 8 if host.gpu in {"h100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "mi300x"} else None
        if expected:
            assert len(host.gpus) == expected
        else:
            assert 1 <= len(host.gpus) <= 4


def test_it_keeps_the_energy_counter_monotonic_except_the_injected_reset() -> None:
    config = _config(days_telemetry=3, telemetry_interval_s=60)
    hosts, events, telemetry, _, _ = _everything(config)
    negative = []
    for host, data in zip(hosts, telemetry, strict=True):
        energy = data.columns["energy_mj"].astype(np.float64)
        power = data.columns["power_w"].astype(np.float64)
        deltas = np.diff(energy, axis=1)
        dt = np.diff(data.epochs)
        for gpu_row, gpu_index in zip(*np.nonzero(deltas < 0), strict=True):
            negative.append((host.hostname, int(gpu_row), int(data.epochs[gpu_index + 1])))
        # Counter against integrated power over the stretches without a gap or the reset.
        ok = (dt == config.telemetry_interval_s)[None, :] & (deltas >= 0)
        integrated_j = (0.5 * (power[:, 1:] + power[:, :-1]) * dt[None, :] * ok).sum(axis=1)
        counted_j = (deltas * ok).sum(axis=1) / 1000.0
        assert np.all(np.abs(counted_j / integrated_j - 1) < 0.03), host.hostname
    assert negative == [(events.reset_host, events.reset_gpu_index, events.reset_time)]


def test_it_leaves_the_agent_outage_as_a_gap_and_throttles_one_host() -> None:
    config = _config()
    hosts, events, telemetry, _, _ = _everything(config)
    by_name = {data.hostname: data for data in telemetry}
    gap = by_name[events.gap_host]
    expected = (
        config.days_telemetry * 86400 // config.telemetry_interval_s - 7200 // config.telemetry_interval_s
    )
    assert gap.epochs.size == expected
    assert not np.any((gap.epochs >= events.gap_start) & (gap.epochs < events.gap_end))
    for data in telemetry:
        hot = (data.epochs >= events.throttle_start) & (data.epochs < events.throttle_end)
        thermal = (data.columns["throttle_reasons"] & 0x40) != 0
        if data.hostname == events.throttle_host:
            assert thermal[:, hot].all() and not thermal[:, ~hot].any()
            assert data.columns["temperature_c"][:, hot].min() >= 88
            assert (
                data.columns["sm_clock_mhz"][:, hot].mean()
                < 0.7 * data.columns["sm_clock_mhz"][:, ~hot].max()
            )
        else:
            assert not thermal.any()


def test_it_rejects_a_config_outside_its_limits_naming_the_field() -> None:
    with pytest.raises(ValueError, match="telemetry_interval_s"):
        _config(telemetry_interval_s=7)
    with pytest.raises(ValueError, match="serving_interval_s: must divide a day"):
        _config(serving_interval_s=700)
    with pytest.raises(ValueError, match="now"):
        generator.DemoConfig(now=datetime(2026, 11, 29, 22, 0))


# --- The catalogue ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_it_syncs_the_catalogue_idempotently_and_adopts_a_hand_made_row() -> None:
    # Migration 0004 seeds the catalogue; start from a database where someone made L4 by hand.
    AcceleratorType.objects.all().delete()
    AcceleratorType.objects.create(name="L4", slug="nvidia-l4", match_names=[])
    first = accelerator_types_sync()
    second = accelerator_types_sync()
    assert first == {"created": 5, "updated": 1}
    assert second == {"created": 0, "updated": 0}
    l4 = AcceleratorType.objects.get(name="L4")
    assert l4.slug == "l4" and l4.board_power_w == 72.0 and "NVIDIA L4" in l4.match_names
    assert AcceleratorType.objects.count() == len(ACCELERATOR_TYPES)
    assert AcceleratorType.objects.get(slug="mi300x").vendor == "amd"


@pytest.mark.django_db
def test_it_matches_driver_names_to_catalogue_types() -> None:
    accelerator_types_sync()
    for slug, kind in plan.GPU_KINDS.items():
        assert accelerator_type_match(name=kind["driver_name"]).slug == slug, kind["driver_name"]
    assert accelerator_type_match(name="NVIDIA L40S").slug == "l40s"  # not the shorter "L4"
    assert accelerator_type_match(name="DGX-H100-SXM-80GBx8_TRT").slug == "h100-sxm-80gb"
    assert accelerator_type_match(name="NVIDIA A100-SXM4-80GB").slug == "a100-sxm-80gb"


# --- Loading ------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_it_loads_a_small_fleet_through_the_real_write_paths(empty_telemetry: None, tmp_path: Path) -> None:
    output = _load(tmp_path)
    config = _config()
    hosts, events, telemetry, runs, serving = _everything(config)

    assert Host.objects.count() == 6 and Host.objects.filter(facts__demo=True, simulated=True).count() == 6
    assert Accelerator.objects.filter(parent_uuid="").count() == sum(len(h.gpus) for h in hosts)
    for entry in ACCELERATOR_TYPES:
        assert Accelerator.objects.filter(accelerator_type__slug=entry["slug"]).exists(), entry["slug"]
    assert Host.objects.filter(site__isnull=True).count() == 0
    assert Site.objects.count() == len(plan.SITES) == ElectricityPrice.objects.count()
    assert AcceleratorPrice.objects.count() == len(plan.PRICES)
    assert not AcceleratorPrice.objects.filter(price_per_hour__lte=0).exists()

    # Every sample is one minute rollup; only the last hours and the injected thermal fault are
    # kept raw (and the sample before each, which its first energy delta needs).
    assert TelemetryRollup.objects.filter(width_s=60).count() == sum(data.rows for data in telemetry)
    raw_from = config.telemetry_end - loader.RAW_HOURS * 3600
    raw_from -= raw_from % 3600
    windows = [(events.throttle_start, events.throttle_end), (raw_from, config.telemetry_end)]
    assert events.throttle_end < raw_from
    raw = 0
    for host, data in zip(hosts, telemetry, strict=True):
        for start, end in windows:
            inside = int(((data.epochs >= start) & (data.epochs < end)).sum())
            raw += len(host.gpus) * (inside + 1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), min(time) FROM fleet_telemetrysample")
        count, first = cursor.fetchone()
    assert count == raw and first < datetime.fromtimestamp(raw_from, UTC)
    assert TelemetryRollup.objects.filter(width_s=3600).exists()
    hot = TelemetryRollup.objects.filter(
        width_s=3600, host__hostname=events.throttle_host, throttled_samples__gt=0
    )
    assert hot.exists()
    gpu = Accelerator.objects.get(uuid=hosts[0].gpus[0].uuid)
    assert gpu.last_state["energy_mj"] == int(telemetry[0].columns["energy_mj"][0, -1])

    # The benchmark plan's runs, besides the MLPerf Training results (tests/test_demo_training.py).
    planned = BenchmarkRun.objects.exclude(workload__scenario="training")
    assert planned.count() == len(benchmark_plan.BENCHMARKS) * 20 == len(runs)
    assert BenchmarkRun.objects.filter(uploaded_via="demo").count() == len(runs)
    assert MetricValue.objects.filter(run__in=planned).count() == sum(len(run.metrics) for run in runs)
    assert all(
        len(value) == benchmark_plan.SAMPLES_PER_METRIC
        for value in MetricValue.objects.filter(name="power_avg_w").values_list("samples", flat=True)
    )
    for series in Series.objects.all()[:20]:
        newest = series.points.order_by("-measured_at").first()
        assert series.last_value == newest.value and series.last_run_at == newest.measured_at
    # Beside the plan's deployments, the demo canaries' own intervals (accelboard.demo.canary).
    canaries = [variant for _, variant, *_ in demo_canary.CANARIES]
    assert InferenceMetric.objects.exclude(variant__name__in=canaries).count() == sum(
        s.epochs.size for s in serving
    )
    assert InferenceMetric.objects.filter(requests__gt=0, ttft_p99_ms__isnull=False).exists()

    job = JobRun.objects.get(name="demo_fleet")
    assert job.status == JobStatus.SUCCEEDED
    assert job.detail["manifest"] == json.loads((tmp_path / "manifest.json").read_text())
    assert "demo_fleet: loaded" in output and "llm-lead" in output and "demo-admin" in output


@pytest.mark.django_db(transaction=True)
def test_it_lists_each_injected_event_in_the_manifest_and_in_the_data(
    empty_telemetry: None, tmp_path: Path
) -> None:
    _load(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    events = {event["id"]: event for event in manifest["benchmark_events"]}
    regressions = [event for event in events.values() if event["kind"] == "regression"]
    assert len(regressions) >= 4 and all(event["expect_alert"] for event in regressions)
    assert events["mixtral-outlier"]["expect_alert"] is False

    def values(item: dict[str, Any]) -> np.ndarray:
        points = MetricValue.objects.filter(series_id=item["series_id"]).order_by("measured_at")
        return np.array(points.values_list("value", flat=True))

    for event in events.values():
        for item in event["series"]:
            series = Series.objects.get(pk=item["series_id"])
            assert (series.metric, series.workload.variant.name, series.accelerator_type.slug) == (
                item["metric"],
                item["variant"],
                item["accelerator"],
            )
            if event["kind"] == "drift":
                continue
            data = values(item)
            start, end = event["start_day"], event["end_day"]
            before = np.median(data[:start])
            during = np.median(data[start : end if end is not None else None])
            assert during / before - 1 == pytest.approx(item["pct"] / 100, abs=0.025), (
                event["id"],
                item["metric"],
            )
            if end is not None:
                assert np.median(data[end:]) / before == pytest.approx(1.0, abs=0.025)
    named = {item["series_id"] for event in events.values() for item in event["series"]}
    quiet = set(manifest["series_without_events"])
    planned = Series.objects.exclude(workload__scenario="training")  # the MLPerf Training results' aside
    assert quiet.isdisjoint(named) and quiet | named == set(planned.values_list("pk", flat=True))
    for series_id in list(quiet)[:40]:
        data = np.array(
            MetricValue.objects.filter(series_id=series_id)
            .order_by("measured_at")
            .values_list("value", flat=True)
        )
        # Noise only (at most 3% per sample, averaged over repeats): no night 12% off the median,
        # and the two halves of the window agree.
        assert np.all(np.abs(data / np.median(data) - 1) < 0.12), series_id
        assert abs(np.median(data[len(data) // 2 :]) / np.median(data[: len(data) // 2]) - 1) < 0.03, (
            series_id
        )
    first = BenchmarkRun.objects.get(uuid=events["llama8b-fp8-throughput-drop"]["first_run_uuid"])
    assert "llama8b-fp8-throughput-drop" in first.context["events"]

    drift = events["llama8b-int4-accuracy-drift"]
    accuracy = values(drift["series"][0])
    days = np.arange(accuracy.size)
    after = days >= drift["start_day"]
    slope = np.polyfit(days[after], accuracy[after], 1)[0] / accuracy[: drift["start_day"]].mean()
    assert slope * 100 == pytest.approx(drift["per_day_pct"], abs=0.015)

    # The counter reset is older than the raw hours: its minute has no energy (a counter that went
    # down is a new segment, not negative energy), and no other minute but each GPU's first lacks it.
    reset = next(event for event in manifest["telemetry_events"] if event["kind"] == "counter_reset")
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT a.uuid, r.bucket FROM fleet_telemetryrollup r JOIN fleet_accelerator a ON a.id = r.accelerator_id
            WHERE r.width_s = 60 AND r.energy_j IS NULL AND r.bucket > (
                SELECT min(f.bucket) FROM fleet_telemetryrollup f
                WHERE f.width_s = 60 AND f.accelerator_id = r.accelerator_id)
            """
        )
        drops = cursor.fetchall()
    assert [(uuid, moment.isoformat()) for uuid, moment in drops] == [(reset["gpu_uuid"], reset["time"])]


@pytest.mark.django_db(transaction=True)
def test_it_creates_every_role_with_its_membership(empty_telemetry: None, tmp_path: Path) -> None:
    _load(tmp_path)
    User = get_user_model()
    for team in plan.TEAMS:
        for role in plan.TEAM_ROLES:
            user = User.objects.get(username=f"{team['short']}-{role}")
            assert user.check_password(plan.demo_password(user.username))
            assert list(Membership.objects.filter(user=user).values_list("team__slug", "role")) == [
                (team["slug"], role)
            ]
    admin = User.objects.get(username="admin")
    assert admin.is_staff and admin.is_superuser and admin.check_password("demo-admin")
    outsider = User.objects.get(username="outsider")
    assert not outsider.is_staff and not Membership.objects.filter(user=outsider).exists()
    assert set(Membership.objects.values_list("team__slug", flat=True)) == {t["slug"] for t in plan.TEAMS}


@pytest.mark.django_db(transaction=True)
def test_it_does_nothing_when_run_again_without_reset(empty_telemetry: None, tmp_path: Path) -> None:
    _load(tmp_path)
    counts = (
        BenchmarkRun.objects.count(),
        MetricValue.objects.count(),
        Host.objects.count(),
        JobRun.objects.count(),
    )
    output = _load(tmp_path, "--seed=99")
    assert "nothing to do" in output and "--reset" in output
    assert (
        BenchmarkRun.objects.count(),
        MetricValue.objects.count(),
        Host.objects.count(),
        JobRun.objects.count(),
    ) == counts


def _snapshot() -> tuple[Any, ...]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), sum(power_w), sum(energy_mj), min(time), max(time) FROM fleet_telemetrysample"
        )
        telemetry = cursor.fetchone()
    values = list(
        MetricValue.objects.order_by("run__uuid", "name").values_list("run__uuid", "name", "value", "samples")
    )
    gpus = sorted(Accelerator.objects.values_list("uuid", "host__hostname", "serial"))
    serving = list(
        InferenceMetric.objects.order_by("host__hostname", "variant__name", "interval_start").values_list(
            "requests", "ttft_p99_ms"
        )
    )
    return telemetry, values, gpus, serving


@pytest.mark.django_db(transaction=True)
def test_it_rebuilds_identical_rows_with_reset_and_other_rows_for_another_seed(
    empty_telemetry: None, tmp_path: Path
) -> None:
    _load(tmp_path)
    first = _snapshot()
    _load(tmp_path, "--reset")
    assert _snapshot() == first
    assert Host.objects.count() == 6 and JobRun.objects.filter(status=JobStatus.SUCCEEDED).count() == 2
    _load(tmp_path, "--reset", "--seed=8")
    other = _snapshot()
    assert other[0][0] == first[0][0] and other[0] != first[0]
    assert other[1] != first[1] and other[2] != first[2]


def _rollups() -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Every GPU and host rollup, keyed by what it is of (ids differ between loads)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT r.width_s, a.uuid, r.bucket, h.hostname, r.samples, r.power_samples, r.power_avg_w,
                r.power_max_w, r.energy_j, r.gpu_util_samples, r.gpu_util_avg, r.gpu_util_max,
                r.mem_util_samples, r.mem_util_avg, r.mem_used_samples, r.mem_used_avg_bytes,
                r.mem_used_max_bytes, r.mem_total_bytes, r.temperature_max_c, r.sm_clock_samples,
                r.sm_clock_avg_mhz, r.mem_clock_samples, r.mem_clock_avg_mhz, r.throttled_samples,
                r.ecc_errors_max, r.xid_errors_max
            FROM fleet_telemetryrollup r JOIN fleet_accelerator a ON a.id = r.accelerator_id
            JOIN fleet_host h ON h.id = r.host_id
            """
        )
        rows = {("gpu", *row[:3]): row[3:] for row in cursor.fetchall()}
        cursor.execute(
            """
            SELECT r.width_s, h.hostname, r.bucket, t.slug, r.gpus, r.samples, r.power_samples,
                r.power_avg_w, r.power_sum_w, r.power_max_w, r.energy_j, r.gpu_util_samples,
                r.gpu_util_avg, r.gpu_util_max, r.temperature_max_c, r.throttled_samples
            FROM fleet_hostrollup r JOIN fleet_host h ON h.id = r.host_id
            JOIN fleet_acceleratortype t ON t.id = r.accelerator_type_id
            """
        )
        rows.update({("host", *row[:3]): row[3:] for row in cursor.fetchall()})
    return rows


def _rollup_schema() -> list[tuple[Any, ...]]:
    """The rollup tables' indexes, constraints and identity sequences, and any leftover copy."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT 'index', tablename, indexname, indexdef FROM pg_indexes
            WHERE tablename IN ('fleet_telemetryrollup', 'fleet_hostrollup')
            UNION ALL
            SELECT 'constraint', conrelid::regclass::text, conname, pg_get_constraintdef(oid)
            FROM pg_constraint
            WHERE conrelid IN ('fleet_telemetryrollup'::regclass, 'fleet_hostrollup'::regclass)
            UNION ALL
            SELECT 'sequence', t, pg_get_serial_sequence(t, 'id'), ''
            FROM unnest(ARRAY['fleet_telemetryrollup', 'fleet_hostrollup']) AS t
            UNION ALL
            SELECT 'table', relname, '', '' FROM pg_class WHERE relname LIKE 'fleet%%rollup%%'
            ORDER BY 1, 2, 3
            """
        )
        return cursor.fetchall()


@pytest.mark.django_db(transaction=True)
def test_it_writes_the_same_rollups_from_samples_as_the_ingest_path_from_raw(empty_telemetry: None) -> None:
    # Three days, so the recent and the older stage both write minute rollups straight from the
    # samples; the reference keeps every sample raw and rolls all of it up through the refresh.
    config = _config(days_telemetry=3, hosts=4, days_runs=10, telemetry_interval_s=120)
    loader.demo_fleet_load(config=config, raw_hours=None)
    schema = _rollup_schema()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM fleet_telemetrysample")
        all_raw = cursor.fetchone()[0]
    reference = _rollups()
    loader.demo_fleet_load(config=config, reset=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM fleet_telemetrysample")
        assert 0 < cursor.fetchone()[0] < all_raw / 10
    direct = _rollups()
    # The older days were loaded into fresh tables swapped in: same indexes, constraints, names.
    assert _rollup_schema() == schema
    assert direct.keys() == reference.keys()
    assert {kind for kind, width, *_ in reference} == {"gpu", "host"}
    assert {width for kind, width, *_ in reference} == {60, 3600}

    def same(got: Any, want: Any) -> bool:
        # Sums of the same floats in another order may differ in the last bits; nothing else may.
        if isinstance(got, float) and isinstance(want, float):
            return got == pytest.approx(want, rel=1e-9, abs=1e-9)
        return bool(got == want)

    different = [
        (key, direct[key], want)
        for key, want in reference.items()
        if not all(same(g, w) for g, w in zip(direct[key], want, strict=True))
    ]
    assert different == []
    # The injected events are in both: the counter reset (no energy in its minute) and the hot host.
    assert any(key[0] == "gpu" and key[1] == 60 and value[5] is None for key, value in direct.items())


@pytest.mark.django_db(transaction=True)
def test_it_rebuilds_a_load_that_was_interrupted(
    empty_telemetry: None, tmp_path: Path, monkeypatch: Any
) -> None:
    # A load killed after its first stages committed (SIGKILL, a power cut: no cleanup runs)
    # leaves demo rows but no finished job; the next load notices and rebuilds from scratch.
    def killed(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("killed")

    with monkeypatch.context() as patch:
        patch.setattr(history_generator, "serving_metrics", killed)
        patch.setattr(loader, "demo_fleet_reset", lambda: [])  # the cleanup a SIGKILL never runs
        with pytest.raises(RuntimeError, match="killed"):
            _load(tmp_path)
    assert Host.objects.filter(facts__demo=True).exists() and not loader.demo_fleet_loaded()
    output = _load(tmp_path)
    assert "an earlier load was interrupted" in output and "demo_fleet: loaded" in output
    assert loader.demo_fleet_loaded() and Host.objects.count() == 6
    planned = BenchmarkRun.objects.exclude(workload__scenario="training")
    assert planned.count() == len(benchmark_plan.BENCHMARKS) * 20


@pytest.mark.django_db(transaction=True)
def test_it_leaves_nothing_behind_when_a_step_fails(
    empty_telemetry: None, tmp_path: Path, monkeypatch: Any
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("serving generator exploded")

    monkeypatch.setattr(history_generator, "serving_metrics", broken)
    with pytest.raises(RuntimeError, match="exploded"):
        _load(tmp_path)
    assert not Host.objects.exists() and not BenchmarkRun.objects.exists()
    assert not get_user_model().objects.filter(username__in=loader.demo_usernames()).exists()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM fleet_telemetrysample")
        assert cursor.fetchone()[0] == 0
    job = JobRun.objects.get(name="demo_fleet")
    assert job.status == JobStatus.FAILED and "exploded" in job.error
    assert not (tmp_path / "manifest.json").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--hosts=0"], "--hosts must be between 1 and 500"),
        (["--days-runs=lots"], "--days-runs must be a whole number"),
        (["--now=2026-11-29T22:00:00"], "--now must carry a timezone"),
        (["--now=yesterday"], "--now must be an ISO 8601 time"),
        (["--telemetry-interval=700"], "--telemetry-interval: must divide a day"),
    ],
)
def test_it_rejects_bad_flags_naming_the_flag(flags: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("demo_fleet", *flags, stdout=StringIO())
    assert not Host.objects.exists() and not JobRun.objects.exists()


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--hosts=0", "--hosts must be between 1 and 500"),
        ("--serving-interval=7000", "--serving-interval must be"),
    ],
)
def test_it_exits_2_on_the_command_line_for_a_bad_flag(flag: str, message: str) -> None:
    manage = Path(__file__).resolve().parents[1] / "manage.py"
    done = subprocess.run(
        [sys.executable, str(manage), "demo_fleet", flag], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert message in done.stderr


@pytest.mark.django_db
def test_it_seeds_the_catalogue_on_migrate_so_a_fresh_server_knows_real_gpu_names() -> None:
    if not AcceleratorType.objects.exists():
        # A live-server (transactional) test earlier on this worker flushed every table, the data
        # migrations' rows too: run what migrate runs (0004 seeds, 0007 fills) on the empty table,
        # so that the test does not depend on the order the tests ran in.
        for module in ("0004_accelerator_catalogue", "0007_accelerator_product_form_factor"):
            migration = importlib.import_module(f"accelboard.fleet.migrations.{module}")
            (operation,) = [op for op in migration.Migration.operations if hasattr(op, "code")]
            operation.code(django_apps, None)
    assert set(AcceleratorType.objects.values_list("slug", flat=True)) >= {
        t["slug"] for t in ACCELERATOR_TYPES
    }
    assert accelerator_type_match(name="NVIDIA H100 80GB HBM3").slug == "h100-sxm-80gb"
