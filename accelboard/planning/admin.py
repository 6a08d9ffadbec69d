from __future__ import annotations

from django.contrib import admin

from .models import PlanScenario


@admin.register(PlanScenario)
class PlanScenarioAdmin(admin.ModelAdmin):
    list_display = ("name", "model", "team", "created_at", "planned_monthly", "currency")
    list_filter = ("team",)
    search_fields = ("name", "model__name")
    readonly_fields = ("query", "summary")
