"""POST /api/v1/telemetry: storage, registration, bad input, isolation and idempotency."""

from __future__ import annotations

import gzip
import threading
import time
from datetime import timedelta
from typing import Any

import orjson
import pytest
from django.db import close_old_connections, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from accelboard.api import body
from accelboard.api.services import token_revoke
from accelboard.core.models import IngestBatch
from accelboard.fleet import ingest_services
from accelboard.fleet.ingest_services import telemetry_batch_ingest
from accelboard.fleet.models import Accelerator, Host

from .conftest import GPU_A, GPU_B, post_json, row_counts, telemetry_payload

URL = "/api/v1/telemetry"


def _samples_stored() -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.uuid, s.power_w, s.energy_mj, s.mem_used_bytes, s.sm_clock_mhz, s.xid_errors, s.time "
            "FROM fleet_telemetrysample s JOIN fleet_accelerator a ON a.id = s.accelerator_id ORDER BY s.time, a.uuid"
        )
        return cursor.fetchall()


def test_it_stores_a_batch_and_registers_host_and_gpus(client: Client, team: Any, ingest_token: str) -> None:
    payload = telemetry_payload(n=6)
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 200, response.content
    assert response.json() == {
        "batch_id": payload["batch_id"],
        "accepted": 6,
        "duplicate_samples": 0,
        "duplicate": False,
    }
    rows = _samples_stored()
    assert len(rows) == 6
    assert rows[0][:6] == (GPU_A, 400.0, 1_000_000, 61_203_283_968, 1980.0, 0)
    host = Host.objects.get(hostname="gpu-node-01")
    assert host.team_id == team.pk
    assert (host.agent_version, host.driver_version, host.simulated) == ("0.1.0", "550.54.15", True)
    assert host.facts["os"] == "Ubuntu 22.04"
    assert host.last_seen_at is not None
    gpus = {gpu.uuid: gpu for gpu in Accelerator.objects.filter(host=host)}
    assert set(gpus) == {GPU_A, GPU_B}
    assert gpus[GPU_A].unsupported == ["power_instant"]
    # last_state is the newest sample of each GPU: samples 4 (GPU A) and 5 (GPU B).
    assert gpus[GPU_A].last_state["power_w"] == 404.0
    assert gpus[GPU_B].last_state["power_w"] == 405.0
    assert gpus[GPU_B].last_seen_at.timestamp() == pytest.approx(payload["samples"][5]["time"], abs=1e-3)


def test_a_gpus_last_state_moves_once_it_is_last_state_slack_older(team: Any) -> None:
    """An agent's batch rewrites a GPU's ``last_state`` only once the stored one is
    ``LAST_STATE_SLACK`` older than the batch's newest sample: the live grid is never further behind
    than that; a sample older than the stored one never replaces it."""
    slack = ingest_services.LAST_STATE_SLACK.total_seconds()
    start = time.time() - 10 * slack

    def power(gpu: str) -> tuple[float, float]:
        accelerator = Accelerator.objects.get(uuid=gpu)
        return accelerator.last_state["power_w"], accelerator.last_seen_at.timestamp()

    # Two samples a GPU: GPU A's newest at start + 1 (power 402).
    telemetry_batch_ingest(team_id=team.pk, payload=telemetry_payload(n=4, start=start))
    assert power(GPU_A) == pytest.approx((402.0, start + 1))
    # Newest at start + slack: less than the slack newer than the stored state, not written.
    telemetry_batch_ingest(team_id=team.pk, payload=telemetry_payload(n=4, start=start + slack - 1))
    assert power(GPU_A) == pytest.approx((402.0, start + 1))
    # Newest at start + slack + 1: the slack newer, written.
    telemetry_batch_ingest(team_id=team.pk, payload=telemetry_payload(n=4, start=start + slack))
    assert power(GPU_A) == pytest.approx((402.0, start + slack + 1))
    # A late batch (older samples) never moves it back, however old.
    telemetry_batch_ingest(team_id=team.pk, payload=telemetry_payload(n=4, start=start - 5 * slack))
    assert power(GPU_A) == pytest.approx((402.0, start + slack + 1))


def test_a_process_leaves_out_of_the_final_statement_what_it_wrote_within_the_slacks(
    team: Any, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host or GPU state this process wrote (committed) less than the slack ago is not sent in
    the final statement (it would write nothing); what a rolled-back transaction wrote is not
    noted; the stored state is what the statement alone gives."""
    slack = ingest_services.LAST_STATE_SLACK.total_seconds()
    start = time.time() - 10 * slack
    ingest_services._written.clear()
    sent: list[tuple[list[int], list[int]]] = []  # (hosts, GPUs) each final statement updates
    execute = ingest_services._execute

    def spy(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        if sql == ingest_services._FINAL_SQL_REPLACE:  # int8[] parameters as array literals
            sent.append(tuple([int(i) for i in params[n].strip("{}").split(",") if i] for n in (4, 7)))  # type: ignore[arg-type]
        return execute(sql, params)

    monkeypatch.setattr(ingest_services, "_execute", spy)

    def ingest(at: float) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            telemetry_batch_ingest(team_id=team.pk, payload=telemetry_payload(n=4, start=at))

    def state(gpu: str) -> float:
        return Accelerator.objects.get(uuid=gpu).last_seen_at.timestamp()

    ingest(start)
    host = Host.objects.get()
    assert [(hosts, len(gpus)) for hosts, gpus in sent] == [([host.pk], 2)]
    # Registering the host set its last_seen_at: the statement did not write it, nothing noted.
    Host.objects.filter(pk=host.pk).update(last_seen_at=host.last_seen_at - timedelta(hours=1))
    ingest(start + slack - 2)  # the states within the slack of what this process wrote
    assert sent[-1] == ([host.pk], [])
    ingest(start + slack - 1)  # the host too (written by the last one): nothing sent
    assert sent[-1] == ([], [])
    assert state(GPU_A) == pytest.approx(start + 1)
    assert Host.objects.get().last_seen_at > host.last_seen_at
    ingest(start + slack)  # the states are the slack older: sent and written; the host is not
    assert (sent[-1][0], len(sent[-1][1])) == ([], 2)
    assert state(GPU_A) == pytest.approx(start + slack + 1)
    # A transaction rolled back after its statement notes nothing: the next batch sends its states.
    ingest_services._written.clear()
    with pytest.raises(RuntimeError), transaction.atomic():
        telemetry_batch_ingest(team_id=team.pk, payload=telemetry_payload(n=4, start=start + 3 * slack))
        raise RuntimeError("rolled back")
    assert len(sent[-1][1]) == 2
    ingest(start + 3 * slack + 2)
    assert (sent[-1][0], len(sent[-1][1])) == ([host.pk], 2)
    assert state(GPU_A) == pytest.approx(start + 3 * slack + 3)


def test_it_accepts_rfc3339_times_and_nulls_for_unsupported_signals(
    client: Client, team: Any, ingest_token: str
) -> None:
    payload = telemetry_payload(n=2)
    payload["samples"][0]["time"] = "2025-11-29T22:10:00.123Z"
    payload["samples"][1]["time"] = "2025-11-29T23:10:00+01:00"
    payload["samples"][1]["power_w"] = None
    del payload["samples"][1]["energy_mj"]
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 200, response.content
    rows = _samples_stored()
    assert [row[6].isoformat() for row in rows] == [
        "2025-11-29T22:10:00+00:00",
        "2025-11-29T22:10:00.123000+00:00",
    ]
    assert rows[0][1] is None and rows[0][2] is None  # GPU B's sample: NULL, never 0


def test_it_accepts_later_batches_without_accelerators(client: Client, team: Any, ingest_token: str) -> None:
    assert post_json(client, URL, telemetry_payload(n=2), ingest_token).status_code == 200
    later = telemetry_payload(n=2)
    del later["accelerators"]
    response = post_json(client, URL, later, ingest_token)
    assert response.status_code == 200, response.content
    assert len(_samples_stored()) == 4


def test_it_accepts_gzip_bodies(client: Client, team: Any, ingest_token: str) -> None:
    response = post_json(client, URL, telemetry_payload(n=10), ingest_token, gzipped=True)
    assert response.status_code == 200, response.content
    assert len(_samples_stored()) == 10


def test_it_accepts_a_10000_sample_batch(client: Client, team: Any, ingest_token: str) -> None:
    payload = telemetry_payload(n=10_000, start=time.time() - 30_000)
    response = post_json(client, URL, payload, ingest_token, gzipped=True)
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 10_000
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(DISTINCT accelerator_id) FROM fleet_telemetrysample")
        assert cursor.fetchone() == (10_000, 2)


def test_it_rejects_more_than_10000_samples(client: Client, team: Any, ingest_token: str) -> None:
    # 10,000 is the most that completes inside the agent's 10 s timeout under load (issue 16).
    payload = telemetry_payload(n=10_001, start=time.time() - 30_000)
    before = row_counts()
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == 422
    assert response.json()["error"]["path"] == "samples"
    assert row_counts() == before


def _mutate(payload: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    target = payload
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return payload


BAD_SAMPLES = [
    # (where, value, expected status, expected path, code)
    (("samples", 17, "power_w"), "412 W", 422, "samples[17].power_w", "type"),
    (("samples", 17, "power_w"), True, 422, "samples[17].power_w", "type"),
    (("samples", 3, "gpu_util"), 101.0, 422, "samples[3].gpu_util", "out_of_range"),
    (("samples", 5, "energy_mj"), 1.5, 422, "samples[5].energy_mj", "type"),
    (("samples", 5, "energy_mj"), -1, 422, "samples[5].energy_mj", "out_of_range"),
    (("samples", 9, "temperature_c"), [61], 422, "samples[9].temperature_c", "type"),
    # Named: an id made of the value would differ between pytest-xdist workers (make test).
    pytest.param(
        ("samples", 2, "time"),
        time.time() + 3600,
        422,
        "samples[2].time",
        "time_out_of_range",
        id="an-hour-ahead-samples[2].time-time_out_of_range",
    ),
    (("samples", 2, "time"), 900_000_000, 422, "samples[2].time", "time_out_of_range"),
    (("samples", 2, "time"), "2025-11-29T22:10:00", 422, "samples[2].time", "invalid_time"),
    (("samples", 2, "time"), "yesterday", 422, "samples[2].time", "invalid_time"),
    (("samples", 2, "time"), None, 422, "samples[2].time", "missing"),
    (("samples", 11, "gpu"), "GPU-unknown", 422, "samples[11].gpu", "unknown_accelerator"),
    (("samples", 11, "gpu"), 7, 422, "samples[11].gpu", "type"),
    (("samples", 4, "fan_speed"), 50, 422, "samples[4].fan_speed", "unknown_field"),
    (("samples", 6), "not an object", 422, "samples[6]", "type"),
    (("host", "hostname"), "", 422, "host.hostname", "invalid"),
    (("host", "facts", "region"), "r" * 41, 422, "host.facts.region", "too_long"),
    (("accelerators", 1, "memory_bytes"), "80GB", 422, "accelerators[1].memory_bytes", "type"),
    (("batch_id",), "", 422, "batch_id", "invalid"),
    (("surprise",), 1, 422, "surprise", "unknown_field"),
]


@pytest.mark.parametrize(("where", "value", "status", "path", "code"), BAD_SAMPLES)
def test_it_rejects_bad_fields_naming_the_first_bad_sample(
    client: Client,
    team: Any,
    ingest_token: str,
    where: tuple[Any, ...],
    value: Any,
    status: int,
    path: str,
    code: str,
) -> None:
    payload = _mutate(telemetry_payload(n=20), where, value)
    if code != "unknown_accelerator":
        # A later sample is also bad: the error must name the FIRST one. (GPU membership is
        # checked against the database after the shape of every sample, so it is left out.)
        payload["samples"][19]["power_w"] = "also bad"
    before = row_counts()
    response = post_json(client, URL, payload, ingest_token)
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert (error["path"], error["code"]) == (path, code)
    assert error["message"]
    assert row_counts() == before


def test_it_names_the_first_bad_sample_when_all_samples_are_otherwise_fine(
    client: Client, team: Any, ingest_token: str
) -> None:
    payload = telemetry_payload(n=20)
    payload["samples"][17]["power_w"] = "x"
    response = post_json(client, URL, payload, ingest_token)
    assert response.json()["error"]["path"] == "samples[17].power_w"
    assert response.json()["error"]["message"] == "must be a finite number"


@pytest.mark.parametrize(
    ("raw", "headers", "status", "code"),
    [
        (b'{"batch_id": "x", ', {}, 400, "malformed_json"),
        (
            b'{"batch_id": "x", "host": {"hostname": "h"}, "samples": [{"power_w": NaN}]}',
            {},
            400,
            "malformed_json",
        ),
        (
            b'{"batch_id": "x", "host": {"hostname": "h"}, "samples": [{"power_w": Infinity}]}',
            {},
            400,
            "malformed_json",
        ),
        (
            b'{"batch_id": "x", "host": {"hostname": "h"}, "samples": [{"power_w": 1e999}]}',
            {},
            400,
            "malformed_json",
        ),
        (b"batch_id=x", {"content_type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"),
        (b"{}", {"content_type": "text/plain"}, 415, "unsupported_media_type"),
        (b"{}", {"HTTP_CONTENT_ENCODING": "br"}, 415, "unsupported_media_type"),
        (b"not gzip at all", {"HTTP_CONTENT_ENCODING": "gzip"}, 400, "bad_encoding"),
        (
            gzip.compress(b'{"batch_id": "x"}', mtime=0)[:-12],
            {"HTTP_CONTENT_ENCODING": "gzip"},
            400,
            "bad_encoding",
        ),
        (b'{"batch_id": "a\\u0000b", "host": {"hostname": "h"}}', {}, 422, "invalid"),
        (b"[1, 2, 3]", {}, 422, "type"),
    ],
)
def test_it_rejects_undecodable_bodies(
    client: Client, team: Any, ingest_token: str, raw: bytes, headers: dict[str, str], status: int, code: str
) -> None:
    before = row_counts()
    response = post_json(client, URL, None, ingest_token, raw=raw, **headers)
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code
    assert row_counts() == before


def test_it_rejects_bodies_over_the_limit(
    client: Client, team: Any, ingest_token: str, monkeypatch: Any
) -> None:
    monkeypatch.setattr(body, "MAX_BODY_BYTES", 4096)
    before = row_counts()
    response = post_json(client, URL, telemetry_payload(n=100), ingest_token)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert row_counts() == before


def test_it_refuses_a_gzip_bomb_without_inflating_it(
    client: Client, team: Any, ingest_token: str, monkeypatch: Any
) -> None:
    monkeypatch.setattr(body, "MAX_BODY_BYTES", 1024 * 1024)
    bomb = gzip.compress(b'{"batch_id": "' + b"a" * (50 * 1024 * 1024) + b'"}')
    assert len(bomb) < 100_000
    response = post_json(client, URL, None, ingest_token, raw=bomb, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert IngestBatch.objects.count() == 0


def test_it_requires_a_valid_token(client: Client, team: Any, ingest_token: str) -> None:
    before = row_counts()
    for header in ({}, {"HTTP_AUTHORIZATION": "Bearer not-a-real-token-but-long-enough-to-look-up"}):
        response = client.post(
            URL, data=orjson.dumps(telemetry_payload()), content_type="application/json", **header
        )
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthenticated"
    token_revoke(prefix=ingest_token[:8])
    response = post_json(client, URL, telemetry_payload(), ingest_token)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "token_revoked"
    assert row_counts() == before


def test_it_refuses_a_read_token(client: Client, team: Any, read_token: str) -> None:
    before = row_counts()
    response = post_json(client, URL, telemetry_payload(), read_token)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "wrong_token_kind"
    assert row_counts() == before


def test_it_refuses_telemetry_naming_another_teams_gpus(
    client: Client, team: Any, ingest_token: str, other_token: str
) -> None:
    assert post_json(client, URL, telemetry_payload(), ingest_token).status_code == 200
    before = row_counts()
    # The host name is no conflict (it resolves within the token's team); the GPUs are.
    response = post_json(client, URL, telemetry_payload(), other_token)
    assert response.status_code == 409
    assert response.json()["error"]["path"] == "accelerators[0].uuid"
    # The same GPUs reported under another host name are still the other team's GPUs.
    response = post_json(client, URL, telemetry_payload(hostname="stolen-node"), other_token)
    assert response.status_code == 409
    assert response.json()["error"]["path"] == "accelerators[0].uuid"
    assert row_counts() == before
    assert Accelerator.objects.get(uuid=GPU_A).host.team_id == team.pk


def test_it_stores_a_retried_batch_once(client: Client, team: Any, ingest_token: str) -> None:
    payload = telemetry_payload(n=8)
    first = post_json(client, URL, payload, ingest_token)
    second = post_json(client, URL, payload, ingest_token, gzipped=True)
    answer = {"batch_id": payload["batch_id"], "accepted": 8, "duplicate_samples": 0}
    assert first.json() == {**answer, "duplicate": False}
    assert second.status_code == 200
    assert second.json() == {**answer, "duplicate": True}
    assert len(_samples_stored()) == 8


def test_it_lets_a_failed_batch_be_retried(client: Client, team: Any, ingest_token: str) -> None:
    payload = telemetry_payload(n=4)
    payload["samples"][1]["gpu"] = "GPU-not-listed"
    assert post_json(client, URL, payload, ingest_token).status_code == 422
    payload["samples"][1]["gpu"] = GPU_B
    response = post_json(client, URL, payload, ingest_token)
    assert response.json()["duplicate"] is False
    assert len(_samples_stored()) == 4


@pytest.mark.django_db(transaction=True)
def test_it_stores_one_copy_when_two_retries_race(team: Any, make_token: Any) -> None:
    token = make_token(team, "ingest")
    payload = telemetry_payload(n=2_000)
    barrier = threading.Barrier(2)
    results: list[Any] = []

    def send() -> None:
        try:
            barrier.wait()
            response = post_json(Client(), URL, payload, token)
            results.append((response.status_code, response.json()))
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(status for status, _ in results) == [200, 200]
    assert sorted(body["duplicate"] for _, body in results) == [False, True]
    assert {body["accepted"] for _, body in results} == {2_000}
    assert len(_samples_stored()) == 2_000
    assert IngestBatch.objects.filter(client_id=payload["batch_id"]).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_resent_batch_waits_for_the_host_lock_and_then_sees_the_rows(team: Any) -> None:
    """The claim, the host's lock and the stored-samples check are one pipeline
    (``ingest_services._claim_lock_check``, the host's registration cached): the check's snapshot
    is still taken after the lock is granted, so the same samples sent again under another batch
    id while the first transaction holds the lock are counted as stored once it commits."""
    start = time.time() - 120
    warm = telemetry_batch_ingest(team_id=team.pk, payload=telemetry_payload(n=4, start=start - 60))
    assert warm["accepted"] == 4  # the host's registration is cached from here
    first, again = telemetry_payload(n=8, start=start), telemetry_payload(n=8, start=start)
    holding, release = threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    def hold() -> None:
        try:
            with transaction.atomic():
                results["first"] = telemetry_batch_ingest(team_id=team.pk, payload=first)
                holding.set()
                assert release.wait(30)
        finally:
            connection.close()

    def resend() -> None:
        try:
            results["again"] = telemetry_batch_ingest(team_id=team.pk, payload=again)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(30)
    sender = threading.Thread(target=resend)
    sender.start()
    waited = False
    for _ in range(300):  # until the resent batch waits for the host's advisory lock
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'"
            )
            if cursor.fetchone()[0]:
                waited = True
                break
        time.sleep(0.02)
    release.set()
    holder.join(30)
    sender.join(30)
    assert waited
    assert results["first"] == {
        "batch_id": first["batch_id"],
        "accepted": 8,
        "duplicate_samples": 0,
        "duplicate": False,
    }
    assert results["again"] == {
        "batch_id": again["batch_id"],
        "accepted": 0,
        "duplicate_samples": 8,
        "duplicate": False,
    }
    assert len(_samples_stored()) == 12


def test_it_marks_each_batch_dirty_for_its_host_and_asks_for_one_drain_per_burst(
    client: Client,
    team: Any,
    ingest_token: str,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from django.db import connection

    from accelboard.fleet import rollup_request_services, tasks
    from accelboard.fleet.models import RollupDrainSchedule, TelemetryDirtyRange

    enqueued: list[dict[str, Any]] = []
    monkeypatch.setattr(rollup_request_services, "_skip_until", -1e9)
    monkeypatch.setattr(tasks.telemetry_rollups_drain, "apply_async", lambda **kw: enqueued.append(kw))

    def burst(name: str) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            for index in range(5):
                payload = telemetry_payload(
                    n=8, batch_id=f"{name}-{index}", start=time.time() - 100 + index * 10
                )
                assert post_json(client, URL, payload, ingest_token).status_code == 200

    burst("burst")
    host = Host.objects.get(hostname="gpu-node-01")
    assert list(TelemetryDirtyRange.objects.values_list("host_id", flat=True)) == [host.pk] * 5
    # No task per batch: one drain for the burst, after the interval.
    assert enqueued == [{"countdown": rollup_request_services.ROLLUP_INTERVAL_S}]

    # Another web process (its own skip state) finds the drain already claimed: nothing enqueued.
    monkeypatch.setattr(rollup_request_services, "_skip_until", -1e9)
    burst("other-process")
    assert len(enqueued) == 1
    # Once that drain is due, the next batch claims the next one.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE fleet_rollupdrainschedule SET due = now() - interval '1 second'")
    monkeypatch.setattr(rollup_request_services, "_skip_until", -1e9)
    burst("later")
    assert enqueued == [{"countdown": rollup_request_services.ROLLUP_INTERVAL_S}] * 2
    assert RollupDrainSchedule.objects.count() == 1


def test_a_drain_that_could_not_be_enqueued_gives_its_claim_back(
    monkeypatch: pytest.MonkeyPatch, db: Any
) -> None:
    from accelboard.fleet import rollup_request_services, tasks

    def broker_down(**kwargs: Any) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(rollup_request_services, "_skip_until", -1e9)
    monkeypatch.setattr(tasks.telemetry_rollups_drain, "apply_async", broker_down)
    assert rollup_request_services.telemetry_rollups_request(now=100.0) is False
    # Neither this process nor another waits for a drain nobody enqueued.
    assert rollup_request_services._skip_until < 0
    assert rollup_request_services.telemetry_rollups_claim(interval_s=10.0) == (True, 10.0)


def test_a_host_moved_to_another_team_is_not_written_to_even_after_its_registration_was_cached(
    client: Client, team: Any, ingest_token: str
) -> None:
    from accelboard.core.models import Team

    first = telemetry_payload(n=4, batch_id="before-move")
    assert post_json(client, URL, first, ingest_token).status_code == 200
    other = Team.objects.create(name="Elsewhere", slug="elsewhere")
    Host.objects.filter(hostname="gpu-node-01").update(team=other)  # an admin moves the host
    before = row_counts()

    again = telemetry_payload(n=4, batch_id="after-move", start=time.time() - 2)
    response = post_json(client, URL, again, ingest_token)

    # The name is free again for the team, but the GPUs went with the host: they are another
    # team's now, and the batch is refused as any batch naming another team's GPUs.
    assert response.status_code == 409, response.content
    assert response.json()["error"]["code"] == "accelerator_conflict"
    assert row_counts() == before
    assert list(Host.objects.values_list("team_id", flat=True)) == [other.pk]


def test_a_process_that_has_not_seen_the_host_still_applies_changed_facts(
    client: Client, team: Any, ingest_token: str
) -> None:
    from accelboard.fleet.ingest_services import registrations

    first = telemetry_payload(n=4, batch_id="seen-elsewhere")
    assert post_json(client, URL, first, ingest_token).status_code == 200
    registrations.clear()  # as a web process that never saw this host
    same = telemetry_payload(n=4, batch_id="unchanged", start=time.time() - 3)
    assert post_json(client, URL, same, ingest_token).status_code == 200
    registrations.clear()
    changed = telemetry_payload(n=4, batch_id="new-driver", start=time.time() - 2)
    changed["host"]["driver_version"] = "999.1"
    changed["accelerators"][0]["name"] = "NVIDIA H100 80GB HBM3 (renamed)"
    assert post_json(client, URL, changed, ingest_token).status_code == 200

    host = Host.objects.get(hostname="gpu-node-01")
    assert host.driver_version == "999.1"
    assert Accelerator.objects.get(uuid=changed["accelerators"][0]["uuid"]).name.endswith("(renamed)")
    assert len(_samples_stored()) == 12


def test_an_agent_batch_runs_no_merge_statement(
    client: Client, team: Any, ingest_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge of split GPU-instants is the remote-write path's (``merge=True``): the agent's
    batch only looks for samples stored already (one query, under the host's lock), and a merging
    batch runs the merge in its stead."""
    start = time.time() - 60
    assert post_json(client, URL, telemetry_payload(n=4, start=start), ingest_token).status_code == 200
    # The final statement and the merge run server-side bound (``ingest_services._execute``),
    # beside Django's cursor: both are counted.
    bound: list[str] = []
    execute = ingest_services._execute

    def spy(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        bound.append(sql)
        return execute(sql, params)

    monkeypatch.setattr(ingest_services, "_execute", spy)
    # The agent's claim, host lock and stored-samples query go in one pipeline, beside both.
    pipelined: list[str] = []
    claim_lock_check = ingest_services._claim_lock_check

    def pipeline_spy(**kwargs: Any) -> Any:
        pipelined.append("claim, lock, check")
        return claim_lock_check(**kwargs)

    monkeypatch.setattr(ingest_services, "_claim_lock_check", pipeline_spy)

    def statements(captured: CaptureQueriesContext) -> list[str]:
        found = [q["sql"] for q in captured.captured_queries if "pg_inherits" not in q["sql"]] + bound
        bound.clear()
        return found

    with CaptureQueriesContext(connection) as plain:
        telemetry_batch_ingest(team_id=team.pk, payload=telemetry_payload(n=4, start=start + 2))
    plain_sql = statements(plain)
    with CaptureQueriesContext(connection) as merging:
        telemetry_batch_ingest(team_id=team.pk, payload=telemetry_payload(n=4, start=start + 4), merge=True)
    merging_sql = statements(merging)
    # The savepoint, the final statement, the release (the claim, lock and stored-samples query
    # pipelined, COPY: both beside Django's cursor).
    assert len(plain_sql) == 3
    assert not any("UPDATE fleet_telemetrysample" in sql for sql in plain_sql)
    # The merge: the savepoint, the batch claim, the lock, the merge's probe (which instants are
    # stored) in place of the stored-samples query, the final statement, the release; no
    # pipeline; no merge statement where nothing is stored at the batch's instants.
    assert len(merging_sql) == 6
    assert pipelined == ["claim, lock, check"]
    assert sum("pg_advisory" in sql for sql in merging_sql) == 1
    assert sum("WITH ORDINALITY AS v(id, time, n)" in sql for sql in merging_sql) == 1
    assert not any("UPDATE fleet_telemetrysample" in sql for sql in merging_sql)
    # The same instants again under another batch id: the probe finds them, the merge runs.
    again = telemetry_payload(n=4, start=start + 4, batch_id="merged-again")
    with CaptureQueriesContext(connection) as merging_again:
        telemetry_batch_ingest(team_id=team.pk, payload=again, merge=True)
    assert sum("UPDATE fleet_telemetrysample" in sql for sql in statements(merging_again)) == 1


def test_several_batches_are_stored_in_one_call_each_claimed_on_its_own(team: Any) -> None:
    first = telemetry_payload(n=4, batch_id="many-1", start=time.time() - 60)
    assert telemetry_batch_ingest(team_id=team.pk, payload=first)["duplicate"] is False
    second = telemetry_payload(n=6, batch_id="many-2", start=time.time() - 30)
    results = ingest_services.telemetry_batches_ingest(team_id=team.pk, payloads=[first, second])
    assert results == [
        {"batch_id": "many-1", "accepted": 4, "duplicate_samples": 0, "duplicate": True},
        {"batch_id": "many-2", "accepted": 6, "duplicate_samples": 0, "duplicate": False},
    ]
    assert len(_samples_stored()) == 10
    # Sent again, together: both stored already.
    again = ingest_services.telemetry_batches_ingest(team_id=team.pk, payloads=[second, first])
    assert [result["duplicate"] for result in again] == [True, True]
    assert len(_samples_stored()) == 10


def test_a_refused_batch_of_several_names_its_index_and_stores_none_of_them(team: Any) -> None:
    before = row_counts()
    good = telemetry_payload(n=4, batch_id="good", start=time.time() - 60)
    bad = telemetry_payload(n=4, batch_id="bad", hostname="gpu-node-02", start=time.time() - 30)
    bad["samples"][1]["power_w"] = -1.0
    with pytest.raises(ingest_services.IngestRejected) as refused:
        ingest_services.telemetry_batches_ingest(team_id=team.pk, payloads=[good, bad])
    assert refused.value.index == 1 and refused.value.path == "samples[1].power_w"
    assert row_counts() == before


def test_a_batch_registering_part_of_what_its_host_registered_takes_no_registration_query(
    team: Any,
) -> None:
    """A remote-write request carries a slice of a host's GPUs (Prometheus's shards): a slice
    registered before, in parts, needs no query (``ingest_services._registration_parts``)."""
    assert telemetry_batch_ingest(team_id=team.pk, payload=telemetry_payload(n=4, start=time.time() - 60))
    part = telemetry_payload(n=4, batch_id="only-a", start=time.time() - 30)
    part["accelerators"] = part["accelerators"][:1]
    part["samples"] = [sample for sample in part["samples"] if sample["gpu"] == GPU_A]

    def registration_queries(payload: dict[str, Any]) -> int:
        with CaptureQueriesContext(connection) as captured:
            result = telemetry_batch_ingest(team_id=team.pk, payload=payload)
            assert result["accepted"] + result["duplicate_samples"] == 2
        return sum("FROM fleet_host h WHERE h.hostname" in q["sql"] for q in captured.captured_queries)

    assert registration_queries(part) == 0
    ingest_services.registrations.clear()  # as a process that has not seen the host
    assert registration_queries({**part, "batch_id": "only-a-again"}) == 1
