"""The Celery application, its two queues and its one beat schedule.

Tasks take ids and primitives (JSON serializer only). The beat schedule is built in code; every
entry can be re-timed or disabled with an env var ``ACCELBOARD_BEAT_<NAME>`` holding a crontab
("*/5 * * * *") or ``off``.

Queues, so that a backlog cannot starve what must run on time:
1. ``scheduled``: every beat entry, alert dispatch and email sends. Short, single-flight jobs;
   their lateness is what pages and alerts show.
2. ``rollups``: the rollup drains that ingest asks for (one per 10 s for the whole fleet).
   Drains run one at a time under an advisory lock; under a fleet's full load each one lasts
   about as long as the next is asked for, so they queue up. On the ``scheduled`` queue they
   took both of its worker's processes (one draining, one waiting for the lock) and beat's
   per-minute jobs waited behind the queued drains until they expired: a 2,000-host load
   test saw a per-minute job start 466 s late. Here they wait only for each other.
3. ``bulk`` (the default): work set off by uploads and imports (run costs, regression and drift
   checks of a run, cost recomputes after a price correction). A burst of uploads may queue
   thousands; they wait without delaying (1) or (2).
docker-compose runs a worker per queue (``-Q scheduled`` / ``-Q rollups`` / ``-Q bulk``); a worker
started without ``-Q`` (the demo, the tests) consumes all three. Every message carries
``published_at`` (epoch seconds) in its headers, so ``accelboard status`` can tell the age of the
oldest waiting task.
"""

from __future__ import annotations

import os
import time
from typing import Any

from celery import Celery
from celery.schedules import crontab
from celery.signals import before_task_publish
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")

app = Celery("accelboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

SCHEDULED_QUEUE = "scheduled"
ROLLUPS_QUEUE = "rollups"
BULK_QUEUE = "bulk"
QUEUES = (SCHEDULED_QUEUE, ROLLUPS_QUEUE, BULK_QUEUE)
# Tasks that are not beat entries but must not wait behind bulk work: alert emails (a person is
# waiting for them).
SCHEDULED_TASKS = frozenset(
    {
        "accelboard.notifications.tasks.alerts_dispatch",
        "accelboard.notifications.tasks.delivery_send",
        "accelboard.notifications.tasks.routes_dispatch",
        "accelboard.notifications.tasks.route_delivery_send",
    }
)
# The drains ingest asks for (pages and production alerts read the rollups): their own queue, so
# that however many wait, beat's jobs do not wait behind them.
ROLLUP_TASKS = frozenset(
    {
        "accelboard.fleet.tasks.telemetry_rollups_drain",
        "accelboard.fleet.tasks.telemetry_rollups_refresh_range",
    }
)


def task_queue(name: str) -> str:
    """The queue a task goes to: ``rollups`` for ``ROLLUP_TASKS``, ``scheduled`` for beat entries
    and ``SCHEDULED_TASKS``, else ``bulk``."""
    if name in ROLLUP_TASKS:
        return ROLLUPS_QUEUE
    if name in SCHEDULED_TASKS or name in {entry[0] for entry in BEAT_ENTRIES.values()}:
        return SCHEDULED_QUEUE
    return BULK_QUEUE


def _route(name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **kw: Any) -> dict[str, str]:
    queue = task_queue(name)
    return {"queue": queue, "exchange": queue, "routing_key": queue}


# Each queue with its own exchange and routing key (a bare Queue(name) would inherit the default
# queue's, and both would receive the same messages).
app.conf.task_queues = tuple(Queue(name, Exchange(name), routing_key=name) for name in QUEUES)
app.conf.task_default_queue = BULK_QUEUE
app.conf.task_routes = (_route,)


@before_task_publish.connect
def _stamp_published_at(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    """Stamp each message with its publish time: the age of the oldest waiting task is read from
    the head of each queue (``core.pipeline_selectors``)."""
    if headers is not None:
        headers.setdefault("published_at", time.time())


@app.on_after_configure.connect
def _polling_interval_for_sqla(sender: Celery | None = None, **kwargs: object) -> None:
    """kombu's SQLAlchemy transport passes transport options to ``create_engine``, so the
    polling interval has to be set on the transport class itself; and its channel is replaced
    by one that redelivers the messages of a worker that died (``accelboard.broker``).

    Run when Celery first reads its configuration, not at import: importing ``accelboard``
    must not load Django settings (that would start the embedded PostgreSQL for commands such
    as ``accelboard parse`` that need no database)."""
    try:
        from kombu.transport import sqlalchemy as sqla_transport
    except ImportError:  # the embedded extra is not installed: another broker is configured
        return
    from django.conf import settings

    from .broker import redelivery_install

    redelivery_install()
    sqla_transport.Transport.polling_interval = float(settings.CELERY_BROKER_POLLING_INTERVAL)


# name -> (task, default crontab fields, expires seconds, why)
BEAT_ENTRIES: dict[str, tuple[str, str, int]] = {
    # Partitions must exist before samples for tomorrow arrive; hourly is cheap and self-healing.
    "telemetry-partitions": ("accelboard.fleet.tasks.telemetry_partitions_maintain", "7 * * * *", 3000),
    # Minute rollups feed the live host pages; refreshing each minute keeps them at most ~1 min behind.
    # Ingest asks for drains (the rollups queue); this pass drains what a lost request missed.
    "telemetry-rollups": ("accelboard.fleet.tasks.telemetry_rollups_refresh", "* * * * *", 50),
    # Costs: yesterday (UTC) once its last minute rollups have settled, plus any of the last 7 days
    # whose telemetry arrived late. Price corrections enqueue their own recompute.
    "costs-daily": ("accelboard.costs.tasks.cost_daily_compute", "40 0 * * *", 3600),
    # Attribution: yesterday's GPU-days split into workloads, idle and unattributed, once the
    # cost pass (00:40) has written their cost rows; plus any day whose costs were recomputed since.
    "allocation-daily": ("accelboard.attribution.tasks.allocation_daily_compute", "20 1 * * *", 3600),
    # Alert emails: failed sends whose backoff has passed, and any delivery whose task was lost
    # (also plans immediate emails if an alerts_dispatch enqueue was lost). Every 5 minutes keeps
    # a lost email at most minutes late without hammering a broken SMTP server.
    "alert-email-retry": ("accelboard.notifications.tasks.deliveries_retry", "*/5 * * * *", 280),
    # Alert routes (Slack, Teams, PagerDuty, webhooks): the same, offset by a minute from the
    # emails' pass so that the two do not contend for the planning lock.
    "alert-route-retry": ("accelboard.notifications.tasks.route_deliveries_retry", "1-59/5 * * * *", 280),
    # Quantization drift: trends move even on days without new accuracy results (new results
    # also enqueue a check of their model). 05:30 UTC is after the nightly benchmark runs and
    # before the 07:00 digest, so a drift alert makes that day's digest.
    "drift-check": ("accelboard.drift.tasks.drift_check_daily", "30 5 * * *", 3600),
    # Canary verdicts: each active check over its window ending now; a failing one alerts the
    # team's routes. Every 5 minutes, offset by 3 so the intervals of the window's end are in.
    "canary-checks": ("accelboard.canary.tasks.canary_checks", "3-59/5 * * * *", 280),
    # The daily digest: early morning UTC, before most teams start their day.
    "alert-email-digest": ("accelboard.notifications.tasks.digests_send", "0 7 * * *", 3600),
    # Production signals (SLO, decode speed, energy per token, memory, throttling, XID/ECC) over
    # the last 15 minutes of rollups: every 5 minutes, offset by 2 so the minute rollups of the
    # window's end are in; the rules need 5 sustained minutes, so a condition alerts within ~10.
    "alerts-production": ("accelboard.alerts.tasks.production_signals_check", "2-59/5 * * * *", 280),
    # Remote-write: the counters of vLLM/Triton series unseen for a day are forgotten (their next
    # sample is a new baseline anyway); daily, at a quiet hour.
    "prometheus-series-forget": (
        "accelboard.serving.tasks.prometheus_series_state_forget",
        "50 3 * * *",
        3600,
    ),
    # The pipeline watching itself: queue waits, the rollup lag; logs an error when one lags.
    # Every minute, so a backlog is reported within a minute or two of passing its limit.
    "pipeline-check": ("accelboard.fleet.tasks.pipeline_check", "* * * * *", 50),
}


def _crontab(expr: str) -> crontab:
    minute, hour, day_of_month, month_of_year, day_of_week = expr.split()
    return crontab(
        minute=minute,
        hour=hour,
        day_of_month=day_of_month,
        month_of_year=month_of_year,
        day_of_week=day_of_week,
    )


def build_beat_schedule(environ: dict[str, str] | None = None) -> dict[str, dict]:
    environ = dict(os.environ if environ is None else environ)
    schedule: dict[str, dict] = {}
    for name, (task, default, expires) in BEAT_ENTRIES.items():
        var = "ACCELBOARD_BEAT_" + name.upper().replace("-", "_")
        expr = environ.get(var, default).strip()
        if expr.lower() in {"off", "disabled", "none", ""}:
            continue
        from .env import ConfigError

        if len(expr.split()) != 5:
            raise ConfigError(f"{var}={expr!r} is not a crontab with five fields (or 'off')")
        try:
            schedule_ = _crontab(expr)
        except ValueError as exc:
            # Five fields can still be nonsense ("61 * * * *"); say which variable, not just why.
            raise ConfigError(f"{var}={expr!r} is not a valid crontab: {exc}") from None
        schedule[name] = {"task": task, "schedule": schedule_, "options": {"expires": expires}}
    return schedule


app.conf.beat_schedule = build_beat_schedule()
