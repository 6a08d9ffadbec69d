"""How the costs app reacts to other apps' events (``accelboard.core.events``): enqueue only."""

from __future__ import annotations

from typing import Any

from . import tasks


def run_cost_enqueue(*, run_id: int, **_: Any) -> None:
    """A recorded run gets its energy and cost per unit of work."""
    tasks.run_cost.delay(run_id)
