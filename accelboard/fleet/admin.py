from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import (
    Accelerator,
    AcceleratorType,
    GpuAttribution,
    Host,
    Site,
    TelemetryRollup,
    TelemetrySample,
    Workload,
)


@admin.register(AcceleratorType)
class AcceleratorTypeAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "vendor",
        "product",
        "form_factor",
        "architecture",
        "memory_bytes",
        "board_power_w",
    ]
    list_filter = ["vendor", "form_factor"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin):
    list_display = ["name", "provider", "region"]
    list_filter = ["provider"]


class AcceleratorInline(admin.TabularInline):
    model = Accelerator
    extra = 0
    fields = ["index", "uuid", "name", "accelerator_type", "memory_bytes", "power_limit_w", "last_seen_at"]
    readonly_fields = ["last_seen_at"]


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = [
        "hostname",
        "team",
        "site",
        "provider",
        "region",
        "instance_type",
        "simulated",
        "last_seen_at",
    ]
    list_filter = ["provider", "team", "simulated"]
    search_fields = ["hostname", "instance_type"]
    inlines = [AcceleratorInline]


@admin.register(Accelerator)
class AcceleratorAdmin(admin.ModelAdmin):
    list_display = ["uuid", "host", "index", "name", "accelerator_type", "power_limit_w", "last_seen_at"]
    list_filter = ["accelerator_type", "host__team"]
    search_fields = ["uuid", "serial", "host__hostname"]
    list_select_related = ["host", "accelerator_type"]


@admin.register(TelemetrySample)
class TelemetrySampleAdmin(admin.ModelAdmin):
    """Read-only: raw samples arrive through the API only."""

    list_display = ["time", "accelerator_id", "power_w", "energy_mj", "gpu_util", "temperature_c"]
    show_full_result_count = False
    list_per_page = 100

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(TelemetryRollup)
class TelemetryRollupAdmin(admin.ModelAdmin):
    list_display = ["bucket", "width_s", "accelerator", "samples", "power_avg_w", "energy_j", "gpu_util_avg"]
    list_filter = ["width_s"]
    list_select_related = ["accelerator__host"]
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class _ReadOnly(admin.ModelAdmin):
    """Rows that arrive through the API only (telemetry ingest), shown, never edited here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Workload)
class WorkloadAdmin(_ReadOnly):
    list_display = ["kind", "namespace", "name", "uid", "team", "account", "user", "last_seen_at"]
    list_filter = ["kind", "team"]
    search_fields = ["uid", "name", "namespace", "account", "user"]
    list_select_related = ["team"]


@admin.register(GpuAttribution)
class GpuAttributionAdmin(_ReadOnly):
    """Who held which GPU when (docs/attribution.md); partitioned like raw telemetry."""

    list_display = ["start", "end", "accelerator", "workload", "share", "basis", "sm_util"]
    list_select_related = ["accelerator__host", "workload"]
    show_full_result_count = False
    list_per_page = 100
