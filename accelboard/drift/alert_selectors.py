"""Reads for the page of a drift alert: the loss the alert is about, over time, on its own axis
(``alerts.signal_charts.drift_figure``), its evidence for people and its verdict history. Kept
in drift, which builds on alerts (never the other way round)."""

from __future__ import annotations

from datetime import datetime

from accelboard.alerts import signal_charts
from accelboard.alerts.models import Alert
from accelboard.alerts.signal_selectors import SignalView
from accelboard.core.access import scope_for_team

from .selectors import drift_evaluate


def drift_alert_signal(*, alert: Alert) -> SignalView:
    """The loss chart, readable evidence and verdict history of a drift alert."""
    detail = alert.detail if isinstance(alert.detail, dict) else {}
    history = signal_charts.history_rows(detail)
    evidence = signal_charts.evidence_rows(detail)
    figure = None
    note = ""
    if detail.get("source") == "production agreement":
        note = "Production agreement is charted on the model's drift page."
        return SignalView(figure=None, note=note, evidence=evidence, history=history)
    series = alert.series
    if series is not None:
        model_id = series.workload.variant.model_id
        evaluated = drift_evaluate(
            scope=scope_for_team(alert.team_id), model_ids=[model_id], change_points=False
        )
        entry = evaluated.get(model_id)
        task = next(
            (
                t
                for t in (entry.tasks if entry else [])
                if t.variant_name == detail.get("variant") and t.metric == detail.get("metric")
            ),
            None,
        )
        if task is not None and task.pairs:
            marks = []
            for item in detail.get("history") or []:
                try:
                    marks.append((datetime.fromisoformat(str(item["at"])), str(item.get("verdict"))))
                except (KeyError, ValueError):
                    continue
            what = "accuracy" if task.task == "accuracy" else f"{task.task} accuracy"
            figure = signal_charts.drift_figure(
                points=[(p.at, p.loss) for p in task.pairs], budget=task.budget, what=what, marks=marks
            )
            note = (
                f"Loss of {detail.get('variant')} against the reference, one point per result pair; "
                "dashed: the budget; dotted red: when this alert changed verdict."
            )
    return SignalView(figure=figure, note=note, evidence=evidence, history=history)
