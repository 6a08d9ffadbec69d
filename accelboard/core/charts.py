"""What every app's Plotly figures share: the colours of series drawn in order (accelerator types,
the GPUs of a host), so a colour means the same thing on every page."""

from __future__ import annotations

PALETTE = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#4b5563", "#db2777"]
