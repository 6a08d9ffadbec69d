"""The demo load's telemetry: raw samples where the live path needs them, rollups for the rest.

The last ``RAW_HOURS`` (and the injected thermal fault) as raw samples (``telemetry_partitions_ensure``
+ ``telemetry_copy``, binary COPY) rolled up by ``telemetry_rollups_refresh`` as ingest's are; the
older samples straight into the minute rollups (``accelboard.demo.rollups``), and for the older days
into fresh tables swapped in (``accelboard.demo.swap``). Called by ``accelboard.demo.loader``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import repeat
from typing import Any

import numpy as np
from django.db import connection, transaction

from accelboard.fleet.models import TELEMETRY_COLUMNS, Accelerator
from accelboard.fleet.partition_services import telemetry_copy, telemetry_partitions_ensure
from accelboard.fleet.rollup_services import MAX_COUNTER_GAP_S, THROTTLE_MASK, telemetry_rollups_refresh

from . import generator, rollups, swap


def _type_id(accelerator: Accelerator) -> int:
    """A demo GPU's accelerator type (the demo registers every GPU with one)."""
    if accelerator.accelerator_type_id is None:
        raise ValueError(f"demo GPU {accelerator.uuid} has no accelerator type")
    return accelerator.accelerator_type_id


def windows_merged(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[start, end) windows, sorted, overlapping or touching ones merged, empty ones dropped. Pure."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(w for w in windows if w[1] > w[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _inside(epochs: np.ndarray, windows: list[tuple[int, int]]) -> np.ndarray:
    """Which of ``epochs`` fall in any of the [start, end) ``windows``. Pure."""
    inside = np.zeros(len(epochs), dtype=bool)
    for start, end in windows:
        inside |= (epochs >= start) & (epochs < end)
    return inside


def _minute_rollups_copy(
    data: list[generator.HostTelemetry],
    gpus: list[list[int]],
    host_ids: list[int],
    low: int,
    high: int,
    raw_windows: list[tuple[int, int]],
    table: str = "fleet_telemetryrollup",
    *,
    host_table: str | None = None,
    types: list[list[int]] | None = None,
) -> tuple[int, int]:
    """The samples in [low, high) outside ``raw_windows`` as minute rollups
    (``accelboard.demo.rollups``), a UTC day at a time across the fleet in bucket order, binary
    COPY into ``table`` (the minute rollups, or a fresh copy of them: ``accelboard.demo.swap``).
    With ``host_table`` (and each GPU's accelerator type in ``types``) their hour rollups go into
    ``table`` too and the host rollups of both into ``host_table``, as the refresh computes them.
    Returns (minute rows, hour and host rows)."""
    streams: dict[tuple[str, tuple[tuple[str, str], ...], bool], list[bytes]] = {}

    def add(target: str, layout: tuple[tuple[str, str], ...], parts: list[rollups.MinuteRows]) -> int:
        full, bare = rollups.copy_tuples(parts, layout)
        streams.setdefault((target, layout, True), []).append(full)
        streams.setdefault((target, layout, False), []).append(bare)
        return sum(part.rows for part in parts)

    minutes = derived = 0
    # Whole UTC days (whole hours): an hour's minutes are all in one day's parts.
    bounds = sorted({low, high, *range(low - low % generator.DAY + generator.DAY, high, generator.DAY)})
    for day_low, day_high in itertools.pairwise(bounds):
        parts, kinds = [], []
        for host_index, (host, gpu_ids, host_id) in enumerate(zip(data, gpus, host_ids, strict=True)):
            a, b = np.searchsorted(host.epochs, [day_low, day_high]).tolist()
            if a >= b:
                continue
            # From the sample before the span, so the span's first energy delta has its neighbour.
            first = max(a - 1, 0)
            epochs = host.epochs[first:b]
            keep = ~_inside(epochs, raw_windows)
            keep[: a - first] = False
            if not keep.any():
                continue
            for row_index, gpu_id in enumerate(gpu_ids):
                parts.append(
                    rollups.minute_rows(
                        epochs=epochs,
                        host_id=host_id,
                        accelerator_id=gpu_id,
                        values={
                            name: host.columns[name][row_index, first:b] for name in TELEMETRY_COLUMNS[3:]
                        },
                        throttle_mask=THROTTLE_MASK,
                        max_counter_gap_s=MAX_COUNTER_GAP_S,
                        keep=keep,
                    )
                )
                kinds.append(types[host_index][row_index] if types else 0)
        minutes += add(table, rollups.MINUTE_COLUMNS, parts)
        if host_table is not None:
            hours = [rollups.hour_rows(part) for part in parts]
            derived += add(table, rollups.MINUTE_COLUMNS, hours)
            derived += add(host_table, rollups.HOST_COLUMNS, [rollups.host_rows(parts, kinds)])
            derived += add(host_table, rollups.HOST_COLUMNS, [rollups.host_rows(hours, kinds)])
    connection.ensure_connection()
    with connection.connection.cursor() as cursor:
        for (target, layout, energy), chunks in streams.items():
            if not any(chunks):
                continue
            columns = [name for name, _ in layout if energy or name != "energy_j"]
            statement = f"COPY {target} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"
            with cursor.copy(statement) as copy:
                for chunk in rollups.copy_stream(iter(chunks)):
                    copy.write(chunk)
    return minutes, derived


def _telemetry_rows(
    data: list[generator.HostTelemetry],
    gpus: list[list[int]],
    host_ids: list[int],
    spans: list[list[tuple[int, int]]],
) -> Iterator[tuple[Any, ...]]:
    """Rows in TELEMETRY_COLUMNS order, host by host, each host's [a, b) sample index spans."""
    names = TELEMETRY_COLUMNS[3:]
    for host, gpu_ids, host_id, host_spans in zip(data, gpus, host_ids, spans, strict=True):
        for a, b in host_spans:
            times = [datetime.fromtimestamp(epoch, UTC) for epoch in host.epochs[a:b].tolist()]
            for row_index, gpu_id in enumerate(gpu_ids):
                columns = [host.columns[name][row_index, a:b].tolist() for name in names]
                yield from zip(times, repeat(host_id), repeat(gpu_id), *columns)


def telemetry_write(
    config: generator.DemoConfig,
    hosts: list[generator.HostPlan],
    data: list[generator.HostTelemetry],
    gpus: dict[str, Accelerator],
    host_ids: dict[str, int],
    *,
    low: int,
    high: int,
    raw_windows: list[tuple[int, int]],
) -> dict[str, int]:
    """The samples in [low, high) epoch seconds: those in ``raw_windows`` as raw samples rolled up
    by the ingest path's refresh, the others straight into the minute rollups with their hour and
    host rollups (``accelboard.demo.rollups``, the refresh's arithmetic)."""
    if high <= low:
        return {}
    gpu_ids = [[gpus[gpu.uuid].pk for gpu in host.gpus] for host in hosts]
    ids = [host_ids[host.hostname] for host in hosts]
    windows = [(max(low, a), min(high, b)) for a, b in raw_windows if min(high, b) > max(low, a)]
    counts: dict[str, int] = {}
    # The hours and hosts of these minutes too, as the refresh would compute them (numpy, copied);
    # the refresh of each raw window below recomputes the hours and host buckets it touches.
    direct, derived = _minute_rollups_copy(
        data,
        gpu_ids,
        ids,
        low,
        high,
        windows,
        host_table="fleet_hostrollup",
        types=[[_type_id(gpus[gpu.uuid]) for gpu in host.gpus] for host in hosts],
    )
    if direct:
        counts["minute_rollups_from_samples"] = direct
        counts["hour_and_host_rollups"] = derived
    counts.update(_telemetry_raw(data, gpu_ids, ids, high=high, windows=windows, raw_windows=raw_windows))
    return counts


def _telemetry_raw(
    data: list[generator.HostTelemetry],
    gpu_ids: list[list[int]],
    ids: list[int],
    *,
    high: int,
    windows: list[tuple[int, int]],
    raw_windows: list[tuple[int, int]],
) -> dict[str, int]:
    """The samples in ``windows`` (clipped to the range, before ``high``) as raw samples rolled
    up by the ingest path's refresh."""
    counts: dict[str, int] = {}
    if not windows:
        return counts
    spans: list[list[tuple[int, int]]] = []
    first = high
    for host in data:
        host_spans = []
        for start, end in windows:
            a, b = np.searchsorted(host.epochs, [start, end]).tolist()
            # The sample before a raw window, where it went into the minute rollups: the window's
            # first energy delta needs it, as ingest's refresh would have it.
            if a > 0 and not _inside(host.epochs[a - 1 : a], raw_windows).any():
                a -= 1
            if a < b:
                host_spans.append((a, b))
                first = min(first, int(host.epochs[a]))
        spans.append(host_spans)
    telemetry_partitions_ensure(
        start=datetime.fromtimestamp(first, UTC), end=datetime.fromtimestamp(high - 1, UTC)
    )
    counts["telemetry_samples"] = telemetry_copy(rows=_telemetry_rows(data, gpu_ids, ids, spans))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE fleet_telemetrysample")
    for start, end in windows:
        refresh = telemetry_rollups_refresh(
            start=datetime.fromtimestamp(start, UTC), end=datetime.fromtimestamp(end, UTC)
        )
        counts["rollups_from_raw"] = counts.get("rollups_from_raw", 0) + refresh.rows
    return counts


def telemetry_swapped_write(
    hosts: list[generator.HostPlan],
    data: list[generator.HostTelemetry],
    gpus: dict[str, Accelerator],
    host_ids: dict[str, int],
    *,
    low: int,
    high: int,
    raw_windows: list[tuple[int, int]],
    live_from: int,
) -> dict[str, int]:
    """The older samples in [low, high) as ``telemetry_write`` stores them, without writing millions
    of rows into the tables the pages read (``accelboard.demo.swap``): their minute rollups, and
    their hour and host rollups with the refresh's arithmetic (``accelboard.demo.rollups``), go
    into fresh copies of the rollup tables, which take the live tables' rows and place in a
    short swap. The live
    rows from ``live_from`` on are copied during the swap (the live fleet's rollups may change
    them until then). The raw windows among these days come last, through the ingest path."""
    gpu_ids = [[gpus[gpu.uuid].pk for gpu in host.gpus] for host in hosts]
    ids = [host_ids[host.hostname] for host in hosts]
    windows = [(max(low, a), min(high, b)) for a, b in raw_windows if min(high, b) > max(low, a)]
    counts: dict[str, int] = {}
    with transaction.atomic():
        fresh = swap.fresh_tables_create(cutoff=datetime.fromtimestamp(live_from, UTC))
        minute_table, host_table = (fresh.fresh(table) for table in swap.TABLES)
        counts["minute_rollups_from_samples"], counts["hour_and_host_rollups"] = _minute_rollups_copy(
            data,
            gpu_ids,
            ids,
            low,
            high,
            windows,
            table=minute_table,
            host_table=host_table,
            types=[[_type_id(gpus[gpu.uuid]) for gpu in host.gpus] for host in hosts],
        )
        counts["rollups_of_recent_days"] = swap.fresh_rows_copy(fresh)
        swap.fresh_indexes_build(fresh)
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {minute_table}, {host_table}")
    # Committed (and synced) above; the pages wait only for this short transaction.
    with transaction.atomic():
        counts["rollups_of_recent_days"] += swap.fresh_swap_in(fresh)
    with transaction.atomic():
        counts.update(_telemetry_raw(data, gpu_ids, ids, high=high, windows=windows, raw_windows=raw_windows))
    return counts


def last_state_write(
    hosts: list[generator.HostPlan], data: list[generator.HostTelemetry], gpus: dict[str, Accelerator]
) -> None:
    """The live grid reads each GPU's newest sample from ``last_state`` (as the ingest path keeps it)."""
    updates = []
    for host, host_data in zip(hosts, data, strict=True):
        last = datetime.fromtimestamp(int(host_data.epochs[-1]), UTC)
        for row_index, gpu in enumerate(host.gpus):
            accelerator = gpus[gpu.uuid]
            state: dict[str, Any] = {
                name: host_data.columns[name][row_index, -1].item() for name in TELEMETRY_COLUMNS[3:]
            }
            accelerator.last_state = {**state, "time": last.isoformat()}
            accelerator.last_seen_at = last
            updates.append(accelerator)
    Accelerator.objects.bulk_update(updates, ["last_state", "last_seen_at"])
