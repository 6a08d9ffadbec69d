"""An agent's batch's statements are prepared once a connection (server-side binding), and storing
with them prepared or not gives the same answers, errors and rows (docs/scaling.md, issue 37)."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection, transaction

from accelboard.fleet.ingest_services import telemetry_batch_ingest
from accelboard.fleet.ingest_validation import IngestRejected

from .conftest import GPU_A, GPU_B, telemetry_payload

# A statement of each kind the agent's path sends, by a fragment of its text.
STATEMENTS = {
    "claim": "INSERT INTO api_ingestbatch",
    "stored instants": "SELECT accelerator_id, time FROM fleet_telemetrysample",
    "final": "INSERT INTO fleet_telemetrydirtyrange",
}


def _executions() -> dict[str, int]:
    """How many times this connection ran each prepared statement of ``STATEMENTS``."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements")
        rows = cursor.fetchall()
    return {
        name: sum(count for sql, count in rows if fragment in sql) for name, fragment in STATEMENTS.items()
    }


def test_an_agents_batch_statements_are_prepared_once_a_connection(db: None, team: Any) -> None:
    start = time.time() - 60
    before = _executions()
    for n in range(3):
        result = telemetry_batch_ingest(team_id=team.pk, payload=telemetry_payload(n=6, start=start + 10 * n))
        assert result["accepted"] == 6
    ran = {name: count - before[name] for name, count in _executions().items()}
    # Each of the three batches ran the claim and the final statement as prepared statements, and
    # the stored-instants check (after the registration for the first batch, in the claim's
    # pipeline once the host's registration is cached): none of them parsed again.
    assert ran == {"claim": 3, "stored instants": 3, "final": 3}


def _store_all(team_id: int, start: float) -> tuple[list[Any], list[tuple[Any, ...]]]:
    """A sequence of batches (new, a retry, a resend under another id, a reused id with another
    body, an unknown GPU, another host) and their answers, then the rows they left."""
    first = telemetry_payload(n=8, start=start, batch_id="prepared-1")
    resent = {**telemetry_payload(n=8, start=start, batch_id="prepared-2")}
    overlapping = telemetry_payload(n=12, start=start + 2, batch_id="prepared-3")
    reused = telemetry_payload(n=4, start=start + 30, batch_id="prepared-1")
    unknown = telemetry_payload(n=4, start=start + 40, batch_id="prepared-4")
    unknown["samples"][1]["gpu"] = "GPU-not-listed"
    other = telemetry_payload(n=6, start=start + 50, hostname="gpu-node-02", batch_id="prepared-5")
    rename = {GPU_A: GPU_A[:-3] + "777", GPU_B: GPU_B[:-4] + "9777"}
    other["accelerators"] = [{**gpu, "uuid": rename[gpu["uuid"]]} for gpu in other["accelerators"]]
    for sample in other["samples"]:
        sample["gpu"] = rename[sample["gpu"]]
    answers: list[Any] = []
    for payload in (first, first, resent, overlapping, reused, unknown, other, first):
        try:
            answers.append(telemetry_batch_ingest(team_id=team_id, payload=payload))
        except IngestRejected as exc:
            answers.append((exc.status, exc.code, exc.path, str(exc)))
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT h.hostname, a.uuid, s.time, s.power_w, s.energy_mj, s.gpu_util, s.mem_used_bytes,
                      s.temperature_c, s.xid_errors
               FROM fleet_telemetrysample s JOIN fleet_accelerator a ON a.id = s.accelerator_id
               JOIN fleet_host h ON h.id = s.host_id ORDER BY 1, 2, 3"""
        )
        rows = cursor.fetchall()
        cursor.execute(
            """SELECT h.hostname, d.start, d."end", d.partials_pending FROM fleet_telemetrydirtyrange d
               JOIN fleet_host h ON h.id = d.host_id ORDER BY 1, 2, 3"""
        )
        rows += cursor.fetchall()
        cursor.execute(
            "SELECT client_id, result, digest FROM api_ingestbatch WHERE client_id LIKE 'prepared-%%' ORDER BY 1"
        )
        rows += cursor.fetchall()
    return answers, rows


def test_prepared_or_not_the_same_answers_errors_and_rows(db: None, team: Any) -> None:
    connection.ensure_connection()
    pg = connection.connection
    threshold = pg.prepare_threshold
    start = time.time() - 120
    stored: list[tuple[list[Any], list[tuple[Any, ...]]]] = []
    try:
        for prepare in (threshold, None):  # as configured (prepared), then psycopg's preparing off
            pg.prepare_threshold = prepare
            with transaction.atomic():
                stored.append(_store_all(team.pk, start))
                transaction.set_rollback(True)
    finally:
        pg.prepare_threshold = threshold
    (answers, rows), (unprepared_answers, unprepared_rows) = stored
    assert [a[:3] if isinstance(a, tuple) else a for a in answers] == [
        {"batch_id": "prepared-1", "accepted": 8, "duplicate_samples": 0, "duplicate": False},
        {"batch_id": "prepared-1", "accepted": 8, "duplicate_samples": 0, "duplicate": True},
        {"batch_id": "prepared-2", "accepted": 0, "duplicate_samples": 8, "duplicate": False},
        {"batch_id": "prepared-3", "accepted": 8, "duplicate_samples": 4, "duplicate": False},
        (409, "idempotency_key_reused", "batch_id"),
        (422, "unknown_accelerator", "samples[1].gpu"),
        {"batch_id": "prepared-5", "accepted": 6, "duplicate_samples": 0, "duplicate": False},
        {"batch_id": "prepared-1", "accepted": 8, "duplicate_samples": 0, "duplicate": True},
    ]
    assert answers == unprepared_answers
    assert sum(len(row) == 9 for row in rows) == 8 + 8 + 6  # the samples stored
    assert rows == unprepared_rows
