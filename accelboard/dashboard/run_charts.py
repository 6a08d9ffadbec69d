"""Plotly figures for the benchmark pages, built from plain rows (no ORM here).

Each function returns a JSON-able dict for ``json_script``; ``static/js/charts.js`` draws it.
The figures are written as plain Plotly JSON rather than through ``plotly.graph_objects``: a run
page draws one chart per metric, and building each through ``go.Figure`` (property validation,
``to_json``) cost ~31 ms, over 0.8 s for a 25-metric vLLM run; the dicts take well under 1 ms.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from accelboard.core.numbers import display_unit

LINE = "#2563eb"
HIGHLIGHT = "#dc2626"
_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 11}


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def _scaled(value: Any, scale: float) -> Any:
    return value / scale if isinstance(value, int | float) and scale != 1 else value


def metric_history_figure(
    *, points: Sequence[dict[str, Any]], label: str, unit: str, direction: str, run_id: int
) -> dict[str, Any]:
    """A small line chart of one series' recent values; the run being viewed is the red marker.

    ``points``: dicts with ``measured_at``, ``value``, ``run_id`` and ``run__git_commit``, oldest
    first. Bytes are charted in GiB (an axis of "76.5B" bytes reads as billions)."""
    unit, scale = display_unit(unit)
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "x": [_iso(p["measured_at"]) for p in points],
            "y": [_scaled(p["value"], scale) for p in points],
            "mode": "lines+markers",
            "name": label,
            "line": {"color": LINE, "width": 1.5},
            "marker": {"size": 5},
            "customdata": [(p.get("run__git_commit") or "")[:10] for p in points],
            "hovertemplate": "%{y:,.4~r} " + unit + "<br>commit %{customdata}<extra></extra>",
        }
    ]
    current = [p for p in points if p["run_id"] == run_id]
    if current:
        data.append(
            {
                "type": "scatter",
                "x": [_iso(current[-1]["measured_at"])],
                "y": [_scaled(current[-1]["value"], scale)],
                "mode": "markers",
                "name": "this run",
                "marker": {"color": HIGHLIGHT, "size": 9},
                "hovertemplate": "this run: %{y:,.4~r} " + unit + "<extra></extra>",
            }
        )
    better = "higher is better" if direction == "higher" else "lower is better"
    layout = {
        "height": 220,
        "margin": {"l": 64, "r": 12, "t": 30, "b": 44},
        "showlegend": False,
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": _FONT,
        "title": {
            "text": f"{label} ({better})",
            "x": 0.01,
            "y": 0.96,
            "yanchor": "top",
            "font": {"size": 12},
        },
        "xaxis": {
            "type": "date",
            "title": {"text": "Run start (UTC)", "standoff": 4},
            "gridcolor": "#f3f4f6",
        },
        "yaxis": {"title": {"text": f"Value ({unit})"}, "gridcolor": "#e5e7eb"},
    }
    return {"data": data, "layout": layout}
