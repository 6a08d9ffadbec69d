"""``GET /api/v1/allocation`` over the shared host's day (tests/attribution/conftest.py): the
answer equals the selector's, adds up to the cost row, is scoped to the token's team, and bad
parameters are a 422 naming the field."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from accelboard.api.services import token_create
from accelboard.attribution.selectors import allocation_report
from accelboard.core.access import Action, scope_for_token

from .conftest import DAY

pytestmark = pytest.mark.django_db
URL = "/api/v1/allocation"


def _get(client: Client, token: str, **params: str) -> Any:
    return client.get(
        URL,
        {"start": DAY.isoformat(), "end": DAY.isoformat(), **params},
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


@pytest.mark.parametrize("group_by", ["team", "namespace", "workload", "model", "gpu", "host"])
@pytest.mark.parametrize(("basis", "idle"), [("allocation", "separate"), ("usage", "share")])
def test_it_equals_the_selector_and_adds_up_to_the_cost_row(
    client: Client, world: dict[str, Any], group_by: str, basis: str, idle: str
) -> None:
    team = world["team"]
    token = token_create(team=team, kind="read", name="r")[1]
    response = _get(client, token, group_by=group_by, basis=basis, idle=idle)
    assert response.status_code == 200, response.content
    body = response.json()
    report = allocation_report(
        scope=scope_for_token(team_id=team.pk, kind="read").viewing_where(Action.VIEW),
        start=DAY,
        end=DAY,
        group_by=group_by,
        basis=basis,
        idle=idle,
    )
    assert [
        (r["kind"], r["key"], Decimal(r["cost"]), r["currency"], r["energy_j"]) for r in body["rows"]
    ] == [(r.kind, r.key, r.cost, r.currency, r.energy_j) for r in report.rows]
    assert body["count"] == len(body["rows"])
    # The host is the team's: every line of its GPUs, 1032.36 USD and 112,752,000 J in all.
    assert body["totals"] == [{"currency": "USD", "cost": "1032.36", "energy_j": 112_752_000}]
    assert sum(Decimal(r["cost"]) for r in body["rows"]) == Decimal("1032.36")
    assert ("idle" in {r["kind"] for r in body["rows"]}) == (idle == "separate")


def test_another_teams_token_sees_only_its_workloads(
    client: Client, world: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    token = token_create(team=world["other_team"], kind="read", name="o")[1]
    with django_assert_max_num_queries(3):  # the token, its last use, one grouped read
        body = _get(client, token, group_by="namespace").json()
    assert [(r["kind"], r["key"], r["cost"]) for r in body["rows"]] == [("workload", "ns-b", "115.88")]


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"start": "2026-13-01"}, "start"),
        ({"end": "yesterday"}, "end"),
        ({"start": "2026-11-11", "end": "2026-11-10"}, "end"),
        ({"start": "2024-01-01", "end": "2026-11-10"}, "end"),
        ({"group_by": "pod"}, "group_by"),
        ({"basis": "money"}, "basis"),
        ({"idle": "hide"}, "idle"),
    ],
)
def test_it_refuses_bad_params_naming_the_field(
    client: Client, world: dict[str, Any], params: dict[str, str], path: str
) -> None:
    token = token_create(team=world["team"], kind="read", name="r")[1]
    response = _get(client, token, **params)
    assert response.status_code == 422, response.content
    assert response.json()["error"]["path"] == path


def test_an_ingest_token_is_refused(client: Client, world: dict[str, Any]) -> None:
    token = token_create(team=world["team"], kind="ingest", name="i")[1]
    assert _get(client, token).status_code == 403
    assert client.get(URL).status_code == 401
