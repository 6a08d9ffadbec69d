from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "accelboard.core"
    label = "core"
    verbose_name = "Teams and platform"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate  # noqa: PLC0415

        from . import checks, sso_checks  # noqa: F401  (registers the system checks)

        post_migrate.connect(_broker_tables_create, sender=self)


def _broker_tables_create(**kwargs: object) -> None:
    """After ``migrate``: the embedded broker's tables and queues, before any worker or publisher
    opens it."""
    from django.conf import settings  # noqa: PLC0415

    from accelboard.celery import QUEUES  # noqa: PLC0415
    from accelboard.embedded import broker_tables_create  # noqa: PLC0415

    broker_tables_create(settings.CELERY_BROKER_URL, QUEUES)
