from __future__ import annotations

from django.contrib import admin

from .models import Alert


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ["opened_at", "title", "kind", "severity", "state", "team", "pct_change"]
    list_filter = ["kind", "severity", "state", "team"]
    search_fields = ["title", "dedupe_key"]
    list_select_related = ["team"]
