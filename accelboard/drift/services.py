"""Writes of the drift app: the drift check that raises alerts, budgets, production agreement.

1. ``drift_check(team=...)`` evaluates every quantized variant × accuracy task the team has
   results for (``selectors.drift_evaluate``, the same path the pages read) and raises one alert
   of kind ``drift`` per variant and task through ``alerts.services.alert_raise``: ``over``
   (critical) when the current loss exceeds the budget, ``trending`` (warning) when a
   significant trend reaches it within the horizon. The dedupe key is
   ``drift:<team>:<variant>:<metric>:<verdict at opening>``, so running the check twice, or from
   two workers, opens nothing new. While the alert is open it follows the evidence (``_follow``):
   a trending warning whose loss crosses the budget becomes "budget crossed", critical, in the
   same alert, with each change of verdict kept in ``detail.history`` and in the alert's events.
   Known limit: once resolved or dismissed, the same verdict on the same variant and task does
   not re-open (a worse one opens a new alert).
2. ``agreement_batch_ingest`` stores a batch of production agreement rows, idempotent on the
   client's batch id (claimed with ``INSERT ... ON CONFLICT DO NOTHING`` in the batch's
   transaction, as the API's other ingests do): rows and claim commit or vanish together.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, replace
from datetime import date, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from accelboard.alerts.choices import AlertKind, AlertState, Severity
from accelboard.alerts.models import Alert, AlertEvent
from accelboard.alerts.services import alert_raise
from accelboard.benchmarks.models import MetricValue, ModelVariant
from accelboard.benchmarks.selectors import model_resolve, model_variant_resolve
from accelboard.core.access import scope_for_team
from accelboard.core.idempotency_services import IdempotencyKeyReused, body_digest
from accelboard.core.models import Team

from . import computation as c
from .models import AgreementBatch, ProductionAgreement
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


def _title(model_name: str, task: TaskDrift, *, crossed: bool = False) -> str:
    level = (task.level or 0.0) * 100
    budget = task.budget * 100
    # A bare "accuracy" metric has no task name worth repeating ("accuracy accuracy").
    what = "accuracy" if task.task == "accuracy" else f"{task.task} accuracy"
    if task.verdict == c.OVER and crossed:
        # The warning this alert opened with came true: say so, in the same alert.
        return f"{model_name} {task.variant_name}: {budget:.2g}% budget crossed, {what} now {level:.2f}% below the reference"
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
        # The ratio the loss is (the same days, the same median), not the newest pair's: one
        # figure, written as the quantization pages write it.
        "ratio": task.ratio,
        "value": latest.value if latest else None,
        "reference_value": latest.reference_value if latest else None,
        "measured_at": latest.at.isoformat() if latest else None,
        "slope_per_day": trend.slope_per_day if trend else None,
        "trend_t": trend.t if trend and abs(trend.t) != float("inf") else None,
        "days_to_budget": trend.days_to_budget if trend else None,
        "points": len(task.pairs),
    }


_ACTIVE = (AlertState.OPEN, AlertState.ACKNOWLEDGED)
_RANK = {c.TRENDING: 1, c.OVER: 2}


def _follow(
    *,
    team: Team,
    prefix: str,
    verdict: str,
    title: str,
    detail: dict[str, Any],
    as_of: datetime | None,
    evidence: dict[str, Any],
) -> tuple[Alert, bool] | None:
    """Bring the open drift alert of one variant and task (its dedupe key starts with ``prefix``)
    up to the newest evidence: title, severity, figures, and, when the verdict changes, one more
    entry in ``detail["history"]`` and an AlertEvent saying so. Returns (alert, False), or None
    when no alert is open for it. A closed alert whose last verdict is this one also answers
    (alert, False): what a person resolved or dismissed is not reopened for the same verdict.

    The UPDATE is conditional on the state read (open or acknowledged), so a person closing the
    alert meanwhile wins."""
    alerts = Alert.objects.filter(kind=AlertKind.DRIFT, team=team, dedupe_key__startswith=prefix)
    alert = alerts.filter(state__in=_ACTIVE).order_by("-opened_at").first()
    if alert is None:
        closed = alerts.exclude(state__in=_ACTIVE).order_by("-opened_at").first()
        if closed is not None and closed.detail.get("verdict") == verdict:
            return closed, False
        return None
    before = dict(alert.detail or {})
    history = list(before.get("history") or [])
    if not history:
        history.append(_history_entry(before, before.get("as_of") or alert.opened_at.isoformat()))
    changed = before.get("verdict") != verdict
    when = as_of.isoformat() if as_of is not None else timezone.now().isoformat()
    if changed:
        history.append(_history_entry(detail, when))
    fields = {
        "title": title[:300],
        "severity": _SEVERITY[verdict],
        "detail": {**before, **detail, "history": history, "as_of": before.get("as_of", detail.get("as_of"))},
        **{k: v for k, v in evidence.items() if v is not None},
    }
    with transaction.atomic():
        if not Alert.objects.filter(pk=alert.pk, state=alert.state).update(**fields):
            return alert, False
        if changed:
            worse = _RANK.get(verdict, 0) > _RANK.get(str(before.get("verdict")), 0)
            AlertEvent.objects.create(
                alert=alert,
                at=as_of or timezone.now(),
                from_state=alert.state,
                to_state=alert.state,
                reason="escalated" if worse else "eased",
                note=f"{before.get('verdict')} → {verdict}: {title}",
            )
    for name, value in fields.items():
        setattr(alert, name, value)
    return alert, False


def _confidence(*, verdict: str, losses: list[float], budget: float, trend: c.Trend | None) -> float | None:
    """How sure the verdict is, as 1 - p: for ``over``, a one-sided t test that the latest
    losses (up to ten) sit above the budget; for ``trending``, the two-sided t of the trend."""
    from scipy import stats  # imported when first needed: ~1 s for every process that loads the URLs

    if verdict == c.OVER:
        recent = losses[-10:]
        if len(recent) < 2:
            return None
        mean = sum(recent) / len(recent)
        sd = math.sqrt(sum((x - mean) ** 2 for x in recent) / (len(recent) - 1))
        if sd == 0:
            return 1.0 if mean > budget else 0.0
        return 1.0 - float(stats.t.sf((mean - budget) / (sd / math.sqrt(len(recent))), len(recent) - 1))
    if trend is None:
        return None
    if not math.isfinite(trend.t):
        return 1.0
    return 1.0 - float(2 * stats.t.sf(abs(trend.t), max(1, trend.points - 2)))


def _history_entry(detail: dict[str, Any], when: str) -> dict[str, Any]:
    return {
        "at": when,
        "verdict": detail.get("verdict"),
        "loss": detail.get("loss"),
        "days_to_budget": detail.get("days_to_budget"),
    }


def _raise(*, team: Team, model_name: str, task: TaskDrift, as_of: datetime | None = None) -> DriftFinding:
    latest = task.latest
    assert latest is not None  # a verdict other than no-data has pairs
    detail = _detail(model_name, task)
    if as_of is not None:
        detail["as_of"] = as_of.isoformat()
    prefix = f"drift:{team.pk}:{task.variant_id}:{task.metric}:"
    evidence = {
        "after_mean": task.level,
        "pct_change": -(task.level or 0.0) * 100,
        "confidence": _confidence(
            verdict=task.verdict, losses=[p.loss for p in task.pairs], budget=task.budget, trend=task.trend
        ),
    }
    open_alert = (
        Alert.objects.filter(
            kind=AlertKind.DRIFT, team=team, dedupe_key__startswith=prefix, state__in=_ACTIVE
        )
        .order_by("-opened_at")
        .first()
    )
    crossed = open_alert is not None and open_alert.detail.get("verdict") == c.TRENDING
    crossed = crossed or (
        open_alert is not None
        and any(h.get("verdict") == c.TRENDING for h in open_alert.detail.get("history") or [])
    )
    title = _title(model_name, task, crossed=crossed and task.verdict == c.OVER)
    # An over-budget alert opens when the level first went over (and stayed), not when a check
    # first looked; when the check saw it is kept beside it.
    over_since = c.over_budget_since(task.pairs, budget=task.budget) if task.verdict == c.OVER else None
    checked_at = as_of or timezone.now()
    if over_since is not None:
        detail["over_since"] = over_since.isoformat()
    followed = _follow(
        team=team,
        prefix=prefix,
        verdict=task.verdict,
        title=title,
        detail=detail,
        as_of=as_of,
        evidence=evidence,
    )
    if followed is not None:
        alert, created = followed
    else:
        if as_of is None:  # a replay's check time is ``as_of`` ("First caught")
            detail["detected_at"] = checked_at.isoformat()
        value = (
            MetricValue.objects.select_related("series", "run")
            .filter(run_id=latest.run_id, name=task.metric)
            .first()
        )
        alert, created = alert_raise(
            team=team,
            kind=AlertKind.DRIFT,
            severity=_SEVERITY[task.verdict],
            dedupe_key=f"{prefix}{task.verdict}"[:200],
            title=title,
            series=value.series if value else None,
            first_run=value.run if value else None,
            detail=detail,
            after_mean=evidence["after_mean"],
            pct_change=evidence["pct_change"],
            confidence=evidence["confidence"],
            opened_at=min(over_since, checked_at) if over_since is not None else as_of,
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
        scope=scope_for_team(team), model_ids=model_ids, as_of=as_of, change_points=False, rows=rows
    )
    for entry in evaluated.values():
        for task in entry.tasks:
            if task.verdict in _SEVERITY:
                findings.append(_raise(team=team, model_name=entry.model_name, task=task, as_of=as_of))
    return findings


def drift_history_check(*, team: Team, days: list[datetime]) -> list[DriftFinding]:
    """What the daily check would have raised had it run at each of ``days`` (ascending).

    For a history loaded at once (the demo): each variant × task opens its alert on the first day
    it is trending or over (``detail.as_of`` says when) and the alert follows each later day's
    evidence, as the daily check would have made it: a warning that crosses its budget becomes
    "budget crossed" in the same alert, the step kept in ``detail.history``. The accuracy values
    are read once."""
    model_ids = model_ids_visible(scope=scope_for_team(team))
    rows = accuracy_values(scope=scope_for_team(team), model_ids=model_ids)
    findings: dict[tuple[int, str], DriftFinding] = {}
    for as_of in days:
        evaluated = drift_evaluate(
            scope=scope_for_team(team), model_ids=model_ids, as_of=as_of, change_points=False, rows=rows
        )
        for entry in evaluated.values():
            for task in entry.tasks:
                if task.verdict in _SEVERITY:
                    found = _raise(team=team, model_name=entry.model_name, task=task, as_of=as_of)
                    key = (task.variant_id, task.metric)
                    if key in findings and findings[key].created:
                        found = replace(found, created=True)
                    findings[key] = found
    return list(findings.values())


def agreement_check(*, team: Team) -> list[DriftFinding]:
    """Raise a ``drift`` alert for each of the team's variants whose production agreement with
    the reference has fallen more than ``AGREEMENT_BUDGET`` (1% relative) below its first week,
    or is heading there within the horizon. Dedupe key ``drift-agreement:<team>:<variant>:<task>:
    <verdict at opening>``; an open alert follows the evidence as in 1."""
    findings = []
    for item in agreement_evaluate(scope=scope_for_team(team)):
        if item.verdict not in _SEVERITY or not item.pairs:
            continue
        level = (item.level or 0.0) * 100
        since = item.pairs[0].reference_at.date().isoformat()
        title = f"{item.model_name} {item.variant_name}: production agreement ({item.task}) down {level:.2f}% since {since}"
        if item.verdict == c.TRENDING and item.trend and item.trend.days_to_budget is not None:
            title += f", {c.AGREEMENT_BUDGET * 100:.2g}% in ~{item.trend.days_to_budget:.0f} days"
        prefix = f"drift-agreement:{team.pk}:{item.variant_id}:{item.task}:"
        detail = {
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
        }
        # As for accuracy: an agreement alert over its budget opens when the level went over.
        over_since = (
            c.over_budget_since(item.pairs, budget=c.AGREEMENT_BUDGET) if item.verdict == c.OVER else None
        )
        checked_at = timezone.now()
        if over_since is not None:
            detail["over_since"] = over_since.isoformat()
        evidence = {
            "before_mean": item.pairs[0].reference_value,
            "after_mean": item.latest_rate,
            "pct_change": -level,
            # Agreement's level is read against its first week, not pair by pair: its evidence is
            # the slide, so the trend's 1 - p.
            "confidence": _confidence(
                verdict=c.TRENDING,
                losses=[p.loss for p in item.pairs],
                budget=c.AGREEMENT_BUDGET,
                trend=item.trend,
            ),
        }
        followed = _follow(
            team=team,
            prefix=prefix,
            verdict=item.verdict,
            title=title,
            detail=detail,
            as_of=None,
            evidence=evidence,
        )
        alert, created = followed or alert_raise(
            team=team,
            kind=AlertKind.DRIFT,
            severity=_SEVERITY[item.verdict],
            dedupe_key=f"{prefix}{item.verdict}"[:200],
            title=title,
            detail={**detail, "detected_at": checked_at.isoformat()},
            opened_at=min(over_since, checked_at) if over_since is not None else None,
            before_mean=evidence["before_mean"],
            after_mean=evidence["after_mean"],
            pct_change=evidence["pct_change"],
            confidence=evidence["confidence"],
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


def _claim(*, team: Team, batch_id: str, digest: str) -> dict[str, Any] | None:
    """Claim the batch id (None), or the stored result of the batch stored under it; raises
    ``IdempotencyKeyReused`` when that batch had other items (``core.idempotency_services``)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO drift_agreementbatch (team_id, batch_id, result, digest, created_at)
            VALUES (%s, %s, '{}'::jsonb, %s, now())
            ON CONFLICT (team_id, batch_id) DO NOTHING
            RETURNING id
            """,
            [team.pk, batch_id, digest],
        )
        if cursor.fetchone() is not None:
            return None
    result, stored = AgreementBatch.objects.values_list("result", "digest").get(team=team, batch_id=batch_id)
    if stored and stored != digest:
        raise IdempotencyKeyReused(kind="drift", client_id=batch_id)
    return result


def agreement_batch_ingest(
    *, team: Team, batch_id: str, items: list[AgreementInput]
) -> tuple[dict[str, Any], bool]:
    """Store the batch's rows (upsert per team, variant, day, task); (result, duplicate). Raises
    ``IdempotencyKeyReused`` when ``batch_id`` was stored with other items (nothing is stored)."""
    # Names resolve as the team sees them (its own or shared): another team's model or variant
    # answers as one nobody has, so these errors reveal nothing about other teams.
    variants: dict[tuple[str, str], ModelVariant] = {}
    models_known: set[str] = set()
    for model, variant in {(item.model, item.variant) for item in items}:
        if model_resolve(team=team, name=model) is not None:
            models_known.add(model)
        found = model_variant_resolve(team=team, model=model, variant=variant)
        if found is not None:
            variants[(model, variant)] = found
    for i, item in enumerate(items):
        if (item.model, item.variant) not in variants:
            path = f"items[{i}].variant" if item.model in models_known else f"items[{i}].model"
            raise AgreementRejected(
                f"no variant {item.variant!r} of model {item.model!r}: record a run of it first", path=path
            )
    with transaction.atomic():
        stored = _claim(team=team, batch_id=batch_id, digest=body_digest([asdict(item) for item in items]))
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
