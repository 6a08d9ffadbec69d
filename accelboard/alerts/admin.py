from __future__ import annotations

from django.contrib import admin

from .models import Alert, AlertEvent, AlertMetric, DetectionSetting, ExpectedChange, ServingSlo


class AlertMetricInline(admin.TabularInline):
    """The metrics one change moved (the headline is the alert's own series)."""

    model = AlertMetric
    extra = 0
    raw_id_fields = ["series"]
    readonly_fields = ["severity", "pct_change", "before_mean", "after_mean", "reverted_at_run"]
    fields = ["series", *readonly_fields]


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ["opened_at", "title", "kind", "severity", "state", "team", "pct_change"]
    list_filter = ["kind", "severity", "state", "team"]
    search_fields = ["title", "dedupe_key"]
    list_select_related = ["team"]
    inlines = [AlertMetricInline]


@admin.register(AlertEvent)
class AlertEventAdmin(admin.ModelAdmin):
    list_display = ["at", "alert", "from_state", "to_state", "actor", "reason"]
    list_filter = ["to_state", "reason"]
    list_select_related = ["alert", "actor"]


@admin.register(ExpectedChange)
class ExpectedChangeAdmin(admin.ModelAdmin):
    list_display = ["created_at", "series", "run", "scope", "created_by"]
    list_select_related = ["series", "run", "created_by"]


@admin.register(DetectionSetting)
class DetectionSettingAdmin(admin.ModelAdmin):
    list_display = ["team", "metric", "min_effect", "updated_at"]


@admin.register(ServingSlo)
class ServingSloAdmin(admin.ModelAdmin):
    list_display = ["team", "model", "variant", "p99_latency_ms", "min_tokens_per_s"]
