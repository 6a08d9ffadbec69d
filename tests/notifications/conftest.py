"""A real SMTP server on loopback (aiosmtpd) and Django pointed at it; alerts with real runs.

``smtp_server``: an aiosmtpd ``Controller`` on 127.0.0.1 and a free port, collecting every
message it accepts; ``fail_with`` makes it answer DATA with an SMTP error (e.g. 451), and
``stop()``/``start()`` take it down and bring it back on the same port.
"""

from __future__ import annotations

import email
import logging
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.policy import default as default_policy
from typing import Any

import django
import pytest
from aiosmtpd.controller import Controller

from accelboard.alerts.models import Alert
from accelboard.benchmarks.models import BenchmarkRun, Series
from accelboard.core.models import Team
from tests.factories import run_create

logging.getLogger("mail.log").setLevel(logging.WARNING)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Inbox:
    """aiosmtpd handler: keeps accepted messages; answers ``fail_with`` while it is set."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.recipients: list[list[str]] = []
        self.fail_with: str | None = None
        self.fail_times: int | None = None  # fail this many more DATA commands, then accept
        self.refused = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.fail_times is not None and self.fail_times > 0:
            self.fail_times -= 1
            self.refused += 1
            return self.fail_with or "451 4.3.0 Try again later"
        if self.fail_with and self.fail_times is None:
            self.refused += 1
            return self.fail_with
        message = email.message_from_bytes(envelope.content, policy=default_policy)
        self.messages.append(message)  # type: ignore[arg-type]
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 Message accepted for delivery"


class SMTPServer:
    def __init__(self) -> None:
        self.inbox = Inbox()
        self.port = free_port()
        self.controller: Controller | None = None

    @property
    def messages(self) -> list[EmailMessage]:
        return self.inbox.messages

    def start(self) -> None:
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


@pytest.fixture
def smtp_server(settings: Any) -> Iterator[SMTPServer]:
    server = SMTPServer()
    server.start()
    options = {"host": "127.0.0.1", "port": server.port, "timeout": 5}
    if django.VERSION >= (6, 1):
        settings.MAILERS = {
            "default": {"BACKEND": "django.core.mail.backends.smtp.EmailBackend", "OPTIONS": options}
        }
    else:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST = "127.0.0.1"
        settings.EMAIL_PORT = server.port
        settings.EMAIL_USE_TLS = False
        settings.EMAIL_USE_SSL = False
        settings.EMAIL_HOST_USER = ""
        settings.EMAIL_HOST_PASSWORD = ""
        settings.EMAIL_TIMEOUT = 5
    settings.SITE_URL = "https://accelboard.example.com"
    try:
        yield server
    finally:
        server.stop()


def body_of(message: EmailMessage, subtype: str) -> str:
    part = message.get_body(preferencelist=(subtype,))
    assert part is not None, f"no text/{subtype} part"
    return str(part.get_content())


def regression_alert(
    *,
    team: Team,
    series: Series,
    first_run: BenchmarkRun,
    last_good_run: BenchmarkRun | None = None,
    pct_change: float = -12.0,
    severity: str = "warning",
    opened_at: datetime | None = None,
    kind: str = "regression",
) -> Alert:
    """An alert row with the evidence a detector leaves (the detector itself is tested apart)."""
    before = 5000.0
    return Alert.objects.create(
        team=team,
        kind=kind,
        severity=severity,
        title=f"{series.metric} {pct_change:+.1f}% on {series.workload}",
        series=series,
        dedupe_key=f"test:{series.pk}:{first_run.pk}:{kind}",
        first_run=first_run,
        last_good_run=last_good_run,
        before_mean=before,
        before_spread=25.0,
        after_mean=before * (1 + pct_change / 100),
        after_spread=30.0,
        pct_change=pct_change,
        confidence=0.97,
        # A minute old by default: settled, so the dispatcher does not hold it back.
        opened_at=opened_at or datetime.now(UTC) - timedelta(minutes=1),
    )


def runs_and_series(
    team: Team, *, commit: str = "c0ffee1234567890"
) -> tuple[BenchmarkRun, BenchmarkRun, Series]:
    """A good run and a bad run (at ``commit``) of one workload; the throughput series."""
    good = run_create(team=team, git_commit="900d" * 10, started_at=datetime.now(UTC) - timedelta(hours=3))
    bad = run_create(team=team, git_commit=commit, started_at=datetime.now(UTC) - timedelta(hours=1))
    series = Series.objects.get(team=team, metric="throughput_tokens_per_s")
    return good, bad, series
