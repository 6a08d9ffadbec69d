"""The demo's simulated CI (its runs reach the worker and the outbox in the browser test) and the
demo's inboxes: the template run, the regressed payload the API accepts, the leads' subscriptions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from accelboard.api.schemas import RunIn
from accelboard.core.services import membership_set, user_create
from accelboard.notifications import selectors, services
from accelboard.notifications.models import Subscription
from accelboard.notifications.simulated_ci import (
    LATENCY_FACTOR,
    NOISE,
    THROUGHPUT_FACTOR,
    MetricTemplate,
    RunTemplate,
    run_payload,
)
from tests.factories import run_create

from .conftest import h200_type

pytestmark = pytest.mark.django_db


def test_it_copies_the_newest_run_of_the_teams_most_run_configuration(team: Any) -> None:
    h200 = h200_type()
    start = datetime.now(UTC) - timedelta(days=10)
    for n in range(3):  # the configuration its CI benchmarks
        run_create(team=team, accelerator_type=h200, accelerator_count=8, started_at=start + timedelta(days=n),
                   metrics={"latency_p99_ms": 40.0 + n, "throughput_tokens_per_s": 5000.0})  # fmt: skip
    run_create(team=team, model="Mistral-7B", started_at=start + timedelta(days=9))  # once, more recent

    template = selectors.simulated_ci_template(team_slug=team.slug)

    assert template is not None
    assert (template.model, template.variant, template.accelerator, template.accelerator_count) == (
        "Llama-3.1-8B",
        "bf16",
        "H200 SXM 141GB",
        8,
    )
    assert template.workload["batch_size"] == 64 and template.workload["scenario"] == "offline"
    assert {m.name: m.value for m in template.metrics} == {
        "latency_p99_ms": 42.0,
        "throughput_tokens_per_s": 5000.0,
    }
    assert selectors.simulated_ci_template(team_slug="no-such-team") is None


def test_it_builds_a_regressed_run_the_api_accepts() -> None:
    template = RunTemplate(
        model="Llama-2-70B",
        variant="fp8",
        precision="fp8",
        quantization_method="",
        workload={"scenario": "server", "batch_size": None, "concurrency": 64},
        accelerator="H200 SXM 141GB",
        accelerator_count=8,
        metrics=(
            MetricTemplate("latency_p99_ms", 13075.8, "ms", "lower", samples=(13000.0, 13150.0)),
            MetricTemplate("throughput_tokens_per_s", 22010.0, "tokens/s", "higher"),
            MetricTemplate("energy_per_token_j", 0.35, "J/token", "lower"),
        ),
    )
    at = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)

    payload = run_payload(template, commit="020959f1" * 5, started_at=at, seed=7)

    parsed = RunIn.model_validate(payload)
    assert parsed.provenance.git_commit == "020959f1" * 5 and parsed.hardware.count == 8
    values = {m.name: m for m in parsed.metrics}
    bound = 5 * NOISE
    assert abs(values["latency_p99_ms"].value / 13075.8 / LATENCY_FACTOR - 1) < bound
    assert abs(values["throughput_tokens_per_s"].value / 22010.0 / THROUGHPUT_FACTOR - 1) < bound
    assert abs(values["energy_per_token_j"].value / 0.35 - 1) < bound
    ratio = values["latency_p99_ms"].value / 13075.8
    assert values["latency_p99_ms"].samples == pytest.approx([13000.0 * ratio, 13150.0 * ratio])
    again = run_payload(template, commit="020959f1" * 5, started_at=at, seed=7)
    assert again["metrics"] == payload["metrics"] and again["run_id"] != payload["run_id"]


def test_it_subscribes_the_team_leads_and_only_them(
    team: Any, lead: Any, engineer: Any, finance: Any
) -> None:
    no_email = user_create(username="silent-lead", password="x" * 12, email="")
    membership_set(team=team, user=no_email, role="lead")

    assert services.subscriptions_for_team_leads() == 1
    assert services.subscriptions_for_team_leads() == 0  # safe to run at every demo start
    sub = Subscription.objects.get()
    assert (sub.user, sub.team, sub.mode, sub.series, sub.kind) == (lead, team, "immediate", None, "")


def test_it_refuses_a_demo_ci_it_cannot_run(team: Any, lead: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from django.core.management import call_command
    from django.core.management.base import CommandError

    monkeypatch.delenv("ACCELBOARD_TOKEN", raising=False)
    server = ("--server", "http://127.0.0.1:9", "--after", "0")
    with pytest.raises(CommandError, match="--team: no team 'nope'") as unknown:
        call_command("demo_ci", *server, "--team", "nope", "--token", "t")
    assert unknown.value.returncode == 2
    with pytest.raises(CommandError, match=r"--token \(or ACCELBOARD_TOKEN\): an ingest token of inference"):
        call_command("demo_ci", *server, "--team", team.slug)
    assert not Subscription.objects.exists()
    with pytest.raises(CommandError, match="has no benchmark run with a latency result"):
        call_command("demo_ci", *server, "--team", team.slug, "--token", "t")
    assert Subscription.objects.filter(user=lead).count() == 1  # the leads were subscribed first
