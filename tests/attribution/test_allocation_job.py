"""The allocation job on the real database: a shared host's day, set up through the product's own
ingest (workloads and intervals), cost pass and rule saving, split into workloads, idle and
unattributed; every figure below is worked by hand from docs/attribution.md.

The world (2026-11-10, UTC), one host of ``team`` with four H100s at 98.32 USD per 8 GPU-hours:
- TS, time-sliced: pods a (ns-a) and b (ns-b) at 0.5 each for 12 h, then the unmapped pod x alone
  for 6 h, then nobody for 6 h; 100 % busy at 600 W for 18 h, then 0 % at 100 W;
- MIG, 7 slices: pod a on a 3-slice instance all day, pod b on a 2-slice one for 12 h; no
  utilisation reading (MIG mode), 300 W;
- FULL: pod a alone all day at 100 %, 500 W;
- IDLE: reported 12 h only, at 0 %, 60 W; held by nobody.
Rules v1: ns-a -> ``team``, ns-b -> ``other_team``; ns "unmapped" has no rule.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import call_command

from accelboard.attribution.models import AllocationDaily, AttributionRule, RuleSet
from accelboard.attribution.selectors import allocation_days_stale, allocation_report
from accelboard.attribution.services import RuleInput, allocation_day_compute, rule_set_save
from accelboard.core.access import EVERY_TEAM, Action, scope_for_team
from accelboard.costs.models import CostDaily
from accelboard.costs.services import cost_day_compute

from .conftest import DAY, FULL, IDLE, MIG, POD_A, POD_B, POD_X, TS, rules_v1

pytestmark = pytest.mark.django_db


def _sums(field: str, by: str = "accelerator__uuid", **filters: Any) -> dict[Any, Any]:
    out: dict[Any, Any] = defaultdict(int)
    for row in AllocationDaily.objects.filter(**filters).values(by, field):
        out[row[by]] += row[field]
    return dict(out)


def _line(uuid: str, kind: str, pod: dict[str, Any] | None = None) -> tuple[Decimal, Decimal, int, int]:
    row = AllocationDaily.objects.get(
        accelerator__uuid=uuid, kind=kind, **({"workload__uid": pod["uid"]} if pod else {"workload": None})
    )
    return row.cost_allocation, row.cost_usage, row.energy_allocation_j, row.energy_usage_j


def test_the_cost_row_is_split_across_its_gpus_by_reporting_time(world: dict[str, Any]) -> None:
    row = CostDaily.objects.get(day=DAY)
    # 3 GPUs x 24 h + 12 h = 84 GPU-hours at 98.32 / 8 = 12.29 USD.
    assert row.total_cost == Decimal("1032.36")
    # Reporting minutes 1440 : 1440 : 1440 : 720, of 103,236 cents: 29,496 x 3 + 14,748.
    gpu_day = {
        uuid: Decimal(cents) / 100
        for uuid, cents in [(TS, 29496), (MIG, 29496), (FULL, 29496), (IDLE, 14748)]
    }
    for field in ("cost_allocation", "cost_usage"):
        assert _sums(field) == gpu_day
    assert sum(gpu_day.values()) == row.total_cost


def test_each_line_is_worked_by_hand(world: dict[str, Any]) -> None:
    c = Decimal
    # FULL: pod a, whole, both bases; 500 W x 86,400 s.
    assert _line(FULL, "workload", POD_A) == (c("294.96"), c("294.96"), 43_200_000, 43_200_000)
    assert _line(FULL, "idle") == (0, 0, 0, 0)
    # TS: a quarter of the day each by time (7,374 cents); E = 600 W x 18 h + 100 W x 6 h.
    # Usage: a and b 0.5 x 100 % x 12 h of 600 W, x 100 % x 6 h of 600 W; idle the 6 h at 0 %.
    assert _line(TS, "workload", POD_A) == (c("73.74"), c("73.74"), 10_260_000, 12_960_000)
    assert _line(TS, "workload", POD_B) == (c("73.74"), c("73.74"), 10_260_000, 12_960_000)
    assert _line(TS, "unattributed", POD_X) == (c("73.74"), c("73.74"), 10_260_000, 12_960_000)
    assert _line(TS, "idle") == (c("73.74"), c("73.74"), 10_260_000, 2_160_000)
    # MIG: 3/7 of 294.96 = 126.411..., 2/7 x half a day = 42.137..., idle 3/7: floors 12,641 +
    # 4,213 + 12,641 leave one cent, to b's remainder (.714). No utilisation: usage = allocation.
    # Energy 300 W x 86,400 s = 25,920,000 J: 11,108,571.43, 3,702,857.14, 11,108,571.43.
    assert _line(MIG, "workload", POD_A) == (c("126.41"), c("126.41"), 11_108_572, 11_108_572)
    assert _line(MIG, "workload", POD_B) == (c("42.14"), c("42.14"), 3_702_857, 3_702_857)
    assert _line(MIG, "idle") == (c("126.41"), c("126.41"), 11_108_571, 11_108_571)
    assert _line(IDLE, "idle") == (c("147.48"), c("147.48"), 2_592_000, 2_592_000)


def test_every_gpu_day_and_the_cost_row_add_up_exactly(world: dict[str, Any]) -> None:
    energy = {TS: 41_040_000, MIG: 25_920_000, FULL: 43_200_000, IDLE: 2_592_000}
    for field in ("energy_allocation_j", "energy_usage_j"):
        assert _sums(field) == energy
    row = CostDaily.objects.get(day=DAY)
    assert sum(_sums("cost_usage").values()) == sum(_sums("cost_allocation").values()) == row.total_cost
    # Team totals: the month's spend of the host's team, split.
    teams = _sums("cost_allocation", by="team__slug", kind="workload")
    assert teams == {world["team"].slug: Decimal("495.11"), world["other_team"].slug: Decimal("115.88")}
    assert _sums("cost_allocation", by="kind") == {
        "workload": Decimal("610.99"),
        "unattributed": Decimal("73.74"),
        "idle": Decimal("347.63"),
    }
    assert set(AllocationDaily.objects.values_list("rule_set__version", flat=True)) == {1}


def test_a_rerun_replaces_the_rows(world: dict[str, Any]) -> None:
    before = list(
        AllocationDaily.objects.order_by("id").values("accelerator_id", "kind", "workload_id", "cost_usage")
    )
    allocation_day_compute(day=DAY)
    after = list(
        AllocationDaily.objects.order_by("id").values("accelerator_id", "kind", "workload_id", "cost_usage")
    )
    assert after == before
    assert allocation_days_stale(since=DAY, until=DAY) == []
    cost_day_compute(day=DAY)  # the costs recomputed after the allocation: stale again
    assert allocation_days_stale(since=DAY, until=DAY) == [DAY]


def _figures() -> set[tuple[Any, ...]]:
    return set(
        AllocationDaily.objects.values_list(
            "day", "accelerator_id", "kind", "workload_id", "cost_allocation", "cost_usage",
            "energy_allocation_j", "energy_usage_j", "currency",
        )
    )  # fmt: skip


def test_reapplying_a_changed_rule_moves_cost_between_teams_and_nothing_else(world: dict[str, Any]) -> None:
    team, other = world["team"], world["other_team"]
    figures = _figures()
    rule_set_save(user=world["staff"], rules=rules_v1(team, team), note="ns-b moves to team")
    # Saving changes no past day; re-applying (the explicit action) does.
    assert set(AllocationDaily.objects.values_list("rule_set__version", flat=True)) == {1}
    call_command("allocation", "recompute", "--from", DAY.isoformat(), "--to", DAY.isoformat())
    assert set(AllocationDaily.objects.values_list("rule_set__version", flat=True)) == {2}
    assert _figures() == figures
    teams = _sums("cost_allocation", by="team__slug", kind="workload")
    assert teams == {team.slug: Decimal("610.99")}
    assert other.slug not in _sums("cost_usage", by="team__slug")


def test_conflicting_rules_are_refused_naming_both(world: dict[str, Any]) -> None:
    team, other = world["team"], world["other_team"]
    rules = [*rules_v1(team, other), RuleInput(selector="namespace", value="ns-a", team=other)]
    with pytest.raises(ValidationError) as refused:
        rule_set_save(user=world["staff"], rules=rules)
    message = str(refused.value)
    assert "rules[0] and rules[2]" in message and "'ns-a'" in message
    assert f"team {team.slug}" in message and f"team {other.slug}" in message
    with pytest.raises(ValidationError, match=r"rules\[1\]\.value"):
        rule_set_save(
            user=world["staff"], rules=[rules[0], RuleInput(selector="label", value="no-equals", team=team)]
        )
    assert RuleSet.objects.count() == 1 and AttributionRule.objects.count() == 2


def test_only_staff_save_rules(world: dict[str, Any], lead: Any) -> None:
    with pytest.raises(PermissionDenied):
        rule_set_save(user=lead, rules=rules_v1(world["team"], world["team"]))
    assert RuleSet.objects.count() == 1


def test_the_report_is_scoped_and_adds_up(world: dict[str, Any]) -> None:
    team, other = world["team"], world["other_team"]
    every = allocation_report(
        scope=EVERY_TEAM, start=DAY, end=DAY, group_by="team", basis="usage", idle="separate"
    )
    assert [(r.kind, r.key, r.cost) for r in every.rows] == [
        ("workload", team.slug, Decimal("495.11")),  # "inference" before "research"
        ("workload", other.slug, Decimal("115.88")),
        ("unattributed", None, Decimal("73.74")),
        ("idle", None, Decimal("347.63")),
    ]
    assert [(t.currency, t.cost) for t in every.totals] == [("USD", Decimal("1032.36"))]
    shared = allocation_report(
        scope=EVERY_TEAM, start=DAY, end=DAY, group_by="team", basis="usage", idle="share"
    )
    assert "idle" not in {r.kind for r in shared.rows}
    assert shared.totals == every.totals
    # The other team sees its own workloads' part, not the host's other lines.
    theirs = allocation_report(
        scope=scope_for_team(other, [Action.VIEW_COSTS]),
        start=DAY,
        end=DAY,
        group_by="namespace",
        basis="allocation",
        idle="separate",
    )
    assert [(r.kind, r.key, r.cost) for r in theirs.rows] == [("workload", "ns-b", Decimal("115.88"))]
