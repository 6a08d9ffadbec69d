"""A run with no result before it is not alone when results came after it: its page says it is
the first of its series, how many followed, and links the series on Trends, instead of "no
earlier result" (a demo run said so with 89 later ones). A run alone in its series still says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.urls import reverse

from accelboard.benchmarks.models import MetricValue
from tests import factories

pytestmark = pytest.mark.django_db


def test_the_first_run_of_a_long_series_says_so_and_links_its_history(
    login_client: Any, lead: Any, team: Any
) -> None:
    h100 = factories.accelerator_type_from(factories.H100)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    runs = [
        factories.run_create(team=team, accelerator_type=h100, started_at=start + timedelta(days=n))
        for n in range(4)
    ]
    client = login_client(lead)
    first = client.get(reverse("benchmarks:run_detail", args=[runs[0].pk])).content.decode()
    assert "no earlier result" not in first and 'id="first-of-series"' in first
    for value in MetricValue.objects.filter(run=runs[0]):
        assert f'href="/trends/?series={value.series_id}"' in first
    assert first.count("3 later results") == MetricValue.objects.filter(run=runs[0]).count() == 2
    # The last run has its history before it: charts, no first-of-series note.
    last = client.get(reverse("benchmarks:run_detail", args=[runs[-1].pk])).content.decode()
    assert 'id="first-of-series"' not in last and 'id="no-history"' not in last and 'class="history"' in last
    # A run alone in its series (another model) still says there is no history yet.
    lone = factories.run_create(
        team=team, accelerator_type=h100, model="Qwen2.5-7B-Instruct", started_at=start
    )
    alone = client.get(reverse("benchmarks:run_detail", args=[lone.pk])).content.decode()
    assert 'id="no-history"' in alone and 'id="first-of-series"' not in alone
