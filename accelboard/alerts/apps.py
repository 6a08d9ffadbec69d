from __future__ import annotations

from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "accelboard.alerts"
    label = "alerts"
    verbose_name = "Alerts"

    def ready(self) -> None:
        # Reactions to lower apps' events (accelboard.core.events): subscribed here, enqueued there.
        from accelboard.benchmarks.events import run_recorded

        from .reactions import run_check_enqueue

        run_recorded.subscribe(run_check_enqueue)
