from __future__ import annotations

from django.db import models


class ProfileFormat(models.TextChoices):
    KINETO = "kineto", "PyTorch profiler (Kineto) trace"
    NSYS_STATS = "nsys-stats", "Nsight Systems stats CSV"
    NSYS_SQLITE = "nsys-sqlite", "Nsight Systems SQLite export"


class Verdict(models.TextChoices):
    LAUNCH = "launch-bound", "Launch-bound"
    IDLE = "idle", "Idle"
    COMMUNICATION = "communication-bound", "Communication-bound"
    MEMORY = "memory-traffic-bound", "Memory-traffic-bound"
    COMPUTE = "compute-bound", "Compute-bound"
    MIXED = "mixed", "No single limit"
    NO_TIMELINE = "no-timeline", "No timeline: summed GPU time only"
    NO_DEVICE = "no-device-activity", "A device named, no activity read on it"
    NONE = "no-gpu-activity", "No GPU activity"
