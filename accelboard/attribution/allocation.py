"""A GPU-day's cost and energy split into the workloads that held it, idle and unattributed.

Pure computation on plain data (docs/attribution.md, "Allocation, per GPU and UTC day"); the
allocation job loads the day's intervals, telemetry minutes and costs and stores what this returns.

1. **Devices.** A plain GPU is one device of weight 1; a MIG instance carries
   ``compute_slices / total`` of its GPU. Slices no instance holds are idle on both bases.
2. **Allocation basis** (time held): an interval's part of the GPU-day is
   ``weight × share × (end − start) / S``, for cost and energy alike. What no interval holds is idle.
3. **Usage basis** (measured): minute ``m`` carries ``secs_m / S`` of the cost and its measured
   energy's part of the energy (a minute without a reading gets the day's mean power; a day with
   none is spread by time). Within a minute a holder gets ``weight × share × util`` of what it
   covers (``util`` the GPU's utilisation), or ``weight × min(sm_util, share)`` where its own
   ``sm_util`` was measured. Of each device, ``util`` of the time was busy: busy time no holder
   accounts for is unattributed, the rest (``1 − util``) idle. A minute without a utilisation
   reading is split as on the allocation basis (held = busy). Where the holders' own readings
   exceed the GPU's over a device-day, their readings stand and nothing is left unattributed.
4. **Unattributed** = the parts of workloads that map to no team (``team is None``), plus, on the
   usage basis, the busy time no interval covers.
5. **Rounding.** ``C`` is taken at the cent and ``E`` at the joule; each line (every workload, idle,
   uncovered busy time) gets the floor of its exact part and the units left go one each to the
   largest remainders (ties: the earlier line), so the lines add up to ``C`` and ``E`` exactly.

Where utilisation is 100 % and the shares fill the device, both bases give the same costs.

Vectorised: a batch of GPU-days is flattened into arrays; per-minute integrals are differences of
cumulative sums read at each interval's ends (interpolated inside a minute), so the cost does not
grow with an interval's length. Rows are processed ``CHUNK`` days at a time to bound memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal

import numpy as np

MINUTE = 60
CHUNK = 2048
CENT = Decimal("0.01")
# Shares held at one instant may exceed 1 by this much (docs/attribution.md's tolerance).
TOLERANCE = 1e-6

Array = np.ndarray


@dataclass(frozen=True)
class Device:
    """A GPU (``slices == total == 1``) or one MIG instance of it (``slices`` of ``total``)."""

    key: str
    slices: int = 1
    total: int = 1


@dataclass(frozen=True)
class Interval:
    """A workload held ``share`` of ``device`` over ``[start, end)``, seconds from the day's start."""

    device: str
    workload: str
    start: float
    end: float
    share: float = 1.0
    basis: str = "exclusive"
    sm_util: float | None = None  # its own measured SM utilisation, in %


@dataclass(frozen=True)
class GpuDay:
    """One GPU and UTC day: its cost, energy and ``seconds``; per-minute utilisation (%) and
    energy (J), NaN where not read; its devices; who held them; each workload's team (None: no
    rule maps it)."""

    cost: Decimal
    energy_j: float
    util: Sequence[float] | Array
    energy: Sequence[float] | Array
    intervals: Sequence[Interval]
    teams: Mapping[str, str | None]
    devices: Sequence[Device] = (Device("gpu"),)
    seconds: int = 86_400


@dataclass(frozen=True)
class Amounts:
    """Cost and energy of one line on both bases."""

    cost_allocation: Decimal
    cost_usage: Decimal
    energy_allocation_j: int
    energy_usage_j: int


@dataclass(frozen=True)
class WorkloadPart:
    workload: str
    team: str | None
    amounts: Amounts


@dataclass(frozen=True)
class DayAllocation:
    """Workloads in the order they first appear in the day's intervals; ``unattributed`` includes
    the parts of the workloads whose team is None."""

    workloads: tuple[WorkloadPart, ...]
    idle: Amounts
    unattributed: Amounts


def allocate_days(days: Sequence[GpuDay]) -> list[DayAllocation]:
    """Split each GPU-day of ``days`` (docs/attribution.md); ValueError names a bad day and field."""
    out: list[DayAllocation] = []
    for begin in range(0, len(days), CHUNK):
        out.extend(_allocate_chunk(days[begin : begin + CHUNK], offset=begin))
    return out


@dataclass
class _Flat:
    """A chunk of GPU-days as arrays: days ``n``, minutes ``m``, devices, intervals, lines."""

    seconds: Array  # (n,)
    minutes: Array  # (n,) minutes of each day
    util: Array  # (n, m) fraction, NaN unread
    energy: Array  # (n, m) J, NaN unread
    dev_day: Array  # (d,)
    dev_weight: Array  # (d,)
    day: Array  # (k,) per interval
    dev: Array
    line: Array  # the interval's workload line (global over the chunk)
    start: Array
    end: Array
    share: Array
    sm_util: Array  # fraction, NaN unmeasured
    line_day: Array  # (l,) per workload line
    line_names: list[tuple[str, str | None]]


def _flatten(days: Sequence[GpuDay], offset: int) -> _Flat:
    n = len(days)
    seconds = np.array([d.seconds for d in days], dtype=np.float64)
    if n and seconds.min() <= 0:
        bad = int(np.argmin(seconds))
        raise ValueError(f"days[{offset + bad}].seconds: must be above 0")
    minutes = np.ceil(seconds / MINUTE).astype(np.int64)
    width = int(minutes.max()) if n else 1
    util = np.full((n, width), np.nan)
    energy = np.full((n, width), np.nan)
    dev_day: list[int] = []
    dev_weight: list[float] = []
    day_col: list[int] = []
    dev_col: list[int] = []
    line_col: list[int] = []
    cols: list[tuple[float, float, float, float]] = []
    line_day: list[int] = []
    line_names: list[tuple[str, str | None]] = []
    for g, d in enumerate(days):
        where = f"days[{offset + g}]"
        m = int(minutes[g])
        for name, values, target in (("util", d.util, util), ("energy", d.energy, energy)):
            row = np.asarray(values, dtype=np.float64)
            if row.shape != (m,):
                raise ValueError(f"{where}.{name}: {m} minutes expected, got shape {row.shape}")
            target[g, :m] = row
        devices: dict[str, int] = {}
        slices = 0.0
        for device in d.devices:
            if device.key in devices:
                raise ValueError(f"{where}.devices: {device.key!r} listed twice")
            if not 0 < device.slices <= device.total:
                raise ValueError(f"{where}.devices[{device.key!r}].slices: not in (0, total]")
            devices[device.key] = len(dev_day)
            dev_day.append(g)
            dev_weight.append(device.slices / device.total)
            slices += device.slices / device.total
        if slices > 1 + TOLERANCE:
            raise ValueError(f"{where}.devices: the instances hold more slices than the GPU has")
        lines: dict[str, int] = {}
        for i, interval in enumerate(d.intervals):
            at = f"{where}.intervals[{i}]"
            if interval.device not in devices:
                raise ValueError(f"{at}.device: {interval.device!r} is not a device of this GPU")
            if not 0 < interval.share <= 1:
                raise ValueError(f"{at}.share: must be in (0, 1]")
            if not interval.end > interval.start:
                raise ValueError(f"{at}.end: must be after start")
            if interval.workload not in d.teams:
                raise ValueError(f"{at}.workload: {interval.workload!r} has no entry in teams")
            if interval.workload not in lines:
                lines[interval.workload] = len(line_day)
                line_day.append(g)
                line_names.append((interval.workload, d.teams[interval.workload]))
            sm = math.nan if interval.sm_util is None else interval.sm_util / 100
            if not (math.isnan(sm) or 0 <= sm <= 1):
                raise ValueError(f"{at}.sm_util: must be in [0, 100]")
            day_col.append(g)
            dev_col.append(devices[interval.device])
            line_col.append(lines[interval.workload])
            cols.append((interval.start, interval.end, interval.share, sm))
    values = np.array(cols, dtype=np.float64).reshape(-1, 4)
    day = np.array(day_col, dtype=np.int64)
    return _Flat(
        seconds=seconds,
        minutes=minutes,
        util=np.clip(util / 100, 0, 1),
        energy=energy,
        dev_day=np.array(dev_day, dtype=np.int64),
        dev_weight=np.array(dev_weight, dtype=np.float64),
        day=day,
        dev=np.array(dev_col, dtype=np.int64),
        line=np.array(line_col, dtype=np.int64),
        start=np.clip(values[:, 0], 0, seconds[day]),
        end=np.clip(values[:, 1], 0, seconds[day]),
        share=values[:, 2],
        sm_util=values[:, 3],
        line_day=np.array(line_day, dtype=np.int64),
        line_names=line_names,
    )


def _minute_weights(f: _Flat) -> tuple[Array, Array]:
    """Per day and minute: its part of the day's time and of the day's energy (rows sum to 1)."""
    n, width = f.util.shape
    col = np.arange(width)
    secs = np.clip(f.seconds[:, None] - col[None, :] * MINUTE, 0, MINUTE)
    time_w = secs / f.seconds[:, None]
    read = ~np.isnan(f.energy)
    energy = np.where(read, np.maximum(f.energy, 0), 0.0)
    read_secs = (secs * read).sum(axis=1)
    total = energy.sum(axis=1)
    power = np.divide(total, read_secs, out=np.zeros(n), where=read_secs > 0)
    energy = np.where(read, energy, power[:, None] * secs)
    total = energy.sum(axis=1)
    energy_w = np.where(total[:, None] > 0, energy / np.where(total > 0, total, 1)[:, None], time_w)
    return time_w, energy_w


def _integrals(f: _Flat, weights: Array, busy: Array, unread: Array) -> tuple[Array, Array, Array, Array]:
    """For each interval: ∫ weight, ∫ busy·weight and ∫ unread·weight over [start, end), and per
    day the busy weight of the read minutes (``weights`` per minute, interpolated within one)."""
    cum = [np.zeros((weights.shape[0], weights.shape[1] + 1)) for _ in range(3)]
    for out, values in zip(cum, (weights, busy * weights, unread * weights), strict=True):
        np.cumsum(values, axis=1, out=out[:, 1:])

    def read(c: Array, t: Array) -> Array:
        last = f.minutes[f.day] - 1
        k = np.minimum((t // MINUTE).astype(np.int64), last)
        secs = np.minimum(f.seconds[f.day] - k * MINUTE, MINUTE)
        frac = np.clip((t - k * MINUTE) / secs, 0, 1)
        lo = c[f.day, k]
        return lo + frac * (c[f.day, k + 1] - lo)

    whole, busy_cum, unread_cum = (read(c, f.end) - read(c, f.start) for c in cum)
    day_busy_read = cum[1][:, -1] - cum[2][:, -1]
    return whole, busy_cum, unread_cum, day_busy_read


def _usage(f: _Flat, weights: Array, busy: Array, unread: Array) -> tuple[Array, Array, Array]:
    """Usage-basis fractions of the day: per interval, per day idle, per day uncovered busy."""
    whole, busy_int, unread_int, day_busy_read = _integrals(f, weights, busy, unread)
    measured = ~np.isnan(f.sm_util)
    own = np.minimum(np.nan_to_num(f.sm_util), f.share)
    w = f.dev_weight[f.dev]
    part = w * np.where(measured, own * whole, f.share * busy_int)
    part_read = w * np.where(measured, own * (whole - unread_int), f.share * (busy_int - unread_int))
    d = len(f.dev_day)
    held_read = np.bincount(f.dev, weights=part_read, minlength=d)
    dev_busy = f.dev_weight * day_busy_read[f.dev_day]
    uncovered_dev = np.maximum(dev_busy - held_read, 0)
    n = len(f.seconds)
    uncovered = np.bincount(f.dev_day, weights=uncovered_dev, minlength=n)
    held = np.bincount(f.day, weights=part, minlength=n)
    return part, 1 - held - uncovered, uncovered


def _largest_remainder(line_day: Array, fractions: Array, totals: Array) -> Array:
    """Integer units of each line: ``totals`` of each day split by ``fractions`` (lines of one day
    sum to 1), floors plus one unit each to the largest remainders, ties to the earlier line."""
    n = len(totals)
    fractions = np.maximum(fractions, 0)
    norm = np.bincount(line_day, weights=fractions, minlength=n)
    fractions = fractions / np.where(norm > 0, norm, 1)[line_day]
    exact = totals[line_day].astype(np.float64) * fractions
    floors = np.floor(exact).astype(np.int64)
    remainders = exact - floors
    given = np.bincount(line_day, weights=floors, minlength=n).astype(np.int64)
    left = totals - given
    order = np.lexsort((np.arange(len(line_day)), -remainders, line_day))
    first = np.searchsorted(line_day[order], np.arange(n))
    rank = np.empty(len(line_day), dtype=np.int64)
    rank[order] = np.arange(len(line_day)) - first[line_day[order]]
    units = floors + (rank < left[line_day])
    if not np.array_equal(np.bincount(line_day, weights=units, minlength=n).astype(np.int64), totals):
        raise ArithmeticError("largest remainder: lines do not add up to their day's total")
    return units


def _allocate_chunk(days: Sequence[GpuDay], offset: int) -> list[DayAllocation]:
    if not days:
        return []
    f = _flatten(days, offset)
    n = len(days)
    cents = []
    for g, d in enumerate(days):
        c = Decimal(d.cost).quantize(CENT, rounding=ROUND_HALF_EVEN)
        if c < 0 or not math.isfinite(d.energy_j) or d.energy_j < 0:
            raise ValueError(f"days[{offset + g}].{'cost' if c < 0 else 'energy_j'}: must be 0 or above")
        cents.append(int(c / CENT))
    cost_units = np.array(cents, dtype=np.int64)
    energy_units = np.round(np.array([d.energy_j for d in days], dtype=np.float64)).astype(np.int64)

    time_w, energy_w = _minute_weights(f)
    unread = np.isnan(f.util)
    busy = np.where(unread, 1.0, f.util)
    unread_f = unread.astype(np.float64)
    held = f.dev_weight[f.dev] * f.share * (f.end - f.start) / f.seconds[f.day]
    usage_cost, idle_uc, unc_cost = _usage(f, time_w, busy, unread_f)
    usage_energy, idle_ue, unc_energy = _usage(f, energy_w, busy, unread_f)
    alloc_idle = 1 - np.bincount(f.day, weights=held, minlength=n)
    for name, idle in (("intervals", alloc_idle), ("intervals", idle_uc), ("intervals", idle_ue)):
        if (idle < -TOLERANCE).any():
            bad = int(np.argmin(idle))
            raise ValueError(f"days[{offset + bad}].{name}: shares held at one instant add up to more than 1")

    # Lines: the workloads (summed over their intervals), then idle, then uncovered busy time.
    lines = len(f.line_day)
    line_day = np.concatenate([f.line_day, np.arange(n), np.arange(n)])

    def split(per_interval: Array, idle: Array, uncovered: Array, totals: Array) -> Array:
        work = np.bincount(f.line, weights=per_interval, minlength=lines)
        return _largest_remainder(line_day, np.concatenate([work, idle, uncovered]), totals)

    zeros = np.zeros(n)
    columns = [
        split(held, alloc_idle, zeros, cost_units),
        split(usage_cost, idle_uc, unc_cost, cost_units),
        split(held, alloc_idle, zeros, energy_units),
        split(usage_energy, idle_ue, unc_energy, energy_units),
    ]
    return _results(f, n, lines, columns)


def _results(f: _Flat, n: int, lines: int, columns: list[Array]) -> list[DayAllocation]:
    ca, cu, ea, eu = (c.tolist() for c in columns)
    work: list[list[WorkloadPart]] = [[] for _ in range(n)]
    unmapped = [[0, 0, 0, 0] for _ in range(n)]
    for i, (name, team) in enumerate(f.line_names):
        g = int(f.line_day[i])
        work[g].append(WorkloadPart(name, team, _amounts(ca[i], cu[i], ea[i], eu[i])))
        if team is None:
            totals = unmapped[g]
            totals[0] += ca[i]
            totals[1] += cu[i]
            totals[2] += ea[i]
            totals[3] += eu[i]
    out = []
    for g in range(n):
        i, u = lines + g, lines + n + g
        a = unmapped[g]
        out.append(
            DayAllocation(
                workloads=tuple(work[g]),
                idle=_amounts(ca[i], cu[i], ea[i], eu[i]),
                unattributed=_amounts(a[0] + ca[u], a[1] + cu[u], a[2] + ea[u], a[3] + eu[u]),
            )
        )
    return out


def _amounts(cost_allocation: int, cost_usage: int, energy_allocation: int, energy_usage: int) -> Amounts:
    return Amounts(
        Decimal(cost_allocation).scaleb(-2), Decimal(cost_usage).scaleb(-2), energy_allocation, energy_usage
    )
