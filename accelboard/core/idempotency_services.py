"""Idempotent writes: every write an agent, CI job or exporter retries carries a client id.

1. Inside the write's transaction, claim ``(team, kind, client_id)`` in ``IngestBatch`` with
   ``INSERT ... ON CONFLICT DO NOTHING RETURNING id``.
2. A concurrent retry's INSERT waits on the unique index until the first transaction ends. If
   that one committed, the retry sees the conflict and gets the stored result; if it rolled back,
   the retry's claim succeeds and it writes the data.
3. The data and the claim commit together, so a failed write leaves neither behind.
4. The claim keeps the digest of the write's canonical body (``body_digest``). A retry with the
   same body gets the stored result; the same client id with another body raises
   ``IdempotencyKeyReused`` (the API answers 409 naming the key, as payment APIs do), inside the
   write's transaction, so nothing of it is stored. A claim without a digest (made before they
   were kept) answers any body, as it did.

Here, below every app that takes such writes (fleet's telemetry, benchmark runs and serving
batches through the API), so each claims inside its own transaction without calling back up.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from django.db import connection, transaction

from .models import IngestBatch


class IdempotencyKeyReused(Exception):
    """A client id already claimed came with another body: not a retry, and nothing is stored.
    ``index``: which write of several (``ingest_batches_claim``)."""

    def __init__(self, *, kind: str, client_id: str, index: int = 0) -> None:
        super().__init__(f"{kind} {client_id!r} was stored before with another body")
        self.kind = kind
        self.client_id = client_id
        self.index = index


def body_digest(body: object) -> str:
    """The digest of a write's canonical body: its JSON with sorted keys and no spaces (key order
    and whitespace are not content), SHA-256 in hex. Pass the body without its client id."""
    try:
        text = orjson.dumps(body, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:  # an integer beyond 64 bits, or a type orjson does not know
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(text).hexdigest()


def _digest_check(*, kind: str, client_id: str, stored: str, digest: str, index: int = 0) -> None:
    if stored and digest and stored != digest:
        raise IdempotencyKeyReused(kind=kind, client_id=client_id, index=index)


def ingest_batch_claim(
    *, team_id: int, kind: str, client_id: str, result: dict[str, Any] | None = None, digest: str = ""
) -> dict[str, Any] | None:
    """Claim the client id; None when claimed now, else the stored result of the earlier write.
    Raises ``IdempotencyKeyReused`` when the earlier write's body had another ``digest``
    (``body_digest``).

    ``result``, when the write's result is known before it runs (telemetry: the samples it
    accepts), is stored with the claim, saving the write its own UPDATE. Call it inside the
    write's transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO api_ingestbatch (team_id, kind, client_id, result, digest, created_at)
            VALUES (%s, %s, %s, %s::jsonb, %s, now())
            ON CONFLICT (team_id, kind, client_id) DO NOTHING
            RETURNING id
            """,
            [team_id, kind, client_id, orjson.dumps(result or {}).decode(), digest],
        )
        if cursor.fetchone() is not None:
            return None
    stored, stored_digest = IngestBatch.objects.values_list("result", "digest").get(
        team_id=team_id, kind=kind, client_id=client_id
    )
    _digest_check(kind=kind, client_id=client_id, stored=stored_digest, digest=digest)
    return stored


_CLAIM_MANY_SQL = """
INSERT INTO api_ingestbatch (team_id, kind, client_id, result, digest, created_at)
SELECT %s::int8, %s::text, c.client_id, c.result::jsonb, c.digest, now()
FROM unnest(%s::text[], %s::text[], %s::text[]) WITH ORDINALITY AS c(client_id, result, digest, n){gate}
ORDER BY c.n
ON CONFLICT (team_id, kind, client_id) DO NOTHING
RETURNING client_id
"""


def ingest_batches_claim(
    *,
    team_id: int,
    kind: str,
    client_ids: Sequence[str],
    results: Sequence[dict[str, Any]],
    digests: Sequence[str] | None = None,
) -> list[dict[str, Any] | None]:
    """``ingest_batch_claim`` for several writes of one transaction, in one statement: for each
    client id, None when claimed now, else the stored result of the earlier write (read in a
    second statement, only when there is one). A client id listed twice is claimed by its first
    listing; the second gets the first's result. Raises ``IdempotencyKeyReused`` (its ``index``
    the write's) for a client id stored, or listed before, with another digest. Call it inside
    the writes' transaction. ``ingest_batches_claim_sql`` and ``ingest_batches_claimed``: the
    same in two halves, for a caller sending more statements in the same round trip."""
    if not client_ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            *ingest_batches_claim_sql(
                team_id=team_id, kind=kind, client_ids=client_ids, results=results, digests=digests
            )
        )
        claimed = {row[0] for row in cursor.fetchall()}
    return ingest_batches_claimed(
        team_id=team_id, kind=kind, client_ids=client_ids, digests=digests, claimed=claimed
    )


def ingest_batches_claim_sql(
    *,
    team_id: int,
    kind: str,
    client_ids: Sequence[str],
    results: Sequence[dict[str, Any]],
    digests: Sequence[str] | None = None,
    gate: tuple[str, Sequence[Any]] | None = None,
) -> tuple[str, list[Any]]:
    """The claim statement of ``ingest_batches_claim`` and its parameters (client ids, not
    empty), for a caller that sends it itself (in a pipeline with others); its rows, the client
    ids claimed now, go to ``ingest_batches_claimed``. ``gate``: a query of one row and its
    parameters, run in the same statement before any id is claimed (its row is joined to every
    claimed one, and all of them are sorted before the first is inserted): the writes' locks."""
    if gate is not None:
        return _CLAIM_MANY_SQL.format(gate=f", ({gate[0]}) AS gate"), [
            team_id,
            kind,
            list(client_ids),
            [orjson.dumps(result).decode() for result in results],
            list(digests) if digests is not None else [""] * len(client_ids),
            *gate[1],
        ]
    return _CLAIM_MANY_SQL.format(gate=""), [
        team_id,
        kind,
        list(client_ids),
        [orjson.dumps(result).decode() for result in results],
        list(digests) if digests is not None else [""] * len(client_ids),
    ]


def ingest_batches_claimed(
    *,
    team_id: int,
    kind: str,
    client_ids: Sequence[str],
    digests: Sequence[str] | None,
    claimed: set[str],
) -> list[dict[str, Any] | None]:
    """``ingest_batches_claim``'s answer from the client ids its statement claimed
    (``ingest_batches_claim_sql``): reads the stored results of the others."""
    digests = list(digests) if digests is not None else [""] * len(client_ids)
    taken: dict[str, str] = {}
    answer: list[dict[str, Any] | None] = []
    for index, (client_id, digest) in enumerate(zip(client_ids, digests, strict=True)):
        fresh = client_id in claimed and client_id not in taken
        if client_id in taken:
            _digest_check(kind=kind, client_id=client_id, stored=taken[client_id], digest=digest, index=index)
        else:
            taken[client_id] = digest
        answer.append(None if fresh else {})
    if any(result is not None for result in answer):
        stored = {
            client_id: (result, digest)
            for client_id, result, digest in IngestBatch.objects.filter(
                team_id=team_id,
                kind=kind,
                client_id__in=[c for c, a in zip(client_ids, answer, strict=True) if a is not None],
            ).values_list("client_id", "result", "digest")
        }
        for index, (client_id, a) in enumerate(zip(client_ids, answer, strict=True)):
            if a is not None:
                _digest_check(
                    kind=kind,
                    client_id=client_id,
                    stored=stored[client_id][1],
                    digest=digests[index],
                    index=index,
                )
        answer = [None if a is None else stored[c][0] for c, a in zip(client_ids, answer, strict=True)]
    return answer


def ingest_batch_write(
    *, team_id: int, kind: str, client_id: str, write: Callable[[], dict[str, Any]], digest: str = ""
) -> tuple[dict[str, Any], bool]:
    """Run ``write`` once per (team, kind, client id), with its claim, in one transaction; return
    (result with ``duplicate``, duplicate). Raises ``IdempotencyKeyReused`` when the client id
    was stored with a body of another ``digest``."""
    with transaction.atomic():
        stored = ingest_batch_claim(team_id=team_id, kind=kind, client_id=client_id, digest=digest)
        if stored is not None:
            return {**stored, "duplicate": True}, True
        result = write()
        ingest_batch_result_set(team_id=team_id, kind=kind, client_id=client_id, result=result)
    return {**result, "duplicate": False}, False


def ingest_batch_result_set(*, team_id: int, kind: str, client_id: str, result: dict[str, Any]) -> None:
    """Store the result of a claimed write (what a retry of it gets back), where the claim did not
    know it. Call it inside the write's transaction."""
    IngestBatch.objects.filter(team_id=team_id, kind=kind, client_id=client_id).update(result=result)
