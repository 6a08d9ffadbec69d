"""Plotly figures of the plan page as plain figure JSON (no ORM, no ``go.Figure``: it costs ~30 ms
a figure for validation the page does not need)."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from accelboard.core.charts import TIME_AXIS_MARGIN_R

from . import capacity as c

PALETTE = ["#2563eb", "#d97706", "#7c3aed", "#0891b2", "#db2777"]
TODAY_COLOUR = "#6b7280"

_LAYOUT: dict[str, Any] = {
    "margin": {"l": 70, "r": TIME_AXIS_MARGIN_R, "t": 70, "b": 50},
    "height": 320,
    "hovermode": "x unified",
    "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
    "plot_bgcolor": "#ffffff",
    "paper_bgcolor": "#ffffff",
    "font": {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12},
}


def _title(text: str) -> dict[str, Any]:
    return {"text": text, "x": 0.01, "y": 0.97, "yanchor": "top"}


def sensitivity_figure(
    *, plan: c.Plan, growths: Sequence[float], series: dict[str, list[Decimal | None]]
) -> dict[str, Any]:
    """Monthly cost of the top options against growth per month: steps where a replica is added.
    A dashed line marks the growth assumed, a dotted one today's monthly cost."""
    labels = {o.option.key: o.option.label for o in plan.options}
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines",
            "line": {"shape": "hv", "width": 2.5, "color": PALETTE[i % len(PALETTE)]},
            "name": labels.get(key, key),
            "x": list(growths),
            # Money drawn, not stored: plain numbers for the figure JSON.
            "y": [None if v is None else round(float(v), 2) for v in values],
            "hovertemplate": "%{y:,.0f} " + plan.currency + "<extra>%{fullData.name}</extra>",
        }
        for i, (key, values) in enumerate(series.items())
    ]
    shapes = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": plan.assumptions.growth_pct_per_month,
            "x1": plan.assumptions.growth_pct_per_month,
            "y0": 0,
            "y1": 1,
            "line": {"color": "#111827", "dash": "dash", "width": 1},
        }
    ]
    current = plan.inputs.current
    if current is not None and current.monthly_cost and current.currency == plan.currency:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"today ({current.hardware})",
                "x": [growths[0], growths[-1]],
                "y": [round(float(current.monthly_cost), 2)] * 2,
                "line": {"color": TODAY_COLOUR, "dash": "dot", "width": 1.5},
                "hovertemplate": "%{y:,.0f} " + plan.currency + "<extra>today</extra>",
            }
        )
    return {
        "data": data,
        "layout": {
            **_LAYOUT,
            "title": _title(f"Monthly cost against growth, {plan.assumptions.horizon_months} months ahead"),
            "xaxis": {"title": {"text": "growth (% per month)"}, "ticksuffix": " %", "zeroline": False},
            "yaxis": {
                "title": {"text": f"{plan.currency} per month"},
                "rangemode": "tozero",
                "tickformat": ",.0f",
            },
            "shapes": shapes,
        },
    }


def traffic_figure(*, plan: c.Plan) -> dict[str, Any]:
    """Each day's mean and peak output tokens/s, with the planned peak (growth and headroom in)."""
    days = plan.traffic.days
    x = [d.day.isoformat() for d in days]
    return {
        "data": [
            {
                "type": "bar",
                "name": "daily mean",
                "x": x,
                "y": [round(d.mean_output_tps, 1) for d in days],
                "marker": {"color": "#93c5fd"},
                "hovertemplate": "%{y:,.0f} tokens/s<extra>mean</extra>",
            },
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "daily peak",
                "x": x,
                "y": [round(d.peak_output_tps, 1) for d in days],
                "line": {"color": "#1d4ed8", "width": 2},
                "marker": {"size": 5},
                "hovertemplate": "%{y:,.0f} tokens/s<extra>peak</extra>",
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": "sized for (peak × growth × headroom)",
                "x": [x[0], x[-1]] if x else [],
                "y": [round(plan.sized_tps, 1)] * 2 if x else [],
                "line": {"color": "#dc2626", "dash": "dash", "width": 1.5},
                "hovertemplate": "%{y:,.0f} tokens/s<extra>sized for</extra>",
            },
        ],
        "layout": {
            **_LAYOUT,
            "title": _title("Production output tokens per second, per day"),
            "yaxis": {"title": {"text": "output tokens/s"}, "rangemode": "tozero", "tickformat": ",.0f"},
            "bargap": 0.25,
        },
    }
