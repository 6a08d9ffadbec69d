"""Plotly figures of the finance pages, built in Python from plain rows (no ORM here).

Each function returns a figure as plain JSON data (``{"data": [...], "layout": {...}}``); the
template hands it to plotly.js through ``json_script``. Plain dicts rather than ``go.Figure``:
the run pages measured ~31 ms per ``go.Figure`` against well under 1 ms for the dict.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from accelboard.dashboard.charts import PALETTE

_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12}


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title, "x": 0.01, "y": 0.97, "yanchor": "top"},
        "margin": {"l": 70, "r": 20, "t": 76, "b": 50},
        "height": 360,
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": _FONT,
    }
    layout.update(extra)
    return layout


def spend_over_time_figure(
    *, rows: list[dict[str, Any]], by_label: str, currency: str, days: list[dt.date]
) -> dict[str, Any]:
    """Spend per day, stacked by ``group`` (team or provider).

    ``rows``: dicts with ``day`` (date), ``group`` (str) and ``spend`` (float). ``days`` is the
    whole x range, so a day without spend shows as an empty slot rather than vanishing.
    Groups are ordered by their total, biggest at the bottom of the stack.
    """
    by_group: dict[str, dict[dt.date, float]] = defaultdict(dict)
    totals: dict[str, float] = defaultdict(float)
    for row in rows:
        group = str(row["group"] or "unassigned")
        by_group[group][row["day"]] = by_group[group].get(row["day"], 0.0) + float(row["spend"] or 0.0)
        totals[group] += float(row["spend"] or 0.0)
    x = [day.isoformat() for day in days]
    data = []
    for i, group in enumerate(sorted(totals, key=lambda g: (-totals[g], g))):
        values = by_group[group]
        data.append(
            {
                "type": "bar",
                "name": group,
                "x": x,
                "y": [round(values[day], 2) if day in values else None for day in days],
                "marker": {"color": PALETTE[i % len(PALETTE)]},
                "hovertemplate": "%{y:,.2f} " + currency + "<extra>" + group + "</extra>",
            }
        )
    layout = _layout(
        f"Spend per day by {by_label} ({currency})",
        barmode="stack",
        hovermode="x unified",
        legend_traceorder="normal",
        yaxis={"title": {"text": f"Spend ({currency}/day)"}, "gridcolor": "#e5e7eb", "rangemode": "tozero"},
        xaxis={"title": {"text": "Day (UTC)"}, "type": "date"},
    )
    layout["legend"]["traceorder"] = "normal"
    return {"data": data, "layout": layout}


def spend_treemap_figure(*, rows: list[dict[str, Any]], currency: str) -> dict[str, Any]:
    """Spend of the month as a treemap: team, then accelerator type inside it.

    ``rows``: dicts with ``team``, ``accelerator_type`` and ``spend``. Rows without spend are
    left out (a treemap cannot draw a zero-area tile, and a negative one is meaningless).
    """
    teams: dict[str, float] = defaultdict(float)
    leaves: dict[tuple[str, str], float] = defaultdict(float)
    for row in rows:
        spend = float(row["spend"] or 0.0)
        if spend <= 0:
            continue
        team = str(row["team"] or "unassigned")
        kind = str(row["accelerator_type"] or "unknown type")
        teams[team] += spend
        leaves[(team, kind)] += spend
    ids, labels, parents, values = [], [], [], []
    for team, total in sorted(teams.items(), key=lambda item: -item[1]):
        ids.append(team)
        labels.append(team)
        parents.append("")
        values.append(round(total, 2))
    for (team, kind), spend in sorted(leaves.items(), key=lambda item: -item[1]):
        ids.append(f"{team}/{kind}")
        labels.append(kind)
        parents.append(team)
        values.append(round(spend, 2))
    data = [
        {
            "type": "treemap",
            "ids": ids,
            "labels": labels,
            "parents": parents,
            "values": values,
            "branchvalues": "total",
            "texttemplate": "%{label}<br>%{value:,.0f} " + currency,
            "hovertemplate": "%{label}: %{value:,.2f} " + currency + " (%{percentParent:.0%})<extra></extra>",
        }
    ]
    layout = _layout(f"Spend of the month by team and accelerator type ({currency})", treemapcolorway=PALETTE)
    layout["margin"] = {"l": 10, "r": 10, "t": 50, "b": 10}
    return {"data": data, "layout": layout}
