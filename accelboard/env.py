"""Typed readers of environment variables that fail loudly, naming the variable.

Every setting comes from the environment through these helpers so that a fresh checkout runs with
nothing set and production is switched on by env vars alone. A value that cannot be parsed stops
start-up with `ConfigError` naming the variable and what was expected; a secret may be given as
``NAME`` or as ``NAME_FILE`` (a path whose contents are the secret, for Docker/Kubernetes secrets).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit


class ConfigError(Exception):
    """A configuration value is missing or malformed. The message names the variable."""


_settings_problems_reported_by_checks = False


def report_settings_problems_as_checks() -> None:
    """Called by ``accelboard check`` before the settings load: values production would be unsafe
    with are then left for the system checks to report, all of them with the rest, instead of
    stopping the import (``accelboard.settings.SETTINGS_PROBLEMS``)."""
    global _settings_problems_reported_by_checks
    _settings_problems_reported_by_checks = True


def settings_problems_reported_by_checks() -> bool:
    return _settings_problems_reported_by_checks


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name}={value} must be at least {minimum}")
    return value


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw.strip())
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_secret(name: str, default: str | None = None) -> str | None:
    """Read a secret from NAME, or from the file NAME_FILE points to."""
    file_var = f"{name}_FILE"
    path = os.environ.get(file_var)
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"{file_var}={path!r} cannot be read: {exc.strerror}") from None
    value = os.environ.get(name)
    if value is not None and value.strip() == "":
        raise ConfigError(f"{name} is set but empty")
    return value if value is not None else default


_DB_SCHEMES = {"postgres", "postgresql", "pgsql", "postgresql+psycopg"}


def database_url_with_name(url: str, name: str) -> str:
    """The same PostgreSQL server as ``url``, database ``name``: the URL's path names it (a unix
    socket's directory travels in the query, ``?host=/path``, so the URL is never split on '/')."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def parse_database_url(name: str, url: str) -> dict[str, object]:
    """Turn a ``postgresql://user:pass@host:port/db?opt=v`` URL into a Django DATABASES entry.

    A unix socket is given as ``postgresql://user@/db?host=/path/to/dir``. Only PostgreSQL is
    accepted: accelboard relies on partitioning, COPY and advisory locks.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(
            f"{name} is malformed ({exc}); expected postgresql://user:password@host:5432/dbname"
        ) from None
    if parts.scheme not in _DB_SCHEMES:
        raise ConfigError(
            f"{name} has scheme {parts.scheme!r}; accelboard needs PostgreSQL "
            "(postgresql://user:password@host:5432/dbname)"
        )
    dbname = unquote(parts.path.lstrip("/"))
    if not dbname or "/" in dbname:
        raise ConfigError(f"{name} names no database; expected postgresql://user:password@host:5432/dbname")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    host = unquote(parts.hostname or "") or query.pop("host", "")
    options: dict[str, object] = {}
    for key in ("sslmode", "sslrootcert", "application_name", "connect_timeout"):
        if key in query:
            options[key] = query.pop(key)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": dbname,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(port or ""),
        "OPTIONS": options,
    }
