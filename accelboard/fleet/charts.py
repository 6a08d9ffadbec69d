"""Plotly figures of one host's telemetry, built from the rollup frame (no ORM here).

Plain Plotly JSON dicts (not ``plotly.graph_objects``): the host page rebuilds all five every
~15 s while it is open, and dicts cost well under a millisecond where ``go.Figure`` costs tens.
One line per GPU (labelled by index, keyed by id) on every chart, in the same colour on each.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from accelboard.core.charts import PALETTE, TIME_AXIS_MARGIN_R

from .partials import PROFILING_FIELDS

LIMIT_COLOUR = "#b91c1c"
_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 11}

# Chart key -> (title, y-axis title). The keys name the page's divs and the JSON endpoint's figures.
# The last four are the health charts people know from the DCGM dashboards: temperature, memory
# clock, time throttled for power or heat, and ECC / XID error counters.
CHARTS: dict[str, tuple[str, str]] = {
    "power": ("Power draw per GPU", "Power (W)"),
    "energy": ("Energy per bucket, all GPUs", "Energy (Wh)"),
    "utilisation": ("GPU utilisation", "Utilisation (%)"),
    "memory": ("Memory used per GPU", "Memory used (GiB)"),
    "clocks": ("SM clock per GPU", "SM clock (MHz)"),
    "temperature": ("Temperature per GPU (bucket maximum)", "Temperature (°C)"),
    "mem_clocks": ("Memory clock per GPU", "Memory clock (MHz)"),
    "throttling": ("Time throttled for power or heat", "Throttled (% of samples)"),
    "errors": ("ECC and XID errors per GPU (counters)", "Errors (count)"),
    "profiling": ("DCGM profiling: SM, tensor pipe and DRAM active per GPU", "Active (%)"),
}
# Charts a host page shows only where the host sent their signal (absent is not 0).
OPTIONAL_CHARTS = frozenset({"profiling"})
# The profiling counters (``partials.PROFILING_FIELDS``, in %) by name, as pages label them; the
# profiling chart draws the first three, in these line styles.
PROFILING_LABELS: dict[str, str] = {
    "sm_active": "SM active",
    "tensor_active": "Tensor pipe active",
    "dram_active": "DRAM active",
    "sm_occupancy": "SM occupancy",
    "gr_engine_active": "Graphics engine active",
}
_PROFILING_LINES = {"sm_active": "solid", "tensor_active": "dot", "dram_active": "dash"}
# Health columns (``fleet.selectors.HOST_HEALTH_COLUMNS``) the frame may carry beside the others.
HEALTH_COLUMNS = ("throttled_pct", "ecc_errors", "xid_errors")


def has_profiling(frame: pd.DataFrame) -> bool:
    """Whether the frame holds any profiling counter (``host_telemetry``'s ``*_avg`` columns). Pure."""
    present = [f"{name}_avg" for name in PROFILING_FIELDS if f"{name}_avg" in frame]
    return bool(present) and bool(frame[present].notna().to_numpy().any())


def profiling_averages(frame: pd.DataFrame) -> dict[int, dict[str, float | None]]:
    """Each GPU's profiling counters over the whole frame (``host_telemetry``'s): its bins' means
    re-weighted by their counts, as ``selectors.gpu_profiling_averages`` reads them from the
    rollups; None for a counter the GPU never sent, and GPUs that sent none left out. Pure."""
    if frame.empty or not has_profiling(frame):
        return {}
    averages: dict[int, dict[str, float | None]] = {}
    for gpu_id, part in frame.groupby("accelerator_id"):
        values: dict[str, float | None] = {}
        for name in PROFILING_FIELDS:
            means = part[f"{name}_avg"].to_numpy(dtype=float)
            counts = part[f"{name}_samples"].to_numpy(dtype=float)
            present = ~np.isnan(means) & (counts > 0)
            total = counts[present].sum()
            values[name] = float((means[present] * counts[present]).sum() / total) if total else None
        if any(value is not None for value in values.values()):
            averages[int(gpu_id)] = values
    return averages


def profiling_rows(
    *, averages: dict[int, dict[str, float | None]], gpus: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The profiling card's rows: one per GPU of ``gpus`` (``id``, ``index``) that has counters in
    ``averages`` (``selectors.gpu_profiling_averages``), each with its values in
    ``PROFILING_LABELS`` order (None where the GPU did not send one). Pure."""
    return [
        {"gpu": gpu, "values": [averages[gpu["id"]].get(name) for name in PROFILING_LABELS]}
        for gpu in gpus
        if gpu["id"] in averages
    ]


def step_label(*, width_s: int, step_s: int) -> str:
    """``1-minute rollups`` or ``5-minute means of 1-minute rollups``. Pure."""
    rollup = "1-minute rollups" if width_s == 60 else "1-hour rollups"
    if step_s == width_s:
        return rollup
    return f"{step_s // 60}-minute means of {rollup}"


def _layout(*, title: str, y_title: str, x_range: Sequence[str], width_s: int, step_s: int) -> dict[str, Any]:
    bucket = step_label(width_s=width_s, step_s=step_s)
    return {
        "height": 280,
        "margin": {"l": 64, "r": TIME_AXIS_MARGIN_R, "t": 56, "b": 44},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": _FONT,
        "hovermode": "x unified",
        "uirevision": "keep",  # Plotly.react keeps the user's zoom and hidden traces across refreshes
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        "title": {
            "text": f"{title} <span style='font-size:10px;color:#6b7280'>({bucket})</span>",
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


def _typed(values: np.ndarray, dtype: str) -> dict[str, str]:
    """A Plotly typed array (base64), which plotly.js decodes natively; NaN draws as a gap.

    A 24-hour page of an 8-GPU host carries ~46,000 values: as JSON lists of ISO strings and
    floats that was 1.7 MB and ~1.1 s to build; as typed arrays it is a fraction of both.
    """
    return {
        "dtype": dtype,
        "bdata": base64.b64encode(np.ascontiguousarray(values, dtype=f"<{dtype}").tobytes()).decode(),
    }


@dataclass
class _Grid:
    """The frame as a dense grid: one row per bucket from the first to the last (NaN where a GPU
    had no value) and one column per GPU. The energy bars carry ``x0`` + ``dx`` instead of an
    array of times; lines carry their own times (see ``line``)."""

    x0: str  # first bucket start, ISO
    first_ms: float  # the same, epoch ms
    dx: int  # bucket width, ms
    columns: list[int]  # position in ``gpus`` of each column
    rows: np.ndarray  # bucket row of each frame row
    cols: np.ndarray  # GPU column of each frame row
    buckets: int

    def matrix(self, values: np.ndarray) -> np.ndarray:
        grid = np.full((self.buckets, len(self.columns)), np.nan)
        grid[self.rows, self.cols] = values
        return grid

    def axis(self) -> dict[str, Any]:
        return {"x0": self.x0, "dx": self.dx}

    def line(self, column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One GPU's points (x in epoch ms) with a NaN break where two or more buckets in a row
        are missing: an agent sampling every 2 minutes into 1-minute buckets still draws a line,
        an agent that was down for ten minutes leaves a gap (a gap stays a gap, never a slope)."""
        present = np.flatnonzero(~np.isnan(column))
        x = self.first_ms + present * float(self.dx)
        y = column[present]
        breaks = np.flatnonzero(np.diff(present) > 2) + 1
        if len(breaks):
            x = np.insert(x, breaks, x[breaks - 1] + self.dx)
            y = np.insert(y, breaks, np.nan)
        return x, y


def _grid(frame: pd.DataFrame, gpus: Sequence[dict[str, Any]], width_s: int) -> _Grid:
    """Pivot indices for ``frame`` (already limited to rows of ``gpus``)."""
    epochs = frame["bucket"].to_numpy(dtype=float)
    first = float(epochs.min())
    rows = np.rint((epochs - first) / width_s).astype(int)
    position = {gpu["id"]: i for i, gpu in enumerate(gpus)}
    ids = frame["accelerator_id"].to_numpy()
    columns = sorted({position[g] for g in np.unique(ids).tolist()})
    column_of = {gpus[p]["id"]: c for c, p in enumerate(columns)}
    cols = np.array([column_of[g] for g in ids.tolist()], dtype=int)
    return _Grid(
        x0=datetime.fromtimestamp(first, UTC).isoformat(),
        first_ms=first * 1000.0,
        dx=width_s * 1000,
        columns=columns,
        rows=rows,
        cols=cols,
        buckets=int(rows.max()) + 1,
    )


def _gpu_lines(
    frame: pd.DataFrame,
    grid: _Grid,
    *,
    column: str,
    gpus: Sequence[dict[str, Any]],
    unit: str,
    scale: float = 1.0,
    digits: int = 1,
) -> list[dict[str, Any]]:
    values = grid.matrix(frame[column].to_numpy(dtype=float) * scale)
    data = []
    for c, position in enumerate(grid.columns):
        gpu = gpus[position]
        x, y = grid.line(values[:, c])
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"GPU {gpu['index']}",
                "x": _typed(x, "f8"),
                "y": _typed(y, "f4"),
                "line": {"color": PALETTE[position % len(PALETTE)], "width": 1.5},
                "hovertemplate": "%{y:,."
                + str(digits)
                + "f} "
                + unit
                + "<extra>GPU "
                + str(gpu["index"])
                + "</extra>",
            }
        )
    return data


def host_telemetry_figures(
    *,
    frame: pd.DataFrame,
    gpus: Sequence[dict[str, Any]],
    width_s: int,
    x_range: Sequence[str],
    step_s: int | None = None,
) -> dict[str, dict[str, Any]]:
    """The host page's figures (``CHARTS`` keys) from ``fleet.selectors.host_telemetry``'s frame,
    joined with ``host_health_telemetry``'s (``HEALTH_COLUMNS``; charts of a missing column stay
    empty).

    ``gpus``: dicts with ``id``, ``index`` and ``power_limit_w``, in display order. Power carries
    each distinct power limit as a dashed red line, so "draw vs limit" reads at a glance.
    """
    step = step_s or width_s
    figures: dict[str, dict[str, Any]] = {}
    for key, (title, y_title) in CHARTS.items():
        figures[key] = {
            "data": [],
            "layout": _layout(title=title, y_title=y_title, x_range=x_range, width_s=width_s, step_s=step),
        }
    frame = frame[frame["accelerator_id"].isin([gpu["id"] for gpu in gpus])]
    if frame.empty:
        return figures
    grid = _grid(frame, gpus, step)

    figures["power"]["data"] = _gpu_lines(frame, grid, column="power_avg_w", gpus=gpus, unit="W")
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

    # Energy: the host's GPUs summed per bucket (J -> Wh or kWh); a bucket with no value is a gap.
    energy = grid.matrix(frame["energy_j"].to_numpy(dtype=float))
    has_energy = ~np.isnan(energy).all(axis=1)
    per_bucket = np.where(has_energy, np.nansum(energy, axis=1), np.nan)
    unit_scale, unit = (1 / 3600.0, "Wh") if step < 3600 else (1 / 3.6e6, "kWh")
    layout = figures["energy"]["layout"]
    layout["yaxis"]["title"]["text"] = f"Energy ({unit})"
    per = {60: "Energy per minute", 3600: "Energy per hour"}.get(step, f"Energy per {step // 60} minutes")
    layout["title"]["text"] = layout["title"]["text"].replace("Energy per bucket", per)
    layout["showlegend"] = False
    figures["energy"]["data"] = [
        {
            "type": "bar",
            "name": "All GPUs",
            **grid.axis(),
            "y": _typed(per_bucket * unit_scale, "f4"),
            "marker": {"color": "#0891b2"},
            "hovertemplate": "%{y:,.4~r} " + unit + "<extra></extra>",
        }
    ]

    figures["utilisation"]["data"] = _gpu_lines(frame, grid, column="gpu_util_avg", gpus=gpus, unit="%")
    figures["utilisation"]["layout"]["yaxis"]["range"] = [0, 100]
    figures["memory"]["data"] = _gpu_lines(
        frame, grid, column="mem_used_avg_bytes", gpus=gpus, unit="GiB", scale=1 / 2**30
    )
    totals = frame["mem_total_bytes"].dropna()
    if not totals.empty:
        # The y axis reaches the card's memory, so "how full" reads without hovering.
        figures["memory"]["layout"]["yaxis"]["range"] = [0, round(float(totals.max()) / 2**30 * 1.05, 1)]
    figures["clocks"]["data"] = _gpu_lines(frame, grid, column="sm_clock_avg_mhz", gpus=gpus, unit="MHz")
    figures["temperature"]["data"] = _gpu_lines(frame, grid, column="temperature_max_c", gpus=gpus, unit="°C")
    figures["mem_clocks"]["data"] = _gpu_lines(frame, grid, column="mem_clock_avg_mhz", gpus=gpus, unit="MHz")
    if "throttled_pct" in frame:
        figures["throttling"]["data"] = _gpu_lines(frame, grid, column="throttled_pct", gpus=gpus, unit="%")
        figures["throttling"]["layout"]["yaxis"]["range"] = [0, 100]
    if "ecc_errors" in frame and "xid_errors" in frame:
        ecc = _gpu_lines(frame, grid, column="ecc_errors", gpus=gpus, unit="ECC errors", digits=0)
        xid = _gpu_lines(frame, grid, column="xid_errors", gpus=gpus, unit="XID errors", digits=0)
        for trace in ecc:
            trace["name"] = f"{trace['name']} ECC"
        for trace in xid:
            trace["name"] = f"{trace['name']} XID"
            trace["line"]["dash"] = "dot"
        figures["errors"]["data"] = ecc + xid
        # Counts: whole-number ticks, and a visible axis above a fleet of zeros.
        highest = np.nanmax(frame[["ecc_errors", "xid_errors"]].to_numpy(dtype=float), initial=0.0)
        axis = figures["errors"]["layout"]["yaxis"]
        axis.update({"range": [0, max(4.0, float(highest)) * 1.1], "tickformat": ",d"})
        if highest <= 10:
            axis["dtick"] = 1 if highest <= 5 else 2
    if has_profiling(frame):
        lines = []
        for name, dash in _PROFILING_LINES.items():
            column = f"{name}_avg"
            # Only the GPUs that sent the counter: a GPU without it has no line, not a flat 0.
            sent = set(frame.loc[frame[column].notna(), "accelerator_id"].tolist())
            traces = _gpu_lines(frame, grid, column=column, gpus=gpus, unit=f"% {PROFILING_LABELS[name]}")
            for trace, position in zip(traces, grid.columns, strict=True):
                if gpus[position]["id"] in sent:
                    trace["name"] = f"{trace['name']} {PROFILING_LABELS[name]}"
                    trace["line"]["dash"] = dash
                    lines.append(trace)
        figures["profiling"]["data"] = lines
        highest = np.nanmax(frame[[f"{name}_avg" for name in _PROFILING_LINES]].to_numpy(dtype=float))
        if highest <= 100:  # DCGM can report more on a MIG instance: the axis then grows
            figures["profiling"]["layout"]["yaxis"]["range"] = [0, 100]
    return figures
