from __future__ import annotations

from django.contrib import admin

from .models import BenchmarkRun, MetricValue, Model, ModelVariant, Series, Workload


class VariantInline(admin.TabularInline):
    model = ModelVariant
    extra = 0
    fields = ["name", "precision", "quantization_method", "calibration_data"]


@admin.register(Model)
class ModelAdmin(admin.ModelAdmin):
    list_display = ["name", "family", "task", "parameters_b", "reference_variant", "drift_budget"]
    search_fields = ["name", "family"]
    inlines = [VariantInline]


@admin.register(ModelVariant)
class ModelVariantAdmin(admin.ModelAdmin):
    list_display = ["model", "name", "precision", "quantization_method"]
    list_filter = ["precision", "quantization_method"]
    search_fields = ["model__name", "name"]
    list_select_related = ["model"]


@admin.register(Workload)
class WorkloadAdmin(admin.ModelAdmin):
    list_display = ["__str__", "team", "scenario", "batch_size", "concurrency", "framework"]
    list_filter = ["team", "scenario", "framework"]
    list_select_related = ["team", "variant__model"]
    readonly_fields = ["identity"]


class MetricInline(admin.TabularInline):
    model = MetricValue
    extra = 0
    fields = ["name", "value", "unit", "direction", "raw_value", "raw_unit", "source"]
    readonly_fields = fields


@admin.register(BenchmarkRun)
class BenchmarkRunAdmin(admin.ModelAdmin):
    list_display = [
        "started_at",
        "workload",
        "accelerator_type",
        "accelerator_count",
        "git_commit",
        "branch",
        "team",
    ]
    list_filter = ["team", "accelerator_type", "uploaded_via", "source_format", "valid"]
    search_fields = ["git_commit", "branch", "uuid"]
    list_select_related = ["workload__variant__model", "accelerator_type", "team"]
    date_hierarchy = "started_at"
    inlines = [MetricInline]


@admin.register(Series)
class SeriesAdmin(admin.ModelAdmin):
    list_display = ["metric", "workload", "accelerator_type", "accelerator_count", "direction", "last_value"]
    list_filter = ["metric", "accelerator_type", "team"]
    list_select_related = ["workload__variant__model", "accelerator_type"]


@admin.register(MetricValue)
class MetricValueAdmin(admin.ModelAdmin):
    list_display = ["measured_at", "name", "value", "unit", "run"]
    list_filter = ["name"]
    list_select_related = ["run"]
    show_full_result_count = False
