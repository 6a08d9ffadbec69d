"""Nsight Systems ``nsys stats`` reports as CSV: one or several reports of one profile together.

``nsys stats --report cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_api_sum,nvtx_sum
--format csv --output PREFIX report.nsys-rep`` writes one file per report
(``PREFIX_cuda_gpu_kern_sum.csv``); without ``--output`` the reports go to standard output one
after another, each under a line ``** <title> (<report>):``. Both are read. Reports used:

- ``cuda_gpu_kern_sum`` (older: ``gpukernsum``): per kernel name, instances and total time;
- ``cuda_gpu_mem_time_sum`` (``gpumemtimesum``): per copy/memset operation, count and time;
- ``cuda_api_sum`` (``cudaapisum``): runtime calls (launch counts and their mean duration);
- ``nvtx_sum`` (``nvtxsum``): NVTX ranges, shown as the profile's CPU ranges;
- ``cuda_gpu_trace`` (``gputrace``): one row per kernel or copy with its start, duration and
  stream: a real timeline, used instead of the sums when present.

A ``cuda_gpu_trace`` report of more than ``profile_data.MAX_ACTIVITIES`` rows is refused
(``profile_data.TooLarge``, code ``too_large``) before its rows are read.

Summaries carry no timeline: the analysis knows totals, not idle time or overlap. Column units are
read from the header (``Total Time (ns)``; older reports without a unit are nanoseconds). Kernel
names are quoted and may contain commas (the ``csv`` module handles them). The GPU model is not in
these files: it comes from the run.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np

from . import profile_data
from .base import ParseError
from .profile_data import (
    KERNEL,
    MEMCPY,
    MEMSET,
    ActivitySum,
    EventColumns,
    GpuEvents,
    ProfileData,
    RankTrace,
    check_activities,
)

NAME = "nsys-stats"
LABEL = "Nsight Systems stats CSV"

_REPORTS = {
    "cuda_gpu_kern_sum": "kern_sum",
    "gpukernsum": "kern_sum",
    "cuda_gpu_mem_time_sum": "mem_time_sum",
    "gpumemtimesum": "mem_time_sum",
    "cuda_api_sum": "api_sum",
    "cudaapisum": "api_sum",
    "nvtx_sum": "nvtx_sum",
    "nvtxsum": "nvtx_sum",
    "nvtx_pushpop_sum": "nvtx_sum",
    "cuda_gpu_trace": "gpu_trace",
    "gputrace": "gpu_trace",
    "cuda_gpu_mem_size_sum": "ignored",
    "gpumemsizesum": "ignored",
    "osrt_sum": "ignored",
    "cuda_kern_exec_sum": "ignored",
}
_REPORT_NAMES = {
    "kern_sum": "cuda_gpu_kern_sum",
    "mem_time_sum": "cuda_gpu_mem_time_sum",
    "api_sum": "cuda_api_sum",
    "nvtx_sum": "nvtx_sum",
    "gpu_trace": "cuda_gpu_trace",
}
_HEADER_START = re.compile(r"^\s*(Time ?\(%\)|Start ?\(ns\)|Start,|Total \(MB\)|Time\(%\))", re.I)
_SECTION = re.compile(r"\*\*.*\((?P<report>[a-z_]+)\):?\s*$")
_UNIT = re.compile(r"\((ns|us|µs|ms|s)\)\s*$")
_SCALE_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}


def sniff(head: bytes) -> bool:
    """True for the start of an ``nsys stats`` CSV report (or several on standard output)."""
    text = head[:8192].decode("utf-8", "replace")
    for line in text.splitlines()[:40]:
        if (
            _HEADER_START.match(line)
            and "," in line
            and ("Name" in line or "Operation" in line or "Range" in line)
        ):
            return True
    return False


def _blocks(text: str, file_name: str) -> Iterator[tuple[str, int, list[str]]]:
    """(report hint, first line number, lines) of each CSV table in the text."""
    hint = _report_from_name(file_name)
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        section = _SECTION.search(line)
        if section:
            hint = section.group("report")
        if _HEADER_START.match(line) and "," in line:
            start = index
            index += 1
            while index < len(lines) and lines[index].strip():
                index += 1
            yield hint, start + 1, lines[start:index]
            continue
        index += 1


def _report_from_name(file_name: str) -> str:
    stem = Path(file_name).name.lower()
    for report in sorted(_REPORTS, key=len, reverse=True):
        if report in stem:
            return report
    return ""


def _kind_from_header(columns: list[str]) -> str:
    names = {re.sub(_UNIT, "", c).strip().lower() for c in columns}
    if "start" in names and "duration" in names and "name" in names:
        return "gpu_trace"
    if "total (mb)" in names:
        return "ignored"
    if "range" in names:
        return "nvtx_sum"
    if "num calls" in names or "calls" in names:
        return "api_sum"
    if "operation" in names:
        return "mem_time_sum"
    if "name" in names and "instances" in names:
        return "kern_sum"
    return ""


class _Table:
    """Column access by a name without its unit; values converted to microseconds."""

    def __init__(self, header: list[str], file: str, line: int):
        self.file = file
        self.line = line
        self.index: dict[str, int] = {}
        self.scale: dict[str, float] = {}
        for position, column in enumerate(header):
            unit = _UNIT.search(column)
            key = re.sub(_UNIT, "", column).strip().lower()
            self.index[key] = position
            self.scale[key] = _SCALE_US[unit.group(1)] if unit else 1e-3

    def has(self, *keys: str) -> str | None:
        return next((key for key in keys if key in self.index), None)

    def text(self, row: list[str], key: str) -> str:
        return row[self.index[key]]

    def number(self, row: list[str], key: str, line: int, *, time: bool = False) -> float:
        raw = row[self.index[key]].strip().replace(",", "")
        try:
            value = float(raw)
        except ValueError:
            raise ParseError(self.file, f"column {key!r}: {raw!r} is not a number", line=line) from None
        if not math.isfinite(value) or (time and value < 0):
            what = "a finite number >= 0" if time else "a finite number"
            raise ParseError(self.file, f"column {key!r}: {raw!r} is not {what}", line=line)
        return value * self.scale[key] if time else value


def _parse_block(trace: RankTrace, kind: str, lines: list[str], file: str, first_line: int) -> str:
    """Read one report's table into ``trace``; the report's kind, or "" for one not used."""
    rows = list(csv.reader(lines))
    header, body = rows[0], rows[1:]
    table = _Table(header, file, first_line)
    kind = _kind_from_header(header) or kind
    if kind in ("", "ignored"):
        return ""
    name_key = table.has("name", "operation", "range")
    count_key = table.has("instances", "count", "num calls", "calls")
    total_key = table.has("total time")
    if not body:
        # nsys writes no table for a report with nothing in it (it prints "SKIPPED"): a header
        # without rows is a cut-short file, not a profile without GPU activity.
        raise ParseError(
            file,
            f"the {_REPORT_NAMES.get(kind, kind)} report has a header but no rows: the file is empty or cut short",
            line=first_line,
        )
    for offset, row in enumerate(body, start=1):
        line = first_line + offset
        if len(row) != len(header):
            raise ParseError(file, f"{len(row)} columns where the header has {len(header)}", line=line)
    if kind == "gpu_trace":
        # One row an activity: refused before any is read past the limit (``TooLarge``).
        check_activities(file, len(body), profile_data.MAX_ACTIVITIES)
        _gpu_trace(trace, table, body, first_line)
        return kind
    if name_key is None or count_key is None or total_key is None:
        raise ParseError(
            file, "a report needs Name (or Operation/Range), a count and Total Time", line=first_line
        )
    min_key, max_key = table.has("min"), table.has("max")
    for offset, row in enumerate(body, start=1):
        line = first_line + offset
        name = table.text(row, name_key).strip()
        count = table.number(row, count_key, line)
        total = table.number(row, total_key, line, time=True)
        if kind in ("kern_sum", "mem_time_sum"):
            activity = KERNEL
            if kind == "mem_time_sum":
                activity = MEMSET if "memset" in name.lower() else MEMCPY
            trace.sums = trace.sums if trace.sums is not None else []
            trace.sums.append(
                ActivitySum(
                    name=name,
                    kind=activity,
                    count=int(count),
                    total_us=total,
                    min_us=table.number(row, min_key, line, time=True) if min_key else None,
                    max_us=table.number(row, max_key, line, time=True) if max_key else None,
                )
            )
        elif kind == "api_sum":
            trace.runtime[name] = [count, total]
        elif kind == "nvtx_sum":
            style = table.text(row, "style").strip() if table.has("style") else ""
            label = name.lstrip(":") if style else name
            trace.ops[label] = [count, total]
    return kind


def _gpu_trace(trace: RankTrace, table: _Table, body: list[list[str]], first_line: int) -> None:
    columns = EventColumns()
    start_key, dur_key = table.has("start"), table.has("duration")
    stream_key = table.has("strm", "stream")
    corr_key = table.has("corrid")
    name_key = table.has("name")
    assert start_key and dur_key and name_key
    for offset, row in enumerate(body, start=1):
        line = first_line + offset
        name = table.text(row, name_key).strip()
        lowered = name.lower()
        kind = MEMSET if "memset" in lowered else MEMCPY if "memcpy" in lowered else KERNEL
        stream = (
            int(table.number(row, stream_key, line)) if stream_key and row[table.index[stream_key]] else -1
        )
        corr = int(table.number(row, corr_key, line)) if corr_key and row[table.index[corr_key]] else -1
        columns.add(
            name,
            kind,
            table.number(row, start_key, line, time=True),
            max(0.0, table.number(row, dur_key, line, time=True)),
            stream,
            corr,
        )
    trace.names = list(columns.names)
    trace.events = GpuEvents(
        start=np.frombuffer(columns.start, dtype=np.float64).copy(),
        dur=np.frombuffer(columns.dur, dtype=np.float64).copy(),
        stream=np.frombuffer(columns.stream, dtype=np.int64).copy(),
        kind=np.frombuffer(columns.kind, dtype=np.int8).copy(),
        name=np.frombuffer(columns.name, dtype=np.int64).copy(),
        launch=np.full(len(columns), np.nan),
    )


def parse(sources: list[tuple[str, str | Path | bytes | IO[bytes]]]) -> ProfileData:
    """Read the CSV reports of one profile (file names, paths or bytes) as one rank."""
    trace = RankTrace(rank=0, file=", ".join(name for name, _ in sources))
    reports: set[str] = set()
    for name, source in sources:
        try:
            if isinstance(source, bytes):
                data = source
            elif hasattr(source, "read"):
                data = source.read()
            else:
                data = Path(source).read_bytes()
        except OSError as exc:
            raise ParseError(name, f"cannot read: {exc.strerror or exc}") from None
        text = data.decode("utf-8-sig", "replace")
        found = False
        for hint, line, lines in _blocks(text, name):
            kind = _REPORTS.get(hint, "")
            try:
                read = _parse_block(trace, kind, lines, name, line)
                if read:
                    found = True
                    reports.add(read)
            except csv.Error as exc:
                raise ParseError(name, f"not valid CSV: {exc}", line=line) from None
        if not found:
            raise ParseError(
                name, "no nsys stats report recognised (cuda_gpu_kern_sum, cuda_gpu_mem_time_sum, ...)"
            )
    if trace.events is not None:
        trace.sums = None  # a timeline supersedes the summed reports
    elif trace.sums is None:
        trace.sums = []
        trace.warnings.append("no kernel or memory report among the files: only CPU-side figures")
    if trace.events is None:
        trace.warnings.append(
            "nsys stats summaries have no timeline: idle time, overlap and steps are unknown "
            "(add the cuda_gpu_trace report for them)"
        )
        # A report not among the files says nothing of its activities: unknown, not zero.
        unknown = [] if "kern_sum" in reports else ["compute", "communication"]
        if "mem_time_sum" not in reports:
            unknown.append("memory")
            if "kern_sum" in reports:
                trace.warnings.append(
                    "no memory report (cuda_gpu_mem_time_sum) among the files: memory copy and memset time unknown"
                )
        trace.meta["unknown_groups"] = unknown
    return ProfileData(
        source_format=NAME, files=[name for name, _ in sources], ranks=[trace], warnings=list(trace.warnings)
    )
