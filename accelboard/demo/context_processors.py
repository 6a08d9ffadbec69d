"""The loading banner's data on every page while ``accelboard demo`` loads its data."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from .progress import progress_read


def demo_loading(request: HttpRequest) -> dict[str, Any]:
    """While ``accelboard demo`` loads its data: what is loading and how far along it is.

    Read from the loader's progress file (``DEMO_PROGRESS_FILE``, a few hundred bytes) on each
    page; nothing once the load is done, nor outside the demo.
    """
    if not settings.DEMO_PROGRESS_FILE:
        return {}
    progress = progress_read(settings.DEMO_PROGRESS_FILE)
    steps = progress.get("steps") if progress else None
    if not progress or progress.get("done") or not isinstance(steps, list) or not steps:
        return {}
    done = [s for s in steps if isinstance(s, dict) and s.get("state") == "done"]
    running = [str(s.get("label")) for s in steps if isinstance(s, dict) and s.get("state") == "running"]
    waiting = [str(s.get("label")) for s in steps if isinstance(s, dict) and s.get("state") == "waiting"]
    return {
        "demo_loading": {
            "error": str(progress.get("error") or ""),
            "running": running,
            "waiting": waiting,
            "done": len(done),
            "total": len(steps),
            "percent": round(100 * len(done) / len(steps)),
        }
    }
