"""The hardware page's tables as files (``?format=csv&table=to-train``): the same figures as the
page, every digit kept (``costs.exports`` writes the CSV and XLSX)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelboard.costs.exports import Column, ExportTable


def to_train_table(*, points: Sequence[Any], price_bases: dict[str, str], currency: str) -> ExportTable:
    """Time, energy and cost to train per configuration (medians of its recent runs), with the
    price row each cost used: what the page's "Time and cost to train" table shows."""
    rows = [
        {
            "configuration": p.label,
            "variant": p.variant,
            "accelerator": p.accelerator,
            "accelerator_count": p.accelerator_count,
            "batch_size": p.batch_size,
            "time_to_train_s": p.time_to_train_s,
            "time_to_train_min": p.time_to_train_min,
            "energy_to_train_kwh": p.energy_to_train_j / 3.6e6 if p.energy_to_train_j is not None else None,
            "capacity_cost_to_train": p.capacity_cost_to_train,
            "energy_cost_to_train": p.energy_cost_to_train,
            "cost_to_train": p.cost_to_train,
            "currency": p.currency or currency,
            "price_row": price_bases.get(p.label, ""),
            "runs": " ".join(str(i) for i in p.run_ids),
        }
        for p in points
    ]
    return ExportTable(
        name="to-train",
        title="Time and cost to train",
        columns=[
            Column("configuration", "Configuration", "key"),
            Column("variant", "Variant"),
            Column("accelerator", "Accelerator"),
            Column("accelerator_count", "Accelerators", "int", total=False),
            Column("batch_size", "Global batch size", "int", total=False),
            Column("time_to_train_s", "Time to train (s)", "rate", total=False),
            Column("time_to_train_min", "Time to train (min)", "rate", total=False),
            Column("energy_to_train_kwh", "Energy to train (kWh)", "kwh", total=False),
            Column("capacity_cost_to_train", "Capacity cost to train", "money", total=False),
            Column("energy_cost_to_train", "Energy cost to train", "money", total=False),
            Column("cost_to_train", "Cost to train", "money", total=False),
            Column("currency", "Currency"),
            Column("price_row", "Price row"),
            Column("runs", "Runs (newest first)"),
        ],
        rows=rows,
        with_totals=False,
    )
