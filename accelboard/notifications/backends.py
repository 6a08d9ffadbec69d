"""A mail backend that keeps every email in the database (``OutboxMessage``) instead of sending it.

For the demo and for a trial install without an SMTP server: staff read the emails at
``/notifications/outbox/`` exactly as a mail client would show them (the stored message is the
bytes an SMTP server would have received, inline chart included). Select it with
``EMAIL_BACKEND=accelboard.notifications.backends.OutboxBackend``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.mail.backends.base import BaseEmailBackend

OUTBOX_BACKEND = "accelboard.notifications.backends.OutboxBackend"


class OutboxBackend(BaseEmailBackend):
    def __init__(self, fail_silently: bool = False, *, alias: str | None = None, **kwargs: Any) -> None:
        # SMTP options (host, port, ...) given by a shared configuration mean nothing here. Django
        # 6.1's MAILERS name the backend (alias) and want fail_silently kept by the subclass itself.
        if alias is None:
            super().__init__()
        else:
            super().__init__(alias=alias)
        self.fail_silently = fail_silently

    def send_messages(self, email_messages: Sequence[Any]) -> int:
        from .services import outbox_messages_store

        rows = []
        for message in email_messages:
            recipients = list(message.recipients())
            if not recipients:
                continue
            rows.append(
                {
                    "subject": " ".join(str(message.subject).split())[:998],
                    "from_email": str(message.from_email)[:320],
                    "recipients": recipients,
                    "raw": message.message().as_bytes(),
                }
            )
        return outbox_messages_store(messages=rows)
