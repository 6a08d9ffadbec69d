"""Drift test data: nightly runs of a model's variants with speed, memory, energy and accuracy."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from accelboard.benchmarks.models import BenchmarkRun
from accelboard.benchmarks.services import (
    MetricInput,
    WorkloadSpec,
    model_variant_get_or_create,
    run_record,
    workload_get_or_create,
)
from accelboard.core.models import Team
from accelboard.importers.metrics import metric_spec
from tests import factories

ARC = "accuracy:arc_easy:acc_norm"
START = datetime(2026, 3, 1, 1, 0, tzinfo=UTC)


def accuracy_run(
    *,
    team: Team,
    model: str,
    variant: str,
    precision: str,
    method: str = "",
    at: datetime,
    metrics: dict[str, float],
    accelerator_type: Any = None,
) -> BenchmarkRun:
    """One run through ``run_record`` (accuracy metrics are not in the catalogue's unit table)."""
    variant_obj = model_variant_get_or_create(
        model=model, variant=variant, precision=precision, quantization_method=method
    )
    workload = workload_get_or_create(
        team=team, variant=variant_obj, spec=WorkloadSpec(scenario="offline", batch_size=64)
    )
    inputs = []
    for name, value in metrics.items():
        spec = metric_spec(name)
        inputs.append(MetricInput(name=name, value=value, unit=spec.unit if spec else "score"))
    run, _ = run_record(
        team=team,
        workload=workload,
        accelerator_type=accelerator_type,
        accelerator_count=1,
        started_at=at,
        metrics=inputs,
        git_commit=f"{abs(hash((model, variant, at))):040x}"[:40],
        branch="main",
    )
    return run


# variant -> (precision, method, throughput tok/s, memory GiB, energy J/inference, accuracy)
LLAMA = {
    "bf16": ("bf16", "", 4700.0, 71.0, 30.5, 0.800),
    "fp8": ("fp8", "FP8-dynamic", 7100.0, 70.0, 21.6, 0.796),
    "int4-awq": ("int4", "AWQ", 6200.0, 68.0, 19.8, 0.780),
}


@pytest.fixture
def llama(team: Team, other_team: Team) -> dict[str, Any]:
    """Ten nights of Llama-3.1-8B bf16 (reference), fp8 (0.5% loss: within the 1% budget) and
    int4-awq (2.5% loss: over) on one H100 for ``team``; another team's model that must not show."""
    h100 = factories.accelerator_type_from(factories.H100)
    runs: dict[str, list[BenchmarkRun]] = {name: [] for name in LLAMA}
    for night in range(10):
        for name, (precision, method, tps, mem, energy, acc) in LLAMA.items():
            runs[name].append(
                accuracy_run(
                    team=team,
                    model="Llama-3.1-8B",
                    variant=name,
                    precision=precision,
                    method=method,
                    at=START + timedelta(days=night, minutes=len(runs[name])),
                    accelerator_type=h100,
                    metrics={
                        "throughput_tokens_per_s": tps,
                        "memory_peak_bytes": mem * 2**30,
                        "energy_per_inference_j": energy,
                        ARC: acc,
                    },
                )
            )
    for night in range(3):
        for name, acc in (("fp16", 0.7), ("int8", 0.6)):
            accuracy_run(
                team=other_team,
                model="Secret-7B",
                variant=name,
                precision=name,
                at=START + timedelta(days=night),
                metrics={ARC: acc, "throughput_tokens_per_s": 1000.0},
            )
    from accelboard.benchmarks.models import Model

    return {
        "model": Model.objects.get(name="Llama-3.1-8B"),
        "secret": Model.objects.get(name="Secret-7B"),
        "runs": runs,
        "h100": h100,
    }


@pytest.fixture
def drift_series() -> Callable[..., None]:
    """``drift_series(team=, losses=[...])``: a reference at 0.80 and an int4 variant whose
    nightly accuracy gives up the given relative losses, one night each."""

    def make(*, team: Team, losses: list[float], model: str = "Drifty-8B") -> None:
        for night, loss in enumerate(losses):
            at = START + timedelta(days=night)
            accuracy_run(team=team, model=model, variant="bf16", precision="bf16", at=at, metrics={ARC: 0.80})
            accuracy_run(
                team=team,
                model=model,
                variant="int4",
                precision="int4",
                method="AWQ",
                at=at + timedelta(minutes=5),
                metrics={ARC: 0.80 * (1 - loss)},
            )

    return make
