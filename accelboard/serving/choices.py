from __future__ import annotations

from django.db import models


class Engine(models.TextChoices):
    VLLM = "vllm", "vLLM"
    TRTLLM = "trtllm", "TensorRT-LLM"
    TGI = "tgi", "Text Generation Inference"
    TRITON = "triton", "Triton"
    OTHER = "other", "Other"
