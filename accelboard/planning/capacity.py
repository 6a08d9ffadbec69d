"""Capacity and cost planning: pure computation on plain dataclasses (no ORM, no clock).

The question: *to serve the traffic a model really has, at its latency objective, how many GPUs
of which kind and precision are needed, what do they cost per month, and what is saved against
what runs today?* The page, its exports and saved scenarios all read :func:`plan_build`.

1. **Traffic shape** and 2. **serving options**, with the rest of a plan's inputs, are built in
   :mod:`.plan_inputs` (its docstring has their rules): the peak is the worst day's busiest
   bucket, growth compares whole weeks, an option's operating points are its measured loads.
3. **Sizing** (:func:`option_plan`), for one option:

   - the operating point is the highest-throughput measured point whose p99s (e2e, TTFT, ITL: those
     the objective sets) all meet the objective; nothing is interpolated between points nor
     extrapolated beyond them. No point meeting it, or no point measuring a metric the objective
     sets: the option is listed with the reason and not ranked;
   - demand = peak (or mean) output tokens/s × (1 + growth per month) ^ horizon months;
   - replicas at peak = ceil(peak demand × (1 + headroom) / throughput of the point), plus one
     spare with N+1; GPUs = replicas × GPUs per replica;
   - instances of the price row's size are billed: replicas are packed whole into instances
     (``instance GPUs // GPUs per replica`` each), so 5 one-GPU replicas on 8-GPU servers bill 8;
   - utilisation at mean = mean demand / (replicas × point throughput);
   - capacity per month = instances × instance price per hour × 730 h;
   - power = per replica ``idle + (benchmark power − idle) × utilisation``, idle being
     ``IDLE_POWER_SHARE`` of board power per GPU, plus idle power of billed GPUs no replica uses;
     energy = power × 730 h; at the facility × PUE; cost × price per kWh; carbon × grid intensity;
   - cost per 1M output tokens at real utilisation = monthly cost / output tokens served in a
     month at mean demand; beside it the benchmark's cost per 1M at full load (its
     highest-throughput point, whatever its latency: what a reading of the benchmark alone says);
   - saving = today's monthly cost (from the cost tables) − the option's.
4. **Ranking** (:func:`plan_build`): options that size, by accuracy within budget first, then
   monthly cost, then GPUs. Thin data is said per option (benchmark lengths other than the
   production mix by more than ``LENGTH_TOLERANCE``, fewer than ``MIN_RUNS`` runs, one load level
   only, no energy measured, stale price, no accuracy comparison, billed GPUs left idle) and per
   plan (short or gappy traffic, no growth trend, no objective, no option meeting it).
5. **Sensitivity** (:func:`growth_sensitivity`, :func:`headroom_sensitivity`): the same plan
   re-run over a range of growth or headroom values.

Money follows the costs app's rule (``costs.formulas.money``): a ``Decimal`` from the price book's
row to the plan's figures (quantities enter as ``as_decimal``), never a float, rounded only where a
figure is stored or exported; shares, kWh, carbon and utilisation are floats.

Known limits: throughput is measured at the benchmark's lengths and taken as it is for the
production mix (flagged when they differ); p99 latency at a load between two measured points is
not known, so the lower one is used; power between idle and the benchmark's is taken as linear in
utilisation; a replica is assumed not to span instances smaller than itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal

from accelboard.benchmarks.configurations import ConfigPoint
from accelboard.core import numbers
from accelboard.costs.formulas.money import as_decimal, money_convert
from accelboard.costs.formulas.types import (
    J_PER_KWH,
    ExchangeRate,
    MissingRateError,
    Money,
)

from .plan_inputs import (
    GROWTH_BLOCK_DAYS,
    Accuracy,
    Assumptions,
    CurrentDeployment,
    OptionPrice,
    PlanInputs,
    ServingOption,
    TrafficShape,
)

HOURS_PER_MONTH = 730.0  # 8760 h / 12
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600.0
_MONTH_HOURS = as_decimal(HOURS_PER_MONTH)
_PER_1M = Decimal(1_000_000)
# Production and benchmark tokens per request further apart than this (relative) are flagged.
LENGTH_TOLERANCE = 0.25
# Fewer runs than this behind an operating point are flagged.
MIN_RUNS = 3
# An idle GPU draws this share of its board power (H100 SXM: ~70 W of 700 W; L4: ~16 W of 72 W).
IDLE_POWER_SHARE = 0.15
# Below this share of the window's buckets the traffic is called gappy.
COVERAGE_MIN = 0.9

# Option statuses: only RANKED options have a monthly cost and a rank.
RANKED = "ranked"
NO_THROUGHPUT = "no-throughput"
OBJECTIVE_UNMEASURED = "objective-unmeasured"
MISSES_OBJECTIVE = "misses-objective"
NO_PRICE = "no-price"
OTHER_CURRENCY = "other-currency"
NO_OBJECTIVE = "no-objective"
STATUS_LABELS = {
    RANKED: "Ranked",
    NO_THROUGHPUT: "No token throughput measured",
    OBJECTIVE_UNMEASURED: "Objective not measured",
    MISSES_OBJECTIVE: "No benchmark meets the objective",
    NO_PRICE: "No price under this basis",
    OTHER_CURRENCY: "Priced in another currency, no exchange rate",
    NO_OBJECTIVE: "No latency objective set",
}


# --- 4. Sizing one option -----------------------------------------------------------------------


@dataclass(frozen=True)
class OptionPlan:
    """One option sized for the planned traffic. Money in the plan's currency, per month."""

    option: ServingOption
    status: str
    point: ConfigPoint | None = None  # the operating point used (meets the objective)
    fastest: ConfigPoint | None = None  # the benchmark's highest-throughput point
    closest: ConfigPoint | None = None  # when nothing meets the objective: the lowest e2e p99
    price: OptionPrice | None = None
    accuracy: Accuracy | None = None
    is_current: bool = False
    replicas_at_peak: int | None = None
    replicas: int | None = None
    gpus: int | None = None
    instances: int | None = None
    billed_gpus: int | None = None
    utilisation_mean: float | None = None
    utilisation_peak: float | None = None
    capacity_monthly: Decimal | None = None
    energy_monthly: Decimal | None = None
    total_monthly: Decimal | None = None
    device_kwh_monthly: float | None = None
    facility_kwh_monthly: float | None = None
    carbon_kg_monthly: float | None = None
    cost_per_1m: Decimal | None = None  # at real utilisation
    benchmark_cost_per_1m: Decimal | None = None  # at the fastest point, full load
    point_cost_per_1m: Decimal | None = None  # at the operating point, full load
    saving_monthly: Decimal | None = None
    saving_pct: float | None = None
    # The saving split by cause (``today_rebased``): saving = basis + hardware, where ``basis``
    # is what pricing today's GPUs on this option's price basis changes alone, and ``hardware``
    # what the option saves against today on one basis. None where today cannot be re-priced.
    saving_basis: Decimal | None = None
    saving_hardware: Decimal | None = None
    rank: int | None = None
    notes: tuple[str, ...] = ()

    @property
    def ranked(self) -> bool:
        return self.status == RANKED

    @property
    def status_label(self) -> str:
        return STATUS_LABELS[self.status]

    @property
    def throughput_per_gpu(self) -> float | None:
        if self.point is None or self.point.throughput is None:
            return None
        return self.point.throughput / self.option.accelerator_count

    @property
    def over_budget(self) -> bool:
        return self.accuracy is not None and self.accuracy.over_budget


def _ceil(x: float) -> int:
    # 3.0000000001 from float noise is 3 replicas, not 4.
    return max(1, math.ceil(round(x, 9)))


def _instances(*, replicas: int, per_replica: int, instance_gpus: int) -> int:
    if per_replica <= instance_gpus:
        return math.ceil(replicas / (instance_gpus // per_replica))
    return replicas * math.ceil(per_replica / instance_gpus)


def _convert(
    amount: Decimal, *, from_currency: str, to_currency: str, rates: Sequence[ExchangeRate]
) -> Decimal:
    if not from_currency or from_currency == to_currency:
        return amount
    return money_convert(
        money=Money(amount=amount, currency=from_currency), to_currency=to_currency, rates=rates
    ).amount


def _fmt_tokens(n: float | None) -> str:
    return "—" if n is None else f"{n:,.0f}"


def _length_note(point: ConfigPoint, traffic: TrafficShape) -> str | None:
    prod_in, prod_out = traffic.prompt_per_request, traffic.output_per_request
    if prod_in is None or prod_out is None:
        return None
    if point.input_length is None or point.output_length is None:
        return (
            "Benchmark token lengths unknown: its throughput may not hold for the production mix "
            f"({_fmt_tokens(prod_in)} in / {_fmt_tokens(prod_out)} out per request)."
        )
    far = [
        abs(prod / bench - 1.0) > LENGTH_TOLERANCE
        for prod, bench in ((prod_in, point.input_length), (prod_out, point.output_length))
        if bench
    ]
    if any(far) or not far:
        return (
            f"Benchmarked at {point.input_length:,} in / {point.output_length:,} out tokens per request, "
            f"production mix {_fmt_tokens(prod_in)} / {_fmt_tokens(prod_out)} (more than "
            f"{LENGTH_TOLERANCE:.0%} apart): throughput and latency may not transfer."
        )
    return None


def _energy_w(point: ConfigPoint) -> float | None:
    """Power of one replica at the point: measured power, else energy per token × throughput."""
    if point.power_w is not None:
        return point.power_w
    if point.energy_per_token_j is not None and point.throughput:
        return point.energy_per_token_j * point.throughput
    return None


def _per_1m_full_load(
    point: ConfigPoint, price: OptionPrice, *, count: int, to_currency: str, rates: Sequence[ExchangeRate]
) -> Decimal | None:
    """Cost per 1M output tokens of a replica busy at the point all the time (the benchmark view)."""
    if not point.throughput:
        return None
    per_hour = _convert(
        price.rate.price_per_accelerator_hour * count,
        from_currency=price.rate.currency,
        to_currency=to_currency,
        rates=rates,
    )
    cost = per_hour / as_decimal(point.throughput * 3600.0) * _PER_1M
    watts = _energy_w(point)
    if watts is not None and price.electricity is not None and price.electricity.price_per_kwh > 0:
        kwh_per_1m = watts / point.throughput * 1e6 / J_PER_KWH * price.electricity.pue
        cost += _convert(
            as_decimal(kwh_per_1m) * price.electricity.price_per_kwh,
            from_currency=price.electricity.currency,
            to_currency=to_currency,
            rates=rates,
        )
    return cost


def option_plan(*, option: ServingOption, inputs: PlanInputs) -> OptionPlan:
    """Size one option for the planned traffic (module doc, 3.)."""
    traffic, objective, a = inputs.traffic, inputs.objective, inputs.assumptions
    count = option.accelerator_count
    price = inputs.prices.get(option.accelerator_slug)
    accuracy = inputs.accuracy.get(option.variant)
    is_current = inputs.current is not None and inputs.current.runs(option)
    measured = [p for p in option.points if p.throughput and p.throughput > 0]
    base = OptionPlan(option=option, status=RANKED, price=price, accuracy=accuracy, is_current=is_current)
    if not measured:
        return replace(base, status=NO_THROUGHPUT)
    fastest = max(measured, key=lambda p: (p.throughput, -(p.load_value or 0)))
    base = replace(base, fastest=fastest)
    notes: list[str] = []
    if price is not None:
        try:
            base = replace(
                base,
                benchmark_cost_per_1m=_per_1m_full_load(
                    fastest, price, count=count, to_currency=inputs.currency, rates=inputs.rates
                ),
            )
        except MissingRateError:
            pass
    if not objective.is_set:
        return replace(base, status=NO_OBJECTIVE)
    verdicts = [(p, objective.judge(p)) for p in measured]
    meeting = [p for p, verdict in verdicts if verdict is True]
    if not meeting:
        if all(verdict is None for _p, verdict in verdicts):
            missing = [
                label
                for label, attr, _t in objective.targets()
                if all(getattr(p, attr) is None for p in measured)
            ]
            return replace(
                base,
                status=OBJECTIVE_UNMEASURED,
                notes=(f"No benchmark of this option measured {', '.join(missing) or 'the objective'}.",),
            )
        judged = [p for p, verdict in verdicts if verdict is False]
        closest = min(judged, key=lambda p: (objective.worst_ratio(p), -(p.throughput or 0)))
        more = (
            ""
            if len(measured) > 1
            else " Only one load level was measured: a lower batch size might meet it."
        )
        return replace(
            base,
            status=MISSES_OBJECTIVE,
            closest=closest,
            notes=(f"No measured load level meets {objective.text}.{more}",),
        )
    point = max(meeting, key=lambda p: (p.throughput, -(p.load_value or 0)))
    assert point.throughput is not None
    peak = traffic.peak_output_tps * a.growth_factor
    mean = traffic.mean_output_tps * a.growth_factor
    replicas_at_peak = _ceil(peak * (1.0 + a.headroom_pct / 100.0) / point.throughput)
    replicas = replicas_at_peak + (1 if a.n_plus_one else 0)
    gpus = replicas * count
    capacity_tps = replicas * point.throughput
    sized = replace(
        base,
        point=point,
        replicas_at_peak=replicas_at_peak,
        replicas=replicas,
        gpus=gpus,
        utilisation_mean=mean / capacity_tps,
        utilisation_peak=peak / capacity_tps,
    )
    if fastest is not point and fastest.throughput and fastest.throughput > point.throughput:
        notes.append(
            f"Its highest benchmark throughput ({fastest.throughput:,.0f} tokens/s at {fastest.load}) "
            f"misses {objective.text}; at the objective a replica sustains {point.throughput:,.0f} "
            f"tokens/s ({point.load})."
        )
    length_note = _length_note(point, traffic)
    if length_note:
        notes.append(length_note)
    if len(point.run_ids) < MIN_RUNS:
        notes.append(
            f"Only {len(point.run_ids)} run{'s' if len(point.run_ids) != 1 else ''} behind this load level."
        )
    if len(measured) == 1:
        notes.append(
            "One load level measured: the throughput at the objective may be higher at a load not measured."
        )
    if accuracy is None and option.variant:
        notes.append("No accuracy comparison with the reference variant in the drift data.")
    elif accuracy is not None and accuracy.over_budget:
        notes.append(
            f"Accuracy {accuracy.loss:.2%} below {accuracy.reference}, over its {accuracy.budget:.1%} budget: not recommended."
            if accuracy.loss is not None and accuracy.budget is not None
            else "Accuracy over its drift budget: not recommended."
        )
    if price is None:
        return replace(sized, status=NO_PRICE, notes=tuple(notes))
    try:
        per_hour = _convert(
            price.instance_price_per_hour,
            from_currency=price.rate.currency,
            to_currency=inputs.currency,
            rates=inputs.rates,
        )
    except MissingRateError:
        return replace(sized, status=OTHER_CURRENCY, notes=tuple(notes))
    if price.rate.ref.stale:
        notes.append(f"Price read on {price.rate.ref.fetched_on}, more than 30 days ago.")
    instances = _instances(replicas=replicas, per_replica=count, instance_gpus=price.instance_gpus)
    billed = max(instances * price.instance_gpus, gpus)
    if billed > gpus:
        notes.append(
            f"{billed - gpus} billed GPU{'s' if billed - gpus != 1 else ''} left idle: "
            f"instances come with {price.instance_gpus}."
        )
    capacity = instances * per_hour * _MONTH_HOURS
    busy_w = _energy_w(point)
    energy = device_kwh = facility_kwh = carbon = None
    if busy_w is None:
        notes.append("No power or energy measured at this load level: energy and carbon not included.")
    else:
        board = inputs.board_power_w.get(option.accelerator_slug)
        idle_gpu_w = IDLE_POWER_SHARE * (board if board else busy_w / count)
        idle_replica_w = idle_gpu_w * count
        mean_util = min(1.0, sized.utilisation_mean or 0.0)
        watts = replicas * (idle_replica_w + max(busy_w - idle_replica_w, 0.0) * mean_util)
        watts += (billed - gpus) * idle_gpu_w
        device_kwh = watts * HOURS_PER_MONTH / 1000.0
        electricity = price.electricity
        if electricity is None:
            notes.append(
                f"No electricity price or grid intensity for {price.provider} {price.region}: "
                "energy cost and carbon not included."
            )
        else:
            facility_kwh = device_kwh * electricity.pue
            carbon = facility_kwh * electricity.carbon_g_per_kwh / 1000.0
            try:
                energy = _convert(
                    as_decimal(facility_kwh) * electricity.price_per_kwh,
                    from_currency=electricity.currency,
                    to_currency=inputs.currency,
                    rates=inputs.rates,
                )
            except MissingRateError:
                notes.append(f"No exchange rate for the electricity price in {electricity.currency}.")
    total = capacity + (energy or Decimal(0))
    tokens = mean * SECONDS_PER_MONTH
    saving: Decimal | None = None
    saving_pct: float | None = None
    current = inputs.current
    saving_basis: Decimal | None = None
    saving_hardware: Decimal | None = None
    if current is not None and current.monthly_cost and current.currency == inputs.currency:
        saving = current.monthly_cost - total
        saving_pct = float(saving / current.monthly_cost)
        rebased = today_rebased(inputs)
        if rebased is not None:
            saving_basis = current.monthly_cost - rebased
            saving_hardware = rebased - total
    return replace(
        sized,
        instances=instances,
        billed_gpus=billed,
        capacity_monthly=capacity,
        energy_monthly=energy,
        total_monthly=total,
        device_kwh_monthly=device_kwh,
        facility_kwh_monthly=facility_kwh,
        carbon_kg_monthly=carbon,
        cost_per_1m=total / as_decimal(tokens) * _PER_1M if tokens > 0 else None,
        point_cost_per_1m=_per_1m_full_load(
            point, price, count=count, to_currency=inputs.currency, rates=inputs.rates
        ),
        saving_monthly=saving,
        saving_pct=saving_pct,
        saving_basis=saving_basis,
        saving_hardware=saving_hardware,
        notes=tuple(notes),
    )


# --- 5. The plan --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    inputs: PlanInputs
    options: tuple[OptionPlan, ...]  # ranked ones first, by rank; then the others by status
    notes: tuple[str, ...]

    @property
    def traffic(self) -> TrafficShape:
        return self.inputs.traffic

    @property
    def assumptions(self) -> Assumptions:
        return self.inputs.assumptions

    @property
    def currency(self) -> str:
        return self.inputs.currency

    @property
    def ranked(self) -> list[OptionPlan]:
        return [o for o in self.options if o.ranked]

    @property
    def best(self) -> OptionPlan | None:
        ranked = self.ranked
        return ranked[0] if ranked and not ranked[0].over_budget else None

    @property
    def saving_missing(self) -> str | None:
        """Why no saving against today is shown, or None when it is: the first thing missing,
        the same words for the saving card, the notes and the exports."""
        current = self.inputs.current
        if current is None:
            return today_missing(current)
        if current.monthly_cost is None:
            return today_missing(current)
        best = self.best
        if best is None:
            return (
                f"No option to compare with today's {current.hardware} "
                f"({current.monthly_cost:,.0f} {current.currency} per month): none meets the objective within budget"
            )
        if best.saving_monthly is None:
            return f"Today's cost is in {current.currency}, the plan in {self.currency}: not compared"
        return None

    @property
    def benchmark_cheapest(self) -> OptionPlan | None:
        """The option a reading of the benchmarks alone would pick: lowest cost per 1M at full load."""
        priced = [o for o in self.options if o.benchmark_cost_per_1m is not None]
        return min(priced, key=lambda o: (o.benchmark_cost_per_1m, o.option.label), default=None)

    @property
    def demand_peak_tps(self) -> float:
        return self.traffic.peak_output_tps * self.assumptions.growth_factor

    @property
    def demand_mean_tps(self) -> float:
        return self.traffic.mean_output_tps * self.assumptions.growth_factor

    @property
    def sized_tps(self) -> float:
        return self.demand_peak_tps * (1.0 + self.assumptions.headroom_pct / 100.0)

    def headline(self) -> str:
        """One sentence answering the question, and why it is not the benchmark's answer."""
        best = self.best
        if best is None:
            if not self.inputs.objective.is_set:
                return "Set a latency objective to size the options."
            return "No option can be sized and priced for this traffic at this objective."
        assert best.total_monthly is not None and best.gpus is not None
        text = (
            f"{best.option.label} serves the planned peak of {self.demand_peak_tps:,.0f} output tokens/s "
            f"at {self.inputs.objective.text} with {best.replicas} replica{'s' if best.replicas != 1 else ''} "
            f"({best.gpus} GPU{'s' if best.gpus != 1 else ''}) for {best.total_monthly:,.0f} {self.currency} a month."
        )
        cheapest = self.benchmark_cheapest
        if cheapest is not None and cheapest.option.key != best.option.key:
            text += (
                f" {cheapest.option.label} is cheaper per token on its benchmark "
                f"({_sig(cheapest.benchmark_cost_per_1m)} against {_sig(best.benchmark_cost_per_1m)} {self.currency} per 1M)"
            )
            if cheapest.ranked and cheapest.total_monthly is not None:
                text += f" but costs {cheapest.total_monthly:,.0f} {self.currency} a month at the objective."
            else:
                text += f" but is not an answer: {cheapest.status_label.lower()}."
        return text


def _sig(amount: Decimal | None) -> str:
    """Four significant digits as a reader writes them (``core.numbers``: never e-notation)."""
    return "—" if amount is None else numbers.sig(float(amount), digits=4)


def _plan_notes(inputs: PlanInputs, options: Sequence[OptionPlan]) -> list[str]:
    traffic = inputs.traffic
    notes = []
    if traffic.empty:
        notes.append("No production traffic in the window: there is nothing to size.")
        return notes
    if traffic.coverage < COVERAGE_MIN:
        notes.append(
            f"Traffic covers {traffic.coverage:.0%} of the window's {traffic.bucket_s // 60}-minute buckets: "
            "gaps (agent outages or no traffic) may hide the peak."
        )
    if traffic.growth_pct_per_month is None:
        notes.append(
            f"Only {traffic.complete_days} complete day{'s' if traffic.complete_days != 1 else ''} of traffic: "
            f"the growth trend needs {2 * GROWTH_BLOCK_DAYS}; the growth assumption is yours alone."
        )
    if not inputs.objective.is_set:
        notes.append(
            "No latency objective: set the team's p99 objective (e2e, TTFT or ITL) to size the options."
        )
    elif options and not any(o.point is not None for o in options):
        notes.append(
            f"No benchmarked option meets {inputs.objective.text}: benchmark at lower batch sizes, or relax it."
        )
    if not options:
        notes.append("No benchmark of this model measured token throughput on a known accelerator.")
    missing = today_missing(inputs.current)
    if missing is not None:
        notes.append(f"{missing} No saving shown.")
    return notes


def today_rebased(inputs: PlanInputs) -> Decimal | None:
    """Today's monthly cost on the plan's price basis: its capacity part replaced by today's
    GPUs × 730 h × the plan's price per GPU-hour for their type (energy kept as measured).

    Today's cost comes from the cost tables, priced with each host's own price row (a cloud
    on-demand row, say); the options are priced on the basis the page chose (on-prem amortised,
    say). Their difference mixes the two causes; this figure separates them: today → today
    re-priced is the change of basis, today re-priced → option the change of hardware. None
    where today runs on several GPU types, or the basis has no price (or rate) for today's.
    """
    current = inputs.current
    if current is None or current.monthly_cost is None or current.capacity_monthly is None:
        return None
    if len(current.accelerator_slugs) != 1:
        return None
    price = inputs.prices.get(current.accelerator_slugs[0])
    if price is None:
        return None
    try:
        per_gpu = _convert(
            price.rate.price_per_accelerator_hour,
            from_currency=price.rate.currency,
            to_currency=inputs.currency,
            rates=inputs.rates,
        )
    except MissingRateError:
        return None
    return current.monthly_cost - current.capacity_monthly + per_gpu * current.gpus * _MONTH_HOURS


def today_missing(current: CurrentDeployment | None) -> str | None:
    """Why today's deployment or its cost is unknown, in one sentence with its fix (the real
    first missing input, ``costs.gaps``); None when both are known."""
    if current is None:
        return (
            "Which GPUs serve the model today is unknown: the serving metrics name no GPU "
            "(send them with the GPUs' UUIDs)."
        )
    if current.monthly_cost is not None:
        return None
    if current.cost_gap is None:
        return "Today's cost is unknown."
    return f"Today's cost is unknown. {current.cost_gap.text}"


def plan_build(inputs: PlanInputs) -> Plan:
    """Size every option, rank those that size (module doc, 4.)."""
    sized = [option_plan(option=option, inputs=inputs) for option in inputs.options]
    order = {status: i for i, status in enumerate(STATUS_LABELS)}
    ranked = sorted(
        (o for o in sized if o.ranked),
        key=lambda o: (o.over_budget, o.total_monthly, o.gpus, o.option.label),
    )
    ranked = [replace(o, rank=i) for i, o in enumerate(ranked, start=1)]
    others = sorted(
        (o for o in sized if not o.ranked),
        key=lambda o: (order[o.status], o.option.label),
    )
    return Plan(inputs=inputs, options=(*ranked, *others), notes=tuple(_plan_notes(inputs, sized)))


# --- 6. Sensitivity -----------------------------------------------------------------------------


def growth_sensitivity(
    *, inputs: PlanInputs, growths: Sequence[float], keys: Sequence[str]
) -> dict[str, list[Decimal | None]]:
    """Monthly total of each option in ``keys`` for each growth % per month (None: not ranked)."""
    series: dict[str, list[Decimal | None]] = {key: [] for key in keys}
    # Only the options asked for: an option's figures do not depend on the others'.
    asked = replace(inputs, options=tuple(o for o in inputs.options if o.key in series))
    for growth in growths:
        plan = plan_build(replace(asked, assumptions=replace(asked.assumptions, growth_pct_per_month=growth)))
        by_key = {o.option.key: o for o in plan.options}
        for key in keys:
            found = by_key.get(key)
            series[key].append(found.total_monthly if found is not None and found.ranked else None)
    return series


@dataclass(frozen=True)
class Sensitivity:
    value: float
    best_label: str | None
    best_key: str | None
    total_monthly: Decimal | None
    gpus: int | None


def headroom_sensitivity(*, inputs: PlanInputs, headrooms: Sequence[float]) -> list[Sensitivity]:
    """Which option wins, and for how much, at each headroom %."""
    rows = []
    for headroom in headrooms:
        plan = plan_build(replace(inputs, assumptions=replace(inputs.assumptions, headroom_pct=headroom)))
        best = plan.best
        rows.append(
            Sensitivity(
                value=headroom,
                best_label=best.option.label if best else None,
                best_key=best.option.key if best else None,
                total_monthly=best.total_monthly if best else None,
                gpus=best.gpus if best else None,
            )
        )
    return rows
