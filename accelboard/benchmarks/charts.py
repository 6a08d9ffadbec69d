"""Plotly figures for the benchmark pages, built from plain rows (no ORM here).

Each function returns a JSON-able dict for ``json_script``; ``static/js/charts.js`` draws it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

LINE = "#2563eb"
HIGHLIGHT = "#dc2626"


def _figure_json(fig: go.Figure) -> dict[str, Any]:
    return json.loads(fig.to_json())


def metric_history_figure(
    *, points: Sequence[dict[str, Any]], label: str, unit: str, direction: str, run_id: int
) -> dict[str, Any]:
    """A small line chart of one series' recent values; the run being viewed is the red marker.

    ``points``: dicts with ``measured_at``, ``value``, ``run_id`` and ``run__git_commit``, oldest
    first."""
    xs = [p["measured_at"] for p in points]
    ys = [p["value"] for p in points]
    commits = [(p.get("run__git_commit") or "")[:10] for p in points]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines+markers",
            name=label,
            line={"color": LINE, "width": 1.5},
            marker={"size": 5},
            customdata=commits,
            hovertemplate="%{y:,.4g} " + unit + "<br>commit %{customdata}<extra></extra>",
        )
    )
    current = [p for p in points if p["run_id"] == run_id]
    if current:
        fig.add_trace(
            go.Scatter(
                x=[current[-1]["measured_at"]],
                y=[current[-1]["value"]],
                mode="markers",
                name="this run",
                marker={"color": HIGHLIGHT, "size": 9},
                hovertemplate="this run: %{y:,.4g} " + unit + "<extra></extra>",
            )
        )
    better = "higher is better" if direction == "higher" else "lower is better"
    fig.update_layout(
        height=220,
        margin={"l": 64, "r": 12, "t": 30, "b": 44},
        showlegend=False,
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        font={"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 11},
        title={"text": f"{label} ({better})", "x": 0.01, "y": 0.96, "yanchor": "top", "font": {"size": 12}},
        xaxis={"title": {"text": "Run start (UTC)", "standoff": 4}, "gridcolor": "#f3f4f6"},
        yaxis={"title": {"text": f"Value ({unit})"}, "gridcolor": "#e5e7eb"},
    )
    return _figure_json(fig)
