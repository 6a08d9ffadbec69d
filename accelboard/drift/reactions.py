"""How the drift app reacts to other apps' events (``accelboard.core.events``): enqueue only."""

from __future__ import annotations

from typing import Any

from accelboard.importers.metrics import ACCURACY_PREFIX

from . import tasks


def variant_check_enqueue(*, team_id: int, variant_id: int, metric_names: list[str], **_: Any) -> None:
    """A recorded run with accuracy results: re-check its variant's model for the team."""
    if any(name == "accuracy" or name.startswith(ACCURACY_PREFIX) for name in metric_names):
        tasks.drift_check_variant.delay(team_id, variant_id)
