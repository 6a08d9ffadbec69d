"""POST /api/v1/prometheus/write: dcgm-exporter's profiling counters (DCGM_FI_PROF_*), PCIe replays
and remapped rows stored, and the framebuffer's total right when its parts come in different
requests."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from accelboard.fleet.models import Accelerator, TelemetryRollup, TelemetrySample
from accelboard.fleet.remote_write import MIB
from accelboard.fleet.rollup_services import telemetry_rollups_drain
from tests.api.test_prometheus_write import GPU, _post
from tests.fleet.prom_wire import snappy, write_request

pytestmark = pytest.mark.django_db

OTHER = {**GPU, "UUID": "GPU-rw-0002", "gpu": "1"}  # sends no profiling counter
PROF = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gr_engine_active", 0.9),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active", 0.8),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy", 0.4),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active", 0.5),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active", 0.3),
}


def _minute_start() -> int:
    """A whole minute three minutes ago, in ms: four scrapes 15 s apart fall inside it."""
    return (int(time.time()) // 60 - 3) * 60_000


def _profiling_scrape(ms: int, k: int) -> list[tuple[dict[str, str], list]]:
    series = [({"__name__": name, **GPU}, [(ms, base + 0.01 * k)]) for name, (_, base) in PROF.items()]
    series += [
        ({"__name__": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", **GPU}, [(ms, 7.0 + k)]),
        ({"__name__": "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", **GPU}, [(ms, 2.0)]),
        ({"__name__": "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", **GPU}, [(ms, 0.0)]),
        ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **GPU}, [(ms, 300.0)]),
        ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **OTHER}, [(ms, 200.0)]),
    ]
    return series


def test_it_stores_profiling_counters_in_percent_and_rolls_up_their_means(
    client: Client, ingest_token: str
) -> None:
    start = _minute_start()
    body = write_request([one for k in range(4) for one in _profiling_scrape(start + 15_000 * k, k)])
    response = _post(client, snappy(body), ingest_token)
    assert response.status_code == 200, response.content
    assert response.json()["unknown"] == 0 and response.json()["stored"] == 8
    rows = list(
        TelemetrySample.objects.filter(accelerator__uuid="GPU-rw-0001")
        .order_by("time")
        .values(*(field for field, _ in PROF.values()), "pcie_replay_errors", "remapped_rows_correctable",
                "remapped_rows_uncorrectable")
    )  # fmt: skip
    assert len(rows) == 4
    for k, row in enumerate(rows):
        for field, base in PROF.values():
            assert row[field] == pytest.approx((base + 0.01 * k) * 100, rel=1e-6), (field, k)
        assert (row["pcie_replay_errors"], row["remapped_rows_correctable"]) == (7 + k, 2)
        assert row["remapped_rows_uncorrectable"] == 0
    # The GPU that sent no profiling counter has none stored: NULL, never 0.
    silent_rows = TelemetrySample.objects.filter(accelerator__uuid="GPU-rw-0002")
    assert len(silent_rows) == 4
    assert all(getattr(row, field) is None for row in silent_rows for field, _ in PROF.values())
    assert Accelerator.objects.get(uuid="GPU-rw-0001").last_state["sm_active"] == pytest.approx(83.0)

    telemetry_rollups_drain()
    minute = TelemetryRollup.objects.get(width_s=60, accelerator__uuid="GPU-rw-0001")
    for field, base in PROF.values():
        assert getattr(minute, f"{field}_samples") == 4
        # The mean of base + 0, .01, .02, .03, in %.
        assert getattr(minute, f"{field}_avg") == pytest.approx((base + 0.015) * 100, rel=1e-6), field
    silent = TelemetryRollup.objects.get(width_s=60, accelerator__uuid="GPU-rw-0002")
    assert silent.sm_active_samples == 0 and silent.sm_active_avg is None
    # The hour rollup (the drain's) re-weights the minutes' means by their counts.
    hour = TelemetryRollup.objects.get(width_s=3600, accelerator__uuid="GPU-rw-0001")
    assert hour.tensor_active_samples == 4 and hour.tensor_active_avg == pytest.approx(51.5, rel=1e-6)


# A scrape's framebuffer parts, cut over requests as Prometheus may cut them (MiB).
USED, FREE, RESERVED = 1000.0, 80000.0, 527.0
TOTAL = int(USED + FREE + RESERVED) * MIB


def _fb(ms: int, *names: str) -> list[tuple[dict[str, str], list]]:
    values = {
        "DCGM_FI_DEV_FB_USED": USED,
        "DCGM_FI_DEV_FB_FREE": FREE,
        "DCGM_FI_DEV_FB_RESERVED": RESERVED,
        "DCGM_FI_DEV_POWER_USAGE": 250.0,
    }
    return [({"__name__": name, **GPU}, [(ms, values[name])]) for name in names]


@pytest.mark.parametrize(
    "requests",
    [
        (("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE"), ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")),
        (("DCGM_FI_DEV_FB_FREE",), ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_POWER_USAGE")),
        (("DCGM_FI_DEV_FB_USED",), ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE"), ("DCGM_FI_DEV_FB_RESERVED",)),
        (("DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_POWER_USAGE"), ("DCGM_FI_DEV_FB_FREE",), ("DCGM_FI_DEV_FB_USED",)),
    ],
    ids=["used-then-free", "free-then-used", "reserved-last", "used-last"],
)  # fmt: skip
def test_it_computes_the_memory_total_when_the_framebuffer_parts_come_in_different_requests(
    client: Client, ingest_token: str, requests: tuple[tuple[str, ...], ...]
) -> None:
    ms = _minute_start() + 5_000
    for names in requests:
        response = _post(client, snappy(write_request(_fb(ms, *names))), ingest_token)
        assert response.status_code == 200, response.content
    row = TelemetrySample.objects.get()
    assert (row.mem_used_bytes, row.mem_free_bytes, row.mem_reserved_bytes) == (
        int(USED) * MIB,
        int(FREE) * MIB,
        int(RESERVED) * MIB,
    )
    assert row.mem_total_bytes == TOTAL
    assert Accelerator.objects.get(uuid=GPU["UUID"]).last_state["mem_total_bytes"] == TOTAL
    telemetry_rollups_drain()
    assert TelemetryRollup.objects.get(width_s=60).mem_total_bytes == TOTAL


def test_a_total_is_not_guessed_from_one_part(client: Client, ingest_token: str) -> None:
    ms = _minute_start() + 5_000
    _post(
        client, snappy(write_request(_fb(ms, "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED"))), ingest_token
    )
    row = TelemetrySample.objects.get()
    assert row.mem_used_bytes == int(USED) * MIB and row.mem_total_bytes is None
    assert "mem_total_bytes" not in Accelerator.objects.get(uuid=GPU["UUID"]).last_state


def test_it_keeps_a_profiling_ratio_dcgm_reports_over_one_and_refuses_an_absurd_one(
    client: Client, ingest_token: str
) -> None:
    # DCGM reports SM activity over 1 for some MIG instances (NVIDIA/DCGM#152): stored as sent,
    # not a refusal that would make Prometheus drop the whole request.
    ms = _minute_start() + 5_000
    mig = {**GPU, "GPU_I_ID": "1", "GPU_I_PROFILE": "1g.10gb"}
    over = [({"__name__": "DCGM_FI_PROF_SM_ACTIVE", **mig}, [(ms, 1.4)])]
    assert _post(client, snappy(write_request(over)), ingest_token).status_code == 200
    assert TelemetrySample.objects.get().sm_active == pytest.approx(140.0)
    absurd = [({"__name__": "DCGM_FI_PROF_DRAM_ACTIVE", **GPU}, [(ms + 15_000, 12.0)])]
    response = _post(client, snappy(write_request(absurd)), ingest_token)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "between 0 and 1000" in message and "DCGM_FI_PROF_DRAM_ACTIVE{" in message
    assert TelemetrySample.objects.count() == 1
