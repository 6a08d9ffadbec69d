"""What the alerts app announces to the apps above it (see ``accelboard.core.events``).

``alerts_opened``: alerts were opened (not re-raised) and committed; the ids are the new ones.
"""

from __future__ import annotations

from accelboard.core.events import Event

alerts_opened = Event("alerts_opened", fields=("alert_ids",))
