"""Alert pages: who sees and triages what, the list's filters and counts, the detail's evidence and
chart, triage POSTs that change state (and refuse impossible transitions readably), query guards."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.test import RequestFactory
from django.urls import reverse

from accelboard.alerts.choices import AlertState
from accelboard.alerts.models import Alert, AlertEvent, ExpectedChange
from accelboard.alerts.services import alert_dismiss, alert_raise
from accelboard.benchmarks.models import BenchmarkRun, Series
from accelboard.core.models import Team
from tests import numbers
from tests.factories import alert_create, run_create

pytestmark = pytest.mark.django_db

START = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)
STEP_AT = 14  # index of the first bad run


def step_series(team: Team, *, n: int = 24, model: str = "Llama-3.1-8B") -> list[BenchmarkRun]:
    """Throughput around 5000 tokens/s (1% noise) dropping 15% at run ``STEP_AT``; p99 flat."""
    rng = np.random.default_rng(3)
    runs = []
    for i in range(n):
        level = 5000.0 if i < STEP_AT else 4250.0
        runs.append(
            run_create(
                team=team,
                model=model,
                started_at=START + timedelta(days=i),
                metrics={
                    "throughput_tokens_per_s": float(level * (1 + 0.01 * rng.standard_normal())),
                    "latency_p99_ms": 41.5,
                },
            )
        )
    return runs


def regression_alert(team: Team, runs: list[BenchmarkRun], *, key: str = "reg", **extra: Any) -> Alert:
    series = Series.objects.get(workload=runs[0].workload, metric="throughput_tokens_per_s")
    fields: dict[str, Any] = {
        "before_mean": 5000.0,
        "before_spread": 50.0,
        "after_mean": 4250.0,
        "after_spread": 42.5,
        "pct_change": -15.0,
        "confidence": 0.9999,
        "min_effect": 0.02,
    }
    alert, created = alert_raise(
        team=team,
        kind="regression",
        severity="critical",
        dedupe_key=f"test:{key}:{series.pk}",
        title=f"Throughput down 15% on {runs[0].workload.variant.model.name}",
        series=series,
        first_run=runs[STEP_AT],
        last_good_run=runs[STEP_AT - 1],
        **(fields | extra),
    )
    assert created
    return alert


@pytest.fixture
def runs(team: Team) -> list[BenchmarkRun]:
    return step_series(team)


@pytest.fixture
def alert(team: Team, runs: list[BenchmarkRun]) -> Alert:
    return regression_alert(team, runs)


# --- access --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "list_sees", "detail_status", "can_triage"),
    [
        ("lead", True, 200, True),
        ("engineer", True, 200, True),
        ("finance", True, 200, False),
        ("staff", True, 200, True),
        ("other_lead", False, 404, False),
        ("outsider", False, 404, False),
    ],
)
def test_it_scopes_pages_and_triage_by_role(
    cast: dict[str, Any],
    login_client: Any,
    alert: Alert,
    who: str,
    list_sees: bool,
    detail_status: int,
    can_triage: bool,
) -> None:
    client = login_client(cast[who])
    listing = client.get(reverse("alerts:list"))
    assert listing.status_code == 200
    assert (f'data-alert="{alert.pk}"' in listing.content.decode()) is list_sees
    detail = client.get(reverse("alerts:detail", args=[alert.pk]))
    assert detail.status_code == detail_status
    if detail_status == 200:
        assert ('id="form-acknowledge"' in detail.content.decode()) is can_triage
    response = client.post(reverse("alerts:triage", args=[alert.pk, "acknowledge"]))
    alert.refresh_from_db()
    if can_triage:
        assert response.status_code == 302
        assert alert.state == AlertState.ACKNOWLEDGED
        assert alert.acknowledged_by == cast[who]
    else:
        assert response.status_code == (403 if detail_status == 200 else 404)
        assert alert.state == AlertState.OPEN


def test_it_sends_anonymous_visitors_to_login(client: Any, alert: Alert) -> None:
    response = client.get(reverse("alerts:detail", args=[alert.pk]))
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_it_refuses_triage_without_csrf_token(engineer: Any, alert: Alert) -> None:
    from django.test import Client

    from tests.conftest import PASSWORD

    client = Client(enforce_csrf_checks=True)
    assert client.login(
        request=RequestFactory().post("/"), username=engineer.get_username(), password=PASSWORD
    )
    response = client.post(reverse("alerts:triage", args=[alert.pk, "acknowledge"]))
    assert response.status_code == 403
    alert.refresh_from_db()
    assert alert.state == AlertState.OPEN


# --- list ----------------------------------------------------------------------------------------


def _listed(response: Any) -> list[int]:
    return [int(pk) for pk in re.findall(r'<tr data-alert="(\d+)"', response.content.decode())]


def test_it_lists_newest_first_with_counts_by_state(team: Team, lead: Any, login_client: Any) -> None:
    old = alert_create(team=team, opened_at=START, state="resolved")
    mid = alert_create(team=team, opened_at=START + timedelta(days=1), state="open")
    new = alert_create(team=team, opened_at=START + timedelta(days=2), state="open")
    response = login_client(lead).get(reverse("alerts:list"))
    assert _listed(response) == [new.pk, mid.pk, old.pk]
    chips = dict(re.findall(r'data-state="(\w*)">[^<]*<strong>(\d+)</strong>', response.content.decode()))
    assert chips == {"": "3", "open": "2", "acknowledged": "0", "resolved": "1", "dismissed": "0"}


def test_it_filters_by_state_kind_severity_team_and_dates(
    team: Team, other_team: Team, staff: Any, login_client: Any
) -> None:
    a = alert_create(team=team, kind="regression", severity="critical", opened_at=START)
    b = alert_create(team=team, kind="slo", severity="warning", opened_at=START + timedelta(days=3))
    c = alert_create(
        team=other_team, kind="regression", severity="warning", state="dismissed", opened_at=START
    )
    client = login_client(staff)
    url = reverse("alerts:list")
    assert _listed(client.get(url, {"kind": "slo"})) == [b.pk]
    assert _listed(client.get(url, {"severity": "warning"})) == [b.pk, c.pk]
    assert _listed(client.get(url, {"team": "research"})) == [c.pk]
    assert _listed(client.get(url, {"state": "dismissed"})) == [c.pk]
    assert sorted(_listed(client.get(url, {"since": "2026-10-01", "until": "2026-10-02"}))) == sorted(
        [a.pk, c.pk]
    )
    assert _listed(client.get(url, {"since": "2026-10-04"})) == [b.pk]
    empty = client.get(url, {"kind": "memory"})
    assert _listed(empty) == [] and 'id="no-match"' in empty.content.decode()


def test_it_filters_by_model_and_metric(team: Team, lead: Any, login_client: Any) -> None:
    llama = regression_alert(team, step_series(team, n=STEP_AT + 2), key="llama")
    mistral_runs = step_series(team, n=STEP_AT + 2, model="Mistral-7B")
    mistral = regression_alert(team, mistral_runs, key="mistral")
    prod = alert_create(team=team, kind="slo")
    prod.detail = {"model": "Mistral-7B", "metric": "latency_p99_ms", "p99_ms": 812.0, "slo_ms": 500.0}
    prod.save()
    client = login_client(lead)
    url = reverse("alerts:list")
    assert _listed(client.get(url, {"model": "Llama-3.1-8B"})) == [llama.pk]
    assert sorted(_listed(client.get(url, {"model": "Mistral-7B"}))) == sorted([mistral.pk, prod.pk])
    assert _listed(client.get(url, {"metric": "latency_p99_ms"})) == [prod.pk]


def test_it_rejects_bad_filters_with_400_naming_the_field(lead: Any, login_client: Any, alert: Alert) -> None:
    client = login_client(lead)
    for params, field in [
        ({"state": "exploded"}, "state"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-10-05", "until": "2026-10-01"}, "until"),
        ({"team": "research"}, "team"),  # another team's slug is not a choice for this user
    ]:
        response = client.get(reverse("alerts:list"), params)
        assert response.status_code == 400, params
        assert f"{field}:" in response.content.decode()


def test_it_paginates(team: Team, lead: Any, login_client: Any) -> None:
    for i in range(55):
        alert_create(team=team, opened_at=START + timedelta(minutes=i))
    client = login_client(lead)
    first = client.get(reverse("alerts:list"))
    second = client.get(reverse("alerts:list"), {"page": 2})
    assert len(_listed(first)) == 50 and len(_listed(second)) == 5
    assert "Page 2 of 2" in second.content.decode()


def test_it_shows_false_positive_rate_per_team_and_threshold(
    team: Team, engineer: Any, login_client: Any
) -> None:
    alerts = [
        regression_alert(team, step_series(team, n=STEP_AT + 2, model=f"M{i}"), key=f"m{i}") for i in range(4)
    ]
    alert_dismiss(alert=alerts[0], user=engineer, reason="false-alarm")
    alert_dismiss(alert=alerts[1], user=engineer, reason="expected")
    alert_dismiss(alert=alerts[2], user=engineer, reason="false-alarm")
    # alerts[3] untouched: counted as an alert, not judged
    body = login_client(engineer).get(reverse("alerts:list")).content.decode()
    teams = re.search(r'id="fp-teams".*?</table>', body, re.S).group(0)
    assert re.search(
        r"Inference Platform</td><td class=\"num\">4</td><td class=\"num\">3</td>"
        r"<td class=\"num\">2</td><td class=\"num fp\">67%",
        teams,
    )
    thresholds = re.search(r'id="fp-thresholds".*?</table>', body, re.S).group(0)
    assert "2.0%" in thresholds and "67%" in thresholds


def test_it_says_why_the_list_is_empty(lead: Any, outsider: Any, login_client: Any) -> None:
    assert 'id="no-alerts"' in login_client(lead).get(reverse("alerts:list")).content.decode()
    assert "not in a team yet" in login_client(outsider).get(reverse("alerts:list")).content.decode()


def test_it_keeps_list_queries_flat(
    team: Team, lead: Any, login_client: Any, django_assert_max_num_queries: Any
) -> None:
    for i in range(3):
        regression_alert(team, step_series(team, n=STEP_AT + 2, model=f"Q{i}"), key=f"q{i}")
    for _ in range(20):
        alert_create(team=team, kind="slo")
    client = login_client(lead)
    client.get(reverse("alerts:list"))  # warm the session and content types
    # session, user, teams, 3 filter choices, team choices, roles, count, states, page, 2 feedback
    with django_assert_max_num_queries(13) as few:
        client.get(reverse("alerts:list"))
    for i in range(20):
        regression_alert(team, step_series(team, n=STEP_AT + 2, model=f"R{i}"), key=f"r{i}")
    with django_assert_max_num_queries(len(few.captured_queries)):
        client.get(reverse("alerts:list"))


# --- bulk triage -------------------------------------------------------------------------------


def test_it_bulk_acknowledges_and_dismisses(team: Team, engineer: Any, login_client: Any) -> None:
    a, b, c = (alert_create(team=team) for _ in range(3))
    client = login_client(engineer)
    response = client.post(reverse("alerts:bulk_triage"), {"action": "acknowledge", "ids": [a.pk, b.pk]})
    assert response.status_code == 302
    response = client.post(
        reverse("alerts:bulk_triage"), {"action": "dismiss", "reason": "false-alarm", "ids": [b.pk, c.pk]}
    )
    assert response.status_code == 302
    for x in (a, b, c):
        x.refresh_from_db()
    assert (a.state, b.state, c.state) == ("acknowledged", "dismissed", "dismissed")
    assert b.dismissed_reason == c.dismissed_reason == "false-alarm"


def test_it_rolls_back_a_bulk_action_when_one_alert_refuses(
    team: Team, engineer: Any, login_client: Any
) -> None:
    fine = alert_create(team=team)
    done = alert_create(team=team, state="resolved", title="Already resolved one")
    other = alert_create(team=team, kind="slo")
    response = login_client(engineer).post(
        reverse("alerts:bulk_triage"),
        {"action": "acknowledge", "ids": [fine.pk, done.pk], "next": "/alerts/?kind=regression"},
    )
    assert response.status_code == 409
    body = response.content.decode()
    assert "Nothing was changed" in body and f"alert {done.pk}" in body
    # The list it came from, filters and ticks kept.
    assert sorted(_listed(response)) == sorted([fine.pk, done.pk]) and other.pk not in _listed(response)
    assert body.count(" checked") >= 1 and 'value="/alerts/?kind=regression"' in body
    fine.refresh_from_db()
    assert fine.state == "open"
    assert not AlertEvent.objects.filter(alert=fine).exists()


def test_it_rejects_bad_bulk_input(
    team: Team, other_team: Team, engineer: Any, finance: Any, login_client: Any
) -> None:
    mine = alert_create(team=team)
    theirs = alert_create(team=other_team)
    client = login_client(engineer)
    url = reverse("alerts:bulk_triage")
    no_reason = client.post(url, {"action": "dismiss", "ids": [mine.pk]})
    assert no_reason.status_code == 400 and "reason:" in no_reason.content.decode()
    assert client.post(url, {"action": "explode", "ids": [mine.pk]}).status_code == 400
    assert client.post(url, {"action": "acknowledge", "ids": ["x1"]}).status_code == 400
    assert client.post(url, {"action": "acknowledge"}).status_code == 400
    assert client.post(url, {"action": "acknowledge", "ids": [mine.pk, theirs.pk]}).status_code == 404
    assert login_client(finance).post(url, {"action": "acknowledge", "ids": [mine.pk]}).status_code == 403
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.state == theirs.state == "open"


# --- detail --------------------------------------------------------------------------------------


def _throughputs(runs: list[BenchmarkRun]) -> list[float]:
    return [next(m.value for m in r.metrics.all() if m.name == "throughput_tokens_per_s") for r in runs]


def _level(figure: dict[str, Any], role: str) -> dict[str, Any]:
    (line,) = [t for t in figure["data"] if t.get("meta", {}).get("role") == role]
    return line


def level_line_problems(figure: dict[str, Any]) -> list[str]:
    """The page-wide invariant (``tests/numbers.py``, rule 6): every level line runs from a result
    to a result at the median of the results it spans."""
    return numbers.level_problems(figure["data"])


def _figure(response: Any) -> dict[str, Any]:
    match = re.search(
        r'<script id="alert-chart-data" type="application/json">(.*?)</script>',
        response.content.decode(),
        re.S,
    )
    assert match, "no chart data on the page"
    return json.loads(match.group(1))


def test_it_shows_the_evidence_and_the_run_range(
    lead: Any, login_client: Any, alert: Alert, runs: list[BenchmarkRun]
) -> None:
    response = login_client(lead).get(reverse("alerts:detail", args=[alert.pk]))
    body = response.content.decode()
    assert re.search(r'id="pct-change">\s*-15.0%', body)
    assert "5,000 ± 50 tokens/s" in body and "4,250 ± 42.5 tokens/s" in body
    assert "&gt; 99.9%" in body  # confidence never rounds up to a false 100%
    good, bad = runs[STEP_AT - 1], runs[STEP_AT]
    assert reverse("benchmarks:run_detail", args=[good.pk]) in body
    assert reverse("benchmarks:run_detail", args=[bad.pk]) in body
    assert bad.git_commit[:12] in body and good.git_commit[:12] in body
    assert f"?a={good.pk}&amp;b={bad.pk}" in body
    assert re.search(r'<tr data-to="open">.*?detector.*?opened.*?detected', body, re.S)


def test_it_charts_the_series_with_the_change_point_and_levels(
    lead: Any, login_client: Any, alert: Alert, runs: list[BenchmarkRun]
) -> None:
    figure = _figure(login_client(lead).get(reverse("alerts:detail", args=[alert.pk])))
    points = figure["data"][0]
    assert len(points["x"]) == len(runs)
    values = sorted(m.value for r in runs for m in r.metrics.all() if m.name == "throughput_tokens_per_s")
    assert sorted(points["y"]) == values
    change = [s for s in figure["layout"]["shapes"] if s["name"] == "change-point"]
    assert len(change) == 1
    assert change[0]["x0"] == runs[STEP_AT].started_at.isoformat()
    values = _throughputs(runs)
    before, after = _level(figure, "before"), _level(figure, "after")
    assert before["y"][0] == pytest.approx(float(np.median(values[:STEP_AT])))
    assert after["y"][0] == pytest.approx(float(np.median(values[STEP_AT:])))
    assert before["name"].endswith(f"tokens/s (median of {STEP_AT} results)")
    assert figure["layout"]["yaxis"]["title"]["text"].endswith("(tokens/s)")
    assert figure["layout"]["xaxis"]["title"]["text"] == "Run start (UTC)"


def test_it_shows_production_evidence_for_people_without_a_chart(
    team: Team, lead: Any, login_client: Any
) -> None:
    prod = alert_create(team=team, kind="memory", title="Memory above 95% for 20 min on gpu-node-007")
    prod.detail = {"gpu_index": 3, "window": {"start": "2026-10-01T10:00Z", "minutes": 20}, "peak_pct": 98.7}
    prod.save()
    response = login_client(lead).get(reverse("alerts:detail", args=[prod.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    # Evidence for people: labels, not a key/value dump; nested figures inline.
    assert "<dt>Peak pct</dt><dd>98.7</dd>" in body and "<dt>Gpu index</dt><dd>3</dd>" in body
    assert "start 2026-10-01T10:00Z, minutes 20" in body
    assert "alert-chart-data" not in body and 'id="no-chart"' in body  # no entity: nothing to draw
    assert 'id="form-expected"' not in body  # no series: nothing to mark expected


def test_it_keeps_detail_queries_bounded(
    lead: Any, login_client: Any, alert: Alert, django_assert_max_num_queries: Any
) -> None:
    client = login_client(lead)
    client.get(reverse("alerts:detail", args=[alert.pk]))
    # session, user, teams, alert, marks, points, threshold, run range, events, roles, profiles of
    # the two runs (the link to their profile comparison)
    with django_assert_max_num_queries(11):
        client.get(reverse("alerts:detail", args=[alert.pk]))


# --- triage POSTs -------------------------------------------------------------------------------


def test_it_resolves_with_a_note(engineer: Any, login_client: Any, alert: Alert) -> None:
    response = login_client(engineer).post(
        reverse("alerts:triage", args=[alert.pk, "resolve"]), {"resolve-note": "reverted the kernel"}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("alerts:detail", args=[alert.pk])
    alert.refresh_from_db()
    assert alert.state == "resolved" and alert.resolved_at is not None
    event = AlertEvent.objects.filter(alert=alert).last()
    assert (event.actor, event.to_state, event.note) == (engineer, "resolved", "reverted the kernel")


def test_it_dismisses_with_a_reason_and_note(engineer: Any, login_client: Any, alert: Alert) -> None:
    response = login_client(engineer).post(
        reverse("alerts:triage", args=[alert.pk, "dismiss"]),
        {"dismiss-reason": "false-alarm", "dismiss-note": "noisy neighbour"},
    )
    assert response.status_code == 302
    alert.refresh_from_db()
    assert (alert.state, alert.dismissed_reason, alert.dismissed_note) == (
        "dismissed",
        "false-alarm",
        "noisy neighbour",
    )


def test_it_requires_a_dismiss_reason(engineer: Any, login_client: Any, alert: Alert) -> None:
    client = login_client(engineer)
    for data in ({"dismiss-note": "x"}, {"dismiss-reason": "because"}):
        response = client.post(reverse("alerts:triage", args=[alert.pk, "dismiss"]), data)
        assert response.status_code == 400
        assert "reason:" in response.content.decode()
    alert.refresh_from_db()
    assert alert.state == "open"


def test_it_marks_a_change_expected_for_every_series_of_the_run(
    lead: Any, login_client: Any, alert: Alert, runs: list[BenchmarkRun]
) -> None:
    response = login_client(lead).post(
        reverse("alerts:triage", args=[alert.pk, "expected"]),
        {"expected-scope": "run", "expected-note": "new scheduler trades throughput for latency"},
    )
    assert response.status_code == 302
    alert.refresh_from_db()
    assert (alert.state, alert.dismissed_reason) == ("dismissed", "expected")
    marks = ExpectedChange.objects.filter(run=runs[STEP_AT])
    assert marks.count() == 2  # throughput and p99 latency of the first bad run
    body = login_client(lead).get(reverse("alerts:detail", args=[alert.pk])).content.decode()
    assert 'id="expected-marks"' in body and "new scheduler" in body
    figure = _figure(login_client(lead).get(reverse("alerts:detail", args=[alert.pk])))
    assert [s["x0"] for s in figure["layout"]["shapes"] if s["name"] == "expected-change"] == [
        runs[STEP_AT].started_at.isoformat()
    ]


def test_it_refuses_an_impossible_transition_readably(engineer: Any, login_client: Any, alert: Alert) -> None:
    client = login_client(engineer)
    client.post(reverse("alerts:triage", args=[alert.pk, "resolve"]))
    response = client.post(reverse("alerts:triage", args=[alert.pk, "acknowledge"]))
    assert response.status_code == 409
    body = response.content.decode()
    assert "Not changed" in body and "resolved" in body and 'id="triage-error"' in body
    alert.refresh_from_db()
    assert alert.state == "resolved"


def test_it_refuses_unknown_actions_and_gets(engineer: Any, login_client: Any, alert: Alert) -> None:
    client = login_client(engineer)
    assert client.post(reverse("alerts:triage", args=[alert.pk, "explode"])).status_code == 404
    assert client.get(reverse("alerts:triage", args=[alert.pk, "acknowledge"])).status_code == 405
    assert client.post(reverse("alerts:triage", args=[999999, "acknowledge"])).status_code == 404


def test_it_returns_to_the_list_after_a_row_action(team: Team, engineer: Any, login_client: Any) -> None:
    a = alert_create(team=team)
    nxt = reverse("alerts:list") + "?state=open"
    response = login_client(engineer).post(
        reverse("alerts:triage", args=[a.pk, "dismiss"]), {"reason": "expected", "next": nxt}
    )
    assert response.status_code == 302 and response["Location"] == nxt
    evil = login_client(engineer).post(
        reverse("alerts:triage", args=[alert_create(team=team).pk, "acknowledge"]),
        {"next": "https://evil.example/"},
    )
    assert evil["Location"].startswith("/alerts/")


def test_it_says_why_a_new_series_has_no_chart(team: Team, lead: Any, login_client: Any) -> None:
    runs = [run_create(team=team, started_at=START)]
    series = Series.objects.get(workload=runs[0].workload, metric="throughput_tokens_per_s")
    lonely, _ = alert_raise(
        team=team,
        kind="regression",
        dedupe_key="lonely",
        title="One result",
        series=series,
        first_run=runs[0],
    )
    body = login_client(lead).get(reverse("alerts:detail", args=[lonely.pk])).content.decode()
    assert 'id="no-chart"' in body and "1 result," in body
    assert "did not record" not in body  # the first bad run is known
    assert "alert-chart-data" not in body


def test_it_shows_a_production_alert_with_units_and_limit(team: Team, lead: Any, login_client: Any) -> None:
    alert, _ = alert_raise(
        team=team,
        kind="slo",
        severity="critical",
        dedupe_key="prod:slo:serving:1:2:20261001T1000",
        title="p99 latency over SLO · Mistral-7B bf16 on gpu-node-001",
        after_mean=812.0,
        detail={
            "entity": "serving:1:2",
            "reason": "p99 above 500 ms in 5 of 6 intervals",
            "threshold": 500.0,
        },
    )
    body = login_client(lead).get(reverse("alerts:detail", args=[alert.pk])).content.decode()
    assert "The signal" in body and "p99 above 500 ms in 5 of 6 intervals" in body
    assert re.search(r'id="observed">812 ms<', body) and re.search(r'id="limit">500 ms<', body)
    assert 'id="before"' not in body and 'id="alert-chart"' not in body


def test_it_links_a_host_alert_to_its_host(team: Team, lead: Any, login_client: Any) -> None:
    from tests.factories import host_create

    host, _ = host_create(team=team, hostname="gpu-node-042")
    alert, _ = alert_raise(
        team=team,
        kind="hardware",
        severity="critical",
        dedupe_key="xid:42",
        title="XID 79 on gpu-node-042 GPU 1",
        host=host,
        detail={"xid": 79, "gpu_index": 1, "count": 3},
    )
    client = login_client(lead)
    body = client.get(reverse("alerts:detail", args=[alert.pk])).content.decode()
    assert reverse("fleet:host_detail", args=[host.pk]) in body
    assert "<dt>Xid</dt><dd>79</dd>" in body
    listing = client.get(reverse("alerts:list")).content.decode()
    assert "gpu-node-042" in listing


def test_it_draws_other_change_points_and_survives_empty_input() -> None:
    from accelboard.alerts.charts import alert_series_figure

    points = [
        {
            "measured_at": START + timedelta(days=i),
            "value": 10.0 + (i >= 5) + (i >= 10),
            "run_id": i,
            "git_commit": "ab",
        }
        for i in range(15)
    ]
    from accelboard.alerts.charts import LevelSpan

    figure = alert_series_figure(
        points=points,
        label="Output tokens per second",
        unit="tokens/s",
        direction="higher",
        change_at=points[10]["measured_at"],
        before=LevelSpan(
            start=points[5]["measured_at"], end=points[9]["measured_at"], level=11.0, spread=None, count=5
        ),
        after=LevelSpan(
            start=points[10]["measured_at"], end=points[14]["measured_at"], level=12.0, spread=0.1, count=5
        ),
        history_changes=[points[5]["measured_at"]],
        expected=[{"at": points[5]["measured_at"], "text": "new kernel"}],
        run_ids=[9, 10],
    )
    shapes = {s["name"]: s for s in figure["layout"]["shapes"]}
    assert set(shapes) == {"history-change", "change-point", "expected-change"}
    assert shapes["history-change"]["line"]["dash"] == "dot"
    before = next(t for t in figure["data"] if t["name"].startswith("before"))
    assert before["x"] == [points[5]["measured_at"].isoformat(), points[9]["measured_at"].isoformat()]
    assert level_line_problems(figure) == []
    bands = [t for t in figure["data"] if t.get("fill") == "toself"]
    assert len(bands) == 1  # no spread before: a line without a band
    ringed = next(t for t in figure["data"] if t["name"] == "last good / first bad run")
    assert ringed["y"] == [11.0, 12.0]
    empty = alert_series_figure(
        points=[], label="x", unit="ms", direction="lower", change_at=None, before=None, after=None
    )
    assert len(empty["data"]) == 1 and empty["layout"]["shapes"] == []
    assert empty["layout"]["yaxis"]["title"]["text"] == "x (ms)"


def test_it_keeps_an_old_change_point_on_the_chart(team: Team, lead: Any, login_client: Any) -> None:
    from accelboard.alerts import page_selectors

    runs = step_series(team, n=40)
    alert = regression_alert(team, runs)
    recent = page_selectors.alert_series_points(alert=alert, limit=20)
    assert [p["run_id"] for p in recent] == [r.pk for r in runs[STEP_AT - 12 : STEP_AT + 8]]
    assert len(page_selectors.alert_series_points(alert=alert, limit=40)) == 40
    tail = page_selectors.alert_series_points(alert=alert, limit=30)
    assert [p["run_id"] for p in tail] == [r.pk for r in runs[10:]]  # the change is in the last 30


def test_it_draws_the_change_points_stored_with_the_alert_without_running_the_detector(
    team: Team, lead: Any, login_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelboard.alerts import detection

    runs = step_series(team)
    # An earlier level change the detector recorded when it raised the alert (run 5), the change
    # itself (drawn as the change point, not twice), and a run id the chart does not show.
    alert = regression_alert(
        team, runs, detail={"reason": "step", "change_runs": [runs[5].pk, runs[STEP_AT].pk, 999_999]}
    )

    def no_detector(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the alert page ran the detector")

    monkeypatch.setattr(detection, "segment", no_detector)
    monkeypatch.setattr(detection, "check_latest", no_detector)
    response = login_client(lead).get(reverse("alerts:detail", args=[alert.pk]))
    assert response.status_code == 200
    shapes = _figure(response)["layout"]["shapes"]
    change = [s["x0"] for s in shapes if s["name"] == "change-point"]
    earlier = [s["x0"] for s in shapes if s["name"] == "history-change"]
    assert change == [runs[STEP_AT].started_at.isoformat()]
    assert earlier == [runs[5].started_at.isoformat()]
    # Chart data, not evidence to read: the evidence table does not list it.
    assert "change_runs" not in response.content.decode()


def test_it_draws_an_alert_stored_without_change_points(team: Team, lead: Any, login_client: Any) -> None:
    runs = step_series(team)
    alert = regression_alert(team, runs, detail={"change_runs": "not a list", "future_key": {"a": 1}})
    response = login_client(lead).get(reverse("alerts:detail", args=[alert.pk]))
    assert response.status_code == 200
    assert "future_key" in response.content.decode()  # unknown evidence is shown as written
    names = [s["name"] for s in _figure(response)["layout"]["shapes"]]
    assert names.count("change-point") == 1 and "history-change" not in names


# --- numbers a reader reads (screenshot review) -----------------------------------------------


def test_it_says_a_drift_alert_over_its_budget_crossed_it_and_signs_the_trend_like_the_change(
    team: Team, lead: Any, login_client: Any
) -> None:
    # An alert 5.19% over a 3% budget read "Reaches the budget in ~0 days" (a projection of something
    # already past) and "Trend +0.048 points of loss per day" while accuracy fell.
    alert, _ = alert_raise(
        team=team,
        kind="drift",
        severity="critical",
        dedupe_key="drift:test:over",
        title="Llama-3.1-8B int4-awq: mmlu accuracy 5.19% below the reference, over its 3% budget",
        after_mean=0.0519,
        detail={
            "model": "Llama-3.1-8B",
            "variant": "int4-awq",
            "task": "mmlu",
            "verdict": "over",
            "loss": 0.0519,
            "budget": 0.03,
            "slope_per_day": 0.00048,
            "trend_t": 7.2,
            "days_to_budget": 0.0,
        },
    )
    body = login_client(lead).get(reverse("alerts:detail", args=[alert.pk])).content.decode()
    assert "~0 days" not in body and "Reaches the budget" not in body
    assert "<dt>Budget reached</dt><dd>crossed already: the loss is over the budget</dd>" in body
    assert "<dt>Trend of the change</dt><dd>-0.048% per day (falling)</dd>" in body
    assert "points of loss" not in body


def test_it_projects_a_trending_drift_alert_without_a_zero_day_projection(
    team: Team, lead: Any, login_client: Any
) -> None:
    alert, _ = alert_raise(
        team=team,
        kind="drift",
        severity="warning",
        dedupe_key="drift:test:trending",
        title="Llama-3.1-8B int4-awq: mmlu accuracy heading for its 3% budget",
        after_mean=0.029,
        detail={
            "verdict": "trending",
            "loss": 0.029,
            "budget": 0.03,
            "slope_per_day": 0.002,
            "days_to_budget": 0.3,
        },
    )
    body = login_client(lead).get(reverse("alerts:detail", args=[alert.pk])).content.decode()
    assert "<dt>Reaches the budget</dt><dd>within a day</dd>" in body and "~0 days" not in body


def test_it_shows_each_levels_own_spread_as_the_chart_writes_it(
    team: Team, lead: Any, login_client: Any, runs: list[BenchmarkRun]
) -> None:
    # Two results after the change: the detector stored the baseline's spread for both levels, and
    # the page read "± 62.4314" before and after (the chart's legend: "± 62.4").
    alert = regression_alert(
        team, runs, key="two-after", before_spread=62.4314, after_spread=62.4314, detail={"results_after": 2}
    )
    response = login_client(lead).get(reverse("alerts:detail", args=[alert.pk]))
    body = response.content.decode()
    assert re.search(r'id="before">5,000 ± 62.4 tokens/s<', body)
    assert re.search(
        r'id="after">4,250 tokens/s <span class="muted">\(2 results so far, too few for a spread\)', body
    )
    assert "± 62.4314" not in body  # (the band's edges, 5,062.4314, are chart data)
    # The chart's lines are the levels the series holds over their results (ten after the change
    # by now), each with its own spread.
    figure = _figure(response)
    assert level_line_problems(figure) == []
    assert "±" in _level(figure, "after")["name"]


def test_it_draws_each_level_over_the_results_it_holds(team: Team, lead: Any, login_client: Any) -> None:
    """A regression that went back: the after level ends where the values went back, not at the
    chart's edge; the before level starts at the detector's earlier change and ends at the last
    good run. Every level line sits at the median of the results it spans."""
    rng = np.random.default_rng(5)
    levels = [5600.0] * 8 + [5000.0] * 14 + [4250.0] * 10 + [5000.0] * 10
    runs = [
        run_create(
            team=team,
            started_at=START + timedelta(days=i),
            metrics={"throughput_tokens_per_s": float(level * (1 + 0.005 * rng.standard_normal()))},
        )
        for i, level in enumerate(levels)
    ]
    series = Series.objects.get(workload=runs[0].workload, metric="throughput_tokens_per_s")
    alert, _ = alert_raise(
        team=team,
        kind="regression",
        severity="critical",
        dedupe_key="test:went-back",
        title="Throughput down 15%",
        series=series,
        first_run=runs[22],
        last_good_run=runs[21],
        before_mean=5000.0,
        before_spread=25.0,
        after_mean=4250.0,
        after_spread=21.0,
        pct_change=-15.0,
        detail={"change_runs": [runs[8].pk, runs[22].pk], "reverted_at_run": runs[32].pk, "results_after": 4},
    )
    figure = _figure(login_client(lead).get(reverse("alerts:detail", args=[alert.pk])))
    assert level_line_problems(figure) == []
    before, after = _level(figure, "before"), _level(figure, "after")
    at = [r.started_at.isoformat() for r in runs]
    assert before["x"] == [at[8], at[21]]
    assert after["x"] == [at[22], at[31]]
    values = _throughputs(runs)
    assert after["y"] == [pytest.approx(float(np.median(values[22:32])))] * 2


def test_it_compares_a_run_with_the_level_before_an_open_regression(team: Team) -> None:
    """The run page's (and the upload answer's) baseline is the trends page's: while the alert is
    open, 25 regressed results later, it is still the level before the change."""
    from accelboard.alerts.selectors import run_baseline_compare

    runs = step_series(team, n=40)
    alert = regression_alert(team, runs)
    values = _throughputs(runs)
    (entry,) = [e for e in run_baseline_compare(run=runs[-1]) if e["name"] == "throughput_tokens_per_s"]
    assert entry["baseline"] == float(np.median(values[:STEP_AT]))
    assert entry["baseline_points"] == STEP_AT
    assert entry["delta_pct"] == pytest.approx(-15.0, abs=2.0)
    # Resolved (the new level accepted): the baseline is the level the series holds now.
    Alert.objects.filter(pk=alert.pk).update(state=AlertState.RESOLVED)
    (entry,) = [e for e in run_baseline_compare(run=runs[-1]) if e["name"] == "throughput_tokens_per_s"]
    assert entry["baseline"] == float(np.median(values[STEP_AT:-1]))


def test_it_compares_with_the_runs_before_an_open_regression(
    team: Team, lead: Any, login_client: Any
) -> None:
    """ "Compare with baseline" sets a regressed run against the runs before the change while the
    alert is open, not against the regressed runs just before it."""
    runs = step_series(team, n=40)
    alert = regression_alert(team, runs)
    response = login_client(lead).get(reverse("benchmarks:compare_baseline", args=[runs[-1].pk]))
    before = ",".join(str(r.pk) for r in runs[STEP_AT - 5 : STEP_AT])
    assert response.status_code == 302 and f"?a={before}&b={runs[-1].pk}" in response["Location"]
    Alert.objects.filter(pk=alert.pk).update(state=AlertState.RESOLVED)
    response = login_client(lead).get(reverse("benchmarks:compare_baseline", args=[runs[-1].pk]))
    assert f"?a={','.join(str(r.pk) for r in runs[-6:-1])}&" in response["Location"]
