"""The pipeline's own state, for staff: queue depths and waits, scheduled jobs, app probes.

``pipeline_status`` answers "is the background work keeping up?" for ``accelboard status`` and
``/healthz``:
1. Each Celery queue (``scheduled``, ``rollups``, ``bulk``): messages waiting and the age of the oldest, read
   from the broker (Redis lists, or the SQLAlchemy transport's tables); the age comes from the
   ``published_at`` header every message carries (``accelboard.celery``). Past its limit
   (``PIPELINE_<QUEUE>_AGE_LIMIT_S``) the queue is lagging.
2. The per-minute beat pass (``telemetry_rollups_refresh``): when it last started; more than a
   minute plus ``PIPELINE_BEAT_LATE_LIMIT_S`` ago means beat or the scheduled worker is down.
3. Probes that higher apps register (``probe_register`` in their ``AppConfig.ready``): the fleet
   app reports its rollup lag (the oldest dirty range not yet rolled up).
A broker that cannot be reached is reported as such (``depth`` None), never raised.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings
from django.utils import timezone

from .models import JobRun

log = logging.getLogger(__name__)

# The beat pass whose last start tells whether beat and the scheduled worker are alive.
HEARTBEAT_JOB = "telemetry_rollups_refresh"
HEARTBEAT_INTERVAL_S = 60.0


@dataclass
class Check:
    """One line of the status: a name, a figure, its limit and whether it is within it."""

    name: str
    value: float | None
    limit: float | None
    unit: str = "s"
    ok: bool = True
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class PipelineStatus:
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {"status": "ok" if self.ok else "lagging", "checks": [asdict(check) for check in self.checks]}


Probe = Callable[[], list[Check]]
_PROBES: list[Probe] = []


def probe_register(probe: Probe) -> None:
    """Add an app's probe (called from its ``AppConfig.ready``); registering twice is a no-op."""
    if probe not in _PROBES:
        _PROBES.append(probe)


# Redis keeps a queue's priorities in separate lists: the queue's name, then name\x06\x16<n>.
_REDIS_PRIORITY_STEPS = (0, 3, 6, 9)


def _redis_queue(client: Any, name: str) -> tuple[int, float | None]:
    keys = [name if step == 0 else f"{name}\x06\x16{step}" for step in _REDIS_PRIORITY_STEPS]
    depth = sum(int(client.llen(key)) for key in keys)
    oldest: float | None = None
    for key in keys:
        raw = client.lindex(key, -1)  # kombu LPUSHes and BRPOPs: the oldest is at the right end
        stamp = _published_at(raw)
        if stamp is not None:
            oldest = stamp if oldest is None else min(oldest, stamp)
    return depth, oldest


def _published_at(raw: Any) -> float | None:
    if not raw:
        return None
    try:
        message = json.loads(raw)
        stamp = (message.get("headers") or {}).get("published_at")
        return float(stamp) if stamp is not None else None
    except (ValueError, TypeError, AttributeError):
        return None


def _sqla_queue(channel: Any, name: str) -> tuple[int, float | None]:
    from sqlalchemy import text

    session = channel.session
    # One statement, one snapshot: the oldest waiting message is the next a worker takes, so a
    # second query for its payload found it gone while a worker drained the queue (no age shown
    # for a queue thousands deep).
    row = session.execute(
        text(
            "WITH waiting AS (SELECT m.id, m.payload FROM kombu_message m "
            "JOIN kombu_queue q ON q.id = m.queue_id WHERE q.name = :name AND m.visible) "
            "SELECT (SELECT count(*) FROM waiting), (SELECT payload FROM waiting ORDER BY id LIMIT 1)"
        ),
        {"name": name},
    ).one()
    session.rollback()
    return int(row[0]), _published_at(row[1])


def queue_states(
    *, queues: list[str] | None = None, broker_url: str | None = None
) -> list[tuple[str, int | None, float | None, str]]:
    """(queue, messages waiting, age of the oldest in seconds, error) for each queue, on the
    configured broker (or ``broker_url``)."""
    from accelboard.celery import QUEUES, app

    names = queues or list(QUEUES)
    now = time.time()
    states: list[tuple[str, int | None, float | None, str]] = []
    try:
        with app.connection_for_read(broker_url) as conn:
            conn.ensure_connection(max_retries=1, timeout=3)
            channel: Any = conn.default_channel
            # The transport's library: kombu's SQLAlchemy transport is of driver type 'sql'.
            driver = str(conn.transport.driver_name)
            for name in names:
                if driver == "redis":
                    depth, oldest = _redis_queue(channel.client, name)
                elif driver == "sqlalchemy":
                    depth, oldest = _sqla_queue(channel, name)
                else:
                    depth, oldest = int(channel._size(name)), None
                states.append((name, depth, None if oldest is None else max(0.0, now - oldest), ""))
    except Exception as exc:  # noqa: BLE001 - an unreachable broker is a status, not a crash
        log.warning("cannot read the broker's queues: %s", exc)
        return [(name, None, None, f"{type(exc).__name__}: {exc}"[:200]) for name in names]
    return states


def _age_limit(queue: str) -> float:
    limits: dict[str, float] = settings.PIPELINE_QUEUE_AGE_LIMITS_S
    return float(limits.get(queue, max(limits.values())))


def pipeline_status() -> PipelineStatus:
    """The queues, the beat heartbeat and every registered probe (see the module docstring)."""
    checks: list[Check] = []
    for name, depth, age, error in queue_states():
        limit = _age_limit(name)
        checks.append(
            Check(
                name=f"queue.{name}",
                value=None if age is None else round(age, 1),
                limit=limit,
                ok=not error and (age is None or age <= limit),
                detail={"depth": depth, **({"error": error} if error else {})},
            )
        )
    last = (
        JobRun.objects.filter(name=HEARTBEAT_JOB).order_by("-started_at").values_list("started_at", flat=True)
    )
    started = last.first()
    beat_limit = HEARTBEAT_INTERVAL_S + float(settings.PIPELINE_BEAT_LATE_LIMIT_S)
    since = None if started is None else (timezone.now() - started).total_seconds()
    checks.append(
        Check(
            name="beat.telemetry_rollups_refresh",
            value=None if since is None else round(since, 1),
            limit=beat_limit,
            # Never run: a fresh install, or beat not started; both are worth a look but only
            # the second is a lag, and it shows as the queue checks stay empty. Not a failure.
            ok=since is None or since <= beat_limit,
            detail={"last_started": started.isoformat() if started else None},
        )
    )
    for probe in _PROBES:
        try:
            checks.extend(probe())
        except Exception as exc:  # noqa: BLE001 - one broken probe must not hide the others
            log.exception("pipeline probe %s failed", getattr(probe, "__name__", probe))
            checks.append(
                Check(
                    name=getattr(probe, "__name__", "probe"),
                    value=None,
                    limit=None,
                    ok=False,
                    detail={"error": f"{type(exc).__name__}: {exc}"[:200]},
                )
            )
    return PipelineStatus(checks=checks)
