"""Validation of a telemetry batch's ``attribution`` (docs/attribution.md), without the database.

``attribution_parse`` turns the decoded list into an ``Attribution`` (one list per field, as the
samples are kept) or raises ``IngestRejected`` naming the first bad field: ``attribution[3].share``,
``attribution[3].workload.labels``. What needs the database (the device is this host's, an interval
already stored) is checked by ``attribution_services``; both use ``attribution_conflict``:

1. Per device, each interval [start, end) is two events, its start and its end; events are sorted
   by (device, time, ends before starts), so intervals that touch do not overlap. O(n log n).
2. Sweeping them in that order keeps the intervals open at the current instant: their shares'
   sum and, per workload, the one open interval. A start finds a conflict when its workload
   already has an open interval (one workload overlapping itself), or when the open shares then
   add up to more than 1 (+1e-6, summed exactly with ``math.fsum`` before refusing).
3. The first conflict in time order is returned as (earlier, later, rule), indices into the
   lists given. A caller passing stored intervals after the batch's own (``new``) hears of no
   conflict between two stored ones (they were accepted together), and an over-full instant
   names a stored interval where one is open.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson

from .choices import AttributionBasis, WorkloadKind
from .ingest_validation import IngestRejected, TelemetryBatch, telemetry_batch_parse, time_parse

MAX_INTERVALS = 10_000
# One interval is one workload's hold over one flush of the agent (a sampling interval, or a
# run of them): a day is far above that, and bounds the partitions a batch can need.
MAX_INTERVAL = timedelta(days=1)
# All intervals of a batch lie within this span (the agent's spool holds less): a batch cannot
# ask for more daily partitions than that.
MAX_SPAN = timedelta(days=7)
SHARE_TOLERANCE = 1e-6
_INT64_MAX = 2**63 - 1

INTERVAL_KEYS = frozenset({"gpu", "start", "end", "workload", "share", "basis", "memory_bytes", "sm_util"})
# Names and ids (Kubernetes names are DNS subdomains: at most 253 characters).
WORKLOAD_STRINGS = {
    "uid": 320,  # a pod the kubelet names: "<namespace>/<name>"
    "namespace": 253,
    "name": 253,
    "container": 253,
    "user": 253,
    "account": 253,
    "partition": 253,
}
WORKLOAD_KEYS = frozenset({"kind", "labels", *WORKLOAD_STRINGS})
MAX_LABELS = 64
MAX_LABEL_KEY = 63
MAX_LABEL_VALUE = 256
# C0 and C1 control characters (tabs and newlines included): a name or label shown on a page or
# written to a CSV must not carry them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_KINDS = frozenset(WorkloadKind.values)
_BASES = frozenset(AttributionBasis.values)

WorkloadKey = tuple[str, str]  # (kind, uid)


@dataclass
class Attribution:
    """A batch's validated intervals, one list per field (index i is ``attribution[i]``), and each
    workload's fields (those of its latest interval in the batch)."""

    gpus: list[str] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    workloads: list[WorkloadKey] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)
    bases: list[str] = field(default_factory=list)
    memory_bytes: list[int | None] = field(default_factory=list)
    sm_utils: list[float | None] = field(default_factory=list)
    workload_fields: dict[WorkloadKey, dict[str, Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.gpus)


def _text(value: object, *, path: str, max_length: int, required: bool = False) -> str:
    if value is None:
        if required:
            raise IngestRejected("is required", path=path, code="missing")
        return ""
    if not isinstance(value, str):
        raise IngestRejected("must be a string", path=path, code="type")
    if required and not value:
        raise IngestRejected("must not be empty", path=path, code="invalid")
    if len(value) > max_length:
        raise IngestRejected(f"must be at most {max_length} characters", path=path, code="too_long")
    if _CONTROL.search(value):
        raise IngestRejected("must not hold control characters", path=path, code="control_character")
    return value


def _labels_parse(value: object, *, path: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise IngestRejected("must be an object of strings", path=path, code="type")
    if len(value) > MAX_LABELS:
        raise IngestRejected(f"at most {MAX_LABELS} labels", path=path, code="too_many")
    for key, label in value.items():
        if not key or len(key) > MAX_LABEL_KEY:
            raise IngestRejected(
                f"label key {key[:40]!r} must be 1 to {MAX_LABEL_KEY} characters", path=path, code="too_long"
            )
        if not isinstance(label, str):
            raise IngestRejected(f"label {key[:40]!r} must be a string", path=path, code="type")
        if len(label) > MAX_LABEL_VALUE:
            raise IngestRejected(
                f"label {key[:40]!r} must be at most {MAX_LABEL_VALUE} characters", path=path, code="too_long"
            )
        if _CONTROL.search(key) or _CONTROL.search(label):
            raise IngestRejected(
                f"label {key[:40]!r} must not hold control characters (in its key or value)",
                path=path,
                code="control_character",
            )
    return dict(value)


def _workload_parse(value: object, *, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise IngestRejected("must be an object", path=path, code="type")
    unknown = sorted(set(value) - WORKLOAD_KEYS)
    if unknown:
        raise IngestRejected(
            f"unknown field {unknown[0]!r}", path=f"{path}.{unknown[0]}", code="unknown_field"
        )
    kind = value.get("kind")
    if kind not in _KINDS:
        raise IngestRejected(
            f"must be one of {', '.join(sorted(_KINDS))}", path=f"{path}.kind", code="invalid"
        )
    out: dict[str, Any] = {"kind": kind}
    for key, max_length in WORKLOAD_STRINGS.items():
        out[key] = _text(value.get(key), path=f"{path}.{key}", max_length=max_length, required=key == "uid")
    out["labels"] = _labels_parse(value.get("labels"), path=f"{path}.labels")
    return out


def _number(value: object, *, path: str, lowest: float, highest: float, low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise IngestRejected("must be a number", path=path, code="type")
    if value > highest or value < lowest or (low_open and value == lowest):
        bound = "(" if low_open else "["
        raise IngestRejected(f"must be in {bound}{lowest:g}, {highest:g}]", path=path, code="out_of_range")
    return float(value)


def attribution_parse(value: object, *, now: datetime) -> Attribution:
    """Validate a batch's ``attribution`` list (docs/attribution.md); raise ``IngestRejected``
    (422) naming the first bad field, or both intervals of an overlap."""
    if not isinstance(value, list):
        raise IngestRejected("must be a list", path="attribution", code="type")
    if len(value) > MAX_INTERVALS:
        raise IngestRejected(
            f"at most {MAX_INTERVALS} intervals per batch (got {len(value)})",
            path="attribution",
            code="too_many",
        )
    parsed = Attribution()
    # An agent repeats one workload in every interval it held: each distinct object is read once.
    seen: dict[bytes, dict[str, Any]] = {}
    latest: dict[WorkloadKey, float] = {}
    for i, item in enumerate(value):
        path = f"attribution[{i}]"
        if not isinstance(item, dict):
            raise IngestRejected("must be an object", path=path, code="type")
        unknown = sorted(set(item) - INTERVAL_KEYS)
        if unknown:
            raise IngestRejected(
                f"unknown field {unknown[0]!r}", path=f"{path}.{unknown[0]}", code="unknown_field"
            )
        for name in ("gpu", "start", "end", "workload", "share", "basis"):
            if item.get(name) is None:
                raise IngestRejected("is required", path=f"{path}.{name}", code="missing")
        gpu = _text(item["gpu"], path=f"{path}.gpu", max_length=96, required=True)
        start = time_parse(item["start"], path=f"{path}.start", now=now)
        end = time_parse(item["end"], path=f"{path}.end", now=now)
        if end <= start:
            raise IngestRejected("must be after start", path=f"{path}.end", code="invalid_interval")
        if end - start > MAX_INTERVAL.total_seconds():
            raise IngestRejected(
                "an interval spans at most 24 hours (send one per flush)", path=f"{path}.end", code="too_long"
            )
        try:
            raw = orjson.dumps(item["workload"])
        except TypeError:  # an integer beyond 64 bits
            raw = b""
        workload = seen.get(raw) if raw else None
        if workload is None:
            workload = _workload_parse(item["workload"], path=f"{path}.workload")
            if raw:
                seen[raw] = workload
        share = _number(item["share"], path=f"{path}.share", lowest=0.0, highest=1.0, low_open=True)
        basis = item["basis"]
        if basis not in _BASES:
            raise IngestRejected(
                f"must be one of {', '.join(sorted(_BASES))}", path=f"{path}.basis", code="invalid"
            )
        memory = item.get("memory_bytes")
        if memory is not None and (
            isinstance(memory, bool) or not isinstance(memory, int) or not 0 <= memory <= _INT64_MAX
        ):
            raise IngestRejected(
                f"must be an integer between 0 and {_INT64_MAX}", path=f"{path}.memory_bytes", code="type"
            )
        sm_util = item.get("sm_util")
        if sm_util is not None:
            sm_util = _number(sm_util, path=f"{path}.sm_util", lowest=0.0, highest=100.0)
        key = (workload["kind"], workload["uid"])
        if end >= latest.get(key, -math.inf):
            latest[key] = end
            parsed.workload_fields[key] = workload
        parsed.gpus.append(gpu)
        parsed.starts.append(start)
        parsed.ends.append(end)
        parsed.workloads.append(key)
        parsed.shares.append(share)
        parsed.bases.append(basis)
        parsed.memory_bytes.append(memory)
        parsed.sm_utils.append(sm_util)
    if parsed.gpus and max(parsed.ends) - min(parsed.starts) > MAX_SPAN.total_seconds():
        raise IngestRejected(
            f"a batch's intervals lie within {MAX_SPAN.days} days", path="attribution", code="too_long"
        )
    conflict = attribution_conflict(
        gpus=parsed.gpus,
        starts=parsed.starts,
        ends=parsed.ends,
        workloads=parsed.workloads,
        shares=parsed.shares,
    )
    if conflict is not None:
        earlier, later, rule = conflict
        raise IngestRejected(
            f"overlaps attribution[{earlier}] on GPU {parsed.gpus[later]!r}: {rule}",
            path=f"attribution[{later}]",
            code="overlap",
        )
    return parsed


def telemetry_batch_attribution_parse(
    payload: object, *, now: datetime
) -> tuple[TelemetryBatch, Attribution | None]:
    """``telemetry_batch_parse``, then the batch's ``attribution`` when it carries one (None when
    it does not: such a batch costs what it cost before attribution)."""
    batch = telemetry_batch_parse(payload, now=now)
    given = payload.get("attribution") if isinstance(payload, dict) else None
    if given is None:
        return batch, None
    return batch, attribution_parse(given, now=now)


SAME_WORKLOAD = "one workload's intervals on one device must not overlap"
OVER_FULL = "the shares held at one instant add up to more than 1"


def attribution_conflict(
    *,
    gpus: list[Any],
    starts: list[float],
    ends: list[float],
    workloads: list[Any],
    shares: list[float],
    new: int | None = None,
) -> tuple[int, int, str] | None:
    """The first overlap in time order as (earlier index, later index, rule), or None (the sweep
    of this module's docstring). ``new``: only the first ``new`` intervals are the batch's, the
    rest stored ones; a conflict between two stored ones is not reported."""
    count = len(gpus)
    new = count if new is None else new
    # (device, time, 0 = end / 1 = start, index): at one instant ends come first ([start, end)).
    events = [(gpus[i], starts[i], 1, i) for i in range(count)]
    events.extend((gpus[i], ends[i], 0, i) for i in range(count))
    events.sort(key=lambda event: (str(event[0]), event[1], event[2], event[3]))
    device: object = None
    open_shares: dict[int, float] = {}
    open_by_workload: dict[Any, int] = {}
    total = 0.0
    for gpu, _, is_start, i in events:
        if gpu != device:
            device, open_shares, open_by_workload, total = gpu, {}, {}, 0.0
        if not is_start:
            total -= open_shares.pop(i, 0.0)
            if open_by_workload.get(workloads[i]) == i:
                del open_by_workload[workloads[i]]
            continue
        other = open_by_workload.get(workloads[i])
        if other is not None and min(other, i) < new:
            return min(other, i), max(other, i), SAME_WORKLOAD
        open_by_workload[workloads[i]] = i
        open_shares[i] = shares[i]
        total += shares[i]
        if total > 1 + SHARE_TOLERANCE:
            total = math.fsum(open_shares.values())
            if total > 1 + SHARE_TOLERANCE:
                # Name one of the other side (a stored one for a new interval, and back), the
                # largest share first.
                others = [j for j in open_shares if j != i and (j < new) != (i < new)]
                if i < new and not others:
                    others = [j for j in open_shares if j != i]
                if others:
                    other = max(others, key=lambda j: (open_shares[j], -j))
                    return min(other, i), max(other, i), OVER_FULL
    return None
