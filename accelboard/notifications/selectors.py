"""Reads of the notifications app: subscriptions, what an alert email says, the outbox, routes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet

from accelboard.alerts.charts import LevelSpan
from accelboard.alerts.detection import own_spread_after
from accelboard.alerts.models import Alert
from accelboard.alerts.page_selectors import (
    alert_chart_levels,
    alert_expected_marks,
    alert_run_range,
    alert_series_points,
)
from accelboard.benchmarks.models import BenchmarkRun, Series
from accelboard.core.access import Action, scope_for_user
from accelboard.core.models import Team
from accelboard.importers.metrics import metric_label

from . import links
from .content import AlertFacts, RunFacts, change_text
from .models import AlertRoute, Delivery, OutboxMessage, RouteDelivery, Subscription
from .simulated_ci import MetricTemplate, RunTemplate

# Points drawn in an email's chart: enough to see the level before the change and after it.
CHART_POINTS = 30


def subscription_list_for_user(*, user: Any) -> QuerySet[Subscription]:
    return (
        Subscription.objects.filter(user=user)
        .select_related("team", "series__workload__variant__model", "series__accelerator_type")
        .order_by("team__name", "series_id", "kind")
    )


def subscription_get_for_user(*, user: Any, subscription_id: int) -> Subscription:
    """Raises ``Subscription.DoesNotExist`` for another user's subscription (a 404, not a 403)."""
    return Subscription.objects.select_related("team").get(pk=subscription_id, user=user)


def subscription_find(*, subscription_id: int, user_id: int) -> Subscription | None:
    """The subscription a signed unsubscribe link names, if it still exists."""
    return Subscription.objects.select_related("team").filter(pk=subscription_id, user_id=user_id).first()


def subscribable_teams(*, user: Any) -> QuerySet[Team]:
    """The teams the user may follow (``Action.SUBSCRIBE``): their own, every team for staff."""
    return Team.objects.visible_to(scope_for_user(user), Action.SUBSCRIBE).order_by("name")


def subscription_teams(*, user: Any) -> tuple[list[Team], set[int]]:
    """The teams the user may follow, and the ids of those they belong to: what "all alerts of
    my teams" subscribes (staff are not mailed every team's alerts by one click, rule 3 of
    ``core.access``). One scope for both."""
    scope = scope_for_user(user)
    teams = list(Team.objects.visible_to(scope, Action.SUBSCRIBE).order_by("name"))
    return teams, {t.pk for t in teams if t.pk in scope.teams}


def subscribable_series(*, user: Any) -> QuerySet[Series]:
    return (
        Series.objects.visible_to(scope_for_user(user), Action.SUBSCRIBE)
        .select_related("team", "workload__variant__model", "accelerator_type")
        .order_by("team__name", "metric", "workload_id", "pk")
    )


def delivery_list_for_user(*, user: Any, limit: int = 20) -> list[Delivery]:
    """The user's most recent emails, newest first, for the subscriptions page."""
    return list(Delivery.objects.filter(user=user).order_by("-created_at")[:limit])


# --- alert emails -----------------------------------------------------------------------------


def alerts_for_email(*, alert_ids: list[int], open_only: bool = True) -> list[Alert]:
    """The alerts of one email with everything ``alert_facts`` reads, in two queries (the
    alerts, and the metrics each change moved)."""
    alerts = Alert.objects.filter(pk__in=alert_ids)
    if open_only:
        alerts = alerts.filter(state="open")
    return list(
        alerts.select_related(
            "team",
            "host",
            "series__workload__variant__model",
            "series__accelerator_type",
            "first_run",
            "last_good_run",
        )
        .prefetch_related("metrics__series")
        .order_by("opened_at", "pk")
    )


def _run_facts(run: BenchmarkRun | None) -> RunFacts | None:
    if run is None:
        return None
    return RunFacts(
        id=run.pk,
        commit=run.git_commit,
        branch=run.branch,
        started_at=run.started_at,
        url=links.absolute(links.run_path(run.pk)),
        ci_url=run.ci_url,
    )


def alert_facts(*, alert: Alert) -> AlertFacts:
    """One alert as plain facts for ``content`` (the relations of ``alerts_for_email`` loaded)."""
    series = alert.series
    workload = series.workload if series is not None else None
    variant = workload.variant if workload is not None else None
    setup = ""
    hardware = ""
    if workload is not None:
        parts = [workload.get_scenario_display()]
        if workload.batch_size:
            parts.append(f"bs{workload.batch_size}")
        if workload.concurrency:
            parts.append(f"c{workload.concurrency}")
        setup = ", ".join(parts)
    if series is not None and series.accelerator_type is not None:
        hardware = f"{series.accelerator_count}× {series.accelerator_type.name}"
    first, good = alert.first_run, alert.last_good_run
    detail = alert.detail if isinstance(alert.detail, dict) else {}
    return AlertFacts(
        id=alert.pk,
        kind=alert.kind,
        kind_label=alert.get_kind_display(),
        severity=alert.severity,
        title=alert.title,
        team=alert.team.name,
        url=links.absolute(links.alert_path(alert.pk)),
        opened_at=alert.opened_at,
        metric=series.metric if series is not None else "",
        metric_label=metric_label(series.metric) if series is not None else "",
        unit=series.unit if series is not None else "",
        direction=series.direction if series is not None else "",
        model=variant.model.name if variant is not None else "",
        variant=variant.name if variant is not None else "",
        hardware=hardware,
        setup=setup,
        before_mean=alert.before_mean,
        before_spread=alert.before_spread,
        after_mean=alert.after_mean,
        after_spread=own_spread_after(alert.after_spread, detail.get("results_after")),
        pct_change=alert.pct_change,
        confidence=alert.confidence,
        first_run=_run_facts(first),
        last_good_run=_run_facts(good),
        runs_in_range=len(alert_run_range(alert=alert)) if first and good and series else 0,
        compare_url=links.absolute(links.compare_path(before_run_id=good.pk, after_run_id=first.pk))
        if first and good
        else "",
        host=alert.host.hostname if alert.host_id and alert.host else "",
        detail=detail,
        other_metrics=tuple(
            f"{metric_label(m.series.metric)} {change_text(m.pct_change) if m.pct_change is not None else ''}".strip()
            for m in alert.metrics.all()
            if m.series_id != alert.series_id
        ),
    )


def alert_chart_series(
    *, alert: Alert, limit: int = CHART_POINTS
) -> tuple[list[datetime], list[float], tuple[LevelSpan | None, LevelSpan | None]]:
    """(times, values) of the alert's series around its change, oldest first (empty without one),
    and the levels before and after the change over the results each holds, as the alert page
    draws them (``alerts.page_selectors.alert_chart_levels``)."""
    points = alert_series_points(alert=alert, limit=limit)
    marks = [mark.run.started_at for mark in alert_expected_marks(alert=alert)] if points else []
    levels = alert_chart_levels(alert=alert, points=points, marks_at=marks)
    return [p["measured_at"] for p in points], [float(p["value"]) for p in points], levels


def alert_for_triage(*, alert_id: int) -> Alert | None:
    return Alert.objects.select_related("team", "series", "acknowledged_by").filter(pk=alert_id).first()


# --- outbox -----------------------------------------------------------------------------------


def outbox_list(*, limit: int = 200) -> list[OutboxMessage]:
    """The newest stored emails, without their bodies (the list shows the envelope only)."""
    return list(OutboxMessage.objects.defer("raw").order_by("-created_at", "-pk")[:limit])


def outbox_get(*, message_id: int) -> OutboxMessage:
    """Raises ``OutboxMessage.DoesNotExist``."""
    return OutboxMessage.objects.get(pk=message_id)


def outbox_count() -> int:
    return OutboxMessage.objects.count()


# --- the demo's simulated CI ------------------------------------------------------------------


def simulated_ci_template(*, team_slug: str) -> RunTemplate | None:
    """The team's newest run of the configuration (workload, hardware) it has most runs with a
    latency result of; None when the team has no such run."""
    runs = BenchmarkRun.objects.filter(team__slug=team_slug, metrics__unit="ms", metrics__direction="lower")
    config = (
        runs.values("workload_id", "accelerator_type_id", "accelerator_count")
        .annotate(n=Count("id", distinct=True))
        .order_by("-n", "workload_id")
        .first()
    )
    if config is None:
        return None
    run = (
        BenchmarkRun.objects.filter(
            team__slug=team_slug,
            workload_id=config["workload_id"],
            accelerator_type_id=config["accelerator_type_id"],
            accelerator_count=config["accelerator_count"],
        )
        .select_related("workload__variant__model", "accelerator_type")
        .order_by("-started_at", "-pk")
        .first()
    )
    assert run is not None
    workload = run.workload
    variant = workload.variant
    return RunTemplate(
        model=variant.model.name,
        variant=variant.name,
        precision=variant.precision,
        quantization_method=variant.quantization_method,
        workload={
            "scenario": workload.scenario,
            "batch_size": workload.batch_size,
            "concurrency": workload.concurrency,
            "input_length": workload.input_length,
            "output_length": workload.output_length,
            "framework": workload.framework,
            "framework_version": workload.framework_version,
            "options": workload.options or {},
        },
        accelerator=run.accelerator_type.name if run.accelerator_type is not None else "",
        accelerator_count=run.accelerator_count,
        metrics=tuple(
            MetricTemplate(
                name=m.name,
                value=m.value,
                unit=m.unit,
                direction=m.direction,
                samples=tuple(float(v) for v in (m.samples or [])),
            )
            for m in run.metrics.order_by("name")
        ),
    )


def alerts_opened_on_runs(*, run_ids: list[int]) -> list[int]:
    """Ids of the alerts whose first bad run is one of ``run_ids``."""
    return list(Alert.objects.filter(first_run_id__in=run_ids).order_by("pk").values_list("pk", flat=True))


# --- alert routes -----------------------------------------------------------------------------


def route_list_for_user(*, user: Any) -> list[AlertRoute]:
    """The routes the user manages: the team routes of teams they lead (staff: every team) and
    their own personal routes."""
    scope = scope_for_user(user)
    managed = scope.team_ids(Action.MANAGE)
    team_routes = Q(user__isnull=True) if managed is None else Q(user__isnull=True, team_id__in=managed)
    return list(
        AlertRoute.objects.filter(team_routes | Q(user=user))
        .select_related("team", "user")
        .order_by("team__name", "name", "pk")
    )


def route_get(*, route_id: int) -> AlertRoute:
    """Raises ``AlertRoute.DoesNotExist``."""
    return AlertRoute.objects.select_related("team").get(pk=route_id)


def route_delivery_log(*, route_ids: list[int], limit: int = 25) -> list[RouteDelivery]:
    """The latest messages to these routes, newest first, with the channel's answers."""
    return list(
        RouteDelivery.objects.filter(route_id__in=route_ids)
        .select_related("route")
        .order_by("-created_at", "-pk")[:limit]
    )


def alert_for_chart(*, alert_id: int) -> Alert | None:
    found = alerts_for_email(alert_ids=[alert_id], open_only=False)
    return found[0] if found else None
