"""The costs-by-workload page's chart, built in Python from plain rows (no ORM, no Django).

One horizontal bar per row of the page's table (workloads by the chosen grouping, then
unattributed, then idle), coloured by kind; past ``MAX_BARS`` workload rows the smallest are
drawn as one "other" bar, so the bars always add up to the page's total card.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from accelboard.core.charts import PALETTE

MAX_BARS = 25
_FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12}
# Workloads in the palette's blue; what no rule maps in amber; idle in grey: never hidden.
_COLOURS = {"workload": PALETTE[0], "unattributed": PALETTE[2], "idle": PALETTE[6]}
_NAMES = {"workload": "Workloads", "unattributed": "Unattributed", "idle": "Idle"}


def allocation_figure(*, rows: list[dict[str, Any]], currency: str, group_label: str) -> dict[str, Any]:
    """``rows``: dicts with ``label`` (unique), ``kind`` (workload, unattributed, idle) and
    ``cost`` (Decimal), in the table's order. Workload rows are drawn largest first."""
    workloads = sorted((r for r in rows if r["kind"] == "workload"), key=lambda r: -r["cost"])
    drawn = workloads[:MAX_BARS]
    rest = workloads[MAX_BARS:]
    if rest:
        drawn.append(
            {
                "label": f"{len(rest)} other {group_label.lower()} rows",
                "kind": "workload",
                "cost": sum((r["cost"] for r in rest), Decimal(0)),
            }
        )
    drawn += [r for r in rows if r["kind"] != "workload"]
    data = []
    for kind in ("workload", "unattributed", "idle"):
        bars = [r for r in drawn if r["kind"] == kind]
        if not bars:
            continue
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": _NAMES[kind],
                "y": [r["label"] for r in bars],
                "x": [float(r["cost"]) for r in bars],
                "marker": {"color": _COLOURS[kind]},
                "hovertemplate": "%{y}: %{x:,.2f} " + currency + "<extra></extra>",
            }
        )
    # At least the page's plot box (340 px), so no blank band under a short chart.
    height = max(340, 90 + 26 * len(drawn))
    layout = {
        "title": {
            "text": f"Cost by {group_label.lower()} ({currency})",
            "x": 0.01,
            "y": 0.98,
            "yanchor": "top",
        },
        "margin": {"l": 240, "r": 40, "t": 70, "b": 50},
        "height": height,
        "barmode": "overlay",
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom"},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": _FONT,
        "xaxis": {"title": {"text": f"Cost ({currency})"}, "gridcolor": "#e5e7eb", "rangemode": "tozero"},
        # The table's order top to bottom: Plotly draws a category axis bottom-up.
        "yaxis": {
            "type": "category",
            "automargin": True,
            "categoryorder": "array",
            "categoryarray": [r["label"] for r in reversed(drawn)],
        },
        # The bars add up to the page's total card (checked by the tests of every page).
        "meta": {"sums_to": "spend"},
    }
    return {"data": data, "layout": layout}
