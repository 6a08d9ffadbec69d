"""Slurm: which job holds which GPU, and whose job it is.

1. dcgm-exporter's job-mapping directory (``--hpc-job-mapping-dir``): a Slurm prolog writes one
   file per GPU, named by the GPU's NVML index, holding the ids of the jobs that hold it, one a
   line (the epilog empties or removes it). ``job_mapping_read`` reads it; a file whose name is
   not an index, and lines that are not job ids, are skipped.
2. A job's user, account, partition and name come from ``scontrol show job -o <id>`` when the
   operator names the ``scontrol`` binary (``slurm_scontrol``); each job is asked once. Without
   it a job carries the user its cgroup's ``uid_<n>`` names, where the passwd database knows it.
"""

from __future__ import annotations

import logging
import os
import pwd
import subprocess

log = logging.getLogger("accelboard_agent.slurm")

SCONTROL_TIMEOUT_S = 5.0
_FIELDS = {"UserId": "user", "Account": "account", "Partition": "partition", "JobName": "name"}


def job_mapping_read(directory: str) -> dict[int, list[str]]:
    """GPU index -> the Slurm job ids the mapping directory lists for it (empty files left out)."""
    mapping: dict[int, list[str]] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return mapping
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as handle:
                jobs = [line.strip() for line in handle if line.strip().isdigit()]
        except OSError:
            continue
        if jobs:
            mapping[int(name)] = sorted(set(jobs), key=int)
    return mapping


def scontrol_parse(text: str) -> dict[str, str]:
    """user, account, partition and name from one ``scontrol show job -o`` line (``Key=Value``
    pairs; ``UserId=alice(1000)`` gives ``alice``)."""
    found: dict[str, str] = {}
    for item in text.split():
        key, _, value = item.partition("=")
        if key in _FIELDS and value and value != "(null)":
            found[_FIELDS[key]] = value.split("(", 1)[0] if key == "UserId" else value
    return found


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return ""


class SlurmJobs:
    """A job's details, asked of ``scontrol`` once per job (none when ``scontrol`` is not set)."""

    def __init__(self, scontrol: str = "") -> None:
        self.scontrol = scontrol
        self._known: dict[str, dict[str, str]] = {}

    def details(self, job: str) -> dict[str, str]:
        if not self.scontrol:
            return {}
        if job not in self._known:
            try:
                result = subprocess.run(
                    [self.scontrol, "show", "job", "-o", job],
                    capture_output=True,
                    text=True,
                    timeout=SCONTROL_TIMEOUT_S,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.warning("scontrol show job %s: %s", job, exc)
                return {}
            if result.returncode != 0:
                # A finished job is forgotten by slurmctld after MinJobAge: remember it has nothing.
                log.info("scontrol show job %s: %s", job, result.stderr.strip()[:200])
            self._known[job] = scontrol_parse(result.stdout) if result.returncode == 0 else {}
        return self._known[job]
