"""The small chart an alert email carries: a series around its change, as a PNG (no ORM, no browser).

Drawn with matplotlib's Agg backend through a ``Figure`` of its own (not ``pyplot``, whose global
state is not safe in a worker's threads). Sized for email: 600 × 220 CSS pixels, rendered at
twice that for high-density screens, a few tens of kilobytes. Values are the run results in time
order; the change is a vertical red line at the first run after it, the levels before and after
it dashed lines over the results each holds (``alerts.levels``: first to last result of its
segment, at their median), as on the alert page. The y axis is labelled in plain numbers with thousands
separators (never an offset or e-notation), like the pages.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import datetime

from accelboard.core import numbers

WIDTH_PX = 600
HEIGHT_PX = 220
SCALE = 2
POINT = "#2563eb"
BEFORE = "#16a34a"
AFTER = "#dc2626"
MUTED = "#6b7280"


def _tick(value: float, _: int) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return numbers.sig(value, digits=4)


def series_chart_png(
    *,
    times: Sequence[datetime],
    values: Sequence[float],
    unit: str,
    change_at: datetime | None = None,
    before: tuple[datetime, datetime, float] | None = None,
    after: tuple[datetime, datetime, float] | None = None,
) -> bytes:
    """PNG bytes of the series; raises ``ValueError`` with fewer than two points.

    ``before``/``after``: (first result's time, last result's time, level) of each level."""
    # Imported here: matplotlib costs about a second to import, which every web and command
    # process would otherwise pay at startup for a chart only the mail worker draws.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    if len(times) != len(values):
        raise ValueError(f"{len(times)} times for {len(values)} values")
    if len(values) < 2:
        raise ValueError("a chart needs at least two points")
    dpi = 100 * SCALE
    figure = Figure(figsize=(WIDTH_PX / 100, HEIGHT_PX / 100), dpi=dpi)
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0.13, 0.14, 0.84, 0.8))
    # Times as matplotlib's day numbers (what its date axis holds): the date locator and formatter
    # below label them.
    days = date2num(list(times))
    axes.plot(days, list(values), color=POINT, linewidth=1.0, marker="o", markersize=2.5, zorder=3)
    if change_at is not None:
        at = float(date2num(change_at))
        axes.axvline(at, color=AFTER, linewidth=1.2, zorder=2)
        for level, colour in ((before, BEFORE), (after, AFTER)):
            if level is not None:
                x0, x1 = (float(date2num(moment)) for moment in level[:2])
                axes.hlines(level[2], x0, x1, colors=colour, linestyles="dashed", linewidth=1.2, zorder=2)
    locator = AutoDateLocator(minticks=3, maxticks=6)
    axes.xaxis.set_major_locator(locator)
    # Day ticks read "Nov 17", hour ticks "14:00" with the day at midnight: no offset label to find.
    formats = ["%Y", "%b", "%b %d", "%H:%M", "%H:%M", "%S.%f"]
    zero_formats = ["", "%Y", "%b", "%b %d", "%H:%M", "%H:%M"]
    axes.xaxis.set_major_formatter(
        ConciseDateFormatter(locator, formats=formats, zero_formats=zero_formats, show_offset=False)
    )
    axes.yaxis.set_major_locator(MaxNLocator(nbins=4))
    axes.yaxis.set_major_formatter(FuncFormatter(_tick))
    # Large enough to read when a phone shrinks the 600 px chart to about 330 px.
    axes.set_ylabel(unit, color=MUTED, fontsize=10)
    axes.tick_params(labelsize=10, colors=MUTED)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        axes.spines[side].set_color("#d1d5db")
    axes.grid(axis="y", color="#eef0f3", linewidth=0.8)
    axes.margins(x=0.02)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, facecolor="white", metadata={"Software": None})
    return buffer.getvalue()
