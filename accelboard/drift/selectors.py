"""Reads of the drift app: each variant's accuracy against its reference, per task, over time.

``drift_evaluate`` is the one path every reader takes (model page, overview, Celery check,
demo replay): three queries (variants, budget overrides, accuracy values) for any number of
models, then the pure arithmetic of ``computation``. Team scoping: every read takes the caller's
``Scope`` (``accelboard.core.access``; a job checking one team uses ``scope_for_team``); a variant
is paired only with reference results the same caller may see.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.db.models import F, Q

from accelboard.alerts.detection import segment
from accelboard.benchmarks.choices import Scenario
from accelboard.benchmarks.models import MetricValue, Model, ModelVariant, Workload
from accelboard.core.access import Scope

from . import computation as c
from .models import DriftBudget, ProductionAgreement

# A change in retained accuracy (1 - loss) smaller than this is not drawn as a change point.
CHANGE_MIN_EFFECT = 0.002
# A reference result further than this from a variant's result is not used for it.
MAX_PAIR_GAP = timedelta(days=14)


@dataclass
class TaskDrift:
    """One variant on one accuracy task and metric: its pairs and what they say."""

    variant_id: int
    variant_name: str
    metric: str
    task: str
    task_metric: str
    direction: str
    budget: float
    pairs: list[c.DriftPair]
    level: float | None
    trend: c.Trend | None
    verdict: str
    risk: float
    change_points: list[dict[str, Any]] = field(default_factory=list)

    @property
    def latest(self) -> c.DriftPair | None:
        return self.pairs[-1] if self.pairs else None

    @property
    def ratio(self) -> float | None:
        """The ratio to the reference now: the level (``computation.level_ratio``), so that it
        says what the accuracy Δ beside it says."""
        return c.level_ratio(level=self.level, direction=self.direction)


@dataclass
class ModelDrift:
    model_id: int
    model_name: str
    default_budget: float
    reference: ModelVariant | None
    variants: list[ModelVariant]
    tasks: list[TaskDrift]

    def for_variant(self, variant_id: int) -> list[TaskDrift]:
        return [t for t in self.tasks if t.variant_id == variant_id]


def _accuracy_filter() -> Q:
    return Q(name="accuracy") | Q(name__startswith="accuracy:")


def model_ids_visible(*, scope: Scope) -> list[int]:
    """Models with at least one workload in the caller's teams (every model for staff)."""
    workloads = Workload.objects.visible_to(scope)
    return sorted(set(workloads.values_list("variant__model_id", flat=True)))


def model_get_visible(*, model_id: int, scope: Scope) -> Model:
    """The model, or ``Model.DoesNotExist`` when none of the caller's teams ran it (a 404)."""
    model = Model.objects.select_related("reference_variant").get(pk=model_id)
    if not Workload.objects.visible_to(scope).filter(variant__model=model).exists():
        raise Model.DoesNotExist
    return model


def _change_points(pairs: list[c.DriftPair]) -> list[dict[str, Any]]:
    retained = [1.0 - p.loss for p in pairs]
    if len(retained) < 10:
        return []
    found = segment(retained, direction="higher", min_effect=CHANGE_MIN_EFFECT)
    return [
        {
            "at": pairs[cp.index].at,
            "loss_before": 1.0 - cp.level_before,
            "loss_after": 1.0 - cp.level_after,
            "kind": cp.kind,
            "confidence": cp.confidence,
        }
        for cp in found
    ]


def drift_evaluate(
    *,
    scope: Scope,
    model_ids: Iterable[int] | None = None,
    as_of: datetime | None = None,
    change_points: bool = True,
    rows: list[dict[str, Any]] | None = None,
) -> dict[int, ModelDrift]:
    """Every non-reference variant × accuracy task of the given models (all visible if None).

    ``as_of`` ignores results measured after it (the demo replays history day by day with it);
    ``rows`` lets a replay pass the accuracy values it fetched once (``accuracy_values``)."""
    ids = model_ids_visible(scope=scope) if model_ids is None else list(model_ids)
    variants = list(
        ModelVariant.objects.visible_to(scope)  # a shared model's variants: shared and the caller's teams'
        .filter(model_id__in=ids)
        .select_related("model")
        .order_by("model__name", "name")
    )
    overrides = {(b.model_id, b.task): b.budget for b in DriftBudget.objects.filter(model_id__in=ids)}
    if rows is None:
        rows = accuracy_values(scope=scope, model_ids=ids)
    # (variant id, metric) -> results; (variant id, metric) -> direction
    results: dict[tuple[int, str], list[c.Result]] = defaultdict(list)
    directions: dict[tuple[int, str], str] = {}
    for row in rows:
        if as_of is not None and row["measured_at"] > as_of:
            continue
        key = (row["variant_id"], row["name"])
        results[key].append(c.Result(at=row["measured_at"], value=row["value"], run_id=row["run_id"]))
        directions[key] = row["direction"]

    by_model: dict[int, ModelDrift] = {}
    for variant in variants:
        model = variant.model
        entry = by_model.get(model.pk)
        if entry is None:
            reference = next((v for v in variants if v.pk == model.reference_variant_id), None)
            entry = by_model[model.pk] = ModelDrift(
                model_id=model.pk,
                model_name=model.name,
                default_budget=model.drift_budget,
                reference=reference,
                variants=[],
                tasks=[],
            )
        entry.variants.append(variant)
    for entry in by_model.values():
        if entry.reference is None:
            continue
        ref_id = entry.reference.pk
        metrics = sorted({metric for (vid, metric) in results if vid == ref_id})
        for variant in entry.variants:
            if variant.pk == ref_id:
                continue
            for metric in sorted({m for (vid, m) in results if vid == variant.pk}):
                task, task_metric = c.accuracy_task(metric)
                budget = overrides.get((entry.model_id, task), entry.default_budget)
                direction = directions[(variant.pk, metric)]
                pairs = (
                    c.drift_pairs(
                        results[(variant.pk, metric)],
                        results[(ref_id, metric)],
                        direction=direction,
                        max_gap=MAX_PAIR_GAP,
                    )
                    if metric in metrics
                    else []
                )
                level = c.drift_level(pairs)
                trend = c.drift_trend(pairs, budget=budget)
                entry.tasks.append(
                    TaskDrift(
                        variant_id=variant.pk,
                        variant_name=variant.name,
                        metric=metric,
                        task=task,
                        task_metric=task_metric,
                        direction=direction,
                        budget=budget,
                        pairs=pairs,
                        level=level,
                        trend=trend,
                        verdict=c.budget_verdict(level=level, budget=budget, trend=trend),
                        risk=c.risk_score(level=level, budget=budget, trend=trend),
                        change_points=_change_points(pairs) if change_points else [],
                    )
                )
    return by_model


def accuracy_values(*, scope: Scope, model_ids: Iterable[int]) -> list[dict[str, Any]]:
    """Accuracy results of the models' variants in the caller's teams, oldest first (one query)."""
    queryset = (
        MetricValue.objects.visible_to(scope)
        .filter(_accuracy_filter(), series__workload__variant__model_id__in=list(model_ids), run__valid=True)
        .exclude(series__workload__scenario=Scenario.TRAINING)
    )  # a training run's quality target is not drift
    return list(
        dict(row)
        for row in queryset.order_by("measured_at", "id").values(
            "name",
            "value",
            "direction",
            "measured_at",
            "run_id",
            variant_id=F("series__workload__variant_id"),
        )
    )


def drift_overview_rows(*, scope: Scope) -> list[dict[str, Any]]:
    """Every variant × task the caller can see, riskiest first (over, trending, within, no data)."""
    rows: list[dict[str, Any]] = []
    for entry in drift_evaluate(scope=scope, change_points=False).values():
        for task in entry.tasks:
            rows.append({"model_id": entry.model_id, "model_name": entry.model_name, "task": task})
    rows.sort(key=lambda r: (c.VERDICT_ORDER[r["task"].verdict], -r["task"].risk, r["model_name"]))
    return rows


@dataclass
class AgreementDrift:
    """One variant × task of production agreement against its own first week."""

    model_id: int
    model_name: str
    variant_id: int
    variant_name: str
    task: str
    pairs: list[c.DriftPair]
    level: float | None
    trend: c.Trend | None
    verdict: str
    latest_rate: float
    latest_samples: int


def agreement_evaluate(*, scope: Scope, model_ids: Iterable[int] | None = None) -> list[AgreementDrift]:
    """Production agreement per variant and task, read as drift from its first week (one query)."""
    queryset = ProductionAgreement.objects.visible_to(scope)
    if model_ids is not None:
        queryset = queryset.filter(variant__model_id__in=list(model_ids))
    grouped: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for row in queryset.order_by("day").values(
        "variant_id",
        "task",
        "day",
        "agreement_rate",
        "samples",
        "variant__name",
        "variant__model_id",
        "variant__model__name",
    ):
        grouped[(row["variant_id"], row["task"])].append(dict(row))
    out = []
    for (variant_id, task), rows in sorted(
        grouped.items(),
        key=lambda item: (item[1][0]["variant__model__name"], item[1][0]["variant__name"], item[0][1]),
    ):
        pairs = c.agreement_pairs(
            [(datetime.combine(r["day"], time(12), tzinfo=UTC), r["agreement_rate"]) for r in rows]
        )
        level = c.drift_level(pairs)
        trend = c.drift_trend(pairs, budget=c.AGREEMENT_BUDGET)
        out.append(
            AgreementDrift(
                model_id=rows[0]["variant__model_id"],
                model_name=rows[0]["variant__model__name"],
                variant_id=variant_id,
                variant_name=rows[0]["variant__name"],
                task=task,
                pairs=pairs,
                level=level,
                trend=trend,
                verdict=c.budget_verdict(level=level, budget=c.AGREEMENT_BUDGET, trend=trend),
                latest_rate=rows[-1]["agreement_rate"],
                latest_samples=rows[-1]["samples"],
            )
        )
    return out


def agreement_rows(*, scope: Scope, model_id: int) -> list[dict[str, Any]]:
    """Production agreement per variant, task and day for one model, oldest first."""
    queryset = ProductionAgreement.objects.visible_to(scope).filter(variant__model_id=model_id)
    return list(
        dict(row)
        for row in queryset.order_by("variant__name", "task", "day").values(
            "variant_id",
            "variant__name",
            "task",
            "day",
            "agreement_rate",
            "kl_divergence",
            "perplexity_delta",
            "samples",
        )
    )
