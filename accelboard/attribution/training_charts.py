"""The job page's training chart: step time, cost and energy per step over the job's life (no
ORM here). One panel per figure on a shared date axis, each interval drawn as a step from its
start to its end; a dashed line where a step-time alert says the slowdown began."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from accelboard.core.charts import PALETTE, TIME_AXIS_MARGIN_R

from .training import Interval

_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 11}


def _steps(intervals: Sequence[Interval], value: Any) -> tuple[list[str], list[float | None]]:
    """x and y of a step line: each interval's value held from its start to its end."""
    xs: list[str] = []
    ys: list[float | None] = []
    for interval in intervals:
        figure = value(interval)
        xs += [interval.start.isoformat(), interval.end.isoformat()]
        ys += [figure, figure]
    return xs, ys


def training_figure(
    *, intervals: Sequence[Interval], currency: str, changes: Sequence[datetime] = (), with_cost: bool = True
) -> dict[str, Any]:
    """Step time (s), cost per step (``currency``) and energy per step (J), top to bottom."""
    panels: list[tuple[str, Any]] = [("Step time (s)", lambda i: i.step_time_s)]
    if with_cost:
        panels.append((f"Cost per step ({currency})", lambda i: i.cost_per_step))
    panels.append(("Energy per step (J)", lambda i: i.energy_per_step_j))
    n = len(panels)
    gap = 0.08
    height = (1.0 - gap * (n - 1)) / n
    traces = []
    layout: dict[str, Any] = {
        "height": 180 * n + 60,
        "margin": {"l": 70, "r": TIME_AXIS_MARGIN_R, "t": 40, "b": 40},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": _FONT,
        "showlegend": False,
        "title": {"text": "Per step over the job's life (UTC)", "x": 0, "xanchor": "left"},
        "shapes": [],
    }
    for k, (label, value) in enumerate(panels):
        axis = "" if k == 0 else str(k + 1)
        xs, ys = _steps(intervals, value)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": label,
                "x": xs,
                "y": ys,
                "xaxis": f"x{axis}",
                "yaxis": f"y{axis}",
                "line": {"color": PALETTE[k], "width": 2},
                "hovertemplate": f"%{{x}}<br>{label}: %{{y:.4g}}<extra></extra>",
            }
        )
        top = 1.0 - k * (height + gap)
        layout[f"yaxis{axis}"] = {
            "title": {"text": label},
            "domain": [top - height, top],
            "gridcolor": "#e5e7eb",
            "rangemode": "tozero",
        }
        layout[f"xaxis{axis}"] = {
            "type": "date",
            "gridcolor": "#e5e7eb",
            "anchor": f"y{axis}",
            **({"matches": "x"} if k else {}),
            "showticklabels": k == n - 1,
        }
    for change in changes:
        layout["shapes"].append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": change.isoformat(),
                "x1": change.isoformat(),
                "y0": 0,
                "y1": 1,
                "line": {"color": "#b91c1c", "dash": "dash", "width": 1.5},
            }
        )
    return {"data": traces, "layout": layout}
