"""POST /api/v1/prometheus/write: remote-write of dcgm-exporter series into telemetry."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import close_old_connections, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from accelboard.core.pipeline_selectors import pipeline_status
from accelboard.fleet import ingest_services, remote_write_services
from accelboard.fleet.models import (
    Accelerator,
    Host,
    PrometheusUnknownMetric,
    TelemetryRollup,
    TelemetrySample,
)
from accelboard.fleet.remote_write import MIB
from accelboard.fleet.rollup_services import telemetry_rollups_drain
from tests.api.conftest import row_counts
from tests.fleet.prom_wire import STALE_NAN, snappy, write_request

pytestmark = pytest.mark.django_db

URL = "/api/v1/prometheus/write"
GPU = {"UUID": "GPU-rw-0001", "Hostname": "prom-node-01", "gpu": "0", "modelName": "NVIDIA H100 80GB HBM3"}


def _post(
    client: Client,
    body: bytes,
    token: str | None,
    content_type: str = "application/x-protobuf",
    **headers: Any,
) -> Any:
    extra = {"HTTP_CONTENT_ENCODING": "snappy", "HTTP_X_PROMETHEUS_REMOTE_WRITE_VERSION": "0.1.0", **headers}
    if token:
        extra["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client.post(URL, data=body, content_type=content_type, **extra)


def _scrape(ms: int, k: int = 0, labels: dict[str, str] | None = None) -> list[tuple[dict[str, str], list]]:
    labels = labels or GPU
    values = {
        "DCGM_FI_DEV_POWER_USAGE": 300.0 + k,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 5_000_000.0 + 300_000 * k,
        "DCGM_FI_DEV_GPU_UTIL": 90.0,
        "DCGM_FI_DEV_FB_USED": 1000.0,
        "DCGM_FI_DEV_FB_FREE": 80000.0,
        "DCGM_FI_DEV_GPU_TEMP": 55.0,
    }
    return [({"__name__": name, **labels}, [(ms, value)]) for name, value in values.items()]


def test_it_stores_dcgm_samples_as_telemetry_rows(client: Client, ingest_token: str, team: Any) -> None:
    now = int(time.time() * 1000) - 30_000
    other = {**GPU, "UUID": "GPU-rw-0002", "gpu": "1"}
    body = write_request(
        _scrape(now, 0) + _scrape(now + 15_000, 1) + _scrape(now, 7, other)
        + [({"__name__": "up", "instance": "x"}, [(now, 1.0)])]
    )  # fmt: skip
    response = _post(client, snappy(body), ingest_token)
    assert response.status_code == 200, response.content
    assert response.json() == {
        "series": 19,
        "samples": 18,
        "stored": 3,
        "duplicate_samples": 0,
        "duplicate": False,
        "unknown": 1,
        "refused": 0,
    }
    host = Host.objects.get(hostname="prom-node-01")
    assert host.team_id == team.pk
    gpus = {gpu.uuid: gpu for gpu in Accelerator.objects.filter(host=host)}
    assert set(gpus) == {"GPU-rw-0001", "GPU-rw-0002"}
    assert gpus["GPU-rw-0002"].index == 1
    rows = list(
        TelemetrySample.objects.filter(accelerator=gpus["GPU-rw-0001"])
        .order_by("time")
        .values(
            "power_w", "energy_mj", "gpu_util", "mem_used_bytes", "mem_total_bytes", "temperature_c", "time"
        )
    )
    assert [row["power_w"] for row in rows] == [300.0, 301.0]
    assert [row["energy_mj"] for row in rows] == [5_000_000, 5_300_000]
    assert rows[0]["mem_used_bytes"] == 1000 * MIB and rows[0]["mem_total_bytes"] == 81000 * MIB
    assert rows[0]["gpu_util"] == 90.0 and rows[0]["temperature_c"] == 55.0
    assert [row["time"].timestamp() for row in rows] == [now / 1000, (now + 15_000) / 1000]
    assert TelemetrySample.objects.get(accelerator=gpus["GPU-rw-0002"]).power_w == 307.0
    # The unmapped metric is counted where the pipeline status shows it.
    (check,) = [c for c in pipeline_status().checks if c.name == "prometheus.unknown_samples"]
    assert check.value == 1 and check.detail["top"] == {"up": 1} and check.ok


def test_it_counts_unknown_metrics_by_name_once_per_request_and_keeps_a_bounded_number_of_names(
    client: Client, ingest_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = int(time.time() * 1000) - 10_000
    up = ({"__name__": "up", "instance": "x"}, [(now, 1.0), (now + 1000, 1.0)])
    body = snappy(write_request(_scrape(now) + [up, ({"__name__": "go_goroutines"}, [(now, 9.0)])]))
    _post(client, body, ingest_token)
    _post(client, body, ingest_token)  # sent again: stored and counted once
    _post(client, snappy(write_request(_scrape(now + 1000) + [up])), ingest_token)
    assert dict(PrometheusUnknownMetric.objects.values_list("name", "samples")) == {
        "up": 4,
        "go_goroutines": 1,
    }
    monkeypatch.setattr(remote_write_services, "UNKNOWN_METRICS_KEPT", 2)
    more = [({"__name__": "new_metric"}, [(now, 1.0)]), up]
    _post(client, snappy(write_request(_scrape(now + 2000) + more)), ingest_token)
    assert dict(PrometheusUnknownMetric.objects.values_list("name", "samples")) == {
        "up": 6,
        "go_goroutines": 1,
    }


def test_it_stores_a_retried_request_once(client: Client, ingest_token: str) -> None:
    now = int(time.time() * 1000) - 10_000
    body = snappy(write_request(_scrape(now)))
    first = _post(client, body, ingest_token)
    again = _post(client, body, ingest_token)
    assert first.json()["stored"] == 1 and first.json()["duplicate"] is False
    assert again.status_code == 200 and again.json()["stored"] == 0 and again.json()["duplicate"] is True
    assert TelemetrySample.objects.count() == 1


def test_it_skips_stale_markers(client: Client, ingest_token: str) -> None:
    now = int(time.time() * 1000) - 10_000
    labels = {"__name__": "DCGM_FI_DEV_POWER_USAGE", **GPU}
    response = _post(
        client, snappy(write_request([(labels, [(now, 250.0), (now + 1000, STALE_NAN)])])), ingest_token
    )
    assert response.status_code == 200 and response.json()["samples"] == 1
    assert list(TelemetrySample.objects.values_list("power_w", flat=True)) == [250.0]


def _refused(client: Client, token: str, body: bytes, status: int, **headers: Any) -> dict[str, Any]:
    before = row_counts()
    response = _post(client, body, token, **headers)  # content_type among them, where given
    assert response.status_code == status, response.content
    assert row_counts() == before
    return response.json()["error"]


def test_it_refuses_bad_bodies_and_stores_nothing(client: Client, ingest_token: str, settings: Any) -> None:
    now = int(time.time() * 1000) - 10_000
    assert _refused(client, ingest_token, b"\x10plain text", 400)["code"] == "bad_encoding"
    assert _refused(client, ingest_token, snappy(b"\x0a\xff\x01abc"), 400)["code"] == "bad_protobuf"
    good = snappy(write_request(_scrape(now)))
    assert (
        _refused(client, ingest_token, good, 415, HTTP_CONTENT_ENCODING="gzip")["code"]
        == "unsupported_media_type"
    )
    v2 = "application/x-protobuf;proto=io.prometheus.write.v2.Request"
    error = _refused(client, ingest_token, good, 415, content_type=v2)
    assert "remote-write 1.0" in error["message"]
    settings.PROMETHEUS_WRITE_MAX_BYTES = 64
    error = _refused(client, ingest_token, good, 413)
    assert error["code"] == "too_large" and "64 bytes" in error["message"]


def test_it_refuses_a_request_with_one_bad_series_naming_it_and_stores_none_of_it(
    client: Client, ingest_token: str
) -> None:
    now = int(time.time() * 1000) - 10_000
    nan = ({"__name__": "DCGM_FI_DEV_GPU_TEMP", **GPU, "gpu": "5", "UUID": "GPU-bad"}, [(now, float("nan"))])
    error = _refused(client, ingest_token, snappy(write_request(_scrape(now) + [nan])), 400)
    assert error["code"] == "not_finite"
    assert 'DCGM_FI_DEV_GPU_TEMP{Hostname="prom-node-01", UUID="GPU-bad"' in error["message"]
    # Valid on the wire, refused by the telemetry path: another host's samples, stored first,
    # are rolled back with it; the message names the series, not the generated batch's field.
    second_host = _scrape(now, labels={**GPU, "Hostname": "prom-node-02", "UUID": "GPU-rw-0009"})
    negative = ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **GPU}, [(now, -5.0)])
    error = _refused(client, ingest_token, snappy(write_request(second_host + [negative])), 400)
    assert "between 0 and 100000" in error["message"]
    assert 'series DCGM_FI_DEV_POWER_USAGE{Hostname="prom-node-01", UUID="GPU-rw-0001"' in error["message"]
    future = _scrape(now + 3_600_000)
    error = _refused(client, ingest_token, snappy(write_request(future)), 400)
    assert "in the future" in error["message"] and "prom-node-01" in error["message"]
    no_gpu = ({"__name__": "DCGM_FI_DEV_POWER_USAGE", "Hostname": "prom-node-01"}, [(now, 5.0)])
    error = _refused(client, ingest_token, snappy(write_request([no_gpu])), 400)
    assert "names no GPU" in error["message"]


def test_a_value_out_of_range_once_scaled_is_refused_on_both_paths(client: Client, ingest_token: str) -> None:
    """1e305 MiB is finite, its bytes are not: a 400 naming the series (Prometheus does not retry
    it), not a 500; the first time through the two-pass path, then through the one pass of
    series already cached."""
    now = int(time.time() * 1000) - 20_000
    series = {"__name__": "DCGM_FI_DEV_FB_USED", **GPU}
    for stamp in (now, now + 1000):
        body = snappy(write_request([(series, [(stamp, 1e305)])]))
        error = _refused(client, ingest_token, body, 400)
        assert error["code"] == "out_of_range" and "mem_used_bytes" in error["message"]
        assert 'DCGM_FI_DEV_FB_USED{Hostname="prom-node-01"' in error["message"]
        ok = snappy(write_request([(series, [(stamp, 512.0)])]))
        assert _post(client, ok, ingest_token).status_code == 200
    assert sorted(TelemetrySample.objects.values_list("mem_used_bytes", flat=True)) == [512 << 20] * 2


def test_it_refuses_a_gpu_of_another_team_but_not_its_host_name(
    client: Client, team: Any, other_team: Any, ingest_token: str, other_token: str
) -> None:
    now = int(time.time() * 1000) - 10_000
    assert _post(client, snappy(write_request(_scrape(now))), ingest_token).status_code == 200
    error = _refused(client, other_token, snappy(write_request(_scrape(now + 1000))), 409)
    assert error["code"] == "accelerator_conflict"
    assert TelemetrySample.objects.count() == 1
    # The same host name with the other team's own GPU: its own host, as for a name nobody uses.
    theirs = _scrape(now + 1000, labels={**GPU, "UUID": "GPU-rw-theirs"})
    assert _post(client, snappy(write_request(theirs)), other_token).status_code == 200
    assert sorted(Host.objects.filter(hostname="prom-node-01").values_list("team_id", flat=True)) == sorted(
        [team.pk, other_team.pk]
    )


def test_it_needs_a_write_token(client: Client, read_token: str) -> None:
    body = snappy(write_request(_scrape(int(time.time() * 1000))))
    assert _post(client, body, None).status_code == 401
    assert _post(client, body, read_token).status_code == 403


# A scrape that Prometheus splits over two requests: power and utilization in one, the energy
# counter and memory in the other.
_HALF_A = ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP")
_HALF_B = ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")
_FIELDS = ("time", "power_w", "energy_mj", "gpu_util", "mem_used_bytes", "mem_total_bytes", "temperature_c")


def _scrapes(start_ms: int, names: tuple[str, ...] | None = None) -> list[tuple[dict[str, str], list]]:
    """Four scrapes 15 s apart of two GPUs, only the series ``names`` (all when None)."""
    other = {**GPU, "UUID": "GPU-rw-0002", "gpu": "1"}
    series = [
        one
        for k in range(4)
        for labels in (GPU, other)
        for one in _scrape(start_ms + 15_000 * k, k + (10 if labels is other else 0), labels)
    ]
    return [one for one in series if names is None or one[0]["__name__"] in names]


def _stored() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The raw rows and the minute rollups (after a drain of the dirty ranges), by GPU and time."""
    telemetry_rollups_drain()
    rows = list(
        TelemetrySample.objects.order_by("accelerator__uuid", "time").values_list(
            "accelerator__uuid", *_FIELDS
        )
    )
    minutes = list(
        TelemetryRollup.objects.filter(width_s=60)
        .order_by("accelerator__uuid", "bucket")
        .values_list(
            "accelerator__uuid", "bucket", "samples", "power_samples", "energy_j", "mem_used_samples"
        )
    )
    return rows, minutes


@pytest.mark.parametrize(
    "order", [(_HALF_A, _HALF_B), (_HALF_B, _HALF_A)], ids=["power-first", "energy-first"]
)
def test_it_merges_the_halves_of_a_scrape_sent_in_two_requests(
    client: Client, ingest_token: str, order: tuple[tuple[str, ...], tuple[str, ...]]
) -> None:
    start = (int(time.time()) // 60 - 3) * 60_000 + 5_000  # four scrapes within one minute
    whole = _post(client, snappy(write_request(_scrapes(start))), ingest_token)
    assert whole.json()["stored"] == 8
    expected_rows, expected_minutes = _stored()
    TelemetrySample.objects.all().delete()
    TelemetryRollup.objects.all().delete()

    first, second = (snappy(write_request(_scrapes(start, names))) for names in order)
    assert _post(client, first, ingest_token).json()["stored"] == 8
    assert _post(client, second, ingest_token).json()["stored"] == 8
    again = _post(client, second, ingest_token)  # a retried half stores nothing twice
    assert again.json() == {**again.json(), "stored": 0, "duplicate": True}
    rows, minutes = _stored()
    assert len(rows) == 8  # one row per GPU-instant, with every field
    assert rows == expected_rows
    assert all(value is not None for row in rows for value in row)
    assert minutes == expected_minutes
    (gpu0,) = [m for m in minutes if m[0] == "GPU-rw-0001"]
    assert gpu0[2:5] == (4, 4, pytest.approx(3 * 300_000 / 1000))  # mJ counter: 300 J a scrape
    state = Accelerator.objects.get(uuid="GPU-rw-0001").last_state
    assert state["power_w"] == 303.0 and state["energy_mj"] == 5_900_000


@pytest.mark.django_db(transaction=True)
def test_two_halves_stored_at_once_in_two_processes_make_one_row(team: Any, ingest_token: str) -> None:
    """The first half's transaction is held open after its store; the second, in another
    connection, waits for it (the host's lock) and then merges into its rows instead of copying."""
    start = (int(time.time()) // 60 - 3) * 60_000 + 5_000
    # The host, its GPUs and the day's partition exist already (another scrape, earlier).
    assert _post(Client(), snappy(write_request(_scrapes(start - 60_000))), ingest_token).status_code == 200
    first_stored, release = threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    def first() -> None:
        try:
            with transaction.atomic():
                results["first"] = remote_write_services.prometheus_write_ingest(
                    team_id=team.pk, body=snappy(write_request(_scrapes(start, _HALF_A)))
                )
                first_stored.set()
                release.wait(10)
        finally:
            close_old_connections()
            connection.close()

    def second() -> None:
        try:
            results["second"] = remote_write_services.prometheus_write_ingest(
                team_id=team.pk, body=snappy(write_request(_scrapes(start, _HALF_B)))
            )
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    assert first_stored.wait(10)
    threads[1].start()
    threads[1].join(1.0)
    assert threads[1].is_alive()  # waiting for the first half's transaction
    release.set()
    for thread in threads:
        thread.join(20)
    assert results["first"]["stored"] == results["second"]["stored"] == 8
    rows = list(
        TelemetrySample.objects.filter(time__gte=datetime.fromtimestamp(start / 1000, UTC)).values_list(
            *_FIELDS
        )
    )
    assert len(rows) == 8
    assert all(value is not None for row in rows for value in row)


@pytest.mark.django_db(transaction=True)
def test_requests_of_one_host_with_other_gpus_do_not_wait_for_each_other(
    team: Any, ingest_token: str
) -> None:
    """Prometheus's shards each carry a slice of every host, mostly other GPUs' series: a request
    of GPU 1 is stored while one of GPU 0 of the same host is held open (its GPU's lock, not the
    host's); a second request of GPU 0 waits for it; an agent's batch of the host (the host's
    lock exclusive) waits for it too. Then every row is there, each once."""
    start = (int(time.time()) // 60 - 3) * 60_000 + 5_000
    other = {**GPU, "UUID": "GPU-rw-0002", "gpu": "1"}
    # Pods on both GPUs: the attribution's read and write go under the same locks.
    pod = {"pod": "train-0", "namespace": "ml", "container": "main"}
    gpu0, gpu1 = {**GPU, **pod}, {**other, **pod}
    assert (
        _post(
            Client(),
            snappy(
                write_request(_scrape(start - 15_000, labels=gpu0) + _scrape(start - 15_000, labels=gpu1))
            ),
            ingest_token,
        ).status_code
        == 200
    )
    held, release = threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    def store(name: str, body: bytes, *, hold: bool = False) -> None:
        try:
            with transaction.atomic():
                results[name] = remote_write_services.prometheus_write_ingest(team_id=team.pk, body=body)
                if hold:
                    held.set()
                    release.wait(10)
        except Exception as exc:  # noqa: BLE001 - reported by the assertions below
            results[name] = exc
        finally:
            close_old_connections()
            connection.close()

    def agent() -> None:
        try:
            results["agent"] = ingest_services.telemetry_batch_ingest(
                team_id=team.pk,
                payload={
                    "batch_id": "agent-1",
                    "host": {"hostname": GPU["Hostname"]},
                    "accelerators": [{"uuid": GPU["UUID"], "index": 0}],
                    "samples": [{"time": start / 1000 + 30, "gpu": GPU["UUID"], "power_w": 100.0}],
                },
            )
        except Exception as exc:  # noqa: BLE001 - reported by the assertions below
            results["agent"] = exc
        finally:
            close_old_connections()
            connection.close()

    first = threading.Thread(
        target=store, args=("gpu0", snappy(write_request(_scrape(start, labels=gpu0)))), kwargs={"hold": True}
    )
    first.start()
    assert held.wait(10)
    beside = threading.Thread(target=store, args=("gpu1", snappy(write_request(_scrape(start, labels=gpu1)))))
    beside.start()
    beside.join(10)
    assert not beside.is_alive() and results["gpu1"]["stored"] == 1, results  # did not wait
    again = threading.Thread(
        target=store, args=("gpu0 again", snappy(write_request(_scrape(start + 15_000, labels=gpu0))))
    )
    waiting_agent = threading.Thread(target=agent)
    again.start()
    waiting_agent.start()
    again.join(1.0)
    waiting_agent.join(0.5)
    assert again.is_alive() and waiting_agent.is_alive()  # both wait for the held request
    release.set()
    for thread in (first, again, waiting_agent):
        thread.join(20)
    assert [results[name]["stored"] for name in ("gpu0", "gpu0 again")] == [1, 1], results
    assert results["agent"]["accepted"] == 1, results
    times = sorted(
        (uuid, moment.timestamp())
        for uuid, moment in TelemetrySample.objects.filter(
            time__gte=datetime.fromtimestamp(start / 1000, UTC)
        ).values_list("accelerator__uuid", "time")
    )
    assert times == [
        (GPU["UUID"], start / 1000),
        (GPU["UUID"], start / 1000 + 15),
        (GPU["UUID"], start / 1000 + 30),
        (other["UUID"], start / 1000),
    ]


@pytest.mark.django_db(transaction=True)
def test_two_requests_naming_two_hosts_in_opposite_orders_do_not_deadlock(
    team: Any, ingest_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prometheus's shards each carry a slice of every host: request 1 lists host A then B, request
    2 host B then A. Each waits, once it holds its merge locks, for the other to get there too:
    locks taken in the order listed would each hold one host's lock and wait for the other's (a
    deadlock, a 500). All a request's hosts' locks are taken in one statement, in one order, so the
    second waits for the first's whole request instead, and both are stored."""
    start = (int(time.time()) // 60 - 3) * 60_000 + 5_000
    host_a = {**GPU, "Hostname": "prom-node-a", "UUID": "GPU-rw-a"}
    host_b = {**GPU, "Hostname": "prom-node-b", "UUID": "GPU-rw-b"}

    def half(labels: dict[str, str], names: tuple[str, ...]) -> list[tuple[dict[str, str], list]]:
        return [s for s in _scrape(start, labels=labels) if s[0]["__name__"] in names]

    # The hosts and their GPUs exist already (an earlier scrape).
    earlier = _scrape(start - 15_000, labels=host_a) + _scrape(start - 15_000, labels=host_b)
    assert _post(Client(), snappy(write_request(earlier)), ingest_token).status_code == 200
    bodies = {
        "ab": snappy(write_request(half(host_a, _HALF_A) + half(host_b, _HALF_A))),
        "ba": snappy(write_request(half(host_b, _HALF_B) + half(host_a, _HALF_B))),
    }
    barrier = threading.Barrier(2)
    merge = ingest_services._merge_stored

    def after_the_locks(**kwargs: Any) -> set[int]:
        try:
            barrier.wait(3)  # the other request waits on this one's locks: it never comes
        except threading.BrokenBarrierError:
            pass
        return merge(**kwargs)

    monkeypatch.setattr(ingest_services, "_merge_stored", after_the_locks)
    results: dict[str, Any] = {}

    def send(name: str) -> None:
        try:
            results[name] = remote_write_services.prometheus_write_ingest(team_id=team.pk, body=bodies[name])
        except Exception as exc:  # noqa: BLE001 - the deadlock's OperationalError, reported below
            results[name] = exc
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=send, args=(name,)) for name in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert {name: result["stored"] for name, result in results.items() if isinstance(result, dict)} == {
        "ab": 2,
        "ba": 2,
    }, results
    rows = TelemetrySample.objects.filter(time=datetime.fromtimestamp(start / 1000, UTC)).values_list(
        *_FIELDS
    )
    assert len(rows) == 2 and all(value is not None for row in rows for value in row)


def test_a_request_of_many_hosts_runs_the_statements_of_a_request_of_one(
    client: Client, ingest_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All the hosts of a request go through the telemetry path in one pass: one claim statement,
    one lock statement, one merge, one COPY, one partials write, one live-state statement, however
    many hosts it carries (``ingest_services.telemetry_batches_ingest``)."""
    now = int(time.time() * 1000) - 60_000
    hosts = [{**GPU, "Hostname": f"prom-many-{n}", "UUID": f"GPU-many-{n}"} for n in range(6)]

    def scrape(ms: int, count: int) -> bytes:
        return snappy(write_request([s for labels in hosts[:count] for s in _scrape(ms, labels=labels)]))

    assert _post(client, scrape(now, 6), ingest_token).status_code == 200  # registered
    executed: list[str] = []
    copy = ingest_services.telemetry_copy
    execute = ingest_services._execute
    monkeypatch.setattr(ingest_services, "telemetry_copy", lambda **kw: executed.append("COPY") or copy(**kw))
    monkeypatch.setattr(
        ingest_services, "_execute", lambda sql, params: executed.append(sql) or execute(sql, params)
    )

    def statements(body: bytes) -> list[str]:
        with CaptureQueriesContext(connection) as captured:
            response = _post(client, body, ingest_token)
        assert response.status_code == 200, response.content
        found = [q["sql"].split()[0] for q in captured.captured_queries] + [s.split()[0] for s in executed]
        executed.clear()
        return sorted(found)

    one = statements(scrape(now + 15_000, 1))
    six = statements(scrape(now + 30_000, 6))
    assert one == six
    assert (
        TelemetrySample.objects.filter(time=datetime.fromtimestamp((now + 30_000) / 1000, UTC)).count() == 6
    )


def test_a_gpu_of_another_team_refuses_the_whole_request(
    client: Client, ingest_token: str, other_token: str
) -> None:
    now = int(time.time() * 1000) - 10_000
    # Hosts are registered in name order: ours first, then theirs refuses the request.
    theirs = {**GPU, "Hostname": "prom-node-zz", "UUID": "GPU-rw-theirs"}
    assert _post(client, snappy(write_request(_scrape(now, labels=theirs))), other_token).status_code == 200
    ours = _scrape(now, labels={**GPU, "Hostname": "prom-node-00", "UUID": "GPU-rw-ours"})
    error = _refused(client, ingest_token, snappy(write_request(ours + _scrape(now, labels=theirs))), 409)
    assert error["code"] == "accelerator_conflict" and "prom-node-zz" in error["message"]
    assert not Host.objects.filter(hostname="prom-node-00").exists()
    assert TelemetrySample.objects.count() == 1


def test_the_same_samples_in_another_request_are_counted_not_stored_nor_merged(
    client: Client, ingest_token: str
) -> None:
    """Another body (so another batch id) carrying samples whose fields are all stored: nothing
    written, not even a merge (whose raw range would make the rollups read raw rows), and counted;
    a half carrying a field the rows lack still merges (the test above)."""
    from accelboard.fleet.models import TelemetryRawRange

    start = (int(time.time()) // 60 - 3) * 60_000 + 5_000
    assert _post(client, snappy(write_request(_scrapes(start))), ingest_token).json()["stored"] == 8
    expected_rows, expected_minutes = _stored()
    ranges = TelemetryRawRange.objects.count()
    for body in (
        write_request([*_scrapes(start), ({"__name__": "up", **GPU}, [(start, 1.0)])]),
        write_request(_scrapes(start, _HALF_A)),
    ):
        answer = _post(client, snappy(body), ingest_token).json()
        assert (answer["stored"], answer["duplicate_samples"], answer["duplicate"]) == (0, 8, False)
    assert TelemetryRawRange.objects.count() == ranges
    assert _stored() == (expected_rows, expected_minutes)


def _merge_in_one_statement(
    *, accelerator_ids: list[int], times: list[datetime], columns: dict[str, list[Any]]
) -> tuple[set[int], set[int]]:
    """``ingest_services._merge_stored`` as it was before its probe: the merge statement over all
    the samples (the reference the probe's answers are held to)."""
    fields_carried = {name for name, values in columns.items() if any(v is not None for v in values)}
    if fields_carried & set(ingest_services._MEMORY_FIELDS):
        fields_carried.update(ingest_services._MEMORY_FIELDS)
    fields = tuple(name for name in ingest_services.SAMPLE_FIELDS if name in fields_carried) or ("power_w",)
    arrays = [
        [
            None
            if value is None
            else (int(value) if ingest_services.SAMPLE_FIELDS[name][0] else float(value))
            for value in columns[name]
        ]
        for name in fields
    ]
    start, end, gpus = min(times), max(times), sorted(set(accelerator_ids))
    rows = ingest_services._execute(
        ingest_services._merge_sql(fields),
        [accelerator_ids, times, *arrays, start, end, gpus, start, end, gpus],
    )
    return {int(n) - 1 for n, filled in rows if filled}, {int(n) - 1 for n, filled in rows if not filled}


def test_the_merge_probe_merges_and_counts_as_the_one_statement_did(
    client: Client, ingest_token: str
) -> None:
    """``_merge_stored`` runs its merge statement only for the samples whose GPU-instant has a
    stored row (its probe): the same samples merged and counted duplicate, the same stored rows
    and raw ranges as the statement over all of them, on a mix of new instants, instants whose
    row lacks the sample's fields and instants whose row has them all."""
    from accelboard.fleet.ingest_validation import SAMPLE_FIELDS
    from accelboard.fleet.models import TelemetryRawRange

    start = (int(time.time()) // 60 - 3) * 60_000 + 5_000
    assert _post(client, snappy(write_request(_scrapes(start, _HALF_A))), ingest_token).status_code == 200
    ids = dict(Accelerator.objects.values_list("uuid", "pk"))
    accelerator_ids: list[int] = []
    times: list[datetime] = []
    columns: dict[str, list[Any]] = {name: [] for name in SAMPLE_FIELDS}
    for k in (4, 0, 5, 1, 2, 3):  # instants 0-3 stored (half A), 4 and 5 new
        for uuid in ("GPU-rw-0001", "GPU-rw-0002"):
            for fields in ({"power_w": 300.0 + k}, {"energy_mj": 5_000_000 + k, "mem_used_bytes": k * MIB}):
                if k % 2 and "power_w" in fields:
                    continue  # odd instants: the new fields only
                accelerator_ids.append(ids[uuid])
                times.append(datetime.fromtimestamp((start + 15_000 * k) / 1000, UTC))
                for name in SAMPLE_FIELDS:
                    columns[name].append(fields.get(name))

    def outcome(merge: Any) -> Any:
        with transaction.atomic():
            point = transaction.savepoint()
            answer = merge(accelerator_ids=accelerator_ids, times=times, columns=columns)
            rows = list(
                TelemetrySample.objects.order_by("accelerator_id", "time").values_list(
                    "accelerator_id", "time", *SAMPLE_FIELDS
                )
            )
            ranges = list(TelemetryRawRange.objects.order_by("start").values_list("start", "end"))
            transaction.savepoint_rollback(point)
        return answer, rows, ranges

    expected = outcome(_merge_in_one_statement)
    (merged, duplicates), _, ranges = expected
    assert merged and duplicates and len(merged | duplicates) < len(times) and ranges
    assert outcome(ingest_services._merge_stored) == expected
    # Nothing stored at any instant: no merge statement, nothing merged.
    later = [moment.replace(year=moment.year + 1) for moment in times]
    assert ingest_services._merge_stored(accelerator_ids=accelerator_ids, times=later, columns=columns) == (
        set(),
        set(),
    )
