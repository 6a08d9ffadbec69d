"""accelboard: performance observability and cost analytics for ML workloads on accelerators."""

from __future__ import annotations

from .celery import app as celery_app

__all__ = ["celery_app"]
__version__ = "0.1.0"
