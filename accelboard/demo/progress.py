"""The demo load's progress file: written by the loader, read by ``accelboard demo`` and the banner.

``Progress`` keeps the state of each load step (waiting, running, done, with its seconds) and
writes it whole to a small JSON file, renamed into place so a reader never sees half of it;
``progress_read`` reads it back (the supervisor's terminal lines and, through
``accelboard.demo.context_processors``, the loading banner on every page).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The progress file's name under ACCELBOARD_HOME: the steps and their state.
PROGRESS_FILE = "demo-progress.json"


def progress_read(path: Path | str) -> dict[str, object] | None:
    """The loader's progress file, or None when there is none (or it cannot be read)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# What each step is called on the terminal and in the pages' loading banner, in load order.
STEPS = {
    "people": "people and logins",
    "fleet": "hosts, GPUs and prices",
    "telemetry_recent": "telemetry, last 2 days",
    "costs_recent": "costs, last 2 days",
    "telemetry_older": "telemetry and its costs, older days",
    "attribution": "who ran on each GPU",
    "benchmarks": "benchmark runs and their costs",
    "serving": "serving metrics",
    "drift": "quantization drift",
    "alerts": "regression alerts",
    "canary": "canary verdicts",
    "costs": "costs of serving",
    "allocation": "cost by workload",
    "training": "training runs and jobs",
}
# The site is served once these are in: the overview has logins, hosts and the current figures.
SERVE_AFTER = ("people", "fleet", "telemetry_recent", "costs_recent")


class Progress:
    """The steps' state, reported through ``say`` and, when given, a JSON file (written whole
    and renamed, so a reader never sees half of it). Safe to update from several threads."""

    def __init__(self, path: Path | None, say: Callable[[str], None]) -> None:
        self.path = path
        self.say = say
        self.started = time.time()
        self.lock = threading.Lock()
        self.steps: dict[str, dict[str, Any]] = {
            name: {"label": label, "state": "waiting", "seconds": None} for name, label in STEPS.items()
        }
        self.ready_to_serve = False
        self.done = False
        self.error = ""
        self.write()

    def write(self) -> None:
        if self.path is None:
            return
        payload = {
            "started": self.started,
            "ready_to_serve": self.ready_to_serve,
            "done": self.done,
            "error": self.error,
            "steps": [{"name": name, **step} for name, step in self.steps.items()],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(payload))
        tmp.replace(self.path)

    def update(self, name: str, **changes: Any) -> None:
        with self.lock:
            self.steps[name].update(changes)
            if not self.ready_to_serve and all(self.steps[s]["state"] == "done" for s in SERVE_AFTER):
                self.ready_to_serve = True
            self.write()

    def finish(self, *, error: str = "") -> None:
        with self.lock:
            self.done, self.error = not error, error
            self.write()
