"""Plotly figures for the alert pages, built from plain rows (no ORM here).

The alert detail chart is what a person looks at to decide whether a regression is real: the
series' points over time, the alert's change point as a red vertical line, the level before and
after as median ± spread bands, the other change points ``segment`` finds in the history (dotted),
and the marks people left when they declared a change expected. Each level is a segment of
``alerts.levels`` (cut at the detector's change points, the alert's first bad run, its revert and
the expected marks): its line runs from the segment's first result to its last, at the median of
those results, never across the whole chart. Figures are plain Plotly JSON
dicts (as on the run page: ``go.Figure`` costs ~30 ms per chart for nothing we need) handed to the
page through ``json_script`` and drawn by ``static/js/charts.js``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from accelboard.core import numbers
from accelboard.core.charts import TIME_AXIS_MARGIN_R

LINE = "#2563eb"
CHANGE = "#dc2626"
BEFORE = "#16a34a"
AFTER = "#dc2626"
HISTORY = "#94a3b8"
EXPECTED = "#d97706"
_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12}


@dataclass(frozen=True)
class LevelSpan:
    """A level drawn over the results it holds: first and last result's time, median, spread
    (None when too few results have one), and how many results."""

    start: datetime
    end: datetime
    level: float
    spread: float | None
    count: int


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def _band(*, name: str, span: LevelSpan, colour: str, unit: str) -> list[dict[str, Any]]:
    """A level as a line at its median over its results, with a shaded ± spread band around it."""
    x0, x1, mean, spread = _iso(span.start), _iso(span.end), span.level, span.spread
    traces: list[dict[str, Any]] = []
    if spread is not None and spread > 0:
        traces.append(
            {
                "type": "scatter",
                "x": [x0, x1, x1, x0, x0],
                "y": [mean - spread, mean - spread, mean + spread, mean + spread, mean - spread],
                "fill": "toself",
                "fillcolor": colour + "22",  # 8-digit hex: the colour at ~13% opacity
                "line": {"width": 0},
                "mode": "lines",
                "name": f"{name} ± spread",
                "hoverinfo": "skip",
                "showlegend": False,
                "meta": {"role": f"{name}-band"},
            }
        )
    level = (
        numbers.level_text(mean, spread or None, unit)
        if unit == "bytes"
        else numbers.sig(mean, digits=4) + (f" ± {numbers.spread(spread)}" if spread else "") + f" {unit}"
    )
    label = f"{name}: {level} (median of {span.count} result{'' if span.count == 1 else 's'})"
    traces.append(
        {
            "type": "scatter",
            "x": [x0, x1],
            "y": [mean, mean],
            "mode": "lines",
            "name": label,
            "line": {"color": colour, "width": 2, "dash": "dash"},
            "hovertemplate": label + "<extra></extra>",
            # ``level``: a level over the results it spans (what tests/numbers.py checks it by).
            "meta": {"role": name, "level": True},
        }
    )
    return traces


def alert_series_figure(
    *,
    points: Sequence[dict[str, Any]],
    label: str,
    unit: str,
    direction: str,
    change_at: datetime | None,
    before: LevelSpan | None,
    after: LevelSpan | None,
    history_changes: Sequence[datetime] = (),
    expected: Sequence[dict[str, Any]] = (),
    run_ids: Sequence[int] = (),
) -> dict[str, Any]:
    """The series around an alert, as a Plotly figure dict.

    ``points``: dicts with ``measured_at``, ``value``, ``run_id`` and ``git_commit``, oldest first.
    ``change_at``: when the first bad result was measured (the red line). ``before``/``after``:
    the segments either side of the change, each drawn over its own results only.
    ``history_changes``: other change points of the series (dotted grey lines). ``expected``:
    dicts with ``at`` (datetime) and ``text``, the changes people declared intended.
    ``run_ids``: runs to ring (last good and first bad).
    """
    xs = [_iso(p["measured_at"]) for p in points]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "x": xs,
            "y": [p["value"] for p in points],
            "mode": "lines+markers",
            "name": label,
            "line": {"color": LINE, "width": 1.2},
            "marker": {"size": 5, "color": LINE},
            "customdata": [[(p.get("git_commit") or "")[:10], p["run_id"]] for p in points],
            "hovertemplate": "%{y:,.4~r} " + unit + "<br>run %{customdata[1]} · commit %{customdata[0]}"
            "<extra></extra>",
            "meta": {"role": "series"},
        }
    ]
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    if xs:
        change_x = _iso(change_at) if change_at else None
        if change_x and before is not None:
            data.extend(_band(name="before", span=before, colour=BEFORE, unit=unit))
        if change_x and after is not None:
            data.extend(_band(name="after", span=after, colour=AFTER, unit=unit))
        ringed = [p for p in points if p["run_id"] in set(run_ids)]
        if ringed:
            data.append(
                {
                    "type": "scatter",
                    "x": [_iso(p["measured_at"]) for p in ringed],
                    "y": [p["value"] for p in ringed],
                    "mode": "markers",
                    "name": "last good / first bad run",
                    "marker": {"size": 11, "color": "rgba(0,0,0,0)", "line": {"color": CHANGE, "width": 2}},
                    "hoverinfo": "skip",
                }
            )
        for moment in history_changes:
            shapes.append(_vline(_iso(moment), colour=HISTORY, dash="dot", width=1, name="history-change"))
        if change_x:
            shapes.append(_vline(change_x, colour=CHANGE, dash="solid", width=2, name="change-point"))
            annotations.append(_note(change_x, "change point", colour=CHANGE, y=1.0))
        for mark in expected:
            x = _iso(mark["at"])
            shapes.append(_vline(x, colour=EXPECTED, dash="dash", width=1.5, name="expected-change"))
            annotations.append(_note(x, f"expected: {mark['text']}"[:60], colour=EXPECTED, y=0.92))
    better = "higher is better" if direction == "higher" else "lower is better"
    layout = {
        "height": 380,
        "margin": {"l": 70, "r": TIME_AXIS_MARGIN_R, "t": 70, "b": 50},
        "hovermode": "closest",
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": _FONT,
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        "title": {"text": f"{label} ({better})", "x": 0.01, "y": 0.98, "yanchor": "top"},
        "xaxis": {"type": "date", "title": {"text": "Run start (UTC)"}, "gridcolor": "#f3f4f6"},
        "yaxis": {"title": {"text": f"{label} ({unit})"}, "gridcolor": "#e5e7eb"},
        "shapes": shapes,
        "annotations": annotations,
    }
    return {"data": data, "layout": layout}


def _vline(x: str, *, colour: str, dash: str, width: float, name: str) -> dict[str, Any]:
    return {
        "type": "line",
        "name": name,
        "xref": "x",
        "yref": "paper",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "line": {"color": colour, "width": width, "dash": dash},
    }


def _note(x: str, text: str, *, colour: str, y: float) -> dict[str, Any]:
    return {
        "x": x,
        "xref": "x",
        "y": y,
        "yref": "paper",
        "text": text,
        "showarrow": False,
        "xanchor": "left",
        "yanchor": "top",
        "font": {"color": colour, "size": 11},
        "bgcolor": "rgba(255,255,255,0.8)",
    }
