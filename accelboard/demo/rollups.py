"""Old demo telemetry straight into the minute rollups, with the raw-sample refresh's arithmetic.

The demo samples every GPU once a minute (or every few minutes): each sample is alone in its
minute bucket, so its minute rollup *is* the sample (``samples = 1``, the averages and maxima are
its values). Only the energy needs its neighbour: the counter delta to the GPU's previous sample,
kept when it is not negative and the gap is at most ``MAX_COUNTER_GAP_S``, NULL otherwise (the
first sample, a counter reset), as ``fleet.rollup_services``' minute SQL computes it. The rows are built
with numpy as one PostgreSQL binary COPY stream, without a Python object per row; so are the hour
rollups of these minutes (``hour_rows``) and the host rollups of both (``host_rows``), with the
arithmetic of ``telemetry_rollups_refresh``'s hour and host statements.

``tests/test_demo_fleet.py`` loads the same fleet both ways and compares every rollup column.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

# PostgreSQL's binary COPY: signature, flags and header extension; a tuple count of -1 ends it.
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_TRAILER = struct.pack(">h", -1)
# timestamptz travels as microseconds since 2000-01-01 UTC.
_PG_EPOCH = 946_684_800
_SIZES = {"i4": 4, "i8": 8, "f8": 8}

# (column, binary type): the minute rollup's columns in the order they are sent.
MINUTE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("width_s", "i4"),
    ("bucket", "i8"),
    ("host_id", "i8"),
    ("accelerator_id", "i8"),
    ("samples", "i4"),
    ("power_samples", "i4"),
    ("power_avg_w", "f8"),
    ("power_max_w", "f8"),
    ("energy_j", "f8"),
    ("gpu_util_samples", "i4"),
    ("gpu_util_avg", "f8"),
    ("gpu_util_max", "f8"),
    ("mem_util_samples", "i4"),
    ("mem_util_avg", "f8"),
    ("mem_used_samples", "i4"),
    ("mem_used_avg_bytes", "f8"),
    ("mem_used_max_bytes", "i8"),
    ("mem_total_bytes", "i8"),
    ("temperature_max_c", "f8"),
    ("sm_clock_samples", "i4"),
    ("sm_clock_avg_mhz", "f8"),
    ("mem_clock_samples", "i4"),
    ("mem_clock_avg_mhz", "f8"),
    ("throttled_samples", "i4"),
    ("ecc_errors_max", "i8"),
    ("xid_errors_max", "i4"),
)
WITH_ENERGY = tuple(name for name, _ in MINUTE_COLUMNS)
# Rows whose energy is NULL go in a second COPY that leaves the column out.
WITHOUT_ENERGY = tuple(name for name in WITH_ENERGY if name != "energy_j")


def binary_tuples(columns: list[tuple[str, np.ndarray]]) -> bytes:
    """Tuples of a binary COPY (no signature, no trailer), one per element of the arrays. Pure.

    Every value is present (no NULL): each tuple is a field count, then per field its length
    and its big-endian value, so one structured numpy array holds them all.
    """
    n = len(columns[0][1])
    layout: list[tuple[str, str]] = [("count", ">i2")]
    for i, (code, _) in enumerate(columns):
        layout += [(f"n{i}", ">i4"), (f"v{i}", ">" + code)]
    records = np.empty(n, dtype=np.dtype(layout))
    records["count"] = len(columns)
    for i, (code, values) in enumerate(columns):
        records[f"n{i}"] = _SIZES[code]
        records[f"v{i}"] = values
    return records.tobytes()


@dataclass
class MinuteRows:
    """Minute rollup rows as column arrays (``MINUTE_COLUMNS``) and which of them have energy."""

    columns: dict[str, np.ndarray]
    has_energy: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.has_energy)


def minute_rows(
    *,
    epochs: np.ndarray,
    host_id: int,
    accelerator_id: int,
    values: dict[str, np.ndarray],
    throttle_mask: int,
    max_counter_gap_s: int,
    keep: np.ndarray | None = None,
) -> MinuteRows:
    """The minute rollups of one GPU's samples (one sample per minute bucket, ``epochs`` sorted).
    ``values`` holds that GPU's TELEMETRY_COLUMNS arrays (float32 as stored raw). With
    ``keep`` (a mask over the samples) only the kept samples become rows; the others still give
    their neighbours the energy delta (a sample before the range, raw samples rolled up by the
    ingest path). Pure."""
    n = len(epochs)
    energy = values["energy_mj"].astype(np.int64)
    delta = np.empty(n, dtype=np.float64)
    gap = np.zeros(n, dtype=np.int64)
    delta[0] = -1.0
    delta[1:] = (energy[1:] - energy[:-1]).astype(np.float64)
    gap[1:] = epochs[1:] - epochs[:-1]
    has_energy = (delta >= 0) & (gap <= max_counter_gap_s)
    has_energy[0] = False

    def f8(name: str) -> np.ndarray:
        # float4 raw columns are averaged as float8 of the float4 value, as PostgreSQL does.
        return values[name].astype(np.float32).astype(np.float64)

    ones = np.ones(n, dtype=np.int32)
    mem_used = values["mem_used_bytes"].astype(np.int64)
    columns = {
        "width_s": np.full(n, 60, dtype=np.int32),
        "bucket": (epochs.astype(np.int64) - _PG_EPOCH) * 1_000_000,
        "host_id": np.full(n, host_id, dtype=np.int64),
        "accelerator_id": np.full(n, accelerator_id, dtype=np.int64),
        "samples": ones,
        "power_samples": ones,
        "power_avg_w": f8("power_w"),
        "power_max_w": f8("power_w"),
        "energy_j": delta / 1000.0,
        "gpu_util_samples": ones,
        "gpu_util_avg": f8("gpu_util"),
        "gpu_util_max": f8("gpu_util"),
        "mem_util_samples": ones,
        "mem_util_avg": f8("mem_util"),
        "mem_used_samples": ones,
        "mem_used_avg_bytes": mem_used.astype(np.float64),
        "mem_used_max_bytes": mem_used,
        "mem_total_bytes": values["mem_total_bytes"].astype(np.int64),
        "temperature_max_c": f8("temperature_c"),
        "sm_clock_samples": ones,
        "sm_clock_avg_mhz": f8("sm_clock_mhz"),
        "mem_clock_samples": ones,
        "mem_clock_avg_mhz": f8("mem_clock_mhz"),
        "throttled_samples": ((values["throttle_reasons"].astype(np.int64) & throttle_mask) != 0).astype(
            np.int32
        ),
        "ecc_errors_max": values["ecc_errors"].astype(np.int64),
        "xid_errors_max": values["xid_errors"].astype(np.int32),
    }
    if keep is not None:
        columns = {name: values_[keep] for name, values_ in columns.items()}
        has_energy = has_energy[keep]
    return MinuteRows(columns=columns, has_energy=has_energy)


# (column, binary type): the host rollup's columns in the order they are sent.
HOST_COLUMNS: tuple[tuple[str, str], ...] = (
    ("width_s", "i4"),
    ("bucket", "i8"),
    ("host_id", "i8"),
    ("accelerator_type_id", "i8"),
    ("gpus", "i4"),
    ("samples", "i4"),
    ("power_samples", "i4"),
    ("power_avg_w", "f8"),
    ("power_sum_w", "f8"),
    ("power_max_w", "f8"),
    ("energy_j", "f8"),
    ("gpu_util_samples", "i4"),
    ("gpu_util_avg", "f8"),
    ("gpu_util_max", "f8"),
    ("temperature_max_c", "f8"),
    ("throttled_samples", "i4"),
)
_HOUR_US = 3_600_000_000
# The minute columns an hour rollup sums, takes the maximum of, or averages weighted by a count.
_SUMS = (
    "samples",
    "power_samples",
    "gpu_util_samples",
    "mem_util_samples",
    "mem_used_samples",
    "sm_clock_samples",
    "mem_clock_samples",
    "throttled_samples",
)
_MAXIMA = (
    "power_max_w",
    "gpu_util_max",
    "mem_used_max_bytes",
    "mem_total_bytes",
    "temperature_max_c",
    "ecc_errors_max",
    "xid_errors_max",
)
_WEIGHTED = {
    "power_avg_w": "power_samples",
    "gpu_util_avg": "gpu_util_samples",
    "mem_util_avg": "mem_util_samples",
    "mem_used_avg_bytes": "mem_used_samples",
    "sm_clock_avg_mhz": "sm_clock_samples",
    "mem_clock_avg_mhz": "mem_clock_samples",
}


def _weighted(values: np.ndarray, counts: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``sum(value * count) / sum(count)`` per group, as the refresh's SQL (counts are never 0
    here: every row of these minute rollups has every signal)."""
    return np.add.reduceat(values * counts, starts) / np.add.reduceat(counts.astype(np.float64), starts)


def _energy(rows: MinuteRows, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SQL's ``sum(energy_j)``: NULLs skipped, NULL where a group has none."""
    has = rows.has_energy
    total = np.add.reduceat(np.where(has, rows.columns["energy_j"], 0.0), starts)
    return total, np.maximum.reduceat(has.astype(np.int8), starts).astype(bool)


def hour_rows(minutes: MinuteRows) -> MinuteRows:
    """The hour rollups of one GPU's minute rows (in bucket order), as the refresh's hour
    statement computes them from the minute rollups: sums stay sums, maxima maxima, averages are
    re-weighted by their counts. Pure."""
    if not minutes.rows:
        return minutes
    columns = minutes.columns
    hours = columns["bucket"] - columns["bucket"] % _HOUR_US
    starts = np.flatnonzero(np.r_[True, hours[1:] != hours[:-1]])
    out = {
        "width_s": np.full(len(starts), 3600, dtype=np.int32),
        "bucket": hours[starts],
        "host_id": columns["host_id"][starts],
        "accelerator_id": columns["accelerator_id"][starts],
    }
    for name in _SUMS:
        out[name] = np.add.reduceat(columns[name], starts).astype(np.int32)
    for name in _MAXIMA:
        out[name] = np.maximum.reduceat(columns[name], starts)
    for name, count in _WEIGHTED.items():
        out[name] = _weighted(columns[name], columns[count], starts)
    out["energy_j"], has_energy = _energy(minutes, starts)
    return MinuteRows(columns={name: out[name] for name in WITH_ENERGY}, has_energy=has_energy)


_HOST_INPUTS = (
    "width_s",
    "bucket",
    "host_id",
    "samples",
    "power_samples",
    "power_avg_w",
    "power_max_w",
    "energy_j",
    "gpu_util_samples",
    "gpu_util_avg",
    "gpu_util_max",
    "temperature_max_c",
    "throttled_samples",
)


def host_rows(parts: list[MinuteRows], accelerator_types: list[int]) -> MinuteRows:
    """The host rollups of GPU rollups of one width (``parts``, one per GPU, with its accelerator
    type), as the refresh's host statement: one row per bucket, host and accelerator type. Pure."""
    chosen = [(part, kind) for part, kind in zip(parts, accelerator_types, strict=True) if part.rows]
    if not chosen:
        return MinuteRows(columns={}, has_energy=np.empty(0, dtype=bool))
    merged = {name: np.concatenate([part.columns[name] for part, _ in chosen]) for name in _HOST_INPUTS}
    kinds = np.concatenate([np.full(part.rows, kind, dtype=np.int64) for part, kind in chosen])
    has = np.concatenate([part.has_energy for part, _ in chosen])
    order = np.lexsort((kinds, merged["host_id"], merged["bucket"]))
    merged = {name: values[order] for name, values in merged.items()}
    kinds, has = kinds[order], has[order]
    changed = (
        (merged["bucket"][1:] != merged["bucket"][:-1])
        | (merged["host_id"][1:] != merged["host_id"][:-1])
        | (kinds[1:] != kinds[:-1])
    )
    starts = np.flatnonzero(np.r_[True, changed])
    energy, has_energy = _energy(MinuteRows(columns=merged, has_energy=has), starts)

    def total(name: str) -> np.ndarray:
        return np.add.reduceat(merged[name], starts)

    def most(name: str) -> np.ndarray:
        return np.maximum.reduceat(merged[name], starts)

    columns = {
        "width_s": merged["width_s"][starts],
        "bucket": merged["bucket"][starts],
        "host_id": merged["host_id"][starts],
        "accelerator_type_id": kinds[starts],
        "gpus": np.diff(np.r_[starts, len(kinds)]).astype(np.int32),
        "samples": total("samples").astype(np.int32),
        "power_samples": total("power_samples").astype(np.int32),
        "power_avg_w": _weighted(merged["power_avg_w"], merged["power_samples"], starts),
        "power_sum_w": total("power_avg_w"),
        "power_max_w": most("power_max_w"),
        "energy_j": energy,
        "gpu_util_samples": total("gpu_util_samples").astype(np.int32),
        "gpu_util_avg": _weighted(merged["gpu_util_avg"], merged["gpu_util_samples"], starts),
        "gpu_util_max": most("gpu_util_max"),
        "temperature_max_c": most("temperature_max_c"),
        "throttled_samples": total("throttled_samples").astype(np.int32),
    }
    return MinuteRows(columns=columns, has_energy=has_energy)


def copy_tuples(
    parts: list[MinuteRows], layout: tuple[tuple[str, str], ...] = MINUTE_COLUMNS
) -> tuple[bytes, bytes]:
    """The rows of ``parts`` in bucket order (then as given), as the tuples of two binary COPYs:
    those with energy (``WITH_ENERGY``) and those without (``WITHOUT_ENERGY``). Pure.

    Bucket order makes every index of the rollup table grow at a few hot pages (its end, or one
    point per GPU or host) instead of GPU by GPU across the whole table: far fewer page visits.
    """
    parts = [part for part in parts if part.rows]
    if not parts:
        return b"", b""
    with_energy = tuple(name for name, _ in layout)
    without_energy = tuple(name for name in with_energy if name != "energy_j")
    merged = {name: np.concatenate([part.columns[name] for part in parts]) for name in with_energy}
    energy = np.concatenate([part.has_energy for part in parts])
    order = np.argsort(merged["bucket"], kind="stable")
    codes = dict(layout)
    out = []
    for names, mask in ((with_energy, energy[order]), (without_energy, ~energy[order])):
        chosen = order[mask]
        out.append(
            binary_tuples([(codes[name], merged[name][chosen]) for name in names]) if chosen.size else b""
        )
    return out[0], out[1]


def copy_stream(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """A whole binary COPY stream: the signature, the tuples, the trailer."""
    yield _SIGNATURE
    yield from (chunk for chunk in chunks if chunk)
    yield _TRAILER
