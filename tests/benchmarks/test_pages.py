"""Benchmark pages: who may see and upload what, filters, detail, compare, and their query budgets."""

from __future__ import annotations

import io
import os
import re
import time
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from scipy import stats

from accelboard.benchmarks.comparison import Observation, metrics_compare
from accelboard.benchmarks.models import BenchmarkRun, MetricValue
from accelboard.benchmarks.templatetags.benchmark_format import sig
from accelboard.benchmarks.upload_services import UploadExpired, upload_load, upload_prune, upload_stash
from tests import factories

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


@pytest.fixture
def runs(team: Any, other_team: Any) -> dict[str, Any]:
    """Team: four H100 runs of one series (main), one L4 run of another model on a feature branch;
    other team: one run that must never show."""
    h100 = factories.accelerator_type_from(factories.H100)
    l4 = factories.accelerator_type_from(factories.L4)
    series = [
        factories.run_create(
            team=team,
            accelerator_type=h100,
            started_at=NOW - timedelta(days=10 - i),
            metrics={"throughput_tokens_per_s": 4800.0 + 50 * i, "latency_p99_ms": 42.0 - i},
            git_commit=f"{'abc' if i == 3 else 'def'}{i:037x}",
        )
        for i in range(4)
    ]
    l4_run = factories.run_create(
        team=team,
        accelerator_type=l4,
        started_at=NOW - timedelta(days=1),
        model="Qwen2.5-7B",
        variant="fp8",
        precision="fp8",
        metrics={"throughput_tokens_per_s": 900.0},
    )
    BenchmarkRun.objects.filter(pk=l4_run.pk).update(branch="feature/fp8")
    other = factories.run_create(team=other_team, accelerator_type=h100, started_at=NOW - timedelta(days=2))
    return {"series": series, "l4": l4_run, "other": other, "h100": h100, "l4_type": l4}


def _ids(response: Any) -> list[int]:
    return [run.pk for run in response.context["page"].object_list]


# --- runs list ----------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["lead", "engineer", "finance"])
def test_it_lists_only_the_members_team_runs(
    login_client: Any, cast: dict[str, Any], runs: dict[str, Any], who: str
) -> None:
    response = login_client(cast[who]).get(reverse("benchmarks:run_list"))
    assert response.status_code == 200
    assert set(_ids(response)) == {r.pk for r in runs["series"]} | {runs["l4"].pk}
    assert runs["other"].pk not in _ids(response)


def test_it_lists_every_team_for_staff(login_client: Any, staff: Any, runs: dict[str, Any]) -> None:
    response = login_client(staff).get(reverse("benchmarks:run_list"))
    assert runs["other"].pk in _ids(response)
    assert len(_ids(response)) == 6


def test_it_filters_by_hardware_model_branch_and_dates(
    login_client: Any, lead: Any, runs: dict[str, Any]
) -> None:
    client = login_client(lead)
    url = reverse("benchmarks:run_list")
    assert _ids(client.get(url, {"hardware": "l4"})) == [runs["l4"].pk]
    assert _ids(client.get(url, {"model": "Qwen2.5-7B"})) == [runs["l4"].pk]
    assert _ids(client.get(url, {"variant": "bf16"})) == [r.pk for r in reversed(runs["series"])]
    assert _ids(client.get(url, {"branch": "feature/fp8"})) == [runs["l4"].pk]
    window = client.get(
        url, {"since": (NOW - timedelta(days=9)).date(), "until": (NOW - timedelta(days=8)).date()}
    )
    assert _ids(window) == [runs["series"][2].pk, runs["series"][1].pk]


def test_it_searches_commit_prefix_branch_and_model(
    login_client: Any, lead: Any, runs: dict[str, Any]
) -> None:
    client = login_client(lead)
    url = reverse("benchmarks:run_list")
    assert _ids(client.get(url, {"q": "abc"})) == [runs["series"][3].pk]
    assert _ids(client.get(url, {"q": "fp8"})) == [runs["l4"].pk]
    assert _ids(client.get(url, {"q": "qwen"})) == [runs["l4"].pk]


def test_it_does_not_offer_or_accept_another_teams_values(
    login_client: Any, lead: Any, runs: dict[str, Any]
) -> None:
    response = login_client(lead).get(reverse("benchmarks:run_list"), {"team": "research"})
    # "research" is not among the lead's choices: a 400 naming the field, not the other team's runs.
    assert response.status_code == 400
    assert response.context["form"].errors["team"]
    assert b"team: Select a valid choice" in response.content


def test_it_rejects_a_reversed_date_range(login_client: Any, lead: Any, runs: dict[str, Any]) -> None:
    response = login_client(lead).get(
        reverse("benchmarks:run_list"), {"since": "2026-03-10", "until": "2026-03-01"}
    )
    assert response.status_code == 400
    assert "until" in response.context["form"].errors


def test_it_paginates_keeping_the_filters(login_client: Any, lead: Any, team: Any) -> None:
    h100 = factories.accelerator_type_from(factories.H100)
    for i in range(55):
        factories.run_create(team=team, accelerator_type=h100, started_at=NOW - timedelta(hours=i))
    response = login_client(lead).get(
        reverse("benchmarks:run_list"), {"hardware": "h100-sxm-80gb", "page": 2}
    )
    assert response.status_code == 200
    assert len(_ids(response)) == 5
    assert b"hardware=h100-sxm-80gb&amp;page=1" in response.content


def test_it_says_why_the_list_is_empty(login_client: Any, engineer: Any, outsider: Any, finance: Any) -> None:
    response = login_client(engineer).get(reverse("benchmarks:run_list"))
    assert b"No runs yet" in response.content
    assert b"Upload a benchmark file" in response.content
    response = login_client(outsider).get(reverse("benchmarks:run_list"))
    assert b"You are not in a team yet" in response.content


def test_it_lists_runs_within_a_fixed_query_budget(
    login_client: Any, lead: Any, team: Any, django_assert_max_num_queries: Any
) -> None:
    h100 = factories.accelerator_type_from(factories.H100)
    for i in range(30):
        factories.run_create(
            team=team, accelerator_type=h100, started_at=NOW - timedelta(hours=i), model=f"m{i % 5}"
        )
    client = login_client(lead)
    # session, user, teams, 5 filter choice lists, upload roles, count, page: not one per run.
    with django_assert_max_num_queries(14):
        response = client.get(reverse("benchmarks:run_list"), {"q": "m"})
    assert len(_ids(response)) == 30


# --- run detail ---------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["lead", "engineer", "finance", "staff"])
def test_it_shows_a_run_to_its_team_and_staff(
    login_client: Any, cast: dict[str, Any], runs: dict[str, Any], who: str
) -> None:
    run = runs["series"][3]
    response = login_client(cast[who]).get(reverse("benchmarks:run_detail", args=[run.pk]))
    assert response.status_code == 200
    assert [row["value"].name for row in response.context["rows"]] == [
        "latency_p99_ms",
        "throughput_tokens_per_s",
    ]


@pytest.mark.parametrize("who", ["outsider", "other_lead"])
def test_it_hides_another_teams_run(
    login_client: Any, cast: dict[str, Any], runs: dict[str, Any], who: str
) -> None:
    client = login_client(cast[who])
    run = runs["series"][0]
    assert client.get(reverse("benchmarks:run_detail", args=[run.pk])).status_code == 404
    assert client.get(reverse("benchmarks:run_raw", args=[run.pk])).status_code == 404
    assert client.get(reverse("benchmarks:compare_baseline", args=[run.pk])).status_code == 404


def test_it_charts_each_series_history_up_to_the_run(
    login_client: Any, lead: Any, runs: dict[str, Any]
) -> None:
    run = runs["series"][2]
    response = login_client(lead).get(reverse("benchmarks:run_detail", args=[run.pk]))
    row = next(r for r in response.context["rows"] if r["value"].name == "throughput_tokens_per_s")
    figure = row["figure"]
    # Three points (the runs up to this one, not the later fourth), this run highlighted.
    assert figure["data"][0]["y"] == [4800.0, 4850.0, 4900.0]
    assert figure["data"][1]["y"] == [4900.0]
    assert figure["layout"]["yaxis"]["title"]["text"] == "Value (tokens/s)"
    assert figure["layout"]["xaxis"]["title"]["text"] == "Run start (UTC)"
    assert f'id="{row["figure_id"]}"' in response.content.decode()


def test_it_shows_a_run_within_a_fixed_query_budget(
    login_client: Any, lead: Any, runs: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    client = login_client(lead)
    with django_assert_max_num_queries(14):
        response = client.get(reverse("benchmarks:run_detail", args=[runs["series"][3].pk]))
    assert response.status_code == 200


def test_it_says_there_is_no_raw_file_for_a_json_run(
    login_client: Any, lead: Any, runs: dict[str, Any]
) -> None:
    response = login_client(lead).get(reverse("benchmarks:run_raw", args=[runs["series"][0].pk]))
    assert response.status_code == 404


# --- compare ------------------------------------------------------------------------------------


def test_it_compares_two_runs_with_direction_aware_verdicts(
    login_client: Any, lead: Any, runs: dict[str, Any]
) -> None:
    a, b = runs["series"][0], runs["series"][3]
    response = login_client(lead).get(reverse("benchmarks:compare"), {"a": a.pk, "b": b.pk})
    assert response.status_code == 200
    rows = {item["row"].metric: item["row"] for item in response.context["rows"]}
    throughput, latency = rows["throughput_tokens_per_s"], rows["latency_p99_ms"]
    assert throughput.delta == pytest.approx(150.0)
    assert throughput.change_pct == pytest.approx(150 / 4800 * 100)
    assert throughput.verdict == "better"
    # Latency fell from 42 to 39 ms: lower is better, so also green.
    assert latency.delta == pytest.approx(-3.0)
    assert latency.verdict == "better"
    # One run a side and no repeated samples: no test, so nothing is coloured.
    assert throughput.p_value is None and "needs" in throughput.test_note and throughput.too_few
    assert not throughput.flagged
    html = response.content.decode()
    assert 'class="verdict-better"' not in html and "Too few runs to tell." in html
    # Same series on both sides: no warning about comparing different setups.
    assert response.context["differs"] == []


def test_it_warns_when_the_sides_are_different_setups(
    login_client: Any, lead: Any, runs: dict[str, Any]
) -> None:
    response = login_client(lead).get(
        reverse("benchmarks:compare"), {"a": runs["series"][0].pk, "b": runs["l4"].pk}
    )
    assert response.context["differs"] == [
        "model (Llama-3.1-8B vs Qwen2.5-7B)",
        "variant (bf16 vs fp8)",
        "hardware (1× H100 SXM 80GB vs 1× L4)",
    ]
    assert 'id="compare-differs"' in response.content.decode()


def test_it_runs_welchs_test_on_the_logs_of_sets_of_runs(
    login_client: Any, lead: Any, runs: dict[str, Any]
) -> None:
    ids = [r.pk for r in runs["series"]]
    response = login_client(lead).get(
        reverse("benchmarks:compare"), {"a": f"{ids[0]},{ids[1]}", "b": f"{ids[2]},{ids[3]}"}
    )
    rows = {item["row"].metric: item["row"] for item in response.context["rows"]}
    row = rows["throughput_tokens_per_s"]
    a = [v.value for v in MetricValue.objects.filter(run_id__in=ids[:2], name=row.metric)]
    b = [v.value for v in MetricValue.objects.filter(run_id__in=ids[2:], name=row.metric)]
    assert row.method == "welch-log"
    assert row.p_value == pytest.approx(stats.ttest_ind(np.log(b), np.log(a), equal_var=False).pvalue)
    assert row.value_a == pytest.approx(4825.0)
    lo, hi = row.interval_pct
    assert lo < row.change_pct < hi


def test_it_uses_a_runs_repeated_samples(login_client: Any, lead: Any, runs: dict[str, Any]) -> None:
    a, b = runs["series"][0], runs["series"][1]
    before, after = [42.0, 42.5, 41.8, 42.2, 42.1, 41.9], [45.0, 45.2, 44.8, 45.5, 44.9, 45.1]
    MetricValue.objects.filter(run=a, name="latency_p99_ms").update(samples=before, value=np.mean(before))
    MetricValue.objects.filter(run=b, name="latency_p99_ms").update(samples=after, value=np.mean(after))
    response = login_client(lead).get(reverse("benchmarks:compare"), {"a": a.pk, "b": b.pk})
    row = next(item["row"] for item in response.context["rows"] if item["row"].metric == "latency_p99_ms")
    assert row.observations_a == 6 and row.observations_b == 6
    assert row.p_value == pytest.approx(
        stats.ttest_ind(np.log(after), np.log(before), equal_var=False).pvalue
    )
    # +7% latency, far outside the noise: flagged as worse.
    assert row.significant and row.flagged and row.verdict == "worse"


def test_it_colours_only_changes_that_are_real_and_large_enough() -> None:
    def side(run: int, values: list[float]) -> list[Observation]:
        return [
            Observation(run_id=run + i, metric="throughput", value=v, unit="tokens/s", direction="higher")
            for i, v in enumerate(values)
        ]

    # A 12% drop under 1.5% noise, 3 runs a side: flagged.
    drop = metrics_compare(side_a=side(1, [100.0, 101.5, 98.6]), side_b=side(10, [88.4, 87.1, 89.2]))[0]
    assert drop.flagged and drop.verdict == "worse" and drop.interval_pct[1] < 0
    # A tiny but consistent change: significant, below the 2% minimum effect, left plain.
    tiny = metrics_compare(side_a=side(1, [100.0, 100.01, 99.99]), side_b=side(10, [100.5, 100.51, 100.49]))[
        0
    ]
    assert tiny.significant and not tiny.flagged and "minimum effect" in tiny.test_note
    # Noise: +0.06% on 1.5% noise, plain and not "too few" (the interval rules out big changes).
    noise = metrics_compare(side_a=side(1, [100.0, 101.5, 98.6]), side_b=side(10, [99.1, 101.9, 99.3]))[0]
    assert not noise.flagged and not noise.significant
    # Two runs a side with 10% noise: too few to tell, said plainly.
    wide = metrics_compare(side_a=side(1, [100.0, 112.0]), side_b=side(10, [93.0, 104.0]))[0]
    assert wide.too_few and not wide.flagged and "fits these 2 vs 2" in wide.test_note


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"a": "1"}, "b: give one run id"),
        ({"a": "x", "b": "1"}, "a: &#x27;x&#x27; is not a run id"),
        ({"a": "1,1", "b": "2"}, "a: a run is listed twice"),
    ],
)
def test_it_rejects_malformed_compare_ids(
    login_client: Any, lead: Any, query: dict[str, str], message: str
) -> None:
    response = login_client(lead).get(reverse("benchmarks:compare"), query)
    assert response.status_code == 400
    assert message in response.content.decode()


def test_it_refuses_to_compare_another_teams_run(login_client: Any, lead: Any, runs: dict[str, Any]) -> None:
    response = login_client(lead).get(
        reverse("benchmarks:compare"), {"a": runs["series"][0].pk, "b": runs["other"].pk}
    )
    assert response.status_code == 404


def test_it_compares_a_run_with_its_baseline(login_client: Any, lead: Any, runs: dict[str, Any]) -> None:
    run = runs["series"][3]
    response = login_client(lead).get(reverse("benchmarks:compare_baseline", args=[run.pk]))
    ids = ",".join(str(r.pk) for r in runs["series"][:3])
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('benchmarks:compare')}?a={ids}&b={run.pk}"
    first = login_client(lead).get(reverse("benchmarks:compare_baseline", args=[runs["l4"].pk]))
    assert b"No baseline yet" in first.content


def test_it_compares_sets_within_a_fixed_query_budget(
    login_client: Any, lead: Any, runs: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    ids = [r.pk for r in runs["series"]]
    client = login_client(lead)
    with django_assert_max_num_queries(6):
        response = client.get(
            reverse("benchmarks:compare"), {"a": f"{ids[0]},{ids[1]}", "b": f"{ids[2]},{ids[3]}"}
        )
    assert response.status_code == 200


def test_it_marks_a_metric_only_on_one_side() -> None:
    a = [Observation(run_id=1, metric="accuracy", value=0.8, unit="score", direction="higher")]
    b = [Observation(run_id=2, metric="energy_j", value=10.0, unit="J", direction="lower")]
    rows = {row.metric: row for row in metrics_compare(side_a=a, side_b=b)}
    assert rows["accuracy"].notes == ["only in A"] and rows["accuracy"].verdict == "missing"
    assert rows["energy_j"].notes == ["only in B"]


# --- upload permissions -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "status"), [("lead", 200), ("engineer", 200), ("staff", 200), ("finance", 403), ("outsider", 403)]
)
def test_it_lets_only_engineers_and_leads_upload(
    login_client: Any, cast: dict[str, Any], who: str, status: int
) -> None:
    client = login_client(cast[who])
    assert client.get(reverse("benchmarks:upload")).status_code == status
    if status == 403:
        assert client.post(reverse("benchmarks:upload_preview")).status_code == 403
        assert client.post(reverse("benchmarks:upload_save")).status_code == 403


# --- upload: preview and save -------------------------------------------------------------------

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def _upload(name: str, data: bytes | None = None) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data if data is not None else (FIXTURES / name).read_bytes())


def test_it_previews_each_run_and_each_files_error_without_storing_a_run(
    login_client: Any, engineer: Any, media: Path
) -> None:
    client = login_client(engineer)
    response = client.post(
        reverse("benchmarks:upload_preview"),
        {"files": [_upload("vllm_2025.json"), _upload("broken.json", b'{"model_id": ')]},
    )
    assert response.status_code == 200
    body = response.json()
    good, bad = body["files"]
    (run,) = body["runs"]
    assert run["files"] == ["vllm_2025.json"] and good["runs"] == [0]
    assert run["format"] == "vllm-serving"
    assert run["model"] == "Qwen2.5-7B-Instruct-FP8-dynamic"
    # Not in the catalogue and close to nothing: a new model, its -FP8-dynamic suffix the variant.
    model = run["identity"]["model"]
    assert (model["name"], model["how"], model["suffix"]) == ("Qwen2.5-7B-Instruct", "new", "FP8-dynamic")
    assert run["precision"] == "fp8"
    assert {m["name"]: m["value"] for m in run["metrics"]}["throughput_tokens_per_s"] == 1267.2
    assert [m["field"] for m in run["missing"]] == ["accelerator"]
    assert good["error"] == ""
    assert bad["runs"] == [] and "broken.json" in bad["error"]
    assert BenchmarkRun.objects.count() == 0
    # The bytes wait under MEDIA_ROOT/tmp/<token> for the save step.
    assert (media / "tmp" / body["token"] / "0.bin").read_bytes() == (
        FIXTURES / "vllm_2025.json"
    ).read_bytes()


def test_it_saves_with_the_hardware_the_uploader_filled_in(
    login_client: Any, engineer: Any, team: Any, media: Path
) -> None:
    factories.accelerator_type_from(factories.H100)
    client = login_client(engineer)
    token = client.post(reverse("benchmarks:upload_preview"), {"files": [_upload("vllm_2025.json")]}).json()[
        "token"
    ]
    response = client.post(
        reverse("benchmarks:upload_save"),
        {
            "token": token,
            "team": team.pk,
            "r0-accelerator": "H100 SXM 80GB",
            "r0-accelerator_count": "2",
            "r0-git_commit": "a1b2c3d4",
            "r0-branch": "main",
        },
    )
    assert response.status_code == 200, response.json()
    saved = response.json()["runs"]
    run = BenchmarkRun.objects.get(pk=saved[0]["id"])
    assert saved[0]["url"] == f"/runs/{run.pk}/"
    assert (run.accelerator_match, run.model_match) == ("user", "new")
    assert (run.team, run.uploaded_by, run.uploaded_via) == (team, engineer, "web")
    assert (run.accelerator_type.name, run.accelerator_count) == ("H100 SXM 80GB", 2)
    assert (run.git_commit, run.branch) == ("a1b2c3d4", "main")
    assert run.field_sources["hardware.accelerator"] == "user"
    assert run.raw_file.read() == (FIXTURES / "vllm_2025.json").read_bytes()
    # Saved: the stash is gone, and the run page serves the raw file back.
    assert not (media / "tmp" / token).exists()
    raw = client.get(reverse("benchmarks:run_raw", args=[run.pk]))
    assert b"".join(raw.streaming_content) == (FIXTURES / "vllm_2025.json").read_bytes()
    assert raw["Content-Disposition"] == 'attachment; filename="vllm_2025.json"'


def test_it_names_the_missing_field_and_keeps_the_files_for_a_retry(
    login_client: Any, engineer: Any, team: Any, media: Path
) -> None:
    factories.accelerator_type_from(factories.H100)
    client = login_client(engineer)
    token = client.post(reverse("benchmarks:upload_preview"), {"files": [_upload("vllm_2025.json")]}).json()[
        "token"
    ]
    response = client.post(reverse("benchmarks:upload_save"), {"token": token, "team": team.pk})
    assert response.status_code == 422
    assert "accelerator" in response.json()["runs"][0]["error"]
    assert BenchmarkRun.objects.count() == 0
    retry = client.post(
        reverse("benchmarks:upload_save"),
        {"token": token, "team": team.pk, "r0-accelerator": "H100 SXM 80GB"},
    )
    assert retry.status_code == 200
    assert BenchmarkRun.objects.count() == 1


def test_it_rejects_a_bad_override_by_field(login_client: Any, engineer: Any, team: Any, media: Path) -> None:
    client = login_client(engineer)
    token = client.post(reverse("benchmarks:upload_preview"), {"files": [_upload("vllm_2025.json")]}).json()[
        "token"
    ]
    response = client.post(
        reverse("benchmarks:upload_save"), {"token": token, "team": team.pk, "r0-git_commit": "not a sha!"}
    )
    assert response.status_code == 422
    assert response.json()["runs"][0]["error"] == "git_commit: expected a hex commit id"
    assert BenchmarkRun.objects.count() == 0


def test_it_stores_each_run_of_a_file_all_or_nothing_and_keeps_the_saved_ones(
    login_client: Any, engineer: Any, team: Any, media: Path
) -> None:
    client = login_client(engineer)
    token = client.post(
        reverse("benchmarks:upload_preview"), {"files": [_upload("pytest_benchmark.json")]}
    ).json()["token"]
    factories.accelerator_type_from(factories.L4)
    # Two runs in one file, the second lacking precision: it is refused, the first is stored.
    first = client.post(
        reverse("benchmarks:upload_save"),
        {"token": token, "team": team.pk, "r0-accelerator": "L4", "r1-accelerator": "L4"},
    )
    assert first.status_code == 422
    kept, refused = first.json()["runs"]
    assert kept["error"] == "" and "precision" in refused["error"] and refused["id"] is None
    assert BenchmarkRun.objects.count() == 1
    data = {
        "token": token,
        "team": team.pk,
        "r1-precision": "fp16",
        "r0-accelerator": "L4",
        "r1-accelerator": "L4",
    }
    saved = client.post(reverse("benchmarks:upload_save"), data)
    assert saved.status_code == 200, saved.json()
    assert BenchmarkRun.objects.count() == 2
    # A second click on Save after success finds the files gone and stores nothing more.
    again = client.post(reverse("benchmarks:upload_save"), data)
    assert again.status_code == 400 and again.json()["error"].startswith("token:")
    assert BenchmarkRun.objects.count() == 2


def test_it_refuses_another_users_token_and_a_foreign_team(
    login_client: Any, engineer: Any, lead: Any, team: Any, other_team: Any, media: Path
) -> None:
    token = (
        login_client(engineer)
        .post(reverse("benchmarks:upload_preview"), {"files": [_upload("vllm_2025.json")]})
        .json()["token"]
    )
    lead_client = login_client(lead)
    stolen = lead_client.post(reverse("benchmarks:upload_save"), {"token": token, "team": team.pk})
    assert stolen.status_code == 400 and stolen.json()["error"].startswith("token:")
    foreign = login_client(engineer).post(
        reverse("benchmarks:upload_save"), {"token": token, "team": other_team.pk}
    )
    assert foreign.status_code == 400 and foreign.json()["error"].startswith("team:")
    assert BenchmarkRun.objects.count() == 0


def test_it_asks_for_files(login_client: Any, engineer: Any, media: Path) -> None:
    response = login_client(engineer).post(reverse("benchmarks:upload_preview"))
    assert response.status_code == 400
    assert response.json()["error"] == "files: choose at least one file"


def test_it_enforces_csrf_on_the_upload_endpoints(engineer: Any, media: Path) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(engineer)
    response = client.post(reverse("benchmarks:upload_preview"), {"files": [_upload("vllm_2025.json")]})
    assert response.status_code == 403
    assert not (media / "tmp").exists()


def test_it_previews_an_archive_of_a_results_directory(login_client: Any, engineer: Any, media: Path) -> None:
    root = FIXTURES / "mlperf"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(root).as_posix())
    response = login_client(engineer).post(
        reverse("benchmarks:upload_preview"), {"files": [_upload("acme-results.zip", buffer.getvalue())]}
    )
    assert response.status_code == 200
    body = response.json()
    entry = body["files"][0]
    assert entry["error"] == "" and entry["runs"] == [0]
    assert {run["format"] for run in body["runs"]} == {"mlperf-inference"}
    assert all(run["metrics"] and run["files"] == ["acme-results.zip"] for run in body["runs"])
    assert BenchmarkRun.objects.count() == 0


def test_it_prunes_abandoned_uploads_only(engineer: Any, media: Path) -> None:
    old = upload_stash(user_id=engineer.pk, files=[("a.json", b"{}")])
    fresh = upload_stash(user_id=engineer.pk, files=[("b.json", b"{}")])
    day_ago = time.time() - 25 * 3600
    os.utime(media / "tmp" / old, (day_ago, day_ago))
    assert upload_prune() == 1
    assert not (media / "tmp" / old).exists()
    assert [f.name for f in upload_load(token=fresh, user_id=engineer.pk)] == ["b.json"]
    with pytest.raises(UploadExpired):
        upload_load(token="../../etc", user_id=engineer.pk)


@pytest.mark.parametrize(
    ("value", "sign", "text"),
    [
        (8.7, "", "8.7"),
        (1267.2, "", "1,267.2"),
        (15_500_250_000.0, "", "15,500,250,000"),
        (0.000123, "", "0.000123"),
        (-200.0, "+", "-200"),
        (60.0, "+", "+60"),
        (None, "", "—"),
    ],
)
def test_it_formats_values_to_significant_digits(value: Any, sign: str, text: str) -> None:
    assert sig(value, sign) == text


def test_it_shows_memory_in_gib_and_what_the_run_cost_at_which_price(
    login_client: Any, lead: Any, other_lead: Any, team: Any
) -> None:
    # The run page once read "Peak memory 76,339,878,590 bytes" over a chart axis of "76.5B", and
    # said nothing of the run's cost or of the price row behind it.
    from decimal import Decimal

    from accelboard.costs.models import AcceleratorPrice
    from accelboard.costs.run_cost_services import run_cost_compute

    h100 = factories.accelerator_type_from(factories.H100)
    AcceleratorPrice.objects.create(
        accelerator_type=h100,
        accelerator_count=8,
        provider="aws",
        instance_type="p5.48xlarge",
        price_per_hour=Decimal("54.0800"),
        source="aws price list (test)",
        fetched_on=NOW.date(),
        valid_from=NOW.date() - timedelta(days=400),
    )
    host, _ = factories.host_create(team=team, gpus=8)
    host.provider, host.instance_type = "aws", "p5.48xlarge"
    host.save(update_fields=["provider", "instance_type"])
    runs = [
        factories.run_create(
            team=team,
            accelerator_type=h100,
            host=host,
            started_at=NOW - timedelta(days=3 - i),
            metrics={
                "throughput_tokens_per_s": 5000.0,
                "memory_peak_bytes": 76_339_878_590 + i * 2**28,
                "power_avg_w": 600.0,
            },
        )
        for i in range(3)
    ]
    for run in runs:
        run_cost_compute(run=run, today=NOW.date())
    response = login_client(lead).get(reverse("benchmarks:run_detail", args=[runs[-1].pk]))
    body = response.content.decode()
    row = body.split('data-metric="memory_peak_bytes"')[1].split("</tr>")[0]
    assert "71.6 GiB" in row and "<td>GiB</td>" in row and "76,876" not in row
    chart = next(r["figure"] for r in response.context["rows"] if r["value"].name == "memory_peak_bytes")
    assert chart["layout"]["yaxis"]["title"]["text"] == "Value (GiB)"
    assert max(chart["data"][0]["y"]) == pytest.approx((76_339_878_590 + 2 * 2**28) / 2**30)
    # 6.76 USD per GPU-hour (54.08 / 8) for 5,000 tokens/s: 6.76 / 3600 / 5000 × 1e6 = 0.3756 per 1M.
    card = body.split('id="run-cost"')[1].split("</div>")[0]
    assert "Per 1M tokens" in card
    assert "0.3756 USD" in card.split('data-cost="capacity"')[1]
    assert "6.76 USD/GPU-hour · aws p5.48xlarge on-demand" in card
    assert "(54.08 USD/h for 8 GPUs)" in card
    assert "aws price list (test)" in card


def test_it_writes_the_run_cost_and_its_parts_to_one_precision_that_adds_up(
    login_client: Any, lead: Any, team: Any
) -> None:
    # The cost card read "0.07 USD" over parts of "0.06509" and "0.004908": each figure written
    # to its own precision, so the parts did not visibly add up to the total.
    from decimal import Decimal

    from django.utils import timezone

    from accelboard.costs.models import RunCost

    run = factories.run_create(team=team, metrics={"throughput_tokens_per_s": 5000.0})
    RunCost.objects.create(
        run=run, unit="token", currency="USD", computed_at=timezone.now(),
        capacity_cost_per_1m=Decimal("0.065094"), energy_cost_per_1m=Decimal("0.004908"),
        total_cost_per_1m=Decimal("0.070002"),
    )  # fmt: skip
    body = login_client(lead).get(reverse("benchmarks:run_detail", args=[run.pk])).content.decode()
    card = body.split('id="run-cost"')[1].split("</dl>")[0]
    figures = {
        part: re.search(rf'data-cost="{part}">(?:<strong>)?([0-9.,]+) USD', card).group(1)  # type: ignore[union-attr]
        for part in ("total", "capacity", "energy")
    }
    assert figures == {"total": "0.07000", "capacity": "0.06509", "energy": "0.00491"}
    assert Decimal(figures["capacity"]) + Decimal(figures["energy"]) == Decimal(figures["total"])


def test_it_shows_runs_as_a_table_with_metric_columns_sorts_and_ticks_to_compare(
    login_client: Any, lead: Any, runs: dict[str, Any]
) -> None:
    # The runs list had no metric columns, no sort, and runs to compare had to be typed as ids.
    client = login_client(lead)
    url = reverse("benchmarks:run_list")
    response = client.get(url)
    columns = [c["name"] for c in response.context["columns"]]
    assert columns == ["throughput_tokens_per_s", "latency_p99_ms"]  # what the runs carry, most common first
    html = response.content.decode()
    assert "Output tokens per second" in html and '<span class="unit">tokens/s</span>' in html
    series = runs["series"]
    # Sort by p99 latency, lowest first: 39, 40, 41, 42 ms; the L4 run has none and comes last.
    ordered = client.get(url, {"sort": "m:latency_p99_ms"})
    assert _ids(ordered) == [series[3].pk, series[2].pk, series[1].pk, series[0].pk, runs["l4"].pk]
    row = ordered.context["rows"][0]
    assert row["metrics"] == ["4,950", "39.0"]  # one format per column: 39.0 beside 42.0
    # Picking columns: only throughput, sorted descending.
    picked = client.get(url, {"col": "throughput_tokens_per_s", "sort": "-m:throughput_tokens_per_s"})
    assert [c["name"] for c in picked.context["columns"]] == ["throughput_tokens_per_s"]
    assert _ids(picked)[0] == series[3].pk
    # Tick two runs and compare: A the older, B the newer.
    compare = client.get(url, {"tick": [series[3].pk, series[0].pk], "compare": "1"})
    assert compare.status_code == 302
    assert compare["Location"] == f"{reverse('benchmarks:compare')}?a={series[0].pk}&b={series[3].pk}"
    # Another team's run ticked counts as not ticked; one run is not a comparison.
    one = client.get(url, {"tick": [series[0].pk, runs["other"].pk], "compare": "1"})
    assert one.status_code == 200 and 'id="compare-message"' in one.content.decode()
    # A sort that is no column is a 400 naming the parameter.
    bad = client.get(url, {"sort": "password"})
    assert bad.status_code == 400 and b"sort:" in bad.content
