"""What an email says, from plain facts: numbers as the pages show them, labelled drift values,
evidence rows left out when missing, subjects that name the worst item, digests worst first."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelboard.notifications import content
from accelboard.notifications.content import AlertFacts, RunFacts

NOW = datetime(2026, 11, 30, 9, 10, tzinfo=UTC)
E_NOTATION = re.compile(r"\d[eE][+-]?\d")


def latency(**overrides: object) -> AlertFacts:
    facts = AlertFacts(
        id=7,
        kind="regression",
        kind_label="Benchmark regression",
        severity="critical",
        title="latency_p99_ms +21.0% on Llama-2-70B fp8",
        team="Inference Platform",
        url="https://a.example.com/alerts/7/",
        opened_at=NOW,
        metric="latency_p99_ms",
        metric_label="p99 latency",
        unit="ms",
        direction="lower",
        model="Llama-2-70B",
        variant="fp8",
        hardware="8× H200",
        before_mean=13075.8,
        before_spread=194.65,
        after_mean=15826.4,
        after_spread=210.3,
        pct_change=21.04,
        confidence=0.99997,
        first_run=RunFacts(42, "020959f1c3a0", "main", NOW, "https://a.example.com/runs/42/", "https://ci/1"),
        last_good_run=RunFacts(41, "9ab3c4d2e5f6", "main", NOW, "https://a.example.com/runs/41/"),
        runs_in_range=2,
    )
    return replace(facts, **overrides)  # type: ignore[arg-type]


def rows_of(facts: AlertFacts) -> dict[str, str]:
    return {row.label: (row.text + " " + row.link_text).strip() for row in content.alert_rows(facts)}


def test_it_formats_levels_like_the_alert_page_without_e_notation() -> None:
    rows = rows_of(latency())
    # Spreads to three significant digits, as the alert page and its chart's legend write them.
    assert rows["Before"] == "13,075.8 ± 195 ms"
    assert rows["After"] == "15,826.4 ± 210 ms"
    assert rows["Change"] == "+21.0% (worse), confidence > 99.9%"
    assert rows["Commits"] == "9ab3c4d2..020959f1 CI run"
    assert rows["First run after"] == "run #42 · 020959f1 on main"


@given(
    mean=st.floats(min_value=1e-12, max_value=1e15, allow_nan=False),
    spread=st.floats(min_value=0, max_value=1e11, allow_nan=False),
)
def test_it_never_writes_e_notation_for_any_level(mean: float, spread: float) -> None:
    facts = latency(before_mean=mean, before_spread=spread, after_mean=mean * 1.2, after_spread=spread)
    text = " ".join(rows_of(facts).values())
    assert not E_NOTATION.search(text), text


@pytest.mark.parametrize(
    ("value", "expected"), [(0.99997, "> 99.9%"), (0.9995, "> 99.9%"), (0.9994, "99.9%"), (0.97, "97.0%")]
)
def test_it_never_rounds_a_near_certainty_up_to_100_percent(value: float, expected: str) -> None:
    assert content.confidence_text(value) == expected


def test_it_names_what_moved_by_how_much_and_on_what_in_the_subject() -> None:
    assert content.subject_for(alerts=[latency()], digest=False) == (
        "[Critical] p99 latency +21% on Llama-2-70B fp8 8× H200"
    )
    small = latency(pct_change=4.26, severity="warning")
    assert (
        content.subject_for(alerts=[small], digest=False)
        == "[Warning] p99 latency +4.3% on Llama-2-70B fp8 8× H200"
    )


def test_it_names_the_worst_of_a_commits_alerts_and_counts_the_rest() -> None:
    alerts = [
        latency(id=1, severity="warning", pct_change=30.0, metric_label="p50 latency"),
        latency(id=2, severity="critical", pct_change=21.04),
        latency(id=3, severity="critical", pct_change=-12.0, metric_label="Output tokens per second"),
    ]
    assert content.subject_for(alerts=alerts, digest=False) == (
        "[Critical] 3 regressions in 020959f1: p99 latency +21% on Llama-2-70B fp8 8× H200, and 2 more"
    )


def drift(**detail: object) -> AlertFacts:
    base = {
        "model": "Llama-3.1-8B",
        "variant": "int4-awq",
        "task": "mmlu",
        "verdict": "over",
        "loss": 0.03064,
        "budget": 0.03,
        "value": 0.6626,
        "reference_value": 0.68355,
        "measured_at": "2026-11-30T02:00:00+00:00",
        "points": 42,
    }
    base.update(detail)
    return latency(kind="drift", kind_label="Quantization drift", severity="critical", pct_change=-3.064,
                   first_run=None, last_good_run=None, before_mean=None, after_mean=0.03064,
                   detail=base)  # fmt: skip


def test_it_labels_drift_values_and_says_the_budget() -> None:
    rows = rows_of(drift())
    assert rows == {
        "Measured accuracy": "0.6626 (mmlu, 2026-11-30)",
        "Reference accuracy": "0.6835",
        "Accuracy loss": "3.06% of the reference accuracy (budget 3%, over it)",
        "Evaluations": "42 compared with the reference",
    }
    assert content.subject_for(alerts=[drift()], digest=False) == (
        "[Critical] Llama-3.1-8B int4-awq: mmlu accuracy -3.1%, over its 3% budget"
    )
    trending = drift(verdict="trending", loss=0.021, days_to_budget=12.4, slope_per_day=0.0007)
    assert content.what_moved(trending) == (
        "Llama-3.1-8B int4-awq: mmlu accuracy -2.1%, reaches its 3% budget in ~12 days"
    )
    # Signed like the change (negative while accuracy falls), as the quantization pages write it.
    assert rows_of(trending)["Trend of the change"] == (
        "-0.070% per day (accuracy falling), reaches the budget in ~12 days"
    )


def test_it_shows_production_agreement_as_percentages_with_its_budget_and_samples() -> None:
    facts = drift(
        source="production agreement", task="chat", variant="fp8", loss=0.02408, budget=0.01,
        baseline_rate=0.9262, latest_rate=0.9039, latest_samples=8598, value=None, reference_value=None,
        measured_at=None, points=None,
    )  # fmt: skip
    assert rows_of(facts) == {
        "Agreement now": "90.39% (latest window, 8,598 samples)",
        "Agreement, first week": "92.62%",
        "Drop": "2.41% relative to the first week (budget 1%, over it)",
    }
    assert (
        content.what_moved(facts) == "Llama-3.1-8B fp8: production agreement (chat) -2.4%, over its 1% budget"
    )


def test_it_leaves_out_rows_for_evidence_the_alert_does_not_carry() -> None:
    bare = latency(
        before_mean=None, before_spread=None, after_spread=None, confidence=None, first_run=None,
        last_good_run=None, kind="throughput", kind_label="Throughput drop", pct_change=None, detail={},
    )  # fmt: skip
    rows = content.alert_rows(bare)
    assert [r.label for r in rows] == ["Observed"]
    assert rows[0].text == "15,826.4 tokens/s"
    # A drift alert whose detail layout is unknown: no invented rows, the title as subject.
    odd = drift(loss="n/a", budget=None, value=None, reference_value=None, points=None, measured_at=None)
    assert all("–" not in r.text and "—" not in r.text for r in content.alert_rows(odd))
    assert content.what_moved(odd) == odd.title
    # No commit: no empty "Commits" row.
    no_commit = latency(first_run=replace(latency().first_run, commit=""), last_good_run=None)  # type: ignore[type-var]
    assert "Commits" not in rows_of(no_commit)


def test_it_orders_a_digest_by_team_and_commit_worst_first() -> None:
    alerts = [
        latency(id=1, team="Vision", severity="warning", pct_change=5.0),
        latency(id=2, team="Inference Platform", severity="warning", pct_change=30.0),
        latency(id=3, team="Inference Platform", severity="critical", pct_change=8.0,
                first_run=replace(latency().first_run, commit="bbbb00001111")),  # type: ignore[type-var]
        latency(id=4, team="Inference Platform", severity="info", pct_change=-40.0, kind="improvement"),
    ]  # fmt: skip
    sections = content.digest_sections(alerts)
    assert [s.team for s in sections] == ["Inference Platform", "Vision"]
    platform = sections[0]
    assert platform.counts == [("critical", "Critical", 1), ("warning", "Warning", 1), ("info", "Info", 1)]
    assert [g.commit for g in platform.groups] == ["bbbb00001111", "020959f1c3a0"]
    assert [a.id for a in platform.groups[1].alerts] == [2, 4]
    subject = content.subject_for(alerts=alerts, digest=True, day="2026-11-30")
    assert subject == (
        "[accelboard] Daily digest 2026-11-30: 4 alerts (1 critical, 2 warning, 1 info) in Inference Platform, Vision"
    )
