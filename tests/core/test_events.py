"""Cross-app reactions (``accelboard.core.events``): delivered after commit, robust, declared.

And the wiring itself: a recorded run is costed, checked for regressions and (with accuracy
results) for drift; a new alert is mailed. Each reaction enqueues its app's task, which these
tests catch at ``.delay`` (the tasks themselves run in the worker tests of each app).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.db import transaction

from accelboard.alerts import tasks as alert_tasks
from accelboard.alerts.events import alerts_closed, alerts_opened
from accelboard.benchmarks.events import run_recorded
from accelboard.core.events import Event, EventFieldError
from accelboard.costs import tasks as cost_tasks
from accelboard.drift import tasks as drift_tasks
from accelboard.notifications import tasks as notification_tasks
from tests import factories


@pytest.fixture
def event() -> Event:
    return Event("thing_happened", fields=("thing_id",))


def test_it_delivers_after_the_transaction_commits(
    event: Event, django_capture_on_commit_callbacks: Any, db: None
) -> None:
    got: list[int] = []

    def record(*, thing_id: int) -> None:
        got.append(thing_id)

    event.subscribe(record)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with transaction.atomic():
            event.publish(thing_id=7)
            assert got == []  # not before the commit
    assert len(callbacks) == 1
    assert got == [7]


def test_it_delivers_nothing_when_the_transaction_rolls_back(event: Event, transactional_db: None) -> None:
    got: list[int] = []
    event.subscribe(lambda *, thing_id: got.append(thing_id))
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            event.publish(thing_id=1)
            raise RuntimeError("rolled back")
    assert got == []


def test_it_refuses_fields_the_event_does_not_declare(event: Event) -> None:
    with pytest.raises(EventFieldError, match="missing thing_id; unknown other"):
        event.publish(other=1)


def test_it_keeps_delivering_when_one_subscriber_fails(
    event: Event, caplog: pytest.LogCaptureFixture
) -> None:
    got: list[int] = []

    def broken(**_: Any) -> None:
        raise ConnectionError("broker down")

    def fine(*, thing_id: int) -> None:
        got.append(thing_id)

    event.subscribe(broken)
    event.subscribe(fine)
    with caplog.at_level(logging.ERROR, logger="accelboard.core.events"):
        event.deliver(thing_id=3)
    assert got == [3]
    assert "thing_happened: subscriber" in caplog.text and "broken" in caplog.text


def test_it_subscribes_a_function_once(event: Event) -> None:
    def record(**_: Any) -> None:
        pass

    event.subscribe(record)
    event.subscribe(record)
    assert event.subscribers() == [f"{__name__}.test_it_subscribes_a_function_once.<locals>.record"]


def test_it_lists_who_reacts_to_a_recorded_run_and_a_new_alert() -> None:
    assert run_recorded.subscribers() == [
        "accelboard.costs.reactions.run_cost_enqueue",
        "accelboard.alerts.reactions.run_check_enqueue",
        "accelboard.drift.reactions.variant_check_enqueue",
    ]
    assert alerts_opened.subscribers() == [
        "accelboard.notifications.reactions.alerts_dispatch_enqueue",
        "accelboard.notifications.reactions.routes_dispatch_enqueue",
    ]
    assert alerts_closed.subscribers() == ["accelboard.notifications.reactions.routes_dispatch_enqueue"]


class _Calls:
    def __init__(self) -> None:
        self.calls: dict[str, list[tuple[Any, ...]]] = {}

    def catch(self, monkeypatch: pytest.MonkeyPatch, task: Any, name: str) -> None:
        monkeypatch.setattr(task, "delay", lambda *args: self.calls.setdefault(name, []).append(args))


def test_it_costs_checks_and_drift_checks_a_recorded_run(
    team: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    calls = _Calls()
    calls.catch(monkeypatch, cost_tasks.run_cost, "cost")
    calls.catch(monkeypatch, alert_tasks.run_check, "check")
    calls.catch(monkeypatch, drift_tasks.drift_check_variant, "drift")
    with django_capture_on_commit_callbacks(execute=True):
        plain = factories.run_create(team=team)
    assert calls.calls == {"cost": [(plain.pk,)], "check": [(plain.pk,)]}  # no accuracy: no drift check

    calls.calls.clear()
    with django_capture_on_commit_callbacks(execute=True):
        scored = factories.run_create(team=team, metrics={"accuracy": 0.71})
    assert calls.calls == {
        "cost": [(scored.pk,)],
        "check": [(scored.pk,)],
        "drift": [(team.pk, scored.workload.variant_id)],
    }


def test_it_announces_a_run_once_even_when_it_is_sent_again(
    team: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    from accelboard.benchmarks.services import run_record

    calls = _Calls()
    calls.catch(monkeypatch, cost_tasks.run_cost, "cost")
    calls.catch(monkeypatch, alert_tasks.run_check, "check")
    run = factories.run_create(team=team)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        again, created = run_record(
            team=team,
            workload=run.workload,
            accelerator_type=None,
            accelerator_count=1,
            started_at=run.started_at,
            metrics=[],
            run_uuid=run.uuid,
        )
    assert (again.pk, created, callbacks, calls.calls) == (run.pk, False, [], {})


def test_it_mails_a_new_alert_once(
    team: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    from accelboard.alerts.services import alert_raise

    calls = _Calls()
    calls.catch(monkeypatch, notification_tasks.alerts_dispatch, "dispatch")
    calls.catch(monkeypatch, notification_tasks.routes_dispatch, "routes")
    with django_capture_on_commit_callbacks(execute=True):
        alert_raise(team=team, kind="slo", dedupe_key="k", title="p99 above the objective")
    with django_capture_on_commit_callbacks(execute=True):
        alert_raise(team=team, kind="slo", dedupe_key="k", title="p99 above the objective")  # re-raised
    assert calls.calls == {"dispatch": [()], "routes": [()]}


def test_it_tells_routes_when_an_alert_closes(
    team: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    from accelboard.alerts.services import alert_acknowledge, alert_raise, alert_resolve

    alert, _ = alert_raise(team=team, kind="slo", dedupe_key="k", title="p99 above the objective")
    calls = _Calls()
    calls.catch(monkeypatch, notification_tasks.routes_dispatch, "routes")
    with django_capture_on_commit_callbacks(execute=True):
        alert_acknowledge(alert=alert, user=None)
    assert calls.calls == {}
    with django_capture_on_commit_callbacks(execute=True):
        alert_resolve(alert=alert)
    assert calls.calls == {"routes": [()]}
