"""Alert services: idempotent raise, the state machine, events, expected changes, feedback."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from accelboard.alerts.choices import AlertState
from accelboard.alerts.models import Alert, AlertEvent, ExpectedChange
from accelboard.alerts.selectors import alert_feedback_stats
from accelboard.alerts.services import (
    AlertTransitionError,
    alert_acknowledge,
    alert_dismiss,
    alert_mark_expected,
    alert_raise,
    alert_resolve,
)
from accelboard.core.access import scope_for_team
from tests.factories import alert_create, run_create

pytestmark = pytest.mark.django_db


def _raise(team: Any, key: str = "k1", **extra: Any) -> tuple[Alert, bool]:
    return alert_raise(team=team, kind="regression", dedupe_key=key, title="Throughput down 10%", **extra)


def test_it_raises_once_per_dedupe_key_and_refreshes_evidence(team: Any) -> None:
    alert, created = _raise(team, after_mean=90.0, pct_change=-10.0)
    again, created_again = _raise(team, after_mean=89.0, pct_change=-11.0)
    assert created and not created_again
    assert again.pk == alert.pk
    alert.refresh_from_db()
    assert alert.after_mean == 89.0 and alert.pct_change == -11.0
    assert Alert.objects.count() == 1
    assert list(AlertEvent.objects.values_list("from_state", "to_state")) == [("", "open")]


def test_it_keeps_evidence_of_a_closed_alert(team: Any) -> None:
    alert, _ = _raise(team, after_mean=90.0)
    alert_resolve(alert=alert)
    _raise(team, after_mean=70.0)
    alert.refresh_from_db()
    assert alert.after_mean == 90.0 and alert.state == AlertState.RESOLVED


def test_it_rejects_a_bad_dedupe_key(team: Any) -> None:
    with pytest.raises(ValueError, match="dedupe_key"):
        _raise(team, key="")


@pytest.mark.django_db(transaction=True)
def test_it_opens_one_alert_when_two_workers_raise_the_same_change(team: Any) -> None:
    barrier = threading.Barrier(4)
    results: list[bool] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            results.append(_raise(team, key="race")[1])
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(results) == [False, False, False, True]
    assert Alert.objects.filter(dedupe_key="race").count() == 1
    assert AlertEvent.objects.count() == 1


VALID = [
    ("open", alert_acknowledge, {}, "acknowledged"),
    ("open", alert_resolve, {}, "resolved"),
    ("acknowledged", alert_resolve, {}, "resolved"),
    ("open", alert_dismiss, {"reason": "false-alarm"}, "dismissed"),
    ("acknowledged", alert_dismiss, {"reason": "expected"}, "dismissed"),
]


@pytest.mark.parametrize(("start", "action", "extra", "end"), VALID)
def test_it_allows_each_valid_transition_and_logs_it(
    team: Any, lead: Any, start: str, action: Any, extra: dict[str, str], end: str
) -> None:
    alert = alert_create(team=team, state=start)
    action(alert=alert, user=lead, **extra)
    alert.refresh_from_db()
    assert alert.state == end
    event = AlertEvent.objects.get(alert=alert)
    assert (event.from_state, event.to_state, event.actor) == (start, end, lead)
    if action is alert_acknowledge:
        assert alert.acknowledged_by == lead and alert.acknowledged_at is not None
    if action is alert_dismiss:
        assert alert.dismissed_reason == extra["reason"] and event.reason == extra["reason"]


INVALID = [
    ("acknowledged", alert_acknowledge, {}),
    ("resolved", alert_acknowledge, {}),
    ("dismissed", alert_acknowledge, {}),
    ("resolved", alert_resolve, {}),
    ("dismissed", alert_resolve, {}),
    ("resolved", alert_dismiss, {"reason": "false-alarm"}),
    ("dismissed", alert_dismiss, {"reason": "false-alarm"}),
]


@pytest.mark.parametrize(("start", "action", "extra"), INVALID)
def test_it_refuses_each_invalid_transition_with_a_readable_message(
    team: Any, lead: Any, start: str, action: Any, extra: dict[str, str]
) -> None:
    alert = alert_create(team=team, state=start)
    with pytest.raises(AlertTransitionError, match=rf"Alert #{alert.pk} is {start}; only .* alerts can be"):
        action(alert=alert, user=lead, **extra)
    alert.refresh_from_db()
    assert alert.state == start
    assert not AlertEvent.objects.exists()


def test_it_refuses_an_unknown_dismiss_reason(team: Any, lead: Any) -> None:
    alert = alert_create(team=team)
    with pytest.raises(AlertTransitionError, match="Unknown dismiss reason 'meh'"):
        alert_dismiss(alert=alert, user=lead, reason="meh")
    alert.refresh_from_db()
    assert alert.state == "open"


def test_it_refuses_a_transition_on_a_stale_copy(team: Any, lead: Any, engineer: Any) -> None:
    alert = alert_create(team=team)
    stale = Alert.objects.get(pk=alert.pk)
    alert_dismiss(alert=alert, user=lead, reason="false-alarm")
    with pytest.raises(AlertTransitionError, match="is dismissed"):
        alert_acknowledge(alert=stale, user=engineer)
    assert AlertEvent.objects.filter(alert=alert).count() == 1


def _regression_on(team: Any, run: Any, metric: str = "throughput_tokens_per_s") -> Alert:
    point = run.metrics.get(name=metric)
    alert, _ = alert_raise(
        team=team,
        kind="regression",
        dedupe_key=f"series:{point.series_id}:run:{run.pk}",
        title="down",
        series=point.series,
        first_run=run,
    )
    return alert


def test_it_marks_a_change_expected_for_the_series(team: Any, lead: Any) -> None:
    run = run_create(team=team)
    alert = _regression_on(team, run)
    alert_mark_expected(alert=alert, user=lead, note="new kernel trades throughput for memory")
    alert.refresh_from_db()
    assert (alert.state, alert.dismissed_reason) == ("dismissed", "expected")
    mark = ExpectedChange.objects.get()
    assert (mark.series_id, mark.run_id, mark.scope, mark.created_by) == (
        alert.series_id,
        run.pk,
        "series",
        lead,
    )


def test_it_marks_every_series_of_the_run_expected(team: Any, lead: Any) -> None:
    run = run_create(team=team)
    alert = _regression_on(team, run)
    sibling = _regression_on(team, run, metric="latency_p99_ms")
    alert_mark_expected(alert=alert, user=lead, scope="run", note="new scheduler")
    assert set(ExpectedChange.objects.values_list("series_id", flat=True)) == set(
        run.metrics.values_list("series_id", flat=True)
    )
    assert ExpectedChange.objects.count() == 2
    sibling.refresh_from_db()
    assert (sibling.state, sibling.dismissed_reason, sibling.dismissed_note) == (
        "dismissed",
        "expected",
        "new scheduler",
    )


def test_it_refuses_to_mark_expected_without_a_series(team: Any, lead: Any) -> None:
    alert = alert_create(team=team)
    with pytest.raises(AlertTransitionError, match="no baseline to move"):
        alert_mark_expected(alert=alert, user=lead)
    alert.refresh_from_db()
    assert alert.state == "open"


def test_it_counts_false_alarms_per_team_and_threshold(team: Any, other_team: Any, lead: Any) -> None:
    a1, _ = _raise(team, key="a1", min_effect=0.02)
    a2, _ = _raise(team, key="a2", min_effect=0.02)
    a3, _ = _raise(team, key="a3", min_effect=0.05)
    _raise(team, key="a4", min_effect=0.05)  # untouched: not judged
    b1, _ = _raise(other_team, key="b1", min_effect=0.02)
    alert_dismiss(alert=a1, user=lead, reason="false-alarm")
    alert_acknowledge(alert=a2, user=lead)
    alert_resolve(alert=a2, user=lead)
    alert_dismiss(alert=a3, user=lead, reason="expected")
    alert_dismiss(alert=b1, user=lead, reason="false-alarm")

    stats = alert_feedback_stats(scope=scope_for_team(team))
    (row,) = stats["teams"]
    assert (row.alerts, row.false_alarms, row.confirmed) == (4, 1, 2)
    assert row.false_positive_rate == pytest.approx(1 / 3)
    by_threshold = {r.key: (r.alerts, r.false_alarms, r.confirmed) for r in stats["thresholds"]}
    assert by_threshold == {0.02: (2, 1, 1), 0.05: (2, 0, 1)}


def test_an_alert_acknowledged_then_dismissed_as_a_false_alarm_counts_once(team: Any, lead: Any) -> None:
    alert, _ = _raise(team, key="flip", min_effect=0.02)
    alert_acknowledge(alert=alert, user=lead)
    alert_dismiss(alert=alert, user=lead, reason="false-alarm")
    (row,) = alert_feedback_stats(scope=scope_for_team(team))["teams"]
    assert (row.alerts, row.false_alarms, row.confirmed, row.false_positive_rate) == (1, 1, 0, 1.0)


def test_it_triages_in_bulk_all_or_nothing(team: Any, engineer: Any) -> None:
    from accelboard.alerts.services import AlertTransitionError, alert_resolve, alerts_bulk_triage
    from tests.factories import alert_create

    first, second = alert_create(team=team), alert_create(team=team)
    assert alerts_bulk_triage(alerts=[first, second], user=engineer, action="acknowledge") == 2
    assert {a.state for a in Alert.objects.filter(pk__in=[first.pk, second.pk])} == {"acknowledged"}
    third, resolved = alert_create(team=team), alert_create(team=team)
    alert_resolve(alert=resolved, user=engineer)
    with pytest.raises(AlertTransitionError, match=f"alert {resolved.pk} "):
        alerts_bulk_triage(alerts=[third, resolved], user=engineer, action="dismiss", reason="false-alarm")
    third.refresh_from_db()
    assert third.state == "open"  # rolled back with the refused one
    with pytest.raises(AlertTransitionError, match="Unknown bulk action"):
        alerts_bulk_triage(alerts=[third], user=engineer, action="resolve")
