"""Validation of price-book rows given as plain dicts (from a CSV, the admin or the shipped book).

Pure: no Django, no database. :func:`pricebook_validate` checks every row and returns every
error, each naming the row index and the field, so an importer can refuse the whole book
(nothing half-written) with a message that points at the line to fix. Rules:

1. Required fields present; prices are positive finite numbers and not a known catalogue
   placeholder (the public skypilot catalogue carries 700.0 where a price is unknown).
2. Currency is an active ISO 4217 code.
3. Dates are ISO dates; ``valid_to`` (exclusive, empty = open-ended) is after ``valid_from``.
4. No two rows of the same key (provider, region, instance type, accelerator, count, pricing
   model) have overlapping validity: a price is effective-dated, never ambiguous.
5. A spot price is not above the on-demand price of the same key where their validity overlaps.
6. A row fetched more than 30 days before ``today`` is marked stale (a mark, not an error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

STALE_AFTER_DAYS = 30
PLACEHOLDER_PRICES: frozenset[float] = frozenset({700.0})
PRICING_MODELS = frozenset({"on-demand", "spot", "reserved", "on-prem"})
KEY_FIELDS = ("provider", "region", "instance_type", "accelerator", "accelerator_count", "pricing_model")
REQUIRED = (
    "provider",
    "accelerator",
    "pricing_model",
    "price_per_hour",
    "currency",
    "source",
    "fetched_on",
    "valid_from",
)

# Active ISO 4217 alphabetic codes (2024 list; the fund, precious-metal and testing codes are left out on
# purpose: nobody prices accelerators in XAU).
_ISO_CODES = (
    "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN "
    "BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS "
    "GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW "
    "KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD "
    "NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD "
    "SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VED "
    "VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG"
)
ISO_CURRENCIES: frozenset[str] = frozenset(_ISO_CODES.split())


@dataclass(frozen=True)
class PriceRowError:
    """One problem with one row: ``index`` is the row's position (0-based) in the input."""

    index: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"row {self.index}, {self.field}: {self.message}"


@dataclass(frozen=True)
class PriceRow:
    """A row that passed its own checks, normalised (Decimal price, dates, upper-case currency)."""

    index: int
    provider: str
    region: str
    instance_type: str
    accelerator: str
    accelerator_count: int
    pricing_model: str
    price_per_hour: Decimal
    currency: str
    source: str
    fetched_on: date
    valid_from: date
    valid_to: date | None
    stale: bool
    id: Any = None

    @property
    def key(self) -> tuple[str, str, str, str, int, str]:
        return (
            self.provider,
            self.region,
            self.instance_type,
            self.accelerator,
            self.accelerator_count,
            self.pricing_model,
        )

    @property
    def price_per_accelerator_hour(self) -> Decimal:
        return self.price_per_hour / self.accelerator_count


@dataclass(frozen=True)
class PriceBookResult:
    rows: tuple[PriceRow, ...]
    errors: tuple[PriceRowError, ...]
    stale: tuple[int, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.errors


def _text(row: Mapping[str, Any], name: str) -> str:
    value = row.get(name)
    return "" if value is None else str(value).strip()


def _date(value: Any) -> date:
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value).strip())


def _overlaps(a: PriceRow, b: PriceRow) -> bool:
    # valid_to is exclusive: a row ending on 2025-06-01 and one starting that day do not overlap.
    a_end = a.valid_to or date.max
    b_end = b.valid_to or date.max
    return a.valid_from < b_end and b.valid_from < a_end


def _row_parse(
    index: int, row: Mapping[str, Any], today: date
) -> tuple[PriceRow | None, list[PriceRowError]]:
    errors: list[PriceRowError] = []

    def err(name: str, message: str) -> None:
        errors.append(PriceRowError(index=index, field=name, message=message))

    for name in REQUIRED:
        if not _text(row, name):
            err(name, "required")

    price: Decimal | None = None
    raw_price = _text(row, "price_per_hour")
    if raw_price:
        try:
            price = Decimal(raw_price)
        except InvalidOperation:
            err("price_per_hour", f"{raw_price!r} is not a number")
        else:
            if not price.is_finite() or price <= 0:
                err("price_per_hour", f"{raw_price} is not a positive price")
                price = None
            elif float(price) in PLACEHOLDER_PRICES:
                err("price_per_hour", f"{raw_price} is a catalogue placeholder, not a price")
                price = None

    count = 1
    raw_count = _text(row, "accelerator_count")
    if raw_count:
        try:
            count = int(raw_count)
        except ValueError:
            err("accelerator_count", f"{raw_count!r} is not a whole number")
        else:
            if count < 1:
                err("accelerator_count", f"{count} is not a positive count")

    currency = _text(row, "currency").upper()
    if currency and currency not in ISO_CURRENCIES:
        err("currency", f"{currency!r} is not an ISO 4217 currency code")

    pricing_model = _text(row, "pricing_model").lower()
    if pricing_model and pricing_model not in PRICING_MODELS:
        err("pricing_model", f"{pricing_model!r} is not one of {', '.join(sorted(PRICING_MODELS))}")

    dates: dict[str, date | None] = {}
    for name in ("fetched_on", "valid_from", "valid_to"):
        raw = row.get(name)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            dates[name] = None
            continue
        try:
            dates[name] = _date(raw)
        except ValueError:
            err(name, f"{raw!r} is not an ISO date (YYYY-MM-DD)")
            dates[name] = None
    if dates["valid_from"] and dates["valid_to"] and dates["valid_to"] <= dates["valid_from"]:
        err("valid_to", f"{dates['valid_to']} is not after valid_from {dates['valid_from']}")
    if dates["fetched_on"] and dates["fetched_on"] > today:
        err("fetched_on", f"{dates['fetched_on']} is in the future")

    if errors or price is None or dates["fetched_on"] is None or dates["valid_from"] is None:
        return None, errors
    return (
        PriceRow(
            index=index,
            id=row.get("id"),
            provider=_text(row, "provider").lower(),
            region=_text(row, "region"),
            instance_type=_text(row, "instance_type"),
            accelerator=_text(row, "accelerator"),
            accelerator_count=count,
            pricing_model=pricing_model,
            price_per_hour=price,
            currency=currency,
            source=_text(row, "source"),
            fetched_on=dates["fetched_on"],
            valid_from=dates["valid_from"],
            valid_to=dates["valid_to"],
            stale=(today - dates["fetched_on"]) > timedelta(days=STALE_AFTER_DAYS),
        ),
        [],
    )


def pricebook_validate(*, rows: Sequence[Mapping[str, Any]], today: date) -> PriceBookResult:
    """Check every row of a price book; return the normalised good rows, every error and the stale
    rows' indexes. ``today`` is passed in (no clock here) to decide staleness."""
    parsed: list[PriceRow] = []
    errors: list[PriceRowError] = []
    for index, row in enumerate(rows):
        good, row_errors = _row_parse(index, row, today)
        errors.extend(row_errors)
        if good is not None:
            parsed.append(good)

    by_key: dict[tuple, list[PriceRow]] = {}
    for r in parsed:
        by_key.setdefault(r.key, []).append(r)
    for same in by_key.values():
        same.sort(key=lambda r: (r.valid_from, r.index))
        for i, a in enumerate(same):
            for b in same[i + 1 :]:
                if _overlaps(a, b):
                    errors.append(
                        PriceRowError(
                            index=b.index,
                            field="valid_from",
                            message=f"validity overlaps row {a.index} for the same "
                            f"{'/'.join(str(k) for k in a.key if k != '')}",
                        )
                    )

    on_demand: dict[tuple, list[PriceRow]] = {}
    for r in parsed:
        if r.pricing_model == "on-demand":
            on_demand.setdefault(r.key[:5], []).append(r)
    for r in parsed:
        if r.pricing_model != "spot":
            continue
        for od in on_demand.get(r.key[:5], []):
            if od.currency == r.currency and _overlaps(r, od) and r.price_per_hour > od.price_per_hour:
                errors.append(
                    PriceRowError(
                        index=r.index,
                        field="price_per_hour",
                        message=f"spot {r.price_per_hour} is above on-demand {od.price_per_hour} "
                        f"(row {od.index}) for the same instance",
                    )
                )

    errors.sort(key=lambda e: (e.index, e.field))
    return PriceBookResult(
        rows=tuple(parsed),
        errors=tuple(errors),
        stale=tuple(r.index for r in parsed if r.stale),
    )
