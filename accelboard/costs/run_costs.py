"""The demo loader's old path to ``run_costs_compute``, which lives in ``run_cost_services``.

Only what the demo imports; delete this module once the demo imports it from its home.
"""

from __future__ import annotations

from .run_cost_services import run_costs_compute

__all__ = ["run_costs_compute"]
