"""The demo generator's old path to the metric catalogue, which is ``accelboard.importers.metrics``.

Only what the demo reads; delete this module once the demo imports the catalogue from its home.
"""

from __future__ import annotations

from accelboard.importers.metrics import METRICS

__all__ = ["METRICS"]
