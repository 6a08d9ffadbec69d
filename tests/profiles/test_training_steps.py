"""Issue 38: a training run with a profile shows its per-step breakdown on its page (from
``Profile.hta["steps"]``), with a link to the Profile tab's per-step section."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from django.urls import reverse

from accelboard.profiles.selectors import STEP_RANKS_SHOWN
from accelboard.profiles.services import profile_attach
from accelboard.testing.traces import KERNELS, write_training_trace
from tests import factories

pytestmark = pytest.mark.django_db


def _trace(**options: Any) -> bytes:
    buffer = io.BytesIO()
    write_training_trace(buffer, **options)
    return buffer.getvalue()


def _run(team: Any, scenario: str) -> Any:
    h100 = factories.accelerator_type_from(factories.H100)
    return factories.run_create(team=team, accelerator_type=h100, accelerator_count=2, scenario=scenario)


def _section(page: str) -> str:
    match = re.search(r'<section class="card" id="run-profile-steps">(.*?)</section>', page, re.S)
    assert match, "no per-step section"
    return match.group(1)


def test_a_training_run_with_a_profile_shows_each_steps_breakdown(
    team: Any, login_client: Any, lead: Any, django_assert_max_num_queries: Any
) -> None:
    run = _run(team, "training")
    files = [
        ("rank0.json", _trace(rank=0, world_size=2, steps=4)),
        ("rank1.json", _trace(rank=1, world_size=2, steps=4, slow={KERNELS[0][0]: 3.0})),
    ]
    stored = profile_attach(run=run, files=files)
    stored.refresh_from_db()
    client = login_client(lead)
    with django_assert_max_num_queries(22):
        response = client.get(reverse("benchmarks:run_detail", args=[run.pk]))
    section = _section(response.content.decode())
    # Two ranks of four steps: one row each, with the stored figures.
    assert section.count('data-step="') == 8
    for item in stored.hta["steps"]:
        assert f'data-rank="{item["rank"]}"' in section
        assert f"{item['steps']} steps" in section and f"slowest step {item['slowest_step']}" in section
    # The slow rank's steps take longer on the GPU: the table shows what was stored.
    spans = {item["rank"]: [row["span_us"] for row in item["rows"]] for item in stored.hta["steps"]}
    assert min(spans[1]) > max(spans[0])
    assert f'href="/runs/{run.pk}/profile/#hta-steps"' in section


def test_only_the_first_ranks_are_shown_and_the_rest_are_a_link_away(
    team: Any, login_client: Any, lead: Any
) -> None:
    run = _run(team, "training")
    ranks = STEP_RANKS_SHOWN + 1
    profile_attach(
        run=run, files=[(f"rank{r}.json", _trace(rank=r, world_size=ranks, steps=2)) for r in range(ranks)]
    )
    section = _section(
        login_client(lead).get(reverse("benchmarks:run_detail", args=[run.pk])).content.decode()
    )
    assert section.count("<table") == STEP_RANKS_SHOWN
    assert f"the first {STEP_RANKS_SHOWN} of {ranks} ranks" in section


def test_no_section_for_a_training_run_without_profile_nor_an_inference_run_with_one(
    team: Any, login_client: Any, lead: Any
) -> None:
    client = login_client(lead)
    training = _run(team, "training")
    offline = _run(team, "offline")
    profile_attach(run=offline, files=[("rank0.json", _trace())])
    for run in (training, offline):
        page = client.get(reverse("benchmarks:run_detail", args=[run.pk])).content.decode()
        assert 'id="run-profile-steps"' not in page
    # The offline run's profile has steps: it is the scenario that keeps them off its page.
    page = client.get(reverse("profiles:run_profile", args=[offline.pk])).content.decode()
    assert 'id="hta-steps"' in page and page.count('data-step="') == 3
