"""What the demo fleet is made of: teams, people, sites, GPU kinds, hosts and prices.

Pure data, no ORM and no randomness: the generator turns it into numbers with a seeded RNG and
the loader writes it. Figures marked "DESIGN.md reference" are the public list prices and board
powers in /work/shared/DESIGN.md (prices carry their source, as every price must); figures marked
"demo assumption" are invented for the demo and say so in their ``source``. What the fleet runs:
``accelboard.demo.benchmark_plan`` (models, nightly benchmarks, injected events, drift) and
``accelboard.demo.serving_plan`` (served models, production agreement, serving objectives).
"""

from __future__ import annotations

from datetime import date
from typing import Any

TEAMS: list[dict[str, str]] = [
    {"slug": "llm-serving", "name": "LLM Serving", "short": "llm", "description": "Chat and completion APIs"},
    {
        "slug": "vision",
        "name": "Vision",
        "short": "vision",
        "description": "Image classification and generation",
    },
    {"slug": "speech-audio", "name": "Speech & Audio", "short": "speech", "description": "Transcription"},
    {
        "slug": "research-platform",
        "name": "Research Platform",
        "short": "research",
        "description": "Shared training and evaluation capacity",
    },
]

# Roles per team (accelboard.core.choices.Role values). Username: "<short>-<role>".
TEAM_ROLES = ("lead", "engineer", "finance")
ADMIN_USERNAME = "admin"
OUTSIDER_USERNAME = "outsider"


def demo_password(username: str) -> str:
    """Demo logins are printed by the command; never use this scheme outside a demo database."""
    return f"demo-{username}"


# Sites: on-prem data centre and cloud regions. tz_hours shifts the daily load cycle to local time.
SITES: list[dict[str, Any]] = [
    {
        "key": "reno",
        "name": "Reno DC",
        "provider": "on-prem",
        "region": "us-west",
        "tz_hours": -8,
        "price_per_kwh": "0.06800",
        "pue": 1.3,
        "carbon_g_per_kwh": 350.0,
        "source": "DESIGN.md reference: US industrial electricity 6.8-20 c/kWh (low end), new-site PUE <= 1.3; "
        "grid carbon 350 g/kWh is a demo assumption",
    },
    {
        "key": "aws-use1",
        "name": "AWS us-east-1",
        "provider": "aws",
        "region": "us-east-1",
        "tz_hours": -5,
        "price_per_kwh": "0.10000",
        "pue": 1.58,
        "carbon_g_per_kwh": 475.0,
        "source": "DESIGN.md reference: $0.10/kWh, average data-centre PUE 1.58, "
        "world-average grid 475 gCO2e/kWh (CodeCarbon fallback)",
    },
    {
        "key": "gcp-usc1",
        "name": "GCP us-central1",
        "provider": "gcp",
        "region": "us-central1",
        "tz_hours": -6,
        "price_per_kwh": "0.09000",
        "pue": 1.1,
        "carbon_g_per_kwh": 475.0,
        "source": "demo assumption: $0.09/kWh, PUE 1.1; grid 475 gCO2e/kWh is DESIGN.md's world average",
    },
    {
        "key": "lambda-usw",
        "name": "Lambda us-west-1",
        "provider": "lambda",
        "region": "us-west-1",
        "tz_hours": -8,
        "price_per_kwh": "0.12000",
        "pue": 1.4,
        "carbon_g_per_kwh": 475.0,
        "source": "demo assumption: $0.12/kWh, PUE 1.4; grid 475 gCO2e/kWh is DESIGN.md's world average",
    },
]

# How each accelerator type looks to the agent and how it behaves under load.
GPU_KINDS: dict[str, dict[str, Any]] = {
    "h100-sxm-80gb": {
        "driver_name": "NVIDIA H100 80GB HBM3",
        "idle_w": 72.0,
        "sm_max": 1980.0,
        "sm_idle": 345.0,
        "mem_clock": 2619.0,
        "mem_idle": 2619.0,
    },
    "h200-sxm-141gb": {
        "driver_name": "NVIDIA H200",
        "idle_w": 78.0,
        "sm_max": 1980.0,
        "sm_idle": 345.0,
        "mem_clock": 3201.0,
        "mem_idle": 3201.0,
    },
    "a100-sxm-80gb": {
        "driver_name": "NVIDIA A100-SXM4-80GB",
        "idle_w": 58.0,
        "sm_max": 1410.0,
        "sm_idle": 210.0,
        "mem_clock": 1593.0,
        "mem_idle": 1593.0,
    },
    "l4": {
        "driver_name": "NVIDIA L4",
        "idle_w": 16.0,
        "sm_max": 2040.0,
        "sm_idle": 210.0,
        "mem_clock": 6251.0,
        "mem_idle": 405.0,
    },
    "l40s": {
        "driver_name": "NVIDIA L40S",
        "idle_w": 34.0,
        "sm_max": 2520.0,
        "sm_idle": 210.0,
        "mem_clock": 9001.0,
        "mem_idle": 405.0,
    },
    "mi300x": {
        "driver_name": "AMD Instinct MI300X",
        "idle_w": 140.0,
        "sm_max": 2100.0,
        "sm_idle": 132.0,
        "mem_clock": 1300.0,
        "mem_idle": 900.0,
    },
}

# Host templates, in the order hosts are taken by ``--hosts N``: the first six cover every
# accelerator type, so even a tiny demo has them all. Beyond the list the templates repeat with
# the next number. Profiles: serving (daily cycle), batch (hourly jobs), training (long jobs, all
# GPUs together), office (busy in working hours, idle nights and weekends).
HOST_TEMPLATES: list[dict[str, Any]] = [
    {
        "prefix": "reno-h100",
        "team": "llm-serving",
        "site": "reno",
        "gpu": "h100-sxm-80gb",
        "gpus": 8,
        "profile": "serving",
        "instance_type": "dgx-h100",
    },
    {
        "prefix": "reno-h200",
        "team": "llm-serving",
        "site": "reno",
        "gpu": "h200-sxm-141gb",
        "gpus": 8,
        "profile": "serving",
        "instance_type": "hgx-h200",
    },
    {
        "prefix": "aws-p4de",
        "team": "vision",
        "site": "aws-use1",
        "gpu": "a100-sxm-80gb",
        "gpus": 8,
        "profile": "batch",
        "instance_type": "p4de.24xlarge",
    },
    {
        "prefix": "gcp-g2",
        "team": "vision",
        "site": "gcp-usc1",
        "gpu": "l4",
        "gpus": 4,
        "profile": "office",
        "instance_type": "g2-standard-48",
    },
    {
        "prefix": "aws-g6e",
        "team": "speech-audio",
        "site": "aws-use1",
        "gpu": "l40s",
        "gpus": 1,
        "profile": "office",
        "instance_type": "g6e.xlarge",
    },
    {
        "prefix": "reno-mi300x",
        "team": "research-platform",
        "site": "reno",
        "gpu": "mi300x",
        "gpus": 8,
        "profile": "training",
        "instance_type": "mi300x-oam",
    },
    {
        "prefix": "reno-h100",
        "team": "llm-serving",
        "site": "reno",
        "gpu": "h100-sxm-80gb",
        "gpus": 8,
        "profile": "serving",
        "instance_type": "dgx-h100",
    },
    {
        "prefix": "aws-p5",
        "team": "llm-serving",
        "site": "aws-use1",
        "gpu": "h100-sxm-80gb",
        "gpus": 8,
        "profile": "serving",
        "instance_type": "p5.48xlarge",
    },
    {
        "prefix": "aws-p5en",
        "team": "research-platform",
        "site": "aws-use1",
        "gpu": "h200-sxm-141gb",
        "gpus": 8,
        "profile": "training",
        "instance_type": "p5en.48xlarge",
    },
    {
        "prefix": "reno-a100",
        "team": "speech-audio",
        "site": "reno",
        "gpu": "a100-sxm-80gb",
        "gpus": 8,
        "profile": "batch",
        "instance_type": "dgx-a100",
    },
    {
        "prefix": "gcp-g2",
        "team": "speech-audio",
        "site": "gcp-usc1",
        "gpu": "l4",
        "gpus": 1,
        "profile": "serving",
        "instance_type": "g2-standard-4",
    },
    {
        "prefix": "aws-g6e",
        "team": "vision",
        "site": "aws-use1",
        "gpu": "l40s",
        "gpus": 4,
        "profile": "office",
        "instance_type": "g6e.12xlarge",
    },
    {
        "prefix": "lambda-h100",
        "team": "research-platform",
        "site": "lambda-usw",
        "gpu": "h100-sxm-80gb",
        "gpus": 1,
        "profile": "office",
        "instance_type": "gpu_1x_h100_sxm5",
    },
    {
        "prefix": "reno-l40s",
        "team": "vision",
        "site": "reno",
        "gpu": "l40s",
        "gpus": 2,
        "profile": "batch",
        "instance_type": "l40s-2u",
    },
    {
        "prefix": "reno-h100",
        "team": "research-platform",
        "site": "reno",
        "gpu": "h100-sxm-80gb",
        "gpus": 8,
        "profile": "training",
        "instance_type": "dgx-h100",
    },
]

DEFAULT_HOSTS = len(HOST_TEMPLATES)

_SKYPILOT = "skypilot-org/skypilot-catalog list price (DESIGN.md reference figure)"

# The price book. ``fetched_days_ago`` is relative to the demo's "now"; one row is deliberately
# older than 30 days so the stale-price flag has something to show.
PRICES: list[dict[str, Any]] = [
    {
        "gpu": "h100-sxm-80gb",
        "count": 8,
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "p5.48xlarge",
        "pricing_model": "on-demand",
        "price": "98.3200",
        "source": f"{_SKYPILOT}, before the June 2025 cut",
        "fetched_on": date(2025, 5, 1),
        "valid_from": date(2024, 1, 1),
        "valid_to": date(2025, 5, 31),
    },
    {
        "gpu": "h100-sxm-80gb",
        "count": 8,
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "p5.48xlarge",
        "pricing_model": "on-demand",
        "price": "54.0760",
        "source": "demo assumption: $98.32/h less the full 45% of AWS's June 2025 cut of 'up to 45%'",
        "fetched_days_ago": 7,
        "valid_from": date(2025, 6, 1),
    },
    {
        "gpu": "h200-sxm-141gb",
        "count": 8,
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "p5en.48xlarge",
        "pricing_model": "on-demand",
        "price": "84.8000",
        "source": _SKYPILOT,
        "fetched_days_ago": 7,
        "valid_from": date(2024, 1, 1),
    },
    {
        "gpu": "a100-sxm-80gb",
        "count": 8,
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "p4de.24xlarge",
        "pricing_model": "on-demand",
        "price": "40.9700",
        "source": _SKYPILOT,
        "fetched_days_ago": 7,
        "valid_from": date(2024, 1, 1),
    },
    {
        "gpu": "a100-sxm-80gb",
        "count": 8,
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "p4de.24xlarge",
        "pricing_model": "spot",
        "price": "16.3900",
        "source": "demo assumption: spot at 40% of on-demand",
        "fetched_days_ago": 7,
        "valid_from": date(2024, 1, 1),
    },
    {
        "gpu": "l40s",
        "count": 1,
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "g6e.xlarge",
        "pricing_model": "on-demand",
        "price": "1.8610",
        "source": _SKYPILOT,
        "fetched_days_ago": 7,
        "valid_from": date(2024, 1, 1),
    },
    {
        "gpu": "l40s",
        "count": 4,
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "g6e.12xlarge",
        "pricing_model": "on-demand",
        "price": "10.4930",
        "source": "demo assumption (not a DESIGN.md figure)",
        "fetched_days_ago": 7,
        "valid_from": date(2024, 1, 1),
    },
    {
        "gpu": "h100-sxm-80gb",
        "count": 1,
        "provider": "lambda",
        "region": "us-west-1",
        "instance_type": "gpu_1x_h100_sxm5",
        "pricing_model": "on-demand",
        "price": "3.2900",
        "source": "Lambda list price (DESIGN.md reference figure)",
        "fetched_days_ago": 45,
        "valid_from": date(2024, 1, 1),
    },
    {
        "gpu": "l4",
        "count": 1,
        "provider": "gcp",
        "region": "us-central1",
        "instance_type": "g2-standard-4",
        "pricing_model": "on-demand",
        "price": "0.7068",
        "source": "demo assumption (not a DESIGN.md figure)",
        "fetched_days_ago": 7,
        "valid_from": date(2024, 1, 1),
    },
    {
        "gpu": "l4",
        "count": 4,
        "provider": "gcp",
        "region": "us-central1",
        "instance_type": "g2-standard-48",
        "pricing_model": "on-demand",
        "price": "3.9996",
        "source": "demo assumption (not a DESIGN.md figure)",
        "fetched_days_ago": 7,
        "valid_from": date(2024, 1, 1),
    },
    # On-prem: capex / lifetime hours (5 years); power is costed apart from the site's electricity.
    {
        "gpu": "h100-sxm-80gb",
        "count": 8,
        "provider": "on-prem",
        "region": "us-west",
        "instance_type": "dgx-h100",
        "pricing_model": "on-prem",
        "capex": "280000.00",
        "lifetime_hours": 43800,
        "source": "demo assumption: $280k server over 5 years",
        "fetched_days_ago": 7,
        "valid_from": date(2024, 1, 1),
    },
    {
        "gpu": "h200-sxm-141gb",
        "count": 8,
        "provider": "on-prem",
        "region": "us-west",
        "instance_type": "hgx-h200",
        "pricing_model": "on-prem",
        "capex": "330000.00",
        "lifetime_hours": 43800,
        "source": "demo assumption: $330k server over 5 years",
        "fetched_days_ago": 7,
        "valid_from": date(2024, 1, 1),
    },
    {
        "gpu": "a100-sxm-80gb",
        "count": 8,
        "provider": "on-prem",
        "region": "us-west",
        "instance_type": "dgx-a100",
        "pricing_model": "on-prem",
        "capex": "150000.00",
        "lifetime_hours": 43800,
        "source": "demo assumption: $150k server over 5 years",
        "fetched_days_ago": 7,
        "valid_from": date(2024, 1, 1),
    },
    {
        "gpu": "mi300x",
        "count": 8,
        "provider": "on-prem",
        "region": "us-west",
        "instance_type": "mi300x-oam",
        "pricing_model": "on-prem",
        "capex": "250000.00",
        "lifetime_hours": 43800,
        "source": "demo assumption: $250k server over 5 years",
        "fetched_days_ago": 7,
        "valid_from": date(2024, 1, 1),
    },
    {
        "gpu": "l40s",
        "count": 2,
        "provider": "on-prem",
        "region": "us-west",
        "instance_type": "l40s-2u",
        "pricing_model": "on-prem",
        "capex": "30000.00",
        "lifetime_hours": 43800,
        "source": "demo assumption: $30k server over 5 years",
        "fetched_days_ago": 7,
        "valid_from": date(2024, 1, 1),
    },
]

# --- Who runs on each GPU (docs/attribution.md) -------------------------------------------------
# Every demo GPU is held by a Kubernetes pod or a Slurm job while its telemetry shows it busy
# (``accelboard.demo.attribution_generator``). Pod templates: namespace, app (label and container)
# and model label ("" for none); ``labels: False`` pods carry no labels at all.
POD_TEMPLATES: dict[str, dict[str, Any]] = {
    "llama8b-fp8": {"namespace": "llm-serving", "app": "vllm", "model": "llama-3.1-8b-fp8"},
    # The canaries' pods (``serving_plan.CANARIES``): each holds one of llama8b-fp8's GPUs in the window.
    "llama8b-fp8-v2": {"namespace": "llm-serving", "app": "vllm", "model": "llama-3.1-8b-fp8-v2"},
    "llama8b-fp8-v3": {"namespace": "llm-serving", "app": "vllm", "model": "llama-3.1-8b-fp8-v3"},
    "llama8b-bf16": {"namespace": "llm-serving", "app": "vllm", "model": "llama-3.1-8b-bf16"},
    "llama8b-int4": {"namespace": "llm-serving", "app": "vllm", "model": "llama-3.1-8b-int4-awq"},
    # TensorRT-LLM pods carry no model label: their model is the one their serving metrics name.
    "llama70b-fp8": {"namespace": "llm-serving", "app": "trtllm", "model": ""},
    "mixtral-fp8": {"namespace": "llm-serving", "app": "vllm", "model": "mixtral-8x7b-fp8"},
    "resnet-train": {"namespace": "vision-train", "app": "trainer", "model": "resnet-50-fp16"},
    "sdxl-tune": {"namespace": "vision-train", "app": "sdxl-finetune", "model": "sdxl-fp16"},
    "whisper-batch": {"namespace": "speech-batch", "app": "transcribe", "model": "whisper-large-fp16"},
    "whisper-int8": {"namespace": "speech-batch", "app": "transcribe", "model": "whisper-large-int8"},
    "notebook": {"namespace": "research-notebooks", "app": "jupyter", "model": ""},
    "bert-eval": {"namespace": "research-notebooks", "app": "eval", "model": "bert-large-fp16"},
    # Nobody maps these namespaces: what they hold is the unattributed part.
    "scratch": {"namespace": "sandbox", "app": "", "model": "", "labels": False},
    "debug": {"namespace": "default", "app": "", "model": "", "labels": False},
}

# The shared Kubernetes cluster: its nodes (hosts of several teams' agents) and, per GPU index,
# the pod template that runs there: pods of several teams' namespaces on the same node. "mig":
# the GPU is cut into MIG instances (``MIG``); "shared": it is time-sliced (``TIME_SLICED``).
# A served model's pods hold exactly the GPUs its serving metrics name
# (``serving_plan.SERVING``'s ``gpus``), so the cost by model and the serving costs count the
# same GPUs (tests/test_demo_attribution.py checks it); the other GPUs run no served model.
KUBERNETES_CLUSTER: dict[str, Any] = {
    "name": "reno-k8s",
    "nodes": {
        "reno-h100-01": [*["llama8b-fp8"] * 4, "whisper-int8", "shared", "mig", "mig"],
        "reno-h200-01": ["llama70b-fp8"] * 8,
        "reno-h100-02": [*["mixtral-fp8"] * 4, *["llama8b-bf16"] * 4],
        "reno-a100-01": [*["whisper-batch"] * 5, "resnet-train", "resnet-train", "notebook"],
        "reno-l40s-01": ["resnet-train", "whisper-batch"],
    },
}
# Batch and notebook pods (one per busy run): this share of them are someone's unlabelled
# scratch pods in ``sandbox`` instead, chosen by a hash of the run.
SCRATCH_SHARE = 0.04

# MIG: these GPUs of the node are cut 3g+2g+1g+1g of 7 slices; one pod per instance. The last
# 1g instance holds a debug pod in ``default`` every other day and is free the others.
MIG: dict[str, Any] = {
    "host": "reno-h100-01",
    "gpus": [6, 7],
    "total_slices": 7,
    "instances": [
        {"profile": "3g.40gb", "slices": 3, "pod": "whisper-int8"},
        {"profile": "2g.20gb", "slices": 2, "pod": "bert-eval"},
        {"profile": "1g.10gb", "slices": 1, "pod": "notebook"},
        {"profile": "1g.10gb", "slices": 1, "pod": "debug"},
    ],
}

# One GPU time-sliced between two pods; each one's measured share of the SM time changes by hour.
TIME_SLICED: dict[str, Any] = {"host": "reno-h100-01", "gpu": 5, "pods": ["notebook", "sdxl-tune"]}

# The Slurm cluster: its nodes run one job at a time on all GPUs; users and their accounts.
SLURM_CLUSTER: dict[str, Any] = {
    "name": "reno-hpc",
    "nodes": ["reno-mi300x-01", "reno-h100-03"],
    "partition": "gpu",
    "users": [
        {"user": "alice", "account": "nlp", "job": "pretrain-llama"},
        {"user": "bob", "account": "nlp", "job": "sft-mixtral"},
        {"user": "chen", "account": "vision", "job": "sdxl-distill"},
        {"user": "dana", "account": "speech", "job": "whisper-ft"},
        {"user": "erik", "account": "research", "job": "bert-sweep"},
    ],
}

# Hosts in neither cluster are nodes of their team's own managed cluster: pods in its namespace.
TEAM_PODS: dict[str, dict[str, str]] = {
    "llm-serving": {"serving": "llama8b-int4", "other": "llama8b-fp8"},
    "vision": {"serving": "resnet-train", "other": "resnet-train"},
    "speech-audio": {"serving": "whisper-int8", "other": "whisper-batch"},
    "research-platform": {"serving": "bert-eval", "other": "notebook"},
}

# The rules the demo intends (the rules app loads them; nothing here writes rule rows): namespace
# and Slurm account to team, the ``model`` label to a model and variant. ``sandbox`` and
# ``default`` stay unmapped on purpose: their GPU-time is shown as unattributed. The Llama-2-70B
# pods, unlabelled, get the model and variant of the serving metrics on their GPUs.
ATTRIBUTION_RULES: list[dict[str, str]] = [
    {"selector": "namespace", "value": "llm-serving", "team": "llm-serving"},
    {"selector": "namespace", "value": "vision-train", "team": "vision"},
    {"selector": "namespace", "value": "speech-batch", "team": "speech-audio"},
    {"selector": "namespace", "value": "research-notebooks", "team": "research-platform"},
    {"selector": "account", "value": "nlp", "team": "llm-serving"},
    {"selector": "account", "value": "vision", "team": "vision"},
    {"selector": "account", "value": "speech", "team": "speech-audio"},
    {"selector": "account", "value": "research", "team": "research-platform"},
    {"selector": "label", "value": "model=llama-3.1-8b-fp8", "model": "Llama-3.1-8B", "variant": "fp8"},
    {"selector": "label", "value": "model=llama-3.1-8b-fp8-v2", "model": "Llama-3.1-8B", "variant": "fp8-v2"},
    {"selector": "label", "value": "model=llama-3.1-8b-fp8-v3", "model": "Llama-3.1-8B", "variant": "fp8-v3"},
    {"selector": "label", "value": "model=llama-3.1-8b-bf16", "model": "Llama-3.1-8B", "variant": "bf16"},
    {
        "selector": "label",
        "value": "model=llama-3.1-8b-int4-awq",
        "model": "Llama-3.1-8B",
        "variant": "int4-awq",
    },
    {"selector": "label", "value": "model=mixtral-8x7b-fp8", "model": "Mixtral-8x7B", "variant": "fp8"},
    {"selector": "label", "value": "model=resnet-50-fp16", "model": "ResNet-50", "variant": "fp16"},
    {"selector": "label", "value": "model=sdxl-fp16", "model": "SDXL", "variant": "fp16"},
    {"selector": "label", "value": "model=whisper-large-fp16", "model": "Whisper-large", "variant": "fp16"},
    {"selector": "label", "value": "model=whisper-large-int8", "model": "Whisper-large", "variant": "int8"},
    {"selector": "label", "value": "model=bert-large-fp16", "model": "BERT-large", "variant": "fp16"},
]
