"""Writes of the drift app: the drift check that raises alerts, budgets, production agreement.

1. ``drift_check(team=...)`` evaluates every quantized variant × accuracy task the team has
   results for (``selectors.drift_evaluate``, the same path the pages read) and raises one alert
   of kind ``drift`` per variant, task and verdict through ``alerts.services.alert_raise``:
   ``over`` (critical) when the current loss exceeds the budget, ``trending`` (warning) when a
   significant trend reaches it within the horizon. The dedupe key is
   ``drift:<team>:<variant>:<metric>:<verdict>``, so running the check twice, or from two
   workers, opens nothing new; a variant that goes from trending to over gets its critical alert.
   Known limit: once resolved, the same verdict on the same variant and task does not re-open.
2. ``agreement_batch_ingest`` stores a batch of production agreement rows, idempotent on the
   client's batch id (claimed with ``INSERT ... ON CONFLICT DO NOTHING`` in the batch's
   transaction, as the API's other ingests do): rows and claim commit or vanish together.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Q

from accelboard.alerts.choices import AlertKind, Severity
from accelboard.alerts.services import alert_raise
from accelboard.benchmarks.models import MetricValue, Model, ModelVariant
from accelboard.core.models import Team

from . import computation as c
from .models import AgreementBatch, DriftBudget, ProductionAgreement
from .selectors import TaskDrift, accuracy_values, agreement_evaluate, drift_evaluate, model_ids_visible

logger = logging.getLogger(__name__)

_SEVERITY = {c.OVER: Severity.CRITICAL, c.TRENDING: Severity.WARNING}


@dataclass(frozen=True)
class DriftFinding:
    """One variant × task the check found over budget or trending (and its alert)."""

    model: str
    variant: str
    metric: str
    verdict: str
    level: float
    alert_id: int
    created: bool


def _title(model_name: str, task: TaskDrift) -> str:
    level = (task.level or 0.0) * 100
    budget = task.budget * 100
    # A bare "accuracy" metric has no task name worth repeating ("accuracy accuracy").
    what = "accuracy" if task.task == "accuracy" else f"{task.task} accuracy"
    if task.verdict == c.OVER:
        return f"{model_name} {task.variant_name}: {what} {level:.2f}% below the reference, over its {budget:.2g}% budget"
    days = task.trend.days_to_budget if task.trend else None
    return (
        f"{model_name} {task.variant_name}: {what} loss {level:.2f}% and growing, "
        f"reaches the {budget:.2g}% budget in ~{days:.0f} days"
    )


def _detail(model_name: str, task: TaskDrift) -> dict[str, Any]:
    latest = task.latest
    trend = task.trend
    return {
        "model": model_name,
        "variant": task.variant_name,
        "metric": task.metric,
        "task": task.task,
        "verdict": task.verdict,
        "loss": task.level,
        "budget": task.budget,
        "ratio": latest.ratio if latest else None,
        "value": latest.value if latest else None,
        "reference_value": latest.reference_value if latest else None,
        "measured_at": latest.at.isoformat() if latest else None,
        "slope_per_day": trend.slope_per_day if trend else None,
        "trend_t": trend.t if trend and abs(trend.t) != float("inf") else None,
        "days_to_budget": trend.days_to_budget if trend else None,
        "points": len(task.pairs),
    }


def _raise(*, team: Team, model_name: str, task: TaskDrift, as_of: datetime | None = None) -> DriftFinding:
    latest = task.latest
    assert latest is not None  # a verdict other than no-data has pairs
    value = (
        MetricValue.objects.select_related("series", "run")
        .filter(run_id=latest.run_id, name=task.metric)
        .first()
    )
    detail = _detail(model_name, task)
    if as_of is not None:
        detail["as_of"] = as_of.isoformat()
    alert, created = alert_raise(
        team=team,
        kind=AlertKind.DRIFT,
        severity=_SEVERITY[task.verdict],
        dedupe_key=f"drift:{team.pk}:{task.variant_id}:{task.metric}:{task.verdict}"[:200],
        title=_title(model_name, task),
        series=value.series if value else None,
        first_run=value.run if value else None,
        after_mean=task.level,
        pct_change=-(task.level or 0.0) * 100,
        detail=detail,
    )
    return DriftFinding(
        model=model_name,
        variant=task.variant_name,
        metric=task.metric,
        verdict=task.verdict,
        level=task.level or 0.0,
        alert_id=alert.pk,
        created=created,
    )


def drift_check(
    *,
    team: Team,
    model_ids: list[int] | None = None,
    as_of: datetime | None = None,
    rows: list[dict[str, Any]] | None = None,
) -> list[DriftFinding]:
    """Raise a ``drift`` alert for each of the team's variants over budget or trending (see 1.)."""
    findings: list[DriftFinding] = []
    evaluated = drift_evaluate(
        team_ids=[team.pk], model_ids=model_ids, as_of=as_of, change_points=False, rows=rows
    )
    for entry in evaluated.values():
        for task in entry.tasks:
            if task.verdict in _SEVERITY:
                findings.append(_raise(team=team, model_name=entry.model_name, task=task, as_of=as_of))
    return findings


def drift_history_check(*, team: Team, days: list[datetime]) -> list[DriftFinding]:
    """What the daily check would have raised had it run at each of ``days`` (ascending).

    For a history loaded at once (the demo): each variant × task × verdict is raised on the first
    day it appears, with ``detail.as_of`` saying when, then left alone, so the alert shows when
    the drift was first caught rather than the latest evidence. The accuracy values are read once."""
    model_ids = model_ids_visible(team_ids=[team.pk])
    rows = accuracy_values(team_ids=[team.pk], model_ids=model_ids)
    seen: set[tuple[int, str, str]] = set()
    findings: list[DriftFinding] = []
    for as_of in days:
        evaluated = drift_evaluate(
            team_ids=[team.pk], model_ids=model_ids, as_of=as_of, change_points=False, rows=rows
        )
        for entry in evaluated.values():
            for task in entry.tasks:
                key = (task.variant_id, task.metric, task.verdict)
                if task.verdict in _SEVERITY and key not in seen:
                    seen.add(key)
                    findings.append(_raise(team=team, model_name=entry.model_name, task=task, as_of=as_of))
    return findings


def agreement_check(*, team: Team) -> list[DriftFinding]:
    """Raise a ``drift`` alert for each of the team's variants whose production agreement with
    the reference has fallen more than ``AGREEMENT_BUDGET`` (1% relative) below its first week,
    or is heading there within the horizon. Dedupe key ``drift-agreement:<team>:<variant>:<task>:
    <verdict>``."""
    findings = []
    for item in agreement_evaluate(team_ids=[team.pk]):
        if item.verdict not in _SEVERITY or not item.pairs:
            continue
        level = (item.level or 0.0) * 100
        since = item.pairs[0].reference_at.date().isoformat()
        title = f"{item.model_name} {item.variant_name}: production agreement ({item.task}) down {level:.2f}% since {since}"
        if item.verdict == c.TRENDING and item.trend and item.trend.days_to_budget is not None:
            title += f", {c.AGREEMENT_BUDGET * 100:.2g}% in ~{item.trend.days_to_budget:.0f} days"
        alert, created = alert_raise(
            team=team,
            kind=AlertKind.DRIFT,
            severity=_SEVERITY[item.verdict],
            dedupe_key=f"drift-agreement:{team.pk}:{item.variant_id}:{item.task}:{item.verdict}"[:200],
            title=title,
            before_mean=item.pairs[0].reference_value,
            after_mean=item.latest_rate,
            pct_change=-level,
            detail={
                "source": "production agreement",
                "model": item.model_name,
                "variant": item.variant_name,
                "task": item.task,
                "verdict": item.verdict,
                "loss": item.level,
                "budget": c.AGREEMENT_BUDGET,
                "baseline_rate": item.pairs[0].reference_value,
                "latest_rate": item.latest_rate,
                "latest_samples": item.latest_samples,
                "days_to_budget": item.trend.days_to_budget if item.trend else None,
            },
        )
        findings.append(
            DriftFinding(
                model=item.model_name,
                variant=item.variant_name,
                metric=f"agreement:{item.task}",
                verdict=item.verdict,
                level=item.level or 0.0,
                alert_id=alert.pk,
                created=created,
            )
        )
    return findings


def drift_check_all(*, as_of: datetime | None = None) -> dict[str, int]:
    """The daily pass: every team with accuracy results or production agreement. Returns counts
    for the job record."""
    teams = Team.objects.filter(
        Q(workloads__series__metric__startswith="accuracy")
        | Q(pk__in=ProductionAgreement.objects.values("team_id"))
    ).distinct()
    checked = alerts = created = 0
    for team in teams:
        findings = drift_check(team=team, as_of=as_of) + agreement_check(team=team)
        checked += 1
        alerts += len(findings)
        created += sum(1 for f in findings if f.created)
    return {"teams": checked, "findings": alerts, "alerts_created": created}


def drift_check_enqueue(*, team_id: int, variant_id: int) -> None:
    """After the current transaction commits, re-check the variant's model for the team.

    Called by ``benchmarks.services.run_record`` when a run brings accuracy metrics; robust, so a
    broker outage never turns a recorded run into an error (the daily pass catches up)."""
    from . import tasks  # noqa: PLC0415 - tasks import services

    transaction.on_commit(lambda: tasks.drift_check_variant.delay(team_id, variant_id), robust=True)


def drift_budget_set(*, model: Model, task: str, budget: float, note: str = "") -> DriftBudget:
    """Override the model's budget for one task (upsert); 0 <= budget <= 1."""
    if not 0.0 <= budget <= 1.0:
        raise ValueError(f"budget: must be between 0 and 1 (a fraction), not {budget}")
    row, _ = DriftBudget.objects.update_or_create(
        model=model, task=task, defaults={"budget": budget, "note": note}
    )
    return row


# --- Production agreement ----------------------------------------------------------------------


class AgreementRejected(Exception):
    """A batch that names something that does not exist; ``path`` is the field at fault."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


@dataclass(frozen=True)
class AgreementInput:
    model: str
    variant: str
    day: date
    task: str
    agreement_rate: float
    samples: int
    kl_divergence: float | None = None
    perplexity_delta: float | None = None


def _claim(*, team: Team, batch_id: str) -> dict[str, Any] | None:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO drift_agreementbatch (team_id, batch_id, result, created_at)
            VALUES (%s, %s, '{}'::jsonb, now())
            ON CONFLICT (team_id, batch_id) DO NOTHING
            RETURNING id
            """,
            [team.pk, batch_id],
        )
        if cursor.fetchone() is not None:
            return None
    return AgreementBatch.objects.get(team=team, batch_id=batch_id).result


def agreement_batch_ingest(
    *, team: Team, batch_id: str, items: list[AgreementInput]
) -> tuple[dict[str, Any], bool]:
    """Store the batch's rows (upsert per team, variant, day, task); (result, duplicate)."""
    wanted = {(item.model, item.variant) for item in items}
    variants = {
        (v.model.name, v.name): v
        for v in ModelVariant.objects.select_related("model").filter(
            model__name__in={m for m, _ in wanted}, name__in={n for _, n in wanted}
        )
    }
    for i, item in enumerate(items):
        if (item.model, item.variant) not in variants:
            path = (
                f"items[{i}].model"
                if not any(m == item.model for m, _ in variants)
                else f"items[{i}].variant"
            )
            raise AgreementRejected(
                f"no variant {item.variant!r} of model {item.model!r}: record a run of it first", path=path
            )
    with transaction.atomic():
        stored = _claim(team=team, batch_id=batch_id)
        if stored is not None:
            return {**stored, "duplicate": True}, True
        for item in items:
            ProductionAgreement.objects.update_or_create(
                team=team,
                variant=variants[(item.model, item.variant)],
                day=item.day,
                task=item.task,
                defaults={
                    "agreement_rate": item.agreement_rate,
                    "kl_divergence": item.kl_divergence,
                    "perplexity_delta": item.perplexity_delta,
                    "samples": item.samples,
                    "batch_id": batch_id,
                },
            )
        result = {"batch_id": batch_id, "accepted": len(items)}
        AgreementBatch.objects.filter(team=team, batch_id=batch_id).update(result=result)
    return {**result, "duplicate": False}, False
