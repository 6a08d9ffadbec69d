"""Which pod held each GPU, from dcgm-exporter's ``pod``, ``namespace`` and ``container`` labels
(Prometheus remote-write), as telemetry attribution intervals (docs/attribution.md). Pure.

dcgm-exporter with Kubernetes pod mapping on puts the pod that holds a GPU (or a MIG instance:
each carries its own) on every series of that device; the labels are empty while no pod holds it.

1. ``pod_observe`` (from ``remote_write.dcgm_map``, per series): every instant a device was seen at,
   and the pods on it then. A pod is the workload ``{"kind": "pod", "uid": "<namespace>/<pod>",
   "namespace", "name", "container"}``: the uid the agent gives a pod the kubelet names, so both
   ways in give one workload. One pod seen with two containers on one device is one holder
   without ``container``.
2. ``pod_intervals``: the holding seen at instant ``t`` covers ``[t, t + step)``, ``step`` the gap
   to the device's next instant in the request, at most the scrape interval
   (``PROMETHEUS_SCRAPE_INTERVAL_S``), and the scrape interval for its last instant. A device
   seen with no pod is idle: no interval. One pod: share 1, basis ``exclusive``; several pods at
   one instant split it evenly (``even``). Consecutive instants held alike (each interval ending
   where the next starts) are one interval, cut at ``MAX_RUN_MS``.
3. ``pod_intervals_trim``: the parts of the request's intervals that the device's stored intervals
   do not cover (``remote_write_services``, under a lock per host). Prometheus cuts a scrape over
   several requests, sends them in parallel shards and again after a failure: the same instant's
   pods come in more than one request, and a request with fewer of a device's instants can see
   another step. The first stored interval over a moment stands; a request never claims it again
   (nothing twice, never a conflict), and one stored as it is now stores nothing.
4. ``pod_intervals_extend``: an interval that starts where a stored one of its device ends, held
   by the same one pod alone, extends that row (to at most ``MAX_RUN_MS``, within its UTC day)
   instead of adding one: Prometheus sends a scrape or two a request, and a steady pod would
   otherwise be a row per GPU-scrape (5,760 a GPU-day at 15 s) where the agent writes 288.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# A merged run of instants is cut at this length: an interval spans at most a day (the
# attribution rule), and a stored hour does not grow.
MAX_RUN_MS = 3_600_000
MAX_NAME = 253
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_PROFILE = re.compile(r"^(\d+)g\.")
# GPU slices of a MIG-capable GPU, by a part of its model name (NVML's maximum MIG device count).
_MIG_TOTALS = (("A30", 4), ("A100", 7), ("A800", 7), ("H100", 7), ("H800", 7), ("H200", 7), ("B200", 7))

WorkloadKey = tuple[str, str]
# device UUID -> instant (ms) -> the pods on it then, by (kind, uid)
Holders = dict[str, dict[int, dict[WorkloadKey, dict[str, str]]]]


class PodLabelRejected(ValueError):
    """A pod label the attribution would refuse (a control character, over 253 characters)."""


def pod_workload(*, pod: str, namespace: str, container: str) -> dict[str, str] | None:
    """The workload of a series' ``pod``, ``namespace`` and ``container`` labels' values, or None
    for an idle device (no pod)."""
    if not pod:
        return None
    for value in (pod, namespace, container):
        if len(value) > MAX_NAME or _CONTROL.search(value):
            raise PodLabelRejected(f"a pod label holds a control character or over {MAX_NAME} characters")
    workload = {"kind": "pod", "uid": f"{namespace}/{pod}" if namespace else pod, "name": pod}
    if namespace:
        workload["namespace"] = namespace
    if container:
        workload["container"] = container
    return workload


def mig_slices(*, profile: str, model: str) -> tuple[int | None, int | None]:
    """(a MIG instance's GPU slices from its profile, ``3g.40gb`` = 3; its GPU's total, 7 on
    A100/H100/H200/B200 and 4 on A30), each None when not known: an instance carries
    ``slices / total`` of its GPU in the allocation (docs/attribution.md)."""
    found = _PROFILE.match(profile)
    slices = int(found.group(1)) if found and 1 <= int(found.group(1)) <= 64 else None
    total = next((count for name, count in _MIG_TOTALS if name in model), None)
    return slices, total


def pod_observe(holders: Holders, *, device: str, stamps: list[int], workload: dict[str, str] | None) -> None:
    """Record that ``device`` was seen at ``stamps`` (ms), held by ``workload`` (None: idle)."""
    instants = holders.setdefault(device, {})
    for stamp in stamps:
        pods = instants.setdefault(stamp, {})
        if workload is None:
            continue
        key = (workload["kind"], workload["uid"])
        was = pods.get(key)
        if was is None:
            pods[key] = workload
        elif was.get("container") != workload.get("container") and "container" in was:
            pods[key] = {name: value for name, value in was.items() if name != "container"}


@dataclass
class PodInterval:
    gpu: str
    start_ms: int
    end_ms: int
    workloads: tuple[dict[str, str], ...]  # the holders, in uid order

    def attribution(self) -> list[dict[str, Any]]:
        """The interval as the telemetry batch's ``attribution`` items (one per holder)."""
        count = len(self.workloads)
        share = 1.0 if count == 1 else int(1e6 / count) / 1e6  # rounded down, as the agent does
        return [
            {
                "gpu": self.gpu,
                "start": self.start_ms / 1000,
                "end": self.end_ms / 1000,
                "workload": workload,
                "share": share,
                "basis": "exclusive" if count == 1 else "even",
            }
            for workload in self.workloads
        ]


def pod_intervals(holders: Holders, *, scrape_ms: int, until_ms: int | None = None) -> list[PodInterval]:
    """The request's holdings as intervals (the module's docstring, 2), by device and start;
    none past ``until_ms`` (the latest end the attribution accepts: a sample just inside the
    telemetry's 5 minutes ahead would otherwise give an interval beyond them, refusing it all)."""
    out: list[PodInterval] = []
    for device in sorted(holders):
        instants = holders[device]
        stamps = sorted(instants)
        run: PodInterval | None = None
        for n, stamp in enumerate(stamps):
            step = scrape_ms if n + 1 == len(stamps) else min(stamps[n + 1] - stamp, scrape_ms)
            if until_ms is not None:
                step = min(step, until_ms - stamp)
            pods = instants[stamp]
            if not pods or step <= 0:
                run = None
                continue
            workloads = tuple(pods[key] for key in sorted(pods))
            if (
                run is not None
                and run.end_ms == stamp
                and run.workloads == workloads
                and stamp + step - run.start_ms <= MAX_RUN_MS
            ):
                run.end_ms = stamp + step
                continue
            run = PodInterval(device, stamp, stamp + step, workloads)
            out.append(run)
    return out


def pod_intervals_trim(
    intervals: list[PodInterval], *, stored: dict[str, list[tuple[int, int]]]
) -> list[PodInterval]:
    """``intervals`` less the time ``stored`` (device -> [(start ms, end ms)]) covers: the parts
    left, each its own interval."""
    out: list[PodInterval] = []
    for interval in intervals:
        pieces = [(interval.start_ms, interval.end_ms)]
        for start, end in stored.get(interval.gpu, ()):
            if end <= interval.start_ms or start >= interval.end_ms:
                continue
            pieces = [
                part
                for low, high in pieces
                for part in ((low, min(high, start)), (max(low, end), high))
                if part[1] > part[0]
            ]
        out.extend(PodInterval(interval.gpu, low, high, interval.workloads) for low, high in pieces)
    return out


_DAY_MS = 86_400_000


@dataclass(frozen=True)
class StoredInterval:
    """A stored interval row of a device (``fleet_gpuattribution``), times in ms."""

    id: int
    gpu: str
    start_ms: int
    end_ms: int
    workload: WorkloadKey
    share: float
    basis: str


def pod_intervals_extend(
    intervals: list[PodInterval], *, stored: list[StoredInterval]
) -> tuple[list[tuple[StoredInterval, int]], list[PodInterval]]:
    """(stored rows to extend, each with its new end; the intervals left to add): the module's
    docstring, 4. ``intervals`` are what ``pod_intervals_trim`` left (none overlaps a stored one)."""
    ends: dict[tuple[str, int], StoredInterval] = {}
    for each in stored:
        if each.share == 1.0 and each.basis == "exclusive":
            ends[(each.gpu, each.end_ms)] = each
    extended: dict[int, tuple[StoredInterval, int]] = {}
    rest: list[PodInterval] = []
    for interval in sorted(intervals, key=lambda i: (i.gpu, i.start_ms)):
        row = ends.get((interval.gpu, interval.start_ms))
        if (
            row is not None
            and len(interval.workloads) == 1
            and (interval.workloads[0]["kind"], interval.workloads[0]["uid"]) == row.workload
            and interval.end_ms - row.start_ms <= MAX_RUN_MS
            and row.start_ms // _DAY_MS == (interval.end_ms - 1) // _DAY_MS
        ):
            extended[row.id] = (row, interval.end_ms)
            ends[(interval.gpu, interval.end_ms)] = row
            continue
        rest.append(interval)
    return list(extended.values()), rest
