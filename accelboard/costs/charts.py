"""Plotly figures of the finance pages, built in Python from plain rows (no ORM here).

Each function returns a figure as plain JSON data (``{"data": [...], "layout": {...}}``); the
template hands it to plotly.js through ``json_script``. Plain dicts rather than ``go.Figure``:
the run pages measured ~31 ms per ``go.Figure`` against well under 1 ms for the dict.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from accelboard.core.charts import PALETTE, TIME_AXIS_MARGIN_R

_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12}


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title, "x": 0.01, "y": 0.97, "yanchor": "top"},
        "margin": {"l": 70, "r": TIME_AXIS_MARGIN_R, "t": 76, "b": 50},
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
    by_group: dict[str, dict[dt.date, Decimal]] = defaultdict(dict)
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        group = str(row["group"] or "unassigned")
        spend = _decimal(row["spend"])
        by_group[group][row["day"]] = by_group[group].get(row["day"], Decimal(0)) + spend
        totals[group] += spend
    x = [day.isoformat() for day in days]
    data = []
    for i, group in enumerate(sorted(totals, key=lambda g: (-totals[g], g))):
        values = by_group[group]
        data.append(
            {
                "type": "bar",
                "name": group,
                "x": x,
                "y": [float(_cents(values[day])) if day in values else None for day in days],
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
        # The bars add up to the page's spend card (checked by the tests of every page).
        meta={"sums_to": "spend"},
    )
    layout["legend"]["traceorder"] = "normal"
    return {"data": data, "layout": layout}


def _decimal(value: Any) -> Decimal:
    if value is None:
        return Decimal(0)
    return value if isinstance(value, Decimal) else Decimal(repr(float(value)))


def _cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)


def spend_treemap_figure(*, rows: list[dict[str, Any]], currency: str) -> dict[str, Any]:
    """Spend of the month as a treemap: team, then accelerator type inside it.

    ``rows``: dicts with ``team``, ``accelerator_type`` and ``spend``. Rows without spend are
    left out (a treemap cannot draw a zero-area tile, and a negative one is meaningless).
    """
    # Each tile is rounded to the cent first and a team is the sum of its rounded tiles: Plotly
    # draws nothing when a parent (rounded on its own) is a cent smaller than its children.
    leaves: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for row in rows:
        spend = _decimal(row["spend"])
        if spend <= 0:
            continue
        team = str(row["team"] or "unassigned")
        kind = str(row["accelerator_type"] or "unknown type")
        leaves[(team, kind)] += spend
    rounded = {key: _cents(spend) for key, spend in leaves.items() if _cents(spend) > 0}
    teams: dict[str, Decimal] = defaultdict(Decimal)
    for (team, _kind), spend in rounded.items():
        teams[team] += spend
    ids, labels, parents, values = [], [], [], []
    for team, total in sorted(teams.items(), key=lambda item: (-item[1], item[0])):
        ids.append(team)
        labels.append(team)
        parents.append("")
        values.append(float(total))
    for (team, kind), spend in sorted(rounded.items(), key=lambda item: (-item[1], item[0])):
        ids.append(f"{team}/{kind}")
        labels.append(kind)
        parents.append(team)
        values.append(float(spend))
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
    layout = _layout(
        f"Spend of the month by team and accelerator type ({currency})",
        treemapcolorway=PALETTE,
        meta={"sums_to": "spend"},
    )
    layout["margin"] = {"l": 10, "r": 10, "t": 50, "b": 10}
    return {"data": data, "layout": layout}
