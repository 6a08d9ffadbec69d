"""Price-book writes: one row (admin, API) or a whole CSV (OpenCost price sheet, cloud instances).

Every write is validated with ``pricebook.pricebook_validate`` against the rows already in the
book (so an overlap with an existing row is caught too): non-positive or placeholder prices,
spot above on-demand, overlapping validity for the same key, unknown currency, bad dates. A CSV
is all-or-nothing (one transaction) and each error names its line (the header is line 1) and the
CSV's own column name. After a write commits, the already-costed days the new rows cover are
recomputed by a worker (``tasks.cost_recompute_enqueue``): a correction reaches the figures.

CSV shapes (``FORMATS``):
- ``instances``: accelerator, count, region, price (hourly, whole instance) and optionally
  provider, instance_type, pricing_model, currency, source, fetched_on, valid_from, valid_to.
  Canonical names are accepted too (accelerator_count, price_per_hour).
- ``opencost``: OpenCost's custom price sheet (``configs/pricing_schema.csv``): EndTimestamp,
  InstanceID, Region, AssetClass, InstanceIDField, InstanceType, MarketPriceHourly, Version.
  Rows of AssetClass ``gpu`` are per-GPU-hour prices (InstanceType or InstanceID names the GPU);
  ``node`` rows are whole-instance prices and need an AcceleratorType/AcceleratorCount column (an
  extension of the sheet) or are refused; other classes (pv, ...) are skipped. EndTimestamp is
  the fetched date and the start of validity. Provider/currency/source come from the command's
  options (an extension column of the same name wins).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.db import transaction

from accelboard.fleet.models import AcceleratorType

from .models import AcceleratorPrice
from .pricebook import PriceRow, PriceRowError, pricebook_validate
from .services import cost_days_for_price_window
from .tasks import cost_recompute_enqueue

FORMATS = ("instances", "opencost")
_INSTANCE_ALIASES = {
    "count": "accelerator_count",
    "gpus": "accelerator_count",
    "price": "price_per_hour",
    "hourly_price": "price_per_hour",
    "price_hourly": "price_per_hour",
    "gpu": "accelerator",
}
_OPENCOST_COLUMNS = {
    "region": "Region",
    "instance_type": "InstanceType",
    "price_per_hour": "MarketPriceHourly",
    "fetched_on": "EndTimestamp",
    "valid_from": "EndTimestamp",
    "accelerator": "InstanceType",
    "accelerator_count": "AcceleratorCount",
}


class PriceImportError(ValueError):
    """Every problem of an import, each as "line N, column C: message"; ``str`` is the first."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"{errors[0]}{more}")


@dataclass(frozen=True)
class ImportResult:
    created: int
    stale: int
    days_to_recompute: int


def _accelerator_types() -> dict[str, AcceleratorType]:
    index: dict[str, AcceleratorType] = {}
    for t in AcceleratorType.objects.all():
        for name in (t.name, t.slug, *(t.match_names or [])):
            index[name.strip().lower()] = t
    return index


def _existing_rows() -> list[dict[str, Any]]:
    return [
        {
            "id": p.pk,
            "provider": p.provider,
            "region": p.region,
            "instance_type": p.instance_type,
            "accelerator": p.accelerator_type.slug,
            "accelerator_count": p.accelerator_count,
            "pricing_model": p.pricing_model,
            "price_per_hour": str(p.price_per_hour),
            "currency": p.currency,
            "source": p.source,
            "fetched_on": p.fetched_on,
            "valid_from": p.valid_from,
            "valid_to": p.valid_to,
        }
        for p in AcceleratorPrice.objects.select_related("accelerator_type")
    ]


def _check(
    *,
    rows: list[dict[str, Any]],
    lines: list[int],
    columns: Mapping[str, str],
    today: date,
    exclude_id: Any = None,
) -> tuple[list[PriceRow], list[str], list[tuple[str, str]]]:
    """Validate new rows together with the book; errors as "line N, column C: ...". Also returns
    (field, message) pairs for a single-row form."""
    existing = [r for r in _existing_rows() if exclude_id is None or r["id"] != exclude_id]
    n = len(rows)
    result = pricebook_validate(rows=[*rows, *existing], today=today)
    messages: list[str] = []
    fields: list[tuple[str, str]] = []

    def say(index: int, error: PriceRowError, message: str) -> None:
        column = columns.get(error.field, error.field)
        messages.append(f"line {lines[index]}, column {column}: {message}")
        fields.append((error.field, message))

    for error in result.errors:

        def existing_ref(match: re.Match[str]) -> str:
            k = int(match.group(1))
            return f"line {lines[k]}" if k < n else f"existing price row id={existing[k - n]['id']}"

        message = re.sub(r"row (\d+)", existing_ref, error.message)
        if error.index < n:
            say(error.index, error, message)
        else:  # an existing row is the later one of an overlap/spot pair: report it on the new line
            ref = re.search(r"row (\d+)", error.message)
            k = int(ref.group(1)) if ref else -1
            if 0 <= k < n:
                say(k, error, f"{message} (existing price row id={existing[error.index - n]['id']})")
    new = [r for r in result.rows if r.index < n]
    return new, messages, fields


def _rows_save(rows: list[PriceRow], types: Mapping[str, AcceleratorType]) -> list[AcceleratorPrice]:
    objs = [
        AcceleratorPrice(
            accelerator_type=types[r.accelerator.lower()],
            accelerator_count=r.accelerator_count,
            provider=r.provider,
            region=r.region,
            instance_type=r.instance_type,
            pricing_model=r.pricing_model,
            price_per_hour=r.price_per_hour,
            currency=r.currency,
            source=r.source,
            fetched_on=r.fetched_on,
            valid_from=r.valid_from,
            valid_to=r.valid_to,
        )
        for r in rows
    ]
    return AcceleratorPrice.objects.bulk_create(objs)


def _recompute_after(rows: Sequence[PriceRow], today: date) -> int:
    days: set[date] = set()
    for r in rows:
        days.update(cost_days_for_price_window(valid_from=r.valid_from, valid_to=r.valid_to, today=today))
    cost_recompute_enqueue(days=days)
    return len(days)


def pricebook_rows_import(
    *, rows: list[dict[str, Any]], lines: list[int], columns: Mapping[str, str], today: date
) -> ImportResult:
    """Validate and store price rows (already mapped to canonical field names) all or nothing."""
    types = _accelerator_types()
    errors: list[str] = []
    for row, line in zip(rows, lines, strict=True):
        name = str(row.get("accelerator") or "").strip().lower()
        if name and name not in types:
            errors.append(
                f"line {line}, column {columns.get('accelerator', 'accelerator')}: "
                f"{row.get('accelerator')!r} is not a known accelerator type"
            )
        elif name:
            row["accelerator"] = types[name].slug  # one spelling, so keys compare with the book's
    with transaction.atomic():
        good, messages, _ = _check(rows=rows, lines=lines, columns=columns, today=today)
        errors = sorted(errors + messages, key=lambda m: int(m.split(",")[0].split()[1]))
        if errors:
            raise PriceImportError(errors)
        _rows_save(good, types)
        days = _recompute_after(good, today)
    return ImportResult(created=len(good), stale=sum(r.stale for r in good), days_to_recompute=days)


def _read_csv(text: str) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    if not reader.fieldnames:
        raise PriceImportError(["line 1: the file is empty or has no header"])
    out = []
    for row in reader:
        if None in row:
            raise PriceImportError([f"line {reader.line_num}: more values than header columns"])
        if any((v or "").strip() for v in row.values()):
            out.append((reader.line_num, {k.strip(): (v or "").strip() for k, v in row.items()}))
    return [f.strip() for f in reader.fieldnames], out


def pricebook_csv_import(
    *,
    text: str,
    format: str,
    today: date,
    provider: str = "",
    currency: str = "USD",
    source: str = "",
    pricing_model: str = "on-demand",
) -> ImportResult:
    """Import a price CSV of ``format`` ("instances" or "opencost"); see the module docstring."""
    if format not in FORMATS:
        raise PriceImportError([f"format: {format!r} is not one of {', '.join(FORMATS)}"])
    header, records = _read_csv(text)
    defaults = {
        "provider": provider,
        "currency": currency,
        "source": source,
        "pricing_model": pricing_model,
        "fetched_on": today.isoformat(),
        "valid_from": today.isoformat(),
    }
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    if format == "instances":
        columns = {_INSTANCE_ALIASES.get(h.lower(), h.lower()): h for h in header}
        missing = [
            c for c in ("accelerator", "accelerator_count", "region", "price_per_hour") if c not in columns
        ]
        if missing:
            raise PriceImportError([f"line 1: missing column(s) {', '.join(missing)}"])
        for line, record in records:
            row = {
                **defaults,
                **{k: v for k, v in ((columns_key(columns, h), v) for h, v in record.items()) if v},
            }
            rows.append(row)
            lines.append(line)
        if not source and "source" not in columns:
            raise PriceImportError(
                ["source: give --source (where these prices were read) or a source column"]
            )
        return pricebook_rows_import(rows=rows, lines=lines, columns=columns, today=today)

    needed = ["EndTimestamp", "InstanceID", "Region", "AssetClass", "InstanceType", "MarketPriceHourly"]
    missing = [c for c in needed if c not in header]
    if missing:
        raise PriceImportError([f"line 1: missing OpenCost column(s) {', '.join(missing)}"])
    errors: list[str] = []
    for line, record in records:
        asset = record["AssetClass"].lower()
        if asset not in ("gpu", "node"):
            continue
        stamp = record["EndTimestamp"][:10]
        row = {
            **defaults,
            "provider": record.get("Provider") or provider,
            "currency": record.get("Currency") or currency,
            "source": record.get("Source") or source or "OpenCost price sheet",
            "region": record["Region"],
            "price_per_hour": record["MarketPriceHourly"],
            "fetched_on": stamp,
            "valid_from": stamp,
        }
        if asset == "gpu":
            row.update(accelerator=record["InstanceType"] or record["InstanceID"], accelerator_count="1")
        else:
            if not record.get("AcceleratorType"):
                errors.append(
                    f"line {line}, column AcceleratorType: a node row needs its accelerator type and count"
                )
                continue
            row.update(
                accelerator=record["AcceleratorType"],
                accelerator_count=record.get("AcceleratorCount") or "1",
                instance_type=record["InstanceType"],
            )
        rows.append(row)
        lines.append(line)
    if errors:
        raise PriceImportError(errors)
    if not rows:
        raise PriceImportError(["line 2: no gpu or node rows in the sheet"])
    return pricebook_rows_import(rows=rows, lines=lines, columns=_OPENCOST_COLUMNS, today=today)


def columns_key(columns: Mapping[str, str], header: str) -> str:
    """Canonical field name of a CSV header (the reverse of ``columns``)."""
    for key, name in columns.items():
        if name == header:
            return key
    return header.lower()


def price_row_validate(
    *, data: Mapping[str, Any], today: date, exclude_id: Any = None
) -> list[tuple[str, str]]:
    """(field, message) pairs for one row as the admin form holds it (empty when valid)."""
    _, _, fields = _check(rows=[dict(data)], lines=[1], columns={}, today=today, exclude_id=exclude_id)
    return fields


def price_row_saved(
    *, row: AcceleratorPrice, today: date, old_window: tuple[date, date | None] | None = None
) -> int:
    """After an admin save: recompute the costed days the row covers (and covered before)."""
    days = set(cost_days_for_price_window(valid_from=row.valid_from, valid_to=row.valid_to, today=today))
    if old_window is not None:
        days.update(cost_days_for_price_window(valid_from=old_window[0], valid_to=old_window[1], today=today))
    cost_recompute_enqueue(days=days)
    return len(days)
