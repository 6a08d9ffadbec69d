"""Alert email jobs: dispatch after new alerts, the daily digest, retries, and one send.

Thin interfaces to ``services``. ``alerts_dispatch`` is enqueued (no arguments) by the alerts
app on commit after it opens alerts; it plans deliveries and enqueues one ``delivery_send`` per
email, so that a failing SMTP server delays only the emails it refuses. ``delivery_send``
declares its retries: an ``OSError`` (every ``smtplib.SMTPException`` and a refused connection)
is retried with exponential backoff and jitter; each attempt is recorded on the ``Delivery``.
The beat pass ``deliveries_retry`` resends what is due, so a delivery whose task was lost (a
worker killed, a broker flushed) is not lost with it.

Alert routes have the same three: ``routes_dispatch`` (enqueued when alerts open or close),
``route_delivery_send`` (one message; retries honour the channel's ``Retry-After``) and the beat
pass ``route_deliveries_retry``.
"""

from __future__ import annotations

from celery import Task, shared_task

from accelboard.core.services import job_run_record
from accelboard.core.tasks import RETRY_ON_LOST_DATABASE

from . import route_services, services
from .choices import DeliveryMode


def _enqueue_sends(ids: list[int]) -> None:
    for delivery_id in ids:
        delivery_send.delay(delivery_id)


@shared_task(
    bind=True,
    autoretry_for=(OSError,),
    retry_backoff=services.BACKOFF_FIRST_S,
    retry_backoff_max=services.BACKOFF_MAX_S,
    retry_jitter=True,
    max_retries=services.MAX_ATTEMPTS - 1,
)
def delivery_send(self: Task, delivery_id: int) -> str:
    """Send one planned email. A retry scheduled by Celery is due by construction (force)."""
    return services.delivery_send(delivery_id=int(delivery_id), force=self.request.retries > 0)


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def alerts_dispatch(self: Task) -> dict[str, int]:
    """Mail subscribers the alerts they have not had yet (immediate mode), once each commit's
    alerts have settled; if some are still fresh, run again when they will have."""
    with job_run_record(name="alerts_dispatch", task_id=self.request.id or "") as job:
        ids = services.deliveries_plan(mode=DeliveryMode.IMMEDIATE)
        settling = services.alerts_settling()
        job.rows = len(ids)
        job.detail = {"deliveries": ids, "settling": settling}
    _enqueue_sends(ids)
    if settling:
        # Alerts of a commit still arriving: look again once they have settled.
        alerts_dispatch.apply_async(countdown=int(services.SETTLE.total_seconds()) + 1)
    return {"deliveries": len(ids)}


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def digests_send(self: Task) -> dict[str, int]:
    """Once a day: one email per digest subscriber with the open alerts not mailed yet."""
    with job_run_record(name="digests_send", task_id=self.request.id or "") as job:
        ids = services.deliveries_plan(mode=DeliveryMode.DIGEST)
        job.rows = len(ids)
        job.detail = {"deliveries": ids}
    _enqueue_sends(ids)
    return {"deliveries": len(ids)}


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def deliveries_retry(self: Task) -> dict[str, int]:
    """Resend failed deliveries whose backoff has passed, and any whose task was lost; also
    plans immediate deliveries in case an ``alerts_dispatch`` enqueue was lost."""
    with job_run_record(name="deliveries_retry", task_id=self.request.id or "") as job:
        planned = services.deliveries_plan(mode=DeliveryMode.IMMEDIATE)
        due = services.deliveries_due()
        job.rows = len(planned) + len(due)
        job.detail = {"planned": planned, "due": due}
    _enqueue_sends(planned + due)
    return {"planned": len(planned), "due": len(due)}


# --- alert routes (Slack, Teams, PagerDuty, webhooks) ------------------------------------------


@shared_task(bind=True, max_retries=route_services.MAX_ATTEMPTS - 1)
def route_delivery_send(self: Task, delivery_id: int) -> str:
    """Send one route message. A 429, 5xx or network failure is retried after the channel's
    ``Retry-After`` when it gave one, else with exponential backoff (``RouteRetry.countdown``)."""
    try:
        return route_services.route_delivery_send(
            delivery_id=int(delivery_id), force=self.request.retries > 0
        )
    except route_services.RouteRetry as exc:
        raise self.retry(exc=exc, countdown=exc.countdown) from None


def _enqueue_route_sends(ids: list[int]) -> None:
    for delivery_id in ids:
        route_delivery_send.delay(delivery_id)


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def routes_dispatch(self: Task) -> dict[str, int]:
    """Send alert routes the alerts opened (and PagerDuty the alerts closed) since their last
    pass, once each commit's alerts have settled."""
    with job_run_record(name="routes_dispatch", task_id=self.request.id or "") as job:
        ids = route_services.route_deliveries_plan()
        settling = services.alerts_settling()
        job.rows = len(ids)
        job.detail = {"deliveries": ids, "settling": settling}
    _enqueue_route_sends(ids)
    if settling:
        routes_dispatch.apply_async(countdown=int(services.SETTLE.total_seconds()) + 1)
    return {"deliveries": len(ids)}


@shared_task(bind=True, **RETRY_ON_LOST_DATABASE)
def route_deliveries_retry(self: Task) -> dict[str, int]:
    """The beat pass: plans what a lost ``routes_dispatch`` missed and resends what is due."""
    with job_run_record(name="route_deliveries_retry", task_id=self.request.id or "") as job:
        planned = route_services.route_deliveries_plan()
        due = route_services.route_deliveries_due()
        job.rows = len(planned) + len(due)
        job.detail = {"planned": planned, "due": due}
    _enqueue_route_sends(planned + due)
    return {"planned": len(planned), "due": len(due)}
