"""Training progress: store what a job reports, and watch its step time.

``training_progress_ingest`` stores one batch of a job's progress points (``POST
/api/v1/training-progress``), all or nothing, idempotent on the client's ``batch_id`` (a retry
gets the first answer with ``duplicate: true``; the same id with another body is a 409):

1. The job is a ``fleet.Workload`` of the token's team (kind and uid as its host's agent reported
   them); one nobody reported is a 404 naming ``job.uid``.
2. Points move the job forward (``training.progress_check``): after its newest stored point, in
   time and in steps; a zero-length interval or a step that goes back is a 422 naming the point.
3. Each GPU the batch names must be held by the job (a ``GpuAttribution`` of it overlapping the
   batch's time span, give or take ``HOLD_SLACK`` for the agent's reporting lag); another is a
   422 naming ``gpus[i]``.
4. After commit, a worker checks the job's step-time series (``training_alerts``).

``training_alerts.training_regression_check`` watches the step time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from accelboard.core.choices import BatchKind
from accelboard.core.idempotency_services import body_digest, ingest_batch_write
from accelboard.core.models import Team
from accelboard.fleet.ingest_validation import IngestRejected
from accelboard.fleet.models import Accelerator, GpuAttribution, Workload

from . import training
from .models import TrainingProgress
from .tasks import training_regression_check_enqueue

HOLD_SLACK = timedelta(minutes=5)


def _gpus_check(*, workload: Workload, gpus: Sequence[str], points: Sequence[training.Point]) -> None:
    if not gpus:
        return
    since, until = points[0].at - HOLD_SLACK, points[-1].at
    known = dict(
        Accelerator.objects.filter(host__team_id=workload.team_id, uuid__in=list(gpus)).values_list(
            "uuid", "id"
        )
    )
    held = set(
        GpuAttribution.objects.filter(
            workload_id=workload.pk, accelerator_id__in=list(known.values()), start__lt=until, end__gt=since
        ).values_list("accelerator_id", flat=True)
    )
    for i, uuid in enumerate(gpus):
        if uuid not in known:
            raise IngestRejected(
                f"{uuid} is not a GPU of this team's hosts", path=f"gpus[{i}]", code="gpu_not_held"
            )
        if known[uuid] not in held:
            raise IngestRejected(
                f"{uuid} was not held by {workload} between {since:%Y-%m-%d %H:%M:%S} and "
                f"{until:%Y-%m-%d %H:%M:%S} UTC (as its host's agent reported)",
                path=f"gpus[{i}]",
                code="gpu_not_held",
            )


def training_progress_ingest(
    *,
    team: Team,
    batch_id: str,
    job_kind: str,
    job_uid: str,
    points: Sequence[training.Point],
    gpus: Sequence[str] = (),
    planned_steps: int | None = None,
) -> tuple[dict[str, Any], bool]:
    """Store one batch of a job's progress points (module docstring); (result, duplicate).

    Raises ``IngestRejected`` (nothing stored) for an unknown job, points that do not move it
    forward or GPUs it does not hold; ``IdempotencyKeyReused`` for ``batch_id`` reused with
    another body."""
    workload = Workload.objects.filter(team=team, kind=job_kind, uid=job_uid).first()
    if workload is None:
        raise IngestRejected(
            f"no {job_kind} {job_uid!r} in this team's fleet: the agent of the host it runs on reports it "
            "(with its GPUs) before its progress can be stored",
            path="job.uid",
            code="unknown_job",
            status=404,
        )
    ordered = sorted(points, key=lambda p: p.at)
    digest = body_digest(
        {
            "job": [job_kind, job_uid],
            "gpus": list(gpus),
            "planned_steps": planned_steps,
            "points": [{**asdict(p), "at": p.at.isoformat()} for p in points],
        }
    )

    def write() -> dict[str, Any]:
        # One batch of a job at a time: the next waits, then sees this one's points.
        Workload.objects.select_for_update().filter(pk=workload.pk).first()
        stored = TrainingProgress.objects.filter(workload=workload).order_by("-at").first()
        last = (
            training.Point(at=stored.at, step=stored.step, samples=stored.samples, tokens=stored.tokens)
            if stored
            else None
        )
        try:
            training.progress_check(list(points), last=last)
        except training.ProgressProblem as exc:
            raise IngestRejected(
                exc.message, path=f"points[{exc.index}].{exc.field}", code=exc.code
            ) from None
        _gpus_check(workload=workload, gpus=gpus, points=ordered)
        TrainingProgress.objects.bulk_create(
            [
                TrainingProgress(
                    workload=workload,
                    at=p.at,
                    step=p.step,
                    samples=p.samples,
                    tokens=p.tokens,
                    loss=p.loss,
                    planned_steps=planned_steps,
                    gpus=list(gpus),
                    batch_id=batch_id,
                )
                for p in points
            ]
        )
        training_regression_check_enqueue(workload_id=workload.pk)
        return {"batch_id": batch_id, "accepted": len(points), "workload_id": workload.pk}

    return ingest_batch_write(
        team_id=team.pk, kind=BatchKind.TRAINING, client_id=batch_id, write=write, digest=digest
    )
