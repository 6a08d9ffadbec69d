"""The workload page's timeline: which devices it held, when (no ORM here).

A Plotly JSON dict: one horizontal bar per held interval on a date axis (``base`` its start, the
bar's length its duration in ms, as ``plotly.express.timeline`` draws them), one row per device,
coloured by basis; the hover says the share held and the measured SM utilisation.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from accelboard.core.charts import PALETTE, TIME_AXIS_MARGIN_R

_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 11}
_BASES = ("exclusive", "measured", "even")


class Held(Protocol):
    @property
    def device(self) -> str: ...
    @property
    def start(self) -> datetime: ...
    @property
    def end(self) -> datetime: ...
    @property
    def share(self) -> float: ...
    @property
    def basis(self) -> str: ...
    @property
    def sm_util(self) -> float | None: ...


def workload_timeline_figure(
    *, intervals: Sequence[Held], devices: Sequence[str], x_range: Sequence[str]
) -> dict[str, Any]:
    """The timeline of ``intervals`` on one row per device (``devices`` in order, top first)."""
    traces = []
    for i, basis in enumerate(_BASES):
        mine = [h for h in intervals if h.basis == basis]
        if not mine:
            continue
        traces.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": f"{basis} hold",
                "y": [h.device for h in mine],
                "base": [h.start.isoformat() for h in mine],
                "x": [(h.end - h.start).total_seconds() * 1000 for h in mine],
                "customdata": [
                    [
                        h.start.strftime("%Y-%m-%d %H:%M"),
                        h.end.strftime("%Y-%m-%d %H:%M"),
                        round(h.share * 100, 1),
                        "n/a" if h.sm_util is None else f"{h.sm_util:.0f} %",
                    ]
                    for h in mine
                ],
                "hovertemplate": "%{y}<br>%{customdata[0]} to %{customdata[1]} UTC"
                "<br>share %{customdata[2]} %, SM %{customdata[3]}<extra></extra>",
                "marker": {"color": PALETTE[i], "opacity": 0.85},
                "width": 0.6,
            }
        )
    return {
        "data": traces,
        "layout": {
            "title": {"text": "GPUs held over time (UTC)", "x": 0, "xanchor": "left"},
            "height": 120 + 36 * max(1, len(devices)),
            "margin": {"l": 200, "r": TIME_AXIS_MARGIN_R, "t": 56, "b": 44},
            "plot_bgcolor": "#ffffff",
            "paper_bgcolor": "#ffffff",
            "font": _FONT,
            "barmode": "overlay",
            "showlegend": True,
            "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
            "xaxis": {"type": "date", "range": list(x_range), "gridcolor": "#e5e7eb"},
            "yaxis": {
                "type": "category",
                "categoryorder": "array",
                "categoryarray": list(reversed(devices)),
                "automargin": True,
            },
        },
    }
