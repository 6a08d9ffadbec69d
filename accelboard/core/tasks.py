"""What every app's Celery tasks share: the retry policy and the parsing of their ISO-date
arguments. The tasks themselves live in each app's ``tasks.py``."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.db import OperationalError

# Retries only for a lost database connection; a malformed argument fails at once.
RETRY_ON_LOST_DATABASE: dict[str, Any] = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "retry_jitter": True,
    "max_retries": 3,
}


def day_parse(value: str) -> date:
    """A task's ISO date argument; a ValueError naming it otherwise."""
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"day={value!r} is not an ISO date (YYYY-MM-DD)") from None
