"""Before and after: two profiles compared per category and per kernel. Pure.

Both sides are brought to the same unit before subtracting: time **per step and per GPU** when
both profiles have steps (traces of different lengths or rank counts stay comparable), else per
GPU over the whole profile; ``unit`` says which. A kernel is ``new`` (only in B), ``gone`` (only
in A), ``slower`` or ``faster`` when its time moved by more than ``SAME_WITHIN`` (relative) and
more than ``MIN_DELTA_US``, else ``same``. Its time is calls × time per call, so a kernel called
less often can take less time while each call got slower: when the time per call moved the other
way by more than ``SAME_WITHIN``, the kernel is ``fewer calls`` (less time, each call slower) or
``more calls`` (more time, each call faster) instead, and ``per_call_pct`` gives the change per
call. The net is B − A over everything, idle included when both sides have a timeline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import categories as cats

SAME_WITHIN = 0.02
MIN_DELTA_US = 1.0


@dataclass(frozen=True)
class Side:
    """What the comparison needs of one profile."""

    ranks: int
    steps: int
    timeline: bool
    categories: dict[str, float | None]
    kernels: Sequence[Mapping[str, Any]]  # name, category, count, total_us


@dataclass
class Comparison:
    unit: str
    categories: list[dict[str, Any]]
    kernels: list[dict[str, Any]]
    net_us: float
    total_a_us: float
    total_b_us: float
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def net_pct(self) -> float | None:
        return 100.0 * self.net_us / self.total_a_us if self.total_a_us else None

    def top_changes(self, limit: int = 3) -> list[dict[str, Any]]:
        """The kernels that moved most (either way), for a one-line summary."""
        moved = [row for row in self.kernels if row["status"] != "same"]
        return sorted(moved, key=lambda row: -abs(row["delta_us"]))[:limit]


def _status(a: float | None, b: float | None) -> str:
    if not a and b:
        return "new"
    if a and not b:
        return "gone"
    if a is None or b is None:
        return "same"
    delta = b - a
    if abs(delta) < MIN_DELTA_US or (a and abs(delta) / a < SAME_WITHIN):
        return "same"
    return "slower" if delta > 0 else "faster"


def _per_call(row: dict[str, Any]) -> None:
    """Time per call on both sides, and the status when calls and time per call disagree."""
    a, b, ca, cb = row["a_us"], row["b_us"], row["count_a"], row["count_b"]
    row["per_call_a_us"] = a / ca if a and ca else None
    row["per_call_b_us"] = b / cb if b and cb else None
    pa, pb = row["per_call_a_us"], row["per_call_b_us"]
    row["per_call_pct"] = 100.0 * (pb - pa) / pa if pa and pb is not None else None
    change = row["per_call_pct"]
    if change is None or abs(change) / 100.0 < SAME_WITHIN:
        return
    if row["status"] == "faster" and change > 0:
        row["status"] = "fewer calls"
    elif row["status"] == "slower" and change < 0:
        row["status"] = "more calls"


def _row(key: str, a: float | None, b: float | None, **extra: Any) -> dict[str, Any]:
    delta = None if a is None or b is None else b - a
    pct = 100.0 * delta / a if delta is not None and a else None
    return {"key": key, "a_us": a, "b_us": b, "delta_us": delta, "pct": pct, "status": _status(a, b), **extra}


def profiles_compare(a: Side, b: Side) -> Comparison:
    """Compare profile B (candidate) with A (reference); see the module docstring."""
    per_step = a.steps > 0 and b.steps > 0
    unit = "per step and GPU" if per_step else "per GPU, whole profile"

    def scale(side: Side) -> float:
        return 1.0 / (max(side.ranks, 1) * (side.steps if per_step else 1))

    sa, sb = scale(a), scale(b)
    timeline = a.timeline and b.timeline
    category_rows = []
    for key in cats.ALL:
        if key == cats.IDLE and not timeline:
            continue
        va, vb = a.categories.get(key), b.categories.get(key)
        va = None if va is None else va * sa
        vb = None if vb is None else vb * sb
        if not va and not vb:
            continue
        category_rows.append(_row(key, va or 0.0, vb or 0.0, label=cats.LABELS[key], group=cats.GROUP[key]))

    kernels_a = _by_name(a.kernels)
    kernels_b = _by_name(b.kernels)
    kernel_rows = []
    for name in kernels_a.keys() | kernels_b.keys():
        ra, rb = kernels_a.get(name), kernels_b.get(name)
        va = ra["total_us"] * sa if ra else 0.0
        vb = rb["total_us"] * sb if rb else 0.0
        source = rb or ra
        assert source is not None
        row = _row(
            name,
            va,
            vb,
            name=name,
            category=source["category"],
            count_a=ra["count"] * sa if ra else 0.0,
            count_b=rb["count"] * sb if rb else 0.0,
        )
        _per_call(row)
        kernel_rows.append(row)
    kernel_rows.sort(
        key=lambda row: (-abs(row["delta_us"] or 0.0), -max(row["a_us"] or 0.0, row["b_us"] or 0.0))
    )
    total_a = sum(row["a_us"] or 0.0 for row in category_rows)
    total_b = sum(row["b_us"] or 0.0 for row in category_rows)
    counts: dict[str, int] = {}
    for row in kernel_rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return Comparison(
        unit=unit,
        categories=category_rows,
        kernels=kernel_rows,
        net_us=total_b - total_a,
        total_a_us=total_a,
        total_b_us=total_b,
        counts=counts,
    )


def _by_name(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        slot = out.get(row["name"])
        if slot is None:
            out[row["name"]] = {**row}
        else:
            slot["total_us"] += row["total_us"]
            slot["count"] += row["count"]
    return out


def change_headline(comparison: Comparison) -> str:
    """ "flash_fwd_kernel +23%, ampere_sgemm −12%": the kernels that moved most, for links."""
    parts = []
    for row in comparison.top_changes(2):
        name = row["name"]
        short = name if len(name) <= 48 else name[:45] + "…"
        if row["status"] == "new":
            parts.append(f"{short} new")
        elif row["status"] == "gone":
            parts.append(f"{short} gone")
        elif row["pct"] is not None:
            parts.append(f"{short} {row['pct']:+.0f}%")
    return ", ".join(parts)
