"""Reads of the notifications app: a user's subscriptions and what they may subscribe to."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from accelboard.benchmarks.models import Series
from accelboard.core.models import Team

from .models import Delivery, Subscription


def subscription_list_for_user(*, user: Any) -> QuerySet[Subscription]:
    return (
        Subscription.objects.filter(user=user)
        .select_related("team", "series__workload__variant__model", "series__accelerator_type")
        .order_by("team__name", "series_id", "kind")
    )


def subscription_get_for_user(*, user: Any, subscription_id: int) -> Subscription:
    """Raises ``Subscription.DoesNotExist`` for another user's subscription (a 404, not a 403)."""
    return Subscription.objects.select_related("team").get(pk=subscription_id, user=user)


def subscribable_teams(*, user: Any) -> QuerySet[Team]:
    """Only teams the user is a member of: staff do not get every team's email by accident."""
    return Team.objects.filter(memberships__user=user).order_by("name")


def subscribable_series(*, user: Any) -> QuerySet[Series]:
    return (
        Series.objects.filter(team__memberships__user=user)
        .select_related("team", "workload__variant__model", "accelerator_type")
        .order_by("team__name", "metric", "workload_id", "pk")
    )


def delivery_list_for_user(*, user: Any, limit: int = 20) -> list[Delivery]:
    """The user's most recent emails, newest first, for the subscriptions page."""
    return list(Delivery.objects.filter(user=user).order_by("-created_at")[:limit])
