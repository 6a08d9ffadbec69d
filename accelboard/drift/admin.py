"""Admin of the drift app: budgets are edited here; agreement rows are read-only evidence."""

from __future__ import annotations

from django.contrib import admin

from .models import DriftBudget, ProductionAgreement


@admin.register(DriftBudget)
class DriftBudgetAdmin(admin.ModelAdmin):
    list_display = ["model", "task", "budget", "note"]
    list_filter = ["model"]


@admin.register(ProductionAgreement)
class ProductionAgreementAdmin(admin.ModelAdmin):
    list_display = ["variant", "team", "day", "task", "agreement_rate", "kl_divergence", "samples"]
    list_filter = ["team", "task"]
    readonly_fields = [f.name for f in ProductionAgreement._meta.fields]
