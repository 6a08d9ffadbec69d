"""Plotly figures of the canary page, as plain JSON dicts: one metric's per-interval values of the
baseline and of the canary over the window, drawn by ``static/js/charts.js``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 11}
BASELINE = "#2563eb"
CANARY = "#d97706"


def metric_figure(
    *,
    title: str,
    unit: str,
    baseline: tuple[Sequence[str], Sequence[float | None]],
    canary: tuple[Sequence[str], Sequence[float | None]],
    verdict: str,
) -> dict[str, Any]:
    """Both deployments' values over time (ISO times); the verdict in the title."""

    def trace(name: str, xs: Sequence[str], ys: Sequence[float | None], color: str) -> dict[str, Any]:
        return {
            "type": "scatter",
            "mode": "lines+markers",
            "name": name,
            "x": list(xs),
            "y": list(ys),
            "connectgaps": False,
            "line": {"color": color, "width": 1.5},
            "marker": {"size": 3, "color": color},
        }

    return {
        "data": [trace("baseline", *baseline, BASELINE), trace("canary", *canary, CANARY)],
        "layout": {
            "height": 240,
            "margin": {"l": 56, "r": 12, "t": 30, "b": 36},
            "plot_bgcolor": "#ffffff",
            "paper_bgcolor": "#ffffff",
            "font": _FONT,
            "title": {
                "text": f"{title} · {verdict}",
                "x": 0.01,
                "y": 0.96,
                "yanchor": "top",
                "font": {"size": 12},
            },
            "xaxis": {"type": "date", "gridcolor": "#f3f4f6"},
            "yaxis": {"title": {"text": unit}, "gridcolor": "#e5e7eb", "rangemode": "tozero"},
            "legend": {"orientation": "h", "y": -0.25, "x": 0},
        },
    }
