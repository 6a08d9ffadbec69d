"""Plotly figures of profiles, as plain JSON for ``json_script`` (see ``dashboard.run_charts``). Pure."""

from __future__ import annotations

from typing import Any

from . import categories as cats

COLOURS = {
    "gemm": "#1d4ed8",
    "attention": "#7c3aed",
    "conv": "#0891b2",
    "elementwise": "#60a5fa",
    "other_compute": "#93c5fd",
    "communication": "#ea580c",
    "memcpy_htod": "#be185d",
    "memcpy_dtoh": "#db2777",
    "memcpy_dtod": "#f472b6",
    "memcpy_peer": "#f9a8d4",
    "memcpy_other": "#fbcfe8",
    "memset": "#a21caf",
    "idle": "#d1d5db",
}
_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 11}


def _layout(title: str, height: int, **extra: Any) -> dict[str, Any]:
    return {
        "height": height,
        "barmode": "stack",
        "margin": {"l": 70, "r": 12, "t": 34, "b": 40},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": _FONT,
        "legend": {"orientation": "h", "y": -0.2},
        "title": {"text": title, "x": 0.01, "font": {"size": 12}},
        **extra,
    }


def breakdown_figure(*, windows: dict[Any, dict[str, float]], label: str, title: str) -> dict[str, Any]:
    """Stacked bars of each window's (rank's or step's) time per category, in milliseconds: each
    bar's total is that window's GPU timeline span."""
    keys = list(windows)
    names = [f"{label} {key}" for key in keys]
    horizontal = label == "rank"
    data = []
    for category in cats.ALL:
        values = [windows[key].get(category, 0.0) / 1000.0 for key in keys]
        if not any(values):
            continue
        trace: dict[str, Any] = {
            "type": "bar",
            "name": cats.LABELS[category],
            "marker": {"color": COLOURS[category]},
            "hovertemplate": "%{fullData.name}: %{"
            + ("x" if horizontal else "y")
            + ":,.4~r} ms<extra></extra>",
        }
        if horizontal:
            trace.update(x=values, y=names, orientation="h")
        else:
            trace.update(x=names, y=values)
        data.append(trace)
    axis = {"title": {"text": "GPU time (ms)"}, "gridcolor": "#e5e7eb"}
    if horizontal:
        layout = _layout(title, max(260, 140 + 34 * len(keys)), xaxis=axis, yaxis={"autorange": "reversed"})
        layout["legend"] = {"orientation": "h", "y": -0.45, "yanchor": "top"}
        layout["margin"]["b"] = 110
    else:
        layout = _layout(title, 340, yaxis=axis, xaxis={"type": "category"})
        layout["legend"] = {"orientation": "h", "y": -0.15, "yanchor": "top"}
        layout["margin"]["b"] = 100
    return {"data": data, "layout": layout}


def compare_figure(*, rows: list[dict[str, Any]], unit: str) -> dict[str, Any]:
    """A (reference) and B (candidate) per category, side by side, in milliseconds."""
    labels = [row["label"] for row in rows]
    data = [
        {
            "type": "bar",
            "name": name,
            "x": labels,
            "y": [(row[key] or 0.0) / 1000.0 for row in rows],
            "marker": {"color": colour},
            "hovertemplate": name + " %{x}: %{y:,.4~r} ms<extra></extra>",
        }
        for name, key, colour in (("A · reference", "a_us", "#94a3b8"), ("B · candidate", "b_us", "#2563eb"))
    ]
    layout = _layout(f"GPU time per category ({unit})", 300, barmode="group")
    layout["yaxis"] = {"title": {"text": "ms"}, "gridcolor": "#e5e7eb"}
    return {"data": data, "layout": layout}
