"""What the alerts app announces to the apps above it (see ``accelboard.core.events``).

``alerts_opened``: alerts were opened (not re-raised) and committed; the ids are the new ones.
``alerts_closed``: alerts were resolved or dismissed (PagerDuty routes resolve their incidents).
"""

from __future__ import annotations

from accelboard.core.events import Event

alerts_opened = Event("alerts_opened", fields=("alert_ids",))
alerts_closed = Event("alerts_closed", fields=("alert_ids",))
