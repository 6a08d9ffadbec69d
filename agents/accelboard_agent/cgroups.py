"""Which workload a process belongs to, from ``/proc/<pid>/cgroup``.

1. A line of the cgroup file is ``<hierarchy id>:<controllers>:<path>``; cgroup v2 has one line
   ``0::<path>``, v1 one line per hierarchy. Every path is looked at, the first that names a pod
   or a Slurm job wins.
2. Kubernetes, in the shapes the kubelet's two cgroup drivers make:
   - systemd: ``/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with _>.slice/
     cri-containerd-<id>.scope`` (also ``docker-<id>.scope``, ``crio-<id>.scope``);
   - cgroupfs: ``/kubepods/burstable/pod<uid>/<id>`` (and ``/kubepods/pod<uid>/<id>`` for the
     Guaranteed class).
   The pod UID comes back with dashes; the container id is the runtime's 64-hex id.
3. Slurm: ``/slurm/uid_<n>/job_<id>/step_<step>/...`` (also ``system.slice/slurmstepd.scope/
   job_<id>/...`` of cgroup v2 Slurm): the job id and the user's uid.
4. ``procfs`` is the root to read (``/proc``; tests give a fake tree). A process that is gone or
   unreadable is no workload (None), never an error.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_POD_SYSTEMD = re.compile(r"kubepods(?:-[a-z]+)?-pod([0-9a-f_]{36})\.slice")
_POD_CGROUPFS = re.compile(r"/kubepods(?:/[a-z]+)?/pod([0-9a-f-]{36})(?:/|$)")
_CONTAINER_SCOPE = re.compile(r"(?:cri-containerd|docker|crio|containerd)-([0-9a-f]{12,64})\.scope")
_CONTAINER_DIR = re.compile(r"/pod[0-9a-f-]{36}/([0-9a-f]{12,64})(?:/|$)")
_SLURM_JOB = re.compile(r"/job_(\d+)(?:/|$)")
_SLURM_UID = re.compile(r"/uid_(\d+)/")


@dataclass(frozen=True)
class CgroupIdentity:
    """What a process's cgroup says: a pod (``pod_uid``, ``container_id``) or a Slurm job."""

    pod_uid: str = ""
    container_id: str = ""
    slurm_job: str = ""
    slurm_uid: int | None = None


def cgroup_parse(text: str) -> CgroupIdentity | None:
    """The pod or Slurm job named by a ``/proc/<pid>/cgroup`` file's text; None when neither."""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        path = parts[2].strip()
        if "kubepods" in path:
            match = _POD_SYSTEMD.search(path)
            uid = match.group(1).replace("_", "-") if match else ""
            if not uid:
                found = _POD_CGROUPFS.search(path)
                uid = found.group(1) if found else ""
            if uid:
                container = _CONTAINER_SCOPE.search(path) or _CONTAINER_DIR.search(path)
                return CgroupIdentity(pod_uid=uid, container_id=container.group(1) if container else "")
        if "slurm" in path or "/job_" in path:
            job = _SLURM_JOB.search(path)
            if job:
                owner = _SLURM_UID.search(path)
                return CgroupIdentity(
                    slurm_job=job.group(1), slurm_uid=int(owner.group(1)) if owner else None
                )
    return None


def _read(procfs: str, pid: int, name: str) -> str | None:
    try:
        with open(os.path.join(procfs, str(pid), name), encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def process_cgroup(procfs: str, pid: int) -> CgroupIdentity | None:
    """The workload ``pid``'s cgroup names, read under ``procfs``; None when gone or neither."""
    text = _read(procfs, pid, "cgroup")
    return cgroup_parse(text) if text is not None else None


def process_start(procfs: str, pid: int) -> str:
    """The process's start time in clock ticks since boot (``stat`` field 22): with the pid, an
    id no later process reuses. Empty when unreadable."""
    text = _read(procfs, pid, "stat")
    if not text or ")" not in text:
        return ""
    fields = text.rsplit(")", 1)[1].split()
    # After "pid (comm)", field 3 (state) is fields[0]; starttime, field 22, is fields[19].
    return fields[19] if len(fields) > 19 else ""


def process_name(procfs: str, pid: int) -> str:
    text = _read(procfs, pid, "comm")
    return text.strip() if text else ""


def process_hostname(procfs: str, pid: int) -> str:
    """``HOSTNAME`` from the process's environment (a pod's name, as Kubernetes sets it); empty
    when unreadable (the agent not root) or unset."""
    try:
        with open(os.path.join(procfs, str(pid), "environ"), "rb") as handle:
            data = handle.read()
    except OSError:
        return ""
    for item in data.split(b"\0"):
        if item.startswith(b"HOSTNAME="):
            return item[len("HOSTNAME=") :].decode("utf-8", "replace")
    return ""
