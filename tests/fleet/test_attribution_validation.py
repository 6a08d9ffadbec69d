"""The attribution sweep and the interval parser, on plain lists (no database): each case worked by
hand from docs/attribution.md's rules."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from accelboard.fleet.attribution_services import attribution_day_parts
from accelboard.fleet.attribution_validation import (
    OVER_FULL,
    SAME_WORKLOAD,
    attribution_conflict,
    attribution_parse,
)
from accelboard.fleet.ingest_validation import IngestRejected

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _conflict(rows: list[tuple[str, float, float, str, float]], new: int | None = None) -> object:
    return attribution_conflict(
        gpus=[r[0] for r in rows],
        starts=[r[1] for r in rows],
        ends=[r[2] for r in rows],
        workloads=[r[3] for r in rows],
        shares=[r[4] for r in rows],
        new=new,
    )


def test_touching_intervals_and_other_devices_do_not_overlap() -> None:
    rows = [
        ("A", 0, 60, "w1", 1.0),
        ("A", 60, 120, "w1", 1.0),  # starts where the first ends: [start, end)
        ("B", 30, 90, "w1", 1.0),  # the same workload on another device
        ("A", 60, 120, "w2", 1e-7),  # 1 + 1e-7 is within the tolerance
    ]
    assert _conflict(rows) is None


def test_shares_that_add_up_to_one_at_every_instant_fit() -> None:
    # 0.5 + 0.25 + 0.25 from 0 to 30, then 0.5 + 0.5 from 30 to 60.
    rows = [
        ("A", 0, 60, "w1", 0.5),
        ("A", 0, 30, "w2", 0.25),
        ("A", 0, 30, "w3", 0.25),
        ("A", 30, 60, "w4", 0.5),
    ]
    assert _conflict(rows) is None
    # One second earlier, w4 meets w2 and w3: 1.5 from 29 to 30.
    rows[3] = ("A", 29, 60, "w4", 0.5)
    assert _conflict(rows) == (0, 3, OVER_FULL)


def test_a_workload_overlapping_itself_names_both() -> None:
    rows = [("A", 100, 160, "w1", 0.25), ("A", 0, 60, "w2", 1.0), ("A", 150, 200, "w1", 0.25)]
    assert _conflict(rows) == (0, 2, SAME_WORKLOAD)


def test_stored_intervals_are_checked_against_new_ones_only() -> None:
    # Two stored intervals (indices 1, 2) that overlap each other are not this batch's fault.
    rows = [("A", 500, 560, "w9", 0.1), ("A", 0, 60, "w1", 0.7), ("A", 30, 90, "w2", 0.7)]
    assert _conflict(rows, new=1) is None
    # A new interval over them names a stored one: the largest share open.
    rows = [("A", 40, 50, "w3", 0.1), ("A", 0, 60, "w1", 0.3), ("A", 30, 90, "w2", 0.65)]
    assert _conflict(rows, new=1) == (0, 2, OVER_FULL)


def test_day_parts_cut_at_each_midnight_utc() -> None:
    start = datetime(2026, 11, 29, 23, 59, tzinfo=UTC)
    end = datetime(2026, 12, 1, 0, 1, tzinfo=UTC)
    midnight_1 = datetime(2026, 11, 30, tzinfo=UTC)
    midnight_2 = datetime(2026, 12, 1, tzinfo=UTC)
    assert attribution_day_parts(start, end) == [
        (start, midnight_1),
        (midnight_1, midnight_2),
        (midnight_2, end),
    ]
    assert attribution_day_parts(start, midnight_1) == [(start, midnight_1)]


def _interval(**extra: object) -> dict[str, object]:
    return {
        "gpu": "GPU-1",
        "start": "2026-11-30T10:00:00Z",
        "end": 1796033100.5,
        "workload": {"kind": "process", "uid": "42@1"},
        "share": 1,
        "basis": "even",
        **extra,
    }


def test_it_reads_times_as_samples_are_read_and_keeps_each_workloads_latest_fields() -> None:
    first = _interval(workload={"kind": "pod", "uid": "p", "name": "old"})
    later = _interval(
        start=1796033100.5,
        end=1796033160.0,
        workload={"kind": "pod", "uid": "p", "name": "new", "labels": {"a": "b"}},
    )
    parsed = attribution_parse([later, first], now=NOW)
    assert parsed.starts == [1796033100.5, 1796032800.0]
    assert parsed.ends == [1796033160.0, 1796033100.5]
    assert parsed.shares == [1.0, 1.0] and parsed.bases == ["even", "even"]
    assert parsed.workloads == [("pod", "p"), ("pod", "p")]
    assert parsed.workload_fields[("pod", "p")]["name"] == "new"
    assert parsed.workload_fields[("pod", "p")]["labels"] == {"a": "b"}


def test_it_names_the_later_interval_and_the_earlier_one_in_its_message() -> None:
    with pytest.raises(IngestRejected) as caught:
        attribution_parse([_interval(), _interval(start="2026-11-30T10:04:59Z", end=1796033200.0)], now=NOW)
    assert caught.value.path == "attribution[1]" and "attribution[0]" in caught.value.message
    assert caught.value.status == 422
