"""GPU-days' cost and energy split into the workloads that held them, idle and unattributed.

Pure computation on plain arrays (docs/attribution.md, "Allocation, per GPU and UTC day"); the
allocation job loads a period's intervals, telemetry minutes and costs as columns and stores what
this returns.

1. **Devices.** A plain GPU is one device of weight 1; a MIG instance carries
   ``compute_slices / total`` of its GPU. Slices no instance holds are idle on both bases.
2. **Allocation basis** (time held): an interval's part of the GPU-day is
   ``weight × share × (end − start) / S``, for cost and energy alike. What no interval holds is idle.
3. **Usage basis** (measured): the day's cost accrues by time, its energy as measured minute by
   minute (an unread minute gets the day's mean power; a day without a reading, or drawing
   nothing, is spread by time). Within a minute a holder gets ``weight × share × util`` of what it
   covers (``util`` the GPU's utilisation), or ``weight × min(sm_util, share)`` where its own
   ``sm_util`` was measured. Of each device, ``util`` of the time was busy: busy time no holder
   accounts for is unattributed, the rest (``1 − util``) idle. A minute without a utilisation
   reading is split as on the allocation basis (held = busy). Where the holders' own readings
   exceed the GPU's over a device-day, their readings stand and nothing is left unattributed.
4. **Unattributed** = the lines of workloads no rule maps to a team, plus, on the usage basis,
   the busy time no interval covers.
5. **Rounding.** Each line (every workload of the day, idle, uncovered busy time) gets the floor
   of its exact part of ``C`` cents (``E`` joules) and the units left go one each to the largest
   remainders (ties: the earlier line), so the lines add up to ``C`` and ``E`` exactly.

Where utilisation is 100 % and the shares fill the device, both bases give the same costs.

Cost: per day a few sums over its minutes; integrals over a part of a day are prefix sums read at
the interval's ends (``np.add.reduceat`` over the minutes, interpolated inside a minute), so the
work does not grow with the number of intervals and only days with such ends pay for them. Days
are taken ``CHUNK`` at a time to bound memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MINUTE = 60
CHUNK = 2048
# Shares held at one instant may exceed 1 by this much (docs/attribution.md's tolerance).
TOLERANCE = 1e-6
# The columns of Allocation's amounts.
COLUMNS = ("cost_allocation_cents", "cost_usage_cents", "energy_allocation_j", "energy_usage_j")

Array = np.ndarray


@dataclass(frozen=True)
class DayBatch:
    """GPU-days as columns: ``n`` days, ``d`` devices (GPUs and MIG instances), ``k`` intervals,
    ``w`` workloads. Minutes are the day's from its start; a day of ``S`` seconds has
    ``ceil(S / 60)`` of them (the row's later columns are ignored). Times are seconds from the
    day's start; intervals reaching outside ``[0, S)`` are cut to it."""

    cost_cents: Array  # (n,) int: C at the cent
    energy_j: Array  # (n,) E in J, split at the joule
    seconds: Array  # (n,) S
    util: Array  # (n, m) the GPU's utilisation per minute, %, NaN where not read
    energy: Array  # (n, m) J per minute, NaN where not read
    device_day: Array  # (d,)
    device_weight: Array  # (d,) compute slices / total, 1 for a whole GPU
    interval_device: Array  # (k,)
    interval_workload: Array  # (k,) index into workload_team
    interval_start: Array  # (k,)
    interval_end: Array  # (k,)
    interval_share: Array  # (k,) in (0, 1]
    interval_sm_util: Array  # (k,) the workload's own SM utilisation, %, NaN where not measured
    workload_team: Array  # (w,) a team's index, -1 where no rule maps the workload


@dataclass(frozen=True)
class Allocation:
    """One line per day and workload that held one of its devices (by day, then first interval);
    ``amounts``, ``idle`` and ``unattributed`` hold COLUMNS. ``unattributed`` includes the lines
    of the workloads whose team is -1."""

    line_day: Array  # (l,)
    line_workload: Array  # (l,)
    line_team: Array  # (l,) the workload's team, -1 for none
    amounts: Array  # (l, 4) int64
    idle: Array  # (n, 4) int64
    unattributed: Array  # (n, 4) int64


def allocate_days(batch: DayBatch) -> Allocation:
    """Split each GPU-day of ``batch`` (docs/attribution.md); ValueError names the bad field and row."""
    n = len(batch.seconds)
    day = _validated(batch)
    order = np.argsort(day, kind="stable")
    dev_order = np.argsort(batch.device_day, kind="stable")
    parts = []
    for begin in range(0, n, CHUNK):
        end = min(begin + CHUNK, n)
        lo, hi = np.searchsorted(day[order], [begin, end])
        dlo, dhi = np.searchsorted(batch.device_day[dev_order], [begin, end])
        parts.append(_chunk(batch, begin, end, order[lo:hi], dev_order[dlo:dhi]))
    if not parts:
        empty = np.zeros((0, 4), dtype=np.int64)
        none = np.zeros(0, np.int64)
        return Allocation(none, none, none, empty, empty, empty)
    return Allocation(*(np.concatenate(columns) for columns in zip(*parts, strict=True)))


def _refuse(name: str, bad: Array | np.bool_) -> None:
    flags = np.atleast_1d(bad)
    if flags.any():
        raise ValueError(f"{name}[{int(np.flatnonzero(flags)[0])}]: {_RULES[name]}")


_RULES = {
    "seconds": "must be above 0",
    "cost_cents": "must be 0 or above",
    "energy_j": "must be a number, 0 or above",
    "util": "must be in [0, 100] or NaN (a row)",
    "energy": "must be 0 or above or NaN (a row)",
    "device_weight": "must be in (0, 1]",
    "device_day": "not a day of the batch",
    "interval_device": "not a device of the batch",
    "interval_workload": "not a workload of the batch",
    "interval_share": "must be in (0, 1]",
    "interval_end": "must be after interval_start",
    "interval_sm_util": "must be in [0, 100] or NaN",
}


def _validated(b: DayBatch) -> Array:
    """Each interval's day, once every column has been checked."""
    n, d = len(b.seconds), len(b.device_day)
    minutes = -(-np.asarray(b.seconds) // MINUTE)
    if b.util.shape != b.energy.shape or b.util.shape[0] != n or (n and b.util.shape[1] < minutes.max()):
        raise ValueError(
            f"util: shape {b.util.shape} (and energy {b.energy.shape}): {n} rows of the longest day"
        )
    _refuse("seconds", ~(np.asarray(b.seconds) > 0))
    _refuse("cost_cents", np.asarray(b.cost_cents) < 0)
    _refuse("energy_j", ~(np.asarray(b.energy_j, dtype=np.float64) >= 0) | ~np.isfinite(b.energy_j))
    # One reduction over the minutes each (NaN skipped); the row is looked for only on a miss.
    if b.util.size and not 0 <= np.fmin.reduce(b.util, axis=None) <= np.fmax.reduce(b.util, axis=None) <= 100:
        _refuse("util", ((b.util < 0) | (b.util > 100)).any(axis=1))
    if b.energy.size and np.fmin.reduce(b.energy, axis=None) < 0:
        _refuse("energy", (b.energy < 0).any(axis=1))
    _refuse("device_weight", ~((b.device_weight > 0) & (b.device_weight <= 1)))
    _refuse("device_day", (b.device_day < 0) | (b.device_day >= n))
    slices = np.bincount(b.device_day, weights=b.device_weight, minlength=n)
    if (slices > 1 + TOLERANCE).any():
        raise ValueError(f"device_weight: day {int(np.argmax(slices))}'s instances hold more than its GPU")
    _refuse("interval_device", (b.interval_device < 0) | (b.interval_device >= d))
    _refuse("interval_workload", (b.interval_workload < 0) | (b.interval_workload >= len(b.workload_team)))
    _refuse("interval_share", ~((b.interval_share > 0) & (b.interval_share <= 1)))
    _refuse("interval_end", ~(b.interval_end > b.interval_start))
    _refuse("interval_sm_util", (b.interval_sm_util < 0) | (b.interval_sm_util > 100))
    return np.asarray(b.device_day)[b.interval_device]


@dataclass
class _Integrals:
    """Per interval, over its time: ∫ busy, ∫ unread in minutes (busy: utilisation as a fraction,
    1 where unread) and ∫ energy, ∫ busy·energy, ∫ unread·energy in J; per day the same totals."""

    busy: Array
    unread: Array
    energy: Array
    busy_energy: Array
    unread_energy: Array

    def picked(self, rows: Array) -> _Integrals:
        return _Integrals(*(values[rows] for values in self.__dict__.values()))

    def update(self, at: Array, values: list[Array]) -> None:
        for name, new in zip(self.__dict__, values, strict=True):
            getattr(self, name)[at] = new


def _general(util: Array, energy: Array, seconds: Array) -> list[Array]:
    """(busy %, unread, energy per whole minute) of the rows with a gap in a reading, a day that
    ends inside a minute or before the row does, or no energy drawn: unread minutes filled, the
    last partial minute's energy scaled to a whole minute, minutes after the day's end zeroed."""
    width = util.shape[1]
    if (seconds == width * MINUTE).all():  # whole days: every minute is 60 s and inside
        missing = np.isnan(util)
        read = ~np.isnan(energy)
        read_secs = read.sum(axis=1) * float(MINUTE)
        drawn = np.where(read, energy, 0.0).sum(axis=1)
        power = np.divide(drawn, read_secs, out=np.zeros(len(util)), where=read_secs > 0)
        power = np.where(power > 0, power, 1.0)  # nothing read or drawn: spread by time
        per_minute = np.where(read & (drawn[:, None] > 0), energy, power[:, None] * MINUTE)
        busy = np.where(missing, 100.0, util)
        return [busy, missing.astype(np.float64), per_minute]
    secs = np.clip(seconds[:, None] - np.arange(width)[None, :] * MINUTE, 0, MINUTE)
    inside = secs > 0
    missing = np.isnan(util) & inside
    busy = np.where(missing, 100.0, np.where(inside, np.nan_to_num(util), 0.0))
    read = ~np.isnan(energy) & inside
    read_secs = (secs * read).sum(axis=1)
    drawn = np.where(read, energy, 0.0).sum(axis=1)
    power = np.divide(drawn, read_secs, out=np.zeros(len(util)), where=read_secs > 0)
    power = np.where(power > 0, power, 1.0)
    whole_minute = np.where(
        read & (drawn[:, None] > 0), energy * MINUTE / np.maximum(secs, 1), power[:, None] * MINUTE
    )
    return [busy, missing.astype(np.float64), np.where(inside, whole_minute, 0.0)]


def _integrals(
    util: Array, energy: Array, seconds: Array, day: Array, start: Array, end: Array
) -> tuple[_Integrals, _Integrals]:
    """Per interval and per day (``day``: each interval's row, ``start``/``end`` cut to the day).

    A plain row (whole minutes, every minute read) is read as given: its totals are sums and the
    partial intervals' integrals prefix sums over its minutes; the other rows are prepared apart
    (``_general``), their totals read at the day's end."""
    n, width = util.shape
    zeros = np.zeros(n)
    totals = _Integrals(
        busy=util.sum(axis=1),
        unread=zeros,
        energy=energy.sum(axis=1),
        busy_energy=np.einsum("ij,ij->i", util, energy),
        unread_energy=zeros.copy(),
    )
    is_general = np.isnan(totals.busy_energy) | (seconds != width * MINUTE) | ~(totals.energy > 0)
    general = np.flatnonzero(is_general)
    whole = (start <= 0) & (end >= seconds[day])
    if len(general):
        busy, unread, per_minute = _general(util[general], energy[general], seconds[general])
        sums = [
            busy.sum(axis=1),
            unread.sum(axis=1),
            per_minute.sum(axis=1),
            np.einsum("ij,ij->i", busy, per_minute),
            np.einsum("ij,ij->i", unread, per_minute),
        ]
        short = np.flatnonzero(seconds[general] != width * MINUTE)
        if len(short):
            at_end = _prefix(
                _with_products([busy[short], unread[short], per_minute[short]]), seconds[general][short]
            )
            for values, new in zip(sums, at_end, strict=True):
                values[short] = new
        totals.update(general, sums)
    parts = totals.picked(day)
    plain = np.flatnonzero(~whole & ~is_general[day])
    if len(plain):
        rows, local = np.unique(day[plain], return_inverse=True)
        arrays = [util[rows], energy[rows]]
        held = _between([arrays[0], arrays[1], arrays[0] * arrays[1]], local, start[plain], end[plain])
        no = np.zeros(len(plain))
        parts.update(plain, [held[0], no, held[1], held[2], no])
    odd = np.flatnonzero(~whole & is_general[day])
    if len(odd):
        at = np.full(n, -1)
        at[general] = np.arange(len(general))
        rows, local = np.unique(at[day[odd]], return_inverse=True)
        arrays = _with_products([busy[rows], unread[rows], per_minute[rows]])
        parts.update(odd, _between(arrays, local, start[odd], end[odd]))
    for values in (parts, totals):  # utilisation from % to a fraction
        values.busy /= 100
        values.busy_energy /= 100
    return parts, totals


def _with_products(arrays: list[Array]) -> list[Array]:
    """busy, unread, energy → the five integrands of _Integrals."""
    busy, unread, per_minute = arrays
    return [busy, unread, per_minute, busy * per_minute, unread * per_minute]


def _between(arrays: list[Array], row: Array, start: Array, end: Array) -> list[Array]:
    """Each array's integral over [start, end) of row ``row`` (one reduceat for both ends)."""
    width = arrays[0].shape[1]
    both = _prefix(arrays, np.concatenate([end, start]), np.concatenate([row, row]), width)
    half = len(row)
    return [values[:half] - values[half:] for values in both]


def _prefix(arrays: list[Array], t: Array, row: Array | None = None, width: int | None = None) -> list[Array]:
    """Each array's integral from the start of its row ``row`` (default: one a time) to time
    ``t`` (seconds), in minute units: the minutes before ``t``'s by one reduceat over the array,
    then ``t``'s minute in part."""
    width = width or arrays[0].shape[1]
    row = np.arange(len(t)) if row is None else row
    position = np.clip(t / MINUTE, 0, width)
    k = np.minimum(position.astype(np.int64), width - 1)
    frac = position - k
    points = row * width + k
    starts = row * width
    marks = np.unique(np.concatenate([starts, points]))
    at_point, at_start = np.searchsorted(marks, points), np.searchsorted(marks, starts)
    out = []
    for values in arrays:
        segments = np.add.reduceat(values.ravel(), marks)
        before = np.concatenate([[0.0], np.cumsum(segments)])
        out.append(before[at_point] - before[at_start] + frac * values[row, k])
    return out


def _largest_remainder(line_day: Array, fractions: Array, totals: Array) -> Array:
    """Integer units of each line: ``totals`` of each day split by ``fractions`` (normalised per
    day), floors plus one unit each to the largest remainders, ties to the earlier line."""
    n = len(totals)
    fractions = np.maximum(fractions, 0)
    norm = np.bincount(line_day, weights=fractions, minlength=n)
    fractions = fractions / np.where(norm > 0, norm, 1)[line_day]
    exact = totals[line_day].astype(np.float64) * fractions
    floors = np.floor(exact).astype(np.int64)
    given = np.bincount(line_day, weights=floors, minlength=n).astype(np.int64)
    # By day, then largest remainder first, ties in line order (one stable sort of a float key:
    # the remainder, in [0, 1), moves a line at most half a day's place ahead).
    # Remainders are compared at 1e-6 of a unit: parts equal on paper (3/7 and 1 - 3/7 - 1/7)
    # differ in their last bits, and the tie must go to the earlier line, not to float noise.
    remainder = np.round(exact - floors, 6)
    order = np.argsort(line_day - remainder / 2, kind="stable")
    first = np.searchsorted(line_day[order], np.arange(n))
    rank = np.empty(len(line_day), dtype=np.int64)
    rank[order] = np.arange(len(line_day)) - first[line_day[order]]
    units = floors + (rank < (totals - given)[line_day])
    if not np.array_equal(np.bincount(line_day, weights=units, minlength=n).astype(np.int64), totals):
        raise ArithmeticError("largest remainder: the lines do not add up to their day's total")
    return units


def _chunk(b: DayBatch, begin: int, end: int, intervals: Array, devices: Array) -> tuple[Array, ...]:
    n = end - begin
    seconds = np.asarray(b.seconds[begin:end], dtype=np.float64)
    width = int(-(-seconds.max() // MINUTE))
    util = np.asarray(b.util[begin:end, :width], dtype=np.float64)
    energy = np.asarray(b.energy[begin:end, :width], dtype=np.float64)
    # Devices and intervals, renumbered within the chunk.
    dev_local = np.full(len(b.device_day), -1, dtype=np.int64)
    dev_local[devices] = np.arange(len(devices))
    dev_day = b.device_day[devices] - begin
    dev_weight = np.asarray(b.device_weight[devices], dtype=np.float64)
    dev = dev_local[b.interval_device[intervals]]
    day = dev_day[dev]
    start = np.clip(b.interval_start[intervals], 0, seconds[day])
    stop = np.clip(b.interval_end[intervals], 0, seconds[day])
    share = np.asarray(b.interval_share[intervals], dtype=np.float64)
    sm = np.asarray(b.interval_sm_util[intervals], dtype=np.float64) / 100
    w = dev_weight[dev]

    parts, totals = _integrals(util, energy, seconds, day, start, stop)
    held = w * share * (stop - start) / seconds[day]
    measured = ~np.isnan(sm)
    own = np.minimum(np.nan_to_num(sm), share)
    minutes_of_day = seconds / MINUTE
    # Usage basis, as fractions of the day's cost (by time) and energy.
    cost_part = (
        w * np.where(measured, own * (stop - start) / MINUTE, share * parts.busy) / minutes_of_day[day]
    )
    cost_read = (
        w
        * np.where(
            measured, own * ((stop - start) / MINUTE - parts.unread), share * (parts.busy - parts.unread)
        )
        / minutes_of_day[day]
    )
    energy_part = w * np.where(measured, own * parts.energy, share * parts.busy_energy) / totals.energy[day]
    energy_read = (
        w
        * np.where(
            measured,
            own * (parts.energy - parts.unread_energy),
            share * (parts.busy_energy - parts.unread_energy),
        )
        / totals.energy[day]
    )
    busy_read = [
        (totals.busy - totals.unread) / minutes_of_day,
        (totals.busy_energy - totals.unread_energy) / totals.energy,
    ]
    usage = []
    for part, read, day_busy in (
        (cost_part, cost_read, busy_read[0]),
        (energy_part, energy_read, busy_read[1]),
    ):
        held_read = np.bincount(dev, weights=read, minlength=len(devices))
        uncovered_dev = np.maximum(dev_weight * day_busy[dev_day] - held_read, 0)
        uncovered = np.bincount(dev_day, weights=uncovered_dev, minlength=n)
        idle = 1 - np.bincount(day, weights=part, minlength=n) - uncovered
        usage.append((part, idle, uncovered))
    alloc_idle = 1 - np.bincount(day, weights=held, minlength=n)
    for idle in (alloc_idle, usage[0][1], usage[1][1]):
        if (idle < -TOLERANCE).any():
            raise ValueError(
                f"interval_share: day {begin + int(np.argmin(idle))}'s holders hold more than the device at once"
            )

    # Lines: (day, workload) in order of first interval; then each day's idle, then its uncovered.
    workload = np.asarray(b.interval_workload[intervals], dtype=np.int64)
    key = day * (int(workload.max(initial=0)) + 1) + workload
    keys, first, line = np.unique(key, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty_like(by_first)
    rank[by_first] = np.arange(len(by_first))
    line = rank[line]
    line_day = day[first[by_first]]
    line_workload = workload[first[by_first]]
    lines = len(keys)
    all_days = np.concatenate([line_day, np.arange(n), np.arange(n)])
    cents = np.asarray(b.cost_cents[begin:end], dtype=np.int64)
    joules = np.round(np.asarray(b.energy_j[begin:end], dtype=np.float64)).astype(np.int64)
    zeros = np.zeros(n)

    def split(per_interval: Array, idle: Array, uncovered: Array, totals_: Array) -> Array:
        work = np.bincount(line, weights=per_interval, minlength=lines)
        return _largest_remainder(all_days, np.concatenate([work, idle, uncovered]), totals_)

    columns = np.stack(
        [
            split(held, alloc_idle, zeros, cents),
            split(*usage[0], cents),
            split(held, alloc_idle, zeros, joules),
            split(*usage[1], joules),
        ],
        axis=1,
    )
    line_team = np.asarray(b.workload_team, dtype=np.int64)[line_workload]
    unmapped = line_team < 0
    unattributed = columns[lines + n :].copy()
    np.add.at(unattributed, line_day[unmapped], columns[:lines][unmapped])
    return (
        line_day + begin,
        line_workload,
        line_team,
        columns[:lines],
        columns[lines : lines + n],
        unattributed,
    )


def units_split(total: int, weights: list[float]) -> list[int]:
    """``total`` integer units (cents, joules) split by ``weights`` with the largest-remainder
    rule: floors, then one unit each to the largest remainders, ties to the earlier weight.
    All weights 0 (or none positive): split evenly. The parts add up to ``total`` exactly."""
    if not weights:
        return []
    clean = [max(float(w), 0.0) for w in weights]
    if sum(clean) <= 0:
        clean = [1.0] * len(weights)
    units = _largest_remainder(np.zeros(len(clean), dtype=np.int64), np.asarray(clean), np.asarray([total]))
    return [int(u) for u in units]
