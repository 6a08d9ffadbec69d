"""The page form that creates and edits canary checks: team leads (and staff) only, each bad field
answered on that field with nothing written (accelboard/canary/forms.py, views.canary_form)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accelboard.benchmarks.services import model_variant_get_or_create
from accelboard.canary.forms import pairs_parse
from accelboard.canary.models import CanaryCheck

pytestmark = pytest.mark.django_db

MODEL = "Llama-3.1-8B"


@pytest.fixture
def model(team: Any) -> Any:
    return model_variant_get_or_create(model=MODEL, variant="fp8", precision="fp8", team=None).model


def _form(team: Any, **overrides: str) -> dict[str, str]:
    data = {
        "team": str(team.pk),
        "model": MODEL,
        "name": "chat-rollout",
        "baseline": "track=stable, app=chat",
        "canary": "track=canary,app=chat",
        "window_minutes": "30",
        "alpha": "0.01",
        "min_effects": "e2e_p50_ms=0.05, error_rate=0.01",
        "active": "",  # unticked: off
    }
    data.update(overrides)
    return data


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_lead_creates_a_check_and_edits_it(lead: Any, team: Any, model: Any) -> None:
    client = _client(lead)
    assert 'id="new-check"' in client.get("/canary/").content.decode()
    response = client.post("/canary/new/", _form(team))
    check = CanaryCheck.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/canary/{check.pk}/"
    assert (check.team_id, check.model_id, check.name) == (team.pk, model.pk, "chat-rollout")
    assert check.baseline == {"track": "stable", "app": "chat"}
    assert check.canary == {"track": "canary", "app": "chat"}
    assert (check.window_minutes, check.alpha, check.active) == (30, 0.01, False)
    assert check.min_effects == {"e2e_p50_ms": 0.05, "error_rate": 0.01}
    # The edit form shows what is stored (labels in jsonb's order); its name and team are fixed
    # (controllers poll the name).
    page = client.get(f"/canary/{check.pk}/edit/").content.decode()
    assert 'value="app=chat, track=stable"' in page and 'value="chat-rollout"' in page and "disabled" in page
    assert 'id="edit-check"' in client.get(f"/canary/{check.pk}/").content.decode()
    edited = _form(team, name="renamed", window_minutes="120", min_effects="", active="on")
    assert client.post(f"/canary/{check.pk}/edit/", edited).status_code == 302
    check.refresh_from_db()
    assert (check.name, check.window_minutes, check.min_effects, check.active) == (
        "chat-rollout",
        120,
        {},
        True,
    )
    assert CanaryCheck.objects.count() == 1


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"baseline": "track"}, "baseline", "'track' is not label=value"),
        ({"canary": " , "}, "canary", "at least one label=value pair"),
        ({"canary": "track=stable,app=chat"}, "canary", "must differ from the baseline"),
        ({"min_effects": "latency=0.1"}, "min_effects", "unknown metric 'latency'"),
        ({"min_effects": "e2e_p50_ms=fast"}, "min_effects", "'fast' is not a number"),
        ({"min_effects": "e2e_p50_ms=-0.1"}, "min_effects", "non-negative"),
        ({"alpha": "0.7"}, "alpha", "between 0 and 0.5"),
        ({"window_minutes": "0"}, "window_minutes", "greater than or equal to 1"),
        ({"model": "No-Such-Model"}, "model", "no model named 'No-Such-Model'"),
        ({"name": "not a slug"}, "name", "letters, numbers"),
    ],
)
def test_a_bad_field_is_a_400_naming_it_and_nothing_is_written(
    lead: Any, team: Any, model: Any, overrides: dict[str, str], field: str, message: str
) -> None:
    response = _client(lead).post("/canary/new/", _form(team, **overrides))
    assert response.status_code == 400
    page = response.content.decode()
    errors = page.split(f'class="error field-error" data-field="{field}">')
    assert len(errors) == 2, page
    assert message in errors[1].split("</p>")[0].replace("&#x27;", "'")
    assert not CanaryCheck.objects.exists()


def test_only_the_teams_leads_and_staff_may_write(
    cast: dict[str, Any], team: Any, other_team: Any, model: Any
) -> None:
    check = _client(cast["lead"]).post("/canary/new/", _form(team))
    assert check.status_code == 302
    pk = CanaryCheck.objects.get().pk
    # Engineers and finance see the check, but neither create nor change one.
    for role in ("engineer", "finance"):
        client = _client(cast[role])
        assert client.get("/canary/new/").status_code == 403
        assert client.get(f"/canary/{pk}/edit/").status_code == 403
        assert client.post(f"/canary/{pk}/edit/", _form(team, window_minutes="5")).status_code == 403
        assert 'id="new-check"' not in client.get("/canary/").content.decode()
    # Another team's lead: the check is not theirs to see (404), nor the team theirs to write for.
    other = _client(cast["other_lead"])
    assert other.get(f"/canary/{pk}/edit/").status_code == 404
    refused = other.post("/canary/new/", _form(team, name="sneaky"))
    assert (
        refused.status_code == 400
        and 'data-field="team">team: Select a valid choice' in refused.content.decode()
    )
    assert CanaryCheck.objects.get().window_minutes == 30
    assert (
        _client(cast["staff"]).post(f"/canary/{pk}/edit/", _form(team, window_minutes="45")).status_code
        == 302
    )
    assert CanaryCheck.objects.get().window_minutes == 45


def test_pairs_parse() -> None:
    assert pairs_parse(" track = canary , app=chat,", what="label") == {"track": "canary", "app": "chat"}
    for bad, message in (("track=", "not label=value"), ("=x", "not label=value"), ("a=1,a=2", "twice")):
        with pytest.raises(ValueError, match=message):
            pairs_parse(bad, what="label")
