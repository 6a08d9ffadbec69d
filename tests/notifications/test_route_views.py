"""The alert routes page: who may add, remove and test routes; the form's errors; the chart link."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accelboard.notifications import links, route_services
from accelboard.notifications.models import AlertRoute, RouteDelivery

from .conftest import regression_alert, runs_and_series
from .route_servers import SLACK_HOOK_PATH, FakeService

pytestmark = pytest.mark.django_db


@pytest.fixture
def slack_settings(settings: Any, slack: FakeService) -> FakeService:
    settings.ROUTE_SLACK_URL_PREFIXES = [f"{slack.base}/services/"]
    settings.ROUTE_PUBLIC_ONLY = False
    return slack


def _form(team: Any, url: str, **overrides: Any) -> dict[str, Any]:
    data = {
        "team": team.pk,
        "name": "#inference",
        "channel": "slack",
        "kind": "",
        "min_severity": "warning",
        "url": url,
    }
    data.update(overrides)
    return data


def test_a_lead_adds_tests_and_removes_a_team_route(
    login_client: Any, team: Any, lead: Any, slack_settings: FakeService
) -> None:
    client = login_client(lead)
    response = client.post(
        "/notifications/routes/", _form(team, slack_settings.base + SLACK_HOOK_PATH), follow=True
    )
    assert response.status_code == 200
    route = AlertRoute.objects.get()
    assert "Route “#inference” added" in response.content.decode()

    response = client.post(f"/notifications/routes/{route.pk}/test/", follow=True)
    page = response.content.decode()
    assert "Test sent to “#inference”: HTTP 200." in page
    assert slack_settings.requests[0].json()["text"] == "accelboard test: route “#inference” works"
    assert 'id="route-deliveries"' in page and "HTTP 200" in page

    client.post(f"/notifications/routes/{route.pk}/delete/")
    assert AlertRoute.objects.count() == 0


def test_the_form_names_the_bad_field_and_stores_nothing(
    login_client: Any, team: Any, lead: Any, slack_settings: FakeService
) -> None:
    client = login_client(lead)
    response = client.post("/notifications/routes/", _form(team, "https://example.com/services/T/B/X"))
    assert response.status_code == 400
    assert "not a Slack incoming webhook" in response.content.decode()
    response = client.post(
        "/notifications/routes/", _form(team, "", channel="pagerduty", routing_key="short")
    )
    assert response.status_code == 400
    assert (
        "A PagerDuty routing key is 32 letters and digits (this one has 5 characters)"
        in response.content.decode()
    )
    assert AlertRoute.objects.count() == 0


def test_an_engineer_adds_only_a_personal_route(
    login_client: Any, team: Any, engineer: Any, slack_settings: FakeService
) -> None:
    client = login_client(engineer)
    url = slack_settings.base + SLACK_HOOK_PATH
    response = client.post("/notifications/routes/", _form(team, url))
    assert response.status_code == 400 and "leads" in response.content.decode()
    response = client.post("/notifications/routes/", _form(team, url, personal="on"))
    assert response.status_code == 302
    assert AlertRoute.objects.get().user_id == engineer.pk


@pytest.mark.parametrize(
    ("who", "status"), [("lead", 302), ("engineer", 404), ("other_lead", 404), ("outsider", 404)]
)
def test_who_may_remove_or_test_a_team_route(
    login_client: Any, cast: dict[str, Any], team: Any, slack_settings: FakeService, who: str, status: int
) -> None:
    route, _ = route_services.route_create(
        user=cast["lead"], team=team, name="r", channel="slack", url=slack_settings.base + SLACK_HOOK_PATH
    )
    client = login_client(cast[who])
    page = client.get("/notifications/routes/").content.decode()
    assert (f'data-route="{route.pk}"' in page) is (who == "lead")
    assert client.post(f"/notifications/routes/{route.pk}/test/").status_code == status
    assert len(slack_settings.requests) == (1 if who == "lead" else 0)
    assert client.post(f"/notifications/routes/{route.pk}/delete/").status_code == status
    assert AlertRoute.objects.filter(pk=route.pk).exists() is (status != 302)


def test_the_routes_page_reads_in_a_fixed_number_of_queries(
    login_client: Any, team: Any, lead: Any, slack_settings: FakeService, django_assert_max_num_queries: Any
) -> None:
    for n in range(5):
        route, _ = route_services.route_create(
            user=lead, team=team, name=f"r{n}", channel="slack", url=slack_settings.base + SLACK_HOOK_PATH
        )
        route_services.route_test_send(user=lead, route=route)
    client = login_client(lead)
    with django_assert_max_num_queries(12):
        response = client.get("/notifications/routes/")
    assert response.status_code == 200
    assert response.content.decode().count("data-test-route=") == 5
    assert RouteDelivery.objects.count() == 5


def test_the_chart_link_is_a_png_without_login_and_a_changed_token_is_a_404(team: Any) -> None:
    good, bad, series = runs_and_series(team)
    alert = regression_alert(team=team, series=series, first_run=bad, last_good_run=good)
    client = Client()
    response = client.get(links.chart_path(alert.pk))
    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    assert response.content.startswith(b"\x89PNG")
    assert client.get(links.chart_path(alert.pk).replace(".png", "x.png")).status_code == 404


def test_someone_in_no_team_is_told_there_is_nothing_to_route(login_client: Any, outsider: Any) -> None:
    page = login_client(outsider).get("/notifications/routes/").content.decode()
    assert "You belong to no team, so there are no alerts to route." in page
    assert 'id="add-route"' not in page
