"""Slurm: dcgm-exporter's job-mapping directory, a job's cgroup, and scontrol's user, account and
partition (a script standing in for scontrol)."""

from __future__ import annotations

import stat
from types import SimpleNamespace

from conftest import (
    FakeGpu,
    fake_process,
)  # this folder (no __init__.py): the root tests package must not shadow it

from accelboard_agent.attribution import Attributor, Sources
from accelboard_agent.gpus import nvml_open
from accelboard_agent.slurm import job_mapping_read, scontrol_parse

SCONTROL_LINE = (
    "JobId=4242 JobName=pretrain-7b UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A Priority=1 "
    "Nice=0 Account=nlp QOS=normal JobState=RUNNING Partition=gpu AllocNode:Sid=login1:1 TRES=gres/gpu=2"
)


def test_it_reads_the_job_mapping_directory(tmp_path):
    (tmp_path / "0").write_text("4242\n")
    (tmp_path / "1").write_text("4242\n4243\n\n")  # two jobs sharing GPU 1
    (tmp_path / "2").write_text("")  # the epilog emptied it: nobody
    (tmp_path / "README").write_text("not a GPU\n")
    (tmp_path / "3").write_text("not-a-job\n")

    assert job_mapping_read(str(tmp_path)) == {0: ["4242"], 1: ["4242", "4243"]}
    assert job_mapping_read(str(tmp_path / "absent")) == {}


def test_it_reads_user_account_partition_and_name_from_scontrol():
    assert scontrol_parse(SCONTROL_LINE) == {
        "name": "pretrain-7b",
        "user": "alice",
        "account": "nlp",
        "partition": "gpu",
    }
    assert scontrol_parse("JobId=1 Account=(null)") == {}


def test_it_attributes_gpus_to_slurm_jobs_from_the_mapping_and_the_cgroup(fake_nvml, tmp_path):
    gpus = [FakeGpu(0), FakeGpu(1), FakeGpu(2)]
    fake_nvml(gpus)
    mapping = tmp_path / "jobs"
    mapping.mkdir()
    (mapping / "0").write_text("4242\n")
    (mapping / "1").write_text("4242\n4243\n")
    procfs = tmp_path / "proc"
    fake_process(procfs, 900, cgroup="4:devices:/slurm/uid_1000/job_4242/step_0/task_0\n")
    gpus[0].processes = [SimpleNamespace(pid=900, usedGpuMemory=1 << 30)]
    gpus[1].processes = []
    gpus[2].processes = [
        SimpleNamespace(pid=900, usedGpuMemory=2 << 30)
    ]  # not in the mapping: its cgroup says
    scontrol = tmp_path / "scontrol"
    calls = tmp_path / "calls"
    scontrol.write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n'
        f'case "$4" in 4242) echo "{SCONTROL_LINE}";; *) echo "slurm_load_jobs error: Invalid job id" >&2; exit 1;; esac\n'
    )
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IEXEC)
    backend = nvml_open()
    attributor = Attributor(
        Sources(
            nvml=True,
            cgroups=True,
            procfs=str(procfs),
            slurm_job_mapping_dir=str(mapping),
            slurm_scontrol=str(scontrol),
        )
    )

    holdings = attributor.observe(backend, backend.devices)
    attributor.observe(backend, backend.devices)

    alice = {
        "kind": "slurm-job",
        "uid": "4242",
        "name": "pretrain-7b",
        "user": "alice",
        "account": "nlp",
        "partition": "gpu",
    }
    assert [(h.workload, h.share, h.basis, h.memory_bytes) for h in holdings["GPU-fake-0000-aaaa"]] == [
        (alice, 1.0, "exclusive", 1 << 30)
    ]
    # Two jobs listed on GPU 1, no process measured: even; a job scontrol forgot has its id only.
    assert [(h.workload, h.share, h.basis) for h in holdings["GPU-fake-0001-aaaa"]] == [
        (alice, 0.5, "even"),
        ({"kind": "slurm-job", "uid": "4243"}, 0.5, "even"),
    ]
    assert holdings["GPU-fake-0002-aaaa"][0].workload == alice
    assert calls.read_text().splitlines() == ["show job -o 4242", "show job -o 4243"]  # each job asked once
