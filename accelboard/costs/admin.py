from __future__ import annotations

from django.contrib import admin

from .models import AcceleratorPrice, ElectricityPrice


@admin.register(AcceleratorPrice)
class AcceleratorPriceAdmin(admin.ModelAdmin):
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
    ]
    list_filter = ["provider", "pricing_model", "accelerator_type"]
    search_fields = ["instance_type", "region", "source"]


@admin.register(ElectricityPrice)
class ElectricityPriceAdmin(admin.ModelAdmin):
    list_display = ["site", "price_per_kwh", "currency", "pue", "carbon_g_per_kwh", "valid_from", "valid_to"]
    list_filter = ["site"]
