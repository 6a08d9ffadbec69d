"""Cross-app reactions: an app announces what happened, the apps above it react, no import upward.

The layers (ARCHITECTURE.md) let an app import only the apps below it. When something in a lower
app must set off work in a higher one (a recorded run is costed by ``costs``, checked for a
regression by ``alerts`` and for drift by ``drift``; a new alert is mailed by ``notifications``),
the lower app publishes an ``Event`` and the higher apps subscribe to it:

1. The event is declared once, in the publishing app's ``events.py``, with the names of its
   fields: ids and primitives only, as a Celery task takes them.
2. ``event.publish(**fields)`` inside a service delivers the event after the current transaction
   commits (at once outside one), so a reaction never sees rows that may still roll back and a
   rolled-back write announces nothing.
3. A subscriber is a function in the reacting app's ``reactions.py``, connected in its
   ``AppConfig.ready``. It only enqueues that app's Celery task: the work stays in services.
4. Delivery is robust: a subscriber that raises (a broker outage) is logged and the others still
   run; the write that published the event has committed and stays a success. Each app's
   scheduled pass catches up on what a lost reaction missed.

``event.subscribers()`` lists who reacts, for tests and for reading the wiring in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.dispatch import Signal

logger = logging.getLogger(__name__)

Subscriber = Callable[..., None]


class EventFieldError(TypeError):
    """An event published with fields other than the ones it declares."""


class Event:
    """One kind of fact an app announces (``run_recorded``), with the fields it carries."""

    def __init__(self, name: str, *, fields: tuple[str, ...]) -> None:
        self.name = name
        self.fields = fields
        self._signal = Signal()
        self._names: list[str] = []

    def __repr__(self) -> str:
        return f"Event({self.name!r}, fields={self.fields!r})"

    def subscribe(self, subscriber: Subscriber) -> None:
        """Call ``subscriber(**fields)`` on every delivery. Idempotent (keyed by the function)."""
        name = _name(subscriber)
        self._signal.connect(_adapter(subscriber), weak=False, dispatch_uid=name)
        if name not in self._names:
            self._names.append(name)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        name = _name(subscriber)
        self._signal.disconnect(dispatch_uid=name)
        if name in self._names:
            self._names.remove(name)

    def subscribers(self) -> list[str]:
        """Dotted names of the subscribed functions, in delivery order."""
        return list(self._names)

    def publish(self, **fields: Any) -> None:
        """Deliver after the current transaction commits (or now, outside a transaction)."""
        missing = set(self.fields) - set(fields)
        unknown = set(fields) - set(self.fields)
        if missing or unknown:
            raise EventFieldError(
                f"{self.name}: fields are {', '.join(self.fields)}"
                + (f"; missing {', '.join(sorted(missing))}" if missing else "")
                + (f"; unknown {', '.join(sorted(unknown))}" if unknown else "")
            )
        transaction.on_commit(lambda: self.deliver(**fields))

    def deliver(self, **fields: Any) -> None:
        """Call every subscriber now; one that raises is logged and does not stop the others."""
        for receiver, result in self._signal.send_robust(sender=self, **fields):
            if isinstance(result, Exception):
                logger.error(
                    "event %s: subscriber %s failed",
                    self.name,
                    getattr(receiver, "subscriber_name", receiver),
                    exc_info=result,
                )


def _name(subscriber: Subscriber) -> str:
    return f"{subscriber.__module__}.{subscriber.__qualname__}"


def _adapter(subscriber: Subscriber) -> Callable[..., None]:
    """Django's signal passes ``signal`` and ``sender``; a subscriber takes the event's fields."""

    def receive(sender: Any, signal: Any = None, **fields: Any) -> None:
        subscriber(**fields)

    receive.subscriber_name = _name(subscriber)  # type: ignore[attr-defined]  # read back by getattr
    return receive
