from __future__ import annotations

from django.apps import AppConfig


class CostsConfig(AppConfig):
    name = "accelboard.costs"
    label = "costs"
    verbose_name = "Costs and energy"

    def ready(self) -> None:
        # Reactions to lower apps' events (accelboard.core.events): subscribed here, enqueued there.
        from accelboard.benchmarks.events import run_recorded

        from .reactions import run_cost_enqueue

        run_recorded.subscribe(run_cost_enqueue)
