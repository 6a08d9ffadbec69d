"""Group commit of agents' batches (``fleet.ingest_group``): batches queued together are stored in
one transaction, each answered with its own result or error, once that transaction commits.

Each test builds its group deterministically: a leader is marked in flight, the threads queue
their batches behind it, and the lead is handed to the first of them, which takes them all."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import DatabaseError, close_old_connections, connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import Client

from accelboard.core.models import IngestBatch
from accelboard.fleet import ingest_group, ingest_services
from accelboard.fleet.ingest_group import GroupFailed, IngestGroups
from accelboard.fleet.ingest_services import telemetry_batch_prepare, telemetry_batches_ingest
from accelboard.fleet.ingest_validation import IngestRejected

from .conftest import GPU_A, GPU_B, post_json, telemetry_payload

URL = "/api/v1/telemetry"


def _payload(
    host: int, *, n: int = 8, start: float | None = None, batch_id: str | None = None
) -> dict[str, Any]:
    """A batch of host ``host``'s own two GPUs."""
    payload = telemetry_payload(n=n, hostname=f"gpu-node-{host:02d}", start=start, batch_id=batch_id)
    rename = {GPU_A: GPU_A[:-3] + f"{host:03d}", GPU_B: GPU_B[:-4] + f"9{host:03d}"}
    for gpu in payload["accelerators"]:
        gpu["uuid"] = rename[gpu["uuid"]]
    for sample in payload["samples"]:
        sample["gpu"] = rename[sample["gpu"]]
    return payload


def _samples(hostname: str | None = None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM fleet_telemetrysample s JOIN fleet_host h ON h.id = s.host_id "
            "WHERE %s::text IS NULL OR h.hostname = %s",
            [hostname, hostname],
        )
        return cursor.fetchone()[0]


def _grouped(groups: IngestGroups, members: list[tuple[int, dict[str, Any]]]) -> list[Any]:
    """Each (team id, payload) from its own thread through ``groups``, queued behind a leader in
    flight, then led by the first queued: their answers (a result, or the exception raised)."""
    answers: list[Any] = [None] * len(members)
    with groups._lock:
        groups._leaders = groups._max_leaders  # leaders in flight: every thread below queues and waits

    def send(index: int, team_id: int, payload: dict[str, Any]) -> None:
        try:
            answers[index] = groups.ingest(team_id=team_id, prepared=telemetry_batch_prepare(payload=payload))
        except Exception as exc:
            answers[index] = exc
        finally:
            close_old_connections()
            connection.close()

    threads = []
    for index, (team_id, payload) in enumerate(members):
        thread = threading.Thread(target=send, args=(index, team_id, payload))
        thread.start()
        threads.append(thread)
        while len(groups._queue) < index + 1:  # queued in this order
            time.sleep(0.001)
    with groups._lock:  # a leader in flight is done: it hands the lead to the first queued
        first = groups._queue[0]
        first.lead = True
        first.done.set()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert groups._leaders == groups._max_leaders - 1 and not groups._queue
    return answers


@pytest.mark.django_db(transaction=True)
def test_it_stores_a_group_in_one_transaction_and_answers_each(team: Any) -> None:
    groups = IngestGroups()
    payloads = [_payload(host, n=4 + 2 * host) for host in range(1, 5)]
    answers = _grouped(groups, [(team.pk, payload) for payload in payloads])
    assert answers == [
        {
            "batch_id": payload["batch_id"],
            "accepted": len(payload["samples"]),
            "duplicate_samples": 0,
            "duplicate": False,
        }
        for payload in payloads
    ]
    assert (groups.stats.groups, groups.stats.batches) == (1, 4)
    for host, payload in enumerate(payloads, start=1):
        assert _samples(f"gpu-node-{host:02d}") == len(payload["samples"])
    # All four in one transaction: their claims share its id.
    xids = set(
        IngestBatch.objects.filter(team=team).extra(select={"x": "xmin::text"}).values_list("x", flat=True)
    )
    assert len(xids) == 1


@pytest.mark.django_db(transaction=True)
def test_a_groups_results_equal_the_batches_stored_one_by_one(team: Any, other_team: Any) -> None:
    """The same batches (new, sent again under the same id, sent again under a new id, half new)
    grouped for one team and stored one transaction each for the other: the same answers."""
    start = time.time() - 100

    def scenario(team_id: int, base: int) -> list[dict[str, Any]]:
        first = _payload(base + 1, start=start)
        telemetry_batches_ingest(team_id=team_id, payloads=[first])
        resent = _payload(base + 1, start=start, batch_id=None)  # same samples, a new batch id
        half = _payload(base + 2, n=8, start=start)
        telemetry_batches_ingest(team_id=team_id, payloads=[_payload(base + 2, n=4, start=start)])
        return [first, resent, half, _payload(base + 3)]

    grouped = scenario(team.pk, 0)
    alone = scenario(other_team.pk, 10)
    groups = IngestGroups()
    # first and resent share a host: resent waits for the next group.
    answers = _grouped(groups, [(team.pk, p) for p in grouped])
    expected = [telemetry_batches_ingest(team_id=other_team.pk, payloads=[p])[0] for p in alone]

    def unnamed(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in result.items() if k != "batch_id"} for result in results]

    assert unnamed(answers) == unnamed(expected)
    assert [a["batch_id"] for a in answers] == [p["batch_id"] for p in grouped]
    assert answers[1] == {
        "batch_id": grouped[1]["batch_id"],
        "accepted": 0,
        "duplicate_samples": 8,
        "duplicate": False,
    }
    assert answers[2]["duplicate_samples"] == 4
    assert groups.stats.groups == 2
    assert _samples("gpu-node-01") == _samples("gpu-node-11") == 8
    assert _samples("gpu-node-02") == _samples("gpu-node-12") == 8


@pytest.mark.django_db(transaction=True)
def test_a_reused_batch_id_or_another_teams_gpu_refuses_that_member_only(team: Any, other_team: Any) -> None:
    stored = _payload(1)
    telemetry_batches_ingest(team_id=team.pk, payloads=[stored])
    foreign = _payload(9)
    telemetry_batches_ingest(team_id=other_team.pk, payloads=[foreign])
    reused = _payload(2, batch_id=stored["batch_id"])  # another body under a stored batch id
    stealing = _payload(3)
    stealing["accelerators"][0]["uuid"] = foreign["accelerators"][0]["uuid"]
    for sample in stealing["samples"][::2]:
        sample["gpu"] = foreign["accelerators"][0]["uuid"]
    fine = [_payload(4), _payload(5)]
    groups = IngestGroups()
    answers = _grouped(
        groups, [(team.pk, fine[0]), (team.pk, reused), (team.pk, stealing), (team.pk, fine[1])]
    )
    assert isinstance(answers[1], IngestRejected)
    assert (answers[1].status, answers[1].code) == (409, "idempotency_key_reused")
    assert isinstance(answers[2], IngestRejected)
    assert (answers[2].status, answers[2].code) == (409, "accelerator_conflict")
    assert answers[0]["accepted"] == answers[3]["accepted"] == 8
    assert groups.stats.groups == 1
    assert _samples("gpu-node-04") == _samples("gpu-node-05") == 8
    assert _samples("gpu-node-02") == _samples("gpu-node-03") == 0
    assert _samples() == 8 + 8 + 8 + 8


@pytest.mark.django_db(transaction=True)
def test_the_same_batch_twice_is_a_retry_of_the_first(team: Any) -> None:
    payload = _payload(1)
    groups = IngestGroups()
    answers = _grouped(groups, [(team.pk, payload), (team.pk, _payload(2)), (team.pk, payload)])
    assert answers[0] == {
        "batch_id": payload["batch_id"],
        "accepted": 8,
        "duplicate_samples": 0,
        "duplicate": False,
    }
    assert answers[2] == {**answers[0], "duplicate": True}
    assert _samples("gpu-node-01") == 8
    # Listed twice in one transaction (as a remote-write request could): the second is the
    # first's retry, with the first's result (some of its samples were stored already).
    start = time.time() - 50
    telemetry_batches_ingest(team_id=team.pk, payloads=[_payload(3, n=4, start=start)])
    half = telemetry_batch_prepare(payload=_payload(3, n=8, start=start))
    first, second = telemetry_batches_ingest(team_id=team.pk, prepared=[half, half])
    assert first == {
        "batch_id": half.batch.batch_id,
        "accepted": 4,
        "duplicate_samples": 4,
        "duplicate": False,
    }
    assert second == {**first, "duplicate": True}
    assert _samples("gpu-node-03") == 8


@pytest.mark.django_db(transaction=True)
def test_a_failed_commit_fails_every_member_and_stores_nothing(team: Any, monkeypatch: Any) -> None:
    commit = BaseDatabaseWrapper.commit
    store = ingest_services.telemetry_batches_store
    storing = threading.local()
    committing: list[bool] = []

    def stored(**kwargs: Any) -> Any:
        storing.on = True
        return store(**kwargs)

    def failing(self: BaseDatabaseWrapper) -> None:
        if getattr(storing, "on", False):  # the commit of the batches' transaction
            storing.on = False
            committing.append(True)
            raise DatabaseError("injected at commit")
        commit(self)

    monkeypatch.setattr(ingest_services, "telemetry_batches_store", stored)
    monkeypatch.setattr(BaseDatabaseWrapper, "commit", failing)
    payloads = [_payload(host) for host in range(1, 4)]
    answers = _grouped(IngestGroups(), [(team.pk, p) for p in payloads])
    monkeypatch.setattr(BaseDatabaseWrapper, "commit", commit)
    monkeypatch.setattr(ingest_services, "telemetry_batches_store", store)
    assert committing == [True]  # one commit for the group
    assert isinstance(answers[0], DatabaseError)  # the leader's own error
    assert all(isinstance(a, GroupFailed) and isinstance(a.__cause__, DatabaseError) for a in answers[1:])
    assert _samples() == 0
    assert not IngestBatch.objects.exists()
    # The agents retry under the same batch ids: all stored, once.
    answers = _grouped(IngestGroups(), [(team.pk, p) for p in payloads])
    assert [a["duplicate"] for a in answers] == [False] * 3
    assert _samples() == 24


@pytest.mark.django_db(transaction=True)
def test_concurrent_posts_are_each_answered_and_stored_once(
    team: Any, make_token: Callable[..., str]
) -> None:
    token = make_token(team, "ingest")
    payloads = [_payload(host, n=40) for host in range(1, 9)]
    payloads.append({**_payload(20), "samples": "not a list"})  # a bad batch: its own 4xx
    barrier = threading.Barrier(len(payloads))
    answers: dict[int, tuple[int, Any]] = {}
    before = (ingest_group.groups.stats.groups, ingest_group.groups.stats.batches)

    def send(index: int) -> None:
        try:
            barrier.wait()
            response = post_json(Client(), URL, payloads[index], token)
            answers[index] = (response.status_code, response.json())
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(payloads))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index, payload in enumerate(payloads[:-1]):
        assert answers[index] == (
            200,
            {"batch_id": payload["batch_id"], "accepted": 40, "duplicate_samples": 0, "duplicate": False},
        )
    assert answers[len(payloads) - 1][0] == 422
    groups, batches = ingest_group.groups.stats.groups, ingest_group.groups.stats.batches
    assert batches - before[1] == 8 and 1 <= groups - before[0] <= 8
    assert _samples() == 8 * 40


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("leaders", [1, 2, 3])
def test_threads_posting_back_to_back_are_each_answered_once_with_several_leaders(
    team: Any, leaders: int
) -> None:
    """Twelve threads, each posting three batches of its host in turn (with one leader, groups
    form behind it; with more, groups are written while others commit): every batch answered with
    its own result, stored once, and no lead left held."""
    groups = IngestGroups(leaders=leaders)
    answers: dict[tuple[int, int], Any] = {}
    barrier = threading.Barrier(12)

    def send(host: int) -> None:
        try:
            barrier.wait()
            for turn in range(3):
                payload = _payload(host, n=4, start=time.time() - 600 + 60 * turn)
                try:
                    answers[host, turn] = (
                        payload["batch_id"],
                        groups.ingest(team_id=team.pk, prepared=telemetry_batch_prepare(payload=payload)),
                    )
                except Exception as exc:
                    answers[host, turn] = (payload["batch_id"], exc)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=send, args=(host,)) for host in range(1, 13)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive()
    assert len(answers) == 36
    for batch_id, answer in answers.values():
        assert answer == {"batch_id": batch_id, "accepted": 4, "duplicate_samples": 0, "duplicate": False}
    assert groups._leaders == 0 and not groups._queue
    assert groups.stats.batches == 36 and groups.stats.groups <= 36
    assert _samples() == 36 * 4


def _ingest_in_threads(
    groups: IngestGroups, team_id: int, payloads: list[dict[str, Any]], *, first_lingers: bool
) -> tuple[list[Any], list[threading.Thread]]:
    """The first payload's thread leads; once it lingers, the others' threads start, one by one."""
    answers: list[Any] = [None] * len(payloads)

    def send(index: int) -> None:
        try:
            prepared = telemetry_batch_prepare(payload=payloads[index])
            answers[index] = groups.ingest(team_id=team_id, prepared=prepared)
        except Exception as exc:
            answers[index] = exc
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(payloads))]
    if first_lingers:  # as if batches had just met in this process: company is likely
        groups._met_at = time.monotonic()
    threads[0].start()
    give_up = time.monotonic() + 10
    while first_lingers and not groups._lingering:
        assert time.monotonic() < give_up, "the leader did not linger"
        time.sleep(0.001)
    for index, thread in enumerate(threads[1:], start=1):
        thread.start()
        # Queued behind the lingering leader, not leading (or the group it filled is taken).
        while len(groups._queue) < index + 1 and not groups.stats.groups:
            assert time.monotonic() < give_up, "the batch did not queue"
            time.sleep(0.001)
    return answers, threads


def _accepted(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "batch_id": payload["batch_id"],
        "accepted": len(payload["samples"]),
        "duplicate_samples": 0,
        "duplicate": False,
    }


@pytest.mark.django_db(transaction=True)
def test_a_leader_lingers_for_the_batches_that_arrive_meanwhile(team: Any) -> None:
    groups = IngestGroups(linger_s=1.0)
    payloads = [_payload(host, n=6) for host in range(1, 4)]
    answers, threads = _ingest_in_threads(groups, team.pk, payloads, first_lingers=True)
    assert groups._leaders == 1  # the later two queued behind the lingering leader
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert answers == [_accepted(payload) for payload in payloads]
    assert (groups.stats.groups, groups.stats.batches) == (1, 3)
    xids = set(
        IngestBatch.objects.filter(team=team).extra(select={"x": "xmin::text"}).values_list("x", flat=True)
    )
    assert len(xids) == 1
    assert groups._leaders == 0 and not groups._queue and not groups._lingering


@pytest.mark.django_db(transaction=True)
def test_a_full_group_ends_the_linger(team: Any) -> None:
    # A linger of a minute, a group of three: the third batch's arrival starts the transaction.
    groups = IngestGroups(linger_s=60.0, batches=3)
    payloads = [_payload(host, n=6) for host in range(1, 4)]
    answers, threads = _ingest_in_threads(groups, team.pk, payloads, first_lingers=True)
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    assert answers == [_accepted(payload) for payload in payloads]
    assert (groups.stats.groups, groups.stats.batches) == (1, 3)


@pytest.mark.django_db(transaction=True)
def test_without_a_linger_a_leader_writes_alone(team: Any) -> None:
    groups = IngestGroups(linger_s=0.0)
    payload = _payload(1, n=6)
    answers, threads = _ingest_in_threads(groups, team.pk, [payload], first_lingers=False)
    threads[0].join(timeout=30)
    assert answers == [_accepted(payload)] and (groups.stats.groups, groups.stats.batches) == (1, 1)
    assert groups._lingering == 0


@pytest.mark.django_db(transaction=True)
def test_a_batch_alone_does_not_linger(team: Any) -> None:
    # A minute's linger, but no batches met in this process: each is written at once, the first
    # and the next one posted after it (one after another, as the bench's reference posts).
    groups = IngestGroups(linger_s=60.0)
    for host in (1, 2):
        payload = _payload(host, n=6)
        answers, threads = _ingest_in_threads(groups, team.pk, [payload], first_lingers=False)
        threads[0].join(timeout=30)
        assert not threads[0].is_alive()
        assert answers == [_accepted(payload)]
    assert groups.stats.groups == 2
