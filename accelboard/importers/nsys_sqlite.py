"""Nsight Systems' SQLite export (``nsys export --type sqlite``, or the ``.sqlite`` that
``nsys stats`` writes beside the report): the whole timeline, read like a Kineto trace.

Read with the standard library's ``sqlite3``, read-only; an upload (bytes or a stream) is first
copied to a temporary file. Rows are read with cursors and appended to typed columns
(``profile_data.EventColumns``), CPU-side rows are summed by name as they come: memory grows with
the number of GPU activities (about 40 bytes each), not with the file. A profile (all its files)
of more than ``profile_data.MAX_ACTIVITIES`` GPU activities, each counting ``LAUNCH_WEIGHT`` (its
launch time and duration are joined), is refused (``profile_data.TooLarge``, code ``too_large``)
at the first batch of rows past it.

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

from . import profile_data
from .base import ParseError
from .profile_data import (
    KERNEL,
    LAUNCH_WEIGHT,
    MEMCPY,
    MEMSET,
    GpuEvents,
    ProfileData,
    RankTrace,
    Step,
    check_activities,
)

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
_BATCH = 10_000


def sniff(head: bytes) -> bool:
    """True for a SQLite database: whether it is an nsys export is checked when it is read, so
    that another SQLite file gets an error saying what it lacks rather than "unrecognised"."""
    return head[:16] == MAGIC


Source = str | Path | bytes | IO[bytes]


@contextlib.contextmanager
def _database(name: str, source: Source) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the file; bytes and streams in memory are copied to a temporary
    file first."""
    with contextlib.ExitStack() as stack:
        on_disk = getattr(source, "temporary_file_path", None)  # a large upload Django wrote to disk
        if isinstance(source, (str, Path)):
            path, immutable = Path(source), False
        elif callable(on_disk):
            path, immutable = Path(on_disk()), True
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


# A GPU activity's name while reading: a StringIds id (kernels, >= 0), or one of these codes.
_NO_NAME, _MEMSET_NAME, _MEMCPY_BASE = -1, -2, -1000
# The launch of an activity: the process id and correlation id in one 64-bit key (-1: unknown).
_KEY = (
    "CASE WHEN typeof({corr}) = 'integer' AND {corr} BETWEEN 0 AND 4294967295 "
    "AND typeof({gid}) = 'integer' THEN ((({gid} >> 24) & 16777215) << 32) | {corr} ELSE -1 END"
)
_GOOD_TIMES = "typeof(start) = 'integer' AND typeof(end) = 'integer' AND end >= start"
_PID_SQL = "CASE WHEN typeof({gid}) = 'integer' THEN ({gid} >> 24) & 16777215 ELSE -1 END"


@dataclass
class _Process:
    """CPU-side sums of one process while reading."""

    runtime: dict[str, list[float]] = field(default_factory=dict)
    ops: dict[str, list[float]] = field(default_factory=dict)
    steps: dict[int, Step] = field(default_factory=dict)
    # activities per device, to give the process to the GPU it used most
    devices: dict[int, int] = field(default_factory=dict)


class _Columns:
    """The GPU activities of every device as typed columns, filled a batch of rows at a time."""

    def __init__(self) -> None:
        self.start = array("d")
        self.dur = array("d")
        self.stream = array("q")
        self.device = array("q")
        self.key = array("q")
        self.name = array("q")
        self.kind = array("b")

    def extend(self, rows: list[tuple[Any, ...]], kind: int) -> None:
        start, dur, stream, device, key, name = zip(*rows, strict=True)
        self.start.extend(start)
        self.dur.extend(dur)
        self.stream.extend(stream)
        self.device.extend(device)
        self.key.extend(key)
        self.name.extend(name)
        self.kind.extend(array("b", [kind]) * len(rows))

    def numpy(self, column: str, dtype: type) -> np.ndarray:
        values = getattr(self, column)
        return np.frombuffer(values, dtype=dtype) if len(values) else np.empty(0, dtype=dtype)


class _Reader:
    def __init__(
        self, name: str, connection: sqlite3.Connection, *, before: int = 0, limit: int | None = None
    ):
        self.name = name
        # Activities of the profile's earlier files, and the limit of all together.
        self.before = before
        self.limit = profile_data.activity_limit(limit)
        self.db = connection
        self.tables: dict[str, set[str]] = {}
        self.columns = _Columns()
        self.copy_names: dict[int, str] = {}
        self.processes: dict[int, _Process] = {}
        self.launch_key = array("q")
        self.launch_ts = array("d")
        self.launch_dur = array("d")  # the call's duration; -1: none of its own (a CUDA graph's)

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

    def batches(self, table: str, sql: str) -> Iterator[list[tuple[Any, ...]]]:
        try:
            cursor = self.db.execute(sql)
            while batch := cursor.fetchmany(_BATCH):
                yield batch
        except sqlite3.Error as exc:
            raise ParseError(self.name, f"table {table} cannot be read: {exc}") from None

    def rows(self, table: str, sql: str) -> Iterator[tuple[Any, ...]]:
        for batch in self.batches(table, sql):
            yield from batch

    def check_times(self, table: str, where: str = "1") -> None:
        """A ParseError naming the first row whose start or end is not integer nanoseconds, or
        whose end is before its start (checked by SQLite, before the rows are read)."""
        sql = f"SELECT rowid, start, end FROM {table} WHERE ({where}) AND NOT ({_GOOD_TIMES}) LIMIT 1"
        for rowid, start, end in self.rows(table, sql):
            if type(start) is int and type(end) is int:
                raise ParseError(self.name, f"{table} row {rowid}: end {end} is before start {start}")
            raise ParseError(
                self.name, f"{table} row {rowid}: start {start!r} / end {end!r} are not integer nanoseconds"
            )

    # --- GPU activities ---------------------------------------------------------------------------

    def activities(self) -> None:
        common = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid")
        if self.need(KERNEL_TABLE, *common, "demangledName"):
            name = f"CASE WHEN typeof(demangledName) = 'integer' THEN demangledName ELSE {_NO_NAME} END"
            self._read(KERNEL_TABLE, name, KERNEL)
        if self.need(MEMCPY_TABLE, *common, "copyKind"):
            labels = dict(_COPY_KINDS)
            if "ENUM_CUDA_MEMCPY_OPER" in self.tables:
                with contextlib.suppress(sqlite3.Error):
                    for key, label in self.db.execute("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER"):
                        if type(key) is int and 0 <= key < 1000 and isinstance(label, str) and label:
                            labels[key] = label
            self.copy_names = {_MEMCPY_BASE - key: f"[CUDA memcpy {label}]" for key, label in labels.items()}
            name = (
                f"CASE WHEN typeof(copyKind) = 'integer' AND copyKind BETWEEN 0 AND 999 "
                f"THEN {_MEMCPY_BASE} - copyKind ELSE {_MEMCPY_BASE} END"
            )
            self._read(MEMCPY_TABLE, name, MEMCPY)
        if self.need(MEMSET_TABLE, *common):
            self._read(MEMSET_TABLE, str(_MEMSET_NAME), MEMSET)

    def _read(self, table: str, name: str, kind: int) -> None:
        key = _KEY.format(corr="correlationId", gid="globalPid")
        # A bad row's duration reads as -1: found in the column afterwards, then named by SQL.
        sql = (
            f"SELECT CASE WHEN {_GOOD_TIMES} THEN start / 1000.0 ELSE 0.0 END, "
            f"CASE WHEN {_GOOD_TIMES} THEN (end - start) / 1000.0 ELSE -1.0 END, "
            f"CAST(COALESCE(streamId, -1) AS INTEGER), CAST(COALESCE(deviceId, -1) AS INTEGER), "
            f"{key}, {name} FROM {table}"
        )
        first = len(self.columns.dur)
        for batch in self.batches(table, sql):
            self.columns.extend(batch, kind)
            # Launch times and their durations are always joined: an activity counts as Kineto's
            # with launch times (``TooLarge`` at the first batch past the limit).
            check_activities(self.name, (self.before + len(self.columns.dur)) * LAUNCH_WEIGHT, self.limit)
        if len(self.columns.dur) > first and self.columns.numpy("dur", np.float64)[first:].min() < 0:
            self.check_times(table)

    # --- CPU side ---------------------------------------------------------------------------------

    def runtime(self) -> None:
        if not self.need(RUNTIME_TABLE, "start", "end", "globalTid", "correlationId", "nameId"):
            return
        pid = _PID_SQL.format(gid="r.globalTid")
        good = _GOOD_TIMES.replace("start", "r.start").replace("end", "r.end")
        sql = (
            f"SELECT {pid}, s.value, COUNT(*), SUM(r.end - r.start), SUM(NOT ({good})) "
            f"FROM {RUNTIME_TABLE} AS r LEFT JOIN StringIds AS s ON s.id = r.nameId GROUP BY 1, r.nameId"
        )
        sums = list(self.rows(RUNTIME_TABLE, sql))  # one row per process and API name
        if any(bad for *_, bad in sums):
            self.check_times(RUNTIME_TABLE)
        for process, label, count, total, _bad in sums:
            api = _API_VERSION.sub("", label) if isinstance(label, str) else "<unnamed API call>"
            _merge(self._process(process).runtime, api, count, total / 1000.0)
        key = _KEY.format(corr="correlationId", gid="globalTid")
        # The kernels of a CUDA graph share its one launch: no launch call of their own.
        sql = (
            "SELECT key, start / 1000.0, CASE WHEN graph THEN -1.0 ELSE (end - start) / 1000.0 END FROM "
            f"(SELECT {key} AS key, r.start AS start, r.end AS end, "
            "COALESCE(s.value LIKE '%GraphLaunch%', 0) AS graph "
            f"FROM {RUNTIME_TABLE} AS r LEFT JOIN StringIds AS s ON s.id = r.nameId) WHERE key >= 0"
        )
        for batch in self.batches(RUNTIME_TABLE, sql):
            keys, times, durations = zip(*batch, strict=True)
            self.launch_key.extend(keys)
            self.launch_ts.extend(times)
            self.launch_dur.extend(durations)

    def nvtx(self) -> None:
        if not self.need(NVTX_TABLE, "start", "end", "eventType", "text", "globalTid"):
            return
        kinds = ", ".join(str(kind) for kind in _NVTX_RANGES)
        self.check_times(NVTX_TABLE, f"eventType IN ({kinds}) AND end IS NOT NULL")
        ranges = f"n.eventType IN ({kinds}) AND n.end IS NOT NULL"
        text_id = "textId" in self.tables[NVTX_TABLE]
        label = "COALESCE(n.text, s.value)" if text_id else "n.text"
        join = " LEFT JOIN StringIds AS s ON s.id = n.textId" if text_id else ""
        pid = _PID_SQL.format(gid="n.globalTid")
        sql = (
            f"SELECT {pid}, {label}, COUNT(*), SUM(n.end - n.start), MIN(n.start), MAX(n.end) "
            f"FROM {NVTX_TABLE} AS n{join} WHERE {ranges} GROUP BY 1, 2"
        )
        for process, text, count, total, first, last in self.rows(NVTX_TABLE, sql):
            name = text if isinstance(text, str) else "<unnamed range>"
            match = _STEP.fullmatch(name)
            if match:  # one range per step and process: its first start and last end
                number = int(match.group(1))
                self._process(process).steps[number] = Step(number, first / 1000.0, last / 1000.0)
            else:
                _merge(self._process(process).ops, name, count, total / 1000.0)

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

    def names(self, codes: np.ndarray) -> list[str]:
        """The name of each code (sorted, distinct): StringIds looked up a chunk of ids at a time."""
        ids = [int(code) for code in codes if code >= 0]
        found: dict[int, str] = {}
        for at in range(0, len(ids), 500):
            chunk = ids[at : at + 500]
            sql = f"SELECT id, value FROM StringIds WHERE id IN ({', '.join(map(str, chunk))})"
            found.update((key, str(value)) for key, value in self.rows("StringIds", sql))
        out = []
        for code in codes.tolist():
            if code >= 0:
                out.append(found.get(code, f"<kernel name {code}>"))
            elif code == _MEMSET_NAME:
                out.append("[CUDA memset]")
            elif code <= _MEMCPY_BASE:
                out.append(self.copy_names.get(code, "[CUDA memcpy Unknown]"))
            else:
                out.append("<unnamed kernel>")
        return out

    # --- ranks --------------------------------------------------------------------------------------

    def ranks(self) -> list[RankTrace]:
        gpus = self.gpus()
        columns = self.columns
        device = columns.numpy("device", np.int64)
        devices = np.unique(device).tolist() or [min(gpus, default=0)]
        codes, name = np.unique(columns.numpy("name", np.int64), return_inverse=True)
        names = self.names(codes)
        # Which GPU each process used most: the process id is the top half of the launch key.
        key = columns.numpy("key", np.int64)
        owner = np.where(key >= 0, key >> 32, -1)
        for pid in np.unique(owner).tolist():
            ran_on, counts = np.unique(device[owner == pid], return_counts=True)
            self._process(pid).devices.update(zip(ran_on.tolist(), counts.tolist(), strict=True))
        launch, launch_dur = _launches(
            key,
            np.frombuffer(self.launch_key, dtype=np.int64) if self.launch_key else np.empty(0, np.int64),
            np.frombuffer(self.launch_ts, dtype=np.float64) if self.launch_ts else np.empty(0),
            np.frombuffer(self.launch_dur, dtype=np.float64) if self.launch_dur else np.empty(0),
        )
        full = GpuEvents(
            start=columns.numpy("start", np.float64),
            dur=columns.numpy("dur", np.float64),
            stream=columns.numpy("stream", np.int64),
            kind=columns.numpy("kind", np.int8),
            name=name.astype(np.int64, copy=False).reshape(-1),
            launch=launch,
            launch_dur=launch_dur,
        )
        traces: dict[int, RankTrace] = {}
        for index, number in enumerate(devices):
            trace = traces[number] = RankTrace(rank=index, file=self.name, names=names)
            if len(devices) == 1:
                trace.events = full
            else:
                mine = device == number
                trace.events = GpuEvents(
                    *(
                        getattr(full, part)[mine]
                        for part in ("start", "dur", "stream", "kind", "name", "launch", "launch_dur")
                    )
                )
                trace.world_size = len(devices)
            trace.device = gpus.get(number, "")
            trace.meta["device_index"] = number
            trace.meta["gpus"] = len(gpus)
        for process in self.processes.values():
            used = process.devices
            trace = traces[max(used, key=lambda key: used[key]) if used else devices[0]]
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
        out = [traces[number] for number in devices]
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


def _launches(
    key: np.ndarray, keys: np.ndarray, times: np.ndarray, durations: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """When the CPU launched each activity (its runtime call's start) and how long that call took,
    NaN where unknown (or, for the duration, where the call was a CUDA graph's)."""
    launch = np.full(key.size, np.nan)
    launch_dur = np.full(key.size, np.nan)
    if keys.size and key.size:
        order = np.argsort(keys, kind="stable")
        keys, times, durations = keys[order], times[order], durations[order]
        where = np.minimum(np.searchsorted(keys, key), keys.size - 1)
        found = (keys[where] == key) & (key >= 0)
        launch[found] = times[where[found]]
        launch_dur[found] = durations[where[found]]
        launch_dur[launch_dur < 0] = np.nan
    return launch, launch_dur


def parse_file(name: str, source: Source, *, before: int = 0, limit: int | None = None) -> list[RankTrace]:
    """The ranks (one per GPU with activity) of one export. Raises ParseError naming the file;
    ``TooLarge`` when its GPU activities and ``before`` (those of the profile's earlier files) are
    past ``limit`` (default ``profile_data.MAX_ACTIVITIES``)."""
    try:
        with _database(name, source) as connection:
            reader = _Reader(name, connection, before=before, limit=limit)
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
    read = 0
    for name, source in sources:
        for trace in parse_file(name, source, before=read):
            read += len(trace.events) if trace.events is not None else 0
            trace.rank = len(ranks)
            ranks.append(trace)
    if len(ranks) > 1:
        for trace in ranks:
            trace.world_size = len(ranks)
    warnings = [warning for trace in ranks for warning in trace.warnings]
    return ProfileData(
        source_format=NAME, files=[name for name, _ in sources], ranks=ranks, warnings=warnings
    )
