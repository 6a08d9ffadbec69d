"""How long allocating a month of a fleet's GPU-days takes (``accelboard/attribution/allocation.py``).

    .venv/bin/python bench/allocation.py                    # 2,000 hosts x 8 GPUs, 30 days
    .venv/bin/python bench/allocation.py --hosts 200 --days 3   # reduced

Needs no database; seeded, so the same run allocates the same fleet (timings aside).

1. A fleet of ``--hosts`` × ``--gpus`` H100s, a tenth of its hosts cut into MIG instances
   (3g + 2g + 1g + 1g of 7 slices, three held, one idle; no GPU utilisation is read in MIG mode),
   and of the other GPUs 5 % idle, 15 % time-sliced by two or three pods (measured shares, half
   of them with their own SM utilisation) and the rest one pod each, a quarter of which is
   replaced during the day. A tenth of the workloads map to no team; 2 % of the GPU-days miss
   half an hour of readings. Per-minute utilisation and energy for every GPU-day.
2. Each of the ``--days`` fleet-days is built as the allocation job would hand it over (one
   ``DayBatch``, untimed), then ``allocate_days`` on it is timed. Target: the month under 10 s.
3. Reference, in the same process: a per-second loop (each second, each interval; the
   documented formulas written the slow, obvious way) on ``--reference-days`` GPU-days of the
   first fleet-day, scaled to the month's GPU-days; its exact amounts must lie within one unit
   (cent, joule) of every line ``allocate_days`` returned for them.

Ends with one line: ``gpu_days=… month_s=… day_ms_median=… reference_month_h=… ratio=… max_off_units=…``;
exits 1 when the month takes 10 s or more or a line is off by a unit or more.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import quick_parse  # noqa: E402

from accelboard.attribution.allocation import Allocation, DayBatch, allocate_days  # noqa: E402

DAY = 86_400
MINUTES = 1_440
TARGET_S = 10.0
MIG = np.array([3, 2, 1, 1]) / 7


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=2_000)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per host")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument(
        "--reference-days", type=int, default=6, help="GPU-days the per-second loop allocates"
    )
    parser.add_argument("--seed", type=int, default=31)
    return quick_parse(parser, hosts=4, days=1, reference_days=1)


class Fleet:
    """The fleet's fixed layout; ``day(d)`` draws one day's holders and readings."""

    def __init__(self, rng: np.random.Generator, hosts: int, gpus: int) -> None:
        self.rng = rng
        self.n = hosts * gpus
        mig_host = rng.random(hosts) < 0.1
        self.mig = np.repeat(mig_host, gpus)
        kind = rng.choice(3, size=self.n, p=[0.05, 0.15, 0.80])  # idle, shared, single
        self.kind = np.where(self.mig, 3, kind)
        self.level = rng.uniform(20, 95, self.n)  # each GPU's usual utilisation
        self.cost_cents = np.where(rng.random(self.n) < 0.5, 5_280, 29_496)  # $2.20/h; p5's $98.32/h ÷ 8
        self.next_workload = 0

    def _workloads(self, count: int) -> np.ndarray:
        ids = np.arange(self.next_workload, self.next_workload + count)
        self.next_workload += count
        return ids

    def day(self) -> DayBatch:
        rng, n = self.rng, self.n
        noise = rng.normal(0, 10, (n, MINUTES))
        util = np.clip(self.level[:, None] + noise, 0, 100)
        energy = 60 * (90 + 6.1 * util)
        util[self.mig] = np.nan
        gappy = np.flatnonzero(rng.random(n) < 0.02)
        at = rng.integers(0, MINUTES - 30, len(gappy))
        for g, m in zip(gappy.tolist(), at.tolist(), strict=True):
            util[g, m : m + 30] = np.nan
            energy[g, m : m + 30] = np.nan
        energy_j = np.nansum(energy, axis=1) * rng.uniform(0.98, 1.02, n)

        # Devices: one per plain GPU, four per MIG GPU.
        plain = np.flatnonzero(~self.mig)
        migs = np.flatnonzero(self.mig)
        device_day = np.concatenate([plain, np.repeat(migs, 4)])
        device_weight = np.concatenate([np.ones(len(plain)), np.tile(MIG, len(migs))])
        order = np.argsort(device_day, kind="stable")
        device_day, device_weight = device_day[order], device_weight[order]
        device_of = np.empty(len(device_day), dtype=np.int64)
        device_of[order] = np.arange(len(device_day))
        plain_device = device_of[: len(plain)]
        mig_devices = device_of[len(plain) :].reshape(-1, 4)

        cols: dict[str, list[np.ndarray]] = {k: [] for k in ("device", "start", "end", "share", "sm")}

        def add(
            device: np.ndarray, start: np.ndarray, end: np.ndarray, share: np.ndarray, sm: np.ndarray
        ) -> None:
            for key, values in zip(cols, (device, start, end, share, sm), strict=True):
                cols[key].append(np.asarray(values, dtype=np.float64))

        # One pod a GPU (or a MIG instance); a quarter of them replaced during the day.
        single = np.concatenate([plain_device[self.kind[plain] == 2], mig_devices[:, :3].ravel()])
        turnover = rng.random(len(single)) < 0.25
        # Whole seconds, so the per-second reference sees the same ends.
        cut = rng.integers(3_600, DAY - 3_600, len(single)).astype(np.float64)
        gap = rng.integers(0, 1_800, len(single)).astype(np.float64)
        nan = np.full(len(single), np.nan)
        add(single, np.zeros(len(single)), np.where(turnover, cut, DAY), np.ones(len(single)), nan)
        later = np.flatnonzero(turnover)
        add(single[later], cut[later] + gap[later], np.full(len(later), DAY), np.ones(len(later)), nan[later])
        # Time-sliced GPUs: two or three pods, measured shares, half with their own SM utilisation.
        shared_gpus = plain[self.kind[plain] == 1]
        shared = plain_device[self.kind[plain] == 1]
        pods = rng.integers(2, 4, len(shared))
        shares = rng.dirichlet(np.ones(3), len(shared)) * 0.99
        for slot in range(3):
            on = pods > slot
            own = shares[on, slot] * self.level[shared_gpus[on]]
            own = np.where(rng.random(on.sum()) < 0.5, own, np.nan)
            count = int(on.sum())
            add(shared[on], np.zeros(count), np.full(count, DAY), shares[on, slot], own)

        device = np.concatenate(cols["device"]).astype(np.int64)
        workload = self._workloads(len(device))
        team = np.where(rng.random(len(workload)) < 0.1, -1, rng.integers(0, 12, len(workload)))
        local_team = np.full(self.next_workload, -1)
        local_team[workload] = team
        return DayBatch(
            cost_cents=self.cost_cents.astype(np.int64),
            energy_j=energy_j,
            seconds=np.full(n, DAY),
            util=util,
            energy=energy,
            device_day=device_day,
            device_weight=device_weight,
            interval_device=device,
            interval_workload=workload,
            interval_start=np.concatenate(cols["start"]),
            interval_end=np.concatenate(cols["end"]),
            interval_share=np.concatenate(cols["share"]),
            interval_sm_util=np.concatenate(cols["sm"]),
            workload_team=local_team,
        )


def reference_day(batch: DayBatch, g: int) -> dict[str, list[float]]:
    """Exact amounts (cents, J) of day ``g``'s lines on the four columns, second by second:
    ``w<id>`` per workload, ``idle``, ``uncovered`` (busy time no interval covers)."""
    s = int(batch.seconds[g])
    cost, joules = float(batch.cost_cents[g]), float(round(batch.energy_j[g]))
    util = batch.util[g] / 100
    energy = batch.energy[g]
    read = ~np.isnan(energy)
    power = energy[read].sum() / (60 * read.sum())
    minute_energy = np.where(read, energy, power * 60)
    weight_e = minute_energy / minute_energy.sum() / 60  # per second of each minute
    devices = np.flatnonzero(batch.device_day == g)
    lines: dict[str, list[float]] = {"idle": [0.0] * 4, "uncovered": [0.0] * 4}
    own_devices = set(devices.tolist())
    mine = [i for i in range(len(batch.interval_device)) if int(batch.interval_device[i]) in own_devices]
    for i in mine:
        lines.setdefault(f"w{batch.interval_workload[i]}", [0.0] * 4)
    for dev in devices.tolist():
        w = float(batch.device_weight[dev])
        held = [0.0, 0.0, 0.0]
        held_read = [0.0, 0.0]
        busy_read = [0.0, 0.0]
        holders = [i for i in mine if batch.interval_device[i] == dev]
        for t in range(s):
            m = t // 60
            per_second = (1 / s, weight_e[m])
            u = util[m]
            if not math.isnan(u):
                busy_read[0] += w * u * per_second[0]
                busy_read[1] += w * u * per_second[1]
            for i in holders:
                if not batch.interval_start[i] <= t < batch.interval_end[i]:
                    continue
                share, sm = float(batch.interval_share[i]), float(batch.interval_sm_util[i])
                x = min(sm / 100, share) if not math.isnan(sm) else share * (1.0 if math.isnan(u) else u)
                line = lines[f"w{batch.interval_workload[i]}"]
                line[0] += w * share / s * cost
                line[2] += w * share / s * joules
                held[0] += w * share / s
                for b in range(2):
                    line[1 + 2 * b] += w * x * per_second[b] * (cost, joules)[b]
                    held[1 + b] += w * x * per_second[b]
                    if not math.isnan(u):
                        held_read[b] += w * x * per_second[b]
        for b in range(2):
            uncovered = max(0.0, busy_read[b] - held_read[b])
            lines["uncovered"][1 + 2 * b] += uncovered * (cost, joules)[b]
            lines["idle"][1 + 2 * b] += (w - held[1 + b] - uncovered) * (cost, joules)[b]
        lines["idle"][0] += (w - held[0]) * cost
        lines["idle"][2] += (w - held[0]) * joules
    unassigned = 1 - float(batch.device_weight[devices].sum())
    for k, total in enumerate((cost, cost, joules, joules)):
        lines["idle"][k] += unassigned * total
    return lines


def off_units(result: Allocation, batch: DayBatch, g: int, exact: dict[str, list[float]]) -> float:
    """The largest distance between a line ``allocate_days`` gave and its exact amount."""
    worst = max(abs(float(result.idle[g, k]) - exact["idle"][k]) for k in range(4))
    for row in np.flatnonzero(result.line_day == g).tolist():
        amounts = exact[f"w{result.line_workload[row]}"]
        worst = max(worst, *(abs(float(result.amounts[row, k]) - amounts[k]) for k in range(4)))
    return worst


def main() -> int:
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    fleet = Fleet(rng, args.hosts, args.gpus)
    print(
        f"fleet: {args.hosts} hosts x {args.gpus} GPUs = {fleet.n} GPUs, {int(fleet.mig.sum())} in MIG mode"
    )
    times = []
    first: tuple[DayBatch, Allocation] | None = None
    lines = 0
    for d in range(args.days):
        batch = fleet.day()
        started = time.perf_counter()
        result = allocate_days(batch)
        times.append(time.perf_counter() - started)
        lines += len(result.line_day)
        if first is None:
            first = (batch, result)
        print(
            f"  day {d + 1:2d}: {len(batch.interval_device):,} intervals, {times[-1] * 1000:7.1f} ms",
            flush=True,
        )
    assert first is not None
    month_s = sum(times)
    gpu_days = fleet.n * args.days
    print(f"allocated: {gpu_days:,} GPU-days, {lines:,} workload lines in {month_s:.2f} s")

    batch, result = first
    # The subset: the first GPUs of each kind (idle, shared, single, MIG) in turn.
    picks = [
        int(np.flatnonzero(fleet.kind == kind)[i]) for i in range(args.reference_days) for kind in range(4)
    ]
    picks = picks[: args.reference_days]
    started = time.perf_counter()
    worst = 0.0
    for g in picks:
        worst = max(worst, off_units(result, batch, g, reference_day(batch, g)))
    reference_s = time.perf_counter() - started
    reference_month_s = reference_s / len(picks) * gpu_days
    ratio = reference_month_s / month_s
    print(
        f"reference: per-second loop on {len(picks)} GPU-days {reference_s:.1f} s, scaled to the month "
        f"{reference_month_s / 3600:,.1f} h ({ratio:,.0f}x); largest line off its exact amount: {worst:.3f} units"
    )
    print(
        f"gpu_days={gpu_days} month_s={month_s:.2f} day_ms_median={statistics.median(times) * 1000:.1f} "
        f"reference_month_h={reference_month_s / 3600:.1f} ratio={ratio:.0f} max_off_units={worst:.3f}"
    )
    return 0 if month_s < TARGET_S and worst < 1 else 1


if __name__ == "__main__":
    sys.exit(main())
