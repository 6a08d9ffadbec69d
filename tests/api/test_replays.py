"""Replays (issue 34, finding 3): a client id sent again with another body is a 409 naming the key,
nothing stored; the same samples under a new batch id are not stored twice, and are counted."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from django.db import close_old_connections, connection
from django.test import Client

from accelboard.benchmarks.models import BenchmarkRun, MetricValue
from accelboard.core.choices import BatchKind
from accelboard.core.models import IngestBatch
from accelboard.fleet import ingest_services
from accelboard.serving.models import InferenceMetric

from .conftest import inference_payload, post_json, row_counts, run_payload, telemetry_payload

TELEMETRY = "/api/v1/telemetry"


def _power_by_gpu_second() -> dict[tuple[int, int], tuple[int, float]]:
    """Raw rows: (GPU, second) -> (rows, power sum)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT accelerator_id, floor(extract(epoch FROM time))::int8, count(*), sum(power_w) "
            "FROM fleet_telemetrysample GROUP BY 1, 2"
        )
        return {(gpu, second): (rows, power) for gpu, second, rows, power in cursor.fetchall()}


def _partials() -> list[tuple[Any, ...]]:
    """What the rollups read: the partial aggregates, summed per GPU."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT accelerator_id, sum(power_samples), sum(power_sum) FROM fleet_telemetrypartial "
            "GROUP BY 1 ORDER BY 1"
        )
        return cursor.fetchall()


def _reused(response: Any, key: str, field: str = "batch_id") -> None:
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert (error["code"], error["path"]) == ("idempotency_key_reused", field)
    assert key in error["message"]


# --- The same key with another body ----------------------------------------------------------


def test_a_batch_id_sent_again_with_other_samples_is_a_409_naming_it_and_stores_nothing(
    client: Client, team: Any, ingest_token: str
) -> None:
    payload = telemetry_payload(n=6)
    assert post_json(client, TELEMETRY, payload, ingest_token).status_code == 200
    before, power = row_counts(), _power_by_gpu_second()
    other = telemetry_payload(n=6, batch_id=payload["batch_id"], start=time.time() + 60 - 6)
    other["host"]["hostname"] = "gpu-node-77"  # nor is its host registered
    _reused(post_json(client, TELEMETRY, other, ingest_token), payload["batch_id"])
    assert row_counts() == before
    assert _power_by_gpu_second() == power
    # The first body, sent again (keys in another order, gzipped): the first answer.
    again = json.loads(json.dumps(payload))
    again["samples"] = [dict(reversed(sample.items())) for sample in again["samples"]]
    retry = post_json(client, TELEMETRY, dict(reversed(again.items())), ingest_token, gzipped=True)
    assert retry.status_code == 200
    assert retry.json() == {
        "batch_id": payload["batch_id"],
        "accepted": 6,
        "duplicate_samples": 0,
        "duplicate": True,
    }


def test_one_changed_value_is_another_body(client: Client, team: Any, ingest_token: str) -> None:
    payload = telemetry_payload(n=4)
    post_json(client, TELEMETRY, payload, ingest_token)
    payload["samples"][3]["power_w"] += 1
    _reused(post_json(client, TELEMETRY, payload, ingest_token), payload["batch_id"])


def test_a_batch_of_several_reusing_a_key_names_its_index_and_stores_none_of_them(team: Any) -> None:
    from accelboard.fleet.ingest_validation import IngestRejected

    first = telemetry_payload(n=4, batch_id="replay-1", start=time.time() - 60)
    ingest_services.telemetry_batch_ingest(team_id=team.pk, payload=first)
    before = row_counts()
    fresh = telemetry_payload(n=4, batch_id="replay-2", hostname="gpu-node-02", start=time.time() - 30)
    changed = telemetry_payload(n=4, batch_id="replay-1", start=time.time() - 20)
    with pytest.raises(IngestRejected) as caught:
        ingest_services.telemetry_batches_ingest(team_id=team.pk, payloads=[fresh, changed])
    assert (caught.value.status, caught.value.code, caught.value.path, caught.value.index) == (
        409,
        "idempotency_key_reused",
        "batch_id",
        1,
    )
    assert row_counts() == before


def test_a_claim_stored_before_digests_were_kept_answers_as_it_did(team: Any) -> None:
    payload = telemetry_payload(n=4, batch_id="legacy")
    ingest_services.telemetry_batch_ingest(team_id=team.pk, payload=payload)
    IngestBatch.objects.filter(client_id="legacy").update(digest="")
    changed = telemetry_payload(n=4, batch_id="legacy", start=time.time() + 30)
    assert ingest_services.telemetry_batch_ingest(team_id=team.pk, payload=changed)["duplicate"] is True


def test_a_run_id_sent_again_with_other_metrics_is_a_409_naming_it(
    client: Client, team: Any, rw_token: str
) -> None:
    payload = run_payload()
    assert post_json(client, "/api/v1/runs", payload, rw_token).status_code == 201
    before = row_counts()
    changed = json.loads(json.dumps(payload))
    changed["metrics"][0]["value"] = changed["metrics"][0]["value"] * 2
    _reused(post_json(client, "/api/v1/runs", changed, rw_token), payload["run_id"], field="run_id")
    assert row_counts() == before
    assert BenchmarkRun.objects.count() == 1
    assert MetricValue.objects.get().value == payload["metrics"][0]["value"]
    assert post_json(client, "/api/v1/runs", payload, rw_token).json()["duplicate"] is True


def test_a_serving_batch_id_sent_again_with_other_intervals_is_a_409_naming_it(
    client: Client, team: Any, ingest_token: str
) -> None:
    assert post_json(client, TELEMETRY, telemetry_payload(n=0), ingest_token).status_code == 200
    payload = inference_payload()
    assert post_json(client, "/api/v1/inference-metrics", payload, ingest_token).status_code == 200
    changed = json.loads(json.dumps(payload))
    changed["intervals"][0]["requests"] = 1300
    _reused(post_json(client, "/api/v1/inference-metrics", changed, ingest_token), payload["batch_id"])
    assert list(InferenceMetric.objects.values_list("requests", flat=True)) == [1200]
    retry = post_json(client, "/api/v1/inference-metrics", payload, ingest_token)
    assert (retry.status_code, retry.json()["duplicate"]) == (200, True)


def test_a_run_id_sent_again_with_other_result_files_is_a_409_naming_it(
    client: Client, team: Any, rw_token: str, settings: Any, tmp_path: Any
) -> None:
    from tests.api.test_run_upload import _fixture, _upload
    from tests.factories import L4, accelerator_type_from

    settings.MEDIA_ROOT = tmp_path / "media"
    accelerator_type_from(L4)
    run_id = "0b6c3f0e-4d9a-4e57-8a77-5e0e9d1f2a3b"
    first = _upload(client, rw_token, [_fixture("vllm_2025.json")], accelerator="L4", run_id=run_id)
    assert first.status_code == 201, first.content
    before = row_counts()
    other = _upload(client, rw_token, [_fixture("vllm_2024.json")], accelerator="L4", run_id=run_id)
    _reused(other, run_id, field="run_id")
    assert row_counts() == before
    again = _upload(client, rw_token, [_fixture("vllm_2025.json")], accelerator="L4", run_id=run_id)
    assert (again.status_code, again.json()["duplicate"]) == (200, True)


def test_the_claims_keep_a_digest_of_the_body(client: Client, team: Any, ingest_token: str) -> None:
    payload = telemetry_payload(n=2)
    post_json(client, TELEMETRY, payload, ingest_token)
    claim = IngestBatch.objects.get(kind=BatchKind.TELEMETRY, client_id=payload["batch_id"])
    assert len(claim.digest) == 64


# --- The same samples under a new batch id ---------------------------------------------------


def test_samples_sent_again_under_a_new_batch_id_are_counted_not_stored(
    client: Client, team: Any, ingest_token: str
) -> None:
    payload = telemetry_payload(n=8)
    assert post_json(client, TELEMETRY, payload, ingest_token).json()["accepted"] == 8
    power, partials = _power_by_gpu_second(), _partials()
    replay = {**payload, "batch_id": "a-new-id-for-the-same-samples"}
    response = post_json(client, TELEMETRY, replay, ingest_token)
    assert response.status_code == 200, response.content
    assert response.json() == {
        "batch_id": "a-new-id-for-the-same-samples",
        "accepted": 0,
        "duplicate_samples": 8,
        "duplicate": False,
    }
    # Power per GPU-second, in the raw rows and in what the rollups read: as before the replay.
    assert _power_by_gpu_second() == power
    assert _partials() == partials
    # Its retry gets the same answer.
    again = post_json(client, TELEMETRY, replay, ingest_token).json()
    assert (again["accepted"], again["duplicate_samples"], again["duplicate"]) == (0, 8, True)


def test_a_batch_overlapping_stored_samples_stores_only_the_new_ones(
    client: Client, team: Any, ingest_token: str
) -> None:
    start = time.time() - 20
    post_json(client, TELEMETRY, telemetry_payload(n=8, start=start), ingest_token)
    power = _power_by_gpu_second()
    # 4 instants of 2 GPUs: the first 2 instants were stored (a resend after a lost answer, cut
    # differently), the last 2 are new.
    overlap = telemetry_payload(n=8, start=start + 2)
    response = post_json(client, TELEMETRY, overlap, ingest_token).json()
    assert (response["accepted"], response["duplicate_samples"]) == (4, 4)
    after = _power_by_gpu_second()
    assert {key: after[key] for key in power} == power
    assert all(rows == 1 for rows, _ in after.values())
    assert len(after) == len(power) + 4


def test_a_sample_listed_twice_in_one_batch_is_stored_once(
    client: Client, team: Any, ingest_token: str
) -> None:
    payload = telemetry_payload(n=4)
    payload["samples"].append(dict(payload["samples"][0]))
    response = post_json(client, TELEMETRY, payload, ingest_token).json()
    assert (response["accepted"], response["duplicate_samples"]) == (4, 1)
    assert all(rows == 1 for rows, _ in _power_by_gpu_second().values())


def test_the_same_samples_from_another_gpu_are_not_duplicates(
    client: Client, team: Any, ingest_token: str
) -> None:
    payload = telemetry_payload(n=2)
    post_json(client, TELEMETRY, payload, ingest_token)
    other = telemetry_payload(n=2, hostname="gpu-node-02", start=payload["samples"][0]["time"])
    other["accelerators"] = [{**gpu, "uuid": f"{gpu['uuid']}-b"} for gpu in other["accelerators"]]
    for sample in other["samples"]:
        sample["gpu"] = f"{sample['gpu']}-b"
    response = post_json(client, TELEMETRY, other, ingest_token).json()
    assert (response["accepted"], response["duplicate_samples"]) == (2, 0)


@pytest.mark.django_db(transaction=True)
def test_the_same_samples_under_two_batch_ids_at_once_are_stored_once(team: Any, make_token: Any) -> None:
    """Two requests carrying the same samples under different batch ids, in two processes at
    once: the second waits for the first's host lock, then finds its rows. The host is registered
    (and cached) before, so that no registration serializes them."""
    token = make_token(team, "ingest")
    payload = telemetry_payload(n=2_000)
    registered = telemetry_payload(n=2, start=payload["samples"][0]["time"] - 60)
    assert post_json(Client(), TELEMETRY, registered, token).status_code == 200
    barrier = threading.Barrier(2)
    results: list[tuple[int, dict[str, Any]]] = []

    def send(batch_id: str) -> None:
        try:
            barrier.wait()
            response = post_json(Client(), TELEMETRY, {**payload, "batch_id": batch_id}, token)
            results.append((response.status_code, response.json()))
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=send, args=(f"race-{n}",)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(status for status, _ in results) == [200, 200]
    assert sorted((body["accepted"], body["duplicate_samples"]) for _, body in results) == [
        (0, 2_000),
        (2_000, 0),
    ]
    assert sum(rows for rows, _ in _power_by_gpu_second().values()) == 2_002
