"""The drift check: verdicts against the budget, per-task overrides, and drift alerts raised once."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from accelboard.alerts.models import Alert
from accelboard.alerts.services import alert_dismiss
from accelboard.benchmarks.models import Model
from accelboard.core.access import scope_for_team
from accelboard.drift import computation as c
from accelboard.drift.models import DriftBudget
from accelboard.drift.selectors import drift_evaluate
from accelboard.drift.services import drift_check, drift_check_all

from .conftest import ARC, START

pytestmark = pytest.mark.django_db


def _task(team: Any, model: str, variant: str) -> Any:
    model_obj = Model.objects.get(name=model)
    entry = drift_evaluate(scope=scope_for_team(team), model_ids=[model_obj.pk])[model_obj.pk]
    return next(t for t in entry.tasks if t.variant_name == variant)


def test_it_gives_each_variant_its_verdict_against_the_budget(team: Any, llama: dict[str, Any]) -> None:
    fp8 = _task(team, "Llama-3.1-8B", "fp8")
    int4 = _task(team, "Llama-3.1-8B", "int4-awq")
    # 0.796 / 0.800 -> 0.5% loss, ratio 0.995; 0.780 / 0.800 -> 2.5% loss, ratio 0.975.
    assert fp8.level == pytest.approx(0.005)
    assert fp8.latest.ratio == pytest.approx(0.995)
    assert fp8.verdict == c.WITHIN
    assert int4.level == pytest.approx(0.025)
    assert int4.verdict == c.OVER
    assert len(int4.pairs) == 10
    assert (int4.task, int4.task_metric, int4.budget) == ("arc_easy", "acc_norm", 0.01)


def test_it_uses_a_per_task_budget_override(team: Any, llama: dict[str, Any]) -> None:
    DriftBudget.objects.create(
        model=llama["model"], task="arc_easy", budget=0.03, note="int4 accepted up to 3%"
    )
    assert _task(team, "Llama-3.1-8B", "int4-awq").verdict == c.WITHIN


def test_it_raises_one_critical_drift_alert_for_a_variant_over_budget(
    team: Any, llama: dict[str, Any]
) -> None:
    findings = drift_check(team=team)
    assert [(f.variant, f.verdict, f.created) for f in findings] == [("int4-awq", c.OVER, True)]
    alert = Alert.objects.get()
    assert (alert.team_id, alert.kind, alert.severity) == (team.pk, "drift", "critical")
    assert "int4-awq" in alert.title and "over its 1% budget" in alert.title
    assert alert.detail["loss"] == pytest.approx(0.025)
    assert alert.detail["ratio"] == pytest.approx(0.975)
    assert alert.series.metric == ARC
    assert alert.first_run_id == llama["runs"]["int4-awq"][-1].pk
    # Again (the daily pass, or a second worker): nothing new.
    again = drift_check(team=team)
    assert [f.created for f in again] == [False]
    # The daily pass covers every team: the other team's Secret-7B int8 (0.6 vs 0.7) is its own
    # alert, in its own team.
    assert drift_check_all() == {"teams": 2, "findings": 2, "alerts_created": 1}
    assert sorted(Alert.objects.values_list("team__slug", "title")) == [
        ("inference", alert.title),
        ("research", "Secret-7B int8: arc_easy accuracy 14.29% below the reference, over its 1% budget"),
    ]


def test_it_warns_of_a_loss_trending_toward_the_budget_before_it_crosses(
    team: Any, drift_series: Callable[..., None]
) -> None:
    # 0.2% loss growing 0.05 points a night for 12 nights (0.75% at the end): under the 1%
    # budget, but reaching it in ~5 days.
    drift_series(team=team, losses=[0.002 + 0.0005 * n for n in range(12)])
    task = _task(team, "Drifty-8B", "int4")
    assert task.level < task.budget
    assert task.verdict == c.TRENDING
    assert task.trend.days_to_budget == pytest.approx(5, abs=1)
    (finding,) = drift_check(team=team)
    assert finding.verdict == c.TRENDING
    alert = Alert.objects.get()
    assert (alert.kind, alert.severity) == ("drift", "warning")
    assert "and growing" in alert.title
    assert alert.detail["days_to_budget"] == pytest.approx(5, abs=1)


def test_it_raises_nothing_for_a_flat_loss_within_budget(
    team: Any, drift_series: Callable[..., None]
) -> None:
    drift_series(team=team, losses=[0.004, 0.006, 0.005, 0.004, 0.006, 0.005, 0.004, 0.006, 0.005, 0.005])
    assert _task(team, "Drifty-8B", "int4").verdict == c.WITHIN
    assert drift_check(team=team) == []
    assert not Alert.objects.exists()


def test_it_pairs_only_results_of_the_callers_teams(
    team: Any, other_team: Any, llama: dict[str, Any]
) -> None:
    # other_team sees no Llama results at all: nothing to evaluate, nothing to alert.
    assert (
        drift_evaluate(scope=scope_for_team(other_team), model_ids=[llama["model"].pk])[
            llama["model"].pk
        ].tasks
        == []
    )
    assert [f.model for f in drift_check(team=other_team)] == ["Secret-7B"]
    assert list(Alert.objects.values_list("team_id", flat=True)) == [other_team.pk]


def test_it_says_no_data_without_reference_results(team: Any) -> None:
    from .conftest import START, accuracy_run

    accuracy_run(team=team, model="Lonely-1B", variant="int8", precision="int8", at=START, metrics={ARC: 0.7})
    accuracy_run(
        team=team,
        model="Lonely-1B",
        variant="fp16",
        precision="fp16",
        at=START,
        metrics={"throughput_tokens_per_s": 10.0},
    )
    task = _task(team, "Lonely-1B", "int8")
    assert task.pairs == [] and task.verdict == c.NO_DATA


def _agreement(team: Any, rates: list[float], variant: str = "int4-awq") -> None:
    from datetime import timedelta

    from accelboard.drift.services import AgreementInput, agreement_batch_ingest

    from .conftest import START

    agreement_batch_ingest(
        team=team,
        batch_id=f"agreement-{variant}",
        items=[
            AgreementInput(
                model="Llama-3.1-8B",
                variant=variant,
                day=(START + timedelta(days=i)).date(),
                task="chat",
                agreement_rate=rate,
                samples=5000,
            )
            for i, rate in enumerate(rates)
        ],
    )


def test_it_alerts_when_production_agreement_falls_from_its_first_week(
    team: Any, llama: dict[str, Any]
) -> None:
    from accelboard.drift.services import agreement_check

    # fp8 steady around 0.985; int4-awq a week at 0.962 then down 0.4 points a day for 5 days.
    _agreement(team, [0.985, 0.986, 0.984] * 4, variant="fp8")
    _agreement(team, [0.962] * 7 + [0.962 - 0.004 * n for n in range(1, 6)])
    (finding,) = agreement_check(team=team)
    assert (finding.variant, finding.metric, finding.verdict) == ("int4-awq", "agreement:chat", c.OVER)
    alert = Alert.objects.get()
    assert (alert.kind, alert.severity) == ("drift", "critical")
    assert alert.title.startswith("Llama-3.1-8B int4-awq: production agreement (chat) down")
    assert alert.detail["baseline_rate"] == pytest.approx(0.962)
    assert alert.detail["latest_rate"] == pytest.approx(0.942)
    # Newest three days 0.950, 0.946, 0.942 -> median 0.946: 1.66% below 0.962.
    assert alert.detail["loss"] == pytest.approx(0.016 / 0.962)
    assert [f.created for f in agreement_check(team=team)] == [False]
    counts = drift_check_all()
    assert counts["alerts_created"] == 2  # Llama int4 over on accuracy, other team's Secret-7B
    assert Alert.objects.filter(detail__source="production agreement").count() == 1


def test_an_open_warning_becomes_budget_crossed_in_the_same_alert(
    team: Any, drift_series: Callable[..., None]
) -> None:
    # 0.2% loss growing 0.05 points a night: trending by night 12, over the 1% budget by night 17.
    drift_series(team=team, losses=[0.002 + 0.0005 * n for n in range(20)])
    (first,) = drift_check(team=team, as_of=START + timedelta(days=12, hours=1))
    assert (first.verdict, first.created) == (c.TRENDING, True)
    (later,) = drift_check(team=team)
    assert (later.verdict, later.created, later.alert_id) == (c.OVER, False, first.alert_id)
    alert = Alert.objects.get()
    assert alert.severity == "critical" and "budget crossed" in alert.title
    assert [h["verdict"] for h in alert.detail["history"]] == ["trending", "over"]
    assert alert.detail["loss"] > alert.detail["budget"] == 0.01
    assert list(alert.events.values_list("reason", flat=True)) == ["detected", "escalated"]
    # The same evidence again changes nothing; a person's decision is not undone by the next check.
    drift_check(team=team)
    assert len(Alert.objects.get().detail["history"]) == 2
    alert_dismiss(alert=alert, user=None, reason="expected")
    assert [f.created for f in drift_check(team=team)] == [False]
    assert Alert.objects.count() == 1


def test_it_shows_one_accuracy_figure_as_a_delta_and_a_ratio(team: Any, drift_series: Any) -> None:
    # The overview wrote "Accuracy Δ now −5.19%" (the median of the newest three days) beside the
    # ratio 0.9473 (the newest pair alone, −5.27%) for the same variant: one figure, one definition.
    drift_series(team=team, losses=[0.05, 0.05, 0.0519, 0.0527])
    task = _task(team, "Drifty-8B", "int4")
    assert task.level == pytest.approx(0.0519)
    assert task.latest.ratio == pytest.approx(1 - 0.0527)
    assert task.ratio == pytest.approx(1 - task.level)
    findings = drift_check(team=team)
    alert = Alert.objects.get(pk=findings[0].alert_id)
    assert alert.detail["ratio"] == pytest.approx(1 - alert.detail["loss"])


def test_it_opens_an_over_budget_alert_when_the_loss_first_went_over(team: Any, drift_series: Any) -> None:
    # A check that first looks today at a variant over its budget for weeks opened the alert
    # "today": it opens when the level (median of three days) first went over and stayed over,
    # and keeps the check's own time beside it.
    drift_series(team=team, losses=[0.0] * 5 + [0.03] * 40)
    now = START + timedelta(days=45)
    findings = drift_check(team=team, as_of=now)
    alert = Alert.objects.get(pk=findings[0].alert_id)
    # Nights 5 and 6 at 3% make the three-day median 3% on night 6 (index 6), at 01:05.
    first_over = START + timedelta(days=6, minutes=5)
    assert alert.opened_at == first_over
    assert alert.detail["over_since"] == first_over.isoformat()
    assert alert.detail["as_of"] == now.isoformat()  # when the check saw it ("First caught")
