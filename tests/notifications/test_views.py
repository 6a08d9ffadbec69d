"""The subscriptions page: who may subscribe to what, mode changes, removal; 4xx on bad input."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from accelboard.benchmarks.models import Series
from accelboard.notifications import services
from accelboard.notifications.choices import DeliveryMode
from accelboard.notifications.models import Subscription

from .conftest import runs_and_series

pytestmark = pytest.mark.django_db
PAGE = "/notifications/subscriptions/"


def test_it_shows_an_empty_state_that_says_what_to_do(login_client: Any, lead: Any) -> None:
    response = login_client(lead).get(PAGE)
    assert response.status_code == 200
    html = response.content.decode()
    assert "You receive no alert emails" in html
    assert "Nobody is subscribed by default" in html
    assert "Subscribe to all alerts of my teams (Inference Platform)" in html


def test_it_tells_a_user_without_team_there_is_nothing_to_follow(login_client: Any, outsider: Any) -> None:
    response = login_client(outsider).get(PAGE)
    assert response.status_code == 200
    assert "You belong to no team" in response.content.decode()


def test_it_redirects_anonymous_users_to_the_login(client: Any, db: None) -> None:
    response = client.get(PAGE)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_it_adds_a_team_and_a_series_subscription(login_client: Any, lead: Any, team: Any) -> None:
    _, _, series = runs_and_series(team)
    client = login_client(lead)
    response = client.post(PAGE, {"team": team.pk, "series": "", "kind": "", "mode": "immediate"})
    assert response.status_code == 302
    response = client.post(PAGE, {"team": team.pk, "series": series.pk, "kind": "", "mode": "digest"})
    assert response.status_code == 302
    subs = Subscription.objects.filter(user=lead).order_by("pk")
    assert [(s.team_id, s.series_id, s.kind, s.mode) for s in subs] == [
        (team.pk, None, "", "immediate"),
        (team.pk, series.pk, "", "digest"),
    ]
    page = client.get(PAGE).content.decode()
    assert "All alerts" in page and "Series: throughput_tokens_per_s" in page
    # The same again is a 400 that says so, not a second row.
    again = client.post(PAGE, {"team": team.pk, "series": "", "kind": "", "mode": "digest"})
    assert again.status_code == 400 and "You already have this subscription" in again.content.decode()
    assert Subscription.objects.filter(user=lead).count() == 2


def test_it_refuses_another_teams_team_or_series_naming_the_field(
    login_client: Any, lead: Any, team: Any, other_team: Any
) -> None:
    _, _, other_series = runs_and_series(other_team)
    client = login_client(lead)
    response = client.post(PAGE, {"team": other_team.pk, "mode": "immediate"})
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    response = client.post(PAGE, {"team": team.pk, "series": other_series.pk, "mode": "immediate"})
    assert response.status_code == 400
    response = client.post(PAGE, {"team": team.pk, "kind": "bogus", "mode": "weekly"})
    assert response.status_code == 400
    assert not Subscription.objects.exists()


def test_it_refuses_a_series_of_a_team_other_than_the_chosen_one(
    login_client: Any, lead: Any, team: Any, other_team: Any
) -> None:
    from accelboard.core.models import Membership

    Membership.objects.create(team=other_team, user=lead, role="engineer")
    _, _, other_series = runs_and_series(other_team)
    client = login_client(lead)
    response = client.post(PAGE, {"team": team.pk, "series": other_series.pk, "mode": "immediate"})
    assert response.status_code == 400
    assert "This series belongs to Research, not Inference Platform" in response.content.decode()
    response = client.post(
        PAGE, {"team": other_team.pk, "series": other_series.pk, "kind": "regression", "mode": "immediate"}
    )
    assert response.status_code == 400
    assert "Choose a series or an alert kind, not both" in response.content.decode()
    assert not Subscription.objects.exists()


def test_it_subscribes_to_all_my_teams_in_one_click(
    login_client: Any, lead: Any, team: Any, other_team: Any
) -> None:
    from accelboard.core.models import Membership

    Membership.objects.create(team=other_team, user=lead, role="engineer")
    client = login_client(lead)
    response = client.post(reverse("notifications:subscriptions_my_teams"))
    assert response.status_code == 302
    assert set(Subscription.objects.filter(user=lead).values_list("team_id", "mode")) == {
        (team.pk, "immediate"),
        (other_team.pk, "immediate"),
    }
    client.post(reverse("notifications:subscriptions_my_teams"))
    assert Subscription.objects.filter(user=lead).count() == 2


def test_it_changes_the_mode_and_removes_a_subscription(login_client: Any, lead: Any, team: Any) -> None:
    sub = services.subscription_create(user=lead, team=team, mode=DeliveryMode.IMMEDIATE)
    client = login_client(lead)
    response = client.post(reverse("notifications:subscription_mode", args=[sub.pk]), {"mode": "digest"})
    assert response.status_code == 302
    sub.refresh_from_db()
    assert sub.mode == "digest"
    bad = client.post(reverse("notifications:subscription_mode", args=[sub.pk]), {"mode": "hourly"})
    assert bad.status_code == 400 and "mode:" in bad.content.decode()
    sub.refresh_from_db()
    assert sub.mode == "digest"
    response = client.post(reverse("notifications:subscription_delete", args=[sub.pk]))
    assert response.status_code == 302
    assert not Subscription.objects.filter(pk=sub.pk).exists()


def test_it_hides_other_users_subscriptions_behind_a_404(
    login_client: Any, lead: Any, engineer: Any, team: Any
) -> None:
    sub = services.subscription_create(user=lead, team=team, mode=DeliveryMode.IMMEDIATE)
    client = login_client(engineer)
    assert (
        client.post(reverse("notifications:subscription_mode", args=[sub.pk]), {"mode": "digest"}).status_code
        == 404
    )
    assert client.post(reverse("notifications:subscription_delete", args=[sub.pk])).status_code == 404
    page = client.get(PAGE).content.decode()
    assert f'data-subscription="{sub.pk}"' not in page and "You receive no alert emails" in page
    sub.refresh_from_db()
    assert sub.mode == "immediate"


def test_it_only_offers_series_of_the_users_teams(
    login_client: Any, lead: Any, team: Any, other_team: Any
) -> None:
    runs_and_series(team)
    runs_and_series(other_team)
    html = login_client(lead).get(PAGE).content.decode()
    for series in Series.objects.filter(team=team):
        assert f'<option value="{series.pk}">' in html
    for series in Series.objects.filter(team=other_team):
        assert f'<option value="{series.pk}">' not in html
    assert "Research · " not in html
    # Grouped by team and model, each option read as people read the metric, then its raw name.
    assert '<optgroup label="Inference Platform · Llama-3.1-8B bf16">' in html
    assert "p99 latency (latency_p99_ms) · " in html


def test_it_renders_the_page_in_a_fixed_number_of_queries(
    login_client: Any, lead: Any, team: Any, django_assert_max_num_queries: Any
) -> None:
    _, _, series = runs_and_series(team)
    for n in range(10):
        extra = Series.objects.create(
            team=team, workload=series.workload, metric=f"m{n}", unit="ms", direction="lower"
        )
        services.subscription_create(user=lead, team=team, series=extra, mode=DeliveryMode.DIGEST)
    client = login_client(lead)
    with django_assert_max_num_queries(12):
        assert client.get(PAGE).status_code == 200


def test_staff_follow_any_team_one_at_a_time_but_one_click_follows_membership_only(
    login_client: Any, staff: Any, team: Any, other_team: Any
) -> None:
    client = login_client(staff)
    page = client.get(PAGE).content.decode()
    # Every team in the picker; no "all alerts of my teams" button for someone in no team.
    assert f'<option value="{team.pk}">' in page and f'<option value="{other_team.pk}">' in page
    assert 'id="subscribe-my-teams"' not in page and "as staff you may follow any team" in page
    assert (
        client.post(PAGE, {"team": other_team.pk, "series": "", "kind": "", "mode": "immediate"}).status_code
        == 302
    )
    client.post(reverse("notifications:subscriptions_my_teams"))
    assert list(Subscription.objects.filter(user=staff).values_list("team_id", flat=True)) == [other_team.pk]
