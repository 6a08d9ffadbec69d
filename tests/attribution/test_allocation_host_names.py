"""The allocation grouped by host: host names are unique within a team only (issue 34, finding 4),
so two teams' hosts of one name are two rows, told apart by their team, never one summed row."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from accelboard.attribution.models import AllocationDaily
from accelboard.attribution.selectors import allocation_report
from accelboard.core.access import Action, Scope
from tests.factories import host_create

pytestmark = pytest.mark.django_db

DAY = date(2026, 11, 2)
ACTIONS = frozenset([Action.VIEW, Action.VIEW_COSTS])


def _report(scope: Scope) -> list[tuple[str | None, Decimal]]:
    report = allocation_report(
        scope=scope, start=DAY, end=DAY, group_by="host", basis="allocation", idle="separate"
    )
    return sorted((row.key, row.cost) for row in report.rows)


def test_two_teams_hosts_of_one_name_stay_two_rows_named_with_their_team(team: Any, other_team: Any) -> None:
    for owner, cost in ((team, "10.00"), (other_team, "2.50")):
        host, (gpu,) = host_create(team=owner, gpus=1, hostname="gpu-node-01")
        AllocationDaily.objects.create(
            day=DAY, accelerator=gpu, host=host, owner_team=owner, kind="idle", cost_allocation=Decimal(cost),
            cost_usage=Decimal(cost), energy_allocation_j=1, energy_usage_j=1, currency="USD",
            computed_at=datetime(2026, 11, 3, tzinfo=UTC),
        )  # fmt: skip
    both = Scope(teams={team.pk: ACTIONS, other_team.pk: ACTIONS})
    assert _report(both) == sorted(
        [
            (f"gpu-node-01 ({team.slug})", Decimal("10.00")),
            (f"gpu-node-01 ({other_team.slug})", Decimal("2.50")),
        ]
    )
    # A caller who sees one of them reads the plain name.
    assert _report(Scope(teams={team.pk: ACTIONS})) == [("gpu-node-01", Decimal("10.00"))]
