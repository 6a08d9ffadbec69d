"""The per-run benchmark check: one alert per change, reverts resolve, baselines move, settings apply."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from django.db import connection

from accelboard.alerts.models import Alert, AlertEvent, DetectionSetting, ExpectedChange
from accelboard.alerts.regression_services import (
    alerts_history_check,
    run_check,
    series_check,
    series_rescore,
)
from accelboard.alerts.selectors import min_effect_for_series
from accelboard.alerts.services import alert_mark_expected
from accelboard.benchmarks.models import BenchmarkRun, Series

from .history import history_record, noisy, series_of

pytestmark = pytest.mark.django_db


def check_each(runs: list[BenchmarkRun]) -> None:
    """What the Celery task does as each run lands."""
    for run in runs:
        run_check(run_id=run.pk)


def step(n_before: int, n_after: int, *, size: float, pct: float = 1.0, seed: int = 1) -> list[float]:
    x = noisy(n_before + n_after, pct=pct, seed=seed)
    return x[:n_before] + [v * (1 + size) for v in x[n_before:]]


def test_it_opens_one_alert_for_a_sustained_step_with_its_evidence(team: Any) -> None:
    runs = history_record(team=team, values=step(20, 5, size=-0.10))
    check_each(runs)
    alert = Alert.objects.get()
    assert (alert.kind, alert.severity, alert.state) == ("regression", "critical", "open")
    assert alert.first_run == runs[20] and alert.last_good_run == runs[19]
    assert alert.series == series_of(runs[0])
    assert alert.before_mean == pytest.approx(1000, rel=0.01)
    assert alert.after_mean == pytest.approx(900, rel=0.015)
    assert alert.pct_change == pytest.approx(-10, abs=1.5)
    assert alert.confidence > 0.999
    assert alert.min_effect == 0.02
    assert alert.detail["commit_range"] == [runs[19].git_commit, runs[20].git_commit]
    assert alert.dedupe_key == f"bench:regression:{alert.series.workload_id}:-:1:{runs[20].pk}"
    assert "regressed -10" in alert.title or "regressed -9" in alert.title
    assert alert.title.startswith("Output tokens per second regressed")  # the label, not the key


def test_it_does_not_duplicate_on_a_recheck(team: Any) -> None:
    runs = history_record(team=team, values=step(20, 5, size=-0.10))
    check_each(runs)
    check_each(runs[-3:])
    assert Alert.objects.count() == 1
    assert AlertEvent.objects.count() == 1


def test_it_ignores_a_lone_outlier_that_reverts(team: Any) -> None:
    values = noisy(30, pct=1.0, seed=3)
    values[20] *= 0.9  # 10 sigma, once
    check_each(history_record(team=team, values=values))
    assert not Alert.objects.exists()


def test_it_knows_the_direction_of_each_metric(team: Any) -> None:
    latency = history_record(team=team, values=step(20, 4, size=0.10), metric="latency_p99_ms")
    faster = history_record(team=team, values=step(20, 4, size=0.10, seed=2), model="Qwen3-8B")
    check_each(latency + faster)
    assert Alert.objects.get(series=series_of(latency[0])).kind == "regression"
    improvement = Alert.objects.get(series=series_of(faster[0]))
    assert (improvement.kind, improvement.severity) == ("improvement", "info")


def test_it_resolves_a_regression_that_goes_back_and_reopens_nothing(team: Any) -> None:
    x = noisy(40, pct=1.0, seed=4)
    values = x[:20] + [v * 0.9 for v in x[20:24]] + x[24:]
    runs = history_record(team=team, values=values)
    check_each(runs)
    alert = Alert.objects.get()
    assert alert.state == "resolved"
    assert alert.first_run == runs[20]
    assert alert.detail["reverted_at_run"] == runs[24].pk
    assert AlertEvent.objects.filter(alert=alert, to_state="resolved", reason="reverted", actor=None).exists()


def test_it_accepts_a_change_as_the_new_baseline(team: Any) -> None:
    runs = history_record(team=team, values=step(20, 30, size=-0.10))
    check_each(runs)
    assert Alert.objects.count() == 1  # the 29 results after the first at the new level raise nothing


def test_an_expected_change_moves_the_baseline(team: Any, other_team: Any, lead: Any) -> None:
    values = step(20, 6, size=-0.10)
    marked = history_record(team=team, values=values)
    ExpectedChange.objects.create(
        team=team, series=series_of(marked[0]), run=marked[20], created_at=marked[20].started_at
    )
    unmarked = history_record(team=other_team, values=values)
    check_each(marked + unmarked)
    assert list(Alert.objects.values_list("team_id", flat=True)) == [other_team.pk]


def test_marking_expected_stops_a_return_from_raising_against_the_old_level(team: Any, lead: Any) -> None:
    runs = history_record(team=team, values=step(20, 20, size=-0.10))
    check_each(runs[:23])
    alert = Alert.objects.get()
    alert_mark_expected(alert=alert, user=lead)
    check_each(runs[23:])
    assert Alert.objects.count() == 1
    assert ExpectedChange.objects.get().run == runs[20]


@pytest.mark.parametrize(
    ("series_effect", "team_metric", "team_default", "expected"),
    [
        (0.07, 0.05, 0.04, 0.07),
        (None, 0.05, 0.04, 0.05),
        (None, None, 0.04, 0.04),
        (None, None, None, 0.02),
    ],
)
def test_it_takes_the_minimum_effect_from_series_then_team_metric_then_team(
    team: Any,
    series_effect: float | None,
    team_metric: float | None,
    team_default: float | None,
    expected: float,
) -> None:
    series = series_of(history_record(team=team, values=[1.0])[0])
    Series.objects.filter(pk=series.pk).update(min_effect=series_effect)
    if team_metric is not None:
        DetectionSetting.objects.create(team=team, metric=series.metric, min_effect=team_metric)
    if team_default is not None:
        DetectionSetting.objects.create(team=team, metric="", min_effect=team_default)
    series.refresh_from_db()
    assert min_effect_for_series(series=series) == expected


def test_a_team_minimum_effect_silences_small_steps(team: Any, other_team: Any) -> None:
    values = step(20, 8, size=-0.03, pct=0.3)
    DetectionSetting.objects.create(team=team, metric="", min_effect=0.05)
    check_each(history_record(team=team, values=values) + history_record(team=other_team, values=values))
    assert list(Alert.objects.values_list("team_id", "min_effect")) == [(other_team.pk, 0.02)]


def test_it_flags_a_short_history_from_the_samples_and_resolves_the_revert(team: Any) -> None:
    rng = np.random.default_rng(5)
    levels = [1000.0] * 5 + [1250.0] + [1000.0] * 2
    samples = [list(level * (1 + 0.002 * rng.standard_normal(5))) for level in levels]
    runs = history_record(
        team=team, metric="memory_peak_bytes", values=[max(s) for s in samples], samples=samples
    )
    check_each(runs[:6])
    alert = Alert.objects.get()
    assert (alert.kind, alert.first_run, alert.state) == ("regression", runs[5], "open")
    assert "Mann-Whitney" in alert.detail["reason"]
    check_each(runs[6:])
    alert.refresh_from_db()
    assert alert.state == "resolved"
    assert Alert.objects.count() == 1


def test_it_checks_history_up_to_the_run_it_was_asked_about(team: Any) -> None:
    runs = history_record(team=team, values=step(20, 5, size=-0.10))
    result = series_check(series=series_of(runs[0]), upto=runs[19])
    assert result.verdict == "none" and not Alert.objects.exists()


def test_rescoring_segments_the_whole_history_with_the_thresholds_in_force(team: Any) -> None:
    runs = history_record(team=team, values=step(40, 40, size=-0.05, pct=0.5))
    series = series_of(runs[0])
    (cp,) = series_rescore(series=series)
    assert abs(cp.index - 40) <= 1 and cp.kind == "regression"
    assert series_rescore(series=series, min_effect=0.10) == []


@pytest.mark.django_db(transaction=True)
def test_two_workers_checking_the_same_run_open_one_alert(team: Any) -> None:
    runs = history_record(team=team, values=step(20, 2, size=-0.10))
    check_each(runs[:-1])
    assert not Alert.objects.exists()
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            run_check(run_id=runs[-1].pk)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert Alert.objects.count() == 1
    assert AlertEvent.objects.count() == 1


def test_a_replay_of_loaded_history_dates_each_alert_by_the_run_that_revealed_it(team: Any) -> None:
    runs = history_record(team=team, values=step(20, 5, size=-0.10))
    assert alerts_history_check() == {"alerts_raised": 1, "alerts_resolved": 0}
    alert = Alert.objects.get()
    # Detected while replaying run by run: opened at the time of a run after the step, not now.
    assert runs[20].started_at <= alert.opened_at <= runs[-1].started_at


@pytest.mark.parametrize("metric", ["accuracy:gsm8k:exact_match", "accuracy"])
def test_it_leaves_a_quantized_variants_accuracy_to_the_drift_check(team: Any, metric: str) -> None:
    from accelboard.benchmarks.models import Model, ModelVariant

    reference = history_record(team=team, values=step(20, 5, size=-0.10), metric=metric)
    quantized = history_record(team=team, values=step(20, 5, size=-0.10), metric=metric, variant="int4-awq")
    model = Model.objects.get(name="Llama-3.1-8B")
    model.reference_variant = ModelVariant.objects.get(model=model, name="bf16")
    model.save()
    check_each(reference + quantized)
    # The reference's own accuracy drop is a regression; the int4 variant's is drift, alerted by
    # accelboard.drift against the reference, so not a second time here.
    (alert,) = Alert.objects.all()
    assert alert.series == series_of(reference[0])


def test_it_stores_the_change_points_it_saw_for_the_alert_page(team: Any) -> None:
    runs = history_record(team=team, values=step(20, 5, size=-0.10))
    check_each(runs)
    alert = Alert.objects.get()
    stored = alert.detail["change_runs"]
    # The run ids of the level changes the whole history showed when the alert was raised: the
    # alert's own change among them, every one a run of the series.
    assert runs[20].pk in stored
    assert set(stored) <= {run.pk for run in runs}
