"""Which alerts go to whom, in how many emails: pure planning on plain data (no ORM).

1. For each (user, alert) pair, the user's subscriptions that match the alert are found: a team
   subscription matches every alert of the team, a kind subscription the alerts of that kind in
   its team, a series subscription the alerts of that series (one change is one alert: an alert
   holding several metrics matches each of their series). Alerts opened before the
   subscription was created do not match (subscribing is not a backlog).
2. Of the matches the most specific wins (series > kind > team) and its mode decides: a pair whose
   winner is in another mode than the one being planned is left for that mode's pass, so an alert
   reaches a user once, either at once or in the digest.
3. Pairs already delivered are skipped.
4. Immediate emails are grouped by (user, winning subscription, commit): fifty series moved by one
   commit are one email. An alert without a commit is its own group. Digests are one per user.
5. A commit whose newest alert was opened after ``hold_after`` is held back whole: the detector
   may still be opening alerts for it, and mailing the first ten now would split the email.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class SubscriptionRef:
    id: int
    user_id: int
    team_id: int
    series_id: int | None
    kind: str
    mode: str
    created_at: datetime

    @property
    def specificity(self) -> int:
        return 2 if self.series_id else (1 if self.kind else 0)

    def matches(self, alert: AlertRef) -> bool:
        if alert.team_id != self.team_id or alert.opened_at < self.created_at:
            return False
        if self.series_id is not None:
            return alert.series_id == self.series_id or self.series_id in alert.other_series
        if self.kind:
            return alert.kind == self.kind
        return True


@dataclass(frozen=True)
class AlertRef:
    id: int
    team_id: int
    series_id: int | None
    kind: str
    opened_at: datetime
    commit: str = ""
    # The other series a grouped change alert holds: a series subscription matches those too.
    other_series: frozenset[int] = frozenset()


@dataclass
class Group:
    user_id: int
    subscription_id: int | None
    key: str
    alert_ids: list[int] = field(default_factory=list)


def deliveries_plan(
    *,
    subscriptions: Iterable[SubscriptionRef],
    alerts: Iterable[AlertRef],
    delivered: set[tuple[int, int]],
    mode: str,
    digest_key: str = "digest",
    hold_after: datetime | None = None,
) -> list[Group]:
    """Groups of alerts to mail in ``mode`` ("immediate" or "digest"), in a stable order."""
    by_user: dict[int, list[SubscriptionRef]] = {}
    for sub in subscriptions:
        by_user.setdefault(sub.user_id, []).append(sub)
    alert_list = sorted(alerts, key=lambda a: (a.opened_at, a.id))
    if hold_after is not None:
        latest: dict[tuple[int, str], datetime] = {}
        for a in alert_list:
            key = _commit_key(a)
            latest[key] = max(latest.get(key, a.opened_at), a.opened_at)
        alert_list = [a for a in alert_list if latest[_commit_key(a)] <= hold_after]
    groups: dict[tuple[int, int | None, str], Group] = {}
    for user_id in sorted(by_user):
        subs = sorted(by_user[user_id], key=lambda s: (-s.specificity, s.id))
        for alert in alert_list:
            if (user_id, alert.id) in delivered:
                continue
            winner = next((s for s in subs if s.matches(alert)), None)
            if winner is None or winner.mode != mode:
                continue
            if mode == "digest":
                gkey: tuple[int, int | None, str] = (user_id, None, digest_key)
            else:
                commit_key = f"commit:{alert.commit}" if alert.commit else f"alert:{alert.id}"
                gkey = (user_id, winner.id, commit_key)
            group = groups.get(gkey)
            if group is None:
                group = groups[gkey] = Group(user_id=user_id, subscription_id=gkey[1], key=gkey[2])
            group.alert_ids.append(alert.id)
    return list(groups.values())


def _commit_key(alert: AlertRef) -> tuple[int, str]:
    return (alert.team_id, alert.commit or f"alert:{alert.id}")
