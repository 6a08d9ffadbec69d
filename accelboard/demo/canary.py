"""The demo's canaries: a new build of Llama-3.1-8B fp8 (``fp8-v2``) rolled out to one GPU of
reno-h100-01 beside the stable fp8 deployment, which regresses on latency (x1.3) and so on
throughput per GPU, energy and cost per token, while its agreement with the reference holds; and a
harmless one (``fp8-v3``) that matches the stable deployment. Each has a canary check
(``accelboard.canary``): the first fails on those metrics, the second passes.

Loaded after the demo's serving metrics and costs, through the product's write paths
(``serving.services.inference_metrics_store`` with labels, ``drift.services.agreement_batch_ingest``,
``canary.services.canary_check_create``); the stable deployment's rows of the window are labelled
``track=stable``. The canaries' intervals follow the stable ones interval by interval (same traffic
shape), each on one GPU also named by the stable deployment: a demo shortcut, so that its energy is
that GPU's measured energy (the stable rows count the same GPU among their four).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np

from accelboard.canary.services import canary_check_create
from accelboard.core.models import Team
from accelboard.serving.models import InferenceMetric

from . import generator, serving_plan

HOST = "reno-h100-01"
MODEL = "Llama-3.1-8B"
STABLE = {"variant": "fp8", "gpus": 4}
WINDOW_HOURS = 72
# name, variant, labels, GPU index, latency factor, per-GPU throughput factor
CANARIES = [
    ("llama8b-fp8-v2", "fp8-v2", {"track": "canary"}, 3, 1.3, 1 / 1.3),
    ("llama8b-fp8-v3", "fp8-v3", {"track": "canary-v3"}, 2, 1.0, 1.0),
]


def _window(config: generator.DemoConfig) -> tuple[datetime, datetime]:
    end = datetime.fromtimestamp(config.telemetry_end, UTC)
    hours = min(WINDOW_HOURS, (config.telemetry_end - config.telemetry_start) // 3600)
    return end - timedelta(hours=hours), end


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
    stored = 0
    for name, variant, labels, gpu, slower, per_gpu in CANARIES:
        rng = generator._rng(config, "canary", name)
        gpu_uuid = rows[0].accelerator_uuids[gpu]
        intervals = []
        for row in rows:
            noise = rng.lognormal(0, 0.04, 6)
            share = per_gpu / len(row.accelerator_uuids)  # one GPU's slice of the traffic

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
    return {"canary_intervals": stored, "stable_labelled": labelled, "canary_checks": len(CANARIES)}
