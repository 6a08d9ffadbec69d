from __future__ import annotations

from django.db import models


class ProfileFormat(models.TextChoices):
    KINETO = "kineto", "PyTorch profiler (Kineto) trace"
    NSYS_STATS = "nsys-stats", "Nsight Systems stats CSV"
    NSYS_SQLITE = "nsys-sqlite", "Nsight Systems SQLite export"


class Verdict(models.TextChoices):
    LAUNCH = "launch-bound", "Launch-bound"
    IDLE = "idle", "Idle / input-bound"
    COMMUNICATION = "communication-bound", "Communication-bound"
    MEMORY = "memory-traffic-bound", "Memory-traffic-bound"
    COMPUTE = "compute-bound", "Compute-bound"
    NONE = "no-gpu-activity", "No GPU activity"
