"""The demo loader's old path to ``serving_cost_day_compute``, which lives in ``serving_cost_services``.

Only what the demo imports; delete this module once the demo imports it from its home.
"""

from __future__ import annotations

from .serving_cost_services import serving_cost_day_compute

__all__ = ["serving_cost_day_compute"]
