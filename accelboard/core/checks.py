"""Django system checks for accelboard's configuration (ids ``accelboard.E00x`` / ``W00x``)."""

from __future__ import annotations

from email.utils import parseaddr
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

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
    return str(settings.EMAIL_BACKEND), str(settings.EMAIL_HOST), str(settings.EMAIL_HOST_USER)


@register()
def check_production_email(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    backend, host, user = _smtp_config()
    if not (getattr(settings, "PRODUCTION", False) and backend.endswith("smtp.EmailBackend")):
        return []
    if not getattr(settings, "EMAIL_HOST_GIVEN", True) or not host.strip():
        return [
            Error(
                "EMAIL_HOST is not set: alert emails would go to an SMTP server on this machine "
                "(localhost), which is probably not there.",
                hint="Set EMAIL_HOST (and EMAIL_PORT, EMAIL_HOST_USER, EMAIL_HOST_PASSWORD, EMAIL_USE_TLS).",
                id="accelboard.E002",
            )
        ]
    if host in _LOCAL_HOSTS and not user:
        mailers = getattr(settings, "MAILERS", None)
        port = mailers["default"]["OPTIONS"].get("port", 25) if mailers is not None else settings.EMAIL_PORT
        return [
            Warning(
                f"EMAIL_HOST is {host}: alert emails go to an SMTP server on this machine, port {port}, "
                "without a login; they are lost if none listens there.",
                hint="Keep it if this host runs a mail relay (postfix, ...); otherwise set EMAIL_HOST to your relay.",
                id="accelboard.W002",
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


def _loopback_host(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in {"", "localhost", "0.0.0.0"} or host.endswith(".localhost"):
        return True
    try:
        address = ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


@register(Tags.security, deploy=True)
def check_email_links(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Alert emails carry absolute links built from SITE_URL and come from DEFAULT_FROM_EMAIL: a
    deployment whose emails link to 127.0.0.1 or come from a .localhost sender is broken for
    every reader, though nothing else fails."""
    errors = []
    site_url = str(getattr(settings, "SITE_URL", "") or "")
    parts = urlsplit(site_url)
    if parts.scheme not in ("http", "https") or _loopback_host(parts.hostname or ""):
        errors.append(
            Error(
                f"SITE_URL is {site_url or '(empty)'}: the links in alert emails would point there "
                "(unset, it defaults to http://127.0.0.1:8000).",
                hint="Set SITE_URL to the address people open accelboard at, e.g. https://accelboard.example.com.",
                id="accelboard.E005",
            )
        )
    sender = parseaddr(str(getattr(settings, "DEFAULT_FROM_EMAIL", "") or ""))[1]
    domain = sender.rpartition("@")[2].lower()
    if not sender or "@" not in sender or domain == "localhost" or domain.endswith(".localhost"):
        errors.append(
            Error(
                f"DEFAULT_FROM_EMAIL is {sender or '(empty)'}: alert emails would come from an address "
                "no one can reply to, and many mail servers refuse such a sender.",
                hint="Set DEFAULT_FROM_EMAIL to a real sender, e.g. accelboard <alerts@example.com>.",
                id="accelboard.E006",
            )
        )
    return errors
