"""What every app's Plotly figures share: the colours of series drawn in order (accelerator types,
the GPUs of a host), so a colour means the same thing on every page."""

from __future__ import annotations

# The right margin of a chart with a time x-axis: wide enough for half of any date tick label
# ("Nov 29", "00:00"), so the axis never needs to push the margin. With 16-20 px, the last label
# pushed it; the narrower plot moved the ticks, the push changed, and on some dates and widths
# plotly.js gave up with "Too many auto-margin redraws" (the overview on 2026-12-03).
TIME_AXIS_MARGIN_R = 40
PALETTE = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#4b5563", "#db2777"]
