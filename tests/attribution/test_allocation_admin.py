"""Rules in the admin (a new version as a JSON list, refused naming both conflicting rules), the
explicit action that re-applies the rules to past days, and the nightly task, over the shared
host's day (conftest.py)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from django.db.models import Sum

from accelboard.attribution.models import AllocationDaily, RuleSet
from accelboard.attribution.tasks import allocation_daily_compute, allocation_days_recompute

from .conftest import DAY

pytestmark = pytest.mark.django_db
ADD = "/admin/attribution/ruleset/add/"
INLINE = {
    "rules-TOTAL_FORMS": "0",
    "rules-INITIAL_FORMS": "0",
    "rules-MIN_NUM_FORMS": "0",
    "rules-MAX_NUM_FORMS": "0",
}


def _post(client: Any, rules: list[dict[str, str]]) -> Any:
    return client.post(ADD, {"note": "from the admin", "rules_json": json.dumps(rules), **INLINE})


def test_the_add_form_starts_from_the_current_version(admin_client: Any, world: dict[str, Any]) -> None:
    page = admin_client.get(ADD).content.decode()
    assert "ns-a" in page and world["other_team"].slug in page


def test_a_conflict_is_refused_naming_both_rules(admin_client: Any, world: dict[str, Any]) -> None:
    team, other = world["team"].slug, world["other_team"].slug
    response = _post(
        admin_client,
        [
            {"selector": "namespace", "value": "ns-a", "team": team},
            {"selector": "label", "value": "app=vllm", "model": "Llama-3.1-8B", "variant": "bf16"},
            {"selector": "namespace", "value": "ns-a", "team": other},
        ],
    )
    assert response.status_code == 200
    assert "rules[0] and rules[2] both select namespace" in response.content.decode()
    unknown = _post(admin_client, [{"selector": "namespace", "value": "ns-a", "team": "nobody"}])
    assert "rules[0].team: no team" in unknown.content.decode()
    assert RuleSet.objects.count() == 1


def test_a_new_version_is_saved_and_past_days_keep_theirs(admin_client: Any, world: dict[str, Any]) -> None:
    team = world["team"].slug
    response = _post(
        admin_client,
        [
            {"selector": "namespace", "value": "ns-a", "team": team},
            {"selector": "namespace", "value": "ns-b", "team": team},
            {"selector": "namespace", "value": "unmapped", "team": team},
        ],
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    saved = RuleSet.objects.get(version=2)
    assert saved.note == "from the admin" and saved.created_by is not None
    assert list(saved.rules.values_list("position", "value")) == [(1, "ns-a"), (2, "ns-b"), (3, "unmapped")]
    assert set(AllocationDaily.objects.values_list("rule_set__version", flat=True)) == {1}


def test_the_action_reapplies_the_rules_to_the_rows_days(
    admin_client: Any, world: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    rows = list(AllocationDaily.objects.values_list("pk", flat=True)[:2])
    with mock.patch.object(allocation_days_recompute, "delay") as delay:
        with django_capture_on_commit_callbacks(execute=True):
            response = admin_client.post(
                "/admin/attribution/allocationdaily/",
                {"action": "reapply_rules", "_selected_action": [str(pk) for pk in rows]},
            )
    assert response.status_code == 302
    delay.assert_called_once_with([DAY.isoformat()])
    before = AllocationDaily.objects.count()
    AllocationDaily.objects.filter(kind="idle").delete()  # as if the rows were lost
    result = allocation_days_recompute.apply(args=[[DAY.isoformat()]]).get()
    assert result == {"days": 1, "rows": before}
    assert AllocationDaily.objects.count() == before


def test_the_nightly_task_allocates_yesterday(world: dict[str, Any]) -> None:
    AllocationDaily.objects.all().delete()
    result = allocation_daily_compute.apply(kwargs={"today_iso": "2026-11-11"}).get()
    assert result["days"] == [DAY.isoformat()]
    assert AllocationDaily.objects.aggregate(c=Sum("cost_usage"))["c"] == Decimal("1032.36")


def test_the_lists_and_a_saved_version_open_read_only(admin_client: Any, world: dict[str, Any]) -> None:
    saved = RuleSet.objects.get(version=1)
    assert admin_client.get("/admin/attribution/allocationdaily/").status_code == 200
    assert admin_client.get("/admin/attribution/ruleset/").status_code == 200
    page = admin_client.get(f"/admin/attribution/ruleset/{saved.pk}/change/")
    assert page.status_code == 200
    assert "ns-b" in page.content.decode() and 'name="_save"' not in page.content.decode()
