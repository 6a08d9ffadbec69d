"""Reads for benchmark runs and series."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import BenchmarkRun


def run_list(*, team_ids: list[int] | None) -> QuerySet[BenchmarkRun]:
    runs = BenchmarkRun.objects.select_related(
        "team", "workload__variant__model", "accelerator_type", "host"
    ).order_by("-started_at")
    if team_ids is not None:
        runs = runs.filter(team_id__in=team_ids)
    return runs
