"""The trends chart: several series over time, with change points, alerts, baseline bands and
expected-change annotations. Pure: plain values in, Plotly JSON out (no ORM).

1. Change points come from ``alerts.detection.segment`` on each series' whole history (the same
   detector the alerts use, so the chart and the alerts agree).
2. The baseline is ``alerts.levels.baseline_resolve``'s (the one definition the alert pages, the
   emails and the run page use): the current segment's median ± robust spread (1.4826 × MAD), or,
   while a regression alert is open or acknowledged, the segment before its first bad run. The
   band spans that segment only; a held change's current level is drawn over its own segment.
3. Several series share one y axis when their units agree; with two units each gets its own axis
   (left and right); otherwise, or when asked, each is normalised to % of its own baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from accelboard.alerts.detection import DEFAULT_MIN_EFFECT, ChangePoint, segment
from accelboard.alerts.levels import BaselineView, Segment, baseline_resolve
from accelboard.core import numbers

PALETTE = ["#2563eb", "#9333ea", "#0891b2", "#d97706", "#4b5563", "#db2777", "#65a30d", "#7c3aed"]
WORSE = "#dc2626"
BETTER = "#16a34a"
EXPECTED = "#059669"
SEVERITY_COLOURS = {"critical": "#b91c1c", "warning": "#d97706", "info": "#4338ca"}
_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12}

SCALE_AUTO = ""
SCALE_SHARED = "shared"
SCALE_AXES = "axes"
SCALE_NORMALISED = "normalised"
SCALES = (SCALE_AUTO, SCALE_SHARED, SCALE_AXES, SCALE_NORMALISED)


# Alerts that hold the baseline at the level before their change (``alerts.levels``, 2a): the
# values of ``alerts.choices`` (a Django module this pure one may not import).
_HOLDING_STATES = ("open", "acknowledged")
_CHANGE_KINDS = ("regression", "improvement")


@dataclass
class TrendInput:
    """One series as the chart needs it (built by the view from a ``SeriesHistory``)."""

    label: str
    unit: str
    direction: str
    times: Sequence[datetime]
    values: Sequence[float]
    commits: Sequence[str]
    alerts: Sequence[dict[str, Any]]  # id, title, severity, state, url, at, run index or None
    expected: Sequence[dict[str, Any]]  # at, note
    min_effect: float | None = None


def change_points(values: Sequence[float], *, direction: str, min_effect: float | None) -> list[ChangePoint]:
    """``segment`` with the series' own minimum effect (or the detector's default)."""
    if len(values) < 2:
        return []
    return segment(
        np.asarray(values, dtype=float), direction=direction, min_effect=min_effect or DEFAULT_MIN_EFFECT
    )


def _first_at_or_after(times: Sequence[datetime], moment: datetime) -> int | None:
    return next((i for i, at in enumerate(times) if at >= moment), None)


def baseline_current(
    *,
    times: Sequence[datetime],
    values: Sequence[float],
    cps: Sequence[ChangePoint],
    resets: Sequence[datetime],
    alerts: Sequence[dict[str, Any]] = (),
) -> BaselineView | None:
    """The series' baseline and current level (``alerts.levels.baseline_resolve``); None for an
    empty series. ``alerts``: the series' alerts with ``index`` (their first bad point, or None
    when it is not on the chart), ``state``, ``kind`` and ``reverted_index`` (or None)."""
    reset_at = [i for i in (_first_at_or_after(times, r) for r in resets) if i is not None]
    holds: list[int] = []
    ends: list[int] = []
    for alert in alerts:
        index = alert.get("first_index")
        if index is None or alert.get("kind") not in _CHANGE_KINDS:
            continue
        if alert.get("kind") == "regression" and alert.get("state") in _HOLDING_STATES:
            holds.append(index)
        else:
            ends.append(index)
        if alert.get("reverted_index") is not None:
            ends.append(alert["reverted_index"])
    return baseline_resolve(
        values=values, changes=[cp.index for cp in cps], resets=reset_at, holds=holds, ends=ends
    )


def scale_resolve(*, requested: str, units: Sequence[str]) -> str:
    """The scale actually used: shared for one unit, own axes for two, normalised beyond."""
    distinct = list(dict.fromkeys(units))
    if requested == SCALE_SHARED and len(distinct) > 1:
        requested = SCALE_AUTO  # values in different units on one axis would mislead
    if requested == SCALE_AXES and len(distinct) > 2:
        requested = SCALE_NORMALISED
    if requested:
        return requested
    if len(distinct) <= 1:
        return SCALE_SHARED
    return SCALE_AXES if len(distinct) == 2 else SCALE_NORMALISED


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def trend_figure(
    *, inputs: Sequence[TrendInput], scale: str = SCALE_AUTO, x_range: Sequence[str] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The figure and, per series, a summary (change points, baseline) for the table under it."""
    units = [item.unit for item in inputs]
    used = scale_resolve(requested=scale, units=units)
    axis_units = list(dict.fromkeys(units))
    data: list[dict[str, Any]] = []
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    single = len(inputs) == 1

    for position, item in enumerate(inputs):
        colour = PALETTE[position % len(PALETTE)]
        cps = change_points(item.values, direction=item.direction, min_effect=item.min_effect)
        view = baseline_current(
            times=item.times,
            values=item.values,
            cps=cps,
            resets=[e["at"] for e in item.expected],
            alerts=item.alerts,
        )
        baseline = view.baseline if view else None
        factor = 1.0
        if used == SCALE_NORMALISED and baseline and baseline.level:
            factor = 100.0 / baseline.level
        yaxis = "y2" if used == SCALE_AXES and axis_units.index(item.unit) == 1 else "y"
        unit = "% of baseline" if used == SCALE_NORMALISED else item.unit
        ys = [round(v * factor, 6) for v in item.values]
        xs = [_iso(t) for t in item.times]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": item.label,
                "x": xs,
                "y": ys,
                "yaxis": yaxis,
                "line": {"color": colour, "width": 1.6},
                "marker": {"size": 5, "color": colour},
                "customdata": [c[:10] for c in item.commits],
                "hovertemplate": "%{y:,.4~r} "
                + unit
                + "<br>commit %{customdata}<extra>"
                + item.label
                + "</extra>",
                "meta": {"role": "series", "series": position},
            }
        )
        if view is not None and baseline is not None:
            data.extend(
                _level_traces(
                    segment=baseline,
                    xs=xs,
                    factor=factor,
                    colour=colour,
                    yaxis=yaxis,
                    unit=unit,
                    name=f"baseline · {item.label}",
                    role="baseline",
                    position=position,
                )
            )
            if view.held:
                # The regressed level, over its own results: shown beside the baseline, never as it.
                data.extend(
                    _level_traces(
                        segment=view.current,
                        xs=xs,
                        factor=factor,
                        colour=WORSE,
                        yaxis=yaxis,
                        unit=unit,
                        name=f"current level · {item.label}",
                        role="current",
                        position=position,
                    )
                )
        if cps:
            worse = [cp.kind == "regression" for cp in cps]
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": "change points" if single else f"change points · {item.label}",
                    "x": [xs[cp.index] for cp in cps],
                    "y": [ys[cp.index] for cp in cps],
                    "yaxis": yaxis,
                    "marker": {
                        "symbol": "diamond-open",
                        "size": 13,
                        "line": {"width": 2},
                        "color": [WORSE if w else BETTER for w in worse],
                    },
                    "customdata": [f"{cp.pct_change:+.1f}% ({cp.kind})" for cp in cps],
                    "hovertemplate": "change point %{customdata}<extra></extra>",
                    "showlegend": single,
                    "meta": {"role": "change-points", "series": position},
                }
            )
            for cp, w in zip(cps, worse, strict=True):
                shapes.append(
                    {
                        "type": "line",
                        "xref": "x",
                        "yref": "paper",
                        "x0": xs[cp.index],
                        "x1": xs[cp.index],
                        "y0": 0,
                        "y1": 1,
                        "line": {"color": WORSE if w else BETTER, "width": 1, "dash": "dash"},
                    }
                )
        placed = [a for a in item.alerts if a.get("index") is not None]
        if placed:
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": "alerts" if single else f"alerts · {item.label}",
                    "x": [xs[a["index"]] for a in placed],
                    "y": [ys[a["index"]] for a in placed],
                    "yaxis": yaxis,
                    "marker": {
                        "symbol": "x",
                        "size": 12,
                        "color": [SEVERITY_COLOURS.get(a["severity"], WORSE) for a in placed],
                    },
                    "text": [f"{a['severity']}: {a['title']} ({a['state']})" for a in placed],
                    # Clicking an alert marker opens the alert (static/js/trends.js).
                    "customdata": [a["url"] for a in placed],
                    "hovertemplate": "%{text}<br>click to open<extra></extra>",
                    "showlegend": single,
                    "meta": {"role": "alerts", "series": position},
                }
            )
        for change in item.expected:
            at = _iso(change["at"])
            shapes.append(
                {
                    "type": "line",
                    "xref": "x",
                    "yref": "paper",
                    "x0": at,
                    "x1": at,
                    "y0": 0,
                    "y1": 1,
                    "line": {"color": EXPECTED, "width": 1.5, "dash": "dot"},
                }
            )
            note = str(change["note"])
            annotations.append(
                {
                    "x": at,
                    "xref": "x",
                    "y": 0.99,
                    "yref": "paper",
                    "yanchor": "top",
                    "xanchor": "left",
                    "text": "expected: " + (note if len(note) <= 40 else note[:39] + "…"),
                    "showarrow": False,
                    "font": {"size": 10, "color": EXPECTED},
                    "bgcolor": "rgba(255,255,255,0.85)",
                }
            )
        summaries.append(
            {
                "label": item.label,
                "unit": item.unit,
                "direction": item.direction,
                "colour": colour,
                "points": len(item.values),
                "change_points": [
                    {
                        "at": item.times[cp.index],
                        "pct_change": cp.pct_change,
                        "kind": cp.kind,
                        "confidence": cp.confidence,
                    }
                    for cp in cps
                ],
                "baseline": baseline,
                "baseline_text": _level_text(baseline, item.unit) if baseline else "",
                "baseline_since": item.times[baseline.start] if baseline else None,
                "baseline_until": item.times[baseline.end] if baseline and view and view.held else None,
                # While a regression is open the baseline stays before it; the level now is apart.
                "current": view.current if view and view.held else None,
                "current_text": _level_text(view.current, item.unit) if view and view.held else "",
                "current_since": item.times[view.current.start] if view and view.held else None,
                "current_pct": view.current_pct if view and view.held else None,
            }
        )

    layout: dict[str, Any] = {
        "height": 520,
        "margin": {"l": 72, "r": 72 if used == SCALE_AXES else 24, "t": 64, "b": 40},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": _FONT,
        "hovermode": "closest",
        # Legend above the plot (below, it collided with the range slider and the axis title).
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        "shapes": shapes,
        "annotations": annotations,
        "xaxis": {
            "type": "date",
            "title": {"text": "Run start (UTC)", "standoff": 4},
            "gridcolor": "#f3f4f6",
            "rangeslider": {"visible": True, "thickness": 0.08},
            "rangeselector": {
                "x": 1,
                "xanchor": "right",
                "y": 1.02,
                "yanchor": "bottom",
                "buttons": [
                    {"count": 7, "label": "7d", "step": "day", "stepmode": "backward"},
                    {"count": 1, "label": "1m", "step": "month", "stepmode": "backward"},
                    {"count": 3, "label": "3m", "step": "month", "stepmode": "backward"},
                    {"count": 1, "label": "1y", "step": "year", "stepmode": "backward"},
                    {"step": "all", "label": "all"},
                ],
            },
        },
        # One tick format on both axes: thousands separators, no SI suffix ("16k" on the left
        # beside "7194" on the right read as different kinds of number).
        "yaxis": {"title": {"text": _axis_title(used, axis_units, 0)}, "gridcolor": "#e5e7eb", **TICKS},
        "meta": {"scale": used},
    }
    if used == SCALE_AXES:
        layout["yaxis2"] = {
            "title": {"text": _axis_title(used, axis_units, 1)},
            "overlaying": "y",
            "side": "right",
            "showgrid": False,
            **TICKS,
        }
    if x_range:
        layout["xaxis"]["range"] = list(x_range)
        layout["xaxis"]["autorange"] = False
    return {"data": data, "layout": layout}, summaries


def _level_text(segment: Segment, unit: str) -> str:
    """A level as the alert page writes one (``core.numbers``: never e-notation, bytes in binary
    units): four significant digits ± two."""
    if unit == "bytes":
        return numbers.level_text(segment.level, segment.spread, unit)
    return f"{numbers.sig(segment.level, digits=4)} ± {numbers.sig(segment.spread, digits=2)} {unit}"


def _level_traces(
    *,
    segment: Segment,
    xs: Sequence[str],
    factor: float,
    colour: str,
    yaxis: str,
    unit: str,
    name: str,
    role: str,
    position: int,
) -> list[dict[str, Any]]:
    """A level's band (median ± spread) and its median line, over its segment's first to last point."""
    lo, hi = (segment.level - segment.spread) * factor, (segment.level + segment.spread) * factor
    t0, t1 = xs[segment.start], xs[segment.end]
    level = segment.level * factor
    word = name.split(" · ")[0]
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "name": name,
            "x": [t0, t1, t1, t0, t0],
            "y": [lo, lo, hi, hi, lo],
            "yaxis": yaxis,
            "fill": "toself",
            "fillcolor": _rgba(colour, 0.12),
            "line": {"width": 0},
            "hoverinfo": "skip",
            "showlegend": False,
            "meta": {"role": role, "series": position, "start": segment.start, "end": segment.end},
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"{word} median · {name.split(' · ', 1)[-1]}",
            "x": [t0, t1],
            "y": [level, level],
            "yaxis": yaxis,
            "line": {"color": colour, "width": 1, "dash": "dot"},
            "hovertemplate": word + " %{y:,.4~r} " + unit + "<extra></extra>",
            "showlegend": False,
            "meta": {
                "role": f"{role}-level",
                "series": position,
                "start": segment.start,
                "end": segment.end,
                "level": True,
            },
        },
    ]


TICKS = {"tickformat": ",~r", "exponentformat": "none"}


def _axis_title(scale: str, units: Sequence[str], index: int) -> str:
    if scale == SCALE_NORMALISED:
        return "% of current baseline"
    if scale == SCALE_AXES:
        return f"Value ({units[index]})"
    return f"Value ({units[0]})" if units else "Value"


def _rgba(hex_colour: str, alpha: float) -> str:
    red, green, blue = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def alert_index(*, alert: dict[str, Any], run_ids: Sequence[int], times: Sequence[datetime]) -> int | None:
    """Which point an alert marks: its first run's point, else the last point before it opened."""
    if alert.get("first_run_id") in run_ids:
        return list(run_ids).index(alert["first_run_id"])
    at = alert.get("first_run__started_at") or alert.get("opened_at")
    before = [i for i, moment in enumerate(times) if at is not None and moment <= at]
    return before[-1] if before else None
