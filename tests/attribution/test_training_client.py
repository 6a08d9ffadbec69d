"""The training progress client (``accelboard_upload.training``) against a live server: a few lines
of Python, and the PyTorch Lightning and Hugging Face Trainer callbacks driven through their
documented hooks in the order each trainer calls them (neither library installs here: torch is
not a dependency). The world is ``test_training_progress``'s: Slurm job 4242 on GPUs A and B."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from accelboard_upload.training import (
    ProgressReporter,
    gpus_from_env,
    hf_callback,
    job_from_env,
    lightning_callback,
)

from accelboard.attribution.models import TrainingProgress
from tests.attribution.test_training_progress import T0, A, B, C, job_world

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def job(team: Any) -> dict[str, Any]:
    return job_world(team)


class Clock:
    """Five minutes per tick from T0: the reports' times."""

    def __init__(self) -> None:
        self.now = T0.timestamp()

    def __call__(self) -> float:
        return self.now

    def tick(self) -> None:
        self.now += 300


def _reporter(live_server: Any, job: dict[str, Any], clock: Clock, **kw: Any) -> ProgressReporter:
    return ProgressReporter(
        server=live_server.url,
        token=job["token"],
        job_uid="4242",
        job_kind="slurm-job",
        gpus=kw.pop("gpus", [A, B]),
        every_s=kw.pop("every_s", 3600),
        clock=clock,
        retries=0,
        **kw,
    )


def test_a_few_lines_report_a_training_loop(live_server, job):
    clock = Clock()
    progress = _reporter(live_server, job, clock, planned_steps=1000)
    for step in range(0, 500, 100):
        progress.step(step, samples=step * 32, loss=2.0 - step / 1000)
        progress.step(step)  # a replayed step is ignored
        clock.tick()
    assert progress.close() is True and progress.errors == []
    rows = list(TrainingProgress.objects.filter(workload=job["workload"]).order_by("step"))
    assert [r.step for r in rows] == [0, 100, 200, 300, 400]
    assert rows[2].samples == 6400 and rows[2].loss == pytest.approx(1.8) and rows[2].planned_steps == 1000
    assert rows[1].at == T0 + timedelta(minutes=5)
    assert progress.close() is True  # nothing pending: nothing sent


def test_a_refused_batch_keeps_its_points_and_never_stops_training(live_server, job):
    clock = Clock()
    progress = _reporter(live_server, job, clock, gpus=[C])
    progress.step(0)
    clock.tick()
    progress.step(100)
    assert progress.flush() is False
    assert "gpus[0]" in progress.errors[0] and "was not held" in progress.errors[0]
    assert len(progress.pending) == 2 and TrainingProgress.objects.count() == 0
    # Fixed (the right GPUs), the same points go through.
    progress.gpus = [A, B]
    assert progress.flush() is True and TrainingProgress.objects.count() == 2


def test_the_lightning_callback_reports_through_its_documented_hooks(live_server, job):
    """``Callback.on_train_start(trainer, pl_module)``, ``on_train_batch_end(trainer, pl_module,
    outputs, batch, batch_idx)`` and ``on_train_end(trainer, pl_module)``; ``trainer.global_step``
    counts optimizer steps, ``trainer.max_steps`` is -1 when unset."""
    clock = Clock()
    reporter = _reporter(live_server, job, clock)
    callback = lightning_callback(reporter, batch_size=16)
    trainer = SimpleNamespace(global_step=0, max_steps=400, callback_metrics={})
    callback.on_train_start(trainer, None)
    for batch_idx in range(4):
        clock.tick()
        trainer.global_step += 100
        callback.on_train_batch_end(trainer, None, {"loss": 1.5 - batch_idx * 0.1}, None, batch_idx)
    callback.on_train_end(trainer, None)
    rows = list(TrainingProgress.objects.order_by("step"))
    assert [(r.step, r.samples, r.planned_steps) for r in rows] == [
        (100, 1600, 400),
        (200, 3200, 400),
        (300, 4800, 400),
        (400, 6400, 400),
    ]
    assert rows[-1].loss == pytest.approx(1.2)


def test_the_hugging_face_callback_reports_through_its_documented_hooks(live_server, job):
    """``TrainerCallback.on_train_begin/on_step_end/on_log/on_train_end(args, state, control,
    **kwargs)``; ``state.global_step``, ``state.max_steps``, ``state.is_world_process_zero``,
    ``args.train_batch_size``; ``on_log`` gets ``logs={"loss": ...}`` after the step."""
    clock = Clock()
    reporter = _reporter(live_server, job, clock)
    callback = hf_callback(reporter)
    args = SimpleNamespace(train_batch_size=8)
    state = SimpleNamespace(global_step=0, max_steps=300, is_world_process_zero=True)
    control = SimpleNamespace()
    callback.on_train_begin(args, state, control)
    for i in range(3):
        clock.tick()
        state.global_step += 100
        callback.on_step_end(args, state, control)
        callback.on_log(args, state, control, logs={"loss": 0.9 - i * 0.1, "learning_rate": 1e-4})
    callback.on_train_end(args, state, control)
    rows = list(TrainingProgress.objects.order_by("step"))
    assert [(r.step, r.samples, r.planned_steps) for r in rows] == [
        (100, 800, 300),
        (200, 1600, 300),
        (300, 2400, 300),
    ]
    assert rows[0].loss is None and rows[2].loss == pytest.approx(
        0.8
    )  # the loss logged after the step before
    # Another rank reports nothing.
    other = hf_callback(_reporter(live_server, job, clock))
    state.is_world_process_zero = False
    state.global_step = 400
    other.on_step_end(args, state, control)
    other.on_train_end(args, state, control)
    assert TrainingProgress.objects.count() == 3


def test_the_job_and_gpus_come_from_the_environment():
    assert job_from_env({"SLURM_JOB_ID": "4242"}) == ("slurm-job", "4242")
    assert job_from_env({"POD_NAMESPACE": "ml", "POD_NAME": "train-0"}) == ("pod", "ml/train-0")
    assert job_from_env(
        {"ACCELBOARD_JOB_UID": "x", "ACCELBOARD_JOB_KIND": "process", "SLURM_JOB_ID": "1"}
    ) == (
        "process",
        "x",
    )
    assert job_from_env({}) == ("", "")
    assert gpus_from_env({"CUDA_VISIBLE_DEVICES": f"{A}, 1,{B}"}) == [A, B]
    with pytest.raises(ValueError, match="needs a server"):
        ProgressReporter(server="http://x", token="t", job_uid="")
