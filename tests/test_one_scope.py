"""One scope per page: under a page's team filter, its cards, charts, tables and exports all cover
that team, and its cards add up to its charts and tables. Every page of the test world
(``tests/browser/world.py``) whose filter bar offers a team is found and walked as staff and as
finance (who see both teams, finance every team's costs).

The alerts list filtered to one team showed the false-positive rates of every team beside it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.urls import reverse

from accelboard.alerts.choices import AlertKind
from accelboard.alerts.models import Alert
from tests import numbers
from tests.browser.test_every_page import PAGES
from tests.browser.world import World, world_create

pytestmark = pytest.mark.django_db

# Pages with a team filter outside the browser walk's list.
EXTRA_PAGES = {"workloads": "/workloads/"}
# The pages known to have a team filter: the walk must find at least these.
TEAM_FILTERED = {"alerts", "runs", "costs", "costs-drill", "workloads"}

TEAM_FILTER = re.compile(r"<form[^>]*method=\"get\"(?:(?!</form>).)*?<select[^>]*name=\"team\"", re.S | re.I)
SELECT = re.compile(r"<select.*?</select>", re.S | re.I)
FIGURE = re.compile(r'<script id="([\w-]+)" type="application/json">(.*?)</script>', re.S)
TOTAL = re.compile(r'data-total="([\w-]+)" data-value="([-\d.]+)"')


@pytest.fixture
def world(team: Any, other_team: Any) -> World:
    return world_create(team=team, other_team=other_team)


def _with_team(url: str, slug: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}team={slug}"


def _figures(html: str) -> list[dict[str, Any]]:
    found = []
    for figure_id, body in FIGURE.findall(html):
        value = json.loads(body)
        if isinstance(value, dict) and "data" in value and "layout" in value:
            found.append({"id": figure_id, **value})
    return found


def team_filtered_pages(client: Any, world: World) -> dict[str, str]:
    """Name -> address of every page whose GET filter bar offers a team."""
    pages = {spec.name: spec.url(world) for spec in PAGES} | EXTRA_PAGES
    found = {}
    for name, url in pages.items():
        response = client.get(url, follow=True)
        if response.status_code == 200 and TEAM_FILTER.search(response.content.decode()):
            found[name] = url
    return found


@pytest.mark.parametrize("role", ["staff", "finance"])
def test_every_page_with_a_team_filter_keeps_to_that_team(
    role: str, login_client: Any, cast: dict[str, Any], world: World
) -> None:
    client = login_client(cast[role])
    pages = team_filtered_pages(client, world)
    assert set(pages) >= TEAM_FILTERED, sorted(pages)
    other_marks = [world.other_team.name, *world.other_marks]
    problems: list[str] = []
    for name, url in pages.items():
        response = client.get(_with_team(url, world.team.slug), follow=True)
        assert response.status_code == 200, name
        html = response.content.decode()
        # Nothing of the other team outside the pickers (figures' data included).
        shown = SELECT.sub("", html)
        problems += [
            f"{name}: shows {mark!r} under team={world.team.slug}" for mark in other_marks if mark in shown
        ]
        # Cards add up to the charts drawn beside them.
        totals = {key: float(value) for key, value in TOTAL.findall(html)}
        for figure in _figures(html):
            problems += numbers.figure_problems(figure, where=name, totals=totals, expect_data=False)
    assert problems == []


def test_the_alerts_feedback_covers_the_alerts_the_list_shows(
    login_client: Any, staff: Any, world: World
) -> None:
    client = login_client(staff)
    for query in ({}, {"team": world.team.slug}, {"team": world.other_team.slug}):
        response = client.get(reverse("alerts:list"), query)
        assert response.status_code == 200
        listed = Alert.objects.filter(**({"team__slug": query["team"]} if query else {}))
        benchmark = listed.filter(kind__in=[AlertKind.REGRESSION, AlertKind.IMPROVEMENT])
        feedback = response.context["feedback"]
        # The cards count the list's alerts: per team and per threshold, every state.
        assert sum(row.alerts for row in feedback["teams"]) == benchmark.count()
        assert sum(row.alerts for row in feedback["thresholds"]) == benchmark.count()
        assert {row.key for row in feedback["teams"]} == set(benchmark.values_list("team_id", flat=True))
        assert response.context["total"] == listed.count() == response.context["page"].paginator.count
        # And the page says which alerts they cover.
        scope_note = re.search(r'id="feedback-scope">(.*?)</p>', response.content.decode(), re.S)
        assert scope_note is not None
        if query:
            assert "match the filters" in scope_note.group(1)
            team_name = world.team.name if query["team"] == world.team.slug else world.other_team.name
            assert team_name in scope_note.group(1)
        else:
            assert "every benchmark alert of the teams you see" in scope_note.group(1)
