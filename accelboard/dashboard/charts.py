"""Plotly figures built in Python from plain DataFrames (no ORM here).

Each function returns a figure as a JSON-able dict; templates hand it to plotly.js through
``json_script``, never by building JavaScript strings.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from accelboard.core.charts import PALETTE, TIME_AXIS_MARGIN_R

_LAYOUT: dict[str, Any] = {
    "margin": {"l": 60, "r": TIME_AXIS_MARGIN_R, "t": 76, "b": 50},
    "height": 360,
    "hovermode": "x unified",
    # The legend sits in its own row between the title and the plot: at the bottom it collided
    # with the x-axis title, and beside the title it overlaps once there are a few types.
    "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
    "plot_bgcolor": "#ffffff",
    "paper_bgcolor": "#ffffff",
    "font": {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12},
}


def figure_json(fig: go.Figure) -> dict[str, Any]:
    """A figure as plain JSON data (numpy arrays turned into lists by plotly's encoder)."""
    return json.loads(fig.to_json())


def fleet_utilisation_figure(frame: pd.DataFrame) -> dict[str, Any]:
    """Mean GPU utilisation per hour, one line per accelerator type."""
    fig = go.Figure()
    for i, (name, rows) in enumerate(frame.groupby("accelerator_type", sort=True)):
        fig.add_trace(
            go.Scatter(
                x=rows["bucket"],
                y=rows["gpu_util"].astype(float).round(1),
                mode="lines",
                name=str(name),
                line={"color": PALETTE[i % len(PALETTE)], "width": 1.5},
                hovertemplate="%{y:.1f}%<extra>" + str(name) + "</extra>",
            )
        )
    fig.update_layout(
        **_LAYOUT,
        title={
            "text": "GPU utilisation by accelerator type (hourly mean)",
            "x": 0.01,
            "y": 0.97,
            "yanchor": "top",
        },
        yaxis={"title": "GPU utilisation (%)", "range": [0, 100], "gridcolor": "#e5e7eb"},
        xaxis={"title": "Time (UTC)", "gridcolor": "#f3f4f6"},
    )
    return figure_json(fig)


def fleet_energy_figure(frame: pd.DataFrame) -> dict[str, Any]:
    """Energy per day (kWh), stacked by accelerator type."""
    fig = go.Figure()
    if not frame.empty:
        daily = frame.assign(day=pd.to_datetime(frame["bucket"], utc=True).dt.floor("D"))
        daily = daily.groupby(["day", "accelerator_type"], as_index=False)["energy_kwh"].sum()
        for i, (name, rows) in enumerate(daily.groupby("accelerator_type", sort=True)):
            fig.add_trace(
                go.Bar(
                    x=rows["day"],
                    y=rows["energy_kwh"].astype(float).round(1),
                    name=str(name),
                    marker_color=PALETTE[i % len(PALETTE)],
                    hovertemplate="%{y:,.1f} kWh<extra>" + str(name) + "</extra>",
                )
            )
    fig.update_layout(
        **_LAYOUT,
        barmode="stack",
        # Plotly reverses the legend of stacked bars by default; keep the utilisation chart's
        # order so each accelerator type sits in the same place, with the same colour, on both.
        legend_traceorder="normal",
        title={"text": "GPU energy per day", "x": 0.01, "y": 0.97, "yanchor": "top"},
        yaxis={"title": "Energy (kWh)", "gridcolor": "#e5e7eb"},
        xaxis={"title": "Day (UTC)"},
    )
    return figure_json(fig)


def spend_days_figure(spend: dict[str, Any]) -> dict[str, Any]:
    """Spend per day stacked by team (``costs.selectors.cost_daily_series``), in its currency."""
    currency = spend["currency"]
    fig = go.Figure()
    for i, series in enumerate(spend["series"]):
        fig.add_trace(
            go.Bar(
                x=[d.isoformat() for d in spend["days"]],
                y=[round(float(v), 2) for v in series["values"]],
                name=str(series["label"]),
                marker_color=PALETTE[i % len(PALETTE)],
                hovertemplate="%{y:,.2f} " + currency + "<extra>" + str(series["label"]) + "</extra>",
            )
        )
    fig.update_layout(
        **_LAYOUT,
        barmode="stack",
        legend_traceorder="normal",
        title={"text": "Spend per day by team (capacity + energy)", "x": 0.01, "y": 0.97, "yanchor": "top"},
        yaxis={"title": f"Spend ({currency})", "gridcolor": "#e5e7eb", "tickformat": ",.0f"},
        xaxis={"title": "Day (UTC)"},
    )
    return figure_json(fig)
