"""Admin for the price book. Price rows are validated like an import (against the whole book)
and a save enqueues the recompute of the already-costed days the row covers."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils import timezone

from .models import AcceleratorPrice, CarbonIntensity, CostDaily, ElectricityPrice, ExchangeRate, RunCost
from .pricebook import ISO_CURRENCIES
from .pricebook_services import price_row_saved, price_row_validate
from .services import cost_days_for_price_window
from .tasks import cost_recompute_enqueue


class AcceleratorPriceForm(forms.ModelForm):
    class Meta:
        model = AcceleratorPrice
        fields = [
            "accelerator_type",
            "accelerator_count",
            "provider",
            "region",
            "instance_type",
            "pricing_model",
            "price_per_hour",
            "currency",
            "capex",
            "lifetime_hours",
            "source",
            "fetched_on",
            "valid_from",
            "valid_to",
        ]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        accel = data.get("accelerator_type")
        row = {
            "provider": data.get("provider"),
            "region": data.get("region") or "",
            "instance_type": data.get("instance_type") or "",
            "accelerator": accel.slug if accel else "",
            "accelerator_count": data.get("accelerator_count"),
            "pricing_model": data.get("pricing_model"),
            "price_per_hour": data.get("price_per_hour"),
            "currency": data.get("currency"),
            "source": data.get("source"),
            "fetched_on": data.get("fetched_on"),
            "valid_from": data.get("valid_from"),
            "valid_to": data.get("valid_to"),
        }
        problems = price_row_validate(data=row, today=timezone.now().date(), exclude_id=self.instance.pk)
        for field, message in problems:
            target = {"accelerator": "accelerator_type"}.get(field, field)
            self.add_error(target if target in self.fields else None, message)
        return data


def _currency_ok(form: forms.ModelForm, field: str) -> None:
    value = (form.cleaned_data.get(field) or "").upper()
    if value and value not in ISO_CURRENCIES:
        form.add_error(field, f"{value!r} is not an ISO 4217 currency code")


class ElectricityPriceForm(forms.ModelForm):
    class Meta:
        model = ElectricityPrice
        fields = [
            "site",
            "price_per_kwh",
            "currency",
            "pue",
            "carbon_g_per_kwh",
            "source",
            "fetched_on",
            "valid_from",
            "valid_to",
        ]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        _currency_ok(self, "currency")
        if data.get("price_per_kwh") is not None and data["price_per_kwh"] <= 0:
            self.add_error("price_per_kwh", "must be positive")
        if data.get("pue") is not None and data["pue"] < 1:
            self.add_error("pue", "a PUE is at least 1")
        return data


class ExchangeRateForm(forms.ModelForm):
    class Meta:
        model = ExchangeRate
        fields = ["from_currency", "to_currency", "rate", "source", "fetched_on", "valid_from", "valid_to"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        _currency_ok(self, "from_currency")
        _currency_ok(self, "to_currency")
        if data.get("rate") is not None and data["rate"] <= 0:
            self.add_error("rate", "must be positive")
        return data


class _RecomputeOnSave(admin.ModelAdmin):
    def save_model(self, request: HttpRequest, obj: Any, form: forms.ModelForm, change: bool) -> None:
        old = None
        if change and obj.pk:
            before = type(obj).objects.filter(pk=obj.pk).values("valid_from", "valid_to").first()
            old = (before["valid_from"], before["valid_to"]) if before else None
        super().save_model(request, obj, form, change)
        today = timezone.now().date()
        if isinstance(obj, AcceleratorPrice):
            price_row_saved(row=obj, today=today, old_window=old)
            return
        days = set(cost_days_for_price_window(valid_from=obj.valid_from, valid_to=obj.valid_to, today=today))
        if old:
            days.update(cost_days_for_price_window(valid_from=old[0], valid_to=old[1], today=today))
        cost_recompute_enqueue(days=days)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        # The days it priced lose their price (SET_NULL): re-cost them with what the book has left.
        days = cost_days_for_price_window(
            valid_from=obj.valid_from, valid_to=obj.valid_to, today=timezone.now().date()
        )
        super().delete_model(request, obj)
        cost_recompute_enqueue(days=days)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        today = timezone.now().date()
        days = {
            d
            for obj in queryset
            for d in cost_days_for_price_window(valid_from=obj.valid_from, valid_to=obj.valid_to, today=today)
        }
        super().delete_queryset(request, queryset)
        cost_recompute_enqueue(days=days)


@admin.register(AcceleratorPrice)
class AcceleratorPriceAdmin(_RecomputeOnSave):
    form = AcceleratorPriceForm
    list_display = [
        "accelerator_type",
        "accelerator_count",
        "provider",
        "region",
        "instance_type",
        "pricing_model",
        "price_per_hour",
        "currency",
        "valid_from",
        "valid_to",
        "fetched_on",
        "stale",
    ]
    list_filter = ["provider", "pricing_model", "accelerator_type"]
    search_fields = ["instance_type", "region", "source"]

    @admin.display(boolean=True, description="Stale (> 30 days)")
    def stale(self, obj: AcceleratorPrice) -> bool:
        return obj.stale


@admin.register(ElectricityPrice)
class ElectricityPriceAdmin(_RecomputeOnSave):
    form = ElectricityPriceForm
    list_display = [
        "site",
        "price_per_kwh",
        "currency",
        "pue",
        "carbon_g_per_kwh",
        "valid_from",
        "valid_to",
        "fetched_on",
    ]
    list_filter = ["site"]


@admin.register(ExchangeRate)
class ExchangeRateAdmin(_RecomputeOnSave):
    form = ExchangeRateForm
    list_display = ["from_currency", "to_currency", "rate", "valid_from", "valid_to", "fetched_on", "source"]


@admin.register(CarbonIntensity)
class CarbonIntensityAdmin(_RecomputeOnSave):
    list_display = [
        "provider",
        "region",
        "g_per_kwh",
        "pue",
        "valid_from",
        "valid_to",
        "fetched_on",
        "source",
    ]


@admin.register(CostDaily)
class CostDailyAdmin(admin.ModelAdmin):
    list_display = [
        "day",
        "host",
        "team",
        "accelerator_type",
        "alloc_hours",
        "total_cost",
        "currency",
        "price_stale",
    ]
    list_filter = ["day", "provider", "price_stale"]
    raw_id_fields = ["host", "accelerator_price", "electricity_price", "carbon_intensity"]


@admin.register(RunCost)
class RunCostAdmin(admin.ModelAdmin):
    list_display = ["run", "unit", "energy_source", "total_cost_per_1m", "currency", "price_stale"]
    raw_id_fields = ["run", "accelerator_price", "electricity_price", "carbon_intensity"]
