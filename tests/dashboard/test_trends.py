"""The trends page: change points, baseline band, alerts and expected changes on the chart; who may
see which series; the pickers' redirect to a shareable address and its round trip; bad input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
from django.urls import reverse

from accelboard.alerts.models import DetectionSetting
from accelboard.alerts.services import alert_mark_expected
from accelboard.benchmarks.models import Series
from accelboard.dashboard import trends_charts
from accelboard.testing.plotly import trace_values
from tests import factories

pytestmark = pytest.mark.django_db

START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
BEFORE, AFTER = 4890.0, 4200.0  # tokens/s: a 14% drop at run 10


def _values(n: int = 20, step_at: int = 10, seed: int = 1) -> list[float]:
    rng = np.random.default_rng(seed)
    return [round((BEFORE if i < step_at else AFTER) + float(rng.normal(0, 15)), 1) for i in range(n)]


def _history(
    team: Any,
    accel_type: Any,
    values: list[float],
    *,
    metric: str = "throughput_tokens_per_s",
    model: str = "Llama-3.1-8B",
) -> tuple[Series, list[Any]]:
    runs = [
        factories.run_create(
            team=team,
            accelerator_type=accel_type,
            model=model,
            started_at=START + timedelta(days=i),
            metrics={metric: value},
        )
        for i, value in enumerate(values)
    ]
    series = Series.objects.get(team=team, metric=metric, workload__variant__model__name=model)
    return series, runs


@pytest.fixture
def h100(db: None) -> Any:
    return factories.accelerator_type_from(factories.H100)


@pytest.fixture
def stepped(team: Any, h100: Any) -> dict[str, Any]:
    """Team: 20 daily throughput results with a step down at run 10, and an alert on that run."""
    series, runs = _history(team, h100, _values())
    alert = factories.alert_create(team=team, severity="critical", title="Throughput down 14%")
    alert.series, alert.first_run = series, runs[10]
    alert.save(update_fields=["series", "first_run"])
    return {"series": series, "runs": runs, "alert": alert}


def _traces(figure: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [trace for trace in figure["data"] if trace.get("meta", {}).get("role") == role]


# --- pure parts ---------------------------------------------------------------------------------


def test_it_finds_the_step_and_puts_the_baseline_on_the_current_segment() -> None:
    values = _values()
    times = [START + timedelta(days=i) for i in range(len(values))]
    cps = trends_charts.change_points(values, direction="higher", min_effect=None)
    assert [cp.index for cp in cps] == [10]
    assert cps[0].kind == "regression"
    view = trends_charts.baseline_current(times=times, values=values, cps=cps, resets=[])
    assert view is not None and not view.held
    baseline = view.baseline
    assert baseline.start == 10 and baseline.end == len(values) - 1
    assert baseline.level == pytest.approx(float(np.median(values[10:])))
    assert 0 < baseline.spread < 40
    # An expected change after the step starts the baseline again from there.
    moved = trends_charts.baseline_current(times=times, values=values, cps=cps, resets=[times[15]])
    assert moved is not None and moved.baseline.start == 15


def test_it_holds_the_baseline_before_an_open_regression() -> None:
    values = _values()
    times = [START + timedelta(days=i) for i in range(len(values))]
    cps = trends_charts.change_points(values, direction="higher", min_effect=None)
    alert = {"kind": "regression", "state": "open", "first_index": 10, "reverted_index": None}
    for state in ("open", "acknowledged"):
        view = trends_charts.baseline_current(
            times=times, values=values, cps=cps, resets=[], alerts=[{**alert, "state": state}]
        )
        assert view is not None and view.held_at == 10
        assert (view.baseline.start, view.baseline.end) == (0, 9)
        assert view.baseline.level == pytest.approx(float(np.median(values[:10])))
        assert (view.current.start, view.current.end) == (10, len(values) - 1)
    # Resolved, dismissed, or accepted as expected: the new level is the baseline again.
    for state in ("resolved", "dismissed"):
        view = trends_charts.baseline_current(
            times=times, values=values, cps=cps, resets=[], alerts=[{**alert, "state": state}]
        )
        assert view is not None and not view.held and view.baseline.start == 10
    view = trends_charts.baseline_current(
        times=times, values=values, cps=cps, resets=[times[10]], alerts=[alert]
    )
    assert view is not None and not view.held and view.baseline.start == 10


@pytest.mark.parametrize(
    ("requested", "units", "used"),
    [
        ("", ["tokens/s"], "shared"),
        ("", ["tokens/s", "tokens/s"], "shared"),
        ("", ["tokens/s", "ms"], "axes"),
        ("", ["tokens/s", "ms", "W"], "normalised"),
        ("shared", ["tokens/s", "ms"], "axes"),  # one axis for two units would mislead
        ("axes", ["tokens/s", "ms", "W"], "normalised"),
        ("normalised", ["tokens/s"], "normalised"),
    ],
)
def test_it_chooses_axes_by_units(requested: str, units: list[str], used: str) -> None:
    assert trends_charts.scale_resolve(requested=requested, units=units) == used


# --- the page -----------------------------------------------------------------------------------


def test_it_marks_change_points_alerts_and_the_baseline_band(
    login_client: Any, lead: Any, stepped: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    series, runs, alert = stepped["series"], stepped["runs"], stepped["alert"]
    client = login_client(lead)
    # Session, user, teams, choices, series, points, alerts, expected changes, thresholds.
    with django_assert_max_num_queries(9):
        response = client.get(reverse("dashboard:trends"), {"series": series.pk})
    assert response.status_code == 200
    figure = response.context["figure"]
    (line,) = _traces(figure, "series")
    assert trace_values(line["y"]) == _values()
    (cps,) = _traces(figure, "change-points")
    step_time = runs[10].started_at.isoformat()
    assert cps["x"] == [step_time]
    assert cps["marker"]["color"] == [trends_charts.WORSE]  # throughput down: a regression, red
    # The alert on the step is open: the baseline stays at the level before it, over the results
    # before it, and the regressed level is drawn apart over its own results.
    (band,) = _traces(figure, "baseline")
    assert band["fill"] == "toself"
    assert (min(band["x"]), max(band["x"])) == (
        runs[0].started_at.isoformat(),
        runs[9].started_at.isoformat(),
    )
    level = float(np.median(_values()[:10]))
    assert min(band["y"]) < level < max(band["y"])
    (median,) = _traces(figure, "baseline-level")
    assert median["y"] == [level, level]
    (current,) = _traces(figure, "current-level")
    assert current["x"] == [step_time, runs[-1].started_at.isoformat()]
    assert current["y"][0] == pytest.approx(float(np.median(_values()[10:])))
    (summary,) = response.context["rows"]
    assert summary[1]["baseline"].level == level
    assert summary[1]["current"].level == current["y"][0]
    (alerts,) = _traces(figure, "alerts")
    assert alerts["x"] == [step_time]
    assert alerts["customdata"][0].endswith(f"alert-{alert.pk}") or alerts["customdata"][0].endswith(
        f"/{alert.pk}/"
    )
    assert figure["layout"]["yaxis"]["title"]["text"] == "Value (tokens/s)"
    assert figure["layout"]["xaxis"]["rangeslider"]["visible"] is True
    html = response.content.decode()
    assert 'id="trend-figure"' in html
    assert f'data-alert="{alert.pk}"' in html


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
def test_it_shows_a_series_only_to_its_team_and_staff(
    login_client: Any, cast: dict[str, Any], stepped: dict[str, Any], who: str, status: int
) -> None:
    response = login_client(cast[who]).get(reverse("dashboard:trends"), {"series": stepped["series"].pk})
    assert response.status_code == status


def test_it_redirects_the_pickers_to_a_shareable_address_that_round_trips(
    login_client: Any, lead: Any, stepped: dict[str, Any], h100: Any, team: Any
) -> None:
    series = stepped["series"]
    latency, _ = _history(
        team, h100, [41.5 + i * 0.1 for i in range(12)], metric="latency_p99_ms", model="Qwen3-8B"
    )
    client = login_client(lead)
    response = client.get(
        reverse("dashboard:trends"),
        {"model": "Llama-3.1-8B", "metric": "throughput_tokens_per_s", "scale": "normalised"},
    )
    assert response.status_code == 302
    assert parse_qs(urlsplit(response["Location"]).query) == {
        "series": [str(series.pk)],
        "scale": ["normalised"],
    }
    # "Add to chart" keeps what is drawn and adds the match.
    response = client.get(
        reverse("dashboard:trends"),
        {"series": series.pk, "model": "Qwen3-8B", "metric": "latency_p99_ms", "add": "1"},
    )
    assert parse_qs(urlsplit(response["Location"]).query) == {"series": [str(series.pk), str(latency.pk)]}
    # The address carries series, scale and zoom; the page draws exactly that and offers it back.
    query = f"?series={series.pk}&series={latency.pk}&scale=normalised&from=2026-01-05&to=2026-01-15T12%3A00"
    response = client.get(reverse("dashboard:trends") + query)
    assert response.status_code == 200
    figure = response.context["figure"]
    assert [t["name"] for t in _traces(figure, "series")] == [
        "Llama-3.1-8B bf16 · Output tokens per second (tokens/s) · 1× H100 SXM 80GB",
        "Qwen3-8B bf16 · p99 latency (ms) · 1× H100 SXM 80GB",
    ]
    assert figure["layout"]["meta"]["scale"] == "normalised"
    assert figure["layout"]["xaxis"]["range"] == ["2026-01-05", "2026-01-15T12:00"]
    assert figure["layout"]["yaxis"]["title"]["text"] == "% of current baseline"
    assert response.context["share_url"] == "http://testserver/trends/" + query
    again = client.get(response.context["share_url"])
    assert again.context["figure"] == figure


def test_it_gives_two_units_their_own_axes(
    login_client: Any, lead: Any, stepped: dict[str, Any], h100: Any, team: Any
) -> None:
    latency, _ = _history(team, h100, [41.5] * 6, metric="latency_p99_ms", model="Qwen3-8B")
    response = login_client(lead).get(
        reverse("dashboard:trends"), {"series": [stepped["series"].pk, latency.pk]}
    )
    figure = response.context["figure"]
    assert [t["yaxis"] for t in _traces(figure, "series")] == ["y", "y2"]
    assert figure["layout"]["yaxis"]["title"]["text"] == "Value (tokens/s)"
    assert figure["layout"]["yaxis2"]["title"]["text"] == "Value (ms)"


def test_it_annotates_an_expected_change_and_restarts_the_baseline_there(
    login_client: Any, lead: Any, stepped: dict[str, Any], team: Any
) -> None:
    series, runs = stepped["series"], stepped["runs"]
    later = factories.alert_create(team=team, title="New tokenizer")
    later.series, later.first_run = series, runs[14]
    later.save(update_fields=["series", "first_run"])
    alert_mark_expected(alert=later, user=lead, note="tokenizer change, slower by design")
    response = login_client(lead).get(reverse("dashboard:trends"), {"series": series.pk})
    figure = response.context["figure"]
    at = runs[14].started_at.isoformat()
    assert any(
        s["x0"] == at and s["line"]["color"] == trends_charts.EXPECTED for s in figure["layout"]["shapes"]
    )
    assert [a["text"] for a in figure["layout"]["annotations"]] == [
        "expected: tokenizer change, slower by design"
    ]
    (band,) = _traces(figure, "baseline")
    assert band["x"][0] == at
    # The change marked expected is an annotation, no longer an alert marker; the open alert still is.
    (alerts,) = _traces(figure, "alerts")
    assert alerts["x"] == [runs[10].started_at.isoformat()]


def test_it_finds_change_points_with_the_teams_detection_threshold(
    login_client: Any, lead: Any, stepped: dict[str, Any], team: Any
) -> None:
    # The team asks for 20% before a change counts: the 14% step is no longer one.
    DetectionSetting.objects.create(team=team, metric="throughput_tokens_per_s", min_effect=0.20)
    response = login_client(lead).get(reverse("dashboard:trends"), {"series": stepped["series"].pk})
    assert _traces(response.context["figure"], "change-points") == []
    (band,) = _traces(response.context["figure"], "baseline")
    assert band["x"][0] == stepped["runs"][0].started_at.isoformat()


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"series": "abc"}, "series"),
        ({"series": "-3"}, "series"),
        ({"series": [str(i) for i in range(1, 11)]}, "series"),
        ({"scale": "log"}, "scale"),
        ({"from": "yesterday"}, "from"),
        ({"from": "2026-02-01", "to": "2026-01-01"}, "to"),
    ],
)
def test_it_rejects_bad_parameters_with_a_400_naming_them(
    login_client: Any, lead: Any, query: dict[str, Any], field: str
) -> None:
    response = login_client(lead).get(reverse("dashboard:trends"), query)
    assert response.status_code == 400
    assert response.content.decode().startswith(f"{field}:")


def test_it_says_what_to_do_when_nothing_is_picked_or_nothing_matches(
    login_client: Any, lead: Any, stepped: dict[str, Any]
) -> None:
    client = login_client(lead)
    response = client.get(reverse("dashboard:trends"))
    assert b"Pick a series" in response.content
    assert response.context["choices"]["model"] == [("Llama-3.1-8B", "Llama-3.1-8B")]
    response = client.get(reverse("dashboard:trends"), {"model": "No-Such-Model"})
    assert response.status_code == 200
    assert b"No series match these choices" in response.content


def test_it_tells_a_team_without_series_how_to_get_one(login_client: Any, engineer: Any) -> None:
    response = login_client(engineer).get(reverse("dashboard:trends"))
    assert b"No benchmark series yet" in response.content


def test_it_keeps_several_series_to_a_fixed_number_of_queries(
    login_client: Any, lead: Any, team: Any, h100: Any, django_assert_max_num_queries: Any
) -> None:
    ids = []
    for n, model in enumerate(["A-1B", "B-2B", "C-3B", "D-4B"]):
        series, runs = _history(team, h100, _values(12, 6, seed=n), model=model)
        alert = factories.alert_create(team=team)
        alert.series, alert.first_run = series, runs[6]
        alert.save(update_fields=["series", "first_run"])
        ids.append(series.pk)
    client = login_client(lead)
    with django_assert_max_num_queries(9):
        response = client.get(reverse("dashboard:trends"), {"series": ids})
    assert len(_traces(response.context["figure"], "series")) == 4
    assert len(_traces(response.context["figure"], "alerts")) == 4


def test_it_is_linked_from_a_run_page_for_each_charted_series(
    login_client: Any, lead: Any, stepped: dict[str, Any]
) -> None:
    run, series = stepped["runs"][-1], stepped["series"]
    response = login_client(lead).get(reverse("benchmarks:run_detail", args=[run.pk]))
    link = f'href="/trends/?series={series.pk}"'
    assert link in response.content.decode()


def test_it_fills_the_pickers_from_the_open_series_and_writes_both_axes_alike(
    login_client: Any, lead: Any, team: Any, h100: Any
) -> None:
    # With a series open the pickers still said "Any"; on own axes the right axis read 7194, 7053
    # beside a left one in "16k".
    throughput, _ = _history(team, h100, [16000.0 + 50 * i for i in range(5)])
    latency, _ = _history(team, h100, [7194.0 - 30 * i for i in range(5)], metric="latency_p99_ms")
    client = login_client(lead)
    html = client.get(reverse("dashboard:trends"), {"series": throughput.pk}).content.decode()
    for picker, value in (("model", "Llama-3.1-8B"), ("variant", "bf16"), ("hardware", h100.slug),
                          ("metric", "throughput_tokens_per_s")):  # fmt: skip
        select = html.split(f'name="{picker}"')[1].split("</select>")[0]
        assert f'value="{value}" selected' in select, picker
    both = client.get(reverse("dashboard:trends"), {"series": [throughput.pk, latency.pk]})
    html = both.content.decode()
    assert 'value="Llama-3.1-8B" selected' in html.split('name="model"')[1].split("</select>")[0]
    assert " selected" not in html.split('name="metric"')[1].split("</select>")[0]  # they differ: Any
    layout = both.context["figure"]["layout"]
    assert layout["meta"]["scale"] == "axes"
    assert layout["yaxis"]["tickformat"] == layout["yaxis2"]["tickformat"] == ",~r"


def test_an_alert_on_a_series_links_its_whole_history_on_trends(
    login_client: Any, lead: Any, stepped: dict[str, Any]
) -> None:
    html = login_client(lead).get(reverse("alerts:detail", args=[stepped["alert"].pk])).content.decode()
    assert f'id="series-trends" href="/trends/?series={stepped["series"].pk}"' in html
