"""The demo load's history: benchmark runs, serving metrics, drift, alerts, costs and the manifest.

Runs by ``bulk_create`` with ``run_record``'s semantics; alerts from the real detector
(``alerts_history_check``); costs from the real cost jobs. Called by ``accelboard.demo.loader``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np

from accelboard.attribution.services import RuleInput, allocation_days_compute, rule_set_save
from accelboard.benchmarks.models import BenchmarkRun, MetricValue, ModelVariant, Series
from accelboard.benchmarks.services import (
    WorkloadSpec,
    model_variant_get_or_create,
    series_get_or_create,
    workload_get_or_create,
)
from accelboard.core.models import Team
from accelboard.costs.pricebook_selectors import price_book_load
from accelboard.costs.run_cost_services import run_costs_compute
from accelboard.costs.services import cost_days_compute
from accelboard.costs.serving_cost_services import serving_cost_day_compute
from accelboard.fleet.models import AcceleratorType
from accelboard.serving.models import InferenceMetric

from . import benchmark_plan, generator, history_generator, plan, serving_plan


def _days(low: int, high: int) -> list[date]:
    """The UTC days that samples in [low, high) epoch seconds fall on."""
    if high <= low:
        return []
    first = datetime.fromtimestamp(low, UTC).date()
    last = datetime.fromtimestamp(high - 1, UTC).date()
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def day_costs_write(config: generator.DemoConfig, *, low: int, high: int) -> dict[str, int]:
    """Daily costs of the days in [low, high), as the nightly task computes them."""
    results = cost_days_compute(days=_days(low, high), record=False)  # the demo_fleet JobRun covers it
    return {"cost_daily": sum(r.rows for r in results)}


def older_day_costs_write(*, low: int, high: int) -> dict[str, int]:
    """The daily costs of the older days (a day split with the recent ones is computed again, whole)."""
    results = cost_days_compute(days=_days(low, high), record=False)
    return {"cost_daily_older": sum(r.rows for r in results)}


def allocation_write(config: generator.DemoConfig, teams: dict[str, Team], admin: Any) -> dict[str, int]:
    """The demo's attribution rules (``plan.ATTRIBUTION_RULES``) saved as an admin saves them,
    then every telemetry day's cost split by workload, as the nightly pass does."""
    rule_set_save(
        user=admin,
        rules=[
            RuleInput(
                selector=rule["selector"],
                value=rule["value"],
                team=teams[rule["team"]] if rule.get("team") else None,
                model=rule.get("model", ""),
                variant=rule.get("variant", ""),
            )
            for rule in plan.ATTRIBUTION_RULES
        ],
        note="the demo's rules",
    )
    results = allocation_days_compute(days=_days(config.telemetry_start, config.telemetry_end), record=False)
    return {"allocation_daily": sum(r.rows for r in results), "gpu_days": sum(r.gpu_days for r in results)}


def serving_costs_write(config: generator.DemoConfig) -> dict[str, int]:
    """The serving costs of every telemetry day (they need every day's telemetry)."""
    book = price_book_load(today=config.now.astimezone(UTC).date())
    every_day = _days(config.telemetry_start, config.telemetry_end)
    return {
        "serving_cost_daily": sum(
            serving_cost_day_compute(day=day, book=book, record=False) for day in every_day
        )
    }


def run_costs_write(config: generator.DemoConfig) -> dict[str, int]:
    """The per-run costs of the benchmark runs, as the per-run task computes them."""
    book = price_book_load(today=config.now.astimezone(UTC).date())
    runs = BenchmarkRun.objects.select_related("host", "accelerator_type", "workload")
    return {"run_costs": run_costs_compute(runs=runs, book=book)}


def objectives_write(teams: dict[str, Team]) -> dict[str, int]:
    """The serving SLOs the teams set (``serving_plan.SERVING_SLOS``), which the capacity plan sizes for."""
    from accelboard.alerts.threshold_services import serving_slo_set  # noqa: PLC0415 - alerts imports benchmarks
    from accelboard.benchmarks.models import Model  # noqa: PLC0415

    for team, model, p99_ms in serving_plan.SERVING_SLOS:
        serving_slo_set(
            team=teams[team],
            model=Model.objects.get(name=model),
            variant=None,
            p99_latency_ms=p99_ms,
            min_tokens_per_s=None,
        )
    return {"serving_slos": len(serving_plan.SERVING_SLOS)}


def alerts_check() -> dict[str, int]:
    """Regression alerts over the loaded run history: each series replayed run by run (the
    bulk-created runs did not enqueue the per-run check)."""
    from accelboard.alerts.regression_services import alerts_history_check  # noqa: PLC0415 - alerts imports benchmarks

    return alerts_history_check()


def _agreement_items(config: generator.DemoConfig) -> list[Any]:
    """Daily production agreement of the served quantized variants (``serving_plan.PRODUCTION_AGREEMENT``)
    over the last ``AGREEMENT_DAYS`` run days; int4-awq slides with the accuracy drift."""
    from accelboard.drift.services import AgreementInput  # noqa: PLC0415 - drift imports benchmarks

    first = max(0, config.days_runs - serving_plan.AGREEMENT_DAYS)
    drift_start = max(2, int(round(benchmark_plan.DRIFT_EVENT["at"] * (config.days_runs - 1))))
    drift_bench = next(
        b for b in benchmark_plan.BENCHMARKS if b["key"] == benchmark_plan.DRIFT_EVENT["config"]
    )
    items = []
    for model, variant, task, rate, kl, samples in serving_plan.PRODUCTION_AGREEMENT:
        rng = generator._rng(config, "agreement", model, variant)
        drifting = (model, variant) == (drift_bench["model"], drift_bench["variant"])
        for day in range(first, config.days_runs):
            slide = serving_plan.AGREEMENT_SLIDE_PER_DAY * max(0, day - drift_start) if drifting else 0.0
            items.append(
                AgreementInput(
                    model=model,
                    variant=variant,
                    day=history_generator.run_day_start(config, day).date(),
                    task=task,
                    agreement_rate=round(float(np.clip(rate - slide + rng.normal(0, 0.002), 0, 1)), 5),
                    kl_divergence=round(float(kl * (1 + 20 * slide) * rng.lognormal(0, 0.05)), 5),
                    samples=int(samples * rng.uniform(0.9, 1.1)),
                )
            )
    return items


def drift_write(config: generator.DemoConfig, teams: dict[str, Team]) -> dict[str, int]:
    """Drift budgets, production agreement (through the drift-metrics ingest service) and the
    drift alerts the daily check would have raised over the run history, day by day: the
    int4-awq slow drift is warned of (trending) before it crosses its budget."""
    from accelboard.benchmarks.models import Model  # noqa: PLC0415
    from accelboard.drift.services import (  # noqa: PLC0415
        agreement_batch_ingest,
        agreement_check,
        drift_history_check,
    )

    for name, budget in benchmark_plan.DRIFT_BUDGETS.items():
        Model.objects.filter(name=name).update(drift_budget=budget)
    accepted, _ = agreement_batch_ingest(
        team=teams[serving_plan.AGREEMENT_TEAM],
        batch_id=f"demo-agreement-{config.seed}",
        items=_agreement_items(config),
    )
    days = [
        history_generator.run_day_start(config, day) + timedelta(hours=23) for day in range(config.days_runs)
    ]
    findings = []
    for team in teams.values():
        findings += drift_history_check(team=team, days=days)
    findings += agreement_check(team=teams[serving_plan.AGREEMENT_TEAM])
    return {"production_agreement": accepted["accepted"], "drift_alerts": len(findings)}


def benchmarks_write(
    runs: list[history_generator.RunRow],
    hosts: list[generator.HostPlan],
    teams: dict[str, Team],
    users: dict[str, Any],
    host_ids: dict[str, int],
) -> tuple[dict[tuple[str, str], Series], dict[str, int]]:
    types = {accel.slug: accel for accel in AcceleratorType.objects.all()}
    variants = {}
    for model in benchmark_plan.MODELS:  # in order, so the first high-precision variant is the reference
        for name, precision, method in model["variants"]:
            variants[(model["name"], name)] = model_variant_get_or_create(
                model=model["name"],
                variant=name,
                precision=precision,
                quantization_method=method,
                family=model["family"],
                task=model["task"],
                parameters_b=model["parameters_b"],
            )
    by_host = {host.hostname: host for host in hosts}
    benches = {bench["key"]: bench for bench in benchmark_plan.BENCHMARKS}
    workloads = {}
    series: dict[tuple[str, str], Series] = {}
    for bench in benchmark_plan.BENCHMARKS:
        team = teams[bench["team"]]
        workload = workload_get_or_create(
            team=team,
            variant=variants[(bench["model"], bench["variant"])],
            spec=WorkloadSpec(**bench["workload"]),
        )
        workloads[bench["key"]] = workload
        for name in history_generator.bench_metric_names(bench):
            first = next(run for run in runs if run.config == bench["key"])
            metric = next(m for m in first.metrics if m.name == name)
            series[(bench["key"], name)] = series_get_or_create(
                team=team,
                workload=workload,
                accelerator_type=types[bench["gpu"]],
                accelerator_count=bench["count"],
                metric=name,
                unit=metric.unit,
                direction=metric.direction,
            )
    run_objects = []
    for run in runs:
        bench = benches[run.config]
        host_plan = by_host.get(run.hostname) if run.hostname else None
        run_objects.append(
            BenchmarkRun(
                uuid=run.uuid,
                team=teams[bench["team"]],
                workload=workloads[run.config],
                accelerator_type=types[bench["gpu"]],
                accelerator_count=bench["count"],
                host_id=host_ids.get(run.hostname) if run.hostname else None,
                driver_version=host_plan.driver_version if host_plan else "",
                cuda_version=host_plan.cuda_version if host_plan else "",
                started_at=run.started_at,
                finished_at=run.finished_at,
                git_commit=run.git_commit,
                branch="main",
                uploaded_by=users[f"{_short(bench['team'])}-engineer"],
                uploaded_via="demo",
                source_format="demo",
                context={"demo": True, "nightly": True, "day": run.day, "events": list(run.events)},
            )
        )
    BenchmarkRun.objects.bulk_create(run_objects, batch_size=1000)
    values = []
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for run, run_object in zip(runs, run_objects, strict=True):
        for metric in run.metrics:
            key = (run.config, metric.name)
            values.append(
                MetricValue(
                    run=run_object,
                    series=series[key],
                    name=metric.name,
                    value=metric.value,
                    unit=metric.unit,
                    direction=metric.direction,
                    samples=list(metric.samples),
                    source="demo:generator",
                    measured_at=run.started_at,
                )
            )
            if key not in latest or run.started_at >= latest[key][0]:
                latest[key] = (run.started_at, metric.value)
    MetricValue.objects.bulk_create(values, batch_size=2000)
    for key, (started_at, value) in latest.items():
        series[key].last_run_at = started_at
        series[key].last_value = value
    Series.objects.bulk_update(list(series.values()), ["last_run_at", "last_value"], batch_size=500)
    return series, {
        "workloads": len(workloads),
        "series": len(series),
        "benchmark_runs": len(run_objects),
        "metric_values": len(values),
    }


def _short(team_slug: str) -> str:
    return next(team["short"] for team in plan.TEAMS if team["slug"] == team_slug)


def serving_write(
    config: generator.DemoConfig,
    hosts: list[generator.HostPlan],
    events: generator.TelemetryEvents,
    teams: dict[str, Team],
    host_ids: dict[str, int],
) -> int:
    rows = []
    for deployment in history_generator.serving_metrics(config, hosts, events):
        variant = ModelVariant.objects.get(model__name=deployment.model, name=deployment.variant)
        columns = {name: values.tolist() for name, values in deployment.columns.items()}
        for i, epoch in enumerate(deployment.epochs.tolist()):
            served = columns["requests"][i] > 0
            rows.append(
                InferenceMetric(
                    team=teams[deployment.team],
                    host_id=host_ids[deployment.hostname],
                    variant=variant,
                    engine=deployment.engine,
                    accelerator_uuids=deployment.gpu_uuids,
                    interval_start=datetime.fromtimestamp(epoch, UTC),
                    interval_s=config.serving_interval_s,
                    batch_id="demo",
                    **{
                        name: (values[i] if served or not name.endswith("_ms") else None)
                        for name, values in columns.items()
                    },
                )
            )
    InferenceMetric.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


def manifest_with_ids(
    config: generator.DemoConfig,
    hosts: list[generator.HostPlan],
    runs: list[history_generator.RunRow],
    events: generator.TelemetryEvents,
    series: dict[tuple[str, str], Series],
) -> dict[str, Any]:
    """The generator's manifest plus the database ids of each named series."""
    result = history_generator.manifest(config, hosts, runs, events)
    named = set()
    for event in result["benchmark_events"]:
        for item in event["series"]:
            item["series_id"] = series[(item["config"], item["metric"])].pk
            named.add(item["series_id"])
    # Noise only: a detector that opens an alert on one of these raised a false alarm.
    result["series_without_events"] = sorted(row.pk for row in series.values() if row.pk not in named)
    result["series_count"] = len(series)
    return result
