"""The demo's training: MLPerf Training results on several systems, and two training jobs on the
shared cluster reporting their progress, one of which slows down mid-run.

1. MLPerf Training: a ``llama2_70b_lora`` result log (``:::MLLOG`` lines, as MLPerf Training v4.1
   writes them) per system and seed, read by the real importer (``importers.mlperf_training``)
   and stored by ``run_import`` for research-platform, then costed (``run_cost_compute``: time,
   energy and cost to train at the price book's reference on-demand row). Times to train are the
   scale of published 8-GPU results; two seeds per system, so the hardware page has medians.
2. Jobs: the two longest runs held by one workload on a training host in the last week (the
   attribution step's pods and Slurm jobs, which hold every GPU of their host together) report a
   point every five minutes over their hold, written as ``training_services`` would store them;
   the first steady, the second 25 % slower from the middle of its run (a straggling node). The
   step-time check (``training_alerts``) is replayed after each hour of points, as the worker
   would have run it, so the slowdown's alert opens when it would have.

Pure choices (hashes of names), no global RNG: the same config writes the same rows.
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Min

from accelboard.attribution.models import TrainingProgress
from accelboard.attribution.training_alerts import training_regression_check
from accelboard.benchmarks.import_services import run_import
from accelboard.core.models import Team
from accelboard.costs.run_cost_services import run_cost_compute
from accelboard.fleet.models import GpuAttribution, Workload
from accelboard.importers import parse_bytes

from . import generator

TEAM = "research-platform"
BENCHMARK = "llama2_70b_lora"
MODEL = "Llama-2-70B"
BATCH = 8
SAMPLES = 3072
# (accelerator as the catalogue names it, platform, minutes to train per seed)
SYSTEMS: tuple[tuple[str, str, tuple[float, ...]], ...] = (
    ("H100 SXM 80GB", "1xNVIDIA DGX H100", (28.1, 28.9)),
    ("H200 SXM 141GB", "1xNVIDIA HGX H200", (23.3, 23.8)),
    ("A100 SXM 80GB", "1xNVIDIA DGX A100", (61.5, 63.0)),
    ("MI300X", "1xAMD MI300X", (29.4, 30.6)),
)
INTERVAL = timedelta(minutes=5)
_NAMESPACE = uuid.UUID("5f0b7c1e-2d7a-4a53-9a35-6c0e5a7d3b21")
# (global batch, tokens per sample, seconds per step, slowdown factor from mid-run)
JOBS = ((512, 4096, 1.20, 1.0), (256, 4096, 0.90, 1.25))


def _fraction(*names: object) -> float:
    return zlib.crc32("|".join(map(str, names)).encode()) / 2**32


def _event(t_ms: int, kind: str, key: str, value: Any, **metadata: Any) -> str:
    meta = {"file": "train.py", "lineno": 1, **metadata}
    return ":::MLLOG " + json.dumps(
        {"namespace": "", "time_ms": t_ms, "event_type": kind, "key": key, "value": value, "metadata": meta}
    )


def mlperf_log(*, start_ms: int, minutes: float, platform: str, seed: int) -> bytes:
    """An MLPerf Training ``result_N.txt`` of ``BENCHMARK``: init, four blocks of training and
    evaluation, run_stop ``minutes`` after run_start with the target reached."""
    stop_ms = start_ms + round(minutes * 60_000)
    lines = [
        _event(start_ms - 90_000, "INTERVAL_START", "init_start", None),
        _event(start_ms - 90_000, "POINT_IN_TIME", "submission_benchmark", BENCHMARK),
        _event(start_ms - 90_000, "POINT_IN_TIME", "submission_org", "Acme Research"),
        _event(start_ms - 90_000, "POINT_IN_TIME", "submission_division", "closed"),
        _event(start_ms - 90_000, "POINT_IN_TIME", "submission_status", "onprem"),
        _event(start_ms - 90_000, "POINT_IN_TIME", "submission_platform", platform),
        _event(start_ms - 90_000, "POINT_IN_TIME", "seed", seed),
        _event(start_ms - 90_000, "POINT_IN_TIME", "global_batch_size", BATCH),
        _event(start_ms - 1, "INTERVAL_END", "init_stop", None),
        _event(start_ms, "INTERVAL_START", "run_start", None),
    ]
    span = stop_ms - start_ms
    for block in range(4):
        samples = SAMPLES * (block + 1) // 4
        end = start_ms + span * (block + 1) // 4 - 25_000
        lines += [
            _event(
                end - 15_000,
                "POINT_IN_TIME",
                "train_loss",
                round(1.4 - 0.05 * block, 4),
                samples_count=samples,
            ),
            _event(end, "INTERVAL_END", "block_stop", None, samples_count=samples),
            _event(
                end + 24_000,
                "POINT_IN_TIME",
                "eval_accuracy",
                round(0.94 - 0.006 * block, 4),
                samples_count=samples,
            ),
        ]
    lines.append(_event(stop_ms, "INTERVAL_END", "run_stop", 0.9221, samples_count=SAMPLES, status="success"))
    return ("\n".join(lines) + "\n").encode()


def mlperf_runs_write(config: generator.DemoConfig, teams: dict[str, Team]) -> int:
    """The MLPerf Training results of ``SYSTEMS`` (module docstring, 1); how many."""
    team = teams[TEAM]
    end = config.telemetry_end
    written = 0
    for s, (accelerator, platform, minutes) in enumerate(SYSTEMS):
        for seed, took in enumerate(minutes):
            start_ms = (end - (6 - s - seed) * generator.DAY - 5 * 3600) * 1000
            data = mlperf_log(start_ms=start_ms, minutes=took, platform=platform, seed=seed)
            for parsed in parse_bytes(data, filename=f"result_{seed}.txt", fmt="mlperf-training"):
                run, _ = run_import(
                    team=team,
                    parsed=parsed,
                    raw_name=f"{BENCHMARK}-{accelerator.split()[0].lower()}-result_{seed}.txt",
                    raw_bytes=data,
                    uploaded_via="cli",
                    overrides={"model": MODEL, "precision": "bf16", "accelerator": accelerator, "count": "8"},
                    # Named by the config and the system, as the demo's other runs: a rebuild
                    # writes the same rows.
                    run_uuid=uuid.uuid5(_NAMESPACE, f"{config.seed}:{accelerator}:{seed}"),
                )
                run_cost_compute(run=run)
                written += 1
    return written


def _longest_jobs(hostnames: Sequence[str], since: datetime) -> list[tuple[Workload, datetime, datetime]]:
    """The two workloads of training hosts with the longest single hold since ``since``."""
    rows = (
        GpuAttribution.objects.filter(host__hostname__in=list(hostnames), start__gte=since)
        .values("workload_id")
        .annotate(first=Min("start"), last=Max("end"), gpus=Count("accelerator_id", distinct=True))
        .filter(gpus__gte=2)
    )
    spans = sorted(rows, key=lambda r: (r["last"] - r["first"], r["workload_id"]), reverse=True)[:2]
    workloads = Workload.objects.in_bulk([r["workload_id"] for r in spans])
    return [(workloads[r["workload_id"]], r["first"], r["last"]) for r in spans]


def _points(
    workload: Workload, first: datetime, last: datetime, job: tuple[int, int, float, float]
) -> list[TrainingProgress]:
    batch, per_sample, step_s, slowdown = job
    start = first.replace(second=0, microsecond=0) + timedelta(minutes=1)
    moments = []
    moment = start
    while moment <= last:
        moments.append(moment)
        moment += INTERVAL
    middle = moments[len(moments) // 2] if moments else start
    total = sum(INTERVAL.total_seconds() / (step_s * (slowdown if t >= middle else 1.0)) for t in moments[1:])
    planned = int(round(total * 1.6, -3))
    out = []
    step = 0
    for i, at in enumerate(moments):
        if i:
            noise = 1.0 + 0.02 * (_fraction(workload.uid, i) - 0.5)
            pace = step_s * (slowdown if at >= middle else 1.0) * noise
            step += max(1, round(INTERVAL.total_seconds() / pace))
        out.append(
            TrainingProgress(
                workload=workload,
                at=at,
                step=step,
                samples=step * batch,
                tokens=step * batch * per_sample,
                loss=round(3.2 * (1 + step / 2000) ** -0.35, 4),
                planned_steps=planned,
                batch_id=f"demo:{workload.uid}:{i // 12}"[:64],
            )
        )
    return out


def training_jobs_write(config: generator.DemoConfig, hosts: Sequence[Any]) -> dict[str, int]:
    """The two jobs' progress and the replayed step-time checks (module docstring, 2)."""
    hostnames = [h.hostname for h in hosts if h.profile == "training"]
    since = datetime.fromtimestamp(config.telemetry_end - 7 * generator.DAY, tz=UTC)
    points = 0
    alerts: set[int] = set()
    for (workload, first, last), job in zip(_longest_jobs(hostnames, since), JOBS, strict=False):
        rows = _points(workload, first, last, job)
        for hour in range(0, len(rows), 12):
            batch = rows[hour : hour + 12]
            TrainingProgress.objects.bulk_create(batch)
            alert = training_regression_check(workload=workload, opened_at=batch[-1].at)
            if alert is not None:
                alerts.add(alert.pk)
        points += len(rows)
    return {"training_progress": points, "training_alerts": len(alerts)}


def training_write(
    config: generator.DemoConfig, teams: dict[str, Team], hosts: Sequence[Any]
) -> dict[str, int]:
    """Both parts: the MLPerf results and the jobs' progress."""
    return {"mlperf_training_runs": mlperf_runs_write(config, teams), **training_jobs_write(config, hosts)}
