"""What a profiler importer produces: per rank, the GPU activities as compact columns.

Pure (numpy, no Django). A trace of several hundred MB holds a few hundred thousand to a few
million GPU activities: read into packed columns (``PackedColumn``: 8-12 bytes an activity for
Kineto's nanosecond times), then given to the analysis as typed arrays (21 bytes each, 37 with
launch times), never as Python objects, so that it can draw the GPU timeline (idle gaps, overlap
of streams); a profile of more than ``MAX_ACTIVITIES`` is refused while it is read. CPU-side
events are folded while reading into sums per name (``ops``, ``runtime``) and step ranges.

A report without a timeline (``nsys stats`` CSV) gives ``sums`` per activity name instead of
``events``: the analysis then knows totals but not idle time or overlap, and says so.
"""

from __future__ import annotations

import ctypes
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .base import ParseError

# What a GPU activity is (``GpuEvents.kind``).
KERNEL, MEMCPY, MEMSET = 0, 1, 2
KIND_LABELS = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}

# Distinct names kept by name, per rank: GPU activities (``BoundedEventColumns``) and CPU-side
# sums (``fold_sums``). Beyond them names are folded into "other" rows, so that a trace of a
# million distinct kernel names (generated code, names with shapes in them) needs bounded memory.
MAX_NAMES = 10_000
MAX_CPU_NAMES = 5_000

# GPU activities (kernels, copies, memsets) of one profile, all its files together. Once read, an
# activity takes about 25 bytes until the analysis ends (its float64 start and duration, stream,
# kind, name index, the analysis's priority and temporaries; measured: 356 MB in the server's
# reading child for 8.5 million, 144 MB of which the server's own), 41 with the launch times
# of a trace that has runtime events: an activity then counts as 1.6 against the limit. Beyond
# it a profile could not be read and analysed in 300 MB in that child; refused as soon as
# reading reaches it (``TooManyActivities``), never half-read. Kineto writes 150-250 bytes an
# activity: 6 million is a trace of 1-1.5 GB of kernels alone.
MAX_ACTIVITIES = 6_000_000
LAUNCH_WEIGHT = 1.6
# A timeline out of time order is analysed on a sorted copy (``analysis.rank_analyse``): its
# 32-bit order, the start and duration columns again and the priority (21 bytes an activity),
# and the launch times again when there are some (29); measured (tracemalloc, 2M and 4M shuffled
# kernels): 18 and 25 bytes an activity more (33 before the order was 32-bit), and HTA's per-stream
# order after it 20. Beside the 25 above, such an activity counts this much more against the
# limit (29 / 25), checked once the start column is decoded.
OUT_OF_ORDER_EXTRA = 1.2


class TooManyActivities(ValueError):
    """A profile with more GPU activities than ``MAX_ACTIVITIES``: refused, not read in part."""

    code = "too_large"

    def __init__(self, limit: int):
        self.limit = limit
        super().__init__(
            f"more than {limit:,} GPU activities (kernels, copies, memsets) in this profile: the most "
            "that is read, to keep the reading under 300 MB; profile fewer steps "
            "(torch.profiler's schedule: active=1-2) or split the trace"
        )


class TooLarge(ParseError):
    """A profile beyond ``MAX_ACTIVITIES`` GPU activities, naming the file (``code``: for the
    API's answer). Raised by every importer with a timeline (Kineto, nsys CSV, nsys SQLite)."""

    code = TooManyActivities.code


def activity_limit(limit: int | None) -> int:
    """``limit``, or ``MAX_ACTIVITIES`` as it is now (tests lower it)."""
    return MAX_ACTIVITIES if limit is None else limit


def check_activities(file: str, count: float, limit: int) -> None:
    """``TooLarge`` naming ``file`` when ``count`` (weighted) activities are past ``limit``."""
    if count > limit:
        raise TooLarge(file, str(TooManyActivities(limit)))


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


# Activities per packed chunk (``PackedColumn``): 64k values, 512 KiB while a chunk is filled.
PACK_CHUNK = 1 << 16
_NARROW = (np.int8, np.int16, np.int32)


class PackedColumn:
    """A column of float64 times (microseconds) or int64 ids, appended one at a time, kept in
    chunks of ``PACK_CHUNK`` values each in the narrowest form that gives every value back exactly.

    Method, per chunk: times that are whole nanoseconds (``round(v * 1000) / 1000 == v`` in
    float64, below 2**53 ns) become int64 nanoseconds; integers are then stored as 8/16/32-bit
    values where they fit, else as 8/16/32-bit differences from the previous value (times in
    order, ids counting up), whichever is smaller; anything else is kept as it came (float64 or
    int64). Decoding reverses it exactly (the differences wrap as int64 sums do), so a trace read
    packed gives the analyses the very numbers read. Kineto writes times in microseconds with
    three decimals: a kernel's start takes 2-4 bytes instead of 8, its duration 2-4.
    """

    def __init__(self, typecode: str) -> None:
        self.typecode = typecode  # "d": float64 times, "q": int64 ids
        self.buffer: array[Any] = array(typecode)  # the chunk being filled; callers append to it
        self.chunks: list[tuple[Any, ...]] = []
        self.sealed = 0

    def seal(self) -> None:
        """Pack the chunk being filled (called when it holds ``PACK_CHUNK`` values, and at the end)."""
        if not len(self.buffer):
            return
        dtype = np.float64 if self.typecode == "d" else np.int64
        self.chunks.append(pack(np.frombuffer(self.buffer, dtype=dtype)))
        self.sealed += len(self.buffer)
        self.buffer = array(self.typecode)

    def __len__(self) -> int:
        return self.sealed + len(self.buffer)

    def pieces(self) -> Iterator[np.ndarray]:
        """The values chunk by chunk, each chunk's packed form dropped once given (a column is
        read once: at the end of the reading)."""
        self.seal()
        self.sealed = 0
        chunks, self.chunks = self.chunks, []
        chunks.reverse()
        while chunks:
            yield unpack(chunks.pop())

    def take(self, dtype: Any = None) -> np.ndarray:
        """The whole column as one array (float64 or int64 unless ``dtype``), the packed chunks
        freed as they are decoded."""
        out = np.empty(len(self), dtype=dtype or (np.float64 if self.typecode == "d" else np.int64))
        at = 0
        for piece in self.pieces():
            out[at : at + piece.size] = piece
            at += piece.size
        return out


def pack(values: np.ndarray) -> tuple[Any, ...]:
    """One chunk of ``PackedColumn`` (see there): ("raw", a) | ("ns", form...) | integer forms."""
    if values.dtype == np.float64:
        with np.errstate(over="ignore", invalid="ignore"):
            ns = np.rint(values * 1000.0)
        if bool((np.abs(ns) < 2.0**53).all()) and np.array_equal(ns / 1000.0, values):
            return ("ns", *_pack_ints(ns.astype(np.int64)))
        return ("raw", values.copy())
    return ("int", *_pack_ints(values))


def _pack_ints(values: np.ndarray) -> tuple[Any, ...]:
    lo, hi = int(values.min()), int(values.max())
    as_values = next((t for t in _NARROW if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max), None)
    if as_values is not None and as_values is np.int8:
        return ("v", values.astype(np.int8))
    # Differences that overflow int64 wrap, and the sums that decode them wrap back: still exact.
    with np.errstate(over="ignore"):
        steps = np.diff(values)
    if steps.size:
        slo, shi = int(steps.min()), int(steps.max())
        as_steps = next((t for t in _NARROW if np.iinfo(t).min <= slo and shi <= np.iinfo(t).max), None)
    else:
        as_steps = np.int8
    if as_steps is not None and (
        as_values is None or np.dtype(as_steps).itemsize < np.dtype(as_values).itemsize
    ):
        return ("d", int(values[0]), steps.astype(as_steps))
    if as_values is not None:
        return ("v", values.astype(as_values))
    return ("v", values.copy())


def unpack(chunk: tuple[Any, ...]) -> np.ndarray:
    """The values of one packed chunk, exactly as they were packed (float64 or int64)."""
    if chunk[0] == "raw":
        return chunk[1]
    if chunk[1] == "v":
        ints = chunk[2].astype(np.int64)
    else:
        ints = np.empty(chunk[3].size + 1, dtype=np.int64)
        ints[0] = chunk[2]
        with np.errstate(over="ignore"):
            np.cumsum(chunk[3], dtype=np.int64, out=ints[1:])
            ints[1:] += chunk[2]
    if chunk[0] == "ns":
        return ints.astype(np.float64) / 1000.0
    return ints


class BoundedEventColumns:
    """GPU activities as they are read, in bounded memory: the name table holds at most
    ``2 × cap`` names whatever the number of distinct names in the file, and the times, name ids
    and correlation ids are packed (``PackedColumn``) as they come.

    Method (periodic pruning, as in lossy counting): each live name has a slot with its running
    GPU time. When ``2 × cap`` names are live, all but the ``cap`` with the most time so far are
    folded: their activities go to the "other" row of their kind and category, and their strings
    and slots are dropped. A folded name seen again starts afresh (its earlier activities stay in
    the "other" row). At the end the table is pruned to ``cap``. Every activity stays in the
    timeline with its category, so the breakdown is exact and the named rows plus the "other"
    rows add up to every activity; only which names are listed by name is approximate (the
    heaviest ones are kept). A trace of at most ``cap`` distinct names is read exactly as without
    a bound.

    Memory while reading, an activity: its start and duration packed (2-4 bytes each for Kineto's
    nanosecond times, 8 otherwise), its stream (2) and kind (1), its name's admission id and
    correlation id packed (1-2 bytes each when they count up), and 1 byte each time a name is
    admitted (the "other" row it was folded into). At the end (``finish``, ``take_times``): 16
    bytes of float64 times plus the name index (2 bytes while there are fewer than 32,768 rows).
    """

    def __init__(self, cap: int | None = None, limit: int | None = None) -> None:
        # Refused (``TooManyActivities``) at the first chunk past ``limit`` activities.
        self.limit = MAX_ACTIVITIES if limit is None else limit
        self.launches = False  # set by the reader when launch times will be joined (``LAUNCH_WEIGHT``)
        self.start = PackedColumn("d")
        self.dur = PackedColumn("d")
        # 16-bit stream ids while they fit (CUDA streams are numbered from 7 up), widened to 64
        # bits on the first that does not.
        self.stream = array("h")
        self.kind = array("b")
        self.name = PackedColumn("q")  # the id of the admission of the name (``_target`` maps it)
        self.correlation = PackedColumn("q")
        self.cap = MAX_NAMES if cap is None else cap
        self.live: dict[str, int] = {}  # name -> slot
        self._slot_total = array("d")
        self._slot_kind = array("b")
        self._slot_id = array("q")
        self._free: list[int] = []
        # By admission id: -1 while live or kept, else the number of the "other" row it went to.
        self._target = array("b")
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
        starts = self.start.buffer
        starts.append(start)
        self.dur.buffer.append(dur)
        self.kind.append(kind)
        self.name.buffer.append(self._slot_id[slot])
        try:
            self.correlation.buffer.append(correlation)
        except OverflowError:
            self.correlation.buffer.append(-1)
        if len(starts) >= PACK_CHUNK:
            self.seal()

    def seal(self) -> None:
        if len(self) * (LAUNCH_WEIGHT if self.launches else 1.0) > self.limit:
            raise TooManyActivities(MAX_ACTIVITIES)
        for column in (self.start, self.dur, self.name, self.correlation):
            column.seal()

    def _prune(self, keep: int) -> None:
        total = np.frombuffer(self._slot_total, dtype=np.float64)
        names = list(self.live)
        slots = np.fromiter(self.live.values(), dtype=np.int64, count=len(names))
        # The heaviest ``keep`` stay (ties: the earlier admitted, as a stable sort of the table).
        order = np.argsort(-total[slots], kind="stable")
        fold = order[keep:]
        folded_slots = slots[fold]
        kinds = np.frombuffer(self._slot_kind, dtype=np.int8)[folded_slots].tolist()
        classify, buckets = _classify, self._buckets
        codes = []
        for i, kind in zip(fold.tolist(), kinds, strict=True):
            category = classify(names[i], kind) if classify is not None else ""
            bucket = buckets.get((kind, category))
            if bucket is None:
                bucket = buckets[(kind, category)] = len(buckets)
                if bucket > 127:
                    raise OverflowError("more than 128 'other' rows")  # kinds × categories: about 20
            codes.append(bucket)
        ids = np.frombuffer(self._slot_id, dtype=np.int64)[folded_slots]
        np.frombuffer(self._target, dtype=np.int8)[ids] = codes
        self._free.extend(folded_slots.tolist())
        self.folded += len(codes)
        slot_list = slots.tolist()
        self.live = {names[i]: slot_list[i] for i in np.sort(order[:keep]).tolist()}

    def __len__(self) -> int:
        return len(self.kind)

    def finish(self) -> tuple[list[str], dict[int, str], np.ndarray]:
        """(names, category of each "other" row by its index, each activity's name index: int16
        while there are fewer than 32,768 rows, else int32). The admission ids are decoded and
        mapped chunk by chunk; the ids and the admissions' table are freed."""
        if len(self.live) > self.cap:
            self._prune(self.cap)
        live_ids: list[int] = []
        names: list[str] = []
        for name, slot in self.live.items():
            live_ids.append(self._slot_id[slot])
            names.append(name)
        categories: dict[int, str] = {}
        bucket_final = np.zeros(max(len(self._buckets), 1), dtype=np.int64)
        for (kind, category), bucket in self._buckets.items():
            bucket_final[bucket] = len(names)
            if category:
                categories[len(names)] = category
            what = f"{KIND_LABELS[kind]}s" + (f", {category}" if category else "")
            names.append(f"(other {what}: names beyond the top {self.cap:,})")
        order = np.argsort(np.asarray(live_ids, dtype=np.int64), kind="stable")
        known_ids = np.asarray(live_ids, dtype=np.int64)[order]
        known_finals = order.astype(np.int64)  # live names come first, in the table's order
        target = np.frombuffer(self._target, dtype=np.int8) if len(self._target) else np.empty(0, np.int8)
        column = np.empty(len(self.name), dtype=np.int16 if len(names) < 2**15 else np.int32)
        at = 0
        for ids in self.name.pieces():
            goes = target[ids]
            final = np.where(goes >= 0, bucket_final[np.maximum(goes, 0)], 0)
            kept = np.flatnonzero(goes < 0)
            if kept.size:
                final[kept] = known_finals[np.searchsorted(known_ids, ids[kept])]
            column[at : at + ids.size] = final
            at += ids.size
        del target
        self._slot_total, self._slot_kind, self._slot_id, self._free = array("d"), array("b"), array("q"), []
        self._target = array("b")
        return names, categories, column

    def take_times(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, duration) as float64 columns, decoded one after the other (packed chunks
        freed as they are decoded)."""
        return self.start.take(), self.dur.take()


def _widened(column: array, value: int) -> array:
    """A 16- or 32-bit id column widened to 64 bits (``value`` appended; -1 when it does not fit 64)."""
    if column.typecode in ("h", "i"):
        column = array("q", column)
    try:
        column.append(value)
    except OverflowError:
        column.append(-1)
    return column


def in_time_order(start: np.ndarray) -> bool:
    """Whether ``start`` never decreases (compared in chunks of ``PACK_CHUNK``: no whole-column
    temporaries)."""
    for a in range(0, start.size - 1, PACK_CHUNK):
        b = min(start.size, a + PACK_CHUNK + 1)
        if not bool((start[a + 1 : b] >= start[a : b - 1]).all()):
            return False
    return True


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
