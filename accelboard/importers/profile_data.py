"""What a profiler importer produces: per rank, the GPU activities as compact columns.

Pure (numpy, no Django). A trace of several hundred MB holds a few hundred thousand GPU
activities: kept as typed arrays (about 40 bytes each), never as Python objects, so that the
analysis can draw the GPU timeline (idle gaps, overlap of streams) in bounded memory. CPU-side
events are folded while reading into sums per name (``ops``, ``runtime``) and step ranges.

A report without a timeline (``nsys stats`` CSV) gives ``sums`` per activity name instead of
``events``: the analysis then knows totals but not idle time or overlap, and says so.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# What a GPU activity is (``GpuEvents.kind``).
KERNEL, MEMCPY, MEMSET = 0, 1, 2


@dataclass
class Step:
    """A profiler step (``ProfilerStep#12``) as the CPU saw it, in the trace's microseconds."""

    number: int
    start: float
    end: float


@dataclass
class ActivitySum:
    """Totals for one GPU activity name (a report without a timeline)."""

    name: str
    kind: int
    count: int
    total_us: float
    min_us: float | None = None
    max_us: float | None = None


class EventColumns:
    """Growable typed columns of GPU activities: append while reading, ``arrays()`` at the end."""

    def __init__(self) -> None:
        self.start = array("d")
        self.dur = array("d")
        self.stream = array("q")
        self.kind = array("b")
        self.name = array("l")
        self.correlation = array("q")
        self.names: dict[str, int] = {}

    def add(self, name: str, kind: int, start: float, dur: float, stream: int, correlation: int) -> None:
        index = self.names.get(name)
        if index is None:
            index = self.names[name] = len(self.names)
        # Ids that do not fit 64 bits are kept as unknown (-1) rather than refusing the file.
        try:
            self.stream.append(stream)
        except OverflowError:
            self.stream.append(-1)
        try:
            self.correlation.append(correlation)
        except OverflowError:
            self.correlation.append(-1)
        self.start.append(start)
        self.dur.append(dur)
        self.kind.append(kind)
        self.name.append(index)

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class GpuEvents:
    """GPU activities of one rank, one row per activity; times in microseconds."""

    start: np.ndarray  # float64
    dur: np.ndarray  # float64, >= 0
    stream: np.ndarray  # int64
    kind: np.ndarray  # int8: categories.KERNEL / MEMCPY / MEMSET
    name: np.ndarray  # int64, index into RankTrace.names
    launch: np.ndarray  # float64: when the CPU launched it (NaN when the trace does not say)
    # float64: how long the CPU's launch call (cudaLaunchKernel ...) took; NaN when unknown, None
    # when the format never says (the launch statistics of ``profiles.hta`` are then unknown).
    launch_dur: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.start.shape[0])

    @classmethod
    def empty(cls) -> GpuEvents:
        f, i = np.empty(0, dtype=np.float64), np.empty(0, dtype=np.int64)
        return cls(f, f.copy(), i, np.empty(0, dtype=np.int8), i.copy(), f.copy())


@dataclass
class RankTrace:
    """One rank's profile (one Kineto file, or one nsys report set)."""

    rank: int
    file: str
    names: list[str] = field(default_factory=list)
    events: GpuEvents | None = None
    sums: list[ActivitySum] | None = None
    steps: list[Step] = field(default_factory=list)
    # CPU operators and runtime API calls by name: [count, total microseconds]
    ops: dict[str, list[float]] = field(default_factory=dict)
    runtime: dict[str, list[float]] = field(default_factory=dict)
    device: str = ""
    world_size: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def has_timeline(self) -> bool:
        return self.events is not None


@dataclass
class ProfileData:
    """A profile: one or several ranks read from one or several files of one format."""

    source_format: str
    files: list[str]
    ranks: list[RankTrace]
    warnings: list[str] = field(default_factory=list)
