"""The demo loader's old path to ``alerts_history_check``, which lives in ``regression_services``.

Only what the demo imports; delete this module once the demo imports it from its home.
"""

from __future__ import annotations

from .regression_services import alerts_history_check

__all__ = ["alerts_history_check"]
