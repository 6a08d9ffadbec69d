"""The plan as tables for CSV/XLSX (the costs app's writers: same columns, injection guard, BOM).

Pure: a :class:`~accelboard.planning.capacity.Plan` in, :class:`ExportTable` out. The options
table carries every input behind each figure (the operating point's runs and metrics, the price
row and its source, electricity price, PUE and grid intensity), so a reader can redo any
monthly figure by hand; the assumptions table says where each value came from. Money leaves the
plan here, so it is rounded here, once (``costs.formulas.money.money_round``: 4 places for amounts,
6 for per-hour and per-1M figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from accelboard.costs.exports import Column, ExportTable
from accelboard.costs.formulas.money import RATE_PLACES, money_round

from . import capacity as c


def _pct(value: float | None) -> float | None:
    return None if value is None else round(100.0 * value, 4)


def _rate(value: Decimal | None) -> Decimal | None:
    return money_round(value, RATE_PLACES)


def option_row(o: c.OptionPlan) -> dict[str, Any]:
    """One option as the page's table and the exports read it."""
    option, point, price = o.option, o.point, o.price
    electricity = price.electricity if price else None
    return {
        "rank": o.rank,
        "option": option.label,
        "variant": option.variant,
        "precision": option.precision,
        "accelerator": option.accelerator,
        "gpus_per_replica": option.accelerator_count,
        "framework": option.framework,
        "scenario": option.scenario,
        "status": o.status_label,
        "current": o.is_current,
        "load": point.load if point else None,
        "throughput_replica": point.throughput if point else None,
        "throughput_gpu": o.throughput_per_gpu,
        "p99_e2e_ms": point.p99_ms if point else None,
        "p99_ttft_ms": point.ttft_p99_ms if point else None,
        "p99_itl_ms": point.itl_p99_ms if point else None,
        "input_length": point.input_length if point else None,
        "output_length": point.output_length if point else None,
        "runs": " ".join(str(r) for r in point.run_ids) if point else "",
        "replicas_at_peak": o.replicas_at_peak,
        "replicas": o.replicas,
        "gpus": o.gpus,
        "instances": o.instances,
        "billed_gpus": o.billed_gpus,
        "utilisation_mean_pct": _pct(o.utilisation_mean),
        "utilisation_peak_pct": _pct(o.utilisation_peak),
        "capacity_monthly": money_round(o.capacity_monthly),
        "energy_monthly": money_round(o.energy_monthly),
        "total_monthly": money_round(o.total_monthly),
        "device_kwh_monthly": o.device_kwh_monthly,
        "facility_kwh_monthly": o.facility_kwh_monthly,
        "carbon_kg_monthly": o.carbon_kg_monthly,
        "cost_per_1m": _rate(o.cost_per_1m),
        "point_cost_per_1m": _rate(o.point_cost_per_1m),
        "benchmark_cost_per_1m": _rate(o.benchmark_cost_per_1m),
        "benchmark_load": o.fastest.load if o.fastest else None,
        "benchmark_throughput": o.fastest.throughput if o.fastest else None,
        "benchmark_p99_e2e_ms": o.fastest.p99_ms if o.fastest else None,
        "saving_monthly": money_round(o.saving_monthly),
        "saving_hardware": money_round(o.saving_hardware),
        "saving_basis": money_round(o.saving_basis),
        "saving_pct": _pct(o.saving_pct),
        "accuracy_loss_pct": _pct(o.accuracy.loss) if o.accuracy else None,
        "accuracy_budget_pct": _pct(o.accuracy.budget) if o.accuracy else None,
        "accuracy_verdict": o.accuracy.verdict if o.accuracy else "",
        "price_basis": price.label if price else "",
        "price_per_hour": price.instance_price_per_hour if price else None,
        "price_gpus": price.instance_gpus if price else None,
        "price_per_gpu_hour": _rate(price.rate.price_per_accelerator_hour) if price else None,
        "price_currency": price.rate.currency if price else "",
        "price_source": price.rate.ref.source if price else "",
        "price_fetched_on": price.rate.ref.fetched_on if price else None,
        "price_stale": price.rate.ref.stale if price else False,
        "kwh_price": electricity.price_per_kwh if electricity else None,
        "pue": electricity.pue if electricity else None,
        "carbon_g_per_kwh": electricity.carbon_g_per_kwh if electricity else None,
        "kwh_source": electricity.ref.source if electricity else "",
        "notes": " ".join(o.notes),
    }


def options_table(*, plan: c.Plan) -> ExportTable:
    cur = plan.currency
    return ExportTable(
        name="options",
        title="Options, ranked",
        columns=[
            Column("rank", "Rank", "int"),
            Column("option", "Option"),
            Column("variant", "Variant"),
            Column("precision", "Precision"),
            Column("accelerator", "Accelerator"),
            Column("gpus_per_replica", "GPUs per replica", "int"),
            Column("framework", "Framework"),
            Column("scenario", "Benchmark scenario"),
            Column("status", "Status"),
            Column("current", "Runs today", "flag"),
            Column("load", "Load level at the objective"),
            Column("throughput_replica", "Output tokens/s per replica at the objective", "rate"),
            Column("throughput_gpu", "Output tokens/s per GPU at the objective", "rate"),
            Column("p99_e2e_ms", "p99 e2e at that load (ms)", "rate"),
            Column("p99_ttft_ms", "p99 TTFT at that load (ms)", "rate"),
            Column("p99_itl_ms", "p99 ITL at that load (ms)", "rate"),
            Column("input_length", "Benchmark input tokens", "int"),
            Column("output_length", "Benchmark output tokens", "int"),
            Column("runs", "Runs behind the load level (ids)"),
            Column("replicas_at_peak", "Replicas at peak + headroom", "int"),
            Column("replicas", "Replicas (with spare)", "int"),
            Column("gpus", "GPUs", "int"),
            Column("instances", "Instances billed", "int"),
            Column("billed_gpus", "GPUs billed", "int"),
            Column("utilisation_mean_pct", "Utilisation at mean load (%)", "rate"),
            Column("utilisation_peak_pct", "Utilisation at peak (%)", "rate"),
            Column("capacity_monthly", f"Capacity per month ({cur})", "money"),
            Column("energy_monthly", f"Energy per month ({cur})", "money"),
            Column("total_monthly", f"Total per month ({cur})", "money"),
            Column("device_kwh_monthly", "Energy at the GPUs per month (kWh)", "kwh"),
            Column("facility_kwh_monthly", "Energy × PUE per month (kWh)", "kwh"),
            Column("carbon_kg_monthly", "Carbon per month (kgCO2e)", "kg"),
            Column("cost_per_1m", f"Cost per 1M output tokens at real utilisation ({cur})", "rate"),
            Column("point_cost_per_1m", f"Cost per 1M at the objective's load, full use ({cur})", "rate"),
            Column("benchmark_cost_per_1m", f"Benchmark cost per 1M, fastest load, full use ({cur})", "rate"),
            Column("benchmark_load", "Benchmark's fastest load"),
            Column("benchmark_throughput", "Benchmark's highest output tokens/s per replica", "rate"),
            Column("benchmark_p99_e2e_ms", "p99 e2e at that load (ms)", "rate"),
            Column("saving_monthly", f"Saving per month against today ({cur})", "money"),
            Column(
                "saving_hardware",
                f"of which the hardware, today re-priced on this price row ({cur})",
                "money",
            ),
            Column(
                "saving_basis", f"of which the price basis, today's rows against this row ({cur})", "money"
            ),
            Column("saving_pct", "Saving against today (%)", "rate"),
            Column("accuracy_loss_pct", "Accuracy loss against the reference (%)", "rate"),
            Column("accuracy_budget_pct", "Drift budget (%)", "rate"),
            Column("accuracy_verdict", "Drift verdict"),
            Column("price_basis", "Price row"),
            Column("price_per_hour", "Instance price per hour", "rate"),
            Column("price_gpus", "GPUs per priced instance", "int"),
            Column("price_per_gpu_hour", "Price per GPU-hour", "rate"),
            Column("price_currency", "Price currency"),
            Column("price_source", "Price source"),
            Column("price_fetched_on", "Price fetched", "date"),
            Column("price_stale", "Stale price", "flag"),
            Column("kwh_price", "Electricity price per kWh", "rate"),
            Column("pue", "PUE", "rate"),
            Column("carbon_g_per_kwh", "Grid carbon (gCO2e/kWh)", "rate"),
            Column("kwh_source", "Electricity source"),
            Column("notes", "Notes (thin data)"),
        ],
        rows=[option_row(o) for o in plan.options],
    )


def traffic_table(*, plan: c.Plan) -> ExportTable:
    return ExportTable(
        name="traffic",
        title="Production traffic per day",
        columns=[
            Column("day", "Day (UTC)", "date"),
            Column("buckets", "Buckets with traffic", "int"),
            Column("complete", "Complete day", "flag"),
            Column("mean_output_tps", "Mean output tokens/s", "rate"),
            Column("peak_output_tps", "Peak output tokens/s", "rate"),
            Column("peak_rps", "Peak requests/s", "rate"),
        ],
        rows=[
            {
                "day": d.day,
                "buckets": d.buckets,
                "complete": d.complete,
                "mean_output_tps": d.mean_output_tps,
                "peak_output_tps": d.peak_output_tps,
                "peak_rps": d.peak_rps,
            }
            for d in plan.traffic.days
        ],
    )


def assumption_rows(
    *, plan: c.Plan, basis_text: str, growth_source: str, objective_source: str
) -> list[dict[str, Any]]:
    """Each assumption with its value and where it came from (the page lists the same rows)."""
    t, a, current = plan.traffic, plan.assumptions, plan.inputs.current
    rows = [
        ("Traffic window", f"{t.window_start:%Y-%m-%d %H:%M} to {t.window_end:%Y-%m-%d %H:%M} UTC", "production serving metrics"),
        ("Bucket", f"{t.bucket_s // 60} min", "the busiest bucket of each day is that day's peak"),
        ("Peak output tokens/s", f"{t.peak_output_tps:,.0f}", "highest daily peak of the window"),
        ("Mean output tokens/s", f"{t.mean_output_tps:,.0f}", "over the covered time"),
        ("Growth", f"{a.growth_pct_per_month:+.1f} % per month", growth_source),
        ("Horizon", f"{a.horizon_months} months", "traffic is planned for its end"),
        ("Growth factor", f"× {a.growth_factor:.3f}", "(1 + growth) ^ horizon"),
        ("Headroom", f"{a.headroom_pct:g} % over the planned peak", "set on the page (default 20 %)"),
        ("Redundancy", "N+1: one spare replica" if a.n_plus_one else "none", "set on the page"),
        ("Latency objective", plan.inputs.objective.text, objective_source or "set on the page"),
        ("Price basis", basis_text, "price book rows valid today"),
        ("Currency", plan.currency, "the currency most chosen price rows use; others converted by the book's rates"),
        ("Hours per month", f"{c.HOURS_PER_MONTH:g}", "8 760 h / 12"),
        ("Idle power", f"{c.IDLE_POWER_SHARE:.0%} of board power per GPU", "power between idle and the benchmark's is linear in utilisation"),
        ("Length tolerance", f"± {c.LENGTH_TOLERANCE:.0%}", "benchmark tokens per request further from the production mix are flagged"),
        ("Today", f"{current.hardware}, {current.gpus} GPU{'s' if current.gpus != 1 else ''}" if current else "unknown", "GPUs the serving metrics of the last day name"),
        (
            "Today's cost",
            f"{current.monthly_cost:,.2f} {current.currency} per month" if current and current.monthly_cost is not None else f"unknown: {c.today_missing(current)}",
            f"serving cost tables of {current.cost_days} day{'s' if current.cost_days != 1 else ''}: cost per GPU-hour × today's GPUs × 730 h, priced with {current.price_basis or 'the hosts own price rows'}" if current else "",
        ),
    ]  # fmt: skip
    return [{"assumption": name, "value": value, "source": source} for name, value, source in rows]


def assumptions_table(*, rows: list[dict[str, Any]]) -> ExportTable:
    return ExportTable(
        name="assumptions",
        title="Assumptions",
        columns=[
            Column("assumption", "Assumption"),
            Column("value", "Value"),
            Column("source", "Where it comes from"),
        ],
        rows=rows,
    )


def sensitivity_table(
    *, plan: c.Plan, growths: Sequence[float], series: dict[str, list[Decimal | None]]
) -> ExportTable:
    labels = {o.option.key: o.option.label for o in plan.options}
    keys = list(series)
    columns = [Column("growth", "Growth (% per month)", "rate")]
    columns += [
        Column(f"o{i}", f"{labels.get(key, key)} ({plan.currency} per month)", "money")
        for i, key in enumerate(keys)
    ]
    rows = []
    for j, growth in enumerate(growths):
        row: dict[str, Any] = {"growth": growth}
        for i, key in enumerate(keys):
            row[f"o{i}"] = money_round(series[key][j])
        rows.append(row)
    return ExportTable(name="sensitivity", title="Monthly cost against growth", columns=columns, rows=rows)
