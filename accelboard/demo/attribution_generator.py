"""Who ran on each demo GPU (docs/attribution.md): pure functions of the plan and the telemetry.

No ORM, no clock, no global RNG; the choices are hashes of names and times, so the history
(``attribution_history``) and the live fleet (``accelboard.demo.live`` through ``holds``) name
the same pods and jobs for the same GPU and run.

1. ``holds``: which workloads hold a GPU (or its MIG instances) during a run of busy samples,
   from ``plan``: the shared Kubernetes cluster's pod per GPU, the MIG instances' pods, the
   time-sliced GPU's two pods, the Slurm cluster's job of the run, a team's own pods elsewhere.
   Serving hosts run long-lived pods (one per host and template); the others one pod (or one
   Slurm job) per busy run, a few of them unlabelled scratch pods in a namespace nobody maps.
   In the canaries' window (``serving_plan.canary_window``) each canary's GPU is held by the
   canary's own pod instead of the stable deployment's (``serving_plan.CANARIES``): the GPUs
   the serving metrics name, interval by interval (``accelboard.demo.canary``).
2. ``host_intervals``: a host's busy runs in its telemetry (consecutive samples with utilisation
   above 0; a gap in the samples ends a run) held by those workloads, cut at midnight UTC as the
   server stores them; the time-sliced GPU's two shares are measured per hour.
3. ``mig_instances``: the MIG instances of ``plan.MIG``, with stable fake UUIDs.
"""

from __future__ import annotations

import hashlib
import math
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import generator, plan, serving_plan

DAY = generator.DAY
HOUR = 3600
# Shares are rounded down, as the agent does, so two of them never add up to more than 1.
SHARE_STEP = 1e-6


@dataclass(frozen=True)
class WorkloadPlan:
    """A workload in the wire's fields (docs/attribution.md)."""

    kind: str  # pod | slurm-job
    uid: str
    namespace: str = ""
    name: str = ""
    container: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    user: str = ""
    account: str = ""
    partition: str = ""

    def wire(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"kind": self.kind, "uid": self.uid}
        for name in ("namespace", "name", "container", "user", "account", "partition"):
            if getattr(self, name):
                fields[name] = getattr(self, name)
        if self.labels:
            fields["labels"] = dict(self.labels)
        return fields


@dataclass(frozen=True)
class Hold:
    """``workload`` holds ``device`` (a GPU or MIG instance UUID) whole, or with ``sliced`` its
    place among the time-sliced GPU's pods (``sliced_shares``)."""

    device: str
    workload: WorkloadPlan
    sliced: int | None = None


@dataclass(frozen=True)
class Interval:
    device: str
    start: int  # epoch seconds, [start, end)
    end: int
    workload: WorkloadPlan
    share: float
    basis: str  # exclusive | measured
    sm_util: float | None = None


@dataclass(frozen=True)
class MigInstance:
    uuid: str
    parent_uuid: str
    profile: str
    slices: int
    memory_bytes: int


@dataclass(frozen=True)
class Node:
    """What ``holds`` needs of a host: the plan's, or the live fleet's from the database."""

    hostname: str
    team: str
    profile: str
    # A MIG GPU's instances, by parent UUID, in ``plan.MIG``'s order.
    instances: dict[str, list[str]] = field(default_factory=dict)


def _digest(*parts: object) -> str:
    return hashlib.sha256(":".join(str(part) for part in parts).encode()).hexdigest()


def _fraction(*parts: object) -> float:
    """A number in [0, 1) from ``parts``: the same parts, the same number."""
    return zlib.crc32(":".join(str(part) for part in parts).encode()) / 2**32


def mig_instances(seed: int, hostname: str, gpus: list[tuple[int, str, int]]) -> dict[str, list[MigInstance]]:
    """``plan.MIG``'s instances on ``hostname``, whose GPUs are (index, UUID, memory bytes), by
    parent UUID."""
    if hostname != plan.MIG["host"]:
        return {}
    result = {}
    for index, parent, memory in gpus:
        if index not in plan.MIG["gpus"]:
            continue
        cut = [
            MigInstance(
                uuid=f"MIG-{uuid.UUID(bytes=bytes.fromhex(_digest(seed, hostname, index, 'mig', slot)[:32]), version=4)}",
                parent_uuid=parent,
                profile=instance["profile"],
                slices=int(instance["slices"]),
                memory_bytes=memory * int(instance["slices"]) // 8,
            )
            for slot, instance in enumerate(plan.MIG["instances"])
        ]
        # Largest first, then by UUID: the order the live fleet reads them back in, so that each
        # instance's pod (``plan.MIG``'s by position) is the same in the history and live.
        result[parent] = sorted(cut, key=lambda instance: (-instance.slices, instance.uuid))
    return result


def _pod(template_key: str, name: str, namespace_uid: bool = True) -> WorkloadPlan:
    template = plan.POD_TEMPLATES[template_key]
    labels: tuple[tuple[str, str], ...] = ()
    if template.get("labels", True):
        pairs = [("app", template["app"]), ("team", template["namespace"]), ("model", template["model"])]
        labels = tuple((key, value) for key, value in pairs if value)
    return WorkloadPlan(
        kind="pod",
        uid=f"{template['namespace']}/{name}" if namespace_uid else name,
        namespace=template["namespace"],
        name=name,
        container=template["app"] or "main",
        labels=labels,
    )


def _template(node: Node, gpu_index: int) -> str:
    cluster = plan.KUBERNETES_CLUSTER["nodes"].get(node.hostname)
    if cluster is not None and gpu_index < len(cluster):
        return str(cluster[gpu_index])
    pods = plan.TEAM_PODS[node.team]
    return pods["serving"] if node.profile == "serving" else pods["other"]


def _slurm_job(node: Node, run_start: int) -> WorkloadPlan:
    nodes = plan.SLURM_CLUSTER["nodes"]
    users = plan.SLURM_CLUSTER["users"]
    who = users[int(_fraction("slurm", node.hostname, run_start) * len(users))]
    # A job id per node and start minute: stable, and the same in the history and the live fleet.
    job_id = (run_start // 60) * len(nodes) + nodes.index(node.hostname)
    return WorkloadPlan(
        kind="slurm-job",
        uid=str(job_id),
        name=who["job"],
        user=who["user"],
        account=who["account"],
        partition=plan.SLURM_CLUSTER["partition"],
    )


def holds(*, node: Node, gpu_index: int, gpu_uuid: str, run_start: int) -> list[Hold]:
    """Who holds a GPU (or its MIG instances) during the busy run that began at ``run_start``."""
    if node.hostname in plan.SLURM_CLUSTER["nodes"]:
        return [Hold(gpu_uuid, _slurm_job(node, run_start))]
    long_lived = node.profile == "serving"
    instances = node.instances.get(gpu_uuid)
    if instances:
        pods = [instance["pod"] for instance in plan.MIG["instances"]]
        return [
            Hold(
                device,
                _pod(
                    pod,
                    f"{plan.POD_TEMPLATES[pod]['app'] or 'debug'}-mig-{_digest(node.hostname, device)[:10]}",
                ),
            )
            for device, pod in zip(instances, pods, strict=False)
        ]
    if node.hostname == plan.TIME_SLICED["host"] and gpu_index == plan.TIME_SLICED["gpu"]:
        return [
            Hold(
                gpu_uuid,
                _pod(pod, f"{plan.POD_TEMPLATES[pod]['app']}-ts-{_digest(node.hostname, pod)[:10]}"),
                n,
            )
            for n, pod in enumerate(plan.TIME_SLICED["pods"])
        ]
    template = _template(node, gpu_index)
    if long_lived:
        # A deployment's pod per host: it holds every GPU of its template there.
        return [
            Hold(
                gpu_uuid,
                _pod(
                    template, f"{plan.POD_TEMPLATES[template]['app']}-{_digest(node.hostname, template)[:10]}"
                ),
            )
        ]
    # Training runs hold every GPU of the host together; the others each GPU by itself.
    key = (node.hostname, run_start) if node.profile == "training" else (node.hostname, gpu_index, run_start)
    if _fraction("scratch", *key) < plan.SCRATCH_SHARE:
        template = "scratch"
    app = plan.POD_TEMPLATES[template]["app"] or "scratch"
    return [Hold(gpu_uuid, _pod(template, f"{app}-{_digest(*key)[:10]}"))]


def held_on(workload: WorkloadPlan, day: int) -> bool:
    """The MIG debug pod holds its instance on even UTC days only; every other hold always."""
    return workload.namespace != "default" or day % 2 == 0


def sliced_shares(hostname: str, hour: int) -> tuple[float, float]:
    """The time-sliced GPU's two pods' measured shares in the hour starting at ``hour``."""
    first = math.floor((0.35 + 0.3 * _fraction("slice", hostname, hour)) / SHARE_STEP) * SHARE_STEP
    second = math.floor((1.0 - first) / SHARE_STEP - 1) * SHARE_STEP
    return round(first, 6), round(second, 6)


def _cut(start: int, end: int, step: int) -> Iterator[tuple[int, int]]:
    """[start, end) cut at each multiple of ``step`` (epoch seconds)."""
    while start < end:
        edge = min(end, start - start % step + step)
        yield start, edge
        start = edge


def busy_runs(epochs: np.ndarray, util: np.ndarray, interval_s: int) -> list[tuple[int, int]]:
    """[start, end) of each run of consecutive samples with utilisation above 0 (a sample holds
    until the next one); a missing sample ends a run."""
    if epochs.size == 0:
        return []
    busy = util > 0
    # A run starts at a busy sample whose previous sample is idle or missing; it ends likewise.
    joined = np.zeros(epochs.size, dtype=bool)
    joined[1:] = busy[1:] & busy[:-1] & (np.diff(epochs) == interval_s)
    starts = np.flatnonzero(busy & ~joined)
    nxt = np.zeros(epochs.size, dtype=bool)
    nxt[:-1] = joined[1:]
    ends = np.flatnonzero(busy & ~nxt)
    return [(int(epochs[a]), int(epochs[b]) + interval_s) for a, b in zip(starts, ends, strict=True)]


def canary_pods(hostname: str) -> dict[int, WorkloadPlan]:
    """The canaries' pods on ``hostname`` by GPU index (``serving_plan.CANARIES``)."""
    if hostname != serving_plan.CANARY_HOST:
        return {}
    return {
        int(canary["gpu"]): _pod(
            canary["pod"],
            f"{plan.POD_TEMPLATES[canary['pod']]['app']}-{_digest(hostname, canary['pod'])[:10]}",
        )
        for canary in serving_plan.CANARIES
    }


def _split(runs: list[tuple[int, int]], edges: tuple[int, int]) -> list[tuple[int, int]]:
    """``runs`` cut at ``edges``, so that each piece lies wholly inside or outside [edges)."""
    pieces: list[tuple[int, int]] = []
    for start, end in runs:
        cuts = [start, *(edge for edge in edges if start < edge < end), end]
        pieces.extend(zip(cuts, cuts[1:], strict=False))
    return pieces


def host_intervals(
    *,
    node: Node,
    gpus: list[tuple[int, str]],
    epochs: np.ndarray,
    util: np.ndarray,
    interval_s: int,
    canary_window: tuple[int, int],
) -> list[Interval]:
    """Every GPU's busy runs (``util``: (GPUs, samples)) held by ``holds``, cut at midnight UTC
    (hourly on the time-sliced GPU, whose shares are measured per hour); a canary's GPU held by
    its pod (``canary_pods``) inside ``canary_window`` ([start, end), epoch seconds)."""
    intervals: list[Interval] = []
    canaries = canary_pods(node.hostname)
    low, high = canary_window
    for row, (index, gpu_uuid) in enumerate(gpus):
        cumulative = np.concatenate([[0.0], np.cumsum(util[row], dtype=np.float64)])
        runs = busy_runs(epochs, util[row], interval_s)
        if index in canaries:
            for run_start, run_end in _split(runs, canary_window):
                inside = low <= run_start and run_end <= high
                workload = (
                    canaries[index]
                    if inside
                    else holds(node=node, gpu_index=index, gpu_uuid=gpu_uuid, run_start=run_start)[0].workload
                )
                intervals.extend(
                    Interval(gpu_uuid, a, b, workload, 1.0, "exclusive")
                    for a, b in _cut(run_start, run_end, DAY)
                )
            continue
        for run_start, run_end in runs:
            for hold in holds(node=node, gpu_index=index, gpu_uuid=gpu_uuid, run_start=run_start):
                if hold.sliced is None:
                    intervals.extend(
                        Interval(hold.device, a, b, hold.workload, 1.0, "exclusive")
                        for a, b in _cut(run_start, run_end, DAY)
                        if held_on(hold.workload, a // DAY)
                    )
                    continue
                for a, b in _cut(run_start, run_end, HOUR):
                    share = sliced_shares(node.hostname, a - a % HOUR)[hold.sliced]
                    i, j = np.searchsorted(epochs, [a, b]).tolist()
                    mean = (cumulative[j] - cumulative[i]) / max(j - i, 1)
                    intervals.append(
                        Interval(hold.device, a, b, hold.workload, share, "measured", round(share * mean, 2))
                    )
    return intervals


def fleet_instances(seed: int, hosts: list[generator.HostPlan]) -> dict[str, list[MigInstance]]:
    """The fleet's MIG instances by parent GPU UUID."""
    result: dict[str, list[MigInstance]] = {}
    for host in hosts:
        gpus = [(gpu.index, gpu.uuid, gpu.memory_bytes) for gpu in host.gpus]
        result.update(mig_instances(seed, host.hostname, gpus))
    return result


def attribution_history(
    *,
    hosts: list[generator.HostPlan],
    telemetry: list[generator.HostTelemetry],
    instances: dict[str, list[MigInstance]],
    interval_s: int,
    canary_window: tuple[int, int],
) -> dict[str, list[Interval]]:
    """Each host's intervals by hostname, from the samples the load stores (``telemetry``);
    ``canary_window``: ``serving_plan.canary_window`` of the telemetry's days."""
    result = {}
    for host, data in zip(hosts, telemetry, strict=True):
        node = Node(
            hostname=host.hostname,
            team=host.team,
            profile=host.profile,
            instances={
                gpu.uuid: [i.uuid for i in instances[gpu.uuid]] for gpu in host.gpus if gpu.uuid in instances
            },
        )
        result[host.hostname] = host_intervals(
            node=node,
            gpus=[(gpu.index, gpu.uuid) for gpu in host.gpus],
            epochs=data.epochs,
            util=data.columns["gpu_util"],
            interval_s=interval_s,
            canary_window=canary_window,
        )
    return result
