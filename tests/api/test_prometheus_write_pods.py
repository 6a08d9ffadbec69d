"""POST /api/v1/prometheus/write: dcgm-exporter's pod labels become the workload attribution
(accelboard/fleet/remote_write_pods.py, remote_write_services._pods_attribution)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import close_old_connections, connection, transaction
from django.test import Client

from accelboard.fleet import remote_write_services
from accelboard.fleet.models import Accelerator, GpuAttribution, TelemetrySample, Workload
from tests.api.conftest import row_counts
from tests.fleet.prom_wire import snappy, write_request

pytestmark = pytest.mark.django_db

URL = "/api/v1/prometheus/write"
UUID = "GPU-rw-pods-0001"
GPU = {"UUID": UUID, "Hostname": "prom-pods-01", "gpu": "0", "modelName": "NVIDIA H100 80GB HBM3"}
LLAMA = {"pod": "llama-8b-7f9c", "namespace": "serving", "container": "vllm"}
IDLE = {"pod": "", "namespace": "", "container": ""}
S = 15_000


def _post(client: Client, series: list[tuple[dict[str, str], list]], token: str) -> Any:
    return client.post(
        URL,
        data=snappy(write_request(series)),
        content_type="application/x-protobuf",
        HTTP_CONTENT_ENCODING="snappy",
        HTTP_X_PROMETHEUS_REMOTE_WRITE_VERSION="0.1.0",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def _series(metric: str, stamps: list[int], pod: dict[str, str], gpu: dict[str, str] | None = None) -> Any:
    return {"__name__": metric, **(gpu or GPU), **pod}, [(ms, 50.0) for ms in stamps]


def _scrape(stamps: list[int], pod: dict[str, str] = LLAMA, gpu: dict[str, str] | None = None) -> list[Any]:
    """Two series of the GPU at ``stamps``: what a request with whole scrapes carries."""
    return [_series(m, stamps, pod, gpu) for m in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE")]


def _intervals(t0: int) -> list[tuple[str, int, int, str, float, str]]:
    """Stored intervals: (device, start and end in ms after ``t0``, pod uid, share, basis)."""
    rows = GpuAttribution.objects.order_by("accelerator_id", "start").values_list(
        "accelerator_id", "start", "end", "workload_id", "share", "basis"
    )
    uuids = dict(Accelerator.objects.values_list("id", "uuid"))
    uids = dict(Workload.objects.values_list("id", "uid"))
    return [
        (uuids[a], round(s.timestamp() * 1000) - t0, round(e.timestamp() * 1000) - t0, uids[w], share, basis)
        for a, s, e, w, share, basis in rows
    ]


def _t0() -> int:
    return (int(time.time()) - 600) * 1000


def test_requests_in_sequence_extend_the_pods_interval_and_a_new_pod_starts_where_it_ends(
    client: Client, ingest_token: str
) -> None:
    t0 = _t0()
    assert _post(client, _scrape([t0, t0 + S]), ingest_token).status_code == 200
    assert _intervals(t0) == [(UUID, 0, 2 * S, "serving/llama-8b-7f9c", 1.0, "exclusive")]
    # The next request's instants continue the stored interval: its row is extended, not repeated,
    # and its workload's last seen moves with it (more than a minute later).
    assert _post(client, _scrape([t0 + k * S for k in range(2, 7)]), ingest_token).status_code == 200
    assert _intervals(t0) == [(UUID, 0, 7 * S, "serving/llama-8b-7f9c", 1.0, "exclusive")]
    other = {"pod": "ft-0", "namespace": "research", "container": "trainer"}
    assert _post(client, _scrape([t0 + 7 * S], other), ingest_token).status_code == 200
    assert _intervals(t0) == [
        (UUID, 0, 7 * S, "serving/llama-8b-7f9c", 1.0, "exclusive"),
        (UUID, 7 * S, 8 * S, "research/ft-0", 1.0, "exclusive"),
    ]
    workload = Workload.objects.get(uid="serving/llama-8b-7f9c")
    assert (workload.kind, workload.namespace, workload.name, workload.container) == (
        "pod", "serving", "llama-8b-7f9c", "vllm"
    )  # fmt: skip
    assert round(workload.last_seen_at.timestamp() * 1000) == t0 + 7 * S


def test_a_retry_or_another_request_of_the_same_instants_stores_nothing_twice(
    client: Client, ingest_token: str
) -> None:
    t0 = _t0()
    series = _scrape([t0, t0 + S])
    assert _post(client, series, ingest_token).json()["duplicate"] is False
    stored = _intervals(t0)
    assert _post(client, series, ingest_token).json()["duplicate"] is True
    # Other bytes, the same GPU-instants (the other series of the scrapes): nothing new either.
    other = [_series("DCGM_FI_DEV_GPU_TEMP", [t0, t0 + S], LLAMA)]
    assert _post(client, other, ingest_token).status_code == 200
    assert _intervals(t0) == stored == [(UUID, 0, 2 * S, "serving/llama-8b-7f9c", 1.0, "exclusive")]


def test_a_scrape_split_over_requests_with_other_steps_never_overlaps_or_conflicts(
    client: Client, ingest_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Scraped every 10 s, the setting says 15 s. Request A: both instants of the power series;
    # B: the second instant's utilisation alone (its step: 15 s); C: the third instant.
    t0 = _t0()
    power = [_series("DCGM_FI_DEV_POWER_USAGE", [t0, t0 + 10_000], LLAMA)]
    part = [_series("DCGM_FI_DEV_GPU_UTIL", [t0 + 10_000], LLAMA)]
    last = [_series("DCGM_FI_DEV_GPU_UTIL", [t0 + 20_000], LLAMA)]
    for series in (power, part, last):
        response = _post(client, series, ingest_token)
        assert response.status_code == 200, response.content
    # A: [0, 25 s); B: inside it, nothing; C: [20 s, 35 s) less what A holds, which extends A's.
    assert _intervals(t0) == [(UUID, 0, 35_000, "serving/llama-8b-7f9c", 1.0, "exclusive")]
    # Every row of the GPU-instants is there once.
    assert TelemetrySample.objects.count() == 3
    # Without leaving out what is stored, a later request's interval would conflict: a 409 that
    # Prometheus drops, telemetry and all.
    monkeypatch.setattr(remote_write_services, "pod_intervals_trim", lambda intervals, stored: intervals)
    again = [_series("DCGM_FI_DEV_MEM_CLOCK", [t0 + 20_000], LLAMA)]
    response = _post(client, again, ingest_token)
    assert response.status_code == 409, response.content


def test_an_idle_gpu_holds_nothing_and_a_new_pod_starts_where_the_old_one_left(
    client: Client, ingest_token: str
) -> None:
    t0 = _t0()
    other = {"pod": "ft-0", "namespace": "research", "container": "trainer"}
    series = _scrape([t0, t0 + S]) + _scrape([t0 + 2 * S], IDLE) + _scrape([t0 + 3 * S], other)
    assert _post(client, series, ingest_token).status_code == 200
    assert _intervals(t0) == [
        (UUID, 0, 2 * S, "serving/llama-8b-7f9c", 1.0, "exclusive"),
        (UUID, 3 * S, 4 * S, "research/ft-0", 1.0, "exclusive"),
    ]


def test_mig_instances_hold_their_own_pods_with_their_slices(client: Client, ingest_token: str) -> None:
    t0 = _t0()
    a100 = {**GPU, "UUID": "GPU-rw-a100", "modelName": "NVIDIA A100-SXM4-80GB", "GPU_I_PROFILE": "3g.40gb"}
    series = _scrape([t0], LLAMA, {**a100, "GPU_I_ID": "1"}) + _scrape([t0], IDLE, {**a100, "GPU_I_ID": "2"})
    assert _post(client, series, ingest_token).status_code == 200
    assert _intervals(t0) == [("GPU-rw-a100/gi1", 0, S, "serving/llama-8b-7f9c", 1.0, "exclusive")]
    slices = dict(Accelerator.objects.values_list("uuid", "compute_slices"))
    assert slices == {"GPU-rw-a100": 7, "GPU-rw-a100/gi1": 3, "GPU-rw-a100/gi2": 3}


def test_the_scrape_interval_setting_is_the_step_of_a_lone_instant(
    client: Client, ingest_token: str, settings: Any
) -> None:
    settings.PROMETHEUS_SCRAPE_INTERVAL_S = 30
    t0 = _t0()
    assert _post(client, _scrape([t0]), ingest_token).status_code == 200
    assert _intervals(t0) == [(UUID, 0, 30_000, "serving/llama-8b-7f9c", 1.0, "exclusive")]


def test_a_pod_label_with_a_control_character_is_a_400_naming_the_series_and_stores_nothing(
    client: Client, ingest_token: str
) -> None:
    before = row_counts()
    t0 = _t0()
    series = _scrape([t0]) + [_series("DCGM_FI_DEV_GPU_TEMP", [t0], {**LLAMA, "pod": "bad\x1bpod"})]
    response = _post(client, series, ingest_token)
    assert response.status_code == 400
    assert "DCGM_FI_DEV_GPU_TEMP{" in response.json()["error"]["message"]
    assert row_counts() == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("host_stored", [False, True], ids=["new host", "stored host"])
def test_two_requests_of_a_host_at_once_claim_each_moment_once(
    team: Any, ingest_token: str, host_stored: bool
) -> None:
    """The first request's transaction is held open after its store; the second (another
    connection: a part of the same scrapes, another step) waits for it (the host's attribution
    lock; a new host's, the lock on its name) and then sends only what the first left uncovered,
    instead of a conflicting interval."""
    t0 = _t0()
    # The day's partitions exist (another host's scrape, or this one's, earlier, idle).
    earlier = GPU if host_stored else {**GPU, "Hostname": "prom-pods-elsewhere", "UUID": "GPU-rw-pods-else"}
    assert (
        _post(Client(), [_series("DCGM_FI_DEV_GPU_UTIL", [t0 - S], IDLE, earlier)], ingest_token).status_code
        == 200
    )
    first_stored, release = threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    def run(name: str, series: list[Any], hold: bool) -> None:
        try:
            with transaction.atomic():
                results[name] = remote_write_services.prometheus_write_ingest(
                    team_id=team.pk, body=snappy(write_request(series))
                )
                if hold:
                    first_stored.set()
                    release.wait(10)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            results[name] = exc
        finally:
            close_old_connections()
            connection.close()

    power = [_series("DCGM_FI_DEV_POWER_USAGE", [t0, t0 + 10_000], LLAMA)]
    part = [_series("DCGM_FI_DEV_GPU_UTIL", [t0 + 10_000], LLAMA)]
    threads = [
        threading.Thread(target=run, args=("first", power, True)),
        threading.Thread(target=run, args=("second", part, False)),
    ]
    threads[0].start()
    assert first_stored.wait(10)
    threads[1].start()
    threads[1].join(1.0)
    assert threads[1].is_alive()  # waiting for the first request's transaction
    release.set()
    for thread in threads:
        thread.join(20)
    assert isinstance(results["first"], dict) and isinstance(results["second"], dict), results
    assert _intervals(t0) == [(UUID, 0, 25_000, "serving/llama-8b-7f9c", 1.0, "exclusive")]


def test_a_request_of_several_hosts_stores_and_extends_each_hosts_pods(
    client: Client, ingest_token: str
) -> None:
    t0 = _t0()
    second = {**GPU, "Hostname": "prom-pods-02", "UUID": "GPU-rw-pods-0002"}
    other = {"pod": "ft-0", "namespace": "research", "container": "trainer"}
    for k in range(3):  # a new host's first request, then two that extend its row
        series = _scrape([t0 + k * S]) + _scrape([t0 + k * S], other, second)
        assert _post(client, series, ingest_token).status_code == 200
    assert _intervals(t0) == [
        (UUID, 0, 3 * S, "serving/llama-8b-7f9c", 1.0, "exclusive"),
        ("GPU-rw-pods-0002", 0, 3 * S, "research/ft-0", 1.0, "exclusive"),
    ]
