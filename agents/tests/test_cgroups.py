"""A process's pod or Slurm job from /proc/<pid>/cgroup: cgroup v1 and v2, systemd and cgroupfs
drivers, Slurm's paths, and a fake /proc tree."""

from __future__ import annotations

import pytest
from conftest import fake_process  # this folder (no __init__.py): the root tests package must not shadow it

from accelboard_agent.cgroups import CgroupIdentity, cgroup_parse, process_cgroup, process_start

UID = "5d1c0b7e-3f2a-4c1d-9e8f-0a1b2c3d4e5f"
CONTAINER = "3b6f0c9d2e1a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # cgroup v2, systemd driver, containerd
        (
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
            f"{UID.replace('-', '_')}.slice/cri-containerd-{CONTAINER}.scope\n",
            CgroupIdentity(pod_uid=UID, container_id=CONTAINER),
        ),
        # cgroup v2, systemd driver, Guaranteed class (no QoS level), CRI-O
        (
            f"0::/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice/crio-{CONTAINER}.scope\n",
            CgroupIdentity(pod_uid=UID, container_id=CONTAINER),
        ),
        # cgroup v1, cgroupfs driver: one line per hierarchy, the pod in each
        (
            f"12:memory:/kubepods/besteffort/pod{UID}/{CONTAINER}\n"
            f"11:cpu,cpuacct:/kubepods/besteffort/pod{UID}/{CONTAINER}\n1:name=systemd:/\n",
            CgroupIdentity(pod_uid=UID, container_id=CONTAINER),
        ),
        # cgroup v1, cgroupfs, Guaranteed: /kubepods/pod<uid>/<id>
        (f"4:devices:/kubepods/pod{UID}/{CONTAINER}\n", CgroupIdentity(pod_uid=UID, container_id=CONTAINER)),
        # Slurm, cgroup v1
        (
            "7:devices:/slurm/uid_1000/job_4242/step_0/task_0\n6:memory:/slurm/uid_1000/job_4242/step_0\n",
            CgroupIdentity(slurm_job="4242", slurm_uid=1000),
        ),
        # Slurm, cgroup v2 (slurmstepd.scope)
        (
            "0::/system.slice/slurmstepd.scope/job_977/step_batch/user/task_0\n",
            CgroupIdentity(slurm_job="977"),
        ),
        # neither: a login session, a docker container outside Kubernetes
        ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
        (f"0::/system.slice/docker-{CONTAINER}.scope\n", None),
        ("garbage without colons\n", None),
    ],
)
def test_it_reads_pods_and_slurm_jobs_from_cgroup_paths(text, expected):
    assert cgroup_parse(text) == expected


def test_it_reads_a_fake_proc_tree_and_forgets_gone_processes(tmp_path):
    fake_process(
        tmp_path,
        4321,
        cgroup=f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID.replace('-', '_')}"
        f".slice/cri-containerd-{CONTAINER}.scope\n",
        start=987654,
    )

    assert process_cgroup(str(tmp_path), 4321) == CgroupIdentity(pod_uid=UID, container_id=CONTAINER)
    assert process_start(str(tmp_path), 4321) == "987654"
    assert process_cgroup(str(tmp_path), 4322) is None  # exited between NVML's list and the read
    assert process_start(str(tmp_path), 4322) == ""
