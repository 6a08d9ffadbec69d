"""PyTorch profiler (Kineto) Chrome-trace JSON: one file per rank, plain or gzipped.

Written by ``torch.profiler.tensorboard_trace_handler`` (``*.pt.trace.json[.gz]``) or
``prof.export_chrome_trace``; CUDA (CUPTI) and ROCm (roctracer) traces have the same shape. The
file is streamed (``jsonstream``): GPU activities become typed columns (``profile_data``), CPU
events are summed by name while reading, nothing else is kept. Memory is bounded whatever the
names: at most ``MAX_NAMES`` activity names and ``MAX_CPU_NAMES`` CPU names are kept by name
(``BoundedEventColumns``, ``fold_sums``), the others summed in "(other ...)" rows, with a warning;
a profile of more than ``profile_data.MAX_ACTIVITIES`` GPU activities (all its files) is refused
with ``TooLarge`` (code ``too_large``) as soon as reading reaches the limit (an activity of a
trace out of time order counts ``OUT_OF_ORDER_EXTRA`` more, checked at the end of the reading).

What is read, event by event (complete events, ``"ph": "X"``; categories compared ignoring case,
old spellings included):

1. GPU activities: ``kernel``, ``gpu_memcpy`` / ``Memcpy``, ``gpu_memset`` / ``Memset``; start
   ``ts`` and ``dur`` in microseconds (fractions kept, never rounded), stream from
   ``args.stream`` (else ``tid``), device from ``args.device``, ``args.correlation``.
2. Launches: ``cuda_runtime`` / ``cuda_driver`` / ``Runtime`` events: their ``correlation``
   gives each GPU activity the CPU time it was launched at (for idle gaps spent waiting on the
   host); their durations are summed by API name.
3. Steps: ``ProfilerStep#N`` ranges (``user_annotation`` or ``cpu_op``).
4. CPU operators (``cpu_op``, ``user_annotation``): count and inclusive time by name.
5. Header keys: ``distributedInfo`` (rank, world size, backend), ``deviceProperties`` (GPU
   names), ``schemaVersion``, ``traceName``; a file without them is rank ``index`` of the upload.
6. Other accelerators (Intel Gaudi/HPU and XPU, Google TPU, AWS Neuron, ...): when a file has no
   activity in the categories of point 1, its device activity is read by what the trace declares.
   A process is a device when its ``process_name`` metadata names one with an index (``HPU 0``,
   ``/device:TPU:0``, ``NeuronCore 1``, ``XPU:0``) or a ``deviceProperties`` name, or, without
   such names, when its ``pid`` is a ``deviceProperties`` id that no CPU-side event uses. Complete
   events on a device process, in a category not known as CPU-side, are its activities: copies
   when the category or name says ``memcpy``/``dma``, memsets for ``memset``, kernels otherwise
   (their category then comes from their name). Stream is ``tid``, device is the process's index.

GPU annotations (``gpu_user_annotation``) span other activities and are not GPU work: skipped.
A missing (or non-numeric) duration is counted as 0 and reported once as a warning; a NaN,
infinite or negative duration, a missing, non-numeric, NaN or infinite timestamp of an event that
is read, a ``traceEvents`` that is not an array, or an element of it that is not an object is a
ParseError naming the event (``traceEvents[12].dur``): such a file is broken, and reading it as
"no GPU activity" would replace a run's profile with a wrong one. A file that names a device
but holds no activity read on it says so (a warning naming the categories not read as device
work), never that it is CPU-only.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import re
import sys
import zlib
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from . import profile_data
from .base import ParseError
from .jsonstream import ByteStream, JsonStreamError, stream_document
from .profile_data import (
    KERNEL,
    LAUNCH_WEIGHT,
    MAX_CPU_NAMES,
    MEMCPY,
    MEMSET,
    OUT_OF_ORDER_EXTRA,
    BoundedEventColumns,
    EventColumns,
    GpuEvents,
    PackedColumn,
    ProfileData,
    RankTrace,
    Step,
    TooLarge,
    TooManyActivities,
    column_array,
    fold_sums,
    in_time_order,
)

NAME = "kineto"
LABEL = "PyTorch profiler (Kineto) trace"

_GPU, _RUNTIME, _OP, _ANNOTATION = 10, 11, 12, 13
_CATEGORIES = {
    "kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "memset": MEMSET,
    "cuda_runtime": _RUNTIME,
    "cuda_driver": _RUNTIME,
    "runtime": _RUNTIME,
    "cpu_op": _OP,
    "operator": _OP,
    "user_annotation": _ANNOTATION,
}
# The spellings seen in files, looked up before lower-casing (the common case costs one lookup).
_CATEGORY_LOOKUP = {**_CATEGORIES, **{key.capitalize(): value for key, value in _CATEGORIES.items()}}
# Categories that are never device work (lower case): host-side, flows, annotations, markers.
_NOT_DEVICE = frozenset(
    {
        "python_function",
        "cpu_instant_event",
        "trace",
        "overhead",
        "ac2g",
        "fwdbwd",
        "flow",
        "gpu_user_annotation",
        "cuda_profiler_range",
        "cuda_sync",
        "gpu_mem",
        "memory",
        "cpu_mem",
        "python",
        "",
    }
)
# A process named after a device and its index: "HPU 0", "/device:TPU:0", "NeuronCore 1", "xpu:0".
_DEVICE_PROCESS = re.compile(
    r"(?:gpu|hpu|xpu|tpu|npu|ipu|mtia|gaudi\d?|neuron\s*core|neuron|device|accelerator)[\s:#/_-]*(\d+)",
    re.I,
)
_FLOAT_MAX = sys.float_info.max
_OTHER_OPS = f"(other CPU operators beyond the top {MAX_CPU_NAMES:,})"
_OTHER_RUNTIME = f"(other runtime calls beyond the top {MAX_CPU_NAMES:,})"
_STEP = re.compile(r"ProfilerStep#(\d+)")
_SNIFF = re.compile(rb'"traceEvents"\s*:|^\s*\[\s*\{[^{}]*"ph"\s*:', re.S)


def _head(data: bytes) -> bytes:
    if data[:2] == b"\x1f\x8b":
        try:
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, 65536)
        except zlib.error:
            return b""
    return data[:65536]


def sniff(head: bytes) -> bool:
    """True for the first bytes (up to 64 KB, gzipped or not) of a Chrome/Kineto trace."""
    text = _head(head)
    return bool(_SNIFF.search(text)) and b'"ph"' in text or b'"traceEvents"' in text


Source = str | Path | bytes | IO[bytes]


@contextlib.contextmanager
def open_stream(source: Source) -> Iterator[ByteStream]:
    """A binary stream of the trace's JSON text, decompressing gzip on the fly. A stream given by
    the caller is read from its current position and left open."""
    with contextlib.ExitStack() as stack:
        if isinstance(source, bytes):
            raw: IO[bytes] = io.BytesIO(source)
        elif isinstance(source, (str, Path)):
            raw = stack.enter_context(open(source, "rb"))
        else:
            raw = source
        magic = raw.read(2)
        raw.seek(-len(magic), io.SEEK_CUR)
        if magic == b"\x1f\x8b":
            yield stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb"))
        else:
            yield raw


def _int(value: Any, default: int) -> int:
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        match = re.search(r"-?\d+", str(value))
        return int(match.group()) if match else default


def parse_rank(stream: ByteStream, *, name: str, index: int = 0, limit: int | None = None) -> RankTrace:
    """Read one trace file into a ``RankTrace``. Raises ParseError naming the file; ``TooLarge``
    past ``limit`` GPU activities (default ``MAX_ACTIVITIES``)."""
    try:
        return _parse_rank(
            stream, name=name, index=index, limit=profile_data.MAX_ACTIVITIES if limit is None else limit
        )
    except TooManyActivities as exc:
        raise TooLarge(name, str(exc)) from None


def _parse_rank(stream: ByteStream, *, name: str, index: int, limit: int) -> RankTrace:
    header: dict[str, Any] = {}
    columns = BoundedEventColumns(limit=limit)
    runtime_corr = array("q")
    runtime_ts = array("d")
    runtime_dur = array("d")
    ops: dict[str, list[float]] = {}
    runtime: dict[str, list[float]] = {}
    steps: dict[int, Step] = {}
    devices: dict[int, int] = {}
    bad_durations = 0
    events_seen = 0
    # Complete events in categories not read above, kept only while they may be another
    # accelerator's activity (point 6): their process and category, resolved at the end.
    other = EventColumns()
    other_pid = array("q")
    other_cat = array("q")
    pids: dict[Any, int] = {}
    cats_seen: dict[str, int] = {}
    process_names: dict[int, str] = {}
    cpu_raw: set[Any] = set()  # the pids of CPU-side events, as the file writes them
    # Keyed by str, asked with whatever a file holds as "cat" (anything else is a miss, None).
    lookup: dict[Any, int] = _CATEGORY_LOOKUP
    add = columns.add

    def on_header(key: str, value: Any) -> None:
        header[key] = value

    try:
        for event in stream_document(stream, array_key="traceEvents", on_header=on_header):
            events_seen += 1
            if type(event) is not dict:
                raise ParseError(
                    name,
                    f"traceEvents[{events_seen - 1}]: expected an event (an object), found {_shown(event)}",
                )
            phase = event.get("ph")
            if phase != "X":
                if phase == "M" and event.get("name") == "process_name":
                    label = (
                        (event.get("args") or {}).get("name") if isinstance(event.get("args"), dict) else None
                    )
                    if isinstance(label, str):
                        process_names[_pid_key(pids, event.get("pid"))] = label
                continue
            cat = event.get("cat")
            code = lookup.get(cat)
            if code is None:
                if not isinstance(cat, str) or (code := _CATEGORIES.get(cat.lower())) is None:
                    if isinstance(cat, str) and cat.lower() not in _NOT_DEVICE:
                        code = _OTHER
                    else:
                        continue
            dur = event.get("dur")
            ts = event.get("ts")
            if type(ts) is not float and type(ts) is not int:
                raise ParseError(
                    name,
                    f"traceEvents[{events_seen - 1}].ts: {_shown(ts)} is not a timestamp "
                    "(a number of microseconds)",
                )
            if not -_FLOAT_MAX <= ts <= _FLOAT_MAX:  # NaN fails both
                raise ParseError(name, f"traceEvents[{events_seen - 1}].ts: {ts!r} is not a finite timestamp")
            if type(dur) is not float and type(dur) is not int:
                bad_durations += 1
                dur = 0.0
            elif not 0 <= dur <= _FLOAT_MAX:
                raise ParseError(
                    name,
                    f"traceEvents[{events_seen - 1}].dur: {dur!r} is not a duration (a finite number >= 0)",
                )
            label = event.get("name")
            if type(label) is not str:
                label = str(label)
            if code == _OTHER:
                assert isinstance(cat, str)
                if len(columns):  # CUDA/ROCm activity read: the other categories are not needed
                    if len(other):
                        other, other_pid, other_cat = EventColumns(), array("q"), array("q")
                    continue
                cat_index = cats_seen.setdefault(cat, len(cats_seen))
                other.add(label, _other_kind(cat, label), ts, dur, _int(event.get("tid"), -1), -1)
                other_pid.append(_pid_key(pids, event.get("pid")))
                other_cat.append(cat_index)
                if len(other_pid) > limit:
                    raise TooManyActivities(profile_data.MAX_ACTIVITIES)
                continue
            if code <= MEMSET:
                args = event.get("args") or {}
                stream_id = args.get("stream")
                if stream_id is None:
                    stream_id = event.get("tid")
                if type(stream_id) is not int:
                    stream_id = _int(stream_id, -1)
                correlation = args.get("correlation")
                if type(correlation) is not int:
                    correlation = _int(correlation, -1)
                device = args.get("device")
                if device is not None:
                    devices[device] = devices.get(device, 0) + 1
                add(label, code, ts, dur, stream_id, correlation)
            elif code == _RUNTIME:
                pid = event.get("pid")
                if type(pid) is int or type(pid) is str:
                    cpu_raw.add(pid)
                slot = runtime.get(label)
                if slot is None:
                    if len(runtime) >= 2 * MAX_CPU_NAMES:
                        fold_sums(runtime, MAX_CPU_NAMES, _OTHER_RUNTIME)
                    runtime[label] = [1, dur]
                else:
                    slot[0] += 1
                    slot[1] += dur
                correlation = (event.get("args") or {}).get("correlation")
                if type(correlation) is int and 0 <= correlation < 1 << 63:
                    if not runtime_corr:
                        columns.launches = True
                    runtime_corr.append(correlation)
                    runtime_ts.append(ts)
                    # The kernels of a CUDA graph share its one launch: no launch call of their own.
                    runtime_dur.append(float("nan") if "GraphLaunch" in label else dur)
            else:
                pid = event.get("pid")
                if type(pid) is int or type(pid) is str:
                    cpu_raw.add(pid)
                if label.startswith("ProfilerStep#"):
                    match = _STEP.match(label)
                    if match:
                        number = int(match.group(1))
                        steps[number] = Step(number=number, start=float(ts), end=float(ts + dur))
                        continue
                slot = ops.get(label)
                if slot is None:
                    if len(ops) >= 2 * MAX_CPU_NAMES:
                        fold_sums(ops, MAX_CPU_NAMES, _OTHER_OPS)
                    ops[label] = [1, dur]
                else:
                    slot[0] += 1
                    slot[1] += dur
    except JsonStreamError as exc:
        raise ParseError(name, f"not a readable trace: {exc}") from None

    if events_seen == 0 and "traceEvents" not in header:
        raise ParseError(name, "no traceEvents: not a PyTorch profiler / Chrome trace")
    if "traceEvents" in header:
        raise ParseError(
            name, f"traceEvents: expected an array of events, found {_shown(header['traceEvents'])}"
        )
    declared = _declared_devices(header)
    trace = RankTrace(rank=index, file=name, ops=ops, runtime=runtime)
    unread: list[str] = []
    if not len(columns) and len(other):
        cpu_pids = {pids[pid] for pid in cpu_raw if pid in pids}
        device_of = _device_processes(process_names, declared, cpu_pids, pids)
        on_device = np.isin(np.frombuffer(other_pid, dtype=np.int64), list(device_of))
        if on_device.any():
            columns = _keep(other, on_device)
            for pid, count in zip(
                *np.unique(np.frombuffer(other_pid, dtype=np.int64)[on_device], return_counts=True),
                strict=True,
            ):
                device = device_of[int(pid)]
                devices[device] = devices.get(device, 0) + int(count)
            read = set(np.frombuffer(other_cat, dtype=np.int64)[on_device].tolist())
            trace.meta["device_categories"] = sorted(cat for cat, i in cats_seen.items() if i in read)
            trace.warnings.append(
                f"{name}: no CUDA/ROCm kernel events; device activity read from the categories "
                f"{', '.join(trace.meta['device_categories'])} on the processes the trace names as devices"
            )
        else:
            unread = sorted(cats_seen)
    trace.events = _events(trace, columns, runtime_corr, runtime_ts, runtime_dur)
    columns_cap = columns.cap
    del columns, other, runtime_corr, runtime_ts, runtime_dur
    trace.steps = [steps[number] for number in sorted(steps)]
    _header(trace, header, devices, declared)
    if bad_durations:
        trace.warnings.append(f"{name}: {bad_durations} events had no duration (counted as 0)")
    if trace.folded_names:
        trace.warnings.append(
            f"{name}: more than {columns_cap:,} distinct GPU activity names: those with the least time are "
            "summed in '(other ...)' rows by kind and category (kept to bound memory; the breakdown "
            "still counts every activity)"
        )
    if _OTHER_OPS in ops or _OTHER_RUNTIME in runtime:
        trace.warnings.append(
            f"{name}: more than {MAX_CPU_NAMES:,} distinct CPU operator or runtime names: "
            "those with the least time are summed in '(other ...)' rows"
        )
    if len(trace.events) == 0:
        if declared:
            trace.warnings.append(
                f"{name}: the trace names {', '.join(sorted(set(declared.values())))} but no device activity "
                "was read on it"
                + (f" (categories not read as device work: {', '.join(unread)})" if unread else "")
                + ": the profiler may have captured host activity only, or run in CUPTI counter mode; "
                "this is not a CPU-only profile"
            )
        else:
            trace.warnings.append(
                f"{name}: no GPU kernels, copies or memsets in this trace and no device named "
                "(CPU-only profile, or captured in CUPTI counter mode)"
            )
    return trace


_OTHER = 14


def _shown(value: Any) -> str:
    """A value as an error shows it: its JSON type and a short repr."""
    if value is None:
        return "missing (or null)"
    kind = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )
    text = repr(value)
    return f"{kind} {text[:40] + '…' if len(text) > 40 else text}"


def _pid_key(pids: dict[Any, int], pid: Any) -> int:
    """A small integer for a process id as the file writes it (int or string)."""
    key = pid if isinstance(pid, (int, str)) else repr(pid)
    found = pids.get(key)
    if found is None:
        found = pids[key] = len(pids)
    return found


def _other_kind(cat: str, label: str) -> int:
    text = f"{cat} {label}".lower()
    if "memset" in text:
        return MEMSET
    if "memcpy" in text or "dma" in text:
        return MEMCPY
    return KERNEL


def _declared_devices(header: dict[str, Any]) -> dict[int, str]:
    """``deviceProperties``: device id -> name."""
    properties = header.get("deviceProperties")
    names: dict[int, str] = {}
    if isinstance(properties, list):
        for item in properties:
            if isinstance(item, dict) and item.get("name"):
                names[_int(item.get("id"), len(names))] = str(item["name"])
    return names


def _device_processes(
    process_names: dict[int, str], declared: dict[int, str], cpu_pids: set[int], pids: dict[Any, int]
) -> dict[int, int]:
    """Which processes (by ``_pid_key``) are devices, and each one's device index (point 6)."""
    found: dict[int, int] = {}
    for key, label in process_names.items():
        if key in cpu_pids:
            continue
        match = _DEVICE_PROCESS.search(label)
        if match:
            found[key] = int(match.group(1))
            continue
        for device, device_name in declared.items():
            if device_name and device_name.lower() in label.lower():
                found[key] = device
    if found or not declared:
        return found
    for pid, key in pids.items():
        if key in cpu_pids or key in process_names:
            continue
        number = _int(pid, -1) if isinstance(pid, int) or str(pid).strip().isdigit() else -1
        if number in declared:
            found[key] = number
    return found


def _keep(columns: EventColumns, mask: np.ndarray) -> BoundedEventColumns:
    """The rows of ``columns`` where ``mask`` holds (names renumbered, bounded as the others)."""
    kept = BoundedEventColumns()
    names = list(columns.names)
    arrays = (columns.start, columns.dur, columns.stream, columns.kind, columns.name)
    start, dur, stream, kind, name = (np.asarray(a) for a in arrays)
    for i in np.flatnonzero(mask).tolist():
        kept.add(names[int(name[i])], int(kind[i]), float(start[i]), float(dur[i]), int(stream[i]), -1)
    return kept


def _events(
    trace: RankTrace, columns: BoundedEventColumns, runtime_corr: array, runtime_ts: array, runtime_dur: array
) -> GpuEvents:
    """The columns as arrays. In an order that keeps the peak low: the launch times (from the
    packed correlation ids, chunk by chunk), then the name index (the admissions' table freed),
    then the start and duration columns decoded one after the other."""
    if not len(columns):
        trace.names, trace.name_categories, _ = columns.finish()
        trace.folded_names = columns.folded
        return GpuEvents.empty()
    columns.seal()
    # Without launches, read-only NaN views that take no memory.
    launch: np.ndarray = np.broadcast_to(np.float64(np.nan), (len(columns),))
    launch_dur: np.ndarray = launch
    if runtime_corr:
        launch = np.full(len(columns), np.nan)
        keys = np.frombuffer(runtime_corr, dtype=np.int64)
        times = np.frombuffer(runtime_ts, dtype=np.float64)
        durations = np.frombuffer(runtime_dur, dtype=np.float64)
        order = np.argsort(keys, kind="stable")
        keys, times, durations = keys[order], times[order], durations[order]
        del order
        launch_dur = np.full(len(columns), np.nan)
        a = 0
        for wanted in columns.correlation.pieces():
            where = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
            found = np.flatnonzero((keys[where] == wanted) & (wanted >= 0))
            launch[a + found] = times[where[found]]
            launch_dur[a + found] = durations[where[found]]
            a += wanted.size
        del keys, times, durations
    columns.correlation = PackedColumn("q")
    trace.names, trace.name_categories, name_index = columns.finish()
    trace.folded_names = columns.folded
    start, dur = columns.take_times()
    if not in_time_order(start):
        weight = (LAUNCH_WEIGHT if columns.launches else 1.0) + OUT_OF_ORDER_EXTRA
        if len(columns) * weight > columns.limit:
            raise TooManyActivities(profile_data.MAX_ACTIVITIES)
    return GpuEvents(
        start=start,
        dur=dur,
        stream=column_array(columns.stream),
        kind=column_array(columns.kind),
        name=name_index,
        launch=launch,
        launch_dur=launch_dur,
    )


def _header(trace: RankTrace, header: dict[str, Any], devices: dict[int, int], names: dict[int, str]) -> None:
    info = header.get("distributedInfo")
    if isinstance(info, dict):
        if isinstance(info.get("rank"), int):
            trace.rank = info["rank"]
        if isinstance(info.get("world_size"), int):
            trace.world_size = info["world_size"]
        if info.get("backend"):
            trace.meta["backend"] = str(info["backend"])
    if names:
        trace.meta["declared_devices"] = len(names)
    if devices:
        device = max(devices, key=lambda key: devices[key])
        trace.meta["device_index"] = device
        trace.device = names.get(device, "") or (next(iter(names.values())) if len(names) == 1 else "")
        if len(devices) > 1:
            trace.warnings.append(
                f"{trace.file}: GPU work on {len(devices)} devices in one file; analysed as one rank"
            )
    elif names:
        trace.device = next(iter(names.values()))
    for key in ("schemaVersion", "traceName", "displayTimeUnit"):
        if key in header and isinstance(header[key], (str, int, float)):
            trace.meta[key] = header[key]


def parse(sources: list[tuple[str, Source]]) -> ProfileData:
    """Read several rank files of one run (``(name, path | bytes | binary stream)``) as one profile."""
    ranks: list[RankTrace] = []
    for index, (name, source) in enumerate(sources):
        read = sum(len(trace.events) for trace in ranks if trace.events is not None)
        try:
            with open_stream(source) as stream:
                ranks.append(
                    parse_rank(stream, name=name, index=index, limit=profile_data.MAX_ACTIVITIES - read)
                )
        except OSError as exc:
            raise ParseError(name, f"cannot read: {exc.strerror or exc}") from None
    seen: dict[int, str] = {}
    for trace in ranks:
        if trace.rank in seen:
            raise ParseError(
                trace.file, f"rank {trace.rank} twice (also in {seen[trace.rank]}): give one file per rank"
            )
        seen[trace.rank] = trace.file
    ranks.sort(key=lambda trace: trace.rank)
    warnings = [w for trace in ranks for w in trace.warnings]
    return ProfileData(
        source_format=NAME, files=[name for name, _ in sources], ranks=ranks, warnings=warnings
    )
