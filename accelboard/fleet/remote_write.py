"""Prometheus remote-write 1.0, decoded and mapped without the database (pure).

1. ``snappy_decode``: the body is snappy's *block* format (what remote-write 1.0 sends, not the
   framed stream format), decompressed by cramjam; its length header is checked against the limit
   before any memory is given to it.
2. ``write_request_decode``: the protobuf ``prometheus.WriteRequest`` (remote.proto, types.proto),
   parsed by the protobuf package (upb; message classes built from their descriptor, no generated
   code): ``timeseries`` of ``labels`` (name, value) and ``samples`` (value, timestamp ms);
   exemplars, native histograms, metadata and any field a newer sender adds are not read.
   Prometheus sends the same series in every request: a series whose label fields are bytes
   protobuf decoded before, followed by Prometheus's one-sample tail, is read from those bytes
   (``LabelCache``), the rest parsed. Prometheus's stale marker (the NaN with bits
   ``0x7ff0000000000002``) is dropped here: it says a series ended, not a value.
3. ``dcgm_map``: dcgm-exporter's ``DCGM_FI_DEV_*`` series grouped by host (``Hostname``), GPU
   (``UUID``, else ``Hostname`` + ``gpu``; a MIG instance by ``GPU_I_ID`` under its GPU) and
   timestamp into telemetry batches in the shape the agent sends (docs/api-contract.md), each
   sample remembering which series gave each field so that a refusal names the series.
   Other metric names are counted, not refused.

   The framebuffer's used, free and reserved parts are each stored (``mem_*_bytes``) and their sum
   is ``mem_total_bytes`` once used and free are both known; ``DCGM_FI_PROF_*`` ratios are stored
   as % (x 100).

Known limits: ``DCGM_FI_DEV_XID_ERRORS`` is the last XID code, not a count, so it is not stored
as ``xid_errors`` (it is counted as unknown).
"""

from __future__ import annotations

import gc
import math
import struct
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import cramjam
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from accelboard.importers.hostnames import hostname_problem

from .remote_write_pods import Holders, PodLabelRejected, mig_slices, pod_observe, pod_workload

STALE_NAN_BITS = 0x7FF0000000000002
MIB = 1024 * 1024
_DOUBLE = struct.Struct("<d")
_UINT64 = struct.Struct("<Q")
_STALE = _UINT64.pack(STALE_NAN_BITS)


class WriteRejected(Exception):
    """A body or a series that will never be accepted (a 4xx: Prometheus does not retry it)."""

    def __init__(self, message: str, *, code: str = "invalid", status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


# --- snappy -------------------------------------------------------------------------------------


def _uvarint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    end = len(data)
    while True:
        if position >= end:
            raise ValueError("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def snappy_decode(body: bytes, *, max_bytes: int) -> bytes:
    """The decompressed body; 413 when it would exceed ``max_bytes``, 400 when not snappy."""
    try:
        length, _ = _uvarint(body, 0)
    except ValueError:
        raise WriteRejected("body is not snappy-compressed (block format)", code="bad_encoding") from None
    if length > max_bytes:
        raise WriteRejected(
            f"the decompressed body would be {length:,} bytes; at most {max_bytes:,}",
            code="too_large",
            status=413,
        )
    try:
        data = bytes(cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError as exc:
        raise WriteRejected(
            f"body is not snappy-compressed (block format): {exc}", code="bad_encoding"
        ) from None
    if len(data) != length:  # pragma: no cover - cramjam checks the header itself
        raise WriteRejected("snappy length header does not match the data", code="bad_encoding")
    return data


# --- protobuf -----------------------------------------------------------------------------------


# The messages and fields remote-write 1.0 reads: (message, ((field, number, type, repeated of), ...)).
_FieldKind = descriptor_pb2.FieldDescriptorProto
_MESSAGES = (
    ("Label", (("name", 1, _FieldKind.TYPE_STRING, ""), ("value", 2, _FieldKind.TYPE_STRING, ""))),
    ("Sample", (("value", 1, _FieldKind.TYPE_DOUBLE, ""), ("timestamp", 2, _FieldKind.TYPE_INT64, ""))),
    (
        "TimeSeries",
        (("labels", 1, _FieldKind.TYPE_MESSAGE, "Label"), ("samples", 2, _FieldKind.TYPE_MESSAGE, "Sample")),
    ),
    ("WriteRequest", (("timeseries", 1, _FieldKind.TYPE_MESSAGE, "TimeSeries"),)),
)


def _message_classes() -> tuple[Any, Any]:
    """``prometheus.TimeSeries`` and ``prometheus.WriteRequest`` (remote.proto, types.proto: the
    fields remote-write 1.0 reads) as protobuf message classes, built from their descriptor when
    the module loads (no generated code): the protobuf package (upb) parses and checks the wire
    format. Fields not declared here (exemplars, native histograms, metadata, whatever a newer
    sender adds) are kept as unknown fields and not read."""
    file = descriptor_pb2.FileDescriptorProto(
        name="accelboard/prometheus_remote_write.proto", package="prometheus", syntax="proto3"
    )
    for name, fields in _MESSAGES:
        message = file.message_type.add(name=name)
        for field_name, number, kind, of in fields:
            message.field.add(
                name=field_name,
                number=number,
                type=kind,
                label=_FieldKind.LABEL_REPEATED if of else _FieldKind.LABEL_OPTIONAL,
                type_name=f".prometheus.{of}" if of else None,
            )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("prometheus.TimeSeries")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("prometheus.WriteRequest")),
    )


TimeSeries, WriteRequest = _message_classes()


class Labels(Mapping[str, str]):
    """A series' labels, read-only: its metric name (``__name__``) and the rest, ``base``, one dict
    shared by every series of the same device and pod (a GPU's dozen metrics). What the label
    cache keeps per series is then the key's bytes and this pair."""

    __slots__ = ("base", "name")

    def __init__(self, name: str | None, base: dict[str, str]) -> None:
        self.name = name
        self.base = base

    def __getitem__(self, key: str) -> str:
        if key == "__name__":
            if self.name is None:
                raise KeyError(key)
            return self.name
        return self.base[key]

    def get(self, key: str, default: Any = None) -> Any:
        if key == "__name__":
            return default if self.name is None else self.name
        return self.base.get(key, default)

    def __iter__(self) -> Iterator[str]:
        if self.name is not None:
            yield "__name__"
        yield from self.base

    def __len__(self) -> int:
        return len(self.base) + (self.name is not None)

    def __repr__(self) -> str:
        return f"Labels({dict(self)!r})"


@dataclass(slots=True)
class Series:
    """One time series of a WriteRequest: its labels and its (timestamp ms, value) samples, stale
    markers dropped (``stale``: how many)."""

    labels: Mapping[str, str]
    samples: list[tuple[int, float]] = field(default_factory=list)
    stale: int = 0

    @property
    def name(self) -> str:
        labels = self.labels
        if type(labels) is Labels:
            return labels.name or ""
        return labels.get("__name__") or ""


def labels_text(labels: Mapping[str, str]) -> str:
    """``name{a="1", b="2"}``, as Prometheus writes a series."""
    rest = ", ".join(f'{key}="{value}"' for key, value in sorted(labels.items()) if key != "__name__")
    return f"{labels.get('__name__', '')}{{{rest}}}"


class LabelCache:
    """Decoded label sets by their bytes: Prometheus sends the same series in every request, and
    reading a dozen labels field by field costs more than all the rest of a series. Each entry is
    a ``Labels`` whose ``base`` dict (and its strings) is shared with the other series of its
    device and pod: about 500 bytes a series (mostly the key), so a fleet of 2,000 hosts x 8
    GPUs x 18 series (288,000) holds in ~150 MB per web worker. Bounded by ``size`` (settings
    ``PROMETHEUS_SERIES_CACHE``): when full it is emptied, so it must hold every series a worker
    sees, or each one is decoded again about every ``size`` series. The ``Labels`` it returns
    are shared, read-only."""

    def __init__(self, size: int = 500_000) -> None:
        self.size = size
        self._entries: dict[bytes, Labels] = {}
        self._bases: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}

    def peek(self, key: bytes) -> Labels | None:
        return self._entries.get(key)

    def put(self, key: bytes, decoded: dict[str, str]) -> Labels:
        """Keep ``decoded``, the labels of the series whose label fields are ``key``."""
        name = decoded.pop("__name__", None)
        shape = tuple(decoded.items())
        base = self._bases.get(shape)
        if base is None:
            base = {sys.intern(k): sys.intern(v) for k, v in shape}
        if len(self._entries) >= self.size:
            self._entries = {}
            self._bases = {}
        self._bases[shape] = base
        labels = Labels(name if name is None else sys.intern(name), base)
        self._entries[key] = labels
        return labels

    def __len__(self) -> int:
        return len(self._entries)


label_cache = LabelCache()

# The label cache and the cyclic garbage collector: each cached ``Labels`` is an object the
# collector tracks, and a full (generation 2) collection walks every tracked object, so at the
# fleet's 288,000 series (~580,000 tracked objects with Django's) each one took ~0.4 s of CPU,
# about one request in 100, inside whichever request triggered it (2026-12-07, docs/benchmarks.md).
# The entries outlive any request and hold no cycle (``Labels`` refers to strings and a dict of
# strings), so once the cache has grown they are moved out of the collector's generations
# (``gc.freeze``): a frozen object is still freed by its reference count when the cache empties
# itself or replaces it, so the cache's bound holds.
FREEZE_GROWTH = 20_000
_frozen_at = [0]


def label_cache_freeze(*, growth: int = FREEZE_GROWTH) -> bool:
    """After a request (gunicorn's ``post_request``): when ``label_cache`` has grown by
    ``growth`` entries since the last freeze (or shrunk: it empties itself when full), collect
    the garbage of the objects made since (cheap: what was frozen before is not walked) and freeze
    what is left, the new entries with it. True when it froze."""
    size = len(label_cache)
    if size < _frozen_at[0]:
        _frozen_at[0] = 0
    if size - _frozen_at[0] < growth:
        return False
    gc.collect()
    gc.freeze()
    _frozen_at[0] = size
    return True


# Prometheus 2.x writes one sample per series, after the labels: field 2 of 16 bytes (0x12 0x10),
# the value (0x09, 8 bytes), the timestamp (0x10, a varint of 6 bytes: milliseconds from 2004 to
# 2248). The fast path reads that tail when the bytes before it are a label set already decoded.
_TAIL = 18
_UNREAD = object()


def _series_read(message: Any, key: bytes | None) -> Series:
    """A parsed ``TimeSeries`` as a ``Series``; its labels kept in ``label_cache`` under ``key``
    (the bytes of its label fields, when they come first and whole: what the fast path looks up)."""
    decoded = {label.name: label.value for label in message.labels}
    labels: Mapping[str, str] = decoded if key is None else label_cache.put(key, decoded)
    series = Series(labels)
    for sample in message.samples:
        value = sample.value
        if _DOUBLE.pack(value) == _STALE:
            series.stale += 1
        else:
            series.samples.append((sample.timestamp, value))
    return series


def _labels_end(data: bytes, position: int, stop: int) -> tuple[int, int]:
    """Where the run of label fields (tag 0x0A) from ``position`` ends, and how many it holds
    (the series was parsed already: its fields are whole)."""
    count = 0
    while position < stop and data[position] == 0x0A:
        count += 1
        if data[position + 1] < 0x80:  # a one-byte length: the usual label
            position += 2 + data[position + 1]
            continue
        length, position = _uvarint(data, position + 1)
        position += length
    return position, count


def _timeseries_decode(data: bytes) -> list[Series]:
    """The WriteRequest's ``timeseries`` (field 1, tag 0x0A), one by one: a series whose label
    fields are bytes seen before and whose tail is Prometheus's one sample (``_TAIL``) is read
    from those bytes; any other is parsed by protobuf (``TimeSeries``) and its labels kept for
    next time. A request with anything else at its top level (metadata, a field a newer sender
    adds) is parsed whole by protobuf."""
    out: list[Series] = []
    append = out.append
    peek = label_cache.peek
    double = _DOUBLE.unpack_from
    stamps: dict[bytes, Any] = {}  # a timestamp's varint bytes -> its value, None: not one varint
    position, end = 0, len(data)
    while position < end:
        if data[position] != 0x0A:
            return [_series_read(message, None) for message in WriteRequest.FromString(data).timeseries]
        if position + 2 < end and data[position + 1] & 0x80 and data[position + 2] < 0x80:  # 128-16383 bytes
            length, position = (data[position + 1] & 0x7F) | data[position + 2] << 7, position + 3
        elif position + 1 < end and data[position + 1] < 0x80:
            length, position = data[position + 1], position + 2
        else:
            length, position = _uvarint(data, position + 1)
        stop = position + length
        if stop > end:
            raise ValueError("truncated length-delimited field")
        tail = stop - _TAIL
        if (
            tail > position
            and data[tail] == 0x12
            and data[tail + 1] == 0x10
            and data[tail + 2] == 0x09
            and data[tail + 11] == 0x10
            and (labels := peek(data[position:tail])) is not None
        ):
            # A request's samples share a few instants: each timestamp's bytes read once.
            raw = data[tail + 12 : stop]
            stamp = stamps.get(raw, _UNREAD)
            if stamp is _UNREAD:
                try:
                    stamp, after = _uvarint(raw, 0)
                except ValueError:  # protobuf says why below
                    stamp, after = None, 0
                if after != len(raw):
                    stamp = None
                elif stamp >= 1 << 63:
                    stamp -= 1 << 64
                stamps[raw] = stamp
            if stamp is not None:
                value = double(data, tail + 3)[0]
                if value == value or _UINT64.unpack_from(data, tail + 3)[0] != STALE_NAN_BITS:
                    append(Series(labels, [(stamp, value)]))
                else:
                    append(Series(labels, [], 1))
                position = stop
                continue
        message = TimeSeries.FromString(data[position:stop])
        # Cached when the label fields come first and are all its labels (one after the samples
        # is legal, if unusual: the bytes before the tail are then not the label set).
        labels_stop, count = _labels_end(data, position, stop)
        append(_series_read(message, data[position:labels_stop] if count == len(message.labels) else None))
        position = stop
    return out


def write_request_decode(data: bytes) -> list[Series]:
    """The WriteRequest's time series; 400 when ``data`` is not one."""
    try:
        return _timeseries_decode(data)
    except (DecodeError, ValueError, UnicodeDecodeError) as exc:
        raise WriteRejected(
            f"body is not a protobuf prometheus.WriteRequest: {exc}", code="bad_protobuf"
        ) from None


# --- dcgm-exporter ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelNames:
    """The labels dcgm-exporter puts on its series (settings ``PROMETHEUS_LABEL_*``). A label
    renamed ``exported_<name>`` (a target label of the same name, ``honor_labels: false``) is the
    exporter's own and wins."""

    uuid: str = "UUID"
    hostname: str = "Hostname"
    gpu: str = "gpu"
    model: str = "modelName"
    gpu_instance: str = "GPU_I_ID"
    gpu_profile: str = "GPU_I_PROFILE"
    pod: str = "pod"
    namespace: str = "namespace"
    container: str = "container"

    def read(self, labels: Mapping[str, str], name: str) -> str:
        return labels.get(f"exported_{name}") or labels.get(name) or ""


# Metric -> (sample field, factor). Integer fields are rounded (SAMPLE_FIELDS says which).
DCGM_FIELDS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_mj", 1.0),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util", 1.0),
    "DCGM_FI_DEV_FB_USED": ("mem_used_bytes", MIB),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", 1.0),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("throttle_reasons", 1.0),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("throttle_reasons", 1.0),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_errors", 1.0),
    # The framebuffer's other parts: used + free (+ reserved) is the memory's total.
    "DCGM_FI_DEV_FB_FREE": ("mem_free_bytes", MIB),
    "DCGM_FI_DEV_FB_RESERVED": ("mem_reserved_bytes", MIB),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("pcie_replay_errors", 1.0),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("remapped_rows_correctable", 1.0),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("remapped_rows_uncorrectable", 1.0),
    # Profiling counters: DCGM's ratios (0..1) stored as % (x 100), as gpu_util is.
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gr_engine_active", 100.0),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active", 100.0),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy", 100.0),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active", 100.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active", 100.0),
}
INTEGER_FIELDS = frozenset(
    {
        "energy_mj",
        "mem_used_bytes",
        "mem_total_bytes",
        "mem_free_bytes",
        "mem_reserved_bytes",
        "throttle_reasons",
        "ecc_errors",
        "pcie_replay_errors",
        "remapped_rows_correctable",
        "remapped_rows_uncorrectable",
    }
)
KNOWN = frozenset(DCGM_FIELDS)


@dataclass
class HostBatch:
    """One host's part of a request, as a telemetry payload's pieces; ``sources[i][field]``: the
    labels of the series that gave sample ``i``'s ``field``."""

    hostname: str
    accelerators: dict[str, dict[str, Any]] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Mapping[str, str]]] = field(default_factory=list)
    epochs: list[float] = field(default_factory=list)
    holders: Holders = field(default_factory=dict)  # the pods seen on each device (remote_write_pods)


@dataclass
class Mapped:
    hosts: list[HostBatch]
    samples: int  # samples of the request that were read (known metrics, stale markers excluded)
    unknown: Counter[str]  # samples of metrics not mapped, by metric name
    # Samples of series refused one by one (their host name), by ``refused_key``: counted as the
    # unknown ones are, the rest of the request stored.
    refused: Counter[str] = field(default_factory=Counter)
    # The series of metrics not mapped here (vLLM's and Triton's are ``serving``'s).
    others: list[Series] = field(default_factory=list)


def refused_key(metric: str, label: str) -> str:
    """How a series refused for its host label is counted (beside the unknown metrics' names)."""
    return f"{metric} (refused: its {label} label holds a control or format character)"


def _device(series: Series, names: LabelNames) -> tuple[str, str, dict[str, Any]]:
    """(hostname, the sample's GPU UUID, its accelerator registration and its parent's)."""
    labels = series.labels
    hostname = names.read(labels, names.hostname)
    if not hostname:
        raise WriteRejected(f"series {labels_text(labels)} has no {names.hostname!r} label (the host)")
    uuid = names.read(labels, names.uuid)
    index = names.read(labels, names.gpu)
    if not uuid:
        if not index:
            raise WriteRejected(
                f"series {labels_text(labels)} names no GPU: neither {names.uuid!r} nor {names.gpu!r}"
            )
        uuid = f"prom:{hostname}:{index}"
    model = names.read(labels, names.model)
    gpu: dict[str, Any] = {"uuid": uuid}
    if index.isdigit() and int(index) <= 32_767:
        gpu["index"] = int(index)
    if model:
        gpu["name"] = model
    registrations = {"gpu": gpu}
    instance = names.read(labels, names.gpu_instance)
    if instance:
        profile = names.read(labels, names.gpu_profile)
        mig: dict[str, Any] = {"uuid": f"{uuid}/gi{instance}", "parent_uuid": uuid}
        mig["name"] = f"{model} MIG {profile}".strip() if profile else model or "MIG instance"
        slices, total = mig_slices(profile=profile, model=model)
        if slices:
            mig["compute_slices"] = slices
        if total:
            gpu["compute_slices"] = total
        registrations["mig"] = mig
        gpu["mig_mode"] = True
        uuid = mig["uuid"]
    if len(uuid) > 96 or len(hostname) > 255:
        raise WriteRejected(f"series {labels_text(labels)}: host or GPU name too long")
    if any("\x00" in value for value in labels.values()):
        raise WriteRejected(f"series {labels_text(labels)}: a label holds the NUL character")
    return hostname, uuid, registrations


def _identity(labels: Mapping[str, str]) -> Mapping[str, str]:
    """What a device's and a pod's reading depends on: the labels but the metric name (one
    ``Labels.base`` for all of a GPU's series from ``label_cache``), else the labels."""
    return labels.base if type(labels) is Labels else labels


# ``_device`` of a label set seen before: by the identity of its ``_identity`` (``label_cache``
# hands out one base dict per device and pod), holding it so that its id is not reused; cleared
# when full.
_DEVICES: dict[int, tuple[Mapping[str, str], LabelNames, tuple[str, str, dict[str, Any]]]] = {}
_DEVICES_KEPT = 300_000


def _device_cached(series: Series, names: LabelNames) -> tuple[str, str, dict[str, Any]]:
    held = _identity(series.labels)
    entry = _DEVICES.get(id(held))
    if entry is not None and entry[0] is held and (entry[1] is names or entry[1] == names):
        return entry[2]
    found = _device(series, names)
    if len(_DEVICES) >= _DEVICES_KEPT:
        _DEVICES.clear()
    _DEVICES[id(held)] = (held, names, found)
    return found


# The pod of a label set seen before, kept as ``_DEVICES`` keeps its device: each of a GPU's
# series carries the same pod labels, so reading and checking them once per label set (not per
# series of every request) took the pods' share of the mapping from ~0.4 to ~0.1 of it.
_WORKLOADS: dict[int, tuple[Mapping[str, str], LabelNames, dict[str, str] | None]] = {}


def _workload_cached(series: Series, names: LabelNames) -> dict[str, str] | None:
    """The pod on the series' device (``remote_write_pods.pod_workload``), None when idle; 400
    naming the series for a label the attribution would refuse."""
    labels = series.labels
    held = _identity(labels)
    entry = _WORKLOADS.get(id(held))
    if entry is not None and entry[0] is held and (entry[1] is names or entry[1] == names):
        return entry[2]
    try:
        workload = pod_workload(
            pod=names.read(labels, names.pod),
            namespace=names.read(labels, names.namespace),
            container=names.read(labels, names.container),
        )
    except PodLabelRejected as exc:
        raise WriteRejected(f"series {labels_text(labels)}: {exc}") from None
    if len(_WORKLOADS) >= _DEVICES_KEPT:
        _WORKLOADS.clear()
    _WORKLOADS[id(held)] = (held, names, workload)
    return workload


def dcgm_map(series_list: list[Series], *, names: LabelNames) -> Mapped:
    """Group the request's dcgm-exporter samples into one batch per host (see the module's
    docstring); raise ``WriteRejected`` naming the first bad series.

    A GPU's series share one label set but their metric name (``Labels.base``, ``_identity``):
    its device, host batch, registration and pod are read once a request per label set, and each
    of its instants' row is found by (label set, instant), so that what is left per sample is its
    field's value (a request carries about one sample per series: ~18 a GPU-instant)."""
    hosts: dict[str, HostBatch] = {}
    rows: dict[tuple[str, str, int], tuple[dict[str, Any], dict[str, Mapping[str, str]]]] = {}
    # id(label set) -> (its host's batch, None for a refused host name; its device; its pod)
    devices: dict[int, tuple[HostBatch | None, str, dict[str, str] | None]] = {}
    # (id(label set), ms) -> its row in ``rows``
    by_held: dict[tuple[int, int], tuple[dict[str, Any], dict[str, Mapping[str, str]]]] = {}
    unknown: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    others: list[Series] = []
    fields = DCGM_FIELDS
    integers = INTEGER_FIELDS
    isfinite = math.isfinite
    read = 0
    for series in series_list:
        labels = series.labels
        if type(labels) is Labels:
            metric = labels.name or ""
            held: Mapping[str, str] = labels.base
        else:
            metric = labels.get("__name__") or ""
            held = labels
        target = fields.get(metric)
        samples = series.samples
        if target is None:
            unknown[metric] += len(samples)
            others.append(series)
            continue
        if not samples:
            continue
        device = devices.get(id(held))
        if device is None:
            device = devices[id(held)] = _device_batch(series, names, hosts)
        batch, uuid, workload = device
        if batch is None:
            refused[refused_key(metric, names.hostname)] += len(samples)
            continue
        name, factor = target
        integer = name in integers
        for stamp, value in samples:
            if not isfinite(value):
                raise WriteRejected(
                    f"series {labels_text(labels)} has the value {value} at {stamp} ms "
                    "(only Prometheus's stale marker may be NaN)",
                    code="not_finite",
                )
            row = by_held.get((id(held), stamp))
            if row is None:
                row = rows.get((batch.hostname, uuid, stamp))
                if row is None:
                    epoch = stamp / 1000
                    row = rows[(batch.hostname, uuid, stamp)] = ({"time": epoch, "gpu": uuid}, {})
                    batch.samples.append(row[0])
                    batch.sources.append(row[1])
                    batch.epochs.append(epoch)
                by_held[(id(held), stamp)] = row
                pod_observe(batch.holders, device=uuid, stamps=[stamp], workload=workload)
            scaled = value * factor
            if scaled - scaled != 0.0:  # finite, but not once in the column's unit (1e305 MiB)
                raise WriteRejected(
                    f"series {labels_text(labels)} has the value {value} at {stamp} ms, "
                    f"out of range for {name}",
                    code="out_of_range",
                )
            row[0][name] = round(scaled) if integer else scaled
            row[1][name] = labels
        read += len(samples)
    for batch in hosts.values():
        for sample, sources in zip(batch.samples, batch.sources, strict=True):
            # The memory's total, once used and free are both there (reserved where sent); the
            # parts stay stored, so a part that comes in a later request completes the total
            # there (``ingest_services._MERGED_TOTAL``).
            if "mem_used_bytes" in sample and "mem_free_bytes" in sample:
                sample["mem_total_bytes"] = (
                    sample["mem_used_bytes"] + sample["mem_free_bytes"] + sample.get("mem_reserved_bytes", 0)
                )
                sources["mem_total_bytes"] = sources["mem_used_bytes"]
    return Mapped(
        hosts=[batch for batch in hosts.values() if batch.samples],
        samples=read,
        unknown=unknown,
        refused=refused,
        others=others,
    )


def _device_batch(
    series: Series, names: LabelNames, hosts: dict[str, HostBatch]
) -> tuple[HostBatch | None, str, dict[str, str] | None]:
    """(the host batch of the series' device, made if new, None when its host name is refused;
    the device's UUID; the pod on it): read once a request per label set (``dcgm_map``), its
    registration merged into the batch then."""
    hostname, uuid, registrations = _device_cached(series, names)
    batch = hosts.get(hostname)
    if batch is None:
        if hostname_problem(hostname) is not None:
            return None, uuid, None
        batch = hosts[hostname] = HostBatch(hostname)
    for registration in registrations.values():
        batch.accelerators.setdefault(registration["uuid"], {}).update(registration)
    return batch, uuid, _workload_cached(series, names)


# --- decoding and mapping in one pass -----------------------------------------------------------


# Metric -> (sample field, factor, an integer field): ``DCGM_FIELDS`` with ``INTEGER_FIELDS``.
_PLANS = {metric: (name, factor, name in INTEGER_FIELDS) for metric, (name, factor) in DCGM_FIELDS.items()}


class _Unusual(Exception):
    """``_fused_map`` met what only the two-pass path handles (a series not decoded before, several
    samples, a bad value, a field a newer sender adds): that path maps the whole request again."""


def write_request_map(data: bytes, *, names: LabelNames) -> tuple[int, Mapped]:
    """``dcgm_map(write_request_decode(data), names=names)`` and the number of series, in one
    pass where every series is one Prometheus has sent this process before (``label_cache``) with
    its one-sample tail: no ``Series``, list and tuple a series, each sample read from the body
    straight into its row (a request carries ~2,000). Any other request, or one with a value the
    mapping refuses, goes the two-pass way from the start: the same ``Mapped`` and the same
    ``WriteRejected`` (the first bad series named) either way (tests/fleet/test_remote_write_fused.py)."""
    try:
        return _fused_map(data, names)
    except _Unusual:
        pass
    series = write_request_decode(data)
    return len(series), dcgm_map(series, names=names)


def _fused_map(data: bytes, names: LabelNames) -> tuple[int, Mapped]:
    """``write_request_map``'s one pass: ``_timeseries_decode``'s fast path and ``dcgm_map``'s
    loop for a series of one sample, inlined; raises ``_Unusual`` for anything else. Each label
    set's device is read once a request (``dcgm_map``'s ``devices``), and each of its instants'
    row found by the bytes of the instant's timestamp (a request's samples share a few instants;
    the row itself is still keyed by (host, GPU, instant), as ``dcgm_map`` keys it)."""
    hosts: dict[str, HostBatch] = {}
    rows: dict[tuple[str, str, int], tuple[dict[str, Any], dict[str, Mapping[str, str]]]] = {}
    # id(label set) -> (its host's batch, None for a refused host name; its device; its pod;
    # its rows by the timestamp's bytes)
    devices: dict[int, tuple[HostBatch | None, str, dict[str, str] | None, dict[bytes, Any]]] = {}
    unknown: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    others: list[Series] = []
    fields = _PLANS
    entries = label_cache._entries
    double = _DOUBLE.unpack_from
    stamps: dict[bytes, int] = {}
    read = count = 0
    position, end = 0, len(data)
    while position < end:
        if data[position] != 0x0A:
            raise _Unusual
        if position + 2 < end and data[position + 1] & 0x80 and data[position + 2] < 0x80:
            length, position = (data[position + 1] & 0x7F) | data[position + 2] << 7, position + 3
        elif position + 1 < end and data[position + 1] < 0x80:
            length, position = data[position + 1], position + 2
        else:
            raise _Unusual
        stop = position + length
        tail = stop - _TAIL
        if not (
            stop <= end
            and tail > position
            and data[tail] == 0x12
            and data[tail + 1] == 0x10
            and data[tail + 2] == 0x09
            and data[tail + 11] == 0x10
        ):
            raise _Unusual
        labels = entries.get(data[position:tail])
        if labels is None:
            raise _Unusual
        raw = data[tail + 12 : stop]
        position = stop
        count += 1
        value = double(data, tail + 3)[0]
        target = fields.get(labels.name)  # type: ignore[arg-type]
        if target is None or value - value != 0.0:  # not mapped here, or NaN or ±Inf
            stamp = stamps.get(raw)
            if stamp is None:
                stamp = stamps[raw] = _stamp_read(raw)
            stale = value != value and _UINT64.unpack_from(data, tail + 3)[0] == STALE_NAN_BITS
            if target is not None:
                if stale:
                    continue
                raise _Unusual  # refused: by the two-pass path, with its message
            metric = labels.name or ""
            if stale:
                unknown[metric] += 0
                others.append(Series(labels, [], 1))
            else:
                unknown[metric] += 1
                others.append(Series(labels, [(stamp, value)]))
            continue
        held = labels.base
        device = devices.get(id(held))
        if device is None:
            try:
                device = devices[id(held)] = (*_device_batch(Series(labels), names, hosts), {})
            except WriteRejected:
                raise _Unusual from None
        batch, uuid, workload, by_raw = device
        if batch is None:
            refused[refused_key(labels.name or "", names.hostname)] += 1
            continue
        row = by_raw.get(raw)
        if row is None:
            stamp = stamps.get(raw)
            if stamp is None:
                stamp = stamps[raw] = _stamp_read(raw)
            row = rows.get((batch.hostname, uuid, stamp))
            if row is None:
                epoch = stamp / 1000
                row = rows[(batch.hostname, uuid, stamp)] = ({"time": epoch, "gpu": uuid}, {})
                batch.samples.append(row[0])
                batch.sources.append(row[1])
                batch.epochs.append(epoch)
            by_raw[raw] = row
            pod_observe(batch.holders, device=uuid, stamps=[stamp], workload=workload)
        name, factor, integer = target
        scaled = value * factor
        if scaled - scaled != 0.0:
            raise _Unusual  # out of range once scaled: refused by the two-pass path
        sample, sources = row
        sample[name] = round(scaled) if integer else scaled
        sources[name] = labels
        read += 1
    for batch in hosts.values():
        for sample, sources in zip(batch.samples, batch.sources, strict=True):
            if "mem_used_bytes" in sample and "mem_free_bytes" in sample:
                sample["mem_total_bytes"] = (
                    sample["mem_used_bytes"] + sample["mem_free_bytes"] + sample.get("mem_reserved_bytes", 0)
                )
                sources["mem_total_bytes"] = sources["mem_used_bytes"]
    return count, Mapped(
        hosts=[batch for batch in hosts.values() if batch.samples],
        samples=read,
        unknown=unknown,
        refused=refused,
        others=others,
    )


def _stamp_read(raw: bytes) -> int:
    """The timestamp of a fast-path tail's last 6 bytes (one varint, as ``_timeseries_decode``
    reads it); ``_Unusual`` when they are not one."""
    try:
        stamp, after = _uvarint(raw, 0)
    except ValueError:
        raise _Unusual from None
    if after != len(raw):
        raise _Unusual
    return stamp - (1 << 64) if stamp >= 1 << 63 else stamp
