"""How the notifications app reacts to other apps' events (``accelboard.core.events``)."""

from __future__ import annotations

from typing import Any

from . import tasks


def alerts_dispatch_enqueue(**_: Any) -> None:
    """New alerts: plan and send their emails (the dispatch reads what is due, ids not needed)."""
    tasks.alerts_dispatch.delay()


def routes_dispatch_enqueue(**_: Any) -> None:
    """Alerts opened or closed: send the alert routes' messages (Slack, PagerDuty, ...)."""
    tasks.routes_dispatch.delay()
