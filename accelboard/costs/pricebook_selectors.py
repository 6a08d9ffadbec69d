"""Which price-book rows apply to a host (or a run) on a day: the lookups every cost figure uses.

The daily compute prices hundreds of host-days at once, so the book is read once into a
:class:`PriceBook` (a few hundred rows at most) and matched in memory; the one-off selectors
``price_for_host`` / ``electricity_for_host`` / ``carbon_for_host`` use the same matching.

Matching rules (most specific wins; validity ``valid_from <= day < valid_to``, open-ended when
``valid_to`` is empty, as in ``pricebook.py``):

1. Accelerator price: same accelerator type and provider; the host's instance type, else a row
   with no instance type; the host's region, else a row with no region; pricing model from the
   host's ``facts["pricing_model"]``, else on-prem for on-prem hosts, else on-demand, then
   reserved, then spot. Among equals the latest ``valid_from`` wins.
2. Electricity (price per kWh, PUE, grid carbon): the host's site's row.
3. Carbon intensity where the host has no site electricity row: ``CarbonIntensity`` of the host's
   provider and region.
4. Exchange rates: rows valid on the day; conversion happens only where one exists.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal

from accelboard.fleet.models import Host

from .formulas.types import AcceleratorRate, ElectricityRate, PriceRef
from .formulas.types import ExchangeRate as RateValue
from .models import AcceleratorPrice, CarbonIntensity, ElectricityPrice, ExchangeRate, is_stale

_MODEL_PREFERENCE = ("on-demand", "reserved", "spot", "on-prem")


def _valid_on(row: AcceleratorPrice | ElectricityPrice | CarbonIntensity | ExchangeRate, day: date) -> bool:
    return row.valid_from <= day and (row.valid_to is None or day < row.valid_to)


def _day(at: date | datetime) -> date:
    return at.date() if isinstance(at, datetime) else at


@dataclass
class PriceBook:
    """The whole price book in memory, indexed for matching (see the module docstring)."""

    accelerator: dict[tuple[int, str], list[AcceleratorPrice]] = field(default_factory=dict)
    electricity: dict[int, list[ElectricityPrice]] = field(default_factory=dict)
    carbon: dict[tuple[str, str], list[CarbonIntensity]] = field(default_factory=dict)
    rates: list[ExchangeRate] = field(default_factory=list)
    today: date | None = None

    def accelerator_price(
        self, *, host: Host, accelerator_type_id: int | None, day: date
    ) -> AcceleratorPrice | None:
        if accelerator_type_id is None:
            return None
        candidates = [
            r for r in self.accelerator.get((accelerator_type_id, host.provider), []) if _valid_on(r, day)
        ]
        if not candidates:
            return None
        wanted = str((host.facts or {}).get("pricing_model") or "")
        preference: tuple[str, ...] = (wanted,) if wanted else ()
        preference += ("on-prem",) if host.provider == "on-prem" else ()
        preference += _MODEL_PREFERENCE

        def rank(row: AcceleratorPrice) -> tuple:
            return (
                0
                if row.instance_type and row.instance_type == host.instance_type
                else 1
                if not row.instance_type
                else 9,
                0 if row.region and row.region == host.region else 1 if not row.region else 9,
                preference.index(row.pricing_model) if row.pricing_model in preference else 99,
                -row.valid_from.toordinal(),
            )

        best = min(candidates, key=rank)
        first = rank(best)
        # A row for another instance type or region is not this host's price.
        return best if first[0] < 9 and first[1] < 9 else None

    def reference_price(self, *, accelerator_type_id: int | None, day: date) -> AcceleratorPrice | None:
        """A price for hardware that ran on no host of ours (an MLPerf submission's system): the
        cheapest on-demand row per accelerator-hour the book holds for the type on ``day``, in
        USD where there is one (else the first currency by name), so that "what would training
        to target cost on H200 rather than H100" has an answer, flagged as a reference price."""
        if accelerator_type_id is None:
            return None
        rows = [
            r
            for (type_id, _), group in self.accelerator.items()
            if type_id == accelerator_type_id
            for r in group
            if r.pricing_model == "on-demand" and _valid_on(r, day)
        ]
        currencies = sorted({r.currency for r in rows}, key=lambda c: (c != "USD", c))
        if not currencies:
            return None
        same = [r for r in rows if r.currency == currencies[0]]
        return min(same, key=lambda r: (r.price_per_accelerator_hour, r.provider, r.region, r.pk))

    def electricity_price(self, *, host: Host, day: date) -> ElectricityPrice | None:
        rows = [r for r in self.electricity.get(host.site_id or 0, []) if _valid_on(r, day)]
        return max(rows, key=lambda r: r.valid_from) if rows else None

    def carbon_intensity(self, *, host: Host, day: date) -> CarbonIntensity | None:
        rows = [r for r in self.carbon.get((host.provider, host.region), []) if _valid_on(r, day)]
        return max(rows, key=lambda r: r.valid_from) if rows else None

    def exchange_rates(self, *, day: date) -> list[RateValue]:
        return [exchange_rate_value(r) for r in self.rates if _valid_on(r, day)]

    def stale(self, row: AcceleratorPrice | ElectricityPrice | CarbonIntensity | None) -> bool:
        return row is not None and is_stale(row.fetched_on, today=self.today)


def price_book_load(*, today: date | None = None) -> PriceBook:
    """Read every price-book row once (four queries)."""
    book = PriceBook(today=today)
    for price in AcceleratorPrice.objects.all():
        book.accelerator.setdefault((price.accelerator_type_id, price.provider), []).append(price)
    for power in ElectricityPrice.objects.all():
        book.electricity.setdefault(power.site_id, []).append(power)
    for carbon in CarbonIntensity.objects.all():
        book.carbon.setdefault((carbon.provider, carbon.region), []).append(carbon)
    book.rates = list(ExchangeRate.objects.all())
    return book


def accelerator_rate_value(row: AcceleratorPrice, *, today: date | None = None) -> AcceleratorRate:
    """The formula input for a price row, carrying the row as its source."""
    return AcceleratorRate(
        price_per_accelerator_hour=row.price_per_accelerator_hour,
        currency=row.currency,
        ref=PriceRef(
            kind="accelerator_price",
            id=row.pk,
            source=row.source,
            fetched_on=row.fetched_on,
            stale=is_stale(row.fetched_on, today=today),
        ),
    )


def electricity_rate_value(
    *,
    electricity: ElectricityPrice | None,
    carbon: CarbonIntensity | None,
    today: date | None = None,
) -> ElectricityRate | None:
    """Electricity price, PUE and carbon from a site row, or PUE and carbon alone from a region's
    carbon row (price 0: the power is in the cloud instance's price). None without either."""
    if electricity is not None:
        return ElectricityRate(
            price_per_kwh=Decimal(electricity.price_per_kwh),
            currency=electricity.currency,
            pue=electricity.pue,
            carbon_g_per_kwh=electricity.carbon_g_per_kwh,
            ref=PriceRef(
                kind="electricity_price",
                id=electricity.pk,
                source=electricity.source,
                fetched_on=electricity.fetched_on,
                stale=is_stale(electricity.fetched_on, today=today),
            ),
        )
    if carbon is not None:
        return ElectricityRate(
            price_per_kwh=Decimal(0),
            currency="",
            pue=carbon.pue,
            carbon_g_per_kwh=carbon.g_per_kwh,
            ref=PriceRef(
                kind="carbon_intensity",
                id=carbon.pk,
                source=carbon.source,
                fetched_on=carbon.fetched_on,
                stale=is_stale(carbon.fetched_on, today=today),
            ),
        )
    return None


def exchange_rate_value(row: ExchangeRate) -> RateValue:
    return RateValue(
        from_currency=row.from_currency,
        to_currency=row.to_currency,
        rate=Decimal(row.rate),
        ref=PriceRef(kind="exchange_rate", id=row.pk, source=row.source, fetched_on=row.fetched_on),
    )


def price_for_host(
    *, host: Host, at: date | datetime, accelerator_type_id: int | None = None
) -> AcceleratorPrice | None:
    """The accelerator price row that applies to ``host`` on ``at`` (for its first accelerator
    type when none is given), or None. Selector used by the pages and per-run costs."""
    if accelerator_type_id is None:
        accelerator_type_id = (
            host.accelerators.exclude(accelerator_type=None)
            .values_list("accelerator_type_id", flat=True)
            .first()
        )
    book = PriceBook()
    for row in AcceleratorPrice.objects.filter(
        accelerator_type_id=accelerator_type_id, provider=host.provider
    ):
        book.accelerator.setdefault((row.accelerator_type_id, row.provider), []).append(row)
    return book.accelerator_price(host=host, accelerator_type_id=accelerator_type_id, day=_day(at))


def electricity_for_host(*, host: Host, at: date | datetime) -> ElectricityPrice | None:
    """The site electricity row (price per kWh, PUE, carbon) for ``host`` on ``at``, or None."""
    book = PriceBook(
        electricity={host.site_id or 0: list(ElectricityPrice.objects.filter(site_id=host.site_id or 0))}
    )
    return book.electricity_price(host=host, day=_day(at))


def carbon_for_host(*, host: Host, at: date | datetime) -> CarbonIntensity | None:
    """The region carbon-intensity row for ``host`` on ``at`` (used where no site row exists)."""
    rows = list(CarbonIntensity.objects.filter(provider=host.provider, region=host.region))
    return PriceBook(carbon={(host.provider, host.region): rows}).carbon_intensity(host=host, day=_day(at))


def exchange_rates_on(*, at: date | datetime, currencies: Iterable[str] = ()) -> list[RateValue]:
    """Exchange rates valid on ``at`` (optionally only those touching ``currencies``)."""
    wanted = set(currencies)
    rows = ExchangeRate.objects.all()
    day = _day(at)
    return [
        exchange_rate_value(r)
        for r in rows
        if _valid_on(r, day) and (not wanted or r.from_currency in wanted or r.to_currency in wanted)
    ]
