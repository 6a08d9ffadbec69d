"""Migration fleet 0015: serving rows stored against a host that is not their team's move to the
team's own host of that name (issue 34, finding 4); everything else stays where it is."""

from __future__ import annotations

import importlib
from datetime import UTC, date, datetime
from typing import Any

import pytest
from django.apps import apps

from accelboard.benchmarks.services import model_variant_get_or_create
from accelboard.costs.models import ServingCostDaily
from accelboard.fleet.models import Host
from accelboard.serving.models import InferenceMetric
from tests.factories import host_create

pytestmark = pytest.mark.django_db

migration = importlib.import_module("accelboard.fleet.migrations.0015_host_name_per_team")
START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def _metric(*, team: Any, host: Host, variant: Any) -> InferenceMetric:
    return InferenceMetric.objects.create(
        team=team, host=host, variant=variant, interval_start=START, interval_s=60, generated_tokens=1
    )


def test_it_moves_serving_rows_to_their_teams_own_host(team: Any, other_team: Any) -> None:
    variant = model_variant_get_or_create(model="Qwen3-8B", variant="bf16", precision="bf16")
    theirs, _ = host_create(team=other_team, gpus=1, hostname="bravo-node-02")
    squatted = _metric(team=team, host=theirs, variant=variant)  # a batch naming their host
    fp8 = model_variant_get_or_create(model="Qwen3-8B", variant="fp8", precision="fp8")
    their_own = _metric(team=other_team, host=theirs, variant=fp8)
    unclaimed = Host.objects.create(hostname="charlie-node-03", team=None)  # named by a batch only
    named = _metric(team=team, host=unclaimed, variant=variant)
    day = date(2026, 11, 2)
    ServingCostDaily.objects.create(day=day, team=team, variant=variant, host=theirs, computed_at=START)
    ServingCostDaily.objects.create(day=day, team=other_team, variant=fp8, host=theirs, computed_at=START)

    migration._serving_rows_home(apps, None)

    squatted.refresh_from_db()
    assert squatted.host.team_id == team.pk and squatted.host.hostname == "bravo-node-02"
    assert squatted.host_id != theirs.pk
    their_own.refresh_from_db()
    assert their_own.host_id == theirs.pk
    named.refresh_from_db()
    assert named.host_id == unclaimed.pk  # the same host, given to the only team that used it
    unclaimed.refresh_from_db()
    assert unclaimed.team_id == team.pk
    # The cost worked out with their host's prices is gone (recomputed against ours); theirs stays.
    assert list(ServingCostDaily.objects.values_list("team_id", "host_id")) == [(other_team.pk, theirs.pk)]
