from __future__ import annotations

from django.db import models


class Precision(models.TextChoices):
    FP32 = "fp32", "FP32"
    BF16 = "bf16", "BF16"
    FP16 = "fp16", "FP16"
    FP8 = "fp8", "FP8"
    INT8 = "int8", "INT8"
    INT4 = "int4", "INT4"
    FP4 = "fp4", "FP4"


class Direction(models.TextChoices):
    HIGHER = "higher", "Higher is better"
    LOWER = "lower", "Lower is better"


class Scenario(models.TextChoices):
    """How the load was offered: what the file says, never guessed (``importers`` docstrings).

    Offline, Server, SingleStream, MultiStream and Interactive are MLPerf LoadGen's scenarios
    (Server: queries arrive at a target rate). ``serving`` is an online-serving benchmark whose load
    is not an arrival rate: N requests kept in flight or every request sent at once (vLLM
    ``benchmark_serving`` with ``request_rate`` inf, llmperf, genai-perf and AIPerf in concurrency
    mode). ``unstated``: the file names no scenario and the uploader stated none."""

    OFFLINE = "offline", "Offline"
    SERVER = "server", "Server"
    SERVING = "serving", "Online serving"
    SINGLE_STREAM = "single-stream", "SingleStream"
    MULTI_STREAM = "multi-stream", "MultiStream"
    INTERACTIVE = "interactive", "Interactive"
    CHAT = "chat", "Chat serving"
    BATCH = "batch", "Batch"
    TRAINING = "training", "Training"
    UNSTATED = "unstated", "Scenario not stated"


class UploadSource(models.TextChoices):
    WEB = "web", "Upload page"
    CLI = "cli", "CLI"
    API = "api", "API"
    AGENT = "agent", "Agent"
    DEMO = "demo", "Demo generator"


class IdentityMatch(models.TextChoices):
    """How a run's model or accelerator name found its catalogue identity."""

    EXACT = "exact", "Exact name"
    ALIAS = "alias", "Alias"
    USER = "user", "Uploader's choice"
    NEW = "new", "New to the catalogue"
