"""One change is one alert: the metrics of one configuration that moved at one run are one alert,
named after its worst metric, with the others listed; its lifecycle covers them all."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse

from accelboard.alerts.models import Alert, AlertMetric, ExpectedChange
from accelboard.alerts.regression_services import alerts_history_check, run_check
from accelboard.alerts.services import alert_mark_expected
from accelboard.benchmarks.models import BenchmarkRun
from accelboard.benchmarks.services import (
    MetricInput,
    WorkloadSpec,
    model_variant_get_or_create,
    run_record,
    workload_get_or_create,
)
from accelboard.importers.metrics import METRICS
from accelboard.notifications import content
from accelboard.notifications.selectors import alert_facts, alerts_for_email

from .history import START, noisy
from .invariants import alert_invariant_problems, assert_alert_invariants

pytestmark = pytest.mark.django_db


def multi_history(
    team: Any, columns: dict[str, list[float]], *, model: str = "Llama-3.1-8B"
) -> list[BenchmarkRun]:
    """One run a day with every metric of ``columns`` (same length each) on one workload."""
    variant = model_variant_get_or_create(model=model, variant="bf16", precision="bf16")
    workload = workload_get_or_create(
        team=team, variant=variant, spec=WorkloadSpec(scenario="offline", batch_size=64)
    )
    n = len(next(iter(columns.values())))
    runs = []
    for i in range(n):
        run, _ = run_record(
            team=team,
            workload=workload,
            accelerator_type=None,
            accelerator_count=1,
            started_at=START + timedelta(days=i),
            metrics=[MetricInput(name=m, value=v[i], unit=METRICS[m].unit) for m, v in columns.items()],
            git_commit=f"{i:040x}",
        )
        runs.append(run)
    return runs


def shifted(
    n_before: int, n_after: int, size: float, seed: int, back_after: int | None = None
) -> list[float]:
    x = noisy(n_before + n_after, pct=1.0, seed=seed)
    end = n_before + (back_after if back_after is not None else n_after)
    return [v * (1 + size) if n_before <= i < end else v for i, v in enumerate(x)]


def test_one_change_that_moves_three_metrics_is_one_alert_named_after_the_worst(team: Any) -> None:
    runs = multi_history(
        team,
        {
            "latency_p50_ms": shifted(20, 5, 0.05, seed=1),
            "latency_p99_ms": shifted(20, 5, 0.21, seed=2),
            "throughput_tokens_per_s": shifted(20, 5, -0.06, seed=3),
            "power_avg_w": noisy(25, pct=1.0, seed=4),  # unmoved: not part of the change
        },
    )
    for run in runs:
        run_check(run_id=run.pk)
    alert = Alert.objects.get()
    members = {m.series.metric: m for m in AlertMetric.objects.filter(alert=alert).select_related("series")}
    assert set(members) == {"latency_p50_ms", "latency_p99_ms", "throughput_tokens_per_s"}
    # The headline is the worst metric: p99 +21% is Critical, the others Warnings.
    assert alert.series.metric == "latency_p99_ms" and alert.severity == "critical"
    assert alert.pct_change == pytest.approx(members["latency_p99_ms"].pct_change)
    assert alert.title.startswith("p99 latency regressed +2") and "(and 2 more metrics)" in alert.title
    assert members["latency_p50_ms"].severity == "warning"
    assert alert.first_run == runs[20]
    assert_alert_invariants()


def test_the_replay_of_a_loaded_history_groups_the_same_way(team: Any) -> None:
    multi_history(
        team,
        {
            "power_avg_w": shifted(20, 6, 0.15, seed=5),
            "energy_per_inference_j": shifted(20, 6, 0.15, seed=6),
            "throughput_tokens_per_s": noisy(26, pct=1.0, seed=7),
        },
    )
    alerts_history_check()
    alert = Alert.objects.get()
    assert alert.metrics.count() == 2
    # Power and energy are secondary: +15% (7.5x the threshold) is a Warning, not Critical.
    assert alert.severity == "warning"
    assert_alert_invariants()


def test_the_invariants_catch_a_change_split_into_alerts_of_one_severity(team: Any) -> None:
    """What the detector did before: one alert per metric, all Critical (power +14.7% too)."""
    runs = multi_history(team, {"latency_p99_ms": [1.0] * 3, "power_avg_w": [1.0] * 3})
    for n, value in enumerate(runs[1].metrics.order_by("name")):
        Alert.objects.create(
            team=team,
            kind="regression",
            severity="critical",
            title=f"{value.name} regressed",
            series=value.series,
            first_run=runs[1],
            dedupe_key=f"bench:{value.series_id}:{runs[1].pk}",
            opened_at=runs[1].started_at,
            pct_change=20.0 if n == 0 else 14.7,
            min_effect=0.02,
        )
    problems = alert_invariant_problems()
    assert any("has 2 open alerts" in p for p in problems)
    assert any("every change alert is critical" in p for p in problems)


def test_the_alert_resolves_once_every_metric_went_back(team: Any) -> None:
    runs = multi_history(
        team,
        {
            "throughput_tokens_per_s": shifted(20, 20, -0.12, seed=8, back_after=5),
            "energy_per_token_j": shifted(20, 20, 0.136, seed=9, back_after=5),
        },
    )
    for run in runs:
        run_check(run_id=run.pk)
    alert = Alert.objects.get()
    assert alert.state == "resolved" and alert.metrics.count() == 2
    assert all(m.reverted_at_run is not None for m in alert.metrics.all())
    assert Alert.objects.count() == 1  # the way back opened nothing


def test_marking_a_grouped_alert_expected_moves_every_metric_s_baseline(team: Any, lead: Any) -> None:
    runs = multi_history(
        team,
        {
            "latency_p99_ms": shifted(20, 20, 0.2, seed=10),
            "latency_p50_ms": shifted(20, 20, 0.1, seed=11),
        },
    )
    for run in runs[:24]:
        run_check(run_id=run.pk)
    alert = Alert.objects.get()
    alert_mark_expected(alert=alert, user=lead)
    assert ExpectedChange.objects.filter(run=runs[20]).count() == 2
    for run in runs[24:]:
        run_check(run_id=run.pk)
    assert Alert.objects.count() == 1


def test_the_pages_show_one_alert_with_its_metrics_and_say_what_severity_means(
    team: Any, lead: Any, login_client: Any
) -> None:
    runs = multi_history(
        team,
        {
            "latency_p99_ms": shifted(20, 5, 0.21, seed=12),
            "latency_p50_ms": shifted(20, 5, 0.08, seed=13),
        },
    )
    for run in runs:
        run_check(run_id=run.pk)
    alert = Alert.objects.get()
    p50 = AlertMetric.objects.get(alert=alert, series__metric="latency_p50_ms").series
    client = login_client(lead)
    listing = client.get(reverse("alerts:list")).content.decode()
    assert listing.count('data-alert="') == 1
    assert "and p50 latency" in listing and 'id="severity-definition"' in listing
    page = client.get(reverse("alerts:detail", args=[alert.pk])).content.decode()
    assert 'id="alert-metrics"' in page and "Metrics this change moved (2)" in page
    assert f'data-series="{p50.pk}"' in page and "from 5× the threshold" in page
    # The other metric's trend shows the alert too, with its own change.
    trends = client.get(reverse("dashboard:trends"), {"series": p50.pk}).content.decode()
    assert f'data-alert="{alert.pk}"' in trends
    # Its email names the other metric; the API lists both.
    (facts,) = [alert_facts(alert=a) for a in alerts_for_email(alert_ids=[alert.pk])]
    assert facts.other_metrics and facts.other_metrics[0].startswith("p50 latency +")
    assert any(row.label == "Also moved" for row in content.alert_rows(facts))


def test_two_metrics_whose_change_the_detector_places_one_run_apart_are_one_alert(team: Any) -> None:
    # One commit: p99 latency moves at run 20, throughput (its change point placed by the noise)
    # at run 21. Before, each opened an alert of its own: two emails for one change.
    runs = multi_history(
        team,
        {
            "latency_p99_ms": shifted(20, 8, 0.20, seed=12),
            "throughput_tokens_per_s": shifted(21, 7, -0.15, seed=13),
        },
    )
    for run in runs:
        run_check(run_id=run.pk)
    alert = Alert.objects.get()
    members = {m.series.metric: m for m in AlertMetric.objects.filter(alert=alert).select_related("series")}
    assert set(members) == {"latency_p99_ms", "throughput_tokens_per_s"}
    assert alert.first_run == runs[20]
    # Each metric keeps where its own change began: the baseline after the change starts there.
    assert members["latency_p99_ms"].first_run is None
    assert members["throughput_tokens_per_s"].first_run == runs[21].pk
    assert_alert_invariants()


def test_changes_two_runs_apart_stay_two_alerts(team: Any) -> None:
    multi_history(
        team,
        {
            "latency_p99_ms": shifted(20, 10, 0.20, seed=14),
            "throughput_tokens_per_s": shifted(24, 6, -0.15, seed=15),
        },
    )
    alerts_history_check()
    assert Alert.objects.count() == 2
