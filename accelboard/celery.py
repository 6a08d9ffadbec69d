"""The Celery application and its one beat schedule.

Tasks take ids and primitives (JSON serializer only). The beat schedule is built in code; every
entry can be re-timed or disabled with an env var ``ACCELBOARD_BEAT_<NAME>`` holding a crontab
("*/5 * * * *") or ``off``.
"""

from __future__ import annotations

import os

from celery import Celery
from celery.schedules import crontab

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")

app = Celery("accelboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _polling_interval_for_sqla(sender: Celery | None = None, **kwargs: object) -> None:
    """kombu's SQLAlchemy transport passes transport options to ``create_engine``, so the
    polling interval has to be set on the transport class itself.

    Run when Celery first reads its configuration, not at import: importing ``accelboard``
    must not load Django settings (that would start the embedded PostgreSQL for commands such
    as ``accelboard parse`` that need no database)."""
    try:
        from django.conf import settings
        from kombu.transport import sqlalchemy as sqla_transport

        sqla_transport.Transport.polling_interval = float(settings.CELERY_BROKER_POLLING_INTERVAL)
    except Exception:  # noqa: BLE001 - only tuning; the transport works without it
        return


# name -> (task, default crontab fields, expires seconds, why)
BEAT_ENTRIES: dict[str, tuple[str, str, int]] = {
    # Partitions must exist before samples for tomorrow arrive; hourly is cheap and self-healing.
    "telemetry-partitions": ("accelboard.fleet.tasks.telemetry_partitions_maintain", "7 * * * *", 3000),
    # Minute rollups feed the live host pages; refreshing each minute keeps them at most ~1 min behind.
    # Ingest also enqueues a refresh per batch; this pass drains what those missed.
    "telemetry-rollups": ("accelboard.fleet.tasks.telemetry_rollups_refresh", "* * * * *", 50),
    # Costs: yesterday (UTC) once its last minute rollups have settled, plus any of the last 7 days
    # whose telemetry arrived late. Price corrections enqueue their own recompute.
    "costs-daily": ("accelboard.costs.tasks.cost_daily_compute", "40 0 * * *", 3600),
    # Alert emails: failed sends whose backoff has passed, and any delivery whose task was lost
    # (also plans immediate emails if an alerts_dispatch enqueue was lost). Every 5 minutes keeps
    # a lost email at most minutes late without hammering a broken SMTP server.
    "alert-email-retry": ("accelboard.notifications.tasks.deliveries_retry", "*/5 * * * *", 280),
    # Quantization drift: trends move even on days without new accuracy results (new results
    # also enqueue a check of their model). 05:30 UTC is after the nightly benchmark runs and
    # before the 07:00 digest, so a drift alert makes that day's digest.
    "drift-check": ("accelboard.drift.tasks.drift_check_daily", "30 5 * * *", 3600),
    # The daily digest: early morning UTC, before most teams start their day.
    "alert-email-digest": ("accelboard.notifications.tasks.digests_send", "0 7 * * *", 3600),
    # Production signals (SLO, decode speed, energy per token, memory, throttling, XID/ECC) over
    # the last 15 minutes of rollups: every 5 minutes, offset by 2 so the minute rollups of the
    # window's end are in; the rules need 5 sustained minutes, so a condition alerts within ~10.
    "alerts-production": ("accelboard.alerts.tasks.production_signals_check", "2-59/5 * * * *", 280),
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
