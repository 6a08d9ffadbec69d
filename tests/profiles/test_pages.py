"""The profiles app: attaching a profile, the Profile tab (who may see it, what it shows, its
costs), the comparison, and their query budgets."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from accelboard.core.access import scope_for_user
from accelboard.costs.run_cost_services import run_cost_compute
from accelboard.profiles.models import Profile, ProfileBreakdown, ProfileKernel
from accelboard.profiles.selectors import profile_change_link, profile_costs, run_ids_with_profiles
from accelboard.profiles.services import ProfileRejected, profile_attach
from accelboard.testing.traces import KERNELS, write_training_trace
from tests import factories
from tests.costs.builders import accelerator_price_create, electricity_price_create, host_place, site_create
from tests.numbers import text_problems

pytestmark = pytest.mark.django_db

START = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
FLASH = KERNELS[1][0]


def _trace(**options: Any) -> bytes:
    buffer = io.BytesIO()
    write_training_trace(buffer, **options)
    return buffer.getvalue()


@pytest.fixture
def h100_run(team: Any) -> Any:
    """One H100 run on a priced host, costed per 1M tokens."""
    h100 = factories.accelerator_type_from(factories.H100)
    host, _ = factories.host_create(team=team, gpus=1, gpu_name=factories.H100["driver_name"])
    site = site_create(name="lambda-usw", provider="lambda", region="us-west-1")
    host_place(host, site=site, provider="lambda", region="us-west-1", instance_type="gpu_1x_h100_sxm5")
    accelerator_price_create(
        accelerator_type=h100,
        price_per_hour="3.29",
        count=1,
        provider="lambda",
        region="us-west-1",
        instance_type="gpu_1x_h100_sxm5",
    )
    electricity_price_create(site=site)
    run = factories.run_create(
        team=team,
        accelerator_type=h100,
        host=host,
        started_at=START,
        metrics={"throughput_tokens_per_s": 4890.0, "energy_per_token_j": 0.0935},
    )
    run_cost_compute(run=run)
    return run


def test_attaching_stores_aggregates_that_add_up(h100_run: Any) -> None:
    files = [("rank0.json", _trace(rank=0, world_size=2)), ("rank1.json.gz", _trace(rank=1, world_size=2))]
    profile = profile_attach(run=h100_run, files=files)
    profile.refresh_from_db()
    assert (profile.ranks, profile.steps, profile.source_format) == (2, 3, "kineto")
    for rank in profile.rank_rows.all():
        whole = ProfileBreakdown.objects.filter(profile=profile, rank=rank.rank, step__isnull=True)
        assert sum(row.time_us for row in whole) == pytest.approx(rank.span_us)
        steps = ProfileBreakdown.objects.filter(profile=profile, rank=rank.rank, step__isnull=False)
        assert 0 < sum(row.time_us for row in steps) <= rank.span_us + 1e-6
    assert sum(r.span_us for r in profile.rank_rows.all()) == pytest.approx(profile.span_us)
    flash = ProfileKernel.objects.get(profile=profile, name=FLASH)
    assert (flash.category, flash.precision, flash.ranks) == ("attention", "bf16", 2)
    # Attaching again replaces, all or nothing.
    profile_attach(run=h100_run, files=files[:1])
    assert Profile.objects.get(run=h100_run).ranks == 1
    with pytest.raises(ProfileRejected, match="broken.json"):
        profile_attach(run=h100_run, files=[("broken.json", b'{"traceEvents": [{"ph": "X"')])
    assert Profile.objects.get(run=h100_run).ranks == 1


def test_costs_split_the_run_cost_per_1m_tokens(h100_run: Any) -> None:
    profile = profile_attach(run=h100_run, files=[("t.json", _trace(input_wait_us=20_000.0))])
    costs = profile_costs(profile=profile)
    total = Decimal(h100_run.cost.total_cost_per_1m)
    assert costs["per"] == "per 1M tokens" and costs["currency"] == "USD"
    assert sum(row["cost"] for row in costs["rows"]) == pytest.approx(float(total))
    idle = next(c for c in costs["candidates"] if c["what"] == "idle GPU time")
    assert idle["share"] == pytest.approx(profile.totals["shares"]["idle"])
    assert costs["sentences"][0].startswith("Idle GPU time is")


def test_the_profile_tab_shows_verdict_breakdown_kernels_and_costs(
    h100_run: Any, engineer: Any, login_client: Any, django_assert_max_num_queries: Any
) -> None:
    profile_attach(run=h100_run, files=[("t.json", _trace())])
    client = login_client(engineer)
    with django_assert_max_num_queries(20):
        response = client.get(reverse("profiles:run_profile", args=[h100_run.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    for part in (
        'id="profile-verdict"',
        'id="rank-figure"',
        'id="step-figure"',
        'id="kernel-table"',
        'id="cost-table"',
    ):
        assert part in html
    assert "Compute-bound" in html and "flash_fwd_kernel" in html and "USD per 1M tokens" in html
    # Costs as every page writes numbers (it once read "0.830808 USD"): no more than four
    # significant decimals, no e-notation.
    cost_card = html.split('id="profile-costs"')[1].split("</section>")[0]
    text = re.sub(r"<[^>]+>", " | ", cost_card)
    assert text_problems(text) == []


def test_who_may_see_and_attach(
    h100_run: Any, cast: dict[str, Any], login_client: Any, media_root: Path
) -> None:
    url = reverse("profiles:run_profile", args=[h100_run.pk])
    attach = reverse("profiles:attach", args=[h100_run.pk])
    expected = {
        "lead": 200,
        "engineer": 200,
        "finance": 200,
        "other_lead": 404,
        "outsider": 404,
        "staff": 200,
    }
    for name, status in expected.items():
        client = login_client(cast[name])
        assert client.get(url).status_code == status, name
    upload = SimpleUploadedFile("t.json", _trace(steps=1, layers=1))
    assert login_client(cast["finance"]).post(attach, {"profile": upload}).status_code == 403
    assert not Profile.objects.filter(run=h100_run).exists()
    upload = SimpleUploadedFile("t.json", _trace(steps=1, layers=1))
    response = login_client(cast["engineer"]).post(attach, {"profile": upload, "keep_raw": "on"})
    assert response.status_code == 302
    profile = Profile.objects.get(run=h100_run)
    assert profile.raw_filename == "t.json" and profile.raw_file.size > 0


def test_a_bad_trace_is_a_400_naming_it(h100_run: Any, engineer: Any, login_client: Any) -> None:
    client = login_client(engineer)
    response = client.post(
        reverse("profiles:attach", args=[h100_run.pk]), {"profile": SimpleUploadedFile("notes.txt", b"hello")}
    )
    assert response.status_code == 400
    assert "notes.txt" in response.content.decode()
    assert client.post(reverse("profiles:attach", args=[h100_run.pk]), {}).status_code == 400


def test_the_comparison_shows_the_changed_kernels_and_the_alert_link(
    team: Any, engineer: Any, other_lead: Any, login_client: Any
) -> None:
    h100 = factories.accelerator_type_from(factories.H100)
    before = factories.run_create(team=team, accelerator_type=h100, started_at=START)
    after = factories.run_create(team=team, accelerator_type=h100, started_at=START.replace(hour=12))
    profile_attach(run=before, files=[("a.json", _trace(seed=3))])
    profile_attach(run=after, files=[("b.json", _trace(seed=3, slow={FLASH: 1.23}))])
    response = login_client(engineer).get(reverse("profiles:compare") + f"?a={before.pk}&b={after.pk}")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-status="slower"' in html and "flash_fwd_kernel" in html and "+23.0%" in html
    scope = scope_for_user(engineer)
    link = profile_change_link(run_a_id=before.pk, run_b_id=after.pk, scope=scope)
    assert link is not None
    assert link["headline"].startswith("void flash_fwd_kernel") and link["headline"].endswith("+23%")
    assert run_ids_with_profiles(run_ids=[before.pk, after.pk, 10**9], scope=scope) == {before.pk, after.pk}
    # Another team's caller learns nothing of these runs' profiles.
    theirs = scope_for_user(other_lead)
    assert profile_change_link(run_a_id=before.pk, run_b_id=after.pk, scope=theirs) is None
    assert run_ids_with_profiles(run_ids=[before.pk, after.pk], scope=theirs) == set()
    assert (
        login_client(other_lead).get(reverse("profiles:compare") + f"?a={before.pk}&b={after.pk}").status_code
        == 404
    )
    assert login_client(engineer).get(reverse("profiles:compare") + "?a=x&b=1").status_code == 400


def test_write_training_trace_streams_gzip_to_disk(tmp_path: Path) -> None:
    written = write_training_trace(tmp_path / "t.json.gz", steps=2, layers=2)
    assert written > 0 and (tmp_path / "t.json.gz").stat().st_size < written


FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"


@pytest.fixture
def media_root(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"


def test_the_upload_page_attaches_a_trace_to_the_run_saved_with_it(
    login_client: Any, engineer: Any, team: Any, media_root: Path
) -> None:
    factories.accelerator_type_from(factories.H100)
    client = login_client(engineer)
    files = [
        SimpleUploadedFile("vllm_2025.json", (FIXTURES / "vllm_2025.json").read_bytes()),
        SimpleUploadedFile("rank0.pt.trace.json.gz", __import__("gzip").compress(_trace(steps=2, layers=2))),
    ]
    preview = client.post(reverse("benchmarks:upload_preview"), {"files": files}).json()
    trace_entry = preview["files"][1]
    assert trace_entry["error"] == "" and trace_entry["runs"] == []
    assert trace_entry["profile"]["format"] == "kineto" and trace_entry["profile"]["steps"] == 2
    response = client.post(
        reverse("benchmarks:upload_save"),
        {"token": preview["token"], "team": team.pk, "r0-accelerator": "H100 SXM 80GB"},
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    run_id = body["runs"][0]["id"]
    profile = Profile.objects.get(run_id=run_id)
    assert profile.uploaded_by == engineer and profile.steps == 2
    assert body["files"][0]["profile_url"] == reverse("profiles:run_profile", args=[run_id])
    # The runs table marks it.
    assert f'href="/runs/{run_id}/profile/"' in client.get(reverse("benchmarks:run_list")).content.decode()


def test_a_trace_alone_on_the_upload_page_is_refused_and_nothing_is_stored(
    login_client: Any, engineer: Any, team: Any, media_root: Path
) -> None:
    client = login_client(engineer)
    preview = client.post(
        reverse("benchmarks:upload_preview"),
        {"files": [SimpleUploadedFile("t.json", _trace(steps=1, layers=1))]},
    ).json()
    response = client.post(reverse("benchmarks:upload_save"), {"token": preview["token"], "team": team.pk})
    assert response.status_code == 422
    assert "saved 0" in response.json()["files"][0]["error"]
    assert not Profile.objects.exists()


def test_a_regression_alert_whose_runs_have_profiles_links_to_their_comparison(
    team: Any, engineer: Any, login_client: Any
) -> None:
    h100 = factories.accelerator_type_from(factories.H100)
    good = factories.run_create(team=team, accelerator_type=h100, started_at=START)
    bad = factories.run_create(team=team, accelerator_type=h100, started_at=START.replace(hour=12))
    profile_attach(run=good, files=[("a.json", _trace(seed=5))])
    profile_attach(run=bad, files=[("b.json", _trace(seed=5, slow={FLASH: 1.23}))])
    alert = factories.alert_create(team=team, title="Throughput down 8%")
    alert.series = bad.metrics.get(name="throughput_tokens_per_s").series
    alert.last_good_run, alert.first_run, alert.pct_change = good, bad, -8.0
    alert.save()
    html = login_client(engineer).get(reverse("alerts:detail", args=[alert.pk])).content.decode()
    assert 'id="profile-change"' in html
    assert f'href="/runs/profiles/compare/?a={good.pk}&amp;b={bad.pk}"' in html
    assert "-8.0%: void flash_fwd_kernel" in html and "+23%" in html
