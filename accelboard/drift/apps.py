from __future__ import annotations

from django.apps import AppConfig


class DriftConfig(AppConfig):
    name = "accelboard.drift"
    label = "drift"
    verbose_name = "Quantization drift"

    def ready(self) -> None:
        # Reactions to lower apps' events (accelboard.core.events): subscribed here, enqueued there.
        from accelboard.benchmarks.events import run_recorded

        from .reactions import variant_check_enqueue

        run_recorded.subscribe(variant_check_enqueue)
