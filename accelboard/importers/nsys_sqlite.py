"""Nsight Systems' SQLite export (``nsys export --type sqlite``, or the ``.sqlite`` that
``nsys stats`` writes beside the report): the whole timeline, read like a Kineto trace.

Read with the standard library's ``sqlite3``, read-only; an upload (bytes or a stream) is first
copied to a temporary file. Rows are read with cursors and appended to typed columns
(``profile_data.EventColumns``), CPU-side rows are summed by name as they come: memory grows with
the number of GPU activities (about 40 bytes each), not with the file.

Tables used (nsys creates a table only when it has rows; times are integer nanoseconds):

- ``CUPTI_ACTIVITY_KIND_KERNEL``: ``start``, ``end``, ``deviceId``, ``streamId``,
  ``correlationId``, ``globalPid``, ``demangledName`` (a ``StringIds`` id: the full name, as
  Kineto's ``name``);
- ``CUPTI_ACTIVITY_KIND_MEMCPY`` (``copyKind``, named ``[CUDA memcpy Host-to-Device]`` as in
  ``nsys stats``, labels from ``ENUM_CUDA_MEMCPY_OPER``) and ``CUPTI_ACTIVITY_KIND_MEMSET``
  (``[CUDA memset]``);
- ``CUPTI_ACTIVITY_KIND_RUNTIME``: runtime API calls summed by name (``cudaLaunchKernel_v7000``
  read as ``cudaLaunchKernel``); their start is the launch time of the GPU activity of the same
  process and ``correlationId`` (idle gaps spent waiting on the host);
- ``NVTX_EVENTS``: push/pop and start/end ranges summed by text as the profile's CPU ranges;
  ``ProfilerStep#N`` ranges are steps;
- ``TARGET_INFO_GPU``: the GPU names by device id.

Ranks: one per GPU (``deviceId``) with activity, so that a capture of several processes on one
node reads as several ranks (imbalance, stragglers); a process's CPU-side sums and steps go to the
GPU where most of its activity ran. A database that is not an Nsight Systems export, is truncated
or has a table without the columns above is a ParseError naming the file and the table.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sqlite3
import tempfile
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from .base import ParseError
from .profile_data import KERNEL, MEMCPY, MEMSET, EventColumns, GpuEvents, ProfileData, RankTrace, Step

NAME = "nsys-sqlite"
LABEL = "Nsight Systems SQLite export"

MAGIC = b"SQLite format 3\x00"
KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX_TABLE = "NVTX_EVENTS"
GPU_TABLE = "TARGET_INFO_GPU"
# Tables only an Nsight Systems export has, besides ``StringIds``: one of them must be there.
_MARKERS = ("META_DATA_EXPORT", GPU_TABLE, KERNEL_TABLE, MEMCPY_TABLE, MEMSET_TABLE, RUNTIME_TABLE)
# ``ENUM_CUDA_MEMCPY_OPER`` for exports without it.
_COPY_KINDS = {
    1: "Host-to-Device",
    2: "Device-to-Host",
    3: "Host-to-Array",
    4: "Array-to-Host",
    5: "Array-to-Array",
    6: "Array-to-Device",
    7: "Device-to-Array",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
    11: "Unified Host-to-Device",
    12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}
_NVTX_RANGES = (59, 60, 70, 71)  # NvtxPushPopRange, NvtxStartEndRange and their Nvtxt forms
_API_VERSION = re.compile(r"_v\d+$")
_STEP = re.compile(r"ProfilerStep#(\d+)")
_PID = 0xFFFFFF  # a serialized GlobalId holds the process id in bits 24-47
_CORRELATION_MAX = 1 << 32
_BATCH = 10_000


def sniff(head: bytes) -> bool:
    """True for a SQLite database: whether it is an nsys export is checked when it is read, so
    that another SQLite file gets an error saying what it lacks rather than "unrecognised"."""
    return head[:16] == MAGIC


Source = str | Path | bytes | IO[bytes]


@contextlib.contextmanager
def _database(name: str, source: Source) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the file; bytes and streams are copied to a temporary file first."""
    with contextlib.ExitStack() as stack:
        if isinstance(source, (str, Path)):
            path, immutable = Path(source), False
        else:
            handle = stack.enter_context(tempfile.NamedTemporaryFile(suffix=".sqlite", delete=False))
            stack.callback(os.unlink, handle.name)
            if isinstance(source, bytes):
                handle.write(source)
            else:
                shutil.copyfileobj(source, handle, 1 << 20)
            handle.close()
            path, immutable = Path(handle.name), True
        if not path.is_file():
            raise ParseError(name, "cannot read: no such file")
        uri = path.resolve().as_uri() + "?mode=ro" + ("&immutable=1" if immutable else "")
        try:
            connection = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as exc:
            raise ParseError(name, f"not a readable SQLite database: {exc}") from None
        stack.callback(connection.close)
        try:
            connection.execute("PRAGMA query_only = ON")
            connection.execute("PRAGMA trusted_schema = OFF")
        except sqlite3.Error as exc:
            raise ParseError(name, f"not a readable SQLite database: {exc}") from None
        yield connection


@dataclass
class _Process:
    """CPU-side sums of one process while reading."""

    runtime: dict[str, list[float]] = field(default_factory=dict)
    ops: dict[str, list[float]] = field(default_factory=dict)
    steps: dict[int, Step] = field(default_factory=dict)
    # activities per device, to give the process to the GPU it used most
    devices: dict[int, int] = field(default_factory=dict)


def _add(sums: dict[str, list[float]], name: str, dur: float) -> None:
    slot = sums.get(name)
    if slot is None:
        sums[name] = [1, dur]
    else:
        slot[0] += 1
        slot[1] += dur


class _Reader:
    def __init__(self, name: str, connection: sqlite3.Connection):
        self.name = name
        self.db = connection
        self.tables: dict[str, set[str]] = {}
        self.columns: dict[int, EventColumns] = {}
        self.processes: dict[int, _Process] = {}
        self.launch_key = array("q")
        self.launch_ts = array("d")
        self.warnings: list[str] = []

    # --- schema ---------------------------------------------------------------------------------

    def schema(self) -> None:
        try:
            names = [row[0] for row in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in names:
                self.tables[table] = {str(row[1]) for row in self.db.execute(f'PRAGMA table_info("{table}")')}
        except sqlite3.Error as exc:
            raise ParseError(self.name, f"not a readable SQLite database: {exc}") from None
        if "StringIds" not in self.tables or not any(table in self.tables for table in _MARKERS):
            raise ParseError(
                self.name,
                "a SQLite database but not an Nsight Systems export (no StringIds and "
                "CUPTI_ACTIVITY_KIND_* / TARGET_INFO_GPU tables): export the report with "
                "`nsys export --type sqlite`",
            )

    def need(self, table: str, *columns: str) -> bool:
        """Whether the table is there; a ParseError naming the columns it lacks."""
        have = self.tables.get(table)
        if have is None:
            return False
        missing = [column for column in columns if column not in have]
        if missing:
            raise ParseError(
                self.name, f"table {table} has no column {', '.join(missing)}: not an nsys export it can read"
            )
        return True

    def rows(self, table: str, sql: str) -> Iterator[tuple[Any, ...]]:
        try:
            cursor = self.db.execute(sql)
            while batch := cursor.fetchmany(_BATCH):
                yield from batch
        except sqlite3.Error as exc:
            raise ParseError(self.name, f"table {table} cannot be read: {exc}") from None

    def _time(self, table: str, rowid: int, start: Any, end: Any) -> tuple[float, float]:
        if type(start) is not int or type(end) is not int:
            raise ParseError(
                self.name, f"{table} row {rowid}: start {start!r} / end {end!r} are not integer nanoseconds"
            )
        if end < start:
            raise ParseError(self.name, f"{table} row {rowid}: end {end} is before start {start}")
        return start / 1000.0, (end - start) / 1000.0

    # --- GPU activities ---------------------------------------------------------------------------

    def activities(self) -> None:
        common = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid")
        if self.need(KERNEL_TABLE, *common, "demangledName"):
            sql = (
                f"SELECT k.rowid, k.start, k.end, k.deviceId, k.streamId, k.correlationId, k.globalPid, "
                f"s.value FROM {KERNEL_TABLE} AS k LEFT JOIN StringIds AS s ON s.id = k.demangledName"
            )
            self._read(KERNEL_TABLE, sql, KERNEL)
        if self.need(MEMCPY_TABLE, *common, "copyKind"):
            labels = dict(_COPY_KINDS)
            if "ENUM_CUDA_MEMCPY_OPER" in self.tables:
                with contextlib.suppress(sqlite3.Error):
                    for key, label in self.db.execute("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER"):
                        if isinstance(key, int) and isinstance(label, str) and label:
                            labels[key] = label
            names = {key: f"[CUDA memcpy {label}]" for key, label in labels.items()}
            sql = (
                "SELECT rowid, start, end, deviceId, streamId, correlationId, globalPid, copyKind "
                f"FROM {MEMCPY_TABLE}"
            )
            self._read(MEMCPY_TABLE, sql, MEMCPY, names)
        if self.need(MEMSET_TABLE, *common):
            sql = (
                "SELECT rowid, start, end, deviceId, streamId, correlationId, globalPid, NULL "
                f"FROM {MEMSET_TABLE}"
            )
            self._read(MEMSET_TABLE, sql, MEMSET)

    def _read(self, table: str, sql: str, kind: int, copy_names: dict[int, str] | None = None) -> None:
        columns = self.columns
        processes = self.processes
        for rowid, start, end, device, stream, correlation, global_pid, label in self.rows(table, sql):
            ts, dur = self._time(table, rowid, start, end)
            if kind == KERNEL:
                name = label if isinstance(label, str) else f"<kernel {rowid}>"
            elif kind == MEMCPY:
                assert copy_names is not None
                name = copy_names.get(label, "[CUDA memcpy Unknown]")
            else:
                name = "[CUDA memset]"
            device = device if type(device) is int else -1
            pid = (global_pid >> 24) & _PID if type(global_pid) is int else -1
            target = columns.get(device)
            if target is None:
                target = columns[device] = EventColumns()
            key = -1
            if type(correlation) is int and 0 <= correlation < _CORRELATION_MAX and pid >= 0:
                key = (pid << 32) | correlation
            target.add(name, kind, ts, dur, stream if type(stream) is int else -1, key)
            process = processes.get(pid)
            if process is None:
                process = processes[pid] = _Process()
            process.devices[device] = process.devices.get(device, 0) + 1

    # --- CPU side ---------------------------------------------------------------------------------

    def runtime(self) -> None:
        if not self.need(RUNTIME_TABLE, "start", "end", "globalTid", "correlationId", "nameId"):
            return
        sql = (
            f"SELECT r.rowid, r.start, r.end, r.globalTid, r.correlationId, s.value "
            f"FROM {RUNTIME_TABLE} AS r LEFT JOIN StringIds AS s ON s.id = r.nameId"
        )
        names: dict[str, str] = {}
        key_add, ts_add = self.launch_key.append, self.launch_ts.append
        for rowid, start, end, global_tid, correlation, label in self.rows(RUNTIME_TABLE, sql):
            ts, dur = self._time(RUNTIME_TABLE, rowid, start, end)
            pid = (global_tid >> 24) & _PID if type(global_tid) is int else -1
            raw = label if isinstance(label, str) else "<unnamed API call>"
            api = names.get(raw)
            if api is None:
                api = names[raw] = _API_VERSION.sub("", raw)
            _add(self._process(pid).runtime, api, dur)
            if type(correlation) is int and 0 <= correlation < _CORRELATION_MAX and pid >= 0:
                key_add((pid << 32) | correlation)
                ts_add(ts)

    def nvtx(self) -> None:
        if not self.need(NVTX_TABLE, "start", "end", "eventType", "text", "globalTid"):
            return
        text_id = "textId" in self.tables[NVTX_TABLE]
        label = "COALESCE(n.text, s.value)" if text_id else "n.text"
        join = " LEFT JOIN StringIds AS s ON s.id = n.textId" if text_id else ""
        kinds = ", ".join(str(kind) for kind in _NVTX_RANGES)
        sql = (
            f"SELECT n.rowid, n.start, n.end, n.globalTid, {label} FROM {NVTX_TABLE} AS n{join} "
            f"WHERE n.eventType IN ({kinds}) AND n.end IS NOT NULL"
        )
        for rowid, start, end, global_tid, text in self.rows(NVTX_TABLE, sql):
            ts, dur = self._time(NVTX_TABLE, rowid, start, end)
            pid = (global_tid >> 24) & _PID if type(global_tid) is int else -1
            process = self._process(pid)
            name = text if isinstance(text, str) else "<unnamed range>"
            if name.startswith("ProfilerStep#") and (match := _STEP.match(name)):
                number = int(match.group(1))
                process.steps[number] = Step(number=number, start=ts, end=ts + dur)
                continue
            _add(process.ops, name, dur)

    def _process(self, pid: int) -> _Process:
        process = self.processes.get(pid)
        if process is None:
            process = self.processes[pid] = _Process()
        return process

    def gpus(self) -> dict[int, str]:
        if not self.need(GPU_TABLE, "id", "name"):
            return {}
        return {
            key: str(name)
            for key, name in self.rows(GPU_TABLE, f"SELECT id, name FROM {GPU_TABLE}")
            if type(key) is int and name is not None
        }

    # --- ranks --------------------------------------------------------------------------------------

    def ranks(self) -> list[RankTrace]:
        gpus = self.gpus()
        devices = sorted(self.columns) or [min(gpus, default=0)]
        traces = {device: RankTrace(rank=index, file=self.name) for index, device in enumerate(devices)}
        keys = np.frombuffer(self.launch_key, dtype=np.int64)
        times = np.frombuffer(self.launch_ts, dtype=np.float64)
        order = np.argsort(keys, kind="stable")
        keys, times = keys[order], times[order]
        for device, trace in traces.items():
            columns = self.columns.get(device) or EventColumns()
            trace.names = list(columns.names)
            trace.events = _events(columns, keys, times)
            trace.device = gpus.get(device, "")
            trace.meta["device_index"] = device
            trace.meta["gpus"] = len(gpus)
            if len(traces) > 1:
                trace.world_size = len(traces)
        for process in self.processes.values():
            used = process.devices
            device = max(used, key=lambda key: used[key]) if used else devices[0]
            trace = traces[device]
            for mine, theirs in ((trace.runtime, process.runtime), (trace.ops, process.ops)):
                for label, (count, total) in theirs.items():
                    _merge(mine, label, count, total)
            steps = {step.number: step for step in trace.steps}
            for number, step in process.steps.items():
                known = steps.get(number)
                steps[number] = (
                    step
                    if known is None
                    else Step(number, min(known.start, step.start), max(known.end, step.end))
                )
            trace.steps = [steps[number] for number in sorted(steps)]
        out = [traces[device] for device in devices]
        for trace in out:
            if trace.events is not None and not len(trace.events):
                trace.warnings.append(
                    f"{self.name}: no CUDA kernels, copies or memsets in this export "
                    "(CPU-only capture, or CUDA tracing was off: nsys profile --trace=cuda)"
                )
        return out


def _merge(sums: dict[str, list[float]], label: str, count: float, total: float) -> None:
    slot = sums.get(label)
    if slot is None:
        sums[label] = [count, total]
    else:
        slot[0] += count
        slot[1] += total


def _events(columns: EventColumns, keys: np.ndarray, times: np.ndarray) -> GpuEvents:
    if not len(columns):
        return GpuEvents.empty()
    correlation = np.frombuffer(columns.correlation, dtype=np.int64)
    launch = np.full(len(columns), np.nan)
    if keys.size:
        where = np.minimum(np.searchsorted(keys, correlation), keys.size - 1)
        found = (keys[where] == correlation) & (correlation >= 0)
        launch[found] = times[where[found]]
    return GpuEvents(
        start=np.frombuffer(columns.start, dtype=np.float64).copy(),
        dur=np.frombuffer(columns.dur, dtype=np.float64).copy(),
        stream=np.frombuffer(columns.stream, dtype=np.int64).copy(),
        kind=np.frombuffer(columns.kind, dtype=np.int8).copy(),
        name=np.frombuffer(columns.name, dtype=np.int64).copy(),
        launch=launch,
    )


def parse_file(name: str, source: Source) -> list[RankTrace]:
    """The ranks (one per GPU with activity) of one export. Raises ParseError naming the file."""
    try:
        with _database(name, source) as connection:
            reader = _Reader(name, connection)
            reader.schema()
            reader.activities()
            reader.runtime()
            reader.nvtx()
            return reader.ranks()
    except OSError as exc:
        raise ParseError(name, f"cannot read: {exc.strerror or exc}") from None


def parse(sources: list[tuple[str, Source]]) -> ProfileData:
    """Read one export, or several (one per node or per process), as one profile: the ranks of
    the second file follow those of the first."""
    ranks: list[RankTrace] = []
    for name, source in sources:
        for trace in parse_file(name, source):
            trace.rank = len(ranks)
            ranks.append(trace)
    if len(ranks) > 1:
        for trace in ranks:
            trace.world_size = len(ranks)
    warnings = [warning for trace in ranks for warning in trace.warnings]
    return ProfileData(
        source_format=NAME, files=[name for name, _ in sources], ranks=ranks, warnings=warnings
    )
