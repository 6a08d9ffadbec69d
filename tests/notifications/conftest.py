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

# Loopback servers answering as Slack, PagerDuty, Teams and a webhook receiver (alert routes).
from .route_servers import pagerduty, slack, teams, webhook_receiver  # noqa: F401

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


def h200_type() -> Any:
    """The catalogue's H200 (a transactional test before this one may have flushed the catalogue)."""
    from tests.factories import accelerator_type_create

    return accelerator_type_create(
        name="H200 SXM 141GB", slug="h200-sxm-141gb", match_names=["H200", "H200-SXM"], board_power_w=700.0
    )


def latency_regression(
    team: Team,
    *,
    commit: str = "020959f1c3a0b7d4e5f6",
    before: float = 13075.8,
    after: float = 15826.4,
    runs_before: int = 12,
    runs_after: int = 3,
    ci_url: str = "https://ci.example.com/jobs/4711",
    severity: str = "critical",
    model: str = "Llama-2-70B",
) -> Alert:
    """A p99 latency series of ``model`` fp8 on 8× H200 that stepped up at ``commit``, and the
    alert a detector leaves for it (levels, spreads and confidence as the alert page shows them)."""
    h200 = h200_type()
    start = datetime.now(UTC) - timedelta(days=runs_before + runs_after)
    runs = []
    for n in range(runs_before + runs_after):
        level = before if n < runs_before else after
        wiggle = ((n * 37) % 11 - 5) / 5 * 150.0
        runs.append(
            run_create(
                team=team,
                accelerator_type=h200,
                accelerator_count=8,
                model=model,
                variant="fp8",
                precision="fp8",
                metrics={"latency_p99_ms": level + wiggle},
                git_commit=commit if n == runs_before else f"{n:08x}" + "ab" * 16,
                started_at=start + timedelta(days=n),
            )
        )
    first, good = runs[runs_before], runs[runs_before - 1]
    BenchmarkRun.objects.filter(pk=first.pk).update(ci_url=ci_url)
    first.refresh_from_db()
    series = Series.objects.get(
        team=team, metric="latency_p99_ms", accelerator_count=8, workload__variant__model__name=model
    )
    return Alert.objects.create(
        team=team,
        kind="regression",
        severity=severity,
        title=f"latency_p99_ms +21.0% on {model} fp8",
        series=series,
        dedupe_key=f"test:latency:{series.pk}:{first.pk}",
        first_run=first,
        last_good_run=good,
        before_mean=before,
        before_spread=194.65,
        after_mean=after,
        after_spread=210.3,
        pct_change=(after - before) / before * 100,
        confidence=0.99997,
        opened_at=datetime.now(UTC) - timedelta(minutes=1),
    )


def drift_alert(team: Team, *, verdict: str = "over", **detail: Any) -> Alert:
    """A quantization drift alert as the drift check raises it (its detail JSON)."""
    values = {
        "model": "Llama-3.1-8B",
        "variant": "int4-awq",
        "metric": "accuracy:mmlu:acc",
        "task": "mmlu",
        "verdict": verdict,
        "loss": 0.03064,
        "budget": 0.03,
        "ratio": 0.96936,
        "value": 0.6626,
        "reference_value": 0.68355,
        "measured_at": "2026-11-30T02:00:00+00:00",
        "slope_per_day": 0.0004,
        "trend_t": 6.1,
        "days_to_budget": None,
        "points": 42,
    }
    values.update(detail)
    return Alert.objects.create(
        team=team,
        kind="drift",
        severity="critical" if verdict == "over" else "warning",
        title="Llama-3.1-8B int4-awq: mmlu accuracy 3.06% below the reference, over its 3% budget",
        dedupe_key=f"test:drift:{verdict}:{sorted(detail.items())}",
        after_mean=values["loss"],
        pct_change=-(values["loss"] or 0) * 100,
        detail=values,
        opened_at=datetime.now(UTC) - timedelta(minutes=1),
    )


def agreement_alert(team: Team) -> Alert:
    """A production-agreement drift alert as ``agreement_check`` raises it."""
    return Alert.objects.create(
        team=team,
        kind="drift",
        severity="critical",
        title="Llama-3.1-8B fp8: production agreement (chat) down 2.41% since 2026-10-01",
        dedupe_key="test:agreement",
        before_mean=0.9262,
        after_mean=0.9039,
        pct_change=-2.41,
        detail={
            "source": "production agreement",
            "model": "Llama-3.1-8B",
            "variant": "fp8",
            "task": "chat",
            "verdict": "over",
            "loss": 0.02408,
            "budget": 0.01,
            "baseline_rate": 0.9262,
            "latest_rate": 0.9039,
            "latest_samples": 8598,
            "days_to_budget": None,
        },
        opened_at=datetime.now(UTC) - timedelta(minutes=1),
    )
