"""How the alerts app reacts to other apps' events (``accelboard.core.events``): enqueue only."""

from __future__ import annotations

from typing import Any

from . import tasks


def run_check_enqueue(*, run_id: int, **_: Any) -> None:
    """A recorded run: check each series it has a result in for a regression."""
    tasks.run_check.delay(run_id)
