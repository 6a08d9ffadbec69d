"""Per-run energy, cost and carbon (``RunCost``): what a benchmark's unit of work costs.

``run_cost_compute`` gathers the inputs of the pure ``formulas.benchmark.benchmark_cost`` from
the run's metrics, its host's telemetry and the price book, and upserts the ``RunCost``.

Energy, first found wins (``energy_source``):
1. "reported": the tool reported J per token / per inference, or ``energy_j`` over the run;
2. "power": the tool reported ``power_avg_w`` (× duration);
3. "counter": the run's host GPUs' minute rollups over [started_at, finished_at] (energy-counter
   deltas; power integration where a GPU has no counter), used only when the host has exactly
   ``accelerator_count`` GPUs of the run's type (otherwise we cannot tell which GPUs ran it);
4. "board-power-estimate": board power × count × duration, flagged "energy-estimated";
5. none: energy NULL, flag "no-energy". Never invented.
Where a reported figure and the telemetry both exist and differ by more than 5 %, both are kept
in ``inputs`` and the run is flagged "energy-disagreement" (a known NVML discrepancy,
reported as ml-energy/zeus issue 181).

Costs per 1M units at the run's throughput: capacity = 1e6 / throughput × count × price per
GPU-hour / 3600; energy = J per unit × 1e6 / 3.6e6 × PUE × price per kWh; carbon likewise with
the grid's g/kWh. Training runs (scenario "training" or a ``time_to_train_s`` metric) also get
time, energy and cost to train and per sample (``formulas.training.training_cost``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Max, Min, Sum
from django.utils import timezone

from accelboard.benchmarks.models import BenchmarkRun, MetricValue
from accelboard.fleet.models import Accelerator, TelemetryRollup

from .formulas.benchmark import benchmark_cost
from .formulas.money import RATE_PLACES, money_round
from .formulas.training import training_cost
from .formulas.types import AcceleratorRate, ElectricityRate
from .models import RunCost
from .pricebook_selectors import PriceBook, accelerator_rate_value, electricity_rate_value, price_book_load

DISAGREEMENT_LIMIT = 0.05
_THROUGHPUT_UNITS = (
    ("throughput_tokens_per_s", "token"),
    ("throughput_samples_per_s", "sample"),
    ("throughput_requests_per_s", "inference"),
)


def _dec(value: Decimal | None) -> Decimal | None:
    return money_round(value, RATE_PLACES)


@dataclass
class _Context:
    """What costing runs reads besides the run: the book, its host's GPUs, the rollups' span.

    Filled per run by ``run_cost_compute``, once for many by ``run_costs_compute``."""

    book: PriceBook
    gpus: dict[tuple[int, int | None], list[int]] | None = None  # (host, type) -> GPU ids
    telemetry_span: tuple[Any, Any] | None = None  # (first, last) minute bucket; None = unknown

    def host_gpus(self, run: BenchmarkRun) -> list[int]:
        if run.host_id is None:
            return []
        if self.gpus is None:
            return list(
                Accelerator.objects.filter(
                    host_id=run.host_id, accelerator_type_id=run.accelerator_type_id
                ).values_list("id", flat=True)
            )
        return self.gpus.get((run.host_id, run.accelerator_type_id), [])


def _telemetry_energy_j(run: BenchmarkRun, ctx: _Context) -> tuple[float | None, str]:
    if run.host_id is None or run.finished_at is None:
        return None, "no-host-or-end"
    span = ctx.telemetry_span
    if span is not None and (span[0] is None or run.finished_at <= span[0] or run.started_at > span[1]):
        return None, "no-telemetry"
    gpus = ctx.host_gpus(run)
    if len(gpus) != run.accelerator_count:
        return None, "gpus-ambiguous"
    total = TelemetryRollup.objects.filter(
        width_s=60, accelerator_id__in=gpus, bucket__gte=run.started_at, bucket__lt=run.finished_at
    ).aggregate(j=Sum("energy_j"))["j"]
    return total, "" if total is not None else "no-telemetry"


def _energy(
    run: BenchmarkRun,
    metrics: dict[str, float],
    unit: str,
    throughput: float,
    duration_s: float | None,
    ctx: _Context,
) -> dict[str, Any]:
    """Energy of the run and J per unit, with its source and what else was seen (see module)."""
    out: dict[str, Any] = {"energy_j": None, "per_unit": None, "source": "", "flags": [], "inputs": {}}
    units = throughput * duration_s if duration_s else None
    per_unit_metric = metrics.get("energy_per_token_j" if unit == "token" else "energy_per_inference_j")
    telemetry_j, why = _telemetry_energy_j(run, ctx)
    out["inputs"]["telemetry_energy_j"] = telemetry_j
    if why:
        out["inputs"]["telemetry"] = why
    if per_unit_metric is not None:
        out.update(
            per_unit=per_unit_metric, source="reported", energy_j=per_unit_metric * units if units else None
        )
    elif "energy_j" in metrics and units:
        out.update(energy_j=metrics["energy_j"], per_unit=metrics["energy_j"] / units, source="reported")
    elif "power_avg_w" in metrics and duration_s and units:
        energy = metrics["power_avg_w"] * duration_s
        out.update(energy_j=energy, per_unit=energy / units, source="power")
    elif "power_avg_w" in metrics:
        # No duration, but the steady-state ratio needs none: J per unit = W / (units per second).
        out.update(per_unit=metrics["power_avg_w"] / throughput, source="power")
    elif telemetry_j is not None and units:
        out.update(energy_j=telemetry_j, per_unit=telemetry_j / units, source="counter")
    elif run.accelerator_type and run.accelerator_type.board_power_w:
        watts = run.accelerator_type.board_power_w * run.accelerator_count
        out.update(
            energy_j=watts * duration_s if duration_s else None,
            per_unit=watts / throughput,
            source="board-power-estimate",
        )
        out["flags"].append("energy-estimated")
        out["inputs"]["board_power_w"] = run.accelerator_type.board_power_w
    else:
        out["flags"].append("no-energy")
    if out["source"] in ("reported", "power") and telemetry_j and out["energy_j"]:
        gap = abs(out["energy_j"] - telemetry_j) / max(out["energy_j"], telemetry_j)
        out["inputs"]["energy_disagreement"] = round(gap, 4)
        if gap > DISAGREEMENT_LIMIT:
            out["flags"].append("energy-disagreement")
    return out


def _run_cost_build(run: BenchmarkRun, metrics: dict[str, float], ctx: _Context) -> RunCost | None:
    """The run's ``RunCost`` (unsaved), or None without a throughput metric to cost a unit by."""
    unit, throughput = next(((u, metrics[n]) for n, u in _THROUGHPUT_UNITS if metrics.get(n)), ("", None))
    if not throughput or throughput <= 0:
        return None
    duration_s = metrics.get("wall_time_s") or metrics.get("time_to_train_s")
    if duration_s is None and run.finished_at:
        duration_s = (run.finished_at - run.started_at).total_seconds() or None
    energy = _energy(run, metrics, unit, throughput, duration_s, ctx)

    day = run.started_at.date()
    book = ctx.book
    price = electricity = carbon = None
    host = run.host
    training_run = _is_training(run, metrics)
    reference = False
    if host is not None:
        price = book.accelerator_price(host=host, accelerator_type_id=run.accelerator_type_id, day=day)
        electricity = book.electricity_price(host=host, day=day)
        carbon = None if electricity else book.carbon_intensity(host=host, day=day)
    elif training_run:
        # An MLPerf Training result ran on the submitter's system, not a host of ours: price its
        # time at the book's reference (cheapest on-demand) row for the type, and say so.
        price = book.reference_price(accelerator_type_id=run.accelerator_type_id, day=day)
        reference = price is not None
    rate = accelerator_rate_value(price, today=book.today) if price else None
    elec = electricity_rate_value(electricity=electricity, carbon=carbon, today=book.today)
    figures = benchmark_cost(
        throughput=throughput,
        accelerator_count=run.accelerator_count,
        energy_per_unit_j=energy["per_unit"],
        rate=rate,
        electricity=elec,
    )
    flags = list(
        dict.fromkeys(
            [*energy["flags"], *figures.flags]
            + (["no-host"] if run.host_id is None else [])
            + (["reference-price"] if reference else [])
        )
    )
    # Energy to train only where measured (reported, average power, the GPUs' counters), never
    # the board-power estimate the per-1M figures may fall back to.
    measured_j = energy["energy_j"] if energy["source"] in ("reported", "power", "counter") else None
    training = _training(run, metrics, duration_s, measured_j, rate, elec) if training_run else {}
    if training and measured_j is not None:
        training["energy_source"] = energy["source"]
    return RunCost(
        run=run,
        **{
            "unit": unit,
            "units": throughput * duration_s if duration_s else None,
            "duration_s": duration_s,
            "throughput": throughput,
            "accelerator_count": run.accelerator_count,
            "energy_j": energy["energy_j"],
            "energy_source": energy["source"],
            "energy_per_unit_j": energy["per_unit"],
            "energy_per_1k_j": energy["per_unit"] * 1000 if energy["per_unit"] is not None else None,
            "capacity_cost_per_1m": _dec(figures.capacity_per_1m),
            "energy_cost_per_1m": _dec(figures.energy_cost_per_1m),
            "total_cost_per_1m": _dec(figures.total_per_1m),
            "carbon_g_per_1m": figures.carbon_g_per_1m,
            "currency": figures.currency,
            "accelerator_price": price,
            "electricity_price": electricity,
            "carbon_intensity": carbon,
            "price_stale": any(book.stale(r) for r in (price, electricity, carbon)),
            "flags": flags,
            "training": training,
            "inputs": {
                **energy["inputs"],
                "metrics": {k: v for k, v in metrics.items() if k in _INPUT_METRICS},
            },
            "computed_at": timezone.now(),
        },
    )


def run_cost_compute(
    *, run: BenchmarkRun, today: date | None = None, book: PriceBook | None = None
) -> RunCost | None:
    """Compute and store (replace) the run's ``RunCost``; None (and any old row removed) when the
    run has no throughput metric to cost a unit of work by."""
    ctx = _Context(book=book or price_book_load(today=today or timezone.now().date()))
    cost = _run_cost_build(run, dict(run.metrics.values_list("name", "value")), ctx)
    with transaction.atomic():
        RunCost.objects.filter(run=run).delete()
        if cost is not None:
            cost.save()
    return cost


def run_costs_compute(*, runs: Iterable[BenchmarkRun], book: PriceBook) -> int:
    """Cost many runs with a handful of queries (the demo, a backfill): metrics, GPUs and the
    rollups' time span read once; telemetry summed only for runs inside that span. Replaces."""
    runs = list(runs)
    ids = [r.pk for r in runs]
    metrics: dict[int, dict[str, float]] = defaultdict(dict)
    for run_id, name, value in MetricValue.objects.filter(run_id__in=ids).values_list(
        "run_id", "name", "value"
    ):
        metrics[run_id][name] = value
    gpus: dict[tuple[int, int | None], list[int]] = defaultdict(list)
    host_ids = {r.host_id for r in runs if r.host_id}
    for gpu_id, host_id, type_id in Accelerator.objects.filter(host_id__in=host_ids).values_list(
        "id", "host_id", "accelerator_type_id"
    ):
        gpus[(host_id, type_id)].append(gpu_id)
    span = TelemetryRollup.objects.filter(width_s=60).aggregate(first=Min("bucket"), last=Max("bucket"))
    ctx = _Context(book=book, gpus=gpus, telemetry_span=(span["first"], span["last"]))
    costs = [c for c in (_run_cost_build(r, metrics[r.pk], ctx) for r in runs) if c is not None]
    with transaction.atomic():
        RunCost.objects.filter(run_id__in=ids).delete()
        RunCost.objects.bulk_create(costs, batch_size=1000)
    return len(costs)


_INPUT_METRICS = {
    "throughput_tokens_per_s",
    "throughput_samples_per_s",
    "throughput_requests_per_s",
    "energy_j",
    "energy_per_token_j",
    "energy_per_inference_j",
    "power_avg_w",
    "wall_time_s",
    "time_to_train_s",
}


def _is_training(run: BenchmarkRun, metrics: dict[str, float]) -> bool:
    return "time_to_train_s" in metrics or run.workload.scenario == "training"


def _training(
    run: BenchmarkRun,
    metrics: dict[str, float],
    duration_s: float | None,
    energy_j: float | None,
    rate: AcceleratorRate | None,
    electricity: ElectricityRate | None,
) -> dict[str, Any]:
    """The run's figures to train (``formulas.training.training_cost``) from its metrics."""
    if not duration_s:
        return {"flags": ["no-duration"]}
    context = run.context if isinstance(run.context, dict) else {}
    # The importer's count of samples trained where it kept one (MLPerf's samples_count), exact;
    # else throughput × time, which is the same count through a float division and back.
    samples = _positive(context.get("samples_trained")) or (
        metrics.get("throughput_samples_per_s", 0) * duration_s or None
    )
    iterations, iterations_from = _iterations(run, samples)
    out = training_cost(
        duration_s=duration_s,
        energy_j=energy_j,
        samples=samples,
        iterations=iterations,
        accelerator_count=run.accelerator_count,
        rate=rate,
        electricity=electricity,
    )
    if samples:
        out["samples"] = samples
    if iterations:
        out.update(iterations=iterations, iterations_from=iterations_from)
    return out


def _iterations(run: BenchmarkRun, samples: float | None) -> tuple[float | None, str]:
    """(iterations to train, how they were found): the tool's count (context ``iterations``),
    else samples trained / global batch size (an MLPerf Training step is one global batch),
    else (None, "")."""
    context = run.context if isinstance(run.context, dict) else {}
    counted = _positive(context.get("iterations"))
    if counted:
        return counted, "context:iterations"
    batch = run.workload.batch_size
    if samples and batch:
        return samples / batch, "samples/global_batch_size"
    return None, ""


def _positive(value: Any) -> float | None:
    """A positive number from a run's JSON context, else None (a string, a bool, zero)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None
