"""The team page: who sees it, who changes it, and what the changes do to the rows."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from accelboard.alerts.models import DetectionSetting, ServingSlo
from accelboard.core.models import Membership

pytestmark = pytest.mark.django_db


def _url(team: Any) -> str:
    return reverse("core:team_detail", args=[team.slug])


@pytest.mark.parametrize(
    ("who", "status"),
    [
        ("lead", 200),
        ("engineer", 200),
        ("finance", 200),
        ("staff", 200),
        ("other_lead", 404),
        ("outsider", 404),
    ],
)
def test_it_shows_the_team_to_its_members_and_staff_only(
    login_client: Any, cast: dict[str, Any], team: Any, who: str, status: int
) -> None:
    assert login_client(cast[who]).get(_url(team)).status_code == status


@pytest.mark.parametrize(("who", "status"), [("engineer", 403), ("finance", 403), ("other_lead", 404)])
def test_it_refuses_changes_from_anyone_but_a_lead(
    login_client: Any, cast: dict[str, Any], team: Any, who: str, status: int
) -> None:
    response = login_client(cast[who]).post(
        _url(team), {"action": "threshold", "metric": "", "min_effect_pct": "3"}
    )
    assert response.status_code == status
    assert not DetectionSetting.objects.exists()


def test_it_lets_a_lead_add_change_and_remove_members(
    login_client: Any, lead: Any, engineer: Any, outsider: Any, team: Any
) -> None:
    client = login_client(lead)
    assert (
        client.post(_url(team), {"action": "member", "username": "outsider", "role": "engineer"}).status_code
        == 302
    )
    assert Membership.objects.get(team=team, user=outsider).role == "engineer"
    client.post(_url(team), {"action": "member", "username": "outsider", "role": "finance"})
    assert Membership.objects.get(team=team, user=outsider).role == "finance"
    client.post(_url(team), {"action": "member", "username": "outsider", "role": "remove"})
    assert not Membership.objects.filter(team=team, user=outsider).exists()


def test_it_keeps_the_last_lead(login_client: Any, lead: Any, team: Any) -> None:
    response = login_client(lead).post(
        _url(team), {"action": "member", "username": lead.username, "role": "engineer"}
    )
    assert response.status_code == 400
    assert "last lead" in response.content.decode()
    assert Membership.objects.get(team=team, user=lead).role == "lead"


def test_it_names_an_unknown_user(login_client: Any, lead: Any, team: Any) -> None:
    response = login_client(lead).post(
        _url(team), {"action": "member", "username": "nobody", "role": "engineer"}
    )
    assert response.status_code == 400
    assert "no user named &#x27;nobody&#x27;" in response.content.decode()


def test_it_sets_and_removes_a_threshold(login_client: Any, lead: Any, team: Any) -> None:
    client = login_client(lead)
    client.post(_url(team), {"action": "threshold", "metric": "throughput_tokens_s", "min_effect_pct": "4"})
    client.post(_url(team), {"action": "threshold", "metric": "throughput_tokens_s", "min_effect_pct": "2.5"})
    setting = DetectionSetting.objects.get(team=team)
    assert (setting.metric, setting.min_effect) == ("throughput_tokens_s", pytest.approx(0.025))
    response = client.post(_url(team), {"action": "threshold", "metric": "", "min_effect_pct": "0.1"})
    assert response.status_code == 400  # below 0.5%: the form names the field
    assert "min_effect_pct" in response.content.decode()
    client.post(_url(team), {"action": "threshold_delete", "id": str(setting.pk)})
    assert not DetectionSetting.objects.exists()


def test_it_saves_a_serving_objective_and_rejects_a_variant_of_another_model(
    login_client: Any, lead: Any, team: Any, other_team: Any
) -> None:
    from tests import factories

    fp8 = factories.run_create(
        team=team, model="Llama-3.1-8B", variant="fp8", precision="fp8"
    ).workload.variant
    qwen_bf16 = factories.run_create(team=team, model="Qwen3-8B", variant="bf16").workload.variant
    secret = factories.run_create(team=other_team, model="Secret-70B", variant="bf16").workload.variant
    llama = fp8.model
    client = login_client(lead)
    page = client.get(_url(team)).content.decode()
    # The form offers the team's models only: another team's model names stay theirs.
    assert "Qwen3-8B" in page and "Secret-70B" not in page
    client.post(_url(team), {"action": "slo", "model": llama.pk, "variant": fp8.pk, "p99_latency_ms": "250"})
    slo = ServingSlo.objects.get(team=team)
    assert (slo.model, slo.variant, slo.p99_latency_ms, slo.min_tokens_per_s) == (llama, fp8, 250.0, None)
    response = client.post(
        _url(team), {"action": "slo", "model": llama.pk, "variant": qwen_bf16.pk, "p99_latency_ms": "9"}
    )
    assert response.status_code == 400
    assert "is not a variant of Llama-3.1-8B" in response.content.decode()
    response = client.post(_url(team), {"action": "slo", "model": secret.model.pk, "p99_latency_ms": "9"})
    assert response.status_code == 400
    response = client.post(_url(team), {"action": "slo", "model": llama.pk})
    assert response.status_code == 400
    assert ServingSlo.objects.count() == 1


def test_it_lists_only_the_users_teams(login_client: Any, lead: Any, team: Any, other_team: Any) -> None:
    response = login_client(lead).get(reverse("core:team_list"))
    html = response.content.decode()
    assert f'data-team="{team.slug}"' in html and f'data-team="{other_team.slug}"' not in html


def test_it_answers_a_bad_action_with_a_4xx(login_client: Any, lead: Any, team: Any) -> None:
    assert login_client(lead).post(_url(team), {"action": "explode"}).status_code == 400
    assert login_client(lead).post(_url(team), {"action": "slo_delete", "id": "x"}).status_code == 400
