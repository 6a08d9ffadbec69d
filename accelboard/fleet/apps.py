from __future__ import annotations

from django.apps import AppConfig


class FleetConfig(AppConfig):
    name = "accelboard.fleet"
    label = "fleet"
    verbose_name = "Fleet and telemetry"

    def ready(self) -> None:
        from django.conf import settings

        from accelboard.core.pipeline_selectors import probe_register

        from .remote_write import label_cache
        from .remote_write_selectors import remote_write_checks
        from .selectors import rollup_lag_checks

        probe_register(rollup_lag_checks)
        probe_register(remote_write_checks)
        label_cache.size = settings.PROMETHEUS_SERIES_CACHE
