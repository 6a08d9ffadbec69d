from __future__ import annotations

from django.contrib import admin

from .models import CanaryCheck


@admin.register(CanaryCheck)
class CanaryCheckAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "model", "window_minutes", "alpha", "active")
    list_filter = ("active", "team")
