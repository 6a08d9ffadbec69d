"""Hand-worked GPU-days split into workloads, idle and unattributed (docs/attribution.md), the cent
and joule invariants over many random days, and the vectorised split against a per-second loop.

Pure computation: no database.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

import numpy as np
import pytest

from accelboard.attribution import allocation
from tests.attribution.builders import Amounts, DayAllocation, Device, GpuDay, Interval, allocate, day_batch

DAY = 86_400
H = 3_600
MINUTES = 1_440


def gpu_day(
    intervals: list[Interval],
    teams: dict[str, str | None],
    *,
    cost: str = "24.00",
    energy_j: float = 86_400.0,
    util: float | list[float] = 100.0,  # % every minute, or the minutes
    energy: list[float] | None = None,
    devices: tuple[Device, ...] = (Device("gpu"),),
) -> GpuDay:
    return GpuDay(
        cost=Decimal(cost),
        energy_j=energy_j,
        util=[float(util)] * MINUTES if isinstance(util, int | float) else util,
        energy=energy if energy is not None else [energy_j / MINUTES] * MINUTES,
        intervals=intervals,
        teams=teams,
        devices=devices,
    )


def one(day: GpuDay) -> DayAllocation:
    [result] = allocate([day])
    return result


def parts(result: DayAllocation) -> dict[str, Amounts]:
    return {part.workload: part.amounts for part in result.workloads}


def amounts(ca: str, cu: str, ea: int, eu: int) -> Amounts:
    return Amounts(Decimal(ca), Decimal(cu), ea, eu)


def assert_adds_up(day: GpuDay, result: DayAllocation) -> None:
    """Σ mapped workloads + unattributed + idle = C (at the cent) and E (at the joule), both bases."""
    cost = Decimal(day.cost).quantize(Decimal("0.01"))
    mapped = [p.amounts for p in result.workloads if p.team is not None]
    lines = [*mapped, result.idle, result.unattributed]
    assert sum((a.cost_allocation for a in lines), Decimal(0)) == cost
    assert sum((a.cost_usage for a in lines), Decimal(0)) == cost
    assert sum(a.energy_allocation_j for a in lines) == round(day.energy_j)
    assert sum(a.energy_usage_j for a in lines) == round(day.energy_j)


def test_it_gives_one_pod_holding_the_gpu_all_day_everything() -> None:
    day = gpu_day([Interval("gpu", "pod-a", 0, DAY)], {"pod-a": "llm"})
    result = one(day)
    # 24.00 × 1 × 86,400 / 86,400 on both bases; 86,400 J likewise; nothing idle.
    assert parts(result) == {"pod-a": amounts("24.00", "24.00", 86_400, 86_400)}
    assert result.idle == amounts("0.00", "0.00", 0, 0)
    assert result.unattributed == amounts("0.00", "0.00", 0, 0)
    assert result.workloads[0].team == "llm"


def test_it_splits_two_time_sliced_pods_by_their_measured_shares() -> None:
    day = gpu_day(
        [Interval("gpu", "a", 0, DAY, 0.7, "measured"), Interval("gpu", "b", 0, DAY, 0.3, "measured")],
        {"a": "llm", "b": "vision"},
        energy_j=1_000.0,
    )
    result = one(day)
    # 24.00 × 0.7 = 16.80 and 24.00 × 0.3 = 7.20; 1,000 J × 0.7 = 700, × 0.3 = 300. At 100 %
    # utilisation the usage basis is the same.
    assert parts(result) == {"a": amounts("16.80", "16.80", 700, 700), "b": amounts("7.20", "7.20", 300, 300)}
    assert result.idle == amounts("0.00", "0.00", 0, 0)


def test_it_splits_evenly_and_gives_the_odd_cent_to_the_earlier_holder() -> None:
    third = 1 / 3
    day = gpu_day(
        [Interval("gpu", name, 0, DAY, third, "even") for name in ("a", "b", "c")],
        {"a": "t1", "b": "t2", "c": "t3"},
        cost="0.10",
        energy_j=100.0,
    )
    result = one(day)
    # 10 cents / 3 = 3.33 each: floors 3 + 3 + 3 = 9, the cent left goes to the largest remainder,
    # all equal, so to the first line. 100 J / 3 = 33.3: 34 + 33 + 33.
    assert parts(result) == {
        "a": amounts("0.04", "0.04", 34, 34),
        "b": amounts("0.03", "0.03", 33, 33),
        "c": amounts("0.03", "0.03", 33, 33),
    }
    assert_adds_up(day, result)


def test_it_gives_mig_instances_their_slices_and_idles_the_rest() -> None:
    devices = (Device("mig-3g", 3, 7), Device("mig-2g", 2, 7), Device("mig-1g", 1, 7))
    day = gpu_day(
        [Interval("mig-3g", "a", 0, DAY), Interval("mig-2g", "b", 0, DAY)],
        {"a": "llm", "b": "vision"},
        cost="70.00",
        energy_j=7_000.0,
        util=math.nan,  # NVML reads no utilisation of a GPU in MIG mode: held counts as busy
        devices=devices,
    )
    result = one(day)
    # 3/7 × 70.00 = 30.00, 2/7 × 70.00 = 20.00; the 1g instance nobody held (1/7) and the seventh
    # slice no instance has (1/7) are idle: 20.00. Energy the same in J: 3,000, 2,000, 2,000.
    assert parts(result) == {
        "a": amounts("30.00", "30.00", 3_000, 3_000),
        "b": amounts("20.00", "20.00", 2_000, 2_000),
    }
    assert result.idle == amounts("20.00", "20.00", 2_000, 2_000)


def test_it_idles_the_hours_nobody_held() -> None:
    # Busy 50 % from 0 to 3 h, 100 % from 6 to 18 h, 0 % otherwise.
    util = [50.0] * 180 + [0.0] * 180 + [100.0] * 720 + [0.0] * 360
    day = gpu_day(
        [Interval("gpu", "day-shift", 6 * H, 18 * H), Interval("gpu", "night", 0, 3 * H, 0.5, "even")],
        {"day-shift": "llm", "night": "vision"},
        util=util,
    )
    result = one(day)
    # Allocation: day-shift 24.00 × 12/24 = 12.00; night 24.00 × 0.5 × 3/24 = 1.50; idle
    # 24 − 13.50 = 10.50. Energy spread evenly (3,600 J an hour): 43,200, 5,400 and 37,800 J.
    # Usage: night 0.5 × 50 % × 3 h = 0.75 h → 0.75 and 2,700 J; the GPU was busy 12 h + 1.5 h =
    # 13.50, so 13.50 − 12.00 − 0.75 = 0.75 (2,700 J) busy in no holder's part: unattributed;
    # idle 24 − 13.50 = 10.50 (37,800 J).
    assert parts(result) == {
        "day-shift": amounts("12.00", "12.00", 43_200, 43_200),
        "night": amounts("1.50", "0.75", 5_400, 2_700),
    }
    assert result.idle == amounts("10.50", "10.50", 37_800, 37_800)
    assert result.unattributed == amounts("0.00", "0.75", 0, 2_700)
    assert_adds_up(day, result)


def test_it_counts_a_workload_no_rule_maps_as_unattributed() -> None:
    day = gpu_day(
        [Interval("gpu", "mystery", 0, 8 * H), Interval("gpu", "known", 8 * H, 12 * H)],
        {"mystery": None, "known": "llm"},
        util=[100.0] * 720 + [0.0] * 720,  # busy while held
    )
    result = one(day)
    # mystery: 24.00 × 8/24 = 8.00, unattributed; known: 4.00; idle 12.00.
    assert result.unattributed == amounts("8.00", "8.00", 28_800, 28_800)
    assert parts(result)["known"] == amounts("4.00", "4.00", 14_400, 14_400)
    assert result.idle == amounts("12.00", "12.00", 43_200, 43_200)
    assert [p.team for p in result.workloads] == [None, "llm"]
    assert_adds_up(day, result)


def test_it_idles_what_utilisation_left_unused_on_the_usage_basis() -> None:
    # Busy 75 % the first half of the day, 25 % the second; the first half drew twice the energy:
    # 2,000 J over 720 minutes, then 1,000 J.
    util = [75.0] * 720 + [25.0] * 720
    energy = [2_000 / 720] * 720 + [1_000 / 720] * 720
    day = gpu_day(
        [Interval("gpu", "pod", 0, DAY)], {"pod": "llm"}, util=util, energy=energy, energy_j=3_000.0
    )
    result = one(day)
    # Allocation: all of it. Usage: 24.00 × (0.5 × 0.75 + 0.5 × 0.25) = 12.00, idle 12.00;
    # energy 2,000 × 0.75 + 1,000 × 0.25 = 1,750 J, idle 500 + 750 = 1,250 J.
    assert parts(result) == {"pod": amounts("24.00", "12.00", 3_000, 1_750)}
    assert result.idle == amounts("0.00", "12.00", 0, 1_250)
    assert_adds_up(day, result)


def test_it_counts_busy_time_no_interval_covers_as_unattributed() -> None:
    day = gpu_day([Interval("gpu", "pod", 0, DAY, 0.5, "measured")], {"pod": "llm"})
    result = one(day)
    # The pod held half the GPU; the GPU was busy all day: the other half's busy time is nobody's
    # known workload: usage 12.00 unattributed; on the allocation basis that half is idle.
    assert parts(result) == {"pod": amounts("12.00", "12.00", 43_200, 43_200)}
    assert result.idle == amounts("12.00", "0.00", 43_200, 0)
    assert result.unattributed == amounts("0.00", "12.00", 0, 43_200)


def test_it_uses_a_workloads_own_measured_utilisation() -> None:
    day = gpu_day(
        [
            Interval("gpu", "a", 0, DAY, 0.5, "measured", sm_util=30.0),
            Interval("gpu", "b", 0, DAY, 0.5, "measured"),
        ],
        {"a": "llm", "b": "vision"},
        util=80.0,
    )
    result = one(day)
    # a: its own 30 % (below its 0.5 share): 24.00 × 0.30 = 7.20. b: 0.5 × 80 % × 24.00 = 9.60.
    # The GPU was busy 80 %: 19.20, of which 16.80 is theirs: 2.40 unattributed; idle 4.80.
    assert parts(result)["a"].cost_usage == Decimal("7.20")
    assert parts(result)["b"].cost_usage == Decimal("9.60")
    assert result.unattributed.cost_usage == Decimal("2.40")
    assert result.idle.cost_usage == Decimal("4.80")
    assert_adds_up(day, result)


def test_it_splits_minutes_without_a_utilisation_reading_by_time_held() -> None:
    util = [math.nan] * 720 + [50.0] * 720
    day = gpu_day([Interval("gpu", "pod", 0, DAY)], {"pod": "llm"}, util=util)
    result = one(day)
    # First half unread: held = busy, 12.00; second half 50 %: 6.00. Idle 6.00.
    assert parts(result)["pod"].cost_usage == Decimal("18.00")
    assert result.idle.cost_usage == Decimal("6.00")


def test_it_gives_an_unread_energy_minute_the_days_mean_power() -> None:
    energy = [math.nan] * 720 + [2.0] * 720  # 1,440 J read over half a day
    day = gpu_day(
        [Interval("gpu", "night", 0, DAY // 2), Interval("gpu", "day", DAY // 2, DAY)],
        {"night": "a", "day": "b"},
        energy=energy,
        energy_j=1_000.0,
    )
    result = one(day)
    # The unread half gets the read half's mean power: both halves 500 J of the day's 1,000.
    assert parts(result)["night"].energy_usage_j == 500
    assert parts(result)["day"].energy_usage_j == 500


def test_both_bases_agree_where_the_device_is_full_and_busy() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        cuts = np.sort(rng.uniform(0, 1, 3))
        shares = np.diff(np.concatenate([[0.0], cuts, [1.0]]))
        names = [f"w{i}" for i in range(4)]
        day = gpu_day(
            [Interval("gpu", n, 0, DAY, float(s), "measured") for n, s in zip(names, shares, strict=True)],
            dict.fromkeys(names, "t"),
            cost=f"{rng.uniform(1, 500):.2f}",
            energy_j=float(rng.integers(1, 10**7)),
            energy=list(rng.uniform(100, 900, MINUTES)),
        )
        result = one(day)
        for part in result.workloads:
            # Cost on both bases always; energy too, as every holder held its share all day.
            assert part.amounts.cost_allocation == part.amounts.cost_usage
            assert part.amounts.energy_allocation_j == part.amounts.energy_usage_j


@pytest.mark.parametrize(
    ("interval", "message"),
    [
        (Interval("gpu", "a", 0, DAY, 0.0), "interval_share[0]: must be in (0, 1]"),
        (Interval("gpu", "a", 0, DAY, 1.5), "interval_share[0]: must be in (0, 1]"),
        (Interval("gpu", "a", 10, 10), "interval_end[0]: must be after interval_start"),
        (Interval("mig-9", "a", 0, DAY), "interval_device[0]: not a device of the batch"),
        (
            Interval("gpu", "a", 0, DAY, 1.0, "measured", sm_util=140.0),
            "interval_sm_util[0]: must be in [0, 100]",
        ),
    ],
)
def test_it_refuses_a_bad_interval_naming_the_field(interval: Interval, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        allocate([gpu_day([], {}), gpu_day([interval], {"a": "t"})])


def test_it_refuses_shares_above_the_whole_device() -> None:
    day = gpu_day(
        [Interval("gpu", "a", 0, DAY, 0.8), Interval("gpu", "b", 0, DAY, 0.8)], {"a": "t", "b": "t"}
    )
    with pytest.raises(
        ValueError, match=r"interval_share: day 0's holders hold more than the device at once"
    ):
        allocate([day])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"util": [50.0] * 1439 + [101.0]}, "util[1]: must be in [0, 100]"),
        ({"energy": [1.0] * 1439 + [-1.0]}, "energy[1]: must be 0 or above"),
        ({"energy_j": -5.0}, "energy_j[1]: must be a number"),
        ({"energy_j": math.nan}, "energy_j[1]: must be a number"),
        ({"seconds": 0}, "seconds[1]: must be above 0"),
        ({"devices": (Device("m1", 4, 7), Device("m2", 4, 7))}, "device_weight: day 1's instances hold more"),
    ],
)
def test_it_refuses_a_bad_day_naming_the_field(change: dict[str, object], message: str) -> None:
    good = gpu_day([], {})
    bad = GpuDay(**{**good.__dict__, **change})  # type: ignore[arg-type]  # the fields' types vary by key
    with pytest.raises(ValueError, match=re.escape(message)):
        allocate([good, bad])


# --- invariants over random days ---------------------------------------------------------------

AWKWARD = ["0.01", "1000000.03", "0.10", "0.00", "3.33", "99999.99", "7.77"]


def random_day(rng: np.random.Generator, *, seconds: int = DAY, cost: str | None = None) -> GpuDay:
    """A random GPU-day: a plain GPU or MIG instances, holders at whole seconds that never hold
    more than the device, some with their own utilisation, some unmapped, gaps in the readings."""
    minutes = math.ceil(seconds / 60)
    if rng.random() < 0.3:
        devices: tuple[Device, ...] = (Device("m3", 3, 7), Device("m2", 2, 7), Device("m1", 1, 7))
    else:
        devices = (Device("gpu"),)
    intervals = []
    teams: dict[str, str | None] = {}
    for device in devices:
        # Per device, up to three lanes of fixed shares (summing to at most 1) with holders in turn.
        lanes = rng.dirichlet(np.ones(3)) * rng.uniform(0.5, 1)
        for lane, share in enumerate(lanes[: rng.integers(1, 4)]):
            bounds = np.sort(rng.choice(np.arange(1, seconds), size=4, replace=False))
            edges = [0, *bounds.tolist(), seconds]
            for k in range(0, len(edges) - 1, 2):
                name = f"{device.key}-{lane}-{k}"
                sm = float(rng.uniform(0, 100)) if rng.random() < 0.3 else None
                intervals.append(
                    Interval(device.key, name, edges[k], edges[k + 1], float(share), "measured", sm)
                )
                teams[name] = None if rng.random() < 0.2 else f"team-{rng.integers(3)}"
    util = rng.uniform(0, 100, minutes)
    util[rng.random(minutes) < 0.1] = math.nan
    energy = rng.uniform(50, 700, minutes) * 60
    energy[rng.random(minutes) < 0.1] = math.nan
    return GpuDay(
        cost=Decimal(cost if cost is not None else AWKWARD[rng.integers(len(AWKWARD))]),
        energy_j=float(rng.uniform(0, 6e7)),
        util=util,
        energy=energy,
        intervals=intervals,
        teams=teams,
        devices=devices,
        seconds=seconds,
    )


def test_lines_add_up_to_the_cent_and_the_joule_on_every_random_day() -> None:
    rng = np.random.default_rng(31)
    days = [random_day(rng) for _ in range(300)]
    results = allocate(days)
    assert len(results) == 300
    for day, result in zip(days, results, strict=True):
        assert_adds_up(day, result)
        for line in [*(p.amounts for p in result.workloads), result.idle, result.unattributed]:
            assert min(line.cost_allocation, line.cost_usage) >= 0
            assert min(line.energy_allocation_j, line.energy_usage_j) >= 0


def test_it_allocates_days_of_different_lengths_in_one_batch() -> None:
    rng = np.random.default_rng(5)
    days = [random_day(rng, seconds=int(s)) for s in (DAY, 3_630, 90_000 - 3 * H, 61)]
    for day, result in zip(days, allocate(days), strict=True):
        assert_adds_up(day, result)


def test_it_gives_the_same_lines_whatever_the_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    days = [random_day(rng, seconds=int(rng.integers(600, 4_000))) for _ in range(40)]
    batch, _ = day_batch(days)
    whole = allocation.allocate_days(batch)
    monkeypatch.setattr(allocation, "CHUNK", 7)  # 40 days in 6 chunks, the last one short
    chunked = allocation.allocate_days(batch)
    for name in ("line_day", "line_workload", "line_team", "amounts", "idle", "unattributed"):
        assert np.array_equal(getattr(whole, name), getattr(chunked, name)), name
    assert len(whole.line_day) == sum(
        len({p.workload for p in d.intervals}) for d in days
    )  # a line a day and workload


def test_it_cuts_intervals_to_the_day_and_names_each_lines_team() -> None:
    day = gpu_day([Interval("gpu", "pod", -600, DAY + 600)], {"pod": "llm"})
    batch, workloads = day_batch([day])
    out = allocation.allocate_days(batch)
    assert out.amounts.tolist() == [[2_400, 2_400, 86_400, 86_400]]
    assert workloads[int(out.line_workload[0])] == ("pod", "llm") and out.line_team.tolist() == [0]


def test_it_allocates_an_empty_batch() -> None:
    batch, _ = day_batch([gpu_day([], {})])
    empty = allocation.DayBatch(
        **{
            **batch.__dict__,
            "seconds": batch.seconds[:0],
            "util": batch.util[:0],
            "energy": batch.energy[:0],
            "cost_cents": batch.cost_cents[:0],
            "energy_j": batch.energy_j[:0],
            "device_day": batch.device_day[:0],
            "device_weight": batch.device_weight[:0],
        }
    )
    out = allocation.allocate_days(empty)
    assert out.amounts.shape == (0, 4) and out.idle.shape == (0, 4)


# --- against a per-second loop -------------------------------------------------------------------


def reference(day: GpuDay) -> dict[str, list[float]]:
    """The exact (unrounded) cost and energy of each line on both bases, second by second.

    Lines: each workload, "idle", "uncovered" (busy time no interval covers)."""
    s = day.seconds
    util = np.asarray(day.util, dtype=float) / 100
    energy = np.asarray(day.energy, dtype=float)
    minute_secs = [min(60, s - 60 * m) for m in range(len(util))]
    read = [not math.isnan(e) for e in energy]
    read_secs = sum(sec for sec, r in zip(minute_secs, read, strict=True) if r)
    mean_power = sum(e for e, r in zip(energy, read, strict=True) if r) / read_secs if read_secs else 0.0
    minute_energy = [
        e if r else mean_power * sec for e, r, sec in zip(energy, read, minute_secs, strict=True)
    ]
    total_energy = sum(minute_energy)
    cost = float(Decimal(day.cost).quantize(Decimal("0.01")))
    lines: dict[str, list[float]] = {iv.workload: [0.0] * 4 for iv in day.intervals}
    lines["idle"] = [0.0] * 4
    lines["uncovered"] = [0.0] * 4
    weights = {d.key: d.slices / d.total for d in day.devices}
    for key, w in weights.items():
        held_read = [0.0, 0.0]  # usage cost, usage energy: parts held in read minutes
        busy_read = [0.0, 0.0]
        held_total = [0.0, 0.0, 0.0]  # allocation, usage cost, usage energy
        for t in range(s):
            m = t // 60
            per_second = [1 / s, minute_energy[m] / minute_secs[m] / total_energy if total_energy else 1 / s]
            u = util[m]
            if not math.isnan(u):
                for b in range(2):
                    busy_read[b] += w * u * per_second[b]
            for iv in day.intervals:
                if iv.device != key or not iv.start <= t < iv.end:
                    continue
                x = (
                    min(iv.sm_util / 100, iv.share)
                    if iv.sm_util is not None
                    else iv.share * (1 if math.isnan(u) else u)
                )
                line = lines[iv.workload]
                line[0] += w * iv.share / s * cost
                line[2] += w * iv.share / s * day.energy_j
                held_total[0] += w * iv.share / s
                for b in range(2):
                    line[1 + 2 * b] += w * x * per_second[b] * (cost if b == 0 else day.energy_j)
                    held_total[1 + b] += w * x * per_second[b]
                    if not math.isnan(u):
                        held_read[b] += w * x * per_second[b]
        for b in range(2):
            uncovered = max(0.0, busy_read[b] - held_read[b])
            lines["uncovered"][1 + 2 * b] += uncovered * (cost if b == 0 else day.energy_j)
            lines["idle"][1 + 2 * b] += (w - held_total[1 + b] - uncovered) * (
                cost if b == 0 else day.energy_j
            )
        lines["idle"][0] += (w - held_total[0]) * cost
        lines["idle"][2] += (w - held_total[0]) * day.energy_j
    unassigned = 1 - sum(weights.values())
    for k, total in ((0, cost), (1, cost), (2, day.energy_j), (3, day.energy_j)):
        lines["idle"][k] += unassigned * total
    return lines


def test_it_matches_a_per_second_loop_on_random_days() -> None:
    rng = np.random.default_rng(2026)
    days = [random_day(rng, seconds=int(rng.integers(300, 2_000)), cost="1000000.03") for _ in range(25)]
    for day, result in zip(days, allocate(days), strict=True):
        expected = reference(day)
        got = {p.workload: p.amounts for p in result.workloads}
        for name, amounts_ in got.items():
            cents = [amounts_.cost_allocation * 100, amounts_.cost_usage * 100]
            exact = expected[name]
            # Each line is its exact amount rounded down or up, never further (100,000,003 cents).
            assert abs(float(cents[0]) - exact[0] * 100) < 1
            assert abs(float(cents[1]) - exact[1] * 100) < 1
            assert abs(amounts_.energy_allocation_j - exact[2]) < 1
            assert abs(amounts_.energy_usage_j - exact[3]) < 1
        assert abs(float(result.idle.cost_usage * 100) - expected["idle"][1] * 100) < 1
        assert abs(result.idle.energy_usage_j - expected["idle"][3]) < 1
        unmapped = sum(expected[p.workload][1] for p in result.workloads if p.team is None)
        # The unmapped workloads' lines and the uncovered time are each rounded: within a cent each.
        slack = 1 + sum(p.team is None for p in result.workloads)
        assert (
            abs(float(result.unattributed.cost_usage * 100) - (unmapped + expected["uncovered"][1]) * 100)
            < slack
        )
