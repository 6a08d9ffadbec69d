"""Plotly figures of the quantization pages, as plain JSON dicts (no ORM, no ``go.Figure``).

Handed to the page with ``json_script`` and drawn by ``static/js/charts.js``. Losses are shown in
percent of the reference accuracy (1.0 = 1% given up); the budget is a shaded band, so that what
is inside it reads as acceptable at a glance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import computation as c

_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 11}
BAND = "rgba(22, 163, 74, 0.10)"
BUDGET = "#dc2626"
FRONTIER = "#111827"
PALETTE = ["#2563eb", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d", "#475569"]


def _layout(*, title: str, x_title: str, y_title: str, height: int = 320) -> dict[str, Any]:
    return {
        "height": height,
        "margin": {"l": 64, "r": 16, "t": 36, "b": 48},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": _FONT,
        "title": {"text": title, "x": 0.01, "y": 0.97, "yanchor": "top", "font": {"size": 12}},
        "xaxis": {"title": {"text": x_title, "standoff": 4}, "gridcolor": "#f3f4f6", "zeroline": True},
        "yaxis": {"title": {"text": y_title}, "gridcolor": "#e5e7eb"},
        "legend": {"orientation": "h", "y": -0.22, "x": 0},
    }


def pareto_figure(*, points: Sequence[dict[str, Any]], budget: float) -> dict[str, Any]:
    """Speedup (×, vs the reference on the same hardware) against accuracy loss (%, worst task).

    ``points``: dicts with ``label``, ``speedup``, ``loss`` (fraction) and ``verdict``. The
    frontier joins the points no other beats on both axes; the band is 0..budget."""
    usable = [p for p in points if p.get("speedup") is not None and p.get("loss") is not None]
    xs = [p["loss"] * 100 for p in usable]
    ys = [p["speedup"] for p in usable]
    frontier = c.pareto_frontier([(p["speedup"], p["loss"]) for p in usable])
    budget_pct = budget * 100
    x_max = max([budget_pct * 1.5, *(x * 1.15 for x in xs)]) if xs else budget_pct * 1.5
    # Room left of zero so that the reference's label (at 0% loss) is not cut off.
    x_min = min([-0.12 * x_max, *(x * 1.15 for x in xs)])
    colors = [BUDGET if p["verdict"] == c.OVER else PALETTE[0] for p in usable]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "markers+text",
            "name": "variant on hardware",
            "x": xs,
            "y": ys,
            "text": [p["label"] for p in usable],
            "textposition": "top center",
            "customdata": [p["verdict"] for p in usable],
            "marker": {"size": 10, "color": colors, "line": {"width": 1, "color": "#ffffff"}},
            "hovertemplate": "%{text}<br>%{y:.2f}× faster, %{x:.2f}% accuracy loss (%{customdata})<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "Pareto frontier",
            "x": [xs[i] for i in frontier],
            "y": [ys[i] for i in frontier],
            "line": {"color": FRONTIER, "width": 1.5, "dash": "dot", "shape": "hv"},
            "hoverinfo": "skip",
        },
    ]
    layout = _layout(
        title="Speedup against accuracy loss (Pareto frontier; green band = within budget)",
        x_title="Accuracy loss vs reference, worst task (%)",
        y_title="Speedup vs reference (×)",
        height=360,
    )
    layout["xaxis"]["range"] = [x_min, x_max]
    layout["shapes"] = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": x_min,
            "x1": budget_pct,
            "y0": 0,
            "y1": 1,
            "fillcolor": BAND,
            "line": {"width": 0},
            "layer": "below",
        },
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": budget_pct,
            "x1": budget_pct,
            "y0": 0,
            "y1": 1,
            "line": {"color": BUDGET, "width": 1.5, "dash": "dash"},
        },
    ]
    layout["annotations"] = [
        {
            "x": budget_pct,
            "y": 1,
            "xref": "x",
            "yref": "paper",
            "text": f"budget {budget_pct:.2g}%",
            "showarrow": False,
            "xanchor": "left",
            "yanchor": "top",
            "font": {"color": BUDGET, "size": 11},
        }
    ]
    return {"data": data, "layout": layout}


def drift_figure(*, title: str, variants: Sequence[dict[str, Any]], budget: float) -> dict[str, Any]:
    """Loss (%) over time of each variant on one task, the budget line and the change points.

    ``variants``: dicts with ``name``, ``pairs`` (``DriftPair``) and ``change_points``
    (dicts with ``at``)."""
    data: list[dict[str, Any]] = []
    shapes: list[dict[str, Any]] = []
    budget_pct = budget * 100
    for i, variant in enumerate(variants):
        color = PALETTE[i % len(PALETTE)]
        pairs = variant["pairs"]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": variant["name"],
                "x": [p.at.isoformat() for p in pairs],
                "y": [p.loss * 100 for p in pairs],
                "line": {"color": color, "width": 1.5},
                "marker": {"size": 4},
                "customdata": [[p.value, p.reference_value] for p in pairs],
                "hovertemplate": variant["name"]
                + ": %{y:.2f}% loss<br>%{customdata[0]:,.4~r} vs reference %{customdata[1]:,.4~r}<extra></extra>",
            }
        )
        cps = variant.get("change_points", [])
        if cps:
            by_at = {p.at: p.loss * 100 for p in pairs}
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": f"{variant['name']} change point",
                    "x": [cp["at"].isoformat() for cp in cps],
                    "y": [by_at.get(cp["at"]) for cp in cps],
                    "marker": {
                        "symbol": "diamond",
                        "size": 11,
                        "color": color,
                        "line": {"width": 1, "color": "#111827"},
                    },
                    "hovertemplate": "change point: %{y:.2f}% loss from here<extra></extra>",
                }
            )
            for cp in cps:
                shapes.append(
                    {
                        "type": "line",
                        "xref": "x",
                        "yref": "paper",
                        "x0": cp["at"].isoformat(),
                        "x1": cp["at"].isoformat(),
                        "y0": 0,
                        "y1": 1,
                        "line": {"color": color, "width": 1, "dash": "dot"},
                    }
                )
    shapes.append(
        {
            "type": "line",
            "xref": "paper",
            "yref": "y",
            "x0": 0,
            "x1": 1,
            "y0": budget_pct,
            "y1": budget_pct,
            "line": {"color": BUDGET, "width": 1.5, "dash": "dash"},
        }
    )
    layout = _layout(title=title, x_title="Evaluation date (UTC)", y_title="Accuracy loss vs reference (%)")
    layout["xaxis"]["type"] = "date"
    layout["shapes"] = shapes
    layout["annotations"] = [
        {
            "x": 1,
            "y": budget_pct,
            "xref": "paper",
            "yref": "y",
            "text": f"budget {budget_pct:.2g}%",
            "showarrow": False,
            "xanchor": "right",
            "yanchor": "bottom",
            "font": {"color": BUDGET, "size": 11},
        }
    ]
    ys = [p.loss * 100 for v in variants for p in v["pairs"]]
    layout["yaxis"]["range"] = [min([0.0, *ys]) - 0.1, max([budget_pct, *ys]) * 1.15 + 0.05]
    return {"data": data, "layout": layout}


def agreement_figure(*, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Production agreement rate (%) per variant and task, per day."""
    series: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        series.setdefault((row["variant__name"], row["task"]), []).append(row)
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": f"{variant} · {task}",
            "x": [r["day"].isoformat() for r in items],
            "y": [r["agreement_rate"] * 100 for r in items],
            "customdata": [[r["samples"], r["kl_divergence"]] for r in items],
            "line": {"color": PALETTE[i % len(PALETTE)], "width": 1.5},
            "marker": {"size": 4},
            "hovertemplate": "%{y:.2f}% agree (%{customdata[0]} samples, KL %{customdata[1]})<extra></extra>",
        }
        for i, ((variant, task), items) in enumerate(series.items())
    ]
    layout = _layout(
        title="Production agreement with the reference on sampled traffic",
        x_title="Day (UTC)",
        y_title="Agreement rate (%)",
        height=280,
    )
    layout["xaxis"]["type"] = "date"
    return {"data": data, "layout": layout}
