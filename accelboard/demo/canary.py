"""The demo's canaries: a new build of Llama-3.1-8B fp8 (``fp8-v2``) rolled out on reno-h100-01 in
place of one of the stable fp8 deployment's four replicas, which regresses on latency (x1.3) and so
on throughput per GPU, energy and cost per token, while its agreement with the reference holds; and
a harmless one (``fp8-v3``) in place of another replica, that matches the stable deployment. Each
has a canary check (``accelboard.canary``): the first fails on those metrics, the second passes.

Loaded after the demo's serving metrics and agreement and before their costs and the cost by
workload, through the product's write paths (``serving.services.inference_metrics_store`` with
labels, ``drift.services.agreement_batch_ingest``, ``canary.services.canary_check_create``). In the
window (``serving_plan.canary_window``) each canary has its replica's GPU
(``serving_plan.CANARIES``), held by its own pod in the demo's attribution
(``attribution_generator.canary_pods``), and that replica's slice of each interval's traffic
(interval by interval, the stable shape); the stable deployment's rows of the window, labelled
``track=stable``, name its remaining GPUs and carry the rest of the traffic. So no GPU is named by
two deployments in the same interval: a GPU's energy and GPU-hours count once, each deployment's
energy on the canary page is its own GPUs', and the serving costs and the cost by model see the
same GPUs per variant (the allocation rules map the canary pods' model labels to their variants).
The stable deployment's energy per token holds across the window's start (half its traffic on half
its GPUs, which follow the host's daily cycle as the other two do); on two GPUs rather than four
its per-interval figure is noisier, enough to tip the production rule's reference comparison just
after the demo's injected throttle ends (its reference window throttled: tests/alerts/test_demo_fresh.py).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from accelboard.canary.services import canary_check_create
from accelboard.core.models import Team
from accelboard.fleet.models import Accelerator
from accelboard.serving.models import InferenceMetric

from . import generator, serving_plan

HOST = serving_plan.CANARY_HOST
MODEL = serving_plan.CANARY_MODEL
STABLE = {"variant": serving_plan.CANARY_STABLE_VARIANT}
# name, variant, labels, GPU index, latency factor, per-GPU throughput factor
CANARIES = [
    (c["name"], c["variant"], c["labels"], c["gpu"], c["slower"], c["per_gpu"]) for c in serving_plan.CANARIES
]


def _window(config: generator.DemoConfig) -> tuple[datetime, datetime]:
    start, end = serving_plan.canary_window(
        config.telemetry_start, config.telemetry_end, config.serving_interval_s
    )
    return datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)


def canary_write(config: generator.DemoConfig, teams: dict[str, Team]) -> dict[str, int]:
    from accelboard.drift.models import ProductionAgreement  # noqa: PLC0415 - beside the layers
    from accelboard.drift.services import AgreementInput, agreement_batch_ingest  # noqa: PLC0415
    from accelboard.serving.services import IntervalInput, inference_metrics_store  # noqa: PLC0415

    team = teams[serving_plan.AGREEMENT_TEAM]
    start, end = _window(config)
    stable = InferenceMetric.objects.filter(
        team=team,
        host__hostname=HOST,
        variant__model__name=MODEL,
        variant__name=STABLE["variant"],
        interval_start__gte=start,
        interval_start__lt=end,
    )
    labelled = stable.update(labels={"track": "stable"})
    rows = list(stable.select_related("host", "variant__model").order_by("interval_start"))
    if not rows:
        return {"canary_intervals": 0, "canary_checks": 0}
    host, model = rows[0].host, rows[0].variant.model
    gpus = dict(Accelerator.objects.filter(host=host, parent_uuid="").values_list("index", "uuid"))
    taken = {gpus[gpu] for _, _, _, gpu, _, _ in CANARIES}
    stored = 0
    for name, variant, labels, gpu, slower, per_gpu in CANARIES:
        rng = generator._rng(config, "canary", name)
        gpu_uuid = gpus[gpu]
        intervals = []
        for row in rows:
            if gpu_uuid not in row.accelerator_uuids:
                raise ValueError(f"canary {name}: GPU {gpu} of {HOST} is not the stable deployment's")
            noise = rng.lognormal(0, 0.04, 6)
            share = per_gpu / len(row.accelerator_uuids)  # one replica's slice of the traffic

            def lat(
                value: float | None, k: int, noise: np.ndarray = noise, slower: float = slower
            ) -> float | None:
                return None if value is None else round(value * slower * float(noise[k]), 3)

            intervals.append(
                IntervalInput(
                    model=MODEL,
                    variant=variant,
                    interval_start=row.interval_start,
                    interval_s=row.interval_s,
                    engine=row.engine,
                    accelerator_uuids=[gpu_uuid],
                    requests=round(row.requests * share),
                    errors=round(row.errors * share),
                    prompt_tokens=int(row.prompt_tokens * share),
                    generated_tokens=int(row.generated_tokens * share * float(rng.lognormal(0, 0.03))),
                    ttft_ms={"p50": lat(row.ttft_p50_ms, 0), "p99": lat(row.ttft_p99_ms, 1)},
                    itl_ms={"p50": lat(row.itl_p50_ms, 2), "p99": lat(row.itl_p99_ms, 3)},
                    e2e_ms={"p50": lat(row.e2e_p50_ms, 4), "p99": lat(row.e2e_p99_ms, 5)},
                    labels=dict(labels),
                )
            )
        stored += inference_metrics_store(team=team, host=host, batch_id=f"demo-{name}", intervals=intervals)
        # Agreement holds: the canary agrees with the reference as the stable build does, each day.
        items = [
            replace(
                AgreementInput(
                    model=MODEL,
                    variant=variant,
                    day=a.day,
                    task=a.task,
                    agreement_rate=a.agreement_rate,
                    samples=max(1, a.samples // 4),
                ),
                agreement_rate=round(float(np.clip(a.agreement_rate + rng.normal(0, 0.002), 0, 1)), 5),
            )
            for a in ProductionAgreement.objects.filter(
                team=team,
                variant__model=model,
                variant__name=STABLE["variant"],
                day__gte=start.date(),
                day__lte=end.date(),
            )
        ]
        if items:
            agreement_batch_ingest(team=team, batch_id=f"demo-agreement-{name}-{config.seed}", items=items)
        canary_check_create(
            team=team,
            model=model,
            name=name,
            baseline={"track": "stable"},
            canary=dict(labels),
            window_minutes=int((end - start).total_seconds() // 60),
        )
    _stable_shrink(rows, taken)  # after the canaries, whose traffic is a share of the whole
    return {"canary_intervals": stored, "stable_labelled": labelled, "canary_checks": len(CANARIES)}


def _stable_shrink(rows: list[InferenceMetric], taken: set[str]) -> None:
    """The stable deployment's rows of the window without the replicas the canaries took: its
    remaining GPUs and their share of each interval's traffic (its latencies are its own). Reads
    the rows as generated (every GPU of the deployment), so it runs once per load."""
    for row in rows:
        kept = [uuid for uuid in row.accelerator_uuids if uuid not in taken]
        share = len(kept) / len(row.accelerator_uuids)
        row.accelerator_uuids = kept
        row.requests = round(row.requests * share)
        row.errors = round(row.errors * share)
        row.prompt_tokens = round(row.prompt_tokens * share)
        row.generated_tokens = round(row.generated_tokens * share)
    InferenceMetric.objects.bulk_update(
        rows,
        ["accelerator_uuids", "requests", "errors", "prompt_tokens", "generated_tokens"],
        batch_size=1000,
    )
