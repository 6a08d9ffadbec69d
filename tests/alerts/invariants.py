"""Invariants every world of alerts keeps (the demo, the test worlds): severity ranks by effect
and meaning, and one change is one alert."""

from __future__ import annotations

from accelboard.alerts import severity as severity_rule
from accelboard.alerts.models import Alert

_ACTIVE = ("open", "acknowledged")


def alert_invariant_problems() -> list[str]:
    """What breaks the rules of issue 33's class 11 in the alerts stored now (empty: none)."""
    problems: list[str] = []
    bench = Alert.objects.filter(kind__in=["regression", "improvement"]).exclude(first_run=None)
    # 1. One change, one open alert: per configuration and first bad run, whatever the metrics.
    per_change: dict[tuple[object, ...], set[int]] = {}
    for alert in bench.filter(state__in=_ACTIVE).select_related("series"):
        series = alert.series
        assert series is not None
        key = (series.workload_id, series.accelerator_type_id, series.accelerator_count, alert.first_run_id)
        per_change.setdefault(key, set()).add(alert.pk)
    problems += [
        f"one change (workload, hardware, count, first bad run {key}) has {len(ids)} open alerts {sorted(ids)}"
        for key, ids in per_change.items()
        if len(ids) > 1
    ]
    predicted: set[str] = set()
    for alert in bench.select_related("series").prefetch_related("metrics__series"):
        members = list(alert.metrics.all())
        # 2. A change alert holds its headline metric, and is as severe as its worst metric.
        if alert.series_id not in {m.series_id for m in members}:
            problems.append(f"alert {alert.pk} ({alert.title}) does not list its own metric")
            if alert.series is not None:  # still ranked by its own figures (rule 4)
                predicted.add(
                    severity_rule.severity_for(
                        regression=alert.kind == "regression",
                        metric=alert.series.metric,
                        pct_change=alert.pct_change,
                        min_effect=alert.min_effect,
                    )
                )
            continue
        effects = [
            severity_rule.MetricEffect(m.series_id, m.series.metric, m.severity, m.pct_change, m.min_effect)
            for m in members
        ]
        head = severity_rule.worst(effects)
        if alert.state in _ACTIVE and head is not None and alert.severity != head.severity:
            problems.append(f"alert {alert.pk} is {alert.severity}, its worst metric {head.severity}")
        # 3. Each metric's severity is the rule's for its effect and what it means to users.
        rules = []
        for m in members:
            rule = severity_rule.severity_for(
                regression=alert.kind == "regression",
                metric=m.series.metric,
                pct_change=m.pct_change,
                min_effect=m.min_effect,
            )
            rules.append(rule)
            if m.severity != rule:
                problems.append(f"alert {alert.pk}: {m.series.metric} is {m.severity}, the rule says {rule}")
        predicted.add(min(rules, key=lambda r: severity_rule.RANK.get(r, 9)))
    # 4. Severity ranks: alerts whose worst effects rank differently never all come out the same.
    stored = set(bench.values_list("severity", flat=True))
    if len(predicted) > 1 and len(stored) == 1:
        problems.append(f"every change alert is {stored.pop()} though their effects rank {sorted(predicted)}")
    return problems


def assert_alert_invariants() -> None:
    problems = alert_invariant_problems()
    assert problems == [], "\n".join(problems)
