"""Report a training job's progress to accelboard: steps, and optionally samples, tokens and loss.

A few lines in any training loop (standard library only, Python 3.9+)::

    from accelboard_upload.training import ProgressReporter

    progress = ProgressReporter(planned_steps=10_000)   # server, token, job from the environment
    for step, batch in enumerate(loader, start=1):
        loss = train_step(batch)
        progress.step(step, samples=step * batch_size, loss=float(loss))
    progress.close()

or a callback: ``lightning_callback(progress)`` for PyTorch Lightning's ``Trainer(callbacks=[...])``,
``hf_callback(progress)`` for the Hugging Face ``Trainer(callbacks=[...])``.

The job is the one its host's agent reports (``POST /api/v1/training-progress`` refuses others):
``job_uid``/``job_kind`` or ``$ACCELBOARD_JOB_UID``/``$ACCELBOARD_JOB_KIND``, else the Slurm job
(``$SLURM_JOB_ID``), else the pod (``$POD_NAMESPACE``/``$POD_NAME``, from the downward API).
The GPUs are ``gpus`` or the UUIDs in ``$CUDA_VISIBLE_DEVICES`` (indices say nothing across
hosts, so they are left out). Points are buffered and sent every ``every_s`` seconds (and by
``flush``/``close``), each batch under an id made of the job and its steps, so a retry after a
lost answer is recognised by the server as the same batch. A failed send keeps the points for
the next one and never stops training; ``errors`` keeps what went wrong.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from typing import Any, Callable

from .cli import UploadError, post

PATH = "/api/v1/training-progress"


def job_from_env(env: dict[str, str] | None = None) -> tuple:
    """(kind, uid) of the job this process belongs to, as its host's agent names it, or ("", "")."""
    env = dict(os.environ if env is None else env)
    if env.get("ACCELBOARD_JOB_UID"):
        return env.get("ACCELBOARD_JOB_KIND", "slurm-job"), env["ACCELBOARD_JOB_UID"]
    if env.get("SLURM_JOB_ID"):
        return "slurm-job", env["SLURM_JOB_ID"]
    if env.get("POD_NAME"):
        namespace = env.get("POD_NAMESPACE", "default")
        return "pod", f"{namespace}/{env['POD_NAME']}"
    return "", ""


def gpus_from_env(env: dict[str, str] | None = None) -> list[str]:
    """The GPU and MIG UUIDs in ``$CUDA_VISIBLE_DEVICES``; indices are left out."""
    env = dict(os.environ if env is None else env)
    listed = [g.strip() for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    return [g for g in listed if g.startswith(("GPU-", "MIG-"))]


class ProgressReporter:
    """Buffers progress points and posts them (see the module docstring)."""

    def __init__(
        self,
        *,
        server: str | None = None,
        token: str | None = None,
        job_uid: str | None = None,
        job_kind: str | None = None,
        gpus: list[str] | None = None,
        planned_steps: int | None = None,
        every_s: float = 60.0,
        timeout: float = 10.0,
        retries: int = 2,
        clock: Callable[[], float] = time.time,
    ) -> None:
        kind, uid = job_from_env()
        self.server = (server or os.environ.get("ACCELBOARD_SERVER", "")).rstrip("/")
        self.token = token or os.environ.get("ACCELBOARD_TOKEN", "")
        self.job_uid = job_uid or uid
        self.job_kind = job_kind or kind or "slurm-job"
        if not self.server or not self.token or not self.job_uid:
            raise ValueError(
                "ProgressReporter needs a server, a token and a job: pass server=, token=, job_uid= "
                "or set ACCELBOARD_SERVER, ACCELBOARD_TOKEN and ACCELBOARD_JOB_UID (or run under Slurm)"
            )
        self.gpus = list(gpus) if gpus is not None else gpus_from_env()
        self.planned_steps = planned_steps
        self.every_s = every_s
        self.timeout = timeout
        self.retries = retries
        self.clock = clock
        self.pending: list[dict[str, Any]] = []
        self.sent = 0
        self.errors: list[str] = []
        self._last_step: int | None = None
        self._last_send = clock()

    def step(
        self,
        step: int,
        *,
        samples: int | None = None,
        tokens: int | None = None,
        loss: float | None = None,
        at: float | None = None,
    ) -> None:
        """Record that ``step`` was reached now (or at ``at``, seconds since the epoch). A step not
        above the last one recorded is ignored (a resumed loop replaying its last step)."""
        if self._last_step is not None and step <= self._last_step:
            return
        moment = self.clock() if at is None else at
        point: dict[str, Any] = {
            "at": datetime.fromtimestamp(moment, tz=timezone.utc).isoformat(),
            "step": int(step),
        }
        if samples is not None:
            point["samples"] = int(samples)
        if tokens is not None:
            point["tokens"] = int(tokens)
        if loss is not None and loss == loss and abs(loss) != float("inf"):  # NaN and inf are not losses
            point["loss"] = float(loss)
        self.pending.append(point)
        self._last_step = int(step)
        if self.clock() - self._last_send >= self.every_s:
            self.flush()

    def body(self) -> dict[str, Any]:
        """The next request's body: the pending points under a batch id naming the job and steps."""
        first, last = self.pending[0]["step"], self.pending[-1]["step"]
        body: dict[str, Any] = {
            "batch_id": f"{self.job_uid}:{first}-{last}"[-64:],
            "job": {"kind": self.job_kind, "uid": self.job_uid},
            "gpus": self.gpus,
            "points": list(self.pending),
        }
        if self.planned_steps:
            body["planned_steps"] = int(self.planned_steps)
        return body

    def flush(self) -> bool:
        """Send the pending points; True when the server stored them (or had them already)."""
        self._last_send = self.clock()
        if not self.pending:
            return True
        try:
            post(
                f"{self.server}{PATH}",
                token=self.token,
                body=json.dumps(self.body()).encode(),
                content_type="application/json",
                timeout=self.timeout,
                retries=self.retries,
            )
        except UploadError as exc:
            self.errors.append(str(exc))
            return False
        self.sent += len(self.pending)
        self.pending = []
        return True

    def close(self) -> bool:
        return self.flush()


# --- callbacks ------------------------------------------------------------------------------------


def _base(*candidates: tuple) -> type:
    """The first importable class of ``(module, name)`` candidates, else ``object``: the callback
    is then a plain object with the documented hook methods (how it is tested where the library
    does not install)."""
    import importlib

    for module, name in candidates:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    return object


def lightning_callback(reporter: ProgressReporter, *, batch_size: int | None = None) -> Any:
    """A PyTorch Lightning callback (``lightning.pytorch.callbacks.Callback``) reporting
    ``trainer.global_step`` after each training batch, the batch's loss from ``outputs`` (or
    ``trainer.callback_metrics["train_loss"]``), samples as steps × ``batch_size`` where given,
    ``trainer.max_steps`` as the plan; it sends what is pending when training ends."""
    base = _base(("lightning.pytorch.callbacks", "Callback"), ("pytorch_lightning.callbacks", "Callback"))

    class AccelboardProgress(base):  # type: ignore[misc,valid-type]
        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            max_steps = getattr(trainer, "max_steps", None)
            if reporter.planned_steps is None and isinstance(max_steps, int) and max_steps > 0:
                reporter.planned_steps = max_steps

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            step = int(trainer.global_step)
            reporter.step(
                step, samples=step * batch_size if batch_size else None, loss=_loss(outputs, trainer)
            )

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            reporter.close()

    return AccelboardProgress()


def _loss(outputs: Any, trainer: Any) -> float | None:
    """The batch's loss: ``outputs["loss"]`` (or ``outputs`` itself, a tensor), else the logged
    ``train_loss``; a tensor through ``.item()``."""
    candidates: list[Any] = [outputs.get("loss") if isinstance(outputs, dict) else outputs]
    metrics = getattr(trainer, "callback_metrics", None) or {}
    candidates.append(metrics.get("train_loss") if hasattr(metrics, "get") else None)
    for value in candidates:
        if value is None:
            continue
        try:
            return float(value.item() if hasattr(value, "item") else value)
        except (TypeError, ValueError):
            continue
    return None


def hf_callback(reporter: ProgressReporter) -> Any:
    """A Hugging Face ``transformers.TrainerCallback`` reporting ``state.global_step`` at each step
    end (samples as steps × ``args.train_batch_size``; ``state.max_steps`` as the plan), the loss
    from each ``on_log``; only the main process (``state.is_world_process_zero``) reports."""
    base = _base(("transformers", "TrainerCallback"))

    class AccelboardProgress(base):  # type: ignore[misc,valid-type]
        loss: float | None = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            max_steps = getattr(state, "max_steps", 0)
            if reporter.planned_steps is None and max_steps and max_steps > 0:
                reporter.planned_steps = int(max_steps)

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any
        ) -> None:
            if logs and "loss" in logs:
                self.loss = float(logs["loss"])

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not getattr(state, "is_world_process_zero", True):
                return
            step = int(state.global_step)
            batch = getattr(args, "train_batch_size", None) or getattr(
                args, "per_device_train_batch_size", None
            )
            reporter.step(step, samples=step * int(batch) if batch else None, loss=self.loss)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if getattr(state, "is_world_process_zero", True):
                reporter.close()

    return AccelboardProgress()
