"""Benchmark histories for the alert tests: one run per day through the real write path."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np

from accelboard.benchmarks.models import BenchmarkRun, Series
from accelboard.benchmarks.services import (
    MetricInput,
    WorkloadSpec,
    model_variant_get_or_create,
    run_record,
    workload_get_or_create,
)
from accelboard.core.models import Team
from accelboard.importers.metrics import METRICS

START = datetime(2026, 9, 1, 2, 0, tzinfo=UTC)


def noisy(n: int, *, level: float = 1000.0, pct: float = 1.0, seed: int = 1) -> list[float]:
    """``n`` values around ``level`` with ``pct`` % normal noise (seeded: the same every run)."""
    rng = np.random.default_rng(seed)
    return [float(v) for v in level * (1 + pct / 100 * rng.standard_normal(n))]


def history_record(
    *,
    team: Team,
    values: Sequence[float],
    metric: str = "throughput_tokens_per_s",
    samples: Sequence[Sequence[float]] | None = None,
    first_day: int = 0,
    model: str = "Llama-3.1-8B",
    variant: str = "bf16",
) -> list[BenchmarkRun]:
    """Record one run per value, a day apart, on one workload; returns the runs in order."""
    variant = model_variant_get_or_create(model=model, variant=variant, precision=variant.split("-")[0])
    workload = workload_get_or_create(
        team=team, variant=variant, spec=WorkloadSpec(scenario="offline", batch_size=64)
    )
    runs = []
    for i, value in enumerate(values):
        run, _ = run_record(
            team=team,
            workload=workload,
            accelerator_type=None,
            accelerator_count=1,
            started_at=START + timedelta(days=first_day + i),
            metrics=[
                MetricInput(
                    name=metric,
                    value=float(value),
                    unit=METRICS[metric].unit if metric in METRICS else "score",
                    samples=tuple(samples[i]) if samples else (),
                )
            ],
            git_commit=f"{first_day + i:040x}",
        )
        runs.append(run)
    return runs


def series_of(run: BenchmarkRun) -> Series:
    return run.metrics.get().series
