from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from accelboard.core.demo_runner import progress_read

# (url name, label, what the area is for): one list drives the navigation bar.
NAVIGATION = [
    ("dashboard:overview", "Overview"),
    ("dashboard:trends", "Trends"),
    ("dashboard:hardware", "Hardware"),
    ("benchmarks:run_list", "Runs"),
    ("drift:overview", "Quantization"),
    ("costs:report", "Costs"),
    ("planning:plan", "Plan"),
    ("alerts:list", "Alerts"),
    ("fleet:hosts", "Hosts"),
]
# Per-person pages, beside the user name.
USER_MENU = [
    ("core:team_list", "Teams"),
    ("notifications:subscriptions", "Alert emails"),
]


def navigation(request: HttpRequest) -> dict[str, Any]:
    return {"navigation": NAVIGATION, "user_menu": USER_MENU}


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
