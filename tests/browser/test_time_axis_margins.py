"""Time-axis charts draw in one pass whatever the dates and the card's width.

A date axis whose last tick label overhangs the right margin makes plotly.js push the margin; the
narrower plot moves the ticks, the overhang changes, and on some dates and widths plotly gives up
with "Too many auto-margin redraws" (the overview's utilisation chart did on 2026-12-03). The
overview's figures, built by the product's own functions, are drawn here for windows ending on
every day of two months at the widths a card takes, and must leave nothing on the console.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pandas as pd
import pytest

from accelboard.dashboard import charts
from tests.browser.numbers import console_listen

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# A card on a 1440 px window is 636 px wide; narrower windows, and the wide single column.
WIDTHS = [560, 636]
TYPES = ["H100 SXM 80GB", "L4"]


def _utilisation(end: datetime, hours: int) -> pd.DataFrame:
    buckets = [end - timedelta(hours=h) for h in range(hours, 0, -1)]
    return pd.DataFrame(
        [
            {
                "bucket": b,
                "accelerator_type": t,
                "gpu_util": 60 + 10 * i + (b.hour % 5),
                "energy_kwh": 0.4 + i,
            }
            for b in buckets
            for i, t in enumerate(TYPES)
        ]
    )


def _figures(end_day: date) -> list[dict[str, Any]]:
    end = datetime.combine(end_day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=9)
    figures = []
    for hours in (24, 60, 14 * 24):
        frame = _utilisation(end, hours)
        figures.append(charts.fleet_utilisation_figure(frame))
        figures.append(charts.fleet_energy_figure(frame))
    days = [end_day - timedelta(days=d) for d in range(29, -1, -1)]
    spend = {"currency": "USD", "days": days, "series": [{"label": "Alpha", "values": [170.0] * 30}]}
    figures.append(charts.spend_days_figure(spend))
    return figures


def test_the_overviews_time_charts_draw_without_margin_loops_on_any_day(page: Any, live_server: Any) -> None:
    console = console_listen(page)
    page.goto("/accounts/login/")
    page.add_script_tag(url="/static/vendor/plotly.min.js")
    page.evaluate(
        "() => { const box = document.createElement('div'); box.id = 'box'; document.body.append(box); }"
    )
    page.wait_for_function("() => window.Plotly !== undefined")
    start = date(2026, 11, 1)
    figures = [figure for offset in range(20) for figure in _figures(start + timedelta(days=offset))]
    drawn = page.evaluate(
        """async ([figures, widths]) => {
          const box = document.getElementById('box');
          let count = 0;
          for (const width of widths) {
            for (const figure of figures) {
              const el = document.createElement('div');
              el.style.width = width + 'px';
              box.replaceChildren(el);
              await Plotly.newPlot(el, figure.data, figure.layout, {displaylogo: false});
              Plotly.purge(el);
              count += 1;
            }
          }
          return count;
        }""",
        [json.loads(json.dumps(figures)), WIDTHS],
    )
    assert drawn == len(figures) * len(WIDTHS)
    assert console == [], sorted(set(console))
