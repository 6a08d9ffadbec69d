"""Plotly figures of the hardware page, as plain figure JSON (no ORM, no ``go.Figure``).

Built as dicts rather than through ``plotly.graph_objects``: the run pages measured ~31 ms per
``go.Figure`` for validation we do not need, and the page budget is 300 ms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .charts import PALETTE
from .hardware import ConfigPoint, Sweep

FRONTIER_COLOUR = "#111827"
DOMINATED_OPACITY = 0.3
# Above this max/min ratio the cost axis is logarithmic.
LOG_AXIS_SPAN = 10.0

_LAYOUT: dict[str, Any] = {
    "margin": {"l": 70, "r": 20, "t": 76, "b": 56},
    "height": 380,
    "hovermode": "closest",
    "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
    "plot_bgcolor": "#ffffff",
    "paper_bgcolor": "#ffffff",
    "font": {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12},
}


def _title(text: str) -> dict[str, Any]:
    return {"text": text, "x": 0.01, "y": 0.97, "yanchor": "top"}


def accelerator_colours(points: Sequence[ConfigPoint]) -> dict[str, str]:
    """One colour per accelerator type, in name order, stable between the two charts."""
    names = sorted({p.accelerator for p in points})
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def pareto_figure(
    *, points: Sequence[ConfigPoint], frontier: Sequence[bool], currency: str, cost_unit: str
) -> dict[str, Any]:
    """Cost per 1M against p99 latency: one trace per accelerator type, dominated points faded,
    and the frontier drawn as a line through the points nothing beats on both."""
    colours = accelerator_colours(points)
    data: list[dict[str, Any]] = []
    for name, colour in colours.items():
        # Frontier points first: the legend takes its colour from the trace's first point, and a
        # faded legend symbol would read as "this accelerator is dominated".
        members = sorted(
            ((p, on) for p, on in zip(points, frontier, strict=True) if p.accelerator == name),
            key=lambda member: (not member[1], member[0].p99_ms),
        )
        if not members:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": name,
                "x": [p.p99_ms for p, _ in members],
                "y": [round(p.total_cost_per_1m or 0.0, 6) for p, _ in members],
                "text": [p.label for p, _ in members],
                "marker": {
                    # Faded by colour, not by marker.opacity: plotly draws the legend symbol with
                    # the mean of an opacity array, which would fade the whole accelerator.
                    "color": [colour if on else _faded(colour) for _, on in members],
                    "size": 12,
                    "line": {"color": "#ffffff", "width": 1},
                },
                "hovertemplate": "%{text}<br>p99 %{x:,.4~r} ms<br>%{y:,.4~r} " + currency + "<extra></extra>",
            }
        )
    best = sorted(
        (p for p, on in zip(points, frontier, strict=True) if on),
        key=lambda p: (p.p99_ms, p.total_cost_per_1m),
    )
    data.append(
        {
            "type": "scatter",
            "mode": "lines",
            "name": "Pareto frontier",
            "x": [p.p99_ms for p in best],
            "y": [round(p.total_cost_per_1m or 0.0, 6) for p in best],
            "line": {"color": FRONTIER_COLOUR, "width": 1.5, "dash": "dot", "shape": "hv"},
            "hoverinfo": "skip",
        }
    )
    costs = [p.total_cost_per_1m for p in points if p.total_cost_per_1m]
    # Costs across accelerators often span more than a decade: a log axis keeps the cheap end
    # (where the answer usually is) readable.
    log_cost = bool(costs) and max(costs) / min(costs) > LOG_AXIS_SPAN
    y_title = f"Total cost per 1M {cost_unit or 'unit'}s ({currency}{', log scale' if log_cost else ''})"
    yaxis: dict[str, Any] = {"title": {"text": y_title}, "gridcolor": "#e5e7eb"}
    if log_cost:
        ticks = _log_ticks(low=min(costs), high=max(costs))
        yaxis.update({"type": "log", "tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]})
    else:
        yaxis["rangemode"] = "tozero"
    layout = {
        **_LAYOUT,
        "title": _title("Cost per 1M against p99 latency (lower left is better)"),
        "xaxis": {"title": {"text": "p99 latency (ms)"}, "gridcolor": "#f3f4f6"},
        "yaxis": yaxis,
    }
    return {"data": data, "layout": layout}


def _faded(colour: str) -> str:
    """``#rrggbb`` as rgba at the dominated points' opacity."""
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{DOMINATED_OPACITY})"


def _log_ticks(*, low: float, high: float) -> list[float]:
    """1-2-5 ticks covering [low, high]: plotly's own log ticks label the minor ones with bare
    digits ("2", "5"), which read as whole currency units."""
    ticks = []
    for exponent in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        for mantissa in (1, 2, 5):
            tick = float(f"{mantissa}e{exponent}")
            if low / 2.5 <= tick <= high * 2.5:
                ticks.append(tick)
    return ticks


def sweep_figure(*, sweeps: Sequence[Sweep], throughput_unit: str) -> dict[str, Any]:
    """Throughput against p99 latency along each batch-size (or concurrency) sweep, one line per
    variant × hardware, each point labelled with its load and the knee starred."""
    colours = accelerator_colours([p for sweep in sweeps for p in sweep.points])
    data: list[dict[str, Any]] = []
    knees_x: list[float] = []
    knees_y: list[float] = []
    knees_text: list[str] = []
    dashes = ["solid", "dash", "dot", "dashdot"]
    variants = sorted({sweep.points[0].variant for sweep in sweeps})
    for sweep in sweeps:
        first = sweep.points[0]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers+text",
                "name": sweep.label,
                "x": [p.p99_ms for p in sweep.points],
                "y": [p.throughput for p in sweep.points],
                "text": [_load_label(p) for p in sweep.points],
                "textposition": "top left",
                "textfont": {"size": 10, "color": "#4b5563"},
                "line": {
                    "color": colours[first.accelerator],
                    "width": 2,
                    "dash": dashes[variants.index(first.variant) % len(dashes)],
                },
                "marker": {"size": 7},
                "hovertemplate": "%{text}<br>p99 %{x:,.4~r} ms<br>%{y:,.4~r} "
                + throughput_unit
                + "<extra>"
                + sweep.label
                + "</extra>",
            }
        )
        if sweep.knee is not None and sweep.knee.reached:
            knee = sweep.points[sweep.knee.index]
            knees_x.append(knee.p99_ms or 0.0)
            knees_y.append(knee.throughput or 0.0)
            knees_text.append(f"{sweep.label}: knee at {_load_label(knee)}")
    data.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "Knee",
            "x": knees_x,
            "y": knees_y,
            "text": knees_text,
            "marker": {
                "symbol": "star",
                "size": 18,
                "color": "#facc15",
                "line": {"color": "#111827", "width": 1},
            },
            "hovertemplate": "%{text}<extra></extra>",
        }
    )
    layout = {
        **_LAYOUT,
        "title": _title("Batch-size sweep: throughput against p99 latency (★ knee)"),
        "xaxis": {"title": {"text": "p99 latency (ms)"}, "gridcolor": "#f3f4f6"},
        "yaxis": {
            "title": {"text": f"Throughput ({throughput_unit})"},
            "gridcolor": "#e5e7eb",
            "rangemode": "tozero",
        },
    }
    return {"data": data, "layout": layout}


def _load_label(point: ConfigPoint) -> str:
    return f"c{point.concurrency}" if point.concurrency else f"bs {point.batch_size}"
