from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "accelboard.core"
    label = "core"
    verbose_name = "Teams and platform"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
