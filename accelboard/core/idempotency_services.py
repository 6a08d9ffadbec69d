"""Idempotent writes: every write an agent, CI job or exporter retries carries a client id.

1. Inside the write's transaction, claim ``(team, kind, client_id)`` in ``IngestBatch`` with
   ``INSERT ... ON CONFLICT DO NOTHING RETURNING id``.
2. A concurrent retry's INSERT waits on the unique index until the first transaction ends. If
   that one committed, the retry sees the conflict and gets the stored result; if it rolled back,
   the retry's claim succeeds and it writes the data.
3. The data and the claim commit together, so a failed write leaves neither behind.

Here, below every app that takes such writes (fleet's telemetry, benchmark runs and serving
batches through the API), so each claims inside its own transaction without calling back up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson
from django.db import connection, transaction

from .models import IngestBatch


def ingest_batch_claim(
    *, team_id: int, kind: str, client_id: str, result: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Claim the client id; None when claimed now, else the stored result of the earlier write.

    ``result``, when the write's result is known before it runs (telemetry: the samples it
    accepts), is stored with the claim, saving the write its own UPDATE. Call it inside the
    write's transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO api_ingestbatch (team_id, kind, client_id, result, created_at)
            VALUES (%s, %s, %s, %s::jsonb, now())
            ON CONFLICT (team_id, kind, client_id) DO NOTHING
            RETURNING id
            """,
            [team_id, kind, client_id, orjson.dumps(result or {}).decode()],
        )
        if cursor.fetchone() is not None:
            return None
    return IngestBatch.objects.get(team_id=team_id, kind=kind, client_id=client_id).result


_CLAIM_MANY_SQL = """
INSERT INTO api_ingestbatch (team_id, kind, client_id, result, created_at)
SELECT %s, %s, c.client_id, c.result::jsonb, now()
FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS c(client_id, result, n)
ORDER BY c.n
ON CONFLICT (team_id, kind, client_id) DO NOTHING
RETURNING client_id
"""


def ingest_batches_claim(
    *, team_id: int, kind: str, client_ids: Sequence[str], results: Sequence[dict[str, Any]]
) -> list[dict[str, Any] | None]:
    """``ingest_batch_claim`` for several writes of one transaction, in one statement: for each
    client id, None when claimed now, else the stored result of the earlier write (read in a
    second statement, only when there is one). A client id listed twice is claimed by its first
    listing; the second gets the first's result. Call it inside the writes' transaction."""
    if not client_ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            _CLAIM_MANY_SQL,
            [team_id, kind, list(client_ids), [orjson.dumps(result).decode() for result in results]],
        )
        claimed = {row[0] for row in cursor.fetchall()}
    taken: set[str] = set()
    answer: list[dict[str, Any] | None] = []
    for client_id in client_ids:
        fresh = client_id in claimed and client_id not in taken
        taken.add(client_id)
        answer.append(None if fresh else {})
    if any(result is not None for result in answer):
        stored = dict(
            IngestBatch.objects.filter(
                team_id=team_id,
                kind=kind,
                client_id__in=[c for c, a in zip(client_ids, answer, strict=True) if a is not None],
            ).values_list("client_id", "result")
        )
        answer = [None if a is None else stored[c] for c, a in zip(client_ids, answer, strict=True)]
    return answer


def ingest_batch_write(
    *, team_id: int, kind: str, client_id: str, write: Callable[[], dict[str, Any]]
) -> tuple[dict[str, Any], bool]:
    """Run ``write`` once per (team, kind, client id), with its claim, in one transaction; return
    (result with ``duplicate``, duplicate)."""
    with transaction.atomic():
        stored = ingest_batch_claim(team_id=team_id, kind=kind, client_id=client_id)
        if stored is not None:
            return {**stored, "duplicate": True}, True
        result = write()
        ingest_batch_result_set(team_id=team_id, kind=kind, client_id=client_id, result=result)
    return {**result, "duplicate": False}, False


def ingest_batch_result_set(*, team_id: int, kind: str, client_id: str, result: dict[str, Any]) -> None:
    """Store the result of a claimed write (what a retry of it gets back), where the claim did not
    know it. Call it inside the write's transaction."""
    IngestBatch.objects.filter(team_id=team_id, kind=kind, client_id=client_id).update(result=result)
