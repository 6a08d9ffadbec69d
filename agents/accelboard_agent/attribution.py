"""Who holds each GPU and MIG instance now: the agent's sources, joined into holdings.

1. Sources, each switched on by configuration (``config.py``): NVML's compute processes per GPU
   and MIG instance with their per-process SM utilisation (``attribution_nvml``); each process's
   cgroup, naming its pod or Slurm job (``attribution_cgroups``, under ``procfs``); the kubelet's
   pod-resources API (``kubelet``), naming the pod and container that hold each GPU or MIG
   device; dcgm-exporter's Slurm job-mapping directory (``slurm_job_mapping_dir``), with
   ``scontrol`` for a job's user, account and partition (``slurm_scontrol``).
2. A workload is a pod (``uid``: ``<namespace>/<name>`` when the kubelet names it, which
   pod-resources does by name, not UID; else the pod UID its cgroup names), a Slurm job (its id)
   or a bare process (``<pid>@<start time>``). A process in a pod the kubelet lists on the same
   device is that pod: the only one listed, or the one named by the process's ``HOSTNAME``.
3. A device's holders are the workloads of its processes, the pods the kubelet assigns it and
   the jobs the mapping lists for it. One holder holds it all (``exclusive``); several share it
   by measured SM utilisation where NVML reported it for every process on the device
   (``measured``), else evenly (``even``) (``intervals.shares_split``).
4. A MIG-mode GPU is not a holder's device: its instances are; the kubelet's ``nvidia.com/mig-*``
   ids are instance UUIDs. The job-mapping files name whole GPUs by index.
5. The kubelet's pod list (``kubelet_pods_url``, ``kubelet_pods.py``) adds to a pod what
   pod-resources and cgroups do not say: its labels (those the ``pod_labels`` allowlist lets
   through) and, for a pod known only by its cgroup's UID, its namespace and name (its ``uid``
   then ``<namespace>/<name>`` like a pod-resources pod, the container its name) and whether it is
   one of the pods pod-resources lists on the device (then it is that pod).
6. One device holds a workload (kind and uid, the server's key) once: the holdings of two
   containers of one pod (two time-slicing replicas, or a process in a container pod-resources
   did not assign the device to) add up into one, without ``container`` where they differ.
7. A source that fails (the kubelet away) is logged once per outage; the others still answer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from .cgroups import (
    CgroupIdentity,
    cgroup_parse,
    process_cgroup,
    process_hostname,
    process_name,
    process_start,
)
from .gpus import Backend, Device, ProcessUse
from .intervals import Holding, shares_split
from .kubelet_pods import KubeletPods, PodInfo
from .podresources import KubeletError, PodDevice, PodResourcesClient
from .slurm import SlurmJobs, job_mapping_read, user_name

log = logging.getLogger("accelboard_agent.attribution")


@dataclass
class Sources:
    """Which sources are on (from the configuration)."""

    nvml: bool = False
    cgroups: bool = False
    procfs: str = "/proc"
    kubelet_socket: str = ""
    slurm_job_mapping_dir: str = ""
    slurm_scontrol: str = ""
    timeout: float = 5.0
    kubelet_pods_url: str = ""
    kubelet_token_file: str = ""
    kubelet_ca_file: str = ""
    kubelet_insecure: bool = False
    pod_labels: tuple[str, ...] = ()


class Attributor:
    """Reads every switched-on source once per ``observe``."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self.kubelet: PodResourcesClient | None = None
        if sources.kubelet_socket:
            self.kubelet = PodResourcesClient(sources.kubelet_socket, timeout=sources.timeout)
        self.pod_list: KubeletPods | None = None
        if sources.kubelet_pods_url:
            self.pod_list = KubeletPods(
                sources.kubelet_pods_url,
                token_file=sources.kubelet_token_file,
                ca_file=sources.kubelet_ca_file,
                insecure=sources.kubelet_insecure,
                timeout=sources.timeout,
            )
        self.jobs = SlurmJobs(sources.slurm_scontrol)
        self._kubelet_failing = False

    def devices(self, backend: Backend, devices: list[Device]) -> list[Device]:
        """The devices that can be held: each GPU, or its MIG instances when in MIG mode."""
        held: list[Device] = []
        for device in devices:
            instances = backend.instances(device)
            held.extend(instances if instances else [device])
        return held

    def _pods(self) -> dict[str, list[PodDevice]]:
        if self.kubelet is None:
            return {}
        try:
            listed = self.kubelet.devices()
        except KubeletError as exc:
            if not self._kubelet_failing:
                log.warning("%s; pods unknown until it answers", exc)
            self._kubelet_failing = True
            return {}
        if self._kubelet_failing:
            log.warning("kubelet %s answers again", self.sources.kubelet_socket)
        self._kubelet_failing = False
        by_device: dict[str, list[PodDevice]] = {}
        for item in listed:
            by_device.setdefault(item.device, []).append(item)
        return by_device

    def _job(self, job: str, uid: int | None = None) -> dict[str, Any]:
        workload: dict[str, Any] = {"kind": "slurm-job", "uid": job}
        details = self.jobs.details(job)
        workload.update(details)
        if "user" not in workload and uid is not None:
            name = user_name(uid)
            if name:
                workload["user"] = name
        return workload

    def _identity(self, process: ProcessUse) -> CgroupIdentity | None:
        if process.cgroup is not None:
            return cgroup_parse(process.cgroup)
        if not self.sources.cgroups:
            return None
        return process_cgroup(self.sources.procfs, process.pid)

    def _pod(self, item: PodDevice) -> dict[str, Any]:
        """A pod pod-resources names, with its allowlisted labels."""
        workload = _pod(item)
        if self.pod_list is not None and self.sources.pod_labels:
            info = self.pod_list.by_name(item.namespace, item.pod)
            if info is not None:
                self._label(workload, info)
        return workload

    def _label(self, workload: dict[str, Any], info: PodInfo) -> None:
        if self.pod_list is not None and self.sources.pod_labels:
            labels = self.pod_list.labels_allowed(info.labels, self.sources.pod_labels)
            if labels:
                workload["labels"] = labels

    def _cgroup_pod(self, identity: CgroupIdentity, pid: int, pods: list[PodDevice]) -> dict[str, Any]:
        """The pod a process's cgroup names: one pod-resources lists on the device when it is
        that pod, else the pod as the pod list (or only its UID) says."""
        candidates = {(p.namespace, p.pod): p for p in pods}
        info = self.pod_list.by_uid(identity.pod_uid) if self.pod_list is not None else None
        if info is not None:
            listed = candidates.get((info.namespace, info.name))
            if listed is not None:
                return self._pod(listed)
            workload: dict[str, Any] = {
                "kind": "pod",
                "uid": f"{info.namespace}/{info.name}",
                "namespace": info.namespace,
                "name": info.name,
            }
            container = info.containers.get(identity.container_id) or identity.container_id[:12]
            if container:
                workload["container"] = container
            self._label(workload, info)
            return workload
        match = next(iter(candidates.values())) if len(candidates) == 1 else None
        if match is None and candidates:
            hostname = process_hostname(self.sources.procfs, pid)
            match = next((p for (_, name), p in candidates.items() if name == hostname), None)
        if match is not None:
            return self._pod(match)
        workload = {"kind": "pod", "uid": identity.pod_uid}
        if identity.container_id:
            workload["container"] = identity.container_id[:12]
        return workload

    def _process_workload(self, process: ProcessUse, pods: list[PodDevice]) -> dict[str, Any]:
        procfs = self.sources.procfs
        identity = self._identity(process)
        if identity is not None and identity.pod_uid:
            return self._cgroup_pod(identity, process.pid, pods)
        if identity is not None and identity.slurm_job:
            return self._job(identity.slurm_job, identity.slurm_uid)
        start = process.start if process.start is not None else process_start(procfs, process.pid)
        name = process.name or process_name(procfs, process.pid)
        return {"kind": "process", "uid": f"{process.pid}@{start}", "name": name}

    def observe(self, backend: Backend, devices: list[Device]) -> dict[str, list[Holding]]:
        """Every holdable device's holders now (an empty list: nobody holds it)."""
        pods = self._pods()
        mapping: dict[int, list[str]] = {}
        if self.sources.slurm_job_mapping_dir:
            mapping = job_mapping_read(self.sources.slurm_job_mapping_dir)
        result: dict[str, list[Holding]] = {}
        for device in self.devices(backend, devices):
            on_device = pods.get(device.uuid, [])
            holders: dict[str, dict[str, Any]] = {}
            for pod in on_device:
                _hold(holders, self._pod(pod))
            if not device.parent_uuid:
                for job in mapping.get(device.index, []):
                    _hold(holders, self._job(job))
            processes = backend.processes(device) if self.sources.nvml else []
            for process in processes:
                workload = self._process_workload(process, on_device)
                _hold(holders, workload, memory=process.memory_bytes, sm_util=process.sm_util)
            measured = bool(processes) and all(p.sm_util is not None for p in processes)
            result[device.uuid] = [
                Holding(
                    workload=holders[key]["workload"],
                    share=share,
                    basis=basis,
                    memory_bytes=holders[key]["memory"],
                    sm_util=holders[key]["sm_util"] if measured else None,
                )
                for key, share, basis in shares_split(holders, measured=measured)
            ]
        return result

    def close(self) -> None:
        if self.kubelet is not None:
            self.kubelet.close()


def _hold(
    holders: dict[str, dict[str, Any]],
    workload: dict[str, Any],
    *,
    memory: int | None = None,
    sm_util: float | None = None,
) -> None:
    """Add a workload to a device's holders; its processes' memory and SM utilisation add up.

    Holders are told apart by kind and uid, as the server tells workloads apart: two containers
    of one pod on one device are one holder (the server refuses one workload's intervals that
    overlap on a device), named without a container where theirs differ.
    """
    key = f"{workload.get('kind', '')}|{workload.get('uid', '')}"
    entry = holders.get(key)
    if entry is None:
        entry = holders[key] = {"workload": dict(workload), "memory": None, "sm_util": None}
    elif entry["workload"].get("container") != workload.get("container"):
        entry["workload"].pop("container", None)
    if memory is not None:
        entry["memory"] = (entry["memory"] or 0) + memory
    if sm_util is not None:
        entry["sm_util"] = (entry["sm_util"] or 0.0) + sm_util


def _pod(item: PodDevice) -> dict[str, Any]:
    workload: dict[str, Any] = {
        "kind": "pod",
        "uid": f"{item.namespace}/{item.pod}",
        "namespace": item.namespace,
        "name": item.pod,
    }
    if item.container:
        workload["container"] = item.container
    return workload
