"""Figures and evidence rows for the pages of alerts that are not a benchmark series change:
production signals (serving latency, decode speed, energy per token, GPU memory, throttling,
error counters) and drift (accuracy loss against a budget). Pure: plain rows in, Plotly figure
dicts and display rows out; ``signal_selectors`` reads the rows.

1. ``signal_figure``: the signal the alert is about, on its own axis and in its own unit, around
   the moment it started (a red line), with the limit or reference it was judged against as a
   dashed line.
2. ``drift_figure``: the loss (%, relative to the reference) over time on its own axis, the
   budget as a dashed line, the moments the alert changed verdict as markers.
3. ``evidence_rows``: the alert's ``detail`` for people: known keys get a label and a formatted
   value (units, %, dates), unknown keys keep their name and value; internal keys are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from accelboard.core import numbers
from accelboard.core.charts import TIME_AXIS_MARGIN_R

from .charts import _FONT, _iso, _note, _vline

SIGNAL = "#2563eb"
CHANGE = "#dc2626"
LIMIT = "#d97706"
REFERENCE = "#16a34a"


def _layout(*, title: str, y_title: str, x_title: str) -> dict[str, Any]:
    return {
        "height": 340,
        "margin": {"l": 70, "r": TIME_AXIS_MARGIN_R, "t": 60, "b": 50},
        "hovermode": "closest",
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": _FONT,
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        "title": {"text": title, "x": 0.01, "y": 0.98, "yanchor": "top"},
        "xaxis": {"type": "date", "title": {"text": x_title}, "gridcolor": "#f3f4f6"},
        "yaxis": {"title": {"text": y_title}, "gridcolor": "#e5e7eb", "rangemode": "tozero"},
        "shapes": [],
        "annotations": [],
    }


def _hline(*, x0: str, x1: str, y: float, name: str, colour: str, unit: str) -> dict[str, Any]:
    label = f"{name}: {numbers.sig(y, digits=4)} {unit}".strip()
    return {
        "type": "scatter",
        "x": [x0, x1],
        "y": [y, y],
        "mode": "lines",
        "name": label,
        "line": {"color": colour, "width": 1.5, "dash": "dash"},
        "hovertemplate": label + "<extra></extra>",
    }


def signal_figure(
    *,
    points: Sequence[tuple[datetime, float]],
    label: str,
    unit: str,
    since: datetime | None,
    limit: float | None = None,
    limit_label: str = "limit",
    reference: float | None = None,
) -> dict[str, Any]:
    """See 1. ``points``: (time, value) oldest first."""
    xs = [_iso(t) for t, _ in points]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "x": xs,
            "y": [v for _, v in points],
            "mode": "lines+markers",
            "name": label,
            "line": {"color": SIGNAL, "width": 1.3},
            "marker": {"size": 4, "color": SIGNAL},
            "hovertemplate": "%{x|%Y-%m-%d %H:%M}<br>%{y:,.4~r} " + unit + "<extra></extra>",
        }
    ]
    layout = _layout(title=label, y_title=f"{label} ({unit})" if unit else label, x_title="Time (UTC)")
    if xs:
        if limit is not None:
            data.append(_hline(x0=xs[0], x1=xs[-1], y=limit, name=limit_label, colour=LIMIT, unit=unit))
        if reference is not None:
            data.append(
                _hline(x0=xs[0], x1=xs[-1], y=reference, name="reference", colour=REFERENCE, unit=unit)
            )
    if since is not None:
        layout["shapes"].append(_vline(_iso(since), colour=CHANGE, dash="solid", width=2, name="since"))
        layout["annotations"].append(_note(_iso(since), "since", colour=CHANGE, y=1.0))
    return {"data": data, "layout": layout}


def drift_figure(
    *,
    points: Sequence[tuple[datetime, float]],
    budget: float,
    what: str,
    marks: Sequence[tuple[datetime, str]] = (),
) -> dict[str, Any]:
    """See 2. ``points``: (time, loss as a fraction), ``budget`` a fraction; drawn in %."""
    xs = [_iso(t) for t, _ in points]
    ys = [loss * 100 for _, loss in points]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "x": xs,
            "y": ys,
            "mode": "lines+markers",
            "name": f"{what} loss",
            "line": {"color": SIGNAL, "width": 1.3},
            "marker": {"size": 5, "color": SIGNAL},
            "hovertemplate": "%{x|%Y-%m-%d}<br>%{y:.2f}% below the reference<extra></extra>",
        }
    ]
    if xs:
        data.append(_hline(x0=xs[0], x1=xs[-1], y=budget * 100, name="budget", colour=LIMIT, unit="%"))
    layout = _layout(
        title=f"{what}: loss against the reference (higher is worse)",
        y_title="loss (% below the reference)",
        x_title="Measured (UTC)",
    )
    for at, text in marks:
        layout["shapes"].append(_vline(_iso(at), colour=CHANGE, dash="dot", width=1.5, name=text))
        layout["annotations"].append(_note(_iso(at), text, colour=CHANGE, y=1.0))
    return {"data": data, "layout": layout}


# --- evidence -----------------------------------------------------------------------------------

_HIDDEN = {"entity", "history", "summary", "source", "model", "metric", "threshold", "unit"}


def _pct(value: float, digits: int = 2) -> str:
    return f"{value * 100:.{digits}f}%"


def _date(value: Any) -> str:
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if moment.hour == moment.minute == 0 or "T" not in str(value):
        return moment.strftime("%Y-%m-%d")
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _num(value: Any, unit: str = "") -> str:
    if isinstance(value, int | float):
        return f"{numbers.sig(value, digits=4)} {unit}".strip()
    return str(value)


# key -> (label, formatter)
_FIELDS: dict[str, tuple[str, Any]] = {
    "reason": ("Why", str),
    "verdict": ("Verdict", lambda v: {"over": "over budget", "trending": "heading for the budget"}.get(v, v)),
    "variant": ("Variant", str),
    "task": ("Task", str),
    "loss": ("Loss now", lambda v: f"{_pct(v)} below the reference"),
    "budget": ("Budget", lambda v: f"{v * 100:g}% loss"),
    "days_to_budget": ("Reaches the budget", lambda v: "within a day" if v < 1 else f"in ~{v:.0f} days"),
    # Signed like the change (the quantization pages' "Trend of Δ"): negative while it falls.
    "slope_per_day": (
        "Trend of the change",
        lambda v: f"{-v * 100:+.3f}% per day" + (" (falling)" if v > 0 else " (recovering)" if v < 0 else ""),
    ),
    "trend_t": ("Trend strength", lambda v: f"t = {v:.1f}"),
    "value": ("Latest accuracy", _num),
    "reference_value": ("Reference accuracy", _num),
    # The ratio the loss is (the same days, the same median: drift.computation.level_ratio).
    "ratio": ("Ratio to the reference now", lambda v: f"{v:.4f}"),
    "over_since": ("Over budget since", _date),
    "detected_at": ("Detected by the check", _date),
    "measured_at": ("Latest result", _date),
    "as_of": ("First caught", _date),
    "points": ("Result pairs", _num),
    "since": ("Since", _date),
    "reference_j_per_token": ("Reference at this load", lambda v: f"{numbers.sig(v, digits=3)} J/token"),
    "reference_tokens_per_s": ("Reference at this load", lambda v: f"{v:.1f} tok/s per stream"),
    "rise": ("Rise", lambda v: f"{v * 100:+.0f}%"),
    "drop": ("Drop", lambda v: f"{v * 100:.0f}%"),
    "load_tokens_per_s": ("Load now", lambda v: f"{v:,.0f} tokens/s"),
    "load_requests_per_s": ("Load now", lambda v: f"{numbers.sig(v, digits=3)} requests/s"),
    "intervals_above": ("Intervals over the limit", _num),
    "intervals": ("Intervals in the window", _num),
    "counter": ("Counter", str),
    "baseline_rate": ("Agreement at first", _pct),
    "latest_rate": ("Agreement now", _pct),
    "latest_samples": ("Samples on the latest day", lambda v: f"{v:,}"),
}


def _over_budget(detail: dict[str, Any]) -> bool:
    loss, budget = detail.get("loss"), detail.get("budget")
    if detail.get("verdict") == "over":
        return True
    return isinstance(loss, int | float) and isinstance(budget, int | float) and loss > budget


def evidence_rows(detail: dict[str, Any]) -> list[tuple[str, str]]:
    """See 3. (label, text) in a stable order: known fields first, as listed, then the rest (the
    limit is shown by the page next to the observed value, with its unit)."""
    rows: list[tuple[str, str]] = []
    for key, (label, fmt) in _FIELDS.items():
        if key not in detail or detail[key] is None:
            continue
        value = detail[key]
        if key == "days_to_budget" and _over_budget(detail):
            # Over the budget already: a projection ("in ~0 days") would say it is still ahead.
            rows.append(("Budget reached", "crossed already: the loss is over the budget"))
            continue
        try:
            text = fmt(value)
        except (TypeError, ValueError):
            text = str(value)
        rows.append((label, text))
    for key in sorted(k for k in detail if k not in _FIELDS and k not in _HIDDEN):
        value = detail[key]
        if value is None:
            continue
        if isinstance(value, dict):
            text = ", ".join(
                f"{k.replace('_', ' ')} {_num(v)}" for k, v in value.items() if not isinstance(v, dict | list)
            )
        elif isinstance(value, list):
            text = ", ".join(_num(v) for v in value if not isinstance(v, dict | list))
        else:
            text = _num(value)
        rows.append((key.replace("_", " ").capitalize(), text))
    return rows


def history_rows(detail: dict[str, Any]) -> list[tuple[str, str, str]]:
    """A drift alert's verdicts over time: (date, verdict, loss)."""
    out = []
    for entry in detail.get("history") or []:
        loss = entry.get("loss")
        out.append(
            (
                _date(entry.get("at", "")),
                _FIELDS["verdict"][1](entry.get("verdict")),
                _pct(loss) if isinstance(loss, int | float) else "—",
            )
        )
    return out
