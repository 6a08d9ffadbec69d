"""Benchmark configurations: runs grouped by what they ran on, each figure the median of the
configuration's recent runs. Pure (no ORM): plain dataclasses in and out.

A **configuration** is one variant × accelerator type × count × batch size or concurrency ×
framework (× scenario) of a model. Its figures are the median of its last ``last_n`` valid runs,
metric by metric, so that one noisy night does not decide a purchase; the runs behind each figure
are kept for links. The hardware comparison page and the capacity plan both read configurations
through :func:`config_points_build`; the rows come from
:func:`accelboard.benchmarks.config_selectors.config_run_figures`.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

# Median of the last N valid runs per configuration.
LAST_N_RUNS = 5


@dataclass(frozen=True)
class RunFigures:
    """One run's figures as the comparison needs them (units: ms, W, J, bytes; cost per 1M units)."""

    run_id: int
    started_at: object  # anything orderable (datetime in the product, int in tests)
    variant: str
    precision: str
    accelerator: str
    accelerator_count: int
    batch_size: int | None = None
    concurrency: int | None = None
    framework: str = ""
    accelerator_slug: str = ""
    throughput: float | None = None
    throughput_unit: str = ""
    p50_ms: float | None = None
    p99_ms: float | None = None
    power_w: float | None = None
    energy_per_inference_j: float | None = None
    memory_peak_bytes: float | None = None  # per accelerator
    memory_total_bytes: float | None = None  # per accelerator, from its type
    capacity_cost_per_1m: float | None = None
    energy_cost_per_1m: float | None = None
    total_cost_per_1m: float | None = None
    currency: str = ""
    cost_unit: str = ""  # what "1M" counts: token, sample, inference
    price_stale: bool = False
    scenario: str = ""
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None
    energy_per_token_j: float | None = None
    input_length: int | None = None  # tokens per request the workload was run with
    output_length: int | None = None
    # A training run's figures to train (s, J, money in ``currency``; costs.RunCost.training)
    time_to_train_s: float | None = None
    energy_to_train_j: float | None = None
    capacity_cost_to_train: float | None = None
    energy_cost_to_train: float | None = None
    cost_to_train: float | None = None


@dataclass(frozen=True)
class ConfigPoint:
    """One configuration, its figures the median of its recent runs."""

    variant: str
    precision: str
    accelerator: str
    accelerator_count: int
    batch_size: int | None
    concurrency: int | None
    framework: str
    accelerator_slug: str
    throughput: float | None
    throughput_unit: str
    p50_ms: float | None
    p99_ms: float | None
    power_w: float | None
    energy_per_inference_j: float | None
    memory_peak_bytes: float | None
    memory_total_bytes: float | None
    capacity_cost_per_1m: float | None
    energy_cost_per_1m: float | None
    total_cost_per_1m: float | None
    currency: str
    cost_unit: str
    price_stale: bool
    run_ids: tuple[int, ...]  # newest first
    scenario: str = ""
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None
    energy_per_token_j: float | None = None
    input_length: int | None = None
    output_length: int | None = None
    time_to_train_s: float | None = None
    energy_to_train_j: float | None = None
    capacity_cost_to_train: float | None = None
    energy_cost_to_train: float | None = None
    cost_to_train: float | None = None

    @property
    def time_to_train_min(self) -> float | None:
        """Time to train in minutes (MLPerf Training's unit)."""
        return None if self.time_to_train_s is None else self.time_to_train_s / 60

    @property
    def latest_run_id(self) -> int:
        return self.run_ids[0]

    @property
    def hardware(self) -> str:
        return f"{self.accelerator_count}× {self.accelerator}"

    @property
    def load(self) -> str:
        parts = []
        if self.batch_size:
            parts.append(f"batch {self.batch_size}")
        if self.concurrency:
            parts.append(f"concurrency {self.concurrency}")
        return ", ".join(parts) or "—"

    @property
    def label(self) -> str:
        return f"{self.variant} on {self.hardware}" + (f" ({self.load})" if self.load != "—" else "")

    @property
    def load_value(self) -> int | None:
        """The swept quantity: concurrency where set, else batch size."""
        return self.concurrency or self.batch_size

    @property
    def throughput_per_w(self) -> float | None:
        if self.throughput is None or not self.power_w:
            return None
        return self.throughput / self.power_w

    @property
    def memory_headroom_bytes(self) -> float | None:
        if self.memory_peak_bytes is None or self.memory_total_bytes is None:
            return None
        return self.memory_total_bytes - self.memory_peak_bytes

    @property
    def memory_headroom_gib(self) -> float | None:
        headroom = self.memory_headroom_bytes
        return None if headroom is None else headroom / 2**30

    @property
    def memory_headroom_pct(self) -> float | None:
        headroom = self.memory_headroom_bytes
        if headroom is None or not self.memory_total_bytes:
            return None
        return 100.0 * headroom / self.memory_total_bytes


_MEDIAN_FIELDS = (
    "throughput",
    "p50_ms",
    "p99_ms",
    "power_w",
    "energy_per_inference_j",
    "memory_peak_bytes",
    "capacity_cost_per_1m",
    "energy_cost_per_1m",
    "total_cost_per_1m",
    "ttft_p99_ms",
    "itl_p99_ms",
    "energy_per_token_j",
    "time_to_train_s",
    "energy_to_train_j",
    "capacity_cost_to_train",
    "energy_cost_to_train",
    "cost_to_train",
)


def _config_key(run: RunFigures) -> tuple:
    return (
        run.variant,
        run.accelerator,
        run.accelerator_count,
        run.batch_size or 0,
        run.concurrency or 0,
        run.framework,
        run.scenario,
    )


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def config_points_build(*, runs: Sequence[RunFigures], last_n: int = LAST_N_RUNS) -> list[ConfigPoint]:
    """Group runs by configuration; each figure is the median of the configuration's last ``last_n``
    runs that have it. Sorted by accelerator, count, variant, then load."""
    if last_n < 1:
        raise ValueError("last_n must be at least 1")
    groups: dict[tuple, list[RunFigures]] = {}
    for run in runs:
        groups.setdefault(_config_key(run), []).append(run)
    points = []
    for members in groups.values():
        recent = sorted(members, key=lambda r: (r.started_at, r.run_id), reverse=True)[:last_n]
        newest = recent[0]
        medians = {name: _median(getattr(r, name) for r in recent) for name in _MEDIAN_FIELDS}
        if medians["capacity_cost_per_1m"] is not None and medians["energy_cost_per_1m"] is not None:
            # Parts and total from the same medians, so that the table adds up.
            medians["total_cost_per_1m"] = medians["capacity_cost_per_1m"] + medians["energy_cost_per_1m"]
        if medians["capacity_cost_to_train"] is not None and medians["energy_cost_to_train"] is not None:
            medians["cost_to_train"] = medians["capacity_cost_to_train"] + medians["energy_cost_to_train"]
        currencies = {(r.currency, r.cost_unit) for r in recent if r.total_cost_per_1m is not None}
        point = ConfigPoint(
            variant=newest.variant,
            precision=newest.precision,
            accelerator=newest.accelerator,
            accelerator_count=newest.accelerator_count,
            batch_size=newest.batch_size,
            concurrency=newest.concurrency,
            framework=newest.framework,
            accelerator_slug=newest.accelerator_slug,
            throughput_unit=newest.throughput_unit,
            memory_total_bytes=newest.memory_total_bytes,
            currency=next(iter(currencies))[0] if len(currencies) == 1 else "",
            cost_unit=next(iter(currencies))[1] if len(currencies) == 1 else "",
            price_stale=any(r.price_stale for r in recent),
            run_ids=tuple(r.run_id for r in recent),
            scenario=newest.scenario,
            input_length=newest.input_length,
            output_length=newest.output_length,
            **medians,
        )
        if len(currencies) > 1:
            # Mixed currencies or units across one configuration's runs: no single cost to show.
            point = replace(
                point,
                capacity_cost_per_1m=None,
                energy_cost_per_1m=None,
                total_cost_per_1m=None,
                capacity_cost_to_train=None,
                energy_cost_to_train=None,
                cost_to_train=None,
            )
        points.append(point)
    points.sort(key=lambda p: (p.accelerator, p.accelerator_count, p.variant, p.load_value or 0, p.framework))
    return points
