"""A training job's progress against its attributed GPU-time: pure, no ORM.

A job (a fleet ``Workload``: a Slurm job, a pod) reports progress points: (time, step, and
optionally samples, tokens, loss). Between two consecutive points lies an interval; its figures:

1. Step time = interval seconds / steps in it (a training step's wall time, data loading and
   checkpoints included, as the job saw them).
2. GPU-seconds = ∫ share dt of every hold (``GpuAttribution``) of the job overlapping the interval,
   cut to it: the GPU-time the attribution gives the job, not a count of GPUs × wall time.
3. Energy = each GPU's minute rollups (J) × the part of each minute inside both hold and
   interval × share. Cost = capacity + energy cost, as the daily cost pass (``costs.formulas.daily``)
   and so the allocation compute a GPU-day's: capacity = each hold's overlap × share × its GPU's
   price per accelerator-second (the price book's row for its host); energy cost = that hold's
   energy (J) × its site's PUE × price per kWh / 3.6e6 (the site's electricity row, converted to the
   capacity's currency). Per step: each / steps. Energy is None where no rollup of a held GPU
   carries energy (a gap stays a gap); energy cost None where, besides, no held GPU has an
   electricity price (the cost is then capacity alone, as the cost pass's); cost None where a held
   GPU has no capacity price. Over whole UTC days that the job held its GPUs (whole GPU-days, every
   minute rolled up), this cost and energy are the allocation basis's (tests/attribution).
4. Projection to ``planned_steps``: cost so far + remaining steps × the median cost per step of
   the last ``PROJECTION_INTERVALS`` intervals (recent speed, not the warm-up's).

``progress_check`` says what is wrong with a batch of points before anything is stored: steps
that go backwards or stand still, zero-length or backwards intervals, and points that do not
follow the job's last stored one.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

PROJECTION_INTERVALS = 10
MINUTE = timedelta(minutes=1)


@dataclass(frozen=True)
class Point:
    at: datetime
    step: int
    samples: int | None = None
    tokens: int | None = None
    loss: float | None = None


@dataclass(frozen=True)
class Hold:
    """One hold of a GPU by the job over [start, end), with its share and the GPU's price per
    accelerator-second (None: no price for its host and type), and its site's energy price per
    joule at the device (PUE × price per kWh / 3.6e6, in the same currency; None: no electricity
    row, or no exchange rate to the capacity's currency)."""

    accelerator_id: int
    start: datetime
    end: datetime
    share: float
    price_per_s: float | None
    energy_price_per_j: float | None = None


@dataclass(frozen=True)
class Interval:
    start: datetime
    end: datetime
    steps: int
    step_time_s: float
    gpu_s: float
    capacity_cost: float | None
    energy_cost: float | None
    energy_j: float | None
    samples: int | None
    tokens: int | None
    loss: float | None

    @property
    def cost(self) -> float | None:
        """Capacity + energy cost (the latter 0 where unknown, as in the daily cost pass)."""
        if self.capacity_cost is None:
            return None
        return self.capacity_cost + (self.energy_cost or 0.0)

    @property
    def cost_per_step(self) -> float | None:
        cost = self.cost
        return None if cost is None else cost / self.steps

    @property
    def capacity_cost_per_step(self) -> float | None:
        return None if self.capacity_cost is None else self.capacity_cost / self.steps

    @property
    def energy_cost_per_step(self) -> float | None:
        return None if self.energy_cost is None else self.energy_cost / self.steps

    @property
    def energy_per_step_j(self) -> float | None:
        return None if self.energy_j is None else self.energy_j / self.steps


class ProgressProblem(ValueError):
    """What is wrong with a batch of points: ``index`` of the point, ``field`` and ``code``."""

    def __init__(self, message: str, *, index: int, field: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.index = index
        self.field = field
        self.code = code


def progress_check(points: Sequence[Point], *, last: Point | None) -> None:
    """Raise ``ProgressProblem`` at the first point that does not move the job forward: its time
    must be after the previous point's (``last``: the job's newest stored point, for the first)
    and its step above it; samples and tokens, where both points give them, must not go down."""
    previous = last
    for i, point in enumerate(points):
        if previous is not None:
            if point.at <= previous.at:
                raise ProgressProblem(
                    f"at {point.at.isoformat()} is not after the previous point's {previous.at.isoformat()}: "
                    "a zero-length or backwards interval",
                    index=i,
                    field="at",
                    code="zero_length_interval" if point.at == previous.at else "time_backwards",
                )
            if point.step <= previous.step:
                raise ProgressProblem(
                    f"step {point.step} is not above the previous point's {previous.step}: steps only go forward",
                    index=i,
                    field="step",
                    code="steps_backwards",
                )
            for name in ("samples", "tokens"):
                now, before = getattr(point, name), getattr(previous, name)
                if now is not None and before is not None and now < before:
                    raise ProgressProblem(
                        f"{name} {now} is below the previous point's {before}",
                        index=i,
                        field=name,
                        code=f"{name}_backwards",
                    )
        previous = point


def _overlap_s(a0: datetime, a1: datetime, b0: datetime, b1: datetime) -> float:
    return max(0.0, (min(a1, b1) - max(a0, b0)).total_seconds())


def intervals_build(
    *,
    points: Sequence[Point],
    holds: Sequence[Hold],
    energy: dict[int, dict[datetime, float]],
) -> list[Interval]:
    """The figures of each interval between consecutive ``points`` (sorted by time).

    ``energy``: accelerator id -> minute bucket start -> joules of that minute (rollups)."""
    out = []
    for before, after in zip(points, points[1:], strict=False):
        t0, t1 = before.at, after.at
        steps = after.step - before.step
        gpu_s = 0.0
        cost: float | None = 0.0
        energy_cost = 0.0
        energy_priced = False
        energy_j = 0.0
        energy_seen = False
        for hold in holds:
            s0, s1 = max(hold.start, t0), min(hold.end, t1)
            overlap = _overlap_s(hold.start, hold.end, t0, t1)
            if overlap <= 0:
                continue
            gpu_s += overlap * hold.share
            if hold.price_per_s is None:
                cost = None
            elif cost is not None:
                cost += overlap * hold.share * hold.price_per_s
            minutes = energy.get(hold.accelerator_id, {})
            bucket = s0.replace(second=0, microsecond=0)
            hold_j = 0.0
            while bucket < s1:
                joules = minutes.get(bucket)
                if joules is not None:
                    energy_seen = True
                    hold_j += joules * _overlap_s(bucket, bucket + MINUTE, s0, s1) / 60.0 * hold.share
                bucket += MINUTE
            energy_j += hold_j
            if hold.energy_price_per_j is not None:
                energy_priced = True
                energy_cost += hold_j * hold.energy_price_per_j
        out.append(
            Interval(
                start=t0,
                end=t1,
                steps=steps,
                step_time_s=(t1 - t0).total_seconds() / steps,
                gpu_s=gpu_s,
                capacity_cost=cost if gpu_s > 0 else None,
                energy_cost=energy_cost if energy_seen and energy_priced and gpu_s > 0 else None,
                energy_j=energy_j if energy_seen else None,
                samples=after.samples - before.samples
                if after.samples is not None and before.samples is not None
                else None,
                tokens=after.tokens - before.tokens
                if after.tokens is not None and before.tokens is not None
                else None,
                loss=after.loss,
            )
        )
    return out


@dataclass(frozen=True)
class Projection:
    steps_done: int
    planned_steps: int
    cost_so_far: float
    cost_per_step: float  # the recent median the remainder is projected at
    projected_cost: float

    @property
    def remaining_steps(self) -> int:
        return max(0, self.planned_steps - self.steps_done)


def projection(
    *, intervals: Sequence[Interval], planned_steps: int | None, steps_done: int
) -> Projection | None:
    """Cost to reach ``planned_steps`` (module docstring, 4); None without a plan or a costed
    interval."""
    costed = [i for i in intervals if i.cost is not None]
    if not planned_steps or not costed:
        return None
    so_far = sum(i.cost for i in costed if i.cost is not None)
    recent = [i.cost_per_step for i in costed[-PROJECTION_INTERVALS:] if i.cost_per_step is not None]
    per_step = statistics.median(recent)
    remaining = max(0, planned_steps - steps_done)
    return Projection(
        steps_done=steps_done,
        planned_steps=planned_steps,
        cost_so_far=so_far,
        cost_per_step=per_step,
        projected_cost=so_far + remaining * per_step,
    )
