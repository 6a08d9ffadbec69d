"""Django system checks for accelboard's configuration (ids ``accelboard.E00x`` / ``W00x``)."""

from __future__ import annotations

from email.utils import parseaddr
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

_BROKER_SCHEMES = ("redis://", "rediss://", "amqp://", "amqps://", "sqla+postgresql", "memory://")


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
    public = [host for host in settings.ALLOWED_HOSTS if host != "testserver" and not _loopback_host(host)]
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
    if _loopback_host(host) and not user:
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


def _inet_aton(host: str) -> IPv4Address | None:
    """The IPv4 address ``host`` names in any form a resolver accepts (inet_aton(3)): one to four
    parts, each decimal, octal (leading 0) or hex (0x), the last filling the remaining bytes:
    ``127.1``, ``0x7f.0.0.1``, ``017700000001``, ``2130706433``. None if it is not one."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        try:
            if part[:2] in ("0x", "0X"):
                numbers.append(int(part[2:], 16))
            elif len(part) > 1 and part.startswith("0"):
                numbers.append(int(part[1:], 8))
            else:
                numbers.append(int(part, 10))
        except ValueError:
            return None
    if any(not part.isalnum() for part in parts):  # int() allows "+1", " 1", "1_0"
        return None
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= 256 ** (4 - len(leading)):
        return None
    value = last
    for i, n in enumerate(leading):
        value += n << (8 * (3 - i))
    return IPv4Address(value)


def _loopback_host(host: str) -> bool:
    """Whether a URL's host is this machine (or no machine): ``localhost`` and ``*.localhost``,
    any loopback or unspecified address in any spelling (``127.1``, ``0x7f.0.0.1``, ``[::1]``,
    ``::ffff:127.0.0.1``, ``0.0.0.0``), or nothing at all."""
    host = host.strip().strip("[]").lower().rstrip(".")
    if host in {"", "localhost", "localhost.localdomain"} or host.endswith(".localhost"):
        return True
    address: IPv4Address | IPv6Address | None
    try:
        address = ip_address(host.partition("%")[0])
    except ValueError:
        address = _inet_aton(host)
    if address is None:
        return False
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


@register()
def check_settings_problems(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Values production would be unsafe or broken with, noted by the settings (a missing or short
    SECRET_KEY, DEBUG on, ALLOWED_HOSTS missing or '*', no DATABASE_URL or broker): every one of
    them, under ``accelboard check``; any other command stops at import naming them all."""
    return [
        Error(message, hint=hint, id=check_id)
        for check_id, message, hint in getattr(settings, "SETTINGS_PROBLEMS", [])
    ]


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
    elif parts.scheme == "http":
        errors.append(
            Error(
                f"SITE_URL is {site_url}: plain http to a public host, so the acknowledge and dismiss "
                "links of alert emails, which act without a login, would travel unencrypted (and "
                "production's secure cookies are never sent over http).",
                hint="Serve accelboard over https behind a TLS proxy and set SITE_URL=https://...",
                id="accelboard.E011",
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
