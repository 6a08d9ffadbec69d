"""The inputs of a capacity plan (``capacity``'s steps 1 to 3): pure, plain dataclasses.

1. **Traffic shape** (:func:`traffic_shape_build`) from production buckets (requests, prompt and
   generated tokens per bucket of equal width): mean rates over the covered time; per UTC day the
   busiest bucket; the **peak** is the highest daily peak of the window (the worst day seen, not a
   typical one); tokens per request in and out are token-weighted (total tokens / total
   requests), and the peak is taken on output tokens per second directly, so a mix whose long
   answers come at another hour than its many requests is sized on its real busiest bucket.
   **Growth** compares the mean output rate of the last seven complete days with the first seven
   (whole weeks, so weekends cancel out) and converts it to a rate per month; it needs 14 complete
   UTC days (a day the window cuts is never complete: it would miss part of the daily cycle).
2. **Serving options** (:func:`serving_options_build`): benchmark configurations grouped into
   variant × accelerator × GPUs per replica × framework × scenario; the batch sizes or
   concurrencies measured are the option's **operating points**. Only token throughput
   (output tokens/s) plans token traffic.
3. What else a plan reads: the latency objective, the assumptions (horizon, headroom, N+1), each
   option's price, accuracy against its reference, today's deployment, and exchange rates
   (``PlanInputs``). An assumption out of its range is a ``PlanInputError`` naming the field.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal

from accelboard.benchmarks.configurations import ConfigPoint
from accelboard.costs.formulas.types import (
    AcceleratorRate,
    ElectricityRate,
    ExchangeRate,
)
from accelboard.costs.gaps import CostGap

DAYS_PER_MONTH = 365.25 / 12
# Growth needs two whole weeks of complete days; a day is complete when the window holds all of
# it and it has this share of its buckets (an agent outage of an hour does not drop a day).
GROWTH_BLOCK_DAYS = 7
COMPLETE_DAY_SHARE = 0.95


class PlanInputError(ValueError):
    """An assumption out of its range; the message names the field."""


# --- 1. Traffic ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrafficBucket:
    """Production traffic of one model in one bucket of time (every host and variant summed)."""

    start: datetime  # UTC
    width_s: int
    requests: int
    prompt_tokens: int
    generated_tokens: int


@dataclass(frozen=True)
class TrafficDay:
    day: date
    buckets: int
    complete: bool
    mean_output_tps: float
    peak_output_tps: float
    peak_rps: float


@dataclass(frozen=True)
class TrafficShape:
    """What production asked of the model over the window. Rates per second; tokens per request."""

    window_start: datetime
    window_end: datetime
    bucket_s: int
    buckets: int
    expected_buckets: int
    requests: int
    prompt_tokens: int
    generated_tokens: int
    mean_rps: float
    mean_output_tps: float
    mean_prompt_tps: float
    peak_rps: float
    peak_output_tps: float
    peak_prompt_tps: float
    peak_at: datetime | None
    median_daily_peak_output_tps: float
    prompt_per_request: float | None
    output_per_request: float | None
    growth_pct_per_month: float | None  # None: fewer than two whole weeks of complete days
    days: tuple[TrafficDay, ...]

    @property
    def empty(self) -> bool:
        return self.requests == 0 and self.generated_tokens == 0

    @property
    def peak_to_mean(self) -> float | None:
        return self.peak_output_tps / self.mean_output_tps if self.mean_output_tps else None

    @property
    def coverage(self) -> float:
        return self.buckets / self.expected_buckets if self.expected_buckets else 0.0

    @property
    def complete_days(self) -> int:
        return sum(1 for d in self.days if d.complete)


def _growth_per_month(days: Sequence[TrafficDay]) -> float | None:
    """Percent per month from the first and last whole weeks of complete days (module doc, 1.)."""
    complete = [d for d in days if d.complete]
    if len(complete) < 2 * GROWTH_BLOCK_DAYS:
        return None
    first, last = complete[:GROWTH_BLOCK_DAYS], complete[-GROWTH_BLOCK_DAYS:]
    before = statistics.fmean(d.mean_output_tps for d in first)
    after = statistics.fmean(d.mean_output_tps for d in last)
    gap_days = statistics.fmean(d.day.toordinal() for d in last) - statistics.fmean(
        d.day.toordinal() for d in first
    )
    if before <= 0 or after <= 0 or gap_days <= 0:
        return None
    return 100.0 * ((after / before) ** (DAYS_PER_MONTH / gap_days) - 1.0)


def traffic_shape_build(
    *, buckets: Sequence[TrafficBucket], window_start: datetime, window_end: datetime, bucket_s: int
) -> TrafficShape:
    """The traffic shape of buckets of width ``bucket_s`` in [window_start, window_end)."""
    if bucket_s <= 0:
        raise PlanInputError("bucket_s: must be positive")
    if window_end <= window_start:
        raise PlanInputError("window_end: must be after window_start")
    ordered = sorted(buckets, key=lambda b: b.start)
    covered_s = sum(b.width_s for b in ordered)
    requests = sum(b.requests for b in ordered)
    prompt = sum(b.prompt_tokens for b in ordered)
    generated = sum(b.generated_tokens for b in ordered)
    per_day: dict[date, list[TrafficBucket]] = {}
    for b in ordered:
        per_day.setdefault(b.start.date(), []).append(b)
    full_day = 86400 / bucket_s
    days = []
    for day, members in sorted(per_day.items()):
        width = sum(b.width_s for b in members)
        midnight = datetime.combine(day, time(), tzinfo=window_start.tzinfo)
        # A day cut by the window's ends would weigh its hours unevenly (a daily cycle): never complete.
        inside = window_start <= midnight and midnight + timedelta(days=1) <= window_end
        days.append(
            TrafficDay(
                day=day,
                buckets=len(members),
                complete=inside and len(members) >= COMPLETE_DAY_SHARE * full_day,
                mean_output_tps=sum(b.generated_tokens for b in members) / width if width else 0.0,
                peak_output_tps=max(b.generated_tokens / b.width_s for b in members),
                peak_rps=max(b.requests / b.width_s for b in members),
            )
        )
    peak_bucket = max(ordered, key=lambda b: (b.generated_tokens / b.width_s, b.start), default=None)
    return TrafficShape(
        window_start=window_start,
        window_end=window_end,
        bucket_s=bucket_s,
        buckets=len(ordered),
        expected_buckets=int((window_end - window_start).total_seconds() // bucket_s),
        requests=requests,
        prompt_tokens=prompt,
        generated_tokens=generated,
        mean_rps=requests / covered_s if covered_s else 0.0,
        mean_output_tps=generated / covered_s if covered_s else 0.0,
        mean_prompt_tps=prompt / covered_s if covered_s else 0.0,
        peak_rps=max((d.peak_rps for d in days), default=0.0),
        peak_output_tps=max((d.peak_output_tps for d in days), default=0.0),
        peak_prompt_tps=max((b.prompt_tokens / b.width_s for b in ordered), default=0.0),
        peak_at=peak_bucket.start if peak_bucket is not None else None,
        median_daily_peak_output_tps=statistics.median([d.peak_output_tps for d in days]) if days else 0.0,
        prompt_per_request=prompt / requests if requests else None,
        output_per_request=generated / requests if requests else None,
        growth_pct_per_month=_growth_per_month(days),
        days=tuple(days),
    )


# --- 2. Serving options -------------------------------------------------------------------------


@dataclass(frozen=True)
class ServingOption:
    """One way to serve the model: a variant on replicas of ``accelerator_count`` GPUs, with the
    load levels (batch sizes or concurrencies) its benchmarks measured, by increasing load."""

    variant: str
    precision: str
    accelerator: str
    accelerator_slug: str
    accelerator_count: int
    framework: str
    scenario: str
    points: tuple[ConfigPoint, ...]

    @property
    def key(self) -> str:
        parts = [
            self.variant,
            self.accelerator_slug,
            str(self.accelerator_count),
            self.framework,
            self.scenario,
        ]
        return "|".join(parts)

    @property
    def label(self) -> str:
        return f"{self.variant} on {self.accelerator_count}× {self.accelerator}"


def serving_options_build(*, points: Sequence[ConfigPoint]) -> list[ServingOption]:
    """Configurations with token throughput, grouped into options (module doc, 2.)."""
    groups: dict[tuple, list[ConfigPoint]] = {}
    for p in points:
        if p.throughput_unit != "tokens/s":
            continue
        key = (p.variant, p.accelerator_slug or p.accelerator, p.accelerator_count, p.framework, p.scenario)
        groups.setdefault(key, []).append(p)
    options = []
    for members in groups.values():
        members.sort(key=lambda m: (m.load_value or 0, m.batch_size or 0))
        first = members[0]
        options.append(
            ServingOption(
                variant=first.variant,
                precision=first.precision,
                accelerator=first.accelerator,
                accelerator_slug=first.accelerator_slug or first.accelerator,
                accelerator_count=first.accelerator_count,
                framework=first.framework,
                scenario=first.scenario,
                points=tuple(members),
            )
        )
    options.sort(key=lambda o: (o.accelerator, o.accelerator_count, o.variant, o.framework, o.scenario))
    return options


# --- 3. Inputs of a plan ------------------------------------------------------------------------


@dataclass(frozen=True)
class Objective:
    """p99 targets in ms; None where the team set none. A point meets it when every set target is
    measured and met."""

    e2e_p99_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None

    def __post_init__(self) -> None:
        for name in ("e2e_p99_ms", "ttft_p99_ms", "itl_p99_ms"):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise PlanInputError(f"{name}: must be a positive number of ms")

    @property
    def is_set(self) -> bool:
        return any(v is not None for v in (self.e2e_p99_ms, self.ttft_p99_ms, self.itl_p99_ms))

    def targets(self) -> list[tuple[str, str, float]]:
        """(label, ConfigPoint attribute, target ms) for each target set."""
        rows = [
            ("p99 e2e", "p99_ms", self.e2e_p99_ms),
            ("p99 TTFT", "ttft_p99_ms", self.ttft_p99_ms),
            ("p99 ITL", "itl_p99_ms", self.itl_p99_ms),
        ]
        return [(label, attr, target) for label, attr, target in rows if target is not None]

    def judge(self, point: ConfigPoint) -> bool | None:
        """True: meets every target; False: misses one; None: a target's metric is not measured."""
        verdict: bool | None = True
        for _label, attr, target in self.targets():
            value = getattr(point, attr)
            if value is None:
                verdict = None if verdict is not False else False
            elif value > target:
                verdict = False
        return verdict

    def worst_ratio(self, point: ConfigPoint) -> float:
        """The largest measured p99 / target of the point (inf when none is measured)."""
        ratios = [
            getattr(point, attr) / target
            for _l, attr, target in self.targets()
            if getattr(point, attr) is not None
        ]
        return max(ratios, default=math.inf)

    @property
    def text(self) -> str:
        return ", ".join(f"{label} ≤ {target:,.0f} ms" for label, _attr, target in self.targets()) or "none"


@dataclass(frozen=True)
class Assumptions:
    """What the user may change; every figure of a plan follows from these and the data."""

    growth_pct_per_month: float = 0.0
    horizon_months: int = 6
    headroom_pct: float = 20.0
    n_plus_one: bool = True

    def __post_init__(self) -> None:
        if not (-50.0 <= self.growth_pct_per_month <= 100.0):
            raise PlanInputError("growth_pct_per_month: between -50 and 100")
        if not (0 <= self.horizon_months <= 36):
            raise PlanInputError("horizon_months: between 0 and 36")
        if not (0.0 <= self.headroom_pct <= 300.0):
            raise PlanInputError("headroom_pct: between 0 and 300")

    @property
    def growth_factor(self) -> float:
        return (1.0 + self.growth_pct_per_month / 100.0) ** self.horizon_months


@dataclass(frozen=True)
class OptionPrice:
    """The price-book row an option is billed on: a whole instance per hour, and the electricity
    (price per kWh, PUE, grid carbon) of the same provider and region where the book has one."""

    rate: AcceleratorRate  # per GPU-hour, with the row as its source
    instance_gpus: int
    instance_price_per_hour: Decimal
    provider: str
    region: str
    instance_type: str
    pricing_model: str
    electricity: ElectricityRate | None = None

    @property
    def label(self) -> str:
        where = " ".join(x for x in (self.provider, self.region) if x)
        what = self.instance_type or f"{self.instance_gpus} GPU{'s' if self.instance_gpus != 1 else ''}"
        return f"{where} {what} ({self.instance_gpus} GPU{'s' if self.instance_gpus != 1 else ''}), {self.pricing_model}"


@dataclass(frozen=True)
class Accuracy:
    """The precision's accuracy cost from the drift data: relative loss against the reference
    variant (0.012 = 1.2 % worse), the model's budget and the drift verdict."""

    reference: str
    loss: float | None
    budget: float | None = None
    verdict: str = ""
    task: str = ""

    @property
    def over_budget(self) -> bool:
        return self.verdict == "over" or (
            self.loss is not None and self.budget is not None and self.loss > self.budget
        )


@dataclass(frozen=True)
class CurrentDeployment:
    """What production runs today (GPUs named by the serving metrics) and what it cost (the cost
    tables over the same window), per month."""

    gpus: int
    hardware: str
    variants: tuple[str, ...]
    accelerator_slugs: tuple[str, ...]
    monthly_cost: Decimal | None
    currency: str
    cost_days: int
    cost_per_1m: Decimal | None = None
    # Why ``monthly_cost`` is None: the first input it lacks and its fix (``costs.gaps``).
    cost_gap: CostGap | None = None
    # The capacity part of ``monthly_cost`` (the rest is energy), and the price rows the cost
    # tables priced today's GPUs with, in words ("aws p5.48xlarge on-demand"): today's basis.
    capacity_monthly: Decimal | None = None
    price_basis: str = ""

    def runs(self, option: ServingOption) -> bool:
        return option.variant in self.variants and option.accelerator_slug in self.accelerator_slugs


@dataclass(frozen=True)
class PlanInputs:
    """Everything :func:`plan_build` reads. ``prices`` and ``board_power_w`` are keyed by
    accelerator slug, ``accuracy`` by variant name; ``currency`` is the plan's."""

    traffic: TrafficShape
    options: tuple[ServingOption, ...]
    objective: Objective
    assumptions: Assumptions
    currency: str
    prices: Mapping[str, OptionPrice] = field(default_factory=dict)
    board_power_w: Mapping[str, float] = field(default_factory=dict)
    accuracy: Mapping[str, Accuracy] = field(default_factory=dict)
    current: CurrentDeployment | None = None
    rates: tuple[ExchangeRate, ...] = ()
