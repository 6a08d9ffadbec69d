"""What a profiler importer produces: per rank, the GPU activities as compact columns.

Pure (numpy, no Django). A trace of several hundred MB holds a few hundred thousand GPU
activities: kept as typed arrays (23 bytes each, 39 with launch times), never as Python objects, so that the
analysis can draw the GPU timeline (idle gaps, overlap of streams) in bounded memory. CPU-side
events are folded while reading into sums per name (``ops``, ``runtime``) and step ranges.

A report without a timeline (``nsys stats`` CSV) gives ``sums`` per activity name instead of
``events``: the analysis then knows totals but not idle time or overlap, and says so.
"""

from __future__ import annotations

import ctypes
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# What a GPU activity is (``GpuEvents.kind``).
KERNEL, MEMCPY, MEMSET = 0, 1, 2
KIND_LABELS = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}

# Distinct names kept by name, per rank: GPU activities (``BoundedEventColumns``) and CPU-side
# sums (``fold_sums``). Beyond them names are folded into "other" rows, so that a trace of a
# million distinct kernel names (generated code, names with shapes in them) needs bounded memory.
MAX_NAMES = 10_000
MAX_CPU_NAMES = 5_000

# The category of an activity name, used to fold names by category (the breakdown stays right
# when names are folded). Registered by ``profiles.categories``: importers sit below profiles.
_classify: Callable[[str, int], str] | None = None


def register_classifier(classify: Callable[[str, int], str]) -> None:
    """Let folded activity names keep their category (``profiles.categories.kernel_category``)."""
    global _classify
    _classify = classify


def steady_heap() -> None:
    """Keep the C heap from holding on to freed memory while a large trace is read (glibc; a no-op
    elsewhere). For the process that reads a trace (the server's forked child, the bench's).

    glibc raises its mmap threshold to the size of each large block freed (up to 32 MiB): after
    the first column of a few MB is freed, the reading's later arrays of up to 32 MiB come from
    the heap, whose freed space is not given back and fragments: tens of MB more at the peak on a
    trace of millions of activities. Fixed at 4 MiB (and the heap trimmed beyond 4 MiB free),
    every larger array has a mapping of its own, returned when freed, while the decoder's buffers
    of 1-3 MB still reuse the heap (at 128 KiB they were mapped afresh each time: 20% more CPU).
    """
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 4 * 2**20)
        libc.mallopt(_M_TRIM_THRESHOLD, 4 * 2**20)
    except (OSError, AttributeError):
        pass


_M_MMAP_THRESHOLD = -3
_M_TRIM_THRESHOLD = -1


def fold_sums(sums: dict[str, list[float]], cap: int, other: str) -> None:
    """Keep the ``cap`` names of most time in ``sums`` ({name: [count, total]}); add the others'
    counts and times to the ``other`` entry. In place; called when ``sums`` reaches twice ``cap``,
    so the dict stays bounded and a name folded early may come back with its later calls."""
    ranked = sorted(sums.items(), key=lambda item: -item[1][1])
    folded = [0.0, 0.0]
    for name, (count, total) in ranked[cap:]:
        folded[0] += count
        folded[1] += total
        del sums[name]
    slot = sums.setdefault(other, [0, 0.0])
    slot[0] += folded[0]
    slot[1] += folded[1]


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


class BoundedEventColumns:
    """``EventColumns`` whose name table is bounded: at most ``2 × cap`` names are held while
    reading, whatever the number of distinct names in the file.

    Method (periodic pruning, as in lossy counting): each live name has a slot with its running
    GPU time. When ``2 × cap`` names are live, all but the ``cap`` with the most time so far are
    folded: their activities go to the "other" row of their kind and category, and their strings
    and slots are dropped. A folded name seen again starts afresh (its earlier activities stay in
    the "other" row). At the end the table is pruned to ``cap``. Every activity stays in the
    timeline with its category, so the breakdown is exact and the named rows plus the "other"
    rows add up to every activity; only which names are listed by name is approximate (the
    heaviest ones are kept). A trace of at most ``cap`` distinct names is read exactly as without
    a bound. Memory: the columns (27 bytes an activity while reading, 23 after) and 4 bytes each
    time a name is admitted.
    """

    def __init__(self, cap: int | None = None) -> None:
        self.start = array("d")
        self.dur = array("d")
        # 16-bit stream ids and 32-bit correlation ids while the ids fit (they nearly always do:
        # CUDA streams are numbered from 7 up), widened to 64 bits on the first that does not:
        # 10 bytes an activity saved.
        self.stream = array("h")
        self.kind = array("b")
        self.name = array("i")  # the id of the admission of the name (``_target`` maps it)
        self.correlation = array("i")
        self.cap = MAX_NAMES if cap is None else cap
        self.live: dict[str, int] = {}  # name -> slot
        self._slot_total = array("d")
        self._slot_kind = array("b")
        self._slot_id = array("i")
        self._free: list[int] = []
        self._target = array("i")  # by id: -1 while live or kept, else the id of its "other" row
        self._buckets: dict[tuple[int, str], int] = {}
        self.folded = 0

    def _admit(self, name: str, kind: int) -> int:
        if len(self.live) >= 2 * self.cap:
            self._prune(self.cap)
        ident = len(self._target)
        self._target.append(-1)
        if self._free:
            slot = self._free.pop()
            self._slot_total[slot] = 0.0
            self._slot_kind[slot] = kind
            self._slot_id[slot] = ident
        else:
            slot = len(self._slot_id)
            self._slot_total.append(0.0)
            self._slot_kind.append(kind)
            self._slot_id.append(ident)
        self.live[name] = slot
        return slot

    def add(self, name: str, kind: int, start: float, dur: float, stream: int, correlation: int) -> None:
        slot = self.live.get(name)
        if slot is None:
            slot = self._admit(name, kind)
        self._slot_total[slot] += dur
        try:
            self.stream.append(stream)
        except OverflowError:
            self.stream = _widened(self.stream, stream)
        try:
            self.correlation.append(correlation)
        except OverflowError:
            self.correlation = _widened(self.correlation, correlation)
        self.start.append(start)
        self.dur.append(dur)
        self.kind.append(kind)
        self.name.append(self._slot_id[slot])

    def _prune(self, keep: int) -> None:
        total = self._slot_total
        ranked = sorted(self.live.items(), key=lambda item: -total[item[1]])
        for name, slot in ranked[keep:]:
            kind = self._slot_kind[slot]
            category = _classify(name, kind) if _classify is not None else ""
            bucket = self._buckets.get((kind, category))
            if bucket is None:
                bucket = self._buckets[(kind, category)] = len(self._target)
                self._target.append(-1)
            self._target[self._slot_id[slot]] = bucket
            self._free.append(slot)
            self.folded += 1
            del self.live[name]

    def __len__(self) -> int:
        return len(self.start)

    def finish(self) -> tuple[list[str], dict[int, str], np.ndarray]:
        """(names, category of each "other" row by its index, each activity's name index). The
        name column is rewritten in place (chunks of a million) and returned as a view."""
        if len(self.live) > self.cap:
            self._prune(self.cap)
        # The final index of each live name and each "other" row, by the id it was admitted with.
        ids: list[int] = []
        finals: list[int] = []
        names: list[str] = []
        for name, slot in self.live.items():
            ids.append(self._slot_id[slot])
            finals.append(len(names))
            names.append(name)
        categories: dict[int, str] = {}
        for (kind, category), bucket in self._buckets.items():
            ids.append(bucket)
            finals.append(len(names))
            if category:
                categories[len(names)] = category
            what = f"{KIND_LABELS[kind]}s" + (f", {category}" if category else "")
            names.append(f"(other {what}: names beyond the top {self.cap:,})")
        # ``_target`` is rewritten in place into the final index of every id (chunks of a million):
        # no second table as long as the admissions (one per activity when every name is new).
        if len(self._target):
            target = np.frombuffer(self._target, dtype=np.int32)
            order = np.argsort(np.asarray(ids, dtype=np.int64))
            known_ids = np.asarray(ids, dtype=np.int64)[order]
            known_finals = np.asarray(finals, dtype=np.int32)[order]
            for a in range(0, target.size, 1 << 20):
                part = target[a : a + (1 << 20)]
                folded = np.flatnonzero(part >= 0)
                # A folded id points at its "other" row's id, which is always a known id.
                part[folded] = known_finals[np.searchsorted(known_ids, part[folded])]
            target[np.asarray(ids, dtype=np.int64)] = np.asarray(finals, dtype=np.int32)
            final = target
            del part, folded, order, known_ids, known_finals
        else:
            final = np.empty(0, dtype=np.int32)
        self._slot_total, self._slot_kind, self._slot_id, self._free = array("d"), array("b"), array("i"), []
        if not len(self.name):
            self._target = array("i")
            return names, categories, np.empty(0, dtype=np.int32)
        column = np.frombuffer(self.name, dtype=np.int32)
        for a in range(0, column.size, 1 << 20):
            column[a : a + (1 << 20)] = final[column[a : a + (1 << 20)]]
        del final
        self._target = array("i")
        return names, categories, column


def _widened(column: array, value: int) -> array:
    """A 16- or 32-bit id column widened to 64 bits (``value`` appended; -1 when it does not fit 64)."""
    if column.typecode in ("h", "i"):
        column = array("q", column)
    try:
        column.append(value)
    except OverflowError:
        column.append(-1)
    return column


def column_array(column: array) -> np.ndarray:
    """A typed column as a numpy view (no copy)."""
    return np.frombuffer(
        column,
        dtype={"h": np.int16, "i": np.int32, "q": np.int64, "d": np.float64, "b": np.int8}[column.typecode],
    )


@dataclass
class GpuEvents:
    """GPU activities of one rank, one row per activity; times in microseconds."""

    start: np.ndarray  # float64
    dur: np.ndarray  # float64, >= 0
    stream: np.ndarray  # integer
    kind: np.ndarray  # int8: categories.KERNEL / MEMCPY / MEMSET
    name: np.ndarray  # integer index into RankTrace.names
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
    # The category of the "other" rows that folded names beyond ``MAX_NAMES`` (by name index),
    # and how many names were folded.
    name_categories: dict[int, str] = field(default_factory=dict)
    folded_names: int = 0
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
