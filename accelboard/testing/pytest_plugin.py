"""Loaded first by pytest (``-p accelboard.testing.pytest_plugin``), before Django settings.

Tests use ``DATABASE_URL`` and ``CELERY_BROKER_URL`` when set (CI points them at the machine's
PostgreSQL and Redis). Otherwise settings fall back to the embedded PostgreSQL, which the tests
keep apart from the demo's data under ``.accelboard/test``.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")
if not os.environ.get("DATABASE_URL"):
    os.environ.setdefault("ACCELBOARD_HOME", str(ROOT / ".accelboard" / "test"))
# Tests never send real email unless a test points Django at its own SMTP server.
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")
