"""Asking for a rollup drain after a batch: one claim in the database for every web process.

Rollups are coalesced: ingest marks each batch's range dirty in its transaction and, after the
commit, calls ``telemetry_rollups_request``. Across every web process (and machine) one of them
claims the next drain in the database (``telemetry_rollups_claim``) and enqueues one
``tasks.telemetry_rollups_drain`` due ``ROLLUP_INTERVAL_S`` later; the others find a drain already
due and enqueue nothing, and skip asking again until it is due. A batch committed before a drain
is due is covered by it. A drain's cost follows the rows it rolls up, so this does not make
draining cheaper (docs/scaling.md measured it); it keeps the drains to one per interval however
many web processes and machines ask. The per-minute beat pass is the safety net for a lost enqueue.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import connection

from . import tasks

log = logging.getLogger(__name__)

# One drain for the whole fleet at most this often, this long after the batch that claimed it.
ROLLUP_INTERVAL_S = 10.0
# A process that lost the claim skips asking until this long before the claimed drain is due
# (a margin for the clocks of the database and the claimer's Celery countdown).
_DUE_MARGIN_S = 1.0
_skip_until = -1e9
_request_lock = threading.Lock()


def telemetry_rollups_claim(*, interval_s: float) -> tuple[bool, float]:
    """Claim the next rollup drain for every web process at once: ``(True, interval_s)`` when
    the drain due before now is this caller's to enqueue (it becomes due ``interval_s`` from now),
    ``(False, seconds)`` when another caller's drain is due in that many seconds. One statement;
    concurrent claims queue on the row and only the first finds it due. A drain due at D covers
    every batch committed before D, so a caller that lost the claim has nothing to enqueue."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO fleet_rollupdrainschedule (id, due)
            VALUES (1, now() + make_interval(secs => %(interval)s))
            ON CONFLICT (id) DO UPDATE SET due = EXCLUDED.due
            WHERE fleet_rollupdrainschedule.due <= now()
            RETURNING due
            """,
            {"interval": interval_s},
        )
        if cursor.fetchone() is not None:
            return True, interval_s
        cursor.execute("SELECT EXTRACT(EPOCH FROM due - now()) FROM fleet_rollupdrainschedule WHERE id = 1")
        row = cursor.fetchone()
    return False, max(0.0, float(row[0])) if row else 0.0


def telemetry_rollups_claim_release() -> None:
    """Give the claim back (its drain could not be enqueued): the next batch claims again."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE fleet_rollupdrainschedule SET due = now() WHERE id = 1")


def telemetry_rollups_request(*, now: float | None = None) -> bool:
    """Ask for a drain after a batch committed; True when this call enqueued one.

    Called by ingest after its commit. A process asks the database at most once per
    drain (``telemetry_rollups_claim``): the caller that claims it enqueues the drain
    with a ``ROLLUP_INTERVAL_S`` countdown; every other batch until then, in any process, is
    covered by that drain and costs nothing. A database or broker failure is logged and left to
    the beat pass: the batch is committed and its dirty mark waits in the database.
    """
    global _skip_until
    moment = time.monotonic() if now is None else now
    with _request_lock:
        if moment < _skip_until:
            return False
        # Other threads of this process skip meanwhile: the drain this one claims or finds due
        # covers their batches (if the claim fails, the beat pass does).
        _skip_until = moment + ROLLUP_INTERVAL_S - _DUE_MARGIN_S
    try:
        claimed, due_in = telemetry_rollups_claim(interval_s=ROLLUP_INTERVAL_S)
    except Exception:  # noqa: BLE001 - the beat pass drains within a minute
        log.warning("could not claim a rollup drain; the per-minute pass will", exc_info=True)
        claimed, due_in = False, 0.0
    with _request_lock:
        _skip_until = moment + max(0.0, due_in - _DUE_MARGIN_S)
    if not claimed:
        return False
    try:
        tasks.telemetry_rollups_drain.apply_async(countdown=ROLLUP_INTERVAL_S)
    except Exception:  # noqa: BLE001 - any broker failure: the beat pass drains within a minute
        log.warning("could not enqueue a rollup drain; the per-minute pass will", exc_info=True)
        with _request_lock:
            _skip_until = -1e9
        try:
            telemetry_rollups_claim_release()
        except Exception:  # noqa: BLE001
            log.warning("could not release the rollup drain claim", exc_info=True)
        return False
    return True
