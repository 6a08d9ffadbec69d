"""What attribution's ingest leaves out once it knows (``attribution_services``): a workload row
this process wrote as it is is not rewritten by every batch that repeats it (within
``WORKLOAD_SEEN_S``), and a batch's devices its own registration vouches for are not read again,
on the real database and the real ingest path."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from accelboard.fleet.attribution_services import WORKLOAD_SEEN_S, workloads_written
from accelboard.fleet.ingest_services import registrations
from accelboard.fleet.models import GpuAttribution, Workload

from .conftest import GPU_A, post_json, telemetry_payload

URL = "/api/v1/telemetry"
T = datetime(2026, 11, 29, 12, 0, tzinfo=UTC).timestamp()
POD = {
    "kind": "pod",
    "uid": "llm-serving/vllm-llama-7f9c",
    "namespace": "llm-serving",
    "name": "vllm-llama-7f9c",
    "labels": {"app": "vllm"},
}


@pytest.fixture(autouse=True)
def _caches() -> Iterator[None]:
    registrations.clear()
    workloads_written.clear()
    yield
    registrations.clear()
    workloads_written.clear()


def _batch(n: int, start: float, end: float, workload: dict[str, Any]) -> dict[str, Any]:
    payload = telemetry_payload(n=4, start=start, batch_id=f"node:spool:{n:09d}")
    payload["attribution"] = [
        {"gpu": GPU_A, "start": start, "end": end, "workload": workload, "share": 1.0, "basis": "exclusive"}
    ]
    return payload


def _post(client: Client, token: str, payload: dict[str, Any], capture: Any) -> int:
    """Post as a web process does (its commit's callbacks run); the workload upserts it ran."""
    with capture(execute=True), CaptureQueriesContext(connection) as captured:
        response = post_json(client, URL, payload, token)
    assert response.status_code == 200, response.content
    assert response.json()["attribution"] == 1
    return sum("INSERT INTO fleet_workload" in q["sql"] for q in captured.captured_queries)


def test_it_writes_a_repeated_workload_once_until_it_changes_or_its_time_moves_on(
    client: Client, team: Any, ingest_token: str, django_capture_on_commit_callbacks: Any
) -> None:
    capture = django_capture_on_commit_callbacks
    assert _post(client, ingest_token, _batch(1, T, T + 10, POD), capture) == 1
    # The next batches hold it on: the row already says so (last seen lags by < WORKLOAD_SEEN_S).
    assert _post(client, ingest_token, _batch(2, T + 10, T + 20, POD), capture) == 0
    assert _post(client, ingest_token, _batch(3, T + 20, T + 30, POD), capture) == 0
    pod = Workload.objects.get(uid=POD["uid"])
    assert (pod.first_seen_at, pod.last_seen_at) == (
        datetime.fromtimestamp(T, UTC),
        datetime.fromtimestamp(T + 10, UTC),
    )
    # Its labels changed: written at once.
    relabelled = copy.deepcopy(POD)
    relabelled["labels"]["app"] = "vllm-2"
    assert _post(client, ingest_token, _batch(4, T + 30, T + 40, relabelled), capture) == 1
    pod.refresh_from_db()
    assert pod.labels == {"app": "vllm-2"}
    assert pod.last_seen_at == datetime.fromtimestamp(T + 40, UTC)
    # Seen more than WORKLOAD_SEEN_S after what was written: written again.
    later = T + 40 + WORKLOAD_SEEN_S + 10
    assert _post(client, ingest_token, _batch(5, later - 10, later, relabelled), capture) == 1
    pod.refresh_from_db()
    assert pod.last_seen_at == datetime.fromtimestamp(later, UTC)
    assert Workload.objects.count() == 1


def test_a_rolled_back_batch_leaves_no_workload_remembered(
    client: Client, team: Any, ingest_token: str
) -> None:
    # No commit (the test's transaction): nothing is remembered, so the next batch writes it.
    with CaptureQueriesContext(connection) as first:
        assert post_json(client, URL, _batch(1, T, T + 10, POD), ingest_token).status_code == 200
    with CaptureQueriesContext(connection) as second:
        assert post_json(client, URL, _batch(2, T + 10, T + 20, POD), ingest_token).status_code == 200
    for captured in (first, second):
        assert sum("INSERT INTO fleet_workload" in q["sql"] for q in captured.captured_queries) == 1


def test_a_batch_without_samples_on_a_cached_registration_reads_its_devices(
    client: Client, team: Any, ingest_token: str
) -> None:
    assert post_json(client, URL, _batch(1, T, T + 10, POD), ingest_token).status_code == 200
    with_samples = _batch(2, T + 10, T + 20, POD)
    without = _batch(3, T + 20, T + 30, POD)
    without["samples"] = []
    with CaptureQueriesContext(connection) as vouched:
        assert post_json(client, URL, with_samples, ingest_token).status_code == 200
    with CaptureQueriesContext(connection) as read:
        assert post_json(client, URL, without, ingest_token).status_code == 200

    def device_checks(captured: CaptureQueriesContext) -> int:
        return sum("JOIN fleet_host h ON h.id = a.host_id" in q["sql"] for q in captured.captured_queries)

    # With samples, the batch's final statement confirms the cached devices; without, nothing
    # would: they are read.
    assert (device_checks(vouched), device_checks(read)) == (0, 1)


def test_a_remembered_workload_no_longer_stored_as_it_was_is_written_again(
    client: Client, team: Any, ingest_token: str, django_capture_on_commit_callbacks: Any
) -> None:
    """The cache outlives its rows when a workload is deleted or the database is reset (the
    demo's reset restarts the ids, so an id may come back as another workload): the next batch
    finds out in its lock statement and writes the workload, never an interval under a dead or
    foreign id."""
    capture = django_capture_on_commit_callbacks
    assert _post(client, ingest_token, _batch(1, T, T + 10, POD), capture) == 1
    was = Workload.objects.get(uid=POD["uid"])
    # Its id now names another workload (as after a reset that restarted the ids).
    Workload.objects.filter(pk=was.pk).update(uid="other/pod", name="other")
    assert _post(client, ingest_token, _batch(2, T + 10, T + 20, POD), capture) == 1
    pod = Workload.objects.get(uid=POD["uid"])
    assert pod.pk != was.pk
    held = dict(
        GpuAttribution.objects.filter(start__gte=datetime.fromtimestamp(T, UTC)).values_list(
            "start", "workload_id"
        )
    )
    assert held[datetime.fromtimestamp(T + 10, UTC)] == pod.pk
    # Deleted: written again too.
    Workload.objects.filter(pk=pod.pk).delete()
    assert _post(client, ingest_token, _batch(3, T + 20, T + 30, POD), capture) == 1
    assert Workload.objects.filter(uid=POD["uid"]).count() == 1
