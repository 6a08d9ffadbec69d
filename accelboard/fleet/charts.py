"""Plotly figures of one host's telemetry, built from the rollup frame (no ORM here).

Plain Plotly JSON dicts (not ``plotly.graph_objects``): the host page rebuilds all five every
~15 s while it is open, and dicts cost well under a millisecond where ``go.Figure`` costs tens.
One line per GPU (labelled by index, keyed by id) on every chart, in the same colour on each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

# The overview's palette: GPU n has the same colour on every chart of the page.
PALETTE = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#4b5563", "#db2777"]
LIMIT_COLOUR = "#b91c1c"
_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 11}

# Chart key -> (title, y-axis title). The keys name the page's divs and the JSON endpoint's figures.
CHARTS: dict[str, tuple[str, str]] = {
    "power": ("Power draw per GPU", "Power (W)"),
    "energy": ("Energy per bucket, all GPUs", "Energy (Wh)"),
    "utilisation": ("GPU utilisation", "Utilisation (%)"),
    "memory": ("Memory used per GPU", "Memory used (GiB)"),
    "clocks": ("SM clock per GPU", "SM clock (MHz)"),
}


def _layout(*, title: str, y_title: str, x_range: Sequence[str], width_s: int) -> dict[str, Any]:
    bucket = "1-minute" if width_s == 60 else "1-hour"
    return {
        "height": 280,
        "margin": {"l": 64, "r": 16, "t": 56, "b": 44},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": _FONT,
        "hovermode": "x unified",
        "uirevision": "keep",  # Plotly.react keeps the user's zoom and hidden traces across refreshes
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        "title": {
            "text": f"{title} <span style='font-size:10px;color:#6b7280'>({bucket} rollups)</span>",
            "x": 0.01,
            "y": 0.97,
            "yanchor": "top",
            "font": {"size": 13},
        },
        "xaxis": {
            "type": "date",
            "range": list(x_range),
            "title": {"text": "Time (UTC)", "standoff": 4},
            "gridcolor": "#f3f4f6",
        },
        "yaxis": {"title": {"text": y_title}, "gridcolor": "#e5e7eb", "rangemode": "tozero"},
    }


def _values(series: pd.Series, scale: float = 1.0, digits: int = 1) -> list[float | None]:
    """Floats rounded for the wire, NaN (a gap) as None so that Plotly breaks the line there."""
    return [None if pd.isna(v) else round(float(v) * scale, digits) for v in series]


def _gpu_lines(
    frame: pd.DataFrame,
    *,
    column: str,
    gpus: Sequence[dict[str, Any]],
    unit: str,
    scale: float = 1.0,
    digits: int = 1,
) -> list[dict[str, Any]]:
    data = []
    for position, gpu in enumerate(gpus):
        rows = frame[frame["accelerator_id"] == gpu["id"]]
        if rows.empty:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"GPU {gpu['index']}",
                "x": [moment.isoformat() for moment in rows["bucket"]],
                "y": _values(rows[column], scale, digits),
                "line": {"color": PALETTE[position % len(PALETTE)], "width": 1.5},
                "hovertemplate": "%{y:,.1f} " + unit + "<extra>GPU " + str(gpu["index"]) + "</extra>",
            }
        )
    return data


def host_telemetry_figures(
    *,
    frame: pd.DataFrame,
    gpus: Sequence[dict[str, Any]],
    width_s: int,
    x_range: Sequence[str],
) -> dict[str, dict[str, Any]]:
    """The host page's five figures (``CHARTS`` keys) from ``fleet.selectors.host_telemetry``'s frame.

    ``gpus``: dicts with ``id``, ``index`` and ``power_limit_w``, in display order. Power carries
    each distinct power limit as a dashed red line, so "draw vs limit" reads at a glance.
    """
    figures: dict[str, dict[str, Any]] = {}
    for key, (title, y_title) in CHARTS.items():
        figures[key] = {
            "data": [],
            "layout": _layout(title=title, y_title=y_title, x_range=x_range, width_s=width_s),
        }
    if frame.empty:
        return figures

    figures["power"]["data"] = _gpu_lines(frame, column="power_avg_w", gpus=gpus, unit="W")
    limits = sorted({gpu["power_limit_w"] for gpu in gpus if gpu.get("power_limit_w")})
    figures["power"]["layout"]["shapes"] = [
        {
            "type": "line",
            "xref": "paper",
            "x0": 0,
            "x1": 1,
            "y0": limit,
            "y1": limit,
            "line": {"color": LIMIT_COLOUR, "width": 1, "dash": "dash"},
        }
        for limit in limits
    ]
    figures["power"]["layout"]["annotations"] = [
        {
            "xref": "paper",
            "x": 1,
            "xanchor": "right",
            "y": limit,
            "yanchor": "bottom",
            "text": f"limit {limit:,.0f} W",
            "showarrow": False,
            "font": {"color": LIMIT_COLOUR, "size": 10},
        }
        for limit in limits
    ]

    # Energy: the host's GPUs summed per bucket (J -> Wh); a bucket where no GPU had a value is a gap.
    energy = frame.groupby("bucket", sort=True)["energy_j"].sum(min_count=1)
    unit_scale, unit = (1 / 3600.0, "Wh") if width_s == 60 else (1 / 3.6e6, "kWh")
    figures["energy"]["layout"]["yaxis"]["title"]["text"] = f"Energy ({unit})"
    figures["energy"]["layout"]["title"]["text"] = figures["energy"]["layout"]["title"]["text"].replace(
        "Energy per bucket", "Energy per minute" if width_s == 60 else "Energy per hour"
    )
    figures["energy"]["data"] = [
        {
            "type": "bar",
            "name": "All GPUs",
            "x": [moment.isoformat() for moment in energy.index],
            "y": _values(energy, unit_scale, 3),
            "marker": {"color": "#0891b2"},
            "hovertemplate": "%{y:,.3f} " + unit + "<extra></extra>",
        }
    ]
    figures["energy"]["layout"]["showlegend"] = False

    figures["utilisation"]["data"] = _gpu_lines(frame, column="gpu_util_avg", gpus=gpus, unit="%")
    figures["utilisation"]["layout"]["yaxis"]["range"] = [0, 100]
    figures["memory"]["data"] = _gpu_lines(
        frame, column="mem_used_avg_bytes", gpus=gpus, unit="GiB", scale=1 / 2**30, digits=2
    )
    totals = frame["mem_total_bytes"].dropna()
    if not totals.empty:
        # The y axis reaches the card's memory, so "how full" reads without hovering.
        figures["memory"]["layout"]["yaxis"]["range"] = [0, round(float(totals.max()) / 2**30 * 1.05, 1)]
    figures["clocks"]["data"] = _gpu_lines(frame, column="sm_clock_avg_mhz", gpus=gpus, unit="MHz", digits=0)
    return figures
