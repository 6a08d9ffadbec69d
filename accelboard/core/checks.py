"""Django system checks for accelboard's configuration (ids ``accelboard.E00x`` / ``W00x``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Warning, register

_BROKER_SCHEMES = ("redis://", "rediss://", "amqp://", "amqps://", "sqla+postgresql", "memory://")
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "testserver"}


@register()
def check_broker(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    url = str(getattr(settings, "CELERY_BROKER_URL", "") or "")
    if not url.startswith(_BROKER_SCHEMES):
        return [
            Error(
                f"CELERY_BROKER_URL {url.split('://')[0] or '(empty)'}:// is not a supported broker.",
                hint="Use redis://host:6379/0 in production, or leave it unset for the embedded default.",
                id="accelboard.E001",
            )
        ]
    return []


@register()
def check_debug_public(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    public = [host for host in settings.ALLOWED_HOSTS if host not in _LOCAL_HOSTS]
    if settings.DEBUG and public:
        return [
            Warning(
                f"DEBUG is on while ALLOWED_HOSTS names public hosts ({', '.join(public)}).",
                hint="Set ACCELBOARD_PRODUCTION=1 (or DEBUG=0) for a deployment reachable by others.",
                id="accelboard.W001",
            )
        ]
    return []


def _smtp_config() -> tuple[str, str, str]:
    """(backend, host, user) from ``MAILERS`` (Django >= 6.1, where reading ``EMAIL_*`` raises)
    or from the ``EMAIL_*`` settings."""
    mailers = getattr(settings, "MAILERS", None)
    if mailers is not None:
        default = mailers.get("default", {})
        options = default.get("OPTIONS", {})
        backend = default.get("BACKEND", "django.core.mail.backends.smtp.EmailBackend")
        return backend, str(options.get("host", "")), str(options.get("username", ""))
    return settings.EMAIL_BACKEND, settings.EMAIL_HOST, settings.EMAIL_HOST_USER


@register()
def check_production_email(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    backend, host, user = _smtp_config()
    if getattr(settings, "PRODUCTION", False) and backend.endswith("smtp.EmailBackend"):
        if host in {"", "localhost"} and not user:
            return [
                Error(
                    "EMAIL_HOST is not set: alert emails would go to a local SMTP server that is probably not there.",
                    hint="Set EMAIL_HOST (and EMAIL_PORT, EMAIL_HOST_USER, EMAIL_HOST_PASSWORD, EMAIL_USE_TLS).",
                    id="accelboard.E002",
                )
            ]
    return []


@register()
def check_retention(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    if settings.TELEMETRY_RETENTION_DAYS < 2:
        return [
            Error(
                "TELEMETRY_RETENTION_DAYS must keep at least 2 days of raw telemetry.",
                hint="Rollups are computed from raw samples; dropping them sooner loses late data.",
                id="accelboard.E003",
            )
        ]
    return []


@register()
def check_plotly_static(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    from django.contrib.staticfiles import finders

    if not finders.find("vendor/plotly.min.js"):
        return [
            Error(
                "static/vendor/plotly.min.js is missing: charts cannot render (accelboard never loads a CDN).",
                hint="Run `accelboard vendor_static` (or `python manage.py vendor_static`) to copy it from the plotly package.",
                id="accelboard.E004",
            )
        ]
    return []
