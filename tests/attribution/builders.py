"""GPU-days written as the tests think of them (devices, intervals, teams), turned into the
columns ``allocate_days`` takes, and its answer read back as Decimal cost and joules per line."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from accelboard.attribution.allocation import DayBatch, allocate_days


@dataclass(frozen=True)
class Device:
    """A GPU (``slices == total == 1``) or one MIG instance of it (``slices`` of ``total``)."""

    key: str
    slices: int = 1
    total: int = 1


@dataclass(frozen=True)
class Interval:
    device: str
    workload: str
    start: float
    end: float
    share: float = 1.0
    basis: str = "exclusive"
    sm_util: float | None = None


@dataclass(frozen=True)
class GpuDay:
    cost: Decimal
    energy_j: float
    util: Sequence[float] | np.ndarray
    energy: Sequence[float] | np.ndarray
    intervals: Sequence[Interval]
    teams: Mapping[str, str | None]
    devices: Sequence[Device] = (Device("gpu"),)
    seconds: int = 86_400


@dataclass(frozen=True)
class Amounts:
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
    workloads: tuple[WorkloadPart, ...]
    idle: Amounts
    unattributed: Amounts


def day_batch(days: Sequence[GpuDay]) -> tuple[DayBatch, list[tuple[str, str | None]]]:
    """The columns of ``days`` and each workload index's (name, team)."""
    width = max(math.ceil(d.seconds / 60) for d in days)
    util = np.full((len(days), width), np.nan)
    energy = np.full((len(days), width), np.nan)
    device_day, device_weight = [], []
    columns: dict[str, list[float]] = {k: [] for k in ("device", "workload", "start", "end", "share", "sm")}
    workloads: list[tuple[str, str | None]] = []
    teams: list[int] = []
    team_index: dict[str, int] = {}
    for g, d in enumerate(days):
        row_u, row_e = np.asarray(d.util, dtype=float), np.asarray(d.energy, dtype=float)
        util[g, : len(row_u)] = row_u
        energy[g, : len(row_e)] = row_e
        devices = {}
        for device in d.devices:
            devices[device.key] = len(device_day)
            device_day.append(g)
            device_weight.append(device.slices / device.total)
        known: dict[str, int] = {}
        for interval in d.intervals:
            if interval.workload not in known:
                known[interval.workload] = len(workloads)
                team = d.teams[interval.workload]
                workloads.append((interval.workload, team))
                teams.append(-1 if team is None else team_index.setdefault(team, len(team_index)))
            columns["device"].append(devices.get(interval.device, 10**9))
            columns["workload"].append(known[interval.workload])
            columns["start"].append(interval.start)
            columns["end"].append(interval.end)
            columns["share"].append(interval.share)
            columns["sm"].append(math.nan if interval.sm_util is None else interval.sm_util)
    batch = DayBatch(
        cost_cents=np.array(
            [int(Decimal(d.cost).quantize(Decimal("0.01")) * 100) for d in days], dtype=np.int64
        ),
        energy_j=np.array([d.energy_j for d in days], dtype=float),
        seconds=np.array([d.seconds for d in days], dtype=np.int64),
        util=util,
        energy=energy,
        device_day=np.array(device_day, dtype=np.int64),
        device_weight=np.array(device_weight, dtype=float),
        interval_device=np.array(columns["device"], dtype=np.int64),
        interval_workload=np.array(columns["workload"], dtype=np.int64),
        interval_start=np.array(columns["start"], dtype=float),
        interval_end=np.array(columns["end"], dtype=float),
        interval_share=np.array(columns["share"], dtype=float),
        interval_sm_util=np.array(columns["sm"], dtype=float),
        workload_team=np.array(teams, dtype=np.int64),
    )
    return batch, workloads


def _amounts(row: np.ndarray) -> Amounts:
    return Amounts(Decimal(int(row[0])).scaleb(-2), Decimal(int(row[1])).scaleb(-2), int(row[2]), int(row[3]))


def allocate(days: Sequence[GpuDay]) -> list[DayAllocation]:
    batch, workloads = day_batch(days)
    out = allocate_days(batch)
    per_day: list[list[WorkloadPart]] = [[] for _ in days]
    for g, w, row in zip(out.line_day, out.line_workload, out.amounts, strict=True):
        name, team = workloads[int(w)]
        per_day[int(g)].append(WorkloadPart(name, team, _amounts(row)))
    return [
        DayAllocation(tuple(per_day[g]), _amounts(out.idle[g]), _amounts(out.unattributed[g]))
        for g in range(len(days))
    ]
