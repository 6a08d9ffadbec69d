"""What an alert email says: subjects, rows and digest sections from plain facts (no ORM).

The facts (``AlertFacts``) are read by ``selectors.alert_facts``; this module turns them into
strings, with the pages' own number formatting (``sig``: thousands separators and significant
digits, never e-notation; ``pct`` for fractions), so an email and the alert page agree.

1. Evidence is formatted defensively: a figure the alert does not carry is a row left out, never
   a "–" row; an unknown detail layout falls back to the alert's title.
2. Subjects answer what moved, by how much, on what: the metric's label, the signed change, the
   model, variant and hardware; a drift subject names the budget. An email for several alerts of
   one commit names the worst of them ("3 regressions in 020959f1: p99 latency +21% on ...,
   and 2 more").
3. "Worst" is the highest severity, then the largest change; digests list teams, the commits in
   them and their alerts in that order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from accelboard.core import numbers
from accelboard.core.numbers import pct, sig

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
SEVERITY_LABEL = {"critical": "Critical", "warning": "Warning", "info": "Info"}
SERIES_KINDS = ("regression", "improvement")
# What production rules measure, where the alert's detail does not say.
PRODUCTION_UNITS = {"slo": "ms", "throughput": "tokens/s", "energy": "J/token"}
SHORT_COMMIT = 8


@dataclass(frozen=True)
class RunFacts:
    id: int
    commit: str
    branch: str
    started_at: datetime
    url: str
    ci_url: str = ""


@dataclass(frozen=True)
class AlertFacts:
    """One alert as an email needs it: plain values and absolute links, nothing lazy."""

    id: int
    kind: str
    kind_label: str
    severity: str
    title: str
    team: str
    url: str
    opened_at: datetime
    metric: str = ""
    metric_label: str = ""
    unit: str = ""
    direction: str = ""
    model: str = ""
    variant: str = ""
    hardware: str = ""
    setup: str = ""  # scenario and batch/concurrency: "Offline, bs64"
    before_mean: float | None = None
    before_spread: float | None = None
    after_mean: float | None = None
    after_spread: float | None = None
    pct_change: float | None = None
    confidence: float | None = None
    first_run: RunFacts | None = None
    last_good_run: RunFacts | None = None
    runs_in_range: int = 0
    compare_url: str = ""
    host: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)
    # The other metrics one change moved (a grouped change alert): "p50 latency +5.0%".
    other_metrics: tuple[str, ...] = ()

    @property
    def commit(self) -> str:
        return self.first_run.commit if self.first_run else ""

    @property
    def severity_label(self) -> str:
        return SEVERITY_LABEL.get(self.severity, self.severity.title())


@dataclass(frozen=True)
class Row:
    label: str
    text: str
    url: str = ""
    link_text: str = ""


# --- numbers ----------------------------------------------------------------------------------


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def number(value: float) -> str:
    """The pages' ``sig`` (six significant digits, at most four of them decimals, thousands
    separators, never e-notation: "0.000012")."""
    return sig(value)


def change_text(value: float, *, short: bool = False) -> str:
    """A signed percentage: "+21.3%"; in a subject "+21%" once it is 10% or more."""
    if short and abs(value) >= 10:
        return f"{value:+.0f}%"
    return f"{value:+.1f}%"


def budget_text(fraction: float) -> str:
    """0.03 -> "3%", 0.015 -> "1.5%": a budget as people set it."""
    return f"{fraction * 100:.3g}%"


def confidence_text(value: float | None) -> str:
    """1 - p as a percentage that never rounds a near-certainty up to a false "100%"."""
    if value is None:
        return ""
    if value >= 0.9995:
        return "> 99.9%"
    return f"{value * 100:.1f}%"


def level_text(mean: float | None, spread: float | None, unit: str) -> str:
    """A level and its own spread, as the alert page and its chart write them: "4,655.19 ± 62.4 ms"
    (the spread to three significant digits, ``core.numbers.spread``); bytes in binary units,
    "71.2 GiB ± 118 MiB" (``core.numbers.level_text``)."""
    return numbers.level_text(mean, spread, unit)


def when_text(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment is not None else ""


def short_commit(commit: str) -> str:
    return commit[:SHORT_COMMIT]


def run_text(run: RunFacts) -> str:
    """ "run #42 · 020959f1 on main" (the time is in the "When" row)."""
    parts = [f"run #{run.id}"]
    if run.commit:
        parts.append(short_commit(run.commit) + (f" on {run.branch}" if run.branch else ""))
    return " · ".join(parts)


# --- what moved -------------------------------------------------------------------------------


def _drift_source(facts: AlertFacts) -> str:
    """ "agreement", "accuracy" or "" (a drift alert whose detail we do not recognise)."""
    if facts.kind != "drift":
        return ""
    if facts.detail.get("source") == "production agreement":
        return "agreement"
    if _finite(facts.detail.get("loss")) is not None:
        return "accuracy"
    return ""


def _on_what(facts: AlertFacts) -> str:
    return " ".join(part for part in (facts.model, facts.variant, facts.hardware) if part)


def _budget_clause(facts: AlertFacts) -> str:
    budget = _finite(facts.detail.get("budget"))
    if budget is None:
        return ""
    days = _finite(facts.detail.get("days_to_budget"))
    if _over_budget(facts.detail):
        return f", over its {budget_text(budget)} budget"
    if facts.detail.get("verdict") == "trending" and days is not None:
        return f", reaches its {budget_text(budget)} budget {reach_text(days)}"
    return f" (budget {budget_text(budget)})"


def _about(facts: AlertFacts, text: str) -> str:
    """ "<model> <variant>: <text>" with whatever of the model and variant is known."""
    names = (facts.detail.get("model") or facts.model, facts.detail.get("variant") or facts.variant)
    model = " ".join(str(n) for n in names if n)
    return f"{model}: {text}" if model else text


def what_moved(facts: AlertFacts) -> str:
    """The short phrase of a subject: "p99 latency +21% on Llama-2-70B fp8 8× H200"."""
    source = _drift_source(facts)
    task = str(facts.detail.get("task") or "")
    loss = _finite(facts.detail.get("loss"))
    if source == "accuracy" and loss is not None:
        what = "accuracy" if task in ("", "accuracy") else f"{task} accuracy"
        return _about(facts, f"{what} -{loss * 100:.1f}%{_budget_clause(facts)}")
    if source == "agreement":
        what = f"production agreement ({task})" if task else "production agreement"
        change = f" -{loss * 100:.1f}%" if loss is not None else ""
        return _about(facts, f"{what}{change}{_budget_clause(facts)}")
    if facts.kind in SERIES_KINDS and facts.pct_change is not None and (facts.metric_label or facts.metric):
        on = _on_what(facts)
        text = f"{facts.metric_label or facts.metric} {change_text(facts.pct_change, short=True)}"
        return f"{text} on {on}" if on else text
    return facts.title


def setup_line(facts: AlertFacts) -> str:
    """Scenario and batch ("Offline, bs64"), with the hardware unless the headline names it."""
    parts = [facts.setup]
    if facts.hardware and facts.hardware not in what_moved(facts):
        parts.append(facts.hardware)
    return ", ".join(p for p in parts if p)


def worst_key(facts: AlertFacts) -> tuple[int, float, int]:
    """Sort key: highest severity first, then the largest change, then the oldest id."""
    change = abs(facts.pct_change) if facts.pct_change is not None else 0.0
    return (SEVERITY_RANK.get(facts.severity, 9), -change, facts.id)


def worst_first(alerts: Sequence[AlertFacts]) -> list[AlertFacts]:
    return sorted(alerts, key=worst_key)


def kind_plural(alerts: Sequence[AlertFacts]) -> str:
    kinds = {a.kind for a in alerts}
    if kinds == {"regression"}:
        return "regressions"
    if kinds == {"improvement"}:
        return "improvements"
    if kinds == {"drift"}:
        return "drift alerts"
    return "alerts"


def severity_counts(alerts: Sequence[AlertFacts]) -> list[tuple[str, str, int]]:
    """(severity, label, count) for each severity present, the worst first."""
    counts: dict[str, int] = {}
    for alert in alerts:
        counts[alert.severity] = counts.get(alert.severity, 0) + 1
    ordered = sorted(counts, key=lambda s: SEVERITY_RANK.get(s, 9))
    return [(s, SEVERITY_LABEL.get(s, s.title()), counts[s]) for s in ordered]


def subject_for(*, alerts: Sequence[AlertFacts], digest: bool, day: str = "") -> str:
    """The subject line of one email (see the module docstring, 2.)."""
    ordered = worst_first(alerts)
    if digest:
        noun = "alert" if len(ordered) == 1 else "alerts"
        counts = ", ".join(f"{n} {label.lower()}" for _, label, n in severity_counts(ordered))
        teams = ", ".join(sorted({a.team for a in ordered}))
        return f"[accelboard] Daily digest {day}: {len(ordered)} {noun} ({counts}) in {teams}"
    worst = ordered[0]
    if len(ordered) == 1:
        return f"[{worst.severity_label}] {what_moved(worst)}"
    commit = worst.commit
    where = f" in {short_commit(commit)}" if commit and all(a.commit == commit for a in ordered) else ""
    more = len(ordered) - 1
    return f"[{worst.severity_label}] {len(ordered)} {kind_plural(ordered)}{where}: {what_moved(worst)}, and {more} more"


# --- rows -------------------------------------------------------------------------------------


def _series_rows(facts: AlertFacts) -> list[Row]:
    rows: list[Row] = []
    if facts.pct_change is not None:
        text = change_text(facts.pct_change)
        if facts.kind == "regression":
            text += " (worse)"
        elif facts.kind == "improvement":
            text += " (better)"
        confidence = confidence_text(facts.confidence)
        if confidence:
            text += f", confidence {confidence}"
        rows.append(Row("Change", text))
    if facts.other_metrics:
        rows.append(Row("Also moved", ", ".join(facts.other_metrics)))
    before = level_text(facts.before_mean, facts.before_spread, facts.unit)
    if before:
        rows.append(Row("Before", before))
    after = level_text(facts.after_mean, facts.after_spread, facts.unit)
    results_after = _finite(facts.detail.get("results_after"))
    if after and facts.after_spread is None and results_after is not None and results_after < 3:
        # Two results have no spread of their own (the detector gives one from 3 on).
        after += (
            f" ({results_after:.0f} result{'s' if results_after != 1 else ''} so far, too few for a spread)"
        )
    if after:
        rows.append(Row("After", after))
    if facts.first_run is not None:
        when = when_text(facts.first_run.started_at)
        if facts.last_good_run is not None:
            when = f"between {when_text(facts.last_good_run.started_at)} and {when}"
        rows.append(Row("When", when))
        rows.append(Row("First run after", "", facts.first_run.url, run_text(facts.first_run)))
    if facts.last_good_run is not None:
        rows.append(Row("Last run before", "", facts.last_good_run.url, run_text(facts.last_good_run)))
    good = facts.last_good_run.commit if facts.last_good_run else ""
    bad = facts.commit
    if bad:
        commits = f"{short_commit(good)}..{short_commit(bad)}" if good and good != bad else short_commit(bad)
        if facts.runs_in_range > 2:
            commits += (
                f" ({facts.runs_in_range - 2} more run{'s' if facts.runs_in_range > 3 else ''} in between)"
            )
        ci = facts.first_run.ci_url if facts.first_run else ""
        rows.append(Row("Commits", commits, ci, "CI run" if ci else ""))
    return rows


def _accuracy_rows(facts: AlertFacts) -> list[Row]:
    d = facts.detail
    rows: list[Row] = []
    task = str(d.get("task") or "")
    value = _finite(d.get("value"))
    if value is not None:
        when = str(d.get("measured_at") or "")[:10]
        about = ", ".join(p for p in (task if task != "accuracy" else "", when) if p)
        rows.append(Row("Measured accuracy", number(value) + (f" ({about})" if about else "")))
    reference = _finite(d.get("reference_value"))
    if reference is not None:
        rows.append(Row("Reference accuracy", number(reference)))
    loss = _finite(d.get("loss"))
    budget = _finite(d.get("budget"))
    if loss is not None:
        text = f"{pct(loss)} of the reference accuracy"
        if budget is not None:
            text += f" (budget {budget_text(budget)}{', over it' if loss > budget else ''})"
        rows.append(Row("Accuracy loss", text))
    elif budget is not None:
        rows.append(Row("Budget", budget_text(budget)))
    rows.extend(_trend_rows(d, "accuracy"))
    points = _finite(d.get("points"))
    if points:
        rows.append(Row("Evaluations", f"{points:,.0f} compared with the reference"))
    return rows


def _agreement_rows(facts: AlertFacts) -> list[Row]:
    d = facts.detail
    rows: list[Row] = []
    latest = _finite(d.get("latest_rate"))
    samples = _finite(d.get("latest_samples"))
    if latest is not None:
        text = pct(latest)
        if samples:
            text += f" (latest window, {samples:,.0f} samples)"
        rows.append(Row("Agreement now", text))
    baseline = _finite(d.get("baseline_rate"))
    if baseline is not None:
        rows.append(Row("Agreement, first week", pct(baseline)))
    loss = _finite(d.get("loss"))
    budget = _finite(d.get("budget"))
    if loss is not None:
        text = f"{pct(loss)} relative to the first week"
        if budget is not None:
            text += f" (budget {budget_text(budget)}{', over it' if loss > budget else ''})"
        rows.append(Row("Drop", text))
    rows.extend(_trend_rows(d, "agreement"))
    return rows


def _over_budget(d: Mapping[str, Any]) -> bool:
    """Whether the alert's loss is already over its budget (the drift check's "over" verdict)."""
    loss, budget = _finite(d.get("loss")), _finite(d.get("budget"))
    return d.get("verdict") == "over" or (loss is not None and budget is not None and loss > budget)


def reach_text(days: float) -> str:
    """When a trend reaches the budget: "in ~12 days", "within a day" (never "in ~0 days")."""
    return "within a day" if days < 1 else f"in ~{days:.0f} days"


def _trend_rows(d: Mapping[str, Any], falling: str) -> list[Row]:
    """The trend of the change, signed like the change (negative while ``falling`` falls), as the
    quantization pages write it; an alert over its budget says so instead of a projection."""
    slope = _finite(d.get("slope_per_day"))
    days = _finite(d.get("days_to_budget"))
    over = _over_budget(d)
    if slope is None and days is None:
        return []
    parts = []
    if slope is not None:
        text = f"{-slope * 100:+.3f}% per day"
        if slope > 0:
            text += f" ({falling} falling)"
        elif slope < 0:
            text += f" ({falling} recovering)"
        parts.append(text)
    if over:
        parts.append("over the budget already")
    elif days is not None:
        parts.append(f"reaches the budget {reach_text(days)}")
    return [Row("Trend of the change", ", ".join(parts))]


def _production_rows(facts: AlertFacts) -> list[Row]:
    d = facts.detail
    unit = str(d.get("unit") or PRODUCTION_UNITS.get(facts.kind, ""))
    rows: list[Row] = []
    if facts.after_mean is not None:
        rows.append(Row("Observed", f"{number(facts.after_mean)} {unit}".rstrip()))
    if facts.before_mean is not None:
        rows.append(Row("Reference", f"{number(facts.before_mean)} {unit}".rstrip()))
    threshold = _finite(d.get("threshold"))
    if threshold is not None:
        rows.append(Row("Limit", f"{number(threshold)} {unit}".rstrip()))
    reason = d.get("reason")
    if isinstance(reason, str) and reason:
        rows.append(Row("Why", reason))
    since = d.get("since")
    if isinstance(since, str) and since:
        rows.append(Row("Since", since[:16].replace("T", " ")))
    if facts.host:
        rows.append(Row("Host", facts.host))
    return rows


def alert_rows(facts: AlertFacts) -> list[Row]:
    """The evidence rows of one alert, whatever its kind; missing figures are left out."""
    source = _drift_source(facts)
    if source == "accuracy":
        return _accuracy_rows(facts)
    if source == "agreement":
        return _agreement_rows(facts)
    if facts.kind in SERIES_KINDS or facts.first_run is not None:
        return _series_rows(facts)
    return _production_rows(facts)


def chart_alt(facts: AlertFacts, points: int) -> str:
    """The chart's text alternative: what a reader who cannot see it should know."""
    label = facts.metric_label or facts.metric or "the series"
    text = f"Chart of {label}, {points} result{'s' if points != 1 else ''}"
    before = level_text(facts.before_mean, None, facts.unit)
    after = level_text(facts.after_mean, None, facts.unit)
    if before and after:
        text += f": about {before} before the change and {after} after it"
    if facts.first_run is not None:
        text += f" (first run after it {facts.first_run.started_at:%Y-%m-%d})"
    return text + "."


# --- digests ----------------------------------------------------------------------------------


@dataclass
class CommitGroup:
    commit: str
    alerts: list[AlertFacts]

    @property
    def heading(self) -> str:
        """The line over a group without a commit (a production signal, a drift check): what it
        is, "Without a commit · Production agreement", so that it never reads as one more alert
        of the commit above it. A commit's group is headed by its commit (the templates)."""
        first = self.alerts[0]
        what = "Production agreement" if _drift_source(first) == "agreement" else first.kind_label
        return f"Without a commit · {what}"


@dataclass
class TeamSection:
    team: str
    counts: list[tuple[str, str, int]]
    groups: list[CommitGroup]


def digest_sections(alerts: Sequence[AlertFacts]) -> list[TeamSection]:
    """Alerts grouped by team, then by commit (an alert without one is its own group); teams,
    groups and alerts each ordered worst first."""
    by_team: dict[str, list[AlertFacts]] = {}
    for alert in alerts:
        by_team.setdefault(alert.team, []).append(alert)
    sections = []
    for team, team_alerts in by_team.items():
        by_commit: dict[str, list[AlertFacts]] = {}
        for alert in team_alerts:
            by_commit.setdefault(alert.commit or f"alert:{alert.id}", []).append(alert)
        groups = [
            CommitGroup(commit="" if key.startswith("alert:") else key, alerts=worst_first(items))
            for key, items in by_commit.items()
        ]
        groups.sort(key=lambda g: worst_key(g.alerts[0]))
        sections.append(TeamSection(team=team, counts=severity_counts(team_alerts), groups=groups))
    sections.sort(key=lambda s: (worst_key(s.groups[0].alerts[0]), s.team))
    return sections
