"""A training job's progress as a file (the workload page's ``?format=csv&table=training``): one
row per interval between two reports, the same figures the page's Training progress section
sums, every digit kept (``costs.exports`` writes the CSV and XLSX); the totals row is the page's
steps, GPU-hours, cost and energy."""

from __future__ import annotations

from typing import Any

from accelboard.costs.exports import Column, ExportTable

TABLE = "training"


def training_table(*, summary: Any) -> ExportTable:
    """``summary``: ``training_selectors.TrainingSummary``. Costs only for a caller who sees them."""
    rows = []
    for interval in summary.intervals:
        row: dict[str, Any] = {
            "start": interval.start.isoformat(),
            "end": interval.end.isoformat(),
            "steps": interval.steps,
            "step_time_s": interval.step_time_s,
            "gpu_hours": interval.gpu_s / 3600.0,
            "energy_kwh": interval.energy_j / 3.6e6 if interval.energy_j is not None else None,
            "samples": interval.samples,
            "tokens": interval.tokens,
            "loss": interval.loss,
        }
        if summary.sees_costs:
            row.update(
                capacity_cost=interval.capacity_cost,
                energy_cost=interval.energy_cost,
                cost=interval.cost,
                currency=summary.currency,
            )
        rows.append(row)
    columns = [
        Column("start", "Interval start (UTC)", "key"),
        Column("end", "Interval end (UTC)"),
        Column("steps", "Steps", "int", total=True),
        Column("step_time_s", "Step time (s)", "rate", total=False),
        Column("gpu_hours", "GPU-hours (share × time)", "hours", total=True),
        Column("energy_kwh", "Energy (kWh)", "kwh", total=True),
        Column("samples", "Samples", "int", total=True),
        Column("tokens", "Tokens", "int", total=True),
        Column("loss", "Loss", "rate", total=False),
    ]
    if summary.sees_costs:
        columns += [
            Column("capacity_cost", "Capacity cost", "money", total=True),
            Column("energy_cost", "Energy cost", "money", total=True),
            Column("cost", "Cost", "money", total=True),
            Column("currency", "Currency"),
        ]
    return ExportTable(name=TABLE, title="Training progress", columns=columns, rows=rows)
