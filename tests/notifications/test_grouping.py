"""The pure planner: who gets which alert in how many emails."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from accelboard.notifications.grouping import AlertRef, SubscriptionRef, deliveries_plan

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def sub(
    id: int, user: int, *, team: int = 1, series: int | None = None, kind: str = "", mode: str = "immediate"
) -> SubscriptionRef:
    return SubscriptionRef(id, user, team, series, kind, mode, T0)


def alert(
    id: int,
    *,
    team: int = 1,
    series: int | None = 10,
    kind: str = "regression",
    commit: str = "abc",
    at: datetime | None = None,
) -> AlertRef:
    return AlertRef(id, team, series, kind, at or T0 + timedelta(hours=id), commit)


def test_it_groups_a_commits_alerts_into_one_email_per_user() -> None:
    alerts = [alert(n, series=100 + n) for n in range(1, 51)] + [alert(99, commit="def")]
    groups = deliveries_plan(
        subscriptions=[sub(1, 7), sub(2, 8)], alerts=alerts, delivered=set(), mode="immediate"
    )
    assert [(g.user_id, g.key, len(g.alert_ids)) for g in groups] == [
        (7, "commit:abc", 50),
        (7, "commit:def", 1),
        (8, "commit:abc", 50),
        (8, "commit:def", 1),
    ]


def test_it_mails_an_alert_without_commit_on_its_own() -> None:
    groups = deliveries_plan(
        subscriptions=[sub(1, 7)],
        alerts=[alert(1, commit=""), alert(2, commit="")],
        delivered=set(),
        mode="immediate",
    )
    assert [g.key for g in groups] == ["alert:1", "alert:2"]


def test_it_skips_delivered_pairs_other_teams_and_alerts_older_than_the_subscription() -> None:
    alerts = [alert(1), alert(2, team=2), alert(3, at=T0 - timedelta(minutes=1)), alert(4)]
    groups = deliveries_plan(subscriptions=[sub(1, 7)], alerts=alerts, delivered={(7, 4)}, mode="immediate")
    assert [g.alert_ids for g in groups] == [[1]]


def test_it_lets_the_narrowest_subscription_decide_the_mode() -> None:
    subs = [sub(1, 7, mode="digest"), sub(2, 7, series=10), sub(3, 7, kind="improvement")]
    alerts = [alert(1, series=10), alert(2, series=11), alert(3, series=12, kind="improvement")]
    now = deliveries_plan(subscriptions=subs, alerts=alerts, delivered=set(), mode="immediate")
    later = deliveries_plan(
        subscriptions=subs, alerts=alerts, delivered=set(), mode="digest", digest_key="digest:x"
    )
    assert [(g.subscription_id, g.alert_ids) for g in now] == [(2, [1]), (3, [3])]
    assert [(g.subscription_id, g.key, g.alert_ids) for g in later] == [(None, "digest:x", [2])]


def test_it_gives_the_same_plan_for_the_same_input_in_any_order() -> None:
    subs = [sub(1, 7), sub(2, 8, kind="regression")]
    alerts = [alert(n, commit="abc" if n % 2 else "def") for n in range(1, 9)]
    a = deliveries_plan(subscriptions=subs, alerts=alerts, delivered=set(), mode="immediate")
    b = deliveries_plan(
        subscriptions=list(reversed(subs)), alerts=list(reversed(alerts)), delivered=set(), mode="immediate"
    )
    assert a == b


def test_it_holds_back_a_commit_whose_newest_alert_is_too_fresh() -> None:
    alerts = [alert(1, commit="abc"), alert(2, commit="abc"), alert(3, commit="def")]
    hold_after = T0 + timedelta(hours=2, minutes=30)  # after alerts 1 and 2, before alert 3
    groups = deliveries_plan(
        subscriptions=[sub(1, 7)], alerts=alerts, delivered=set(), mode="immediate", hold_after=hold_after
    )
    assert [(g.key, g.alert_ids) for g in groups] == [("commit:abc", [1, 2])]
    held = deliveries_plan(
        subscriptions=[sub(1, 7)],
        alerts=alerts,
        delivered=set(),
        mode="immediate",
        hold_after=T0 + timedelta(hours=1, minutes=30),
    )
    assert held == []  # alert 2 of commit abc is fresh: alert 1 waits for it


def test_a_series_subscription_matches_a_change_alert_that_holds_its_series() -> None:
    # One change is one alert: p99 (series 10) heads it, p50 (series 11) is one of its metrics.
    grouped = AlertRef(1, 1, 10, "regression", T0 + timedelta(hours=1), "abc", frozenset({11}))
    groups = deliveries_plan(
        subscriptions=[sub(1, 7, series=11), sub(2, 8, series=12)],
        alerts=[grouped],
        delivered=set(),
        mode="immediate",
    )
    assert [(g.user_id, g.alert_ids) for g in groups] == [(7, [1])]
