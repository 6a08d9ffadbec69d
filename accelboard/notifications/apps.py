from __future__ import annotations

from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "accelboard.notifications"
    label = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # Reactions to lower apps' events (accelboard.core.events): subscribed here, enqueued there.
        from accelboard.alerts.events import alerts_closed, alerts_opened

        from .reactions import alerts_dispatch_enqueue, routes_dispatch_enqueue

        alerts_opened.subscribe(alerts_dispatch_enqueue)
        alerts_opened.subscribe(routes_dispatch_enqueue)
        alerts_closed.subscribe(routes_dispatch_enqueue)
